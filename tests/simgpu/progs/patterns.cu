// patterns: the inefficiencies tbanalyze must find, planted deliberately.
//  1. a burst of many tiny kernels (one per "parameter", like zero_grad);
//  2. scalar host-to-device copies from pageable memory, each followed by a sync;
//  3. a ping-pong: the same buffer copied host->device->host repeatedly;
//  4. a long host-busy gap (the GPU idles while the CPU computes);
//  5. a long kernel (name "long_kernel": plant its duration with SIMGPU_KERNEL_NS=long_kernel:NS);
//  6. a CUDA graph of three kernels launched twice.
// Output is deterministic.
#include <cstdio>
#include <cstdint>
#include <ctime>
#include <cuda_runtime.h>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_)); return 1; } } while (0)

__global__ void zero_param(float *p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = 0; }
__global__ void rsqrt_scalar(float *x) { x[0] = rsqrtf(x[0]); }
__global__ void long_kernel(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
__global__ void graph_step(float *x, int k) { x[threadIdx.x] += k; }

static uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int main()
{
	const int n_params = 100, param_len = 64;
	float *params;
	CHECK(cudaMalloc(&params, n_params * param_len * sizeof(float)));

	// 1. tiny-kernel burst
	for (int p = 0; p < n_params; p++)
		zero_param<<<1, param_len>>>(params + p * param_len, param_len);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	printf("tiny kernels: %d\n", n_params);

	// 2. scalar H2D from pageable memory + sync, every step
	float *scalar;
	CHECK(cudaMalloc(&scalar, sizeof(float)));
	float acc = 0;
	for (int step = 0; step < 20; step++) {
		float value = (float)(step + 1);
		CHECK(cudaMemcpyAsync(scalar, &value, sizeof(float), cudaMemcpyHostToDevice, 0));
		rsqrt_scalar<<<1, 1>>>(scalar);
		CHECK(cudaStreamSynchronize(0));
		float back;
		CHECK(cudaMemcpy(&back, scalar, sizeof(float), cudaMemcpyDeviceToHost));
		acc += back;
	}
	printf("scalar steps: 20, sum of copied-back scalars: %.0f\n", acc);

	// 3. ping-pong of one buffer
	const size_t pp_bytes = 1 << 20;
	float *host_buf = new float[pp_bytes / sizeof(float)];
	for (size_t i = 0; i < pp_bytes / sizeof(float); i++)
		host_buf[i] = (float)(i & 1023);
	float *dev_buf;
	CHECK(cudaMalloc(&dev_buf, pp_bytes));
	for (int round = 0; round < 5; round++) {
		CHECK(cudaMemcpy(dev_buf, host_buf, pp_bytes, cudaMemcpyHostToDevice));
		CHECK(cudaMemcpy(host_buf, dev_buf, pp_bytes, cudaMemcpyDeviceToHost));
	}
	printf("ping-pong rounds: 5, host_buf[1023] = %.0f\n", host_buf[1023]);

	// 4. host-busy gap of 30 ms with the GPU idle
	uint64_t until = now_ns() + 30000000ull;
	volatile uint64_t spins = 0;
	while (now_ns() < until)
		spins = spins + 1;
	printf("host busy gap: 30 ms\n");

	// 5. a long kernel
	long_kernel<<<1024, 256>>>(dev_buf, 1024 * 256);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	printf("long kernel done\n");

	// 6. a graph: three kernels captured on a stream, launched twice
	cudaStream_t s;
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int k = 0; k < 3; k++)
		graph_step<<<1, 32, 0, s>>>(params, k);
	cudaGraph_t graph;
	CHECK(cudaStreamEndCapture(s, &graph));
	cudaGraphExec_t exec;
	CHECK(cudaGraphInstantiate(&exec, graph, 0));
	CHECK(cudaGraphLaunch(exec, s));
	CHECK(cudaGraphLaunch(exec, s));
	CHECK(cudaStreamSynchronize(s));
	CHECK(cudaGraphExecDestroy(exec));
	CHECK(cudaGraphDestroy(graph));
	CHECK(cudaStreamDestroy(s));
	printf("graph launches: 2 x 3 kernels\n");

	CHECK(cudaFree(dev_buf));
	CHECK(cudaFree(scalar));
	CHECK(cudaFree(params));
	delete[] host_buf;
	printf("patterns done\n");
	return 0;
}
