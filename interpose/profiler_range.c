/*
 * cudaProfilerStart / cudaProfilerStop (and the driver's cuProfilerStart / cuProfilerStop): the range
 * nsys captures with --capture-range=cudaProfilerApi, and what torch.cuda.profiler.start()/stop() call.
 * Each call is forwarded, then told to the core (tbp_profiler_api, capture.c): a marker in a trace being
 * written, and, under `tbprof record --capture-range cudaProfilerApi`, the beginning and the end of a
 * capture.  No record of their own (no API id): the marker says it.
 */
#include <errno.h>
#include <stdbool.h>

#include "hook.h"

typedef int (*profiler_fn)(void);

#define PROFILER_HOOK(NAME, LIB, START)                                                               \
	static void *real_##NAME;                                                                     \
	TBP_EXPORT int NAME(void);                                                                    \
	static const struct tbp_hook_entry hook_##NAME TBP_HOOK_SECTION = {                           \
		#NAME, NULL, 0, LIB, 0, (void *)NAME, &real_##NAME };                                     \
	TBP_EXPORT int NAME(void)                                                                     \
	{                                                                                             \
		profiler_fn real = (profiler_fn)tbp_real_ensure(&hook_##NAME);                            \
		int r = real ? real() : 3 /* cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED */; \
		if (r == 0 && tbp_cfg.enabled) {                                                          \
			int saved_errno = errno;                                                              \
			tbp_profiler_api(START);                                                              \
			errno = saved_errno;                                                                  \
		}                                                                                         \
		return r;                                                                                 \
	}

PROFILER_HOOK(cudaProfilerStart, TBP_LIB_CUDART, true)
PROFILER_HOOK(cudaProfilerStop, TBP_LIB_CUDART, false)
PROFILER_HOOK(cuProfilerStart, TBP_LIB_CUDA, true)
PROFILER_HOOK(cuProfilerStop, TBP_LIB_CUDA, false)
