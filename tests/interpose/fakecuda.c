/*
 * A tiny stand-in for the CUDA driver (libcuda.so.1) for the driver-hook
 * test: a handful of entry points that succeed and do nothing, plus
 * cuGetProcAddress_v2 and cuFuncGetName.  simgpu simulates only the runtime.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUfunction;
typedef void *CUstream;

#define API __attribute__((visibility("default")))

static CUdeviceptr next_ptr = 0x7f0000000000ull;

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = next_ptr; next_ptr += (n + 255) & ~255ull; return 0; }
API CUresult cuMemFree_v2(CUdeviceptr p) { (void)p; return 0; }
API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { (void)d; (void)s; (void)n; return 0; }
API CUresult cuCtxSynchronize(void) { return 0; }
API CUresult cuStreamSynchronize(CUstream s) { (void)s; return s == (CUstream)0xbad ? 400 : 0; }
API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
	unsigned bz, unsigned shm, CUstream s, void **params, void **extra)
{
	(void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm; (void)s;
	(void)params; (void)extra;
	return 0;
}
/* Named so the test can find it in the DEVICE record. */
API CUresult cuDeviceGet(int *dev, int ordinal) { *dev = 100 + ordinal; return ordinal == 0 ? 0 : 101; }
API CUresult cuDeviceGetName(char *name, int len, int dev)
{
	if (dev != 100 || len < 1)
		return 101;
	snprintf(name, (size_t)len, "tbprof fake GPU");
	return 0;
}
API CUresult cuFuncGetName(const char **name, CUfunction f)
{
	*name = f == (CUfunction)0x1 ? "_Z6kernelPfi" : "_Z5otherv";
	return 0;
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
	int *status)
{
	(void)version; (void)flags;
	static const struct { const char *name; void *fn; } table[] = {
		{ "cuMemAlloc", (void *)cuMemAlloc_v2 }, { "cuMemFree", (void *)cuMemFree_v2 },
		{ "cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2 }, { "cuCtxSynchronize", (void *)cuCtxSynchronize },
		{ "cuStreamSynchronize", (void *)cuStreamSynchronize }, { "cuLaunchKernel", (void *)cuLaunchKernel },
		{ "cuFuncGetName", (void *)cuFuncGetName }, { "cuGetProcAddress", (void *)cuGetProcAddress_v2 },
	};
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (!strcmp(table[i].name, symbol)) {
			*pfn = table[i].fn;
			if (status)
				*status = 0;
			return 0;
		}
	*pfn = NULL;
	if (status)
		*status = 1;
	return 500;   /* CUDA_ERROR_NOT_FOUND */
}
