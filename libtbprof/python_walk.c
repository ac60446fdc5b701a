/*
 * Python module (python_module.h): the lock-free intern tables of code
 * objects, frames and call-path nodes, the frame walker with its per-thread
 * memo, and the attribution of frameless threads.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "python_module.h"

/* --------------------------------------------- lock-free intern tables */

/* An insert-only open-addressing table: a slot is claimed by CAS of its
 * value (SLOT_EMPTY to SLOT_BUSY), its keys written, and the value
 * published by a release store (values are ids or packed id pairs, never
 * 0 nor all ones).  A reader that meets a slot being written just misses,
 * which at worst emits a duplicate def.
 *
 * Tables start small and double when 60 % full, so a process pays
 * memory for what it interns (a few KiB for a script, not 26 MiB of hashed
 * pages touched at random).  Growing copies the ready slots into the new
 * array and publishes it; an insert racing with the copy may land in the
 * old array only (a later lookup misses it: one duplicate def).  Old
 * arrays stay mapped, since readers may still be probing them. */
struct slot {
	uint64_t k1, k2;
	_Atomic uint64_t val;
};
#define SLOT_EMPTY 0
#define SLOT_BUSY UINT64_MAX
struct slots {
	struct slot *slot;
	uint64_t mask;
};
#define MAX_PROBES 64
#define TABLE_FIRST_LOG2 10
#define TABLE_GROWTH_LOG2 1

struct table code_table, frame_table, path_table;

static struct slots *slots_new(unsigned log2)
{
	size_t n = (size_t)1 << log2;
	void *m = mmap(NULL, sizeof(struct slots) + n * sizeof(struct slot), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	struct slots *s = m;
	s->slot = (struct slot *)(s + 1);
	s->mask = n - 1;
	return s;
}

bool table_init(struct table *t, unsigned max_log2)
{
	struct slots *s = slots_new(TABLE_FIRST_LOG2);
	if (!s)
		return false;
	t->max_log2 = max_log2;
	atomic_store_explicit(&t->cur, s, memory_order_release);
	return true;
}

static inline uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}

static inline bool table_get(struct table *t, uint64_t k1, uint64_t k2, uint64_t *val)
{
	const struct slots *a = atomic_load_explicit(&t->cur, memory_order_acquire);
	uint64_t i = mix(k1, k2);
	for (unsigned n = 0; n < MAX_PROBES; n++, i++) {
		struct slot *s = &a->slot[i & a->mask];
		uint64_t v = atomic_load_explicit(&s->val, memory_order_acquire);
		if (v == SLOT_EMPTY)
			return false;
		if (v != SLOT_BUSY && s->k1 == k1 && s->k2 == k2) {
			*val = v;
			return true;
		}
	}
	return false;
}

/* 1 inserted, 0 present already, -1 no free slot within the probe limit. */
static int slots_put(struct slots *a, uint64_t k1, uint64_t k2, uint64_t val)
{
	uint64_t i = mix(k1, k2);
	for (unsigned n = 0; n < MAX_PROBES; n++, i++) {
		struct slot *s = &a->slot[i & a->mask];
		uint64_t expected = SLOT_EMPTY;
		if (atomic_compare_exchange_strong_explicit(&s->val, &expected, SLOT_BUSY,
				memory_order_acq_rel, memory_order_acquire)) {
			s->k1 = k1;
			s->k2 = k2;
			atomic_store_explicit(&s->val, val, memory_order_release);
			return 1;
		}
		if (expected != SLOT_BUSY && s->k1 == k1 && s->k2 == k2)
			return 0; /* another thread published the same key */
	}
	return -1;
}

/* One thread at a time (the others go on inserting into the old array). */
static void table_grow(struct table *t, struct slots *old)
{
	int idle = 0;
	if (!atomic_compare_exchange_strong_explicit(&t->growing, &idle, 1, memory_order_acq_rel,
						     memory_order_relaxed))
		return;
	unsigned log2 = (unsigned)__builtin_ctzll(old->mask + 1) + TABLE_GROWTH_LOG2;
	struct slots *a = atomic_load_explicit(&t->cur, memory_order_acquire) == old && log2 <= t->max_log2
				  ? slots_new(log2) : NULL;
	if (a) {
		for (uint64_t i = 0; i <= old->mask; i++) {
			struct slot *s = &old->slot[i];
			uint64_t v = atomic_load_explicit(&s->val, memory_order_acquire);
			if (v != SLOT_EMPTY && v != SLOT_BUSY)
				slots_put(a, s->k1, s->k2, v);
		}
		atomic_store_explicit(&t->cur, a, memory_order_release);
	}
	atomic_store_explicit(&t->growing, 0, memory_order_release);
}

static void table_put(struct table *t, uint64_t k1, uint64_t k2, uint64_t val)
{
	if (val == SLOT_EMPTY || val == SLOT_BUSY)
		return;
	struct slots *a = atomic_load_explicit(&t->cur, memory_order_acquire);
	int r = slots_put(a, k1, k2, val);
	if (r < 0) {
		atomic_fetch_add_explicit(&t->full, 1, memory_order_relaxed);
		table_grow(t, a);
		return;
	}
	if (r > 0 && atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed) + 1 > (a->mask + 1) / 5 * 3)
		table_grow(t, a);
}

_Atomic uint64_t next_frame_id = 1, next_path_id = 1;

/* Fingerprint of a code object's identity, so a freed code object whose
 * address is reused by another one does not inherit its names. */
static inline uint64_t code_fingerprint(uintptr_t code)
{
	return mix(rd_ptr(code, L.co_filename) ^ ((uint64_t)rd_int(code, L.co_firstlineno) << 48),
		   rd_ptr(code, L.co_name));
}

/* (file id, name id) of a code object. */
static void code_names(uintptr_t code, uint64_t fp, uint64_t *file, uint64_t *name)
{
	uint64_t packed;
	if (table_get(&code_table, code, fp, &packed)) {
		*file = packed >> 32;
		*name = packed & 0xffffffffu;
		return;
	}
	*file = intern_str_obj(rd_ptr(code, L.co_filename));
	*name = intern_str_obj(rd_ptr(code, L.co_name));
	if (*file <= 0xffffffffu && *name <= 0xffffffffu)
		table_put(&code_table, code, fp, (*file << 32) | *name);
}

/* PYFRAME id for (code, line): `index` is the instruction index, or
 * UINT32_MAX for "the def line" (spans). */
uint64_t frame_id(uintptr_t code, uint32_t index)
{
	uint64_t fp = code_fingerprint(code);
	uint64_t id;
	if (table_get(&frame_table, code, fp ^ index, &id))
		return id;
	uint64_t file, name;
	code_names(code, fp, &file, &name);
	int line = index == UINT32_MAX ? rd_int(code, L.co_firstlineno) : code_line(code, index);
	id = atomic_fetch_add_explicit(&next_frame_id, 1, memory_order_relaxed);
	struct tbp_record rec = { .kind = TBP_K_PYFRAME, .stream_kind = TBP_STREAM_DEFS,
				  .ts = tbp_now() };
	rec.u.pyframe.id = id;
	rec.u.pyframe.file = file;
	rec.u.pyframe.function = name;
	rec.u.pyframe.line = line > 0 ? (uint64_t)line : 0;
	tbp_emit_def(&rec);
	table_put(&frame_table, code, fp ^ index, id);
	return id;
}

uint64_t path_node(uint64_t parent, uint64_t frame)
{
	uint64_t id;
	if (table_get(&path_table, parent, frame, &id))
		return id;
	id = atomic_fetch_add_explicit(&next_path_id, 1, memory_order_relaxed);
	struct tbp_record rec = { .kind = TBP_K_CALLPATH, .stream_kind = TBP_STREAM_DEFS,
				  .ts = tbp_now() };
	rec.u.callpath.id = id;
	rec.u.callpath.frame = frame;
	rec.u.callpath.parent = parent;
	tbp_emit_def(&rec);
	table_put(&path_table, parent, frame, id);
	return id;
}

/* ------------------------------------------------------- the walker */

#define WALK_LIMIT 4096 /* frames visited at most, skipped ones included */

uintptr_t top_frame(uintptr_t tstate)
{
	uintptr_t top = rd_ptr(tstate, L.ts_top);
	if (L.has_cframe) {
		if (!ptr_ok(top))
			return 0;
		top = rd_ptr(top, L.cframe_current);
	}
	return ptr_ok(top) ? top : 0;
}

/* Collect up to `max` frames, leaf first, starting at `frame`. */
unsigned walk(uintptr_t frame, struct raw_frame *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned visited = 0; frame && n < max && visited < WALK_LIMIT; visited++) {
		if (!ptr_ok(frame))
			break;
		uintptr_t code = rd_ptr(frame, L.fr_code);
		uintptr_t prev = rd_ptr(frame, L.fr_prev);
		if (L.owner_cstack >= 0 && *(const char *)(frame + L.fr_owner) == L.owner_cstack) {
			frame = prev;
			continue;
		}
		if (!is_code(code))
			break;
		ssize_t ncode = *(const ssize_t *)(code + 16); /* ob_size: code units (3.11+) */
		int64_t index;
		if (L.instr_is_index) {
			index = rd_int(frame, L.fr_instr);
		} else {
			uintptr_t instr = rd_ptr(frame, L.fr_instr);
			index = ((int64_t)instr - (int64_t)(code + L.co_code)) / 2;
			if (index >= ncode)
				break; /* not this code's bytecode: torn or unknown */
		}
		if (index >= 0) { /* < 0: frame pushed but not started yet */
			out[n].code = code;
			out[n].index = (uint32_t)index;
			n++;
		}
		frame = prev;
	}
	return n;
}

/* Per-thread memo of the last path built, root first: consecutive events
 * from one thread usually share all but the innermost frames, so only the
 * frames that differ are looked up.  `name` (the co_qualname pointer) is
 * compared too so a code object freed and replaced at the same address by
 * another is not taken for the old one. */
struct memo_frame { uintptr_t code, name; uint32_t index; uint64_t path; };
struct memo { unsigned n; uint64_t root; struct memo_frame f[256]; };
/* On the heap, not in TLS: glibc carves static TLS out of every thread's
 * stack, and 8 KiB less stack would make deep recursion in a small-stack
 * thread overflow where it does not without tbprof. */
static __thread struct memo *thread_memo;
static pthread_key_t memo_key;
static pthread_once_t memo_key_once = PTHREAD_ONCE_INIT;
static bool memo_key_ok;

/* At thread exit: later calls in this thread's exit get a fresh memo. */
static void memo_free(void *m)
{
	thread_memo = NULL;
	free(m);
}

static void memo_key_create(void)
{
	memo_key_ok = pthread_key_create(&memo_key, memo_free) == 0;
}

static __attribute__((noinline, cold)) struct memo *memo_alloc(void)
{
	pthread_once(&memo_key_once, memo_key_create);
	if (!memo_key_ok)
		return NULL;
	struct memo *m = calloc(1, sizeof *m);
	if (m && pthread_setspecific(memo_key, m) != 0) { /* would leak at thread exit */
		free(m);
		m = NULL;
	}
	return thread_memo = m;
}

uint64_t intern_path(const struct raw_frame *frames, unsigned n, uint64_t parent)
{
	/* One TLS read, not one per frame: in a shared library it is a call
	 * to __tls_get_addr, which the compiler would otherwise redo after
	 * every call in the loop (the asm hides where m came from). */
	struct memo *m = thread_memo;
	if (TBP_UNLIKELY(!m) && !(m = memo_alloc())) {
		for (unsigned i = n; i-- > 0;)
			parent = path_node(parent, frame_id(frames[i].code, frames[i].index));
		return parent;
	}
	__asm__("" : "+r"(m));
	if (TBP_UNLIKELY(m->root != parent)) {
		/* Paths under another root (an autograd thread's Python inside backward()) share no node. */
		m->root = parent;
		m->n = 0;
	}
	unsigned depth = 0; /* distance from the root */
	bool same = true;   /* frames so far equal the memo's */
	for (unsigned i = n; i-- > 0; depth++) {
		uintptr_t name = rd_ptr(frames[i].code, L.co_name);
		struct memo_frame *f = &m->f[depth];
		if (same && depth < m->n && f->code == frames[i].code && f->index == frames[i].index &&
		    f->name == name) {
			parent = f->path;
			continue;
		}
		same = false;
		parent = path_node(parent, frame_id(frames[i].code, frames[i].index));
		*f = (struct memo_frame){ frames[i].code, name, frames[i].index, parent };
		m->n = depth + 1;
	}
	return parent;
}

/* ----------------------------------------- frameless-thread attribution */

_Atomic uint64_t blocking_path;     /* caller of backward() now running, or 0 */
static _Atomic uint64_t wait_path, wait_ts;
#define WAIT_VALID_NS 1000000000ull

uint64_t borrowed_path(void)
{
	uint64_t p = atomic_load_explicit(&blocking_path, memory_order_acquire);
	if (p)
		return p;
	p = atomic_load_explicit(&wait_path, memory_order_acquire);
	if (p && tbp_now() - atomic_load_explicit(&wait_ts, memory_order_relaxed) < WAIT_VALID_NS)
		return p;
	return 0;
}

void tbp_py_note_wait(uint64_t callpath)
{
	if (!callpath)
		return;
	atomic_store_explicit(&wait_ts, tbp_now(), memory_order_relaxed);
	atomic_store_explicit(&wait_path, callpath, memory_order_release);
}
