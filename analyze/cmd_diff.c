/*
 * tbanalyze diff A.zst B.zst [--threshold PCT] [--json]
 *
 * Analyses both traces and compares, per iteration when both carry the
 * runner's iteration markers (else per trace): the time per step when both
 * have steps (the per-step times of the two runs: a Mann-Whitney U test,
 * the Hodges-Lehmann ratio and its interval, an_stats.h), the window, GPU busy time,
 * every kernel (by name) and every call site (by its whole Python path, or
 * native module+offset) by GPU time (host API time for API-only traces),
 * and peak device memory; for a CPU run (no GPU work in either trace),
 * every Python call path by host self time from the spans.  A metric
 * regresses when B exceeds A by more than the threshold (default 7 %, as
 * the paper's CI) and the item matters: at least --min-share percent
 * (default 1) of the larger total for kernels, call sites and paths.
 * With steps, only the time per step decides: B regressed when its steps
 * are significantly slower (p < 0.05) AND the estimated ratio is more than
 * the threshold slower; with fewer than 5 steps a side the medians alone,
 * said so.  Exit 1 on a regression (pinned), 0 otherwise.
 *
 * Call sites and paths are keyed by their frames (file as displayed, line,
 * function), A's lines at B's files and lines where diff_match.c matched
 * them: a renamed file (train.py against train_v2.py), lines moved by an
 * edit.  diff_compute fills a struct diff (diff.h) that a reporter prints:
 * rows ordered by their change per step, memory only when a peak changed,
 * warnings when the two traces may count steps differently.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_diff_html.h"
#include "an_stats.h"
#include "cmd.h"
#include "diff.h"
#include "tr_common.h"

static struct diff_item *item_get(struct diff_items *it, int type, const char *key)
{
	for (size_t i = 0; i < it->n; i++)
		if (it->v[i].type == type && !strcmp(it->v[i].key, key))
			return &it->v[i];
	if (it->n == it->cap) {
		size_t nc = it->cap ? 2 * it->cap : 64;
		struct diff_item *nv = realloc(it->v, nc * sizeof *nv);
		if (!nv)
			return NULL;
		it->v = nv;
		it->cap = nc;
	}
	struct diff_item *x = &it->v[it->n++];
	memset(x, 0, sizeof *x);
	x->key = strdup(key);
	x->type = type;
	return x->key ? x : (it->n--, NULL);
}

const char *diff_type_name(int t)
{
	static const char *n[] = {"overall", "kernel", "call_site", "memory", "python_path"};
	return t >= 0 && t < DIFF_N_TYPES ? n[t] : "?";
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

/* ------------------------------------------------------------ per-step times
 * The lengths of the steps the analysis counted (after warm-up), in ns:
 * detected steps from the analysis's intervals; the runner's marks read
 * again from the trace and replayed as the analysis does (ITER_BEGIN to
 * ITER_END; after a WARMUP_END only the iterations that end after it).  The
 * result must give the analysis's own count and median; if it does not, no
 * per-step times (*why says so) rather than a test on other steps. */
struct mark_rec {
	uint64_t ts, idx;
	uint64_t kind;
};

static int cmp_mark_rec(const void *x, const void *y)
{
	const struct mark_rec *a = x, *b = y;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Appends v to the growable array. */
static int push_len(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		uint64_t *nv = realloc(*v, nc * sizeof *nv);
		if (!nv)
			return -1;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static int marked_lengths(const struct analysis *a, uint64_t **lens, size_t *n)
{
	struct tbp_reader *r;
	int rc = an_open(&r, a->path);
	if (rc)
		return rc;
	struct mark_rec *m = NULL;
	size_t nm = 0, cap = 0;
	struct tbp_record rec;
	int st;
	while ((st = tr_next(r, a->path, &rec)) > 0) {
		if (rec.kind != TBP_K_MARKER)
			continue;
		if (nm == cap) {
			size_t nc = cap ? 2 * cap : 256;
			struct mark_rec *nv = realloc(m, nc * sizeof *nv);
			if (!nv) {
				free(m);
				tbp_reader_close(r);
				return TBA_EXIT_INTERNAL;
			}
			m = nv;
			cap = nc;
		}
		m[nm] = (struct mark_rec){rec.ts, nm, rec.u.marker.marker_kind};
		nm++;
	}
	rc = st < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
	tbp_reader_close(r);
	if (rc) {
		free(m);
		return rc;
	}
	if (nm)
		qsort(m, nm, sizeof *m, cmp_mark_rec);
	/* Every iteration's length, the ones that ended after a WARMUP_END
	 * flagged (bit 63): steady. */
	uint64_t *all = NULL, begin = 0;
	size_t na = 0, acap = 0;
	int in_iter = 0, warm = 0;
	for (size_t i = 0; i < nm; i++) {
		if (m[i].kind == TBP_MARK_ITER_BEGIN) {
			in_iter = 1;
			begin = m[i].ts;
		} else if (m[i].kind == TBP_MARK_ITER_END && in_iter) {
			in_iter = 0;
			if (push_len(&all, &na, &acap, (m[i].ts - begin) | (warm ? 1ULL << 63 : 0))) {
				free(m);
				free(all);
				return TBA_EXIT_INTERNAL;
			}
		} else if (m[i].kind == TBP_MARK_WARMUP_END) {
			warm = 1;
		}
	}
	free(m);
	size_t k = 0;
	for (size_t i = 0; i < na; i++)
		if (!warm || all[i] >> 63)
			all[k++] = all[i] & ~(1ULL << 63);
	*lens = all;
	*n = k;
	return TBA_EXIT_OK;
}

/* 0 with *out (n values, ns) or with *why set (no per-step times); else a
 * TBA_EXIT_* status. */
static int step_times(const struct analysis *a, double **out, size_t *n, const char **why)
{
	*out = NULL;
	*n = 0;
	*why = NULL;
	uint64_t *lens = NULL;
	size_t k = 0;
	if (a->steps.source == AN_STEPS_DETECTED && a->step_ivs.n >= 2) {
		size_t first = a->steps.warmup >= 1 && a->steps.warmup < a->step_ivs.n ? a->steps.warmup : 1;
		lens = malloc((a->step_ivs.n - first) * sizeof *lens);
		if (!lens)
			return TBA_EXIT_INTERNAL;
		for (size_t i = first; i < a->step_ivs.n; i++) {
			const struct an_step *s = VEC_AT(&a->step_ivs, struct an_step, i);
			lens[k++] = s->end > s->begin ? s->end - s->begin : 0;
		}
	} else if (a->steps.source == AN_STEPS_MARKS) {
		int rc = marked_lengths(a, &lens, &k);
		if (rc)
			return rc;
	} else {
		*why = "its steps' times are not kept";
		return 0;
	}
	/* The same steps as the analysis's: its count and median. */
	uint64_t med = 0;
	double *d = k ? malloc(k * sizeof *d) : NULL;
	if (k && !d) {
		free(lens);
		return TBA_EXIT_INTERNAL;
	}
	for (size_t i = 0; i < k; i++)
		d[i] = (double)lens[i];
	if (k) {
		qsort(lens, k, sizeof *lens, cmp_u64);
		med = k % 2 ? lens[k / 2] : (lens[k / 2 - 1] + lens[k / 2]) / 2;
	}
	free(lens);
	if (!k || k != a->steps.count - a->steps.warmup || med != a->steps.median_ns) {
		free(d);
		*why = "its per-step times do not match its steps' count and median";
		return 0;
	}
	*out = d;
	*n = k;
	return 0;
}

static int collect(struct diff *d, int side)
{
	struct diff_items *it = &d->items;
	const struct analysis *x = &d->an[side];
	double div = per(&d->an[0], &d->an[1], x);
	int cpu = d->cpu, steps = d->steps;
	char key[2048];
	struct diff_item *e;
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
		diff_match_key(d->match, side, x, s->callpath, s->native, key, sizeof key);
		PUT(2, key, (double)(gpu ? s->gpu_ns : s->api_ns));
		*(side ? &e->calls_b : &e->calls_a) += s->calls;
		*(side ? &e->iters_b : &e->iters_a) += s->iters;
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
		diff_match_key(d->match, side, x, sp->callpath, 0, key, sizeof key);
		PUT(4, key, (double)sp->self_ns);
	}
	for (size_t i = 0; i < x->devices.n; i++) {
		const struct an_device *dev = VEC_AT(&x->devices, struct an_device, i);
		if (!dev->allocs)
			continue;
		snprintf(key, sizeof key, "device %" PRIu64 " peak bytes", dev->id);
		if (!(e = item_get(it, 3, key)))
			return -1;
		*(side ? &e->b : &e->a) += (double)dev->mem_peak; /* a peak, not per iteration */
	}
#undef PUT
	return 0;
}

double diff_change_pct(const struct diff_item *x)
{
	if (x->a == 0)
		return x->b == 0 ? 0.0 : INFINITY;
	return 100.0 * (x->b - x->a) / x->a;
}

/* What regressed first; then the time rows by how much their time per
 * step changed (bytes are not time: memory rows after them, the peaks
 * first). */
static int cmp_item(const void *p, const void *q)
{
	const struct diff_item *x = p, *y = q;
	if (x->regressed != y->regressed)
		return y->regressed - x->regressed;
	int mx = x->type == DIFF_MEMORY, my = y->type == DIFF_MEMORY;
	if (mx != my)
		return mx - my;
	if (mx) {
		int px = !strstr(x->key, " allocated bytes"), py = !strstr(y->key, " allocated bytes");
		if (px != py)
			return py - px;
	}
	double dx = fabs(x->b - x->a), dy = fabs(y->b - y->a);
	if (dx != dy)
		return dx < dy ? 1 : -1;
	return strcmp(x->key, y->key);
}

/* time_per_step.verdict in JSON's first words ("unchanged": no significant change). */
static const char *verdict_v1(const struct an_step_cmp *c)
{
	return c->verdict == AN_CHANGE_REGRESSED ? "regressed" : c->verdict == AN_CHANGE_IMPROVED ? "improved" : "unchanged";
}

/* "estimated change +10.2% (95% interval +8.1% to +12.0%), p = 0.00794 exact" */
static void text_stats(const struct an_step_cmp *c)
{
	printf("estimated change %+.1f%% (%.0f%% interval %+.1f%% to %+.1f%%), p = %.3g%s", c->est_pct,
	       100 * (1 - AN_STATS_ALPHA), c->ci_lo_pct, c->ci_hi_pct, c->mw.p, c->mw.exact ? " exact" : "");
}

/* The test's line under the headline. */
static void text_significance(const struct an_step_cmp *c)
{
	if (!c->tested) {
		printf("  significance: no test: %s (steps: A %zu, B %zu; a test needs %d a side)\n", c->reason, c->na,
		       c->nb, AN_STATS_MIN_STEPS);
		return;
	}
	printf("  significance: %zu vs %zu steps, Mann-Whitney U = %.1f; ", c->na, c->nb, c->mw.u);
	text_stats(c);
	printf(": %s\n", c->reason);
}

static void json_num(const char *key, double v, const char *fmt)
{
	printf(",\"%s\":", key);
	if (isfinite(v))
		printf(fmt, v);
	else
		printf("null");
}

/* "significance": the test behind the verdict, or why there is none. */
static void json_significance(const struct an_step_cmp *c, const char *no_steps)
{
	printf(",\"significance\":{\"test\":");
	if (no_steps) {
		printf("null,\"reason\":");
		json_str(stdout, no_steps, strlen(no_steps));
		printf(",\"verdict\":null}");
		return;
	}
	printf(c->tested ? "\"mann_whitney_u\"" : "null");
	printf(",\"reason\":");
	json_str(stdout, c->reason, strlen(c->reason));
	printf(",\"verdict\":\"%s\",\"steps_a\":%zu,\"steps_b\":%zu,\"min_steps\":%d", an_change_name(c->verdict),
	       c->na, c->nb, AN_STATS_MIN_STEPS);
	json_num("median_a_ns", c->median_a, "%.1f");
	json_num("median_b_ns", c->median_b, "%.1f");
	json_num("median_change_pct", c->change_pct, "%.3f");
	printf(",\"alpha\":%.3f,\"ci_level\":%.3f", AN_STATS_ALPHA, 1 - AN_STATS_ALPHA);
	if (!c->tested) {
		printf(",\"u\":null,\"z\":null,\"exact\":null,\"p_value\":null,\"change_pct\":null,\"ci_low_pct\":null"
		       ",\"ci_high_pct\":null,\"significant\":null,\"ci_beyond_threshold\":null}");
		return;
	}
	printf(",\"u\":%.1f", c->mw.u);
	if (c->mw.exact)
		printf(",\"z\":null");
	else
		json_num("z", c->mw.z, "%.6f");
	printf(",\"exact\":%s", c->mw.exact ? "true" : "false");
	json_num("p_value", c->mw.p, "%.6g");
	json_num("change_pct", c->est_pct, "%.3f");
	json_num("ci_low_pct", c->ci_lo_pct, "%.3f");
	json_num("ci_high_pct", c->ci_hi_pct, "%.3f");
	printf(",\"significant\":%s,\"ci_beyond_threshold\":%s}", c->significant ? "true" : "false",
	       c->ci_beyond ? "true" : "false");
}

static const struct diff_item *find_item(const struct diff_items *it, const char *key)
{
	for (size_t i = 0; i < it->n; i++)
		if (it->v[i].type == 0 && !strcmp(it->v[i].key, key))
			return &it->v[i];
	return NULL;
}

/* ------------------------------------------------------------ where the time went
 * With steps on a GPU: whether the change of the time per step is the
 * GPU's work or the host's.  The GPU's work per step is unchanged when its
 * busy time per step moved by at most half the threshold and both runs ran
 * the same kernels about as often per step; a step that then took longer
 * waited on the host -- another process's load on the machine, or host code
 * -- which one trace pair cannot tell apart. */
const char *diff_side_name(int side)
{
	static const char *const n[] = {NULL, "host", "gpu", "host_and_gpu"};
	return side >= 0 && side <= DIFF_SIDE_BOTH ? n[side] : NULL;
}

/* Every kernel of x with at least 1 % of x's kernel time is one of y's too. */
static int kernels_in(const struct analysis *x, const struct analysis *y)
{
	uint64_t total = 0;
	for (size_t i = 0; i < x->kernels.n; i++)
		total += VEC_AT(&x->kernels, struct an_kernel_stat, i)->total_ns;
	for (size_t i = 0; i < x->kernels.n; i++) {
		const struct an_kernel_stat *k = VEC_AT(&x->kernels, struct an_kernel_stat, i);
		if (k->total_ns * 100 < total)
			continue;
		size_t nl, ml;
		const char *name = an_string(x, k->name, &nl);
		int found = 0;
		for (size_t j = 0; j < y->kernels.n && !found; j++) {
			const char *m = an_string(y, VEC_AT(&y->kernels, struct an_kernel_stat, j)->name, &ml);
			found = name && m && nl == ml && !memcmp(name, m, nl);
		}
		if (!found)
			return 0;
	}
	return 1;
}

static double kernels_per_step(const struct analysis *x)
{
	uint64_t n = 0;
	for (size_t i = 0; i < x->kernels.n; i++)
		n += VEC_AT(&x->kernels, struct an_kernel_stat, i)->count;
	return x->steps.count ? (double)n / (double)x->steps.count : 0;
}

/* The host site (cause and call site, keyed as diff keys) whose share of
 * the GPU idle per step grew most, edges aside. */
static int idle_site(struct diff_expl *e, const struct analysis an[2], const struct diff_match *m)
{
	struct diff_items parts = {0};
	char key[2048], label[300];
	int rc = 0;
	for (int s = 0; s < 2 && !rc; s++) {
		const struct analysis *x = &an[s];
		double div = per(&an[0], &an[1], x);
		for (size_t i = 0; i < x->idle_parts.n && !rc; i++) {
			const struct an_finding *p = VEC_AT(&x->idle_parts, struct an_finding, i);
			if (p->edge)
				continue;
			/* "cause\x01label\x01key": the key (whole path) tells sites apart, the label names one */
			diff_match_label(m, s, x, p->callpath, p->native, label, sizeof label);
			int w = snprintf(key, sizeof key, "%s\x01%s\x01", an_cause_name(p->cause), label);
			if (w < 0 || (size_t)w >= sizeof key)
				continue;
			diff_match_key(m, s, x, p->callpath, p->native, key + w, sizeof key - (size_t)w);
			struct diff_item *it = item_get(&parts, 5, key);
			if (!it)
				rc = -1;
			else
				*(s ? &it->b : &it->a) += (double)p->total_ns / div;
		}
	}
	const struct diff_item *best = NULL;
	for (size_t i = 0; i < parts.n; i++)
		if (!best || parts.v[i].b - parts.v[i].a > best->b - best->a)
			best = &parts.v[i];
	if (best && best->b > best->a) {
		const char *l = strchr(best->key, '\x01'), *k = l ? strchr(l + 1, '\x01') : NULL;
		if (l && k) {
			snprintf(e->site, sizeof e->site, "%.*s %s", (int)(l - best->key), best->key, k + 1);
			snprintf(e->label, sizeof e->label, "%.*s at %.*s", (int)(l - best->key), best->key,
				 (int)(k - l - 1), l + 1);
			e->site_ns = best->b - best->a;
		}
	}
	for (size_t i = 0; i < parts.n; i++)
		free(parts.v[i].key);
	free(parts.v);
	return rc;
}

static int explain(struct diff_expl *e, const struct diff_item *head, const struct diff_items *it,
		   const struct analysis an[2], const struct diff_match *m, double threshold)
{
	memset(e, 0, sizeof *e);
	const struct diff_item *busy = find_item(it, "gpu_busy_ns"), *idle = find_item(it, "gpu_idle_ns");
	if (!busy || !idle || !an_has_gpu(&an[0]) || !an_has_gpu(&an[1]) || !head->a)
		return 0;
	e->busy_a = busy->a, e->busy_b = busy->b, e->idle_a = idle->a, e->idle_b = idle->b;
	e->kps_a = kernels_per_step(&an[0]);
	e->kps_b = kernels_per_step(&an[1]);
	e->same_kernels = kernels_in(&an[0], &an[1]) && kernels_in(&an[1], &an[0]);
	double tol = threshold / 200.0; /* half the threshold, as a fraction */
	e->gpu_unchanged = fabs(e->busy_b - e->busy_a) <= tol * e->busy_a + 1000 && e->same_kernels &&
			   fabs(e->kps_b - e->kps_a) <= tol * e->kps_a + 0.5;
	double dstep = head->b - head->a, dbusy = e->busy_b - e->busy_a, didle = e->idle_b - e->idle_a;
	if (fabs(dstep) * 100 <= threshold * head->a)
		return 0;
	e->side = e->gpu_unchanged ? DIFF_SIDE_HOST : fabs(didle) * 2 < fabs(dbusy) ? DIFF_SIDE_GPU : DIFF_SIDE_BOTH;
	if (e->side != DIFF_SIDE_GPU && idle_site(e, an, m))
		return -1;
	char site[800] = "";
	if (e->site[0] && didle > 0 && e->site_ns * 2 >= didle)
		snprintf(site, sizeof site, "; most of it (%+.3f ms per step) %s", e->site_ns / 1e6, e->label);
	if (e->side == DIFF_SIDE_HOST)
		snprintf(e->text, sizeof e->text,
			 "GPU work per step unchanged (busy %.3f -> %.3f ms, the same kernels, %.0f -> %.0f a step on average); the "
			 "host %s: GPU idle per step %+.3f ms%s -- another process's load, or host code: rerun both under "
			 "the same load to tell",
			 e->busy_a / 1e6, e->busy_b / 1e6, e->kps_a, e->kps_b, dstep > 0 ? "took longer" : "was quicker",
			 didle / 1e6, site);
	else if (e->side == DIFF_SIDE_GPU)
		snprintf(e->text, sizeof e->text,
			 "the GPU's work per step changed: busy %+.3f ms per step (%+.1f%%), idle %+.3f ms: the kernels and "
			 "call sites below",
			 dbusy / 1e6, e->busy_a ? 100.0 * dbusy / e->busy_a : 0.0, didle / 1e6);
	else
		snprintf(e->text, sizeof e->text,
			 "the GPU's work and the host's both changed: busy %+.3f ms per step (%+.1f%%), idle %+.3f ms%s",
			 dbusy / 1e6, e->busy_a ? 100.0 * dbusy / e->busy_a : 0.0, didle / 1e6, site);
	return 0;
}

static void json_explain(const struct diff_expl *e)
{
	printf(",\"explanation\":");
	if (!e->side) {
		printf("null");
		return;
	}
	printf("{\"side\":\"%s\",\"gpu_work_unchanged\":%s,\"same_kernels\":%s", diff_side_name(e->side),
	       e->gpu_unchanged ? "true" : "false", e->same_kernels ? "true" : "false");
	json_num("gpu_busy_a_ns", e->busy_a, "%.0f");
	json_num("gpu_busy_b_ns", e->busy_b, "%.0f");
	json_num("gpu_idle_a_ns", e->idle_a, "%.0f");
	json_num("gpu_idle_b_ns", e->idle_b, "%.0f");
	json_num("kernels_per_step_a", e->kps_a, "%.2f");
	json_num("kernels_per_step_b", e->kps_b, "%.2f");
	printf(",\"idle_site\":");
	if (e->site[0]) {
		json_str(stdout, e->site, strlen(e->site));
		printf(",\"idle_site_label\":");
		json_str(stdout, e->label, strlen(e->label));
		json_num("idle_site_change_ns", e->site_ns, "%.0f");
	} else {
		printf("null,\"idle_site_label\":null,\"idle_site_change_ns\":null");
	}
	printf(",\"text\":");
	json_str(stdout, e->text, strlen(e->text));
	printf("}");
}

/* The headline: time per step, with what the GPU did per step beside it. */
static void text_headline(const struct diff_item *head, const struct diff_items *it, const struct analysis *a,
			  const struct analysis *b, const struct an_step_cmp *cmp, const struct diff_expl *e)
{
	printf("time per step: %.3f ms -> %.3f ms (%+.1f%%): %s  [steps: %s %" PRIu64 ", %s %" PRIu64 "]\n",
	       head->a / 1e6, head->b / 1e6, diff_change_pct(head), an_change_name(cmp->verdict),
	       an_steps_source_name(a->steps.source), a->steps.count - a->steps.warmup,
	       an_steps_source_name(b->steps.source), b->steps.count - b->steps.warmup);
	text_significance(cmp);
	static const char *const beside[][2] = {
		{"gpu_busy_ns", "GPU busy"}, {"data_movement_ns", "data movement"}, {"gpu_idle_ns", "GPU idle"}};
	printf("  per step:");
	for (size_t k = 0; k < 3; k++) {
		const struct diff_item *x = find_item(it, beside[k][0]);
		if (x)
			printf("  %s %.3f -> %.3f ms", beside[k][1], x->a / 1e6, x->b / 1e6);
	}
	printf("\n");
	if (e->side)
		printf("  where the time went: %s\n", e->text);
	printf("  what changed (explanation; only the time per step decides):\n");
}

/* The verdict on the time per step: the per-step times of both runs
 * compared (an_compare_steps), or, when one run's cannot be had, the
 * medians alone, saying why (reason in buf).  A TBA_EXIT_* status. */
static int compare_steps(const struct analysis an[2], double threshold, struct an_step_cmp *cmp, char *buf,
			 size_t len)
{
	double *t[2] = {NULL, NULL};
	size_t n[2] = {0, 0};
	const char *why[2] = {NULL, NULL};
	int rc = TBA_EXIT_OK;
	for (int s = 0; s < 2 && !rc; s++)
		rc = step_times(&an[s], &t[s], &n[s], &why[s]);
	if (!rc && t[0] && t[1]) {
		if (an_compare_steps(t[0], n[0], t[1], n[1], threshold, cmp))
			rc = TBA_EXIT_INTERNAL;
	} else if (!rc) {
		memset(cmp, 0, sizeof *cmp);
		cmp->na = an[0].steps.count - an[0].steps.warmup;
		cmp->nb = an[1].steps.count - an[1].steps.warmup;
		cmp->median_a = (double)an[0].steps.median_ns;
		cmp->median_b = (double)an[1].steps.median_ns;
		cmp->change_pct = 100.0 * (cmp->median_b / cmp->median_a - 1);
		cmp->verdict = an_change_by_size(cmp->change_pct, threshold);
		snprintf(buf, len, "no per-step times of %s (%s): the medians alone against the threshold",
			 why[0] ? "A" : "B", why[0] ? why[0] : why[1]);
		cmp->reason = buf;
	}
	free(t[0]);
	free(t[1]);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze diff A.zst B.zst [--threshold PCT] [--min-share PCT] [--json] [--html FILE] [options]\n"
		   "  --threshold PCT   regression when B is slower/larger than A by more (default 7)\n"
		   "  --min-share PCT   kernels/call sites below this share of the total are not judged (default 1)\n"
		   "  --html FILE       also write the comparison as a self-contained HTML page\n"
		   "%s",
		an_opts_help);
}

/* "tbanalyze diff: --OPTION: VALUE: REASON; see ..." (exit 3).  A threshold
 * is a change in percent (B may be many times A); a share is a part of a
 * total. */
static int parse_pct(const char *opt, const char *s, double max, double *out)
{
	if (!s) {
		cmd_usage_error("%s: value missing (a percentage from 0 to %g)", opt, max);
		return -1;
	}
	char *end;
	double v = strtod(s, &end);
	if (!*s || *end || end == s || v != v) {
		cmd_usage_error("%s: %s: not a number", opt, s);
		return -1;
	}
	if (!(v >= 0) || v > max) {
		cmd_usage_error("%s: %s: out of range (0 to %g)", opt, s, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* ------------------------------------------------------------ steps alike?
 * Per-step figures compare like with like only when both traces cut their
 * runs into the same steps.  Said when they may not: the steps come from
 * different sources (the runner's marks, the loop's detection), were counted
 * at a different call (the optimizer's step, backward) or start at another
 * line of the loop, or the same call sites make a different number of calls
 * a step (one trace's step is two of the other's iterations: an optimizer
 * step skipped by a GradScaler merged them). */
static void step_warn(struct diff *d, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void step_warn(struct diff *d, const char *kind, const char *fmt, ...)
{
	if (d->n_warn == DIFF_MAX_STEP_WARNINGS)
		return;
	struct diff_step_warning *w = &d->warn[d->n_warn++];
	w->kind = kind;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->text, sizeof w->text, fmt, ap);
	va_end(ap);
}

static int cmp_double(const void *p, const void *q)
{
	double a = *(const double *)p, b = *(const double *)q;
	return a < b ? -1 : a > b;
}

/* The ratio of B's calls a step to A's at the call sites both make in at
 * least two steps, their median (0: fewer than 3 such sites). */
static double calls_per_step_ratio(const struct diff *d, size_t *nsites)
{
	const struct diff_items *it = &d->items;
	double *r = malloc((it->n + 1) * sizeof *r);
	size_t n = 0;
	for (size_t i = 0; r && i < it->n; i++) {
		const struct diff_item *x = &it->v[i];
		if (x->type == DIFF_CALL_SITE && x->iters_a >= 2 && x->iters_b >= 2 && x->calls_a && x->calls_b)
			r[n++] = ((double)x->calls_b / (double)x->iters_b) / ((double)x->calls_a / (double)x->iters_a);
	}
	double m = 0;
	if (n >= 3) {
		qsort(r, n, sizeof *r, cmp_double);
		m = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
	}
	free(r);
	*nsites = n;
	return m;
}

static void steps_alike(struct diff *d)
{
	const struct analysis *a = &d->an[0], *b = &d->an[1];
	if (!d->steps)
		return;
	if (a->steps.source != b->steps.source)
		step_warn(d, "source",
			  "A's steps are its %s, B's its %s: they may not be the same iterations (compare runs whose steps "
			  "come alike)",
			  a->steps.source == AN_STEPS_MARKS ? "runner's marks" : "loop's iterations as detected",
			  b->steps.source == AN_STEPS_MARKS ? "runner's marks" : "loop's iterations as detected");
	if (a->steps.source == AN_STEPS_DETECTED && b->steps.source == AN_STEPS_DETECTED) {
		char ka[1024], kb[1024], la[400], lb[400];
		if (a->steps.unit_kind != b->steps.unit_kind)
			step_warn(d, "unit", "A's steps are counted at its %s, B's at its %s: they may not be the same units",
				  an_step_unit_name(a->steps.unit_kind), an_step_unit_name(b->steps.unit_kind));
		diff_match_key(d->match, 0, a, a->steps.loop, 0, ka, sizeof ka);
		diff_match_key(d->match, 1, b, b->steps.loop, 0, kb, sizeof kb);
		if (strcmp(ka, kb)) {
			diff_match_label(d->match, 0, a, a->steps.loop, 0, la, sizeof la);
			diff_match_label(d->match, 1, b, b->steps.loop, 0, lb, sizeof lb);
			step_warn(d, "loop",
				  "A's steps start at %s, B's at %s: the two cover different parts of the loop, so their "
				  "per-step figures compare unlike steps",
				  la, lb);
		}
	}
	size_t n;
	double r = calls_per_step_ratio(d, &n);
	if (r >= 1.4 || (r > 0 && r <= 1 / 1.4))
		step_warn(d, "calls_per_step",
			  "B's steps make %.2fx the calls of A's at the same call sites (median over %zu sites): one run's "
			  "step may be several of the other's iterations (an optimizer step skipped, accumulation counted "
			  "otherwise); the per-step figures compare unlike steps",
			  r, n);
}

/* ------------------------------------------------------------ the diff */
void diff_free(struct diff *d)
{
	for (size_t i = 0; i < d->items.n; i++)
		free(d->items.v[i].key);
	free(d->items.v);
	free(d->renamed);
	diff_match_free(d->match);
	for (int s = 0; s < d->n_an; s++)
		an_free(&d->an[s]);
	memset(d, 0, sizeof *d);
}

/* Which items matter, which went over the threshold, and what the verdict
 * rests on. */
static void judge(struct diff *d)
{
	double tot_b[DIFF_N_TYPES] = {0}, tot_a[DIFF_N_TYPES] = {0};
	for (size_t i = 0; i < d->items.n; i++) {
		tot_a[d->items.v[i].type] += d->items.v[i].a;
		tot_b[d->items.v[i].type] += d->items.v[i].b;
	}
	for (size_t i = 0; i < d->items.n; i++) {
		struct diff_item *x = &d->items.v[i];
		double share_base = x->type == DIFF_KERNEL || x->type == DIFF_CALL_SITE || x->type == DIFF_PYTHON_PATH
			? (tot_a[x->type] > tot_b[x->type] ? tot_a[x->type] : tot_b[x->type]) : 0;
		int matters = share_base == 0 || (x->a > x->b ? x->a : x->b) * 100.0 >= d->min_share * share_base;
		if (x->type == DIFF_MEMORY && strstr(x->key, " allocated bytes"))
			matters = 0; /* allocation volume is reported; peaks decide */
		if (x->type == DIFF_OVERALL && strcmp(x->key, "window_ns") && strcmp(x->key, "gpu_busy_ns") &&
		    strcmp(x->key, "time_per_step_ns"))
			matters = 0; /* components are reported, the verdict rests on wall and busy time */
		x->over = matters && x->b > x->a && diff_change_pct(x) > d->threshold;
		x->regressed = d->steps ? x->type == DIFF_OVERALL && !strcmp(x->key, "time_per_step_ns") &&
						  d->cmp.verdict == AN_CHANGE_REGRESSED
					: x->over;
		d->regressions += x->regressed;
		/* A peak that moved by more than 1 %: the memory rows explain it. */
		if (x->type == DIFF_MEMORY && !strstr(x->key, " allocated bytes") &&
		    fabs(x->b - x->a) * 100 > (x->a > x->b ? x->a : x->b))
			d->memory_shown = 1;
	}
}

int diff_compute(struct diff *d, const char *path_a, const char *path_b, const struct an_opts *opts,
		 double threshold, double min_share)
{
	memset(d, 0, sizeof *d);
	d->paths[0] = path_a;
	d->paths[1] = path_b;
	d->threshold = threshold;
	d->min_share = min_share;
	for (int s = 0; s < 2; s++) {
		int rc = an_run(&d->an[s], d->paths[s], opts);
		d->n_an = s + 1;
		if (rc)
			return rc;
	}
	const struct analysis *an = d->an;
	d->cpu = cpu_run(&an[0]) && cpu_run(&an[1]);
	/* Both runs have steps (marks or detected): the verdict is the time per
	 * step, what the user waits for; the rest explains it. */
	d->steps = an[0].steps.source && an[1].steps.source && an[0].steps.median_ns && an[1].steps.median_ns;
	d->per_iteration = an[0].markers_used && an[1].markers_used && an[0].iterations && an[1].iterations;
	if (!(d->match = diff_match_build(an)) || collect(d, 0) || collect(d, 1))
		goto nomem;
	if (d->steps) {
		/* With steps, the per-step times decide. */
		int rc = compare_steps(an, threshold, &d->cmp, d->why, sizeof d->why);
		if (rc) {
			if (rc == TBA_EXIT_INTERNAL)
				goto nomem;
			return rc;
		}
	} else {
		/* Without, say why there is no test. */
		int sa = an[0].steps.source && an[0].steps.median_ns, sb = an[1].steps.source && an[1].steps.median_ns;
		snprintf(d->why, sizeof d->why, "no steps in %s: no per-step times to test; the totals against the threshold",
			 !sa && !sb ? "A and B" : !sa ? "A" : "B");
		d->no_steps = d->why;
	}
	judge(d);
	const struct diff_item *tps = d->steps ? find_item(&d->items, "time_per_step_ns") : NULL;
	if (tps) {
		d->head = *tps;
		if (explain(&d->ex, &d->head, &d->items, an, d->match, threshold))
			goto nomem;
	}
	steps_alike(d);
	qsort(d->items.v, d->items.n, sizeof *d->items.v, cmp_item);
	d->tps = tps ? find_item(&d->items, "time_per_step_ns") : NULL;
	for (size_t i = 0; i < d->items.n; i++) {
		struct diff_item *x = &d->items.v[i];
		x->shown = x->a != x->b && (x->type != DIFF_MEMORY || d->memory_shown || x->regressed);
		d->n_shown += x->shown;
	}
	d->n_renamed = diff_match_renamed(d->match, &d->renamed);
	diff_match_counts(d->match, &d->lines_matched, &d->lines_moved, &d->lines_a_only, &d->lines_b_only);
	return TBA_EXIT_OK;
nomem:
	fprintf(stderr, "tbanalyze: diff: out of memory\n");
	return TBA_EXIT_INTERNAL;
}

/* ------------------------------------------------------------ reporters */
static void json_report(const struct diff *d)
{
	const struct an_step_cmp *cmp = &d->cmp;
	printf("{\"schema\":\"tbprof-diff\",\"schema_version\":1,\"a\":");
	json_str(stdout, d->paths[0], strlen(d->paths[0]));
	printf(",\"b\":");
	json_str(stdout, d->paths[1], strlen(d->paths[1]));
	printf(",\"threshold_pct\":%.3f,\"per_iteration\":%s,\"regression\":%s,\"regressions\":%d", d->threshold,
	       d->per_iteration ? "true" : "false", d->regressions ? "true" : "false", d->regressions);
	if (d->tps) {
		double c = diff_change_pct(&d->head);
		printf(",\"judged_by\":\"time_per_step\",\"time_per_step\":{\"a_ns\":%.0f,\"b_ns\":%.0f,\"change_pct\":%.3f"
		       ",\"source_a\":\"%s\",\"source_b\":\"%s\",\"verdict\":\"%s\"}",
		       d->head.a, d->head.b, isinf(c) ? 0.0 : c, an_steps_source_name(d->an[0].steps.source),
		       an_steps_source_name(d->an[1].steps.source), verdict_v1(cmp));
		printf(",\"verdict\":\"%s\"", an_change_name(cmp->verdict));
	} else {
		printf(",\"judged_by\":\"items\",\"time_per_step\":null,\"verdict\":\"%s\"",
		       d->regressions ? "regressed" : "no regression");
	}
	json_significance(cmp, d->no_steps);
	json_explain(&d->ex);
	printf(",\"step_warnings\":[");
	for (size_t i = 0; i < d->n_warn; i++) {
		printf("%s{\"kind\":\"%s\",\"text\":", i ? "," : "", d->warn[i].kind);
		json_str(stdout, d->warn[i].text, strlen(d->warn[i].text));
		printf("}");
	}
	printf("],\"renamed_files\":[");
	for (size_t i = 0; i < d->n_renamed; i++) {
		const struct diff_renamed *r = &d->renamed[i];
		printf("%s{\"a\":", i ? "," : "");
		json_str(stdout, r->a, r->a_len);
		printf(",\"b\":");
		json_str(stdout, r->b, r->b_len);
		printf(",\"matched_frames\":%" PRIu64 "}", r->matched);
	}
	printf("],\"lines\":{\"matched\":%" PRIu64 ",\"moved\":%" PRIu64 ",\"a_only\":%" PRIu64 ",\"b_only\":%" PRIu64
	       "},\"memory_shown\":%s",
	       d->lines_matched, d->lines_moved, d->lines_a_only, d->lines_b_only, d->memory_shown ? "true" : "false");
	printf(",\"changes\":[");
	for (size_t i = 0; i < d->items.n; i++) {
		const struct diff_item *x = &d->items.v[i];
		double c = diff_change_pct(x);
		printf("%s\n {\"type\":\"%s\",\"name\":", i ? "," : "", diff_type_name(x->type));
		json_str(stdout, x->key, strlen(x->key));
		printf(",\"a\":%.0f,\"b\":%.0f,", x->a, x->b);
		if (isinf(c))
			printf("\"change_pct\":null");
		else
			printf("\"change_pct\":%.3f", c);
		printf(",\"regressed\":%s,\"over_threshold\":%s,\"shown\":%s}", x->regressed ? "true" : "false",
		       x->over ? "true" : "false", x->shown ? "true" : "false");
	}
	printf("]}\n");
}

static void text_report(const struct diff *d)
{
	const struct an_step_cmp *cmp = &d->cmp;
	const struct analysis *an = d->an;
	printf("tbanalyze diff: A=%s B=%s (threshold %.1f%%%s%s)\n", d->paths[0], d->paths[1], d->threshold,
	       an[0].markers_used && an[1].markers_used ? ", per iteration" : "",
	       d->cpu ? "; CPU runs: host self time by Python path" : "");
	for (size_t i = 0; i < d->n_renamed; i++) {
		const struct diff_renamed *r = &d->renamed[i];
		printf("files: A's %.*s compared as B's %.*s (each only in its trace, %" PRIu64
		       " of their frames alike: function and line): their matched sites are keyed by B's name\n",
		       (int)r->a_len, r->a, (int)r->b_len, r->b, r->matched);
	}
	if (d->lines_moved)
		printf("lines: %" PRIu64 " of A's lines matched to B's, %" PRIu64 " of them at other line numbers (moved by "
		       "an edit; keyed at B's); %" PRIu64 " only in A, %" PRIu64 " only in B\n",
		       d->lines_matched, d->lines_moved, d->lines_a_only, d->lines_b_only);
	for (size_t i = 0; i < d->n_warn; i++)
		printf("warning: steps: %s\n", d->warn[i].text);
	if (d->tps)
		text_headline(&d->head, &d->items, &an[0], &an[1], cmp, &d->ex);
	size_t shown = 0, hidden_mem = 0;
	for (size_t i = 0; i < d->items.n; i++) {
		const struct diff_item *x = &d->items.v[i];
		hidden_mem += !x->shown && x->type == DIFF_MEMORY && x->a != x->b;
		if (!x->shown || shown >= 30)
			continue;
		double c = diff_change_pct(x);
		char pc[32];
		if (isinf(c))
			snprintf(pc, sizeof pc, "new");
		else
			snprintf(pc, sizeof pc, "%+.1f%%", c);
		printf("%s %-9s %8s  %14.0f -> %14.0f %s  %.160s\n",
		       x->regressed ? "REGRESSED" : x->over ? "   grew  " : "         ", diff_type_name(x->type), pc, x->a,
		       x->b, x->type == DIFF_MEMORY ? "B " : "ns", x->key);
		shown++;
	}
	if (!shown)
		printf("no differences\n");
	if (hidden_mem)
		printf("(%zu memory row%s not shown: no device's peak changed by more than 1 %%)\n", hidden_mem,
		       hidden_mem == 1 ? "" : "s");
	if (d->tps) {
		printf("verdict: %s (time per step %+.1f%%",
		       cmp->verdict == AN_CHANGE_REGRESSED  ? "REGRESSION"
		       : cmp->verdict == AN_CHANGE_IMPROVED ? "improved, no regression"
		       : cmp->tested			    ? "no significant change, no regression"
							    : "no regression",
		       diff_change_pct(&d->head));
		if (cmp->tested) {
			printf("; ");
			text_stats(cmp);
		}
		printf("; threshold %.1f%%%s)\n", d->threshold, cmp->tested ? "" : "; no test: by the medians alone");
	} else {
		printf("significance: no test (%s)\n", d->no_steps);
		if (d->regressions)
			printf("verdict: REGRESSION (%d item%s slower or larger by more than %.1f%%)\n", d->regressions,
			       d->regressions == 1 ? "" : "s", d->threshold);
		else
			printf("verdict: no regression beyond %.1f%%\n", d->threshold);
	}
}

/* The page (an_diff_html.c): the rows computed above, in their order. */
static int html_report(const struct diff *d, const char *path)
{
	const struct diff_items *it = &d->items;
	struct an_diff_change *ch = calloc(it->n ? it->n : 1, sizeof *ch);
	if (!ch) {
		fprintf(stderr, "tbanalyze: diff: out of memory\n");
		return TBA_EXIT_INTERNAL;
	}
	for (size_t i = 0; i < it->n; i++)
		ch[i] = (struct an_diff_change){diff_type_name(it->v[i].type), it->v[i].key, it->v[i].a, it->v[i].b,
						it->v[i].regressed, it->v[i].over};
	struct an_diff_page pg = {{d->paths[0], d->paths[1]}, d->an, d->threshold, d->tps ? &d->cmp : NULL,
				  d->no_steps,
				  d->tps ? an_change_name(d->cmp.verdict) : d->regressions ? "regression" : "no regression",
				  d->regressions != 0, ch, it->n};
	FILE *f = cmd_output_open(path);
	if (f)
		an_diff_html(f, &pg);
	free(ch);
	return f ? cmd_output_close(f, path, TBA_EXIT_OK) : TBA_EXIT_INTERNAL;
}

/* What the diff's command line asks. */
struct diff_args {
	struct an_opts opts;
	const char *paths[2];
	double threshold, min_share;
	int json;
	const char *html;
};

/* --threshold / --min-share, as "--opt PCT" or "--opt=PCT": 1 taken, 0 not
 * one of them, -1 said. */
static int pct_opt(int argc, char **argv, int *i, struct diff_args *d)
{
	static const struct {
		const char *name;
		double max;
		size_t at;
	} pcts[] = {
		{"--threshold", 10000, offsetof(struct diff_args, threshold)}, /* B may be many times A */
		{"--min-share", 100, offsetof(struct diff_args, min_share)},
	};
	const char *arg = argv[*i];
	for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++) {
		size_t len = strlen(pcts[k].name);
		if (strncmp(arg, pcts[k].name, len) || (arg[len] && arg[len] != '='))
			continue;
		const char *val = arg[len] ? arg + len + 1 : *i + 1 < argc ? argv[++*i] : NULL;
		return parse_pct(pcts[k].name, val, pcts[k].max, (double *)((char *)d + pcts[k].at)) ? -1 : 1;
	}
	return 0;
}

/* The diff's own options: --html, the percentages, the analysis's. */
static int diff_opt(int argc, char **argv, int *i, void *ctx)
{
	struct diff_args *d = ctx;
	int r = cmd_html_opt(argc, argv, i, &d->html);
	if (!r)
		r = pct_opt(argc, argv, i, d);
	return r ? r : an_parse_opt(argc, argv, i, &d->opts);
}

/* The command line into *d: CMD_GO_ON, or the status to exit with (a usage
 * error said, or --help printed). */
static int parse_diff_args(int argc, char **argv, struct diff_args *d)
{
	static const struct cmd_args_spec spec = {usage, 1, 2, 2, {"A.zst", "B.zst"}};
	struct cmd_args args = {d->paths, 0, 0};
	an_opts_default(&d->opts);
	d->threshold = 7.0;
	d->min_share = 1.0;
	int rc = cmd_parse(argc, argv, &spec, &args, diff_opt, d);
	d->json = args.json;
	return rc;
}

/* The report on stdout (and the page): the diff's exit status. */
static int diff_output(const struct diff *d, const struct diff_args *args)
{
	if (args->html) {
		int rc = html_report(d, args->html);
		if (rc)
			return rc;
	}
	if (args->json)
		json_report(d);
	else
		text_report(d);
	int rc = cmd_output_close(stdout, NULL, TBA_EXIT_OK);
	return rc ? rc : d->regressions ? TBA_EXIT_REGRESSION : TBA_EXIT_OK;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_args args = {0};
	int rc = parse_diff_args(argc, argv, &args);
	if (rc != CMD_GO_ON)
		return rc;
	if (args.html && (rc = cmd_output_check(args.html, CMD_OUT_HTML)))
		return rc;
	struct diff *d = malloc(sizeof *d);
	if (!d) {
		fprintf(stderr, "tbanalyze: diff: out of memory\n");
		return TBA_EXIT_INTERNAL;
	}
	rc = diff_compute(d, args.paths[0], args.paths[1], &args.opts, args.threshold, args.min_share);
	if (!rc)
		rc = diff_output(d, &args);
	diff_free(d);
	free(d);
	return rc;
}
