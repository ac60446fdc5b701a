/*
 * Two-sample statistics for `tbanalyze diff`: is B's time per step different
 * from A's, and by how much?
 *
 * - Mann-Whitney U (Wilcoxon rank-sum), two-sided.  Ties get midranks.  The
 *   p-value is exact (the permutation distribution of the rank sum, ties
 *   included) while that is cheap (about 80 steps in all), else the normal
 *   approximation with the tie correction of the variance and a continuity
 *   correction.
 * - A percentile bootstrap interval of the ratio of medians (B / A), each
 *   sample resampled apart, from a fixed seed: the same traces always give
 *   the same interval.
 * - The verdict (an_compare_steps): a change is significant when the test's
 *   p-value is below alpha AND the interval lies wholly on the same side of
 *   1 as the ratio; it is a regression (an improvement) when it is
 *   significant AND the ratio of medians is beyond +threshold (-threshold).
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
#define AN_STATS_RESAMPLES 2000u
#define AN_STATS_SEED 0x7462707266646966ULL /* "tbprfdif" */

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

/* Percentile bootstrap interval, at confidence `level` (0.95), of
 * median(B) / median(A): `resamples` pairs of resamples with replacement,
 * drawn from `seed`.  Fewer resamples are drawn when the samples are large
 * (at least 500; *used says how many).  0, or -1 (empty sample, no memory,
 * a median of A's resample that is 0). */
int an_boot_ratio(const double *a, size_t na, const double *b, size_t nb, double level, unsigned resamples,
		  uint64_t seed, double *lo, double *hi, unsigned *used);

enum an_change {
	AN_CHANGE_NONE = 0, /* no significant change */
	AN_CHANGE_REGRESSED,
	AN_CHANGE_IMPROVED,
};

struct an_step_cmp {
	size_t na, nb;
	double median_a, median_b;
	double change_pct;       /* 100 * (median_b / median_a - 1); INFINITY when median_a is 0 < median_b */
	int tested;              /* 0: no test (too few steps); the verdict is the medians' */
	struct an_mwu mw;        /* when tested */
	double ci_lo_pct, ci_hi_pct; /* when tested: the interval of change_pct */
	unsigned resamples;
	int significant;         /* when tested: p < alpha and the interval excludes 0 on the ratio's side */
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
