/*
 * A library that uses HIP, loaded by hip_dlopen_main with RTLD_LOCAL: the
 * way Python loads ROCm PyTorch (libtorch_hip.so and, as its dependency,
 * libamdhip64).  The HIP runtime is then not in the global scope, and a
 * preloaded profiler must still reach it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <hip/hip_runtime_api.h>

void *__hipRegisterFatBinary(const void *data);
void __hipRegisterFunction(void *modules, const void *hostFunction, char *deviceFunction,
			   const char *deviceName, unsigned int threadLimit, void *tid, void *bid,
			   dim3 *blockDim, dim3 *gridDim, int *wSize);

static FILE *calls_log;

static hipError_t logged(const char *api, hipError_t e)
{
	if (calls_log)
		fprintf(calls_log, "%s %d\n", api, (int)e);
	return e;
}
#define CALL(api, args) logged(#api, api args)

static void local_kernel(void)
{
}

/* As hipcc does: registration from the library's constructor. */
__attribute__((constructor)) static void register_kernels(void)
{
	static const struct { unsigned magic, version; const void *bin; void *unused; } wrapper = {
		0x48495046u, 1, "code", NULL };
	void *mods = __hipRegisterFatBinary(&wrapper);
	__hipRegisterFunction(mods, (const void *)local_kernel, "_Z12local_kernelv", "_Z12local_kernelv",
			      (unsigned)-1, NULL, NULL, NULL, NULL, NULL);
}

/* Returns the number of failed calls; prints what it saw. */
__attribute__((visibility("default"))) int run_hip_work(const char *calls_path)
{
	calls_log = calls_path ? fopen(calls_path, "w") : NULL;
	int failed = 0;
	void *dev = NULL;
	int host[64];
	for (int i = 0; i < 64; i++)
		host[i] = i;
	failed += CALL(hipMalloc, (&dev, sizeof host)) != hipSuccess;
	failed += CALL(hipMemcpy, (dev, host, sizeof host, hipMemcpyHostToDevice)) != hipSuccess;
	dim3 g = { 2, 1, 1 }, b = { 32, 1, 1 };
	for (int i = 0; i < 3; i++)
		failed += CALL(hipLaunchKernel, ((const void *)local_kernel, g, b, NULL, 0, NULL)) != hipSuccess;
	failed += CALL(hipMemset, (dev, 0, 16)) != hipSuccess;
	failed += CALL(hipMemcpy, (host, dev, sizeof host, hipMemcpyDeviceToHost)) != hipSuccess;
	failed += CALL(hipDeviceSynchronize, ()) != hipSuccess;
	failed += CALL(hipFree, (dev)) != hipSuccess;
	printf("local library: host[0..4] = %d %d %d %d %d, failed calls %d\n", host[0], host[1],
	       host[2], host[3], host[4], failed);
	if (calls_log)
		fclose(calls_log);
	return failed;
}
