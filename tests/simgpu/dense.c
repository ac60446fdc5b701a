/*
 * simgpu: host-side dense linear algebra for the library stand-ins (dense.h).  Unblocked textbook
 * algorithms: the matrices PyTorch hands a library in tests are small, and these run at the call.
 */
#include "dense.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AT(a, ld, i, j) ((a)[(size_t)(i) + (size_t)(j) * (size_t)(ld)])

double *dense_load(const void *src, int elem, int64_t m, int64_t n, int64_t ld)
{
	double *a = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1) * (size_t)(n > 0 ? n : 1));
	if (!a)
		return NULL;
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < m; i++)
			AT(a, m, i, j) = elem == 4 ? (double)AT((const float *)src, ld, i, j) : AT((const double *)src, ld, i, j);
	return a;
}

void dense_store(void *dst, int elem, const double *a, int64_t m, int64_t n, int64_t ld)
{
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < m; i++) {
			if (elem == 4)
				AT((float *)dst, ld, i, j) = (float)AT(a, m, i, j);
			else
				AT((double *)dst, ld, i, j) = AT(a, m, i, j);
		}
}

/* The lower factor's element (i, j): an upper factor is its transpose. */
static double *tri(int upper, double *a, int64_t lda, int64_t i, int64_t j)
{
	return upper ? &AT(a, lda, j, i) : &AT(a, lda, i, j);
}

int dense_potrf(int upper, int64_t n, double *a, int64_t lda)
{
	for (int64_t j = 0; j < n; j++) {
		double d = *tri(upper, a, lda, j, j);
		for (int64_t k = 0; k < j; k++)
			d -= *tri(upper, a, lda, j, k) * *tri(upper, a, lda, j, k);
		if (!(d > 0))
			return (int)j + 1;
		d = sqrt(d);
		*tri(upper, a, lda, j, j) = d;
		for (int64_t i = j + 1; i < n; i++) {
			double s = *tri(upper, a, lda, i, j);
			for (int64_t k = 0; k < j; k++)
				s -= *tri(upper, a, lda, i, k) * *tri(upper, a, lda, j, k);
			*tri(upper, a, lda, i, j) = s / d;
		}
	}
	return 0;
}

void dense_potrs(int upper, int64_t n, int64_t nrhs, const double *a, int64_t lda, double *b, int64_t ldb)
{
	double *l = (double *)a; /* read only */
	for (int64_t c = 0; c < nrhs; c++) {
		double *x = &AT(b, ldb, 0, c);
		for (int64_t i = 0; i < n; i++) { /* L y = b */
			double s = x[i];
			for (int64_t k = 0; k < i; k++)
				s -= *tri(upper, l, lda, i, k) * x[k];
			x[i] = s / *tri(upper, l, lda, i, i);
		}
		for (int64_t i = n - 1; i >= 0; i--) { /* L^T x = y */
			double s = x[i];
			for (int64_t k = i + 1; k < n; k++)
				s -= *tri(upper, l, lda, k, i) * x[k];
			x[i] = s / *tri(upper, l, lda, i, i);
		}
	}
}

int dense_getrf(int64_t m, int64_t n, double *a, int64_t lda, int64_t *ipiv)
{
	int info = 0;
	int64_t k = m < n ? m : n;
	for (int64_t j = 0; j < k; j++) {
		int64_t p = j;
		for (int64_t i = j + 1; ipiv && i < m; i++)
			if (fabs(AT(a, lda, i, j)) > fabs(AT(a, lda, p, j)))
				p = i;
		if (ipiv)
			ipiv[j] = p + 1;
		if (p != j)
			for (int64_t c = 0; c < n; c++) {
				double t = AT(a, lda, j, c);
				AT(a, lda, j, c) = AT(a, lda, p, c);
				AT(a, lda, p, c) = t;
			}
		double d = AT(a, lda, j, j);
		if (d == 0) {
			if (!info)
				info = (int)j + 1;
			continue;
		}
		for (int64_t i = j + 1; i < m; i++)
			AT(a, lda, i, j) /= d;
		for (int64_t c = j + 1; c < n; c++)
			for (int64_t i = j + 1; i < m; i++)
				AT(a, lda, i, c) -= AT(a, lda, i, j) * AT(a, lda, j, c);
	}
	return info;
}

static void swap_rows(double *b, int64_t ldb, int64_t nrhs, int64_t r1, int64_t r2)
{
	if (r1 == r2)
		return;
	for (int64_t c = 0; c < nrhs; c++) {
		double t = AT(b, ldb, r1, c);
		AT(b, ldb, r1, c) = AT(b, ldb, r2, c);
		AT(b, ldb, r2, c) = t;
	}
}

void dense_getrs(int trans, int64_t n, int64_t nrhs, const double *a, int64_t lda, const int64_t *ipiv, double *b,
	int64_t ldb)
{
	if (!trans) {
		for (int64_t i = 0; i < n; i++)
			swap_rows(b, ldb, nrhs, i, ipiv[i] - 1);
		dense_trsm(1, 0, 0, 1, n, nrhs, 1.0, a, lda, b, ldb);
		dense_trsm(1, 1, 0, 0, n, nrhs, 1.0, a, lda, b, ldb);
	} else {
		dense_trsm(1, 1, 1, 0, n, nrhs, 1.0, a, lda, b, ldb);
		dense_trsm(1, 0, 1, 1, n, nrhs, 1.0, a, lda, b, ldb);
		for (int64_t i = n - 1; i >= 0; i--)
			swap_rows(b, ldb, nrhs, i, ipiv[i] - 1);
	}
}

/* Solves T x = r for triangular T (k x k; element (i, j) = t(i, j)), x overwriting r (stride inc). */
static void tri_solve(int lower, int unit, int64_t k, const double *a, int64_t lda, int transposed, double *r,
	int64_t inc)
{
#define T_(i, j) (transposed ? AT(a, lda, j, i) : AT(a, lda, i, j))
	if (lower) {
		for (int64_t i = 0; i < k; i++) {
			double s = r[i * inc];
			for (int64_t c = 0; c < i; c++)
				s -= T_(i, c) * r[c * inc];
			r[i * inc] = unit ? s : s / T_(i, i);
		}
	} else {
		for (int64_t i = k - 1; i >= 0; i--) {
			double s = r[i * inc];
			for (int64_t c = i + 1; c < k; c++)
				s -= T_(i, c) * r[c * inc];
			r[i * inc] = unit ? s : s / T_(i, i);
		}
	}
#undef T_
}

void dense_trsm(int left, int upper, int trans, int unit, int64_t m, int64_t n, double alpha, const double *a,
	int64_t lda, double *b, int64_t ldb)
{
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < m; i++)
			AT(b, ldb, i, j) *= alpha;
	if (left) {
		/* op(A) x = b for each column: op(A) is lower when A is lower and not transposed, or upper and transposed */
		int lower = !upper != !!trans;
		for (int64_t j = 0; j < n; j++)
			tri_solve(lower, unit, m, a, lda, trans, &AT(b, ldb, 0, j), 1);
	} else {
		/* x op(A) = b for each row: op(A)^T x^T = b^T */
		int lower = !(!upper != !!trans);
		for (int64_t i = 0; i < m; i++)
			tri_solve(lower, unit, n, a, lda, !trans, &AT(b, ldb, i, 0), ldb);
	}
}

/* H = I - tau v v^T with v = (1, a[i+1..rows-1, col]) applied to rows i.. of C from the left. */
static void reflect_left(const double *a, int64_t lda, int64_t col, int64_t i, int64_t rows, double tau, double *c,
	int64_t ldc, int64_t ncols)
{
	if (tau == 0)
		return;
	for (int64_t j = 0; j < ncols; j++) {
		double w = AT(c, ldc, i, j);
		for (int64_t r = i + 1; r < rows; r++)
			w += AT(a, lda, r, col) * AT(c, ldc, r, j);
		w *= tau;
		AT(c, ldc, i, j) -= w;
		for (int64_t r = i + 1; r < rows; r++)
			AT(c, ldc, r, j) -= w * AT(a, lda, r, col);
	}
}

/* The same from the right, on columns i.. of C's nrows rows. */
static void reflect_right(const double *a, int64_t lda, int64_t col, int64_t i, int64_t cols, double tau, double *c,
	int64_t ldc, int64_t nrows)
{
	if (tau == 0)
		return;
	for (int64_t r = 0; r < nrows; r++) {
		double w = AT(c, ldc, r, i);
		for (int64_t j = i + 1; j < cols; j++)
			w += AT(c, ldc, r, j) * AT(a, lda, j, col);
		w *= tau;
		AT(c, ldc, r, i) -= w;
		for (int64_t j = i + 1; j < cols; j++)
			AT(c, ldc, r, j) -= w * AT(a, lda, j, col);
	}
}

void dense_geqrf(int64_t m, int64_t n, double *a, int64_t lda, double *tau)
{
	int64_t k = m < n ? m : n;
	for (int64_t i = 0; i < k; i++) {
		double alpha = AT(a, lda, i, i), xnorm = 0;
		for (int64_t r = i + 1; r < m; r++)
			xnorm = hypot(xnorm, AT(a, lda, r, i));
		if (xnorm == 0) {
			tau[i] = 0;
			continue;
		}
		double beta = -copysign(hypot(alpha, xnorm), alpha);
		tau[i] = (beta - alpha) / beta;
		for (int64_t r = i + 1; r < m; r++)
			AT(a, lda, r, i) /= alpha - beta;
		AT(a, lda, i, i) = beta;
		reflect_left(a, lda, i, i, m, tau[i], &AT(a, lda, 0, i + 1), lda, n - i - 1);
	}
}

void dense_orgqr(int64_t m, int64_t n, int64_t k, double *a, int64_t lda, const double *tau)
{
	for (int64_t j = k; j < n; j++)
		for (int64_t r = 0; r < m; r++)
			AT(a, lda, r, j) = r == j;
	for (int64_t i = k - 1; i >= 0; i--) {
		if (i < n - 1)
			reflect_left(a, lda, i, i, m, tau[i], &AT(a, lda, 0, i + 1), lda, n - i - 1);
		for (int64_t r = i + 1; r < m; r++)
			AT(a, lda, r, i) *= -tau[i];
		AT(a, lda, i, i) = 1 - tau[i];
		for (int64_t r = 0; r < i; r++)
			AT(a, lda, r, i) = 0;
	}
}

void dense_ormqr(int left, int trans, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
	const double *tau, double *c, int64_t ldc)
{
	/* Q = H(1)...H(k): Q C applies H(k) first, Q^T C H(1) first; C Q applies H(1) first, C Q^T H(k) first. */
	int forward = left ? trans : !trans;
	for (int64_t s = 0; s < k; s++) {
		int64_t i = forward ? s : k - 1 - s;
		if (left)
			reflect_left(a, lda, i, i, m, tau[i], c, ldc, n);
		else
			reflect_right(a, lda, i, i, n, tau[i], c, ldc, m);
	}
}

/* Sorts w (n) ascending or descending, permuting the columns of v (rows x n, may be NULL) along. */
static void sort_with_vectors(int64_t n, double *w, int descending, double *v, int64_t rows, int64_t ldv)
{
	for (int64_t i = 0; i < n; i++) {
		int64_t best = i;
		for (int64_t j = i + 1; j < n; j++)
			if (descending ? w[j] > w[best] : w[j] < w[best])
				best = j;
		if (best == i)
			continue;
		double t = w[i]; w[i] = w[best]; w[best] = t;
		if (v)
			for (int64_t r = 0; r < rows; r++) {
				t = AT(v, ldv, r, i); AT(v, ldv, r, i) = AT(v, ldv, r, best); AT(v, ldv, r, best) = t;
			}
	}
}

int dense_syev(int vectors, int upper, int64_t n, double *a, int64_t lda, double *w)
{
	size_t nn = (size_t)(n > 0 ? n : 1);
	double *s = malloc(sizeof(double) * nn * nn), *v = calloc(nn * nn, sizeof(double));
	if (!s || !v) {
		free(s); free(v);
		return 1;
	}
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < n; i++)
			AT(s, n, i, j) = (upper ? i <= j : i >= j) ? AT(a, lda, i, j) : AT(a, lda, j, i);
	for (int64_t i = 0; i < n; i++)
		AT(v, n, i, i) = 1;
	int converged = 0;
	for (int sweep = 0; sweep < 100 && !converged; sweep++) {
		double off = 0, total = 0;
		for (int64_t j = 0; j < n; j++)
			for (int64_t i = 0; i < n; i++) {
				total += AT(s, n, i, j) * AT(s, n, i, j);
				if (i != j)
					off += AT(s, n, i, j) * AT(s, n, i, j);
			}
		if (off <= DBL_EPSILON * DBL_EPSILON * total || off < DBL_MIN) {
			converged = 1;
			break;
		}
		for (int64_t p = 0; p < n; p++)
			for (int64_t q = p + 1; q < n; q++) {
				double apq = AT(s, n, p, q);
				if (apq == 0)
					continue;
				double theta = (AT(s, n, q, q) - AT(s, n, p, p)) / (2 * apq);
				double t = copysign(1.0, theta) / (fabs(theta) + sqrt(theta * theta + 1));
				double c = 1 / sqrt(t * t + 1), sn = t * c;
				for (int64_t r = 0; r < n; r++) {
					double xp = AT(s, n, r, p), xq = AT(s, n, r, q);
					AT(s, n, r, p) = c * xp - sn * xq;
					AT(s, n, r, q) = sn * xp + c * xq;
				}
				for (int64_t r = 0; r < n; r++) {
					double xp = AT(s, n, p, r), xq = AT(s, n, q, r);
					AT(s, n, p, r) = c * xp - sn * xq;
					AT(s, n, q, r) = sn * xp + c * xq;
				}
				for (int64_t r = 0; r < n; r++) {
					double xp = AT(v, n, r, p), xq = AT(v, n, r, q);
					AT(v, n, r, p) = c * xp - sn * xq;
					AT(v, n, r, q) = sn * xp + c * xq;
				}
			}
	}
	for (int64_t i = 0; i < n; i++)
		w[i] = AT(s, n, i, i);
	sort_with_vectors(n, w, 0, v, n, n);
	if (vectors)
		for (int64_t j = 0; j < n; j++)
			for (int64_t i = 0; i < n; i++)
				AT(a, lda, i, j) = AT(v, n, i, j);
	free(s);
	free(v);
	return !converged;
}

/* Columns [0, want) of q (rows x want) orthonormal: a column whose `have` flag is 0 is replaced by the unit
 * vector that Gram-Schmidt (twice) against the others leaves longest. */
static void complete_basis(double *q, int64_t ldq, int64_t rows, int64_t want, const char *have)
{
	double *x = malloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1));
	char *ok = malloc((size_t)(want > 0 ? want : 1));
	if (!x || !ok) {
		free(x); free(ok);
		return;
	}
	for (int64_t j = 0; j < want; j++)
		ok[j] = have[j];
	for (int64_t j = 0; j < want; j++) {
		if (ok[j])
			continue;
		double best_norm = -1;
		int64_t best = 0;
		for (int64_t e = 0; e < rows; e++) {
			for (int64_t r = 0; r < rows; r++)
				x[r] = r == e;
			for (int pass = 0; pass < 2; pass++)
				for (int64_t c = 0; c < want; c++) {
					if (!ok[c])
						continue;
					double d = 0;
					for (int64_t r = 0; r < rows; r++)
						d += AT(q, ldq, r, c) * x[r];
					for (int64_t r = 0; r < rows; r++)
						x[r] -= d * AT(q, ldq, r, c);
				}
			double nrm = 0;
			for (int64_t r = 0; r < rows; r++)
				nrm += x[r] * x[r];
			if (nrm > best_norm + 1e-12) {
				best_norm = nrm;
				best = e;
			}
		}
		for (int64_t r = 0; r < rows; r++)
			x[r] = r == best;
		for (int pass = 0; pass < 2; pass++)
			for (int64_t c = 0; c < want; c++) {
				if (!ok[c])
					continue;
				double d = 0;
				for (int64_t r = 0; r < rows; r++)
					d += AT(q, ldq, r, c) * x[r];
				for (int64_t r = 0; r < rows; r++)
					x[r] -= d * AT(q, ldq, r, c);
			}
		double nrm = 0;
		for (int64_t r = 0; r < rows; r++)
			nrm += x[r] * x[r];
		nrm = sqrt(nrm);
		for (int64_t r = 0; r < rows; r++)
			AT(q, ldq, r, j) = nrm > 0 ? x[r] / nrm : 0;
		ok[j] = 1;
	}
	free(x);
	free(ok);
}

/* One-sided Jacobi on w (m x n, m >= n): w := U S, v := V (n x n).  Returns 0 when converged. */
static int jacobi_svd(int64_t m, int64_t n, double *w, double *v)
{
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < n; i++)
			AT(v, n, i, j) = i == j;
	for (int sweep = 0; sweep < 100; sweep++) {
		int rotated = 0;
		for (int64_t p = 0; p < n; p++)
			for (int64_t q = p + 1; q < n; q++) {
				double al = 0, be = 0, ga = 0;
				for (int64_t r = 0; r < m; r++) {
					al += AT(w, m, r, p) * AT(w, m, r, p);
					be += AT(w, m, r, q) * AT(w, m, r, q);
					ga += AT(w, m, r, p) * AT(w, m, r, q);
				}
				if (ga == 0 || fabs(ga) <= DBL_EPSILON * sqrt(al * be))
					continue;
				rotated = 1;
				double zeta = (be - al) / (2 * ga);
				double t = copysign(1.0, zeta) / (fabs(zeta) + sqrt(1 + zeta * zeta));
				double c = 1 / sqrt(1 + t * t), s = c * t;
				for (int64_t r = 0; r < m; r++) {
					double xp = AT(w, m, r, p), xq = AT(w, m, r, q);
					AT(w, m, r, p) = c * xp - s * xq;
					AT(w, m, r, q) = s * xp + c * xq;
				}
				for (int64_t r = 0; r < n; r++) {
					double xp = AT(v, n, r, p), xq = AT(v, n, r, q);
					AT(v, n, r, p) = c * xp - s * xq;
					AT(v, n, r, q) = s * xp + c * xq;
				}
			}
		if (!rotated)
			return 0;
	}
	return 1;
}

int dense_gesvd(int64_t m, int64_t n, double *a, int64_t lda, double *s, double *u, int64_t ldu, int64_t ucols,
	double *v, int64_t ldv, int64_t vcols)
{
	/* m < n: the SVD of A^T = U' S V'^T gives A = V' S U'^T. */
	int tr = m < n;
	int64_t rows = tr ? n : m, k = tr ? m : n; /* working matrix rows x k, rows >= k */
	double *w = malloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1) * (size_t)(k > 0 ? k : 1));
	double *vv = malloc(sizeof(double) * (size_t)(k > 0 ? k : 1) * (size_t)(k > 0 ? k : 1));
	double *uu = malloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1) * (size_t)(rows > 0 ? rows : 1));
	char *have = malloc((size_t)(rows > 0 ? rows : 1));
	if (!w || !vv || !uu || !have) {
		free(w); free(vv); free(uu); free(have);
		return 1;
	}
	for (int64_t j = 0; j < k; j++)
		for (int64_t i = 0; i < rows; i++)
			AT(w, rows, i, j) = tr ? AT(a, lda, j, i) : AT(a, lda, i, j);
	int info = jacobi_svd(rows, k, w, vv);
	for (int64_t j = 0; j < k; j++) {
		double nrm = 0;
		for (int64_t i = 0; i < rows; i++)
			nrm += AT(w, rows, i, j) * AT(w, rows, i, j);
		s[j] = sqrt(nrm);
	}
	/* the left vectors of the working matrix (rows x rows, completed), its right ones vv (k x k) */
	for (int64_t j = 0; j < k; j++)
		for (int64_t i = 0; i < rows; i++)
			AT(uu, rows, i, j) = s[j] > 0 ? AT(w, rows, i, j) / s[j] : 0;
	/* sort descending, moving both vector sets */
	for (int64_t i = 0; i < k; i++) {
		int64_t best = i;
		for (int64_t j = i + 1; j < k; j++)
			if (s[j] > s[best])
				best = j;
		if (best == i)
			continue;
		double t = s[i]; s[i] = s[best]; s[best] = t;
		for (int64_t r = 0; r < rows; r++) {
			t = AT(uu, rows, r, i); AT(uu, rows, r, i) = AT(uu, rows, r, best); AT(uu, rows, r, best) = t;
		}
		for (int64_t r = 0; r < k; r++) {
			t = AT(vv, k, r, i); AT(vv, k, r, i) = AT(vv, k, r, best); AT(vv, k, r, best) = t;
		}
	}
	double smax = k ? s[0] : 0;
	for (int64_t j = 0; j < rows; j++)
		have[j] = j < k && s[j] > smax * DBL_EPSILON * (double)rows && s[j] > 0;
	complete_basis(uu, rows, rows, rows, have);
	/* A's U is uu (or vv when transposed), its V vv (or uu). */
	const double *left = tr ? vv : uu, *right = tr ? uu : vv;
	int64_t ldl = tr ? k : rows, ldr = tr ? rows : k;
	if (u)
		for (int64_t j = 0; j < ucols; j++)
			for (int64_t i = 0; i < m; i++)
				AT(u, ldu, i, j) = j < (tr ? k : rows) ? AT(left, ldl, i, j) : 0;
	if (v)
		for (int64_t j = 0; j < vcols; j++)
			for (int64_t i = 0; i < n; i++)
				AT(v, ldv, i, j) = j < (tr ? rows : k) ? AT(right, ldr, i, j) : 0;
	free(w); free(vv); free(uu); free(have);
	return info;
}

/* LDL^T element (i, j) of the lower factor; the upper case (A = U D U^T) reverses both indices. */
static double *ldl(int upper, int64_t n, double *a, int64_t lda, int64_t i, int64_t j)
{
	return upper ? &AT(a, lda, n - 1 - i, n - 1 - j) : &AT(a, lda, i, j);
}

int dense_sytrf(int upper, int64_t n, double *a, int64_t lda, int64_t *ipiv)
{
	int info = 0;
	for (int64_t j = 0; j < n; j++) {
		double d = *ldl(upper, n, a, lda, j, j);
		for (int64_t k = 0; k < j; k++)
			d -= *ldl(upper, n, a, lda, j, k) * *ldl(upper, n, a, lda, j, k) * *ldl(upper, n, a, lda, k, k);
		*ldl(upper, n, a, lda, j, j) = d;
		ipiv[upper ? n - 1 - j : j] = (upper ? n - 1 - j : j) + 1;
		if (d == 0) {
			if (!info)
				info = (int)(upper ? n - j : j + 1);
			continue;
		}
		for (int64_t i = j + 1; i < n; i++) {
			double s = *ldl(upper, n, a, lda, i, j);
			for (int64_t k = 0; k < j; k++)
				s -= *ldl(upper, n, a, lda, i, k) * *ldl(upper, n, a, lda, j, k) * *ldl(upper, n, a, lda, k, k);
			*ldl(upper, n, a, lda, i, j) = s / d;
		}
	}
	return info;
}

/* LAPACK's dsytrs: any 1x1 or 2x2 Bunch-Kaufman pivots (ipiv 1-based, negative for a 2x2 block). */
void dense_sytrs(int upper, int64_t n, int64_t nrhs, const double *a, int64_t lda, const int64_t *ipiv, double *b,
	int64_t ldb)
{
#define A_(i, j) AT(a, lda, i, j)
#define B_(i, j) AT(b, ldb, i, j)
	if (!upper) {
		for (int64_t k = 0; k < n;) { /* L D y = b */
			if (ipiv[k] > 0) {
				swap_rows(b, ldb, nrhs, k, ipiv[k] - 1);
				for (int64_t j = 0; j < nrhs; j++) {
					for (int64_t i = k + 1; i < n; i++)
						B_(i, j) -= A_(i, k) * B_(k, j);
					B_(k, j) /= A_(k, k);
				}
				k++;
			} else {
				if (k + 1 >= n)
					break;
				swap_rows(b, ldb, nrhs, k + 1, -ipiv[k] - 1);
				double akm1k = A_(k + 1, k), akm1 = A_(k, k) / akm1k, ak = A_(k + 1, k + 1) / akm1k;
				double denom = akm1 * ak - 1;
				for (int64_t j = 0; j < nrhs; j++) {
					for (int64_t i = k + 2; i < n; i++)
						B_(i, j) -= A_(i, k) * B_(k, j) + A_(i, k + 1) * B_(k + 1, j);
					double bkm1 = B_(k, j) / akm1k, bk = B_(k + 1, j) / akm1k;
					B_(k, j) = (ak * bkm1 - bk) / denom;
					B_(k + 1, j) = (akm1 * bk - bkm1) / denom;
				}
				k += 2;
			}
		}
		for (int64_t k = n - 1; k >= 0;) { /* L^T x = y */
			if (ipiv[k] > 0) {
				for (int64_t j = 0; j < nrhs; j++)
					for (int64_t i = k + 1; i < n; i++)
						B_(k, j) -= A_(i, k) * B_(i, j);
				swap_rows(b, ldb, nrhs, k, ipiv[k] - 1);
				k--;
			} else {
				if (k < 1)
					break;
				for (int64_t j = 0; j < nrhs; j++)
					for (int64_t i = k + 1; i < n; i++) {
						B_(k, j) -= A_(i, k) * B_(i, j);
						B_(k - 1, j) -= A_(i, k - 1) * B_(i, j);
					}
				swap_rows(b, ldb, nrhs, k, -ipiv[k] - 1);
				k -= 2;
			}
		}
	} else {
		for (int64_t k = n - 1; k >= 0;) { /* U D y = b */
			if (ipiv[k] > 0) {
				swap_rows(b, ldb, nrhs, k, ipiv[k] - 1);
				for (int64_t j = 0; j < nrhs; j++) {
					for (int64_t i = 0; i < k; i++)
						B_(i, j) -= A_(i, k) * B_(k, j);
					B_(k, j) /= A_(k, k);
				}
				k--;
			} else {
				if (k < 1)
					break;
				swap_rows(b, ldb, nrhs, k - 1, -ipiv[k] - 1);
				double akm1k = A_(k - 1, k), akm1 = A_(k - 1, k - 1) / akm1k, ak = A_(k, k) / akm1k;
				double denom = akm1 * ak - 1;
				for (int64_t j = 0; j < nrhs; j++) {
					for (int64_t i = 0; i < k - 1; i++)
						B_(i, j) -= A_(i, k) * B_(k, j) + A_(i, k - 1) * B_(k - 1, j);
					double bkm1 = B_(k - 1, j) / akm1k, bk = B_(k, j) / akm1k;
					B_(k - 1, j) = (ak * bkm1 - bk) / denom;
					B_(k, j) = (akm1 * bk - bkm1) / denom;
				}
				k -= 2;
			}
		}
		for (int64_t k = 0; k < n;) { /* U^T x = y */
			if (ipiv[k] > 0) {
				for (int64_t j = 0; j < nrhs; j++)
					for (int64_t i = 0; i < k; i++)
						B_(k, j) -= A_(i, k) * B_(i, j);
				swap_rows(b, ldb, nrhs, k, ipiv[k] - 1);
				k++;
			} else {
				if (k + 1 >= n)
					break;
				for (int64_t j = 0; j < nrhs; j++)
					for (int64_t i = 0; i < k; i++) {
						B_(k, j) -= A_(i, k) * B_(i, j);
						B_(k + 1, j) -= A_(i, k + 1) * B_(i, j);
					}
				swap_rows(b, ldb, nrhs, k, -ipiv[k] - 1);
				k += 2;
			}
		}
	}
#undef A_
#undef B_
}

/* General eigenproblem of a real matrix: reduction to Hessenberg form, then complex single-shift QR
 * (Wilkinson shifts, Givens bulge chasing) to a complex Schur form T = Z^H A Z, eigenvectors by back
 * substitution in T.  Output as LAPACK's dgeev: real parts in wr, imaginary parts in wi, a conjugate pair
 * adjacent with the positive imaginary part first; vr (if not NULL) real, a pair's vectors as two columns
 * (real part, imaginary part), each vector of unit norm with its largest component real. */

int dense_geev(int64_t n, const double *a, int64_t lda, double *wr, double *wi, double *vr, int64_t ldvr)
{
	size_t nn = (size_t)(n > 0 ? n : 1);
	double complex *h = malloc(sizeof(*h) * nn * nn), *z = malloc(sizeof(*z) * nn * nn);
	double complex *x = malloc(sizeof(*x) * nn), *vecs = malloc(sizeof(*vecs) * nn * nn);
	char *used = calloc(nn, 1);
	if (!h || !z || !x || !vecs || !used) {
		free(h); free(z); free(x); free(vecs); free(used);
		return 1;
	}
	double norm = 0;
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < n; i++) {
			AT(h, n, i, j) = AT(a, lda, i, j);
			AT(z, n, i, j) = i == j;
			norm = fmax(norm, fabs(AT(a, lda, i, j)));
		}
	/* Hessenberg by Givens rotations (zero column j below row j+1), accumulated in z */
	for (int64_t j = 0; j + 2 < n; j++)
		for (int64_t i = j + 2; i < n; i++) {
			double complex xx = AT(h, n, j + 1, j), yy = AT(h, n, i, j);
			if (yy == 0)
				continue;
			double r = hypot(cabs(xx), cabs(yy)), c = cabs(xx) / r;
			double complex s = (xx == 0 ? 1 : xx / cabs(xx)) * conj(yy) / r;
			for (int64_t k = 0; k < n; k++) { /* rows j+1, i from the left */
				double complex t1 = AT(h, n, j + 1, k), t2 = AT(h, n, i, k);
				AT(h, n, j + 1, k) = c * t1 + s * t2;
				AT(h, n, i, k) = -conj(s) * t1 + c * t2;
			}
			for (int64_t k = 0; k < n; k++) { /* columns j+1, i from the right (the conjugate transpose) */
				double complex t1 = AT(h, n, k, j + 1), t2 = AT(h, n, k, i);
				AT(h, n, k, j + 1) = c * t1 + conj(s) * t2;
				AT(h, n, k, i) = -s * t1 + c * t2;
				t1 = AT(z, n, k, j + 1), t2 = AT(z, n, k, i);
				AT(z, n, k, j + 1) = c * t1 + conj(s) * t2;
				AT(z, n, k, i) = -s * t1 + c * t2;
			}
		}
	int failed = 0;
	int64_t hi = n - 1, iter = 0, total = 0;
	while (hi > 0 && !failed) {
		int64_t l = hi;
		while (l > 0 && cabs(AT(h, n, l, l - 1)) >
				DBL_EPSILON * (cabs(AT(h, n, l - 1, l - 1)) + cabs(AT(h, n, l, l)) + (norm ? 0 : 1)))
			l--;
		if (l > 0)
			AT(h, n, l, l - 1) = 0;
		if (l == hi) {
			hi--;
			iter = 0;
			continue;
		}
		if (++total > 60 * (n + 1)) {
			failed = 1;
			break;
		}
		double complex p = AT(h, n, hi - 1, hi - 1), q = AT(h, n, hi - 1, hi), r_ = AT(h, n, hi, hi - 1);
		double complex d = AT(h, n, hi, hi), tr = p + d, det = p * d - q * r_;
		double complex disc = csqrt(tr * tr / 4 - det), mu1 = tr / 2 + disc, mu2 = tr / 2 - disc;
		double complex mu = cabs(mu1 - d) < cabs(mu2 - d) ? mu1 : mu2;
		if (++iter % 10 == 0) /* exceptional shift against cycling */
			mu = d + cabs(AT(h, n, hi, hi - 1)) * (0.75 + 0.5 * I);
		for (int64_t k = l; k < hi; k++) {
			double complex xx = k == l ? AT(h, n, l, l) - mu : AT(h, n, k, k - 1);
			double complex yy = k == l ? AT(h, n, l + 1, l) : AT(h, n, k + 1, k - 1);
			double rr = hypot(cabs(xx), cabs(yy));
			double c;
			double complex s;
			if (rr == 0) {
				c = 1;
				s = 0;
			} else if (xx == 0) {
				c = 0;
				s = conj(yy) / cabs(yy);
			} else {
				c = cabs(xx) / rr;
				s = xx / cabs(xx) * conj(yy) / rr;
			}
			for (int64_t j = k == l ? l : k - 1; j < n; j++) {
				double complex t1 = AT(h, n, k, j), t2 = AT(h, n, k + 1, j);
				AT(h, n, k, j) = c * t1 + s * t2;
				AT(h, n, k + 1, j) = -conj(s) * t1 + c * t2;
			}
			int64_t top = k + 2 < hi ? k + 2 : hi;
			for (int64_t i = 0; i <= top; i++) {
				double complex t1 = AT(h, n, i, k), t2 = AT(h, n, i, k + 1);
				AT(h, n, i, k) = c * t1 + conj(s) * t2;
				AT(h, n, i, k + 1) = -s * t1 + c * t2;
			}
			for (int64_t i = 0; i < n; i++) {
				double complex t1 = AT(z, n, i, k), t2 = AT(z, n, i, k + 1);
				AT(z, n, i, k) = c * t1 + conj(s) * t2;
				AT(z, n, i, k + 1) = -s * t1 + c * t2;
			}
		}
	}
	/* eigenvectors of T, then of A = Z T Z^H: unit norm, largest component real and positive */
	double small = DBL_EPSILON * (norm ? norm : 1);
	for (int64_t k = 0; k < n; k++) {
		double complex lam = AT(h, n, k, k);
		for (int64_t i = 0; i < n; i++)
			x[i] = i == k;
		for (int64_t i = k - 1; i >= 0; i--) {
			double complex s = 0, dd = AT(h, n, i, i) - lam;
			for (int64_t j = i + 1; j <= k; j++)
				s += AT(h, n, i, j) * x[j];
			if (cabs(dd) < small)
				dd = small;
			x[i] = -s / dd;
		}
		double nrm = 0, big = -1;
		int64_t at = 0;
		for (int64_t i = 0; i < n; i++) {
			double complex s = 0;
			for (int64_t j = 0; j <= k; j++)
				s += AT(z, n, i, j) * x[j];
			AT(vecs, n, i, k) = s;
			nrm = hypot(nrm, cabs(s));
			if (cabs(s) > big) {
				big = cabs(s);
				at = i;
			}
		}
		double complex scale = nrm > 0 && big > 0 ? conj(AT(vecs, n, at, k)) / big / nrm : 1;
		for (int64_t i = 0; i < n; i++)
			AT(vecs, n, i, k) *= scale;
	}
	/* LAPACK's real layout: real eigenvalues alone, conjugate pairs adjacent (positive imaginary first) */
	double tol = 1e3 * DBL_EPSILON * (norm ? norm : 1);
	int64_t o = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int64_t k = 0; k < n && o < n; k++) {
			double complex lam = AT(h, n, k, k);
			int real = fabs(cimag(lam)) <= tol;
			if (used[k] || (pass == 0 && !real && cimag(lam) < 0))
				continue; /* a negative one is its partner's second half (pass 1: left unpaired) */
			used[k] = 1;
			if (real || pass == 1 || o + 1 >= n) {
				wr[o] = creal(lam);
				wi[o] = real ? 0 : cimag(lam);
				for (int64_t i = 0; vr && i < n; i++)
					AT(vr, ldvr, i, o) = creal(AT(vecs, n, i, k));
				o++;
				continue;
			}
			/* its partner: the unused eigenvalue nearest its conjugate */
			int64_t best = -1;
			for (int64_t j = 0; j < n; j++)
				if (!used[j] && cimag(AT(h, n, j, j)) < 0 &&
				    (best < 0 || cabs(AT(h, n, j, j) - conj(lam)) < cabs(AT(h, n, best, best) - conj(lam))))
					best = j;
			if (best >= 0)
				used[best] = 1;
			wr[o] = wr[o + 1] = creal(lam);
			wi[o] = cimag(lam);
			wi[o + 1] = -cimag(lam);
			for (int64_t i = 0; vr && i < n; i++) {
				AT(vr, ldvr, i, o) = creal(AT(vecs, n, i, k));
				AT(vr, ldvr, i, o + 1) = cimag(AT(vecs, n, i, k));
			}
			o += 2;
		}
	free(h); free(z); free(x); free(vecs); free(used);
	return failed;
}
