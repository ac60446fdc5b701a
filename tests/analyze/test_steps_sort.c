/*
 * Step detection's order of its items (analyze/an_steps_detect.h) against
 * qsort: random work items (in order, nearly in order, shuffled) and spans
 * (in end order, as the steps pass keeps them), with many equal starts and
 * ends, put into start order by the detection's sort and merge, must come
 * out as qsort puts them with the items' original places as the last key:
 * the order a stable sort gives (the work's before the spans' on a tie).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_steps_detect.h"

static int failures;

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state % n;
}

/* start, the longer first, then the original place (w) */
static int stable_cmp(const void *x, const void *y)
{
	const struct sd_item *a = x, *b = y;
	if (sd_item_before(a, b))
		return -1;
	if (sd_item_before(b, a))
		return 1;
	return a->w < b->w ? -1 : a->w > b->w;
}

static int end_cmp(const void *x, const void *y)
{
	const struct sd_item *a = x, *b = y;
	return a->end < b->end ? -1 : a->end > b->end;
}

static void check(const char *what, const struct sd_item *got, const struct sd_item *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof got[i])) {
			fprintf(stderr, "FAIL %s: n %zu, item %zu: got (ts %llu end %llu place %llu) want (%llu %llu %llu)\n",
				what, n, i, (unsigned long long)got[i].ts, (unsigned long long)got[i].end,
				(unsigned long long)got[i].w, (unsigned long long)want[i].ts,
				(unsigned long long)want[i].end, (unsigned long long)want[i].w);
			failures++;
			return;
		}
}

static void item_at(struct sd_item *it, uint64_t range, size_t place, int span)
{
	memset(it, 0, sizeof *it);
	it->ts = rnd(range);
	it->end = it->ts + rnd(range / 4 + 2);
	it->w = place;
	it->var = (uint32_t)rnd(7) << 1 | (uint32_t)span;
	it->tid = (uint32_t)rnd(3);
}

/* nw work items in a given shape, ns spans in end order: the detection's
 * way (sorted if out of order, spans sorted, merged) against qsort. */
static void one(size_t nw, size_t ns, uint64_t range, int shape)
{
	size_t n = nw + ns;
	struct sd_item *v = calloc(n + 1, sizeof *v), *want = calloc(n + 1, sizeof *v), *tmp = calloc(n + 1, sizeof *v);
	if (!v || !want || !tmp) {
		fprintf(stderr, "FAIL out of memory\n");
		failures++;
		exit(1);
	}
	for (size_t i = 0; i < nw; i++)
		item_at(&v[i], range, 0, 0);
	if (shape != 2) /* 0: in order; 1: in order but for a few swaps; 2: shuffled */
		qsort(v, nw, sizeof *v, stable_cmp);
	for (size_t k = 0; shape == 1 && nw > 1 && k < 1 + nw / 50; k++) {
		size_t i = rnd(nw - 1);
		struct sd_item t = v[i];
		v[i] = v[i + 1];
		v[i + 1] = t;
	}
	for (size_t i = 0; i < ns; i++)
		item_at(&v[nw + i], range, 0, 1);
	qsort(v + nw, ns, sizeof *v, end_cmp);
	for (size_t i = 0; i < n; i++)
		v[i].w = i; /* the original place, to see ties kept in it */
	memcpy(want, v, n * sizeof *v);
	qsort(want, n, sizeof *want, stable_cmp);

	if (sd_items_unordered(v, nw) != nw)
		sd_items_sort(v, nw, tmp);
	else if (shape == 2 && nw > 20)
		fprintf(stderr, "note: shuffled work of %zu came out in order\n", nw);
	sd_items_sort(v + nw, ns, tmp);
	memcpy(tmp, v + nw, ns * sizeof *tmp);
	sd_items_merge_into(v, nw, tmp, ns);
	check("sort and merge", v, want, n);

	/* the sort alone, on the whole (out of order) array */
	for (size_t i = 0; i < n; i++)
		item_at(&v[i], range, i, (int)rnd(2));
	memcpy(want, v, n * sizeof *v);
	qsort(want, n, sizeof *want, stable_cmp);
	sd_items_sort(v, n, tmp);
	check("sort", v, want, n);
	free(v);
	free(want);
	free(tmp);
}

int main(void)
{
	static const size_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 100, 1000, 4097, 30000};
	static const uint64_t ranges[] = {3, 20, 1000, 1ull << 40};
	for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
		for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b += 3)
			for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++)
				for (int shape = 0; shape < 3; shape++)
					one(sizes[a], sizes[b], ranges[r], shape);
	/* already in order: the merge's shortcut */
	struct sd_item a[4] = {{.ts = 1, .end = 5}, {.ts = 2, .end = 3}, {.ts = 2, .end = 3, .w = 1}, {.ts = 4, .end = 4}};
	struct sd_item out[4];
	sd_items_merge(a, 2, a + 2, 2, out);
	check("merge in order", out, a, 4);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("step detection's item order: sort and merge agree with qsort\n");
	return 0;
}
