/*
 * The gaps pass's span index (analyze/an_gap_index.h) against plain scans:
 * an_span_tree_next finds the first slot in a range whose start is before a
 * time, an_span_tree_collect all of them (and a bound on the others'
 * starts: never above the earliest of them, never below the time),
 * AN_SPAN_FIRST_AFTER the first position whose (never decreasing)
 * max_end is after a time, from any hint; random rings, every answer
 * checked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "an_gap_index.h"

#define N AN_SPAN_TREE_SLOTS

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t ts[N], max_end[N];
static struct an_span_tree tree;

static size_t scan_next(size_t from, size_t end, uint64_t before)
{
	for (size_t s = from; s < end; s++)
		if (ts[s] < before)
			return s;
	return end;
}

#define MAX_END_AT(pos) (max_end[pos])

int main(void)
{
	unsigned long checks = 0, bad = 0;
	for (int round = 0; round < 40; round++) {
		an_span_tree_init(&tree);
		size_t filled = round % 4 ? N : 1 + next_rand() % N;
		for (size_t s = 0; s < N; s++)
			ts[s] = UINT64_MAX;
		/* Slots written in ring order, several laps, times mostly growing
		 * with a few long spans (early starts) among them. */
		uint64_t t = 1000;
		for (size_t k = 0; k < filled * (1 + round % 3); k++) {
			t += next_rand() % 50;
			uint64_t start = next_rand() % 16 ? t : t - next_rand() % (t + 1);
			ts[k % N] = start;
			an_span_tree_set(&tree, k % N, start);
		}
		for (int q = 0; q < 2000; q++) {
			size_t a = next_rand() % (N + 1), b = next_rand() % (N + 1);
			size_t from = a < b ? a : b, end = a < b ? b : a;
			uint64_t before = next_rand() % (t + 100);
			if (next_rand() % 4 == 0) /* ties: a start itself */
				before = ts[next_rand() % N];
			checks++;
			if (an_span_tree_next(&tree, from, end, before) != scan_next(from, end, before))
				bad++;
			/* collect: every such slot in order (a small cap now and then:
			 * counted past it, stored up to it), and the bound. */
			static uint16_t got[N];
			size_t cap = next_rand() % 8 == 0 ? next_rand() % 4 : N;
			uint64_t later = UINT64_MAX, step = next_rand() % 1000;
			if (next_rand() % 3 == 0 && before <= UINT64_MAX - step) /* a bound from before */
				later = before + step;
			uint64_t later_in = later, earliest_other = UINT64_MAX;
			size_t n = an_span_tree_collect(&tree, from, end, before, got, cap, &later);
			size_t want = 0;
			int wrong = 0;
			for (size_t s = from; s < end; s++) {
				if (ts[s] < before) {
					if (want < cap && want < n && got[want] != s)
						wrong = 1;
					want++;
				} else if (ts[s] < earliest_other) {
					earliest_other = ts[s];
				}
			}
			checks++;
			if (n != want || wrong || later > earliest_other || later > later_in || later < before) {
				if (bad < 5)
					fprintf(stderr, "collect [%zu,%zu) before=%llu: %zu slots (a scan: %zu)%s, bound %llu (earliest other %llu)\n",
						from, end, (unsigned long long)before, n, want, wrong ? ", others" : "",
						(unsigned long long)later, (unsigned long long)earliest_other);
				bad++;
			}
		}
		/* max_end: never decreasing, with runs of equal values. */
		uint64_t m = 0;
		for (size_t i = 0; i < N; i++) {
			if (next_rand() % 3)
				m += next_rand() % 20;
			max_end[i] = m;
		}
		for (int q = 0; q < 2000; q++) {
			size_t a = next_rand() % (N + 1), b = next_rand() % (N + 1);
			size_t lo = a < b ? a : b, hi = a < b ? b : a;
			uint64_t x = next_rand() % (m + 10);
			tree.first_hint = next_rand() % (N + 10);
			size_t want = lo;
			while (want < hi && max_end[want] <= x)
				want++;
			size_t got = AN_SPAN_FIRST_AFTER(&tree, lo, hi, x, MAX_END_AT);
			checks++;
			if (got != want) {
				if (bad < 5)
					fprintf(stderr, "first_after [%zu,%zu) t=%llu: %zu, a scan says %zu\n", lo, hi,
						(unsigned long long)x, got, want);
				bad++;
			}
		}
	}
	printf("%lu checks, %lu wrong\n", checks, bad);
	return bad != 0;
}
