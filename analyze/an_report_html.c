/*
 * tbanalyze reporter: a self-contained HTML page with inline SVG.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "an_fmt.h"
#include "an.h"
#include "an_report_int.h"

/* ------------------------------------------------------------ HTML */
static void html_text(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		switch (s[i]) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(s[i], f);
		}
	}
}

/* The text report's two host tables, as HTML (a CPU run's main content). */
static void html_host_time(const struct analysis *a, FILE *f)
{
	char t1[32], t2[48], t3[32], lab[96];
	struct host_outside out;
	if (host_outside(a, &out) && a->spans.n) {
		host_win_label(a, lab, sizeof lab);
		host_imports(&out, t2, sizeof t2);
		fprintf(f, "<p class=\"s\">Host time over the analysis window (%s); outside it, not in these tables: %s "
			   "before it (start-up%s, set-up, warm-up) and %s after it.</p>\n",
			lab, fmt_ns(out.before_ns, t1, sizeof t1), t2, fmt_ns(out.after_ns, t3, sizeof t3));
	}
	for (int by_self = 0; by_self <= 1; by_self++) {
		struct host_row *rows;
		size_t n = host_rows(a, by_self, &rows);
		if (n) {
			fputs(by_self ? "<h2>Python functions by self time</h2>\n"
				      : "<h2>Python functions by inclusive time</h2>\n<p class=\"s\">Spans: calls longer "
					"than the tracer's threshold.</p>\n", f);
			fprintf(f, "<table><tr><th>%s</th><th>%s</th><th>calls</th><th>function</th><th>file</th></tr>\n",
				by_self ? "self" : "inclusive", by_self ? "inclusive" : "self");
		}
		for (size_t i = 0; i < host_rows_shown(a, n); i++) {
			const struct host_row *r = &rows[i];
			const char *incl = row_incl(r, t1, sizeof t1), *self = fmt_ns(r->self_ns, t2, sizeof t2);
			fprintf(f, "<tr><td>%s</td><td>%s</td><td>%" PRIu64 "</td><td class=\"k\">", by_self ? self : incl,
				by_self ? incl : self, r->count);
			html_text(f, r->fr.function, r->fr.function_len);
			fputs("</td><td>", f);
			size_t fl;
			const char *file = an_display_path(a, r->fr.file, r->fr.file_len, &fl);
			html_text(f, file, fl);
			if (by_self)
				fprintf(f, ":%" PRIu64, r->fr.line);
			fputs("</td></tr>\n", f);
		}
		if (n)
			fputs("</table>\n", f);
		free(rows);
	}
}

static const char *const cause_color[AN_CAUSE_N] = {"", "#d62728", "#2ca02c", "#ff7f0e", "#8c564b", "#bcbd22", "#7f7f7f",
						    "#9467bd"};

/* The idle part of the breakdown, by cause: one stacked bar. */
static void html_idle_bar(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	char t1[32];
	if (!ib->idle_ns)
		return;
	fputs("<h2>Idle time by cause</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"70\">\n", f);
	double w = 780.0, x = 100.0;
	fputs("<text x=\"0\" y=\"28\">idle</text>\n", f);
	for (int c = 1; c <= AN_CAUSE_N; c++) {
		uint64_t ns = c < AN_CAUSE_N ? ib->by_cause[c] : ib->harness_ns;
		if (!ns)
			continue;
		double bw = w * (double)ns / (double)ib->idle_ns;
		const char *name = c < AN_CAUSE_N ? an_cause_name(c) : between_label(a);
		fprintf(f, "<rect class=\"idle-%s\" x=\"%.2f\" y=\"10\" width=\"%.2f\" height=\"26\" fill=\"%s\"><title>%s %.1f%% (%s)</title></rect>\n",
			c < AN_CAUSE_N ? name : "harness", x, bw, c < AN_CAUSE_N ? cause_color[c] : "#cccccc", name,
			pct(ns, ib->idle_ns), fmt_ns(ns, t1, sizeof t1));
		x += bw;
	}
	double lx = 100.0;
	for (int c = 1; c <= AN_CAUSE_N; c++) {
		uint64_t ns = c < AN_CAUSE_N ? ib->by_cause[c] : ib->harness_ns;
		if (!ns)
			continue;
		const char *name = c < AN_CAUSE_N ? an_cause_name(c) : "runner";
		fprintf(f, "<rect x=\"%.0f\" y=\"46\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" y=\"57\">%s %.1f%%</text>\n",
			lx, c < AN_CAUSE_N ? cause_color[c] : "#cccccc", lx + 16, name, pct(ns, ib->idle_ns));
		lx += 130;
	}
	fputs("</svg>\n", f);
	size_t shown = 0;
	for (size_t i = 0; i < a->idle_parts.n && shown < 8; i++) {
		const struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		if (p->total_ns * 100 < ib->idle_ns)
			break;
		if (!shown++)
			fputs("<table><tr><th>idle</th><th>cause</th><th>where</th></tr>\n", f);
		char site[512];
		an_site_label(a, p->callpath, p->native, site, sizeof site);
		fprintf(f, "<tr><td>%s</td><td>%s</td><td>", fmt_ns(p->total_ns, t1, sizeof t1), an_cause_name(p->cause));
		const char *where = p->callpath || p->native ? site : "(no host activity recorded)";
		html_text(f, where, strlen(where));
		fprintf(f, "%s%s%s</td></tr>\n", p->edge ? " (" : "", edge_name(p->edge), p->edge ? ")" : "");
	}
	if (shown)
		fputs("</table>\n", f);
}

/* A table of findings under a heading (none: what to say when empty, or ""
 * to leave the heading out). */
static void html_findings(const struct analysis *a, FILE *f, const char *title, const char *none,
			  const struct vec *v)
{
	char t1[32];
	if (!v->n && !*none)
		return;
	fprintf(f, "<h2>%s</h2>\n", title);
	if (!v->n)
		fputs(none, f);
	else
		fputs("<table><tr><th>#</th><th>kind</th><th>count</th><th>time</th><th>where</th><th>suggestion</th></tr>\n", f);
	for (size_t i = 0; i < v->n; i++) {
		const struct an_finding *x = VEC_AT(v, struct an_finding, i);
		fprintf(f, "<tr><td>%zu</td><td class=\"k\">%s%s%s</td><td>%" PRIu64 "</td><td>%s</td><td><pre>", i + 1,
			an_finding_name(x->kind), x->kind == AN_F_IDLE_GAP ? " / " : "",
			x->kind == AN_F_IDLE_GAP ? an_cause_name(x->cause) : "", x->count,
			fmt_ns(x->total_ns, t1, sizeof t1));
		struct an_frame fr[MAX_FRAMES];
		size_t n = an_callpath_frames(a, x->callpath, fr, MAX_FRAMES);
		for (size_t k = 0; k < n && k < 10; k++) {
			html_text(f, fr[k].file, fr[k].file_len);
			fprintf(f, ":%" PRIu64 " ", fr[k].line);
			html_text(f, fr[k].function, fr[k].function_len);
			fputc('\n', f);
		}
		if (!n) {
			char lbl[512];
			an_site_label(a, x->callpath, x->native, lbl, sizeof lbl);
			html_text(f, lbl, strlen(lbl));
		}
		fputs("</pre></td><td>", f);
		const char *sug = an_suggestion(a, x);
		html_text(f, sug, strlen(sug));
		fputs("</td></tr>\n", f);
	}
	if (v->n)
		fputs("</table>\n", f);
}

int an_report_html(const struct analysis *a, FILE *f)
{
	char t1[32], t2[32];
	fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tbprof report</title>\n"
	      "<style>body{font-family:sans-serif;margin:1.5em;max-width:1100px}"
	      "td,th{padding:2px 8px;text-align:left;vertical-align:top}pre{margin:0}"
	      ".k{font-weight:bold}.s{color:#555}</style></head><body>\n",
	      f);
	fputs("<h1>tbprof report</h1>\n<p>", f);
	html_text(f, a->path, strlen(a->path));
	fprintf(f, " &mdash; window %s (%s)</p>\n", fmt_ns(a->total.window_ns, t1, sizeof t1),
		a->markers_used ? "marked iterations" : "first to last event");

	/* Breakdown bar: the paper's Figure 1, one bar per device. */
	fputs("<h2>Execution time breakdown</h2>\n", f);
	if (!an_has_gpu(a)) {
		fputs("<p>No GPU timeline in this trace.</p>\n", f);
	} else {
		unsigned n = active_devices(a);
		fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"%u\">\n", 40 * n + 40);
		unsigned row = 0;
		for (size_t i = 0; i < a->devices.n; i++) {
			const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
			if (!d->kernels && !d->copies && !d->sets)
				continue;
			struct an_breakdown b;
			an_device_breakdown(a, d, &b);
			double w = 780.0, x = 100.0, y = 10.0 + 40.0 * row++;
			double wa = w * pct(b.active_ns, b.window_ns) / 100.0, wd = w * pct(b.dm_ns, b.window_ns) / 100.0;
			fprintf(f, "<text x=\"0\" y=\"%.0f\">GPU %" PRIu64 "</text>\n", y + 18, d->id);
			fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"26\" fill=\"#2b7bb9\"><title>active %.1f%%</title></rect>\n",
				x, y, wa, pct(b.active_ns, b.window_ns));
			fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"26\" fill=\"#f0a030\"><title>data movement %.1f%%</title></rect>\n",
				x + wa, y, wd, pct(b.dm_ns, b.window_ns));
			fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"26\" fill=\"#cccccc\"><title>idle %.1f%%</title></rect>\n",
				x + wa + wd, y, w - wa - wd, pct(b.idle_ns, b.window_ns));
		}
		fprintf(f, "<rect x=\"100\" y=\"%u\" width=\"12\" height=\"12\" fill=\"#2b7bb9\"/><text x=\"116\" y=\"%u\">GPU active</text>"
			   "<rect x=\"230\" y=\"%u\" width=\"12\" height=\"12\" fill=\"#f0a030\"/><text x=\"246\" y=\"%u\">data movement</text>"
			   "<rect x=\"380\" y=\"%u\" width=\"12\" height=\"12\" fill=\"#cccccc\"/><text x=\"396\" y=\"%u\">idle</text>\n</svg>\n",
			40 * n + 14, 40 * n + 25, 40 * n + 14, 40 * n + 25, 40 * n + 14, 40 * n + 25);
		fprintf(f, "<p>active %.1f%%, data movement %.1f%%, idle %.1f%% of %s</p>\n",
			pct(a->total.active_ns, a->total.window_ns * (n ? n : 1)),
			pct(a->total.dm_ns, a->total.window_ns * (n ? n : 1)),
			pct(a->total.idle_ns, a->total.window_ns * (n ? n : 1)), fmt_ns(a->total.window_ns, t1, sizeof t1));

		html_idle_bar(a, f);

		/* Per-stream timeline over the window (the breakdown's): busy
		 * density per bin, gaps red, bursts purple. */
		uint64_t w0 = a->markers_used ? a->win_begin : a->first_ts;
		uint64_t w1 = a->markers_used ? a->win_end : a->last_ts;
		if (a->hist_on && a->streams.n && w1 > w0) {
			double w = 780.0, x0 = 100.0, span = (double)(w1 - w0);
			fputs("<h2>Timeline per stream</h2>\n", f);
			fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"%zu\">\n", 24 * a->streams.n + 30);
			for (size_t j = 0; j < a->streams.n; j++) {
				const struct an_stream *s = VEC_AT(&a->streams, struct an_stream, j);
				double y = 5.0 + 24.0 * j;
				fprintf(f, "<text x=\"0\" y=\"%.0f\" font-size=\"12\">GPU %" PRIu64 " s%" PRIu64 "</text>\n", y + 13,
					s->device, s->stream);
				fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"16\" fill=\"#eeeeee\"/>\n", x0, y, w);
				for (size_t b = 0; b < AN_HIST_BINS; b++) {
					if (!s->hist[b])
						continue;
					/* A bin is drawn over its part inside the window. */
					uint64_t lo = a->hist_origin + b * a->hist_w, hi = lo + a->hist_w;
					if (hi <= w0 || lo >= w1)
						continue;
					uint64_t clo = lo > w0 ? lo : w0, chi = hi < w1 ? hi : w1;
					double bx = x0 + w * (double)(clo - w0) / span;
					double bw = w * (double)(chi - clo) / span;
					double op = (double)s->hist[b] / (double)a->hist_w;
					if (op > 1)
						op = 1;
					fprintf(f, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"16\" fill=\"#2b7bb9\" fill-opacity=\"%.2f\"/>\n",
						bx, y, bw < 0.5 ? 0.5 : bw, op < 0.15 ? 0.15 : op);
				}
				for (size_t m = 0; m < a->n_marks; m++) {
					const struct an_mark *mk = &a->marks[m];
					if (mk->device != s->device || (mk->kind == AN_F_KERNEL_BURST && mk->stream != s->stream))
						continue;
					if (mk->end <= w0 || mk->start >= w1)
						continue;
					uint64_t ms = mk->start > w0 ? mk->start : w0, me = mk->end < w1 ? mk->end : w1;
					double mx = x0 + w * (double)(ms - w0) / span;
					double mw = w * (double)(me - ms) / span;
					if (mw < 1) { /* drawn 1 px wide, still on the axis */
						mw = 1;
						if (mx > x0 + w - 1)
							mx = x0 + w - 1;
					}
					int gap = mk->kind == AN_F_IDLE_GAP;
					fprintf(f, "<rect class=\"mark\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"%s\" fill-opacity=\"0.8\"><title>%s %s</title></rect>\n",
						mx, gap ? y + 16 : y - 2, mw, gap ? 4 : 3, gap ? "#d62728" : "#9467bd",
						gap ? "idle gap" : "kernel burst", fmt_ns(mk->end - mk->start, t2, sizeof t2));
				}
			}
			fprintf(f, "<rect class=\"window\" x=\"%.2f\" y=\"1\" width=\"%.2f\" height=\"%.0f\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"1\"><title>analysed window: %s</title></rect>\n",
				x0, w, 24.0 * (double)a->streams.n, a->markers_used ? "marked iterations" : "first to last event");
			fprintf(f, "<text x=\"100\" y=\"%zu\" font-size=\"12\">0</text><text class=\"axis-end\" x=\"830\" y=\"%zu\" font-size=\"12\">%s</text>\n",
				24 * a->streams.n + 22, 24 * a->streams.n + 22, fmt_ns(w1 - w0, t1, sizeof t1));
			fprintf(f, "</svg>\n<p class=\"s\">the axis is the analysed window (%s), as in the breakdown above; "
				   "blue: GPU busy; red: idle gaps; purple: kernel bursts</p>\n",
				a->markers_used ? "marked iterations after warm-up" : "first to last event");
		}
	}

	html_findings(a, f, "Findings", "<p>No findings.</p>\n", &a->findings);
	html_findings(a, f, "The model's work at the runner's shared training step",
		      "", &a->model_step);
	if (a->spans.n)
		html_host_time(a, f);
	fprintf(f, "<p class=\"s\">%" PRIu64 " kernels, %" PRIu64 " memcpy, %" PRIu64 " memset, %" PRIu64 " malloc, %" PRIu64
		   " free, %" PRIu64 " sync, %" PRIu64 " failed API calls; %" PRIu64 " events, %" PRIu64
		   " lost%s</p>\n</body></html>\n",
		a->n_launch, a->n_memcpy, a->n_memset, a->n_malloc, a->n_free, a->n_sync, a->n_errors, a->events,
		a->lost ? a->lost : a->end_lost, a->truncated ? ", truncated" : "");
	return ferror(f) ? -1 : 0;
}
