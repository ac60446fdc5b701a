/*
 * A module unloaded and another loaded at the same address: the same host
 * stub is registered under a second kernel name after launches under the
 * first.  Every launch must carry the name registered when it ran; the
 * launch path's per-thread name cache (interpose/hook.h) must not keep the
 * first.  Checked against simgpu's truth by check_trace.py --truth.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun, const char *deviceName,
	int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

static char stub;   /* the host stub both modules register */

static void **load_module(void *fatbin, const char *mangled)
{
	void **h = __cudaRegisterFatBinary(fatbin);
	__cudaRegisterFunction(h, &stub, (char *)mangled, mangled, -1, 0, 0, 0, 0, 0);
	__cudaRegisterFatBinaryEnd(h);
	return h;
}

static int launch(int times)
{
	dim3 g = { 2, 1, 1 }, b = { 64, 1, 1 };
	for (int i = 0; i < times; i++)
		if (cudaLaunchKernel(&stub, g, b, NULL, 0, 0) != cudaSuccess)
			return 1;
	return cudaDeviceSynchronize() != cudaSuccess;
}

int main(void)
{
	static char first_module[64], second_module[64];
	void **h = load_module(first_module, "_Z8k_beforev");
	if (launch(3))
		return 1;
	__cudaUnregisterFatBinary(h);
	h = load_module(second_module, "_Z7k_afterv");
	if (launch(3))
		return 1;
	__cudaUnregisterFatBinary(h);
	printf("reregister: 6 launches\n");
	return 0;
}
