/*
 * A planted workload in C, on simgpu through dlopen (no CUDA headers or
 * libraries needed at build time): kernels are registered the way nvcc's
 * generated code does.  No Python here, so findings are named by native
 * frames; each pattern lives in its own function (plant_*) that the test
 * finds by symbolizing the reported frames.
 *
 *   planted_native STEPS     (LD_LIBRARY_PATH must reach simgpu)
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct { unsigned x, y, z; } dim3_t;
typedef int (*launch_fn)(const void *, dim3_t, dim3_t, void **, size_t, void *);
typedef int (*memcpy_async_fn)(void *, const void *, size_t, int, void *);
typedef int (*sync_fn)(void *);
typedef int (*malloc_fn)(void **, size_t);
typedef void **(*regfat_fn)(void *);
typedef void (*regfatend_fn)(void **);
typedef void (*regfun_fn)(void **, const char *, char *, const char *, int, void *, void *, void *, void *, int *);

static launch_fn cuLaunch;
static memcpy_async_fn cuMemcpyAsync;
static sync_fn cuStreamSync;
static char stub_big, stub_tiny;
static void *dbuf;
static int n_arg = 16;

static void *need(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "planted_native: %s missing\n", name);
		exit(1);
	}
	return p;
}

static void check(const char *what, int err)
{
	if (err) {
		fprintf(stderr, "planted_native: %s failed (%d)\n", what, err);
		exit(1);
	}
}

static void launch(const void *stub)
{
	void *args[2] = {&dbuf, &n_arg};
	dim3_t one = {1, 1, 1};
	check("cudaLaunchKernel", cuLaunch(stub, one, one, args, 0, NULL));
}

__attribute__((noinline)) void plant_burst(void)
{
	for (int i = 0; i < 20; i++)
		launch(&stub_tiny);
}

__attribute__((noinline)) void plant_scalar(float v)
{
	/* A 4-byte copy from pageable stack memory, then a sync. */
	check("cudaMemcpyAsync", cuMemcpyAsync(dbuf, &v, sizeof v, 1 /* H2D */, NULL));
	check("cudaStreamSynchronize", cuStreamSync(NULL));
}

__attribute__((noinline)) void forward(void)
{
	for (int i = 0; i < 4; i++)
		launch(&stub_big);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 6;
	void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (!rt) {
		fprintf(stderr, "planted_native: %s\n", dlerror());
		return 1;
	}
	cuLaunch = (launch_fn)need(rt, "cudaLaunchKernel");
	cuMemcpyAsync = (memcpy_async_fn)need(rt, "cudaMemcpyAsync");
	cuStreamSync = (sync_fn)need(rt, "cudaStreamSynchronize");
	malloc_fn cuMalloc = (malloc_fn)need(rt, "cudaMalloc");
	static char fatbin[64];
	void **h = ((regfat_fn)need(rt, "__cudaRegisterFatBinary"))(fatbin);
	regfun_fn reg = (regfun_fn)need(rt, "__cudaRegisterFunction");
	reg(h, &stub_big, "_Z10big_matmulPfi", "_Z10big_matmulPfi", -1, NULL, NULL, NULL, NULL, NULL);
	reg(h, &stub_tiny, "_Z9tiny_zeroPfi", "_Z9tiny_zeroPfi", -1, NULL, NULL, NULL, NULL, NULL);
	((regfatend_fn)need(rt, "__cudaRegisterFatBinaryEnd"))(h);
	check("cudaMalloc", cuMalloc(&dbuf, 1 << 20));
	for (int s = 0; s < steps; s++) {
		forward();
		plant_scalar(0.5f * (float)s);
		plant_burst();
		forward();
		check("cudaStreamSynchronize", cuStreamSync(NULL));
	}
	printf("planted_native done: %d steps\n", steps);
	return 0;
}
