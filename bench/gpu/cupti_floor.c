/*
 * The cheapest CUPTI client, for bench/gpu/launch_bound.py's "CUPTI floor" mode: what CUPTI itself
 * costs per launch when all a tool asks for is kernel records -- no API records, no external
 * correlation ids, no hooks -- so libtbprof's figure is seen beside CUPTI's own.
 *
 * Preloaded (LD_PRELOAD) with TBP_CUPTI_FLOOR=1: at load it finds libcupti as libtbprof does
 * (cupti_lib.c; TBPROF_CUPTI_PATH pins one), registers buffer callbacks that count kernel records
 * and enables CONCURRENT_KERNEL only.  tbp_cupti_floor_report() (the bench's worker calls it through
 * ctypes after its loop: at exit CUDA may be torn down first) flushes and, with
 * TBP_CUPTI_FLOOR_OUT=FILE, writes "kernels N dropped D" there, so the bench can check the floor
 * really recorded the loop.  Inert without TBP_CUPTI_FLOOR=1 or when libcupti cannot be opened.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "cupti_lib.h"

#define BUFFER_BYTES (4u << 20)

static CUptiResult (*get_next_record)(uint8_t *, size_t, CUpti_Activity **);
static CUptiResult (*flush_all)(uint32_t);
static CUptiResult (*get_dropped)(CUcontext, uint32_t, size_t *);
static unsigned long long kernels;   /* buffers complete on one thread at a time per flush; atomics anyway */
static int active;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*size = BUFFER_BYTES;
	*buffer = aligned_alloc(8, BUFFER_BYTES);
	*max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	(void)ctx; (void)stream; (void)size;
	CUpti_Activity *a = NULL;
	unsigned long long n = 0;
	while (buffer && get_next_record(buffer, valid, &a) == CUPTI_SUCCESS)
		n += a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	__atomic_add_fetch(&kernels, n, __ATOMIC_RELAXED);
	free(buffer);
}

__attribute__((constructor)) static void floor_start(void)
{
	const char *on = getenv("TBP_CUPTI_FLOOR");
	if (!on || strcmp(on, "1") != 0)
		return;
	void *h = tbp_cupti_open(getenv("TBPROF_CUPTI_PATH"), NULL, 0);
	if (!h)
		return;
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
		(CUptiResult (*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))dlsym(
			h, "cuptiActivityRegisterCallbacks");
	CUptiResult (*enable)(CUpti_ActivityKind) = (CUptiResult (*)(CUpti_ActivityKind))dlsym(h, "cuptiActivityEnable");
	*(void **)&get_next_record = dlsym(h, "cuptiActivityGetNextRecord");
	*(void **)&flush_all = dlsym(h, "cuptiActivityFlushAll");
	*(void **)&get_dropped = dlsym(h, "cuptiActivityGetNumDroppedRecords");
	if (!register_callbacks || !enable || !get_next_record || !flush_all)
		return;
	if (register_callbacks(requested, completed) == CUPTI_SUCCESS &&
	    enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS)
		active = 1;
}

__attribute__((visibility("default"))) int tbp_cupti_floor_report(void);
__attribute__((visibility("default"))) int tbp_cupti_floor_report(void)
{
	if (!active)
		return -1;
	flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	size_t dropped = 0;
	if (get_dropped)
		get_dropped(NULL, 0, &dropped);
	const char *out = getenv("TBP_CUPTI_FLOOR_OUT");
	FILE *f = out ? fopen(out, "w") : NULL;
	if (f) {
		fprintf(f, "kernels %llu dropped %zu\n", __atomic_load_n(&kernels, __ATOMIC_RELAXED), dropped);
		fclose(f);
	}
	return 0;
}
