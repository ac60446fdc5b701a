/* Step detection's items (an_steps_detect.c) and their order.
 *
 * The work items reach the detection in the order they started (the steps
 * pass keeps them as the merge hands the records over), the spans in the
 * order they ended.  Both go into one array in start order; the work is
 * checked to be in order already (and sorted when a trace's records came
 * out of order), the spans, a few percent of the items, are sorted, and the
 * two are merged.  The order is the one a stable sort of the work followed
 * by the spans gives (glibc's qsort, a merge sort, was used before): equal
 * items keep their places, the work's before the spans'.
 * tests/analyze/test_steps_sort.c checks it against qsort. */
#ifndef TBANALYZE_AN_STEPS_DETECT_H
#define TBANALYZE_AN_STEPS_DETECT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sd_item {
	uint64_t ts, end, w; /* w: its share of the work (items_build) */
	uint32_t var;        /* 2 * its call path's index in scan.paths + 1 for a span */
	uint32_t tid;
};

static inline uint32_t sd_item_path(const struct sd_item *it)
{
	return it->var >> 1;
}

static inline int sd_item_span(const struct sd_item *it)
{
	return (int)(it->var & 1);
}

/* a goes strictly before b: it starts earlier, or at the same time and
 * ends later (a span before the work inside it that starts with it). */
static inline int sd_item_before(const struct sd_item *a, const struct sd_item *b)
{
	return a->ts < b->ts || (a->ts == b->ts && a->end > b->end);
}

/* The first of v[0..n) that some item goes before (n: they are in order). */
static inline size_t sd_items_unordered(const struct sd_item *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (sd_item_before(&v[i], &v[i - 1]))
			return i;
	return n;
}

/* a[0..na) and b[0..nb), each in order, into out: on a tie a's first. */
static inline void sd_items_merge(const struct sd_item *a, size_t na, const struct sd_item *b, size_t nb,
				  struct sd_item *out)
{
	size_t i = 0, j = 0, k = 0;
	if (na && nb && !sd_item_before(&b[0], &a[na - 1])) { /* already in order */
		memcpy(out, a, na * sizeof *a);
		memcpy(out + na, b, nb * sizeof *b);
		return;
	}
	while (i < na && j < nb)
		out[k++] = sd_item_before(&b[j], &a[i]) ? b[j++] : a[i++];
	if (i < na)
		memcpy(out + k, a + i, (na - i) * sizeof *a);
	if (j < nb)
		memcpy(out + k, b + j, (nb - j) * sizeof *b);
}

/* b[0..nb) merged into v, whose first na items are in order and which has
 * room for na + nb, from the back (no copy of v's): on a tie v's first. */
static inline void sd_items_merge_into(struct sd_item *v, size_t na, const struct sd_item *b, size_t nb)
{
	size_t i = na, j = nb, k = na + nb;
	while (j) {
		if (i && sd_item_before(&b[j - 1], &v[i - 1]))
			v[--k] = v[--i];
		else
			v[--k] = b[--j];
	}
}

/* A stable sort of v[0..n) (tmp: room for n).  First by insertion, while
 * the items moved stay under 8 a item: spans in end order are nearly in
 * start order (a span comes after the ones it holds: it moves past them),
 * so this is most often all; past that budget (the items left as they are
 * still in their first order among equals), runs of 16 by insertion, then
 * merged in pairs bottom-up. */
static inline void sd_items_sort(struct sd_item *v, size_t n, struct sd_item *tmp)
{
	size_t budget = 8 * n + 64;
	for (size_t i = 1; i < n; i++) {
		if (!sd_item_before(&v[i], &v[i - 1]))
			continue;
		struct sd_item x = v[i];
		size_t j = i;
		for (; j > 0 && sd_item_before(&x, &v[j - 1]) && budget; j--, budget--)
			v[j] = v[j - 1];
		v[j] = x;
		if (!budget)
			break;
	}
	if (budget)
		return;
	enum { RUN = 16 };
	for (size_t b = 0; b < n; b += RUN) {
		size_t e = b + RUN < n ? b + RUN : n;
		for (size_t i = b + 1; i < e; i++) {
			struct sd_item x = v[i];
			size_t j = i;
			for (; j > b && sd_item_before(&x, &v[j - 1]); j--)
				v[j] = v[j - 1];
			v[j] = x;
		}
	}
	struct sd_item *from = v, *to = tmp;
	for (size_t w = RUN; w < n; w *= 2) {
		for (size_t b = 0; b < n; b += 2 * w) {
			size_t m = b + w < n ? b + w : n, e = b + 2 * w < n ? b + 2 * w : n;
			sd_items_merge(from + b, m - b, from + m, e - m, to + b);
		}
		struct sd_item *t = from;
		from = to;
		to = t;
	}
	if (from != v)
		memcpy(v, from, n * sizeof *v);
}

#endif
