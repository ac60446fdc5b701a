/*
 * GPU timestamps for HIP without a profiling library: with
 * TBPROF_HIP_EVENTS=1 every launch, copy and memset is bracketed by two
 * hipEventRecord calls on its stream, and the pair's times (relative to a
 * reference event, converted to CLOCK_MONOTONIC) become a TBP_K_GPU_*
 * record with the API record's correlation id.
 *
 * Clock: a reference event is recorded on a private non-blocking stream
 * (so it never waits for the program's work) and synchronized; the host
 * clock read just before and after hipEventRecord brackets its timestamp
 * (TBP_K_CLOCK, method BRACKETED, domain 2).  hipEventElapsedTime returns
 * float milliseconds, so the reference is renewed once a second whenever no
 * bracketed operation is outstanding (keeping rounding below ~60 ns).
 *
 * Harvest: after the program's own synchronize calls, every HARVEST_EVERY
 * timed operations (without waiting), and at exit/device reset (waiting),
 * completed operations are converted.  Readers expect the records of one
 * GPU stream in time order, so they are released in order: an operation not
 * yet complete started no earlier than its call began (t0), so completed
 * records up to the smallest such t0 (less a margin for clock rounding) can
 * go, the rest wait for a later harvest.  Released records are emitted by
 * one thread of ours ("tbprof-hip"), so they reach the trace through a
 * single buffer in that order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hip_internal.h"

/* Our CLOCK.domain for hipEvent-derived GPU timestamps (CUPTI uses 1). */
#define TBP_CLOCK_DOMAIN_HIP_EVENTS 2
#define PENDING_CAP 16384
#define HARVEST_EVERY 256
#define REBASE_NS 1000000000ull
/* Release margin: clock bracket and float-millisecond rounding. */
#define ORDER_MARGIN_NS 5000
#define MAX_BLOCKED_STREAMS 64
/* Calibration brackets tried at most, stopping at one this narrow. */
#define CALIBRATE_TRIES 16
#define CALIBRATE_GOOD_NS 200

int hip_timing_on;           /* atomic: disable() may clear it from any thread */
static int timing_requested; /* TBPROF_HIP_EVENTS set and usable; written once in init */
#define TIMING_ON() __atomic_load_n(&hip_timing_on, __ATOMIC_RELAXED)

/* One timed operation, from its begin until its GPU record is released. */
struct timed_op {
	hipEvent_t start, stop;  /* stop NULL: the call has not returned yet */
	hipStream_t stream;
	uint64_t t0;             /* host time before the start event */
	int ready;               /* rec holds the template: may be harvested */
	int done;                /* rec.ts/end are final (-1: dropped) */
	struct tbp_record rec;
};

static pthread_mutex_t timing_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timed_op *ops; /* issue order; PENDING_CAP entries */
static size_t nops;
static hipEvent_t *pool;
static size_t npool, cap_pool;
static hipStream_t private_stream;
static hipEvent_t ref_event;
static hipEvent_t ref_spare;  /* calibration's other try */
static uint64_t ref_t0;      /* CLOCK_MONOTONIC ns of ref_event */
static int calibrated;
static unsigned ops_since_harvest;
static uint64_t dropped;     /* operations left untimed (queue full, event errors) */
static uint64_t untimed_capture; /* operations on capturing streams, left untimed */
static int init_done;

/* Released records, in time order, waiting for the emitter thread. */
static struct tbp_record *staged;
static size_t nstaged, cap_staged;
static pthread_cond_t staged_cond = PTHREAD_COND_INITIALIZER;   /* work for the emitter */
static pthread_cond_t drained_cond = PTHREAD_COND_INITIALIZER;  /* emitter caught up */
static int emitter_busy, emitter_started;

/*
 * Our own HIP calls must not change what hipGetLastError tells the
 * program.  The runtime records failures (and, in some versions, a query's
 * hipErrorNotReady) as the thread's last error: when it was clear before
 * our calls and is set after, clear it again.  (A pending error of the
 * program's own is left in place; our calls can only overwrite it if they
 * fail, which they do not on a working device.)
 */
hipError_t hip_last_error_save(void)
{
	return hip_real.PeekAtLastError ? hip_real.PeekAtLastError() : hipSuccess;
}

void hip_last_error_restore(hipError_t saved)
{
	if (saved == hipSuccess && hip_real.PeekAtLastError && hip_real.GetLastError &&
	    hip_real.PeekAtLastError() != hipSuccess)
		hip_real.GetLastError();
}

static void disable(const char *why, hipError_t e)
{
	char msg[200];
	snprintf(msg, sizeof msg, "TBPROF_HIP_EVENTS: %s (hipError %d): no HIP GPU timeline", why,
		 (int)e);
	__atomic_store_n(&hip_timing_on, 0, __ATOMIC_RELAXED);
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_TEXT, msg);
	if (tbp_cfg.verbose)
		tbp_log("%s\n", msg);
}

/* ------------------------------------------------------------ emitter */

/* Set by the emitter as its first act: its start-up in the thread library
 * (and in ASan's runtime, which takes its thread registry's lock there) is
 * over.  The starter waits for it, so that no fork lands inside a thread
 * start: a child of such a fork inherits that lock held, and every thread it
 * starts (tbprof's writer and emitter) hangs at its start (hip_fork in the
 * ASan build: the child wrote no records after 5 s of bounded waits, twice
 * in about ten CI runs). */
static _Atomic int emitter_running;

static void *emitter_main(void *arg)
{
	(void)arg;
	atomic_store(&emitter_running, 1);
	/* tbprof's own thread: nothing it does is traced. */
	tbp_guard_enter();
	struct tbp_record *batch = NULL;
	size_t cap_batch = 0;
	pthread_mutex_lock(&timing_lock);
	for (;;) {
		while (!nstaged)
			pthread_cond_wait(&staged_cond, &timing_lock);
		/* Take the whole batch; emit without the lock. */
		if (cap_batch < nstaged) {
			struct tbp_record *n = realloc(batch, nstaged * sizeof *n);
			if (!n) {
				nstaged = 0; /* cannot happen in practice; never block producers */
				pthread_cond_broadcast(&drained_cond);
				continue;
			}
			batch = n;
			cap_batch = nstaged;
		}
		size_t n = nstaged;
		memcpy(batch, staged, n * sizeof *batch);
		nstaged = 0;
		emitter_busy = 1;
		pthread_mutex_unlock(&timing_lock);
		for (size_t i = 0; i < n; i++)
			tbp_emit_patient(&batch[i]);
		pthread_mutex_lock(&timing_lock);
		emitter_busy = 0;
		pthread_cond_broadcast(&drained_cond);
	}
	return NULL;
}

/* Caller holds timing_lock. */
static int emitter_start_locked(void)
{
	if (emitter_started)
		return 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	int rc = pthread_create(&th, &attr, emitter_main, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		return -1;
	pthread_setname_np(th, "tbprof-hip");
	emitter_started = 1;
	/* Bounded: a thread that never runs costs the traced program 1 s once. */
	struct timespec step = {0, 20000};
	for (uint64_t until = tbp_now() + 1000000000ull; !atomic_load(&emitter_running) && tbp_now() < until;)
		nanosleep(&step, NULL);
	return 0;
}

/* Caller holds timing_lock: wait (bounded) until the emitter took and
 * emitted everything released so far. */
static void wait_drained_locked(unsigned timeout_ms)
{
	if (!emitter_started)
		return;
	pthread_cond_signal(&staged_cond);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (nstaged || emitter_busy)
		if (pthread_cond_timedwait(&drained_cond, &timing_lock, &until) == ETIMEDOUT)
			break;
}

static void child_after_fork(void)
{
	/* Only the forking thread survives: no emitter (restarted on the first
	 * release), and the parent's events mean nothing in the child. */
	emitter_started = 0;
	atomic_store(&emitter_running, 0);
	emitter_busy = 0;
	nstaged = 0;
	nops = 0;
	npool = 0;
	calibrated = 0;
	private_stream = NULL;
	ref_event = ref_spare = NULL;
	pthread_mutex_init(&timing_lock, NULL);
	/* The parent's emitter may have been waiting on these: the copies
	 * still count it as a waiter, and a signal in the child would wait
	 * forever for it to wake (seen as a hang at exit in hip_fork). */
	pthread_cond_init(&staged_cond, NULL);
	pthread_cond_init(&drained_cond, NULL);
}

static void prepare_fork(void)
{
	pthread_mutex_lock(&timing_lock);
}

static void parent_after_fork(void)
{
	pthread_mutex_unlock(&timing_lock);
}

/* Lent to libtbprof's atfork handlers at load: a handler registered at
 * first use under timing_lock would miss a fork that races that first use.
 * The reset is harmless before any use.  timing_lock is taken before the
 * core's locks: under it this module
 * interns notices and emits clock definitions, and its emitter thread
 * reallocates its batch (seen: hip_fork's child in the ASan build wrote no
 * records, its threads stuck in an allocator lock the parent's emitter
 * held at fork). */
static const struct tbp_hook_ops hip_timing_ops = {
	.rank = TBP_RANK_OUTER,
	.fork_prepare = prepare_fork,
	.fork_parent = parent_after_fork,
	.fork_child = child_after_fork,
};

__attribute__((constructor(102))) static void hip_timing_register(void)
{
	tbp_register_hook_ops(&hip_timing_ops);
}

/* ------------------------------------------------------------ setup */

static void at_exit_harvest(void)
{
	if (timing_requested && tbp_guard_enter()) {
		hip_timing_harvest(1);
		tbp_guard_leave();
	}
}

void hip_timing_register_exit(void)
{
	if (timing_requested)
		atexit(at_exit_harvest);
}

void hip_timing_init(void)
{
	if (__atomic_load_n(&init_done, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&timing_lock);
	if (!init_done) {
		if (tbp_cfg.hip_events) {
			ops = calloc(PENDING_CAP, sizeof *ops);
			if (hip_real.EventCreateWithFlags && hip_real.EventRecord && hip_real.EventQuery &&
			    hip_real.EventSynchronize && hip_real.EventElapsedTime &&
			    hip_real.EventDestroy && hip_real.StreamCreateWithFlags && ops &&
			    emitter_start_locked() == 0) {
				timing_requested = 1;
				__atomic_store_n(&hip_timing_on, 1, __ATOMIC_RELAXED);
			} else {
				tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_TEXT,
					   "TBPROF_HIP_EVENTS: HIP event API not found: no HIP GPU timeline");
			}
		}
		__atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&timing_lock);
}

static void emit_clock(uint64_t uncertainty)
{
	tbp_emit_clock(TBP_CLOCK_DOMAIN_HIP_EVENTS, (int64_t)ref_t0, uncertainty, TBP_CLOCK_BRACKETED);
}

/* (Re)establish the reference event.  Caller holds timing_lock. */
static int calibrate_locked(void)
{
	hipError_t e;
	if (!private_stream) {
		e = hip_real.StreamCreateWithFlags(&private_stream, hipStreamNonBlocking);
		if (e != hipSuccess) {
			private_stream = NULL;
			disable("cannot create the timing stream", e);
			return -1;
		}
	}
	if (!ref_event) {
		e = hip_real.EventCreateWithFlags(&ref_event, hipEventDefault);
		if (e != hipSuccess) {
			ref_event = NULL;
			disable("cannot create the reference event", e);
			return -1;
		}
	}
	/* The narrowest of a few brackets: one the host was descheduled in (a
	 * loaded machine) is microseconds wide, and its midpoint can put every
	 * GPU time that far before the call that made the work.  Each try
	 * records a spare event; a narrower bracket makes it the reference. */
	if (!ref_spare && hip_real.EventCreateWithFlags(&ref_spare, hipEventDefault) != hipSuccess)
		ref_spare = NULL;
	uint64_t best_t0 = 0, best_width = UINT64_MAX;
	for (int i = 0; i < CALIBRATE_TRIES && best_width > CALIBRATE_GOOD_NS; i++) {
		hipEvent_t ev = i == 0 ? ref_event : ref_spare;
		if (!ev)
			break;
		uint64_t before = tbp_now();
		e = hip_real.EventRecord(ev, private_stream);
		uint64_t after = tbp_now();
		if (e == hipSuccess)
			e = hip_real.EventSynchronize(ev);
		if (e != hipSuccess) {
			if (i > 0)
				break;   /* the first try's reference stands */
			disable("cannot record the reference event", e);
			return -1;
		}
		if (after - before < best_width) {
			best_width = after - before;
			best_t0 = before + best_width / 2;
			if (i > 0) {
				ref_spare = ref_event;
				ref_event = ev;
			}
		}
	}
	ref_t0 = best_t0;
	emit_clock(best_width / 2);
	calibrated = 1;
	return 0;
}

/* Caller holds timing_lock. */
static hipEvent_t event_get_locked(void)
{
	if (npool)
		return pool[--npool];
	hipEvent_t ev = NULL;
	hipError_t e = hip_real.EventCreateWithFlags(&ev, hipEventDefault);
	if (e != hipSuccess) {
		disable("hipEventCreateWithFlags failed", e);
		return NULL;
	}
	return ev;
}

static void event_put_locked(hipEvent_t ev)
{
	if (!ev)
		return;
	if (npool == cap_pool) {
		size_t ncap = cap_pool ? cap_pool * 2 : 256;
		hipEvent_t *n = realloc(pool, ncap * sizeof *n);
		if (!n) {
			hip_real.EventDestroy(ev);
			return;
		}
		pool = n;
		cap_pool = ncap;
	}
	pool[npool++] = ev;
}

/* ------------------------------------------------------------ per operation */

void *hip_timing_begin(hipStream_t stream)
{
	if (!TIMING_ON())
		return NULL;
	hipError_t saved = hip_last_error_save();
	/* Never add our events to a stream being captured into a graph (they
	 * would become graph nodes, or invalidate the capture); an error here
	 * (the null stream while another stream captures globally) also means
	 * hands off. */
	if (hip_real.StreamIsCapturing) {
		hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
		hipError_t e = hip_real.StreamIsCapturing(stream, &status);
		if (e != hipSuccess || status != hipStreamCaptureStatusNone) {
			hip_last_error_restore(saved);
			__atomic_fetch_add(&untimed_capture, 1, __ATOMIC_RELAXED);
			return NULL;
		}
	}
	struct timed_op *op = NULL;
	pthread_mutex_lock(&timing_lock);
	if ((calibrated || calibrate_locked() == 0) && TIMING_ON()) {
		if (nops == PENDING_CAP) {
			dropped++;
		} else {
			hipEvent_t ev = event_get_locked();
			uint64_t t0 = tbp_now();
			if (ev && hip_real.EventRecord(ev, stream) == hipSuccess) {
				op = &ops[nops++];
				memset(op, 0, sizeof *op);
				op->start = ev;
				op->stream = stream;
				op->t0 = t0;
			} else {
				/* A bad stream: the call itself will fail too. */
				event_put_locked(ev);
			}
		}
	}
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
	/* The token is the start event: ops[] moves during harvests. */
	return op ? (void *)op->start : NULL;
}

/* Caller holds timing_lock.  The live op whose start event is `start`
 * (start events are unique among live ops: they return to the pool only
 * when their op is removed or harvested). */
static struct timed_op *find_op_locked(hipEvent_t start)
{
	for (size_t i = nops; i-- > 0;)
		if (ops[i].start == start && !ops[i].done)
			return &ops[i];
	return NULL;
}

/* Caller holds timing_lock.  Returns the op's events and forgets it. */
static void drop_op_locked(struct timed_op *op)
{
	event_put_locked(op->start);
	event_put_locked(op->stop);
	size_t i = (size_t)(op - ops);
	memmove(&ops[i], &ops[i + 1], (nops - i - 1) * sizeof *ops);
	nops--;
}

void hip_timing_stop(void *token, hipStream_t stream, int ok)
{
	hipEvent_t start = token;
	if (!start)
		return;
	hipError_t saved = hip_last_error_save();
	pthread_mutex_lock(&timing_lock);
	struct timed_op *op = find_op_locked(start);
	if (op && !op->stop) {
		hipEvent_t stop = ok ? event_get_locked() : NULL;
		if (stop && hip_real.EventRecord(stop, stream) != hipSuccess) {
			event_put_locked(stop);
			stop = NULL;
		}
		if (stop) {
			op->stop = stop;
		} else {
			if (ok)
				dropped++;
			drop_op_locked(op);
		}
	}
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
}

int hip_timing_end(void *token, int ok, const struct tbp_record *gpu)
{
	hipEvent_t start = token;
	if (!start)
		return 0;
	int harvest = 0;
	pthread_mutex_lock(&timing_lock);
	struct timed_op *op = find_op_locked(start);
	if (op && op->stop && !op->ready) {
		if (ok) {
			op->rec = *gpu;
			op->ready = 1;
			harvest = ++ops_since_harvest >= HARVEST_EVERY;
		} else {
			drop_op_locked(op);
		}
	}
	pthread_mutex_unlock(&timing_lock);
	return harvest;
}

/* ------------------------------------------------------------ harvest */

static uint64_t to_host_ns(float ms)
{
	return ref_t0 + (uint64_t)(int64_t)((double)ms * 1e6 + (ms >= 0 ? 0.5 : -0.5));
}

static int cmp_ts(const void *a, const void *b)
{
	const struct timed_op *x = a, *y = b;
	return x->rec.ts < y->rec.ts ? -1 : x->rec.ts > y->rec.ts;
}

/* Caller holds timing_lock. */
static void stage_locked(const struct tbp_record *rec)
{
	if (nstaged == cap_staged) {
		size_t ncap = cap_staged ? cap_staged * 2 : 1024;
		struct tbp_record *n = realloc(staged, ncap * sizeof *n);
		if (!n) {
			dropped++;
			return;
		}
		staged = n;
		cap_staged = ncap;
	}
	staged[nstaged++] = *rec;
}

void hip_timing_harvest(int wait)
{
	if (!timing_requested)
		return;
	hipError_t saved = hip_last_error_save();
	/* A query answering hipErrorNotReady could replace an error the
	 * program has not read yet: harvest later instead (not at exit). */
	if (saved != hipSuccess && !wait)
		return;
	pthread_mutex_lock(&timing_lock);
	ops_since_harvest = 0;
	uint64_t now = tbp_now();

	/* 1. Complete what finished.  Work on one stream finishes in order: after
	 * the first unfinished op of a stream, skip that stream's later ones. */
	hipStream_t blocked[MAX_BLOCKED_STREAMS];
	size_t nblocked = 0;
	for (size_t i = 0; i < nops; i++) {
		struct timed_op *op = &ops[i];
		if (op->done || !op->ready)
			continue;
		int skip = 0;
		for (size_t b = 0; b < nblocked && !skip; b++)
			skip = blocked[b] == op->stream;
		if (skip)
			continue;
		hipError_t e = wait ? hip_real.EventSynchronize(op->stop) : hip_real.EventQuery(op->stop);
		if (e == hipErrorNotReady) {
			if (nblocked < MAX_BLOCKED_STREAMS)
				blocked[nblocked++] = op->stream;
			continue;
		}
		float ms_start = 0, ms_stop = 0;
		if (e == hipSuccess)
			e = hip_real.EventElapsedTime(&ms_start, ref_event, op->start);
		if (e == hipSuccess)
			e = hip_real.EventElapsedTime(&ms_stop, ref_event, op->stop);
		event_put_locked(op->start);
		event_put_locked(op->stop);
		op->start = op->stop = NULL;
		if (e != hipSuccess) {
			dropped++;
			op->done = -1; /* removed below */
			continue;
		}
		op->rec.stream_kind = TBP_STREAM_GPU;
		op->rec.ts = to_host_ns(ms_start);
		op->rec.u.v[0] = to_host_ns(ms_stop); /* TBP_GPU_FIELDS: end first */
		/* The start event was recorded after t0 (itself after the call's
		 * entry, the API record's time): a start before it is the
		 * reference's bracket error, which moves start and end alike.
		 * Left in, the work would seem to begin before its launch, and a
		 * reader in time order could not join it to its call. */
		if (op->rec.ts < op->t0) {
			op->rec.u.v[0] += op->t0 - op->rec.ts;
			op->rec.ts = op->t0;
		}
		if (op->rec.u.v[0] < op->rec.ts)
			op->rec.u.v[0] = op->rec.ts;
		op->done = 1;
	}

	/* 2. Release in time order up to the watermark: nothing unfinished (or
	 * begun later) can start before its call began. */
	uint64_t watermark = now;
	for (size_t i = 0; i < nops; i++)
		if (!ops[i].done && ops[i].t0 < watermark)
			watermark = ops[i].t0;
	watermark = watermark > ORDER_MARGIN_NS ? watermark - ORDER_MARGIN_NS : 0;
	int all = 1;
	for (size_t i = 0; i < nops; i++)
		all &= ops[i].done != 0;
	size_t keep = 0;
	struct timed_op *done_ops = NULL;
	size_t ndone = 0;
	for (size_t i = 0; i < nops; i++)
		ndone += ops[i].done == 1;
	if (ndone)
		done_ops = malloc(ndone * sizeof *done_ops);
	size_t k = 0;
	for (size_t i = 0; i < nops; i++) {
		if (ops[i].done == 1 && done_ops && (all || ops[i].rec.ts <= watermark))
			done_ops[k++] = ops[i];
		else if (ops[i].done != -1)
			ops[keep++] = ops[i];
	}
	nops = keep;
	if (k) {
		/* A forked child has no emitter yet: start its own. */
		if (!emitter_started && emitter_start_locked() != 0) {
			dropped += k;
		} else {
			qsort(done_ops, k, sizeof *done_ops, cmp_ts);
			for (size_t i = 0; i < k; i++)
				stage_locked(&done_ops[i].rec);
			pthread_cond_signal(&staged_cond);
		}
	}
	free(done_ops);

	/* Renew the reference while nothing depends on the old one. */
	if (!nops && calibrated && TIMING_ON() && tbp_now() - ref_t0 > REBASE_NS)
		calibrate_locked();

	uint64_t captured = __atomic_exchange_n(&untimed_capture, 0, __ATOMIC_RELAXED);
	if (wait && captured) {
		char msg[160];
		snprintf(msg, sizeof msg,
			 "TBPROF_HIP_EVENTS: %llu operations issued during stream capture have no GPU timestamps",
			 (unsigned long long)captured);
		tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_TEXT, msg);
	} else if (captured) {
		__atomic_fetch_add(&untimed_capture, captured, __ATOMIC_RELAXED);
	}
	if (wait && dropped) {
		char msg[160];
		snprintf(msg, sizeof msg,
			 "TBPROF_HIP_EVENTS: %llu operations have no GPU timestamps (event queue full or event errors)",
			 (unsigned long long)dropped);
		tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_TEXT, msg);
		dropped = 0;
	}
	/* Exit and device reset: everything must be in the buffers before the
	 * writer's final drain (or the reset). */
	if (wait)
		wait_drained_locked(2000);
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
}

void hip_timing_reset(void)
{
	if (!timing_requested)
		return;
	hip_timing_harvest(1);
	hipError_t saved = hip_last_error_save();
	pthread_mutex_lock(&timing_lock);
	for (size_t i = 0; i < npool; i++)
		hip_real.EventDestroy(pool[i]);
	npool = 0;
	if (ref_event)
		hip_real.EventDestroy(ref_event);
	if (ref_spare)
		hip_real.EventDestroy(ref_spare);
	ref_event = ref_spare = NULL;
	if (private_stream && hip_real.StreamDestroy)
		hip_real.StreamDestroy(private_stream);
	private_stream = NULL;
	calibrated = 0;
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
}
