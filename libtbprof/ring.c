/*
 * libtbprof core, per-thread lock-free record rings (single producer: the thread; single
 * consumer: the writer).  The producer publishes with a release store of its
 * head; the writer reads heads with acquire and publishes its tail with
 * release, which is what lets the producer reuse units.  The hot path takes
 * no lock, makes no system call (except one futex wake when a ring crosses
 * half full) and never waits.  A hook fills its thread's stage (a record in
 * lines no other thread touches); the commit copies it into the ring in its
 * packed form (ring_codec.h): fewer of the ring's lines pass between the
 * thread's core and the writer's.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

/* ------------------------------------------------------------ per-thread rings */

_Static_assert(offsetof(struct tbp_tbuf, stage) % 64 == 0, "the stage starts a line of its own");

__thread struct tbp_tbuf *tbp_tls_buf __attribute__((tls_model("initial-exec")));
__thread size_t tbp_tls_ring_limit;
pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
struct tbp_tbuf *registry;
pthread_key_t tbuf_key;
atomic_int writer_wake;      /* futex word: 1 = work requested */
_Atomic uint64_t lost_total_all;

void tbp_tbuf_retire(void *arg)
{
	struct tbp_tbuf *b = arg;
	if (tbp_tls_buf == b)
		tbp_tls_buf = NULL;
	atomic_store_explicit(&b->retired, 1, memory_order_release);
}

/* Units a ring holds when its thread starts: 128 KiB (2,048 launches; pages
 * are touched only as units are used, so a quiet thread costs a page). */
#define RING_FIRST_UNITS 4096u

bool tbp_have_prefetchw;

static void ring_cpu_features(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	/* CPUID 0x80000001 ECX bit 8: PREFETCHW (PRFCHW, 3DNowPrefetch). */
	if (__get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)))
		tbp_have_prefetchw = true;
#endif
}

static struct tbp_tbuf *tbp_tbuf_create(void)
{
	static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
	pthread_once(&cpu_once, ring_cpu_features);
	size_t limit = tbp_cfg.buffer_bytes;
	if (tbp_tls_ring_limit && tbp_tls_ring_limit < limit)
		limit = tbp_tls_ring_limit;
	size_t want = limit / sizeof(struct tbp_unit);
	size_t cap = 64;
	while (cap * 2 <= want)
		cap *= 2;
	size_t first = cap < RING_FIRST_UNITS ? cap : RING_FIRST_UNITS;
	size_t head_bytes = (sizeof(struct tbp_tbuf) + 63) & ~(size_t)63;
	size_t bytes = head_bytes + cap * sizeof(struct tbp_unit);
	void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return NULL;
	struct tbp_tbuf *b = mem;
	b->units = (struct tbp_unit *)((char *)mem + head_bytes);
	b->map_bytes = bytes;
	b->max_mask = cap - 1;
	atomic_store_explicit(&b->mask, first - 1, memory_order_relaxed);
	b->tid = (uint32_t)tbp_gettid();
	b->file_gen = capture_gen;   /* it announces itself in its ring */
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
int fork_child_waiting;

bool tbp_ring_would_drop(struct tbp_tbuf *b)
{
	struct tbp_ring_plan p;
	return !tbp_ring_plan(atomic_load_explicit(&b->head, memory_order_relaxed),
		atomic_load_explicit(&b->tail, memory_order_acquire), atomic_load_explicit(&b->mask, memory_order_relaxed),
		b->grow, b->lost != 0, TBP_RING_FULL_UNITS, &p);
}

/* Called with b->stage_open set (a signal handler's hook then records
 * nothing rather than write into the ring under us). */
void tbp_ring_put(struct tbp_tbuf *b, const struct tbp_record *r)
{
	unsigned n = tbp_ring_units(r, b->tid);
	uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
	struct tbp_ring_plan p;
	bool fits = tbp_ring_plan(head, tail, atomic_load_explicit(&b->mask, memory_order_relaxed), b->grow,
		b->lost != 0, n, &p);
	if (p.grew) {
		atomic_store_explicit(&b->mask, p.mask, memory_order_relaxed); /* published by the next head */
		b->grow = false;
	}
	if (!fits) {
		if (b->lost++ == 0)
			b->lost_since = tbp_now();
		atomic_fetch_add_explicit(&b->lost_total, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&lost_total_all, 1, memory_order_relaxed);
		tbp_wake_writer();
		return;
	}
	if (b->lost) {
		/* The loss is reported in order, before the next record. */
		struct tbp_record l;
		memset(&l, 0, sizeof l);
		l.kind = TBP_K_LOST;
		l.stream_kind = TBP_STREAM_THREAD;
		l.tid = b->tid;
		l.ts = tbp_now();
		l.u.lost.count = b->lost;
		l.u.lost.source = TBP_LOST_BUFFER_FULL;
		l.u.lost.since_ts = b->lost_since;
		if (p.lost_at != head)
			tbp_ring_pad(&b->units[head & p.mask], p.lost_at - head);
		tbp_ring_encode(&b->units[p.lost_at & p.mask], &l, TBP_RING_FULL_UNITS);
		head = p.lost_at + TBP_RING_FULL_UNITS;
		b->lost = 0;
	}
	if (p.at != head)
		tbp_ring_pad(&b->units[head & p.mask], p.at - head);
	tbp_ring_encode(&b->units[p.at & p.mask], r, n);
	atomic_store_explicit(&b->head, p.at + n, memory_order_release);
	if (p.at + n - tail > (p.mask + 1) / 2)
		tbp_ring_pressure(b);
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
	if (TBP_UNLIKELY(!TBP_ACTIVE()) && !atomic_load_explicit(&capture_closing, memory_order_relaxed))
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
	/* NULL when a record is already open on this thread (signal handler re-entry) */
	return tbp_stage_take(b) ? tbp_stage_fill(b, kind) : NULL;
}

void tbp_slot_commit(struct tbp_record *rec)
{
	struct tbp_tbuf *b = tbp_tls_buf;
	if (rec && b)
		tbp_slot_commit_units(b, rec, tbp_ring_units(rec, b->tid));
}

void tbp_emit(const struct tbp_record *src)
{
	if (!src || (!TBP_ACTIVE() && !atomic_load_explicit(&capture_closing, memory_order_relaxed)))
		return;
	struct tbp_record *rec = tbp_slot_acquire(src->kind);
	if (!rec)
		return;
	*rec = *src;
	rec->blob = NULL;
	rec->blob_len = 0;
	tbp_slot_commit(rec);
}
