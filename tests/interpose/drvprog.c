/*
 * Driver-API coverage: the same five calls made three ways — linked
 * directly, through dlopen+dlsym by handle (Triton/NCCL style), and through
 * cuGetProcAddress — each must be recorded exactly once.  Prints the
 * results so the run with and without the preload can be compared.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUfunction;
typedef void *CUstream;

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
	unsigned bz, unsigned shm, CUstream s, void **params, void **extra);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);

struct api {
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free_)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*ssync)(CUstream);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		CUstream, void **, void **);
};

static void exercise(const char *how, const struct api *a)
{
	CUdeviceptr p = 0;
	char buf[300] = { 0 };
	int r1 = a->alloc(&p, 300);
	int r2 = a->htod(p, buf, sizeof buf);
	int r3 = a->launch((CUfunction)0x1, 4, 2, 1, 128, 1, 1, 0, (CUstream)0x10, NULL, NULL);
	int r4 = a->ssync((CUstream)0xbad);
	int r5 = a->free_(p);
	printf("%s: %d %d %d %d %d\n", how, r1, r2, r3, r4, r5);
}

int main(void)
{
	struct api direct = { cuMemAlloc_v2, cuMemFree_v2, cuMemcpyHtoD_v2, cuStreamSynchronize, cuLaunchKernel };
	exercise("direct", &direct);

	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen failed\n");
		return 1;
	}
	struct api by_handle = { dlsym(h, "cuMemAlloc_v2"), dlsym(h, "cuMemFree_v2"), dlsym(h, "cuMemcpyHtoD_v2"),
		dlsym(h, "cuStreamSynchronize"), dlsym(h, "cuLaunchKernel") };
	exercise("dlsym", &by_handle);

	CUresult (*gpa)(const char *, void **, int, unsigned long long, int *) = dlsym(h, "cuGetProcAddress_v2");
	struct api by_proc;
	int st;
	gpa("cuMemAlloc", (void **)&by_proc.alloc, 12000, 0, &st);
	gpa("cuMemFree", (void **)&by_proc.free_, 12000, 0, &st);
	gpa("cuMemcpyHtoD", (void **)&by_proc.htod, 12000, 0, &st);
	gpa("cuStreamSynchronize", (void **)&by_proc.ssync, 12000, 0, &st);
	gpa("cuLaunchKernel", (void **)&by_proc.launch, 12000, 0, &st);
	exercise("cuGetProcAddress", &by_proc);
	return 0;
}
