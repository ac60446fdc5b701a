/*
 * simgpu: a stand-in for cuSOLVER's dense API (libcusolver.so.12) over the simulated device.
 *
 * The routines PyTorch's linalg calls (Cholesky, LU, QR and its Q, symmetric eigensolvers, SVDs, LDL^T,
 * general eigenproblems of real matrices; float and double) compute their results on the host at the
 * call (device memory is host memory; dense.h), so what PyTorch reads back -- the factors, the pivots, the info that decides whether it
 * raises -- is real, and enqueue one kernel each, launched as cuBLAS's are (simlib.h).  Workspaces are
 * not used: the *_bufferSize queries answer small sizes.  Kernel names are simgpu's own (cuSOLVER's have
 * not been measured on a GPU).  Every other export of the real library exists (cusolver_stubs.inc) and
 * answers CUSOLVER_STATUS_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cusolverDn.h>

#include "dense.h"
#include "simlib.h"

#define EXPORT __attribute__((visibility("default")))

struct cusolverDnContext {
	cudaStream_t stream;
};
struct cusolverDnParams {
	int unused;
};
struct gesvdjInfo {
	int unused;
};
struct syevjInfo {
	int unused;
};

static cusolverStatus_t launched(cusolverDnHandle_t h, const char *kernel, uint64_t m, uint64_t n, uint64_t k,
	uint64_t batch)
{
	CUresult r = simlib_launch(kernel, 1, 1, 1, 128, (CUstream)h->stream,
		simlib_gemm_ns(m ? m : 1, n ? n : 1, k ? k : 1, batch ? batch : 1, 0), 0);
	return r == CUDA_SUCCESS ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_EXECUTION_FAILED;
}

/* ------------------------------------------------------------------ handles, parameters */

EXPORT cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle)
{
	if (!handle)
		return CUSOLVER_STATUS_INVALID_VALUE;
	if (!simlib_driver())
		return CUSOLVER_STATUS_NOT_INITIALIZED;
	*handle = calloc(1, sizeof(**handle));
	return *handle ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_ALLOC_FAILED;
}
EXPORT cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t h)
{
	if (!h)
		return CUSOLVER_STATUS_NOT_INITIALIZED;
	free(h);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t h, cudaStream_t s)
{
	if (!h)
		return CUSOLVER_STATUS_NOT_INITIALIZED;
	h->stream = s;
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnGetStream(cusolverDnHandle_t h, cudaStream_t *s)
{
	if (!h)
		return CUSOLVER_STATUS_NOT_INITIALIZED;
	if (!s)
		return CUSOLVER_STATUS_INVALID_VALUE;
	*s = h->stream;
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverGetVersion(int *v)
{
	if (!v)
		return CUSOLVER_STATUS_INVALID_VALUE;
	*v = CUSOLVER_VERSION;
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverGetProperty(libraryPropertyType t, int *v)
{
	if (!v)
		return CUSOLVER_STATUS_INVALID_VALUE;
	*v = t == MAJOR_VERSION ? CUSOLVER_VER_MAJOR : t == MINOR_VERSION ? CUSOLVER_VER_MINOR : CUSOLVER_VER_PATCH;
	return CUSOLVER_STATUS_SUCCESS;
}

#define OPAQUE(T, CREATE, DESTROY) \
EXPORT cusolverStatus_t CREATE(T *p) \
{ \
	if (!p) \
		return CUSOLVER_STATUS_INVALID_VALUE; \
	*p = calloc(1, sizeof(**p)); \
	return *p ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_ALLOC_FAILED; \
} \
EXPORT cusolverStatus_t DESTROY(T p) \
{ \
	free(p); \
	return CUSOLVER_STATUS_SUCCESS; \
}
OPAQUE(cusolverDnParams_t, cusolverDnCreateParams, cusolverDnDestroyParams)
OPAQUE(gesvdjInfo_t, cusolverDnCreateGesvdjInfo, cusolverDnDestroyGesvdjInfo)
OPAQUE(syevjInfo_t, cusolverDnCreateSyevjInfo, cusolverDnDestroySyevjInfo)

/* Tolerances, sweep limits and sorting are accepted: the host solvers converge fully and sort. */
EXPORT cusolverStatus_t cusolverDnSetAdvOptions(cusolverDnParams_t p, cusolverDnFunction_t f, cusolverAlgMode_t a)
{
	(void)f; (void)a;
	return p ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_INVALID_VALUE;
}
EXPORT cusolverStatus_t cusolverDnXgesvdjSetTolerance(gesvdjInfo_t i, double t) { (void)t; return i ? 0 : CUSOLVER_STATUS_INVALID_VALUE; }
EXPORT cusolverStatus_t cusolverDnXgesvdjSetMaxSweeps(gesvdjInfo_t i, int n) { (void)n; return i ? 0 : CUSOLVER_STATUS_INVALID_VALUE; }
EXPORT cusolverStatus_t cusolverDnXgesvdjSetSortEig(gesvdjInfo_t i, int s) { (void)s; return i ? 0 : CUSOLVER_STATUS_INVALID_VALUE; }
EXPORT cusolverStatus_t cusolverDnXsyevjSetTolerance(syevjInfo_t i, double t) { (void)t; return i ? 0 : CUSOLVER_STATUS_INVALID_VALUE; }
EXPORT cusolverStatus_t cusolverDnXsyevjSetMaxSweeps(syevjInfo_t i, int n) { (void)n; return i ? 0 : CUSOLVER_STATUS_INVALID_VALUE; }
EXPORT cusolverStatus_t cusolverDnXsyevjSetSortEig(syevjInfo_t i, int s) { (void)s; return i ? 0 : CUSOLVER_STATUS_INVALID_VALUE; }

/* ------------------------------------------------------------------ the routines, by element size */

#define ALLOC_FAIL(...) do { void *ps_[] = { __VA_ARGS__ }; for (size_t i_ = 0; i_ < sizeof(ps_) / sizeof(ps_[0]); i_++) free(ps_[i_]); return CUSOLVER_STATUS_ALLOC_FAILED; } while (0)

static cusolverStatus_t potrf(int elem, cublasFillMode_t uplo, int64_t n, void *A, int64_t lda, int *info)
{
	double *a = dense_load(A, elem, n, n, lda);
	if (!a)
		ALLOC_FAIL(a);
	int r = dense_potrf(uplo == CUBLAS_FILL_MODE_UPPER, n, a, n);
	dense_store(A, elem, a, n, n, lda);
	free(a);
	if (info)
		*info = r;
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t potrs(int elem, cublasFillMode_t uplo, int64_t n, int64_t nrhs, const void *A, int64_t lda,
	void *B, int64_t ldb)
{
	double *a = dense_load(A, elem, n, n, lda), *b = dense_load(B, elem, n, nrhs, ldb);
	if (!a || !b)
		ALLOC_FAIL(a, b);
	dense_potrs(uplo == CUBLAS_FILL_MODE_UPPER, n, nrhs, a, n, b, n);
	dense_store(B, elem, b, n, nrhs, ldb);
	free(a);
	free(b);
	return CUSOLVER_STATUS_SUCCESS;
}

/* ipiv: int (ipiv64 0) or int64_t (ipiv64 1), NULL for no pivoting. */
static cusolverStatus_t getrf(int elem, int64_t m, int64_t n, void *A, int64_t lda, void *ipiv, int ipiv64, int *info)
{
	int64_t k = m < n ? m : n;
	double *a = dense_load(A, elem, m, n, lda);
	int64_t *piv = malloc(sizeof(int64_t) * (size_t)(k > 0 ? k : 1));
	if (!a || !piv)
		ALLOC_FAIL(a, piv);
	int r = dense_getrf(m, n, a, m, ipiv ? piv : NULL);
	dense_store(A, elem, a, m, n, lda);
	for (int64_t i = 0; ipiv && i < k; i++) {
		if (ipiv64)
			((int64_t *)ipiv)[i] = piv[i];
		else
			((int *)ipiv)[i] = (int)piv[i];
	}
	free(a);
	free(piv);
	if (info)
		*info = r;
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t getrs(int elem, cublasOperation_t trans, int64_t n, int64_t nrhs, const void *A, int64_t lda,
	const void *ipiv, int ipiv64, void *B, int64_t ldb)
{
	double *a = dense_load(A, elem, n, n, lda), *b = dense_load(B, elem, n, nrhs, ldb);
	int64_t *piv = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
	if (!a || !b || !piv)
		ALLOC_FAIL(a, b, piv);
	for (int64_t i = 0; i < n; i++)
		piv[i] = !ipiv ? i + 1 : ipiv64 ? ((const int64_t *)ipiv)[i] : ((const int *)ipiv)[i];
	dense_getrs(trans != CUBLAS_OP_N, n, nrhs, a, n, piv, b, n);
	dense_store(B, elem, b, n, nrhs, ldb);
	free(a);
	free(b);
	free(piv);
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t geqrf(int elem, int64_t m, int64_t n, void *A, int64_t lda, void *tau)
{
	int64_t k = m < n ? m : n;
	double *a = dense_load(A, elem, m, n, lda), *t = malloc(sizeof(double) * (size_t)(k > 0 ? k : 1));
	if (!a || !t)
		ALLOC_FAIL(a, t);
	dense_geqrf(m, n, a, m, t);
	dense_store(A, elem, a, m, n, lda);
	dense_store(tau, elem, t, k, 1, k > 0 ? k : 1);
	free(a);
	free(t);
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t orgqr(int elem, int64_t m, int64_t n, int64_t k, void *A, int64_t lda, const void *tau)
{
	double *a = dense_load(A, elem, m, n, lda), *t = dense_load(tau, elem, k, 1, k > 0 ? k : 1);
	if (!a || !t)
		ALLOC_FAIL(a, t);
	dense_orgqr(m, n, k, a, m, t);
	dense_store(A, elem, a, m, n, lda);
	free(a);
	free(t);
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t ormqr(int elem, cublasSideMode_t side, cublasOperation_t trans, int64_t m, int64_t n,
	int64_t k, const void *A, int64_t lda, const void *tau, void *C, int64_t ldc)
{
	int64_t rows = side == CUBLAS_SIDE_LEFT ? m : n;
	double *a = dense_load(A, elem, rows, k, lda), *t = dense_load(tau, elem, k, 1, k > 0 ? k : 1);
	double *c = dense_load(C, elem, m, n, ldc);
	if (!a || !t || !c)
		ALLOC_FAIL(a, t, c);
	dense_ormqr(side == CUBLAS_SIDE_LEFT, trans != CUBLAS_OP_N, m, n, k, a, rows, t, c, m);
	dense_store(C, elem, c, m, n, ldc);
	free(a);
	free(t);
	free(c);
	return CUSOLVER_STATUS_SUCCESS;
}

/* W (elem_w bytes each) ascending; with vectors, A := the eigenvectors. */
static cusolverStatus_t syev(int elem, int elem_w, cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n, void *A,
	int64_t lda, void *W, int *info)
{
	double *a = dense_load(A, elem, n, n, lda), *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
	if (!a || !w)
		ALLOC_FAIL(a, w);
	int r = dense_syev(jobz == CUSOLVER_EIG_MODE_VECTOR, uplo == CUBLAS_FILL_MODE_UPPER, n, a, n, w);
	if (jobz == CUSOLVER_EIG_MODE_VECTOR)
		dense_store(A, elem, a, n, n, lda);
	dense_store(W, elem_w, w, n, 1, n > 0 ? n : 1);
	free(a);
	free(w);
	if (info)
		*info = r ? (int)n + 1 : 0;
	return CUSOLVER_STATUS_SUCCESS;
}

/* S (min(m, n)); U: m x ucols, V: n x vcols (transposed into vt when vt_ld > 0), either may be NULL. */
static cusolverStatus_t svd(int elem, int64_t m, int64_t n, void *A, int64_t lda, void *S, void *U, int64_t ldu,
	int64_t ucols, void *V, int64_t ldv, int64_t vcols, int v_transposed, int *info)
{
	int64_t k = m < n ? m : n;
	double *a = dense_load(A, elem, m, n, lda), *s = malloc(sizeof(double) * (size_t)(k > 0 ? k : 1));
	double *u = U ? malloc(sizeof(double) * (size_t)(m > 0 ? m : 1) * (size_t)(ucols > 0 ? ucols : 1)) : NULL;
	double *v = V ? malloc(sizeof(double) * (size_t)(n > 0 ? n : 1) * (size_t)(vcols > 0 ? vcols : 1)) : NULL;
	if (!a || !s || (U && !u) || (V && !v))
		ALLOC_FAIL(a, s, u, v);
	int r = dense_gesvd(m, n, a, m, s, u, m, U ? ucols : 0, v, n, V ? vcols : 0);
	dense_store(S, elem, s, k, 1, k > 0 ? k : 1);
	if (U)
		dense_store(U, elem, u, m, ucols, ldu);
	if (V && !v_transposed)
		dense_store(V, elem, v, n, vcols, ldv);
	if (V && v_transposed) { /* VT: vcols x n */
		double *vt = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1) * (size_t)(vcols > 0 ? vcols : 1));
		if (!vt)
			ALLOC_FAIL(a, s, u, v);
		for (int64_t j = 0; j < n; j++)
			for (int64_t i = 0; i < vcols; i++)
				vt[i + j * vcols] = v[j + i * n];
		dense_store(V, elem, vt, vcols, n, ldv);
		free(vt);
	}
	free(a); free(s); free(u); free(v);
	if (info)
		*info = r ? (int)k + 1 : 0;
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t sytrf(int elem, cublasFillMode_t uplo, int64_t n, void *A, int64_t lda, int *ipiv, int *info)
{
	double *a = dense_load(A, elem, n, n, lda);
	int64_t *piv = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
	if (!a || !piv)
		ALLOC_FAIL(a, piv);
	int r = dense_sytrf(uplo == CUBLAS_FILL_MODE_UPPER, n, a, n, piv);
	dense_store(A, elem, a, n, n, lda);
	for (int64_t i = 0; ipiv && i < n; i++)
		ipiv[i] = (int)piv[i];
	free(a);
	free(piv);
	if (info)
		*info = r;
	return CUSOLVER_STATUS_SUCCESS;
}

/* Pivots out of LAPACK's range cannot come from a factorization: PyTorch converts sytrf's int pivots to
 * int64 with a kernel, which computes nothing on simgpu.  Like a kernel handed such data, the routine then
 * computes nothing (instead of reading rows that do not exist). */
static cusolverStatus_t sytrs(int elem, cublasFillMode_t uplo, int64_t n, int64_t nrhs, const void *A, int64_t lda,
	const int64_t *ipiv, void *B, int64_t ldb)
{
	for (int64_t i = 0; i < n; i++)
		if (!ipiv || ipiv[i] == 0 || ipiv[i] > n || ipiv[i] < -n)
			return CUSOLVER_STATUS_SUCCESS;
	double *a = dense_load(A, elem, n, n, lda), *b = dense_load(B, elem, n, nrhs, ldb);
	if (!a || !b)
		ALLOC_FAIL(a, b);
	dense_sytrs(uplo == CUBLAS_FILL_MODE_UPPER, n, nrhs, a, n, ipiv, b, n);
	dense_store(B, elem, b, n, nrhs, ldb);
	free(a);
	free(b);
	return CUSOLVER_STATUS_SUCCESS;
}

static int elem_of(cudaDataType t)
{
	return t == CUDA_R_32F ? 4 : t == CUDA_R_64F ? 8 : 0;
}

#define CHECK_H() do { if (!h) return CUSOLVER_STATUS_NOT_INITIALIZED; } while (0)
#define RUN(call, kernel, m, n, k, batch) do { \
	cusolverStatus_t st_ = (call); \
	if (st_) \
		return st_; \
	return launched(h, kernel, (uint64_t)(m), (uint64_t)(n), (uint64_t)(k), (uint64_t)(batch)); \
} while (0)
#define LWORK(p, v) do { if (!(p)) return CUSOLVER_STATUS_INVALID_VALUE; *(p) = (v); } while (0)

/* ------------------------------------------------------------------ the exported entry points, S and D */

#define LEGACY(P, T) \
EXPORT cusolverStatus_t cusolverDn##P##potrf_bufferSize(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, T *A, \
	int lda, int *lwork) \
{ \
	(void)uplo; (void)n; (void)A; (void)lda; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##potrf(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, T *A, int lda, \
	T *work, int lwork, int *info) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	RUN(potrf(sizeof(T), uplo, n, A, lda, info), "potrf_kernel", n, n, n / 3 + 1, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##potrs(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, int nrhs, \
	const T *A, int lda, T *B, int ldb, int *info) \
{ \
	CHECK_H(); \
	if (info) \
		*info = 0; \
	RUN(potrs(sizeof(T), uplo, n, nrhs, A, lda, B, ldb), "potrs_kernel", n, nrhs, n, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##potrfBatched(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, \
	T *A[], int lda, int *info, int batch) \
{ \
	CHECK_H(); \
	for (int i = 0; i < batch; i++) { \
		if (info) \
			info[i] = 0; \
		if (!simlib_matrix_ok(A[i], sizeof(T), n, n, lda)) \
			continue; \
		cusolverStatus_t st = potrf(sizeof(T), uplo, n, A[i], lda, info ? &info[i] : NULL); \
		if (st) \
			return st; \
	} \
	return launched(h, "potrf_batched_kernel", (uint64_t)n, (uint64_t)n, (uint64_t)n / 3 + 1, (uint64_t)batch); \
} \
EXPORT cusolverStatus_t cusolverDn##P##potrsBatched(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, int nrhs, \
	T *A[], int lda, T *B[], int ldb, int *info, int batch) \
{ \
	CHECK_H(); \
	if (info) \
		*info = 0; \
	for (int i = 0; i < batch; i++) { \
		if (!simlib_matrix_ok(A[i], sizeof(T), n, n, lda) || !simlib_matrix_ok(B[i], sizeof(T), n, nrhs, ldb)) \
			continue; \
		cusolverStatus_t st = potrs(sizeof(T), uplo, n, nrhs, A[i], lda, B[i], ldb); \
		if (st) \
			return st; \
	} \
	return launched(h, "potrs_batched_kernel", (uint64_t)n, (uint64_t)nrhs, (uint64_t)n, (uint64_t)batch); \
} \
EXPORT cusolverStatus_t cusolverDn##P##getrf_bufferSize(cusolverDnHandle_t h, int m, int n, T *A, int lda, \
	int *lwork) \
{ \
	(void)m; (void)n; (void)A; (void)lda; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##getrf(cusolverDnHandle_t h, int m, int n, T *A, int lda, T *work, int *ipiv, \
	int *info) \
{ \
	(void)work; \
	CHECK_H(); \
	RUN(getrf(sizeof(T), m, n, A, lda, ipiv, 0, info), "getrf_kernel", m, n, (n < m ? n : m) / 3 + 1, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##getrs(cusolverDnHandle_t h, cublasOperation_t trans, int n, int nrhs, \
	const T *A, int lda, const int *ipiv, T *B, int ldb, int *info) \
{ \
	CHECK_H(); \
	if (info) \
		*info = 0; \
	RUN(getrs(sizeof(T), trans, n, nrhs, A, lda, ipiv, 0, B, ldb), "getrs_kernel", n, nrhs, n, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##geqrf_bufferSize(cusolverDnHandle_t h, int m, int n, T *A, int lda, \
	int *lwork) \
{ \
	(void)m; (void)n; (void)A; (void)lda; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##geqrf(cusolverDnHandle_t h, int m, int n, T *A, int lda, T *tau, T *work, \
	int lwork, int *info) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	if (info) \
		*info = 0; \
	RUN(geqrf(sizeof(T), m, n, A, lda, tau), "geqrf_kernel", m, n, n, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##orgqr_bufferSize(cusolverDnHandle_t h, int m, int n, int k, const T *A, \
	int lda, const T *tau, int *lwork) \
{ \
	(void)m; (void)n; (void)k; (void)A; (void)lda; (void)tau; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##orgqr(cusolverDnHandle_t h, int m, int n, int k, T *A, int lda, const T *tau, \
	T *work, int lwork, int *info) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	if (info) \
		*info = 0; \
	RUN(orgqr(sizeof(T), m, n, k, A, lda, tau), "orgqr_kernel", m, n, k, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##ormqr_bufferSize(cusolverDnHandle_t h, cublasSideMode_t side, \
	cublasOperation_t trans, int m, int n, int k, const T *A, int lda, const T *tau, const T *C, int ldc, \
	int *lwork) \
{ \
	(void)side; (void)trans; (void)m; (void)n; (void)k; (void)A; (void)lda; (void)tau; (void)C; (void)ldc; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##ormqr(cusolverDnHandle_t h, cublasSideMode_t side, cublasOperation_t trans, \
	int m, int n, int k, const T *A, int lda, const T *tau, T *C, int ldc, T *work, int lwork, int *info) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	if (info) \
		*info = 0; \
	RUN(ormqr(sizeof(T), side, trans, m, n, k, A, lda, tau, C, ldc), "ormqr_kernel", m, n, k, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##sytrf_bufferSize(cusolverDnHandle_t h, int n, T *A, int lda, int *lwork) \
{ \
	(void)n; (void)A; (void)lda; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##sytrf(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, T *A, int lda, \
	int *ipiv, T *work, int lwork, int *info) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	RUN(sytrf(sizeof(T), uplo, n, A, lda, ipiv, info), "sytrf_kernel", n, n, n / 3 + 1, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##syevd_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, \
	cublasFillMode_t uplo, int n, const T *A, int lda, const T *W, int *lwork) \
{ \
	(void)jobz; (void)uplo; (void)n; (void)A; (void)lda; (void)W; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##syevd(cusolverDnHandle_t h, cusolverEigMode_t jobz, cublasFillMode_t uplo, \
	int n, T *A, int lda, T *W, T *work, int lwork, int *info) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	RUN(syev(sizeof(T), sizeof(T), jobz, uplo, n, A, lda, W, info), "syevd_kernel", n, n, 4 * n, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##syevjBatched_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, \
	cublasFillMode_t uplo, int n, const T *A, int lda, const T *W, int *lwork, syevjInfo_t params, int batch) \
{ \
	(void)jobz; (void)uplo; (void)n; (void)A; (void)lda; (void)W; (void)params; (void)batch; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##syevjBatched(cusolverDnHandle_t h, cusolverEigMode_t jobz, \
	cublasFillMode_t uplo, int n, T *A, int lda, T *W, T *work, int lwork, int *info, syevjInfo_t params, int batch) \
{ \
	(void)work; (void)lwork; (void)params; \
	CHECK_H(); \
	for (int i = 0; i < batch; i++) { \
		cusolverStatus_t st = syev(sizeof(T), sizeof(T), jobz, uplo, n, (T *)A + (size_t)i * (size_t)lda * (size_t)n, \
			lda, (T *)W + (size_t)i * (size_t)n, info ? &info[i] : NULL); \
		if (st) \
			return st; \
	} \
	return launched(h, "syevj_batched_kernel", (uint64_t)n, (uint64_t)n, 4 * (uint64_t)n, (uint64_t)batch); \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvd_bufferSize(cusolverDnHandle_t h, int m, int n, int *lwork) \
{ \
	(void)m; (void)n; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvd(cusolverDnHandle_t h, signed char jobu, signed char jobvt, int m, int n, \
	T *A, int lda, T *S, T *U, int ldu, T *VT, int ldvt, T *work, int lwork, T *rwork, int *info) \
{ \
	(void)work; (void)lwork; (void)rwork; \
	CHECK_H(); \
	if (m < n) /* as cuSOLVER: gesvd wants m >= n */ \
		return CUSOLVER_STATUS_INVALID_VALUE; \
	int k = m < n ? m : n; \
	int ucols = jobu == 'A' ? m : jobu == 'S' ? k : 0, vrows = jobvt == 'A' ? n : jobvt == 'S' ? k : 0; \
	RUN(svd(sizeof(T), m, n, A, lda, S, ucols ? U : NULL, ldu, ucols, vrows ? VT : NULL, ldvt, vrows, 1, info), \
		"gesvd_kernel", m, n, 4 * n, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvdj_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, \
	int m, int n, const T *A, int lda, const T *S, const T *U, int ldu, const T *V, int ldv, int *lwork, \
	gesvdjInfo_t params) \
{ \
	(void)jobz; (void)econ; (void)m; (void)n; (void)A; (void)lda; (void)S; (void)U; (void)ldu; (void)V; (void)ldv; \
	(void)params; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvdj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, \
	T *A, int lda, T *S, T *U, int ldu, T *V, int ldv, T *work, int lwork, int *info, gesvdjInfo_t params) \
{ \
	(void)work; (void)lwork; (void)params; \
	CHECK_H(); \
	int k = m < n ? m : n, vec = jobz == CUSOLVER_EIG_MODE_VECTOR; \
	RUN(svd(sizeof(T), m, n, A, lda, S, vec ? U : NULL, ldu, econ ? k : m, vec ? V : NULL, ldv, econ ? k : n, 0, \
		info), "gesvdj_kernel", m, n, 4 * n, 1); \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvdjBatched_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, \
	int n, const T *A, int lda, const T *S, const T *U, int ldu, const T *V, int ldv, int *lwork, \
	gesvdjInfo_t params, int batch) \
{ \
	(void)jobz; (void)m; (void)n; (void)A; (void)lda; (void)S; (void)U; (void)ldu; (void)V; (void)ldv; \
	(void)params; (void)batch; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvdjBatched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, \
	T *A, int lda, T *S, T *U, int ldu, T *V, int ldv, T *work, int lwork, int *info, gesvdjInfo_t params, int batch) \
{ \
	(void)work; (void)lwork; (void)params; \
	CHECK_H(); \
	int k = m < n ? m : n, vec = jobz == CUSOLVER_EIG_MODE_VECTOR; \
	for (int i = 0; i < batch; i++) { \
		cusolverStatus_t st = svd(sizeof(T), m, n, A + (size_t)i * (size_t)lda * (size_t)n, lda, S + (size_t)i * k, \
			vec ? U + (size_t)i * (size_t)ldu * (size_t)m : NULL, ldu, m, \
			vec ? V + (size_t)i * (size_t)ldv * (size_t)n : NULL, ldv, n, 0, info ? &info[i] : NULL); \
		if (st) \
			return st; \
	} \
	return launched(h, "gesvdj_batched_kernel", (uint64_t)m, (uint64_t)n, 4 * (uint64_t)n, (uint64_t)batch); \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvdaStridedBatched_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, \
	int rank, int m, int n, const T *A, int lda, long long sA, const T *S, long long sS, const T *U, int ldu, \
	long long sU, const T *V, int ldv, long long sV, int *lwork, int batch) \
{ \
	(void)jobz; (void)rank; (void)m; (void)n; (void)A; (void)lda; (void)sA; (void)S; (void)sS; (void)U; (void)ldu; \
	(void)sU; (void)V; (void)ldv; (void)sV; (void)batch; \
	CHECK_H(); \
	LWORK(lwork, 1); \
	return CUSOLVER_STATUS_SUCCESS; \
} \
EXPORT cusolverStatus_t cusolverDn##P##gesvdaStridedBatched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int rank, \
	int m, int n, const T *A, int lda, long long sA, T *S, long long sS, T *U, int ldu, long long sU, T *V, int ldv, \
	long long sV, T *work, int lwork, int *info, double *h_R_nrmF, int batch) \
{ \
	(void)work; (void)lwork; \
	CHECK_H(); \
	if (m < n || rank < 1 || rank > n) /* as cuSOLVER: m >= n, 0 < rank <= n */ \
		return CUSOLVER_STATUS_INVALID_VALUE; \
	int vec = jobz == CUSOLVER_EIG_MODE_VECTOR; \
	T *s = malloc(sizeof(T) * (size_t)n); \
	T *a = malloc(sizeof(T) * (size_t)m * (size_t)n); \
	if (!s || !a) \
		ALLOC_FAIL(s, a); \
	for (int i = 0; i < batch; i++) { \
		for (int j = 0; j < n; j++) /* gesvda leaves A alone */ \
			memcpy(a + (size_t)j * m, A + (size_t)i * sA + (size_t)j * lda, sizeof(T) * (size_t)m); \
		cusolverStatus_t st = svd(sizeof(T), m, n, a, m, s, vec ? U + (size_t)i * sU : NULL, ldu, rank, \
			vec ? V + (size_t)i * sV : NULL, ldv, rank, 0, info ? &info[i] : NULL); \
		if (st) \
			ALLOC_FAIL(s, a); \
		memcpy(S + (size_t)i * sS, s, sizeof(T) * (size_t)rank); \
		if (h_R_nrmF) \
			h_R_nrmF[i] = 0; \
	} \
	free(s); \
	free(a); \
	return launched(h, "gesvda_batched_kernel", (uint64_t)m, (uint64_t)n, 4 * (uint64_t)n, (uint64_t)batch); \
}
LEGACY(S, float)
LEGACY(D, double)

/* ------------------------------------------------------------------ the 64-bit (X) API */

#define XSIZES(dev, host) do { if (dev) *(dev) = 0; if (host) *(host) = 0; } while (0)

EXPORT cusolverStatus_t cusolverDnXpotrf_bufferSize(cusolverDnHandle_t h, cusolverDnParams_t p, cublasFillMode_t uplo,
	int64_t n, cudaDataType tA, const void *A, int64_t lda, cudaDataType ct, size_t *dev, size_t *host)
{
	(void)p; (void)uplo; (void)n; (void)A; (void)lda; (void)ct;
	CHECK_H();
	if (!elem_of(tA))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t h, cusolverDnParams_t p, cublasFillMode_t uplo, int64_t n,
	cudaDataType tA, void *A, int64_t lda, cudaDataType ct, void *bd, size_t wd, void *bh, size_t wh, int *info)
{
	(void)p; (void)ct; (void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	if (!elem_of(tA))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	RUN(potrf(elem_of(tA), uplo, n, A, lda, info), "potrf_kernel", n, n, n / 3 + 1, 1);
}
EXPORT cusolverStatus_t cusolverDnXpotrs(cusolverDnHandle_t h, cusolverDnParams_t p, cublasFillMode_t uplo, int64_t n,
	int64_t nrhs, cudaDataType tA, const void *A, int64_t lda, cudaDataType tB, void *B, int64_t ldb, int *info)
{
	(void)p;
	CHECK_H();
	if (!elem_of(tA) || tA != tB)
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	if (info)
		*info = 0;
	RUN(potrs(elem_of(tA), uplo, n, nrhs, A, lda, B, ldb), "potrs_kernel", n, nrhs, n, 1);
}
EXPORT cusolverStatus_t cusolverDnXgeqrf_bufferSize(cusolverDnHandle_t h, cusolverDnParams_t p, int64_t m, int64_t n,
	cudaDataType tA, const void *A, int64_t lda, cudaDataType tT, const void *tau, cudaDataType ct, size_t *dev,
	size_t *host)
{
	(void)p; (void)m; (void)n; (void)A; (void)lda; (void)tT; (void)tau; (void)ct;
	CHECK_H();
	if (!elem_of(tA))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXgeqrf(cusolverDnHandle_t h, cusolverDnParams_t p, int64_t m, int64_t n,
	cudaDataType tA, void *A, int64_t lda, cudaDataType tT, void *tau, cudaDataType ct, void *bd, size_t wd,
	void *bh, size_t wh, int *info)
{
	(void)p; (void)ct; (void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	if (!elem_of(tA) || tA != tT)
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	if (info)
		*info = 0;
	RUN(geqrf(elem_of(tA), m, n, A, lda, tau), "geqrf_kernel", m, n, n, 1);
}
EXPORT cusolverStatus_t cusolverDnXgetrf_bufferSize(cusolverDnHandle_t h, cusolverDnParams_t p, int64_t m, int64_t n,
	cudaDataType tA, const void *A, int64_t lda, cudaDataType ct, size_t *dev, size_t *host)
{
	(void)p; (void)m; (void)n; (void)A; (void)lda; (void)ct;
	CHECK_H();
	if (!elem_of(tA))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXgetrf(cusolverDnHandle_t h, cusolverDnParams_t p, int64_t m, int64_t n,
	cudaDataType tA, void *A, int64_t lda, int64_t *ipiv, cudaDataType ct, void *bd, size_t wd, void *bh, size_t wh,
	int *info)
{
	(void)p; (void)ct; (void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	if (!elem_of(tA))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	RUN(getrf(elem_of(tA), m, n, A, lda, ipiv, 1, info), "getrf_kernel", m, n, (n < m ? n : m) / 3 + 1, 1);
}
EXPORT cusolverStatus_t cusolverDnXgetrs(cusolverDnHandle_t h, cusolverDnParams_t p, cublasOperation_t trans,
	int64_t n, int64_t nrhs, cudaDataType tA, const void *A, int64_t lda, const int64_t *ipiv, cudaDataType tB,
	void *B, int64_t ldb, int *info)
{
	(void)p;
	CHECK_H();
	if (!elem_of(tA) || tA != tB)
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	if (info)
		*info = 0;
	RUN(getrs(elem_of(tA), trans, n, nrhs, A, lda, ipiv, 1, B, ldb), "getrs_kernel", n, nrhs, n, 1);
}
EXPORT cusolverStatus_t cusolverDnXsytrs_bufferSize(cusolverDnHandle_t h, cublasFillMode_t uplo, int64_t n,
	int64_t nrhs, cudaDataType tA, const void *A, int64_t lda, const int64_t *ipiv, cudaDataType tB, void *B,
	int64_t ldb, size_t *dev, size_t *host)
{
	(void)uplo; (void)n; (void)nrhs; (void)A; (void)lda; (void)ipiv; (void)tB; (void)B; (void)ldb;
	CHECK_H();
	if (!elem_of(tA))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXsytrs(cusolverDnHandle_t h, cublasFillMode_t uplo, int64_t n, int64_t nrhs,
	cudaDataType tA, const void *A, int64_t lda, const int64_t *ipiv, cudaDataType tB, void *B, int64_t ldb,
	void *bd, size_t wd, void *bh, size_t wh, int *info)
{
	(void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	if (!elem_of(tA) || tA != tB)
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	if (info)
		*info = 0;
	RUN(sytrs(elem_of(tA), uplo, n, nrhs, A, lda, ipiv, B, ldb), "sytrs_kernel", n, nrhs, n, 1);
}
EXPORT cusolverStatus_t cusolverDnXsyevd_bufferSize(cusolverDnHandle_t h, cusolverDnParams_t p, cusolverEigMode_t jobz,
	cublasFillMode_t uplo, int64_t n, cudaDataType tA, const void *A, int64_t lda, cudaDataType tW, const void *W,
	cudaDataType ct, size_t *dev, size_t *host)
{
	(void)p; (void)jobz; (void)uplo; (void)n; (void)A; (void)lda; (void)W; (void)ct;
	CHECK_H();
	if (!elem_of(tA) || !elem_of(tW))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXsyevd(cusolverDnHandle_t h, cusolverDnParams_t p, cusolverEigMode_t jobz,
	cublasFillMode_t uplo, int64_t n, cudaDataType tA, void *A, int64_t lda, cudaDataType tW, void *W,
	cudaDataType ct, void *bd, size_t wd, void *bh, size_t wh, int *info)
{
	(void)p; (void)ct; (void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	if (!elem_of(tA) || !elem_of(tW))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	RUN(syev(elem_of(tA), elem_of(tW), jobz, uplo, n, A, lda, W, info), "syevd_kernel", n, n, 4 * n, 1);
}
EXPORT cusolverStatus_t cusolverDnXsyevBatched_bufferSize(cusolverDnHandle_t h, cusolverDnParams_t p,
	cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n, cudaDataType tA, const void *A, int64_t lda,
	cudaDataType tW, const void *W, cudaDataType ct, size_t *dev, size_t *host, int64_t batch)
{
	(void)p; (void)jobz; (void)uplo; (void)n; (void)A; (void)lda; (void)W; (void)ct; (void)batch;
	CHECK_H();
	if (!elem_of(tA) || !elem_of(tW))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXsyevBatched(cusolverDnHandle_t h, cusolverDnParams_t p, cusolverEigMode_t jobz,
	cublasFillMode_t uplo, int64_t n, cudaDataType tA, void *A, int64_t lda, cudaDataType tW, void *W,
	cudaDataType ct, void *bd, size_t wd, void *bh, size_t wh, int *info, int64_t batch)
{
	(void)p; (void)ct; (void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	int ea = elem_of(tA), ew = elem_of(tW);
	if (!ea || !ew)
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	for (int64_t i = 0; i < batch; i++) {
		cusolverStatus_t st = syev(ea, ew, jobz, uplo, n, (char *)A + (size_t)i * (size_t)lda * (size_t)n * ea, lda,
			(char *)W + (size_t)i * (size_t)n * ew, info ? &info[i] : NULL);
		if (st)
			return st;
	}
	return launched(h, "syev_batched_kernel", (uint64_t)n, (uint64_t)n, 4 * (uint64_t)n, (uint64_t)batch);
}

/* The general eigenproblem of a real matrix (dense_geev).  W is 2n reals (real parts, then imaginary) when
 * its type is real, n complex numbers when complex; VR real as LAPACK's (a conjugate pair's vector in two
 * columns).  Complex matrices and left eigenvectors (which cuSOLVER does not compute either) answer
 * NOT_SUPPORTED. */
static int geev_types_ok(cusolverEigMode_t jobvl, cudaDataType tA, cudaDataType tW, cudaDataType tVR)
{
	int e = elem_of(tA);
	int w_ok = tW == tA || (e == 4 && tW == CUDA_C_32F) || (e == 8 && tW == CUDA_C_64F);
	return e && w_ok && tVR == tA && jobvl == CUSOLVER_EIG_MODE_NOVECTOR;
}
EXPORT cusolverStatus_t cusolverDnXgeev_bufferSize(cusolverDnHandle_t h, cusolverDnParams_t p, cusolverEigMode_t jobvl,
	cusolverEigMode_t jobvr, int64_t n, cudaDataType tA, const void *A, int64_t lda, cudaDataType tW, const void *W,
	cudaDataType tVL, const void *VL, int64_t ldvl, cudaDataType tVR, const void *VR, int64_t ldvr, cudaDataType ct,
	size_t *dev, size_t *host)
{
	(void)p; (void)jobvr; (void)n; (void)A; (void)lda; (void)W; (void)tVL; (void)VL; (void)ldvl; (void)VR;
	(void)ldvr; (void)ct;
	CHECK_H();
	if (!geev_types_ok(jobvl, tA, tW, tVR))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	XSIZES(dev, host);
	return CUSOLVER_STATUS_SUCCESS;
}
EXPORT cusolverStatus_t cusolverDnXgeev(cusolverDnHandle_t h, cusolverDnParams_t p, cusolverEigMode_t jobvl,
	cusolverEigMode_t jobvr, int64_t n, cudaDataType tA, void *A, int64_t lda, cudaDataType tW, void *W,
	cudaDataType tVL, void *VL, int64_t ldvl, cudaDataType tVR, void *VR, int64_t ldvr, cudaDataType ct, void *bd,
	size_t wd, void *bh, size_t wh, int *info)
{
	(void)p; (void)tVL; (void)VL; (void)ldvl; (void)ct; (void)bd; (void)wd; (void)bh; (void)wh;
	CHECK_H();
	if (!geev_types_ok(jobvl, tA, tW, tVR))
		return CUSOLVER_STATUS_NOT_SUPPORTED;
	int e = elem_of(tA), vectors = jobvr == CUSOLVER_EIG_MODE_VECTOR && VR;
	size_t nn = (size_t)(n > 0 ? n : 1);
	double *a = dense_load(A, e, n, n, lda), *wr = malloc(sizeof(double) * nn), *wi = malloc(sizeof(double) * nn);
	double *vr = vectors ? malloc(sizeof(double) * nn * nn) : NULL;
	if (!a || !wr || !wi || (vectors && !vr))
		ALLOC_FAIL(a, wr, wi, vr);
	int r = dense_geev(n, a, n, wr, wi, vr, n);
	if (tW == tA) {
		dense_store(W, e, wr, n, 1, n > 0 ? n : 1);
		dense_store((char *)W + (size_t)n * e, e, wi, n, 1, n > 0 ? n : 1);
	} else {
		for (int64_t i = 0; i < n; i++) { /* interleaved complex */
			dense_store((char *)W + (size_t)(2 * i) * e, e, &wr[i], 1, 1, 1);
			dense_store((char *)W + (size_t)(2 * i + 1) * e, e, &wi[i], 1, 1, 1);
		}
	}
	if (vectors)
		dense_store(VR, e, vr, n, n, ldvr);
	free(a); free(wr); free(wi); free(vr);
	if (info)
		*info = r ? 1 : 0;
	return launched(h, "geev_kernel", (uint64_t)n, (uint64_t)n, 10 * (uint64_t)n, 1);
}

/* ------------------------------------------------------------------ the rest of cuSOLVER */

EXPORT int simgpu_cusolver_unsupported(const char *name);
EXPORT int simgpu_cusolver_unsupported(const char *name)
{
	static int warn = -1;
	if (warn < 0) {
		const char *v = getenv("SIMGPU_WARN_UNSUPPORTED");
		warn = v && strcmp(v, "0") != 0;
	}
	if (warn)
		fprintf(stderr, "simgpu: %s is not simulated (CUSOLVER_STATUS_NOT_SUPPORTED)\n", name);
	return CUSOLVER_STATUS_NOT_SUPPORTED;
}
