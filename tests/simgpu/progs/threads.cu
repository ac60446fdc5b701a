// threads: 32 host threads launching at once, each on its own stream, plus
// copies; checks every thread's data came back.  Deterministic output.
#include <cstdio>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

__global__ void bump(int *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }

static const int n_threads = 32, launches = 50, len = 256;

static void worker(int id, int *ok)
{
	cudaStream_t s;
	int *dev;
	int host[len], back[len];
	for (int i = 0; i < len; i++)
		host[i] = id * 1000 + i;
	if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&dev, sizeof(host)) != cudaSuccess)
		return;
	cudaMemcpyAsync(dev, host, sizeof(host), cudaMemcpyHostToDevice, s);
	for (int l = 0; l < launches; l++)
		bump<<<1, len, 0, s>>>(dev, len);
	cudaMemcpyAsync(back, dev, sizeof(back), cudaMemcpyDeviceToHost, s);
	cudaStreamSynchronize(s);
	int same = 1;
	for (int i = 0; i < len; i++)
		same &= back[i] == host[i];
	cudaFree(dev);
	cudaStreamDestroy(s);
	*ok = same && cudaGetLastError() == cudaSuccess;
}

int main()
{
	std::vector<std::thread> threads;
	std::vector<int> ok(n_threads, 0);
	for (int t = 0; t < n_threads; t++)
		threads.emplace_back(worker, t, &ok[t]);
	for (auto &t : threads)
		t.join();
	int good = 0;
	for (int v : ok)
		good += v;
	cudaDeviceSynchronize();
	printf("threads: %d, launches each: %d, threads with data back intact: %d\n", n_threads, launches, good);
	return good == n_threads ? 0 : 1;
}
