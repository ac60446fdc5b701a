/* Pass: steps (an_pass_steps.c, an_steps_detect.c): iterations from the
 * runner's marks, or the training loop detected in a trace without them. */
#ifndef TBANALYZE_AN_PASS_STEPS_H
#define TBANALYZE_AN_PASS_STEPS_H

#include "an_pass.h"

/* steps: marked iterations, and what step detection keeps on a first pass
 * over a trace without marks (an_steps_detect.c reads it). */
/* 1 Mi items of each kind (32 MiB): a trace with more detects no steps. */
#define STEP_ITEMS_MAX (1u << 20)
#define STEP_ITEM_CP_MAX (1ull << 32)
/* A launch, copy or memset, consecutive ones from one call path and thread
 * as one (gpu_ns: the GPU time of their records, added as they are joined);
 * or a Python span (gpu_ns 0). */
struct step_item {
	uint64_t ts, end, gpu_ns;
	uint32_t cp, tid;
};
struct synth_mark;
struct steps_state {
	struct vec work;    /* struct step_item, time order */
	struct vec spans;   /* struct step_item, end order */
	struct vec imports; /* struct an_step: import spans (not the program's own work) */
	/* The host's other calls (syncs, allocations, the rest but launches,
	 * copies and memsets), consecutive ones from one call path and thread
	 * with no work between them as one, time order: not work, but a step's too (an .item()'s sync at
	 * the end of a step); only the last step's end reads them. */
	struct vec calls;   /* struct step_item */
	uint32_t work_cp, work_tid; /* the latest work item's */
	size_t work_room;           /* items work can take in place: its room, at most STEP_ITEMS_MAX */
	uint32_t call_cp, call_tid; /* the latest call item's */
	size_t call_work_n; /* work.n when it was made: work since ends it */
	int calls_full;     /* more calls than kept: the later ones are not */
	int collect_on;     /* a first pass over a trace without marks (so far) */
	int collect_full;   /* more items than kept: no detection */
	/* Marked iterations: length and phase of each (time per step). */
	struct vec iters; /* struct iter_len */
	/* Synthetic marks for detected steps (second pass), in time order. */
	struct synth_mark *synth;
	size_t n_synth, synth_at;
	int in_synth;
	uint64_t warmup_value; /* WARMUP_END's value */
};
/* ------------------------------------------------------------ steps */
uint32_t step_item_new(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp);
/* A launch, copy or memset that the runtime accepted: the work whose lines
 * show the training loop (a trace without marks, first pass).  Returns the
 * index + 1 of its item (the GPU side adds its time there), 0: none. */
HOT_FN uint32_t steps_work(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	if (!ss->collect_on)
		return 0;
	if (ss->work.n && cp == ss->work_cp && tid == ss->work_tid) {
		struct step_item *w = VEC_AT(&ss->work, struct step_item, ss->work.n - 1);
		if (end > w->end)
			w->end = end;
		return (uint32_t)ss->work.n;
	}
	/* A new item written in place while the vector has room (most
	 * launches come from another line than the one before). */
	struct vec *v = &ss->work;
	if (__builtin_expect(v->n < ss->work_room && cp < STEP_ITEM_CP_MAX, 1)) {
		ss->work_cp = (uint32_t)cp;
		ss->work_tid = tid;
		struct step_item *w = (struct step_item *)v->data + v->n;
		w->ts = ts;
		w->end = end;
		w->gpu_ns = 0;
		w->cp = (uint32_t)cp;
		w->tid = tid;
		return (uint32_t)++v->n;
	}
	return step_item_new(ss, tid, ts, end, cp);
}
void step_call_new(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp);
/* A host call that is not work (a sync, an allocation, another API call):
 * the steps' ends read them (an_steps_detect.c). */
HOT_FN void steps_call(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	if (!ss->collect_on || ss->calls_full)
		return;
	if (ss->calls.n && cp == ss->call_cp && tid == ss->call_tid && ss->work.n == ss->call_work_n) {
		struct step_item *w = VEC_AT(&ss->calls, struct step_item, ss->calls.n - 1);
		if (end > w->end)
			w->end = end;
		return;
	}
	step_call_new(ss, tid, ts, end, cp);
}
/* A joined GPU record's time, to the item of the call that made it. */
HOT_FN void steps_gpu(struct steps_state *ss, uint32_t item, uint64_t ns)
{
	if (__builtin_expect(item != 0, 0) && item <= ss->work.n)
		VEC_AT(&ss->work, struct step_item, item - 1)->gpu_ns += ns;
}
/* A marker (the runner's, or one of the detected steps). */

/* Launches, copies and memsets the runtime accepted: work. */
HOT_FN void steps_on_work(struct analysis *a, struct an_call_ev *e)
{
	if (!e->failed)
		e->item = steps_work(an_pass_state(a, steps), e->r->tid, e->ts, e->end, e->r->u.call.callpath);
}

HOT_FN void steps_on_call(struct analysis *a, struct an_call_ev *e)
{
	steps_call(an_pass_state(a, steps), e->r->tid, e->ts, e->end, e->r->u.call.callpath);
}

HOT_FN void steps_on_gpu(struct analysis *a, const struct an_gpu_ev *e)
{
	if (e->joined)
		steps_gpu(an_pass_state(a, steps), e->api->item, e->e - e->s);
}

/* A marker (the runner's, or one of the detected steps). */
void steps_marker(struct analysis *a, const struct tbp_record *r);
/* The synthetic marks due by time t, before the record at t. */
void synth_emit(struct analysis *a, uint64_t t);
/* Step detection (an_steps_detect.c): the training loop's steps from the
 * items kept by the first pass, into a->step_ivs; a->steps.source set when
 * found, else a->steps.none says why. */
void steps_detect(struct analysis *a);
int steps_init(struct analysis *a);
void steps_on_span(struct analysis *a, struct an_span_ev *e);
void steps_flush(struct analysis *a);
int steps_finish(struct analysis *a);
void steps_free(struct analysis *a);

static const struct an_pass_ops an_pass_steps = {
	.name = "steps",
	.state_size = sizeof(struct steps_state),
	.detect = 1,
	.init = steps_init,
	.on_launch = steps_on_work,
	.on_memcpy = steps_on_work,
	.on_memset = steps_on_work,
	.on_sync = steps_on_call,
	.on_malloc = steps_on_call,
	.on_free = steps_on_call,
	.on_api = steps_on_call,
	.on_kernel = steps_on_gpu,
	.on_gpu_memcpy = steps_on_gpu,
	.on_gpu_memset = steps_on_gpu,
	.on_span = steps_on_span,
	.on_marker = steps_marker,
	.on_due = synth_emit,
	.flush = steps_flush,
	.finish = steps_finish,
	.free = steps_free,
};

#endif
