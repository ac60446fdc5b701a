/*
 * Private interface between libtbprof core (config.c, ring.c, ...) and the hooks in
 * interpose/.  Not part of the core.h contract: only the core and the hook
 * files (same owner) use it.
 */
#ifndef TBPROF_CORE_PRIV_H
#define TBPROF_CORE_PRIV_H

#include <stdatomic.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core.h"
#include "libc_real.h"   /* tbp_real_dlsym: never our own interposer */
#include "ring_codec.h"

/* Called by a hook after its first real GPU call returned: the GPU runtime
 * has now registered its own exit handlers, so ours (registered later) run
 * before them, while the CUDA context is still alive. */
void tbp_note_gpu_used(void) TBP_HIDDEN;

#define TBP_SET_ACTIVE(v) __atomic_store_n(&tbp_active, (v), __ATOMIC_RELAXED)
extern volatile int tbp_gpu_used TBP_HIDDEN;

/* Ask the writer to drain everything committed so far and wait (bounded)
 * until it has been written.  Used around cudaDeviceReset. */
void tbp_drain_now(unsigned timeout_ms) TBP_HIDDEN;

/* Current device of the calling thread as last set through cudaSetDevice
 * (hooks keep it; 0 by default, as in CUDA). */
extern __thread int tbp_tls_device __attribute__((tls_model("initial-exec"))) TBP_HIDDEN;

/*
 * Hook clock.  Two clock_gettime calls per hooked call were over half of a
 * hook's cost (the vDSO reads the TSC and scales it; in VMs it is slower).
 * Hooks therefore read the TSC directly and convert to CLOCK_MONOTONIC ns
 * with parameters the writer thread recalibrates against clock_gettime on
 * every wake (>= 50 ms apart), published with a sequence lock.  Used only
 * where the kernel's own clocksource is the TSC (constant, synchronized
 * across CPUs); until the first calibration, and with TBPROF_TSC=0, hooks
 * use tbp_now().  Both ends of one call are converted with the same
 * parameters, so end >= start always; across recalibrations the error is
 * the TSC/NTP rate change over one period (well under a microsecond).
 */
struct tbp_tsc_params {
	uint64_t seq;        /* odd while the writer updates */
	uint64_t tsc_base;
	uint64_t mono_base;
	uint64_t mult;       /* ns per tick << 32 */
};
extern struct tbp_tsc_params tbp_tsc TBP_HIDDEN;
extern int tbp_tsc_on TBP_HIDDEN;

static inline bool tbp_hook_clock_is_tsc(void)
{
#if defined(__x86_64__)
	return __atomic_load_n(&tbp_tsc_on, __ATOMIC_RELAXED);
#else
	return false;
#endif
}

static inline uint64_t tbp_hook_stamp(bool tsc)
{
#if defined(__x86_64__)
	if (tsc)
		return __builtin_ia32_rdtsc();
#endif
	(void)tsc;
	return tbp_now();
}

/* Converts two TSC readings to CLOCK_MONOTONIC ns with one snapshot.
 * Left to gcc: forcing it (and the slot reservation below) inline cost 5
 * more instructions per launch in register pressure (callgrind). */
static inline void tbp_hook_ticks_to_ns(uint64_t *a, uint64_t *b)
{
	uint64_t seq, tb, mb, mult;
	for (;;) {
		seq = __atomic_load_n(&tbp_tsc.seq, __ATOMIC_ACQUIRE);
		tb = __atomic_load_n(&tbp_tsc.tsc_base, __ATOMIC_RELAXED);
		mb = __atomic_load_n(&tbp_tsc.mono_base, __ATOMIC_RELAXED);
		mult = __atomic_load_n(&tbp_tsc.mult, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(seq & 1) && __atomic_load_n(&tbp_tsc.seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	*a = mb + (uint64_t)(int64_t)(((__int128)(int64_t)(*a - tb) * (__int128)mult) >> 32);
	*b = mb + (uint64_t)(int64_t)(((__int128)(int64_t)(*b - tb) * (__int128)mult) >> 32);
}

/* ------------------------------------------------------------ hot path
 * The per-call steps of a hook, inlined into it (the core keeps the
 * out-of-line functions of core.h for everyone else, and the slow paths).
 * A launch is ~100 instructions of bookkeeping; each call into the core,
 * each __errno_location and each general-dynamic TLS access was a
 * measurable part of it (bench/interpose, callgrind).
 */

/* One thread's ring (single producer: the thread; single consumer: the
 * writer), in 32-byte units (ring_codec.h).  See the threading model at the
 * top of ring.c. */
struct tbp_tbuf {
	struct tbp_unit *units;
	size_t map_bytes;
	/* Capacity in units - 1 (a power of two).  A ring starts small and doubles when its thread fills
	 * half of it, up to max_mask (TBPROF_BUFFER_SIZE), so a thread's ring costs memory for what it
	 * records (pages are touched only as units are used).  The producer changes it only at a head
	 * where every unit still in the ring sits at the same place under both masks (tbp_ring_put), and
	 * publishes it with its next head: the writer reads it after the head it drains to. */
	_Atomic uint64_t mask;
	uint64_t max_mask;
	bool grow;                  /* producer: double at the next head where that is safe */
	bool stage_open;            /* producer: `stage` is being filled */
	_Atomic uint64_t head;      /* units committed (producer) */
	_Atomic uint64_t tail;      /* units written out (writer) */
	uint64_t lost;              /* producer: records dropped since last LOST */
	uint64_t lost_since;
	_Atomic uint64_t lost_total;
	uint64_t lost_reported;     /* writer: drops already covered by LOST records */
	atomic_int retired;         /* thread exited: writer drains then frees */
	bool thread_announced;
	uint32_t tid;
	uint32_t file_gen;          /* writer: the capture whose file has this thread's THREAD record */
	struct tbp_tbuf *next;      /* registry list (under registry_lock) */
	/* The record a hook fills, in lines only its thread touches (not the
	 * head's and tail's): its packed form goes into the ring at the commit. */
	struct tbp_record stage __attribute__((aligned(64)));
};

/* Puts `r` in b's ring, or counts it lost; the slow path of the commit
 * (growth, a LOST record due, padding at the ring's end, a full ring). */
void tbp_ring_put(struct tbp_tbuf *b, const struct tbp_record *r) TBP_HIDDEN;

extern __thread int tbp_tls_guard __attribute__((tls_model("initial-exec"))) TBP_HIDDEN;
extern __thread struct tbp_tbuf *tbp_tls_buf __attribute__((tls_model("initial-exec"))) TBP_HIDDEN;
/* Set before a thread's first record: its ring grows to this many bytes at most, not
 * TBPROF_BUFFER_SIZE (cupti_hold.c: a thread that carries nothing but GPU records). */
extern __thread size_t tbp_tls_ring_limit TBP_HIDDEN;
/* 0 not started, 1 starting, 2 running, 3 failed/stopped */
extern atomic_int tbp_start_state TBP_HIDDEN;
void tbp_wake_writer(void) TBP_HIDDEN;
/* A ring passed half full: wakes the writer, and asks for a bigger ring if it may grow. */
void tbp_ring_pressure(struct tbp_tbuf *b) TBP_HIDDEN;

/* Correlation ids are unique in the process, not ordered across threads:
 * each thread takes them from a block of TBP_CORR_BLOCK it reserves with
 * one atomic add, so threads that launch at once do not pass one counter's
 * cache line back and forth on every launch. */
#define TBP_CORR_BLOCK 256u
struct tbp_corr_block {
	uint64_t next, end;
};
extern __thread struct tbp_corr_block tbp_tls_corr __attribute__((tls_model("initial-exec"))) TBP_HIDDEN;
void tbp_corr_refill(struct tbp_corr_block *c) TBP_HIDDEN;
/* The next correlation id of this thread (> 0). */
static inline uint64_t tbp_corr_next_inline(void)
{
	struct tbp_corr_block *c = &tbp_tls_corr;
	if (TBP_UNLIKELY(c->next == c->end))
		tbp_corr_refill(c);
	return c->next++;
}

static inline bool tbp_guard_enter_inline(void)
{
	if (tbp_tls_guard)
		return false;
	tbp_tls_guard = 1;
	return true;
}

static inline void tbp_guard_leave_inline(void)
{
	tbp_tls_guard = 0;
}

static inline void tbp_ensure_started_inline(void)
{
	if (TBP_UNLIKELY(atomic_load_explicit(&tbp_start_state, memory_order_acquire) != 2))
		tbp_ensure_started();
}

/* The stage is 64-byte aligned and 160 bytes: ten aligned 16-byte stores.
 * A plain memset of that size became `rep stosq`, whose start-up costs
 * more than the stores (it was a third of the slot fill). */
static inline void tbp_record_zero(struct tbp_record *rec)
{
#if defined(__SSE2__)
	_Static_assert(sizeof *rec % 16 == 0, "record size is a multiple of 16");
	_Static_assert(sizeof *rec == 160, "unrolled for 160 bytes");
	/* Written out: gcc turns a loop back into memset. */
	__m128i zero = _mm_setzero_si128(), *p = (__m128i *)rec;
	_mm_store_si128(p + 0, zero);
	_mm_store_si128(p + 1, zero);
	_mm_store_si128(p + 2, zero);
	_mm_store_si128(p + 3, zero);
	_mm_store_si128(p + 4, zero);
	_mm_store_si128(p + 5, zero);
	_mm_store_si128(p + 6, zero);
	_mm_store_si128(p + 7, zero);
	_mm_store_si128(p + 8, zero);
	_mm_store_si128(p + 9, zero);
#else
	__builtin_memset(rec, 0, sizeof *rec);
#endif
}

/* The thread's stage is taken while a record is filled or put in the ring:
 * a signal handler's hook that finds it taken records nothing rather than
 * write under the interrupted one.  The flag is set before the stage is
 * touched and cleared after the head is out (compiler fences: the handler
 * runs on this thread). */
static inline bool tbp_stage_take(struct tbp_tbuf *b)
{
	if (b->stage_open)
		return false;
	b->stage_open = true;
	atomic_signal_fence(memory_order_seq_cst);
	return true;
}

static inline void tbp_stage_release(struct tbp_tbuf *b)
{
	atomic_signal_fence(memory_order_seq_cst);
	b->stage_open = false;
}

/* The taken stage, cleared, for a record of `kind`. */
static inline struct tbp_record *tbp_stage_fill(struct tbp_tbuf *b, unsigned kind)
{
	struct tbp_record *rec = &b->stage;
	tbp_record_zero(rec);
	rec->kind = (uint8_t)kind;
	rec->stream_kind = TBP_STREAM_THREAD;
	rec->tid = b->tid;
	return rec;
}

/* tbp_slot_acquire's common case: running, this thread has a ring,
 * nothing lost to report, no record already open (signal handler
 * re-entry).  Anything else takes the out-of-line path.  The ring's room
 * is the commit's business. */
static inline struct tbp_record *tbp_slot_acquire_inline(unsigned kind)
{
	struct tbp_tbuf *b = tbp_tls_buf;
	if (TBP_UNLIKELY(!b || !TBP_ACTIVE() || b->lost || b->stage_open ||
			 atomic_load_explicit(&tbp_start_state, memory_order_relaxed) != 2))
		return tbp_slot_acquire(kind);
	tbp_stage_take(b);
	return tbp_stage_fill(b, kind);
}

/* Units ahead of its head whose lines the producer claims for writing.
 * The first store to a ring line the writer has read waits for the line to
 * come back from the writer's core, and the wait shows at the thread's next
 * locked instruction (the runtime's own mutex).  On this project's VM that
 * transfer is dear in a third to a half of the minutes of an hour: claiming
 * the line ~16 launches early took the launching thread from +43..95 ns to
 * +33..46 ns per launch there, and within ±3 ns in the cheap minutes
 * (doc/interposition.md, "Packed ring round"). */
#define TBP_RING_CLAIM_AHEAD 32u
/* PREFETCHW is known to this CPU (an older x86 may not decode it). */
extern bool tbp_have_prefetchw TBP_HIDDEN;

static inline void tbp_ring_claim(const struct tbp_unit *u)
{
#if defined(__x86_64__)
	if (tbp_have_prefetchw)
		__asm__ volatile("prefetchw %0" : : "m"(*(const char *)u));
#else
	__builtin_prefetch(u, 1, 3);
#endif
}

/* Copies the staged record into the ring in its packed form.  The only
 * ordering needed: the units before the head (release).  The writer is
 * woken only when the ring passes half full. */
static inline __attribute__((always_inline)) void tbp_slot_commit_units(struct tbp_tbuf *b, struct tbp_record *rec,
	unsigned n)
{
	uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
	uint64_t mask = atomic_load_explicit(&b->mask, memory_order_relaxed);
	/* Anything unusual goes the slow way: full, drops to report first, the
	 * ring's end inside the record, or a growth due (it happens only where the head is a
	 * multiple of the capacity: until then the fast path serves). */
	if (TBP_UNLIKELY(head - tail + n > mask + 1 || b->lost || (b->grow && (head & mask) == 0) ||
			 (head & mask) + n > mask + 1)) {
		tbp_ring_put(b, rec);
	} else {
		tbp_ring_encode(&b->units[head & mask], rec, n);
		for (unsigned k = 0; k < n; k += 2)   /* every line the next records may reach */
			tbp_ring_claim(&b->units[(head + TBP_RING_CLAIM_AHEAD + k) & mask]);
		head += n;
		atomic_store_explicit(&b->head, head, memory_order_release);
		if (TBP_UNLIKELY(head - tail > (mask + 1) / 2))
			tbp_ring_pressure(b);
	}
	tbp_stage_release(b);
}

/* A hook's record (its thread's, no blob). */
static inline __attribute__((always_inline)) void tbp_slot_commit_inline(struct tbp_record *rec)
{
	struct tbp_tbuf *b = tbp_tls_buf;
	if (TBP_UNLIKELY(!rec || !b))
		return;
	tbp_slot_commit_units(b, rec, tbp_ring_units_own(rec));
}


/* Called by the exec* hooks (interpose/exec.c) before the real exec. */
void tbp_before_exec(void) TBP_HIDDEN;


/* CUPTI (cupti.c), Python (python.c) and native stacks (native.c) lend the
 * lifecycle their fork, flush and stop steps through tbp_register_hook_ops
 * (core.h), as the hook modules do: lifecycle.c names none of them. */

#endif
