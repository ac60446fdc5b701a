/*
 * tbanalyze diff --html: one self-contained page: the two runs' step-time
 * distributions side by side (box and every step as a dot), the verdict
 * and its statistics, the kernels' and call sites' changes as a sorted bar
 * chart.  It prints what cmd_diff.c computed; nothing is decided here.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "an_diff_html.h"
#include "an_fmt.h"
#include "an_html.h"

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* The counted steps' times of a run (warm-up left out), sorted. */
static size_t counted_steps(const struct analysis *a, double **out)
{
	const struct vec *v = &a->step_times;
	double *t = malloc((v->n ? v->n : 1) * sizeof *t);
	size_t n = 0;
	for (size_t i = 0; t && i < v->n; i++) {
		const struct an_step_time *st = VEC_AT(v, struct an_step_time, i);
		if (st->counted)
			t[n++] = (double)(st->end - st->begin);
	}
	if (t)
		qsort(t, n, sizeof *t, cmp_double);
	*out = t;
	return n;
}

static double quantile(const double *s, size_t n, double q)
{
	if (!n)
		return 0;
	double pos = q * (double)(n - 1);
	size_t lo = (size_t)pos;
	double fr = pos - (double)lo;
	return lo + 1 < n ? s[lo] * (1 - fr) + s[lo + 1] * fr : s[lo];
}

static void dist_plot(FILE *f, const struct an_diff_page *p)
{
	double *t[2];
	size_t n[2];
	char b1[32];
	for (int s = 0; s < 2; s++)
		n[s] = counted_steps(&p->an[s], &t[s]);
	fputs("<h2>Step time distributions</h2>\n", f);
	if (!n[0] && !n[1]) {
		fputs("<p>Neither run has steps (marks or a detected loop): no distributions to show.</p>\n", f);
		free(t[0]);
		free(t[1]);
		return;
	}
	double hi = 0;
	for (int s = 0; s < 2; s++)
		if (n[s] && t[s][n[s] - 1] > hi)
			hi = t[s][n[s] - 1];
	hi = hi > 0 ? hi * 1.08 : 1;
	const double W = 1000, H = 320, X0 = 80, Y0 = 14, PH = 270;
	fprintf(f, "<div class=\"plot\"><svg id=\"dist-plot\" role=\"img\" aria-label=\"Step time distributions\" "
		   "viewBox=\"0 0 %.0f %.0f\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"13\">\n", W, H);
	for (int k = 0; k <= 4; k++) {
		double y = Y0 + PH - PH * k / 4.0;
		fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/><text x=\"%.0f\" y=\"%.1f\" "
			   "text-anchor=\"end\">%s</text>\n",
			X0, W - 10, y, y, X0 - 6, y + 4, fmt_ns((uint64_t)(hi * k / 4), b1, sizeof b1));
	}
	for (int s = 0; s < 2; s++) {
		double cx = X0 + (W - X0) * (s ? 0.72 : 0.28);
		const char *col = s ? "#e45756" : "#4c78a8";
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-weight=\"600\">%s: %zu steps</text>\n", cx,
			H - 12, s ? "B" : "A", n[s]);
		if (!n[s])
			continue;
#define YV(v) (Y0 + PH - PH * (v) / hi)
		double q1 = quantile(t[s], n[s], 0.25), q2 = quantile(t[s], n[s], 0.5), q3 = quantile(t[s], n[s], 0.75);
		fprintf(f, "<g class=\"box\"><title>%s: median %s, quartiles %.3f-%.3f ms, %zu steps</title>"
			   "<rect x=\"%.1f\" y=\"%.1f\" width=\"120\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.15\" stroke=\"%s\"/>"
			   "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>"
			   "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/></g>\n",
			s ? "B" : "A", fmt_ns((uint64_t)q2, b1, sizeof b1), q1 / 1e6, q3 / 1e6, n[s], cx - 60, YV(q3),
			YV(q1) - YV(q3) < 1 ? 1 : YV(q1) - YV(q3), col, col, cx - 60, cx + 60, YV(q2), YV(q2), col, cx, cx,
			YV(t[s][0]), YV(t[s][n[s] - 1]), col);
		for (size_t i = 0; i < n[s]; i++) {
			/* Spread sideways by a fixed hash of the index: dots of equal times stay apart. */
			double jit = ((double)((i * 2654435761u) % 1000) / 1000.0 - 0.5) * 90;
			fprintf(f, "<circle class=\"dot\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" fill-opacity=\"0.7\">"
				   "<title>%s %s</title></circle>\n",
				cx + 110 + jit * 0.4, YV(t[s][i]), col, s ? "B" : "A", fmt_ns((uint64_t)t[s][i], b1, sizeof b1));
		}
#undef YV
	}
	fputs("</svg><ul class=\"legend\">", f);
	fputs("<li><span class=\"sw\" style=\"background:#4c78a8\"></span>A (before)</li>"
	      "<li><span class=\"sw\" style=\"background:#e45756\"></span>B (after)</li>"
	      "<li>box: quartiles, thick line: median, whiskers: fastest to slowest; dots: every counted step</li></ul></div>\n",
	      f);
	free(t[0]);
	free(t[1]);
}

static void verdict_box(FILE *f, const struct an_diff_page *p)
{
	const struct an_step_cmp *c = p->cmp;
	char b1[32], b2[32];
	fprintf(f, "<p class=\"verdict %s\" id=\"verdict\">verdict: ", p->regression ? "bad" : c && c->verdict == AN_CHANGE_IMPROVED ? "good" : "same");
	html_str(f, p->verdict);
	fputs("</p>\n", f);
	if (c) {
		fprintf(f, "<div class=\"cards\"><div class=\"card\">median A<b>%s</b></div><div class=\"card\">median B<b>%s</b></div>"
			   "<div class=\"card\">change<b>%+.1f%%</b></div><div class=\"card\">threshold<b>%.1f%%</b></div></div>\n",
			fmt_ns((uint64_t)c->median_a, b1, sizeof b1), fmt_ns((uint64_t)c->median_b, b2, sizeof b2),
			isinf(c->change_pct) ? 0.0 : c->change_pct, p->threshold_pct);
		if (c->tested)
			fprintf(f, "<p>%zu vs %zu steps, Mann-Whitney U = %.1f, p = %.3g%s; estimated change %+.1f%% (%.0f%% interval "
				   "%+.1f%% to %+.1f%%): ",
				c->na, c->nb, c->mw.u, c->mw.p, c->mw.exact ? " (exact)" : "", c->est_pct,
				100 * (1 - AN_STATS_ALPHA), c->ci_lo_pct, c->ci_hi_pct);
		else
			fprintf(f, "<p>no test (steps: A %zu, B %zu): ", c->na, c->nb);
		html_str(f, c->reason ? c->reason : "");
		fputs("</p>\n", f);
	} else {
		fputs("<p>no test: ", f);
		html_str(f, p->no_steps ? p->no_steps : "no steps");
		fputs("</p>\n", f);
	}
}

static int cmp_abs_delta(const void *x, const void *y)
{
	const struct an_diff_change *a = *(const struct an_diff_change *const *)x, *b = *(const struct an_diff_change *const *)y;
	double da = fabs(a->b - a->a), db = fabs(b->b - b->a);
	return (da < db) - (da > db);
}

/* The kernels' and call sites' changes, biggest first, as bars from zero:
 * right and red when B takes longer, left and green when less. */
static void changes_plot(FILE *f, const struct an_diff_page *p)
{
	const struct an_diff_change **v = malloc((p->n_ch ? p->n_ch : 1) * sizeof *v);
	size_t n = 0;
	char b1[32], b2[32];
	for (size_t i = 0; v && i < p->n_ch; i++) {
		const struct an_diff_change *c = &p->ch[i];
		if (c->a != c->b && (!strcmp(c->type, "kernel") || !strcmp(c->type, "call_site") || !strcmp(c->type, "python_path")))
			v[n++] = c;
	}
	fputs("<h2>Changes by kernel and site</h2>\n", f);
	if (!n) {
		fputs("<p>No kernel or call site changed.</p>\n", f);
		/* The plot is still there, empty, so a reader sees where it would be. */
	}
	qsort(v, n, sizeof *v, cmp_abs_delta);
	size_t shown = n < 20 ? n : 20;
	double maxd = 1;
	for (size_t i = 0; i < shown; i++)
		if (fabs(v[i]->b - v[i]->a) > maxd)
			maxd = fabs(v[i]->b - v[i]->a);
	const double W = 1000, RH = 24, LX = 440, MID = 720, HALF = 260;
	double H = RH * (double)(shown ? shown : 1) + 10;
	fprintf(f, "<div class=\"plot\"><svg id=\"changes-plot\" role=\"img\" aria-label=\"Changes by kernel and site\" "
		   "viewBox=\"0 0 %.0f %.0f\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">\n", W, H);
	fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"0\" y2=\"%.0f\" stroke=\"#888\"/>\n", MID, MID, H);
	for (size_t i = 0; i < shown; i++) {
		const struct an_diff_change *c = v[i];
		double d = c->b - c->a, w = HALF * fabs(d) / maxd, y = 5 + RH * (double)i;
		size_t nl = strlen(c->name);
		fprintf(f, "<g class=\"change\"><title>%s ", c->type);
		html_str(f, c->name);
		fprintf(f, "\nA %s, B %s (%s%s)</title>", fmt_ns((uint64_t)c->a, b1, sizeof b1), fmt_ns((uint64_t)c->b, b2, sizeof b2),
			c->a ? "" : "new", c->a ? "" : "");
		fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", LX - 6 + 200, y + 15);
		/* The tail of a long name: a site's line or a kernel's end tells them apart. */
		html_text(f, nl > 58 ? c->name + nl - 57 : c->name, nl > 58 ? 57 : nl);
		fputs("</text>", f);
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>", d > 0 ? MID : MID - w, y, w < 1 ? 1 : w,
			RH - 6, d > 0 ? "#e45756" : "#54a24b");
		double pc = c->a ? 100.0 * d / c->a : 0;
		char lab[48];
		if (c->a)
			snprintf(lab, sizeof lab, "%s%s (%+.0f%%)", d > 0 ? "+" : "-", fmt_ns((uint64_t)fabs(d), b1, sizeof b1), pc);
		else
			snprintf(lab, sizeof lab, "+%s (new)", fmt_ns((uint64_t)fabs(d), b1, sizeof b1));
		int right = d > 0 ? (MID + w + 150 < W) : (MID - w - 150 < LX + 200);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text></g>\n",
			d > 0 ? (right ? MID + w + 4 : MID + w - 4) : (right ? MID + 4 : MID - w - 4), y + 14,
			d > 0 ? (right ? "start" : "end") : (right ? "start" : "end"), lab);
	}
	fputs("</svg><ul class=\"legend\"><li><span class=\"sw\" style=\"background:#e45756\"></span>B takes longer</li>"
	      "<li><span class=\"sw\" style=\"background:#54a24b\"></span>B takes less</li><li>per step when both runs have "
	      "steps; hover a bar for its whole name</li></ul></div>\n",
	      f);
	if (shown) {
		fputs("<table><tr><th style=\"width:7em\">type</th><th class=\"n\">A</th><th class=\"n\">B</th><th class=\"n\">change</th>"
		      "<th>name</th></tr>\n", f);
		for (size_t i = 0; i < shown; i++) {
			const struct an_diff_change *c = v[i];
			fprintf(f, "<tr><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">", c->type,
				fmt_ns((uint64_t)c->a, b1, sizeof b1), fmt_ns((uint64_t)c->b, b2, sizeof b2));
			if (c->a)
				fprintf(f, "%+.1f%%", 100.0 * (c->b - c->a) / c->a);
			else
				fputs("new", f);
			fputs("</td><td><code>", f);
			html_str(f, c->name);
			fputs("</code></td></tr>\n", f);
		}
		fputs("</table>\n", f);
	}
	free(v);
}

int an_diff_html(FILE *f, const struct an_diff_page *p)
{
	html_page_begin(f, "tbprof diff");
	fputs("<h1>tbprof diff</h1>\n<p class=\"meta\">A: <code>", f);
	html_str(f, p->path[0]);
	fputs("</code><br>B: <code>", f);
	html_str(f, p->path[1]);
	fprintf(f, "</code><br>threshold %.1f%%</p>\n", p->threshold_pct);
	verdict_box(f, p);
	dist_plot(f, p);
	changes_plot(f, p);
	html_page_end(f);
	return ferror(f) ? -1 : 0;
}
