/*
 * Pass: host time by Python function, from the spans (calls longer than the
 * tracer's span threshold): per call path, the calls, their inclusive time
 * and their self time (less the spans directly inside on the same thread),
 * over the whole trace and over the host window (the steps after warm-up:
 * known as the spans come for detected steps, whose second pass marks them;
 * for the runner's marks, from a second read of the spans, an_core.c).
 * It runs first on each span and gives the others the span's statistics
 * (whether it is a call of torch's backward(), where the thread waits).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_spans.h"

static int ends_with(const char *s, size_t n, const char *tail)
{
	size_t k = strlen(tail);
	return n >= k && !memcmp(s + n - k, tail, k);
}

/* A span of torch's backward() entry points (Tensor.backward,
 * torch.autograd.backward and .grad, the engine's entry): the calling thread
 * blocks in them while autograd's threads run the backward pass. */
static int is_backward_wait(const struct analysis *a, uint64_t cp)
{
	struct an_frame f;
	if (!cp || !an_callpath_frames(a, cp, &f, 1) || !an_frame_is_library(a, &f))
		return 0;
	static const char *const names[] = {"Tensor.backward", "backward", "grad", "_engine_run_backward"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t n = strlen(names[i]);
		if (f.function_len == n && !memcmp(f.function, names[i], n))
			return ends_with(f.file, f.file_len, "/torch/_tensor.py") ||
			       ends_with(f.file, f.file_len, "/torch/autograd/__init__.py") ||
			       ends_with(f.file, f.file_len, "/torch/autograd/graph.py");
	}
	return 0;
}

/* importlib's import of one module (the span the tracer times whole, its
 * inside run without the hook): the interpreter's work, not the program's. */
static int is_import(const struct analysis *a, uint64_t cp)
{
	struct an_frame f;
	static const char name[] = "_find_and_load", file[] = "<frozen importlib._bootstrap>";
	return an_callpath_frames(a, cp, &f, 1) && f.function_len == sizeof name - 1 &&
	       !memcmp(f.function, name, sizeof name - 1) && f.file_len == sizeof file - 1 &&
	       !memcmp(f.file, file, sizeof file - 1);
}

/* The part of [b, e) inside the host window. */
static uint64_t in_win(const struct analysis *a, uint64_t b, uint64_t e)
{
	if (b < a->host_win.begin)
		b = a->host_win.begin;
	if (e > a->host_win.end)
		e = a->host_win.end;
	return e > b ? e - b : 0;
}

/* A span into its statistics: whole (the trace's figures and the window's)
 * or, in the second read of a marked trace, the window's alone. */
static void span_account(struct analysis *a, const struct an_span_ev *ev, struct an_span_stat *s, int whole)
{
	struct an_state *st = a->st;
	struct spans_state *ss = an_pass_state(a, spans);
	uint64_t ts = ev->ts, end = ev->end;
	int win = a->host_win.on;
	if (whole) {
		s->count++;
		s->total_ns += end - ts;
	}
	uint64_t self = end - ts, wself = win ? in_win(a, ts, end) : 0;
	if (wself) {
		s->win_count++;
		s->win_total_ns += wself;
	}
	size_t sidx = (size_t)(s - VEC_AT(&a->spans, struct an_span_stat, 0));
	struct thread_st *thr = get_thread(st, ev->tid);
	size_t ti = thr ? thread_index(st, thr) : 0;
	struct spans_thread *th = !thr ? NULL
				  : ti < ss->threads.n ? VEC_AT(&ss->threads, struct spans_thread, ti) /* (vec_slot's) */
				  : vec_slot(&ss->threads, ti);
	if (th && !th->done)
		th->done = malloc(2 * SPAN_STACK * sizeof *th->done);
	if (th && th->done) {
		/* Spans come in end order.  A span's start is its end less a
		 * length measured in CPU ticks, converted at a calibrated
		 * rate: a long span's start can be off by ~1e-4 of its
		 * length, so a child may seem to start a little before its
		 * parent.  It is still a child (only its part inside counts);
		 * a span that began well before is an earlier sibling. */
		uint64_t slack = (end - ts) / 1024 + 1000;
		while (th->ndone > th->done_base && th->done[th->ndone - 1].end > ts && th->done[th->ndone - 1].end <= end &&
		       th->done[th->ndone - 1].ts + slack >= ts) {
			const struct done_span *c = &th->done[--th->ndone];
			uint64_t cb = c->ts > ts ? c->ts : ts, cd = c->end - cb;
			self = self > cd ? self - cd : 0;
			if (wself) {
				uint64_t wd = in_win(a, cb, c->end);
				wself = wself > wd ? wself - wd : 0;
			}
		}
		if (th->ndone - th->done_base == SPAN_STACK)
			th->done_base++; /* the oldest forgotten */
		if (th->ndone == 2 * SPAN_STACK) {
			memmove(th->done, th->done + th->done_base, (th->ndone - th->done_base) * sizeof *th->done);
			th->ndone -= th->done_base;
			th->done_base = 0;
		}
		th->done[th->ndone++] = (struct done_span){.ts = ts, .end = end, .stat = sidx};
	}
	if (whole)
		s->self_ns += self;
	s->win_self_ns += wself;
}

void spans_on_span(struct analysis *a, struct an_span_ev *ev)
{
	uint64_t cp = ev->callpath;
	struct spans_state *ss = an_pass_state(a, spans);
	typeof(ss->ix_cache[0]) *slot = &ss->ix_cache[(cp ^ cp >> 8) & (SPAN_IX_CACHE - 1)];
	size_t ix;
	if (slot->cp1 == cp + 1 && cp != UINT64_MAX) {
		ix = (size_t)slot->ix;
	} else {
		ix = vec_keyed(&a->spans, &ss->span_idx, cp, NULL);
		if (ix != SIZE_MAX && cp != UINT64_MAX) {
			slot->cp1 = cp + 1;
			slot->ix = ix;
		}
	}
	struct an_span_stat *s = ix == SIZE_MAX ? NULL : VEC_AT(&a->spans, struct an_span_stat, ix);
	ev->stat = s;
	if (!s)
		return;
	if (!s->count) {
		s->backward_wait = is_backward_wait(a, cp);
		s->import = is_import(a, cp);
	}
	s->callpath = cp;
	if (a->st->detect_only) {
		/* A first analysis that only finds the steps reads a span's
		 * import flag alone (steps_on_span); its times and nesting are
		 * the reporting analysis's. */
		s->count++;
		return;
	}
	span_account(a, ev, s, 1);
}

/* A trace with the runner's marks: the window is known once the trace is
 * read; its spans are read again (reread) for the window's figures, each
 * thread's nesting from scratch.  (A trace without marks whose steps were
 * found knows its window before its first span: spans_init.) */
uint64_t spans_reread_begin(struct analysis *a)
{
	if (!a->markers_used || a->host_win.on || !a->n_spans || a->win_end <= a->win_begin)
		return 0;
	struct spans_state *ss = an_pass_state(a, spans);
	a->host_win.on = 1;
	a->host_win.begin = a->win_begin;
	a->host_win.end = a->win_end;
	for (size_t i = 0; i < ss->threads.n; i++)
		VEC_AT(&ss->threads, struct spans_thread, i)->ndone = VEC_AT(&ss->threads, struct spans_thread, i)->done_base = 0;
	for (size_t i = 0; i < a->spans.n; i++) {
		struct an_span_stat *s = VEC_AT(&a->spans, struct an_span_stat, i);
		s->win_count = s->win_total_ns = s->win_self_ns = 0;
	}
	return 1ull << TBP_K_PY_SPAN;
}

void spans_reread_record(struct analysis *a, const struct tbp_record *r)
{
	struct an_span_ev e = {.tid = r->tid, .ts = r->ts, .callpath = r->u.py_span.callpath};
	e.end = r->u.py_span.end < e.ts ? e.ts : r->u.py_span.end;
	uint64_t *ix = u64map_get(&an_pass_state(a, spans)->span_idx, e.callpath);
	if (ix)
		span_account(a, &e, VEC_AT(&a->spans, struct an_span_stat, *ix), 0);
}

/* Detected steps, marked by this (second) pass: the window is theirs after
 * warm-up, known before the first span. */
int spans_init(struct analysis *a)
{
	an_pass_state(a, spans)->threads.item = sizeof(struct spans_thread);
	size_t n = a->opts.n_synth_steps, w = a->opts.synth_warmup ? a->opts.synth_warmup : 1;
	if (n > w) {
		a->host_win.on = 1;
		a->host_win.begin = a->opts.synth_steps[w].begin;
		a->host_win.end = a->opts.synth_steps[n - 1].end;
	}
	return 0;
}

static int cmp_span(const void *x, const void *y)
{
	const struct an_span_stat *a = x, *b = y;
	if (a->win_self_ns != b->win_self_ns) /* 0 without a window */
		return a->win_self_ns > b->win_self_ns ? -1 : 1;
	if (a->self_ns != b->self_ns)
		return a->self_ns > b->self_ns ? -1 : 1;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	return a->callpath < b->callpath ? -1 : a->callpath > b->callpath;
}

int spans_finish(struct analysis *a)
{
	if (a->spans.n)
		qsort(a->spans.data, a->spans.n, sizeof(struct an_span_stat), cmp_span);
	return 0;
}

void spans_free(struct analysis *a)
{
	struct spans_state *ss = an_pass_state(a, spans);
	u64map_free(&ss->span_idx);
	for (size_t i = 0; i < ss->threads.n; i++)
		free(VEC_AT(&ss->threads, struct spans_thread, i)->done);
	vec_free(&ss->threads);
}
