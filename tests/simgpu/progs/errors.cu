// errors: invalid calls, each returning an error (printed by name), with the
// last-error behaviour shown.  Always exits 0 (the real runtime without a
// driver answers every call with an error of its own, and that is fine),
// so "same output with and without the preload" can be checked everywhere.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void k(float *x) { x[threadIdx.x] = 1; }
__device__ float small_symbol[4];

static void show(const char *what, cudaError_t e)
{
	printf("%-34s -> %s\n", what, cudaGetErrorName(e));
}

int main()
{
	float *dev = nullptr;
	show("cudaMalloc 4 KiB", cudaMalloc(&dev, 4096));
	float host[16] = {0};

	show("cudaMemcpy to bad pointer", cudaMemcpy((void *)0x1000, host, sizeof(host), cudaMemcpyHostToDevice));
	show("cudaGetLastError after it", cudaGetLastError());
	show("cudaGetLastError again", cudaGetLastError());
	if (dev)
		show("cudaMemcpy past the end", cudaMemcpy(dev + 1020, host, sizeof(host), cudaMemcpyHostToDevice));
	show("cudaMemcpy bad direction", cudaMemcpy(dev, host, sizeof(host), (cudaMemcpyKind)7));
	show("cudaFree of garbage", cudaFree((void *)0x5678));
	show("cudaFreeHost of garbage", cudaFreeHost((void *)0x9abc));
	show("cudaMemset of bad pointer", cudaMemset((void *)0x2000, 0, 64));

	k<<<1, 2048>>>(dev);
	show("launch with 2048 threads", cudaGetLastError());
	k<<<dim3(1, 70000), 32>>>(dev);
	show("launch with grid.y 70000", cudaPeekAtLastError());
	show("peek leaves it", cudaGetLastError());

	show("cudaSetDevice(99)", cudaSetDevice(99));
	show("cudaMalloc 1 PiB", cudaMalloc(&dev, (size_t)1 << 50));
	show("cudaMemcpyToSymbol too big", cudaMemcpyToSymbol(small_symbol, host, sizeof(host)));

	cudaEvent_t a, b;
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	float ms;
	show("elapsed time, unrecorded", cudaEventElapsedTime(&ms, a, b));
	show("cudaDeviceSynchronize", cudaDeviceSynchronize());
	printf("errors done\n");
	return 0;
}
