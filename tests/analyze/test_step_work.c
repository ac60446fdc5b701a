/*
 * The steps pass's work items (analyze/an_pass_steps.h struct step_work:
 * 16 bytes, times relative to the item before in 32 bits, wider values
 * aside) against a plain model of what they stand for: consecutive work
 * of one call path and thread as one item, from the first's time to the
 * latest end, with the GPU time added to it.  Random calls to steps_work
 * and steps_gpu with times, lengths and GPU times past 32 bits, threads
 * that change, times that go back (records out of order) and ends before
 * their times; each item read back (steps_work_items) must be the model's
 * (its end no earlier than its time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_steps.h"

static int failures;

static uint64_t rnd_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(uint64_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return n ? rnd_state % n : rnd_state;
}

/* A length or distance: mostly short, some near and past 2^30, 2^31, 2^32. */
static uint64_t some_ns(void)
{
	static const uint64_t edges[] = {1ull << 30, 1ull << 31, (1ull << 31) - 1, (1ull << 32) - 1, 1ull << 32, 1ull << 40};
	switch (rnd(10)) {
	case 0:
		return edges[rnd(sizeof edges / sizeof edges[0])] - 2 + rnd(5);
	case 1:
		return rnd(1ull << 34);
	default:
		return rnd(5000);
	}
}

static void one_case(int round)
{
	struct steps_state ss;
	memset(&ss, 0, sizeof ss);
	ss.work.item = sizeof(struct step_work);
	ss.work_far.item = sizeof(uint64_t);
	ss.collect_on = 1;
	size_t cap = 1 + rnd(3000);
	struct step_item *model = calloc(cap, sizeof *model);
	size_t n = 0;
	uint64_t ts = rnd(2) ? rnd(1000) : rnd(1ull << 62);
	static const uint32_t tids[] = {0, 7, 8, 4000000, UINT32_MAX};
	uint32_t tid = tids[rnd(5)];
	uint64_t cp = rnd(4);
	for (size_t k = 0; k < cap; k++) {
		if (rnd(3) == 0) /* a GPU record of an item made so far */
			if (n) {
				uint32_t item = (uint32_t)(1 + rnd(n));
				uint64_t ns = some_ns();
				steps_gpu(&ss, item, ns);
				model[item - 1].gpu_ns += ns;
			}
		if (rnd(4) == 0)
			cp = rnd(6);
		if (rnd(8) == 0)
			tid = tids[rnd(5)];
		if (rnd(40) == 0 && ts > 1000000)
			ts -= rnd(1000000); /* out of order */
		else
			ts += some_ns();
		uint64_t end = rnd(30) ? ts + some_ns() : ts - rnd(ts < 100 ? ts + 1 : 100);
		uint32_t got = steps_work(&ss, tid, ts, end, cp);
		if (n && model[n - 1].cp == cp && model[n - 1].tid == tid) {
			if (end > model[n - 1].end)
				model[n - 1].end = end;
		} else {
			model[n++] = (struct step_item){.ts = ts, .end = end, .cp = (uint32_t)cp, .tid = tid};
		}
		if (got != n) {
			fprintf(stderr, "FAIL round %d: steps_work answered item %u, the model %zu\n", round, got, n);
			failures++;
			break;
		}
	}
	struct vec out;
	if (ss.work.n != n || steps_work_items(&ss, &out)) {
		fprintf(stderr, "FAIL round %d: %zu items kept, the model has %zu\n", round, ss.work.n, n);
		failures++;
	} else {
		for (size_t i = 0; i < n; i++) {
			const struct step_item *g = VEC_AT(&out, struct step_item, i), *m = &model[i];
			uint64_t m_end = m->end < m->ts ? m->ts : m->end;
			if (g->ts != m->ts || g->end != m_end || g->gpu_ns != m->gpu_ns || g->cp != m->cp || g->tid != m->tid) {
				fprintf(stderr,
					"FAIL round %d item %zu: ts %llu end %llu gpu %llu cp %u tid %u, the model's "
					"%llu %llu %llu %u %u\n",
					round, i, (unsigned long long)g->ts, (unsigned long long)g->end,
					(unsigned long long)g->gpu_ns, g->cp, g->tid, (unsigned long long)m->ts,
					(unsigned long long)m_end, (unsigned long long)m->gpu_ns, m->cp, m->tid);
				failures++;
				break;
			}
		}
		vec_free(&out);
	}
	vec_free(&ss.work);
	vec_free(&ss.work_far);
	u64map_free(&ss.work_gpu_far);
	free(model);
}

int main(void)
{
	for (int round = 0; round < 3000; round++)
		one_case(round);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("step work items: 3000 random runs read back as kept\n");
	return 0;
}
