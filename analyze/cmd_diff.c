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
 * function).  A file of the user's that only one trace has is compared as
 * the file of the other trace's own that holds the same functions at the
 * same lines (train.py against train_v2.py, a script moved to another
 * directory): its sites match; a file both traces have keeps its name.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_diff_html.h"
#include "an_stats.h"
#include "cmd.h"
#include "tr_common.h"

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

/* ------------------------------------------------------------ renamed files
 * The user's files each trace's call sites and paths run through: a file
 * only one trace has is paired with the other trace's file (only in it)
 * that holds the most of its (function, line) frames, and its frames are
 * keyed by that file's name. */
struct ufile {
	char *name;       /* as displayed */
	size_t len;
	uint64_t h;
	int other;        /* the other trace has a file of this name (any frame) */
	long map;         /* A's file: the index of B's file it is compared as, -1: none */
	uint64_t matched; /* frames matched with it */
};
struct ftuple {
	size_t file;      /* index in the trace's ufiles */
	uint64_t fnline;  /* hash of the function and line */
};
struct files {
	struct vec f;         /* struct ufile */
	struct vec t;         /* struct ftuple */
	struct u64map by_h;   /* user file hash -> index + 1 */
	struct u64map all;    /* every frame's file hash (libraries' too) -> 1 */
	struct u64map frames; /* hash(file index, fnline) -> 1 */
};
#define UFILE(fs, i) VEC_AT(&(fs)->f, struct ufile, i)
#define FTUPLE(fs, i) VEC_AT(&(fs)->t, struct ftuple, i)

static uint64_t bytes_hash(const char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
	return h >> 1; /* never UINT64_MAX */
}

static uint64_t fnline_hash(const struct an_frame *fr)
{
	return bytes_hash(fr->function, fr->function_len, 0xcbf29ce484222325ULL ^ (fr->line * 0x9e3779b97f4a7c15ULL));
}

static int files_path(struct files *fs, const struct analysis *x, uint64_t cp)
{
	struct an_frame fr[64];
	size_t n = an_callpath_frames(x, cp, fr, 64);
	for (size_t i = 0; i < n; i++) {
		size_t fl;
		const char *file = an_display_path(x, fr[i].file, fr[i].file_len, &fl);
		uint64_t h = bytes_hash(file, fl, 0xcbf29ce484222325ULL);
		if (!u64map_get(&fs->all, h) && u64map_put(&fs->all, h, 1))
			return -1;
		if (an_frame_is_library(x, &fr[i]))
			continue;
		uint64_t *ix = u64map_get(&fs->by_h, h);
		size_t k;
		if (ix) {
			k = *ix - 1;
		} else {
			char *name = malloc(fl + 1);
			struct ufile *u = name ? vec_push(&fs->f) : NULL;
			if (!u) {
				free(name);
				return -1;
			}
			memcpy(name, file, fl);
			name[fl] = 0;
			*u = (struct ufile){.name = name, .len = fl, .h = h, .map = -1};
			k = fs->f.n - 1;
			if (u64map_put(&fs->by_h, h, k + 1))
				return -1;
		}
		uint64_t fh = an_hash_combine(k, fnline_hash(&fr[i])) >> 1;
		if (u64map_get(&fs->frames, fh))
			continue;
		struct ftuple *t = vec_push(&fs->t);
		if (!t || u64map_put(&fs->frames, fh, 1))
			return -1;
		*t = (struct ftuple){k, fnline_hash(&fr[i])};
	}
	return 0;
}

/* The files of the call paths diff keys (sites, the idle's sites, and a
 * CPU run's spans). */
static int files_gather(struct files *fs, const struct analysis *x, int cpu)
{
	for (size_t i = 0; i < x->sites.n; i++)
		if (files_path(fs, x, VEC_AT(&x->sites, struct an_site_stat, i)->callpath))
			return -1;
	for (size_t i = 0; i < x->idle_parts.n; i++)
		if (files_path(fs, x, VEC_AT(&x->idle_parts, struct an_finding, i)->callpath))
			return -1;
	for (size_t i = 0; cpu && i < x->spans.n; i++)
		if (files_path(fs, x, VEC_AT(&x->spans, struct an_span_stat, i)->callpath))
			return -1;
	return 0;
}

/* A's files that B lacks, each paired with B's file (one A lacks) holding
 * the most of its (function, line) frames, greedily, at least one. */
static void files_pair(struct files *fa, struct files *fb)
{
	for (size_t i = 0; i < fa->f.n; i++)
		UFILE(fa, i)->other = u64map_get(&fb->all, UFILE(fa, i)->h) != NULL;
	for (size_t j = 0; j < fb->f.n; j++)
		UFILE(fb, j)->other = u64map_get(&fa->all, UFILE(fb, j)->h) != NULL;
	int *used = calloc(fb->f.n ? fb->f.n : 1, sizeof *used);
	if (!used)
		return;
	for (size_t i = 0; i < fa->f.n; i++) {
		if (UFILE(fa, i)->other)
			continue;
		uint64_t best = 0;
		long bj = -1;
		for (size_t j = 0; j < fb->f.n; j++) {
			if (UFILE(fb, j)->other || used[j])
				continue;
			uint64_t score = 0;
			for (size_t t = 0; t < fa->t.n; t++)
				if (FTUPLE(fa, t)->file == i &&
				    u64map_get(&fb->frames, an_hash_combine(j, FTUPLE(fa, t)->fnline) >> 1))
					score++;
			if (score > best) {
				best = score;
				bj = (long)j;
			}
		}
		if (bj >= 0) {
			used[bj] = 1;
			UFILE(fa, i)->map = bj;
			UFILE(fa, i)->matched = best;
		}
	}
	free(used);
}

static void files_free(struct files *fs)
{
	for (size_t i = 0; i < fs->f.n; i++)
		free(UFILE(fs, i)->name);
	vec_free(&fs->f);
	vec_free(&fs->t);
	u64map_free(&fs->by_h);
	u64map_free(&fs->all);
	u64map_free(&fs->frames);
}

/* A frame's file as displayed, or as the other trace's file it is compared
 * as (map: this trace's files paired with other's, NULL: none). */
static const char *frame_file(const struct analysis *x, const struct an_frame *fr, const struct files *map,
			      const struct files *other, size_t *fl)
{
	const char *file = an_display_path(x, fr->file, fr->file_len, fl);
	uint64_t *ix = !map || an_frame_is_library(x, fr) ? NULL
		       : u64map_get(&map->by_h, bytes_hash(file, *fl, 0xcbf29ce484222325ULL));
	if (ix && UFILE(map, *ix - 1)->map >= 0) {
		const struct ufile *to = UFILE(other, UFILE(map, *ix - 1)->map);
		*fl = to->len;
		return to->name;
	}
	return file;
}

/* an_site_label and an_site_key with A's renamed files named as B's (map:
 * A's files paired with other's, NULL: none). */
struct namer_ctx {
	const struct files *map, *other;
};

static const char *paired_file(const struct analysis *x, const struct an_frame *fr, const void *ctx, size_t *fl)
{
	const struct namer_ctx *c = ctx;
	return frame_file(x, fr, c->map, c->other, fl);
}

static void diff_label(const struct analysis *x, uint64_t cp, uint64_t nat, const struct files *map,
		       const struct files *other, char *buf, size_t len)
{
	struct namer_ctx c = {map, other};
	struct an_file_namer n = {paired_file, &c};
	an_site_label_named(x, cp, nat, map ? &n : NULL, buf, len);
}

static void diff_key(const struct analysis *x, uint64_t cp, uint64_t nat, const struct files *map,
		     const struct files *other, char *buf, size_t len)
{
	struct namer_ctx c = {map, other};
	struct an_file_namer n = {paired_file, &c};
	an_site_key_named(x, cp, nat, map ? &n : NULL, buf, len);
}

static int collect(struct items *it, const struct analysis *x, int side, double div, int cpu, int steps,
		   const struct files *map, const struct files *other)
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
		diff_key(x, s->callpath, s->native, map, other, key, sizeof key);
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
		diff_key(x, sp->callpath, 0, map, other, key, sizeof key);
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

static const struct item *find_item(const struct items *it, const char *key)
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
enum { SIDE_NONE = 0, SIDE_HOST, SIDE_GPU, SIDE_BOTH };
static const char *const side_name[] = {NULL, "host", "gpu", "host_and_gpu"};
struct expl {
	int side;               /* SIDE_* (NONE: the time per step did not move past the threshold) */
	int gpu_unchanged;      /* the GPU's work per step unchanged */
	double busy_a, busy_b, idle_a, idle_b; /* per step */
	double kps_a, kps_b;    /* kernels per step (whole trace / steps) */
	int same_kernels;       /* the same kernels (by name) in both, bar those under 1 % of the time */
	char site[600];         /* the host site whose GPU idle per step grew most ("cause key"), "" none */
	char label[400];        /* its cause and leaf ("python at data.py:33 load_batch") */
	double site_ns;         /* its growth per step */
	char text[1024];
};

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
static int idle_site(struct expl *e, const struct analysis an[2], const struct files fs[2])
{
	struct items parts = {0};
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
			diff_label(x, p->callpath, p->native, s ? NULL : &fs[0], s ? NULL : &fs[1], label, sizeof label);
			int w = snprintf(key, sizeof key, "%s\x01%s\x01", an_cause_name(p->cause), label);
			if (w < 0 || (size_t)w >= sizeof key)
				continue;
			diff_key(x, p->callpath, p->native, s ? NULL : &fs[0], s ? NULL : &fs[1], key + w, sizeof key - (size_t)w);
			struct item *it = item_get(&parts, 5, key);
			if (!it)
				rc = -1;
			else
				*(s ? &it->b : &it->a) += (double)p->total_ns / div;
		}
	}
	const struct item *best = NULL;
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

static int explain(struct expl *e, const struct item *head, const struct items *it, const struct analysis an[2],
		   const struct files fs[2], double threshold)
{
	memset(e, 0, sizeof *e);
	const struct item *busy = find_item(it, "gpu_busy_ns"), *idle = find_item(it, "gpu_idle_ns");
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
	e->side = e->gpu_unchanged ? SIDE_HOST : fabs(didle) * 2 < fabs(dbusy) ? SIDE_GPU : SIDE_BOTH;
	if (e->side != SIDE_GPU && idle_site(e, an, fs))
		return -1;
	char site[800] = "";
	if (e->site[0] && didle > 0 && e->site_ns * 2 >= didle)
		snprintf(site, sizeof site, "; most of it (%+.3f ms per step) %s", e->site_ns / 1e6, e->label);
	if (e->side == SIDE_HOST)
		snprintf(e->text, sizeof e->text,
			 "GPU work per step unchanged (busy %.3f -> %.3f ms, the same kernels, %.0f -> %.0f a step on average); the "
			 "host %s: GPU idle per step %+.3f ms%s -- another process's load, or host code: rerun both under "
			 "the same load to tell",
			 e->busy_a / 1e6, e->busy_b / 1e6, e->kps_a, e->kps_b, dstep > 0 ? "took longer" : "was quicker",
			 didle / 1e6, site);
	else if (e->side == SIDE_GPU)
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

static void json_explain(const struct expl *e)
{
	printf(",\"explanation\":");
	if (!e->side) {
		printf("null");
		return;
	}
	printf("{\"side\":\"%s\",\"gpu_work_unchanged\":%s,\"same_kernels\":%s", side_name[e->side],
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
static void text_headline(const struct item *head, const struct items *it, const struct analysis *a,
			  const struct analysis *b, const struct an_step_cmp *cmp, const struct expl *e)
{
	printf("time per step: %.3f ms -> %.3f ms (%+.1f%%): %s  [steps: %s %" PRIu64 ", %s %" PRIu64 "]\n",
	       head->a / 1e6, head->b / 1e6, change_pct(head), an_change_name(cmp->verdict),
	       an_steps_source_name(a->steps.source), a->steps.count - a->steps.warmup,
	       an_steps_source_name(b->steps.source), b->steps.count - b->steps.warmup);
	text_significance(cmp);
	static const char *const beside[][2] = {
		{"gpu_busy_ns", "GPU busy"}, {"data_movement_ns", "data movement"}, {"gpu_idle_ns", "GPU idle"}};
	printf("  per step:");
	for (size_t k = 0; k < 3; k++) {
		const struct item *x = find_item(it, beside[k][0]);
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

/* Everything diff holds, freed; rc passed on. */
static int diff_done(struct items *it, struct files fs[2], struct analysis an[2], int rc)
{
	for (size_t i = 0; i < it->n; i++)
		free(it->v[i].key);
	free(it->v);
	files_free(&fs[0]);
	files_free(&fs[1]);
	an_free(&an[0]);
	an_free(&an[1]);
	return rc;
}

int cmd_diff(int argc, char **argv)
{
	struct an_opts opts;
	an_opts_default(&opts);
	const char *paths[2] = {NULL, NULL};
	double threshold = 7.0, min_share = 1.0;
	int json = 0, npaths = 0;
	const char *html = NULL;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (!strcmp(arg, "--html") || !strncmp(arg, "--html=", 7)) {
			html = arg[6] ? arg + 7 : i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : NULL;
			if (!html || !*html) {
				fprintf(stderr, "tbanalyze: diff: --html: value missing (a file name)\n");
				return TBA_EXIT_USAGE;
			}
			continue;
		}
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
	/* A's files B lacks, compared as B's that hold the same functions at
	 * the same lines. */
	struct files fs[2];
	memset(fs, 0, sizeof fs);
	for (int s = 0; s < 2; s++) {
		fs[s].f.item = sizeof(struct ufile);
		fs[s].t.item = sizeof(struct ftuple);
	}
	int bad = files_gather(&fs[0], &an[0], cpu) || files_gather(&fs[1], &an[1], cpu);
	if (!bad)
		files_pair(&fs[0], &fs[1]);
	bad = bad || collect(&it, &an[0], 0, per(&an[0], &an[1], &an[0]), cpu, steps, &fs[0], &fs[1]) ||
	      collect(&it, &an[1], 1, per(&an[0], &an[1], &an[1]), cpu, steps, NULL, NULL);
	if (bad) {
		fprintf(stderr, "tbanalyze: diff: out of memory\n");
		return diff_done(&it, fs, an, TBA_EXIT_INTERNAL);
	}
	/* With steps, the per-step times decide; without, say why there is no test. */
	struct an_step_cmp cmp;
	memset(&cmp, 0, sizeof cmp);
	char why[256];
	const char *no_steps = NULL;
	if (steps) {
		int rc = compare_steps(an, threshold, &cmp, why, sizeof why);
		if (rc) {
			if (rc == TBA_EXIT_INTERNAL)
				fprintf(stderr, "tbanalyze: diff: out of memory\n");
			return diff_done(&it, fs, an, rc);
		}
	} else {
		int sa = an[0].steps.source && an[0].steps.median_ns, sb = an[1].steps.source && an[1].steps.median_ns;
		snprintf(why, sizeof why, "no steps in %s: no per-step times to test; the totals against the threshold",
			 !sa && !sb ? "A and B" : !sa ? "A" : "B");
		no_steps = why;
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
		x->regressed = steps ? x->type == 0 && !strcmp(x->key, "time_per_step_ns") && cmp.verdict == AN_CHANGE_REGRESSED
				     : x->over;
		regressions += x->regressed;
	}
	struct item *tps = NULL;
	for (size_t i = 0; steps && i < it.n; i++)
		if (it.v[i].type == 0 && !strcmp(it.v[i].key, "time_per_step_ns"))
			tps = &it.v[i];
	struct item head = tps ? *tps : (struct item){0};
	struct expl ex;
	memset(&ex, 0, sizeof ex);
	if (tps && explain(&ex, &head, &it, an, fs, threshold)) {
		fprintf(stderr, "tbanalyze: diff: out of memory\n");
		return diff_done(&it, fs, an, TBA_EXIT_INTERNAL);
	}
	qsort(it.v, it.n, sizeof *it.v, cmp_item);

	if (html) { /* the page (an_diff_html.c): what was computed above */
		struct an_diff_change *ch = calloc(it.n ? it.n : 1, sizeof *ch);
		for (size_t i = 0; ch && i < it.n; i++)
			ch[i] = (struct an_diff_change){type_name(it.v[i].type), it.v[i].key, it.v[i].a, it.v[i].b,
							it.v[i].regressed, it.v[i].over};
		struct an_diff_page pg = {{paths[0], paths[1]}, an, threshold, tps ? &cmp : NULL, no_steps,
					  tps ? an_change_name(cmp.verdict) : regressions ? "regression" : "no regression",
					  regressions != 0, ch, ch ? it.n : 0};
		FILE *hf = ch ? fopen(html, "w") : NULL;
		int bad_html = !hf || an_diff_html(hf, &pg);
		if ((hf && fclose(hf)) || bad_html)
			fprintf(stderr, "tbanalyze: diff: %s: %s\n", html, hf ? "write failed" : strerror(errno));
		free(ch);
		if (bad_html)
			return diff_done(&it, fs, an, TBA_EXIT_INTERNAL);
	}

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
			       an_steps_source_name(an[1].steps.source), verdict_v1(&cmp));
			printf(",\"verdict\":\"%s\"", an_change_name(cmp.verdict));
		} else {
			printf(",\"judged_by\":\"items\",\"time_per_step\":null,\"verdict\":\"%s\"",
			       regressions ? "regressed" : "no regression");
		}
		json_significance(&cmp, no_steps);
		json_explain(&ex);
		printf(",\"renamed_files\":[");
		for (size_t i = 0, k = 0; i < fs[0].f.n; i++) {
			const struct ufile *u = UFILE(&fs[0], i);
			if (u->map < 0)
				continue;
			printf("%s{\"a\":", k++ ? "," : "");
			json_str(stdout, u->name, u->len);
			printf(",\"b\":");
			json_str(stdout, UFILE(&fs[1], u->map)->name, UFILE(&fs[1], u->map)->len);
			printf(",\"matched_frames\":%" PRIu64 "}", u->matched);
		}
		printf("]");
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
		for (size_t i = 0; i < fs[0].f.n; i++) {
			const struct ufile *u = UFILE(&fs[0], i);
			if (u->map >= 0)
				printf("files: A's %s compared as B's %s (each only in its trace, %" PRIu64
				       " of their frames alike: function and line): their sites are keyed by B's name\n",
				       u->name, UFILE(&fs[1], u->map)->name, u->matched);
		}
		if (tps)
			text_headline(&head, &it, &an[0], &an[1], &cmp, &ex);
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
		if (tps) {
			printf("verdict: %s (time per step %+.1f%%",
			       cmp.verdict == AN_CHANGE_REGRESSED  ? "REGRESSION"
			       : cmp.verdict == AN_CHANGE_IMPROVED ? "improved, no regression"
			       : cmp.tested			   ? "no significant change, no regression"
								   : "no regression",
			       change_pct(&head));
			if (cmp.tested) {
				printf("; ");
				text_stats(&cmp);
			}
			printf("; threshold %.1f%%%s)\n", threshold, cmp.tested ? "" : "; no test: by the medians alone");
		} else {
			printf("significance: no test (%s)\n", no_steps);
		}
		if (tps)
			;
		else if (regressions)
			printf("verdict: REGRESSION (%d item%s slower or larger by more than %.1f%%)\n", regressions,
			       regressions == 1 ? "" : "s", threshold);
		else
			printf("verdict: no regression beyond %.1f%%\n", threshold);
	}
	if (fflush(stdout)) {
		fprintf(stderr, "tbanalyze: write error on standard output\n");
		return diff_done(&it, fs, an, TBA_EXIT_INTERNAL);
	}
	return diff_done(&it, fs, an, regressions ? TBA_EXIT_REGRESSION : TBA_EXIT_OK);
}
