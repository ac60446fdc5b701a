/*
 * GEMMs through libraries that link the CUDA runtime statically (simgpu's
 * cuBLAS and cuBLASLt stand-ins, simlib.h): CUPTI sees each library launch
 * as a runtime API record no preload can hook, the library then calls
 * cuLaunchKernel / cuLaunchKernelEx through the pointer cuGetProcAddress gave
 * it (which libtbprof does hook), and the kernel carries the correlation id
 * of the runtime record, while CUPTI writes no DRIVER record for the driver
 * call inside it, so the id libtbprof pushes there pairs with nothing -- as on
 * an H100 with cuBLAS and cuBLASLt (tests/cupti/conformance/h100.txt).
 * simgpu_truth.py checks that every kernel is joined to the hooked driver
 * call that made it.
 *
 * Two host threads launch GEMMs at once, each on a stream of its own, and a
 * third launches kernels straight through the driver (cuLaunchKernel from
 * cuGetProcAddress, as Triton's launcher does) in a loop, so that other
 * threads' driver calls -- with correlation ids between a runtime call's and
 * its own driver call's -- fall inside a thread's runtime calls (the test
 * makes those calls last: SIMGPU_STATIC_RUNTIME_NS): a join that ignored the
 * thread would pick the wrong launch.  Then three short-lived threads, one
 * after the other, make a few GEMMs each: glibc gives each the pthread_self()
 * of the one before (CUPTI's threadId), and libtbprof gives each a ring of
 * its own while the ended thread's stays readable -- a join that looked in
 * the first ring filed under that id found the ended thread's calls only.
 *
 *   static_runtime [ROUNDS]   prints one line per thread and the total.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define N 256

struct worker {
	int rounds;
	int id;
	int failures;
	int gemms;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	cudaStream_t stream;
	float *a = NULL, *b = NULL, *c = NULL;
	cublasHandle_t blas = NULL;
	cublasLtHandle_t lt = NULL;
	cublasLtMatmulDesc_t desc = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL, lsplit_a = NULL, lsplit_b = NULL;
	float one = 1.0f, zero = 0.0f;

	if (cudaStreamCreate(&stream) != cudaSuccess || cudaMalloc((void **)&a, N * N * 4) != cudaSuccess ||
	    cudaMalloc((void **)&b, N * N * 4) != cudaSuccess || cudaMalloc((void **)&c, N * N * 4) != cudaSuccess ||
	    cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, N, N, N) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, N, N, N) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, N, N) != CUBLAS_STATUS_SUCCESS ||
	    /* K = 8192 against a 64 x 64 output: cuBLASLt splits K (a GEMM and a reduction per call) */
	    cublasLtMatrixLayoutCreate(&lsplit_a, CUDA_R_32F, 64, 8192, 64) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&lsplit_b, CUDA_R_32F, 64, 64, 64) != CUBLAS_STATUS_SUCCESS) {
		w->failures++;
		return NULL;
	}
	if (cudaMemsetAsync(a, 0, N * N * 4, stream) != cudaSuccess)
		w->failures++;
	for (int r = 0; r < w->rounds; r++) {
		if (cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, N, b, N, &zero, c, N) !=
		    CUBLAS_STATUS_SUCCESS)
			w->failures++;
		else
			w->gemms++;
		if (cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, NULL, NULL, 0, stream) !=
		    CUBLAS_STATUS_SUCCESS)
			w->failures++;
		else
			w->gemms++;
		if (cublasLtMatmul(lt, desc, &one, a, lsplit_a, b, lsplit_b, &zero, c, lsplit_b, c, lsplit_b, NULL,
			    NULL, 0, stream) != CUBLAS_STATUS_SUCCESS)
			w->failures++;
		else
			w->gemms++;
	}
	if (cudaStreamSynchronize(stream) != cudaSuccess)
		w->failures++;
	cublasLtMatrixLayoutDestroy(lsplit_b);
	cublasLtMatrixLayoutDestroy(lsplit_a);
	cublasLtMatrixLayoutDestroy(lc);
	cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(la);
	cublasLtMatmulDescDestroy(desc);
	cublasLtDestroy(lt);
	cublasDestroy(blas);
	cudaFree(c);
	cudaFree(b);
	cudaFree(a);
	cudaStreamDestroy(stream);
	return NULL;
}

static atomic_int gemm_threads_running;

/* Driver launches in a loop while the GEMM threads run (at least `rounds`). */
static void *driver_launches(void *arg)
{
	struct worker *w = arg;
	typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	gpa_fn gpa = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
	CUresult (*load)(CUmodule *, const void *) = NULL;
	CUresult (*get)(CUfunction *, CUmodule, const char *) = NULL;
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
		void **, void **) = NULL;
	CUresult (*sync)(CUstream) = NULL;
	CUdriverProcAddressQueryResult st;
	CUmodule module;
	CUfunction f;
	static const char image[] = "static_runtime driver module";
	if (!gpa || gpa("cuModuleLoadData", (void **)&load, 12000, 0, &st) != CUDA_SUCCESS ||
	    gpa("cuModuleGetFunction", (void **)&get, 12000, 0, &st) != CUDA_SUCCESS ||
	    gpa("cuLaunchKernel", (void **)&launch, 12000, 0, &st) != CUDA_SUCCESS ||
	    gpa("cuStreamSynchronize", (void **)&sync, 12000, 0, &st) != CUDA_SUCCESS ||
	    load(&module, image) != CUDA_SUCCESS || get(&f, module, "triton_poi_fused_add_0") != CUDA_SUCCESS) {
		w->failures++;
		return NULL;
	}
	for (int i = 0; i < w->rounds || atomic_load(&gemm_threads_running); i++) {
		if (launch(f, 4, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
			w->failures++;
		else
			w->gemms++;
	}
	if (sync(NULL) != CUDA_SUCCESS)
		w->failures++;
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	if (rounds <= 0)
		rounds = 20;
	struct worker w[3] = { { rounds, 0, 0, 0 }, { rounds, 1, 0, 0 }, { rounds, 2, 0, 0 } };
	pthread_t th[2];
	atomic_store(&gemm_threads_running, 1);
	if (pthread_create(&th[0], NULL, work, &w[1]) != 0 ||
	    pthread_create(&th[1], NULL, driver_launches, &w[2]) != 0) {
		fprintf(stderr, "static_runtime: pthread_create failed\n");
		return 2;
	}
	work(&w[0]);
	pthread_join(th[0], NULL);
	atomic_store(&gemm_threads_running, 0);
	pthread_join(th[1], NULL);
	struct worker later[3] = { { 2, 3, 0, 0 }, { 2, 4, 0, 0 }, { 2, 5, 0, 0 } };
	for (int i = 0; i < 3; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, work, &later[i]) != 0) {
			fprintf(stderr, "static_runtime: pthread_create failed\n");
			return 2;
		}
		pthread_join(t, NULL);
	}
	int failures = later[0].failures + later[1].failures + later[2].failures;
	for (int i = 0; i < 3; i++) {
		printf("thread %d: %s\n", i, i < 2 ? "GEMM calls" : "driver launches");
		failures += w[i].failures;
	}
	if (cudaDeviceSynchronize() != cudaSuccess)
		failures++;
	printf("failures: %d\n", failures);
	return failures ? 1 : 0;
}
