/*
 * launch_loop: N kernel launches through the path nvcc-generated code takes
 * (__cudaGetKernel once, then __cudaPushCallConfiguration /
 * __cudaPopCallConfiguration / __cudaLaunchKernel per launch), for measuring
 * the cost a preloaded profiler adds per launch.  Run it with and without
 * the preload and compare the printed ns/launch; for a clean measurement set
 * SIMGPU_LAUNCH_NS=0 SIMGPU_QUEUE_NS=0 SIMGPU_KERNEL_BASE_NS=0 SIMGPU_KERNEL_NS_PER_BLOCK=0.
 *
 * usage: simgpu_launch_loop [launches=1000000] [threads=1]
 * prints: "launches N threads T ns_per_launch X"
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "test_util.h"

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
	cudaStream_t stream);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);

static long launches_per_thread;
static cudaKernel_t kernel;

static void *launcher(void *arg)
{
	cudaStream_t s = (cudaStream_t)arg;
	float *dummy = NULL;
	void *args[1] = { &dummy };
	dim3 grid = { 1, 1, 1 }, block = { 32, 1, 1 };
	for (long i = 0; i < launches_per_thread; i++) {
		/* What a <<<>>> launch compiles to. */
		__cudaPushCallConfiguration(grid, block, 0, (struct CUstream_st *)s);
		dim3 g, b;
		size_t shmem;
		cudaStream_t st;
		if (__cudaPopCallConfiguration(&g, &b, &shmem, &st) != cudaSuccess ||
		    __cudaLaunchKernel(kernel, g, b, args, shmem, st) != cudaSuccess) {
			fprintf(stderr, "launch_loop: launch %ld failed\n", i);
			exit(1);
		}
	}
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long total = argc > 1 ? atol(argv[1]) : 1000000;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	if (total <= 0 || threads <= 0 || threads > 256) {
		fprintf(stderr, "usage: simgpu_launch_loop [launches>0] [threads 1..256]\n");
		return 3;
	}
	launches_per_thread = total / threads;
	tu_register_kernels();
	if (__cudaGetKernel(&kernel, K_SHORT) != cudaSuccess) {
		fprintf(stderr, "launch_loop: kernel not registered (not running on simgpu?)\n");
		return 1;
	}
	pthread_t tids[256];
	cudaStream_t streams[256];
	for (int t = 0; t < threads; t++)
		if (cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking) != cudaSuccess)
			return 1;
	uint64_t t0 = now_ns();
	if (threads == 1) {
		launcher(streams[0]);
	} else {
		for (int t = 0; t < threads; t++)
			pthread_create(&tids[t], NULL, launcher, streams[t]);
		for (int t = 0; t < threads; t++)
			pthread_join(tids[t], NULL);
	}
	uint64_t t1 = now_ns();
	cudaDeviceSynchronize();
	long done = launches_per_thread * threads;
	printf("launches %ld threads %d ns_per_launch %.1f\n", done, threads, (double)(t1 - t0) / (double)done);
	return 0;
}
