/*
 * tbanalyze diff: A's Python lines matched to B's across an edit.
 *
 * A trace records frames as (file, function, line): no source text, no
 * function's first line beyond the def lines the spans carry.  Deleting
 * four lines above loss.backward() moves that line (84 -> 80) and every
 * line below it, in this function and the ones after; keyed by absolute
 * line, the unchanged line read as one site gone and one new.
 *
 * So lines are matched as the user's edit left them:
 *  - files: by name; a file only one trace has with the other's file (only
 *    in it) holding the most of its (function, line) frames, else of its
 *    functions (train.py against train_v2.py);
 *  - within each function of a file pair, A's lines against B's by an
 *    alignment that keeps their order (an edit does not reorder the lines
 *    it leaves), pairing lines that do the same thing: what each line calls
 *    (the next frame in: a library function by file and name, a user
 *    function by name; a line that calls the op itself), a function's def
 *    line (a span's leaf) with its def line.  Ties go to the pairing at the
 *    shift of the nearest line that can only be itself (a call of its own
 *    kind, once in the function on both sides), then to the same line.
 * A line whose calls changed (another function, another op) is not paired:
 * it reads as gone in A and new in B.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "tr_common.h"

struct ufile {
	char *name; /* as displayed */
	size_t len;
	uint64_t h;
	int other;        /* the other trace has a file of this name (any frame) */
	long map;         /* A's renamed file: the index of B's file it is compared as, -1: none */
	long same;        /* A's file: B's file of the same name (a user file there), -1: none */
	uint64_t matched; /* frames alike with it (function and line) */
};

struct lnode {
	size_t file;     /* index in the trace's files */
	uint64_t fn;     /* hash of the function's name */
	uint64_t line;
	uint64_t *kids;  /* what the line calls: sorted, unique */
	size_t nk, capk;
	long match;      /* the other trace's node, -1: none */
	int def;         /* a function's def line (a span's leaf) */
};

struct side {
	struct vec f;         /* struct ufile */
	struct vec nodes;     /* struct lnode */
	struct u64map by_h;   /* user file name hash -> index + 1 */
	struct u64map all;    /* every frame's file hash (libraries' too) -> 1 */
	struct u64map by_key; /* node key (file, function, line) -> index + 1 */
	struct u64map fns;    /* (file, function) -> 1 */
};

struct diff_match {
	struct side s[2];
	uint64_t matched, moved, a_only, b_only;
};

#define UFILE(sd, i) VEC_AT(&(sd)->f, struct ufile, i)
#define NODE(sd, i) VEC_AT(&(sd)->nodes, struct lnode, i)

static uint64_t bytes_hash(const char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
	return h >> 1; /* never UINT64_MAX */
}

#define FNV 0xcbf29ce484222325ULL

static uint64_t node_key(size_t file, uint64_t fn, uint64_t line)
{
	return an_hash_combine(an_hash_combine(file, fn), line) >> 1;
}

static uint64_t fn_key(size_t file, uint64_t fn)
{
	return an_hash_combine(file + 0x51, fn) >> 1;
}

/* What the frame inside a line is, as the line's callee. */
static uint64_t kid_of(const struct analysis *x, const struct an_frame *in)
{
	if (an_frame_is_library(x, in)) {
		size_t fl;
		const char *file = an_display_path(x, in->file, in->file_len, &fl);
		return bytes_hash(in->function, in->function_len, bytes_hash(file, fl, FNV ^ 'L'));
	}
	return bytes_hash(in->function, in->function_len, FNV ^ 'U');
}

#define KID_LEAF (bytes_hash("leaf", 4, FNV))
#define KID_DEF (bytes_hash("def", 3, FNV))

static int add_kid(struct lnode *n, uint64_t k)
{
	for (size_t i = 0; i < n->nk; i++)
		if (n->kids[i] == k)
			return 0;
	if (n->nk == n->capk) {
		size_t nc = n->capk ? 2 * n->capk : 4;
		uint64_t *nv = realloc(n->kids, nc * sizeof *nv);
		if (!nv)
			return -1;
		n->kids = nv;
		n->capk = nc;
	}
	n->kids[n->nk++] = k;
	return 0;
}

static long file_index(struct side *sd, const char *file, size_t fl, uint64_t h)
{
	uint64_t *ix = u64map_get(&sd->by_h, h);
	if (ix)
		return (long)*ix - 1;
	char *name = malloc(fl + 1);
	struct ufile *u = name ? vec_push(&sd->f) : NULL;
	if (!u) {
		free(name);
		return -1;
	}
	memcpy(name, file, fl);
	name[fl] = 0;
	*u = (struct ufile){.name = name, .len = fl, .h = h, .map = -1, .same = -1};
	if (u64map_put(&sd->by_h, h, sd->f.n))
		return -1;
	return (long)sd->f.n - 1;
}

/* The user's frames of one call path as lines (span: its leaf is a def line). */
static int gather_path(struct side *sd, const struct analysis *x, uint64_t cp, int span)
{
	struct an_frame fr[64];
	size_t n = an_callpath_frames(x, cp, fr, 64);
	for (size_t i = 0; i < n; i++) {
		size_t fl;
		const char *file = an_display_path(x, fr[i].file, fr[i].file_len, &fl);
		uint64_t h = bytes_hash(file, fl, FNV);
		if (!u64map_get(&sd->all, h) && u64map_put(&sd->all, h, 1))
			return -1;
		if (an_frame_is_library(x, &fr[i]))
			continue;
		long f = file_index(sd, file, fl, h);
		if (f < 0)
			return -1;
		uint64_t fn = bytes_hash(fr[i].function, fr[i].function_len, FNV);
		uint64_t key = node_key((size_t)f, fn, fr[i].line);
		uint64_t *ix = u64map_get(&sd->by_key, key);
		struct lnode *nd;
		if (ix) {
			nd = NODE(sd, *ix - 1);
		} else {
			if (!(nd = vec_push(&sd->nodes)) || u64map_put(&sd->by_key, key, sd->nodes.n))
				return -1;
			*nd = (struct lnode){.file = (size_t)f, .fn = fn, .line = fr[i].line, .match = -1};
			if (u64map_put(&sd->fns, fn_key((size_t)f, fn), 1))
				return -1;
		}
		uint64_t kid = i ? kid_of(x, &fr[i - 1]) : span ? KID_DEF : KID_LEAF;
		if (span && !i)
			nd->def = 1;
		if (add_kid(nd, kid))
			return -1;
	}
	return 0;
}

static int gather(struct side *sd, const struct analysis *x)
{
	for (size_t i = 0; i < x->sites.n; i++)
		if (gather_path(sd, x, VEC_AT(&x->sites, struct an_site_stat, i)->callpath, 0))
			return -1;
	for (size_t i = 0; i < x->idle_parts.n; i++)
		if (gather_path(sd, x, VEC_AT(&x->idle_parts, struct an_finding, i)->callpath, 0))
			return -1;
	/* Spans always: their leaves are the functions' def lines. */
	for (size_t i = 0; i < x->spans.n; i++)
		if (gather_path(sd, x, VEC_AT(&x->spans, struct an_span_stat, i)->callpath, 1))
			return -1;
	if (x->steps.loop && gather_path(sd, x, x->steps.loop, 0))
		return -1;
	if (x->steps.unit && gather_path(sd, x, x->steps.unit, 0))
		return -1;
	return 0;
}

/* Every device of x named (DEVICE records) is one of y's, by name. */
static int devices_in(const struct analysis *x, const struct analysis *y)
{
	for (size_t i = 0; i < x->devices.n; i++) {
		size_t nl, ml;
		const char *n = an_string(x, VEC_AT(&x->devices, struct an_device, i)->name, &nl);
		int found = !n;
		for (size_t j = 0; j < y->devices.n && !found; j++) {
			const char *m = an_string(y, VEC_AT(&y->devices, struct an_device, j)->name, &ml);
			found = m && ml == nl && !memcmp(n, m, nl);
		}
		if (!found)
			return 0;
	}
	return 1;
}

/* What a line that calls the op itself does on the GPU: its kernels (by
 * name, when both runs had the same GPUs: another GPU runs other GEMM
 * kernels for the same line), copies (by kind) and memsets, read again from
 * the trace (the analysis keeps times per call path, not what was launched
 * there).
 * Allocations, frees and syncs are left out: where the caching allocator
 * goes to the driver, or a sync falls, varies between runs of one line. */
static void gather_ops(struct side *sd, const struct analysis *x, int kernel_names)
{
	struct tbp_reader *r;
	if (an_open(&r, x->path))
		return;
	struct u64map seen = {0};
	struct tbp_record rec;
	while (tr_next(r, x->path, &rec) > 0) {
		if (rec.kind != TBP_K_LAUNCH && rec.kind != TBP_K_MEMCPY && rec.kind != TBP_K_MEMSET)
			continue;
		uint64_t cp = rec.u.call.callpath, op = FNV ^ rec.kind;
		if (!cp)
			continue;
		if (rec.kind == TBP_K_LAUNCH && !kernel_names)
			continue; /* "launches a kernel" tells no op line from another */
		if (rec.kind == TBP_K_LAUNCH) {
			size_t nl;
			const char *name = an_string(x, rec.u.launch.name, &nl);
			op = name ? bytes_hash(name, nl, op) : an_hash_combine(op, rec.u.launch.name) >> 1;
		} else if (rec.kind == TBP_K_MEMCPY) {
			op = an_hash_combine(op, rec.u.memcpy.copy_kind) >> 1;
		}
		uint64_t pair = an_hash_combine(cp, op) >> 1;
		if (u64map_get(&seen, pair))
			continue;
		if (u64map_put(&seen, pair, 1))
			break;
		struct an_frame f;
		if (!an_callpath_frames(x, cp, &f, 1) || an_frame_is_library(x, &f))
			continue;
		size_t fl;
		const char *file = an_display_path(x, f.file, f.file_len, &fl);
		uint64_t *fx = u64map_get(&sd->by_h, bytes_hash(file, fl, FNV));
		uint64_t *ix = fx ? u64map_get(&sd->by_key, node_key(*fx - 1, bytes_hash(f.function, f.function_len, FNV),
								     f.line))
				  : NULL;
		struct lnode *nd = ix ? NODE(sd, *ix - 1) : NULL;
		if (nd && nd->nk < 32 && add_kid(nd, op))
			break;
	}
	u64map_free(&seen);
	tbp_reader_close(r);
}

static int cmp_u64(const void *p, const void *q)
{
	uint64_t a = *(const uint64_t *)p, b = *(const uint64_t *)q;
	return a < b ? -1 : a > b;
}

/* A's files paired with B's: the same name, or (each only in its trace)
 * the file holding the most of its (function, line) frames, then the most
 * of its functions, greedily, at least one. */
static void pair_files(struct side *a, struct side *b)
{
	for (size_t i = 0; i < a->f.n; i++) {
		struct ufile *u = UFILE(a, i);
		u->other = u64map_get(&b->all, u->h) != NULL;
		uint64_t *ix = u64map_get(&b->by_h, u->h);
		u->same = ix ? (long)*ix - 1 : -1;
	}
	for (size_t j = 0; j < b->f.n; j++)
		UFILE(b, j)->other = u64map_get(&a->all, UFILE(b, j)->h) != NULL;
	int *used = calloc(b->f.n ? b->f.n : 1, sizeof *used);
	if (!used)
		return;
	for (size_t i = 0; i < a->f.n; i++) {
		if (UFILE(a, i)->other)
			continue;
		uint64_t best = 0, best_lines = 0;
		long bj = -1;
		for (size_t j = 0; j < b->f.n; j++) {
			if (UFILE(b, j)->other || used[j])
				continue;
			uint64_t lines = 0, fns = 0;
			for (size_t t = 0; t < a->nodes.n; t++) {
				const struct lnode *nd = NODE(a, t);
				if (nd->file != i)
					continue;
				lines += u64map_get(&b->by_key, node_key(j, nd->fn, nd->line)) != NULL;
				fns += u64map_get(&b->fns, fn_key(j, nd->fn)) != NULL;
			}
			uint64_t score = lines * 1000000 + fns;
			if (score > best) {
				best = score;
				best_lines = lines;
				bj = (long)j;
			}
		}
		if (bj >= 0) {
			used[bj] = 1;
			UFILE(a, i)->map = bj;
			UFILE(a, i)->matched = best_lines;
		}
	}
	free(used);
}

/* B's file an A file is compared with, -1: none. */
static long target_file(const struct side *a, size_t i)
{
	const struct ufile *u = UFILE(a, i);
	return u->map >= 0 ? u->map : u->same;
}

/* ------------------------------------------------------------ line alignment */
struct gnode {
	uint64_t group; /* (B's file, function) */
	uint64_t line;
	size_t ix;      /* node index */
};

static int cmp_gnode(const void *p, const void *q)
{
	const struct gnode *x = p, *y = q;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int same_kids(const struct lnode *x, const struct lnode *y)
{
	return x->nk == y->nk && !memcmp(x->kids, y->kids, x->nk * sizeof *x->kids);
}

/* Both sorted: |x and y| / |x or y|. */
static double kids_overlap(const struct lnode *x, const struct lnode *y)
{
	size_t i = 0, j = 0, both = 0;
	while (i < x->nk && j < y->nk) {
		if (x->kids[i] == y->kids[j])
			both++, i++, j++;
		else if (x->kids[i] < y->kids[j])
			i++;
		else
			j++;
	}
	size_t any = x->nk + y->nk - both;
	return any ? (double)both / (double)any : 0;
}

/* A line that only calls ops itself says little of what it is. */
static int weak(const struct lnode *x)
{
	return x->nk == 1 && x->kids[0] == KID_LEAF;
}

/* How alike two lines are, 0: not the same line. */
static double alike(const struct lnode *x, const struct lnode *y)
{
	if (x->def != y->def)
		return 0;
	if (same_kids(x, y))
		return weak(x) ? 1 : 4;
	return kids_overlap(x, y) >= 0.5 ? 2 : 0;
}

/* Unique in its group on its side: the only line with these callees. */
static int unique_in(const struct side *sd, const struct gnode *g, size_t n, size_t k)
{
	const struct lnode *x = NODE(sd, g[k].ix);
	for (size_t i = 0; i < n; i++)
		if (i != k && same_kids(x, NODE(sd, g[i].ix)))
			return 0;
	return 1;
}

struct anchor {
	uint64_t a_line;
	int64_t shift;
};

/* The shift of the anchor nearest a_line (0: none). */
static int64_t nearest_shift(const struct anchor *an, size_t n, uint64_t a_line, int *found)
{
	uint64_t best = UINT64_MAX;
	int64_t s = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t d = an[i].a_line > a_line ? an[i].a_line - a_line : a_line - an[i].a_line;
		if (d < best) {
			best = d;
			s = an[i].shift;
		}
	}
	*found = n > 0;
	return s;
}

/* Anchors: a line of a kind (callees) once in the function on both sides;
 * out has room for min(na, nb). */
static size_t group_anchors(const struct diff_match *m, const struct gnode *ga, size_t na, const struct gnode *gb,
			    size_t nb, struct anchor *out)
{
	const struct side *A = &m->s[0], *B = &m->s[1];
	size_t n = 0;
	for (size_t i = 0; i < na && n < nb; i++) {
		const struct lnode *x = NODE(A, ga[i].ix);
		if (weak(x) || !unique_in(A, ga, na, i))
			continue;
		for (size_t j = 0; j < nb; j++)
			if (same_kids(x, NODE(B, gb[j].ix)) && x->def == NODE(B, gb[j].ix)->def) {
				if (unique_in(B, gb, nb, j))
					out[n++] = (struct anchor){ga[i].line, (int64_t)gb[j].line - (int64_t)ga[i].line};
				break;
			}
	}
	return n;
}

/* One function's lines: A's ga[0..na) against B's gb[0..nb), both by line. */
static int align(struct diff_match *m, const struct gnode *ga, size_t na, const struct gnode *gb, size_t nb,
		 const struct anchor *file_anchors, size_t nfa)
{
	struct side *A = &m->s[0], *B = &m->s[1];
	if ((double)na * (double)nb > 4e6) { /* too big to align: the same lines only */
		for (size_t i = 0, j = 0; i < na && j < nb;) {
			if (ga[i].line == gb[j].line) {
				if (alike(NODE(A, ga[i].ix), NODE(B, gb[j].ix)) > 0) {
					NODE(A, ga[i].ix)->match = (long)gb[j].ix;
					NODE(B, gb[j].ix)->match = (long)ga[i].ix;
				}
				i++, j++;
			} else if (ga[i].line < gb[j].line) {
				i++;
			} else {
				j++;
			}
		}
		return 0;
	}
	struct anchor *anc = malloc((na < nb ? na : nb) * sizeof *anc + 1);
	if (!anc)
		return -1;
	size_t nanc = group_anchors(m, ga, na, gb, nb, anc);
	double *best = calloc((na + 1) * (nb + 1), sizeof *best);
	if (!best) {
		free(anc);
		return -1;
	}
#define BEST(i, j) best[(i) * (nb + 1) + (j)]
	/* w(i, j): how alike, + 1 at the nearest anchor's shift, + 1/4 at the same line. */
	for (size_t i = 1; i <= na; i++) {
		const struct lnode *x = NODE(A, ga[i - 1].ix);
		int found;
		int64_t shift = nearest_shift(anc, nanc, ga[i - 1].line, &found);
		if (!found)
			shift = nearest_shift(file_anchors, nfa, ga[i - 1].line, &found);
		for (size_t j = 1; j <= nb; j++) {
			double v = BEST(i - 1, j) > BEST(i, j - 1) ? BEST(i - 1, j) : BEST(i, j - 1);
			double w = alike(x, NODE(B, gb[j - 1].ix));
			if (w > 0) {
				int64_t d = (int64_t)gb[j - 1].line - (int64_t)ga[i - 1].line;
				w += (d == shift ? 1.0 : 0) + (d == 0 ? 0.25 : 0);
				if (BEST(i - 1, j - 1) + w > v)
					v = BEST(i - 1, j - 1) + w;
			}
			BEST(i, j) = v;
		}
	}
	for (size_t i = na, j = nb; i && j;) {
		if (BEST(i, j) == BEST(i - 1, j)) {
			i--;
		} else if (BEST(i, j) == BEST(i, j - 1)) {
			j--;
		} else {
			NODE(A, ga[i - 1].ix)->match = (long)gb[j - 1].ix;
			NODE(B, gb[j - 1].ix)->match = (long)ga[i - 1].ix;
			i--, j--;
		}
	}
#undef BEST
	free(best);
	free(anc);
	return 0;
}

static int match_lines(struct diff_match *m)
{
	struct side *A = &m->s[0], *B = &m->s[1];
	struct gnode *ga = malloc((A->nodes.n + 1) * sizeof *ga), *gb = malloc((B->nodes.n + 1) * sizeof *gb);
	struct anchor *fa = malloc((A->nodes.n + 1) * sizeof *fa), *fsub = malloc((A->nodes.n + 1) * sizeof *fsub);
	long *ftag = malloc((A->nodes.n + 1) * sizeof *ftag);
	if (!ga || !gb || !fa || !fsub || !ftag) {
		free(ga), free(gb), free(fa), free(fsub), free(ftag);
		return -1;
	}
	size_t na = 0, nb = 0;
	for (size_t i = 0; i < A->nodes.n; i++) {
		struct lnode *x = NODE(A, i);
		qsort(x->kids, x->nk, sizeof *x->kids, cmp_u64);
		long t = target_file(A, x->file);
		if (t >= 0)
			ga[na++] = (struct gnode){fn_key((size_t)t, x->fn), x->line, i};
	}
	for (size_t j = 0; j < B->nodes.n; j++) {
		struct lnode *y = NODE(B, j);
		qsort(y->kids, y->nk, sizeof *y->kids, cmp_u64);
		gb[nb++] = (struct gnode){fn_key(y->file, y->fn), y->line, j};
	}
	qsort(ga, na, sizeof *ga, cmp_gnode);
	qsort(gb, nb, sizeof *gb, cmp_gnode);
	/* Each function's anchors, tagged with B's file: a function with none
	 * of its own takes its file's (the edit's shift nearby). */
	int rc = 0;
	size_t nfa = 0;
	for (int pass = 0; pass < 2 && !rc; pass++) {
		for (size_t i = 0, j = 0; i < na && !rc;) {
			size_t ie = i, je;
			while (ie < na && ga[ie].group == ga[i].group)
				ie++;
			while (j < nb && gb[j].group < ga[i].group)
				j++;
			for (je = j; je < nb && gb[je].group == ga[i].group;)
				je++;
			long tf = target_file(A, NODE(A, ga[i].ix)->file);
			if (je > j && !pass && (double)(ie - i) * (double)(je - j) <= 4e6) {
				size_t k = group_anchors(m, ga + i, ie - i, gb + j, je - j, fa + nfa);
				for (size_t l = 0; l < k; l++)
					ftag[nfa + l] = tf;
				nfa += k;
			} else if (je > j && pass) {
				size_t nf = 0;
				for (size_t l = 0; l < nfa; l++)
					if (ftag[l] == tf)
						fsub[nf++] = fa[l];
				rc = align(m, ga + i, ie - i, gb + j, je - j, fsub, nf);
			}
			i = ie;
			j = je;
		}
	}
	free(ga), free(gb), free(fa), free(fsub), free(ftag);
	for (size_t i = 0; i < A->nodes.n; i++) {
		const struct lnode *x = NODE(A, i);
		if (x->match >= 0) {
			m->matched++;
			m->moved += NODE(B, x->match)->line != x->line;
		} else {
			m->a_only++;
		}
	}
	for (size_t j = 0; j < B->nodes.n; j++)
		m->b_only += NODE(B, j)->match < 0;
	return rc;
}

struct diff_match *diff_match_build(const struct analysis an[2])
{
	struct diff_match *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	for (int s = 0; s < 2; s++) {
		m->s[s].f.item = sizeof(struct ufile);
		m->s[s].nodes.item = sizeof(struct lnode);
	}
	if (gather(&m->s[0], &an[0]) || gather(&m->s[1], &an[1])) {
		diff_match_free(m);
		return NULL;
	}
	pair_files(&m->s[0], &m->s[1]);
	if (match_lines(m))
		goto fail;
	/* Lines moved, or some only on one side: an edit.  What the lines
	 * that call ops themselves launch tells them apart then (a pass over
	 * each trace more, ~ a report's time: not spent on unedited code). */
	if (m->moved || m->a_only || m->b_only) {
		int names = devices_in(&an[0], &an[1]) && devices_in(&an[1], &an[0]);
		gather_ops(&m->s[0], &an[0], names);
		gather_ops(&m->s[1], &an[1], names);
		for (int s = 0; s < 2; s++)
			for (size_t i = 0; i < m->s[s].nodes.n; i++)
				NODE(&m->s[s], i)->match = -1;
		m->matched = m->moved = m->a_only = m->b_only = 0;
		if (match_lines(m))
			goto fail;
	}
	return m;
fail:
	diff_match_free(m);
	return NULL;
}

void diff_match_free(struct diff_match *m)
{
	if (!m)
		return;
	for (int s = 0; s < 2; s++) {
		struct side *sd = &m->s[s];
		for (size_t i = 0; i < sd->f.n; i++)
			free(UFILE(sd, i)->name);
		for (size_t i = 0; i < sd->nodes.n; i++)
			free(NODE(sd, i)->kids);
		vec_free(&sd->f);
		vec_free(&sd->nodes);
		u64map_free(&sd->by_h);
		u64map_free(&sd->all);
		u64map_free(&sd->by_key);
		u64map_free(&sd->fns);
	}
	free(m);
}

/* ------------------------------------------------------------ A's names */
/* A's node of a frame, NULL: a library's or not gathered. */
static const struct lnode *a_node(const struct diff_match *m, const struct analysis *x, const struct an_frame *f,
				  long *file)
{
	const struct side *A = &m->s[0];
	if (an_frame_is_library(x, f))
		return NULL;
	size_t fl;
	const char *name = an_display_path(x, f->file, f->file_len, &fl);
	uint64_t *fx = u64map_get(&A->by_h, bytes_hash(name, fl, FNV));
	if (!fx)
		return NULL;
	*file = (long)*fx - 1;
	uint64_t *ix = u64map_get(&A->by_key, node_key((size_t)*file, bytes_hash(f->function, f->function_len, FNV), f->line));
	return ix ? NODE(A, *ix - 1) : NULL;
}

/* A's frame's file: B's name where its line is matched or its file renamed
 * wholly; A's own otherwise. */
static const char *a_file(const struct analysis *x, const struct an_frame *f, const void *ctx, size_t *fl)
{
	const struct diff_match *m = ctx;
	long file = -1;
	const struct lnode *nd = a_node(m, x, f, &file);
	const char *own = an_display_path(x, f->file, f->file_len, fl);
	if (!nd || nd->match < 0)
		return own;
	const struct ufile *to = UFILE(&m->s[1], NODE(&m->s[1], nd->match)->file);
	*fl = to->len;
	return to->name;
}

/* A's frame's line: B's where matched; "84(A)" where B has another line 84
 * in that function. */
static void a_line(const struct analysis *x, const struct an_frame *f, const void *ctx, char *buf, size_t len)
{
	const struct diff_match *m = ctx;
	long file = -1;
	const struct lnode *nd = a_node(m, x, f, &file);
	if (nd && nd->match >= 0) {
		snprintf(buf, len, "%" PRIu64, NODE(&m->s[1], nd->match)->line);
		return;
	}
	long t = nd ? target_file(&m->s[0], nd->file) : -1;
	int taken = t >= 0 && UFILE(&m->s[0], nd->file)->map < 0 &&
		    u64map_get(&m->s[1].by_key, node_key((size_t)t, nd->fn, nd->line));
	snprintf(buf, len, "%" PRIu64 "%s", f->line, taken ? "(A)" : "");
}

void diff_match_key(const struct diff_match *m, int side, const struct analysis *x, uint64_t cp, uint64_t nat,
		    char *buf, size_t len)
{
	struct an_file_namer n = {a_file, m, a_line};
	an_site_key_named(x, cp, nat, side || !m ? NULL : &n, buf, len);
}

void diff_match_label(const struct diff_match *m, int side, const struct analysis *x, uint64_t cp, uint64_t nat,
		      char *buf, size_t len)
{
	struct an_file_namer n = {a_file, m, a_line};
	an_site_label_named(x, cp, nat, side || !m ? NULL : &n, buf, len);
}

size_t diff_match_renamed(const struct diff_match *m, struct diff_renamed **out)
{
	*out = NULL;
	if (!m)
		return 0;
	const struct side *A = &m->s[0], *B = &m->s[1];
	size_t n = 0;
	struct diff_renamed *v = malloc((A->f.n + 1) * sizeof *v);
	if (!v)
		return 0;
	for (size_t i = 0; i < A->f.n; i++) {
		const struct ufile *u = UFILE(A, i);
		if (u->map < 0)
			continue;
		const struct ufile *to = UFILE(B, u->map);
		v[n++] = (struct diff_renamed){u->name, to->name, u->len, to->len, u->matched};
	}
	*out = v;
	return n;
}

void diff_match_counts(const struct diff_match *m, uint64_t *matched, uint64_t *moved, uint64_t *a_only,
		       uint64_t *b_only)
{
	*matched = m ? m->matched : 0;
	*moved = m ? m->moved : 0;
	*a_only = m ? m->a_only : 0;
	*b_only = m ? m->b_only : 0;
}
