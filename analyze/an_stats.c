/*
 * Two-sample statistics for `tbanalyze diff` (an_stats.h): Mann-Whitney U
 * (exact with ties, or normal with the tie correction), the Hodges-Lehmann
 * estimate of the ratio with Moses's interval, and the verdict that
 * combines them with the threshold.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "an_stats.h"

/* ------------------------------------------------------------ basics */
static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

double an_median(double *x, size_t n)
{
	if (!n)
		return NAN;
	qsort(x, n, sizeof *x, cmp_double);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

double an_normal_sf(double z)
{
	return 0.5 * erfc(z / sqrt(2.0));
}

/* ------------------------------------------------------------ ranks
 * The pooled sample sorted, with doubled midranks (integers: a tie group at
 * 1-based positions i..j has midrank (i+j)/2), and the tie term
 * sum(t^3 - t) over tie groups of size t. */
struct pooled {
	double v;
	int b; /* from B */
};

static int cmp_pooled(const void *x, const void *y)
{
	const struct pooled *p = x, *q = y;
	if (p->v != q->v)
		return p->v < q->v ? -1 : 1;
	return p->b - q->b;
}

struct ranked {
	size_t n;
	uint32_t *r2;       /* doubled midrank of each pooled value, in sorted order */
	unsigned char *isb; /* from B */
	double ties;        /* sum(t^3 - t) */
	uint64_t sum_b2;    /* B's doubled rank sum */
};

static int rank_pooled(const double *a, size_t na, const double *b, size_t nb, struct ranked *rk)
{
	size_t n = na + nb;
	memset(rk, 0, sizeof *rk);
	struct pooled *p = malloc(n * sizeof *p);
	rk->r2 = malloc(n * sizeof *rk->r2);
	rk->isb = malloc(n);
	if (!p || !rk->r2 || !rk->isb) {
		free(p);
		free(rk->r2);
		free(rk->isb);
		return -1;
	}
	for (size_t i = 0; i < na; i++)
		p[i] = (struct pooled){a[i], 0};
	for (size_t i = 0; i < nb; i++)
		p[na + i] = (struct pooled){b[i], 1};
	qsort(p, n, sizeof *p, cmp_pooled);
	rk->n = n;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && p[j + 1].v == p[i].v)
			j++;
		/* positions i+1 .. j+1 (1-based): doubled midrank i+j+2 */
		double t = (double)(j - i + 1);
		rk->ties += t * t * t - t;
		for (size_t k = i; k <= j; k++) {
			rk->r2[k] = (uint32_t)(i + j + 2);
			rk->isb[k] = (unsigned char)p[k].b;
			if (p[k].b)
				rk->sum_b2 += rk->r2[k];
		}
		i = j + 1;
	}
	free(p);
	return 0;
}

static void ranked_free(struct ranked *rk)
{
	free(rk->r2);
	free(rk->isb);
}

static double u_of_b(const struct ranked *rk, size_t nb)
{
	return (double)rk->sum_b2 / 2 - (double)nb * (double)(nb + 1) / 2;
}

/* ------------------------------------------------------------ Mann-Whitney
 * Exact: under no difference every choice of which m of the N pooled values
 * are the smaller sample's is equally likely (the permutation distribution,
 * conditional on the ties seen).  cnt[k][s] counts the k-subsets of the
 * values seen so far whose doubled ranks sum to s: a 0/1 knapsack over the
 * N values.  Two-sided p: twice the smaller tail, at most 1. */
#define EXACT_MAX_WORK 40000000.0 /* N * m * max sum */

/* The exact method's work for m of n values: n * m * (largest doubled
 * rank sum, <= 2 n m). */
static double exact_work(size_t n, size_t m)
{
	return (double)n * (double)m * (double)(2 * n * m);
}

/* counts[s] of the m-subsets of the n doubled ranks r2 (ascending) whose
 * sum is s, s in [0, *smax]; NULL when out of memory. */
static double *rank_sum_counts(const uint32_t *r2, size_t n, size_t m, size_t *smax_out)
{
	size_t smax = 0;
	for (size_t i = 0; i < m; i++)
		smax += r2[n - 1 - i];
	size_t w = smax + 1;
	double *cnt = calloc((m + 1) * w, sizeof *cnt);
	if (!cnt)
		return NULL;
	cnt[0] = 1;
	size_t reach = 0; /* largest sum any subset reaches so far */
	for (size_t i = 0; i < n; i++) {
		size_t v = r2[i];
		size_t kmax = i + 1 < m ? i + 1 : m;
		size_t top = reach + v < smax ? reach + v : smax;
		for (size_t k = kmax; k >= 1; k--) {
			double *to = cnt + k * w, *from = cnt + (k - 1) * w;
			for (size_t s = top; s >= v; s--) {
				to[s] += from[s - v];
				if (s == v)
					break;
			}
		}
		reach = top;
	}
	/* The m-subsets' row moved to the front (the caller frees it all). */
	memmove(cnt, cnt + m * w, w * sizeof *cnt);
	*smax_out = smax;
	return cnt;
}

static int exact_p(const struct ranked *rk, size_t na, size_t nb, double *p)
{
	int small_b = nb <= na; /* enumerate subsets of the smaller sample's size */
	size_t m = small_b ? nb : na, n = rk->n, smax;
	double *d = rank_sum_counts(rk->r2, n, m, &smax);
	if (!d)
		return -1;
	uint64_t obs2 = 0; /* the smaller sample's doubled rank sum */
	for (size_t i = 0; i < n; i++)
		if (rk->isb[i] == (unsigned char)small_b)
			obs2 += rk->r2[i];
	double total = 0, le = 0, ge = 0;
	for (size_t s = 0; s <= smax; s++) {
		total += d[s];
		if (s <= obs2)
			le += d[s];
		if (s >= obs2)
			ge += d[s];
	}
	free(d);
	double tail = (le < ge ? le : ge) / total;
	*p = 2 * tail > 1 ? 1 : 2 * tail;
	return 0;
}

static int exact_affordable(size_t na, size_t nb)
{
	return exact_work(na + nb, nb <= na ? nb : na) <= EXACT_MAX_WORK;
}

static void normal_p(const struct ranked *rk, size_t na, size_t nb, struct an_mwu *out)
{
	double n = (double)rk->n, mu = (double)na * (double)nb / 2;
	double var = (double)na * (double)nb / 12 * ((n + 1) - rk->ties / (n * (n - 1)));
	double d = out->u - mu;
	if (!(var > 0)) { /* every value the same: nothing tells the samples apart */
		out->z = 0;
		out->p = 1;
		return;
	}
	double z = (fabs(d) - 0.5) / sqrt(var);
	if (z < 0)
		z = 0;
	out->z = d < 0 ? -z : z;
	double p = 2 * an_normal_sf(z);
	out->p = p > 1 ? 1 : p;
}

enum { MW_AUTO, MW_EXACT, MW_NORMAL };

static int mann_whitney(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out, int how)
{
	memset(out, 0, sizeof *out);
	if (!na || !nb)
		return -1;
	struct ranked rk;
	if (rank_pooled(a, na, b, nb, &rk))
		return -1;
	out->u = u_of_b(&rk, nb);
	int exact = how == MW_EXACT || (how == MW_AUTO && exact_affordable(na, nb));
	if (how == MW_EXACT && exact_work(na + nb, na < nb ? na : nb) > 50 * EXACT_MAX_WORK) {
		ranked_free(&rk);
		return -1;
	}
	int rc = 0;
	if (exact) {
		out->exact = 1;
		rc = exact_p(&rk, na, nb, &out->p);
	} else {
		normal_p(&rk, na, nb, out);
	}
	ranked_free(&rk);
	return rc;
}

int an_mann_whitney(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out)
{
	return mann_whitney(a, na, b, nb, out, MW_AUTO);
}

int an_mann_whitney_exact(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out)
{
	return mann_whitney(a, na, b, nb, out, MW_EXACT);
}

int an_mann_whitney_normal(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out)
{
	return mann_whitney(a, na, b, nb, out, MW_NORMAL);
}

/* ------------------------------------------------------------ size
 * Hodges-Lehmann: the median of every pair's log ratio; Moses's interval:
 * the order statistics of those log ratios that the rank test's critical
 * value picks (Hollander & Wolfe, Nonparametric Statistical Methods, 4.3). */
long an_u_critical(size_t m, size_t n, double alpha, int *exact)
{
	*exact = 0;
	if (!m || !n)
		return -1;
	size_t N = m + n, k = m < n ? m : n;
	if (exact_affordable(m, n)) {
		uint32_t *r2 = malloc(N * sizeof *r2);
		size_t smax = 0;
		double *d = NULL;
		if (r2) {
			for (size_t i = 0; i < N; i++)
				r2[i] = (uint32_t)(2 * i + 2); /* ranks 1..N, doubled */
			d = rank_sum_counts(r2, N, k, &smax);
		}
		free(r2);
		if (d) {
			/* U = S2/2 - k(k+1)/2 for the k-sample; symmetric without ties. */
			double total = 0, cum = 0;
			for (size_t s = 0; s <= smax; s++)
				total += d[s];
			size_t base2 = k * (k + 1);
			long c = -1;
			for (size_t s = base2; s <= smax; s += 2) {
				cum += d[s];
				if (cum / total > alpha / 2)
					break;
				c = (long)((s - base2) / 2);
			}
			free(d);
			*exact = 1;
			return c;
		}
	}
	double mn = (double)m * (double)n, sd = sqrt(mn * (double)(N + 1) / 12);
	/* P(U <= c) ~ Phi((c + 0.5 - mn/2) / sd) <= alpha/2 */
	double z = 0, lo = 0, hi = 40; /* z: the normal's upper alpha/2 point, by bisection */
	for (int i = 0; i < 100; i++) {
		z = (lo + hi) / 2;
		if (an_normal_sf(z) > alpha / 2)
			lo = z;
		else
			hi = z;
	}
	return (long)floor(mn / 2 - z * sd - 0.5);
}

/* At most AN_STATS_HL_MAX evenly spaced quantiles of x, as logs, sorted. */
static double *log_quantiles(const double *x, size_t n, size_t *out_n)
{
	double *s = malloc(n * sizeof *s);
	if (!s)
		return NULL;
	memcpy(s, x, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_double);
	size_t m = n > AN_STATS_HL_MAX ? AN_STATS_HL_MAX : n;
	for (size_t i = 0; i < m; i++)
		s[i] = log(s[m == n ? i : (size_t)(((double)i + 0.5) * (double)n / (double)m)]);
	*out_n = m;
	return s;
}

int an_hodges_lehmann(const double *a, size_t na, const double *b, size_t nb, double alpha, double *est, double *lo,
		      double *hi)
{
	if (!na || !nb)
		return -1;
	for (size_t i = 0; i < na; i++)
		if (!(a[i] > 0))
			return -1;
	for (size_t i = 0; i < nb; i++)
		if (!(b[i] > 0))
			return -1;
	size_t ma, mb;
	double *la = log_quantiles(a, na, &ma), *lb = log_quantiles(b, nb, &mb), *d = NULL;
	int rc = -1;
	if (!la || !lb || !(d = malloc(ma * mb * sizeof *d)))
		goto out;
	size_t M = 0;
	for (size_t j = 0; j < mb; j++)
		for (size_t i = 0; i < ma; i++)
			d[M++] = lb[j] - la[i];
	qsort(d, M, sizeof *d, cmp_double);
	*est = exp(M % 2 ? d[M / 2] : (d[M / 2 - 1] + d[M / 2]) / 2);
	int exact;
	long c = an_u_critical(ma, mb, alpha, &exact);
	*lo = c >= 0 ? exp(d[c]) : 0;
	*hi = c >= 0 ? exp(d[M - 1 - (size_t)c]) : INFINITY;
	rc = 0;
out:
	free(la);
	free(lb);
	free(d);
	return rc;
}

/* ------------------------------------------------------------ verdict */
const char *an_change_name(int verdict)
{
	return verdict == AN_CHANGE_REGRESSED ? "regressed"
	       : verdict == AN_CHANGE_IMPROVED ? "improved"
					       : "no significant change";
}

int an_change_by_size(double change, double threshold)
{
	return change > threshold ? AN_CHANGE_REGRESSED : change < -threshold ? AN_CHANGE_IMPROVED : AN_CHANGE_NONE;
}

int an_compare_steps(const double *a, size_t na, const double *b, size_t nb, double threshold_pct,
		     struct an_step_cmp *out)
{
	memset(out, 0, sizeof *out);
	out->na = na;
	out->nb = nb;
	if (!na || !nb)
		return -1;
	double *tmp = malloc((na > nb ? na : nb) * sizeof *tmp);
	if (!tmp)
		return -1;
	memcpy(tmp, a, na * sizeof *tmp);
	out->median_a = an_median(tmp, na);
	memcpy(tmp, b, nb * sizeof *tmp);
	out->median_b = an_median(tmp, nb);
	free(tmp);
	out->change_pct = out->median_a > 0 ? 100.0 * (out->median_b / out->median_a - 1)
			  : out->median_b > 0 ? INFINITY : 0.0;
	int zero = 0; /* a step of no time: no ratio */
	for (size_t i = 0; i < na; i++)
		zero |= !(a[i] > 0);
	for (size_t i = 0; i < nb; i++)
		zero |= !(b[i] > 0);
	if (na < AN_STATS_MIN_STEPS || nb < AN_STATS_MIN_STEPS || zero) {
		out->verdict = an_change_by_size(out->change_pct, threshold_pct);
		out->reason = zero ? "a step of no time: the medians alone against the threshold"
				   : "too few steps for a test: the medians alone against the threshold";
		return 0;
	}
	out->tested = 1;
	double est, lo, hi;
	if (an_mann_whitney(a, na, b, nb, &out->mw) || an_hodges_lehmann(a, na, b, nb, AN_STATS_ALPHA, &est, &lo, &hi))
		return -1;
	out->est_pct = 100.0 * (est - 1);
	out->ci_lo_pct = 100.0 * (lo - 1);
	out->ci_hi_pct = 100.0 * (hi - 1);
	out->significant = out->mw.p < AN_STATS_ALPHA;
	out->verdict = out->significant ? an_change_by_size(out->est_pct, threshold_pct) : AN_CHANGE_NONE;
	out->ci_beyond = (out->verdict == AN_CHANGE_REGRESSED && out->ci_lo_pct > threshold_pct) ||
			 (out->verdict == AN_CHANGE_IMPROVED && out->ci_hi_pct < -threshold_pct);
	if (out->verdict != AN_CHANGE_NONE)
		out->reason = out->ci_beyond ? "significant, the whole interval beyond the threshold"
					     : "significant, the estimate beyond the threshold (the interval reaches inside it)";
	else if (!out->significant)
		out->reason = "not significant: within the runs' step-to-step noise";
	else
		out->reason = "significant, but smaller than the threshold";
	return 0;
}
