/*
 * libtbprof core, per-thread lock-free record rings (single producer: the thread; single
 * consumer: the writer).  The producer publishes with a release store of its
 * head; the writer reads heads with acquire and publishes its tail with
 * release, which is what lets the producer reuse slots.  The hot path takes
 * no lock, makes no system call (except one futex wake when a ring crosses
 * half full) and never waits.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

/* ------------------------------------------------------------ per-thread rings */


__thread struct tbp_tbuf *tbp_tls_buf __attribute__((tls_model("initial-exec")));
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
int fork_child_waiting;

/* Reserve the next slot of this thread's ring, with stream_kind/tid set. */
struct tbp_record *tbp_reserve(struct tbp_tbuf *b, unsigned kind, uint64_t ts)
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
