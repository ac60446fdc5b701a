// vecadd: the basic life cycle of a CUDA program, for simgpu and tbprof tests.
// Allocations, pageable and pinned copies, kernels on two streams (one
// blocking, one non-blocking), memsets, events, every kind of sync, frees.
// Output is deterministic on simgpu (kernels do not run there, so only values
// moved by copies and memsets are printed).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_)); return 1; } } while (0)

__global__ void vecadd(float *c, const float *a, const float *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void scale(float *x, float f, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= f;
}

int main()
{
	const int n = 1 << 16;
	const size_t bytes = n * sizeof(float);
	float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c;
	for (int i = 0; i < n; i++) {
		a[i] = (float)(i % 100);
		b[i] = (float)(i % 7);
	}
	float *da, *db, *dc;
	CHECK(cudaMalloc(&da, bytes));
	CHECK(cudaMalloc(&db, bytes));
	CHECK(cudaMalloc(&dc, bytes));
	CHECK(cudaMallocHost(&c, bytes));

	CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));

	cudaStream_t s1, s2;
	CHECK(cudaStreamCreate(&s1));
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	cudaEvent_t start, stop;
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));

	CHECK(cudaEventRecord(start, s1));
	vecadd<<<n / 256, 256, 0, s1>>>(dc, da, db, n);
	CHECK(cudaGetLastError());
	scale<<<n / 256, 256, 0, s2>>>(db, 2.0f, n);
	CHECK(cudaGetLastError());
	CHECK(cudaEventRecord(stop, s1));
	CHECK(cudaMemsetAsync(dc, 0, bytes, s2));
	CHECK(cudaStreamWaitEvent(s2, stop, 0));
	CHECK(cudaMemcpyAsync(c, da, bytes, cudaMemcpyDeviceToHost, s1));
	CHECK(cudaStreamSynchronize(s1));
	CHECK(cudaStreamSynchronize(s2));
	CHECK(cudaEventSynchronize(stop));
	float ms = -1;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	printf("elapsed time measured: %s\n", ms >= 0 ? "yes" : "no");

	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += c[i];
	printf("checksum of a via device: %.0f\n", sum);

	CHECK(cudaMemset(dc, 1, bytes));
	unsigned char *back = (unsigned char *)malloc(bytes);
	CHECK(cudaMemcpy(back, dc, bytes, cudaMemcpyDeviceToHost));
	printf("memset byte: %d %d\n", back[0], back[bytes - 1]);
	CHECK(cudaMemcpy(back, db, bytes, cudaMemcpyDeviceToHost));
	printf("b round trip: %s\n", memcmp(back, b, bytes) == 0 ? "equal" : "different");
	CHECK(cudaDeviceSynchronize());

	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	CHECK(cudaStreamDestroy(s1));
	CHECK(cudaStreamDestroy(s2));
	CHECK(cudaFree(da));
	CHECK(cudaFree(db));
	CHECK(cudaFree(dc));
	CHECK(cudaFreeHost(c));
	free(a);
	free(b);
	free(back);
	printf("vecadd done\n");
	return 0;
}
