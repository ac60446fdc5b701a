/*
 * Pass: steps.  Iterations from the runner's marks (the window, the phases
 * every pass files its occurrences under), or, in a trace without marks,
 * the training loop detected on a first pass and marked on a second one as
 * the runner would (an_run, an_core.c), and the time per step.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass.h"

#define CAND_IVS 4096 /* steps kept per candidate loop function */
struct step_cand {
	uint64_t callpath, launches, count;
	uint32_t tid;
	int unusable; /* calls on several threads, or one inside another: not a loop's steps */
	struct vec ivs; /* struct an_step */
};
struct iter_len {
	uint64_t ns;
	int phase;
};
struct synth_mark {
	uint64_t ts, kind;
};

/* A new run of work from another call path than the last one's (out of
 * line: most launches continue a run or come from a path seen before). */
__attribute__((noinline)) void work_run_add(struct an_state *st, uint64_t ts, uint64_t end, uint64_t cp)
{
	struct steps_state *ss = &st->steps;
	struct work_run *w;
	ss->work_run_cp = cp;
	if (cp >= WORK_RUN_CP_MAX || ss->work_runs.n >= WORK_RUNS_MAX || !(w = vec_push(&ss->work_runs))) {
		ss->work_runs_full = 1;
		ss->work_runs_on = 0;
		return;
	}
	*w = (struct work_run){.ts = ts, .packed = work_run_pack(cp, end - ts)};
}

void steps_marker(struct analysis *a, const struct tbp_record *r)
{
	struct an_state *st = a->st;
	struct steps_state *ss = &st->steps;
	if (a->opts.no_markers)
		return;
	/* A second pass marks the detected steps itself; the trace has none. */
	if (a->opts.synth_steps && !ss->in_synth)
		return;
	switch (r->u.marker.marker_kind) {
	case TBP_MARK_ITER_BEGIN:
		if (ss->work_runs_on && !ss->in_synth) { /* marked steps: none to detect */
			ss->work_runs_on = 0;
			vec_free(&ss->work_runs);
			ss->work_runs.item = sizeof(struct work_run);
		}
		st->iter_markers = 1;
		st->in_iter = 1;
		st->iter_begin_ts = r->ts;
		st->iter_no++;
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
		a->warmup_seen = 1;
		ss->warmup_value = r->u.marker.value; /* the runner's count of warm-up iterations */
		st->win_open = 0;
		a->markers_used = 0;
		a->iterations = 0;
		break;
	}
	phase_update(a);
}

/* Launches recorded in [ts, end) (the ring keeps the latest 65536). */
static uint64_t launches_in(const struct steps_state *st, uint64_t ts, uint64_t end)
{
	uint64_t lo = st->launch_n > LAUNCH_RING ? st->launch_n - LAUNCH_RING : 0, hi = st->launch_n;
	uint64_t a0 = lo, a1 = hi;
	while (a0 < a1) { /* first launch at or after ts */
		uint64_t m = a0 + (a1 - a0) / 2;
		if (st->launch_ring[m & (LAUNCH_RING - 1)] < ts)
			a0 = m + 1;
		else
			a1 = m;
	}
	uint64_t first = a0;
	a1 = hi;
	while (a0 < a1) { /* first launch at or after end */
		uint64_t m = a0 + (a1 - a0) / 2;
		if (st->launch_ring[m & (LAUNCH_RING - 1)] < end)
			a0 = m + 1;
		else
			a1 = m;
	}
	return a0 - first;
}

/* A call of the span's function: a candidate step of the training loop
 * when it holds launches (of any thread: backward's are autograd's). */
static void step_cand_add(struct analysis *a, uint32_t tid, uint64_t cp, uint64_t ts, uint64_t end)
{
	struct steps_state *st = &a->st->steps;
	uint64_t n = launches_in(st, ts, end);
	if (!n)
		return;
	uint64_t *ix = u64map_get(&st->cand_idx, cp);
	struct step_cand *c;
	if (ix) {
		c = VEC_AT(&st->cands, struct step_cand, *ix);
	} else {
		if (!(c = vec_push(&st->cands)) || u64map_put(&st->cand_idx, cp, st->cands.n - 1))
			return;
		c->callpath = cp;
		c->tid = tid;
		c->ivs.item = sizeof(struct an_step);
	}
	if (c->tid != tid)
		c->unusable = 1;
	/* Spans come as they end: one that began before the previous call
	 * ended contains it (recursion) or overlaps it. */
	if (c->ivs.n && VEC_AT(&c->ivs, struct an_step, c->ivs.n - 1)->end > ts)
		c->unusable = 1;
	c->launches += n;
	c->count++;
	struct an_step *iv = c->ivs.n < CAND_IVS ? vec_push(&c->ivs) : NULL;
	if (iv)
		*iv = (struct an_step){.begin = ts, .end = end};
}

/* A span is read as soon as it ends, before the merge has handed over the
 * launches inside it (they wait in their queues for the GPU records): it
 * is counted once the analysis has passed its end. */
#define PEND_SPANS 4096
struct pend_span {
	uint32_t tid;
	uint64_t cp, ts, end;
};

void step_spans_flush(struct analysis *a, uint64_t now)
{
	struct steps_state *st = &a->st->steps;
	while (st->pend_n && st->pend[st->pend_head].end <= now) {
		const struct pend_span *p = &st->pend[st->pend_head];
		step_cand_add(a, p->tid, p->cp, p->ts, p->end);
		st->pend_head = (st->pend_head + 1) % PEND_SPANS;
		st->pend_n--;
	}
	st->pend_due = st->pend_n ? st->pend[st->pend_head].end : UINT64_MAX;
}

static void step_span_pending(struct analysis *a, uint32_t tid, uint64_t cp, uint64_t ts, uint64_t end)
{
	struct steps_state *st = &a->st->steps;
	if (!st->pend && !(st->pend = malloc(PEND_SPANS * sizeof *st->pend)))
		return;
	if (st->pend_n == PEND_SPANS) /* full: the oldest is counted now */
		step_spans_flush(a, st->pend[st->pend_head].end);
	st->pend[(st->pend_head + st->pend_n++) % PEND_SPANS] = (struct pend_span){tid, cp, ts, end};
	if (st->pend_n == 1)
		st->pend_due = end;
}

/* Steps from the lines of the loop.  A loop's body runs the same lines over
 * and over; every launch, copy or memset carries the line of each frame of
 * its call path.  A context is one function called from one place (a call
 * path node's parent and the function: two calls of train() from the same
 * line of main() are one context, so are the iterations of a loop in it);
 * in its own work, in time order, each line of the body is entered once
 * per iteration.  A context's steps are the entries into its most entered
 * line (between equals, the one entered first: the body's first line that
 * does GPU work), each step from there to the next entry (or to the user's
 * code after the loop's body, see below).  An inline loop,
 * a loop calling a function per step and a batch loop inside an epoch loop
 * all give one step per batch: the epoch loop's line is entered once per
 * epoch, its batch loop's lines once per batch.  Only the user's frames
 * are contexts: torch's own loops (over parameters, over modules) are not
 * training steps. */
/* A line entered twice may be code before and after another (a single
 * step's forward and its optimizer step): a loop's line is entered at least
 * three times (the warm-up step and two of the steady state). */
#define LOOP_MIN_STEPS 3
#define LOOP_FRAMES 8 /* user frames of one call path looked at, innermost first (of 256 frames at most) */
struct loop_ctx {
	uint64_t work;       /* runs of work in the context */
	uint32_t prev_line;  /* index of the line of its latest work, UINT32_MAX: none yet */
	uint32_t best_line;  /* its steps' line (index), UINT32_MAX: none */
};
struct loop_line {
	uint32_t ctx;
	uint64_t node;      /* a call path node at this line (the report's "loop") */
	uint64_t entries;   /* times entered from another line of its context */
	size_t first_run;   /* run of the first entry */
};
struct loop_path { /* per call path of the work: its frames' contexts and lines */
	uint32_t n;
	uint32_t ctx[LOOP_FRAMES], line[LOOP_FRAMES];
};
struct loop_scan {
	struct vec ctxs, lines, paths; /* struct loop_ctx, loop_line, loop_path */
	struct u64map ctx_idx, line_idx, path_idx;
};

/* The contexts and lines of call path cp's user frames (index into
 * ls->paths), made on first sight. */
static const struct loop_path *loop_path_of(const struct analysis *a, struct loop_scan *ls, uint64_t cp)
{
	uint64_t *ix = u64map_get(&ls->path_idx, cp);
	if (ix)
		return VEC_AT(&ls->paths, struct loop_path, *ix);
	struct loop_path lp = {0};
	uint64_t node = cp;
	for (unsigned depth = 0; node && depth < 256 && lp.n < LOOP_FRAMES; depth++) {
		struct an_frame f;
		if (!an_callpath_frames(a, node, &f, 1))
			break;
		uint64_t parent = an_callpath_parent(a, node);
		if (!an_file_is_library(f.file, f.file_len)) {
			uint64_t key = an_hash_combine(an_frame_function_hash(&f), parent) >> 1;
			uint64_t *c = u64map_get(&ls->ctx_idx, key);
			uint32_t ci;
			if (c) {
				ci = (uint32_t)*c;
			} else {
				struct loop_ctx *x = vec_push(&ls->ctxs);
				if (!x || u64map_put(&ls->ctx_idx, key, ls->ctxs.n - 1))
					return NULL;
				x->prev_line = x->best_line = UINT32_MAX;
				ci = (uint32_t)(ls->ctxs.n - 1);
			}
			uint64_t lkey = an_hash_combine(key, f.line) >> 1;
			uint64_t *l = u64map_get(&ls->line_idx, lkey);
			uint32_t li;
			if (l) {
				li = (uint32_t)*l;
			} else {
				struct loop_line *y = vec_push(&ls->lines);
				if (!y || u64map_put(&ls->line_idx, lkey, ls->lines.n - 1))
					return NULL;
				y->ctx = ci;
				y->node = node;
				li = (uint32_t)(ls->lines.n - 1);
			}
			lp.ctx[lp.n] = ci;
			lp.line[lp.n++] = li;
		}
		node = parent;
	}
	struct loop_path *p = vec_push(&ls->paths);
	if (!p || u64map_put(&ls->path_idx, cp, ls->paths.n - 1))
		return NULL;
	*p = lp;
	return p;
}

static void loop_scan_free(struct loop_scan *ls)
{
	vec_free(&ls->ctxs);
	vec_free(&ls->lines);
	vec_free(&ls->paths);
	u64map_free(&ls->ctx_idx);
	u64map_free(&ls->line_idx);
	u64map_free(&ls->path_idx);
}

/* The steps of the loop found in the work's lines into a->step_ivs;
 * returns their count (0: none found, or more runs than kept). */
static uint64_t steps_from_lines(struct analysis *a, uint64_t min_steps)
{
	struct steps_state *st = &a->st->steps;
	const struct vec *runs = &st->work_runs;
	if (st->work_runs_full || runs->n < 2)
		return 0;
	struct loop_scan ls = {.ctxs.item = sizeof(struct loop_ctx), .lines.item = sizeof(struct loop_line),
			       .paths.item = sizeof(struct loop_path)};
	uint64_t total = 0, steps = 0;
	for (size_t i = 0; i < runs->n; i++) {
		const struct work_run *w = VEC_AT(runs, struct work_run, i);
		const struct loop_path *lp = loop_path_of(a, &ls, work_run_cp(w));
		total++;
		if (!lp)
			goto out;
		for (uint32_t k = 0; k < lp->n; k++) {
			struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, lp->ctx[k]);
			c->work++;
			if (c->prev_line != lp->line[k]) {
				struct loop_line *l = VEC_AT(&ls.lines, struct loop_line, lp->line[k]);
				if (!l->entries++)
					l->first_run = i;
				c->prev_line = lp->line[k];
			}
		}
	}
	for (size_t i = 0; i < ls.lines.n; i++) {
		const struct loop_line *l = VEC_AT(&ls.lines, struct loop_line, i);
		struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, l->ctx);
		const struct loop_line *b = c->best_line == UINT32_MAX ? NULL
						: VEC_AT(&ls.lines, struct loop_line, c->best_line);
		if (!b || l->entries > b->entries || (l->entries == b->entries && l->first_run < b->first_run))
			c->best_line = (uint32_t)i;
	}
	/* The loop: a context with at least half of all runs of work, with the
	 * most steps (more than the spans' candidate found); between equals,
	 * the one with the most work (the loop's own function, not one it
	 * calls once per step). */
	uint32_t best = UINT32_MAX;
	uint64_t best_work = 0;
	for (size_t i = 0; i < ls.ctxs.n; i++) {
		const struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, i);
		if (c->best_line == UINT32_MAX || 2 * c->work < total)
			continue;
		uint64_t n = VEC_AT(&ls.lines, struct loop_line, c->best_line)->entries;
		if (n < LOOP_MIN_STEPS || n <= min_steps || n < steps || (n == steps && c->work <= best_work))
			continue;
		best = (uint32_t)i, steps = n, best_work = c->work;
	}
	if (best == UINT32_MAX) {
		steps = 0;
		goto out;
	}
	const struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, best);
	vec_free(&a->step_ivs);
	a->step_ivs.item = sizeof(struct an_step);
	/* Each step from an entry into the line to the next; when the user's
	 * code does work outside the context before that (the code after the
	 * loop's body: an evaluation pass, a checkpoint), to the end of the
	 * step's own last work: what follows is between steps, as the
	 * runner's time between its iterations. */
	uint32_t prev = UINT32_MAX;
	int open = 0;
	uint64_t last_end = 0; /* the end of the context's latest work */
	for (size_t i = 0; i < runs->n; i++) {
		const struct work_run *w = VEC_AT(runs, struct work_run, i);
		const struct loop_path *lp = loop_path_of(a, &ls, work_run_cp(w));
		uint32_t line = UINT32_MAX;
		for (uint32_t k = 0; lp && k < lp->n; k++)
			if (lp->ctx[k] == best)
				line = lp->line[k];
		if (line == UINT32_MAX) {
			/* Work of no user frame (a library's thread, no Python) leaves the step as it is. */
			if (open && lp && lp->n) {
				struct an_step *d = VEC_AT(&a->step_ivs, struct an_step, a->step_ivs.n - 1);
				d->end = last_end > d->begin ? last_end : d->begin + 1;
				open = 0;
			}
			continue;
		}
		if (work_run_end(w) > last_end)
			last_end = work_run_end(w);
		if (line == c->best_line && prev != c->best_line) {
			if (open)
				VEC_AT(&a->step_ivs, struct an_step, a->step_ivs.n - 1)->end = w->ts;
			struct an_step *d = vec_push(&a->step_ivs);
			if (!d) {
				steps = 0;
				goto out;
			}
			d->begin = w->ts;
			open = 1;
		}
		prev = line;
	}
	if (open) { /* the last: to the end of its work */
		struct an_step *d = VEC_AT(&a->step_ivs, struct an_step, a->step_ivs.n - 1);
		d->end = last_end > d->begin ? last_end : d->begin + 1;
	}
	a->steps.loop = VEC_AT(&ls.lines, struct loop_line, c->best_line)->node;
out:
	loop_scan_free(&ls);
	return steps;
}

/* The loop: the user's function whose calls (at least two, on one thread,
 * none inside another) hold at least half of all launches, the most of them;
 * between two equal, the one called fewer times (the outer).  The lines'
 * loop (above) instead when it has more steps: the spans' function is then
 * an outer loop's (epochs) or the loop is inline. */
static void steps_detect(struct analysis *a)
{
	struct steps_state *st = &a->st->steps;
	const struct step_cand *best = NULL;
	for (size_t i = 0; i < st->cands.n; i++) {
		const struct step_cand *c = VEC_AT(&st->cands, struct step_cand, i);
		if (c->unusable || c->count < 2 || c->count != c->ivs.n || 2 * c->launches < a->n_launch)
			continue;
		/* torch's own functions called once per step (Tensor.backward,
		 * Optimizer.step) are inside the step, not the step. */
		struct an_frame f;
		if (an_callpath_frames(a, c->callpath, &f, 1) && an_file_is_library(f.file, f.file_len))
			continue;
		if (!best || c->launches > best->launches || (c->launches == best->launches && c->count < best->count))
			best = c;
	}
	if (steps_from_lines(a, best ? best->count : 0)) {
		a->steps.source = AN_STEPS_DETECTED;
		return;
	}
	if (!best)
		return;
	a->steps.source = AN_STEPS_DETECTED;
	a->steps.function = best->callpath;
	vec_free(&a->step_ivs);
	a->step_ivs.item = sizeof(struct an_step);
	for (size_t i = 0; i < best->ivs.n; i++) {
		struct an_step *d = vec_push(&a->step_ivs);
		if (!d)
			return;
		*d = *VEC_AT(&best->ivs, struct an_step, i);
		/* A step function's step lasts until the next call (the loop's
		 * own work between the calls is the step's too). */
		if (i)
			(d - 1)->end = d->begin;
	}
}

/* Time per step: the iterations' lengths (marks, or detected steps marked
 * by the second pass), the counted ones' median. */
static void steps_finish(struct analysis *a)
{
	struct steps_state *st = &a->st->steps;
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
	struct steps_state *st = &a->st->steps;
	st->next_synth_ts = UINT64_MAX;
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
	st->next_synth_ts = st->synth[0].ts;
	return 0;
}

/* The synthetic marks due by time t, before the record at t. */
__attribute__((noinline)) void synth_emit(struct analysis *a, uint64_t t)
{
	struct steps_state *st = &a->st->steps;
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
	st->next_synth_ts = st->synth_at < st->n_synth ? st->synth[st->synth_at].ts : UINT64_MAX;
}

static void steps_span(struct analysis *a, struct an_span_ev *e)
{
	if (!a->opts.synth_steps)
		step_span_pending(a, e->tid, e->callpath, e->ts, e->end);
}

/* The detected steps' last marks, and the phase they leave. */
static void steps_flush(struct analysis *a)
{
	synth_emit(a, UINT64_MAX);
	phase_update(a); /* files the last phase's short gaps */
}

static int steps_finish_pass(struct analysis *a)
{
	step_spans_flush(a, UINT64_MAX);
	steps_finish(a);
	if (!a->st->iter_markers && !a->opts.no_markers && !a->opts.synth_steps)
		steps_detect(a);
	return 0;
}

static int steps_init(struct analysis *a)
{
	struct steps_state *ss = &a->st->steps;
	ss->launch_ring = calloc(LAUNCH_RING, sizeof *ss->launch_ring);
	if (!ss->launch_ring)
		return -1;
	ss->cands.item = sizeof(struct step_cand);
	ss->work_runs.item = sizeof(struct work_run);
	ss->work_runs_on = !a->opts.synth_steps && !a->opts.no_markers;
	ss->pend_due = UINT64_MAX;
	ss->iters.item = sizeof(struct iter_len);
	return synth_init(a);
}

static void steps_free(struct analysis *a)
{
	struct steps_state *ss = &a->st->steps;
	free(ss->launch_ring);
	for (size_t i = 0; i < ss->cands.n; i++)
		vec_free(&VEC_AT(&ss->cands, struct step_cand, i)->ivs);
	vec_free(&ss->cands);
	vec_free(&ss->work_runs);
	u64map_free(&ss->cand_idx);
	vec_free(&ss->iters);
	free(ss->synth);
	free(ss->pend);
}

const struct an_pass_ops an_pass_steps = {
	.name = "steps",
	.init = steps_init,
	.span = steps_span,
	.flush = steps_flush,
	.finish = steps_finish_pass,
	.free = steps_free,
};
