/*
 * simgpu: the dense linear algebra the library stand-ins (cuBLAS's level 1 and batched solvers, cuSOLVER)
 * compute on the host.  Device memory is host memory, so a library call can produce its real results at
 * the call, as copies do; kernels still compute nothing, so only what a library writes holds values.
 * Matrices are column-major (element (i, j) at a[i + j * ld]), in double: callers widen float data into
 * a double copy and narrow the results back (dense_load / dense_store).  LAPACK's conventions (1-based
 * pivots, Householder reflectors as dlarfg makes them), so results agree with PyTorch's CPU LAPACK to
 * rounding.
 */
#ifndef SIMGPU_DENSE_H
#define SIMGPU_DENSE_H

#include <stddef.h>
#include <stdint.h>

/* A matrix of m x n elements of `elem` bytes (4: float, 8: double) with leading dimension ld, as doubles
 * (column-major, leading dimension m).  dense_load returns NULL when out of memory. */
double *dense_load(const void *src, int elem, int64_t m, int64_t n, int64_t ld);
void dense_store(void *dst, int elem, const double *a, int64_t m, int64_t n, int64_t ld);

/* Cholesky of the `upper` or lower triangle: returns 0, or the order of the first non-positive minor. */
int dense_potrf(int upper, int64_t n, double *a, int64_t lda);
/* Solves A X = B with A's Cholesky factor. */
void dense_potrs(int upper, int64_t n, int64_t nrhs, const double *a, int64_t lda, double *b, int64_t ldb);
/* LU with partial pivoting (ipiv 1-based; NULL: no pivoting): returns 0, or the first zero pivot's 1-based index. */
int dense_getrf(int64_t m, int64_t n, double *a, int64_t lda, int64_t *ipiv);
/* Solves op(A) X = B with getrf's factors (trans: 0 N, 1 T). */
void dense_getrs(int trans, int64_t n, int64_t nrhs, const double *a, int64_t lda, const int64_t *ipiv, double *b,
	int64_t ldb);
/* B := alpha op(A)^-1 B (left) or alpha B op(A)^-1 (right); A triangular (upper), unit diagonal (unit). */
void dense_trsm(int left, int upper, int trans, int unit, int64_t m, int64_t n, double alpha, const double *a,
	int64_t lda, double *b, int64_t ldb);
/* Householder QR: R in the upper triangle, reflectors below it and in tau (min(m, n) of them). */
void dense_geqrf(int64_t m, int64_t n, double *a, int64_t lda, double *tau);
/* The first n columns of Q = H(1)...H(k) from geqrf's reflectors, in place. */
void dense_orgqr(int64_t m, int64_t n, int64_t k, double *a, int64_t lda, const double *tau);
/* C := op(Q) C (left) or C op(Q) (right), Q from k reflectors of an (left ? m : n)-row geqrf. */
void dense_ormqr(int left, int trans, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
	const double *tau, double *c, int64_t ldc);
/* Symmetric eigendecomposition of the `upper` or lower triangle (Jacobi): w ascending; with vectors,
 * a := the eigenvectors (columns).  Returns 0, or 1 if it did not converge. */
int dense_syev(int vectors, int upper, int64_t n, double *a, int64_t lda, double *w);
/* SVD (one-sided Jacobi) of m x n A: s descending (min(m, n)); u m x ucols (ucols = min(m, n) or m, left
 * vectors completed to an orthonormal basis), v n x vcols (vcols = min(m, n) or n), either may be NULL.
 * A is destroyed.  Returns 0, or 1 if it did not converge. */
int dense_gesvd(int64_t m, int64_t n, double *a, int64_t lda, double *s, double *u, int64_t ldu, int64_t ucols,
	double *v, int64_t ldv, int64_t vcols);
/* Symmetric LDL^T without pivoting (1x1 blocks; ipiv[i] = i + 1, as sytrf's no-interchange pivots):
 * returns 0, or the 1-based index of a zero pivot. */
int dense_sytrf(int upper, int64_t n, double *a, int64_t lda, int64_t *ipiv);
/* Solves A X = B with sytrf's factors (LAPACK's: 1-based pivots, negative for a 2x2 block; every
 * |ipiv[i]| in [1, n]). */
void dense_sytrs(int upper, int64_t n, int64_t nrhs, const double *a, int64_t lda, const int64_t *ipiv, double *b,
	int64_t ldb);
/* Eigenvalues (and right eigenvectors) of a general real matrix, as LAPACK's dgeev lays them out: wr, wi
 * (a conjugate pair adjacent, positive imaginary part first); vr (may be NULL) real, a pair's vector as its
 * real and imaginary columns, unit norm, largest component real.  Returns 0, or 1 if QR did not converge. */
int dense_geev(int64_t n, const double *a, int64_t lda, double *wr, double *wi, double *vr, int64_t ldvr);

#endif
