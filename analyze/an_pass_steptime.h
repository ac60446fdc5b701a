/* Pass: time per step (an_pass_steptime.c), and the HTML timeline's ring of
 * GPU records. */
#ifndef TBANALYZE_AN_PASS_STEPTIME_H
#define TBANALYZE_AN_PASS_STEPTIME_H

#include "an_pass.h"

/* steptime: the unions' measures summed over the devices at the open
 * step's begin. */
struct steptime_state {
	int open;
	uint64_t begin, busy0, dm0;
	struct vec pending; /* struct an_step_time: gap pieces of the open step */
	size_t first_hint;  /* steptime_idle's last first step ending after a piece's start */
	/* The window [whole_lo, whole_hi] a piece [s, e) lies inside when it
	 * is wholly in step whole_ix and nowhere else (steptime_idle's whole
	 * case), found by the last piece that was: pieces come nearly in time
	 * order, hundreds to a step.  Valid while step_times holds whole_n
	 * steps and no step begins or ends. */
	size_t whole_ix, whole_n;
	uint64_t whole_lo, whole_hi;
};
/* A GPU record into the HTML timeline's ring (when kept). */
HOT_FN void timeline_keep(struct analysis *a, unsigned kind, const struct tbp_gpu_kernel *g, uint64_t s, uint64_t e,
			  uint64_t callpath, unsigned copy_kind)
{
	if (__builtin_expect(!a->tl, 1))
		return;
	struct an_tl_event *t = &a->tl[a->tl_seen++ % AN_TL_EVENTS];
	t->start = s;
	t->end = e;
	t->name = kind == TBP_K_GPU_KERNEL ? g->name : 0;
	t->callpath = callpath;
	t->device = (uint32_t)g->device;
	t->stream = (uint32_t)g->stream;
	t->kind = kind == TBP_K_GPU_KERNEL ? AN_TL_KERNEL : kind == TBP_K_GPU_MEMCPY ? AN_TL_COPY : AN_TL_SET;
	t->copy_kind = (uint8_t)copy_kind;
}


HOT_FN void steptime_on_kernel(struct analysis *a, const struct an_gpu_ev *e)
{
	timeline_keep(a, TBP_K_GPU_KERNEL, &e->r->u.gpu_kernel, e->s, e->e, e->api->callpath, 0);
}

HOT_FN void steptime_on_gpu_memcpy(struct analysis *a, const struct an_gpu_ev *e)
{
	timeline_keep(a, TBP_K_GPU_MEMCPY, &e->r->u.gpu_kernel, e->s, e->e, e->api->callpath,
		      e->r->u.gpu_memcpy.copy_kind);
}

HOT_FN void steptime_on_gpu_memset(struct analysis *a, const struct an_gpu_ev *e)
{
	timeline_keep(a, TBP_K_GPU_MEMSET, &e->r->u.gpu_kernel, e->s, e->e, e->api->callpath, 0);
}

/* A step begins, ends (in phase), a gap piece of the device's idle [s, e) is
 * explained by cause (by_cause: its split, AN_CAUSE_N entries). */
void steptime_begin(struct analysis *a, uint64_t t);
void steptime_end(struct analysis *a, uint64_t t, int phase);
void steptime_idle(struct analysis *a, uint64_t s, uint64_t e, const uint64_t *by_cause);
int steptime_init(struct analysis *a);
int steptime_finish(struct analysis *a);
void steptime_free(struct analysis *a);

static const struct an_pass_ops an_pass_steptime = {
	.name = "steptime",
	.state_size = sizeof(struct steptime_state),
	.init = steptime_init,
	.on_kernel = steptime_on_kernel,
	.on_gpu_memcpy = steptime_on_gpu_memcpy,
	.on_gpu_memset = steptime_on_gpu_memset,
	.step_begin = steptime_begin,
	.step_end = steptime_end,
	.idle_explained = steptime_idle,
	.finish = steptime_finish,
	.free = steptime_free,
};

#endif
