/* Pieces of the CUPTI module that stand alone, without the CUPTI headers: the crash probe
 * (cupti_probe.c), the capped pool of activity buffers (cupti_buffers.c) and the CLOCK record of an
 * API-only trace (cupti_clock.c).  Used by the cupti*.c files only. */
#ifndef TBP_CUPTI_SUPPORT_H
#define TBP_CUPTI_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "libc_real.h"   /* tbp_real_dlsym: never our own interposer */

enum tbp_cupti_probe {
	TBP_PROBE_OK = 0,      /* the first calls returned (whatever they answered) */
	TBP_PROBE_CRASHES,     /* a copy of the process died in them: never call this libcupti */
	TBP_PROBE_UNKNOWN,     /* could not tell (no clone, timed out): go on as before */
};

/* Runs libcupti's first call (cuptiGetVersion) from `handle` in a throwaway copy of the process.  On TBP_PROBE_CRASHES, *crashed_in names the call (or NULL) and *signal_out the signal. */
enum tbp_cupti_probe tbp_cupti_probe(void *handle, const char **crashed_in, int *signal_out) TBP_HIDDEN;
/* Reaps a probe copy that returned and was still exiting (no-op otherwise; never blocks). */
void tbp_cupti_probe_reap(void) TBP_HIDDEN;

/* Activity buffers under the cap TBPROF_CUPTI_BUFFER_SIZE (cupti_buffers.c).  get: a buffer and its
 * *size, or NULL and 0 at the cap (CUPTI then drops and counts).  put: a buffer CUPTI gave back. */
uint8_t *tbp_cupti_buffer_get(size_t *size) TBP_HIDDEN;
void tbp_cupti_buffer_put(uint8_t *buffer) TBP_HIDDEN;
uint64_t tbp_cupti_buffers_refused(void) TBP_HIDDEN;    /* requests answered with no buffer */
size_t tbp_cupti_buffers_allocated(void) TBP_HIDDEN;    /* bytes allocated, in use or free */
void tbp_cupti_buffers_fork_child(void) TBP_HIDDEN;

/* The CLOCK record of an API-only trace: GPU times are the host hooks' (cupti_clock.c). */
void tbp_cupti_clock_record_hook_side(void) TBP_HIDDEN;

#endif
