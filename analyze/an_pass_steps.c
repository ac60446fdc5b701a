/*
 * Pass: steps.  Iterations from the runner's marks (the window, the phases
 * every pass files its occurrences under), or, in a trace without marks,
 * the training loop: a first pass keeps the work (launches, copies,
 * memsets, with the GPU time of their records) and the Python spans in time
 * order, step detection (an_steps_detect.c) finds the loop's steps in them,
 * and a second pass marks those steps as the runner would (an_run,
 * an_core.c); then the time per step.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_steps.h"

struct iter_len {
	uint64_t ns;
	int phase;
};
struct synth_mark {
	uint64_t ts, kind;
};

static void steps_collect_stop(struct steps_state *ss)
{
	ss->collect_on = 0;
	vec_free(&ss->work);
	vec_free(&ss->work_far);
	u64map_free(&ss->work_gpu_far);
	ss->work_room = 0;
	vec_free(&ss->spans);
	vec_free(&ss->imports);
	vec_free(&ss->calls);
}

/* An item kept in v; -1 past the caps (or out of memory).  Written in
 * place while v has room (vec_push, a call and a memset, only to grow it:
 * one item per launch of another line than the last). */
static inline int item_keep(struct vec *v, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	struct step_item *w;
	if (cp >= STEP_ITEM_CP_MAX || v->n >= STEP_ITEMS_MAX)
		return -1;
	if (v->n < v->cap)
		w = (struct step_item *)v->data + v->n++;
	else if (!(w = vec_push(v)))
		return -1;
	*w = (struct step_item){.ts = ts, .end = end, .cp = (uint32_t)cp, .tid = tid};
	return 0;
}

/* Room for n items in v, doubled as vec_push does it; -1: out of memory. */
static int vec_room(struct vec *v, size_t n)
{
	size_t twice = v->cap ? 2 * v->cap : 16;
	return n <= v->cap ? 0 : vec_reserve(v, n > twice ? n : twice);
}

/* The work past its caps, or out of memory: no detection. */
static void steps_work_full(struct steps_state *ss)
{
	ss->collect_full = 1;
	steps_collect_stop(ss);
}

/* A work item from another call path or thread than the last one's, the
 * vector full or a value past its 32 bits (out of line: most launches
 * continue an item, most others are written in place). */
__attribute__((noinline)) uint32_t step_item_new(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end,
						 uint64_t cp)
{
	struct vec *v = &ss->work;
	ss->work_cp = (uint32_t)cp;
	if (cp >= STEP_ITEM_CP_MAX || v->n >= STEP_ITEMS_MAX) {
		steps_work_full(ss);
		return 0;
	}
	/* (an end before its time is its time, as detection takes it: an
	 * item's dur then only grows, and one at STEP_DUR_FAR stays there) */
	if (end < ts)
		end = ts;
	uint64_t far[3];
	size_t nfar = 0;
	uint32_t flag = 0;
	if (tid != ss->work_tid) {
		flag = STEP_TID_NEW;
		far[nfar++] = tid;
	}
	uint64_t dts = ts - ss->work_ts, dur = end - ts;
	if (dts >= STEP_DTS_FAR) {
		dts = STEP_DTS_FAR;
		far[nfar++] = ts;
	}
	if (dur >= STEP_DUR_FAR) {
		dur = STEP_DUR_FAR;
		far[nfar++] = end;
	}
	if (vec_room(&ss->work_far, ss->work_far.n + nfar) || vec_room(v, v->n + 1)) {
		steps_work_full(ss);
		return 0;
	}
	for (size_t k = 0; k < nfar; k++) /* (no memcpy: work_far has no data before its first) */
		((uint64_t *)ss->work_far.data)[ss->work_far.n++] = far[k];
	((struct step_work *)v->data)[v->n++] =
		(struct step_work){.dts = (uint32_t)dts | flag, .dur = (uint32_t)dur, .cp = (uint32_t)cp};
	ss->work_tid = tid;
	ss->work_ts = ts;
	ss->work_end = end;
	/* (one bound for steps_work's test: the vector may have grown) */
	ss->work_room = v->cap < STEP_ITEMS_MAX ? v->cap : STEP_ITEMS_MAX;
	return (uint32_t)v->n;
}

/* The latest work item's end, past 32 bits from its time: the last of
 * work_far (its last wide value). */
__attribute__((noinline)) void step_work_end_far(struct steps_state *ss, uint64_t end)
{
	struct step_work *w = (struct step_work *)ss->work.data + ss->work.n - 1;
	uint64_t *f;
	if (w->dur == STEP_DUR_FAR)
		f = (uint64_t *)ss->work_far.data + ss->work_far.n - 1;
	else if (!(f = vec_push(&ss->work_far))) {
		steps_work_full(ss);
		return;
	}
	*f = end;
	w->dur = STEP_DUR_FAR;
}

/* A work item's GPU time past 32 bits: its sum in work_gpu_far. */
__attribute__((noinline)) void step_work_gpu_far(struct steps_state *ss, uint32_t item, uint64_t ns)
{
	struct step_work *w = (struct step_work *)ss->work.data + (item - 1);
	uint64_t *far = w->gpu == STEP_GPU_FAR ? u64map_get(&ss->work_gpu_far, item - 1) : NULL;
	uint64_t sum = (far ? *far : w->gpu) + ns;
	if (far)
		*far = sum;
	else if (sum < STEP_GPU_FAR)
		w->gpu = (uint32_t)sum;
	else if (u64map_put(&ss->work_gpu_far, item - 1, sum))
		steps_work_full(ss);
	else
		w->gpu = STEP_GPU_FAR;
}

/* All of the work's items in full (a vector of struct step_item; -1: out of memory). */
int steps_work_items(const struct steps_state *ss, struct vec *out)
{
	*out = (struct vec){.item = sizeof(struct step_item)};
	if (vec_reserve(out, ss->work.n ? ss->work.n : 1))
		return -1;
	struct work_reader r;
	work_reader_init(&r, ss);
	for (size_t i = 0; i < ss->work.n; i++)
		work_next(&r, (struct step_item *)out->data + i);
	out->n = ss->work.n;
	return 0;
}

/* A host call from another call path or thread than the last one's.  Past
 * the cap calls are no longer kept (they only extend a step's end: the
 * detection itself goes on). */
__attribute__((noinline)) void step_call_new(struct steps_state *ss, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	ss->call_cp = (uint32_t)cp;
	ss->call_tid = tid;
	ss->call_work_n = ss->work.n;
	if (item_keep(&ss->calls, tid, ts, end, cp))
		ss->calls_full = 1; /* (those kept stay: the earlier steps' ends are still right) */
}

/* A second WARMUP_END (a process that ran the runner's measurement twice,
 * or a damaged trace): the steady state starts after it, and what was
 * counted as steady before is warm-up now, so the findings keep to the
 * window the breakdown measures.  Findings filed as steady move to
 * warm-up (their key goes: later steady occurrences make new ones), and so
 * does what each pass filed under the steady state (phase_move). */
static void steady_to_warmup(struct analysis *a)
{
	struct an_state *st = a->st;
	enum { S = AN_PH_STEADY, W = AN_PH_WARMUP };
	phase_move(a, S, W);
	/* A gap found later across the end of the last iteration files its
	 * piece under that iteration's phase. */
	if (st->last_iter_phase == S)
		st->last_iter_phase = W;
}

void steps_marker(struct analysis *a, const struct tbp_record *r)
{
	struct an_state *st = a->st;
	struct steps_state *ss = an_pass_state(a, steps);
	if (a->opts.no_markers)
		return;
	/* A second pass marks the detected steps itself; the trace has none. */
	if (a->opts.synth_steps && !ss->in_synth)
		return;
	unsigned mk = r->u.marker.marker_kind;
	if (mk == TBP_MARK_ITER_BEGIN || mk == TBP_MARK_ITER_END || mk == TBP_MARK_WARMUP_END)
		an_publish_phase_ending(a); /* close what is open in the phase that ends */
	switch (mk) {
	case TBP_MARK_ITER_BEGIN:
		if (ss->collect_on && !ss->in_synth) /* marked steps: none to detect */
			steps_collect_stop(ss);
		st->iter_markers = 1;
		st->in_iter = 1;
		/* An iteration that began before WARMUP_END stays warm-up to its end. */
		st->iter_steady = a->warmup_seen;
		st->iter_begin_ts = r->ts;
		st->iter_no++;
		an_publish_step_begin(a, r->ts);
		if (!st->win_open) {
			snap_all(a, r->ts, 0);
			a->win_begin = r->ts;
			st->win_open = 1;
			a->iterations = 0;
		}
		break;
	case TBP_MARK_ITER_END:
		if (st->in_iter) {
			st->last_iter_phase = cur_phase(a);
			st->last_iter_begin_ts = st->iter_begin_ts;
			st->last_iter_end_ts = r->ts;
			struct iter_len *il = vec_push(&ss->iters);
			if (il)
				*il = (struct iter_len){.ns = r->ts - st->iter_begin_ts, .phase = st->last_iter_phase};
			an_publish_step_end(a, r->ts, st->last_iter_phase);
		}
		st->in_iter = 0;
		if (st->win_open) {
			snap_all(a, r->ts, 1);
			a->win_end = r->ts;
			a->iterations++;
			a->markers_used = 1;
		}
		break;
	case TBP_MARK_WARMUP_END:
		/* The steady state starts at the next iteration. */
		if (a->warmup_seen)
			steady_to_warmup(a);
		a->warmup_seen = 1;
		st->iter_steady = 0; /* an iteration still open is warm-up */
		ss->warmup_value = r->u.marker.value; /* the runner's count of warm-up iterations */
		st->win_open = 0;
		a->markers_used = 0;
		a->iterations = 0;
		break;
	}
	phase_update(a);
}

/* Time per step: the iterations' lengths (marks, or detected steps marked
 * by the second pass), the counted ones' median. */
static void steps_time_per_step(struct analysis *a)
{
	struct steps_state *st = an_pass_state(a, steps);
	if (!st->iters.n || a->opts.no_markers)
		return;
	uint64_t *lens = malloc(st->iters.n * sizeof *lens);
	if (!lens)
		return;
	size_t n = 0;
	for (size_t i = 0; i < st->iters.n; i++) {
		const struct iter_len *it = VEC_AT(&st->iters, struct iter_len, i);
		if (phase_counts(a, it->phase))
			lens[n++] = it->ns;
	}
	/* The runner runs its warm-up iterations unmarked and says how many
	 * in WARMUP_END's value. */
	a->steps.warmup = st->iters.n - n ? st->iters.n - n : st->warmup_value;
	a->steps.count = n + a->steps.warmup;
	a->steps.source = a->opts.synth_steps ? AN_STEPS_DETECTED : AN_STEPS_MARKS;
	if (n) {
		qsort(lens, n, sizeof *lens, u64_cmp);
		a->steps.median_ns = n % 2 ? lens[n / 2] : (lens[n / 2 - 1] + lens[n / 2]) / 2;
	}
	free(lens);
}

/* The detected steps marked as the runner marks iterations, [begin, end)
 * each, warm-up after the first (or opts.synth_warmup). */
static int synth_init(struct analysis *a)
{
	struct steps_state *st = an_pass_state(a, steps);
	size_t n = a->opts.n_synth_steps;
	if (!n)
		return 0;
	st->synth = calloc(3 * n + 1, sizeof *st->synth);
	if (!st->synth)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct an_step *s = &a->opts.synth_steps[i];
		uint64_t end = s->end;
		st->synth[st->n_synth++] = (struct synth_mark){s->begin, TBP_MARK_ITER_BEGIN};
		st->synth[st->n_synth++] = (struct synth_mark){end, TBP_MARK_ITER_END};
		if (i + 1 == (a->opts.synth_warmup ? a->opts.synth_warmup : 1))
			st->synth[st->n_synth++] = (struct synth_mark){end, TBP_MARK_WARMUP_END};
	}
	a->st->due_ts = st->synth[0].ts;
	return 0;
}

/* The synthetic marks due by time t, before the record at t. */
__attribute__((noinline)) void synth_emit(struct analysis *a, uint64_t t)
{
	struct steps_state *st = an_pass_state(a, steps);
	while (st->synth_at < st->n_synth && st->synth[st->synth_at].ts <= t) {
		struct tbp_record m;
		memset(&m, 0, sizeof m);
		m.kind = TBP_K_MARKER;
		m.ts = st->synth[st->synth_at].ts;
		m.u.marker.marker_kind = st->synth[st->synth_at].kind;
		st->synth_at++;
		st->in_synth = 1;
		steps_marker(a, &m);
		st->in_synth = 0;
	}
	a->st->due_ts = st->synth_at < st->n_synth ? st->synth[st->synth_at].ts : UINT64_MAX;
}

/* A span: the loop's lines are in the spans too (a step's host work before
 * its first launch, a CPU run's whole work); an import's is not the
 * program's own work. */
void steps_on_span(struct analysis *a, struct an_span_ev *e)
{
	struct steps_state *ss = an_pass_state(a, steps);
	if (!ss->collect_on)
		return;
	if (e->stat && e->stat->import) {
		struct an_step *iv = ss->imports.n < STEP_ITEMS_MAX ? vec_push(&ss->imports) : NULL;
		if (iv)
			*iv = (struct an_step){.begin = e->ts, .end = e->end};
		return;
	}
	if (item_keep(&ss->spans, e->tid, e->ts, e->end, e->callpath)) {
		ss->collect_full = 1;
		steps_collect_stop(ss);
	}
}

/* The detected steps' last marks, and the phase they leave.  An iteration
 * still open at the end (a process killed in it) is counted to the end of
 * the trace: its findings are in the window then. */
void steps_flush(struct analysis *a)
{
	struct an_state *st = a->st;
	synth_emit(a, UINT64_MAX);
	if (st->in_iter && st->win_open && a->last_ts > a->win_begin) {
		an_publish_phase_ending(a);
		snap_all(a, a->last_ts, 1);
		a->win_end = a->last_ts;
		a->markers_used = 1;
	}
	phase_update(a); /* files the last phase's short gaps */
}

int steps_finish(struct analysis *a)
{
	steps_time_per_step(a);
	if ((!a->st->iter_markers || a->opts.steps_nvtx) && !a->opts.no_markers && !a->opts.synth_steps)
		steps_detect(a);
	return 0;
}

int steps_init(struct analysis *a)
{
	struct steps_state *ss = an_pass_state(a, steps);
	ss->spans.item = ss->calls.item = sizeof(struct step_item);
	ss->work.item = sizeof(struct step_work);
	ss->work_far.item = sizeof(uint64_t);
	ss->imports.item = sizeof(struct an_step);
	ss->collect_on = !a->opts.synth_steps && !a->opts.no_markers;
	ss->iters.item = sizeof(struct iter_len);
	return synth_init(a);
}

void steps_free(struct analysis *a)
{
	struct steps_state *ss = an_pass_state(a, steps);
	steps_collect_stop(ss);
	vec_free(&ss->iters);
	free(ss->synth);
}
