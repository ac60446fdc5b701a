/*
 * The gaps pass's index of its span ring: the earliest start of the spans in
 * each run of ring slots, as a binary tree over the slots (a segment tree of
 * minima), so that a gap piece visits only the spans that begin before it
 * ends, in slot order, at O(log slots) each, instead of scanning the slots
 * of every span that ended after it began.
 *
 * Why: spans reach the analysis as they end, long before the GPU records
 * of their time have left the merge, so nearly the whole ring lies after
 * any gap; the spans that matter to a gap are the few that overlap it.
 * (A ring in blocks, each with its earliest start, still walked every block:
 * one long span in a block, an iteration's own function, keeps it open.)
 */
#ifndef TBANALYZE_AN_GAP_INDEX_H
#define TBANALYZE_AN_GAP_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Slots of the ring the tree indexes: a power of two (the gaps pass's
 * SPAN_RING, checked there). */
#define AN_SPAN_TREE_SLOTS 4096

/* min_ts[1] is the root; node i has children 2i and 2i + 1; slot s is leaf
 * AN_SPAN_TREE_SLOTS + s.  An empty slot holds UINT64_MAX. */
struct an_span_tree {
	uint64_t min_ts[2 * AN_SPAN_TREE_SLOTS];
	/* Where the last search for the first span that may end after a time
	 * found it (a position, as the gaps pass counts them): gaps come in
	 * time order, so the next one is near (an_span_first_after). */
	size_t first_hint;
};

static inline void an_span_tree_init(struct an_span_tree *t)
{
	for (size_t i = 0; i < 2 * AN_SPAN_TREE_SLOTS; i++)
		t->min_ts[i] = UINT64_MAX;
}

/* Slot `slot` now holds a span starting at ts. */
static inline void an_span_tree_set(struct an_span_tree *t, size_t slot, uint64_t ts)
{
	size_t i = AN_SPAN_TREE_SLOTS + slot;
	t->min_ts[i] = ts;
	for (i >>= 1; i; i >>= 1) {
		uint64_t l = t->min_ts[2 * i], r = t->min_ts[2 * i + 1];
		uint64_t m = l < r ? l : r;
		if (t->min_ts[i] == m)
			break; /* so are all above it */
		t->min_ts[i] = m;
	}
}

/* The first slot in [from, end) whose span starts before `before`, else end. */
static inline size_t an_span_tree_next(const struct an_span_tree *t, size_t from, size_t end, uint64_t before)
{
	if (from >= end)
		return end;
	size_t i = AN_SPAN_TREE_SLOTS + from;
	/* Up and right until a subtree holds one (every subtree passed on the
	 * way covers only slots at or after `from`). */
	while (t->min_ts[i] >= before) {
		/* Up past every level where it is a right child, at once:
		 * its trailing ones, the trailing zeros of ~i (never zero:
		 * i < 2 * AN_SPAN_TREE_SLOTS). */
		i >>= __builtin_ctzll(~(unsigned long long)i);
		if (!i)
			return end; /* past the root */
		i++;
	}
	/* Down to its first such slot. */
	while (i < AN_SPAN_TREE_SLOTS) {
		i = 2 * i;
		if (t->min_ts[i] >= before)
			i++;
	}
	size_t slot = i - AN_SPAN_TREE_SLOTS;
	return slot < end ? slot : end;
}

/* The slots in [from, end) whose span starts before `before`, ascending,
 * into out[] (those past the first `cap` are counted, not stored); their
 * count is returned.  *later is lowered to at most the earliest start among
 * the range's other slots (a bound: it may be lower, never below `before`),
 * so that a caller asking again with a later `before` up to *later knows no
 * other slot of the range joins the answer.  The same walk as
 * an_span_tree_next's, keeping the minimum of every subtree it passes over. */
static inline size_t an_span_tree_collect(const struct an_span_tree *t, size_t from, size_t end, uint64_t before,
					  uint16_t *out, size_t cap, uint64_t *later)
{
	size_t n = 0;
	uint64_t skipped = *later;
	while (from < end) {
		size_t i = AN_SPAN_TREE_SLOTS + from;
		while (t->min_ts[i] >= before) {
			if (t->min_ts[i] < skipped)
				skipped = t->min_ts[i];
			i >>= __builtin_ctzll(~(unsigned long long)i);
			if (!i)
				goto done; /* past the root */
			i++;
		}
		while (i < AN_SPAN_TREE_SLOTS) {
			i = 2 * i;
			if (t->min_ts[i] >= before) {
				if (t->min_ts[i] < skipped)
					skipped = t->min_ts[i];
				i++;
			}
		}
		size_t slot = i - AN_SPAN_TREE_SLOTS;
		if (slot >= end)
			break;
		if (n < cap)
			out[n] = (uint16_t)slot;
		n++;
		from = slot + 1;
	}
done:
	*later = skipped;
	return n;
}

/* A span walk's answer kept for the gap pieces after it: a launch-bound
 * loop's pieces follow each other between two spans' starts, so the walk
 * would find the same slots again.  It serves a piece [start, end) while no
 * span came since (the same ring), the piece starts at or after `start` (its
 * first span that may end after its start is no earlier) and ends at or
 * before `later` (no other slot of the range starts before its end): the
 * slots that may overlap it are then among those kept, and the others kept
 * ended by its start or start at or after its end. */
struct an_span_walk {
	int ok;
	size_t n;       /* slots[0, n), in slot order */
	size_t span_n;  /* spans come (positions written) when it was found */
	uint64_t start; /* the latest start of a piece it served */
	uint64_t later; /* an_span_tree_collect's bound for the other slots */
	uint16_t slots[AN_SPAN_TREE_SLOTS];
};

static inline int an_span_walk_holds(const struct an_span_walk *w, size_t span_n, uint64_t start, uint64_t end)
{
	return w->ok && w->span_n == span_n && start >= w->start && end <= w->later;
}

/* A new answer for a piece [start, end): the slots of ring positions
 * [first, span_n) (position p in slot p % AN_SPAN_TREE_SLOTS; first: the
 * first that may end after start) whose span starts before end, in slot
 * order (as a scan of the whole ring meets them, wherever it wrapped). */
static inline void an_span_walk_find(struct an_span_walk *w, const struct an_span_tree *t, size_t first,
				     size_t span_n, uint64_t start, uint64_t end)
{
	size_t got = 0;
	uint64_t later = UINT64_MAX;
	if (first < span_n) {
		size_t lo = first % AN_SPAN_TREE_SLOTS, hi = span_n % AN_SPAN_TREE_SLOTS;
		if (lo < hi) {
			got = an_span_tree_collect(t, lo, hi, end, w->slots, AN_SPAN_TREE_SLOTS, &later);
		} else { /* wrapped (or the whole ring) */
			got = an_span_tree_collect(t, 0, hi, end, w->slots, AN_SPAN_TREE_SLOTS, &later);
			got += an_span_tree_collect(t, lo, AN_SPAN_TREE_SLOTS, end, w->slots + got,
						    AN_SPAN_TREE_SLOTS - got, &later);
		}
	}
	w->ok = 1;
	w->n = got;
	w->span_n = span_n;
	w->start = start;
	w->later = later;
}

/* body for each slot of answer w, bound to slot_var, for a piece starting
 * at start_, less the slots whose span ended by then (end_at(slot) <=
 * start_): dropped from the answer as well, which from then on serves
 * pieces starting at or after start_ only. */
#define AN_SPAN_WALK_EACH(w, start_, end_at, slot_var, body)                                                  \
	do {                                                                                                   \
		struct an_span_walk *w__ = (w);                                                                \
		uint64_t s__ = (start_);                                                                       \
		size_t kept__ = 0;                                                                             \
		for (size_t k__ = 0; k__ < w__->n; k__++) {                                                    \
			size_t slot_var = w__->slots[k__];                                                     \
			if (end_at(slot_var) <= s__)                                                           \
				continue;                                                                      \
			w__->slots[kept__++] = (uint16_t)slot_var;                                             \
			body;                                                                                  \
		}                                                                                              \
		w__->n = kept__;                                                                               \
		w__->start = s__;                                                                              \
	} while (0)

/* The first position in [lo, hi) whose max_end (max_end_at(pos): never
 * decreasing with the position) is after t, else hi: as a binary search
 * over [lo, hi) finds it, but galloping from the last answer, so that a
 * search near the last one costs a few steps instead of log2(hi - lo). */
#define AN_SPAN_FIRST_AFTER(tree, lo_, hi_, t, max_end_at)                                                  \
	({                                                                                                   \
		size_t lo__ = (lo_), hi__ = (hi_), h__ = (tree)->first_hint;                                  \
		if (h__ < lo__)                                                                               \
			h__ = lo__;                                                                           \
		if (h__ > hi__)                                                                               \
			h__ = hi__;                                                                           \
		/* Narrow [lo__, hi__) around the hint by doubling steps. */                                 \
		if (h__ < hi__ && max_end_at(h__) <= (t)) {                                                   \
			size_t step__ = 1;                                                                    \
			lo__ = h__ + 1;                                                                       \
			while (lo__ + step__ - 1 < hi__ && max_end_at(lo__ + step__ - 1) <= (t)) {            \
				lo__ += step__;                                                               \
				step__ *= 2;                                                                  \
			}                                                                                     \
			if (lo__ + step__ - 1 < hi__)                                                         \
				hi__ = lo__ + step__ - 1;                                                     \
		} else {                                                                                      \
			size_t step__ = 1;                                                                    \
			hi__ = h__;                                                                           \
			while (hi__ >= lo__ + step__ && max_end_at(hi__ - step__) > (t)) {                    \
				hi__ -= step__;                                                               \
				step__ *= 2;                                                                  \
			}                                                                                     \
			if (hi__ >= lo__ + step__)                                                            \
				lo__ = hi__ - step__ + 1;                                                     \
		}                                                                                             \
		while (lo__ < hi__) {                                                                         \
			size_t mid__ = lo__ + (hi__ - lo__) / 2;                                              \
			if (max_end_at(mid__) > (t))                                                          \
				hi__ = mid__;                                                                 \
			else                                                                                  \
				lo__ = mid__ + 1;                                                             \
		}                                                                                             \
		(tree)->first_hint = lo__;                                                                    \
		lo__;                                                                                         \
	})

#endif
