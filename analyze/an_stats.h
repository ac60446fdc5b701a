/*
 * Two-sample statistics for `tbanalyze diff`: is B's time per step different
 * from A's, and by how much?
 *
 * - Mann-Whitney U (Wilcoxon rank-sum), two-sided.  Ties get midranks.  The
 *   p-value is exact (the permutation distribution of the rank sum, ties
 *   included) while that is cheap (up to 95 steps split evenly), else the normal
 *   approximation with the tie correction of the variance and a continuity
 *   correction.
 * - The size of the change: the Hodges-Lehmann estimate of the ratio B / A
 *   (the median of the ratios of every pair of steps, one from each run) and
 *   its distribution-free interval (Moses): the ratios that the rank test
 *   would not reject, at level 1 - alpha.  Deterministic; the interval is
 *   the one the test implies (it excludes 1 when p < alpha, ties aside).
 * - The verdict (an_compare_steps): a change is significant when the test's
 *   p-value is below alpha; it is a regression (an improvement) when it is
 *   significant AND the estimated ratio is beyond +threshold (-threshold).
 *   The interval says how sure the size is: wholly beyond the threshold, or
 *   reaching inside it.
 *   With fewer than AN_STATS_MIN_STEPS steps on either side there is no
 *   test: the verdict is the ratio of medians against the threshold alone,
 *   and says so (tested = 0, reason).
 */
#ifndef TBANALYZE_AN_STATS_H
#define TBANALYZE_AN_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Fewest steps a side for a test (5 vs 5 can reach p = 2/252 = 0.008). */
#define AN_STATS_MIN_STEPS 5
#define AN_STATS_ALPHA 0.05

struct an_mwu {
	double u;   /* U of B: pairs (a, b) with b > a, a tie counting 1/2 (0 .. na*nb) */
	double p;   /* two-sided p-value */
	double z;   /* the normal approximation's z (continuity-corrected; 0 when exact) */
	int exact;  /* 1: p from the exact permutation distribution */
};

/* 0, or -1 when a sample is empty or memory runs out. */
int an_mann_whitney(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out);
/* Exact p always (ignoring the cost rule), for tests: -1 if too large to enumerate. */
int an_mann_whitney_exact(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out);
/* Normal approximation always, for tests. */
int an_mann_whitney_normal(const double *a, size_t na, const double *b, size_t nb, struct an_mwu *out);

/* Median (the mean of the middle two for an even count); x is reordered.  NAN when n == 0. */
double an_median(double *x, size_t n);

/* Upper tail of the standard normal distribution, P(Z > z). */
double an_normal_sf(double z);

/* Hodges-Lehmann estimate of median(B) / median(A) -- the median of the
 * ratios b/a over every pair -- and Moses's interval for it at level 1 -
 * alpha: [R(c+1), R(na*nb - c)] of the sorted ratios, c the largest U with
 * P(U <= c) <= alpha/2 (exact while cheap, else the normal approximation).
 * Samples over AN_STATS_HL_MAX steps are reduced to that many evenly spaced
 * quantiles first (a wider interval, never a narrower one).  0, or -1 (an
 * empty sample, a value <= 0, no memory). */
#define AN_STATS_HL_MAX 500
int an_hodges_lehmann(const double *a, size_t na, const double *b, size_t nb, double alpha, double *est, double *lo,
		      double *hi);
/* The largest c with P(U <= c) <= alpha/2 for samples of m and n without
 * ties (-1 when even U = 0 is likelier); *exact says how it was found. */
long an_u_critical(size_t m, size_t n, double alpha, int *exact);

enum an_change {
	AN_CHANGE_NONE = 0, /* no significant change */
	AN_CHANGE_REGRESSED,
	AN_CHANGE_IMPROVED,
};

struct an_step_cmp {
	size_t na, nb;
	double median_a, median_b;
	double change_pct;       /* of the medians: 100 * (median_b / median_a - 1); INFINITY when median_a is 0 < median_b */
	int tested;              /* 0: no test (too few steps); the verdict is the medians' */
	struct an_mwu mw;        /* when tested */
	double est_pct;          /* when tested: the Hodges-Lehmann ratio's change, 100 * (ratio - 1) */
	double ci_lo_pct, ci_hi_pct; /* when tested: its interval */
	int significant;         /* when tested: p < alpha */
	int ci_beyond;           /* when tested: the whole interval is beyond the threshold (its sign) */
	int verdict;             /* enum an_change */
	const char *reason;      /* why the verdict is what it is, in words */
};

/* Compares per-step times (any unit); threshold in percent.  0, or -1 when
 * out of memory (or a sample is empty). */
int an_compare_steps(const double *a, size_t na, const double *b, size_t nb, double threshold_pct,
		     struct an_step_cmp *out);
const char *an_change_name(int verdict); /* "regressed", "improved", "no significant change" */
/* The change's size alone against the threshold (no test): the fallback. */
int an_change_by_size(double change_pct, double threshold_pct);

#endif
