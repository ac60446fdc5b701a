/*
 * simgpu: a stand-in for cuBLAS (libcublas.so.13) over the simulated device.
 *
 * Handles keep their stream, math and pointer modes; GEMMs (plain, Ex, strided-batched, batched, in
 * every type PyTorch uses) and GEMVs enqueue one simulated kernel named as cuBLAS names its kernels on
 * Hopper, lasting its FLOPs at a configurable rate (simlib.h), launched the way cuBLAS launches: from
 * its statically linked runtime, through the driver entry point (simlib_launch).  GEMMs and GEMVs compute
 * nothing: output matrices keep what they held.  Level 1 (dot, nrm2, asum, amax/amin, axpy, scal, copy,
 * swap, rot), TRSM and the batched solvers (trsm, getrf, getrs, geqrf, gels) compute their results on the
 * host at the call (device memory is host memory; dense.h), so what PyTorch reads back (a dot product, a
 * pivot, an info) is real, and enqueue one kernel each.  A batched routine's pointer arrays are written
 * by a PyTorch kernel, so on simgpu they hold no pointers: matrices outside device memory are skipped
 * (simlib_matrix_ok), as a kernel would compute nothing for them.  Every other cuBLAS function exists
 * (cublas_stubs.inc) and answers CUBLAS_STATUS_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <cublas_v2.h>

#include "dense.h"
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

/* ------------------------------------------------------------------ level 1, TRSM, batched solvers */

/* One kernel for a routine computed on the host: `ns` of device time on the handle's stream.  The names
 * are simgpu's (cuBLAS's own names for these kernels have not been measured on a GPU). */
static cublasStatus_t host_routine(cublasHandle_t h, const char *kernel, uint64_t m, uint64_t n, uint64_t k,
	uint64_t batch)
{
	return status_of(simlib_launch(kernel, 1, 1, 1, 128, (CUstream)h->stream,
		simlib_gemm_ns(m ? m : 1, n ? n : 1, k ? k : 1, batch ? batch : 1, 0), 0));
}

/* IEEE half and bfloat16 <-> float (DotEx's 16-bit types), round to nearest even. */
static float half_to_float(uint16_t x)
{
	uint32_t sign = (uint32_t)(x >> 15) << 31, e = (x >> 10) & 31, m = x & 1023u, bits;
	if (e == 0) {
		float f = (float)m * (1.0f / 16777216.0f); /* subnormal: m * 2^-24 */
		return sign ? -f : f;
	}
	bits = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
	float f;
	memcpy(&f, &bits, 4);
	return f;
}
static uint16_t float_to_half(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	uint32_t sign = (b >> 16) & 0x8000u;
	float a = f < 0 ? -f : f;
	if (a != a)
		return (uint16_t)(sign | 0x7e00u);
	if (a >= 65520.0f)
		return (uint16_t)(sign | 0x7c00u);
	if (a < 6.103515625e-05f) /* subnormal half: a / 2^-24, rounded */
		return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
	memcpy(&b, &a, 4);
	uint32_t e = (b >> 23) - 112, m = b & 0x7fffffu;
	uint32_t h = (e << 10) | (m >> 13), rest = m & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}
static float bf16_to_float(uint16_t x)
{
	uint32_t b = (uint32_t)x << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}
static uint16_t float_to_bf16(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	if (f != f)
		return 0x7fc0;
	b += 0x7fffu + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

/* Element i of a strided vector (n elements, increment inc; a negative inc walks from the end, as BLAS). */
#define VEC(x, n, inc, i) ((x)[(inc) >= 0 ? (long)(i) * (inc) : (long)((n) - 1 - (i)) * -(long)(inc)])

#define DOT(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *x, int incx, const T *y, int incy, T *result) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!result) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	double s = 0; \
	for (int i = 0; i < n; i++) \
		s += (double)VEC(x, n, incx, i) * (double)VEC(y, n, incy, i); \
	*result = (T)s; \
	return host_routine(h, "dot_kernel", (uint64_t)n, 1, 1, 1); \
}
DOT(cublasSdot_v2, float)
DOT(cublasDdot_v2, double)

#define CDOT(NAME, T, CONJ) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *x, int incx, const T *y, int incy, T *result) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!result) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	double re = 0, im = 0; \
	for (int i = 0; i < n; i++) { \
		T a = VEC(x, n, incx, i), b = VEC(y, n, incy, i); \
		double ai = CONJ ? -(double)a.y : (double)a.y; \
		re += (double)a.x * b.x - ai * b.y; \
		im += (double)a.x * b.y + ai * b.x; \
	} \
	result->x = re; \
	result->y = im; \
	return host_routine(h, "dot_kernel", (uint64_t)n, 1, 1, 1); \
}
CDOT(cublasCdotu_v2, cuComplex, 0)
CDOT(cublasCdotc_v2, cuComplex, 1)
CDOT(cublasZdotu_v2, cuDoubleComplex, 0)
CDOT(cublasZdotc_v2, cuDoubleComplex, 1)

static int load_real(const void *p, cudaDataType t, long i, double *v)
{
	switch (t) {
	case CUDA_R_32F: *v = ((const float *)p)[i]; return 1;
	case CUDA_R_64F: *v = ((const double *)p)[i]; return 1;
	case CUDA_R_16F: *v = half_to_float(((const uint16_t *)p)[i]); return 1;
	case CUDA_R_16BF: *v = bf16_to_float(((const uint16_t *)p)[i]); return 1;
	default: return 0;
	}
}

EXPORT cublasStatus_t cublasDotEx(cublasHandle_t h, int n, const void *x, cudaDataType xType, int incx,
	const void *y, cudaDataType yType, int incy, void *result, cudaDataType resultType, cudaDataType executionType)
{
	(void)executionType;
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!result)
		return CUBLAS_STATUS_INVALID_VALUE;
	double s = 0, a, b;
	for (int i = 0; i < n; i++) {
		long ix = incx >= 0 ? (long)i * incx : (long)(n - 1 - i) * -(long)incx;
		long iy = incy >= 0 ? (long)i * incy : (long)(n - 1 - i) * -(long)incy;
		if (!load_real(x, xType, ix, &a) || !load_real(y, yType, iy, &b))
			return CUBLAS_STATUS_NOT_SUPPORTED;
		s += a * b;
	}
	switch (resultType) {
	case CUDA_R_32F: *(float *)result = (float)s; break;
	case CUDA_R_64F: *(double *)result = s; break;
	case CUDA_R_16F: *(uint16_t *)result = float_to_half((float)s); break;
	case CUDA_R_16BF: *(uint16_t *)result = float_to_bf16((float)s); break;
	default: return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	return host_routine(h, "dot_kernel", (uint64_t)n, 1, 1, 1);
}

#define NRM2_ASUM(NAME, T, KERNEL, ABS_SUM) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *x, int incx, T *result) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!result) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	double s = 0; \
	for (int i = 0; incx > 0 && i < n; i++) { \
		double v = x[(long)i * incx]; \
		s = ABS_SUM ? s + fabs(v) : hypot(s, v); \
	} \
	*result = (T)s; \
	return host_routine(h, KERNEL, (uint64_t)n, 1, 1, 1); \
}
NRM2_ASUM(cublasSnrm2_v2, float, "nrm2_kernel", 0)
NRM2_ASUM(cublasDnrm2_v2, double, "nrm2_kernel", 0)
NRM2_ASUM(cublasSasum_v2, float, "asum_kernel", 1)
NRM2_ASUM(cublasDasum_v2, double, "asum_kernel", 1)

/* 1-based index of the first largest (amax) or smallest (amin) |x_i|; 0 for n <= 0 or incx <= 0. */
#define IAMAXMIN(NAME, T, MAX) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *x, int incx, int *result) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!result) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	int best = 0; \
	for (int i = 1; incx > 0 && i < n; i++) { \
		double v = fabs((double)x[(long)i * incx]), b = fabs((double)x[(long)best * incx]); \
		if (MAX ? v > b : v < b) \
			best = i; \
	} \
	*result = n > 0 && incx > 0 ? best + 1 : 0; \
	return host_routine(h, MAX ? "iamax_kernel" : "iamin_kernel", (uint64_t)n, 1, 1, 1); \
}
IAMAXMIN(cublasIsamax_v2, float, 1)
IAMAXMIN(cublasIdamax_v2, double, 1)
IAMAXMIN(cublasIsamin_v2, float, 0)
IAMAXMIN(cublasIdamin_v2, double, 0)

#define AXPY(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *alpha, const T *x, int incx, T *y, int incy) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!alpha) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	for (int i = 0; i < n; i++) \
		VEC(y, n, incy, i) += *alpha * VEC(x, n, incx, i); \
	return host_routine(h, "axpy_kernel", (uint64_t)n, 1, 1, 1); \
}
AXPY(cublasSaxpy_v2, float)
AXPY(cublasDaxpy_v2, double)

#define SCAL(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *alpha, T *x, int incx) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!alpha) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	for (int i = 0; incx > 0 && i < n; i++) \
		x[(long)i * incx] *= *alpha; \
	return host_routine(h, "scal_kernel", (uint64_t)n, 1, 1, 1); \
}
SCAL(cublasSscal_v2, float)
SCAL(cublasDscal_v2, double)

#define COPY_SWAP(NAME, T, SWAP) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, T *x, int incx, T *y, int incy) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	for (int i = 0; i < n; i++) { \
		T t = VEC(y, n, incy, i); \
		VEC(y, n, incy, i) = VEC(x, n, incx, i); \
		if (SWAP) \
			VEC(x, n, incx, i) = t; \
	} \
	return host_routine(h, SWAP ? "swap_kernel" : "copy_kernel", (uint64_t)n, 1, 1, 1); \
}
COPY_SWAP(cublasSswap_v2, float, 1)
COPY_SWAP(cublasDswap_v2, double, 1)
#define COPY(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, const T *x, int incx, T *y, int incy) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	for (int i = 0; i < n; i++) \
		VEC(y, n, incy, i) = VEC(x, n, incx, i); \
	return host_routine(h, "copy_kernel", (uint64_t)n, 1, 1, 1); \
}
COPY(cublasScopy_v2, float)
COPY(cublasDcopy_v2, double)

#define ROT(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, T *x, int incx, T *y, int incy, const T *c, const T *s) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!c || !s) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	for (int i = 0; i < n; i++) { \
		T a = VEC(x, n, incx, i), b = VEC(y, n, incy, i); \
		VEC(x, n, incx, i) = *c * a + *s * b; \
		VEC(y, n, incy, i) = *c * b - *s * a; \
	} \
	return host_routine(h, "rot_kernel", (uint64_t)n, 1, 1, 1); \
}
ROT(cublasSrot_v2, float)
ROT(cublasDrot_v2, double)

/* B := alpha op(A)^-1 B or alpha B op(A)^-1 for one matrix pair, in double. */
static cublasStatus_t trsm_one(int elem, cublasSideMode_t side, cublasFillMode_t uplo, cublasOperation_t trans,
	cublasDiagType_t diag, int m, int n, double alpha, const void *A, int lda, void *B, int ldb)
{
	int k = side == CUBLAS_SIDE_LEFT ? m : n;
	double *a = dense_load(A, elem, k, k, lda), *b = dense_load(B, elem, m, n, ldb);
	if (!a || !b) {
		free(a); free(b);
		return CUBLAS_STATUS_ALLOC_FAILED;
	}
	dense_trsm(side == CUBLAS_SIDE_LEFT, uplo == CUBLAS_FILL_MODE_UPPER, trans != CUBLAS_OP_N,
		diag == CUBLAS_DIAG_UNIT, m, n, alpha, a, k, b, m);
	dense_store(B, elem, b, m, n, ldb);
	free(a);
	free(b);
	return CUBLAS_STATUS_SUCCESS;
}

#define TRSM(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo, cublasOperation_t trans, \
	cublasDiagType_t diag, int m, int n, const T *alpha, const T *A, int lda, T *B, int ldb) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (m < 0 || n < 0 || !alpha) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	cublasStatus_t st = trsm_one(sizeof(T), side, uplo, trans, diag, m, n, *alpha, A, lda, B, ldb); \
	return st ? st : host_routine(h, "trsm_kernel", (uint64_t)m, (uint64_t)n, (uint64_t)(side == CUBLAS_SIDE_LEFT ? m : n), 1); \
}
TRSM(cublasStrsm_v2, float)
TRSM(cublasDtrsm_v2, double)

#define TRSM_BATCHED(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo, cublasOperation_t trans, \
	cublasDiagType_t diag, int m, int n, const T *alpha, const T *const A[], int lda, T *const B[], int ldb, int batch) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (m < 0 || n < 0 || batch < 0 || !alpha) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	int k_ = side == CUBLAS_SIDE_LEFT ? m : n; \
	for (int i = 0; i < batch; i++) { \
		if (!simlib_matrix_ok(A[i], sizeof(T), k_, k_, lda) || !simlib_matrix_ok(B[i], sizeof(T), m, n, ldb)) \
			continue; \
		cublasStatus_t st = trsm_one(sizeof(T), side, uplo, trans, diag, m, n, *alpha, A[i], lda, B[i], ldb); \
		if (st) \
			return st; \
	} \
	return host_routine(h, "trsm_batched_kernel", (uint64_t)m, (uint64_t)n, \
		(uint64_t)(side == CUBLAS_SIDE_LEFT ? m : n), (uint64_t)batch); \
}
TRSM_BATCHED(cublasStrsmBatched, float)
TRSM_BATCHED(cublasDtrsmBatched, double)

/* LU of each n x n matrix, pivots (1-based, n per matrix) in P unless P is NULL (then no pivoting), each
 * matrix's info in info[i]. */
#define GETRF_BATCHED(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int n, T *const A[], int lda, int *P, int *info, int batch) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (n < 0 || batch < 0 || !info) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	int64_t *piv = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1)); \
	if (!piv) \
		return CUBLAS_STATUS_ALLOC_FAILED; \
	for (int i = 0; i < batch; i++) { \
		info[i] = 0; \
		if (!simlib_matrix_ok(A[i], sizeof(T), n, n, lda)) \
			continue; \
		double *a = dense_load(A[i], sizeof(T), n, n, lda); \
		if (!a) { \
			free(piv); \
			return CUBLAS_STATUS_ALLOC_FAILED; \
		} \
		info[i] = dense_getrf(n, n, a, n, P ? piv : NULL); \
		dense_store(A[i], sizeof(T), a, n, n, lda); \
		free(a); \
		for (int j = 0; P && j < n; j++) \
			P[(long)i * n + j] = (int)piv[j]; \
	} \
	free(piv); \
	return host_routine(h, "getrf_batched_kernel", (uint64_t)n, (uint64_t)n, (uint64_t)n / 3 + 1, (uint64_t)batch); \
}
GETRF_BATCHED(cublasSgetrfBatched, float)
GETRF_BATCHED(cublasDgetrfBatched, double)

/* Solves op(A_i) X = B_i with getrfBatched's factors; info (host) is the first bad argument's number, 0. */
#define GETRS_BATCHED(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t trans, int n, int nrhs, const T *const A[], int lda, \
	const int *P, T *const B[], int ldb, int *info, int batch) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (n < 0 || nrhs < 0 || batch < 0 || !info) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	*info = 0; \
	int64_t *piv = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1)); \
	if (!piv) \
		return CUBLAS_STATUS_ALLOC_FAILED; \
	for (int i = 0; i < batch; i++) { \
		if (!simlib_matrix_ok(A[i], sizeof(T), n, n, lda) || !simlib_matrix_ok(B[i], sizeof(T), n, nrhs, ldb)) \
			continue; \
		double *a = dense_load(A[i], sizeof(T), n, n, lda), *b = dense_load(B[i], sizeof(T), n, nrhs, ldb); \
		if (!a || !b) { \
			free(a); free(b); free(piv); \
			return CUBLAS_STATUS_ALLOC_FAILED; \
		} \
		for (int j = 0; j < n; j++) \
			piv[j] = P ? P[(long)i * n + j] : j + 1; \
		dense_getrs(trans != CUBLAS_OP_N, n, nrhs, a, n, piv, b, n); \
		dense_store(B[i], sizeof(T), b, n, nrhs, ldb); \
		free(a); \
		free(b); \
	} \
	free(piv); \
	return host_routine(h, "getrs_batched_kernel", (uint64_t)n, (uint64_t)nrhs, (uint64_t)n, (uint64_t)batch); \
}
GETRS_BATCHED(cublasSgetrsBatched, float)
GETRS_BATCHED(cublasDgetrsBatched, double)

#define GEQRF_BATCHED(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, int m, int n, T *const A[], int lda, T *const tau[], int *info, \
	int batch) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (m < 0 || n < 0 || batch < 0 || !info) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	*info = 0; \
	int k = m < n ? m : n; \
	double *t = malloc(sizeof(double) * (size_t)(k > 0 ? k : 1)); \
	if (!t) \
		return CUBLAS_STATUS_ALLOC_FAILED; \
	for (int i = 0; i < batch; i++) { \
		if (!simlib_matrix_ok(A[i], sizeof(T), m, n, lda) || !simlib_matrix_ok(tau[i], sizeof(T), k, 1, k)) \
			continue; \
		double *a = dense_load(A[i], sizeof(T), m, n, lda); \
		if (!a) { \
			free(t); \
			return CUBLAS_STATUS_ALLOC_FAILED; \
		} \
		dense_geqrf(m, n, a, m, t); \
		dense_store(A[i], sizeof(T), a, m, n, lda); \
		dense_store(tau[i], sizeof(T), t, k, 1, k > 0 ? k : 1); \
		free(a); \
	} \
	free(t); \
	return host_routine(h, "geqrf_batched_kernel", (uint64_t)m, (uint64_t)n, (uint64_t)n, (uint64_t)batch); \
}
GEQRF_BATCHED(cublasSgeqrfBatched, float)
GEQRF_BATCHED(cublasDgeqrfBatched, double)

/* Least squares min |A_i X - C_i| (m >= n, full rank, no transpose: what cuBLAS supports) by QR: X in the
 * first n rows of C_i.  devInfo[i]: the first zero diagonal of R's 1-based index, 0. */
#define GELS_BATCHED(NAME, T) \
EXPORT cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t trans, int m, int n, int nrhs, T *const A[], int lda, \
	T *const C[], int ldc, int *info, int *devInfo, int batch) \
{ \
	if (!h) \
		return CUBLAS_STATUS_NOT_INITIALIZED; \
	if (!info) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	*info = trans != CUBLAS_OP_N ? -2 : m < n ? -3 : n < 0 ? -4 : nrhs < 0 ? -5 : batch < 0 ? -11 : 0; \
	if (*info) \
		return CUBLAS_STATUS_INVALID_VALUE; \
	double *t = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)); \
	if (!t) \
		return CUBLAS_STATUS_ALLOC_FAILED; \
	for (int i = 0; i < batch; i++) { \
		if (devInfo) \
			devInfo[i] = 0; \
		if (!simlib_matrix_ok(A[i], sizeof(T), m, n, lda) || !simlib_matrix_ok(C[i], sizeof(T), m, nrhs, ldc)) \
			continue; \
		double *a = dense_load(A[i], sizeof(T), m, n, lda), *c = dense_load(C[i], sizeof(T), m, nrhs, ldc); \
		if (!a || !c) { \
			free(a); free(c); free(t); \
			return CUBLAS_STATUS_ALLOC_FAILED; \
		} \
		dense_geqrf(m, n, a, m, t); \
		dense_ormqr(1, 1, m, nrhs, n, a, m, t, c, m); \
		int bad = 0; \
		for (int j = 0; j < n && !bad; j++) \
			if (a[(size_t)j + (size_t)j * (size_t)m] == 0) \
				bad = j + 1; \
		if (devInfo) \
			devInfo[i] = bad; \
		if (!bad) \
			dense_trsm(1, 1, 0, 0, n, nrhs, 1.0, a, m, c, m); \
		dense_store(A[i], sizeof(T), a, m, n, lda); \
		dense_store(C[i], sizeof(T), c, m, nrhs, ldc); \
		free(a); \
		free(c); \
	} \
	free(t); \
	return host_routine(h, "gels_batched_kernel", (uint64_t)m, (uint64_t)n, (uint64_t)(n + nrhs), (uint64_t)batch); \
}
GELS_BATCHED(cublasSgelsBatched, float)
GELS_BATCHED(cublasDgelsBatched, double)

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
