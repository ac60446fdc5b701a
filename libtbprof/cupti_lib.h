/*
 * What libtbprof knows of libcupti before it calls it, with no state of its own: where to find the
 * library, and which API records the join needs.  Shared with tests/cupti/conformance, which must
 * find the library and choose the API records exactly as libtbprof does.
 */
#ifndef TBP_CUPTI_LIB_H
#define TBP_CUPTI_LIB_H

#include <stddef.h>

#include "tbprof/trace.h"

#define TBP_CUPTI_SONAME "libcupti.so.13"

/* dlopen()s libcupti: `forced` if set (libtbprof: TBPROF_CUPTI_PATH, read in config.c; then only that), a copy already loaded, the one
 * next to the loaded libcudart.so.* (PyTorch's nvidia wheels, the toolkit), the dynamic linker's
 * search path, then $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.  NULL when none opens.  `path`
 * (may be NULL) gets the file that was opened, for messages. */
void *tbp_cupti_open(const char *forced, char *path, size_t path_len) __attribute__((visibility("hidden")));

/* The join class of an API call named `name` (cuptiGetCallbackName's answer, with or without a
 * version suffix) in the runtime (driver == 0) or driver (driver != 0) domain: TBP_CAT_LAUNCH
 * (kernel and graph launches), TBP_CAT_MEMCPY, TBP_CAT_MEMSET or TBP_CAT_SYNC (the syncs that make
 * SYNCHRONIZATION records) for the calls whose API records join GPU work to its call, 0 for every
 * other call (cudaGetDevice, cudaStreamIsCapturing, ... that PyTorch makes per op: their records
 * would only cost). */
unsigned tbp_cupti_join_class(int driver, const char *name) __attribute__((visibility("hidden")));

#endif
