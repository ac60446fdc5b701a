/*
 * Python call paths for every recorded event, Python function spans, and
 * attribution of frameless threads.  Design: doc/python.md.
 *
 * Everything here reads CPython's structures directly with per-version
 * offsets, resolved at run time: libtbprof never links libpython, never
 * takes the GIL from a hook and never calls into the interpreter on the
 * per-event path.
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

#include "core.h"
#include "libc_real.h"   /* tbp_real_dlsym: never our own interposer */
#include "python_internal.h"

/* ------------------------------------------------------------ versions */

static const struct py_layout layout_310 = {
	.minor = 10, .ts_top = 24, .has_cframe = false,
	.fr_code = 32, .fr_prev = 24, .fr_instr = 96, .fr_owner = 0, .instr_is_index = true,
	.owner_cstack = -1,
	.co_filename = 104, .co_name = 112, .co_shortname = 112, .co_firstlineno = 40, .co_linetable = 120,
	.co_code = 48, .linetable_310 = true,
	.ascii_size = 48, .compact_size = 72,
};
static const struct py_layout layout_311 = {
	.minor = 11, .ts_top = 56, .cframe_current = 8, .has_cframe = true,
	.fr_code = 32, .fr_prev = 48, .fr_instr = 56, .fr_owner = 69, .owner_cstack = -1,
	.co_filename = 112, .co_name = 128 /* co_qualname */, .co_shortname = 120, .co_firstlineno = 72,
	.co_linetable = 136, .co_code = 184,
	.ascii_size = 48, .compact_size = 72,
};
static const struct py_layout layout_312 = {
	.minor = 12, .ts_top = 56, .cframe_current = 0, .has_cframe = true,
	.fr_code = 0, .fr_prev = 8, .fr_instr = 56, .fr_owner = 70, .owner_cstack = 3,
	.co_filename = 112, .co_name = 128, .co_shortname = 120, .co_firstlineno = 68, .co_linetable = 136,
	.co_code = 192,
	.ascii_size = 40, .compact_size = 56,
};
/* 3.13: checked/derived from _Py_DebugOffsets at init (py_layout_313_from_debug). */
static const struct py_layout layout_313 = {
	.minor = 13, .ts_top = 72, .has_cframe = false,
	.fr_code = 0, .fr_prev = 8, .fr_instr = 56, .fr_owner = 70, .owner_cstack = 3,
	.co_filename = 112, .co_name = 128, .co_shortname = 120, .co_firstlineno = 68, .co_linetable = 136,
	.co_code = 200,
	.ascii_size = 40, .compact_size = 56,
};

/* Exposed for the offsets test (tests/python). */
const struct py_layout *tbp_py_layout_for(unsigned minor)
{
	switch (minor) {
	case 10: return &layout_310;
	case 11: return &layout_311;
	case 12: return &layout_312;
	case 13: return &layout_313;
	default: return NULL;
	}
}

/* ------------------------------------------------------------ state */

enum py_state { PY_UNINIT = 0, PY_WAITING = 1, PY_READY = 2, PY_INERT = 3 };
static _Atomic int py_state;
bool tbp_py_inert;
static pthread_mutex_t py_init_lock = PTHREAD_MUTEX_INITIALIZER;
static struct py_layout L;     /* the running interpreter's layout */
static int notice_flag;

/* CPython entry points, resolved with dlsym. */
typedef void *(*eval_frame_fn)(void *tstate, void *frame, int throwflag);
static struct {
	int (*is_initialized)(void);
	void *(*this_thread_state)(void);
	int (*gil_check)(void);
	int (*add_pending_call)(int (*)(void *), void *);
	void *(*interp_main)(void);
	eval_frame_fn (*get_eval)(void *interp);
	void (*set_eval)(void *interp, eval_frame_fn fn);
	void *(*intern_from_string)(const char *);
	const void *code_type;
} py;

/* --------------------------------------------------------- safe reads */

static inline bool ptr_ok(uintptr_t p)
{
	/* User-space, 8-byte aligned, not in the first page. */
	return p >= 4096 && p < (1ull << 56) && (p & 7) == 0;
}
static inline uintptr_t rd_ptr(uintptr_t base, size_t off)
{
	return *(const uintptr_t *)(base + off);
}
static inline int rd_int(uintptr_t base, size_t off)
{
	return *(const int *)(base + off);
}
static inline bool is_code(uintptr_t obj)
{
	return ptr_ok(obj) && rd_ptr(obj, 8) == (uintptr_t)py.code_type;
}

/* UTF-8 bytes of a str object, without the GIL: compact strings only (all
 * code object names are).  Writes to buf (cap bytes) when the text is not
 * already UTF-8 in memory.  Returns length or -1. */
static ssize_t str_utf8(uintptr_t s, char *buf, size_t cap, const char **out)
{
	if (!ptr_ok(s))
		return -1;
	ssize_t length = *(const ssize_t *)(s + 16);
	uint32_t state = *(const uint32_t *)(s + 32);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || length < 0 || length > (1 << 20))
		return -1;
	if (ascii) {
		*out = (const char *)(s + L.ascii_size);
		return length;
	}
	ssize_t utf8_len = *(const ssize_t *)(s + L.ascii_size);
	const char *utf8 = *(const char *const *)(s + L.ascii_size + 8);
	if (utf8 && utf8_len >= 0 && utf8_len <= 4 * length) {
		*out = utf8;
		return utf8_len;
	}
	const unsigned char *data = (const unsigned char *)(s + L.compact_size);
	size_t n = 0;
	for (ssize_t i = 0; i < length; i++) {
		uint32_t c = kind == 1 ? data[i] : kind == 2 ? ((const uint16_t *)data)[i]
			: ((const uint32_t *)data)[i];
		if (n + 4 > cap)
			break;
		if (c < 0x80) {
			buf[n++] = (char)c;
		} else if (c < 0x800) {
			buf[n++] = (char)(0xc0 | (c >> 6));
			buf[n++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			buf[n++] = (char)(0xe0 | (c >> 12));
			buf[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			buf[n++] = (char)(0x80 | (c & 0x3f));
		} else {
			buf[n++] = (char)(0xf0 | ((c >> 18) & 7));
			buf[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
			buf[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			buf[n++] = (char)(0x80 | (c & 0x3f));
		}
	}
	*out = buf;
	return (ssize_t)n;
}

static uint64_t intern_str_obj(uintptr_t s)
{
	char buf[1024];
	const char *p;
	ssize_t n = str_utf8(s, buf, sizeof buf, &p);
	if (n < 0)
		return tbp_intern_string("?", 1);
	return tbp_intern_string(p, (size_t)n);
}

/* ----------------------------------------------------- line tables */

/* 3.11+ location table varints: 6-bit groups, bit 6 = more. */
static bool lt_varint(const uint8_t **p, const uint8_t *end, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;
	while (*p < end && shift < 32) {
		uint8_t b = *(*p)++;
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64)) {
			*out = v;
			return true;
		}
	}
	return false;
}
static bool lt_svarint(const uint8_t **p, const uint8_t *end, int32_t *out)
{
	uint32_t v;
	if (!lt_varint(p, end, &v))
		return false;
	*out = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return true;
}

/* Line of code unit `index` (3.11+ table).  -1 when unknown. */
int tbp_py_line_311(const uint8_t *table, size_t size, int firstlineno, uint32_t index)
{
	const uint8_t *p = table, *end = table + size;
	uint32_t addr = 0;
	int line = firstlineno, last_known = -1;
	while (p < end) {
		uint8_t head = *p++;
		if (!(head & 0x80))
			return -1; /* not at an entry start: corrupt */
		unsigned code = (head >> 3) & 15, len = (head & 7) + 1;
		int32_t delta = 0;
		bool has_line = true;
		uint32_t skip;
		switch (code) {
		case 15: /* no location */
			has_line = false;
			break;
		case 14: /* long form */
			if (!lt_svarint(&p, end, &delta) || !lt_varint(&p, end, &skip) ||
			    !lt_varint(&p, end, &skip) || !lt_varint(&p, end, &skip))
				return last_known;
			break;
		case 13: /* no column */
			if (!lt_svarint(&p, end, &delta))
				return last_known;
			break;
		case 10: case 11: case 12: /* one line: two column bytes */
			delta = (int32_t)code - 10;
			p += 2;
			break;
		default: /* short form: one column byte */
			p += 1;
			break;
		}
		if (has_line) {
			line += delta;
			last_known = line;
		}
		if (index >= addr && index < addr + len)
			return has_line ? line : last_known;
		addr += len;
	}
	return last_known;
}

/* Line of byte offset `addr` (3.10 table: (byte delta, line delta) pairs,
 * line delta -128 = no line). */
int tbp_py_line_310(const uint8_t *table, size_t size, int firstlineno, uint32_t addr)
{
	uint32_t start = 0, end_addr = 0;
	int line = firstlineno, cur = -1, last_known = -1;
	for (size_t i = 0; i + 1 < size; i += 2) {
		start = end_addr;
		end_addr += table[i];
		int8_t ldelta = (int8_t)table[i + 1];
		if (ldelta == -128) {
			cur = -1;
		} else {
			line += ldelta;
			cur = line;
			last_known = line;
		}
		if (addr >= start && addr < end_addr)
			return cur >= 0 ? cur : last_known;
	}
	return last_known;
}

static int code_line(uintptr_t code, uint32_t index)
{
	int first = rd_int(code, L.co_firstlineno);
	uintptr_t lt = rd_ptr(code, L.co_linetable);
	if (!ptr_ok(lt))
		return first;
	ssize_t size = *(const ssize_t *)(lt + 16);
	if (size < 0 || size > (1 << 24))
		return first;
	const uint8_t *table = (const uint8_t *)(lt + 32); /* PyBytesObject.ob_sval */
	int line = L.linetable_310 ? tbp_py_line_310(table, (size_t)size, first, index * 2)
		: tbp_py_line_311(table, (size_t)size, first, index);
	return line >= 0 ? line : first;
}

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
struct table {
	_Atomic(struct slots *) cur;
	unsigned max_log2;
	_Atomic uint64_t count;
	_Atomic uint64_t full; /* inserts given up: probe sequence exhausted */
	_Atomic int growing;
};
#define MAX_PROBES 64
#define TABLE_FIRST_LOG2 10
#define TABLE_GROWTH_LOG2 1

static struct table code_table, frame_table, path_table;

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

static bool table_init(struct table *t, unsigned max_log2)
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

static _Atomic uint64_t next_frame_id = 1, next_path_id = 1;

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
static uint64_t frame_id(uintptr_t code, uint32_t index)
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

static uint64_t path_node(uint64_t parent, uint64_t frame)
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

struct raw_frame { uintptr_t code; uint32_t index; };
#define WALK_LIMIT 4096 /* frames visited at most, skipped ones included */

static uintptr_t top_frame(uintptr_t tstate)
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
static unsigned walk(uintptr_t frame, struct raw_frame *out, unsigned max)
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

static uint64_t intern_path(const struct raw_frame *frames, unsigned n, uint64_t parent)
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

static _Atomic uint64_t blocking_path;     /* caller of backward() now running, or 0 */
static _Atomic uint64_t wait_path, wait_ts;
#define WAIT_VALID_NS 1000000000ull

static uint64_t borrowed_path(void)
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

/* ------------------------------------------------------------ init */

static bool resolve(void)
{
	py.is_initialized = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	if (!py.is_initialized)
		return false;
	py.this_thread_state = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	py.gil_check = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyGILState_Check");
	py.add_pending_call = (int (*)(int (*)(void *), void *))tbp_real_dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
	py.interp_main = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
	py.get_eval = (eval_frame_fn (*)(void *))tbp_real_dlsym(RTLD_DEFAULT, "_PyInterpreterState_GetEvalFrameFunc");
	py.set_eval = (void (*)(void *, eval_frame_fn))tbp_real_dlsym(RTLD_DEFAULT, "_PyInterpreterState_SetEvalFrameFunc");
	py.intern_from_string = (void *(*)(const char *))tbp_real_dlsym(RTLD_DEFAULT, "PyUnicode_InternFromString");
	py.code_type = tbp_real_dlsym(RTLD_DEFAULT, "PyCode_Type");
	return true;
}

static unsigned minor_override; /* tests: pretend to run another 3.x */
void tbp_py_test_override_minor(unsigned minor) { minor_override = minor; }

/* Minor version of the running CPython 3.x, or 0 when it is not 3.x. */
static unsigned running_minor(void)
{
	if (minor_override)
		return minor_override;
	const unsigned long *hex = tbp_real_dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
	if (hex)
		return (*hex >> 24) == 3 ? (unsigned)((*hex >> 16) & 0xff) : 0;
	const char *(*get_version)(void) = (const char *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_GetVersion");
	unsigned major, minor;
	if (get_version && sscanf(get_version(), "%u.%u", &major, &minor) == 2 && major == 3)
		return minor;
	return 0;
}

/* 3.13: the runtime publishes its own offsets.  Find the thread-state
 * block (size, prev=0, next=8, interp=16, current_frame, ...) and the
 * interpreter-frame and code-object blocks that follow it, instead of
 * trusting a fixed position of the blocks (they moved between 3.13
 * releases).  False when they cannot be found or disagree. */
static bool layout_313_from_debug(struct py_layout *out)
{
	const char *runtime = tbp_real_dlsym(RTLD_DEFAULT, "_PyRuntime");
	if (!runtime || memcmp(runtime, "xdebugpy", 8) != 0)
		return false;
	const uint64_t *w = (const uint64_t *)(runtime + 8);
	for (unsigned i = 0; i + 22 < 128; i++) {
		if (!(w[i] > 64 && w[i] < 65536 && w[i + 1] == 0 && w[i + 2] == 8 && w[i + 3] == 16))
			continue;
		out->ts_top = w[i + 4];
		/* thread_state has 9 fields in 3.13.0; the frame block that
		 * follows starts with its size, then previous=8, executable=0. */
		for (unsigned j = i + 5; j + 16 < 128 && j < i + 16; j++) {
			if (!(w[j] > 64 && w[j] < 4096 && w[j + 1] == 8 && w[j + 2] == 0))
				continue;
			out->fr_prev = w[j + 1];
			out->fr_code = w[j + 2];
			out->fr_instr = w[j + 3];
			out->fr_owner = w[j + 5];
			const uint64_t *co = &w[j + 6]; /* size, filename, name, qualname, linetable,
							  * firstlineno, argcount, localsplusnames,
							  * localspluskinds, co_code_adaptive */
			if (!(co[0] > 64 && co[0] < 4096))
				return false;
			out->co_filename = co[1];
			out->co_shortname = co[2];
			out->co_name = co[3];
			out->co_linetable = co[4];
			out->co_firstlineno = co[5];
			out->co_code = co[9];
			return out->ts_top < 4096 && out->fr_instr < 4096 && out->co_code < 4096 &&
			       out->co_filename < out->co_code && out->co_linetable < out->co_code;
		}
		return false;
	}
	return false;
}

static void *s_backward, *s_grad; /* interned names for the blocking-call check */
static void *s_find_and_load;       /* importlib's import of one module (eval_import) */
static void install_eval_hook(void);
static void lib_paths_ask(void);
static _Atomic int lib_paths_done;  /* site done and torch seen: nothing more to ask */
static _Atomic uint64_t lib_paths_next; /* tbp_now() of the next ask from a span, 0: not yet asked */
static unsigned lib_paths_asks;
static void lib_paths_again(uint64_t now);

static void give_up(const char *why)
{
	char msg[200];
	snprintf(msg, sizeof msg, "no Python call paths: %s", why);
	tbp_warn_once(&notice_flag, "%s", msg);
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_NO_PYTHON_PATHS, msg);
	atomic_store(&py_state, PY_INERT);
	__atomic_store_n(&tbp_py_inert, true, __ATOMIC_RELAXED);
}

/* Tracing can start before the interpreter does (TBPROF_TRACE_ALL starts
 * it from the preload constructor) and a CPU-only program may never call a
 * hook that would retry.  So a small thread, with every signal blocked,
 * watches for Py_IsInitialized() (2 ms, backing off to 100 ms) and then
 * finishes the set-up: the span hook arrives through Py_AddPendingCall. */
static void try_init(void);
static void *poller_main(void *unused)
{
	(void)unused;
	unsigned delay_us = 2000;
	while (atomic_load(&py_state) == PY_WAITING) {
		if (py.is_initialized()) {
			try_init();
			break;
		}
		usleep(delay_us);
		if (delay_us < 100000)
			delay_us *= 2;
	}
	return NULL;
}

static void start_poller(void)
{
	static bool started;
	if (started)
		return;
	started = true;
	pthread_attr_t attr;
	pthread_t thread;
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&thread, &attr, poller_main, NULL) == 0)
		pthread_setname_np(thread, "tbprof-py");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

/* Fork: the set-up lock is the outermost tbprof lock (set-up may record a
 * notice, which may start the trace).  It is never held while waiting for
 * the GIL, so a fork from a thread holding the GIL can wait for it. */
static void py_fork_prepare(void)
{
	pthread_mutex_lock(&py_init_lock);
}

static void py_fork_parent(void)
{
	pthread_mutex_unlock(&py_init_lock);
}

static void py_fork_child(void)
{
	pthread_mutex_init(&py_init_lock, NULL);
}

/* Returns with py_state READY, WAITING (Python not initialized yet: try
 * again later) or INERT. */
static void try_init(void)
{
	pthread_mutex_lock(&py_init_lock);
	int st = atomic_load(&py_state);
	if (st == PY_READY || st == PY_INERT)
		goto out;
	if (st == PY_UNINIT && !resolve()) {
		atomic_store(&py_state, PY_INERT); /* not a Python process */
		__atomic_store_n(&tbp_py_inert, true, __ATOMIC_RELAXED);
		goto out;
	}
	if (!py.is_initialized()) {
		atomic_store(&py_state, PY_WAITING);
		start_poller();
		goto out;
	}
	unsigned minor = running_minor();
	const struct py_layout *base = tbp_py_layout_for(minor);
	if (!base) {
		char why[80];
		snprintf(why, sizeof why, "unsupported CPython version 3.%u", minor);
		give_up(why);
		goto out;
	}
	if (tbp_real_dlsym(RTLD_DEFAULT, "_Py_DecRefShared")) { /* only free-threaded builds have it */
		give_up("free-threaded CPython build (object layout differs)");
		goto out;
	}
	if (!py.this_thread_state || !py.code_type) {
		give_up("CPython symbols not found");
		goto out;
	}
	L = *base;
	if (minor == 13 && !layout_313_from_debug(&L)) {
		give_up("CPython 3.13 _Py_DebugOffsets not understood");
		goto out;
	}
	if (!atomic_load(&code_table.cur) && !(table_init(&code_table, 19) && table_init(&frame_table, 22) &&
						 table_init(&path_table, 23))) {
		give_up("out of memory");
		goto out;
	}
	atomic_store(&py_state, PY_READY);
	if (tbp_cfg.py_span_ns > 0)
		install_eval_hook();
	lib_paths_ask();
	atomic_store(&lib_paths_next, tbp_now() + 200000000ull);
out:
	pthread_mutex_unlock(&py_init_lock);
}

static inline bool ready(void)
{
	int st = atomic_load_explicit(&py_state, memory_order_acquire);
	if (TBP_LIKELY(st == PY_READY))
		return true;
	if (st == PY_INERT)
		return false;
	/* Not yet: cheap re-check until the interpreter is up. */
	if (st == PY_WAITING && !py.is_initialized())
		return false;
	try_init();
	return atomic_load(&py_state) == PY_READY;
}

void tbp_py_init(void)
{
	if (!tbp_cfg.python)
		return;
	(void)ready();
}

/* ------------------------------------------------------- call paths */

static uint64_t callpath_from(uintptr_t top)
{
	struct raw_frame frames[256];
	unsigned max = tbp_cfg.py_depth ? tbp_cfg.py_depth : 32;
	if (max > 256)
		max = 256;
	unsigned n = top ? walk(top, frames, max) : 0;
	return n ? intern_path(frames, n, 0) : 0;
}

/* PyTorch names the autograd engine's worker threads pt_autograd_N (set when each starts, before it runs any
 * work).  Python they run — a custom autograd.Function.backward, a hook, an op implemented in Python — runs
 * on behalf of the backward() call that another thread is blocked in. */
static __thread int8_t autograd_thread = -1;
static bool is_autograd_thread(void)
{
	if (TBP_UNLIKELY(autograd_thread < 0)) {
		char name[17] = { 0 };
		autograd_thread = prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strncmp(name, "pt_autograd", 11) == 0;
	}
	return autograd_thread > 0;
}

/* The thread's Python call path; on an autograd worker inside backward(), rooted at backward()'s caller, so
 * the frames it runs read as called from that line. */
static uint64_t thread_callpath(uintptr_t top)
{
	uint64_t root = 0;
	if (TBP_UNLIKELY(is_autograd_thread()))
		root = atomic_load_explicit(&blocking_path, memory_order_acquire);
	if (!root)
		return callpath_from(top);
	struct raw_frame frames[256];
	unsigned max = tbp_cfg.py_depth ? tbp_cfg.py_depth : 32;
	if (max > 256)
		max = 256;
	unsigned n = top ? walk(top, frames, max) : 0;
	return n ? intern_path(frames, n, root) : 0;
}

uint64_t tbp_py_callpath(void)
{
	if (!tbp_cfg.python || !ready())
		return 0;
	/* Finalization clears this flag before it frees the other threads'
	 * states, which their TSS slots still point to. */
	if (TBP_UNLIKELY(!py.is_initialized()))
		return 0;
	uintptr_t tstate = (uintptr_t)py.this_thread_state();
	uint64_t path = 0;
	if (ptr_ok(tstate))
		path = thread_callpath(top_frame(tstate));
	return path ? path : borrowed_path();
}

/* ------------------------------------------------------------ spans */

/* Cheap ticks for timing every Python call: the hook runs on each call,
 * and two clock_gettime calls cost more than the rest of it.  Converted
 * to ns with a rate measured against CLOCK_MONOTONIC (tick_rate), and
 * span timestamps are anchored on a tbp_now() read at the span's end.
 *
 * The rate is measured between (counter, monotonic) pairs read as close
 * together as possible, first 2 ms apart at install time, then again
 * whenever a span ends 8 times the last baseline after the first pair:
 * on a loaded VM a pair read across a preemption put the 2 ms rate 10 %
 * off, and every span's length with it (a planted 20 ms sleep read
 * 18.3 ms). */
static double ns_per_tick;            /* 0: ticks are tbp_now() ns; written by tick_rate only */
static bool counter_ticks;            /* ns_per_tick > 0, as a flag (tested on every call) */
static uint64_t span_ticks;           /* the span threshold, in ticks */
static uint64_t rate_tick0, rate_ns0; /* the first pair */
static uint64_t rate_next_ns;         /* re-measure at spans ending after this */
static atomic_flag rate_busy = ATOMIC_FLAG_INIT;

static inline __attribute__((always_inline)) uint64_t counter(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}
static inline __attribute__((always_inline)) uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	if (TBP_LIKELY(counter_ticks))
		return counter();
#endif
	return tbp_now();
}
static inline uint64_t ticks_to_ns(uint64_t t)
{
	double r;
	__atomic_load(&ns_per_tick, &r, __ATOMIC_RELAXED);
	return r > 0 ? (uint64_t)((double)t * r) : t;
}

/* A (counter, monotonic ns) pair: of a few tries, the one whose monotonic
 * read the counter brackets most tightly, the counter taken at its middle. */
static void tick_pair(uint64_t *tick, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 7; i++) {
		uint64_t a = counter(), n = tbp_now(), b = counter();
		if (b >= a && b - a < best) {
			best = b - a;
			*tick = a + (b - a) / 2;
			*ns = n;
		}
	}
}

/* The counter's rate from the first pair to one read now. */
static void tick_rate(void)
{
	uint64_t t1 = 0, n1 = 0;
	tick_pair(&t1, &n1);
	if (t1 <= rate_tick0 || n1 <= rate_ns0)
		return;
	double rate = (double)(n1 - rate_ns0) / (double)(t1 - rate_tick0);
	if (rate > 0.01 && rate < 100)
		__atomic_store(&ns_per_tick, &rate, __ATOMIC_RELAXED);
	rate_next_ns = n1 + 7 * (n1 - rate_ns0);
}

/* From a span's end (rare: spans are calls longer than the threshold). */
static inline void tick_rate_refine(uint64_t now)
{
	if (TBP_UNLIKELY(counter_ticks && now >= rate_next_ns) && !atomic_flag_test_and_set(&rate_busy)) {
		if (now >= rate_next_ns)
			tick_rate();
		atomic_flag_clear(&rate_busy);
	}
}

static void calibrate_ticks(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	tick_pair(&rate_tick0, &rate_ns0);
	uint64_t n;
	do
		n = tbp_now();
	while (n - rate_ns0 < 2000000); /* 2 ms, once */
	tick_rate();
	counter_ticks = ns_per_tick > 0;
#endif
	span_ticks = ns_per_tick > 0 ? (uint64_t)((double)tbp_cfg.py_span_ns / ns_per_tick)
		: tbp_cfg.py_span_ns;
}

static eval_frame_fn prev_eval;       /* evaluator installed before ours */
static _Atomic int hook_installed;
static __thread unsigned blocking_depth;
static void *tbp_eval_frame(void *tstate, void *frame, int throwflag);

static uintptr_t frame_code(void *frame)
{
	return rd_ptr((uintptr_t)frame, L.fr_code);
}

static inline bool maybe_blocking_name(uintptr_t code)
{
	uintptr_t name = rd_ptr(code, L.co_shortname);
	return name == (uintptr_t)s_backward || name == (uintptr_t)s_grad || name == (uintptr_t)s_find_and_load;
}

/* Is `code` importlib's _find_and_load (the import of one module)? */
static bool is_import_call(uintptr_t code)
{
	if (rd_ptr(code, L.co_shortname) != (uintptr_t)s_find_and_load)
		return false;
	char buf[64];
	const char *p;
	static const char file[] = "<frozen importlib._bootstrap>";
	ssize_t n = str_utf8(rd_ptr(code, L.co_filename), buf, sizeof buf, &p);
	return n == (ssize_t)sizeof file - 1 && memcmp(p, file, sizeof file - 1) == 0;
}

/* Is `code` torch's Tensor.backward / autograd.backward / autograd.grad? */
static bool is_blocking_call(uintptr_t code)
{
	uintptr_t name = rd_ptr(code, L.co_shortname);
	if (name != (uintptr_t)s_backward && name != (uintptr_t)s_grad)
		return false;
	char buf[512];
	const char *p;
	ssize_t n = str_utf8(rd_ptr(code, L.co_filename), buf, sizeof buf, &p);
	if (n < 0)
		return false;
	static const char *const files[] = { "torch/_tensor.py", "torch/autograd/__init__.py" };
	for (unsigned i = 0; i < 2; i++) {
		size_t m = strlen(files[i]);
		if ((size_t)n >= m && memcmp(p + n - m, files[i], m) == 0)
			return true;
	}
	return false;
}

/* ------------------------------------------------- C stack guard
 *
 * While any PEP 523 evaluator is installed, CPython 3.11+ stops running
 * Python-to-Python calls inline in one C frame of the default evaluator:
 * each call goes through _PyEval_Vector, our hook and a fresh
 * _PyEval_EvalFrameDefault frame (a few hundred bytes of C stack per call,
 * and C-recursion units on 3.12+).  Deep recursion that fits without tbprof
 * would then overflow.  So each thread bounds the C stack that the hooked
 * calls may take: from the outermost hooked frame of the thread, at most
 * stack/32 (and never closer than 64 KiB to the stack's end).  A call past
 * that steps aside: it takes the hook out of the interpreter (the GIL is
 * held), so deeper calls run inline again exactly as without tbprof, and
 * puts it back when that call returns.  What the program loses is at most
 * stack/32 of C stack, and spans while a thread is that deep.
 *
 * CPython 3.12+ also counts each evaluator entry against its C recursion
 * limit (2 units; 1500 units on 3.12, 10000 on 3.13): hooked calls that
 * would have run inline use these up too, so there the number of hooked
 * calls per thread is capped as well (at most ~5% of the limit). */
#define GUARD_MIN_HEADROOM (64u * 1024)
#define GUARD_UNKNOWN_BUDGET (128u * 1024) /* stack bounds unknown */

struct stack_guard {
	uintptr_t low, size;  /* this thread's stack; size 0 unknown */
	uintptr_t limit;      /* lowest frame address allowed to be hooked */
	unsigned depth;       /* hooked evaluator calls active on this thread */
	bool bounds_done;
};
/* initial-exec: read on every Python call, and a __tls_get_addr call per
 * read would cost more than the rest of the guard.  32 bytes: fits the
 * static TLS surplus glibc keeps for libraries opened later (the tests
 * load python.c with dlopen). */
static __thread struct stack_guard guard __attribute__((tls_model("initial-exec")));
static unsigned guard_max_depth = ~0u; /* hooked calls per thread */
static bool hook_suspended;          /* GIL: the hook stepped aside */
static _Atomic uint64_t hook_suspensions;

static void guard_bounds(struct stack_guard *g)
{
	g->bounds_done = true;
	pthread_attr_t attr;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return;
	if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0) {
		g->low = (uintptr_t)addr;
		g->size = size;
	}
	pthread_attr_destroy(&attr);
}

/* Outermost hooked call of this thread: where the budget starts. */
static __attribute__((noinline, cold)) void guard_start(struct stack_guard *g, uintptr_t sp)
{
	if (!g->bounds_done)
		guard_bounds(g);
	uintptr_t budget = GUARD_UNKNOWN_BUDGET, floor = 0;
	if (g->size && sp > g->low && sp - g->low <= g->size) {
		budget = g->size / 32;
		floor = g->low + GUARD_MIN_HEADROOM;
	}
	uintptr_t limit = sp > budget ? sp - budget : 0;
	g->limit = limit > floor ? limit : floor;
}

/* Too deep for the hook (or an import, eval_import): run this call and all
 * below it without it.  `counted`: a step-aside for depth (TBPROF_VERBOSE
 * reports them). */
static __attribute__((noinline)) void *step_aside(void *tstate, void *frame, int throwflag, bool counted)
{
	eval_frame_fn next = prev_eval;
	void *interp = py.interp_main();
	bool removed = false;
	if (!hook_suspended && interp && py.get_eval(interp) == (eval_frame_fn)tbp_eval_frame) {
		py.set_eval(interp, prev_eval);
		hook_suspended = removed = true;
		if (counted)
			atomic_fetch_add_explicit(&hook_suspensions, 1, memory_order_relaxed);
	}
	void *result = next(tstate, frame, throwflag);
	/* Still ours to undo (tbp_py_test_hook clears it) and nobody has
	 * installed another evaluator meanwhile. */
	if (removed && hook_suspended) {
		hook_suspended = false;
		if (py.get_eval(interp) == prev_eval)
			py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
	}
	return result;
}

/* Kept out of the hook's frame: its locals would cost every call stack. */
static __attribute__((noinline)) bool note_blocking(void *tstate, uintptr_t code)
{
	if (!is_blocking_call(code) || blocking_depth != 0 || !tbp_guard_enter())
		return false;
	/* The caller of backward(): its line is what kernels run by
	 * autograd threads are attributed to. */
	bool blocking = false;
	uint64_t p = callpath_from(top_frame((uintptr_t)tstate));
	if (p) {
		atomic_store_explicit(&blocking_path, p, memory_order_release);
		blocking = true;
		blocking_depth++;
	}
	tbp_guard_leave();
	return blocking;
}

static __attribute__((noinline)) void record_span(void *tstate, uintptr_t code, uint64_t dk)
{
	if (!tbp_guard_enter())
		return;
	uint64_t t1 = tbp_now();
	lib_paths_again(t1);
	tick_rate_refine(t1);
	uint64_t elapsed = ticks_to_ns(dk), t0 = t1 - elapsed;
	/* The callee's frame is gone; its code object is still held by
	 * the caller (function object on the caller's stack). */
	uint64_t parent = thread_callpath(top_frame((uintptr_t)tstate));
	uint64_t path = path_node(parent, frame_id(code, UINT32_MAX));
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_PY_SPAN);
	if (rec) {
		rec->ts = t0;
		rec->u.py_span.end = t1;
		rec->u.py_span.callpath = path;
		tbp_slot_commit(rec);
	}
	tbp_guard_leave();
}

/* The stack pointer, roughly: __builtin_frame_address would make the hook
 * keep a frame pointer (two more instructions on every Python call). */
static inline __attribute__((always_inline)) uintptr_t stack_pointer(void)
{
	uintptr_t sp;
#if defined(__x86_64__)
	__asm__("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
	__asm__("mov %0, sp" : "=r"(sp));
#else
	sp = (uintptr_t)__builtin_frame_address(0);
#endif
	return sp;
}

/* A call of torch's backward()/grad() (note_blocking said so): the same as
 * the hook's common path, plus the blocking path's bookkeeping, kept out of
 * the hook so that its frame holds no flag for it across the call. */
static __attribute__((noinline)) void *eval_blocking(void *tstate, void *frame, int throwflag, uintptr_t code)
{
	guard.depth++;
	uint64_t k0 = ticks();
	void *result = prev_eval(tstate, frame, throwflag);
	uint64_t dk = ticks() - k0;
	guard.depth--;
	blocking_depth--;
	atomic_store_explicit(&blocking_path, 0, memory_order_release);
	if (dk >= span_ticks && TBP_ACTIVE() && is_code(code))
		record_span(tstate, code, dk);
	/* A capture of N steps in a program that marks none counts its backward() calls. */
	if (tbp_cfg.on_demand)
		tbp_capture_backward_done();
	return result;
}

/* An import: the module's whole import runs without the hook (stepped
 * aside, as for deep recursion), timed here as one span.  A PEP 523 hook
 * makes every Python call take CPython's slow path (~200 instructions
 * more, 3.11), and `import torch` alone makes millions of them: with the
 * hook inside imports its process CPU time grew ~7 %; the price is no spans
 * inside an import but the import's own. */
static __attribute__((noinline)) void *eval_import(void *tstate, void *frame, int throwflag, uintptr_t code)
{
	uint64_t k0 = ticks();
	void *result = step_aside(tstate, frame, throwflag, false);
	uint64_t dk = ticks() - k0;
	if (dk >= span_ticks && TBP_ACTIVE() && is_code(code))
		record_span(tstate, code, dk);
	return result;
}

/* Runs on every Python call while installed: what it costs is what a
 * traced program pays per call (doc/python.md), so the common path is two
 * counter reads, the guard's compare, and the few loads below. */
static void *tbp_eval_frame(void *tstate, void *frame, int throwflag)
{
	if (!TBP_ACTIVE() || atomic_load_explicit(&py_state, memory_order_relaxed) != PY_READY)
		return prev_eval(tstate, frame, throwflag);
	struct stack_guard *g = &guard;
	if (g->depth == 0)
		guard_start(g, stack_pointer());
	else if (TBP_UNLIKELY(stack_pointer() < g->limit || g->depth >= guard_max_depth))
		return step_aside(tstate, frame, throwflag, true);
	uintptr_t code = frame_code(frame);
	/* The name compare first: it rejects almost every call for two loads. */
	if (TBP_UNLIKELY(is_code(code) && maybe_blocking_name(code))) {
		if (is_import_call(code))
			return eval_import(tstate, frame, throwflag, code);
		if (note_blocking(tstate, code))
			return eval_blocking(tstate, frame, throwflag, code);
	}
	g->depth++;
	uint64_t k0 = ticks();
	void *result = prev_eval(tstate, frame, throwflag);
	uint64_t dk = ticks() - k0;
	guard.depth--;
	if (TBP_UNLIKELY(dk >= span_ticks) && TBP_ACTIVE() && is_code(code))
		record_span(tstate, code, dk);
	return result;
}

/* ------------------------------------------------ library directories
 *
 * Where this interpreter keeps library code, in its own words, for the
 * analyzer to tell the user's frames from the libraries' by where a file
 * lies instead of by words in its path (PY_LIB records, doc/trace-format.md):
 * sysconfig's stdlib/platstdlib/purelib/platlib, site.getsitepackages(), the
 * user site, the torch package's directory (a source tree's too), and the
 * file name frozen modules carry.  Asked from a pending call: the main thread
 * between two bytecodes, with the GIL, where a signal handler's Python runs;
 * never from a hook, whose caller (torch's C++) may hold locks that Python
 * run there could need.  The snippet reads modules already imported and
 * imports nothing, so the program's modules stay as they were; the hook
 * steps aside while it runs, so it leaves no spans.  Asked again
 * (lib_paths_again) until site has finished and torch is imported: a trace
 * started with the interpreter asks before either.  What comes too late
 * (torch imported after the last ask, 10 s in) is missing: the analyzer
 * then classifies those files by the other directories. */
static const char lib_snippet[] =
	"def _tbprof_lib_paths():\n"
	"    m = __import__('sys').modules\n"
	"    out = []\n"
	"    def utf8(p):\n"
	"        try:\n"
	"            return isinstance(p, str) and p != '' and bool(p.encode('utf-8'))\n"
	"        except Exception:\n"
	"            return False\n"
	"    def add(role, p, real=True):\n"
	"        if utf8(p):\n"
	"            out.append('%d\\t%s' % (role, p))\n"
	"            try:\n"
	"                r = m['os'].path.realpath(p) if real else p\n"
	"                if r != p and utf8(r):\n"
	"                    out.append('%d\\t%s' % (role, r))\n"
	"            except Exception:\n"
	"                pass\n"
	"    sc = m.get('sysconfig')\n"
	"    if sc is not None:\n"
	"        try:\n"
	"            paths = sc.get_paths()\n"
	"            for role, key in ((1, 'stdlib'), (2, 'platstdlib'), (3, 'purelib'), (4, 'platlib')):\n"
	"                add(role, paths.get(key))\n"
	"        except Exception:\n"
	"            pass\n"
	"    else:\n"
	"        try:\n"
	"            add(1, m['os'].path.dirname(m['os'].__file__))\n"
	"        except Exception:\n"
	"            pass\n"
	"    site = m.get('site')\n"
	"    if site is not None:\n"
	"        try:\n"
	"            for p in site.getsitepackages():\n"
	"                add(5, p)\n"
	"        except Exception:\n"
	"            pass\n"
	"        try:\n"
	"            add(6, site.getusersitepackages())\n"
	"        except Exception:\n"
	"            pass\n"
	"    torch = m.get('torch')\n"
	"    tpath = list(getattr(torch, '__path__', None) or ()) if torch is not None else []\n"
	"    for p in tpath:\n"
	"        add(7, p)\n"
	"    try:\n"
	"        boot = m['_frozen_importlib']\n"
	"        f = boot._find_and_load.__code__.co_filename\n"
	"        i = f.find(boot.__name__)\n"
	"        if i > 0:\n"
	"            add(8, f[:i], False)\n"
	"    except Exception:\n"
	"        pass\n"
	"    # site sets help() once it has read its .pth files; torch is in\n"
	"    # sys.modules while it is still being imported (and imports sysconfig)\n"
	"    done = ((site is None or hasattr(m['builtins'], 'help')) and bool(tpath) and sc is not None\n"
	"            and not getattr(getattr(torch, '__spec__', None), '_initializing', False))\n"
	"    return '%d\\n' % done + '\\n'.join(out)\n"
	"def _tbprof_safe():\n"
	"    try:\n"
	"        return _tbprof_lib_paths()\n"
	"    except Exception:\n"
	"        return '0'\n"
	"out = _tbprof_safe()\n";

#define LIB_PATHS_MAX 64
static struct {
	uint64_t role, path;
} lib_emitted[LIB_PATHS_MAX];
static unsigned n_lib_emitted;

/* "ROLE\tPATH" lines into PY_LIB records, each (role, path) once. */
static void lib_paths_emit(const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		const char *tab = memchr(p, '\t', (size_t)(line_end - p));
		if (tab && tab > p && tab + 1 < line_end) {
			uint64_t role = strtoull(p, NULL, 10);
			uint64_t id = tbp_intern_string(tab + 1, (size_t)(line_end - tab - 1));
			unsigned i = 0;
			while (i < n_lib_emitted && (lib_emitted[i].role != role || lib_emitted[i].path != id))
				i++;
			if (id && i == n_lib_emitted && n_lib_emitted < LIB_PATHS_MAX) {
				lib_emitted[n_lib_emitted].role = role;
				lib_emitted[n_lib_emitted++].path = id;
				struct tbp_record rec = {.kind = TBP_K_PY_LIB, .stream_kind = TBP_STREAM_DEFS, .ts = tbp_now()};
				rec.u.py_lib.role = role;
				rec.u.py_lib.path = id;
				tbp_emit_def(&rec);
			}
		}
		p = line_end + 1;
	}
}

/* The interpreter has begun to shut down (Py_IsFinalizing, 3.13; before,
 * _Py_IsFinalizing): Python run then may meet modules already torn down. */
static bool interpreter_finalizing(void)
{
	static int (*is_finalizing)(void);
	static bool resolved;
	if (!resolved) {
		is_finalizing = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
		if (!is_finalizing)
			is_finalizing = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
		resolved = true;
	}
	return !is_finalizing || is_finalizing();
}

/* A pending call: the main thread, GIL held, between two bytecodes. */
static int lib_paths_record(void *unused)
{
	(void)unused;
	static struct {
		void *(*dict_new)(void);
		void *(*builtins)(void);
		int (*dict_set)(void *, const char *, void *);
		void *(*dict_get)(void *, const char *);
		void *(*run)(const char *, int, void *, void *, void *);
		const char *(*utf8)(void *, ssize_t *);
		void (*decref)(void *);
		void *(*err_occurred)(void);
		void (*err_clear)(void);
		bool resolved, ok;
	} c;
	if (!c.resolved) {
		c.resolved = true;
		c.dict_new = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyDict_New");
		c.builtins = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyEval_GetBuiltins");
		c.dict_set = (int (*)(void *, const char *, void *))tbp_real_dlsym(RTLD_DEFAULT, "PyDict_SetItemString");
		c.dict_get = (void *(*)(void *, const char *))tbp_real_dlsym(RTLD_DEFAULT, "PyDict_GetItemString");
		c.run = (void *(*)(const char *, int, void *, void *, void *))tbp_real_dlsym(RTLD_DEFAULT, "PyRun_StringFlags");
		c.utf8 = (const char *(*)(void *, ssize_t *))tbp_real_dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8AndSize");
		c.decref = (void (*)(void *))tbp_real_dlsym(RTLD_DEFAULT, "Py_DecRef");
		c.err_occurred = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyErr_Occurred");
		c.err_clear = (void (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyErr_Clear");
		c.ok = c.dict_new && c.builtins && c.dict_set && c.dict_get && c.run && c.utf8 && c.decref &&
		       c.err_occurred && c.err_clear;
	}
	/* An exception on its way is the program's: leave it alone; an
	 * interpreter being torn down has nothing left to ask. */
	if (!c.ok || atomic_load(&lib_paths_done) || !TBP_ACTIVE() || interpreter_finalizing() || c.err_occurred())
		return 0;
	void *globals = c.dict_new(), *builtins = c.builtins();
	if (!globals || !builtins || c.dict_set(globals, "__builtins__", builtins)) {
		if (globals)
			c.decref(globals);
		c.err_clear();
		return 0;
	}
	void *interp = py.interp_main ? py.interp_main() : NULL;
	bool aside = false;
	if (!hook_suspended && interp && prev_eval && py.get_eval(interp) == (eval_frame_fn)tbp_eval_frame) {
		py.set_eval(interp, prev_eval);
		aside = true;
	}
	enum { PY_FILE_INPUT = 257 };
	void *result = c.run(lib_snippet, PY_FILE_INPUT, globals, globals, NULL);
	if (aside && py.get_eval(interp) == prev_eval)
		py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
	if (!result && c.err_occurred()) {
		/* Not one of ours (the snippet catches every Exception): the
		 * program's KeyboardInterrupt or SystemExit, raised by a signal
		 * handler while the snippet ran.  It goes on into the program, as
		 * it would have at its next bytecode. */
		c.decref(globals);
		return -1;
	}
	if (result) {
		c.decref(result);
		void *out = c.dict_get(globals, "out"); /* borrowed */
		ssize_t n = 0;
		const char *text = out ? c.utf8(out, &n) : NULL;
		/* (a path the file system names in bytes that are not UTF-8
		 * comes back with lone surrogates; the snippet leaves those out,
		 * and an error here must not reach the program's next bytecode) */
		if (!text && c.err_occurred())
			c.err_clear();
		if (text && n > 0) {
			bool entered = tbp_guard_enter();
			const char *nl = memchr(text, '\n', (size_t)n);
			if (nl)
				lib_paths_emit(nl + 1, (size_t)(text + n - nl - 1));
			if (text[0] == '1')
				atomic_store(&lib_paths_done, 1);
			if (entered)
				tbp_guard_leave();
		}
	}
	c.decref(globals);
	return 0;
}

static void lib_paths_ask(void)
{
	if (py.add_pending_call && !atomic_load(&lib_paths_done) && !interpreter_finalizing())
		py.add_pending_call(lib_paths_record, NULL);
}

/* The first answer may come while site still reads its .pth files and
 * before torch is imported (a trace started with the interpreter): asked
 * again, about 0.2, 1, 3 and 10 s later, from a span as it is recorded: a
 * Python thread, so the interpreter is alive (a thread of ours asking on a
 * timer could ask one that is being torn down).  Each answer adds what is
 * new. */
static void lib_paths_again(uint64_t now)
{
	/* (the first again-ask is set up at install: 0.2 s; then 1, 3, 10 s) */
	static const uint64_t after_ns[] = {800000000ull, 2000000000ull, 7000000000ull};
	uint64_t next = atomic_load_explicit(&lib_paths_next, memory_order_relaxed);
	if (TBP_LIKELY(!next || now < next) || atomic_load_explicit(&lib_paths_done, memory_order_relaxed))
		return;
	if (!atomic_compare_exchange_strong(&lib_paths_next, &next, 0))
		return;
	unsigned i = __atomic_fetch_add(&lib_paths_asks, 1, __ATOMIC_RELAXED);
	if (i < sizeof after_ns / sizeof after_ns[0])
		atomic_store(&lib_paths_next, now + after_ns[i]);
	lib_paths_ask();
}

/* Runs with the GIL held. */
static int install_with_gil(void *unused)
{
	(void)unused;
	if (atomic_load(&hook_installed) || !py.interp_main || !py.get_eval || !py.set_eval)
		return 0;
	void *interp = py.interp_main();
	if (!interp)
		return 0;
	if (py.intern_from_string) {
		s_backward = py.intern_from_string("backward");
		s_grad = py.intern_from_string("grad");
		s_find_and_load = py.intern_from_string("_find_and_load");
	}
	eval_frame_fn current = py.get_eval(interp);
	if (current == (eval_frame_fn)tbp_eval_frame)
		return 0;
	calibrate_ticks();
	guard_max_depth = L.minor == 12 ? 32 : L.minor >= 13 ? 256 : ~0u;
	prev_eval = current;
	if (!prev_eval)
		prev_eval = (eval_frame_fn)tbp_real_dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	if (!prev_eval)
		return 0;
	py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
	atomic_store(&hook_installed, 1);
	return 0;
}

/* Tests and benchmarks only, with the GIL held: take the hook out (1 if it
 * was installed and still on top) or put it back. */
int tbp_py_test_hook(int on)
{
	if (!py.interp_main || !py.get_eval || !py.set_eval || !prev_eval)
		return 0;
	void *interp = py.interp_main();
	eval_frame_fn current = py.get_eval(interp);
	if (on && current == prev_eval) {
		py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
		return 1;
	}
	hook_suspended = false; /* a suspended hook stays as the test sets it */
	if (!on && current == (eval_frame_fn)tbp_eval_frame) {
		py.set_eval(interp, prev_eval);
		return 1;
	}
	return 0;
}

int tbp_py_test_upset_rate(double factor)
{
	if (!counter_ticks)
		return 0;
	double r = ns_per_tick * factor;
	__atomic_store(&ns_per_tick, &r, __ATOMIC_RELAXED);
	rate_next_ns = 0;
	return 1;
}

static void install_eval_hook(void)
{
	if (!py.set_eval || !py.get_eval || !py.gil_check)
		return;
	/* PyGILState_Check() answers 1 when its check is disabled (e.g. with
	 * subinterpreters): also require that this thread has a thread state. */
	if (py.gil_check() && py.this_thread_state())
		install_with_gil(NULL);
	else if (py.add_pending_call)
		py.add_pending_call(install_with_gil, NULL);
}

void tbp_py_shutdown(void)
{
	/* Leave the hook in place: it passes calls through once tbp_active is
	 * 0, and removing it needs the GIL, which a hook must never take.
	 * The library is never unloaded (-z nodelete). */
	if (atomic_load(&py_state) != PY_READY)
		return;
	if (tbp_cfg.verbose) {
		uint64_t aside = atomic_load(&hook_suspensions);
		if (aside)
			tbp_log("python: span hook stepped aside %llu times (deep recursion)\n",
				(unsigned long long)aside);
		uint64_t full = code_table.full + frame_table.full + path_table.full;
		tbp_log("python: %llu frames, %llu call-path nodes interned%s\n",
			(unsigned long long)next_frame_id - 1, (unsigned long long)next_path_id - 1,
			full ? " (tables full: some not cached)" : "");
	}
}

/* Lent to the lifecycle (lifecycle.c) at load. */
static const struct tbp_hook_ops python_ops = {
	.rank = TBP_RANK_PYTHON,
	.fork_prepare = py_fork_prepare,
	.fork_parent = py_fork_parent,
	.fork_child = py_fork_child,
	.trace_started = tbp_py_init,
	.trace_stop = tbp_py_shutdown,
};

__attribute__((constructor(102))) static void python_register(void)
{
	tbp_register_hook_ops(&python_ops);
}
