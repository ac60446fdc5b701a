/*
 * simgpu: a stand-in for cuFFT (libcufft.so.12) over the simulated device: plans keep their sizes
 * and stream; an execution enqueues one simulated FFT kernel (named after cuFFT's own, lasting
 * 5 N log2 N flops per transform at SIMGPU_GEMM_TFLOPS), launched through a static runtime as cuFFT
 * launches (simlib.h).  Nothing is computed.  Every other cuFFT function answers CUFFT_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cufftXt.h>

#include "simlib.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_PLANS 4096

static struct plan {
	int used;
	cudaStream_t stream;
	long long elements; /* per transform */
	long long batch;
	int r2c, c2r;
} plans[MAX_PLANS];
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

static struct plan *plan_of(cufftHandle h)
{
	return h > 0 && h < MAX_PLANS && plans[h].used ? &plans[h] : NULL;
}

EXPORT cufftResult cufftCreate(cufftHandle *h)
{
	if (!h)
		return CUFFT_INVALID_VALUE;
	if (!simlib_driver())
		return CUFFT_SETUP_FAILED;
	pthread_mutex_lock(&plans_lock);
	int found = 0;
	for (int i = 1; i < MAX_PLANS; i++) {
		if (!plans[i].used) {
			memset(&plans[i], 0, sizeof(plans[i]));
			plans[i].used = 1;
			*h = i;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&plans_lock);
	return found ? CUFFT_SUCCESS : CUFFT_ALLOC_FAILED;
}

EXPORT cufftResult cufftDestroy(cufftHandle h)
{
	pthread_mutex_lock(&plans_lock);
	struct plan *p = plan_of(h);
	if (p)
		p->used = 0;
	pthread_mutex_unlock(&plans_lock);
	return p ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

EXPORT cufftResult cufftSetStream(cufftHandle h, cudaStream_t s)
{
	struct plan *p = plan_of(h);
	if (!p)
		return CUFFT_INVALID_PLAN;
	p->stream = s;
	return CUFFT_SUCCESS;
}
EXPORT cufftResult cufftSetAutoAllocation(cufftHandle h, int a) { (void)a; return plan_of(h) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN; }
EXPORT cufftResult cufftSetWorkArea(cufftHandle h, void *w) { (void)w; return plan_of(h) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN; }
EXPORT cufftResult cufftGetVersion(int *v)
{
	if (!v)
		return CUFFT_INVALID_VALUE;
	*v = CUFFT_VERSION;
	return CUFFT_SUCCESS;
}

static int complex_type(cudaDataType t)
{
	return t == CUDA_C_32F || t == CUDA_C_64F || t == CUDA_C_16F || t == CUDA_C_16BF;
}

EXPORT cufftResult cufftXtMakePlanMany(cufftHandle h, int rank, long long *n, long long *inembed, long long istride,
	long long idist, cudaDataType itype, long long *onembed, long long ostride, long long odist, cudaDataType otype,
	long long batch, size_t *workSize, cudaDataType etype)
{
	(void)inembed; (void)istride; (void)idist; (void)onembed; (void)ostride; (void)odist; (void)etype;
	struct plan *p = plan_of(h);
	if (!p)
		return CUFFT_INVALID_PLAN;
	if (rank < 1 || rank > 3 || !n || batch < 1)
		return CUFFT_INVALID_VALUE;
	long long e = 1;
	for (int i = 0; i < rank; i++) {
		if (n[i] < 1)
			return CUFFT_INVALID_SIZE;
		e *= n[i];
	}
	p->elements = e;
	p->batch = batch;
	p->r2c = !complex_type(itype) && complex_type(otype);
	p->c2r = complex_type(itype) && !complex_type(otype);
	if (workSize)
		*workSize = 0;
	return CUFFT_SUCCESS;
}

EXPORT cufftResult cufftXtExec(cufftHandle h, void *in, void *out, int direction)
{
	(void)out; (void)direction;
	struct plan *p = plan_of(h);
	if (!p || !p->elements)
		return CUFFT_INVALID_PLAN;
	if (!in)
		return CUFFT_INVALID_VALUE;
	double flops = 5.0 * (double)p->elements * log2((double)(p->elements > 1 ? p->elements : 2)) * (double)p->batch;
	uint64_t ns = simlib_gemm_ns(1, 1, 1, 1, 0) + (uint64_t)(flops / 50e3);
	const char *name = p->r2c ? "regular_fft_r2c_factor" : p->c2r ? "regular_fft_c2r_factor" : "vector_fft_c2c";
	unsigned grid = (unsigned)((p->batch + 3) / 4 > 65535 ? 65535 : (p->batch + 3) / 4);
	CUresult r = simlib_launch(name, grid, 1, 1, 256, (CUstream)p->stream, ns, 0);
	return r == CUDA_SUCCESS ? CUFFT_SUCCESS : CUFFT_EXEC_FAILED;
}

EXPORT int simgpu_cufft_unsupported(const char *name);
EXPORT int simgpu_cufft_unsupported(const char *name)
{
	static int warn = -1;
	if (warn < 0) {
		const char *v = getenv("SIMGPU_WARN_UNSUPPORTED");
		warn = v && strcmp(v, "0") != 0;
	}
	if (warn)
		fprintf(stderr, "simgpu: %s is not simulated (CUFFT_NOT_SUPPORTED)\n", name);
	return CUFFT_NOT_SUPPORTED;
}
