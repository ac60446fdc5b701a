/*
 * Between the files of the CUPTI consumer (doc/gpu.md):
 *   cupti.c         lifecycle (start, flush, stop, fork), buffers in, records converted, the hot path
 *   cupti_lib.c     finding libcupti, which API records the join needs (no state; shared with tests)
 *   cupti_probe.c   the crash probe          cupti_buffers.c  the capped buffer pool
 *   cupti_enable.c  the enabling sequence (activity kinds, API records by callback id)
 *   cupti_clock.c   GPU timestamps in our clock
 *   cupti_join.c    GPU record -> the hooked call that caused it
 *   cupti_hold.c    GPU records written in start-time order
 * Only built with the CUPTI headers (TBP_HAVE_CUPTI).
 */
#ifndef TBP_CUPTI_INTERNAL_H
#define TBP_CUPTI_INTERNAL_H

#include <stdint.h>

#include <cupti.h>

#include "core.h"
#include "cupti_lib.h"
#include "cupti_support.h"

/* CUSTOM2: torch.profiler (Kineto) uses CUSTOM0 for its ops and CUSTOM1 for user ranges; our ids
 * must never be read as theirs if both are active. */
#define TBP_CUPTI_EXTERNAL_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2

/* Entry points, looked up with dlsym when CUPTI starts (cupti.c); optional ones may be NULL. */
struct tbp_cupti_entry_points {
	CUptiResult (*activity_enable)(CUpti_ActivityKind);
	CUptiResult (*activity_disable)(CUpti_ActivityKind);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*get_next_record)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*get_num_dropped)(CUcontext, uint32_t, size_t *);
	CUptiResult (*push_external)(CUpti_ExternalCorrelationKind, uint64_t);
	CUptiResult (*pop_external)(CUpti_ExternalCorrelationKind, uint64_t *);
	/* optional */
	CUptiResult (*register_timestamp_callback)(CUpti_TimestampCallbackFunc);
	CUptiResult (*get_timestamp)(uint64_t *);
	CUptiResult (*get_result_string)(CUptiResult, const char **);
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*enable_runtime_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*enable_driver_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*get_callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
};
extern struct tbp_cupti_entry_points tbp_cupti TBP_HIDDEN;
extern char tbp_cupti_path[4096] TBP_HIDDEN;   /* the libcupti opened, for messages */

/* cupti.c: the start failed; one NOTICE says why and the trace is API-only from now on. */
void tbp_cupti_in_use(const char *what) TBP_HIDDEN;
void tbp_cupti_error(const char *what, CUptiResult r) TBP_HIDDEN;
const char *tbp_cupti_result_string(CUptiResult r) TBP_HIDDEN;
/* cupti.c: asks the flusher thread for a flush now (a thread's hooked driver calls fill fast). */
void tbp_cupti_flush_soon(void) TBP_HIDDEN;

/* ---- cupti_enable.c */
/* Turns on API records for the calls that join GPU work (tbp_cupti_join_class), the external
 * correlation records and the GPU activity kinds, in that order.  0, or -1 when the start failed
 * (tbp_cupti_in_use/tbp_cupti_error said why). */
int tbp_cupti_enable(void) TBP_HIDDEN;
/* Turns off what tbp_cupti_enable turned on. */
void tbp_cupti_disable(void) TBP_HIDDEN;
/* The join class (tbp_cupti_join_class) of an API record's callback id; 0 when unknown. */
unsigned tbp_cupti_cbid_class(int driver, uint32_t cbid) TBP_HIDDEN;

/* ---- cupti_clock.c */
/* Puts GPU timestamps in CLOCK_MONOTONIC ns: CUPTI's timestamp callback, else an offset measured
 * by bracketing; before any kind is enabled.  Writes the CLOCK record once the start succeeded
 * (tbp_cupti_clock_record).  0, or -1 when the start failed (said why). */
int tbp_cupti_clock_setup(void) TBP_HIDDEN;
void tbp_cupti_clock_record(void) TBP_HIDDEN;
extern int64_t tbp_cupti_clock_offset_ns TBP_HIDDEN;     /* 0 with the callback */
extern uint64_t tbp_cupti_clock_uncertainty_ns TBP_HIDDEN;
static inline uint64_t tbp_cupti_to_monotonic(uint64_t gpu_ts)
{
	/* 0 means CUPTI could not take the timestamp: keep it 0. */
	return gpu_ts ? (uint64_t)((int64_t)gpu_ts + tbp_cupti_clock_offset_ns) : 0;
}

/* ---- cupti_join.c (under the caller's processing lock, except tbp_cupti_join_hooked_call) */
int tbp_cupti_join_init(void) TBP_HIDDEN;                 /* 0, or -1 out of memory */
/* An EXTERNAL_CORRELATION record of ours: CUPTI id -> our corr. */
void tbp_cupti_join_pair(uint32_t cupti_corr, uint64_t ours) TBP_HIDDEN;
/* A RUNTIME or DRIVER API record. */
void tbp_cupti_join_api_record(const CUpti_ActivityAPI *r, int driver) TBP_HIDDEN;
/* Our corr for a GPU record carrying `cupti_corr`, 0 when none is known (yet). */
uint64_t tbp_cupti_join(uint32_t cupti_corr) TBP_HIDDEN;
/* A GPU record is written: its corr (joined when it arrived, or now) and the tally of outcomes. */
uint64_t tbp_cupti_join_final(uint32_t cupti_corr, uint64_t joined_on_arrival) TBP_HIDDEN;
/* A driver call our hooks traced (no traced call around it), of join class `join_class`, from
 * start to end (CLOCK_MONOTONIC ns): the call a library's static runtime makes inside its own
 * runtime call.  Calling thread only; lock-free. */
void tbp_cupti_join_hooked_call(uint64_t corr, uint64_t start, uint64_t end, unsigned join_class) TBP_HIDDEN;
/* At stop: a NOTICE with how many GPU records were joined, how, and why the others were not. */
void tbp_cupti_join_report(void) TBP_HIDDEN;

/* ---- cupti_hold.c (under the processing lock) */
/* Holds a GPU record converted from CUPTI's; `now` is when its buffer arrived. */
void tbp_cupti_hold_add(const struct tbp_record *rec, uint32_t cupti_corr, uint64_t now) TBP_HIDDEN;
/* Writes what has waited long enough (everything when `all`), joined, in start-time order. */
void tbp_cupti_hold_release(int all) TBP_HIDDEN;
uint64_t tbp_cupti_hold_forced_out(void) TBP_HIDDEN;      /* written early: the hold was full */
/* Before a consumer thread's record: a thread with no ring yet gets a 1 MiB one (it carries no
 * record of the program's). */
void tbp_cupti_consumer_ring(void) TBP_HIDDEN;

#endif
