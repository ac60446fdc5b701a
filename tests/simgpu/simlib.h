/*
 * What the library stand-ins (cuBLAS, cuBLASLt) share: a kernel launch made the way a CUDA library
 * with a statically linked runtime makes it.  The library's runtime call is invisible to any preload
 * (simgpu_static_begin/end record it for CUPTI), and the runtime reaches the driver through an entry
 * point it got from cuGetProcAddress, which it found with dlsym on libcuda.so.1 (so a profiler that
 * wraps dlsym or cuGetProcAddress sees the driver call, as on a real machine).
 */
#ifndef SIMGPU_SIMLIB_H
#define SIMGPU_SIMLIB_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda.h>

#include "simgpu.h"

void simgpu_next_kernel_ns(uint64_t ns);

struct simlib_driver {
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		CUstream, void **, void **);
	CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*library_load)(CUlibrary *, const void *, CUjit_option *, void **, unsigned, CUlibraryOption *,
		void **, unsigned);
	CUresult (*get_kernel)(CUkernel *, CUlibrary, const char *);
	CUresult (*memset_async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUmodule module;
	CUlibrary library;
};

static struct simlib_driver simlib_drv;
static pthread_once_t simlib_once = PTHREAD_ONCE_INIT;

static void simlib_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		return;
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
		(CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(h,
			"cuGetProcAddress_v2");
	if (!gpa)
		return;
	CUdriverProcAddressQueryResult st;
	gpa("cuLaunchKernel", (void **)&simlib_drv.launch, 12000, 0, &st);
	gpa("cuLaunchKernelEx", (void **)&simlib_drv.launch_ex, 12000, 0, &st);
	gpa("cuModuleLoadData", (void **)&simlib_drv.module_load, 12000, 0, &st);
	gpa("cuModuleGetFunction", (void **)&simlib_drv.get_function, 12000, 0, &st);
	gpa("cuLibraryLoadData", (void **)&simlib_drv.library_load, 12000, 0, &st);
	gpa("cuLibraryGetKernel", (void **)&simlib_drv.get_kernel, 12000, 0, &st);
	gpa("cuMemsetD8Async", (void **)&simlib_drv.memset_async, 12000, 0, &st);
	static const char image[] = "simgpu library module";
	if (simlib_drv.module_load && simlib_drv.module_load(&simlib_drv.module, image) != CUDA_SUCCESS)
		simlib_drv.module = NULL;
	if (!simlib_drv.library_load || !simlib_drv.get_kernel ||
	    simlib_drv.library_load(&simlib_drv.library, image, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS)
		simlib_drv.library = NULL;
}

static inline const struct simlib_driver *simlib_driver(void)
{
	pthread_once(&simlib_once, simlib_load);
	return simlib_drv.module && simlib_drv.library && simlib_drv.launch && simlib_drv.launch_ex ? &simlib_drv
												     : NULL;
}

/* The static runtime's own work inside its call, before it reaches the driver (checking arguments,
 * packing parameters): SIMGPU_STATIC_RUNTIME_NS of host time (default 0).  A longer call lets other
 * threads' driver calls fall inside it, as they do on a busy machine. */
/* The knobs, read once (pthread_once: the library's threads all launch). */
static struct { int64_t runtime_ns; double tflops[2]; uint64_t gemm_base_ns; } simlib_knobs;
static pthread_once_t simlib_knobs_once = PTHREAD_ONCE_INIT;

static void simlib_read_knobs(void)
{
	const char *v = getenv("SIMGPU_STATIC_RUNTIME_NS");
	simlib_knobs.runtime_ns = v ? (int64_t)strtoull(v, NULL, 10) : 0;
	simlib_knobs.tflops[0] = (v = getenv("SIMGPU_GEMM_TFLOPS")) && atof(v) > 0 ? atof(v) : 50.0;
	simlib_knobs.tflops[1] = (v = getenv("SIMGPU_GEMM_TC_TFLOPS")) && atof(v) > 0 ? atof(v) : 500.0;
	simlib_knobs.gemm_base_ns = (v = getenv("SIMGPU_GEMM_BASE_NS")) ? strtoull(v, NULL, 10) : 3000;
}

static inline void simlib_runtime_work(void)
{
	pthread_once(&simlib_knobs_once, simlib_read_knobs);
	int64_t ns = simlib_knobs.runtime_ns;
	if (ns > 0) {
		uint64_t until = simgpu_now_ns() + (uint64_t)ns;
		while (simgpu_now_ns() < until)
			; /* spin: a sleep would let the scheduler decide what overlaps */
	}
}

/* Launches kernel `name` on `stream` lasting `ns`, through cuLaunchKernelEx (ex != 0, as cuBLASLt does)
 * or cuLaunchKernel, inside a static runtime call.  Returns the driver's result. */
static inline CUresult simlib_launch(const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned block,
	CUstream stream, uint64_t ns, int ex)
{
	const struct simlib_driver *d = simlib_driver();
	if (!d)
		return CUDA_ERROR_NO_DEVICE;
	/* cuBLASLt's launches (ex) pass a CUkernel, as a statically linked runtime that loads its kernels as a
	 * CUlibrary does: only cuKernelGetName names it (the H100's cuLaunchKernelEx records had none from
	 * cuFuncGetName).  cuBLAS and cuFFT pass a CUfunction. */
	CUfunction f;
	CUresult r = ex ? d->get_kernel((CUkernel *)&f, d->library, name) : d->get_function(&f, d->module, name);
	if (r != CUDA_SUCCESS)
		return r;
	simgpu_static_begin(ex ? "cudaLaunchKernelExC" : "cudaLaunchKernel");
	simlib_runtime_work();
	simgpu_next_kernel_ns(ns);
	if (ex) {
		CUlaunchConfig cfg = { 0 };
		cfg.gridDimX = gx; cfg.gridDimY = gy; cfg.gridDimZ = gz;
		cfg.blockDimX = block; cfg.blockDimY = 1; cfg.blockDimZ = 1;
		cfg.sharedMemBytes = 0;
		cfg.hStream = stream;
		r = d->launch_ex(&cfg, f, NULL, NULL);
	} else {
		r = d->launch(f, gx, gy, gz, block, 1, 1, 0, stream, NULL, NULL);
	}
	simgpu_next_kernel_ns(0);
	simgpu_static_end(r == CUDA_SUCCESS ? 0 : 1);
	return r;
}

/* A memset the library's static runtime makes (cudaMemsetAsync inside the library, cuMemsetD8Async
 * through the driver entry point): on an H100 cuBLASLt's split-K GEMMs came with one each (issue #24:
 * 72 memsets carrying the correlation id of a cudaMemsetAsync_v3020 RUNTIME record). */
static inline CUresult simlib_memset(void *ptr, size_t bytes, CUstream stream)
{
	const struct simlib_driver *d = simlib_driver();
	if (!d || !d->memset_async)
		return CUDA_ERROR_NO_DEVICE;
	simgpu_static_begin("cudaMemsetAsync");
	simlib_runtime_work();
	CUresult r = d->memset_async((CUdeviceptr)(uintptr_t)ptr, 0, bytes, stream);
	simgpu_static_end(r == CUDA_SUCCESS ? 0 : 1);
	return r;
}

/* Whether a column-major rows x cols matrix (elements of `elem` bytes, leading dimension ld) at p lies in
 * device memory.  Batched routines get their matrices from pointer arrays that PyTorch fills with a
 * kernel, and kernels compute nothing: such an array holds zeros or stale bytes, and the routine then
 * computes nothing for that matrix either (as a kernel), instead of reading wherever the bytes point. */
static inline int simlib_matrix_ok(const void *p, size_t elem, long rows, long cols, long ld)
{
	if (rows <= 0 || cols <= 0)
		return 1;
	return simgpu_device_range_ok(p, elem * ((size_t)ld * (size_t)(cols - 1) + (size_t)rows));
}

/* Duration of a GEMM of 2*m*n*k*batch flops: SIMGPU_GEMM_TFLOPS (fp32/fp64, default 50) or
 * SIMGPU_GEMM_TC_TFLOPS (tensor-core types: fp16, bf16, tf32, fp8; default 500), plus
 * SIMGPU_GEMM_BASE_NS (default 3000). */
static inline uint64_t simlib_gemm_ns(uint64_t m, uint64_t n, uint64_t k, uint64_t batch, int tensor_core)
{
	pthread_once(&simlib_knobs_once, simlib_read_knobs);
	double flops = 2.0 * (double)m * (double)n * (double)k * (double)(batch ? batch : 1);
	/* TFLOP/s = 1e3 flop per ns */
	return simlib_knobs.gemm_base_ns + (uint64_t)(flops / (simlib_knobs.tflops[tensor_core ? 1 : 0] * 1e3));
}

#endif
