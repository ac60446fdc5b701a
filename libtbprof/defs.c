/*
 * libtbprof core, definitions and interning (strings, call paths, ...): a mutex-protected
 * history that is never trimmed, so a forked child replays it into its own
 * file and ids stay valid there.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

/* ------------------------------------------------------------ definitions */

/* Every definition is kept for the life of the process (a forked child's trace starts by writing them
 * all), so each is stored compactly: its values up to the last non-zero one and its blob, in an arena.
 * A call-path node takes 40 bytes instead of a 160-byte record plus a malloc header; a Python program
 * defines a hundred thousand of them. */
struct tbp_def {
	uint8_t kind;
	uint8_t nv;              /* values kept: the rest of the record's fields are zero */
	uint32_t blob_len;
	uint64_t ts;
	uint64_t v[];            /* nv values, then blob_len bytes */
};
_Static_assert(sizeof(((struct tbp_record *)0)->u) == sizeof(uint64_t) * TBP_MAX_FIELDS,
	       "a record's fields are its u64 values");
#define DEF_ARENA_BYTES (256u << 10)
pthread_mutex_t def_lock = PTHREAD_MUTEX_INITIALIZER;
struct tbp_def **def_hist;
size_t def_count, def_cap;
size_t def_written;   /* writer: defs already in the file */
/* Bump allocation from chunks that are never freed (definitions and
 * interned strings live as long as the process); each arena under its
 * owner's lock.  A request over a quarter of a chunk gets its own. */
struct bump_arena {
	char *cur;
	size_t left;
};

static void *arena_take(struct bump_arena *ar, size_t bytes, size_t chunk)
{
	if (bytes > chunk / 4)
		return malloc(bytes);
	if (bytes > ar->left) {
		char *a = malloc(chunk);
		if (!a)
			return NULL;
		ar->cur = a;
		ar->left = chunk;
	}
	void *p = ar->cur;
	ar->cur += bytes;
	ar->left -= bytes;
	return p;
}

static struct bump_arena def_arena; /* under def_lock */

static void *def_alloc(size_t bytes)
{
	return arena_take(&def_arena, (bytes + 7) & ~(size_t)7, DEF_ARENA_BYTES);
}

/* The record a definition stands for (its blob points into the definition). */
void def_record(const struct tbp_def *d, struct tbp_record *rec)
{
	memset(rec, 0, sizeof *rec);
	rec->kind = d->kind;
	rec->stream_kind = TBP_STREAM_DEFS;
	rec->ts = d->ts;
	memcpy(rec->u.v, d->v, d->nv * sizeof(uint64_t));
	if (d->blob_len) {
		rec->blob = d->v + d->nv;
		rec->blob_len = d->blob_len;
	}
}

void tbp_emit_def(const struct tbp_record *rec)
{
	if (!rec)
		return;
	size_t blob_len = rec->blob ? rec->blob_len : 0;
	unsigned nv = TBP_MAX_FIELDS;
	while (nv > 0 && rec->u.v[nv - 1] == 0)
		nv--;
	pthread_mutex_lock(&def_lock);
	struct tbp_def *d = def_alloc(sizeof *d + nv * sizeof(uint64_t) + blob_len);
	if (!d) {
		pthread_mutex_unlock(&def_lock);
		return;
	}
	d->kind = rec->kind;
	d->nv = (uint8_t)nv;
	d->blob_len = (uint32_t)blob_len;
	d->ts = rec->ts;
	memcpy(d->v, rec->u.v, nv * sizeof(uint64_t));
	if (blob_len)
		memcpy(d->v + nv, rec->blob, blob_len);
	if (def_count == def_cap) {
		size_t ncap = def_cap ? def_cap * 2 : 256;
		struct tbp_def **n = realloc(def_hist, ncap * sizeof *n);
		if (!n) {
			/* d stays in the arena, unused: definitions are never freed anyway. */
			pthread_mutex_unlock(&def_lock);
			return;
		}
		def_hist = n;
		def_cap = ncap;
	}
	def_hist[def_count++] = d;
	pthread_mutex_unlock(&def_lock);
}

/* String interning: open addressing on (hash, bytes) with an arena for the
 * bytes.  Misses emit a STRING definition; hits cost one hash and compare. */
struct tbp_istr {
	uint64_t hash;
	uint64_t id;
	const char *bytes;
	size_t len;
};
pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tbp_istr *intern_tab;
static size_t intern_cap, intern_used;
static uint64_t intern_next_id = 1;
static struct bump_arena string_arena; /* under intern_lock */

static uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

static const char *arena_copy(const char *s, size_t len)
{
	char *dst = arena_take(&string_arena, len + 1, 65536);
	if (!dst)
		return NULL;
	memcpy(dst, s, len);
	dst[len] = 0;
	return dst;
}

static bool intern_grow(void)
{
	size_t ncap = intern_cap ? intern_cap * 2 : 1024;
	struct tbp_istr *n = calloc(ncap, sizeof *n);
	if (!n)
		return false;
	for (size_t i = 0; i < intern_cap; i++) {
		if (!intern_tab[i].id)
			continue;
		size_t j = intern_tab[i].hash & (ncap - 1);
		while (n[j].id)
			j = (j + 1) & (ncap - 1);
		n[j] = intern_tab[i];
	}
	free(intern_tab);
	intern_tab = n;
	intern_cap = ncap;
	return true;
}

uint64_t tbp_intern_string(const char *s, size_t len)
{
	if (!s)
		return 0;
	if (len > (1u << 20))
		len = 1u << 20;
	uint64_t h = hash_bytes(s, len);
	uint64_t id = 0;
	pthread_mutex_lock(&intern_lock);
	if (intern_used * 2 >= intern_cap && !intern_grow())
		goto out;
	size_t i = h & (intern_cap - 1);
	while (intern_tab[i].id) {
		if (intern_tab[i].hash == h && intern_tab[i].len == len && !memcmp(intern_tab[i].bytes, s, len)) {
			id = intern_tab[i].id;
			goto out;
		}
		i = (i + 1) & (intern_cap - 1);
	}
	const char *copy = arena_copy(s, len);
	if (!copy)
		goto out;
	id = intern_next_id++;
	intern_tab[i] = (struct tbp_istr){ h, id, copy, len };
	intern_used++;
	struct tbp_record def = { .kind = TBP_K_STRING, .ts = 0 };
	def.u.string.id = id;
	def.blob = copy;
	def.blob_len = (uint32_t)len;
	/* Emitted under intern_lock so two threads interning the same string
	 * cannot both return the id before its definition is queued. */
	tbp_emit_def(&def);
out:
	pthread_mutex_unlock(&intern_lock);
	return id;
}

static _Atomic uint64_t corr_counter;
__thread struct tbp_corr_block tbp_tls_corr __attribute__((tls_model("initial-exec")));

/* Never 0: 0 means "no correlation" in records. */
__attribute__((noinline, cold)) void tbp_corr_refill(struct tbp_corr_block *c)
{
	uint64_t first = atomic_fetch_add_explicit(&corr_counter, TBP_CORR_BLOCK, memory_order_relaxed) + 1;
	c->next = first;
	c->end = first + TBP_CORR_BLOCK;
}

