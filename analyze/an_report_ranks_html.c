/*
 * tbanalyze cross-rank view as one self-contained HTML page: the time of
 * every aligned step on every rank as a heat map (rank x step, the
 * straggler's row outlined), the straggler finding, each rank's leading
 * findings.  Computed by an_ranks.c.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_fmt.h"
#include "an_html.h"
#include "an_ranks.h"

/* White at the median step, red at twice it and over, blue below. */
static void heat_color(double ratio, char *buf, size_t len)
{
	if (ratio >= 1) {
		double t = ratio - 1 > 1 ? 1 : ratio - 1;
		snprintf(buf, len, "rgb(255,%d,%d)", (int)(245 - 200 * t), (int)(245 - 200 * t));
	} else {
		double t = (1 - ratio) * 2 > 1 ? 1 : (1 - ratio) * 2;
		snprintf(buf, len, "rgb(%d,%d,255)", (int)(245 - 150 * t), (int)(245 - 100 * t));
	}
}

static uint64_t step_len(const struct an_rank *k, size_t j)
{
	size_t i = k->first_step + j;
	if (i >= k->steps.n)
		return 0;
	const struct an_ivl *v = VEC_AT(&k->steps, struct an_ivl, i);
	return v->end > v->begin ? v->end - v->begin : 0;
}

/* The step's work on the rank (outside collectives; the whole step when
 * there are none). */
static uint64_t step_work(const struct an_rank *k, size_t j)
{
	return j < k->step_work.n ? *VEC_AT(&k->step_work, uint64_t, j) : step_len(k, j);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

static void heat_map(const struct an_ranks *R, FILE *f)
{
	char t1[32], t2[32], t3[32], col[32];
	size_t ns = R->aligned_steps;
	fputs("<h2>Step time per rank</h2>\n", f);
	if (!ns || !R->median_step_ns) {
		fputs("<p>No aligned steps across the ranks: no heat map.</p>\n", f);
		return;
	}
	/* Cells are coloured by the work of the step on the rank against the
	 * median cell: in a synchronised run every rank's step lasts as long
	 * as the slowest's, the work is what differs. */
	uint64_t *all = malloc(R->n * ns * sizeof *all), median = R->median_step_ns;
	if (all) {
		size_t m = 0;
		for (size_t r = 0; r < R->n; r++)
			for (size_t j = 0; j < ns; j++)
				all[m++] = step_work(&R->r[r], j);
		qsort(all, m, sizeof *all, cmp_u64);
		median = all[m / 2] ? all[m / 2] : median;
		free(all);
	}
	const double W = 1000, X0 = 90, Y0 = 8, PW = W - X0 - 10;
	double rh = R->n > 24 ? 14 : 26, cw = PW / (double)ns;
	double H = Y0 + rh * (double)R->n + 40;
	fprintf(f, "<div class=\"plot\"><svg id=\"ranks-heat\" role=\"img\" aria-label=\"Step time per rank\" viewBox=\"0 0 %.0f %.0f\" "
		   "xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">\n", W, H);
	for (size_t r = 0; r < R->n; r++) {
		const struct an_rank *k = &R->r[r];
		int strag = (long)r == R->straggler;
		double y = Y0 + rh * (double)r;
		fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\"%s>rank %" PRIu64 "</text>\n", X0 - 8, y + rh * 0.68,
			strag ? " font-weight=\"700\" fill=\"#b00020\"" : "", k->rank);
		for (size_t j = 0; j < ns; j++) {
			uint64_t len = step_len(k, j), work = step_work(k, j);
			heat_color((double)work / (double)median, col, sizeof col);
			fprintf(f, "<rect class=\"cell\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>rank %" PRIu64
				   ", step %zu: %s, of it %s working (%.2fx the median), %s in collectives</title></rect>",
				X0 + cw * (double)j, y, cw > 2 ? cw - 0.5 : cw, rh - 2, col, k->rank, j + 1,
				fmt_ns(len, t1, sizeof t1), fmt_ns(work, t2, sizeof t2), (double)work / (double)median,
				fmt_ns(len - work, t3, sizeof t3));
		}
		fputc('\n', f);
		if (strag)
			fprintf(f, "<rect class=\"straggler\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
				   "stroke=\"#b00020\" stroke-width=\"2.5\"><title>the straggler</title></rect>\n",
				X0 - 1, y - 1, PW + 2, rh);
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">aligned step 1 &#8230; %zu</text>\n</svg>\n", X0 + PW / 2,
		H - 12, ns);
	fputs("<ul class=\"legend\"><li>colour: the step's work on the rank (its time outside collectives)</li>"
	      "<li><span class=\"sw\" style=\"background:rgb(245,245,255)\"></span>the median</li>"
	      "<li><span class=\"sw\" style=\"background:rgb(255,45,45)\"></span>twice the median or more</li>"
	      "<li><span class=\"sw\" style=\"background:rgb(95,145,255)\"></span>half the median or less</li>", f);
	if (R->straggler >= 0)
		fputs("<li>outlined: the straggler</li>", f);
	fprintf(f, "</ul></div>\n<p class=\"s\">median step %s (over the aligned steps, the slowest rank's); median work "
		   "per rank and step %s. Hover a cell for its times.</p>\n",
		fmt_ns(R->median_step_ns, t1, sizeof t1), fmt_ns(median, t2, sizeof t2));
}

static void straggler(const struct an_ranks *R, FILE *f)
{
	char t1[32], t2[32];
	fputs("<h2>Findings across ranks</h2>\n", f);
	if (R->straggler < 0) {
		fputs(R->n > 1 && R->aligned_steps < 3 ? "<p>No straggler: too few steps to compare.</p>\n"
			: "<p>No straggler: no rank arrived last in two thirds of the steps by more than 10% of a step.</p>\n", f);
		return;
	}
	const struct an_rank *s = &R->r[R->straggler];
	fprintf(f, "<section class=\"finding\" id=\"finding-1\"><div class=\"head\"><h3><span class=\"kind\">1. straggler: rank %" PRIu64
		   "</span></h3><span class=\"num\">%s in %" PRIu64 " of %" PRIu64 " steps</span><span class=\"cost\">%s %s per step "
		   "(mean)</span></div>\n",
		s->rank, R->sync_source == AN_SYNC_NONE ? "the slowest" : "the last to reach the collectives", R->straggler_steps,
		R->aligned_steps, fmt_ns(R->straggler_late_ns, t1, sizeof t1), R->sync_source == AN_SYNC_NONE ? "longer" : "late");
	fputs("<div class=\"where user-line\">", f);
	if (R->n_fns) {
		struct an_frame fr;
		const struct an_rank *on;
		if (an_ranks_fn_frame(R, R->fns[0].fn, &fr, &on)) {
			size_t fl;
			const char *file = an_display_path(&on->a, fr.file, fr.file_len, &fl);
			fputs("where: <code title=\"", f);
			html_text(f, fr.file, fr.file_len);
			fputs("\">", f);
			html_text(f, file, fl);
			fprintf(f, ":%" PRIu64 "</code> in <b>", fr.line);
			html_text(f, fr.function, fr.function_len);
			fprintf(f, "</b>: %s in the aligned steps, the other ranks' median %s", fmt_ns(R->fns[0].self_ns, t1, sizeof t1),
				fmt_ns(R->fns[0].others_ns, t2, sizeof t2));
		}
	} else {
		fputs("where: no function of its own stands out", f);
	}
	fputs("</div>\n", f);
	if (R->sync_source != AN_SYNC_NONE) {
		fprintf(f, "<p class=\"also\">the other ranks lost %s waiting for it in collectives (", fmt_ns(R->wait_ns, t1, sizeof t1));
		an_ranks_print_waits(R, f);
		fputs(")</p>\n", f);
	}
	fputs("<p class=\"advice\">&rarr; even out the work per rank there (data loading, uneven batches, rank-only logging or "
	      "checkpointing), or move it off the step</p></section>\n", f);
}

int an_ranks_report_html(const struct an_ranks *R, FILE *f)
{
	char t1[32];
	html_page_begin(f, "tbprof ranks");
	fprintf(f, "<h1>tbprof ranks</h1>\n<p class=\"meta\">%zu traces", R->n);
	if (R->n)
		fprintf(f, ", ranks %" PRIu64 " to %" PRIu64, R->r[0].rank, R->r[R->n - 1].rank);
	fprintf(f, "; %" PRIu64 " aligned steps, median %s per step</p>\n", R->aligned_steps,
		fmt_ns(R->median_step_ns, t1, sizeof t1));
	straggler(R, f);
	heat_map(R, f);
	fputs("<h2>Each rank</h2>\n<table><tr><th style=\"width:5em\">rank</th><th class=\"n\">window</th><th class=\"n\">waiting</th>"
	      "<th>trace, top finding</th></tr>\n", f);
	for (size_t i = 0; i < R->n; i++) {
		const struct an_rank *k = &R->r[i];
		fprintf(f, "<tr><td>%" PRIu64 "%s</td><td class=\"n\">%s</td>", k->rank, (long)i == R->straggler ? " (straggler)" : "",
			fmt_ns(k->a.total.window_ns, t1, sizeof t1));
		fprintf(f, "<td class=\"n\">%s</td><td><code>", fmt_ns(k->wait_ns, t1, sizeof t1));
		html_str(f, k->path);
		fputs("</code>", f);
		if (k->a.findings.n) {
			const struct an_finding *x = VEC_AT(&k->a.findings, struct an_finding, 0);
			char site[512];
			an_site_label(&k->a, x->callpath, x->native, site, sizeof site);
			fprintf(f, "<br>%s%s%s%s %s at ", an_finding_name(x->kind), x->cause ? " (" : "",
				x->cause ? an_cause_name(x->cause) : "", x->cause ? ")" : "", fmt_ns(x->total_ns, t1, sizeof t1));
			html_str(f, site);
		}
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	html_page_end(f);
	return ferror(f) ? -1 : 0;
}
