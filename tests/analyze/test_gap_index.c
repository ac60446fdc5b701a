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
#include <string.h>

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

/* The span walk's answer kept across pieces (struct an_span_walk) against a
 * scan for every piece: a ring written position by position (ends mostly
 * growing, a few long spans), pieces mostly later than the one before, now
 * and then a span coming between them.  For each piece, the slots handed
 * out that may overlap it (start before its end, end after its start) must
 * be exactly those a scan of the ring's positions from the first that may
 * end after its start finds, in slot order. */
static uint64_t w_ts[N], w_end[N], w_maxend_pos[8 * N];
static struct an_span_walk walk;

#define W_END_AT(slot) (w_end[slot])
#define W_MAXEND_AT(pos) (w_maxend_pos[pos])

static unsigned long walk_checks(unsigned long *bad)
{
	unsigned long checks = 0;
	for (int round = 0; round < 6; round++) {
		an_span_tree_init(&tree);
		walk.ok = 0;
		for (size_t s = 0; s < N; s++)
			w_ts[s] = UINT64_MAX, w_end[s] = 0;
		size_t span_n = 0;
		uint64_t now = 1000, run_max = 0, piece_t = 900;
		size_t reused = 0, pieces = 0;
		/* Spans come as they end; the pieces trail behind them. */
		for (int step = 0; step < 12000; step++) {
			if (span_n < 64 || next_rand() % (round % 2 == 0 ? 2 : 8) == 0) {
				now += 1 + next_rand() % 40;
				uint64_t len = next_rand() % 10 ? 1 + next_rand() % 60 : next_rand() % (now + 1);
				uint64_t span_ts = now - (len < now ? len : now);
				size_t slot = span_n % N;
				w_ts[slot] = span_ts;
				w_end[slot] = now;
				an_span_tree_set(&tree, slot, span_ts);
				if (now > run_max)
					run_max = now;
				w_maxend_pos[span_n] = run_max;
				span_n++;
				continue;
			}
			/* A piece: mostly after the last one, now and then earlier;
			 * behind the spans, but not far. */
			if (now > 300 && piece_t < now - 300)
				piece_t = now - 300;
			uint64_t start = next_rand() % 8 ? piece_t + next_rand() % 20 : piece_t - next_rand() % 200;
			uint64_t end = start + 1 + next_rand() % 30;
			if (start > piece_t)
				piece_t = start;
			size_t lo = span_n > N ? span_n - N : 0;
			tree.first_hint = lo;
			size_t first = AN_SPAN_FIRST_AFTER(&tree, lo, span_n, start, W_MAXEND_AT);
			pieces++;
			if (an_span_walk_holds(&walk, span_n, start, end))
				reused++;
			else
				an_span_walk_find(&walk, &tree, first, span_n, start, end);
			static uint16_t got[N], want[N];
			size_t ng = 0, nw = 0;
			AN_SPAN_WALK_EACH(&walk, start, W_END_AT, slot, {
				if (w_ts[slot] < end && w_end[slot] > start)
					got[ng++] = (uint16_t)slot;
			});
			/* The positions [first, span_n) are a run of slots mod N:
			 * those, in slot order. */
			static unsigned char in_range[N];
			memset(in_range, 0, sizeof in_range);
			for (size_t p = first; p < span_n; p++)
				in_range[p % N] = 1;
			for (size_t slot = 0; slot < N; slot++)
				if (in_range[slot] && w_ts[slot] < end && w_end[slot] > start)
					want[nw++] = (uint16_t)slot;
			int wrong = ng != nw;
			for (size_t i = 0; !wrong && i < ng; i++)
				wrong = got[i] != want[i];
			checks++;
			if (wrong) {
				if (*bad < 5)
					fprintf(stderr, "walk: piece [%llu,%llu) of %zu spans: %zu slots handed out, a scan finds %zu\n",
						(unsigned long long)start, (unsigned long long)end, span_n, ng, nw);
				++*bad;
			}
		}
		if (!reused || reused == pieces) {
			fprintf(stderr, "walk: round %d reused %zu of %zu answers: the test does not exercise both paths\n",
				round, reused, pieces);
			++*bad;
		}
	}
	return checks;
}

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
	checks += walk_checks(&bad);
	printf("%lu checks, %lu wrong\n", checks, bad);
	return bad != 0;
}
