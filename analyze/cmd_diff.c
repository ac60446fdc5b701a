/*
 * tbanalyze diff A.zst B.zst [--threshold PCT] [--json]
 *
 * Analyses both traces and compares, per iteration when both carry the
 * runner's iteration markers (else per trace): the window, GPU busy time,
 * every kernel (by name) and every call site (by its whole Python path, or
 * native module+offset) by GPU time (host API time for API-only traces),
 * and peak device memory; for a CPU run (no GPU work in either trace),
 * every Python call path by host self time from the spans.  A metric
 * regresses when B exceeds A by more than the threshold (default 7 %, as
 * the paper's CI) and the item matters: at least --min-share percent
 * (default 1) of the larger total for kernels, call sites and paths.
 * Exit 1 on a regression (pinned), 0 otherwise.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "cmd.h"

struct item {
	char *key;
	int type; /* 0 overall, 1 kernel, 2 call site, 3 memory, 4 Python path (CPU runs) */
	double a, b;
	int over;      /* B worse than A by more than the threshold, on an item that matters */
	int regressed; /* what the verdict rests on: with steps, the time per step alone */
};

struct items {
	struct item *v;
	size_t n, cap;
};

static struct item *item_get(struct items *it, int type, const char *key)
{
	for (size_t i = 0; i < it->n; i++)
		if (it->v[i].type == type && !strcmp(it->v[i].key, key))
			return &it->v[i];
	if (it->n == it->cap) {
		size_t nc = it->cap ? 2 * it->cap : 64;
		struct item *nv = realloc(it->v, nc * sizeof *nv);
		if (!nv)
			return NULL;
		it->v = nv;
		it->cap = nc;
	}
	struct item *x = &it->v[it->n++];
	memset(x, 0, sizeof *x);
	x->key = strdup(key);
	x->type = type;
	return x->key ? x : (it->n--, NULL);
}

static const char *type_name(int t)
{
	static const char *n[] = {"overall", "kernel", "call_site", "memory", "python_path"};
	return n[t];
}

/* Per-iteration divisor: both traces marked, else 1. */
static double per(const struct analysis *a, const struct analysis *b, const struct analysis *x)
{
	if (a->markers_used && b->markers_used && a->iterations && b->iterations)
		return (double)x->iterations;
	return 1.0;
}

/* No GPU work at all: what a CPU run is judged by is its host time. */
static int cpu_run(const struct analysis *x)
{
	return !an_has_gpu(x) && !(x->n_launch + x->n_memcpy + x->n_memset);
}

static int collect(struct items *it, const struct analysis *x, int side, double div, int cpu, int steps)
{
	char key[2048];
	struct item *e;
#define PUT(type, k, val)                                  \
	do {                                               \
		if (!(e = item_get(it, type, k)))          \
			return -1;                         \
		*(side ? &e->b : &e->a) += (val) / div;    \
	} while (0)
	PUT(0, "window_ns", (double)x->total.window_ns);
	if (steps) {
		if (!(e = item_get(it, 0, "time_per_step_ns")))
			return -1;
		*(side ? &e->b : &e->a) = (double)x->steps.median_ns; /* already per step */
	}
	if (an_has_gpu(x)) {
		PUT(0, "gpu_busy_ns", (double)x->total.busy_ns);
		PUT(0, "gpu_active_ns", (double)x->total.active_ns);
		PUT(0, "data_movement_ns", (double)x->total.dm_ns);
		PUT(0, "gpu_idle_ns", (double)x->total.idle_ns);
	}
	for (size_t i = 0; i < x->kernels.n; i++) {
		const struct an_kernel_stat *k = VEC_AT(&x->kernels, struct an_kernel_stat, i);
		size_t nl;
		const char *name = an_string(x, k->name, &nl);
		snprintf(key, sizeof key, "%.*s", name ? (int)(nl > 2000 ? 2000 : nl) : 9, name ? name : "(unnamed)");
		PUT(1, key, (double)k->total_ns);
	}
	int gpu = an_has_gpu(x);
	for (size_t i = 0; i < x->sites.n; i++) {
		const struct an_site_stat *s = VEC_AT(&x->sites, struct an_site_stat, i);
		an_site_key(x, s->callpath, s->native, key, sizeof key);
		PUT(2, key, (double)(gpu ? s->gpu_ns : s->api_ns));
		if (s->alloc_bytes) {
			size_t kl = strlen(key);
			snprintf(key + kl, sizeof key - kl, " allocated bytes");
			PUT(3, key, (double)s->alloc_bytes);
		}
	}
	/* Self time, not inclusive: the paths' times add up to the host's, so
	 * a share is a share of the run and a slower callee is not also
	 * blamed on every caller. */
	for (size_t i = 0; cpu && i < x->spans.n; i++) {
		const struct an_span_stat *sp = VEC_AT(&x->spans, struct an_span_stat, i);
		an_site_key(x, sp->callpath, 0, key, sizeof key);
		PUT(4, key, (double)sp->self_ns);
	}
	for (size_t i = 0; i < x->devices.n; i++) {
		const struct an_device *d = VEC_AT(&x->devices, struct an_device, i);
		if (!d->allocs)
			continue;
		snprintf(key, sizeof key, "device %" PRIu64 " peak bytes", d->id);
		if (!(e = item_get(it, 3, key)))
			return -1;
		*(side ? &e->b : &e->a) += (double)d->mem_peak; /* a peak, not per iteration */
	}
#undef PUT
	return 0;
}

static double change_pct(const struct item *x)
{
	if (x->a == 0)
		return x->b == 0 ? 0.0 : INFINITY;
	return 100.0 * (x->b - x->a) / x->a;
}

static int cmp_item(const void *p, const void *q)
{
	const struct item *x = p, *y = q;
	if (x->regressed != y->regressed)
		return y->regressed - x->regressed;
	double dx = fabs(x->b - x->a), dy = fabs(y->b - y->a);
	if (dx != dy)
		return dx < dy ? 1 : -1;
	return strcmp(x->key, y->key);
}

static const char *verdict(const struct item *head, double threshold)
{
	double c = change_pct(head);
	return c > threshold ? "regressed" : c < -threshold ? "improved" : "unchanged";
}

static const struct item *find_item(const struct items *it, const char *key)
{
	for (size_t i = 0; i < it->n; i++)
		if (it->v[i].type == 0 && !strcmp(it->v[i].key, key))
			return &it->v[i];
	return NULL;
}

/* The headline: time per step, with what the GPU did per step beside it. */
static void text_headline(const struct item *head, const struct items *it, const struct analysis *a,
			  const struct analysis *b, double threshold)
{
	printf("time per step: %.3f ms -> %.3f ms (%+.1f%%): %s  [steps: %s %" PRIu64 ", %s %" PRIu64 "]\n",
	       head->a / 1e6, head->b / 1e6, change_pct(head), verdict(head, threshold),
	       an_steps_source_name(a->steps.source), a->steps.count - a->steps.warmup,
	       an_steps_source_name(b->steps.source), b->steps.count - b->steps.warmup);
	static const char *const beside[][2] = {
		{"gpu_busy_ns", "GPU busy"}, {"data_movement_ns", "data movement"}, {"gpu_idle_ns", "GPU idle"}};
	printf("  per step:");
	for (size_t k = 0; k < 3; k++) {
		const struct item *x = find_item(it, beside[k][0]);
		if (x)
			printf("  %s %.3f -> %.3f ms", beside[k][1], x->a / 1e6, x->b / 1e6);
	}
	printf("\n  what changed (explanation; only the time per step decides):\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze diff A.zst B.zst [--threshold PCT] [--min-share PCT] [--json] [options]\n"
		   "  --threshold PCT   regression when B is slower/larger than A by more (default 7)\n"
		   "  --min-share PCT   kernels/call sites below this share of the total are not judged (default 1)\n"
		   "%s",
		an_opts_help);
}

/* "tbanalyze: --OPTION: VALUE: REASON" (exit 3).  A threshold is a change
 * in percent (B may be many times A); a share is a part of a total. */
static int parse_pct(const char *opt, const char *s, double max, double *out)
{
	if (!s) {
		fprintf(stderr, "tbanalyze: %s: value missing (a percentage from 0 to %g)\n", opt, max);
		return -1;
	}
	char *end;
	double v = strtod(s, &end);
	if (!*s || *end || end == s || v != v) {
		fprintf(stderr, "tbanalyze: %s: %s: not a number\n", opt, s);
		return -1;
	}
	if (!(v >= 0) || v > max) {
		fprintf(stderr, "tbanalyze: %s: %s: out of range (0 to %g)\n", opt, s, max);
		return -1;
	}
	*out = v;
	return 0;
}

int cmd_diff(int argc, char **argv)
{
	struct an_opts opts;
	an_opts_default(&opts);
	const char *paths[2] = {NULL, NULL};
	double threshold = 7.0, min_share = 1.0;
	int json = 0, npaths = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			usage(stdout);
			return TBA_EXIT_OK;
		}
		if (!strcmp(arg, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(arg, "--threshold") || !strcmp(arg, "--min-share")) {
			int thr = arg[2] == 't';
			if (parse_pct(arg, i + 1 < argc ? argv[i + 1] : NULL, thr ? 10000 : 100, thr ? &threshold : &min_share))
				return TBA_EXIT_USAGE;
			i++;
			continue;
		}
		if (!strncmp(arg, "--threshold=", 12) || !strncmp(arg, "--min-share=", 12)) {
			int thr = arg[2] == 't';
			if (parse_pct(thr ? "--threshold" : "--min-share", arg + 12, thr ? 10000 : 100,
				      thr ? &threshold : &min_share))
				return TBA_EXIT_USAGE;
			continue;
		}
		int r = an_parse_opt(argc, argv, &i, &opts);
		if (r < 0)
			return TBA_EXIT_USAGE;
		if (r)
			continue;
		if (arg[0] == '-' && arg[1]) {
			fprintf(stderr, "tbanalyze: diff: unknown option %s\n", arg);
			usage(stderr);
			return TBA_EXIT_USAGE;
		}
		if (npaths == 2) {
			fprintf(stderr, "tbanalyze: diff: two traces, not more\n");
			return TBA_EXIT_USAGE;
		}
		paths[npaths++] = arg;
	}
	if (npaths != 2) {
		usage(stderr);
		return TBA_EXIT_USAGE;
	}

	struct analysis an[2];
	memset(an, 0, sizeof an);
	for (int s = 0; s < 2; s++) {
		int rc = an_run(&an[s], paths[s], &opts);
		if (rc) {
			an_free(&an[0]);
			if (s)
				an_free(&an[1]);
			return rc;
		}
	}
	struct items it = {0};
	int cpu = cpu_run(&an[0]) && cpu_run(&an[1]);
	/* Both runs have steps (marks or detected): the verdict is the time per
	 * step, what the user waits for; the rest explains it. */
	int steps = an[0].steps.source && an[1].steps.source && an[0].steps.median_ns && an[1].steps.median_ns;
	int bad = collect(&it, &an[0], 0, per(&an[0], &an[1], &an[0]), cpu, steps) ||
		  collect(&it, &an[1], 1, per(&an[0], &an[1], &an[1]), cpu, steps);
	if (bad) {
		fprintf(stderr, "tbanalyze: diff: out of memory\n");
		an_free(&an[0]);
		an_free(&an[1]);
		return TBA_EXIT_INTERNAL;
	}
	/* Totals that shares are measured against, per type. */
	double tot_b[5] = {0}, tot_a[5] = {0};
	for (size_t i = 0; i < it.n; i++) {
		tot_a[it.v[i].type] += it.v[i].a;
		tot_b[it.v[i].type] += it.v[i].b;
	}
	int regressions = 0;
	for (size_t i = 0; i < it.n; i++) {
		struct item *x = &it.v[i];
		double share_base = x->type == 1 || x->type == 2 || x->type == 4
			? (tot_a[x->type] > tot_b[x->type] ? tot_a[x->type] : tot_b[x->type]) : 0;
		int matters = share_base == 0 || (x->a > x->b ? x->a : x->b) * 100.0 >= min_share * share_base;
		if (x->type == 3 && strstr(x->key, " allocated bytes"))
			matters = 0; /* allocation volume is reported; peaks decide */
		if (x->type == 0 && strcmp(x->key, "window_ns") && strcmp(x->key, "gpu_busy_ns") &&
		    strcmp(x->key, "time_per_step_ns"))
			matters = 0; /* components are reported, the verdict rests on wall and busy time */
		x->over = matters && x->b > x->a && change_pct(x) > threshold;
		x->regressed = steps ? x->type == 0 && !strcmp(x->key, "time_per_step_ns") && x->over : x->over;
		regressions += x->regressed;
	}
	struct item *tps = NULL;
	for (size_t i = 0; steps && i < it.n; i++)
		if (it.v[i].type == 0 && !strcmp(it.v[i].key, "time_per_step_ns"))
			tps = &it.v[i];
	struct item head = tps ? *tps : (struct item){0};
	qsort(it.v, it.n, sizeof *it.v, cmp_item);

	if (json) {
		printf("{\"schema\":\"tbprof-diff\",\"schema_version\":1,\"a\":");
		json_str(stdout, paths[0], strlen(paths[0]));
		printf(",\"b\":");
		json_str(stdout, paths[1], strlen(paths[1]));
		printf(",\"threshold_pct\":%.3f,\"per_iteration\":%s,\"regression\":%s,\"regressions\":%d",
		       threshold, an[0].markers_used && an[1].markers_used && an[0].iterations && an[1].iterations ? "true" : "false",
		       regressions ? "true" : "false", regressions);
		if (tps) {
			double c = change_pct(&head);
			printf(",\"judged_by\":\"time_per_step\",\"time_per_step\":{\"a_ns\":%.0f,\"b_ns\":%.0f,\"change_pct\":%.3f"
			       ",\"source_a\":\"%s\",\"source_b\":\"%s\",\"verdict\":\"%s\"}",
			       head.a, head.b, isinf(c) ? 0.0 : c, an_steps_source_name(an[0].steps.source),
			       an_steps_source_name(an[1].steps.source), verdict(&head, threshold));
		} else {
			printf(",\"judged_by\":\"items\",\"time_per_step\":null");
		}
		printf(",\"changes\":[");
		for (size_t i = 0; i < it.n; i++) {
			const struct item *x = &it.v[i];
			double c = change_pct(x);
			printf("%s\n {\"type\":\"%s\",\"name\":", i ? "," : "", type_name(x->type));
			json_str(stdout, x->key, strlen(x->key));
			printf(",\"a\":%.0f,\"b\":%.0f,", x->a, x->b);
			if (isinf(c))
				printf("\"change_pct\":null");
			else
				printf("\"change_pct\":%.3f", c);
			printf(",\"regressed\":%s,\"over_threshold\":%s}", x->regressed ? "true" : "false",
			       x->over ? "true" : "false");
		}
		printf("]}\n");
	} else {
		printf("tbanalyze diff: A=%s B=%s (threshold %.1f%%%s%s)\n", paths[0], paths[1], threshold,
		       an[0].markers_used && an[1].markers_used ? ", per iteration" : "",
		       cpu ? "; CPU runs: host self time by Python path" : "");
		if (tps)
			text_headline(&head, &it, &an[0], &an[1], threshold);
		size_t shown = 0;
		for (size_t i = 0; i < it.n && shown < 30; i++) {
			const struct item *x = &it.v[i];
			if (x->a == x->b)
				continue;
			double c = change_pct(x);
			char pc[32];
			if (isinf(c))
				snprintf(pc, sizeof pc, "new");
			else
				snprintf(pc, sizeof pc, "%+.1f%%", c);
			printf("%s %-9s %8s  %14.0f -> %14.0f %s  %.160s\n",
			       x->regressed ? "REGRESSED" : x->over ? "   grew  " : "         ",
			       type_name(x->type), pc, x->a, x->b, x->type == 3 ? "B " : "ns", x->key);
			shown++;
		}
		if (!shown)
			printf("no differences\n");
		if (tps)
			printf("verdict: %s (time per step %+.1f%%, threshold %.1f%%)\n",
			       regressions ? "REGRESSION" : head.b < head.a ? "improved, no regression" : "no regression",
			       change_pct(&head), threshold);
		else if (regressions)
			printf("verdict: REGRESSION (%d item%s slower or larger by more than %.1f%%)\n", regressions,
			       regressions == 1 ? "" : "s", threshold);
		else
			printf("verdict: no regression beyond %.1f%%\n", threshold);
	}
	for (size_t i = 0; i < it.n; i++)
		free(it.v[i].key);
	free(it.v);
	an_free(&an[0]);
	an_free(&an[1]);
	if (fflush(stdout)) {
		fprintf(stderr, "tbanalyze: write error on standard output\n");
		return TBA_EXIT_INTERNAL;
	}
	return regressions ? TBA_EXIT_REGRESSION : TBA_EXIT_OK;
}
