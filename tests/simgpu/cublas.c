/*
 * simgpu: a stand-in for cuBLAS (libcublas.so.13) over the simulated device.
 *
 * Handles keep their stream, math and pointer modes; GEMMs (plain, Ex, strided-batched, batched, in
 * every type PyTorch uses) and GEMVs enqueue one simulated kernel named as cuBLAS names its kernels on
 * Hopper, lasting its FLOPs at a configurable rate (simlib.h), launched the way cuBLAS launches: from
 * its statically linked runtime, through the driver entry point (simlib_launch).  Nothing is computed:
 * output matrices keep what they held.  Every other cuBLAS function exists (cublas_stubs.inc) and
 * answers CUBLAS_STATUS_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "simlib.h"

#define EXPORT __attribute__((visibility("default")))

struct cublasContext {
	cudaStream_t stream;
	cublasMath_t math_mode;
	cublasPointerMode_t pointer_mode;
	int sm_count_target;
};

static cublasStatus_t status_of(CUresult r)
{
	return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
	if (!handle)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!simlib_driver())
		return CUBLAS_STATUS_NOT_INITIALIZED;
	struct cublasContext *h = calloc(1, sizeof(*h));
	if (!h)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*handle = h;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!s)
		return CUBLAS_STATUS_INVALID_VALUE;
	*s = h->stream;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t n)
{
	(void)ws; (void)n;
	return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->math_mode = m;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *m)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!m)
		return CUBLAS_STATUS_INVALID_VALUE;
	*m = h->math_mode;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t m)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->pointer_mode = m;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t *m)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!m)
		return CUBLAS_STATUS_INVALID_VALUE;
	*m = h->pointer_mode;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasSetSmCountTarget(cublasHandle_t h, int n)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->sm_count_target = n;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGetSmCountTarget(cublasHandle_t h, int *n)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!n)
		return CUBLAS_STATUS_INVALID_VALUE;
	*n = h->sm_count_target;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v)
{
	(void)h;
	if (!v)
		return CUBLAS_STATUS_INVALID_VALUE;
	*v = CUBLAS_VERSION;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT size_t cublasGetCudartVersion(void) { return CUDART_VERSION; }
EXPORT cublasStatus_t cublasGetProperty(libraryPropertyType t, int *v)
{
	if (!v)
		return CUBLAS_STATUS_INVALID_VALUE;
	*v = t == MAJOR_VERSION ? CUBLAS_VER_MAJOR : t == MINOR_VERSION ? CUBLAS_VER_MINOR : CUBLAS_VER_PATCH;
	return CUBLAS_STATUS_SUCCESS;
}

static const char *const status_names[] = {
	[CUBLAS_STATUS_SUCCESS] = "CUBLAS_STATUS_SUCCESS",
	[CUBLAS_STATUS_NOT_INITIALIZED] = "CUBLAS_STATUS_NOT_INITIALIZED",
	[CUBLAS_STATUS_ALLOC_FAILED] = "CUBLAS_STATUS_ALLOC_FAILED",
	[CUBLAS_STATUS_INVALID_VALUE] = "CUBLAS_STATUS_INVALID_VALUE",
	[CUBLAS_STATUS_ARCH_MISMATCH] = "CUBLAS_STATUS_ARCH_MISMATCH",
	[CUBLAS_STATUS_MAPPING_ERROR] = "CUBLAS_STATUS_MAPPING_ERROR",
	[CUBLAS_STATUS_EXECUTION_FAILED] = "CUBLAS_STATUS_EXECUTION_FAILED",
	[CUBLAS_STATUS_INTERNAL_ERROR] = "CUBLAS_STATUS_INTERNAL_ERROR",
	[CUBLAS_STATUS_NOT_SUPPORTED] = "CUBLAS_STATUS_NOT_SUPPORTED",
	[CUBLAS_STATUS_LICENSE_ERROR] = "CUBLAS_STATUS_LICENSE_ERROR",
};
EXPORT const char *cublasGetStatusName(cublasStatus_t s)
{
	return (unsigned)s < sizeof(status_names) / sizeof(status_names[0]) && status_names[s] ? status_names[s]
											 : "CUBLAS_STATUS_UNKNOWN";
}
EXPORT const char *cublasGetStatusString(cublasStatus_t s) { return cublasGetStatusName(s); }

/* ------------------------------------------------------------------ GEMM, GEMV */

static char op_letter(cublasOperation_t o) { return o == CUBLAS_OP_N ? 'n' : 't'; }

static int tensor_core_type(cudaDataType t)
{
	return t == CUDA_R_16F || t == CUDA_R_16BF || t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2 ||
	       t == CUDA_C_16F || t == CUDA_C_16BF;
}

static const char *type_tag(cudaDataType t)
{
	switch (t) {
	case CUDA_R_16F: return "f16f16_f16f32_f32";
	case CUDA_R_16BF: return "bf16bf16_bf16f32_f32";
	case CUDA_R_64F: return "f64f64_f64f64_f64";
	case CUDA_C_32F: return "c32c32_c32c32_c32";
	case CUDA_C_64F: return "c64c64_c64c64_c64";
	default: return "f32f32_f32f32_f32";
	}
}

/* One GEMM: C[m x n] (batch of them) = op(A)[m x k] op(B)[k x n]. */
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
	long batch, cudaDataType type, int tf32)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (m < 0 || n < 0 || k < 0 || batch < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0 || batch == 0)
		return CUBLAS_STATUS_SUCCESS;
	int tc = tensor_core_type(type) || tf32 || h->math_mode == CUBLAS_TF32_TENSOR_OP_MATH;
	char name[256];
	if (tc)
		snprintf(name, sizeof(name), "nvjet_tst_128x128_64x4_1x2_h_bz_coopA_%c%cN", ta == CUBLAS_OP_N ? 'N' : 'T',
			tb == CUBLAS_OP_N ? 'N' : 'T');
	else
		snprintf(name, sizeof(name),
			"sm90_xmma_gemm_%s_%c%c_n_tilesize128x128x16_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
			type_tag(type), op_letter(ta), op_letter(tb));
	unsigned gx = (unsigned)((m + 127) / 128), gy = (unsigned)((n + 127) / 128);
	uint64_t ns = simlib_gemm_ns((uint64_t)m, (uint64_t)n, (uint64_t)k, (uint64_t)batch, tc);
	return status_of(simlib_launch(name, gx, gy, (unsigned)(batch > 65535 ? 65535 : batch), 128,
		(CUstream)h->stream, ns, 0));
}

static cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t t, int m, int n)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (m < 0 || n < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	const char *name = t == CUBLAS_OP_N ? "gemv2N_kernel" : "gemv2T_kernel_val";
	unsigned rows = (unsigned)(t == CUBLAS_OP_N ? m : n);
	return status_of(simlib_launch(name, (rows + 127) / 128, 1, 1, 128, (CUstream)h->stream,
		simlib_gemm_ns((uint64_t)m, (uint64_t)n, 1, 1, 0), 0));
}

#define GEMM_ARGS(T) cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
	const T *alpha, const T *A, int lda, const T *B, int ldb, const T *beta, T *C, int ldc
#define STRIDED_ARGS(T) cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
	const T *alpha, const T *A, int lda, long long sa, const T *B, int ldb, long long sb, const T *beta, T *C, \
	int ldc, long long sc, int batch
#define BATCHED_ARGS(T) cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
	const T *alpha, const T *const A[], int lda, const T *const B[], int ldb, const T *beta, T *const C[], \
	int ldc, int batch

EXPORT cublasStatus_t cublasSgemm_v2(GEMM_ARGS(float)) { return gemm(h, ta, tb, m, n, k, 1, CUDA_R_32F, 0); }
EXPORT cublasStatus_t cublasDgemm_v2(GEMM_ARGS(double)) { return gemm(h, ta, tb, m, n, k, 1, CUDA_R_64F, 0); }
EXPORT cublasStatus_t cublasCgemm_v2(GEMM_ARGS(cuComplex)) { return gemm(h, ta, tb, m, n, k, 1, CUDA_C_32F, 0); }
EXPORT cublasStatus_t cublasZgemm_v2(GEMM_ARGS(cuDoubleComplex)) { return gemm(h, ta, tb, m, n, k, 1, CUDA_C_64F, 0); }
EXPORT cublasStatus_t cublasHgemm(GEMM_ARGS(uint16_t)) { return gemm(h, ta, tb, m, n, k, 1, CUDA_R_16F, 0); }

EXPORT cublasStatus_t cublasSgemmStridedBatched(STRIDED_ARGS(float))
{
	return gemm(h, ta, tb, m, n, k, batch, CUDA_R_32F, 0);
}
EXPORT cublasStatus_t cublasDgemmStridedBatched(STRIDED_ARGS(double))
{
	return gemm(h, ta, tb, m, n, k, batch, CUDA_R_64F, 0);
}
EXPORT cublasStatus_t cublasCgemmStridedBatched(STRIDED_ARGS(cuComplex))
{
	return gemm(h, ta, tb, m, n, k, batch, CUDA_C_32F, 0);
}
EXPORT cublasStatus_t cublasZgemmStridedBatched(STRIDED_ARGS(cuDoubleComplex))
{
	return gemm(h, ta, tb, m, n, k, batch, CUDA_C_64F, 0);
}
EXPORT cublasStatus_t cublasHgemmStridedBatched(STRIDED_ARGS(uint16_t))
{
	return gemm(h, ta, tb, m, n, k, batch, CUDA_R_16F, 0);
}
EXPORT cublasStatus_t cublasSgemmBatched(BATCHED_ARGS(float)) { return gemm(h, ta, tb, m, n, k, batch, CUDA_R_32F, 0); }
EXPORT cublasStatus_t cublasDgemmBatched(BATCHED_ARGS(double)) { return gemm(h, ta, tb, m, n, k, batch, CUDA_R_64F, 0); }
EXPORT cublasStatus_t cublasCgemmBatched(BATCHED_ARGS(cuComplex)) { return gemm(h, ta, tb, m, n, k, batch, CUDA_C_32F, 0); }
EXPORT cublasStatus_t cublasZgemmBatched(BATCHED_ARGS(cuDoubleComplex))
{
	return gemm(h, ta, tb, m, n, k, batch, CUDA_C_64F, 0);
}

EXPORT cublasStatus_t cublasSgemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
	int k, const float *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype,
	int ldb, const float *beta, void *C, cudaDataType Ctype, int ldc)
{
	return gemm(h, ta, tb, m, n, k, 1, Atype, 0);
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
	const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb,
	const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
	return gemm(h, ta, tb, m, n, k, 1, Atype, ct == CUBLAS_COMPUTE_32F_FAST_TF32);
}

EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
	int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda, long long sa,
	const void *B, cudaDataType Btype, int ldb, long long sb, const void *beta, void *C, cudaDataType Ctype,
	int ldc, long long sc, int batch, cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
	return gemm(h, ta, tb, m, n, k, batch, Atype, ct == CUBLAS_COMPUTE_32F_FAST_TF32);
}

EXPORT cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
	int n, int k, const void *alpha, const void *const A[], cudaDataType Atype, int lda, const void *const B[],
	cudaDataType Btype, int ldb, const void *beta, void *const C[], cudaDataType Ctype, int ldc, int batch,
	cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
	return gemm(h, ta, tb, m, n, k, batch, Atype, ct == CUBLAS_COMPUTE_32F_FAST_TF32);
}

#define GEMV_ARGS(T) cublasHandle_t h, cublasOperation_t t, int m, int n, const T *alpha, const T *A, int lda, \
	const T *x, int incx, const T *beta, T *y, int incy
EXPORT cublasStatus_t cublasSgemv_v2(GEMV_ARGS(float)) { return gemv(h, t, m, n); }
EXPORT cublasStatus_t cublasDgemv_v2(GEMV_ARGS(double)) { return gemv(h, t, m, n); }
EXPORT cublasStatus_t cublasCgemv_v2(GEMV_ARGS(cuComplex)) { return gemv(h, t, m, n); }
EXPORT cublasStatus_t cublasZgemv_v2(GEMV_ARGS(cuDoubleComplex)) { return gemv(h, t, m, n); }

/* ------------------------------------------------------------------ the rest of cuBLAS */

EXPORT int simgpu_cublas_unsupported(const char *name);
EXPORT int simgpu_cublas_unsupported(const char *name)
{
	static int warn = -1;
	if (warn < 0) {
		const char *v = getenv("SIMGPU_WARN_UNSUPPORTED");
		warn = v && strcmp(v, "0") != 0;
	}
	if (warn)
		fprintf(stderr, "simgpu: %s is not simulated (CUBLAS_STATUS_NOT_SUPPORTED)\n", name);
	return CUBLAS_STATUS_NOT_SUPPORTED;
}
