/*
 * Shared between the HIP hooks (hip.c) and the optional hipEvent GPU timing
 * (hip_timing.c).  Built only when the HIP
 * headers are present; libtbprof never links libamdhip64: every real entry
 * point is found with dlsym(RTLD_NEXT) on first use.
 */
#ifndef TBP_HIP_INTERNAL_H
#define TBP_HIP_INTERNAL_H

#include <stdint.h>

/* The HIP headers pick their AMD (not NVIDIA) definitions from this. */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>

#include "core.h"

/* Real HIP entry points the hooks and the timing code call directly (never
 * through our own exported wrappers, so nothing is recorded twice). */
struct hip_real {
	hipError_t (*EventCreateWithFlags)(hipEvent_t *, unsigned);
	hipError_t (*EventRecord)(hipEvent_t, hipStream_t);
	hipError_t (*EventQuery)(hipEvent_t);
	hipError_t (*EventSynchronize)(hipEvent_t);
	hipError_t (*EventElapsedTime)(float *, hipEvent_t, hipEvent_t);
	hipError_t (*EventDestroy)(hipEvent_t);
	hipError_t (*StreamCreateWithFlags)(hipStream_t *, unsigned);
	hipError_t (*StreamDestroy)(hipStream_t);
	hipError_t (*StreamIsCapturing)(hipStream_t, hipStreamCaptureStatus *);
	hipError_t (*PeekAtLastError)(void);
	hipError_t (*GetLastError)(void);
	hipError_t (*GetDeviceCount)(int *);
	hipError_t (*DeviceGetName)(char *, int, hipDevice_t);
};
extern struct hip_real hip_real TBP_HIDDEN;
/* The real function (RTLD_NEXT from libtbprof); NULL when absent. */
void *hip_resolve(const char *name) TBP_HIDDEN;

/* Leave hipGetLastError's answer as the program would see it without our
 * own HIP calls (hip_timing.c). */
hipError_t hip_last_error_save(void) TBP_HIDDEN;
void hip_last_error_restore(hipError_t saved) TBP_HIDDEN;

/* ---- hip_timing.c: GPU timestamps from hipEvents (TBPROF_HIP_EVENTS=1) -- */

/* Nonzero when event timing is requested and working. */
extern int hip_timing_on TBP_HIDDEN;
void hip_timing_init(void) TBP_HIDDEN;  /* reads TBPROF_HIP_EVENTS; idempotent */
/* Registers the exit-time harvest; called once, after the first real call. */
void hip_timing_register_exit(void) TBP_HIDDEN;
/* Around one launch/copy/memset: begin records a start event on the stream
 * (returns an opaque token, NULL when not timing); stop, right after the
 * real call returned, records the stop event (ok=0: the call failed, no
 * record); end attaches the GPU record template (ts/end are filled at
 * harvest) once the hook has filled it, or drops the op (ok=0).  end
 * returns 1 when a harvest is due. */
void *hip_timing_begin(hipStream_t stream) TBP_HIDDEN;
void hip_timing_stop(void *token, hipStream_t stream, int ok) TBP_HIDDEN;
int hip_timing_end(void *token, int ok, const struct tbp_record *gpu) TBP_HIDDEN;
/* Releases GPU records (in time order, through the emitter thread) for
 * the queued operations whose stop event completed;
 * with wait=1 waits for the rest first (exit, device reset). */
void hip_timing_harvest(int wait) TBP_HIDDEN;
/* The device is about to be reset: flush and forget every event. */
void hip_timing_reset(void) TBP_HIDDEN;

#endif
