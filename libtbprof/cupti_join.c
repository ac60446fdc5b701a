/*
 * GPU record -> the hooked call that caused it (doc/gpu.md, "How the join works").
 *
 * Every kernel, copy, memset and sync record carries the CUPTI correlation id of the API call that
 * made it.  Two paths lead from that id to our corr:
 *
 * 1. Pair.  The hooks push our corr as an external correlation id around every call they trace;
 *    CUPTI writes an EXTERNAL_CORRELATION record pairing it with the id of the API record it
 *    writes for that call (no API record, no pair).
 *
 * 2. Hooked call inside.  A library with the CUDA runtime linked in statically (cuBLAS, cuBLASLt,
 *    cuDNN, NCCL) makes a runtime call no preload sees; CUPTI writes a RUNTIME record for it with
 *    no pair, and the library's GPU work carries that record's id.  Inside it the runtime calls the
 *    driver through an entry point from cuGetProcAddress, which our hooks do trace -- but CUPTI
 *    writes no DRIVER record for a driver call made inside a runtime call (measured on an H100), so
 *    nothing of CUPTI's links the two.  We keep each thread's recent traced driver calls ourselves
 *    (corr, interval, join class) and give the unpaired runtime record the one that ran on its
 *    thread inside its interval.  CUPTI names threads by the low 32 bits of pthread_self()
 *    (measured), so each thread's calls are kept under that name (and its gettid(), in case a
 *    CUPTI names them so).  Only driver calls made outside any traced call are kept: a driver
 *    call inside a traced runtime call is not traced at all (the hooks' recursion guard), so a
 *    traced runtime call's own record never finds one and a pair is never second-guessed.
 *
 * The map and the tallies are touched under the consumer's processing lock only; each thread's
 * calls are written by that thread alone and read under a per-entry sequence number.
 */
#include "tbp_config.h"

#if TBP_HAVE_CUPTI
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cupti_internal.h"

/* ------------------------------------------------------------ correlation map
 * Per CUPTI correlation id: its pair, the hooked call found inside it, whether its API record came.
 * Direct-mapped over the last 2^CORR_MAP_BITS ids (24 bytes each: 3 MiB, pages touched as ids reach
 * them): ids grow monotonically, so an entry is overwritten only a whole map of calls later; a GPU
 * record is joined when it arrives and again when it is written, so the entry only has to outlive
 * the gap between a GPU record and its API records' arrival. */
#define CORR_MAP_BITS 17

struct corr_slot {
	uint32_t cupti;
	uint8_t api_seen;        /* its API record arrived */
	uint8_t calls_gone;      /* unpaired runtime record whose thread's calls were overwritten */
	uint16_t unused;
	uint64_t ours;           /* its pair, 0: none seen */
	uint64_t inside;         /* the hooked call inside it, same thread; 0: none */
};
static struct corr_slot *corr_map;

static struct corr_slot *corr_slot(uint32_t cupti_corr)
{
	struct corr_slot *s = &corr_map[cupti_corr & ((1u << CORR_MAP_BITS) - 1)];
	if (s->cupti != cupti_corr)
		memset(s, 0, sizeof *s), s->cupti = cupti_corr;
	return s;
}

static const struct corr_slot *corr_find(uint32_t cupti_corr)
{
	const struct corr_slot *s = &corr_map[cupti_corr & ((1u << CORR_MAP_BITS) - 1)];
	return s->cupti == cupti_corr ? s : NULL;
}

/* ------------------------------------------------------------ each thread's hooked driver calls
 * A ring of HOOKED_CALLS per thread.  API records arrive within about one flush period of their
 * call (the flusher asks every FLUSH_PERIOD_NS, and at once after each half ring of a thread's
 * calls: tbp_cupti_flush_soon), so a ring only has to span that delivery delay. */
#define HOOKED_CALLS 8192        /* 40 bytes each: 320 KiB per thread that makes such calls */
#define HOOKED_THREADS 64
#define NUMBER_(n) #n
#define NUMBER(n) NUMBER_(n) /* a limit above in the notice's text */
/* A ring whose thread ended is taken by a new thread only this long after: the records of the
 * old thread's last calls have arrived and been joined by then (they wait HOLD_NS at most). */
#define RING_REUSE_NS 3000000000ull
/* Hook timestamps are TSC readings converted to CLOCK_MONOTONIC (clock.c), CUPTI's are
 * clock_gettime: a call at the very edge of its runtime call may cross it by this much. */
#define EDGE_NS 1000ull

struct hooked_call {
	uint64_t seq;            /* 2 * index + 2 once written; odd while being written */
	uint64_t corr, start, end;
	uint64_t join_class;
};
struct hooked_thread {
	uint64_t state;          /* 0 free, 1 owned, else when its thread ended (ns) */
	uint32_t pthread_id;     /* low 32 bits of pthread_self(): CUPTI's threadId */
	uint32_t tid;            /* gettid() */
	uint64_t head;           /* calls written (ever, across owners) */
	struct hooked_call calls[HOOKED_CALLS];
};
static struct hooked_thread *hooked;
static pthread_key_t hooked_key;
static __thread struct hooked_thread *hooked_self __attribute__((tls_model("initial-exec")));
static __thread int hooked_none __attribute__((tls_model("initial-exec")));   /* no ring free */
static uint64_t threads_without_ring;   /* atomic */

/* ------------------------------------------------------------ tallies (processing lock) */
static struct {
	uint64_t api_records, pairs;         /* what CUPTI delivered */
	uint64_t joined, joined_inside;      /* GPU records written with a corr; of them through path 2 */
	uint64_t no_api_record;              /* unjoined: CUPTI sent no API record for its id */
	uint64_t no_hooked_call;             /* unjoined: an API record without pair or hooked call */
	uint64_t calls_gone;                 /* unjoined: its thread's calls were already overwritten */
} tally;

static void ring_released(void *arg)
{
	struct hooked_thread *t = arg;
	__atomic_store_n(&t->state, tbp_now() | 2, __ATOMIC_RELEASE);
}

/* Zeroed memory whose pages cost nothing until touched (calloc would write them all under
 * MALLOC_PERTURB_, and may for sizes under its mmap threshold). */
static void *reserve(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int tbp_cupti_join_init(void)
{
	size_t map_bytes = ((size_t)1 << CORR_MAP_BITS) * sizeof *corr_map, rings_bytes = HOOKED_THREADS * sizeof *hooked;
	corr_map = reserve(map_bytes);
	hooked = reserve(rings_bytes);
	if (!corr_map || !hooked || pthread_key_create(&hooked_key, ring_released) != 0) {
		if (corr_map)
			munmap(corr_map, map_bytes);
		if (hooked)
			munmap(hooked, rings_bytes);
		corr_map = NULL;
		hooked = NULL;
		return -1;
	}
	return 0;
}

static struct hooked_thread *claim_ring(void)
{
	if (hooked_none || !hooked)
		return NULL;
	uint64_t now = tbp_now();
	for (unsigned i = 0; i < HOOKED_THREADS; i++) {
		struct hooked_thread *t = &hooked[i];
		uint64_t st = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
		if (st == 1 || (st != 0 && now - st < RING_REUSE_NS))
			continue;
		if (!__atomic_compare_exchange_n(&t->state, &st, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&t->pthread_id, (uint32_t)(uintptr_t)pthread_self(), __ATOMIC_RELEASE);
		__atomic_store_n(&t->tid, (uint32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
		pthread_setspecific(hooked_key, t);
		hooked_self = t;
		return t;
	}
	hooked_none = 1;
	__atomic_add_fetch(&threads_without_ring, 1, __ATOMIC_RELAXED);
	return NULL;
}

void tbp_cupti_join_hooked_call(uint64_t corr, uint64_t start, uint64_t end, unsigned join_class)
{
	struct hooked_thread *t = hooked_self;
	if (TBP_UNLIKELY(!t) && !(t = claim_ring()))
		return;
	uint64_t h = t->head;   /* only this thread writes it */
	struct hooked_call *c = &t->calls[h % HOOKED_CALLS];
	__atomic_store_n(&c->seq, 2 * h + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&c->corr, corr, __ATOMIC_RELAXED);
	__atomic_store_n(&c->start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&c->end, end, __ATOMIC_RELAXED);
	__atomic_store_n(&c->join_class, (uint64_t)join_class, __ATOMIC_RELAXED);
	__atomic_store_n(&c->seq, 2 * h + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&t->head, h + 1, __ATOMIC_RELEASE);
	if (TBP_UNLIKELY((h + 1) % (HOOKED_CALLS / 2) == 0))
		tbp_cupti_flush_soon();
}

/* Call `i` of `t`, if it is still there and whole. */
static int read_call(const struct hooked_thread *t, uint64_t i, struct hooked_call *out)
{
	const struct hooked_call *c = &t->calls[i % HOOKED_CALLS];
	uint64_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
	if (seq != 2 * i + 2)
		return 0;
	out->corr = __atomic_load_n(&c->corr, __ATOMIC_RELAXED);
	out->start = __atomic_load_n(&c->start, __ATOMIC_RELAXED);
	out->end = __atomic_load_n(&c->end, __ATOMIC_RELAXED);
	out->join_class = __atomic_load_n(&c->join_class, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&c->seq, __ATOMIC_RELAXED) == seq;
}

/* Whether ring `t` is (or was) the thread CUPTI names `cupti_thread`. */
static int ring_is(const struct hooked_thread *t, uint32_t cupti_thread)
{
	return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) &&
	       (__atomic_load_n(&t->pthread_id, __ATOMIC_ACQUIRE) == cupti_thread ||
		__atomic_load_n(&t->tid, __ATOMIC_ACQUIRE) == cupti_thread);
}

/* In ring `t`: the corr of the call of `join_class` inside [start, end], 0 if none (below). */
static uint64_t ring_call_inside(const struct hooked_thread *t, uint64_t start, uint64_t end, unsigned join_class,
				 int *gone)
{
	uint64_t edge = EDGE_NS + tbp_cupti_clock_uncertainty_ns;
	uint64_t head = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);
	uint64_t oldest = head > HOOKED_CALLS ? head - HOOKED_CALLS : 0;
	/* Calls are in start order: the first one not before `start` (calls overwritten meanwhile
	 * count as before it: they are the oldest). */
	uint64_t lo = oldest, hi = head;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct hooked_call c;
		if (!read_call(t, mid, &c) || c.start + edge < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t best = 0, best_overlap = 0;
	for (uint64_t i = lo; i < head; i++) {
		struct hooked_call c;
		if (!read_call(t, i, &c))
			continue;
		if (c.start > end + edge)
			break;
		if (c.join_class != join_class || c.end > end + edge)
			continue;
		if (c.start >= start && c.end <= end)
			return c.corr;
		uint64_t from = c.start > start ? c.start : start, to = c.end < end ? c.end : end;
		if (to > from && to - from > best_overlap)
			best = c.corr, best_overlap = to - from;
	}
	if (!best && lo == oldest && oldest > 0)
		*gone = 1;
	return best;
}

/* The corr of the hooked call of `join_class` made on CUPTI thread `cupti_thread` inside
 * [start, end] (CLOCK_MONOTONIC), 0 if none: the one wholly inside, else (clock edges) the one
 * overlapping most.  Every ring filed under that thread is searched: glibc hands an ended
 * thread's pthread_self() (and the kernel its tid) to a new one, and the ended thread's ring
 * stays readable until it is reused.  *gone: the calls of that time were already overwritten. */
static uint64_t hooked_call_inside(uint32_t cupti_thread, uint64_t start, uint64_t end, unsigned join_class,
				   int *gone)
{
	int gone_any = 0;
	for (unsigned i = 0; i < HOOKED_THREADS; i++) {
		if (!ring_is(&hooked[i], cupti_thread))
			continue;
		int g = 0;
		uint64_t corr = ring_call_inside(&hooked[i], start, end, join_class, &g);
		if (corr)
			return corr;
		gone_any |= g;
	}
	if (gone_any)
		*gone = 1;
	return 0;
}

/* ------------------------------------------------------------ records in */

void tbp_cupti_join_pair(uint32_t cupti_corr, uint64_t ours)
{
	tally.pairs++;
	corr_slot(cupti_corr)->ours = ours;
}

void tbp_cupti_join_api_record(const CUpti_ActivityAPI *r, int driver)
{
	tally.api_records++;
	struct corr_slot *s = corr_slot(r->correlationId);
	s->api_seen = 1;
	/* Only a runtime call can hold a traced driver call; a paired one is ours already. */
	if (driver || s->ours || s->inside)
		return;
	unsigned join_class = tbp_cupti_cbid_class(0, r->cbid);
	if (!join_class)
		return;
	int gone = 0;
	s->inside = hooked_call_inside(r->threadId, tbp_cupti_to_monotonic(r->start), tbp_cupti_to_monotonic(r->end),
				       join_class, &gone);
	s->calls_gone = (uint8_t)gone;
}

uint64_t tbp_cupti_join(uint32_t cupti_corr)
{
	const struct corr_slot *s = corr_find(cupti_corr);
	return !s ? 0 : s->ours ? s->ours : s->inside;
}

uint64_t tbp_cupti_join_final(uint32_t cupti_corr, uint64_t joined_on_arrival)
{
	const struct corr_slot *s = corr_find(cupti_corr);
	uint64_t ours = s ? (s->ours ? s->ours : s->inside) : 0;
	if (ours) {
		tally.joined++;
		tally.joined_inside += !s->ours;
		return ours;
	}
	if (joined_on_arrival) {
		/* Its slot was taken by a later id meanwhile. */
		tally.joined++;
		return joined_on_arrival;
	}
	if (!s || !s->api_seen)
		tally.no_api_record++;
	else if (s->calls_gone)
		tally.calls_gone++;
	else
		tally.no_hooked_call++;
	return 0;
}

/* ------------------------------------------------------------ report */

static size_t append(char *buf, size_t len, size_t at, const char *fmt, unsigned long long v)
{
	if (at < len) {
		int n = snprintf(buf + at, len - at, fmt, v);
		if (n > 0)
			at += (size_t)n;
	}
	return at;
}

void tbp_cupti_join_report(void)
{
	uint64_t unjoined = tally.no_api_record + tally.no_hooked_call + tally.calls_gone;
	uint64_t total = tally.joined + unjoined;
	if (!total)
		return;
	char msg[1024];
	size_t at = (size_t)snprintf(msg, sizeof msg,
		"CUPTI join: %llu of %llu GPU records joined to the call that made them (%llu through a library's "
		"runtime call); CUPTI delivered %llu API records and %llu external-correlation records",
		(unsigned long long)tally.joined, (unsigned long long)total, (unsigned long long)tally.joined_inside,
		(unsigned long long)tally.api_records, (unsigned long long)tally.pairs);
	if (unjoined && !tally.api_records && !tally.pairs) {
		at = append(msg, sizeof msg, at, "; not joined: %llu, because CUPTI delivered no API records",
			    (unsigned long long)unjoined);
	} else if (unjoined) {
		if (tally.no_api_record)
			at = append(msg, sizeof msg, at, "; %llu had no API record from CUPTI", tally.no_api_record);
		if (tally.no_hooked_call)
			at = append(msg, sizeof msg, at,
				    "; %llu came from calls no hook saw (an API record with no pair and no hooked call inside it)",
				    tally.no_hooked_call);
		if (tally.calls_gone)
			at = append(msg, sizeof msg, at,
				    "; %llu came from library calls whose driver calls were no longer kept (over "
				    NUMBER(HOOKED_CALLS) " per thread before CUPTI delivered)", tally.calls_gone);
	}
	uint64_t no_ring = __atomic_load_n(&threads_without_ring, __ATOMIC_RELAXED);
	if (no_ring)
		append(msg, sizeof msg, at, "; %llu threads' driver calls were not kept (over " NUMBER(HOOKED_THREADS) " threads)",
		       no_ring);
	/* Below 99 % the report warns (tbanalyze): the same threshold here. */
	tbp_notice(tally.joined * 100 >= total * 99 ? TBP_NOTE_INFO : TBP_NOTE_WARN, TBP_NOTICE_CUPTI_JOIN, msg);
	if (tbp_cfg.verbose)
		tbp_log("%s", msg);
}

#endif /* TBP_HAVE_CUPTI */
