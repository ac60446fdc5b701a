// kernels_lib: CUDA kernels in a shared library that a Python program loads
// with ctypes, as PyTorch's libtorch_cuda.so is loaded: the fat binary and the
// kernels are registered by the library's constructor at dlopen time, and the
// launches go through nvcc's __cudaLaunchKernel path.
#include <cuda_runtime.h>

__global__ void scale_inplace(float *x, float factor, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= factor;
}

__global__ void add_scalar(float *x, float value, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += value;
}

extern "C" int simgpu_kernels_scale(float *x, int n, float factor, cudaStream_t stream)
{
	scale_inplace<<<(n + 255) / 256, 256, 0, stream>>>(x, factor, n);
	return (int)cudaGetLastError();
}

extern "C" int simgpu_kernels_add(float *x, int n, float value, cudaStream_t stream)
{
	add_scalar<<<(n + 255) / 256, 256, 0, stream>>>(x, value, n);
	return (int)cudaGetLastError();
}
