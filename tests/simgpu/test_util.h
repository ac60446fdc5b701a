/* Helpers shared by the C tests of the simgpu suite. */
#ifndef SIMGPU_TEST_UTIL_H
#define SIMGPU_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"

/* nvcc-generated registration entry points (not in the public headers' C view). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun, const char *deviceName,
	int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
	cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);

static int tu_failures;

#define EXPECT(cond, ...) do { if (!(cond)) { tu_failures++; printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
	printf(__VA_ARGS__); printf("\n"); } } while (0)
#define EXPECT_OK(call) do { cudaError_t e_ = (call); EXPECT(e_ == cudaSuccess, "%s returned %s", #call, \
	cudaGetErrorName(e_)); } while (0)

/* Host "stubs": only their addresses matter. */
static char tu_stub_short, tu_stub_long, tu_stub_other;
#define K_SHORT ((const void *)&tu_stub_short)
#define K_LONG ((const void *)&tu_stub_long)
#define K_OTHER ((const void *)&tu_stub_other)

static void tu_register_kernels(void)
{
	static char fatbin[64];
	void **h = __cudaRegisterFatBinary(fatbin);
	__cudaRegisterFunction(h, (const char *)K_SHORT, (char *)"_Z7k_shortv", "_Z7k_shortv", -1, 0, 0, 0, 0, 0);
	__cudaRegisterFunction(h, (const char *)K_LONG, (char *)"_Z6k_longv", "_Z6k_longv", -1, 0, 0, 0, 0, 0);
	__cudaRegisterFunction(h, (const char *)K_OTHER, (char *)"_Z7k_otherPfi", "_Z7k_otherPfi", -1, 0, 0, 0, 0, 0);
	__cudaRegisterFatBinaryEnd(h);
}

static cudaError_t tu_launch(const void *k, cudaStream_t s)
{
	dim3 g = { 4, 1, 1 }, b = { 128, 1, 1 };
	return cudaLaunchKernel(k, g, b, NULL, 0, s);
}

/* Captures every op the runtime logs (the CUPTI stand-in is not loaded in these tests). */
#define TU_MAX_OPS 4096
static struct simgpu_op tu_ops[TU_MAX_OPS];
static int tu_n_ops;
static inline void tu_observer(const struct simgpu_op *op, void *arg)
{
	if (tu_n_ops < TU_MAX_OPS)
		tu_ops[tu_n_ops++] = *op;
}

static inline const struct simgpu_op *tu_last(void) { return tu_n_ops ? &tu_ops[tu_n_ops - 1] : NULL; }

static int tu_finish(const char *name)
{
	if (tu_failures) {
		printf("%s: %d failure(s)\n", name, tu_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

#endif
