// GPU workload for the cupti suite: every kind of GPU activity tbprof takes
// from CUPTI (kernels, copies of each direction and memory kind, memsets,
// synchronizations), from two host threads and two streams.  Built by nvcc
// with -cudart shared so it runs on simgpu's libcudart.so.13.  Its stdout
// depends only on the API results, so runs with and without the preload
// can be compared byte for byte.
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__global__ void scale(float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= a;
}

template <typename T, int K> __global__ void accumulate(T *dst, const T *src, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] += src[i] * K;
}

namespace tbp { __global__ void tiny(int *flag) { *flag = 1; } }

static int failures;
static void check(cudaError_t e, const char *what)
{
	printf("%-28s %s\n", what, cudaGetErrorName(e));
	if (e != cudaSuccess)
		failures++;
}

struct worker_args { float *dev; int n; int launches; cudaError_t result; };

static void *worker(void *p)
{
	struct worker_args *w = (struct worker_args *)p;
	cudaStream_t s;
	cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	for (int i = 0; e == cudaSuccess && i < w->launches; i++) {
		scale<<<(w->n + 127) / 128, 128, 0, s>>>(w->dev, 1.0f, w->n);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	if (e == cudaSuccess)
		e = cudaStreamDestroy(s);
	w->result = e;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = 1 << 16;
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	size_t bytes = n * sizeof(float);
	float *host = (float *)malloc(bytes), *pinned = NULL, *a = NULL, *b = NULL;
	int *flag = NULL;
	cudaStream_t s1, s2;
	cudaEvent_t ev;
	for (int i = 0; i < n; i++)
		host[i] = (float)i;

	check(cudaMalloc((void **)&a, bytes), "cudaMalloc a");
	check(cudaMalloc((void **)&b, bytes), "cudaMalloc b");
	check(cudaMalloc((void **)&flag, sizeof(int)), "cudaMalloc flag");
	check(cudaMallocHost((void **)&pinned, bytes), "cudaMallocHost");
	check(cudaStreamCreate(&s1), "cudaStreamCreate s1");
	check(cudaStreamCreate(&s2), "cudaStreamCreate s2");
	check(cudaEventCreate(&ev), "cudaEventCreate");
	if (failures) {
		printf("setup failed\n");
		return 1;
	}
	memcpy(pinned, host, bytes);

	for (int r = 0; r < rounds; r++) {
		check(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice), "memcpy H2D pageable");
		check(cudaMemcpyAsync(b, pinned, bytes, cudaMemcpyHostToDevice, s1), "memcpyAsync H2D pinned");
		check(cudaMemsetAsync(flag, 0, sizeof(int), s1), "memsetAsync");
		scale<<<n / 256, 256, 0, s1>>>(b, 2.0f, n);
		check(cudaGetLastError(), "launch scale");
		accumulate<float, 3><<<n / 128, 128, 64, s1>>>(a, b, n);
		check(cudaGetLastError(), "launch accumulate");
		check(cudaEventRecord(ev, s1), "cudaEventRecord");
		check(cudaStreamWaitEvent(s2, ev, 0), "cudaStreamWaitEvent");
		tbp::tiny<<<1, 1, 0, s2>>>(flag);
		check(cudaGetLastError(), "launch tiny");
		check(cudaMemcpyAsync(pinned, a, bytes, cudaMemcpyDeviceToHost, s2), "memcpyAsync D2H pinned");
		check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "memcpy D2D");
		check(cudaMemset(a, 0, bytes), "memset");
		check(cudaEventSynchronize(ev), "cudaEventSynchronize");
		check(cudaStreamSynchronize(s2), "cudaStreamSynchronize");
		int scalar = 0;
		check(cudaMemcpy(&scalar, flag, sizeof(int), cudaMemcpyDeviceToHost), "memcpy D2H scalar");
	}

	struct worker_args w = { b, n, 5, cudaSuccess };
	pthread_t t;
	pthread_create(&t, NULL, worker, &w);
	pthread_join(t, NULL);
	check(w.result, "worker thread");
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

	check(cudaEventDestroy(ev), "cudaEventDestroy");
	check(cudaStreamDestroy(s1), "cudaStreamDestroy s1");
	check(cudaStreamDestroy(s2), "cudaStreamDestroy s2");
	check(cudaFreeHost(pinned), "cudaFreeHost");
	check(cudaFree(a), "cudaFree a");
	check(cudaFree(b), "cudaFree b");
	check(cudaFree(flag), "cudaFree flag");
	free(host);
	printf("workload: %d rounds, %d failures\n", rounds, failures);
	return failures ? 1 : 0;
}
