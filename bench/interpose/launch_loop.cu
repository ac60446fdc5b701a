// Launch-overhead workload: N launches of an empty kernel through the
// nvcc 13 path (__cudaGetKernel + __cudaLaunchKernel), timed on the host.
// Prints "launches=N ns_per_launch=X cpu_ns_per_launch=Y".  Run on simgpu with its launch cost
// set to zero, with and without libtbprof (bench_interpose.py).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void empty_kernel(int x) {}

static double now_ns(clockid_t clock)
{
	timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	// Warm-up, not timed: runtime and tbprof start-up, and 300 ms of launches
	// so the measurement sees the steady state (tbprof's hook clock is
	// calibrated by then).
	// LAUNCH_LOOP_WARMUP=K: exactly K warm-up launches instead (instruction
	// counting under callgrind needs the same count in every run).
	empty_kernel<<<1, 1>>>(0);
	cudaDeviceSynchronize();
	const char *fixed = getenv("LAUNCH_LOOP_WARMUP");
	if (fixed) {
		for (long i = 0, k = atol(fixed); i < k; i++)
			empty_kernel<<<1, 32>>>((int)i);
	} else {
		for (double w0 = now_ns(CLOCK_MONOTONIC); now_ns(CLOCK_MONOTONIC) - w0 < 3e8;)
			for (int i = 0; i < 1000; i++)
				empty_kernel<<<1, 32>>>(i);
	}
	cudaDeviceSynchronize();
	// Wall time, and this thread's CPU time: on a shared machine the thread
	// is often descheduled, which wall time counts and CPU time does not.
	double t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < n; i++)
		empty_kernel<<<1, 32>>>((int)i);
	double t1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	cudaError_t err = cudaDeviceSynchronize();
	printf("launches=%ld ns_per_launch=%.1f cpu_ns_per_launch=%.1f status=%s\n", n, (t1 - t0) / n,
		(c1 - c0) / n, cudaGetErrorName(err));
	return err == cudaSuccess ? 0 : 1;
}
