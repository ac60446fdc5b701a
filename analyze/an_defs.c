/*
 * tbanalyze engine, part 0: containers (u64map, vec), the definition tables
 * (strings, Python frames, call-path and native tries, modules) and what is
 * read from them (call sites, display paths, the user's frame, the harness),
 * option defaults and names.  The loader (an_core.c) fills the tables, the
 * passes (an_passes.c) and reporters read them: neither depends on the
 * other through this file.
 */
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "an.h"
#include "an_internal.h"
#include "cmd.h"

/* ------------------------------------------------------------ u64map */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static int u64map_grow(struct u64map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	uint64_t *nk = calloc(ncap, sizeof *nk), *nv = malloc(ncap * sizeof *nv);
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = mix64(m->keys[i]) & (ncap - 1);
		while (nk[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	if (key == UINT64_MAX)
		return -1;
	if ((m->n + 1) * 4 > m->cap * 3 && u64map_grow(m))
		return -1;
	uint64_t k = key + 1;
	size_t j = mix64(k) & (m->cap - 1);
	while (m->keys[j] && m->keys[j] != k)
		j = (j + 1) & (m->cap - 1);
	if (!m->keys[j]) {
		m->keys[j] = k;
		m->n++;
	}
	m->vals[j] = val;
	return 0;
}

uint64_t *u64map_get(const struct u64map *m, uint64_t key)
{
	if (!m->cap || key == UINT64_MAX)
		return NULL;
	uint64_t k = key + 1;
	size_t j = mix64(k) & (m->cap - 1);
	while (m->keys[j]) {
		if (m->keys[j] == k)
			return &m->vals[j];
		j = (j + 1) & (m->cap - 1);
	}
	return NULL;
}

int u64map_del(struct u64map *m, uint64_t key)
{
	if (!m->cap || key == UINT64_MAX)
		return 0;
	uint64_t k = key + 1;
	size_t mask = m->cap - 1, j = mix64(k) & mask;
	while (m->keys[j] && m->keys[j] != k)
		j = (j + 1) & mask;
	if (!m->keys[j])
		return 0;
	/* Backward-shift deletion keeps probe chains intact without tombstones. */
	size_t hole = j;
	for (size_t i = (j + 1) & mask; m->keys[i]; i = (i + 1) & mask) {
		size_t home = mix64(m->keys[i]) & mask;
		/* Move i into the hole unless its home lies cyclically in (hole, i]. */
		int in_range = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
		if (!in_range) {
			m->keys[hole] = m->keys[i];
			m->vals[hole] = m->vals[i];
			hole = i;
		}
	}
	m->keys[hole] = 0;
	m->n--;
	return 1;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

#define HUGE_PAGE ((uintptr_t)2 << 20)

/* Large mappings given back (an_mem_unmap) and kept for the next request
 * whose contents need not be zero (an_mem_get, an_mem_huge): the pages the
 * detecting read wrote (the merge's queues, its vectors) serve step
 * detection's items and the replay's pending-gap ring instead of fresh
 * ones, which the kernel would zero first (a quarter of the report's time
 * was that zeroing).  Kept at most POOL_BYTES; a request takes the largest
 * (the most likely written: a mapping given back may have pages never
 * touched), whose tail past the request is given back to the kernel then,
 * so that the pages kept are at most the ones given back.  an_core.c gives
 * the rest back where no request is to come (an_mem_trim), so that kept
 * pages do not add to the peak. */
#define POOL_SLOTS 8
#define POOL_BYTES ((size_t)128 << 20)
static struct pooled_map {
	void *p;
	size_t len;
} pool[POOL_SLOTS];
static size_t pool_bytes;

/* A pooled mapping of len bytes or more cut to len (its tail unmapped), or
 * NULL when none holds it.  With *got: the largest pooled mapping of
 * HUGE_PAGE or more, cut to len when longer, its length in *got.  (Its
 * huge pages are split into small ones where an_mem_huge moves it to an
 * address off a huge-page boundary: starting it where its huge pages
 * would move whole cost more pages never written, +0.4 MB on the
 * simtorch trace.) */
static void *pool_take(size_t len, size_t *got)
{
	unsigned best = POOL_SLOTS;
	for (unsigned i = 0; i < POOL_SLOTS; i++)
		if (pool[i].p && (got || pool[i].len >= len) && (best == POOL_SLOTS || pool[i].len > pool[best].len))
			best = i;
	if (best == POOL_SLOTS)
		return NULL;
	void *p = pool[best].p;
	size_t have = pool[best].len;
	pool[best].p = NULL;
	pool_bytes -= have;
	if (have > len)
		munmap((char *)p + len, have - len);
	if (got)
		*got = have < len ? have : len;
	return p;
}

/* 1 when the pool keeps p (len bytes, a whole number of huge pages). */
static int pool_keep(void *p, size_t len)
{
	if (len < HUGE_PAGE || pool_bytes + len > POOL_BYTES)
		return 0;
	for (unsigned i = 0; i < POOL_SLOTS; i++)
		if (!pool[i].p) {
			pool[i].p = p;
			pool[i].len = len;
			pool_bytes += len;
			return 1;
		}
	return 0;
}

void an_mem_trim(void)
{
	for (unsigned i = 0; i < POOL_SLOTS; i++)
		if (pool[i].p) {
			munmap(pool[i].p, pool[i].len);
			pool[i].p = NULL;
		}
	pool_bytes = 0;
}

void an_mem_huge(void *p, size_t bytes)
{
#if defined(MADV_HUGEPAGE) && defined(__GLIBC__)
	if (!p || bytes < HUGE_PAGE)
		return;
	/* The whole of the mapping glibc made for the block (its 16-byte
	 * header before p, to the end of its usable size): advice on a part
	 * would split the mapping in two, and realloc could no longer grow
	 * it with mremap (which fails across mappings) but would copy it. */
	static size_t page;
	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p - 2 * sizeof(size_t);
	size_t len = malloc_usable_size(p) + 2 * sizeof(size_t);
	if ((start | len) & (page - 1))
		return; /* not a block with a mapping of its own */
	/* Pages already written and given back, when the pool has them, in
	 * place of glibc's fresh ones (not written yet but for its header,
	 * put back on top): moved there whole, advice and all.  When the
	 * largest kept mapping is shorter than the block, it takes the
	 * block's first part (a realloc of the block then copies it: the
	 * block is two mappings), so that no kept page waits unused while
	 * fresh ones are zeroed beside it. */
	size_t got = 0;
	void *from = pool_take(len, &got);
	if (from) {
		size_t header[2];
		memcpy(header, (const void *)start, sizeof header);
		if (mremap(from, got, got, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start) == MAP_FAILED) {
			/* (whatever stands at start now, a fresh mapping there) */
			munmap(from, got);
			if (mmap((void *)start, got, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
				 0) == MAP_FAILED) {
				/* The block has lost its pages: nothing to go on with. */
				static const char msg[] = "tbanalyze: out of memory (a block's pages could not be mapped)\n";
				(void)!write(2, msg, sizeof msg - 1);
				_exit(TBA_EXIT_INTERNAL);
			}
		}
		memcpy((void *)start, header, sizeof header);
		start += got;
		len -= got;
	}
	if (len >= 2 * HUGE_PAGE)
		(void)madvise((void *)start, len, MADV_HUGEPAGE);
#else
	(void)p;
	(void)bytes;
#endif
}

/* A mapping of 2 MiB or more is a whole number of huge pages long: the
 * kernel then places it on a huge-page boundary (and keeps it there when
 * mremap moves it), so that every page of it can be a huge one. */
static size_t map_len(size_t bytes)
{
	return bytes >= HUGE_PAGE ? (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1) : bytes;
}

static void map_advise(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
	if (len >= HUGE_PAGE)
		(void)madvise(p, len, MADV_HUGEPAGE);
#else
	(void)p;
	(void)len;
#endif
}

void *an_mem_map(size_t bytes)
{
	size_t len = map_len(bytes);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	map_advise(p, len);
	return p;
}

void *an_mem_get(size_t bytes)
{
	size_t len = map_len(bytes);
	void *p = len >= HUGE_PAGE ? pool_take(len, NULL) : NULL;
	return p ? p : an_mem_map(bytes);
}

void *an_mem_remap(void *p, size_t old, size_t bytes)
{
	size_t len = map_len(bytes);
	void *n = mremap(p, map_len(old), len, MREMAP_MAYMOVE);
	if (n == MAP_FAILED)
		return NULL;
	map_advise(n, len);
	return n;
}

void an_mem_unmap(void *p, size_t bytes)
{
	if (p && !pool_keep(p, map_len(bytes)))
		munmap(p, map_len(bytes));
}

int vec_reserve(struct vec *v, size_t n)
{
	if (n <= v->cap)
		return 0;
	size_t old = v->cap * v->item, bytes = n * v->item;
	void *nd;
	if (bytes < VEC_MAP_BYTES) {
		nd = realloc(v->data, bytes);
	} else if (old >= VEC_MAP_BYTES) {
		nd = an_mem_remap(v->data, old, bytes);
	} else {
		/* Into a mapping of its own: huge pages from the first write,
		 * and grown from now on by mremap.  At least one whole huge
		 * page: a mapping under 2 MiB gets no advice, and its small
		 * pages (the first 1 MiB written again by the copy) stay small
		 * when it grows (~500 faults a vector). */
		if (bytes < HUGE_PAGE) {
			n = (HUGE_PAGE + v->item - 1) / v->item;
			bytes = n * v->item;
		}
		nd = an_mem_get(bytes);
		if (nd && v->n)
			memcpy(nd, v->data, v->n * v->item);
		if (nd)
			free(v->data);
	}
	if (!nd)
		return -1;
	v->data = nd;
	v->cap = n;
	return 0;
}

void *vec_push(struct vec *v)
{
	if (v->n == v->cap && vec_reserve(v, v->cap ? v->cap * 2 : 16))
		return NULL;
	void *slot = (char *)v->data + v->n * v->item;
	memset(slot, 0, v->item);
	v->n++;
	return slot;
}

size_t vec_keyed(struct vec *v, struct u64map *idx, uint64_t key, int *added)
{
	uint64_t *ix = u64map_get(idx, key);
	if (added)
		*added = !ix;
	if (ix)
		return (size_t)*ix;
	if (!vec_push(v))
		return SIZE_MAX;
	if (u64map_put(idx, key, v->n - 1)) {
		v->n--;
		return SIZE_MAX;
	}
	return v->n - 1;
}

void vec_free(struct vec *v)
{
	if (v->cap * v->item >= VEC_MAP_BYTES)
		an_mem_unmap(v->data, v->cap * v->item);
	else
		free(v->data);
	v->data = NULL;
	v->n = v->cap = 0;
}

/* ------------------------------------------------------------ definitions */
struct def_str { size_t off, len; };
struct def_frame { uint64_t file, function, line; };
struct def_node { uint64_t a, parent; }; /* callpath: a = frame; native: a = pc */

struct def_lib { uint64_t role, path; }; /* PY_LIB: path is a string id */

#define DEFS_CP_CACHE AN_CP_MEMO

struct an_defs {
	struct u64map str_idx, frame_idx, cp_idx, nat_idx;
	struct vec strs, frames, cps, nats, modules;
	struct vec libs;         /* struct def_lib */
	struct u64map lib_class; /* file string id -> 1 + is_library, filled as asked */
	struct u64map user_cp;   /* call path -> an_user_callpath's answer, filled as asked */
	/* In front of user_cp and of cp_idx's parents: asked for every
	 * kernel (the bursts pass), a loop's few call paths again and again;
	 * slot id % DEFS_CP_CACHE (call path ids are handed out in order),
	 * key 0 empty. */
	struct an_cp_memo user_cache[DEFS_CP_CACHE], parent_cache[DEFS_CP_CACHE];
	char *arena;
	size_t alen, acap;
};

struct an_defs *defs_new(void)
{
	struct an_defs *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->strs.item = sizeof(struct def_str);
	d->frames.item = sizeof(struct def_frame);
	d->cps.item = sizeof(struct def_node);
	d->nats.item = sizeof(struct def_node);
	d->modules.item = sizeof(struct tbp_module);
	d->libs.item = sizeof(struct def_lib);
	return d;
}

void defs_free(struct an_defs *d)
{
	if (!d)
		return;
	u64map_free(&d->str_idx);
	u64map_free(&d->frame_idx);
	u64map_free(&d->cp_idx);
	u64map_free(&d->nat_idx);
	vec_free(&d->strs);
	vec_free(&d->frames);
	vec_free(&d->cps);
	vec_free(&d->nats);
	vec_free(&d->modules);
	vec_free(&d->libs);
	u64map_free(&d->lib_class);
	u64map_free(&d->user_cp);
	free(d->arena);
	free(d);
}

/* Returns 0, or -1 when out of memory. */
/* Call paths and native stacks are both tries: (id, payload, parent). */
static int add_trie_node(struct vec *nodes, struct u64map *idx, uint64_t id, uint64_t a, uint64_t parent)
{
	struct def_node *n = vec_push(nodes);
	if (!n)
		return -1;
	n->a = a;
	n->parent = parent;
	return u64map_put(idx, id, nodes->n - 1);
}

int defs_add(struct an_defs *d, const struct tbp_record *r)
{
	switch (r->kind) {
	case TBP_K_STRING: {
		if (d->alen + r->blob_len + 1 > d->acap) {
			size_t ncap = d->acap ? d->acap : 4096;
			while (ncap < d->alen + r->blob_len + 1)
				ncap *= 2;
			char *na = realloc(d->arena, ncap);
			if (!na)
				return -1;
			d->arena = na;
			d->acap = ncap;
		}
		struct def_str *s = vec_push(&d->strs);
		if (!s)
			return -1;
		s->off = d->alen;
		s->len = r->blob_len;
		if (r->blob_len)
			memcpy(d->arena + d->alen, r->blob, r->blob_len);
		d->alen += r->blob_len;
		d->arena[d->alen++] = 0;
		return u64map_put(&d->str_idx, r->u.string.id, d->strs.n - 1);
	}
	case TBP_K_PYFRAME: {
		struct def_frame *f = vec_push(&d->frames);
		if (!f)
			return -1;
		f->file = r->u.pyframe.file;
		f->function = r->u.pyframe.function;
		f->line = r->u.pyframe.line;
		return u64map_put(&d->frame_idx, r->u.pyframe.id, d->frames.n - 1);
	}
	case TBP_K_CALLPATH:
		/* A call path defined again (a damaged trace) has another parent. */
		d->parent_cache[r->u.callpath.id % DEFS_CP_CACHE].cp = 0;
		return add_trie_node(&d->cps, &d->cp_idx, r->u.callpath.id, r->u.callpath.frame,
				     r->u.callpath.parent);
	case TBP_K_NATIVE:
		return add_trie_node(&d->nats, &d->nat_idx, r->u.native.id, r->u.native.pc,
				     r->u.native.parent);
	case TBP_K_MODULE: {
		struct tbp_module *m = vec_push(&d->modules);
		if (!m)
			return -1;
		*m = r->u.module;
		return 0;
	}
	case TBP_K_PY_LIB: {
		if (!r->u.py_lib.path)
			return 0;
		struct def_lib *l = vec_push(&d->libs);
		if (!l)
			return -1;
		l->role = r->u.py_lib.role;
		l->path = r->u.py_lib.path;
		/* Files asked about before are asked again: a directory more. */
		u64map_free(&d->lib_class);
		u64map_free(&d->user_cp);
		memset(d->user_cache, 0, sizeof d->user_cache);
		return 0;
	}
	}
	return 0;
}

const char *an_string(const struct analysis *a, uint64_t id, size_t *len)
{
	if (!id || !a->defs)
		return NULL;
	uint64_t *ix = u64map_get(&a->defs->str_idx, id);
	if (!ix)
		return NULL;
	const struct def_str *s = VEC_AT(&a->defs->strs, struct def_str, *ix);
	if (len)
		*len = s->len;
	return a->defs->arena + s->off;
}

/* Depth bound guards against a cyclic trie in a corrupt trace. */
#define AN_MAX_DEPTH 256

size_t an_callpath_frames(const struct analysis *a, uint64_t cp, struct an_frame *out, size_t max)
{
	size_t n = 0;
	for (unsigned depth = 0; cp && n < max && depth < AN_MAX_DEPTH; depth++) {
		uint64_t *ix = u64map_get(&a->defs->cp_idx, cp);
		if (!ix)
			break;
		const struct def_node *node = VEC_AT(&a->defs->cps, struct def_node, *ix);
		uint64_t *fx = u64map_get(&a->defs->frame_idx, node->a);
		struct an_frame *o = &out[n++];
		memset(o, 0, sizeof *o);
		if (fx) {
			const struct def_frame *f = VEC_AT(&a->defs->frames, struct def_frame, *fx);
			o->file = an_string(a, f->file, &o->file_len);
			o->file_id = o->file ? f->file : 0;
			o->function = an_string(a, f->function, &o->function_len);
			o->line = f->line;
		}
		if (!o->file) {
			o->file = "?";
			o->file_len = 1;
		}
		if (!o->function) {
			o->function = "?";
			o->function_len = 1;
		}
		cp = node->parent;
	}
	return n;
}

int an_frame_same_function(const struct an_frame *x, const struct an_frame *y)
{
	return x->file_len == y->file_len && x->function_len == y->function_len &&
	       !memcmp(x->file, y->file, x->file_len) && !memcmp(x->function, y->function, x->function_len);
}

int an_frame_function_is(const struct an_frame *f, const char *name)
{
	return f->function_len == strlen(name) && !memcmp(f->function, name, f->function_len);
}

int an_frame_in_library_file(const struct analysis *a, const struct an_frame *f, const char *rel)
{
	if (!an_frame_is_library(a, f))
		return 0;
	size_t dl, rl = strlen(rel);
	const char *d = an_display_path(a, f->file, f->file_len, &dl);
	return rel[rl - 1] == '/' ? dl > rl && !memcmp(d, rel, rl) : dl == rl && !memcmp(d, rel, rl);
}

uint64_t an_frame_function_hash(const struct an_frame *f)
{
	uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a over file, a separator, function */
	for (size_t i = 0; i < f->file_len; i++)
		h = (h ^ (unsigned char)f->file[i]) * 0x100000001b3ULL;
	h = (h ^ 0xff) * 0x100000001b3ULL;
	for (size_t i = 0; i < f->function_len; i++)
		h = (h ^ (unsigned char)f->function[i]) * 0x100000001b3ULL;
	return h;
}

/* The tracer files each call instruction as its own frame, so two calls on
 * one line (`a.item() + b.item()`, `x, y = x.cuda(), y.cuda()`) are two call
 * paths with the same lines: this key is the lines' (files, functions and
 * line numbers all the way out). */
uint64_t an_callpath_line_key(const struct analysis *a, uint64_t cp)
{
	struct an_frame fr[64];
	size_t n = cp ? an_callpath_frames(a, cp, fr, 64) : 0;
	if (!n)
		return cp;
	uint64_t h = 0x9e3779b97f4a7c15u;
	for (size_t i = 0; i < n; i++)
		h = an_hash_combine(h, an_hash_combine(an_frame_function_hash(&fr[i]), fr[i].line));
	return h;
}

/* The cache misses of an_callpath_parent and an_user_callpath apart: the
 * hits (nearly every call, the bursts pass asks for every kernel) then need
 * no registers saved and restored. */
static __attribute__((noinline)) uint64_t callpath_parent_miss(const struct analysis *a, uint64_t cp)
{
	uint64_t *ix = u64map_get(&a->defs->cp_idx, cp);
	if (!ix)
		return 0; /* not cached: it may be defined later */
	struct an_cp_memo *c = &a->defs->parent_cache[cp % DEFS_CP_CACHE];
	c->cp = cp;
	c->val = VEC_AT(&a->defs->cps, struct def_node, *ix)->parent;
	return c->val;
}

uint64_t an_callpath_parent(const struct analysis *a, uint64_t cp)
{
	if (!cp)
		return 0;
	const struct an_cp_memo *c = &a->defs->parent_cache[cp % DEFS_CP_CACHE];
	if (c->cp == cp)
		return c->val;
	return callpath_parent_miss(a, cp);
}

static int has_at(const char *s, size_t n, const char *needle)
{
	size_t nl = strlen(needle);
	for (size_t i = 0; i + nl <= n; i++)
		if (!memcmp(s + i, needle, nl))
			return 1;
	return 0;
}

/* A file name that is no file: code compiled from a string.  A name
 * wholly in angle brackets (<ipython-input-3-8f2a>, <string>, <cell 4>)
 * is what exec'd and notebook code carries: the user's own code, but for
 * the interpreter's frozen modules (<frozen importlib._bootstrap>).  A
 * bracketed name with more after it (torch.fx's <eval_with_key>.3) is
 * code a library generated: the library's.  1: the user's, 0: a library's,
 * -1: a real file name. */
static int pseudo_file_is_user(const char *file, size_t len)
{
	static const char frozen[] = "<frozen ";
	if (!len || file[0] != '<')
		return -1;
	if (len >= sizeof frozen - 1 && !memcmp(file, frozen, sizeof frozen - 1))
		return 0;
	return len > 2 && file[len - 1] == '>';
}

/* Before traces said where their libraries are: words in the path. */
static int legacy_is_library(const char *file, size_t len)
{
	int pseudo = pseudo_file_is_user(file, len);
	if (pseudo >= 0)
		return !pseudo;
	/* torch and its siblings (torchvision, torch_xla ...) installed, or a
	 * source tree's torch package. */
	if (has_at(file, len, "-packages/torch") || has_at(file, len, "/torch/"))
		return 1;
	/* The standard library: .../lib/python3.11/x.py, not its site-packages. */
	return has_at(file, len, "/lib/python3") && !has_at(file, len, "-packages/");
}

/* How much of file the directory dir (dl bytes) covers: its length without
 * trailing slashes when file lies below it, the whole prefix for role
 * FROZEN (a name prefix, "<frozen "); 0 when it does not. */
static size_t lib_covers(const char *dir, size_t dl, uint64_t role, const char *file, size_t len)
{
	if (role == TBP_PYLIB_FROZEN)
		return dl && len >= dl && !memcmp(file, dir, dl) ? dl : 0;
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	return dl > 1 && len > dl && !memcmp(file, dir, dl) && file[dl] == '/' ? dl : 0;
}

/* The longest recorded directory over file: the length it covers (0: none)
 * and its role in *role. */
static size_t lib_dir_of(const struct analysis *a, const char *file, size_t len, uint64_t *role)
{
	size_t best = 0;
	for (size_t i = 0; a->defs && i < a->defs->libs.n; i++) {
		const struct def_lib *l = VEC_AT(&a->defs->libs, struct def_lib, i);
		size_t dl;
		const char *dir = an_string(a, l->path, &dl);
		size_t n = dir ? lib_covers(dir, dl, l->role, file, len) : 0;
		if (n > best) {
			best = n;
			*role = l->role;
		}
	}
	return best;
}

/* The trace says where its interpreter keeps library code (PY_LIB records). */
static int an_has_lib_dirs(const struct analysis *a)
{
	return a->defs && a->defs->libs.n > 0;
}

static int file_is_library(const struct analysis *a, const char *file, size_t len)
{
	/* Code torch.compile's inductor generated (its cache, <tmp>/torchinductor_<user>/ unless
	 * TORCHINDUCTOR_CACHE_DIR moves it): torch's, run for the user's compiled call. */
	if (has_at(file, len, "/torchinductor_"))
		return 1;
	if (!an_has_lib_dirs(a))
		return legacy_is_library(file, len);
	uint64_t role;
	if (lib_dir_of(a, file, len, &role) > 0) /* frozen modules: by the prefix recorded */
		return 1;
	int pseudo = pseudo_file_is_user(file, len);
	return pseudo >= 0 ? !pseudo : 0;
}

int an_frame_is_library(const struct analysis *a, const struct an_frame *f)
{
	if (!f->file_id || !a->defs)
		return file_is_library(a, f->file, f->file_len);
	struct u64map *cache = &a->defs->lib_class;
	uint64_t *v = u64map_get(cache, f->file_id);
	if (v)
		return (int)*v - 1;
	int lib = file_is_library(a, f->file, f->file_len);
	u64map_put(cache, f->file_id, (uint64_t)lib + 1);
	return lib;
}

static uint64_t user_callpath_walk(const struct analysis *a, uint64_t cp)
{
	uint64_t node = cp;
	for (unsigned depth = 0; node && depth < AN_MAX_DEPTH; depth++) {
		struct an_frame f;
		if (!an_callpath_frames(a, node, &f, 1))
			break;
		if (!an_frame_is_library(a, &f))
			return node;
		node = an_callpath_parent(a, node);
	}
	return cp;
}

static __attribute__((noinline)) uint64_t user_callpath_miss(const struct analysis *a, uint64_t cp)
{
	if (cp == UINT64_MAX || !a->defs)
		return user_callpath_walk(a, cp);
	struct an_cp_memo *c = &a->defs->user_cache[cp % DEFS_CP_CACHE];
	uint64_t *v = u64map_get(&a->defs->user_cp, cp);
	uint64_t u;
	if (v) {
		u = *v;
	} else {
		u = user_callpath_walk(a, cp);
		u64map_put(&a->defs->user_cp, cp, u);
	}
	c->cp = cp;
	c->val = u;
	return u;
}

/* Asked for every kernel by the bursts pass: remembered per call path. */
uint64_t an_user_callpath(const struct analysis *a, uint64_t cp)
{
	if (!cp)
		return 0;
	/* The miss path never caches UINT64_MAX (no such call path): it
	 * cannot hit here. */
	if (__builtin_expect(a->defs != NULL, 1)) {
		const struct an_cp_memo *c = &a->defs->user_cache[cp % DEFS_CP_CACHE];
		if (c->cp == cp)
			return c->val;
	}
	return user_callpath_miss(a, cp);
}

const struct an_cp_memo *an_user_callpath_memo(const struct analysis *a)
{
	return a->defs ? a->defs->user_cache : NULL;
}

/* The directory part of a path, without the slash ("" for none). */
static size_t dir_len(const char *file, size_t len)
{
	size_t i = len;
	while (i && file[i - 1] != '/')
		i--;
	return i ? i - 1 : 0;
}

/* Some frame of the trace lies in DIR/runner/. */
static int trace_has_runner_in(const struct analysis *a, const char *dir, size_t dl)
{
	for (size_t i = 0; i < a->defs->frames.n; i++) {
		size_t fl;
		const char *f = an_string(a, VEC_AT(&a->defs->frames, struct def_frame, i)->file, &fl);
		if (f && fl > dl + 8 && !memcmp(f, dir, dl) && (!dl || f[dl] == '/') &&
		    !memcmp(f + dl + (dl ? 1 : 0), "runner/", 7))
			return 1;
	}
	return 0;
}

/* 1: in runner/ (the TorchBench-style runner's package); 2: one of its
 * shared model files there; 3: a run.py with runner/ beside it; 0: none. */
static int runner_file(const struct analysis *a, uint64_t cp)
{
	struct an_frame f;
	if (!an_callpath_frames(a, cp, &f, 1))
		return 0;
	size_t dl = dir_len(f.file, f.file_len);
	const char *base = f.file + (dl ? dl + 1 : 0);
	size_t bl = f.file_len - (size_t)(base - f.file);
	if (dl >= 6 && !memcmp(f.file + dl - 6, "runner", 6) && (dl == 6 || f.file[dl - 7] == '/')) {
		/* runner/model.py's BenchmarkModel.train is the training step of
		 * every zoo model without its own (its loss.backward() and
		 * optimizer.step() lines carry the model's backward and optimizer
		 * work); runner/hf.py and runner/vision.py build and feed model
		 * families. */
		static const char *const model_code[] = {"model.py", "hf.py", "vision.py"};
		for (size_t i = 0; i < sizeof model_code / sizeof *model_code; i++)
			if (bl == strlen(model_code[i]) && !memcmp(base, model_code[i], bl))
				return 2;
		return 1;
	}
	/* run.py is the runner's only when its runner/ package is beside it
	 * (a user's own run.py is the user's code). */
	return bl == 6 && !memcmp(base, "run.py", 6) && trace_has_runner_in(a, f.file, dl) ? 3 : 0;
}

int an_callpath_is_harness(const struct analysis *a, uint64_t cp)
{
	int k = runner_file(a, cp);
	return k == 1 || k == 3;
}

int an_callpath_is_model_step(const struct analysis *a, uint64_t cp)
{
	return runner_file(a, cp) == 2;
}

size_t an_native_frames(const struct analysis *a, uint64_t nat, struct an_native_frame *out, size_t max)
{
	size_t n = 0;
	for (unsigned depth = 0; nat && n < max && depth < AN_MAX_DEPTH; depth++) {
		uint64_t *ix = u64map_get(&a->defs->nat_idx, nat);
		if (!ix)
			break;
		const struct def_node *node = VEC_AT(&a->defs->nats, struct def_node, *ix);
		struct an_native_frame *o = &out[n++];
		memset(o, 0, sizeof *o);
		o->pc = node->a;
		for (size_t i = 0; i < a->defs->modules.n; i++) {
			const struct tbp_module *m = VEC_AT(&a->defs->modules, struct tbp_module, i);
			if (node->a >= m->start && node->a < m->end) {
				o->module = an_string(a, m->path, &o->module_len);
				o->offset = node->a - m->start + m->offset;
				break;
			}
		}
		nat = node->parent;
	}
	return n;
}

/* Last occurrence of needle in [s, s + n), or NULL. */
static const char *last_in(const char *s, size_t n, const char *needle)
{
	size_t nl = strlen(needle);
	for (size_t i = n >= nl ? n - nl + 1 : 0; i-- > 0;)
		if (!memcmp(s + i, needle, nl))
			return s + i;
	return NULL;
}

/* Tail of file below dir (a directory, no trailing slash), or NULL. */
static const char *below(const char *file, size_t len, const char *dir, size_t dlen)
{
	while (dlen > 1 && dir[dlen - 1] == '/')
		dlen--;
	if (dlen == 0 || len <= dlen + 1 || memcmp(file, dir, dlen) || file[dlen] != '/')
		return NULL;
	return file + dlen + 1;
}

const char *an_display_path(const struct analysis *a, const char *file, size_t len, size_t *out_len)
{
	const char *tail = NULL;
	const char *hit;
	uint64_t role = 0;
	size_t lib = an_has_lib_dirs(a) ? lib_dir_of(a, file, len, &role) : 0;
	/* A library's file, where the trace says its libraries are: below its
	 * directory, as imported (the torch package's own directory from
	 * torch/, so a source tree's reads as an installed one's). */
	if (lib && role != TBP_PYLIB_FROZEN) {
		if (role == TBP_PYLIB_TORCH)
			while (lib > 0 && file[lib - 1] != '/')
				lib--;
		else
			lib++;
		if (lib && lib < len)
			tail = file + lib;
	}
	/* Installed packages: torch/nn/modules/linear.py, as imported. */
	if (!tail && (hit = last_in(file, len, "/site-packages/")))
		tail = hit + strlen("/site-packages/");
	else if (!tail && (hit = last_in(file, len, "/dist-packages/")))
		tail = hit + strlen("/dist-packages/");
	/* The traced program's own files, relative to where it ran. */
	if (!tail && a->proc_cwd) {
		size_t cl;
		const char *cwd = an_string(a, a->proc_cwd, &cl);
		if (cwd)
			tail = below(file, len, cwd, cl);
	}
	if (!tail) {
		static char here[4096];
		static int have_here = -1;
		if (have_here < 0)
			have_here = getcwd(here, sizeof here) != NULL;
		if (have_here)
			tail = below(file, len, here, strlen(here));
	}
	/* The standard library: .../lib/python3.11/json/decoder.py (a trace that
	 * says where its standard library is needs no guess). */
	if (!tail && !an_has_lib_dirs(a) && (hit = last_in(file, len, "/lib/python"))) {
		const char *slash = memchr(hit + 1, '/', (size_t)(file + len - (hit + 1)));
		slash = slash ? memchr(slash + 1, '/', (size_t)(file + len - (slash + 1))) : NULL;
		if (slash && slash + 1 < file + len)
			tail = slash + 1;
	}
	if (!tail || tail >= file + len)
		tail = file;
	*out_len = len - (size_t)(tail - file);
	return tail;
}

static const char *frame_file(const struct analysis *a, const struct an_frame *f, const struct an_file_namer *name,
			      size_t *fl)
{
	return name ? name->name(a, f, name->ctx, fl) : an_display_path(a, f->file, f->file_len, fl);
}

static const char *frame_line(const struct analysis *a, const struct an_frame *f, const struct an_file_namer *name,
			      char *buf, size_t len)
{
	if (name && name->line)
		name->line(a, f, name->ctx, buf, len);
	else
		snprintf(buf, len, "%" PRIu64, f->line);
	return buf;
}

void an_site_label(const struct analysis *a, uint64_t cp, uint64_t nat, char *buf, size_t len)
{
	an_site_label_named(a, cp, nat, NULL, buf, len);
}

void an_site_label_named(const struct analysis *a, uint64_t cp, uint64_t nat, const struct an_file_namer *name,
			 char *buf, size_t len)
{
	struct an_frame f;
	if (an_callpath_frames(a, cp, &f, 1)) {
		size_t fl;
		const char *file = frame_file(a, &f, name, &fl);
		char ln[32];
		snprintf(buf, len, "%.*s:%s %.*s", (int)fl, file, frame_line(a, &f, name, ln, sizeof ln),
			 (int)f.function_len, f.function);
		return;
	}
	struct an_native_frame nf;
	if (an_native_frames(a, nat, &nf, 1)) {
		if (nf.module)
			snprintf(buf, len, "%.*s+0x%" PRIx64, (int)nf.module_len, nf.module, nf.offset);
		else
			snprintf(buf, len, "0x%" PRIx64, nf.pc);
		return;
	}
	snprintf(buf, len, "(no call path)");
}

void an_site_key(const struct analysis *a, uint64_t cp, uint64_t nat, char *buf, size_t len)
{
	an_site_key_named(a, cp, nat, NULL, buf, len);
}

void an_site_key_named(const struct analysis *a, uint64_t cp, uint64_t nat, const struct an_file_namer *name,
		       char *buf, size_t len)
{
	struct an_frame fr[64];
	size_t n = an_callpath_frames(a, cp, fr, 64), used = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && used + 1 < len; i++) {
		/* Files as displayed (an installed package's from the package,
		 * the program's relative to where it ran, the standard library's
		 * from its version): two checkouts or virtual environments of one
		 * program give the same keys. */
		size_t fl;
		const char *file = frame_file(a, &fr[i], name, &fl);
		char ln[32];
		int w = snprintf(buf + used, len - used, "%s%.*s:%s:%.*s", i ? "<" : "", (int)fl, file,
				 frame_line(a, &fr[i], name, ln, sizeof ln), (int)fr[i].function_len, fr[i].function);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (n)
		return;
	/* Native addresses differ between runs (ASLR): key by module+offset. */
	struct an_native_frame nf[16];
	size_t nn = an_native_frames(a, nat, nf, 16);
	for (size_t i = 0; i < nn && used + 1 < len; i++) {
		int w;
		if (nf[i].module)
			w = snprintf(buf + used, len - used, "%s%.*s+0x%" PRIx64, i ? "<" : "",
				     (int)nf[i].module_len, nf[i].module, nf[i].offset);
		else
			w = snprintf(buf + used, len - used, "%s0x%" PRIx64, i ? "<" : "", nf[i].pc);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (!nn)
		snprintf(buf, len, "(no call path)");
}

void an_opts_default(struct an_opts *o)
{
	memset(o, 0, sizeof *o);
	o->gap_ns = 50000;
	o->burst_min = 16;
	o->burst_kernel_ns = 10000;
	o->scalar_bytes = 8;
	o->scalar_min = 3;
	o->pingpong_min = 3;
	o->sync_min = 10;
	o->churn_min = 50;
	o->top = 20;
}

const char *an_cause_name(int cause)
{
	switch (cause) {
	case AN_CAUSE_SYNC: return "sync";
	case AN_CAUSE_PYTHON: return "python";
	case AN_CAUSE_LAUNCH_BOUND: return "launch_bound";
	case AN_CAUSE_HOST_OTHER: return "host_other";
	case AN_CAUSE_NO_HOST: return "no_host";
	case AN_CAUSE_QUEUED: return "queued";
	case AN_CAUSE_ALLOC: return "alloc";
	}
	return "";
}

const char *an_step_unit_name(int unit)
{
	switch (unit) {
	case AN_UNIT_OPTIMIZER: return "optimizer_step";
	case AN_UNIT_BACKWARD: return "backward";
	case AN_UNIT_FORWARD: return "forward";
	case AN_UNIT_GRAPH: return "graph_replay";
	}
	return "none";
}

const char *an_steps_source_name(int source)
{
	switch (source) {
	case AN_STEPS_MARKS: return "marks";
	case AN_STEPS_PROFILER: return "profiler";
	case AN_STEPS_DETECTED: return "detected";
	}
	return "none";
}
