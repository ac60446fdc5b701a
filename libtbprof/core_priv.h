/*
 * Private interface between libtbprof core (core.c) and the hooks in
 * interpose/.  Not part of the core.h contract: only the core and the hook
 * files (same owner) use it.
 */
#ifndef TBPROF_CORE_PRIV_H
#define TBPROF_CORE_PRIV_H

#include "core.h"

/* Called by a hook after its first real GPU call returned: the GPU runtime
 * has now registered its own exit handlers, so ours (registered later) run
 * before them, while the CUDA context is still alive. */
void tbp_note_gpu_used(void) TBP_HIDDEN;

/* tbp_active is read on every hook and written by start/stop/signal paths
 * on other threads: relaxed atomics (a stale value only costs one record). */
#define TBP_ACTIVE() __atomic_load_n(&tbp_active, __ATOMIC_RELAXED)
#define TBP_SET_ACTIVE(v) __atomic_store_n(&tbp_active, (v), __ATOMIC_RELAXED)
extern volatile int tbp_gpu_used TBP_HIDDEN;

/* Ask the writer to drain everything committed so far and wait (bounded)
 * until it has been written.  Used around cudaDeviceReset. */
void tbp_drain_now(unsigned timeout_ms) TBP_HIDDEN;

/* The real dlsym/dlvsym, bypassing tbprof's own dlsym interposer. */
void *tbp_real_dlsym(void *handle, const char *name) TBP_HIDDEN;

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

/* Converts two TSC readings to CLOCK_MONOTONIC ns with one snapshot. */
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

/* Native stacks (native.c); 0 when disabled or not built with libunwind. */
void tbp_native_reset_after_fork(void) TBP_HIDDEN;

#endif
