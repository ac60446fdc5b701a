/* Pass: steps (an_pass_steps.c, an_steps_detect.c): iterations from the
 * runner's marks, or the training loop detected in a trace without them. */
#ifndef TBANALYZE_AN_PASS_STEPS_H
#define TBANALYZE_AN_PASS_STEPS_H

#include "an_pass.h"

/* steps: marked iterations, and what step detection keeps on a first pass
 * over a trace without marks (an_steps_detect.c reads it). */
/* 1 Mi items of each kind: a trace with more detects no steps. */
#define STEP_ITEMS_MAX (1u << 20)
#define STEP_ITEM_CP_MAX (1ull << 32)
/* A launch, copy or memset, consecutive ones from one call path and thread
 * as one (gpu_ns: the GPU time of their records, added as they are joined);
 * or a Python span (gpu_ns 0). */
struct step_item {
	uint64_t ts, end, gpu_ns;
	uint32_t cp, tid;
};
/* A work item as the steps pass keeps it (steps_state.work): 16 bytes, not
 * a step_item's 32 (~440 k of them on a 1 M-record trace, pages the kernel
 * zeroes during the read).  Its times relative to the item before's, in 32
 * bits where they fit, else in the wide values (steps_state.work_far: per
 * item in item order, its tid when STEP_TID_NEW, its ts when the distance
 * is STEP_DTS_FAR, its end when dur is STEP_DUR_FAR), and the GPU time's
 * sum in steps_state.work_gpu_far when gpu is STEP_GPU_FAR (a thread that
 * launched 4.3 s of GPU work from one line with no other line between).
 * Read back with step_work_next (an_steps_detect.c). */
struct step_work {
	uint32_t dts; /* ts - the item before's ts (the first's: from 0), | STEP_TID_NEW: another tid */
	uint32_t dur; /* end - ts */
	uint32_t gpu; /* its records' GPU ns */
	uint32_t cp;
};
#define STEP_TID_NEW (1u << 31)
#define STEP_DTS_FAR (STEP_TID_NEW - 1)
#define STEP_DUR_FAR UINT32_MAX
#define STEP_GPU_FAR UINT32_MAX
struct synth_mark;
struct steps_state {
	struct vec work;    /* struct step_work, time order */
	struct vec work_far;          /* uint64_t: the work's wide values (struct step_work) */
	struct u64map work_gpu_far;   /* work item index -> its GPU time, of those at STEP_GPU_FAR */
	uint64_t work_ts, work_end;   /* the latest work item's, in full */
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
void step_work_end_far(struct steps_state *ss, uint64_t end);
/* A launch, copy or memset that the runtime accepted: the work whose lines
 * show the training loop (a trace without marks, first pass).  Returns the
 * index + 1 of its item (the GPU side adds its time there), 0: none. */
HOT_FN uint32_t steps_work(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	if (!ss->collect_on)
		return 0;
	struct vec *v = &ss->work;
	int same_tid = tid == ss->work_tid;
	if (same_tid && cp == ss->work_cp && v->n) {
		if (end > ss->work_end) {
			uint64_t dur = end - ss->work_ts;
			ss->work_end = end;
			if (__builtin_expect(dur < STEP_DUR_FAR, 1))
				((struct step_work *)v->data)[v->n - 1].dur = (uint32_t)dur;
			else
				step_work_end_far(ss, end);
		}
		return (uint32_t)v->n;
	}
	/* A new item written in place while the vector has room and its
	 * values fit (most launches come from another line than the one
	 * before, on the thread of the one before, microseconds later): the
	 * distance and the length under 2^30 ns, the call path under 2^32, in
	 * one test; the rest is step_item_new's. */
	uint64_t dts = ts - ss->work_ts, dur = end - ts;
	if (__builtin_expect(same_tid && v->n < ss->work_room && !((dts | dur) >> 30 | cp >> 32), 1)) {
		ss->work_cp = (uint32_t)cp;
		ss->work_ts = ts;
		ss->work_end = end;
		struct step_work *w = (struct step_work *)v->data + v->n;
		w->dts = (uint32_t)dts;
		w->dur = (uint32_t)dur;
		w->gpu = 0;
		w->cp = (uint32_t)cp;
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
void step_work_gpu_far(struct steps_state *ss, uint32_t item, uint64_t ns);
/* A joined GPU record's time, to the item of the call that made it. */
HOT_FN void steps_gpu(struct steps_state *ss, uint32_t item, uint64_t ns)
{
	/* (item 0 wraps past any work.n, at most STEP_ITEMS_MAX: one comparison) */
	if (__builtin_expect((uint32_t)(item - 1) < ss->work.n, 0)) {
		struct step_work *w = (struct step_work *)ss->work.data + (item - 1);
		uint64_t sum = w->gpu + ns;
		if (__builtin_expect(sum < STEP_GPU_FAR, 1))
			w->gpu = (uint32_t)sum;
		else
			step_work_gpu_far(ss, item, ns);
	}
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

/* The steps pass's work items (struct step_work) read back in order, each
 * in full: its time, end (no earlier than its time: as detection takes
 * it), GPU time, call path and thread. */
struct work_reader {
	const struct step_work *w;
	const uint64_t *far;          /* the next wide value */
	const struct u64map *gpu_far;
	const struct step_work *w0;
	uint64_t ts;                  /* the item before's */
	uint32_t tid;
};

static inline void work_reader_init(struct work_reader *r, const struct steps_state *ss)
{
	*r = (struct work_reader){.w = ss->work.data, .w0 = ss->work.data, .far = ss->work_far.data,
				  .gpu_far = &ss->work_gpu_far};
}

static inline __attribute__((always_inline)) void work_next(struct work_reader *r, struct step_item *out)
{
	const struct step_work *w = r->w++;
	uint32_t d = w->dts;
	if (__builtin_expect(d >= STEP_DTS_FAR, 0)) {
		if (d & STEP_TID_NEW)
			r->tid = (uint32_t)*r->far++;
		d &= ~STEP_TID_NEW;
		r->ts = d == STEP_DTS_FAR ? *r->far++ : r->ts + d;
	} else {
		r->ts += d;
	}
	out->ts = r->ts;
	if (__builtin_expect(w->dur == STEP_DUR_FAR, 0)) {
		uint64_t end = *r->far++;
		out->end = end < r->ts ? r->ts : end;
	} else {
		out->end = r->ts + w->dur;
	}
	out->gpu_ns = w->gpu;
	if (__builtin_expect(w->gpu == STEP_GPU_FAR, 0)) {
		const uint64_t *g = u64map_get(r->gpu_far, (uint64_t)(w - r->w0));
		out->gpu_ns = g ? *g : STEP_GPU_FAR;
	}
	out->cp = w->cp;
	out->tid = r->tid;
}

/* All of the work's items in full, in order, into out (a new vector of
 * struct step_item); -1: out of memory. */
int steps_work_items(const struct steps_state *ss, struct vec *out);

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
