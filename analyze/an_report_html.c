/*
 * tbanalyze reporter: one self-contained HTML page (inline CSS, SVG and a
 * small script; an_html.c) for one trace.  It leads as the text report
 * leads: the findings, each with the user's line and its source text (read
 * now, when the file is there), the advice, the library frames folded; then
 * the plots: time per step (an_pass_steptime.c's split), the breakdown, the
 * idle by cause, the per-stream timeline that zooms and pans.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_fmt.h"
#include "an.h"
#include "an_html.h"
#include "an_kind.h"
#include "an_report_int.h"

static const char *const cause_color[AN_CAUSE_N] = {"#bbbbbb", "#d62728", "#2ca02c", "#17becf", "#8c564b",
						    "#bcbd22", "#7f7f7f", "#9467bd"};
#define C_ACTIVE "#4c78a8"
#define C_DM "#f58518"
#define C_IDLE_SHORT "#dddddd"
#define C_HARNESS "#cccccc"

/* A file name shortened as the text report shortens it, the whole path in
 * its title (shown on hover). */
static void html_path(const struct analysis *a, FILE *f, const char *file, size_t len, uint64_t line)
{
	size_t dl;
	const char *disp = an_display_path(a, file, len, &dl);
	fputs("<code title=\"", f);
	html_text(f, file, len);
	if (line)
		fprintf(f, ":%" PRIu64, line);
	fputs("\">", f);
	html_text(f, disp, dl);
	if (line)
		fprintf(f, ":%" PRIu64, line);
	fputs("</code>", f);
}

/* Line `line` of the source file the trace names, read now; 0 and why not
 * in `why` when it cannot be.  A relative name is the traced program's
 * cwd's, else ours. */
static int source_line(const struct analysis *a, const char *file, size_t fl, uint64_t line, char *out, size_t outlen,
		       char *why, size_t wl)
{
	char path[4096];
	if (!fl || file[0] == '<') {
		snprintf(why, wl, "no source file (code made at run time: %.*s)", (int)(fl > 80 ? 80 : fl), file);
		return 0;
	}
	size_t cl = 0;
	const char *cwd = a->proc_cwd ? an_string(a, a->proc_cwd, &cl) : NULL;
	if (file[0] != '/' && cwd && cl)
		snprintf(path, sizeof path, "%.*s/%.*s", (int)cl, cwd, (int)fl, file);
	else
		snprintf(path, sizeof path, "%.*s", (int)fl, file);
	FILE *src = fopen(path, "r");
	if (!src) {
		snprintf(why, wl, "source not shown: %s is not readable here (read when the report was made)", path);
		return 0;
	}
	char buf[1024];
	uint64_t n = 0;
	int found = 0;
	while (fgets(buf, sizeof buf, src)) {
		size_t bl = strlen(buf);
		int whole = bl && buf[bl - 1] == '\n';
		if (++n == line) {
			while (bl && (buf[bl - 1] == '\n' || buf[bl - 1] == '\r'))
				buf[--bl] = 0;
			const char *t = buf;
			while (*t == ' ' || *t == '\t')
				t++;
			snprintf(out, outlen, "%s", t);
			found = 1;
			break;
		}
		/* A line longer than the buffer continues: not a new line. */
		while (!whole && fgets(buf, sizeof buf, src)) {
			bl = strlen(buf);
			whole = bl && buf[bl - 1] == '\n';
		}
	}
	fclose(src);
	if (!found)
		snprintf(why, wl, "source not shown: %s has no line %" PRIu64 " now (changed since the run?)", path, line);
	return found;
}

static void html_frame_li(const struct analysis *a, FILE *f, const struct an_frame *fr, const char *role)
{
	int lib = an_frame_is_library(a, fr);
	fprintf(f, "<li%s>%s", lib ? " class=\"lib\"" : "", role);
	html_path(a, f, fr->file, fr->file_len, fr->line);
	fputs(" in ", f);
	html_text(f, fr->function, fr->function_len);
	fputs(lib ? " <small>(library)</small></li>\n" : "</li>\n", f);
}

/* One finding: its kind and numbers, the user's line and its source, the
 * advice, then the call path folded (library frames below the user's line,
 * the callers above it). */
static void html_finding(const struct analysis *a, FILE *f, size_t idx, const struct an_finding *x)
{
	const struct an_kind *k = an_kind_of(x->kind);
	int cause = k->named_with_cause;
	fprintf(f, "<section class=\"finding\" id=\"finding-%zu\"><div class=\"head\"><h3><span class=\"kind\">%zu. %s%s%s%s</span></h3>",
		idx, idx, k->name, cause ? " (" : "", cause ? an_cause_name(x->cause) : "", cause ? ")" : "");
	if (k->html_head)
		k->html_head(a, f, x);
	fputs("</div>\n", f);
	if (k->html_also)
		k->html_also(a, f, x);

	struct an_frame fr[MAX_FRAMES], lib[MAX_FRAMES];
	size_t n = an_callpath_frames(a, x->callpath, fr, MAX_FRAMES);
	size_t nl = library_frames(a, x, lib, MAX_FRAMES);
	fputs("<div class=\"where user-line\">at ", f);
	if (n) {
		html_path(a, f, fr[0].file, fr[0].file_len, fr[0].line);
		fputs(" in <b>", f);
		html_text(f, fr[0].function, fr[0].function_len);
		fputs("</b></div>\n", f);
		char src[1024], why[4400];
		if (source_line(a, fr[0].file, fr[0].file_len, fr[0].line, src, sizeof src, why, sizeof why)) {
			fprintf(f, "<pre class=\"src\"><span class=\"s\">%" PRIu64 " |</span> ", fr[0].line);
			html_str(f, src);
			fputs("</pre>\n", f);
		} else {
			fputs("<p class=\"nosrc\">", f);
			html_str(f, why);
			fputs("</p>\n", f);
		}
	} else {
		char lbl[512];
		an_site_label(a, x->callpath, x->native, lbl, sizeof lbl);
		fputs("<code>", f);
		html_str(f, x->callpath || x->native ? lbl : "(no call path recorded)");
		fputs("</code></div>\n<p class=\"nosrc\">no Python line recorded: source not shown</p>\n", f);
	}
	fputs("<p class=\"advice\">&rarr; ", f);
	html_str(f, an_suggestion(a, x));
	fputs("</p>\n", f);
	if (k->html_tail) /* under the advice: the line and the advice lead */
		k->html_tail(a, f, x);
	if (n > 1 || nl) {
		fprintf(f, "<details><summary>call path: %zu frame%s", n + nl, n + nl == 1 ? "" : "s");
		if (nl)
			fprintf(f, ", %zu in libraries below this line", nl);
		fputs("</summary><ol class=\"frames\">\n", f);
		for (size_t j = nl; j-- > 0;)
			html_frame_li(a, f, &lib[j], "via ");
		for (size_t i = 0; i < n; i++)
			html_frame_li(a, f, &fr[i], i ? "from " : "at ");
		fputs("</ol></details>\n", f);
	}
	fputs("</section>\n", f);
}

static void html_findings(const struct analysis *a, FILE *f, const char *title, const char *none, const struct vec *v)
{
	if (!v->n && !*none)
		return;
	fprintf(f, "<h2>%s</h2>\n", title);
	if (!v->n)
		fputs(none, f);
	size_t shown = v->n < a->opts.top ? v->n : a->opts.top;
	for (size_t i = 0; i < shown; i++)
		html_finding(a, f, i + 1, VEC_AT(v, struct an_finding, i));
	if (shown < v->n)
		fprintf(f, "<p class=\"s\">&hellip; %zu more (--top N, or --json for all)</p>\n", v->n - shown);
}

static void legend_item(FILE *f, const char *color, const char *label)
{
	fprintf(f, "<li><span class=\"sw\" style=\"background:%s\"></span>", color);
	html_str(f, label);
	fputs("</li>", f);
}

/* ------------------------------------------------------------ time per step */
#define STEP_BARS 600
static uint64_t step_idle_explained(const struct an_step_time *st)
{
	uint64_t s = 0;
	for (int c = 1; c < AN_CAUSE_N; c++)
		s += st->idle_by[c];
	return s;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* One bar per step, its height the step's time, split into the GPU's
 * active time, data movement, idle by cause and the idle no gap piece
 * explains; warm-up steps hatched, slow steps outlined. */
/* The plot's frame and scale: a bar per step, or per run of steps past
 * STEP_BARS. */
struct steps_plot {
	const struct vec *v; /* struct an_step_time */
	double W, H, X0, Y0, PH, PW;
	size_t per_bar, bars;
	double bw, gap;      /* bar width, space between bars */
	uint64_t maxlen, median;
	int gpu;
};

/* The longest step, and the median of the counted ones (0: none). */
static void steps_scale(const struct vec *v, uint64_t *maxlen, uint64_t *median)
{
	uint64_t *lens = malloc(v->n * sizeof *lens);
	size_t nl = 0;
	*maxlen = 1;
	*median = 0;
	for (size_t i = 0; i < v->n; i++) {
		const struct an_step_time *st = VEC_AT(v, struct an_step_time, i);
		uint64_t len = st->end - st->begin;
		if (len > *maxlen)
			*maxlen = len;
		if (lens && st->counted)
			lens[nl++] = len;
	}
	if (lens && nl) {
		qsort(lens, nl, sizeof *lens, cmp_u64);
		*median = nl % 2 ? lens[nl / 2] : (lens[nl / 2 - 1] + lens[nl / 2]) / 2;
	}
	free(lens);
}

/* A bar's hover text: the step, its length, its split. */
static void step_bar_title(FILE *f, const struct steps_plot *p, size_t bar, size_t i, size_t last, int warm, int slow)
{
	char t1[32], t2[32];
	const struct an_step_time *st = VEC_AT(p->v, struct an_step_time, i);
	uint64_t len = st->end - st->begin;
	fprintf(f, "<g class=\"step%s%s\"><title>", warm ? " warmup" : "", slow ? " slow" : "");
	if (p->per_bar > 1)
		fprintf(f, "steps %zu-%zu, the slowest shown: ", bar * p->per_bar + 1, last);
	fprintf(f, "step %zu%s: %s", i + 1, warm ? " (warm-up, not counted)" : slow ? " (over 1.25x the median)" : "",
		fmt_ns(len, t1, sizeof t1));
	uint64_t whole = len * (st->devices ? st->devices : 1);
	uint64_t active = st->busy_ns > st->dm_ns ? st->busy_ns - st->dm_ns : 0;
	uint64_t idle = whole > st->busy_ns ? whole - st->busy_ns : 0, expl = step_idle_explained(st);
	if (p->gpu) {
		fprintf(f, "\nGPU active %.1f%%, data movement %.1f%%, idle %.1f%%", pct(active, whole), pct(st->dm_ns, whole),
			pct(idle, whole));
		for (int c = 1; c < AN_CAUSE_N; c++)
			if (st->idle_by[c])
				fprintf(f, "\n  idle %s %s", an_cause_name(c), fmt_ns(st->idle_by[c], t2, sizeof t2));
		if (idle > expl)
			fprintf(f, "\n  idle not placed %s", fmt_ns(idle - expl, t2, sizeof t2));
	}
	fputs("</title>\n", f);
}

/* Bar `bar`: the slowest step of its run, its segments bottom up (each its
 * share of the bar), hatched for warm-up, outlined when slow. */
static void step_bar(FILE *f, const struct steps_plot *p, size_t bar)
{
	const struct vec *v = p->v;
	size_t i = bar * p->per_bar, last = i + p->per_bar < v->n ? i + p->per_bar : v->n;
	for (size_t j = i + 1; j < last; j++) {
		const struct an_step_time *sj = VEC_AT(v, struct an_step_time, j), *si = VEC_AT(v, struct an_step_time, i);
		if (sj->end - sj->begin > si->end - si->begin)
			i = j;
	}
	const struct an_step_time *st = VEC_AT(v, struct an_step_time, i);
	uint64_t len = st->end - st->begin;
	double x = p->X0 + p->bw * (double)bar, h = p->PH * (double)len / (double)p->maxlen, y = p->Y0 + p->PH;
	int warm = !st->counted;
	int slow = !warm && p->median && len * 4 > p->median * 5;
	step_bar_title(f, p, bar, i, last, warm, slow);
	uint64_t whole = len * (st->devices ? st->devices : 1);
	uint64_t active = st->busy_ns > st->dm_ns ? st->busy_ns - st->dm_ns : 0;
	uint64_t idle = whole > st->busy_ns ? whole - st->busy_ns : 0, expl = step_idle_explained(st);
	struct {
		uint64_t ns;
		const char *color, *cls;
	} seg[AN_CAUSE_N + 3];
	size_t ns = 0;
	if (p->gpu) {
		seg[ns++] = (typeof(seg[0])){active, C_ACTIVE, "active"};
		seg[ns++] = (typeof(seg[0])){st->dm_ns, C_DM, "dm"};
		for (int c = 1; c < AN_CAUSE_N; c++)
			seg[ns++] = (typeof(seg[0])){expl <= idle ? st->idle_by[c] : (uint64_t)((double)st->idle_by[c] * idle / expl),
						     cause_color[c], an_cause_name(c)};
		seg[ns++] = (typeof(seg[0])){idle > expl ? idle - expl : 0, C_IDLE_SHORT, "idle-short"};
	} else {
		seg[ns++] = (typeof(seg[0])){whole, "#9d755d", "host"};
	}
	double w = p->bw - p->gap > 0.3 ? p->bw - p->gap : 0.3;
	for (size_t k = 0; k < ns; k++) {
		if (!seg[k].ns)
			continue;
		double sh = h * (double)seg[k].ns / (double)whole;
		y -= sh;
		fprintf(f, "<rect class=\"seg-%s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>", seg[k].cls, x,
			y, w, sh, seg[k].color);
	}
	if (warm)
		fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"url(#warm)\"/>", x, p->Y0 + p->PH - h,
			w, h);
	if (slow)
		fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" stroke=\"#b00020\" stroke-width=\"1.5\"/>",
			x, p->Y0 + p->PH - h, w, h);
	fputs("</g>\n", f);
}

/* The plot's axes, its bars, the warm-up label and the median line. */
static void steps_svg(FILE *f, const struct steps_plot *p)
{
	char t1[32];
	fprintf(f, "<div class=\"plot\"><svg id=\"steps-plot\" role=\"img\" aria-label=\"Time per step\" viewBox=\"0 0 %.0f %.0f\" "
		   "xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">\n",
		p->W, p->H);
	fputs("<defs><pattern id=\"warm\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
	      "<rect width=\"3\" height=\"6\" fill=\"#fff\" fill-opacity=\"0.55\"/></pattern></defs>\n", f);
	for (int k = 0; k <= 4; k++) {
		double y = p->Y0 + p->PH - p->PH * k / 4.0;
		fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
			   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			p->X0, p->W - 10, y, y, p->X0 - 6, y + 4, fmt_ns(p->maxlen * (uint64_t)k / 4, t1, sizeof t1));
	}
	for (size_t bar = 0; bar < p->bars; bar++)
		step_bar(f, p, bar);
	/* Warm-up steps named once, over the first of them. */
	for (size_t i = 0; i < p->v->n; i++)
		if (!VEC_AT(p->v, struct an_step_time, i)->counted) {
			fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" fill=\"#555\">warm-up</text>\n",
				p->X0 + p->bw * (double)(i / p->per_bar) + 2, p->Y0 - 3);
			break;
		}
	if (p->median) {
		double y = p->Y0 + p->PH - p->PH * (double)p->median / (double)p->maxlen;
		fprintf(f, "<line class=\"median\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" stroke-dasharray=\"5 4\"/>"
			   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#222\">median %s</text>\n",
			p->X0, p->W - 10, y, y, p->W - 12, y - 4, fmt_ns(p->median, t1, sizeof t1));
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step 1 &#8230; %zu</text>\n</svg>\n", p->X0 + p->PW / 2,
		p->H - 6, p->v->n);
}

static void steps_legend(FILE *f, const struct steps_plot *p)
{
	fputs("<ul class=\"legend\">", f);
	if (p->gpu) {
		legend_item(f, C_ACTIVE, "GPU active");
		legend_item(f, C_DM, "data movement");
		for (int c = 1; c < AN_CAUSE_N; c++) {
			int any = 0;
			for (size_t i = 0; i < p->v->n && !any; i++)
				any = VEC_AT(p->v, struct an_step_time, i)->idle_by[c] != 0;
			if (any) {
				char lab[64];
				snprintf(lab, sizeof lab, "idle: %s", an_cause_name(c));
				legend_item(f, cause_color[c], lab);
			}
		}
		legend_item(f, C_IDLE_SHORT, "idle not placed");
	} else {
		legend_item(f, "#9d755d", "step time (no GPU work recorded)");
	}
	fputs("<li>hatched: warm-up</li><li>red outline: over 1.25&times; the median</li></ul></div>\n", f);
}

static void html_steps_plot(const struct analysis *a, FILE *f)
{
	const struct vec *v = &a->step_times;
	fputs("<h2>Time per step</h2>\n", f);
	if (!v->n) {
		fprintf(f, "<p>No steps in this trace (%s): the analysis covers the whole trace.</p>\n",
			a->steps.none ? a->steps.none : "no iteration marks and no training loop detected");
		return;
	}
	struct steps_plot p = {.v = v, .W = 1000, .H = 300, .X0 = 70, .Y0 = 16, .PH = 250, .gpu = an_has_gpu(a)};
	p.PW = p.W - p.X0 - 10;
	steps_scale(v, &p.maxlen, &p.median);
	/* Past STEP_BARS steps a bar stands for a run of steps: the slowest of
	 * them (the slow ones stay visible), the page stays small. */
	p.per_bar = (v->n + STEP_BARS - 1) / STEP_BARS;
	p.bars = (v->n + p.per_bar - 1) / p.per_bar;
	p.bw = p.PW / (double)p.bars;
	p.gap = p.bw > 4 ? 1 : 0;
	steps_svg(f, &p);
	steps_legend(f, &p);
	fprintf(f, "<p class=\"s\">%zu steps (%s)", v->n, an_steps_source_name(a->steps.source));
	if (p.per_bar > 1)
		fprintf(f, "; each bar the slowest of %zu steps in a row", p.per_bar);
	if (a->steps.source == AN_STEPS_MARKS && a->steps.warmup && a->steps.count > v->n)
		fprintf(f, "; the runner's %" PRIu64 " warm-up iterations are not marked and not drawn", a->steps.warmup);
	if (a->late_gpu_records)
		fprintf(f, "; %" PRIu64 " GPU records came after the marks of their step (more than the reorder window "
			   "held back): each step's split is approximate", a->late_gpu_records);
	fputs(". Hover a bar for its split.</p>\n", f);
}

/* ------------------------------------------------------------ breakdown, idle */
static void html_breakdown(const struct analysis *a, FILE *f)
{
	char t1[32];
	unsigned n = active_devices(a);
	fputs("<h2>Execution time breakdown</h2>\n", f);
	fprintf(f, "<div class=\"plot\"><svg id=\"breakdown-plot\" role=\"img\" aria-label=\"Execution time breakdown\" "
		   "viewBox=\"0 0 1000 %u\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"13\">\n",
		34 * n + 6);
	unsigned row = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (!d->kernels && !d->copies && !d->sets)
			continue;
		struct an_breakdown b;
		an_device_breakdown(a, d, &b);
		double w = 880.0, x = 110.0, y = 4.0 + 34.0 * row++;
		double wa = w * pct(b.active_ns, b.window_ns) / 100.0, wd = w * pct(b.dm_ns, b.window_ns) / 100.0;
		fprintf(f, "<text x=\"0\" y=\"%.0f\">GPU %" PRIu64 "</text>\n", y + 18, d->id);
		fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"26\" fill=\"%s\"><title>active %.1f%% (%s)</title></rect>\n",
			x, y, wa, C_ACTIVE, pct(b.active_ns, b.window_ns), fmt_ns(b.active_ns, t1, sizeof t1));
		fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"26\" fill=\"%s\"><title>data movement %.1f%% (%s)</title></rect>\n",
			x + wa, y, wd, C_DM, pct(b.dm_ns, b.window_ns), fmt_ns(b.dm_ns, t1, sizeof t1));
		fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"26\" fill=\"%s\"><title>idle %.1f%% (%s)</title></rect>\n",
			x + wa + wd, y, w - wa - wd < 0 ? 0 : w - wa - wd, C_IDLE_SHORT, pct(b.idle_ns, b.window_ns),
			fmt_ns(b.idle_ns, t1, sizeof t1));
	}
	fputs("</svg><ul class=\"legend\">", f);
	legend_item(f, C_ACTIVE, "GPU active");
	legend_item(f, C_DM, "data movement");
	legend_item(f, C_IDLE_SHORT, "idle");
	fputs("</ul></div>\n", f);
}

/* The idle part of the breakdown, by cause: one stacked bar; its legend a
 * list that wraps (labels never drawn over each other). */
static void html_idle(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	char t1[32];
	if (!ib->idle_ns)
		return;
	fputs("<h2>Idle time by cause</h2>\n<div class=\"plot\"><svg id=\"idle-plot\" role=\"img\" aria-label=\"Idle time by cause\" "
	      "viewBox=\"0 0 1000 34\" xmlns=\"http://www.w3.org/2000/svg\">\n",
	      f);
	double w = 1000.0, x = 0;
	for (int c = 1; c <= AN_CAUSE_N; c++) {
		uint64_t ns = c < AN_CAUSE_N ? ib->by_cause[c] : ib->harness_ns;
		if (!ns)
			continue;
		double bw = w * (double)ns / (double)ib->idle_ns;
		const char *name = c < AN_CAUSE_N ? an_cause_name(c) : between_label(a);
		fprintf(f, "<rect class=\"idle-%s\" x=\"%.2f\" y=\"2\" width=\"%.2f\" height=\"30\" fill=\"%s\"><title>%s %.1f%% (%s)</title></rect>\n",
			c < AN_CAUSE_N ? name : "harness", x, bw, c < AN_CAUSE_N ? cause_color[c] : C_HARNESS, name,
			pct(ns, ib->idle_ns), fmt_ns(ns, t1, sizeof t1));
		x += bw;
	}
	fputs("</svg><ul class=\"legend\">", f);
	for (int c = 1; c <= AN_CAUSE_N; c++) {
		uint64_t ns = c < AN_CAUSE_N ? ib->by_cause[c] : ib->harness_ns;
		if (!ns)
			continue;
		char lab[128];
		snprintf(lab, sizeof lab, "%s %.1f%% (%s)", c < AN_CAUSE_N ? an_cause_name(c) : between_label(a),
			 pct(ns, ib->idle_ns), fmt_ns(ns, t1, sizeof t1));
		legend_item(f, c < AN_CAUSE_N ? cause_color[c] : C_HARNESS, lab);
	}
	fputs("</ul></div>\n", f);
	size_t shown = 0;
	for (size_t i = 0; i < a->idle_parts.n && shown < 8; i++) {
		const struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		if (p->total_ns * 100 < ib->idle_ns)
			break;
		if (!shown++)
			fputs("<table><tr><th class=\"n\">idle</th><th style=\"width:9em\">cause</th><th>where</th></tr>\n", f);
		char site[512];
		an_site_label(a, p->callpath, p->native, site, sizeof site);
		fprintf(f, "<tr><td class=\"n\">%s</td><td>%s</td><td>", fmt_ns(p->total_ns, t1, sizeof t1),
			an_cause_name(p->cause));
		html_str(f, p->callpath || p->native ? site : "(no host activity recorded)");
		fprintf(f, "%s%s%s</td></tr>\n", p->edge ? " (" : "", edge_name(p->edge), p->edge ? ")" : "");
	}
	if (shown)
		fputs("</table>\n", f);
}

/* ------------------------------------------------------------ timeline */
/* Strings (kernel names, call sites) each written once in the data and
 * referred to by index. */
struct tl_names {
	struct u64map idx;
	struct vec ids; /* uint64_t */
};

static long tl_name_index(struct tl_names *t, uint64_t id)
{
	int added;
	size_t ix = vec_keyed(&t->ids, &t->idx, id, &added);
	if (ix == SIZE_MAX)
		return -1;
	if (added)
		*VEC_AT(&t->ids, uint64_t, ix) = id;
	return (long)ix;
}

static long tl_row(const struct analysis *a, uint64_t dev, uint64_t stream)
{
	for (size_t j = 0; j < a->streams.n; j++) {
		const struct an_stream *s = VEC_AT(&a->streams, struct an_stream, j);
		if (s->device == dev && s->stream == stream)
			return (long)j;
	}
	return -1;
}

/* The controls, the drawing area the script fills, the legend. */
static void timeline_frame(FILE *f)
{
	fputs("<h2>Timeline per stream</h2>\n<div class=\"plot\"><div class=\"tlbar\">"
	      "<button type=\"button\" data-zoom=\"0.5\">zoom in</button><button type=\"button\" data-zoom=\"2\">zoom out</button>"
	      "<button type=\"button\" data-zoom=\"reset\">whole window</button><span class=\"s\">wheel: zoom, drag: pan, "
	      "double-click: reset &middot; showing <span id=\"tl-range\"></span></span></div>\n",
	      f);
	fputs("<svg class=\"timeline\" id=\"timeline\" role=\"img\" aria-label=\"Timeline per stream\" data-src=\"tl-data\" "
	      "data-range=\"tl-range\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\"></svg>\n",
	      f);
	fputs("<noscript><p>The timeline is drawn by the page's script.</p></noscript>\n", f);
	fputs("<ul class=\"legend\">", f);
	legend_item(f, "#4c78a8", "kernel");
	legend_item(f, "#f58518", "copy");
	legend_item(f, "#9d755d", "memset");
	legend_item(f, "#e45756", "idle gap (under the row)");
	legend_item(f, "#b279a2", "kernel burst (over the row)");
	fputs("</ul></div>\n", f);
}

/* Density where no record is kept: the bins of [w0, w1) before `from`. */
static void timeline_hist(const struct analysis *a, FILE *f, uint64_t w0, uint64_t w1, uint64_t from)
{
	int any = 0;
	for (size_t j = 0; j < a->streams.n && from; j++) {
		const struct an_stream *s = VEC_AT(&a->streams, struct an_stream, j);
		for (size_t b = 0; b < AN_HIST_BINS; b++) {
			if (!s->hist[b])
				continue;
			uint64_t lo = a->hist_origin + b * a->hist_w, hi = lo + a->hist_w;
			if (hi <= w0 || lo >= w1)
				continue;
			double op = (double)s->hist[b] / (double)a->hist_w;
			/* bin index relative to the window: the script multiplies by bin */
			fprintf(f, "%s[%zu,%.4f,%.2f]", any++ ? "," : "", j, ((double)lo - (double)w0) / (double)a->hist_w,
				op > 1 ? 1 : op);
		}
	}
}

/* The kept GPU records in [w0, w1): [row, start, duration, kind, name, site]. */
static void timeline_events(const struct analysis *a, FILE *f, uint64_t w0, uint64_t w1, size_t first, size_t kept,
			    struct tl_names *names, struct tl_names *sites)
{
	int any = 0;
	for (size_t k = 0; k < kept; k++) {
		const struct an_tl_event *e = &a->tl[(first + k) % AN_TL_EVENTS];
		if (e->end <= w0 || e->start >= w1)
			continue;
		long row = tl_row(a, e->device, e->stream);
		if (row < 0)
			continue;
		uint64_t s = e->start > w0 ? e->start : w0, en = e->end < w1 ? e->end : w1;
		long ni = e->name ? tl_name_index(names, e->name) : -1;
		long si = e->callpath ? tl_name_index(sites, an_user_callpath(a, e->callpath)) : -1;
		fprintf(f, "%s[%ld,%" PRIu64 ",%" PRIu64 ",%d,%ld,%ld]", any++ ? "," : "", row, s - w0, en - s, e->kind, ni, si);
	}
}

/* The idle gaps and bursts found in [w0, w1): [row, start, duration, 0 gap / 1 burst]. */
static void timeline_marks(const struct analysis *a, FILE *f, uint64_t w0, uint64_t w1)
{
	int any = 0;
	for (size_t m = 0; m < a->n_marks; m++) {
		const struct an_mark *mk = &a->marks[m];
		if (mk->end <= w0 || mk->start >= w1)
			continue;
		uint64_t s = mk->start > w0 ? mk->start : w0, e = mk->end < w1 ? mk->end : w1;
		for (size_t j = 0; j < a->streams.n; j++) {
			const struct an_stream *st = VEC_AT(&a->streams, struct an_stream, j);
			if (st->device != mk->device || (mk->kind == AN_F_KERNEL_BURST && st->stream != mk->stream))
				continue;
			fprintf(f, "%s[%zu,%" PRIu64 ",%" PRIu64 ",%d]", any++ ? "," : "", j, s - w0, e - s,
				mk->kind == AN_F_IDLE_GAP ? 0 : 1);
		}
	}
}

/* The timeline's data, as JSON for the page's script: times in ns from
 * the window's start. */
static void timeline_data(const struct analysis *a, FILE *f, uint64_t w0, uint64_t w1, uint64_t *from_out)
{
	fprintf(f, "<script type=\"application/json\" id=\"tl-data\">{\"w\":%" PRIu64 ",\"bin\":%" PRIu64 ",\"rows\":[", w1 - w0,
		a->hist_w);
	for (size_t j = 0; j < a->streams.n; j++) {
		const struct an_stream *s = VEC_AT(&a->streams, struct an_stream, j);
		char lab[64];
		snprintf(lab, sizeof lab, "GPU %" PRIu64 " stream %" PRIu64, s->device, s->stream);
		fputs(j ? "," : "", f);
		html_js_string(f, lab, strlen(lab));
	}
	/* The kept records: the last AN_TL_EVENTS of the trace. */
	size_t kept = a->tl ? (a->tl_seen < AN_TL_EVENTS ? (size_t)a->tl_seen : AN_TL_EVENTS) : 0;
	size_t first = a->tl_seen > AN_TL_EVENTS ? (size_t)(a->tl_seen % AN_TL_EVENTS) : 0;
	uint64_t from = 0;
	if (a->tl_seen > AN_TL_EVENTS && kept) {
		uint64_t s = a->tl[first].start;
		from = s > w0 ? s - w0 : 0;
	} else if (!a->tl) {
		from = w1 - w0;
	}
	fprintf(f, "],\"from\":%" PRIu64 ",\"hist\":[", from);
	timeline_hist(a, f, w0, w1, from);
	fputs("],\"ev\":[", f);
	struct tl_names names = {.ids.item = sizeof(uint64_t)}, sites = {.ids.item = sizeof(uint64_t)};
	timeline_events(a, f, w0, w1, first, kept, &names, &sites);
	fputs("],\"names\":[", f);
	for (size_t i = 0; i < names.ids.n; i++) {
		size_t nl = 0;
		const char *nm = an_string(a, *VEC_AT(&names.ids, uint64_t, i), &nl);
		fputs(i ? "," : "", f);
		html_js_string(f, nm ? nm : "kernel", nm ? (nl > 300 ? 300 : nl) : 6);
	}
	fputs("],\"sites\":[", f);
	for (size_t i = 0; i < sites.ids.n; i++) {
		char lbl[512];
		an_site_label(a, *VEC_AT(&sites.ids, uint64_t, i), 0, lbl, sizeof lbl);
		fputs(i ? "," : "", f);
		html_js_string(f, lbl, strlen(lbl));
	}
	fputs("],\"marks\":[", f);
	timeline_marks(a, f, w0, w1);
	fputs("]}</script>\n", f);
	u64map_free(&names.idx);
	u64map_free(&sites.idx);
	vec_free(&names.ids);
	vec_free(&sites.ids);
	*from_out = from;
}

static void html_timeline(const struct analysis *a, FILE *f)
{
	char t1[32];
	uint64_t w0 = a->markers_used ? a->win_begin : a->first_ts;
	uint64_t w1 = a->markers_used ? a->win_end : a->last_ts;
	if (!a->hist_on || !a->streams.n || w1 <= w0)
		return;
	timeline_frame(f);
	uint64_t from;
	timeline_data(a, f, w0, w1, &from);
	fprintf(f, "<p class=\"s\">The axis is the analysed window (%s, %s). ",
		a->markers_used ? "marked iterations after warm-up" : "first to last event", fmt_ns(w1 - w0, t1, sizeof t1));
	if (from && from < w1 - w0)
		fprintf(f, "Each kernel and copy is drawn from %s on (the trace's last %d GPU records); before it, GPU "
			   "busy time as density. ", fmt_ns(from, t1, sizeof t1), AN_TL_EVENTS);
	fputs("Hover a kernel or copy for its name, duration and Python line.</p>\n", f);
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
			fprintf(f, "<table><tr><th class=\"n\">%s</th><th class=\"n\">%s</th><th class=\"n\">calls</th><th>function</th><th>file</th></tr>\n",
				by_self ? "self" : "inclusive", by_self ? "inclusive" : "self");
		}
		for (size_t i = 0; i < host_rows_shown(a, n); i++) {
			const struct host_row *r = &rows[i];
			const char *incl = row_incl(r, t1, sizeof t1), *self = fmt_ns(r->self_ns, t2, sizeof t2);
			fprintf(f, "<tr><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%" PRIu64 "</td><td class=\"k\">", by_self ? self : incl,
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


/* ------------------------------------------------------------ the page */
static void html_header(const struct analysis *a, FILE *f)
{
	char t1[32], t2[32];
	const char *base = strrchr(a->path, '/');
	html_page_begin(f, base ? base + 1 : a->path);
	fputs("<h1>tbprof report</h1>\n<p class=\"meta\"><code>", f);
	html_str(f, a->path);
	fprintf(f, "</code> &mdash; window %s (", fmt_ns(a->total.window_ns, t1, sizeof t1));
	if (a->markers_used && a->steps.source == AN_STEPS_DETECTED)
		fprintf(f, "%" PRIu64 " steps after warm-up, detected", a->iterations);
	else if (a->markers_used)
		fprintf(f, "%" PRIu64 " marked iterations", a->iterations);
	else
		fputs("first to last event", f);
	fputs(")</p>\n", f);
	if (a->steps.source) {
		fprintf(f, "<p class=\"meta\">steps: %" PRIu64 " (%s), %" PRIu64 " warm-up set apart, median %s per step",
			a->steps.count, an_steps_source_name(a->steps.source), a->steps.warmup,
			fmt_ns(a->steps.median_ns, t2, sizeof t2));
		if (a->steps.loop) {
			char site[512];
			an_site_label(a, a->steps.loop, 0, site, sizeof site);
			fputs("; the loop's steps start at ", f);
			html_str(f, site);
		}
		fputs("</p>\n", f);
	}
	if (!an_has_gpu(a)) {
		if (a->n_launch + a->n_memcpy + a->n_memset) {
			const char *why = no_gpu_timeline_why(a);
			fprintf(f, "<p class=\"meta\">%c", toupper((unsigned char)why[0]));
			html_str(f, why + 1);
			fputs(": findings come from host-side API times.</p>\n", f);
		} else {
			fputs("<p class=\"meta\">No GPU activity recorded (a CPU run): host time by Python function below.</p>\n", f);
		}
		return;
	}
	unsigned n = active_devices(a);
	uint64_t whole = a->total.window_ns * (n ? n : 1);
	fprintf(f, "<div class=\"cards\"><div class=\"card\">GPU active<b>%.1f%%</b></div><div class=\"card\">data movement"
		   "<b>%.1f%%</b></div><div class=\"card\">GPU idle<b>%.1f%%</b></div>",
		pct(a->total.active_ns, whole), pct(a->total.dm_ns, whole), pct(a->total.idle_ns, whole));
	if (a->steps.median_ns)
		fprintf(f, "<div class=\"card\">median step<b>%s</b></div>", fmt_ns(a->steps.median_ns, t1, sizeof t1));
	fprintf(f, "<div class=\"card\">findings<b>%zu</b></div></div>\n", a->findings.n);
}

static void html_kernels(const struct analysis *a, FILE *f)
{
	char t1[32];
	if (!a->kernels.n)
		return;
	fputs("<h2>Top kernels</h2>\n<table><tr><th class=\"n\">time</th><th class=\"n\">count</th><th>kernel</th></tr>\n", f);
	for (size_t i = 0; i < a->kernels.n && i < 10; i++) {
		const struct an_kernel_stat *k = VEC_AT(&a->kernels, struct an_kernel_stat, i);
		size_t nl;
		const char *name = an_string(a, k->name, &nl);
		fprintf(f, "<tr><td class=\"n\">%s</td><td class=\"n\">%" PRIu64 "</td><td><code>", fmt_ns(k->total_ns, t1, sizeof t1),
			k->count);
		html_text(f, name ? name : "(unnamed)", name ? (nl > 400 ? 400 : nl) : 9);
		fputs("</code></td></tr>\n", f);
	}
	fputs("</table>\n", f);
}

int an_report_html(const struct analysis *a, FILE *f)
{
	html_header(a, f);
	html_findings(a, f, "Findings, biggest first",
		      "<p>No findings.</p>\n", &a->findings);
	html_findings(a, f, "The model's work at the runner's shared training step", "", &a->model_step);
	html_steps_plot(a, f);
	if (an_has_gpu(a)) {
		html_breakdown(a, f);
		html_idle(a, f);
		html_timeline(a, f);
	}
	if (a->harness.n) {
		char t1[32], site[512];
		fputs("<h2>The runner's own cost (harness, not the model's)</h2>\n<ul>\n", f);
		for (size_t i = 0; i < a->harness.n; i++) {
			const struct an_finding *x = VEC_AT(&a->harness, struct an_finding, i);
			an_site_label(a, x->callpath, x->native, site, sizeof site);
			const struct an_kind *k = an_kind_of(x->kind);
			fprintf(f, "<li>%s%s%s: %" PRIu64 "x, %s at <code>", k->name, k->named_with_cause ? " " : "",
				k->named_with_cause ? an_cause_name(x->cause) : "", x->count, fmt_ns(x->total_ns, t1, sizeof t1));
			html_str(f, site);
			fputs("</code></li>\n", f);
		}
		fputs("</ul>\n", f);
	}
	html_kernels(a, f);
	if (a->spans.n)
		html_host_time(a, f);
	fprintf(f, "<p class=\"s\">%" PRIu64 " kernels, %" PRIu64 " memcpy, %" PRIu64 " memset, %" PRIu64 " malloc, %" PRIu64
		   " free, %" PRIu64 " sync, %" PRIu64 " failed API calls; %" PRIu64 " events, %" PRIu64 " lost%s</p>\n",
		a->n_launch, a->n_memcpy, a->n_memset, a->n_malloc, a->n_free, a->n_sync, a->n_errors, a->events,
		a->lost ? a->lost : a->end_lost, a->truncated ? ", truncated" : "");
	html_page_end(f);
	return ferror(f) ? -1 : 0;
}
