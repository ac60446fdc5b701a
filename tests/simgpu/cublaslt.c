/*
 * simgpu: a stand-in for cuBLASLt (libcublasLt.so.13) over the simulated device.
 *
 * Descriptors keep what cublasLtMatmul needs (types, shapes, transposes, batch, epilogue);
 * heuristics offer one algorithm needing no workspace; cublasLtMatmul enqueues one simulated kernel
 * named as cuBLASLt names its kernels on Hopper (plus a split-K reduction when K dwarfs M and N),
 * lasting its FLOPs at a configurable rate (simlib.h), launched as cuBLASLt launches: from its
 * statically linked runtime, through the driver's cuLaunchKernelEx.  Nothing is computed.  Every
 * other cuBLASLt function exists (cublaslt_stubs.inc) and answers CUBLAS_STATUS_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "simlib.h"

#define EXPORT __attribute__((visibility("default")))

struct lt_handle { int magic; };
struct lt_desc {
	cublasComputeType_t compute;
	cudaDataType_t scale;
	int32_t transa, transb;
	uint32_t epilogue;
};
struct lt_layout {
	cudaDataType type;
	uint64_t rows, cols;
	int64_t ld;
	int32_t batch;
};
struct lt_pref { uint64_t max_workspace; };

_Static_assert(sizeof(struct lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc fits the opaque type");
_Static_assert(sizeof(struct lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits the opaque type");

EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	if (!h)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!simlib_driver())
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*h = (cublasLtHandle_t)calloc(1, sizeof(struct lt_handle));
	return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
EXPORT size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }
EXPORT cublasStatus_t cublasLtGetProperty(libraryPropertyType t, int *v)
{
	if (!v)
		return CUBLAS_STATUS_INVALID_VALUE;
	*v = t == MAJOR_VERSION ? CUBLAS_VER_MAJOR : t == MINOR_VERSION ? CUBLAS_VER_MINOR : CUBLAS_VER_PATCH;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT const char *cublasLtGetStatusName(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
	       : s == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
	       : s == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
					       : "CUBLAS_STATUS_EXECUTION_FAILED";
}
EXPORT const char *cublasLtGetStatusString(cublasStatus_t s) { return cublasLtGetStatusName(s); }

/* ------------------------------------------------------------------ descriptors */

EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
	cudaDataType_t scale)
{
	if (!d)
		return CUBLAS_STATUS_INVALID_VALUE;
	struct lt_desc *x = calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
	if (!x)
		return CUBLAS_STATUS_ALLOC_FAILED;
	x->compute = compute;
	x->scale = scale;
	x->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
	*d = (cublasLtMatmulDesc_t)x;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	free(d);
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t copy_in(void *field, size_t field_size, const void *buf, size_t size)
{
	if (!buf || size != field_size)
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(field, buf, size);
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
	const void *buf, size_t size)
{
	struct lt_desc *x = (struct lt_desc *)d;
	if (!x)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA: return copy_in(&x->transa, sizeof(x->transa), buf, size);
	case CUBLASLT_MATMUL_DESC_TRANSB: return copy_in(&x->transb, sizeof(x->transb), buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE: return copy_in(&x->epilogue, sizeof(x->epilogue), buf, size);
	default: return buf ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE; /* kept by cuBLASLt, no effect here */
	}
}

EXPORT cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
	void *buf, size_t size, size_t *written)
{
	struct lt_desc *x = (struct lt_desc *)d;
	const void *src;
	size_t n;
	if (!x)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA: src = &x->transa; n = sizeof(x->transa); break;
	case CUBLASLT_MATMUL_DESC_TRANSB: src = &x->transb; n = sizeof(x->transb); break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE: src = &x->epilogue; n = sizeof(x->epilogue); break;
	case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: src = &x->compute; n = sizeof(x->compute); break;
	default: return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	if (written)
		*written = n;
	if (!buf && size == 0)
		return CUBLAS_STATUS_SUCCESS;
	if (!buf || size < n)
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(buf, src, n);
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows,
	uint64_t cols, int64_t ld)
{
	if (!l)
		return CUBLAS_STATUS_INVALID_VALUE;
	struct lt_layout *x = calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
	if (!x)
		return CUBLAS_STATUS_ALLOC_FAILED;
	x->type = type;
	x->rows = rows;
	x->cols = cols;
	x->ld = ld;
	x->batch = 1;
	*l = (cublasLtMatrixLayout_t)x;
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	free(l);
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
	const void *buf, size_t size)
{
	struct lt_layout *x = (struct lt_layout *)l;
	if (!x)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return copy_in(&x->batch, sizeof(x->batch), buf, size);
	case CUBLASLT_MATRIX_LAYOUT_ROWS: return copy_in(&x->rows, sizeof(x->rows), buf, size);
	case CUBLASLT_MATRIX_LAYOUT_COLS: return copy_in(&x->cols, sizeof(x->cols), buf, size);
	default: return buf ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
	}
}

EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	if (!p)
		return CUBLAS_STATUS_INVALID_VALUE;
	*p = (cublasLtMatmulPreference_t)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
	return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	free(p);
	return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
	cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t size)
{
	if (!p || !buf)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
		return copy_in(&((struct lt_pref *)p)->max_workspace, sizeof(uint64_t), buf, size);
	return CUBLAS_STATUS_SUCCESS;
}

/* One algorithm, no workspace: whatever the preference allows, it fits. */
EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
	cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
	cublasLtMatmulPreference_t p, int requested, cublasLtMatmulHeuristicResult_t results[], int *returned)
{
	(void)p;
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!d || !a || !b || !c || !dd || requested <= 0 || !results || !returned)
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(&results[0], 0, sizeof(results[0]));
	results[0].state = CUBLAS_STATUS_SUCCESS;
	results[0].wavesCount = 1.0f;
	*returned = 1;
	return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ matmul */

static int lt_tensor_core(const struct lt_desc *d, cudaDataType t)
{
	return t == CUDA_R_16F || t == CUDA_R_16BF || t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2 ||
	       d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 || d->compute == CUBLAS_COMPUTE_32F_FAST_16F ||
	       d->compute == CUBLAS_COMPUTE_32F_FAST_16BF;
}

/* Bytes per element; 1 for types not listed, so a memset sized by it never runs past the matrix. */
static size_t lt_type_size(cudaDataType t)
{
	switch (t) {
	case CUDA_R_64F: return 8;
	case CUDA_R_32F: case CUDA_C_16F: return 4;
	case CUDA_R_16F: case CUDA_R_16BF: return 2;
	case CUDA_C_32F: return 8;
	case CUDA_C_64F: return 16;
	default: return 1;
	}
}

EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
	const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
	const void *C, cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
	const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSize, cudaStream_t stream)
{
	(void)alpha; (void)A; (void)B; (void)beta; (void)C; (void)Cdesc; (void)algo; (void)workspace;
	(void)workspaceSize;
	const struct lt_desc *d = (const struct lt_desc *)desc;
	const struct lt_layout *a = (const struct lt_layout *)Adesc, *o = (const struct lt_layout *)Ddesc;
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!d || !a || !o || !Bdesc)
		return CUBLAS_STATUS_INVALID_VALUE;
	uint64_t m = o->rows, n = o->cols, k = d->transa == CUBLAS_OP_N ? a->cols : a->rows;
	uint64_t batch = o->batch > 0 ? (uint64_t)o->batch : 1;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	int tc = lt_tensor_core(d, a->type);
	int bias = d->epilogue != CUBLASLT_EPILOGUE_DEFAULT;
	char name[256];
	char ta = d->transa == CUBLAS_OP_N ? 'N' : 'T', tb = d->transb == CUBLAS_OP_N ? 'N' : 'T';
	if (tc)
		snprintf(name, sizeof(name), "nvjet_tst_192x128_64x4_2x1_v_bz_coopA%s_%c%cT", bias ? "_bias" : "", ta, tb);
	else
		snprintf(name, sizeof(name),
			"sm80_xmma_gemm_f32f32_f32f32_f32_%c%c_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_execute_kernel__51a_cublas",
			ta + 32, tb + 32);
	/* Split-K when K dwarfs the output: a partial-sum GEMM and a reduction, as cuBLASLt chooses. */
	int split = k >= 16 * (m > n ? m : n) && k >= 4096;
	unsigned gx = (unsigned)((m + 127) / 128), gy = (unsigned)((n + 127) / 128);
	unsigned gz = (unsigned)(batch > 65535 ? 65535 : batch) * (split ? 4u : 1u);
	CUresult r = CUDA_SUCCESS;
	/* Split-K accumulates partial sums into zeroed memory: a memset first (first matrix of the batch;
	 * m*n elements fit any leading dimension >= m). */
	if (split && D)
		r = simlib_memset(D, (size_t)(m * n * lt_type_size(o->type)), (CUstream)stream);
	if (r == CUDA_SUCCESS)
		r = simlib_launch(name, gx, gy, gz, 384, (CUstream)stream, simlib_gemm_ns(m, n, k, batch, tc), 1);
	if (r == CUDA_SUCCESS && split)
		r = simlib_launch("splitKreduce_kernel", (unsigned)((m * n + 255) / 256), 1, 1, 256, (CUstream)stream,
			2000 + m * n * batch / 1000, 1);
	return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* ------------------------------------------------------------------ the rest of cuBLASLt */

EXPORT int simgpu_cublaslt_unsupported(const char *name);
EXPORT int simgpu_cublaslt_unsupported(const char *name)
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
