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
