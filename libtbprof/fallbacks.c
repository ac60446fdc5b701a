/*
 * Weak no-op fallbacks for the hook points that libtbprof/cupti.c (GPU
 * timeline) and libtbprof/python.c (Python call paths) define.  The strong
 * definitions in those files replace these at link time; until then (or in a
 * build without them) libtbprof.so still links with -Wl,--no-undefined and
 * records API-only traces without call paths.
 */
#include "core.h"

#define TBP_WEAK __attribute__((weak))

TBP_WEAK void tbp_gpu_call_enter(uint64_t corr) { (void)corr; }
TBP_WEAK void tbp_gpu_call_exit(uint64_t corr) { (void)corr; }
TBP_WEAK void tbp_cupti_start(void) {}
TBP_WEAK void tbp_cupti_flush(void) {}
TBP_WEAK void tbp_cupti_stop(void) {}

TBP_WEAK uint64_t tbp_py_callpath(void) { return 0; }
TBP_WEAK void tbp_py_init(void) {}
TBP_WEAK void tbp_py_shutdown(void) {}
TBP_WEAK void tbp_py_note_wait(uint64_t callpath) { (void)callpath; }
