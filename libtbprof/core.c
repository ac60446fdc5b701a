/*
 * libtbprof core: configuration, per-thread lock-free record buffers, the
 * one writer thread, definitions and interning, lifecycle (lazy start, exit,
 * signals, fork).
 *
 * Threading model.  Every thread that records owns one ring of
 * `struct tbp_record` slots (single producer: the thread; single consumer:
 * the writer thread).  The producer publishes with a release store of its
 * head; the writer reads heads with acquire, writes the records out and
 * publishes its tail with release, which is what lets the producer reuse
 * slots.  The hot path takes no lock, makes no system call (except one futex
 * wake when a ring crosses half full) and never waits.
 *
 * Definitions (interned strings, call paths, ...) go through a mutex
 * protected history that is never trimmed: a forked child replays it into its
 * own file, so ids stay valid there.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "tbp_config.h"

struct tbp_config tbp_cfg;
struct tbp_tsc_params tbp_tsc;
int tbp_tsc_on;
static bool tsc_wanted;      /* TBPROF_TSC (default 1) */
volatile int tbp_active;
volatile int tbp_gpu_used;
unsigned tbp_started_by_lib;
__thread int tbp_tls_device __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------ diagnostics */

void tbp_log(const char *fmt, ...)
{
	char line[512];
	int saved_errno = errno;
	memcpy(line, "tbprof: ", 8);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + 8, sizeof line - 9, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	size_t len = 8 + ((size_t)n < sizeof line - 9 ? (size_t)n : sizeof line - 9);
	if (line[len - 1] != '\n')
		line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
	errno = saved_errno;
}

void tbp_warn_once(int *flag, const char *fmt, ...)
{
	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	char msg[480];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbp_log("%s", msg);
}

/* ------------------------------------------------------------ configuration */

/* Strict parsing: a value that is not exactly of the expected form is
 * rejected with one line naming the variable and the value, and the
 * default is used (a typo must not silently mean something else). */
bool tbp_env_bool(const char *name, bool dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]))
			return true;
		if (!strcasecmp(v, no[i]))
			return false;
	}
	tbp_log("%s=%s: not a boolean (true/false, yes/no, on/off, 1/0); using the default %d",
		name, v, dflt ? 1 : 0);
	return dflt;
}

/* Unsigned decimal, optionally with a K/M/G/T suffix (powers of 1024, an
 * optional trailing B) when `suffixes`; within [lo, hi]. */
static unsigned long long env_uint(const char *name, unsigned long long dflt, unsigned long long lo,
	unsigned long long hi, bool suffixes)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	const char *why = "not a non-negative integer";
	unsigned long long n = 0;
	const char *p = v;
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned digit = (unsigned)(*p - '0');
		if (n > (ULLONG_MAX - digit) / 10) {
			why = "too large";
			goto bad;
		}
		n = n * 10 + digit;
	}
	if (*p && suffixes) {
		unsigned shift = 0;
		switch (*p) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: why = "unknown suffix (K, M, G, T)"; goto bad;
		}
		p++;
		if (*p == 'i' && (p[1] == 'B' || p[1] == 'b'))
			p++;
		if (*p == 'B' || *p == 'b')
			p++;
		if (n > (ULLONG_MAX >> shift)) {
			why = "too large";
			goto bad;
		}
		n <<= shift;
	}
	if (*p) {
		why = suffixes ? "trailing characters" : "not a non-negative integer";
		goto bad;
	}
	if (n < lo || n > hi) {
		why = "out of range";
		goto bad;
	}
	return n;
bad:
	tbp_log("%s=%s: %s (allowed %llu..%llu); using the default %llu", name, v, why, lo, hi, dflt);
	return dflt;
}

/* TBPROF_VERBOSE: a boolean or a level 0..9. */
static int env_verbose(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (v[0] >= '0' && v[0] <= '9' && !v[1])
		return v[0] - '0';
	return tbp_env_bool(name, false) ? 1 : 0;
}

/* A non-negative decimal below 2^31 from a launcher's variable, else -1.
 * These variables are not ours: a malformed one is ignored silently (the
 * program may not even be distributed). */
static int64_t env_rank_value(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	int64_t n = 0;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || n > (INT32_MAX - 9) / 10)
			return -1;
		n = n * 10 + (*v - '0');
	}
	return n;
}

/* Rank, world size and local rank, from the first launcher that set a
 * rank: torchrun and torch.distributed (RANK, WORLD_SIZE, LOCAL_RANK), Open
 * MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID).  torchrun sets RANK for its workers, so under srun a
 * worker is the torchrun rank, not the srun task. */
static void tbp_rank_from_env(void)
{
	static const char *const vars[][3] = {
		{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	};
	tbp_cfg.rank = tbp_cfg.world_size = tbp_cfg.local_rank = -1;
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		int64_t rank = env_rank_value(vars[i][0]);
		if (rank < 0)
			continue;
		tbp_cfg.rank = rank;
		tbp_cfg.world_size = env_rank_value(vars[i][1]);
		tbp_cfg.local_rank = env_rank_value(vars[i][2]);
		return;
	}
}

/* The constructor only reads the environment: no allocation, no thread, no
 * file, so a process that never touches the GPU is not disturbed at all. */
static void tbp_start_trace_all(void);
static void tbp_register_atfork(void);
__attribute__((constructor)) static void tbp_read_config(void)
{
	tbp_cfg.enabled = tbp_env_bool("TBPROF_ENABLE", true);
	const char *out = getenv("TBPROF_OUT");
	snprintf(tbp_cfg.out, sizeof tbp_cfg.out, "%s", out && *out ? out : "trace.zst");
	tbp_cfg.buffer_bytes = (size_t)env_uint("TBPROF_BUFFER_SIZE", 8ull << 20, 4u << 10, 1ull << 34, true);
	tbp_cfg.python = tbp_env_bool("TBPROF_PYTHON", true);
	/* up to one hour: the product in ns cannot overflow */
	tbp_cfg.py_span_ns = env_uint("TBPROF_PY_SPAN_US", 100, 0, 3600ull * 1000000ull, false) * 1000ull;
	tbp_cfg.py_depth = (unsigned)env_uint("TBPROF_PY_DEPTH", 32, 1, 1024, false);
	tbp_cfg.native = tbp_env_bool("TBPROF_NATIVE", false);
	tbp_cfg.native_depth = (unsigned)env_uint("TBPROF_NATIVE_DEPTH", 16, 1, 128, false);
	tbp_cfg.cupti = tbp_env_bool("TBPROF_CUPTI", true);
	tbp_cfg.cupti_buffer_bytes =
		(size_t)env_uint("TBPROF_CUPTI_BUFFER_SIZE", 32ull << 20, 256u << 10, 1ull << 34, true);
	tbp_cfg.fork_mode = tbp_env_bool("TBPROF_FORK", true) ? 1 : 0;
	tbp_cfg.trace_all = tbp_env_bool("TBPROF_TRACE_ALL", false);
	tbp_cfg.verbose = env_verbose("TBPROF_VERBOSE");
	tsc_wanted = tbp_env_bool("TBPROF_TSC", true);
	tbp_rank_from_env();
	TBP_SET_ACTIVE(tbp_cfg.enabled);
	/* Now, not at trace start: a fork while another thread is starting
	 * the trace (holding its locks) must already run the handlers. */
	if (tbp_cfg.enabled)
		tbp_register_atfork();
	/* TBPROF_TRACE_ALL traces every Python process from its start; other
	 * processes (the shells, env, readlink, timeout of a pyenv shim or a
	 * conda wrapper) only when they use CUDA/HIP, as without it, so they
	 * never take the output name from the Python process.  The
	 * interpreter's symbols are there before any constructor runs: in the
	 * executable or in a libpython it was linked with. */
	if (tbp_cfg.enabled && tbp_cfg.trace_all && dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
		tbp_start_trace_all();
}

/* ------------------------------------------------------------ small helpers */

static long futex_wait(atomic_int *addr, int expected, unsigned timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
	return syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

static void futex_wake_all(atomic_int *addr)
{
	syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static pid_t tbp_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------ recursion guard */

__thread int tbp_tls_guard __attribute__((tls_model("initial-exec")));

bool tbp_guard_enter(void)
{
	return tbp_guard_enter_inline();
}

void tbp_guard_leave(void)
{
	tbp_guard_leave_inline();
}

/* ------------------------------------------------------------ per-thread rings */


__thread struct tbp_tbuf *tbp_tls_buf __attribute__((tls_model("initial-exec")));
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tbp_tbuf *registry;
static pthread_key_t tbuf_key;
static atomic_int writer_wake;      /* futex word: 1 = work requested */
static _Atomic uint64_t lost_total_all;

static void tbp_tbuf_retire(void *arg)
{
	struct tbp_tbuf *b = arg;
	if (tbp_tls_buf == b)
		tbp_tls_buf = NULL;
	atomic_store_explicit(&b->retired, 1, memory_order_release);
}

/* Records a ring holds when its thread starts: 80 KiB of slots. */
#define RING_FIRST_RECORDS 512u

static struct tbp_tbuf *tbp_tbuf_create(void)
{
	size_t want = tbp_cfg.buffer_bytes / sizeof(struct tbp_record);
	size_t cap = 64;
	while (cap * 2 <= want)
		cap *= 2;
	size_t first = cap < RING_FIRST_RECORDS ? cap : RING_FIRST_RECORDS;
	size_t bytes = sizeof(struct tbp_tbuf) + 64 + cap * sizeof(struct tbp_record);
	void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return NULL;
	struct tbp_tbuf *b = mem;
	b->slots = (struct tbp_record *)((char *)mem + ((sizeof(struct tbp_tbuf) + 63) & ~(size_t)63));
	b->map_bytes = bytes;
	b->max_mask = cap - 1;
	atomic_store_explicit(&b->mask, first - 1, memory_order_relaxed);
	b->tid = (uint32_t)tbp_gettid();
	pthread_mutex_lock(&registry_lock);
	b->next = registry;
	registry = b;
	pthread_mutex_unlock(&registry_lock);
	tbp_tls_buf = b;
	pthread_setspecific(tbuf_key, b);
	return b;
}

void tbp_ring_pressure(struct tbp_tbuf *b)
{
	if (atomic_load_explicit(&b->mask, memory_order_relaxed) < b->max_mask)
		b->grow = true;
	tbp_wake_writer();
}

void tbp_wake_writer(void)
{
	if (atomic_load_explicit(&writer_wake, memory_order_relaxed) == 0 &&
	    atomic_exchange_explicit(&writer_wake, 1, memory_order_acq_rel) == 0)
		futex_wake_all(&writer_wake);
}

atomic_int tbp_start_state;      /* 0 not started, 1 starting, 2 running, 3 failed/stopped */
/* Set in a forked child of a tracing parent until an intercepted call or a
 * marker starts its trace. */
static int fork_child_waiting;
static void tbp_start_slow(void);
static void tbp_announce_thread(struct tbp_tbuf *b);

/* Reserve the next slot of this thread's ring, with stream_kind/tid set. */
static struct tbp_record *tbp_reserve(struct tbp_tbuf *b, unsigned kind, uint64_t ts)
{
	uint64_t head = b->reserved;
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
	uint64_t mask = atomic_load_explicit(&b->mask, memory_order_relaxed);
	/* Doubling the ring at a head that is an odd multiple of the capacity C: the records still in it
	 * (at most C, from head - C on) then sit at the same slots under the old mask and the new one. */
	if (b->grow && (head & mask) == 0 && (head & (mask + 1)) != 0) {
		mask = mask * 2 + 1;
		atomic_store_explicit(&b->mask, mask, memory_order_relaxed); /* published by the next head */
		b->grow = false;
	}
	uint64_t need = b->lost ? 2 : 1;
	if (head - tail + need > mask + 1) {
		if (b->lost++ == 0)
			b->lost_since = ts ? ts : tbp_now();
		atomic_fetch_add_explicit(&b->lost_total, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&lost_total_all, 1, memory_order_relaxed);
		tbp_wake_writer();
		return NULL;
	}
	if (b->lost) {
		/* The loss is reported in order, before the next record. */
		struct tbp_record *l = &b->slots[head & mask];
		memset(l, 0, sizeof *l);
		l->kind = TBP_K_LOST;
		l->stream_kind = TBP_STREAM_THREAD;
		l->tid = b->tid;
		l->ts = tbp_now();
		l->u.lost.count = b->lost;
		l->u.lost.source = TBP_LOST_BUFFER_FULL;
		l->u.lost.since_ts = b->lost_since;
		b->lost = 0;
		head++;
		atomic_store_explicit(&b->head, head, memory_order_release);
	}
	struct tbp_record *rec = &b->slots[head & mask];
	memset(rec, 0, sizeof *rec);
	rec->kind = (uint8_t)kind;
	rec->stream_kind = TBP_STREAM_THREAD;
	rec->tid = b->tid;
	b->reserved = head + 1;
	return rec;
}

static struct tbp_tbuf *tbp_current_tbuf(void)
{
	struct tbp_tbuf *b = tbp_tls_buf;
	if (TBP_LIKELY(b != NULL))
		return b;
	b = tbp_tbuf_create();
	if (b && !b->thread_announced)
		tbp_announce_thread(b);
	return b;
}

struct tbp_record *tbp_slot_acquire(unsigned kind)
{
	if (TBP_UNLIKELY(!TBP_ACTIVE()))
		return NULL;
	if (TBP_UNLIKELY(atomic_load_explicit(&tbp_start_state, memory_order_acquire) != 2)) {
		/* A forked child starts only on an intercepted call or a marker
		 * (tbp_ensure_started): Python spans of a worker that never
		 * touches the GPU must not create a trace of their own. */
		if (__atomic_load_n(&fork_child_waiting, __ATOMIC_RELAXED))
			return NULL;
		tbp_ensure_started();
		if (atomic_load_explicit(&tbp_start_state, memory_order_acquire) != 2)
			return NULL;
	}
	struct tbp_tbuf *b = tbp_current_tbuf();
	if (TBP_UNLIKELY(!b))
		return NULL;
	if (TBP_UNLIKELY(b->reserved != atomic_load_explicit(&b->head, memory_order_relaxed)))
		return NULL;  /* a slot is already open on this thread (signal handler reentry) */
	return tbp_reserve(b, kind, 0);
}

void tbp_slot_commit(struct tbp_record *rec)
{
	tbp_slot_commit_inline(rec);
}

void tbp_emit(const struct tbp_record *src)
{
	if (!src || !TBP_ACTIVE())
		return;
	uint8_t stream_kind = src->stream_kind;
	uint32_t tid = src->tid;
	struct tbp_record *rec = tbp_slot_acquire(src->kind);
	if (!rec)
		return;
	*rec = *src;
	rec->blob = NULL;
	rec->blob_len = 0;
	rec->stream_kind = stream_kind;
	rec->tid = tid;
	tbp_slot_commit(rec);
}

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
static pthread_mutex_t def_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tbp_def **def_hist;
static size_t def_count, def_cap;
static size_t def_written;   /* writer: defs already in the file */
static char *def_arena;      /* under def_lock: bump allocation, never freed */
static size_t def_arena_left;

static void *def_alloc(size_t bytes)
{
	bytes = (bytes + 7) & ~(size_t)7;
	if (bytes > DEF_ARENA_BYTES / 4)
		return malloc(bytes);
	if (bytes > def_arena_left) {
		char *a = malloc(DEF_ARENA_BYTES);
		if (!a)
			return NULL;
		def_arena = a;
		def_arena_left = DEF_ARENA_BYTES;
	}
	void *p = def_arena;
	def_arena += bytes;
	def_arena_left -= bytes;
	return p;
}

/* The record a definition stands for (its blob points into the definition). */
static void def_record(const struct tbp_def *d, struct tbp_record *rec)
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
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tbp_istr *intern_tab;
static size_t intern_cap, intern_used;
static uint64_t intern_next_id = 1;
static char *arena_cur;
static size_t arena_left;

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
	if (len + 1 > arena_left) {
		size_t chunk = len + 1 > 65536 ? len + 1 : 65536;
		char *a = malloc(chunk);
		if (!a)
			return NULL;
		arena_cur = a;
		arena_left = chunk;
	}
	char *dst = arena_cur;
	memcpy(dst, s, len);
	dst[len] = 0;
	arena_cur += len + 1;
	arena_left -= len + 1;
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

_Atomic uint64_t tbp_corr_counter;

uint64_t tbp_corr_next(void)
{
	return tbp_corr_next_inline();
}

/* ------------------------------------------------------------ process facts */

static struct tbp_record process_rec;

static uint64_t intern_file(const char *path, bool nul_to_space)
{
	char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	while (n > 0 && buf[n - 1] == 0)
		n--;
	if (nul_to_space)
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
	return tbp_intern_string(buf, (size_t)n);
}

/* Is this process torchrun's agent (`torchrun`, `python -m
 * torch.distributed.run` or the older `torch.distributed.launch`)?  It starts
 * the ranks and has no rank of its own, but under srun or mpirun it carries
 * the task's SLURM_PROCID / OMPI rank; its workers get RANK and
 * TORCHELASTIC_RUN_ID, so a process with TORCHELASTIC_RUN_ID and no RANK is
 * an agent too (an agent launched by another). */
static bool tbp_is_launcher_agent(void)
{
	if (getenv("TORCHELASTIC_RUN_ID") && !getenv("RANK"))
		return true;
	char buf[4096];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* argv[0] and argv[1] (the script, under an interpreter), and the
	 * module after -m */
	int argi = 0;
	bool after_m = false;
	for (char *a = buf; a < buf + n && argi < 8; a += strlen(a) + 1, argi++) {
		const char *slash = strrchr(a, '/');
		const char *base = slash ? slash + 1 : a;
		if ((argi < 2 && !strcmp(base, "torchrun")) ||
		    (after_m && (!strcmp(a, "torch.distributed.run") || !strcmp(a, "torch.distributed.launch"))))
			return true;
		after_m = !strcmp(a, "-m");
	}
	return false;
}

static void tbp_build_process_record(void)
{
	struct tbp_record *r = &process_rec;
	memset(r, 0, sizeof *r);
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	r->kind = TBP_K_PROCESS;
	r->stream_kind = TBP_STREAM_DEFS;
	r->ts = tbp_now();
	r->u.process.pid = (uint64_t)getpid();
	r->u.process.ppid = (uint64_t)getppid();
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	r->u.process.host = tbp_intern_string(host, strlen(host));
	r->u.process.cmdline = intern_file("/proc/self/cmdline", true);
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	if (n > 0)
		r->u.process.exe = tbp_intern_string(path, (size_t)n);
	if (getcwd(path, sizeof path))
		r->u.process.cwd = tbp_intern_string(path, strlen(path));
	r->u.process.realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	r->u.process.monotonic_ns = r->ts;
	/* -1 (all ones on disk) = none; the agent launches ranks, it is none */
	bool ranked = tbp_cfg.rank >= 0 && !tbp_cfg.launcher_agent;
	r->u.process.rank = (uint64_t)(ranked ? tbp_cfg.rank : -1);
	r->u.process.world_size = (uint64_t)(ranked ? tbp_cfg.world_size : -1);
	r->u.process.local_rank = (uint64_t)(ranked ? tbp_cfg.local_rank : -1);
}

static void tbp_announce_thread(struct tbp_tbuf *b)
{
	b->thread_announced = true;
	char name[32] = "";
	pthread_getname_np(pthread_self(), name, sizeof name);
	uint64_t name_id = tbp_intern_string(name, strlen(name));
	struct tbp_record *rec = tbp_reserve(b, TBP_K_THREAD, 0);
	if (!rec)
		return;
	rec->ts = tbp_now();
	rec->u.thread.tid = b->tid;
	rec->u.thread.name = name_id;
	atomic_store_explicit(&b->head, b->reserved, memory_order_release);
}

/* ------------------------------------------------------------ output file */

static int out_fd = -1;
static char out_path[PATH_MAX];
/* Identity of the trace file, so the writer notices when the program closed
 * our descriptor (os.closerange, close_fds) and the number now names one of
 * its own files: then nothing more is written through it. */
static dev_t out_dev;
static ino_t out_ino;
static int out_gone_warned;
static bool out_gone;

/* A descriptor number far from the ones the program uses: programs get the
 * lowest free number, so a high one is rarely reused even after a
 * close-everything; the identity check covers the rest. */
static int move_fd_high(int fd)
{
	struct rlimit rl;
	int lo = 1000;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1000 + 32)
		lo = rl.rlim_cur > 64 ? (int)rl.rlim_cur - 32 : 3;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, lo);
	if (high < 0)
		high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (high < 0)
		return fd;
	close(fd);   /* the lock stays with the shared open file */
	return high;
}

/* Writer thread, before each frame: is out_fd still our trace file? */
static bool out_still_ours(void)
{
	if (out_gone)
		return false;
	struct stat st;
	if (out_fd >= 0 && fstat(out_fd, &st) == 0 && st.st_dev == out_dev && st.st_ino == out_ino)
		return true;
	out_gone = true;
	return false;
}

/*
 * Session identity.  A session is the process tree under the topmost
 * ancestor that has libtbprof loaded (the LD_PRELOAD'ed shell, launcher or
 * program at the top of the run); a process is named by its pid and its
 * start time in clock ticks since boot (which together do not repeat),
 * plus the boot id.  Each trace carries its writer's session as an interned
 * string (SESSION_PREFIX ...) among its first definitions, so a later
 * process can tell exactly whether an existing file is from its own
 * session (keep it: take the per-pid name) or from an earlier run (take
 * the name over), with no timestamp comparison.  An exec'd image of a
 * traced process keeps pid, start time and ancestors: the same session.
 */
#define SESSION_PREFIX "tbprof-session "

/* ppid and start time (ticks since boot) of pid; false if unreadable. */
static bool proc_stat_ids(pid_t pid, pid_t *ppid, unsigned long long *start_ticks)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	char *p = strrchr(buf, ')');   /* the command name may hold spaces */
	if (!p)
		return false;
	/* fields after ")": 3 state, 4 ppid, ..., 22 starttime */
	int field = 2;
	bool have_start = false;
	char *save = NULL;
	for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		++field;
		if (field == 4)
			*ppid = (pid_t)strtol(tok, NULL, 10);
		if (field == 22) {
			*start_ticks = strtoull(tok, NULL, 10);
			have_start = true;
			break;
		}
	}
	return have_start;
}

static bool process_is_traced(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool found = false;
	size_t keep = 0;
	ssize_t n;
	while (!found && (n = read(fd, buf + keep, sizeof buf - 1 - keep)) > 0) {
		size_t len = keep + (size_t)n;
		buf[len] = 0;
		found = strstr(buf, "libtbprof") != NULL;
		keep = len > 16 ? 16 : len;
		memmove(buf, buf + len - keep, keep);
	}
	close(fd);
	return found;
}

static char session_text[128];

static void session_compute(void)
{
	pid_t pid = getpid(), ppid = 0;
	unsigned long long ticks = 0;
	proc_stat_ids(pid, &ppid, &ticks);
	for (int depth = 0; depth < 256 && ppid > 1 && process_is_traced(ppid); depth++) {
		pid_t up = ppid;
		unsigned long long up_ticks = 0;
		if (!proc_stat_ids(up, &ppid, &up_ticks))
			break;
		pid = up;
		ticks = up_ticks;
	}
	char boot[40] = "";
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, boot, sizeof boot - 1);
		close(fd);
		boot[n > 0 ? n : 0] = 0;
		boot[strcspn(boot, "\n")] = 0;
	}
	snprintf(session_text, sizeof session_text, SESSION_PREFIX "%d %llu %s", (int)pid, ticks, boot);
}

/* Is path a trace written in our session?  Reads its first definitions
 * only (the session string is interned before the writer's first drain). */
static bool file_is_from_this_session(const char *path)
{
	struct tbp_reader *r = NULL;
	bool same = false;
	if (tbp_reader_open(&r, path) == TBP_OK) {
		struct tbp_record rec;
		size_t prefix = strlen(SESSION_PREFIX);
		for (int i = 0; i < 1000000 && tbp_reader_next(r, &rec) == TBP_OK; i++) {
			if (rec.stream_kind != TBP_STREAM_DEFS)
				break;   /* past the first definitions */
			if (rec.kind == TBP_K_STRING && rec.blob && rec.blob_len > prefix &&
			    !memcmp(rec.blob, SESSION_PREFIX, prefix)) {
				same = rec.blob_len == strlen(session_text) &&
					!memcmp(rec.blob, session_text, rec.blob_len);
				break;
			}
		}
	}
	if (r)
		tbp_reader_close(r);
	return same;
}

static const char *out_path_shown(char *buf, size_t len);

/* Expand %p to the pid and %r to the rank (the agent's "agent", any other
 * process's "norank"). */
static void expand_out(char *dst, size_t cap, const char *pattern, bool *had_pid)
{
	size_t o = 0;
	*had_pid = false;
	for (const char *p = pattern; *p && o + 1 < cap; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(dst + o, cap - o, "%d", (int)getpid());
			p++;
			*had_pid = true;
		} else if (p[0] == '%' && p[1] == 'r') {
			if (tbp_cfg.rank >= 0 && !tbp_cfg.launcher_agent)
				o += (size_t)snprintf(dst + o, cap - o, "%lld", (long long)tbp_cfg.rank);
			else
				o += (size_t)snprintf(dst + o, cap - o, "%s", tbp_cfg.launcher_agent ? "agent" : "norank");
			p++;
		} else {
			dst[o++] = *p;
		}
		if (o >= cap)
			o = cap - 1;
	}
	dst[o] = 0;
}

/* TBPROF_OUT naming a directory (an existing one, or any name ending in
 * '/', created here): each process writes a file in it named by what it
 * is, so a torchrun job leaves rank0.zst, rank1.zst ... side by side;
 * torchrun's agent writes agent.zst, a process outside a job trace.zst.
 * The session rules below then apply to that name. */
static void directory_out(char *base, size_t cap)
{
	size_t len = strlen(base);
	struct stat st;
	bool slash = len > 0 && base[len - 1] == '/';
	if (slash && len > 1)
		mkdir(base, 0777);   /* EEXIST is fine; other failures show when the file is opened */
	if (!slash && (stat(base, &st) != 0 || !S_ISDIR(st.st_mode)))
		return;
	char name[32];
	if (tbp_cfg.rank >= 0 && !tbp_cfg.launcher_agent)
		snprintf(name, sizeof name, "rank%lld.zst", (long long)tbp_cfg.rank);
	else
		snprintf(name, sizeof name, "%s", tbp_cfg.launcher_agent ? "agent.zst" : "trace.zst");
	if (len + strlen(name) + 2 < cap)
		snprintf(base + len, cap - len, "%s%s", slash ? "" : "/", name);
}

static void tagged_name(char *dst, size_t cap, const char *base, const char *tag);

/* The output's base name.  torchrun's agent starts before its ranks: with
 * a plain file name it would take the name and leave the ranks the per-pid
 * ones, so it writes "<stem>.agent<ext>" (an explicit %r names it
 * already). */
static void output_base(char *base, size_t cap, bool *had_pid)
{
	expand_out(base, cap, tbp_cfg.out, had_pid);
	size_t len = strlen(base);
	directory_out(base, cap);
	if (strlen(base) == len && tbp_cfg.launcher_agent && !strstr(tbp_cfg.out, "%r")) {
		char plain[PATH_MAX];
		snprintf(plain, sizeof plain, "%s", base);
		tagged_name(base, cap, plain, "agent");
	}
}

/* "trace.zst" -> "trace.<tag>.zst": the tag goes after the stem. */
static void tagged_name(char *dst, size_t cap, const char *base, const char *tag)
{
	const char *slash = strrchr(base, '/');
	const char *dot = strchr(slash ? slash + 1 : base, '.');
	if (dot)
		snprintf(dst, cap, "%.*s.%s%s", (int)(dot - base), base, tag, dot);
	else
		snprintf(dst, cap, "%s.%s", base, tag);
}

/* The per-pid name: "trace.zst" -> "trace.<pid>.zst". */
static void unique_name(char *dst, size_t cap, const char *base, int serial)
{
	char id[32];
	if (serial)
		snprintf(id, sizeof id, "%d-%d", (int)getpid(), serial);
	else
		snprintf(id, sizeof id, "%d", (int)getpid());
	tagged_name(dst, cap, base, id);
}

/* May we truncate this open regular file?  Only when it is empty or a
 * tbprof trace (by its magic); anything else is the user's data.  fd is
 * write-only (a FIFO must not be opened for reading), so the bytes are
 * read through a second, read-only open of the same file; a file we
 * cannot read is not ours to overwrite either. */
static bool fd_may_truncate(int fd, const struct stat *st)
{
	if (st->st_size == 0)
		return true;
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int rfd = open(self, O_RDONLY | O_CLOEXEC);
	if (rfd < 0)
		return false;
	unsigned char head[TBP_TRACE_PREFIX_LEN];
	ssize_t n = pread(rfd, head, sizeof head, 0);
	close(rfd);
	return n > 0 && tbp_is_trace_prefix(head, (size_t)n);
}

enum out_refusal { OUT_OK, OUT_IS_SYMLINK, OUT_NOT_A_TRACE };

/* Opens an existing-or-new output without following a symlink at it;
 * sets *refused when the path is a symlink or a file we must not truncate
 * (then returns -1 with nothing changed on disk). */
static int open_output_checked(const char *path, bool truncate, enum out_refusal *refused, struct stat *st)
{
	*refused = OUT_OK;
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (errno == ELOOP)
			*refused = OUT_IS_SYMLINK;
		return -1;
	}
	if (fstat(fd, st) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st->st_mode))
		return fd;   /* /dev/null, a FIFO: written as they are */
	if (!fd_may_truncate(fd, st)) {
		close(fd);
		*refused = OUT_NOT_A_TRACE;
		return -1;
	}
	if (truncate && st->st_size > 0 && ftruncate(fd, 0) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Opens the output.  The first traced process of a session takes the plain
 * name (overwriting a stale trace from an earlier run); any other process
 * (a live holder of the lock, or a file written earlier in this session,
 * see session_compute) gets the per-pid name, created with O_EXCL.  The
 * output is never a symlink followed nor a file that is not a trace
 * truncated: such a path is refused with one line on stderr and the trace
 * goes beside it under the per-pid name, so no data is lost.  Otherwise a
 * path that cannot be written (missing directory, a directory, no
 * permission) is an error, reported by the caller, and not a reason to
 * write somewhere else.  A path that is not a regular file (/dev/null, a
 * FIFO) is written as it is. */
static int tbp_open_output(void)
{
	bool had_pid;
	char base[PATH_MAX];
	output_base(base, sizeof base, &had_pid);
	snprintf(out_path, sizeof out_path, "%s", base);
	enum out_refusal refused;
	struct stat st;
	int fd = open_output_checked(base, had_pid, &refused, &st);
	if (fd < 0 && refused == OUT_OK)
		return -1;
	if (fd >= 0 && (had_pid || !S_ISREG(st.st_mode)))
		return fd;
	if (fd >= 0) {
		bool mine = flock(fd, LOCK_EX | LOCK_NB) == 0;
		if (mine && st.st_size > 0 && file_is_from_this_session(base))
			mine = false;  /* an earlier process of this session wrote it */
		if (mine) {
			if (ftruncate(fd, 0) != 0) {
				int e = errno;
				close(fd);
				errno = e;
				return -1;
			}
			return fd;
		}
		close(fd);
	}
	char uniq[PATH_MAX];
	/* trace.PID.zst, or, when that is a trace of this session (an
	 * earlier image of this very process, before an exec), the first free
	 * trace.PID-N.zst.  One from another session is a reused pid's: ours,
	 * if it is a trace (never a symlink, nor anything else). */
	fd = -1;
	for (int serial = 0; serial < 1000; serial++) {
		unique_name(uniq, sizeof uniq, base, serial);
		snprintf(out_path, sizeof out_path, "%s", uniq);
		fd = open(uniq, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
		if (!file_is_from_this_session(uniq)) {
			enum out_refusal r2;
			struct stat st2;
			fd = open_output_checked(uniq, true, &r2, &st2);
			if (fd >= 0 || r2 == OUT_OK)
				break;
		}
	}
	if (fd >= 0)
		flock(fd, LOCK_EX | LOCK_NB);
	if (fd >= 0 && refused != OUT_OK) {
		char shown[2 * PATH_MAX + 2];
		const char *to = out_path_shown(shown, sizeof shown);
		tbp_log("%s %s: not %s it; the trace goes to %s", base,
			refused == OUT_IS_SYMLINK ? "is a symbolic link" : "exists and is not a tbprof trace",
			refused == OUT_IS_SYMLINK ? "following" : "overwriting", to);
	}
	return fd;
}

/* ------------------------------------------------------------ writer thread */

static struct tbp_writer *writer;
static pthread_t writer_thread;
static atomic_int writer_stop;        /* 1: final drain and exit */
static atomic_int writer_exited;      /* futex word: 1 when finished */
static atomic_int signal_pending;     /* signal number whose handler waits */
static atomic_int drain_seq;          /* futex word: bumped after each drain */
static uint64_t records_written;
/* Did any thread record an event (anything but its THREAD announcement)?
 * A trace without one holds only the header and the process's
 * definitions: nothing to analyze, so the file is removed at the end
 * (a launcher script's helper, a Python process that did nothing). */
static bool events_written;
/* out_path made absolute when it was opened: the program may chdir. */
static char out_path_abs[2 * PATH_MAX + 2];
static bool process_written;
static int write_error_warned;

struct snap {
	struct tbp_tbuf *b;
	uint64_t head;
	int retired;
};
static struct snap *snaps;
static size_t snaps_cap;

static void writer_fail(int rc)
{
	tbp_warn_once(&write_error_warned, "writing %s failed (%s); tracing stops", out_path,
		tbp_error_name(rc));
	TBP_SET_ACTIVE(0);
}

static int write_defs(void)
{
	int rc = TBP_OK;
	pthread_mutex_lock(&def_lock);
	size_t upto = def_count;
	pthread_mutex_unlock(&def_lock);
	/* def_hist entries below def_count are immutable; the array may be
	 * reallocated, so index it under the lock each time. */
	if (upto > def_written || !process_written) {
		rc = tbp_writer_begin_chunk(writer, TBP_STREAM_DEFS, 0);
		for (size_t i = def_written; rc == TBP_OK && i < upto; i++) {
			pthread_mutex_lock(&def_lock);
			struct tbp_def *d = def_hist[i];
			pthread_mutex_unlock(&def_lock);
			struct tbp_record def;
			def_record(d, &def);
			rc = tbp_writer_add(writer, &def);
			records_written++;
		}
		if (rc == TBP_OK && !process_written) {
			rc = tbp_writer_add(writer, &process_rec);
			records_written++;
			process_written = true;
		}
		if (rc == TBP_OK)
			rc = tbp_writer_end_chunk(writer);
		def_written = upto;
	}
	return rc;
}

/* Writes a ring's records from tail to head.  `last`: the thread will not
 * record again (it exited, or this is the final drain), so drops it never
 * got to report in a LOST record of its own are reported here. */
static int write_ring(struct tbp_tbuf *b, uint64_t head, bool last)
{
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_relaxed);
	/* After the head (acquired by the caller): right for every record up to it. */
	uint64_t mask = atomic_load_explicit(&b->mask, memory_order_relaxed);
	int rc = TBP_OK;
	bool open_chunk = false;
	uint8_t cur_kind = 0;
	uint32_t cur_tid = 0;
	for (; tail < head && rc == TBP_OK; tail++) {
		const struct tbp_record *r = &b->slots[tail & mask];
		if (!open_chunk || r->stream_kind != cur_kind || r->tid != cur_tid) {
			if (open_chunk)
				rc = tbp_writer_end_chunk(writer);
			if (rc != TBP_OK)
				break;
			cur_kind = r->stream_kind;
			cur_tid = r->tid;
			rc = tbp_writer_begin_chunk(writer, cur_kind, cur_tid);
			open_chunk = rc == TBP_OK;
			if (!open_chunk)
				break;
		}
		if (r->kind == TBP_K_LOST && r->u.lost.source == TBP_LOST_BUFFER_FULL)
			b->lost_reported += r->u.lost.count;
		rc = tbp_writer_add(writer, r);
		records_written++;
		if (r->kind != TBP_K_THREAD)
			events_written = true;
	}
	uint64_t unreported = atomic_load_explicit(&b->lost_total, memory_order_acquire) - b->lost_reported;
	if (last && unreported && rc == TBP_OK) {
		if (!open_chunk || cur_kind != TBP_STREAM_THREAD || cur_tid != b->tid) {
			if (open_chunk)
				rc = tbp_writer_end_chunk(writer);
			open_chunk = false;
			if (rc == TBP_OK)
				rc = tbp_writer_begin_chunk(writer, TBP_STREAM_THREAD, b->tid);
			open_chunk = rc == TBP_OK;
		}
		if (open_chunk) {
			struct tbp_record l = { .kind = TBP_K_LOST, .stream_kind = TBP_STREAM_THREAD };
			l.tid = b->tid;
			l.ts = tbp_now();
			l.u.lost.count = unreported;
			l.u.lost.source = TBP_LOST_BUFFER_FULL;
			l.u.lost.since_ts = 0;   /* first drop time is the producer's */
			rc = tbp_writer_add(writer, &l);
			records_written++;
			events_written = true;
			b->lost_reported += unreported;
		}
	}
	if (open_chunk && rc == TBP_OK)
		rc = tbp_writer_end_chunk(writer);
	/* Even on error the slots are released: the producer must never block. */
	atomic_store_explicit(&b->tail, head, memory_order_release);
	return rc;
}

static void drain_once(bool final)
{
	/* 1. Snapshot every ring's committed position. */
	size_t n = 0;
	pthread_mutex_lock(&registry_lock);
	for (struct tbp_tbuf *b = registry; b; b = b->next) {
		if (n == snaps_cap) {
			size_t ncap = snaps_cap ? snaps_cap * 2 : 64;
			struct snap *s = realloc(snaps, ncap * sizeof *s);
			if (!s)
				break;
			snaps = s;
			snaps_cap = ncap;
		}
		snaps[n].b = b;
		snaps[n].retired = atomic_load_explicit(&b->retired, memory_order_acquire);
		snaps[n].head = atomic_load_explicit(&b->head, memory_order_acquire);
		n++;
	}
	pthread_mutex_unlock(&registry_lock);
	if (!writer)
		return;
	if (!out_still_ours()) {
		/* The program closed our descriptor (its number may now be one of
		 * its files): drop what is pending, never write there again. */
		uint64_t dropped = 0;
		for (size_t i = 0; i < n; i++) {
			struct tbp_tbuf *b = snaps[i].b;
			dropped += snaps[i].head - atomic_load_explicit(&b->tail, memory_order_relaxed);
			atomic_store_explicit(&b->tail, snaps[i].head, memory_order_release);
		}
		atomic_fetch_add(&lost_total_all, dropped);
		TBP_SET_ACTIVE(0);
		tbp_warn_once(&out_gone_warned, "the program closed the trace file descriptor of %s; "
			"tracing stops (%llu records not written)", out_path, (unsigned long long)dropped);
		/* The writer's buffers are abandoned: closing or flushing it would
		 * touch a descriptor that is no longer ours. */
		writer = NULL;
		return;
	}
	/* 2. Definitions queued before those commits. */
	int rc = write_defs();
	/* 3. Each thread's records. */
	for (size_t i = 0; i < n && rc == TBP_OK; i++)
		rc = write_ring(snaps[i].b, snaps[i].head, final || snaps[i].retired);
	if (rc == TBP_OK && final) {
		if (tbp_writer_begin_chunk(writer, TBP_STREAM_DEFS, 0) == TBP_OK) {
			struct tbp_record end = { .kind = TBP_K_END, .stream_kind = TBP_STREAM_DEFS };
			end.ts = tbp_now();
			end.u.end.records = records_written;
			end.u.end.lost = atomic_load(&lost_total_all);
			tbp_writer_add(writer, &end);
			tbp_writer_end_chunk(writer);
		}
	}
	if (rc == TBP_OK)
		rc = out_still_ours() ? tbp_writer_flush(writer) : TBP_ERR_IO;
	if (rc != TBP_OK)
		writer_fail(rc);
	/* 4. Free the rings of exited threads once fully written. */
	for (size_t i = 0; i < n; i++) {
		struct tbp_tbuf *b = snaps[i].b;
		if (!snaps[i].retired || atomic_load_explicit(&b->head, memory_order_acquire) != snaps[i].head)
			continue;
		pthread_mutex_lock(&registry_lock);
		for (struct tbp_tbuf **pp = &registry; *pp; pp = &(*pp)->next)
			if (*pp == b) {
				*pp = b->next;
				break;
			}
		pthread_mutex_unlock(&registry_lock);
		munmap(b, b->map_bytes);
	}
}

/* Would the next record of this thread's ring be dropped?  (As tbp_reserve
 * decides, growth at this head included.) */
static bool ring_full(const struct tbp_tbuf *b)
{
	uint64_t head = b->reserved;
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
	uint64_t mask = atomic_load_explicit(&b->mask, memory_order_relaxed);
	if (b->grow && (head & mask) == 0 && (head & (mask + 1)) != 0)
		mask = mask * 2 + 1;
	return head - tail + (b->lost ? 2 : 1) > mask + 1;
}

/* Wait budget left to this thread, reset once its ring has room again. */
static __thread uint64_t patient_budget_ns = TBP_PATIENT_WAIT_MS * 1000000ull;

void tbp_emit_patient(const struct tbp_record *src)
{
	struct tbp_tbuf *b = tbp_tls_buf;
	if (b && TBP_ACTIVE() && ring_full(b)) {
		while (patient_budget_ns && ring_full(b) && !atomic_load(&writer_exited) &&
		       !atomic_load(&signal_pending)) {
			tbp_ring_pressure(b);
			struct timespec nap = { 0, 50000 };
			uint64_t t0 = tbp_now();
			nanosleep(&nap, NULL);
			uint64_t spent = tbp_now() - t0;
			patient_budget_ns = spent < patient_budget_ns ? patient_budget_ns - spent : 0;
		}
	} else {
		patient_budget_ns = TBP_PATIENT_WAIT_MS * 1000000ull;
	}
	tbp_emit(src);
}

/* ------------------------------------------------------------ hook clock */

#if defined(__x86_64__)
static int tsc_usable = -1;   /* -1 unknown; writer thread only */
static uint64_t cal_tsc, cal_mono;

static bool clocksource_is_tsc(void)
{
	char buf[32] = "";
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n >= 3 && !strncmp(buf, "tsc", 3) && (n == 3 || buf[3] == '\n');
}

/* (TSC, CLOCK_MONOTONIC) read as close together as possible: the pair with
 * the shortest TSC bracket of a few tries, TSC taken at its middle. */
static void tsc_pair(uint64_t *tsc, uint64_t *mono)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __builtin_ia32_rdtsc();
		uint64_t m = tbp_now();
		uint64_t b = __builtin_ia32_rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*mono = m;
		}
	}
}

static void tsc_recalibrate(void)
{
	if (!tsc_wanted)
		return;
	if (tsc_usable < 0)
		tsc_usable = clocksource_is_tsc();
	if (!tsc_usable)
		return;
	uint64_t t = 0, m = 0;
	tsc_pair(&t, &m);
	if (cal_mono && m - cal_mono < 50000000ull)
		return;   /* too short a baseline for a precise rate */
	if (cal_mono && t > cal_tsc) {
		uint64_t mult = (uint64_t)(((unsigned __int128)(m - cal_mono) << 32) / (t - cal_tsc));
		uint64_t seq = __atomic_load_n(&tbp_tsc.seq, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.seq, seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&tbp_tsc.tsc_base, t, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.mono_base, m, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.mult, mult, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.seq, seq + 2, __ATOMIC_RELEASE);
		__atomic_store_n(&tbp_tsc_on, 1, __ATOMIC_RELAXED);
	}
	cal_tsc = t;
	cal_mono = m;
}
#else
static void tsc_recalibrate(void)
{
}
#endif

/* A trace with no event leaves no file (see events_written): removed
 * only while the path still names the file we wrote, a regular one. */
static void remove_if_empty(void)
{
	struct stat st;
	if (events_written || !out_path_abs[0] || lstat(out_path_abs, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_dev != out_dev || st.st_ino != out_ino)
		return;
	if (unlink(out_path_abs) == 0 && tbp_cfg.verbose)
		tbp_log("pid %d recorded no event: %s removed", (int)getpid(), out_path_abs);
}

static void *tbp_writer_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "tbprof-writer");
	tbp_tls_guard = 1;   /* nothing this thread does is traced */
	for (;;) {
		if (!atomic_load(&writer_stop) && !atomic_load(&signal_pending))
			futex_wait(&writer_wake, 0, 100);
		atomic_store(&writer_wake, 0);
		bool stop = atomic_load(&writer_stop) || atomic_load(&signal_pending);
		tsc_recalibrate();
		drain_once(stop);
		atomic_fetch_add(&drain_seq, 1);
		futex_wake_all(&drain_seq);
		if (stop)
			break;
	}
	if (writer && out_still_ours()) {
		tbp_writer_close(writer);
		remove_if_empty();
	}
	writer = NULL;
	out_fd = -1;
	atomic_store(&writer_exited, 1);
	futex_wake_all(&writer_exited);
	return NULL;
}

void tbp_drain_now(unsigned timeout_ms)
{
	if (atomic_load(&tbp_start_state) != 2 || atomic_load(&writer_exited))
		return;
	int seq = atomic_load(&drain_seq);
	/* One drain may already be under way with an older snapshot: wait for
	 * two completions so the one that follows our request is included. */
	uint64_t deadline = tbp_now() + (uint64_t)timeout_ms * 1000000ull;
	atomic_store(&writer_wake, 1);
	futex_wake_all(&writer_wake);
	for (;;) {
		int cur = atomic_load(&drain_seq);
		if (cur - seq >= 2 || atomic_load(&writer_exited))
			return;
		uint64_t now = tbp_now();
		if (now >= deadline)
			return;
		if (cur - seq == 1) {
			atomic_store(&writer_wake, 1);
			futex_wake_all(&writer_wake);
		}
		futex_wait(&drain_seq, cur, (unsigned)((deadline - now) / 1000000ull) + 1);
	}
}

/* ------------------------------------------------------------ hook registry */

/* Filled by interpose/'s load-time constructors; read lock-free (from signal
 * handlers and atfork handlers too): an entry is written before the count
 * that publishes it. */
static const struct tbp_hook_ops *hook_ops[TBP_MAX_HOOK_OPS];
static atomic_uint n_hook_ops;

static void hook_ops_restore_default(int sig)
{
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (hook_ops[i]->signal_restore_default)
			hook_ops[i]->signal_restore_default(sig);
}

static void tbp_on_signal(int sig);
/* Serializes the trace start, hook registration and fork. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

void tbp_register_hook_ops(const struct tbp_hook_ops *ops)
{
	pthread_mutex_lock(&start_lock);
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_relaxed);
	if (n < TBP_MAX_HOOK_OPS) {
		hook_ops[n] = ops;
		atomic_store_explicit(&n_hook_ops, n + 1, memory_order_release);
		/* A library that started the trace from its own constructor ran
		 * before ours: the handlers are installed now. */
		if (ops->signals_install && atomic_load(&tbp_start_state) == 2)
			ops->signals_install(tbp_on_signal);
	} else {
		tbp_log("internal: more than %d hook registrations; one ignored", TBP_MAX_HOOK_OPS);
	}
	pthread_mutex_unlock(&start_lock);
}

/* ------------------------------------------------------------ signals */

/* Runs in whichever thread got the signal.  No I/O and no locks: it asks the
 * writer for a final drain, waits for it at most 2 s, then dies of the same
 * signal with the default disposition so the exit status is unchanged.
 * Installed, and hidden from the program, by interpose/signal.c. */
static void tbp_on_signal(int sig)
{
	int saved_errno = errno;
	TBP_SET_ACTIVE(0);
	if (atomic_load(&tbp_start_state) == 2 && !atomic_load(&writer_exited)) {
		atomic_store(&signal_pending, sig);
		atomic_store(&writer_wake, 1);
		futex_wake_all(&writer_wake);
		uint64_t deadline = tbp_now() + 2000000000ull;
		while (!atomic_load(&writer_exited)) {
			uint64_t now = tbp_now();
			if (now >= deadline)
				break;
			futex_wait(&writer_exited, 0, (unsigned)((deadline - now) / 1000000ull) + 1);
		}
	}
	hook_ops_restore_default(sig);
	raise(sig);   /* delivered when this handler returns (sig is blocked now) */
	errno = saved_errno;
}

static void tbp_install_signal_handlers(void)
{
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (hook_ops[i]->signals_install)
			hook_ops[i]->signals_install(tbp_on_signal);
}

/* ------------------------------------------------------------ lifecycle */

static atomic_int shutdown_done;
static atomic_int exit_hook_registered;
static bool is_fork_child;
static pid_t fork_parent_pid;
static void tbp_shutdown(void);
static void tbp_atfork_prepare(void);
static void tbp_atfork_parent(void);
static void tbp_atfork_child(void);

/* Header features, decided when the writer opens (they cannot change
 * later): HIP when a HIP call started the trace or the HIP runtime is
 * loaded; CUPTI when it is wanted and the trace is not a HIP one (CUPTI
 * is only ever started by CUDA hooks); PYTHON when wanted and this process
 * runs CPython; NATIVE when wanted and built with libunwind. */
static uint32_t tbp_start_features(void)
{
	unsigned lib = __atomic_load_n(&tbp_started_by_lib, __ATOMIC_RELAXED);
	bool hip = lib == 3   /* TBP_LIB_HIP */
		|| (lib == 0 && tbp_hip_runtime_loaded && tbp_hip_runtime_loaded());
	uint32_t f = 0;
	if (hip)
		f |= TBP_FEAT_HIP;
	if (tbp_cfg.cupti && !hip)
		f |= TBP_FEAT_CUPTI;
	if (tbp_cfg.python && dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
		f |= TBP_FEAT_PYTHON;
	if (tbp_cfg.native && TBP_HAVE_LIBUNWIND)
		f |= TBP_FEAT_NATIVE;
	return f;
}

static pid_t trace_pid;   /* the process whose trace the writer writes */

/* The output path for a message: absolute, so "Permission denied" on a
 * relative name says which directory. */
static const char *out_path_shown(char *buf, size_t len)
{
	char cwd[PATH_MAX];
	if (out_path[0] == '/' || !getcwd(cwd, sizeof cwd))
		return out_path;
	int n = snprintf(buf, len, "%s/%s", cwd, out_path);
	return n > 0 && (size_t)n < len ? buf : out_path;
}

static void tbp_start_slow(void)
{
	pthread_mutex_lock(&start_lock);
	if (atomic_load(&tbp_start_state) != 0 || !TBP_ACTIVE()) {
		pthread_mutex_unlock(&start_lock);
		return;
	}
	atomic_store(&tbp_start_state, 1);
	static bool key_made;
	if (!key_made) {
		pthread_key_create(&tbuf_key, tbp_tbuf_retire);
		key_made = true;
	}
	session_compute();
	tbp_cfg.launcher_agent = tbp_is_launcher_agent();
	out_fd = tbp_open_output();
	if (out_fd < 0) {
		int e = errno;
		char shown[2 * PATH_MAX + 2];
		tbp_log("cannot write trace to %s: %s; tracing disabled", out_path_shown(shown, sizeof shown), strerror(e));
		atomic_store(&tbp_start_state, 3);
		TBP_SET_ACTIVE(0);
		pthread_mutex_unlock(&start_lock);
		return;
	}
	struct tbp_writer_opts opts = { .compression_level = 0, .features = tbp_start_features() };
	if (tbp_cfg.native && TBP_HAVE_LIBUNWIND)
		opts.features |= TBP_FEAT_NATIVE;
	{
		char shown[2 * PATH_MAX + 2];
		snprintf(out_path_abs, sizeof out_path_abs, "%s", out_path_shown(shown, sizeof shown));
	}
	events_written = false;
	out_fd = move_fd_high(out_fd);
	struct stat out_st;
	if (fstat(out_fd, &out_st) == 0) {
		out_dev = out_st.st_dev;
		out_ino = out_st.st_ino;
	}
	out_gone = false;
	errno = 0;
	int rc = tbp_writer_open_fd(&writer, out_fd, &opts);
	if (rc != TBP_OK) {
		int e = errno;
		out_fd = -1;   /* closed by tbp_writer_open_fd */
		char shown[2 * PATH_MAX + 2];
		tbp_log("cannot write trace to %s: %s; tracing disabled", out_path_shown(shown, sizeof shown),
			e ? strerror(e) : tbp_error_name(rc));
		atomic_store(&tbp_start_state, 3);
		TBP_SET_ACTIVE(0);
		pthread_mutex_unlock(&start_lock);
		return;
	}
	trace_pid = getpid();
	tbp_intern_string(session_text, strlen(session_text));   /* see session_compute */
	if (tbp_cfg.verbose)
		tbp_log("tracing pid %d to %s", (int)getpid(), out_path);
	process_written = false;
	records_written = 0;
	tbp_build_process_record();
	atomic_store(&writer_stop, 0);
	atomic_store(&writer_exited, 0);
	atomic_store(&signal_pending, 0);
	/* The writer must not take the program's signals. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&writer_thread, NULL, tbp_writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		tbp_log("cannot start writer thread: %s; tracing disabled", strerror(rc));
		tbp_writer_close(writer);
		writer = NULL;
		atomic_store(&tbp_start_state, 3);
		TBP_SET_ACTIVE(0);
		pthread_mutex_unlock(&start_lock);
		return;
	}
	tbp_install_signal_handlers();
	atomic_store(&tbp_start_state, 2);
	pthread_mutex_unlock(&start_lock);
	if (is_fork_child) {
		char msg[96];
		snprintf(msg, sizeof msg, "forked child of pid %d", (int)fork_parent_pid);
		tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_FORK_CHILD, msg);
		/* Workers often end with _exit (no exit handlers) soon after:
		 * put the definitions and PROCESS record out now, so no file is
		 * ever only a header. */
		tbp_drain_now(200);
	}
	tbp_py_init();
}

void tbp_ensure_started(void)
{
	if (TBP_LIKELY(atomic_load_explicit(&tbp_start_state, memory_order_acquire) == 2))
		return;
	if (!TBP_ACTIVE() || atomic_load(&tbp_start_state) == 3)
		return;
	__atomic_store_n(&fork_child_waiting, 0, __ATOMIC_RELAXED);
	tbp_start_slow();
	/* A marker-only process: no GPU runtime to order against. */
}

static void tbp_register_exit_hook(void)
{
	if (atomic_exchange(&exit_hook_registered, 1))
		return;
	atexit(tbp_shutdown);
}

void tbp_note_gpu_used(void)
{
	if (__atomic_load_n(&tbp_gpu_used, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&tbp_gpu_used, 1, __ATOMIC_RELAXED);
	/* Registered now, after the GPU runtime's own exit handlers (it set them
	 * up inside the call that just returned), so ours runs first.  A marker
	 * may have registered one earlier; shutdown is idempotent. */
	atomic_store(&exit_hook_registered, 1);
	atexit(tbp_shutdown);
}

static void tbp_start_trace_all(void)
{
	/* Explicit opt-in (TBPROF_TRACE_ALL): a trace even without GPU use. */
	tbp_start_slow();
	tbp_register_exit_hook();
}

static void tbp_shutdown(void)
{
	if (atomic_exchange(&shutdown_done, 1))
		return;
	if (atomic_load(&tbp_start_state) != 2)
		return;
	int guard = tbp_tls_guard;
	tbp_tls_guard = 1;
	if (__atomic_load_n(&tbp_gpu_used, __ATOMIC_RELAXED)) {
		tbp_cupti_flush();
		tbp_cupti_stop();
	}
	tbp_py_shutdown();
	atomic_store(&writer_stop, 1);
	atomic_store(&writer_wake, 1);
	futex_wake_all(&writer_wake);
	/* Bounded wait: never hang the program's exit. */
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 2;
	if (pthread_timedjoin_np(writer_thread, NULL, &deadline) != 0)
		tbp_log("writer did not finish within 2 s at exit; the trace may be truncated");
	TBP_SET_ACTIVE(0);
	atomic_store(&tbp_start_state, 3);
	tbp_tls_guard = guard;
}

/* exec replaces the process without exit handlers: finish the trace as
 * exit would (CUPTI flush, final drain, END, seek table).  If the exec then
 * fails, the process goes on untraced, exactly as without tbprof.  Not in
 * a vfork child (it shares our memory but is another pid): the trace and
 * the writer are the parent's. */
void tbp_before_exec(void)
{
	if (atomic_load(&tbp_start_state) != 2 || getpid() != trace_pid)
		return;
	int saved_errno = errno;
	if (tbp_cfg.verbose)
		tbp_log("exec: finishing the trace of pid %d", (int)trace_pid);
	tbp_shutdown();
	errno = saved_errno;
}

__attribute__((destructor)) static void tbp_fini(void)
{
	tbp_shutdown();
}

/* ------------------------------------------------------------ fork */

/* Per thread: two threads may fork at once.  The forking thread's value is
 * still there in the child. */
static __thread sigset_t fork_saved_mask __attribute__((tls_model("initial-exec")));

static void tbp_register_atfork(void)
{
	pthread_atfork(tbp_atfork_prepare, tbp_atfork_parent, tbp_atfork_child);
}

/* Every lock tbprof holds is taken here, in the order the code nests them
 * (Python set-up, start, native stacks, strings, definitions, thread
 * registry, then the interposers' leaf locks), so the child never inherits
 * one held by a thread it does not have. */
static void tbp_atfork_prepare(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &fork_saved_mask);
	tbp_py_fork_prepare();
	pthread_mutex_lock(&start_lock);
	tbp_native_fork_prepare();
	pthread_mutex_lock(&intern_lock);
	pthread_mutex_lock(&def_lock);
	pthread_mutex_lock(&registry_lock);
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (hook_ops[i]->fork_prepare)
			hook_ops[i]->fork_prepare();
}

static void tbp_atfork_parent(void)
{
	for (unsigned i = atomic_load_explicit(&n_hook_ops, memory_order_acquire); i-- > 0;)
		if (hook_ops[i]->fork_parent)
			hook_ops[i]->fork_parent();
	pthread_mutex_unlock(&registry_lock);
	pthread_mutex_unlock(&def_lock);
	pthread_mutex_unlock(&intern_lock);
	tbp_native_fork_parent();
	pthread_mutex_unlock(&start_lock);
	tbp_py_fork_parent();
	pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
}

/* The child has one thread and no writer.  Rings of the parent's other
 * threads are unmapped; this thread's ring is emptied (the parent writes
 * those records).  Definitions are kept and replayed into the child's own
 * file, so interned ids remain valid. */
static void tbp_atfork_child(void)
{
	pthread_mutex_init(&registry_lock, NULL);
	pthread_mutex_init(&def_lock, NULL);
	pthread_mutex_init(&intern_lock, NULL);
	pthread_mutex_init(&start_lock, NULL);
	tbp_py_fork_child();
	for (unsigned i = atomic_load_explicit(&n_hook_ops, memory_order_acquire); i-- > 0;)
		if (hook_ops[i]->fork_child)
			hook_ops[i]->fork_child();
	if (tbp_cupti_fork_child)
		tbp_cupti_fork_child();
	if (atomic_load(&tbp_start_state) != 2) {
		/* The parent was not tracing (not yet, or it could not): the
		 * child is the same kind of process, nothing else to reset. */
		tbp_native_reset_after_fork();
		pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
		return;
	}
	struct tbp_tbuf *mine = tbp_tls_buf;
	struct tbp_tbuf *b = registry;
	registry = NULL;
	while (b) {
		struct tbp_tbuf *next = b->next;
		if (b != mine)
			munmap(b, b->map_bytes);
		b = next;
	}
	if (mine) {
		atomic_store(&mine->head, 0);
		atomic_store(&mine->tail, 0);
		mine->reserved = 0;
		mine->lost = 0;
		atomic_store(&mine->lost_total, 0);
		mine->lost_reported = 0;
		atomic_store(&mine->retired, 0);
		mine->thread_announced = false;
		mine->tid = (uint32_t)tbp_gettid();
		mine->next = NULL;
		registry = mine;
	}
	if (out_fd >= 0)
		close(out_fd);   /* the parent's file and lock stay the parent's */
	out_fd = -1;
	out_gone = false;
	writer = NULL;       /* the parent's writer state: not ours to flush */
	def_written = 0;
	process_written = false;
	atomic_store(&writer_wake, 0);
	atomic_store(&writer_stop, 0);
	atomic_store(&writer_exited, 0);
	atomic_store(&signal_pending, 0);
	atomic_store(&shutdown_done, 0);
	atomic_store(&lost_total_all, 0);
	int was_running = atomic_load(&tbp_start_state) == 2;
	atomic_store(&tbp_start_state, 0);
	is_fork_child = true;
	fork_parent_pid = getppid();
	tbp_native_reset_after_fork();
	/* A child of a tracing parent traces only with TBPROF_FORK=1 (the
	 * default); a child of a parent that never started behaves as the
	 * parent would have. */
	if (was_running)
		TBP_SET_ACTIVE(tbp_cfg.enabled && tbp_cfg.fork_mode);
	fork_child_waiting = 1;
	pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
	if (mine && TBP_ACTIVE())
		mine->thread_announced = false;
}

/* ------------------------------------------------------------ notices, markers */

void tbp_notice(unsigned level, unsigned code, const char *message)
{
	if (!TBP_ACTIVE())
		return;
	bool entered = tbp_guard_enter();
	uint64_t msg = message ? tbp_intern_string(message, strlen(message)) : 0;
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_NOTICE);
	if (rec) {
		rec->ts = tbp_now();
		rec->u.notice.level = level;
		rec->u.notice.code = code;
		rec->u.notice.message = msg;
		tbp_slot_commit(rec);
	}
	if (entered)
		tbp_guard_leave();
}

TBP_EXPORT int tbprof_marker(int kind, long long value, const char *label)
{
	if (!tbp_cfg.enabled || !TBP_ACTIVE())
		return -1;
	int saved_errno = errno;
	if (!tbp_guard_enter()) {
		errno = saved_errno;
		return 0;
	}
	tbp_ensure_started();
	tbp_register_exit_hook();
	uint64_t label_id = label ? tbp_intern_string(label, strlen(label)) : 0;
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_MARKER);
	if (rec) {
		rec->ts = tbp_now();
		rec->u.marker.marker_kind = (uint64_t)kind;
		rec->u.marker.value = (uint64_t)value;
		rec->u.marker.label = label_id;
		tbp_slot_commit(rec);
	}
	tbp_guard_leave();
	errno = saved_errno;
	return TBP_ACTIVE() ? 0 : -1;
}
