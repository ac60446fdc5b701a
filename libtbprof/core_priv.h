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

/* Native stacks (native.c); 0 when disabled or not built with libunwind. */
void tbp_native_reset_after_fork(void) TBP_HIDDEN;

#endif
