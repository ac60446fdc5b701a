/*
 * Unit test of analyze/an_stats.c (the statistics of `tbanalyze diff`)
 * against values known independently of it:
 * - Mann-Whitney U's critical values from the published tables (two-sided,
 *   alpha 0.05: the largest U with p <= 0.05): a sample pair built to have
 *   U = critical must be significant, U = critical + 1 must not;
 * - the null distribution of U for 3 vs 3 (counts 1 1 2 3 3 3 3 2 1 1 over
 *   U = 0..9, out of C(6,3) = 20), whole separation of 4 vs 4 and 5 vs 5
 *   (p = 2/70, 2/252);
 * - small samples with ties worked by hand (midranks, the permutation
 *   distribution of the rank sum; the normal approximation with the tie
 *   correction of the variance and a continuity correction);
 * - the critical values again, as Moses's interval uses them (exact and
 *   the normal approximation), and a Hodges-Lehmann estimate and interval
 *   worked by hand;
 * - the verdict: too few steps, zero variance, ties, noise and a planted
 *   10 % slowdown.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_stats.h"

static int failures;

#define CHECK(cond, ...)                                       \
	do {                                                   \
		if (!(cond)) {                                 \
			failures++;                            \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                   \
			printf("\n");                          \
		}                                              \
	} while (0)

static int near(double x, double y, double tol)
{
	return fabs(x - y) <= tol;
}

/* Samples of m and n distinct values whose U (pairs with b > a) is u: start
 * from every B below every A (U = 0) and move B's values past A's, one
 * adjacent swap (U + 1) at a time. */
static void make_u(size_t m, size_t n, size_t u, double *a, double *b)
{
	char lab[128];
	size_t N = m + n;
	for (size_t i = 0; i < N; i++)
		lab[i] = i < n ? 'B' : 'A';
	for (size_t done = 0; done < u;) {
		for (size_t i = N - 1; i > 0 && done < u; i--)
			if (lab[i - 1] == 'B' && lab[i] == 'A') {
				lab[i - 1] = 'A';
				lab[i] = 'B';
				done++;
			}
	}
	size_t ia = 0, ib = 0;
	for (size_t i = 0; i < N; i++) {
		if (lab[i] == 'A')
			a[ia++] = (double)(10 * i + 100);
		else
			b[ib++] = (double)(10 * i + 100);
	}
}

static void test_tables(void)
{
	/* Two-sided alpha = 0.05 critical values of U (e.g. Siegel & Castellan,
	 * Table J; the same in every statistics textbook's appendix). */
	static const struct {
		size_t m, n, crit;
	} tab[] = {{5, 5, 2}, {6, 6, 5}, {7, 7, 8}, {8, 8, 13}, {9, 9, 17}, {10, 10, 23}, {5, 10, 8}, {12, 15, 49},
		   {20, 20, 127}};
	for (size_t t = 0; t < sizeof tab / sizeof tab[0]; t++) {
		double a[64], b[64];
		for (int k = 0; k < 2; k++) {
			size_t u = tab[t].crit + (size_t)k;
			make_u(tab[t].m, tab[t].n, u, a, b);
			struct an_mwu r;
			CHECK(!an_mann_whitney_exact(a, tab[t].m, b, tab[t].n, &r), "exact %zu/%zu", tab[t].m, tab[t].n);
			CHECK(r.u == (double)u, "%zu vs %zu: U %g, built %zu", tab[t].m, tab[t].n, r.u, u);
			CHECK(k ? r.p > 0.05 : r.p <= 0.05, "%zu vs %zu: U = %zu (critical %zu%s): p = %.5f", tab[t].m,
			      tab[t].n, u, tab[t].crit, k ? " + 1" : "", r.p);
			/* Mirror image: A and B swapped, U becomes mn - U, same p. */
			struct an_mwu s;
			CHECK(!an_mann_whitney_exact(b, tab[t].n, a, tab[t].m, &s), "exact swapped");
			CHECK(s.u == (double)(tab[t].m * tab[t].n - u) && near(s.p, r.p, 1e-12),
			      "swapped %zu/%zu: U %g p %.6f vs %.6f", tab[t].m, tab[t].n, s.u, s.p, r.p);
		}
	}
	/* The normal approximation near the table: 20 vs 20, U = 127:
	 * mu = 200, sigma^2 = 20*20/12 * 41 = 1366.67, z = (73 - 0.5) / 36.968 =
	 * 1.9611, p = 0.04986 (the exact p is 0.04909). */
	double a[20], b[20];
	make_u(20, 20, 127, a, b);
	struct an_mwu r;
	CHECK(!an_mann_whitney_normal(a, 20, b, 20, &r) && !r.exact, "normal 20/20");
	CHECK(near(fabs(r.z), 1.9611, 5e-4) && near(r.p, 0.04986, 5e-5), "normal 20/20: z %.4f p %.5f", r.z, r.p);
	CHECK(!an_mann_whitney(a, 20, b, 20, &r) && r.exact && near(r.p, 0.049090325, 1e-8),
	      "auto 20/20 is exact: p %.9f (exact %d)", r.p, r.exact);
}

static void test_small_distribution(void)
{
	/* 3 vs 3: U = 0..9 with counts 1 1 2 3 3 3 3 2 1 1 (of 20). */
	static const int cnt[10] = {1, 1, 2, 3, 3, 3, 3, 2, 1, 1};
	int le = 0;
	for (size_t u = 0; u <= 4; u++) {
		le += cnt[u];
		double a[3], b[3];
		make_u(3, 3, u, a, b);
		struct an_mwu r;
		CHECK(!an_mann_whitney(a, 3, b, 3, &r) && r.exact, "3/3 exact");
		double want = 2.0 * le / 20 > 1 ? 1 : 2.0 * le / 20;
		CHECK(near(r.p, want, 1e-12), "3 vs 3, U = %zu: p %.6f, want %.6f", u, r.p, want);
	}
	double a[5], b[5];
	make_u(4, 4, 0, a, b);
	struct an_mwu r;
	CHECK(!an_mann_whitney(a, 4, b, 4, &r) && near(r.p, 2.0 / 70, 1e-12), "4 vs 4 separated: p %.6f", r.p);
	make_u(5, 5, 25, a, b);
	CHECK(!an_mann_whitney(a, 5, b, 5, &r) && r.u == 25 && near(r.p, 2.0 / 252, 1e-12),
	      "5 vs 5 separated (B above): U %g p %.6f", r.u, r.p);
}

static void test_ties(void)
{
	struct an_mwu r;
	/* A = {1, 2}, B = {2, 3}: pooled 1 2 2 3, midranks 1 2.5 2.5 4; B's rank
	 * sum 6.5, U = 6.5 - 3 = 3.5 (pairs: 1<2, 1<3, 2=2 half, 2<3).  The six
	 * 2-subsets' rank sums: 3.5 3.5 5 5 6.5 6.5: P(>= 6.5) = 1/3, p = 2/3.
	 * Normal: var = 4/12 * (5 - 6/12) = 1.5, z = (1.5 - 0.5)/sqrt(1.5) =
	 * 0.8165, p = 0.41422. */
	double a1[] = {1, 2}, b1[] = {2, 3};
	CHECK(!an_mann_whitney_exact(a1, 2, b1, 2, &r) && r.u == 3.5 && near(r.p, 2.0 / 3, 1e-12),
	      "ties 2/2 exact: U %g p %.6f", r.u, r.p);
	CHECK(!an_mann_whitney_normal(a1, 2, b1, 2, &r) && near(r.z, 0.81650, 1e-5) && near(r.p, 0.41422, 1e-5),
	      "ties 2/2 normal: z %.5f p %.5f", r.z, r.p);
	/* A = {1 1 2 3 5}, B = {2 3 3 4 6}: midranks 1.5 1.5 | 3.5 3.5 | 6 6 6 |
	 * 8 | 9 | 10; B's sum 3.5+6+6+8+10 = 33.5, U = 33.5 - 15 = 18.5; of the
	 * 252 5-subsets 31 have a rank sum >= 33.5: p = 62/252 = 31/126.
	 * Normal: ties 6+6+24 = 36, var = 25/12 * (11 - 36/90) = 22.083,
	 * z = (18.5 - 12.5 - 0.5)/4.6993 = 1.1704, p = 0.24184. */
	double a2[] = {1, 1, 2, 3, 5}, b2[] = {2, 3, 3, 4, 6};
	CHECK(!an_mann_whitney_exact(a2, 5, b2, 5, &r) && r.u == 18.5 && near(r.p, 31.0 / 126, 1e-12),
	      "ties 5/5 exact: U %g p %.6f", r.u, r.p);
	CHECK(!an_mann_whitney_normal(a2, 5, b2, 5, &r) && near(r.z, 1.1704, 1e-4) && near(r.p, 0.24184, 1e-5),
	      "ties 5/5 normal: z %.5f p %.5f", r.z, r.p);
	/* 8 vs 9 with ties: enumerated, all 24310 9-subsets: p = 270/24310. */
	double a3[] = {1, 2, 2, 2, 3, 4, 4, 5}, b3[] = {2, 4, 4, 5, 6, 6, 7, 7, 8};
	CHECK(!an_mann_whitney(a3, 8, b3, 9, &r) && r.exact && r.u == 62 && near(r.p, 27.0 / 2431, 1e-12),
	      "ties 8/9: U %g p %.8f exact %d", r.u, r.p, r.exact);
	CHECK(!an_mann_whitney_normal(a3, 8, b3, 9, &r) && near(r.p, 0.0128078, 1e-6), "ties 8/9 normal: p %.7f",
	      r.p);
	/* Everything tied: nothing tells the samples apart. */
	double c[] = {3, 3, 3, 3, 3};
	CHECK(!an_mann_whitney(c, 5, c, 5, &r) && r.u == 12.5 && r.p == 1, "all tied: U %g p %g", r.u, r.p);
	CHECK(!an_mann_whitney_normal(c, 5, c, 5, &r) && r.p == 1 && r.z == 0, "all tied normal: p %g", r.p);
}

static void test_large(void)
{
	/* Past the exact method's cost (300 vs 300): the normal approximation,
	 * whose p for a built U is checked by the formula. */
	static double a[300], b[300];
	for (int i = 0; i < 300; i++) {
		a[i] = 2.0 * i;
		b[i] = 2.0 * i + 31; /* interleaved, b ahead by 15.5 places */
	}
	struct an_mwu r;
	CHECK(!an_mann_whitney(a, 300, b, 300, &r) && !r.exact, "300/300 normal");
	/* U = sum over b_j of #a below: b_j = 2j+31 > a_i iff i <= j+15. */
	double u = 0;
	for (int j = 0; j < 300; j++)
		u += j + 16 > 300 ? 300 : j + 16;
	double mu = 45000, sd = sqrt(300.0 * 300 / 12 * 601), z = (fabs(u - mu) - 0.5) / sd;
	CHECK(r.u == u && near(r.z, z, 1e-9) && near(r.p, erfc(z / sqrt(2)), 1e-12), "300/300: U %g (want %g) p %g",
	      r.u, u, r.p);
	/* Exact and normal agree on a mid-sized sample without ties. */
	double x[30], y[30];
	make_u(30, 30, 300, x, y);
	struct an_mwu e, nrm;
	CHECK(!an_mann_whitney_exact(x, 30, y, 30, &e) && !an_mann_whitney_normal(x, 30, y, 30, &nrm) &&
		      near(e.p, nrm.p, 0.003),
	      "30/30 exact %.5f vs normal %.5f", e.p, nrm.p);
}

static void test_median_and_size(void)
{
	double m1[] = {5, 1, 3}, m2[] = {4, 1, 3, 2};
	CHECK(an_median(m1, 3) == 3 && an_median(m2, 4) == 2.5, "median");
	CHECK(isnan(an_median(m1, 0)), "median of nothing");
	/* The tables' critical values, as the interval's order statistics. */
	static const struct {
		size_t m, n;
		long crit;
	} tab[] = {{5, 5, 2}, {6, 6, 5}, {7, 7, 8}, {8, 8, 13}, {9, 9, 17}, {10, 10, 23}, {5, 10, 8}, {12, 15, 49},
		   {20, 20, 127}};
	for (size_t t = 0; t < sizeof tab / sizeof tab[0]; t++) {
		int exact;
		long c = an_u_critical(tab[t].m, tab[t].n, 0.05, &exact);
		CHECK(c == tab[t].crit && exact, "critical U %zu vs %zu: %ld (table %ld)", tab[t].m, tab[t].n, c,
		      tab[t].crit);
	}
	int exact;
	CHECK(an_u_critical(3, 3, 0.05, &exact) == -1, "3 vs 3: no critical value (P(U = 0) = 0.05)");
	/* 300 vs 300 by the normal approximation: 45000 - 1.959964 *
	 * sqrt(90000 * 601 / 12) - 0.5 = 45000 - 4161.17 - 0.5 -> 40838. */
	long c = an_u_critical(300, 300, 0.05, &exact);
	CHECK(c == 40838 && !exact, "critical U 300 vs 300: %ld (exact %d)", c, exact);
	/* The continuity correction's half: 120 vs 130, 7800 - 1119.58 - 0.5 =
	 * 6679.92 -> 6679 (6680 without it); 200 vs 200: 17733.50 -> 17733. */
	CHECK(an_u_critical(120, 130, 0.05, &exact) == 6679 && !exact, "critical U 120 vs 130");
	CHECK(an_u_critical(200, 200, 0.05, &exact) == 17733 && !exact, "critical U 200 vs 200");
	/* By hand: A = {1 2 4 8 16}, B = {3 5 6 7 9}: the 25 ratios b/a sorted
	 * are 3/16 5/16 3/8 3/8 7/16 9/16 5/8 3/4 3/4 7/8 9/8 5/4 3/2 3/2 7/4
	 * 9/4 5/2 3 3 7/2 9/2 5 6 7 9; the estimate is the 13th, 3/2; with c = 2
	 * the interval is [the 3rd, the 23rd] = [3/8, 6]. */
	double a[] = {1, 2, 4, 8, 16}, b[] = {3, 5, 6, 7, 9}, est, lo, hi;
	CHECK(!an_hodges_lehmann(a, 5, b, 5, 0.05, &est, &lo, &hi) && near(est, 1.5, 1e-12) && near(lo, 0.375, 1e-12) &&
		      near(hi, 6, 1e-12),
	      "Hodges-Lehmann by hand: %g [%g, %g]", est, lo, hi);
	/* Swapped: the reciprocals. */
	CHECK(!an_hodges_lehmann(b, 5, a, 5, 0.05, &est, &lo, &hi) && near(est, 2.0 / 3, 1e-12) &&
		      near(lo, 1.0 / 6, 1e-12) && near(hi, 8.0 / 3, 1e-12),
	      "Hodges-Lehmann swapped: %g [%g, %g]", est, lo, hi);
	/* An even number of ratios: A = {1 2}, B = {2 3 5 7}: 1 1.5 2 2.5 3 3.5
	 * 5 7, the middle two 2.5 and 3, their geometric mean sqrt(7.5); too
	 * few for an interval (2 vs 4: P(U = 0) = 1/15 > 0.025). */
	double e1[] = {1, 2}, e2[] = {2, 3, 5, 7};
	CHECK(!an_hodges_lehmann(e1, 2, e2, 4, 0.05, &est, &lo, &hi) && near(est, sqrt(7.5), 1e-12) && lo == 0 &&
		      isinf(hi),
	      "Hodges-Lehmann, even count: %g [%g, %g]", est, lo, hi);
	/* Constant samples: every ratio the same. */
	double k1[6] = {100, 100, 100, 100, 100, 100}, k2[6] = {110, 110, 110, 110, 110, 110};
	CHECK(!an_hodges_lehmann(k1, 6, k2, 6, 0.05, &est, &lo, &hi) && near(est, 1.1, 1e-12) && near(lo, 1.1, 1e-12) &&
		      near(hi, 1.1, 1e-12),
	      "constant: %g [%g, %g]", est, lo, hi);
	CHECK(an_hodges_lehmann(k1, 6, m1, 0, 0.05, &est, &lo, &hi) == -1, "empty sample");
	double z[2] = {0, 1};
	CHECK(an_hodges_lehmann(k1, 6, z, 2, 0.05, &est, &lo, &hi) == -1, "a step of no time has no ratio");
	/* Large samples go through evenly spaced quantiles: B = A * 1.25 gives
	 * 1.25 exactly, and an interval around it. */
	static double big[3000], big2[3000];
	for (int i = 0; i < 3000; i++) {
		big[i] = 1000 + (i * 7919 % 3000);
		big2[i] = 1.25 * big[i];
	}
	CHECK(!an_hodges_lehmann(big, 3000, big2, 3000, 0.05, &est, &lo, &hi) && near(est, 1.25, 1e-9) && lo < 1.25 &&
		      hi > 1.25 && hi / lo < 1.2,
	      "large: %g [%g, %g]", est, lo, hi);
}

/* A loaded machine's step times: base * (1 + 3 % normal jitter), one step
 * in five preempted by an exponential extra of mean 30 %. */
static uint64_t lcg = 12345;
static double unif(void)
{
	lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((lcg >> 11) + 0.5) / 9007199254740992.0;
}
static void noisy(double *x, size_t n, double base)
{
	for (size_t i = 0; i < n; i++) {
		double g = sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
		double t = base * (1 + 0.03 * g);
		if (unif() < 0.2)
			t += base * 0.3 * -log(unif());
		x[i] = t;
	}
}

static void test_verdict(void)
{
	struct an_step_cmp c;
	/* Too few steps: the medians alone, said so. */
	double a4[] = {100, 101, 99, 100}, b4[] = {120, 121, 119, 120};
	CHECK(!an_compare_steps(a4, 4, b4, 4, 7, &c) && !c.tested && c.verdict == AN_CHANGE_REGRESSED && c.reason &&
		      strstr(c.reason, "too few"),
	      "4 vs 4: untested regression by medians (tested %d verdict %d)", c.tested, c.verdict);
	CHECK(!an_compare_steps(a4, 4, a4, 4, 7, &c) && !c.tested && c.verdict == AN_CHANGE_NONE, "4 vs 4 same");
	/* Zero variance, equal: p = 1, no change. */
	double k[8] = {5, 5, 5, 5, 5, 5, 5, 5}, k2[8] = {6, 6, 6, 6, 6, 6, 6, 6};
	CHECK(!an_compare_steps(k, 8, k, 8, 7, &c) && c.tested && c.mw.p == 1 && c.verdict == AN_CHANGE_NONE &&
		      c.est_pct == 0 && c.ci_lo_pct == 0 && c.ci_hi_pct == 0 && strstr(c.reason, "not significant"),
	      "constant equal: p %g verdict %d", c.mw.p, c.verdict);
	/* Zero variance, 20 % apart: separated, p = 2/C(16,8), interval [20, 20]. */
	CHECK(!an_compare_steps(k, 8, k2, 8, 7, &c) && c.tested && near(c.mw.p, 2.0 / 12870, 1e-12) &&
		      c.verdict == AN_CHANGE_REGRESSED && c.ci_beyond && near(c.est_pct, 20, 1e-9) &&
		      near(c.ci_lo_pct, 20, 1e-9) && near(c.change_pct, 20, 1e-9),
	      "constant apart: p %g verdict %d %g [%g, %g]", c.mw.p, c.verdict, c.est_pct, c.ci_lo_pct, c.ci_hi_pct);
	CHECK(!an_compare_steps(k2, 8, k, 8, 7, &c) && c.verdict == AN_CHANGE_IMPROVED && near(c.est_pct, -100.0 / 6, 1e-9),
	      "constant apart reversed: %g", c.est_pct);
	/* p between 0.05 and 0.1 is not significant: 5 vs 5 with U = 3 (p =
	 * 2 * 7/252 = 0.0556), B faster by far. */
	double u3a[5], u3b[5];
	make_u(5, 5, 3, u3a, u3b);
	CHECK(!an_compare_steps(u3a, 5, u3b, 5, 7, &c) && near(c.mw.p, 14.0 / 252, 1e-12) && c.est_pct < -7 &&
		      !c.significant && c.verdict == AN_CHANGE_NONE,
	      "p = 0.056: verdict %d", c.verdict);
	/* Significant but small: 2 % apart without noise. */
	double s2[8] = {5.1, 5.1, 5.1, 5.1, 5.1, 5.1, 5.1, 5.1};
	CHECK(!an_compare_steps(k, 8, s2, 8, 7, &c) && c.significant && c.verdict == AN_CHANGE_NONE &&
		      strstr(c.reason, "smaller than the threshold"),
	      "2 %% apart: significant %d verdict %d", c.significant, c.verdict);
	/* The rank test sees a difference (p = 0.00254 exact, by enumeration)
	 * that the medians do not show (100 both): the estimate is the typical
	 * pair's ratio, the 72nd and 73rd of the 144 ratios, 100/93 (+7.5 %):
	 * a regression that the medians alone would have missed. */
	double ra[12] = {90, 91, 92, 93, 94, 100, 100, 100, 100, 100, 100, 100};
	double rb[12] = {100, 100, 100, 100, 100, 100, 100, 106, 107, 108, 109, 110};
	CHECK(!an_compare_steps(ra, 12, rb, 12, 7, &c) && near(c.mw.p, 0.0025383151, 1e-9) && c.change_pct == 0 &&
		      c.significant && near(c.est_pct, 100 * (100.0 / 93 - 1), 1e-9) && c.verdict == AN_CHANGE_REGRESSED,
	      "ranks apart, medians equal: p %.7f estimate %+.2f %% verdict %d", c.mw.p, c.est_pct, c.verdict);
	/* Significant and beyond the threshold, but the interval reaches inside
	 * it: still a regression (the estimate decides), said so.  10 vs 10
	 * steps, B 10 % slower with a spread of +-6 %. */
	double wa[10] = {94, 96, 97, 99, 100, 100, 101, 103, 104, 106};
	double wb[10];
	for (int i = 0; i < 10; i++)
		wb[i] = wa[(i * 3) % 10] * 1.10;
	CHECK(!an_compare_steps(wa, 10, wb, 10, 7, &c) && c.verdict == AN_CHANGE_REGRESSED && !c.ci_beyond &&
		      c.ci_lo_pct < 7 && near(c.est_pct, 10, 1.0) && strstr(c.reason, "reaches inside"),
	      "10 %% in +-6 %%: verdict %d estimate %+.2f [%+.2f, %+.2f]", c.verdict, c.est_pct, c.ci_lo_pct, c.ci_hi_pct);
	/* The same in text: 7 % threshold, a 10 % slowdown in noise -- 20 steps
	 * a side; and two draws of the same program. */
	int reg = 0, none_same = 0;
	for (int rep = 0; rep < 20; rep++) {
		double a[20], b[20], b_same[20];
		noisy(a, 20, 10e6);
		noisy(b, 20, 11e6);
		noisy(b_same, 20, 10e6);
		CHECK(!an_compare_steps(a, 20, b, 20, 7, &c) && c.tested, "noise");
		reg += c.verdict == AN_CHANGE_REGRESSED;
		CHECK(!an_compare_steps(a, 20, b_same, 20, 7, &c), "noise same");
		none_same += c.verdict == AN_CHANGE_NONE;
	}
	CHECK(reg >= 19, "planted +10 %% in noise: regressed in %d of 20", reg);
	CHECK(none_same == 20, "same program in noise: no significant change in %d of 20", none_same);
	/* Noise alone that moves the median past the threshold is not a change:
	 * 6 steps a side spread over +-30 %, medians 10 % apart (p = 86/231 =
	 * 0.372, exact, by enumeration). */
	double na_[] = {70, 95, 100, 102, 110, 130}, nb_[] = {75, 100, 110, 112, 125, 140};
	CHECK(!an_compare_steps(na_, 6, nb_, 6, 7, &c) && near(c.change_pct, 100.0 * (111.0 / 101 - 1), 1e-9) &&
		      near(c.mw.p, 86.0 / 231, 1e-12) && c.verdict == AN_CHANGE_NONE && strstr(c.reason, "not significant"),
	      "wide noise: change %+.1f %% p %.3f verdict %d", c.change_pct, c.mw.p, c.verdict);
}

int main(void)
{
	test_tables();
	test_small_distribution();
	test_ties();
	test_large();
	test_median_and_size();
	test_verdict();
	if (failures) {
		printf("%d failure(s)\n", failures);
		return 1;
	}
	printf("ok: an_stats\n");
	return 0;
}
