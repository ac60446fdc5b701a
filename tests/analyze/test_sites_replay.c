/*
 * an_sites_replay (analyze/an_passes.c), which decides a detected loop's
 * warm-up before the analysis with the steps marked, against the steps as
 * intervals: a call at t is in step i (1-based) when begin_i <= t < end_i,
 * as the marks the steps pass emits before a record (those at or before its
 * time, each step's begin then its end) put it.  Random logs of calls and
 * graph launches on random steps (adjacent, apart, empty, calls on their
 * bounds), each site's first, last and count of steps and the graph
 * launches' first and count compared; and a log that cannot answer (records
 * out of order, an entry lost, no log) says so.  The calls go into the log
 * through its writer (an_site_log_add), at times scaled so that distances
 * past 32 bits of nanoseconds (the log's SITE_LOG_SKIP entries) occur.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_services.h"

static int failures;

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state % n;
}

struct expect {
	uint64_t first, last, iters;
};

/* The steps a call at t is in, by the intervals (0: none). */
static uint64_t step_of(const struct an_step *steps, size_t n, uint64_t t)
{
	for (size_t i = 0; i < n; i++)
		if (steps[i].begin <= t && t < steps[i].end)
			return i + 1;
	return 0;
}

static void note(struct expect *e, uint64_t step)
{
	if (!step)
		return;
	if (!e->iters)
		e->first = step;
	if (e->last != step)
		e->iters++;
	e->last = step;
}

static void one_case(int round)
{
	struct analysis a;
	memset(&a, 0, sizeof a);
	struct an_state *st = calloc(1, sizeof *st);
	a.st = st;
	a.sites.item = sizeof(struct an_site_stat);
	st->site_log.item = sizeof(struct site_log_ent);
	st->site_log_on = 1;
	size_t nsites = 1 + rnd(6);
	for (size_t i = 0; i < nsites; i++)
		vec_push(&a.sites);

	/* Times: a base and a unit, some units past the log's 32 bits of
	 * distance (one, two or several SITE_LOG_SKIP entries between calls). */
	static const uint64_t units[] = {1, 1000, (1ull << 31) + 7, (1ull << 32) - 1, 1ull << 32, (3ull << 32) + 5};
	uint64_t unit = units[rnd(sizeof units / sizeof units[0])];
	uint64_t base = rnd(2) ? 0 : rnd(1ull << 62);
	/* Steps in time order: adjacent, apart or empty. */
	size_t n = 2 + rnd(12);
	struct an_step *steps = calloc(n, sizeof *steps);
	uint64_t t = rnd(5);
	for (size_t i = 0; i < n; i++) {
		if (rnd(2))
			t += rnd(4);
		steps[i].begin = base + t * unit;
		t += rnd(8) ? 1 + rnd(6) : 0;
		steps[i].end = base + t * unit;
	}
	/* Calls in time order, many on a step's bounds. */
	struct expect *want = calloc(nsites + 1, sizeof *want); /* [0]: graph launches */
	size_t ncalls = rnd(80);
	uint64_t now = 0, last_ts = 0;
	for (size_t k = 0; k < ncalls; k++) {
		now += rnd(3);
		if (rnd(4) == 0) {
			const struct an_step *s = &steps[rnd(n)];
			uint64_t bound = (rnd(2) ? s->begin : s->end) - base;
			if (bound >= now * unit)
				now = bound / unit;
		}
		uint32_t site = (uint32_t)rnd(nsites + 1); /* 0: a graph launch */
		uint64_t ts = base + now * unit + (unit > 1 && rnd(3) == 0 ? rnd(unit) : 0);
		if (ts < last_ts) /* (in time order) */
			ts = last_ts;
		last_ts = ts;
		an_site_log_add(&a, ts, site);
		note(&want[site], step_of(steps, n, ts));
	}
	/* Counts left by an earlier analysis are replaced. */
	VEC_AT(&a.sites, struct an_site_stat, 0)->iters = 99;
	a.graph_launch_all_iters = 99;

	if (an_sites_replay(&a, steps, n)) {
		fprintf(stderr, "FAIL round %d: a log kept whole could not answer\n", round);
		failures++;
	}
	for (size_t i = 0; i < nsites; i++) {
		const struct an_site_stat *ss = VEC_AT(&a.sites, struct an_site_stat, i);
		const struct expect *w = &want[i + 1];
		if (ss->iters != w->iters || (w->iters && (ss->first_iter != w->first || ss->last_iter != w->last))) {
			fprintf(stderr,
				"FAIL round %d site %zu: steps %llu first %llu last %llu, the intervals say %llu, %llu, %llu\n",
				round, i, (unsigned long long)ss->iters, (unsigned long long)ss->first_iter,
				(unsigned long long)ss->last_iter, (unsigned long long)w->iters,
				(unsigned long long)w->first, (unsigned long long)w->last);
			failures++;
		}
	}
	if (a.graph_launch_all_iters != want[0].iters ||
	    (want[0].iters && a.graph_launch_first_iter != want[0].first)) {
		fprintf(stderr, "FAIL round %d graph launches: steps %llu first %llu, the intervals say %llu, %llu\n", round,
			(unsigned long long)a.graph_launch_all_iters, (unsigned long long)a.graph_launch_first_iter,
			(unsigned long long)want[0].iters, (unsigned long long)want[0].first);
		failures++;
	}

	if (st->site_log_lost || !st->site_log_on) {
		fprintf(stderr, "FAIL round %d: the log of calls in time order was lost\n", round);
		failures++;
	}
	/* Logs that cannot answer: a call earlier than the one before ends it. */
	if (ncalls && now) {
		an_site_log_add(&a, base + (now - 1) * unit, 1);
		if (!an_sites_replay(&a, steps, n)) {
			fprintf(stderr, "FAIL round %d: answered with a call earlier than the one before\n", round);
			failures++;
		}
		if (!st->site_log_lost || st->site_log_on) {
			fprintf(stderr, "FAIL round %d: a call earlier than the one before did not end the log\n", round);
			failures++;
		}
		st->site_log_lost = 0;
		st->site_log_on = 1;
	}
	a.late_records = 1;
	if (!an_sites_replay(&a, steps, n)) {
		fprintf(stderr, "FAIL round %d: answered with records out of time order\n", round);
		failures++;
	}
	a.late_records = 0;
	st->site_log_lost = 1;
	if (!an_sites_replay(&a, steps, n)) {
		fprintf(stderr, "FAIL round %d: answered with an entry lost\n", round);
		failures++;
	}
	st->site_log_lost = 0;
	st->site_log_on = 0;
	if (!an_sites_replay(&a, steps, n)) {
		fprintf(stderr, "FAIL round %d: answered without a log\n", round);
		failures++;
	}

	vec_free(&st->site_log);
	vec_free(&a.sites);
	free(st);
	free(steps);
	free(want);
}

int main(void)
{
	for (int round = 0; round < 20000; round++)
		one_case(round);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("an_sites_replay: 20000 random logs counted as the steps' intervals say\n");
	return 0;
}
