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
 * Records are emitted when their stop event has completed: after the
 * program's own synchronize calls, every HARVEST_EVERY operations (without
 * waiting), and at exit/device reset (waiting).  Cost: two hipEventRecord
 * per operation plus an event query per operation at harvest (doc/hip.md).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

/* Our CLOCK.domain for hipEvent-derived GPU timestamps (CUPTI uses 1). */
#define TBP_CLOCK_DOMAIN_HIP_EVENTS 2
#define PENDING_CAP 16384
#define HARVEST_EVERY 256
#define REBASE_NS 1000000000ull

int hip_timing_on;           /* atomic: disable() may clear it from any thread */
static int timing_requested; /* TBPROF_HIP_EVENTS set and usable; written once in init */
#define TIMING_ON() __atomic_load_n(&hip_timing_on, __ATOMIC_RELAXED)

struct pending_op {
	hipEvent_t start, stop;
	struct tbp_record rec;
};

static pthread_mutex_t timing_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending_op *pending; /* ring */
static size_t pending_head, pending_count;
static hipEvent_t *pool;
static size_t npool, cap_pool;
static hipStream_t private_stream;
static hipEvent_t ref_event;
static uint64_t ref_t0;      /* CLOCK_MONOTONIC ns of ref_event */
static int calibrated;
static unsigned ops_since_harvest;
static uint64_t dropped;     /* operations left untimed (ring full, event errors) */
static uint64_t untimed_capture; /* operations on capturing streams, left untimed */
static int init_done;

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
		const char *v = getenv("TBPROF_HIP_EVENTS");
		if (v && *v && strcmp(v, "0")) {
			pending = calloc(PENDING_CAP, sizeof *pending);
			if (hip_real.EventCreateWithFlags && hip_real.EventRecord && hip_real.EventQuery &&
			    hip_real.EventSynchronize && hip_real.EventElapsedTime &&
			    hip_real.EventDestroy && hip_real.StreamCreateWithFlags && pending) {
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
	struct tbp_record rec;
	memset(&rec, 0, sizeof rec);
	rec.kind = TBP_K_CLOCK;
	rec.stream_kind = TBP_STREAM_DEFS;
	rec.ts = tbp_now();
	rec.u.clock.domain = TBP_CLOCK_DOMAIN_HIP_EVENTS;
	rec.u.clock.offset_ns = ref_t0;
	rec.u.clock.uncertainty_ns = uncertainty;
	rec.u.clock.method = TBP_CLOCK_BRACKETED;
	tbp_emit_def(&rec);
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
	uint64_t before = tbp_now();
	e = hip_real.EventRecord(ref_event, private_stream);
	uint64_t after = tbp_now();
	if (e == hipSuccess)
		e = hip_real.EventSynchronize(ref_event);
	if (e != hipSuccess) {
		disable("cannot record the reference event", e);
		return -1;
	}
	ref_t0 = before + (after - before) / 2;
	emit_clock((after - before) / 2);
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
	pthread_mutex_lock(&timing_lock);
	hipEvent_t ev = NULL;
	if ((calibrated || calibrate_locked() == 0) && TIMING_ON()) {
		if (pending_count == PENDING_CAP) {
			dropped++;
		} else {
			ev = event_get_locked();
			if (ev && hip_real.EventRecord(ev, stream) != hipSuccess) {
				/* The stream is bad: the call itself will fail too. */
				event_put_locked(ev);
				ev = NULL;
			}
		}
	}
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
	return ev;
}

int hip_timing_end(void *token, hipStream_t stream, int ok, const struct tbp_record *gpu)
{
	hipEvent_t start = token;
	if (!start)
		return 0;
	int harvest = 0;
	hipError_t saved = hip_last_error_save();
	pthread_mutex_lock(&timing_lock);
	hipEvent_t stop = ok ? event_get_locked() : NULL;
	if (stop && hip_real.EventRecord(stop, stream) != hipSuccess) {
		event_put_locked(stop);
		stop = NULL;
	}
	if (!stop || pending_count == PENDING_CAP) {
		if (ok)
			dropped++;
		event_put_locked(start);
		event_put_locked(stop);
	} else {
		struct pending_op *p = &pending[(pending_head + pending_count) % PENDING_CAP];
		p->start = start;
		p->stop = stop;
		p->rec = *gpu;
		pending_count++;
		harvest = ++ops_since_harvest >= HARVEST_EVERY;
	}
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
	return harvest;
}

static uint64_t to_host_ns(float ms)
{
	return ref_t0 + (uint64_t)(int64_t)((double)ms * 1e6 + (ms >= 0 ? 0.5 : -0.5));
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
	while (pending_count) {
		struct pending_op *p = &pending[pending_head];
		hipError_t e = wait ? hip_real.EventSynchronize(p->stop) : hip_real.EventQuery(p->stop);
		if (e == hipErrorNotReady)
			break; /* in issue order: later ones are usually not done either */
		float ms_start = 0, ms_stop = 0;
		if (e == hipSuccess)
			e = hip_real.EventElapsedTime(&ms_start, ref_event, p->start);
		if (e == hipSuccess)
			e = hip_real.EventElapsedTime(&ms_stop, ref_event, p->stop);
		if (e == hipSuccess) {
			struct tbp_record rec = p->rec;
			rec.stream_kind = TBP_STREAM_GPU;
			rec.ts = to_host_ns(ms_start);
			rec.u.v[0] = to_host_ns(ms_stop); /* TBP_GPU_FIELDS: end first */
			if (rec.u.v[0] < rec.ts)
				rec.u.v[0] = rec.ts;
			tbp_emit(&rec);
		} else {
			dropped++;
		}
		event_put_locked(p->start);
		event_put_locked(p->stop);
		pending_head = (pending_head + 1) % PENDING_CAP;
		pending_count--;
	}
	/* Renew the reference while nothing depends on the old one. */
	if (!pending_count && calibrated && TIMING_ON() && tbp_now() - ref_t0 > REBASE_NS)
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
	ref_event = NULL;
	if (private_stream && hip_real.StreamDestroy)
		hip_real.StreamDestroy(private_stream);
	private_stream = NULL;
	calibrated = 0;
	pthread_mutex_unlock(&timing_lock);
	hip_last_error_restore(saved);
}
