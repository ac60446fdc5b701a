/*
 * Two-sample statistics for `tbanalyze diff` (an_stats.h): Mann-Whitney U
 * (exact with ties, or normal with the tie correction), a seeded percentile
 * bootstrap of the ratio of medians, and the verdict that combines them with
 * the threshold.
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

static size_t exact_max_sum(const struct ranked *rk, size_t m)
{
	size_t s = 0;
	for (size_t i = 0; i < m; i++)
		s += rk->r2[rk->n - 1 - i];
	return s;
}

static int exact_p(const struct ranked *rk, size_t na, size_t nb, double *p)
{
	int small_b = nb <= na; /* enumerate subsets of the smaller sample's size */
	size_t m = small_b ? nb : na, n = rk->n;
	size_t smax = exact_max_sum(rk, m);
	size_t w = smax + 1;
	double *cnt = calloc((m + 1) * w, sizeof *cnt);
	if (!cnt)
		return -1;
	cnt[0] = 1;
	size_t reach = 0; /* largest sum any subset reaches so far */
	for (size_t i = 0; i < n; i++) {
		size_t v = rk->r2[i];
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
	uint64_t obs2 = 0; /* the smaller sample's doubled rank sum */
	for (size_t i = 0; i < n; i++)
		if (rk->isb[i] == (unsigned char)small_b)
			obs2 += rk->r2[i];
	const double *d = cnt + m * w;
	double total = 0, le = 0, ge = 0;
	for (size_t s = 0; s <= smax; s++) {
		total += d[s];
		if (s <= obs2)
			le += d[s];
		if (s >= obs2)
			ge += d[s];
	}
	free(cnt);
	double tail = (le < ge ? le : ge) / total;
	*p = 2 * tail > 1 ? 1 : 2 * tail;
	return 0;
}

static int exact_affordable(const struct ranked *rk, size_t na, size_t nb)
{
	size_t m = nb <= na ? nb : na;
	return (double)rk->n * (double)m * (double)exact_max_sum(rk, m) <= EXACT_MAX_WORK;
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
	int exact = how == MW_EXACT || (how == MW_AUTO && exact_affordable(&rk, na, nb));
	if (how == MW_EXACT && (double)rk.n * (double)(na < nb ? na : nb) * (double)exact_max_sum(&rk, na < nb ? na : nb) >
				       50 * EXACT_MAX_WORK) {
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

/* ------------------------------------------------------------ bootstrap
 * xoshiro256** seeded through splitmix64; indices without modulo bias
 * (Lemire).  A resample of a sorted sample is a multiset of indices, and
 * its median is the sorted sample at the median of those indices: counted,
 * not sorted. */
struct rng {
	uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

static uint64_t rng_below(struct rng *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (low < n) {
		uint64_t floor = -n % n;
		while (low < floor) {
			m = (unsigned __int128)rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* Median of a resample (with replacement) of the sorted x[0..n). */
static double resample_median(struct rng *r, const double *x, size_t n, uint32_t *count)
{
	memset(count, 0, n * sizeof *count);
	for (size_t i = 0; i < n; i++)
		count[rng_below(r, n)]++;
	size_t k1 = (n + 1) / 2, k2 = n / 2 + 1; /* 1-based order statistics; equal for odd n */
	size_t cum = 0, i = 0;
	while (cum + count[i] < k1)
		cum += count[i++];
	double lo = x[i];
	while (cum + count[i] < k2)
		cum += count[i++];
	return (lo + x[i]) / 2;
}

static double quantile_sorted(const double *x, size_t n, double q)
{
	double h = q * (double)(n - 1);
	size_t i = (size_t)floor(h);
	if (i + 1 >= n)
		return x[n - 1];
	return x[i] + (h - (double)i) * (x[i + 1] - x[i]);
}

#define BOOT_MAX_DRAWS 40000000.0
#define BOOT_MIN_RESAMPLES 500u

int an_boot_ratio(const double *a, size_t na, const double *b, size_t nb, double level, unsigned resamples,
		  uint64_t seed, double *lo, double *hi, unsigned *used)
{
	if (!na || !nb || !resamples)
		return -1;
	if ((double)resamples * (double)(na + nb) > BOOT_MAX_DRAWS) {
		double fit = BOOT_MAX_DRAWS / (double)(na + nb);
		resamples = fit < BOOT_MIN_RESAMPLES ? BOOT_MIN_RESAMPLES : (unsigned)fit;
	}
	size_t nmax = na > nb ? na : nb;
	double *sa = malloc(na * sizeof *sa), *sb = malloc(nb * sizeof *sb), *ratio = malloc(resamples * sizeof *ratio);
	uint32_t *count = malloc(nmax * sizeof *count);
	int rc = -1;
	if (!sa || !sb || !ratio || !count)
		goto out;
	memcpy(sa, a, na * sizeof *sa);
	memcpy(sb, b, nb * sizeof *sb);
	qsort(sa, na, sizeof *sa, cmp_double);
	qsort(sb, nb, sizeof *sb, cmp_double);
	struct rng r;
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		r.s[i] = splitmix64(&x);
	for (unsigned i = 0; i < resamples; i++) {
		double ma = resample_median(&r, sa, na, count);
		double mb = resample_median(&r, sb, nb, count);
		if (!(ma > 0))
			goto out;
		ratio[i] = mb / ma;
	}
	qsort(ratio, resamples, sizeof *ratio, cmp_double);
	*lo = quantile_sorted(ratio, resamples, (1 - level) / 2);
	*hi = quantile_sorted(ratio, resamples, 1 - (1 - level) / 2);
	if (used)
		*used = resamples;
	rc = 0;
out:
	free(sa);
	free(sb);
	free(ratio);
	free(count);
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
	if (na < AN_STATS_MIN_STEPS || nb < AN_STATS_MIN_STEPS || !(out->median_a > 0)) {
		out->verdict = an_change_by_size(out->change_pct, threshold_pct);
		out->reason = out->median_a > 0 ? "too few steps for a test: the medians alone against the threshold"
						: "no time per step in A: the medians alone against the threshold";
		return 0;
	}
	out->tested = 1;
	if (an_mann_whitney(a, na, b, nb, &out->mw))
		return -1;
	double lo, hi;
	if (an_boot_ratio(a, na, b, nb, 1 - AN_STATS_ALPHA, AN_STATS_RESAMPLES, AN_STATS_SEED, &lo, &hi,
			  &out->resamples))
		return -1;
	out->ci_lo_pct = 100.0 * (lo - 1);
	out->ci_hi_pct = 100.0 * (hi - 1);
	double c = out->change_pct;
	int test_says = out->mw.p < AN_STATS_ALPHA;
	int ci_says = (c > 0 && out->ci_lo_pct > 0) || (c < 0 && out->ci_hi_pct < 0);
	out->significant = test_says && ci_says;
	out->verdict = out->significant ? an_change_by_size(c, threshold_pct) : AN_CHANGE_NONE;
	out->ci_beyond = (out->verdict == AN_CHANGE_REGRESSED && out->ci_lo_pct > threshold_pct) ||
			 (out->verdict == AN_CHANGE_IMPROVED && out->ci_hi_pct < -threshold_pct);
	if (out->verdict != AN_CHANGE_NONE)
		out->reason = out->ci_beyond ? "significant, the whole interval beyond the threshold"
					     : "significant, the ratio of medians beyond the threshold (the interval "
					       "reaches inside it)";
	else if (!test_says)
		out->reason = "not significant: within the runs' step-to-step noise";
	else if (!ci_says)
		out->reason = "the rank test finds a difference, but the interval of the medians' ratio includes none";
	else
		out->reason = "significant, but smaller than the threshold";
	return 0;
}
