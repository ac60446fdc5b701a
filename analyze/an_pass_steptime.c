/*
 * Pass: time per step.  Each step (a marked iteration, or a detected step
 * the second pass marks) split as the breakdown splits the window: the GPU
 * busy and data-movement unions measured at its marks, summed over the
 * devices, and the idle of the gap pieces inside it by their cause (filed
 * when the gaps pass explains a piece, which may be after the step ended:
 * the piece is placed by its time).  The HTML report's step plot reads it;
 * with opts.keep_timeline this pass also owns the timeline's ring of GPU
 * records (filled by timeline_keep, an_pass_steptime.h).
 */
#include <stdlib.h>
#include <string.h>

#include "an_pass_steptime.h"

static void steptime_settle(struct analysis *a);

static void unions_now(const struct analysis *a, uint64_t t, uint64_t *busy, uint64_t *dm, unsigned *devices)
{
	*busy = *dm = 0;
	unsigned n = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		*busy += an_union_at(&d->busy, t);
		*dm += an_union_at(&d->dm, t);
		n += d->kernels || d->copies || d->sets;
	}
	if (devices)
		*devices = n;
}

void steptime_begin(struct analysis *a, uint64_t t)
{
	struct steptime_state *ss = an_pass_state(a, steptime);
	ss->open = 1;
	ss->begin = t;
	ss->whole_n = SIZE_MAX; /* an open step holds pieces after t */
	unions_now(a, t, &ss->busy0, &ss->dm0, NULL);
}

void steptime_end(struct analysis *a, uint64_t t, int phase)
{
	struct steptime_state *ss = an_pass_state(a, steptime);
	if (!ss->open)
		return;
	ss->open = 0;
	ss->whole_n = SIZE_MAX; /* a step more */
	struct an_step_time *st = vec_push(&a->step_times);
	if (!st)
		return;
	uint64_t busy, dm;
	unions_now(a, t, &busy, &dm, &st->devices);
	st->begin = ss->begin;
	st->end = t;
	st->phase = phase;
	/* A device first seen inside the step had nothing at its begin. */
	st->busy_ns = busy > ss->busy0 ? busy - ss->busy0 : 0;
	st->dm_ns = dm > ss->dm0 ? dm - ss->dm0 : 0;
	steptime_settle(a);
}

/* to[c] += by_cause[c] for every cause, two at a time. */
static inline __attribute__((always_inline)) void add_causes(uint64_t *to, const uint64_t *by_cause)
{
	typedef uint64_t u64x2 __attribute__((vector_size(16)));
	int c = 0;
#pragma GCC unroll 8
	for (; c + 2 <= AN_CAUSE_N; c += 2) {
		u64x2 x, y;
		memcpy(&x, &to[c], sizeof x);
		memcpy(&y, &by_cause[c], sizeof y);
		x += y;
		memcpy(&to[c], &x, sizeof x);
	}
	for (; c < AN_CAUSE_N; c++) /* (an odd count's last) */
		to[c] += by_cause[c];
}

/* A gap piece's idle, split by cause, into the steps it overlaps (the
 * gaps pass cuts pieces at a step's end, not at its begin: a piece may
 * reach back before it), each its share by time; the part in the step
 * still open waits for it in pending (at most a few pieces). */
static void add_share(uint64_t *to, const uint64_t *by_cause, uint64_t part, uint64_t len)
{
	if (part == len) { /* the whole piece */
		add_causes(to, by_cause);
		return;
	}
	for (int c = 0; c < AN_CAUSE_N; c++)
		if (by_cause[c])
			to[c] += (uint64_t)((double)by_cause[c] * (double)part / (double)len);
}

static __attribute__((noinline)) void steptime_idle_search(struct analysis *a, uint64_t s, uint64_t e,
							   const uint64_t *by_cause)
{
	struct vec *v = &a->step_times;
	struct steptime_state *ss = an_pass_state(a, steptime);
	/* The first step ending after s: pieces come nearly in time order, so
	 * it is mostly the last piece's; else a binary search. */
	size_t lo = ss->first_hint < v->n ? ss->first_hint : v->n;
	if (v->n && !((lo == 0 || VEC_AT(v, struct an_step_time, lo - 1)->end <= s) &&
	      (lo == v->n || VEC_AT(v, struct an_step_time, lo)->end > s))) {
		size_t hi = v->n;
		lo = 0;
		while (lo < hi) {
			size_t m = (lo + hi) / 2;
			if (VEC_AT(v, struct an_step_time, m)->end <= s)
				lo = m + 1;
			else
				hi = m;
		}
	}
	ss->first_hint = lo;
	/* Most pieces lie inside that step, and before the next one begins:
	 * the whole piece into it (add_share's whole case, inline). */
	if (lo < v->n) {
		struct an_step_time *st = VEC_AT(v, struct an_step_time, lo);
		uint64_t next = lo + 1 == v->n ? UINT64_MAX : VEC_AT(v, struct an_step_time, lo + 1)->begin;
		if (st->begin <= s && s < e && e <= st->end && next >= e) {
			add_causes(st->idle_by, by_cause);
			lo = v->n;
			/* Every piece [s', e') with s' < e' in this window takes this
			 * case: step lo is the first ending after s' (the one before
			 * it ended by s'), the piece lies inside it and ends by the
			 * next one's begin.  Unless the open step begins before the
			 * window's end (the pending case below): not cached then. */
			uint64_t lo_b = st->begin, hi_b = st->end < next ? st->end : next;
			if (ss->first_hint > 0) {
				uint64_t prev_end = VEC_AT(v, struct an_step_time, ss->first_hint - 1)->end;
				if (prev_end > lo_b)
					lo_b = prev_end;
			}
			if (!ss->open || ss->begin >= hi_b) {
				ss->whole_ix = ss->first_hint;
				ss->whole_n = v->n;
				ss->whole_lo = lo_b;
				ss->whole_hi = hi_b;
			}
		}
	}
	/* (An empty piece is nothing; checked here rather than first, which
	 * only split the function in two calls.) */
	if (e <= s)
		return;
	for (; lo < v->n; lo++) {
		struct an_step_time *st = VEC_AT(v, struct an_step_time, lo);
		if (st->begin >= e)
			break;
		uint64_t b = s > st->begin ? s : st->begin, en = e < st->end ? e : st->end;
		add_share(st->idle_by, by_cause, en - b, e - s);
	}
	if (ss->open && e > ss->begin) {
		struct an_step_time *p = vec_push(&ss->pending);
		if (p) {
			p->begin = s > ss->begin ? s : ss->begin;
			p->end = e;
			memset(p->idle_by, 0, sizeof p->idle_by);
			add_share(p->idle_by, by_cause, e - p->begin, e - s);
		}
	}
}

void steptime_idle(struct analysis *a, uint64_t s, uint64_t e, const uint64_t *by_cause)
{
	struct vec *v = &a->step_times;
	struct steptime_state *ss = an_pass_state(a, steptime);
	/* Inside the last whole piece's step, as most are: the whole case
	 * without the search (a call of its own: this path saves no
	 * registers). */
	if (__builtin_expect(v->n == ss->whole_n && s >= ss->whole_lo && e <= ss->whole_hi && s < e, 1)) {
		ss->first_hint = ss->whole_ix;
		add_causes(VEC_AT(v, struct an_step_time, ss->whole_ix)->idle_by, by_cause);
		return;
	}
	/* No step yet, none open: the search finds none either. */
	if (!v->n && !ss->open)
		return;
	steptime_idle_search(a, s, e, by_cause);
}

/* Pieces held for the step that was open, filed now it has ended. */
static void steptime_settle(struct analysis *a)
{
	struct steptime_state *ss = an_pass_state(a, steptime);
	size_t n = ss->pending.n;
	if (!n || ss->open)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct an_step_time *p = VEC_AT(&ss->pending, struct an_step_time, i);
		steptime_idle(a, p->begin, p->end, p->idle_by);
	}
	ss->pending.n = 0;
}

int steptime_init(struct analysis *a)
{
	a->step_times.item = sizeof(struct an_step_time);
	an_pass_state(a, steptime)->whole_n = SIZE_MAX;
	an_pass_state(a, steptime)->pending.item = sizeof(struct an_step_time);
	if (a->opts.keep_timeline && !(a->tl = calloc(AN_TL_EVENTS, sizeof *a->tl)))
		return -1;
	return 0;
}

/* The devices a step is measured over: those with GPU work in the trace
 * (a device whose records come after a step's end mark still had its gap
 * pieces filed in the step). */
int steptime_finish(struct analysis *a)
{
	steptime_settle(a);
	unsigned n = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		n += d->kernels || d->copies || d->sets;
	}
	for (size_t i = 0; i < a->step_times.n; i++) {
		struct an_step_time *st = VEC_AT(&a->step_times, struct an_step_time, i);
		if (st->devices < n)
			st->devices = n;
		/* A step before a second WARMUP_END (the runner's measurement run
		 * twice) is outside the window that counts. */
		st->counted = phase_counts(a, st->phase) &&
			      (!a->markers_used || (st->begin >= a->win_begin && st->end <= a->win_end));
	}
	return 0;
}

void steptime_free(struct analysis *a)
{
	vec_free(&a->step_times);
	vec_free(&an_pass_state(a, steptime)->pending);
	free(a->tl);
	a->tl = NULL;
	a->tl_seen = 0;
}
