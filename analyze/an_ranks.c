/*
 * tbanalyze cross-rank view (an_ranks.h): loading several traces, lining up
 * their steady steps by wall clock, and the straggler finding.  Printing is
 * in an_report_ranks.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "an_ranks.h"
#include "cmd.h"
#include "tr_common.h"
#include "tbprof/naming.h"

/* A step-mean lateness below this share of the step time is noise (thread
 * scheduling, a collective's own jitter), not a straggler. */
#define STRAGGLER_MIN_SHARE 10 /* % of the median step */
#define STRAGGLER_MIN_NS 50000ULL
/* Calls of one site that make a loop (steps, collectives in the steps). */
#define LOOP_MIN 3

struct raw_span {
	uint64_t ts, end, callpath;
	uint32_t tid;
	uint8_t sync; /* classified as a collective */
};

struct raw_mark {
	uint64_t ts, kind;
};

/* ------------------------------------------------------------ directory */
/* The rank in a file name is the naming module's rule (rank<N>.zst, as libtbprof names a rank's
 * file in a directory OUT). */
long an_rank_from_name(const char *path)
{
	return tbp_name_rank_of(path);
}

/* Name order with digit runs compared as numbers: rank2 before rank10. */
static int natural_cmp(const void *x, const void *y)
{
	const char *a = *(char *const *)x, *b = *(char *const *)y;
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			while (*a == '0')
				a++;
			while (*b == '0')
				b++;
			size_t la = 0, lb = 0;
			while (isdigit((unsigned char)a[la]))
				la++;
			while (isdigit((unsigned char)b[lb]))
				lb++;
			if (la != lb)
				return la < lb ? -1 : 1;
			int c = strncmp(a, b, la);
			if (c)
				return c;
			a += la;
			b += lb;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : *b ? -1 : 0;
}

void an_ranks_free_list(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

int an_ranks_list_dir(const char *dir, char ***out, size_t *out_n)
{
	*out = NULL;
	*out_n = 0;
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "tbanalyze: %s: %s\n", dir, strerror(errno));
		return TBA_EXIT_BAD_INPUT;
	}
	char **paths = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	size_t dl = strlen(dir);
	while ((e = readdir(d))) {
		size_t nl = strlen(e->d_name);
		size_t el = strlen(TBP_NAME_EXT);
		if (nl <= el || strcmp(e->d_name + nl - el, TBP_NAME_EXT) || e->d_name[0] == '.')
			continue;
		char *p = malloc(dl + nl + 2);
		if (!p || (n == cap && !(paths = realloc(paths, (cap = cap ? 2 * cap : 16) * sizeof *paths)))) {
			free(p);
			closedir(d);
			fprintf(stderr, "tbanalyze: out of memory\n");
			return TBA_EXIT_INTERNAL;
		}
		sprintf(p, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", e->d_name);
		struct stat st;
		if (stat(p, &st) || !S_ISREG(st.st_mode)) {
			free(p);
			continue;
		}
		paths[n++] = p;
	}
	closedir(d);
	if (!n) {
		free(paths);
		fprintf(stderr, "tbanalyze: %s: no traces (*.zst) in this directory\n", dir);
		return TBA_EXIT_BAD_INPUT;
	}
	qsort(paths, n, sizeof *paths, natural_cmp);
	*out = paths;
	*out_n = n;
	return TBA_EXIT_OK;
}

/* ------------------------------------------------------------ collecting */
static int file_ends(const struct an_frame *f, const char *suffix)
{
	size_t sl = strlen(suffix);
	return f->file_len >= sl && !memcmp(f->file + f->file_len - sl, suffix, sl);
}

static int file_has(const struct an_frame *f, const char *part)
{
	return memmem(f->file, f->file_len, part, strlen(part)) != NULL;
}

/* torch.distributed's collective calls (and the logger that wraps them). */
static int is_c10d_span(const struct analysis *a, uint64_t cp)
{
	struct an_frame fr;
	if (!an_callpath_frames(a, cp, &fr, 1))
		return 0;
	return file_ends(&fr, "torch/distributed/distributed_c10d.py") || file_ends(&fr, "torch/distributed/c10d_logger.py");
}

/* backward(): DDP's reducer all-reduces the gradients from autograd hooks
 * and waits for them before backward() returns (on CPU, in the caller's
 * thread), so under DDP the late rank's peers wait inside it. */
static int is_backward_span(const struct analysis *a, uint64_t cp)
{
	struct an_frame fr;
	if (!an_callpath_frames(a, cp, &fr, 1) || !an_frame_is_library(a, &fr) || !file_has(&fr, "torch/"))
		return 0;
	return an_frame_function_is(&fr, "backward") || an_frame_function_is(&fr, "Tensor.backward") || an_frame_function_is(&fr, "_engine_run_backward");
}

static int is_ddp_span(const struct analysis *a, uint64_t cp)
{
	struct an_frame fr;
	return an_callpath_frames(a, cp, &fr, 1) && file_ends(&fr, "torch/nn/parallel/distributed.py");
}

/* Reads the trace again for what the single-trace analysis does not keep:
 * the process record, markers, Python spans, NCCL kernels. */
static int collect(struct an_rank *k, struct vec *marks, struct vec *nccl)
{
	struct tbp_reader *r;
	int rc = an_open(&r, k->path);
	if (rc)
		return rc;
	struct tbp_record rec;
	int st, have_process = 0;
	while ((st = tr_next(r, k->path, &rec)) > 0) {
		switch (rec.kind) {
		case TBP_K_PROCESS:
			if (have_process++)
				break;
			k->pid = rec.u.process.pid;
			if (tbp_process_rank(&rec.u.process) >= 0) {
				k->has_rank = 1;
				k->rank = (uint64_t)tbp_process_rank(&rec.u.process);
				int64_t w = tbp_process_world_size(&rec.u.process);
				k->world_size = w > 0 ? (uint64_t)w : 0;
			}
			break;
		case TBP_K_PY_SPAN: {
			struct raw_span *s = vec_push(&k->spans);
			if (!s)
				goto nomem;
			s->ts = rec.ts;
			s->end = rec.u.py_span.end < rec.ts ? rec.ts : rec.u.py_span.end;
			s->callpath = rec.u.py_span.callpath;
			s->tid = rec.tid;
			break;
		}
		case TBP_K_MARKER: {
			struct raw_mark *m = vec_push(marks);
			if (!m)
				goto nomem;
			m->ts = rec.ts;
			m->kind = rec.u.marker.marker_kind;
			break;
		}
		case TBP_K_GPU_KERNEL: {
			size_t nl;
			const char *name = an_string(&k->a, rec.u.gpu_kernel.name, &nl);
			if (name && nl >= 4 && !memcmp(name, "nccl", 4)) {
				struct an_ivl *v = vec_push(nccl);
				if (!v)
					goto nomem;
				v->begin = rec.ts;
				v->end = rec.u.gpu_kernel.end < rec.ts ? rec.ts : rec.u.gpu_kernel.end;
			}
			break;
		}
		}
	}
	rc = st < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
	tbp_reader_close(r);
	return rc;
nomem:
	tbp_reader_close(r);
	fprintf(stderr, "tbanalyze: %s: out of memory\n", k->path);
	return TBA_EXIT_INTERNAL;
}

static int cmp_mark(const void *x, const void *y)
{
	const struct raw_mark *a = x, *b = y;
	return a->ts != b->ts ? (a->ts < b->ts ? -1 : 1) : (a->kind < b->kind ? -1 : a->kind > b->kind);
}

static int cmp_ivl(const void *x, const void *y)
{
	const struct an_ivl *a = x, *b = y;
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	return a->end > b->end ? -1 : a->end < b->end;
}

/* Spans by thread, then start, the outer one first. */
static int cmp_span(const void *x, const void *y)
{
	const struct raw_span *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->end > b->end ? -1 : a->end < b->end;
}

/* First index in v (sorted by begin) with begin >= t. */
static size_t ivl_lower(const struct vec *v, uint64_t t)
{
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (VEC_AT(v, struct an_ivl, m)->begin < t)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* The steady steps, as the single-trace analysis counted them: the runner's
 * marked iterations after WARMUP_END (all of them without one), or the
 * detected steps after the first. */
static int rank_steps(struct an_rank *k, struct vec *marks)
{
	const struct analysis *a = &k->a;
	if (a->steps.source == AN_STEPS_MARKS && !a->opts.no_markers) {
		if (marks->n)
			qsort(marks->data, marks->n, marks->item, cmp_mark);
		uint64_t open = 0;
		int in_iter = 0;
		for (size_t i = 0; i < marks->n; i++) {
			const struct raw_mark *m = VEC_AT(marks, struct raw_mark, i);
			if (m->kind == TBP_MARK_ITER_BEGIN) {
				open = m->ts;
				in_iter = 1;
			} else if (m->kind == TBP_MARK_ITER_END && in_iter) {
				struct an_ivl *v = vec_push(&k->steps);
				if (!v)
					return -1;
				*v = (struct an_ivl){open, m->ts};
				in_iter = 0;
			} else if (m->kind == TBP_MARK_WARMUP_END) {
				k->steps.n = 0; /* the steady state starts at the next iteration */
				in_iter = 0;
			}
		}
		return 0;
	}
	if (a->steps.source == AN_STEPS_DETECTED && a->step_ivs.n >= 2) {
		/* After the warm-up the analysis set apart (the first step, or
		 * through the first call of late recurring work). */
		size_t first = a->steps.warmup >= 1 && a->steps.warmup < a->step_ivs.n ? a->steps.warmup : 1;
		for (size_t i = first; i < a->step_ivs.n; i++) {
			const struct an_step *s = VEC_AT(&a->step_ivs, struct an_step, i);
			struct an_ivl *v = vec_push(&k->steps);
			if (!v)
				return -1;
			*v = (struct an_ivl){s->begin, s->end};
		}
		return 0;
	}
	return 0;
}

struct loop_cand {
	uint64_t callpath, count, holding, total_ns, last_end;
	uint32_t tid;
	int unusable;
};

/* Steps of a trace the analysis found none in (a CPU run has no launches
 * to find its loop by): the calls of the function that, on one thread and
 * none inside another, at least LOOP_MIN times, mostly hold a collective
 * (the training step around DDP's backward() or an all_reduce); the one
 * with the most time when several do (the outer).  The first is warm-up,
 * each runs to the next one's start, as the analysis marks detected steps.
 * Without any, the whole trace is one step. */
static int steps_from_syncs(struct an_rank *k)
{
	const struct raw_span *sp = k->spans.data;
	struct vec cands = {.item = sizeof(struct loop_cand)};
	struct u64map idx = {0};
	int rc = -1;
	for (size_t i = 0; i < k->spans.n && k->syncs.n; i++) {
		if (sp[i].sync)
			continue;
		uint64_t *ix = u64map_get(&idx, sp[i].callpath);
		struct loop_cand *c;
		if (ix) {
			c = VEC_AT(&cands, struct loop_cand, *ix);
		} else {
			if (!(c = vec_push(&cands)) || u64map_put(&idx, sp[i].callpath, cands.n - 1))
				goto out;
			c->callpath = sp[i].callpath;
			c->tid = sp[i].tid;
		}
		/* (spans are in thread, then time order) */
		if (c->tid != sp[i].tid || (c->count && sp[i].ts < c->last_end))
			c->unusable = 1;
		c->count++;
		c->total_ns += sp[i].end - sp[i].ts;
		c->last_end = sp[i].end;
		size_t j = ivl_lower(&k->syncs, sp[i].ts);
		if (j < k->syncs.n && VEC_AT(&k->syncs, struct an_ivl, j)->end <= sp[i].end)
			c->holding++;
	}
	const struct loop_cand *best = NULL;
	for (size_t i = 0; i < cands.n; i++) {
		const struct loop_cand *c = VEC_AT(&cands, struct loop_cand, i);
		if (c->unusable || c->count < LOOP_MIN || 4 * c->holding < 3 * c->count)
			continue;
		if (!best || c->total_ns > best->total_ns)
			best = c;
	}
	if (best) {
		k->steps_callpath = best->callpath;
		uint64_t n = 0, prev_begin = 0;
		for (size_t i = 0; i < k->spans.n; i++) {
			if (sp[i].callpath != best->callpath)
				continue;
			if (n++ >= 2) { /* the one before, up to this one */
				struct an_ivl *v = vec_push(&k->steps);
				if (!v)
					goto out;
				*v = (struct an_ivl){prev_begin, sp[i].ts};
			}
			prev_begin = sp[i].ts;
			if (n == best->count && n >= 2) {
				struct an_ivl *v = vec_push(&k->steps);
				if (!v)
					goto out;
				*v = (struct an_ivl){sp[i].ts, sp[i].end};
			}
		}
	} else if (k->a.first_ts < k->a.last_ts) {
		struct an_ivl *v = vec_push(&k->steps);
		if (!v)
			goto out;
		*v = (struct an_ivl){k->a.first_ts, k->a.last_ts};
	}
	rc = 0;
out:
	vec_free(&cands);
	u64map_free(&idx);
	return rc;
}

/* The rank's collective calls: the outermost classified span of each
 * thread (all_reduce inside its logging wrapper is one call), and NCCL
 * kernels, in time order. */
static int rank_syncs(struct an_rank *k, int source, const struct vec *nccl)
{
	struct raw_span *sp = k->spans.data;
	uint32_t tid = 0;
	uint64_t outer_end = 0;
	int have = 0;
	for (size_t i = 0; i < k->spans.n; i++) {
		if (!sp[i].sync)
			continue;
		if (have && sp[i].tid == tid && sp[i].ts < outer_end)
			continue; /* inside the previous call */
		struct an_ivl *v = vec_push(&k->syncs);
		if (!v)
			return -1;
		*v = (struct an_ivl){sp[i].ts, sp[i].end};
		tid = sp[i].tid;
		outer_end = sp[i].end;
		have = 1;
	}
	if (source == AN_SYNC_C10D)
		for (size_t i = 0; i < nccl->n; i++) {
			struct an_ivl *v = vec_push(&k->syncs);
			if (!v)
				return -1;
			*v = *VEC_AT(nccl, struct an_ivl, i);
		}
	if (k->syncs.n)
		qsort(k->syncs.data, k->syncs.n, k->syncs.item, cmp_ivl);
	return 0;
}

/* ------------------------------------------------------------ functions */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* The function index of a span's call path: its user call path (as the
 * single-trace report places findings), matched across ranks by its whole
 * path's text.  UINT64_MAX when out of memory. */
static uint64_t fn_of(struct an_ranks *R, size_t ri, uint64_t cp)
{
	struct an_rank *k = &R->r[ri];
	uint64_t *hit = u64map_get(&k->fn_of_cp, cp);
	if (hit)
		return *hit - 1;
	uint64_t ucp = k->a.opts.where_leaf ? cp : an_user_callpath(&k->a, cp);
	char key[4096];
	an_site_key(&k->a, ucp, 0, key, sizeof key);
	uint64_t h = fnv1a(key), fn = UINT64_MAX;
	/* Hash collisions probe on: a different key one slot further. */
	for (;; h = h * 31 + 7) {
		if (h == UINT64_MAX)
			continue;
		uint64_t *ix = u64map_get(&R->fn_index, h);
		if (!ix) {
			struct an_fn_key *nk = vec_push(&R->fn_keys);
			if (!nk || !(nk->key = strdup(key)))
				return UINT64_MAX;
			nk->rank = ri;
			nk->callpath = ucp;
			fn = R->fn_keys.n - 1;
			if (u64map_put(&R->fn_index, h, fn + 1))
				return UINT64_MAX;
			break;
		}
		if (!strcmp(VEC_AT(&R->fn_keys, struct an_fn_key, *ix - 1)->key, key)) {
			fn = *ix - 1;
			break;
		}
	}
	if (u64map_put(&k->fn_of_cp, cp, fn + 1))
		return UINT64_MAX;
	return fn;
}

static int fn_add(struct an_rank *k, uint64_t fn, uint64_t ns)
{
	if (fn >= k->fn_cap) {
		size_t ncap = k->fn_cap ? k->fn_cap : 64;
		while (ncap <= fn)
			ncap *= 2;
		uint64_t *nf = realloc(k->fn_self, ncap * sizeof *nf);
		if (!nf)
			return -1;
		memset(nf + k->fn_cap, 0, (ncap - k->fn_cap) * sizeof *nf);
		k->fn_self = nf;
		k->fn_cap = ncap;
	}
	k->fn_self[fn] += ns;
	return 0;
}

/* Time [b, e) of one function, counted where it lies inside the rank's
 * aligned steps. */
static int fn_time(struct an_rank *k, size_t n_aligned, uint64_t fn, uint64_t b, uint64_t e)
{
	const struct an_ivl *st = VEC_AT(&k->steps, struct an_ivl, k->first_step);
	size_t lo = 0, hi = n_aligned;
	while (lo < hi) { /* first step ending after b */
		size_t m = lo + (hi - lo) / 2;
		if (st[m].end <= b)
			lo = m + 1;
		else
			hi = m;
	}
	for (size_t i = lo; i < n_aligned && st[i].begin < e; i++) {
		uint64_t x = b > st[i].begin ? b : st[i].begin, y = e < st[i].end ? e : st[i].end;
		if (y > x && fn_add(k, fn, y - x))
			return -1;
	}
	return 0;
}

struct open_span {
	uint64_t end, fn;
	int sync;
};

/* Each moment of each thread goes to its innermost open span (self time),
 * unless a collective is open around it (waiting is not work). */
static int rank_fn_times(struct an_ranks *R, size_t ri, size_t n_aligned)
{
	struct an_rank *k = &R->r[ri];
	const struct raw_span *sp = k->spans.data;
	struct open_span *stack = NULL;
	size_t depth = 0, cap = 0;
	uint64_t cur = 0;
	int rc = -1;
	for (size_t i = 0; i <= k->spans.n; i++) {
		int new_thread = i == k->spans.n || !i || sp[i].tid != sp[i - 1].tid;
		uint64_t until = new_thread ? UINT64_MAX : sp[i].ts;
		while (depth && stack[depth - 1].end <= until) {
			struct open_span *top = &stack[depth - 1];
			if (!top->sync && top->end > cur && fn_time(k, n_aligned, top->fn, cur, top->end))
				goto out;
			if (top->end > cur)
				cur = top->end;
			depth--;
		}
		if (i == k->spans.n)
			break;
		if (depth && !stack[depth - 1].sync && sp[i].ts > cur &&
		    fn_time(k, n_aligned, stack[depth - 1].fn, cur, sp[i].ts))
			goto out;
		if (sp[i].ts > cur || new_thread)
			cur = sp[i].ts;
		uint64_t fn = fn_of(R, ri, sp[i].callpath);
		if (fn == UINT64_MAX)
			goto out;
		if (depth == cap) {
			cap = cap ? 2 * cap : 64;
			struct open_span *ns = realloc(stack, cap * sizeof *ns);
			if (!ns)
				goto out;
			stack = ns;
		}
		/* A child seen to outlast its parent (clock ticks) ends with it. */
		uint64_t end = depth && sp[i].end > stack[depth - 1].end ? stack[depth - 1].end : sp[i].end;
		stack[depth] = (struct open_span){end, fn, sp[i].sync || (depth && stack[depth - 1].sync)};
		depth++;
	}
	rc = 0;
out:
	free(stack);
	return rc;
}

/* ------------------------------------------------------------ comparing */
static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Median of v[0..n) except v[skip] (n >= 2); sorts tmp. */
static uint64_t median_others(const uint64_t *v, size_t n, size_t skip, uint64_t *tmp)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (i != skip)
			tmp[m++] = v[i];
	qsort(tmp, m, sizeof *tmp, u64_cmp);
	return m % 2 ? tmp[m / 2] : tmp[m / 2 - 1] / 2 + tmp[m / 2] / 2 + (tmp[m / 2 - 1] % 2 + tmp[m / 2] % 2) / 2;
}

/* Lines the steady steps up.  Ranks that meet in collectives run in lock
 * step: each rank's first aligned step is the one starting nearest the
 * latest first step (a rank whose trace began a step earlier has one more).
 * Ranks that never meet drift apart, so wall clock says nothing: the k-th
 * steady steps are compared.  As many as every rank has from there. */
static void align_steps(struct an_ranks *R)
{
	if (R->sync_source == AN_SYNC_NONE) {
		size_t aligned = SIZE_MAX;
		for (size_t i = 0; i < R->n; i++) {
			R->r[i].first_step = 0;
			if (R->r[i].steps.n < aligned)
				aligned = R->r[i].steps.n;
		}
		R->aligned_steps = aligned;
		return;
	}
	uint64_t t0 = 0;
	for (size_t i = 0; i < R->n; i++) {
		if (!R->r[i].steps.n) {
			R->aligned_steps = 0;
			return;
		}
		uint64_t b = VEC_AT(&R->r[i].steps, struct an_ivl, 0)->begin;
		if (b > t0)
			t0 = b;
	}
	size_t aligned = SIZE_MAX;
	for (size_t i = 0; i < R->n; i++) {
		struct an_rank *k = &R->r[i];
		size_t j = ivl_lower(&k->steps, t0);
		if (j == k->steps.n || (j && t0 - VEC_AT(&k->steps, struct an_ivl, j - 1)->begin <
						VEC_AT(&k->steps, struct an_ivl, j)->begin - t0))
			j--;
		k->first_step = j;
		if (k->steps.n - j < aligned)
			aligned = k->steps.n - j;
	}
	R->aligned_steps = aligned;
}

/* The step's collectives on each rank: [lo[i], hi[i]) in its syncs. */
static void step_syncs(const struct an_ranks *R, size_t step, size_t *lo, size_t *hi)
{
	for (size_t i = 0; i < R->n; i++) {
		const struct an_rank *k = &R->r[i];
		const struct an_ivl *s = VEC_AT(&k->steps, struct an_ivl, k->first_step + step);
		lo[i] = ivl_lower(&k->syncs, s->begin);
		hi[i] = ivl_lower(&k->syncs, s->end);
	}
}

/* A collective call as every rank made it: arrival (start) and time in it
 * per rank, [call * n + rank]. */
struct step_calls {
	uint64_t *arrive, *dur;
	size_t n_calls, cap;
};

struct call_end {
	uint64_t end, begin;
	size_t rank;
};

static int cmp_call_end(const void *x, const void *y)
{
	const struct call_end *a = x, *b = y;
	return a->end < b->end ? -1 : a->end > b->end;
}

static int calls_add(struct step_calls *c, size_t n)
{
	if (c->n_calls == c->cap) {
		size_t ncap = c->cap ? 2 * c->cap : 8;
		uint64_t *na = realloc(c->arrive, ncap * n * sizeof *na);
		if (!na)
			return -1;
		c->arrive = na;
		uint64_t *nd = realloc(c->dur, ncap * n * sizeof *nd);
		if (!nd)
			return -1;
		c->dur = nd;
		c->cap = ncap;
	}
	c->n_calls++;
	return 0;
}

/* Collectives of two ranks ending further apart than this are not one call
 * (a call releases every rank at once, up to scheduling). */
#define CALL_END_SKEW_NS 1000000ULL

/* Matches the step's collectives across ranks.  When every rank recorded
 * as many, the j-th is the same call everywhere.  Otherwise some rank's
 * calls were too short to be recorded as spans (under the span threshold:
 * it did not wait, it came last): calls are matched by their ends (a
 * collective ends on every rank at once), one per rank at most, and a rank
 * missing from one arrived at its release, waiting nothing. */
static int match_calls(struct an_ranks *R, const size_t *lo, const size_t *hi, struct step_calls *c)
{
	size_t n = R->n, min = SIZE_MAX, max = 0, total = 0;
	c->n_calls = 0;
	for (size_t i = 0; i < n; i++) {
		size_t m = hi[i] - lo[i];
		min = m < min ? m : min;
		max = m > max ? m : max;
		total += m;
	}
	if (min == max) {
		for (size_t j = 0; j < min; j++) {
			if (calls_add(c, n))
				return -1;
			for (size_t i = 0; i < n; i++) {
				const struct an_ivl *v = VEC_AT(&R->r[i].syncs, struct an_ivl, lo[i] + j);
				c->arrive[j * n + i] = v->begin;
				c->dur[j * n + i] = v->end - v->begin;
			}
		}
		return 0;
	}
	struct call_end *ends = malloc(total * sizeof *ends);
	unsigned char *seen = malloc(n);
	if (!ends || !seen) {
		free(ends);
		free(seen);
		return -1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = lo[i]; j < hi[i]; j++) {
			const struct an_ivl *v = VEC_AT(&R->r[i].syncs, struct an_ivl, j);
			ends[k++] = (struct call_end){v->end, v->begin, i};
		}
	qsort(ends, total, sizeof *ends, cmp_call_end);
	int rc = 0;
	for (size_t a = 0; a < total && !rc;) {
		if ((rc = calls_add(c, n)))
			break;
		size_t call = c->n_calls - 1;
		uint64_t release = ends[a].end;
		memset(seen, 0, n);
		for (size_t i = 0; i < n; i++) {
			c->arrive[call * n + i] = release;
			c->dur[call * n + i] = 0;
		}
		size_t b = a;
		while (b < total && ends[b].end - release <= CALL_END_SKEW_NS && !seen[ends[b].rank]) {
			seen[ends[b].rank] = 1;
			c->arrive[call * n + ends[b].rank] = ends[b].begin;
			c->dur[call * n + ends[b].rank] = ends[b].end - ends[b].begin;
			b++;
		}
		a = b;
	}
	free(ends);
	free(seen);
	return rc;
}

/* One aligned step: who arrived last at its collectives (or, without any,
 * took longest), by how much, and the others' wait for it. */
static int compare_step(struct an_ranks *R, size_t step, uint64_t *arr, uint64_t *tmp, uint64_t *caused,
			size_t *lo, size_t *hi, struct step_calls *calls, uint64_t *step_len)
{
	size_t n = R->n, m = SIZE_MAX;
	uint64_t minb = UINT64_MAX, mine = UINT64_MAX, longest = 0;
	step_syncs(R, step, lo, hi);
	for (size_t i = 0; i < n; i++) {
		struct an_rank *k = &R->r[i];
		const struct an_ivl *s = VEC_AT(&k->steps, struct an_ivl, k->first_step + step);
		minb = s->begin < minb ? s->begin : minb;
		mine = s->end < mine ? s->end : mine;
		if (s->end - s->begin > longest)
			longest = s->end - s->begin;
		uint64_t in_syncs = 0;
		for (size_t j = lo[i]; j < hi[i]; j++) {
			const struct an_ivl *c = VEC_AT(&k->syncs, struct an_ivl, j);
			k->sync_ns += c->end - c->begin;
			in_syncs += c->end - c->begin;
		}
		/* The step's own work, its time outside the collectives: what
		 * tells a slow rank from the ones waiting for it (HTML heat map). */
		uint64_t *w = vec_push(&k->step_work);
		if (!w)
			return -1;
		*w = s->end - s->begin > in_syncs ? s->end - s->begin - in_syncs : 0;
		if (hi[i] - lo[i] < m)
			m = hi[i] - lo[i];
		caused[i] = 0;
	}
	*step_len = longest;
	for (size_t i = 0; i < n; i++) {
		struct an_rank *k = &R->r[i];
		const struct an_ivl *s = VEC_AT(&k->steps, struct an_ivl, k->first_step + step);
		k->start_lag_ns += s->begin - minb;
		k->end_lag_ns += s->end - mine;
	}
	if (R->syncs_per_step > m || !step)
		R->syncs_per_step = m;
	if (match_calls(R, lo, hi, calls))
		return -1;
	size_t last = 0;
	uint64_t late = 0;
	if (calls->n_calls) {
		for (size_t j = 0; j < calls->n_calls; j++) {
			const uint64_t *at = calls->arrive + j * n, *dur = calls->dur + j * n;
			size_t s = 0;
			for (size_t i = 1; i < n; i++)
				if (at[i] > at[s])
					s = i;
			for (size_t i = 0; i < n; i++) {
				if (i == s)
					continue;
				uint64_t w = at[s] - at[i];
				if (w > dur[i])
					w = dur[i];
				R->r[i].wait_ns += w;
				caused[s] += w;
			}
		}
		for (size_t i = 1; i < n; i++)
			if (caused[i] > caused[last])
				last = i;
		for (size_t j = 0; j < calls->n_calls; j++) {
			const uint64_t *at = calls->arrive + j * n;
			uint64_t med = median_others(at, n, last, tmp);
			if (at[last] > med && at[last] - med > late)
				late = at[last] - med;
		}
		R->r[last].caused_ns += caused[last];
	} else {
		/* Ranks that never wait for each other drift apart: what one
		 * rank adds is its steps' extra length. */
		for (size_t i = 0; i < n; i++) {
			const struct an_ivl *s = VEC_AT(&R->r[i].steps, struct an_ivl, R->r[i].first_step + step);
			arr[i] = s->end - s->begin;
			if (arr[i] > arr[last])
				last = i;
		}
		uint64_t med = median_others(arr, n, last, tmp);
		late = arr[last] - med;
	}
	if (late) {
		R->r[last].late_steps++;
		R->r[last].late_ns += late;
	}
	return 0;
}

/* The other ranks' time waiting for the straggler: in every call it was
 * the last to reach (in any step), each one's wait. */
static int straggler_waits(struct an_ranks *R, size_t s, size_t *lo, size_t *hi, struct step_calls *calls)
{
	size_t n = R->n;
	for (size_t step = 0; step < R->aligned_steps; step++) {
		step_syncs(R, step, lo, hi);
		if (match_calls(R, lo, hi, calls))
			return -1;
		for (size_t j = 0; j < calls->n_calls; j++) {
			const uint64_t *at = calls->arrive + j * n, *dur = calls->dur + j * n;
			size_t last = 0;
			for (size_t i = 1; i < n; i++)
				if (at[i] > at[last])
					last = i;
			if (last != s)
				continue;
			for (size_t i = 0; i < n; i++) {
				if (i == s)
					continue;
				uint64_t w = at[s] - at[i] < dur[i] ? at[s] - at[i] : dur[i];
				R->r[i].wait_for_straggler_ns += w;
				R->wait_ns += w;
			}
		}
	}
	return 0;
}

static int cmp_fn_extra(const void *x, const void *y)
{
	const struct an_rank_fn *a = x, *b = y;
	uint64_t ea = a->self_ns - a->others_ns, eb = b->self_ns - b->others_ns;
	return ea > eb ? -1 : ea < eb;
}

static int compare_ranks(struct an_ranks *R)
{
	size_t n = R->n;
	R->straggler = -1;
	align_steps(R);
	if (n < 2 || !R->aligned_steps)
		return 0;
	uint64_t *arr = calloc(3 * n + R->aligned_steps, sizeof *arr);
	size_t *lo = calloc(2 * n, sizeof *lo);
	struct step_calls calls = {0};
	int bad = !arr || !lo;
	uint64_t *tmp = arr + n, *caused = arr + 2 * n, *lens = arr + 3 * n;
	for (size_t k = 0; k < R->aligned_steps && !bad; k++)
		bad = compare_step(R, k, arr, tmp, caused, lo, lo + n, &calls, &lens[k]);
	if (bad) {
		free(calls.arrive);
		free(calls.dur);
		free(arr);
		free(lo);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		R->r[i].start_lag_ns /= R->aligned_steps;
		R->r[i].end_lag_ns /= R->aligned_steps;
	}
	qsort(lens, R->aligned_steps, sizeof *lens, u64_cmp);
	R->median_step_ns = lens[R->aligned_steps / 2];

	/* The straggler: last in at least two thirds of at least LOOP_MIN
	 * steps, late by a share of the step that is not noise. */
	size_t s = 0;
	for (size_t i = 1; i < n; i++)
		if (R->r[i].late_steps > R->r[s].late_steps ||
		    (R->r[i].late_steps == R->r[s].late_steps && R->r[i].late_ns > R->r[s].late_ns))
			s = i;
	struct an_rank *k = &R->r[s];
	uint64_t mean = k->late_steps ? k->late_ns / k->late_steps : 0;
	uint64_t min_late = R->median_step_ns * STRAGGLER_MIN_SHARE / 100;
	if (min_late < STRAGGLER_MIN_NS)
		min_late = STRAGGLER_MIN_NS;
	/* (a step or two say nothing about a rank being late as a rule) */
	int found = R->aligned_steps >= LOOP_MIN && k->late_steps * 3 >= R->aligned_steps * 2 && mean >= min_late;
	int rc = 0;
	if (found) {
		R->straggler = (long)s;
		R->straggler_late_ns = mean;
		R->straggler_steps = k->late_steps;
		rc = straggler_waits(R, s, lo, lo + n, &calls);
	}
	free(calls.arrive);
	free(calls.dur);

	/* Each rank's time by function in its aligned steps, then the
	 * straggler's excess over the others' median. */
	for (size_t i = 0; i < n && !rc; i++)
		rc = rank_fn_times(R, i, R->aligned_steps);
	if (!rc && found) {
		size_t nfn = R->fn_keys.n;
		struct an_rank_fn *cand = calloc(nfn ? nfn : 1, sizeof *cand);
		uint64_t *v = calloc(n, sizeof *v);
		if (!cand || !v) {
			rc = -1;
		} else {
			size_t nc = 0;
			for (size_t f = 0; f < nfn; f++) {
				uint64_t self = f < k->fn_cap ? k->fn_self[f] : 0;
				for (size_t i = 0; i < n; i++)
					v[i] = f < R->r[i].fn_cap ? R->r[i].fn_self[f] : 0;
				uint64_t others = median_others(v, n, s, tmp);
				if (self > others)
					cand[nc++] = (struct an_rank_fn){f, self, others};
			}
			qsort(cand, nc, sizeof *cand, cmp_fn_extra);
			R->n_fns = nc < 5 ? nc : 5;
			memcpy(R->fns, cand, R->n_fns * sizeof *cand);
		}
		free(cand);
		free(v);
	}
	free(arr);
	free(lo);
	return rc;
}

/* ------------------------------------------------------------ clocks */
static void shift_ivls(struct vec *v, int64_t by)
{
	for (size_t i = 0; i < v->n; i++) {
		struct an_ivl *x = VEC_AT(v, struct an_ivl, i);
		x->begin += (uint64_t)by;
		x->end += (uint64_t)by;
	}
}

/* Traces of one machine share CLOCK_MONOTONIC.  Ranks on several machines
 * do not (each counts from its own boot): their times are put on the first
 * trace's clock through each process's wall clock at its start (the process
 * record's realtime_ns and monotonic_ns, read together), as good as the
 * machines' clock synchronisation (NTP: about a millisecond). */
int an_clock_shifts(const struct analysis *const *as, size_t n, int64_t *shift)
{
	int several_hosts = 0;
	for (size_t i = 0; i < n; i++) {
		shift[i] = 0;
		if (!as[i]->has_process || !as[i]->process.realtime_ns || !as[i]->process.monotonic_ns)
			return 0; /* (not comparable: every trace as it is) */
		size_t l0, l;
		const char *h0 = an_string(as[0], as[0]->process.host, &l0), *h = an_string(as[i], as[i]->process.host, &l);
		several_hosts |= h0 && h && (l0 != l || memcmp(h0, h, l));
	}
	if (!several_hosts)
		return 0;
	int64_t base = (int64_t)(as[0]->process.realtime_ns - as[0]->process.monotonic_ns);
	for (size_t i = 1; i < n; i++)
		shift[i] = (int64_t)(as[i]->process.realtime_ns - as[i]->process.monotonic_ns) - base;
	return 1;
}

static int align_clocks(struct an_ranks *R)
{
	const struct analysis **as = calloc(R->n ? R->n : 1, sizeof *as);
	int64_t *shift = calloc(R->n ? R->n : 1, sizeof *shift);
	if (!as || !shift) {
		free(as);
		free(shift);
		return -1;
	}
	for (size_t i = 0; i < R->n; i++)
		as[i] = &R->r[i].a;
	R->wall_clock_aligned = an_clock_shifts(as, R->n, shift);
	for (size_t i = 1; i < R->n && R->wall_clock_aligned; i++) {
		struct an_rank *k = &R->r[i];
		int64_t by = shift[i];
		k->clock_shift_ns = by;
		shift_ivls(&k->steps, by);
		shift_ivls(&k->syncs, by);
		struct raw_span *sp = k->spans.data;
		for (size_t j = 0; j < k->spans.n; j++) {
			sp[j].ts += (uint64_t)by;
			sp[j].end += (uint64_t)by;
		}
	}
	free(as);
	free(shift);
	return 0;
}

/* ------------------------------------------------------------ loading */
static void rank_free(struct an_rank *k)
{
	an_free(&k->a);
	vec_free(&k->steps);
	vec_free(&k->syncs);
	vec_free(&k->step_work);
	vec_free(&k->spans);
	u64map_free(&k->fn_of_cp);
	free(k->fn_self);
}

static int cmp_rank(const void *x, const void *y)
{
	const struct an_rank *a = x, *b = y;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

int an_ranks_run(struct an_ranks *R, char **paths, size_t n, const struct an_opts *opts)
{
	memset(R, 0, sizeof *R);
	R->straggler = -1;
	R->fn_keys.item = sizeof(struct an_fn_key);
	R->skipped.item = sizeof(struct an_skipped);
	struct an_rank *all = calloc(n, sizeof *all);
	struct vec *marks = calloc(n, sizeof *marks), *nccl = calloc(n, sizeof *nccl);
	int rc = TBA_EXIT_OK;
	if (!all || !marks || !nccl) {
		free(all);
		free(marks);
		free(nccl);
		fprintf(stderr, "tbanalyze: out of memory\n");
		return TBA_EXIT_INTERNAL;
	}
	size_t loaded = 0;
	int any_rank = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct an_rank *k = &all[i];
		loaded = i + 1;
		k->input = i;
		k->path = paths[i];
		k->steps.item = k->syncs.item = sizeof(struct an_ivl);
		k->step_work.item = sizeof(uint64_t);
		k->spans.item = sizeof(struct raw_span);
		marks[i].item = sizeof(struct raw_mark);
		nccl[i].item = sizeof(struct an_ivl);
		rc = an_run(&k->a, paths[i], opts);
		if (!rc)
			rc = collect(k, &marks[i], &nccl[i]);
		if (rc)
			break;
		if (k->has_rank) {
			k->rank_source = AN_RANK_RECORDED;
			any_rank = 1;
		} else {
			long from_name = an_rank_from_name(paths[i]);
			k->rank_source = from_name >= 0 ? AN_RANK_FILE_NAME : AN_RANK_ORDER;
			k->rank = from_name >= 0 ? (uint64_t)from_name : i;
			any_rank |= from_name >= 0;
		}
	}
	if (rc)
		goto out;
	/* With ranks known, a trace without one is another process of the run
	 * (the launcher's agent): listed, not compared. */
	R->r = calloc(n, sizeof *R->r);
	if (!R->r)
		goto nomem;
	loaded = 0; /* from here each one is freed or moved to R->r (out of memory midway leaks the rest) */
	for (size_t i = 0; i < n; i++) {
		if (any_rank && all[i].rank_source == AN_RANK_ORDER) {
			struct an_skipped *p = vec_push(&R->skipped);
			if (!p)
				goto nomem;
			*p = (struct an_skipped){all[i].path, AN_SKIP_NOT_A_RANK, 0};
			rank_free(&all[i]);
			vec_free(&marks[i]);
			vec_free(&nccl[i]);
			continue;
		}
		R->r[R->n++] = all[i];
	}
	if (!R->n) {
		fprintf(stderr, "tbanalyze: none of the traces is a rank\n");
		rc = TBA_EXIT_BAD_INPUT;
		goto out_r;
	}
	qsort(R->r, R->n, sizeof *R->r, cmp_rank);
	/* Several traces of one rank: the rank's own process took the plain
	 * name rank<N>.zst (it starts first); the others (processes it spawned
	 * with its environment: data loader workers; or a trace of another run)
	 * are listed, not compared.  Without the plain name, the one with the
	 * most events is the rank's. */
	size_t kept = 0;
	for (size_t i = 0; i < R->n;) {
		size_t j = i, best = i;
		while (j < R->n && R->r[j].rank == R->r[i].rank) {
			int plain_j = an_rank_from_name(R->r[j].path) == (long)R->r[j].rank;
			int plain_b = an_rank_from_name(R->r[best].path) == (long)R->r[best].rank;
			if (plain_j > plain_b || (plain_j == plain_b && R->r[j].a.events > R->r[best].a.events))
				best = j;
			j++;
		}
		for (size_t x = i; x < j; x++) {
			if (x == best) {
				R->r[kept++] = R->r[x];
				continue;
			}
			struct an_skipped *p = vec_push(&R->skipped);
			if (!p)
				goto nomem;
			*p = (struct an_skipped){R->r[x].path, AN_SKIP_SAME_RANK, R->r[x].rank};
			rank_free(&R->r[x]);
		}
		i = j;
	}
	R->n = kept;
	/* Collectives: torch.distributed calls or NCCL kernels where any rank
	 * makes them in a loop (one call site at least LOOP_MIN times: not
	 * just the process group's set-up and tear-down); else, under DDP,
	 * backward(). */
	int c10d = 0, ddp = 0;
	for (size_t i = 0; i < R->n; i++) {
		struct an_rank *k = &R->r[i];
		c10d |= nccl[k->input].n >= LOOP_MIN;
		struct raw_span *sp = k->spans.data;
		struct u64map calls = {0};
		for (size_t j = 0; j < k->spans.n; j++) {
			if (is_c10d_span(&k->a, sp[j].callpath)) {
				uint64_t *c = u64map_get(&calls, sp[j].callpath);
				if (c)
					c10d |= ++*c >= LOOP_MIN;
				else if (u64map_put(&calls, sp[j].callpath, 1))
					goto nomem;
			}
			k->ddp |= is_ddp_span(&k->a, sp[j].callpath);
		}
		u64map_free(&calls);
		ddp |= k->ddp;
	}
	R->sync_source = c10d ? AN_SYNC_C10D : ddp ? AN_SYNC_DDP_BACKWARD : AN_SYNC_NONE;
	for (size_t i = 0; i < R->n; i++) {
		struct an_rank *k = &R->r[i];
		struct raw_span *sp = k->spans.data;
		for (size_t j = 0; j < k->spans.n; j++)
			sp[j].sync = R->sync_source == AN_SYNC_C10D	      ? is_c10d_span(&k->a, sp[j].callpath)
				     : R->sync_source == AN_SYNC_DDP_BACKWARD ? is_backward_span(&k->a, sp[j].callpath)
									      : 0;
		if (k->spans.n)
			qsort(k->spans.data, k->spans.n, k->spans.item, cmp_span);
		if (rank_syncs(k, R->sync_source, &nccl[k->input]) || rank_steps(k, &marks[k->input]) ||
		    (!k->steps.n && steps_from_syncs(k)))
			goto nomem;
	}
	if (align_clocks(R) || compare_ranks(R))
		goto nomem;
	goto out;
nomem:
	fprintf(stderr, "tbanalyze: out of memory\n");
	rc = TBA_EXIT_INTERNAL;
out_r:
	for (size_t i = 0; i < R->n; i++)
		rank_free(&R->r[i]);
	free(R->r);
	R->r = NULL;
	R->n = 0;
out:
	for (size_t i = 0; i < loaded; i++)
		rank_free(&all[i]);
	for (size_t i = 0; i < n; i++) {
		vec_free(&marks[i]);
		vec_free(&nccl[i]);
	}
	free(marks);
	free(nccl);
	free(all);
	return rc;
}

void an_ranks_free(struct an_ranks *R)
{
	for (size_t i = 0; i < R->n; i++)
		rank_free(&R->r[i]);
	free(R->r);
	for (size_t i = 0; i < R->fn_keys.n; i++)
		free(VEC_AT(&R->fn_keys, struct an_fn_key, i)->key);
	vec_free(&R->fn_keys);
	u64map_free(&R->fn_index);
	vec_free(&R->skipped);
	memset(R, 0, sizeof *R);
}

int an_ranks_fn_frame(const struct an_ranks *R, uint64_t fn, struct an_frame *out, const struct an_rank **on)
{
	const struct an_fn_key *k = VEC_AT(&R->fn_keys, struct an_fn_key, fn);
	*on = &R->r[k->rank];
	return an_callpath_frames(&(*on)->a, k->callpath, out, 1) == 1;
}
