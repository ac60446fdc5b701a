/*
 * tbanalyze reporters: text (terminal) and JSON (doc/report-schema.md); the
 * HTML page is an_report_html.c.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "an_fmt.h"
#include "an.h"
#include "an_ranges.h"
#include "an_kind.h"
#include "an_report_int.h"
#include "tr_common.h"

void json_str(FILE *f, const char *s, size_t len)
{
	tr_json_string(f, s ? s : "", s ? len : 0);
}

const char *fmt_bytes(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ULL << 30))
		snprintf(buf, len, "%.2f GiB", b / (double)(1ULL << 30));
	else if (b >= (1ULL << 20))
		snprintf(buf, len, "%.2f MiB", b / (double)(1ULL << 20));
	else if (b >= (1ULL << 10))
		snprintf(buf, len, "%.1f KiB", b / 1024.0);
	else
		snprintf(buf, len, "%" PRIu64 " B", b);
	return buf;
}

const char *no_gpu_timeline_why(const struct analysis *a)
{
	/* The header says whether CUPTI was wanted when the trace began; a
	 * notice, that it could not be had (no libcupti, another tool holds
	 * it, an error): then the trace is API-only.  Otherwise no GPU record
	 * means they were not written, not that there were none. */
	if (!(a->header.features & TBP_FEAT_CUPTI) || a->no_cupti_notice || a->cupti_trouble_notice)
		return "no GPU timeline in this trace (API-only, no CUPTI records)";
	if (!a->has_end)
		return "no GPU timeline: the trace ends early (no END record: the process was killed, or the file is "
		       "still being written) and the GPU records were not written, although CUPTI was on (features: cupti)";
	return "no GPU timeline: no GPU record reached the trace, although CUPTI was on (features: cupti); GPU records "
	       "reach the writer a second or so after the work (CUPTI's buffers, the ordering hold), so a short capture "
	       "or a crash's flight dump can end before any";
}

unsigned active_devices(const struct analysis *a)
{
	unsigned n = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (d->kernels || d->copies || d->sets)
			n++;
	}
	return n;
}

/* A thread's name from its THREAD record, NULL when none. */
const char *an_tid_name(const struct analysis *a, uint32_t tid, size_t *len)
{
	for (size_t i = 0; i < a->thread_names.n; i++) {
		const struct an_thread_name *tn = VEC_AT(&a->thread_names, struct an_thread_name, i);
		const char *name = tn->tid == tid ? an_string(a, tn->name, len) : NULL;
		if (name && *len)
			return name;
	}
	return NULL;
}

const char *an_thread_label(const struct analysis *a, uint32_t tid, char *buf, size_t len)
{
	size_t nl = 0;
	const char *name = an_tid_name(a, tid, &nl);
	if (a->has_process && a->process.pid == tid)
		snprintf(buf, len, "the main thread");
	else if (name)
		snprintf(buf, len, "thread %.*s (tid %" PRIu32 ")", (int)(nl > 64 ? 64 : nl), name, tid);
	else
		snprintf(buf, len, "thread %" PRIu32, tid);
	return buf;
}

/* "pageable host-to-device", "device-to-host", "mixed", ... */
const char *an_copy_label(uint8_t bits)
{
	int pageable = (bits & AN_COPY_PAGEABLE) != 0;
	switch (bits & ~AN_COPY_PAGEABLE) {
	case AN_COPY_H2D: return pageable ? "pageable host-to-device" : "host-to-device";
	case AN_COPY_D2H: return pageable ? "pageable device-to-host" : "device-to-host";
	case AN_COPY_D2D: return "device-to-device";
	default: return pageable ? "pageable" : "mixed";
	}
}

/* ------------------------------------------------------------ text */
/* The call site, leaf first; lib: the library frames the finding was
 * recorded in below its user frame (leaf first), shown under the "at" line
 * in call order. */
static void text_where_lib(const struct analysis *a, FILE *f, uint64_t cp, uint64_t nat, const char *indent,
			   const struct an_frame *lib, size_t nl)
{
	struct an_frame fr[MAX_FRAMES];
	size_t n = an_callpath_frames(a, cp, fr, MAX_FRAMES);
	for (size_t i = 0; i < n && i < 8; i++) {
		size_t fl;
		const char *file = an_display_path(a, fr[i].file, fr[i].file_len, &fl);
		fprintf(f, "%s%s %.*s:%" PRIu64 " in %.*s\n", indent, i ? "from" : "at  ", (int)fl, file, fr[i].line,
			(int)fr[i].function_len, fr[i].function);
		for (size_t k = nl; !i && k-- > 0;) {
			file = an_display_path(a, lib[k].file, lib[k].file_len, &fl);
			fprintf(f, "%svia  %.*s:%" PRIu64 " in %.*s\n", indent, (int)fl, file, lib[k].line,
				(int)lib[k].function_len, lib[k].function);
		}
	}
	if (n > 8)
		fprintf(f, "%s     ... %zu more frames\n", indent, n - 8);
	if (n)
		return;
	struct an_native_frame nf[MAX_FRAMES];
	size_t nn = an_native_frames(a, nat, nf, MAX_FRAMES);
	for (size_t i = 0; i < nn && i < 6; i++) {
		if (nf[i].module)
			fprintf(f, "%s%s %.*s+0x%" PRIx64 "\n", indent, i ? "from" : "at  ", (int)nf[i].module_len,
				nf[i].module, nf[i].offset);
		else
			fprintf(f, "%s%s 0x%" PRIx64 "\n", indent, i ? "from" : "at  ", nf[i].pc);
	}
	if (!nn)
		fprintf(f, "%sat   (no call path recorded)\n", indent);
}

/* Frames of a finding's recorded call path inside the library, below the
 * user frame it is placed at (leaf first); 0 when placed at its leaf. */
size_t library_frames(const struct analysis *a, const struct an_finding *x, struct an_frame *fr, size_t max)
{
	if (!x->leaf_callpath)
		return 0;
	size_t n = 0;
	for (uint64_t node = x->leaf_callpath; node && node != x->callpath && n < max;
	     node = an_callpath_parent(a, node))
		if (!an_callpath_frames(a, node, &fr[n++], 1))
			return 0;
	return n;
}


const char *edge_name(int edge)
{
	return edge == AN_EDGE_LEADING ? "before the first GPU work" : edge == AN_EDGE_TRAILING ? "after the last GPU work" : "";
}

/* The window's idle time by cause (all devices), with the call sites that
 * take most of each. */
/* Idle outside every step: the runner's between its marked iterations; with
 * detected steps, the script's code after the loop's body (evaluation). */
const char *between_label(const struct analysis *a)
{
	return a->steps.source == AN_STEPS_DETECTED ? "between steps (outside the loop)" : "between iterations (runner)";
}

/* How much of the idle is placed at a line, and why the rest is not. */
static void text_idle_placed(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	char t1[32], t2[32];
	uint64_t unplaced = ib->idle_ns > ib->placed_ns ? ib->idle_ns - ib->placed_ns : 0;
	fprintf(f, "      placed at lines %s (%.1f%%), not placed %s", fmt_ns(ib->placed_ns, t1, sizeof t1),
		pct(ib->placed_ns, ib->idle_ns), fmt_ns(unplaced, t2, sizeof t2));
	const struct {
		const char *why;
		uint64_t ns;
	} rest[] = {{"before the first GPU work", ib->leading_ns}, {"after the last GPU work", ib->trailing_ns},
		    {between_label(a), ib->harness_ns}, {"no host call recorded", ib->no_line_ns}};
	int shown = 0;
	for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
		if (rest[i].ns)
			fprintf(f, "%s%s %s", shown++ ? ", " : ": ", rest[i].why, fmt_ns(rest[i].ns, t1, sizeof t1));
	fputc('\n', f);
}

static void text_idle_breakdown(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	char t1[32], t2[32];
	if (!ib->idle_ns)
		return;
	fprintf(f, "idle by cause (%s):", fmt_ns(ib->idle_ns, t1, sizeof t1));
	for (int c = 1; c < AN_CAUSE_N; c++)
		if (ib->by_cause[c])
			fprintf(f, "  %s %.1f%%", an_cause_name(c), pct(ib->by_cause[c], ib->idle_ns));
	if (ib->harness_ns)
		fprintf(f, "  %s %.1f%%", between_label(a), pct(ib->harness_ns, ib->idle_ns));
	fputc('\n', f);
	if (ib->leading_ns || ib->trailing_ns)
		fprintf(f, "      of which before the first GPU work %s, after the last %s\n",
			fmt_ns(ib->leading_ns, t1, sizeof t1), fmt_ns(ib->trailing_ns, t2, sizeof t2));
	text_idle_placed(a, f);
	size_t shown = 0;
	for (size_t i = 0; i < a->idle_parts.n && shown < 5; i++) {
		const struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		if (p->total_ns * 100 < ib->idle_ns)
			break;
		char site[512];
		an_site_label(a, p->callpath, p->native, site, sizeof site);
		fprintf(f, "      %10s  %-12s %s%s%s%s%s\n", fmt_ns(p->total_ns, t1, sizeof t1), an_cause_name(p->cause),
			p->callpath || p->native ? site : "(no host activity recorded)", p->edge ? " (" : "",
			edge_name(p->edge), p->edge ? ")" : "", p->harness ? " [the runner's]" : "");
		shown++;
	}
}

/* Steps the window holds (its per-step figures), 0: none. */
static uint64_t window_steps(const struct analysis *a)
{
	return a->markers_used ? a->iterations : 0;
}

/* A finding's time at stake, per step and as a share of the steps' time
 * (of the window without steps). */
static void text_stake(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32], t3[32];
	uint64_t win = a->total.window_ns, steps = window_steps(a);
	if (!win)
		return;
	if (steps)
		fprintf(f, "      at stake: %s per step (%.1f%% of the step time)",
			fmt_ns(x->stake_ns / steps, t1, sizeof t1), pct(x->stake_ns, win));
	else
		fprintf(f, "      at stake: %s (%.1f%% of the window)", fmt_ns(x->stake_ns, t1, sizeof t1),
			pct(x->stake_ns, win));
	if (an_kind_of(x->kind)->stake_adds_idle && x->idle_ns)
		fprintf(f, ": %s waiting, then %s of GPU idle until the host's next work", fmt_ns(x->total_ns, t2, sizeof t2),
			fmt_ns(x->idle_ns, t3, sizeof t3));
	fputc('\n', f);
}

static void text_finding(const struct analysis *a, FILE *f, size_t idx, const struct an_finding *x)
{
	const struct an_kind *k = an_kind_of(x->kind);
	fprintf(f, "%2zu. %s", idx, k->name);
	if (k->named_with_cause)
		fprintf(f, " (%s)", an_cause_name(x->cause));
	if (k->text_head)
		k->text_head(a, f, x);
	text_stake(a, f, x);
	struct an_frame lib[MAX_FRAMES];
	size_t nl = library_frames(a, x, lib, MAX_FRAMES);
	text_where_lib(a, f, x->callpath, x->native, "      ", lib, nl);
	if (k->text_tail)
		k->text_tail(a, f, x);
	fprintf(f, "      -> %s\n", an_suggestion(a, x));
}

/* ------------------------------------------------------------ host time, grouped
 * Span statistics are per whole call path; a reader wants them per function
 * (inclusive time: where does the step's time go) and per source line (self
 * time), with rows that only differ deeper in the path merged. */
/* Orders by bytes, not by string id: two ids may carry the same name. */
static int bytes_cmp(const char *x, size_t xl, const char *y, size_t yl)
{
	int c = memcmp(x ? x : "", y ? y : "", xl < yl ? xl : yl);
	return c ? c : (xl > yl) - (xl < yl);
}

static int row_key_cmp(const struct host_row *x, const struct host_row *y, int by_line)
{
	int c = bytes_cmp(x->fr.file, x->fr.file_len, y->fr.file, y->fr.file_len);
	if (!c)
		c = bytes_cmp(x->fr.function, x->fr.function_len, y->fr.function, y->fr.function_len);
	if (!c && by_line && x->fr.line != y->fr.line)
		c = x->fr.line < y->fr.line ? -1 : 1;
	return c;
}
static int cmp_row_fn(const void *a, const void *b) { return row_key_cmp(a, b, 0); }
static int cmp_row_line(const void *a, const void *b) { return row_key_cmp(a, b, 1); }
static int cmp_row_total(const void *a, const void *b)
{
	const struct host_row *x = a, *y = b;
	return x->total_ns != y->total_ns ? (x->total_ns < y->total_ns ? 1 : -1) : (x->self_ns < y->self_ns) - (x->self_ns > y->self_ns);
}
static int cmp_row_self(const void *a, const void *b)
{
	const struct host_row *x = a, *y = b;
	return x->self_ns != y->self_ns ? (x->self_ns < y->self_ns ? 1 : -1) : (x->total_ns < y->total_ns) - (x->total_ns > y->total_ns);
}

/* A call of function `fr` (by file and name), made from call path `caller`. */
static uint64_t call_key(const struct an_frame *fr, uint64_t caller)
{
	return an_hash_combine(an_frame_function_hash(fr), caller);
}

/* The calls that left a span: keys of call_key. */
static void recorded_calls(const struct analysis *a, struct u64map *out)
{
	for (size_t i = 0; i < a->spans.n; i++) {
		uint64_t cp = VEC_AT(&a->spans, struct an_span_stat, i)->callpath;
		struct an_frame fr;
		if (an_callpath_frames(a, cp, &fr, 1) == 1 &&
		    u64map_put(out, call_key(&fr, an_callpath_parent(a, cp)), 1))
			break;   /* out of memory: fewer calls count as nested */
	}
}

/* Rows grouped by leaf function (by_line 0) or leaf line (1), biggest first
 * (inclusive time, or self time): over the host window when there is one
 * (rows with no call in it left out unless all), else the whole trace.
 * Returns the row count; *out is malloc'd (NULL when none or no memory). */
static size_t host_rows_all(const struct analysis *a, int by_line, struct host_row **out, int all)
{
	*out = NULL;
	if (!a->spans.n)
		return 0;
	struct host_row *rows = calloc(a->spans.n, sizeof *rows);
	if (!rows)
		return 0;
	struct u64map recorded = { 0 };
	recorded_calls(a, &recorded);
	size_t n = 0;
	for (size_t i = 0; i < a->spans.n; i++) {
		const struct an_span_stat *sp = VEC_AT(&a->spans, struct an_span_stat, i);
		struct an_frame fr[MAX_FRAMES];
		size_t nf = an_callpath_frames(a, sp->callpath, fr, MAX_FRAMES);
		if (!nf)
			continue;
		int win = a->host_win.on;
		if (win && !sp->win_count && !all)
			continue;
		struct host_row *r = &rows[n++];
		r->fr = fr[0];
		r->count = win ? sp->win_count : sp->count;
		r->total_ns = win ? sp->win_total_ns : sp->total_ns;
		r->self_ns = win ? sp->win_self_ns : sp->self_ns;
		r->trace_count = sp->count;
		r->trace_total_ns = sp->total_ns;
		r->trace_self_ns = sp->self_ns;
		r->import = sp->import;
		r->paths = 1;
		r->callpath = sp->callpath;
		/* A call inside another call of the same function is already in
		 * the outer call's inclusive time, when that call was recorded: an
		 * import running when the span hook went in (site's .pth files),
		 * or a thread's loop still running at exit, left no span. */
		uint64_t up = an_callpath_parent(a, sp->callpath);
		for (size_t j = 1; j < nf && !r->recursive; j++) {
			up = an_callpath_parent(a, up);   /* the path that called fr[j] */
			if (an_frame_same_function(&fr[j], &fr[0]) && u64map_get(&recorded, call_key(&fr[0], up)))
				r->recursive = 1;
		}
	}
	u64map_free(&recorded);
	qsort(rows, n, sizeof *rows, by_line ? cmp_row_line : cmp_row_fn);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		struct host_row *r = &rows[i];
		uint64_t incl = r->recursive ? 0 : r->total_ns, trace_incl = r->recursive ? 0 : r->trace_total_ns;
		if (m && !row_key_cmp(&rows[m - 1], r, by_line)) {
			struct host_row *g = &rows[m - 1];
			g->count += r->count;
			g->total_ns += incl;
			g->self_ns += r->self_ns;
			g->trace_count += r->trace_count;
			g->trace_total_ns += trace_incl;
			g->trace_self_ns += r->trace_self_ns;
			g->import |= r->import;
			g->paths++;
			g->outer += !r->recursive;
			continue;
		}
		rows[m] = *r;
		rows[m].total_ns = incl;
		rows[m].trace_total_ns = trace_incl;
		rows[m].outer = !r->recursive;
		rows[m].recursive = 0;
		m++;
	}
	qsort(rows, m, sizeof *rows, by_line ? cmp_row_self : cmp_row_total);
	*out = rows;
	return m;
}

size_t host_rows(const struct analysis *a, int by_line, struct host_row **out)
{
	return host_rows_all(a, by_line, out, 0);
}

/* The trace outside the host window: its time before and after it, and
 * the imports' time outside it (importlib's calls, nested ones once). */
int host_outside(const struct analysis *a, struct host_outside *o)
{
	memset(o, 0, sizeof *o);
	if (!a->host_win.on)
		return 0;
	o->before_ns = a->host_win.begin > a->first_ts ? a->host_win.begin - a->first_ts : 0;
	o->after_ns = a->last_ts > a->host_win.end ? a->last_ts - a->host_win.end : 0;
	struct host_row *rows;
	size_t n = host_rows_all(a, 0, &rows, 1);
	for (size_t i = 0; i < n; i++)
		if (rows[i].import && rows[i].trace_total_ns > rows[i].total_ns)
			o->imports_ns += rows[i].trace_total_ns - rows[i].total_ns;
	free(rows);
	return 1;
}

/* ", imports 3.296 s" (nothing without imports outside the window) */
void host_imports(const struct host_outside *o, char *buf, size_t len)
{
	char t[32];
	if (o->imports_ns)
		snprintf(buf, len, ", imports %s", fmt_ns(o->imports_ns, t, sizeof t));
	else
		buf[0] = 0;
}

/* "the 14 steps after warm-up, 334.777 ms" */
void host_win_label(const struct analysis *a, char *buf, size_t len)
{
	char t[32];
	uint64_t steady = a->steps.count > a->steps.warmup ? a->steps.count - a->steps.warmup : a->iterations;
	snprintf(buf, len, "the %" PRIu64 " step%s after warm-up, %s", steady, steady == 1 ? "" : "s",
		 fmt_ns(a->host_win.end - a->host_win.begin, t, sizeof t));
}

/* Rows shown in the host tables: at least 12, more with a larger --top. */
size_t host_rows_shown(const struct analysis *a, size_t n)
{
	size_t lim = a->opts.top > 12 ? a->opts.top : 12;
	return n < lim ? n : lim;
}

/* Inclusive time of a row; "nested" when only calls made inside another
 * call of the same function were recorded (the outer one is not a span). */
const char *row_incl(const struct host_row *r, char *buf, size_t len)
{
	return r->outer ? fmt_ns(r->total_ns, buf, len) : "nested";
}

static void text_host_time(const struct analysis *a, FILE *f)
{
	char t1[32], t2[48], t3[32], lab[96];
	struct host_row *rows;
	struct host_outside out;
	if (host_outside(a, &out)) {
		host_win_label(a, lab, sizeof lab);
		host_imports(&out, t2, sizeof t2);
		fprintf(f, "\nhost time over the analysis window (%s); outside it, not in the tables below: %s before it "
			   "(start-up%s, set-up, warm-up) and %s after it\n",
			lab, fmt_ns(out.before_ns, t1, sizeof t1), t2, fmt_ns(out.after_ns, t3, sizeof t3));
	}
	size_t n = host_rows(a, 0, &rows);
	if (n) {
		fprintf(f, "\ntop Python functions by inclusive time (spans: calls longer than the tracer's threshold):\n");
		fprintf(f, "  %10s  %10s  %7s  %s\n", "inclusive", "self", "calls", "function");
		for (size_t i = 0; i < host_rows_shown(a, n); i++) {
			const struct host_row *r = &rows[i];
			size_t fl;
			const char *file = an_display_path(a, r->fr.file, r->fr.file_len, &fl);
			fprintf(f, "  %10s  %10s  %6" PRIu64 "x  %.*s  (%.*s)\n", row_incl(r, t1, sizeof t1),
				fmt_ns(r->self_ns, t2, sizeof t2), r->count, (int)r->fr.function_len, r->fr.function,
				(int)fl, file);
		}
	}
	free(rows);
	n = host_rows(a, 1, &rows);
	/* The program's own functions apart when torch's or the standard
	 * library's lead the table: where the user's code spends its time. */
	size_t own = 0;
	for (size_t i = 0; i < n; i++)
		own += !an_frame_is_library(a, &rows[i].fr);
	for (int mine = 0; mine <= (own && n && an_frame_is_library(a, &rows[0].fr)); mine++) {
		if (!n)
			break;
		fprintf(f, mine ? "\nthe program's own functions by self time (its files: not torch's, not the standard "
				  "library's):\n"
				: "\ntop Python functions by self time (line: where the function is defined):\n");
		fprintf(f, "  %10s  %10s  %7s  %s\n", "self", "inclusive", "calls", "function");
		size_t lim = host_rows_shown(a, mine ? own : n);
		for (size_t i = 0, shown = 0; i < n && shown < lim; i++) {
			const struct host_row *r = &rows[i];
			if (mine && an_frame_is_library(a, &r->fr))
				continue;
			shown++;
			size_t fl;
			const char *file = an_display_path(a, r->fr.file, r->fr.file_len, &fl);
			fprintf(f, "  %10s  %10s  %6" PRIu64 "x  %.*s:%" PRIu64 " %.*s", fmt_ns(r->self_ns, t1, sizeof t1),
				row_incl(r, t2, sizeof t2), r->count, (int)fl, file, r->fr.line,
				(int)r->fr.function_len, r->fr.function);
			struct an_frame fr[2];
			if (r->paths > 1) {
				fprintf(f, "  (%zu call paths)", r->paths);
			} else if (an_callpath_frames(a, r->callpath, fr, 2) == 2) {
				size_t cl;
				const char *cf = an_display_path(a, fr[1].file, fr[1].file_len, &cl);
				fprintf(f, "  (from %.*s:%" PRIu64 " %.*s)", (int)cl, cf, fr[1].line, (int)fr[1].function_len,
					fr[1].function);
			}
			fputc('\n', f);
		}
	}
	free(rows);
}

/* Streams grouped by device, each group in the streams' own order: a
 * device's listing walks its group, not every stream (a damaged trace can
 * name thousands of devices and streams). */
struct stream_ref {
	uint64_t device;
	size_t ix;
};

static int cmp_stream_ref(const void *x, const void *y)
{
	const struct stream_ref *a = x, *b = y;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->ix < b->ix ? -1 : a->ix > b->ix;
}

/* NULL when there are none or out of memory: the callers then scan them all. */
static struct stream_ref *streams_by_device(const struct analysis *a)
{
	struct stream_ref *refs = a->streams.n ? malloc(a->streams.n * sizeof *refs) : NULL;
	if (!refs)
		return NULL;
	for (size_t i = 0; i < a->streams.n; i++)
		refs[i] = (struct stream_ref){VEC_AT(&a->streams, struct an_stream, i)->device, i};
	qsort(refs, a->streams.n, sizeof *refs, cmp_stream_ref);
	return refs;
}

/* [*lo, *hi): where device dev's streams are in refs (every stream without refs). */
static void device_streams(const struct analysis *a, const struct stream_ref *refs, uint64_t dev, size_t *lo,
			   size_t *hi)
{
	*lo = 0;
	*hi = a->streams.n;
	if (!refs)
		return;
	size_t l = 0, h = a->streams.n;
	while (l < h) {
		size_t mid = l + (h - l) / 2;
		if (refs[mid].device < dev)
			l = mid + 1;
		else
			h = mid;
	}
	*lo = l;
	while (l < a->streams.n && refs[l].device == dev)
		l++;
	*hi = l;
}

static const struct an_stream *stream_at(const struct analysis *a, const struct stream_ref *refs, size_t k)
{
	return VEC_AT(&a->streams, struct an_stream, refs ? refs[k].ix : k);
}

/* One stream of a device, its busy and data-movement time; n: streams of
 * the device written before it. */
typedef void stream_writer(FILE *f, const struct an_stream *s, uint64_t busy, uint64_t dm, const struct an_breakdown *b,
			   size_t n);

/* Device d's streams in their order, each through `write`. */
static void device_streams_write(const struct analysis *a, FILE *f, const struct an_device *d,
				 const struct an_breakdown *b, const struct stream_ref *refs, stream_writer *write)
{
	size_t lo, hi, n = 0;
	device_streams(a, refs, d->id, &lo, &hi);
	for (size_t j = lo; j < hi; j++) {
		const struct an_stream *s = stream_at(a, refs, j);
		if (s->device != d->id)
			continue;
		uint64_t busy, dm;
		an_stream_breakdown(a, s, &busy, &dm);
		write(f, s, busy, dm, b, n++);
	}
}
/* What each source of LOST records means, for a reader who has not read the trace format. */
static const char *lost_source_meaning(unsigned source)
{
	switch (source) {
	case TBP_LOST_BUFFER_FULL: return "a thread's buffer was full";
	case TBP_LOST_CUPTI: return "CUPTI had no buffer";
	case TBP_LOST_WRITE_ERROR: return "the trace file could not be written";
	case TBP_LOST_SIGNAL: return "the process died of a signal before they were written";
	default: return "unknown source";
	}
}

/* " (cupti 1200: CUPTI had no buffer; buffer_full 34: ...)", biggest first; "" when nothing was lost
 * or only the END record counted it (no source known). */
static void lost_by_source_text(const struct analysis *a, char *out, size_t size)
{
	out[0] = 0;
	if (!a->lost)
		return;
	unsigned order[8], n = 0;
	for (unsigned s = 0; s < 8; s++)
		if (a->lost_by_source[s])
			order[n++] = s;
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && a->lost_by_source[order[j]] > a->lost_by_source[order[j - 1]]; j--) {
			unsigned t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	size_t at = 0;
	for (unsigned i = 0; i < n && at < size; i++) {
		unsigned s = order[i];
		int w = snprintf(out + at, size - at, "%s%s %" PRIu64 ": %s", i ? "; " : " (",
				 s ? tr_lost_source_name(s) : "other", a->lost_by_source[s], lost_source_meaning(s));
		if (w < 0)
			break;
		at += (size_t)w;
	}
	if (at < size)
		snprintf(out + at, size - at, ")");
}


/* GPU work records (kernels, copies, memsets) and those joined to the call that made them. */
static uint64_t gpu_work_records(const struct analysis *a)
{
	return a->n_gpu_kernel + a->n_gpu_memcpy + a->n_gpu_memset;
}

static double joined_pct(const struct analysis *a)
{
	uint64_t n = gpu_work_records(a);
	return n ? 100.0 * (double)(n - a->unmatched_gpu) / (double)n : 100.0;
}

/* Why GPU records were not joined, as libtbprof said at exit (its CUPTI_JOIN notice). */
static const char *join_note(const struct analysis *a, size_t *len)
{
	const char *s = a->join_notice ? an_string(a, a->join_notice, len) : NULL;
	static const char prefix[] = "CUPTI join: ";
	if (s && *len >= sizeof prefix - 1 && !memcmp(s, prefix, sizeof prefix - 1)) {
		s += sizeof prefix - 1;
		*len -= sizeof prefix - 1;
	}
	return s;
}

/* The header's join line, and below 99 % the warning: those GPU records have no Python line. */
static void text_join(const struct analysis *a, FILE *f)
{
	uint64_t n = gpu_work_records(a);
	if (!n)
		return;
	fprintf(f, "joined: %.1f%% of GPU records (%" PRIu64 " of %" PRIu64 " kernels, copies and memsets) to the call "
		   "that made them\n", joined_pct(a), n - a->unmatched_gpu, n);
	if (joined_pct(a) >= 99.0)
		return;
	size_t len = 0;
	const char *why = join_note(a, &len);
	fprintf(f, "warning: %" PRIu64 " kernel%s", a->unmatched_kernels, a->unmatched_kernels == 1 ? "" : "s");
	if (a->unmatched_gpu > a->unmatched_kernels)
		fprintf(f, " and %" PRIu64 " copies/memsets", a->unmatched_gpu - a->unmatched_kernels);
	fprintf(f, " have no Python line (joined to no call)");
	if (why)
		fprintf(f, "; libtbprof: %.*s\n", (int)len, why);
	else
		fprintf(f, "; the trace does not say why (no join notice: a trace from before libtbprof reported its joins, "
			   "a HIP trace, or a process that did not exit cleanly)\n");
}

/* The report's title, its window and the steps found in it. */
static void text_header(const struct analysis *a, FILE *f)
{
	char t1[32], t2[32];
	fprintf(f, "tbanalyze report: %s\n", a->path);
	uint64_t win = a->total.window_ns;
	if (a->markers_used && a->steps.source == AN_STEPS_DETECTED && a->steps.warmup > 1)
		fprintf(f, "window: %s, %" PRIu64 " step%s after the first %" PRIu64 " (warm-up: work of the loop "
			   "first called in step %" PRIu64 "), detected (no marks in the trace)\n",
			fmt_ns(win, t1, sizeof t1), a->iterations, a->iterations == 1 ? "" : "s", a->steps.warmup,
			a->steps.warmup);
	else if (a->markers_used && a->steps.source == AN_STEPS_DETECTED)
		fprintf(f, "window: %s, %" PRIu64 " step%s after the first (warm-up), detected (no marks in the trace)\n",
			fmt_ns(win, t1, sizeof t1), a->iterations, a->iterations == 1 ? "" : "s");
	else if (a->markers_used)
		fprintf(f, "window: %s, %" PRIu64 " marked iteration%s%s\n", fmt_ns(win, t1, sizeof t1), a->iterations,
			a->iterations == 1 ? "" : "s", a->warmup_seen ? " after warm-up" : "");
	else
		fprintf(f, "window: %s, first to last event\n", fmt_ns(win, t1, sizeof t1));
	if (a->steps.source) {
		fprintf(f, "steps: %" PRIu64 " (%s", a->steps.count, an_steps_source_name(a->steps.source));
		if (a->steps.loop) {
			char site[512];
			an_site_label(a, a->steps.loop, 0, site, sizeof site);
			fprintf(f, ": the loop whose steps start at %s", site);
		}
		if (a->steps.unit) {
			static const char *const what[] = {"", "one optimizer step()", "one backward()", "one forward of the model",
							   "one CUDA graph replay"};
			char site[512];
			an_site_label(a, a->steps.unit, 0, site, sizeof site);
			fprintf(f, ", each holding %s at %s", what[a->steps.unit_kind <= AN_UNIT_GRAPH ? a->steps.unit_kind : 0], site);
		}
		fprintf(f, "), %" PRIu64 " warm-up set apart, median %s per step\n", a->steps.warmup,
			fmt_ns(a->steps.median_ns, t2, sizeof t2));
	} else if (a->steps.none) {
		fprintf(f, "steps: no steps detected (%s): the whole trace is analysed\n", a->steps.none);
	}
}

static void text_stream(FILE *f, const struct an_stream *s, uint64_t busy, uint64_t dm, const struct an_breakdown *b,
			size_t n)
{
	char t1[32], t2[32];
	(void)n;
	fprintf(f, "      stream %" PRIu64 ": busy %.1f%% (%s), data movement %s, %" PRIu64 " kernels, %" PRIu64
		   " copies, %" PRIu64 " memsets\n",
		s->stream, pct(busy, b->window_ns), fmt_ns(busy, t1, sizeof t1), fmt_ns(dm, t2, sizeof t2), s->kernels,
		s->copies, s->sets);
}

/* One device's breakdown and its streams'. */
static void text_device(const struct analysis *a, FILE *f, const struct an_device *d, const struct stream_ref *refs)
{
	char t1[32], t2[32], t3[32], t4[32];
	struct an_breakdown b;
	an_device_breakdown(a, d, &b);
	size_t nl;
	const char *name = an_string(a, d->name, &nl);
	fprintf(f, "GPU %" PRIu64 "%s%.*s%s: active %.1f%% (%s)  data movement %.1f%% (%s)  idle %.1f%% (%s)\n", d->id,
		name ? " (" : "", name ? (int)nl : 0, name ? name : "", name ? ")" : "", pct(b.active_ns, b.window_ns),
		fmt_ns(b.active_ns, t1, sizeof t1), pct(b.dm_ns, b.window_ns), fmt_ns(b.dm_ns, t2, sizeof t2),
		pct(b.idle_ns, b.window_ns), fmt_ns(b.idle_ns, t3, sizeof t3));
	if (b.dm_ns)
		fprintf(f, "      copies: H2D %s  D2H %s  D2D %s  peer %s\n", fmt_ns(b.ck_ns[TBP_COPY_H2D], t1, sizeof t1),
			fmt_ns(b.ck_ns[TBP_COPY_D2H], t2, sizeof t2), fmt_ns(b.ck_ns[TBP_COPY_D2D], t3, sizeof t3),
			fmt_ns(b.ck_ns[TBP_COPY_PEER], t4, sizeof t4));
	device_streams_write(a, f, d, &b, refs, text_stream);
}

/* The GPU's time: each active device's breakdown and the idle by cause,
 * or why there is none. */
static void text_gpu(const struct analysis *a, FILE *f)
{
	if (!an_has_gpu(a)) {
		if (a->n_launch + a->n_memcpy + a->n_memset)
			fprintf(f, "%s: GPU time cannot be measured; findings below come from host-side API times\n",
				no_gpu_timeline_why(a));
		else
			fprintf(f, "no GPU activity recorded (a CPU run): host time by Python function follows\n");
		return;
	}
	struct stream_ref *refs = streams_by_device(a);
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (d->kernels || d->copies || d->sets)
			text_device(a, f, d, refs);
	}
	free(refs);
	text_idle_breakdown(a, f);
}

static void text_counts(const struct analysis *a, FILE *f)
{
	fprintf(f, "counts: %" PRIu64 " kernels, %" PRIu64 " memcpy, %" PRIu64 " memset, %" PRIu64 " malloc, %" PRIu64
		   " free, %" PRIu64 " sync",
		a->n_launch - a->n_graph_launch, a->n_memcpy, a->n_memset, a->n_malloc, a->n_free, a->n_sync);
	if (a->n_graph_launch)
		fprintf(f, ", %" PRIu64 " CUDA graph launch%s", a->n_graph_launch, a->n_graph_launch == 1 ? "" : "es");
	if (a->n_graph_launch && a->iterations)
		fprintf(f, " (%" PRIu64 " of %" PRIu64 " steps replay one)", a->graph_launch_iters, a->iterations);
	if (a->n_errors)
		fprintf(f, ", %" PRIu64 " failed API call%s (not counted as kernels)", a->n_errors,
			a->n_errors == 1 ? "" : "s");
	fputc('\n', f);
}

/* The first --top findings of v, numbered. */
static void text_finding_list(const struct analysis *a, FILE *f, const struct vec *v)
{
	size_t shown = v->n < a->opts.top ? v->n : a->opts.top;
	for (size_t i = 0; i < shown; i++)
		text_finding(a, f, i + 1, VEC_AT(v, struct an_finding, i));
	if (shown < v->n)
		fprintf(f, "    ... %zu more (--top N, or --json for all)\n", v->n - shown);
}

/* The findings: the model's at the runner's shared step, the others, and
 * the runner's own cost. */
static void text_findings(const struct analysis *a, FILE *f)
{
	char t1[32];
	if (a->model_step.n) {
		fprintf(f, "\nthe model's work at the runner's shared training step (runner/model.py: the step of "
			   "models without their own train()), biggest first:\n");
		text_finding_list(a, f, &a->model_step);
	}
	if (a->findings.n) {
		fprintf(f, "\nfindings, biggest first:\n");
		text_finding_list(a, f, &a->findings);
	} else {
		fprintf(f, a->model_step.n ? "\nno other findings\n" : "\nno findings\n");
	}
	if (a->harness.n) {
		char site[512];
		fprintf(f, "\nthe runner's own cost (harness, not the model's):\n");
		for (size_t i = 0; i < a->harness.n; i++) {
			const struct an_finding *x = VEC_AT(&a->harness, struct an_finding, i);
			an_site_label(a, x->callpath, x->native, site, sizeof site);
			const struct an_kind *k = an_kind_of(x->kind);
			fprintf(f, "  %s%s%s: %" PRIu64 "x, %s at %s\n", k->name, k->named_with_cause ? " " : "",
				k->named_with_cause ? an_cause_name(x->cause) : "", x->count, fmt_ns(x->total_ns, t1, sizeof t1),
				site);
		}
	}
}

static void text_kernels(const struct analysis *a, FILE *f)
{
	char t1[32];
	if (!a->kernels.n)
		return;
	fprintf(f, "\ntop kernels:\n");
	for (size_t i = 0; i < a->kernels.n && i < 10; i++) {
		const struct an_kernel_stat *k = VEC_AT(&a->kernels, struct an_kernel_stat, i);
		size_t nl;
		const char *name = an_string(a, k->name, &nl);
		fprintf(f, "  %10s  %7" PRIu64 "x  %.*s\n", fmt_ns(k->total_ns, t1, sizeof t1), k->count,
			name ? (int)(nl > 100 ? 100 : nl) : 9, name ? name : "(unnamed)");
	}
}

static void text_memory(const struct analysis *a, FILE *f)
{
	char t1[32], b1[32];
	int any_mem = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (!d->allocs)
			continue;
		if (!any_mem++)
			fprintf(f, "\nmemory:\n");
		fprintf(f, "  device %" PRIu64 ": peak %s, %" PRIu64 " allocations (%s), %" PRIu64 " frees\n", d->id,
			fmt_bytes(d->mem_peak, b1, sizeof b1), d->allocs, fmt_bytes(d->alloc_bytes, t1, sizeof t1), d->frees);
	}
	if (a->mem_leak_count)
		fprintf(f, "  not freed at the end of the trace: %" PRIu64 " blocks, %s\n", a->mem_leak_count,
			fmt_bytes(a->mem_leak_bytes, b1, sizeof b1));
}

/* The trace's own state: events, what was lost and why, a cut or unclean end. */
static void text_trace_state(const struct analysis *a, FILE *f)
{
	char by_source[400];
	lost_by_source_text(a, by_source, sizeof by_source);
	fprintf(f, "\ntrace: %" PRIu64 " events, %" PRIu64 " lost%s%s%s\n", a->events, a->lost ? a->lost : a->end_lost,
		by_source, a->truncated ? ", TRUNCATED (report covers the complete part)" : "",
		!a->truncated && !a->has_end ? ", no end record (process did not shut down cleanly)" : "");
	if (a->reorder_forced || a->late_records)
		fprintf(f, "note: %" PRIu64 " records arrived out of time order beyond the reorder window\n",
			a->late_records);
}

void an_report_text(const struct analysis *a, FILE *f)
{
	text_header(a, f);
	text_join(a, f);
	text_gpu(a, f);
	text_counts(a, f);
	text_findings(a, f);
	text_kernels(a, f);
	if (a->spans.n && (!an_has_gpu(a) || a->opts.top > 20))
		text_host_time(a, f);
	an_ranges_text(a, f);
	text_memory(a, f);
	text_trace_state(a, f);
}

/* ------------------------------------------------------------ JSON */
/* [{"file":...,"line":...,"function":...}, ...] */
static void json_frames(FILE *f, const struct an_frame *fr, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"file\":", i ? "," : "");
		json_str(f, fr[i].file, fr[i].file_len);
		fprintf(f, ",\"line\":%" PRIu64 ",\"function\":", fr[i].line);
		json_str(f, fr[i].function, fr[i].function_len);
		fputc('}', f);
	}
	fputc(']', f);
}

void json_where(const struct analysis *a, FILE *f, uint64_t cp, uint64_t nat)
{
	struct an_frame fr[MAX_FRAMES];
	size_t n = an_callpath_frames(a, cp, fr, MAX_FRAMES);
	fprintf(f, "{\"python\":");
	json_frames(f, fr, n);
	fprintf(f, ",\"native\":[");
	struct an_native_frame nf[MAX_FRAMES];
	size_t nn = an_native_frames(a, nat, nf, MAX_FRAMES);
	for (size_t i = 0; i < nn; i++) {
		fprintf(f, "%s{\"pc\":\"0x%" PRIx64 "\"", i ? "," : "", nf[i].pc);
		if (nf[i].module) {
			fprintf(f, ",\"module\":");
			json_str(f, nf[i].module, nf[i].module_len);
			fprintf(f, ",\"offset\":\"0x%" PRIx64 "\"", nf[i].offset);
		}
		fputc('}', f);
	}
	fprintf(f, "]}");
}

static void json_idle_breakdown(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	fprintf(f, ",\n\"idle_breakdown\":{\"idle_ns\":%" PRIu64, ib->idle_ns);
	for (int c = 1; c < AN_CAUSE_N; c++)
		fprintf(f, ",\"%s_ns\":%" PRIu64, an_cause_name(c), ib->by_cause[c]);
	fprintf(f, ",\"placed_ns\":%" PRIu64 ",\"unplaced_ns\":%" PRIu64 ",\"no_line_ns\":%" PRIu64, ib->placed_ns,
		ib->idle_ns > ib->placed_ns ? ib->idle_ns - ib->placed_ns : 0, ib->no_line_ns);
	fprintf(f, ",\"harness_ns\":%" PRIu64 ",\"short_gaps_ns\":%" PRIu64 ",\"leading_edge_ns\":%" PRIu64
		   ",\"trailing_edge_ns\":%" PRIu64 ",\"hta\":{\"host_wait_ns\":%" PRIu64 ",\"queued_ns\":%" PRIu64 "}"
		   ",\"sites\":[",
		ib->harness_ns, ib->short_ns, ib->leading_ns, ib->trailing_ns, ib->hta_host_wait_ns, ib->hta_queued_ns);
	for (size_t i = 0; i < a->idle_parts.n && i < 50; i++) {
		const struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		fprintf(f, "%s\n {\"cause\":\"%s\",\"edge\":%s,\"total_ns\":%" PRIu64 ",\"pieces\":%" PRIu64
			   ",\"device\":%" PRIu64 ",\"harness\":%s,\"where\":",
			i ? "," : "", an_cause_name(p->cause),
			p->edge == AN_EDGE_LEADING ? "\"leading\"" : p->edge == AN_EDGE_TRAILING ? "\"trailing\"" : "null",
			p->total_ns, p->count, p->device, p->harness ? "true" : "false");
		json_where(a, f, p->callpath, p->native);
		fputc('}', f);
	}
	fprintf(f, "]}");
}

static void json_finding(const struct analysis *a, FILE *f, const struct an_finding *x, int first)
{
	const struct an_kind *k = an_kind_of(x->kind);
	fprintf(f, "%s\n {\"kind\":\"%s\",", first ? "" : ",", k->name);
	if (k->named_with_cause)
		fprintf(f, "\"cause\":\"%s\",", an_cause_name(x->cause));
	fprintf(f, "\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"device\":%" PRIu64,
		x->count, x->total_ns, x->max_ns, x->device);
	uint64_t steps = window_steps(a);
	fprintf(f, ",\"stake_ns\":%" PRIu64, x->stake_ns);
	if (steps)
		fprintf(f, ",\"stake_per_step_ns\":%" PRIu64, x->stake_ns / steps);
	else
		fprintf(f, ",\"stake_per_step_ns\":null");
	fprintf(f, ",\"stake_share\":%.4f", a->total.window_ns ? (double)x->stake_ns / (double)a->total.window_ns : 0.0);
	if (k->stake_adds_idle)
		fprintf(f, ",\"idle_after_ns\":%" PRIu64, x->idle_ns);
	if (k->json_fields)
		k->json_fields(a, f, x);
	fprintf(f, ",\"where\":");
	json_where(a, f, x->callpath, x->native);
	struct an_frame fr[MAX_FRAMES];
	size_t nl = library_frames(a, x, fr, MAX_FRAMES);
	fprintf(f, ",\"library\":");
	json_frames(f, fr, nl);
	if (k->json_tail)
		k->json_tail(a, f, x);
	fprintf(f, ",\"suggestion\":");
	const char *sug = an_suggestion(a, x);
	json_str(f, sug, strlen(sug));
	fputc('}', f);
}

static void json_trace(const struct analysis *a, FILE *f)
{
	int gpu = an_has_gpu(a);
	fprintf(f, ",\n\"trace\":{\"events\":%" PRIu64 ",\"records\":%" PRIu64 ",\"lost_events\":%" PRIu64
		   ",\"truncated\":%s,\"clean_end\":%s,\"gpu_timeline\":%s,\"api_only\":%s,\"out_of_order\":%" PRIu64
		   ",\"window_remeasured\":%s,\"lost_by_source\":{",
		a->events, a->records, a->lost ? a->lost : a->end_lost, a->truncated ? "true" : "false",
		a->has_end ? "true" : "false", gpu ? "true" : "false",
		!gpu && (a->n_launch + a->n_memcpy + a->n_memset) ? "true" : "false", a->late_records,
		a->window_second_pass ? "true" : "false");
	for (unsigned s = 0, n = 0; s < 8; s++)
		if (a->lost_by_source[s])
			fprintf(f, "%s\"%s\":%" PRIu64, n++ ? "," : "", s ? tr_lost_source_name(s) : "other",
				a->lost_by_source[s]);
	fprintf(f, "},\"gpu_records\":%" PRIu64 ",\"gpu_records_joined\":%" PRIu64 ",\"joined_pct\":",
		gpu_work_records(a), gpu_work_records(a) - a->unmatched_gpu);
	if (gpu_work_records(a))
		fprintf(f, "%.2f", joined_pct(a));
	else
		fputs("null", f);
	size_t note_len = 0;
	const char *note = join_note(a, &note_len);
	fprintf(f, ",\"join_note\":");
	if (note)
		json_str(f, note, note_len);
	else
		fputs("null", f);
	fprintf(f, "}");
}

/* A call site, or null. */
static void json_where_or_null(const struct analysis *a, FILE *f, uint64_t cp)
{
	if (cp)
		json_where(a, f, cp, 0);
	else
		fputs("null", f);
}

static void json_window_steps(const struct analysis *a, FILE *f)
{
	fprintf(f, ",\n\"window\":{\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"source\":\"%s\",\"iterations\":%" PRIu64
		   ",\"warmup_excluded\":%s}",
		a->markers_used ? a->win_begin : a->first_ts, a->markers_used ? a->win_end : a->last_ts,
		!a->markers_used ? "events" : a->steps.source == AN_STEPS_DETECTED ? "detected_steps" : "markers",
		a->iterations, a->markers_used && a->warmup_seen ? "true" : "false");
	if (a->steps.source) {
		fprintf(f, ",\n\"steps\":{\"count\":%" PRIu64 ",\"source\":\"%s\",\"warmup\":%" PRIu64
			   ",\"median_ns\":%" PRIu64 ",\"loop\":",
			a->steps.count, an_steps_source_name(a->steps.source), a->steps.warmup, a->steps.median_ns);
		json_where_or_null(a, f, a->steps.loop);
		fprintf(f, ",\"unit_kind\":\"%s\",\"unit\":", an_step_unit_name(a->steps.unit_kind));
		json_where_or_null(a, f, a->steps.unit);
		fputc('}', f);
	} else {
		fprintf(f, ",\n\"steps\":null");
	}
	if (a->steps.none) {
		fputs(",\n\"steps_none\":", f);
		json_str(f, a->steps.none, strlen(a->steps.none));
	}
}

/* The window's time over all active devices (null figures for an
 * API-only trace: GPU time not measured). */
static void json_breakdown(const struct analysis *a, FILE *f)
{
	int gpu = an_has_gpu(a);
	unsigned ndev = active_devices(a);
	uint64_t cap = a->total.window_ns * (ndev ? ndev : 1);
	if (gpu || !(a->n_launch + a->n_memcpy + a->n_memset)) {
		uint64_t idle = gpu ? a->total.idle_ns : a->total.window_ns;
		fprintf(f, ",\n\"breakdown\":{\"window_ns\":%" PRIu64 ",\"devices\":%u,\"gpu_busy_ns\":%" PRIu64
			   ",\"gpu_active_ns\":%" PRIu64 ",\"data_movement_ns\":%" PRIu64 ",\"gpu_idle_ns\":%" PRIu64
			   ",\"gpu_active_pct\":%.3f,\"data_movement_pct\":%.3f,\"gpu_idle_pct\":%.3f"
			   ",\"h2d_ns\":%" PRIu64 ",\"d2h_ns\":%" PRIu64 ",\"d2d_ns\":%" PRIu64 ",\"peer_ns\":%" PRIu64
			   ",\"kernel_ns\":%" PRIu64 ",\"memset_ns\":%" PRIu64 "}",
			a->total.window_ns, ndev, a->total.busy_ns, a->total.active_ns, a->total.dm_ns, idle,
			pct(a->total.active_ns, cap), pct(a->total.dm_ns, cap), gpu ? pct(idle, cap) : 100.0 * !!cap,
			a->total.ck_ns[TBP_COPY_H2D], a->total.ck_ns[TBP_COPY_D2H], a->total.ck_ns[TBP_COPY_D2D],
			a->total.ck_ns[TBP_COPY_PEER], a->total.kernel_ns, a->total.memset_ns);
	} else {
		fprintf(f, ",\n\"breakdown\":{\"window_ns\":%" PRIu64 ",\"devices\":0,\"gpu_busy_ns\":null,"
			   "\"gpu_active_ns\":null,\"data_movement_ns\":null,\"gpu_idle_ns\":null,\"gpu_active_pct\":null,"
			   "\"data_movement_pct\":null,\"gpu_idle_pct\":null}",
			a->total.window_ns);
	}
}

static void json_stream(FILE *f, const struct an_stream *s, uint64_t busy, uint64_t dm, const struct an_breakdown *b,
			size_t n)
{
	fprintf(f, "%s{\"stream\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"active_ns\":%" PRIu64 ",\"data_movement_ns\":%" PRIu64
		   ",\"idle_ns\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"memcpy\":%" PRIu64 ",\"memset\":%" PRIu64
		   ",\"hta\":{\"host_wait_ns\":%" PRIu64 ",\"queued_ns\":%" PRIu64 "}}",
		n ? "," : "", s->stream, busy, busy > dm ? busy - dm : 0, dm, b->window_ns > busy ? b->window_ns - busy : 0,
		s->kernels, s->copies, s->sets, s->hta_gap[1], s->hta_gap[0]);
}

static void json_devices(const struct analysis *a, FILE *f)
{
	fprintf(f, ",\n\"devices\":[");
	struct stream_ref *refs = streams_by_device(a);
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		struct an_breakdown b;
		an_device_breakdown(a, d, &b);
		fprintf(f, "%s\n {\"device\":%" PRIu64 ",\"name\":", i ? "," : "", d->id);
		size_t nl = 0;
		const char *name = an_string(a, d->name, &nl);
		json_str(f, name, nl);
		fprintf(f, ",\"window_ns\":%" PRIu64 ",\"gpu_busy_ns\":%" PRIu64 ",\"gpu_active_ns\":%" PRIu64
			   ",\"data_movement_ns\":%" PRIu64 ",\"gpu_idle_ns\":%" PRIu64 ",\"gpu_active_pct\":%.3f"
			   ",\"data_movement_pct\":%.3f,\"gpu_idle_pct\":%.3f,\"h2d_ns\":%" PRIu64 ",\"d2h_ns\":%" PRIu64
			   ",\"d2d_ns\":%" PRIu64 ",\"peer_ns\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"memcpy\":%" PRIu64
			   ",\"memset\":%" PRIu64 ",\"idle_gaps\":%" PRIu64 ",\"idle_gap_ns\":%" PRIu64,
			b.window_ns, b.busy_ns, b.active_ns, b.dm_ns, b.idle_ns, pct(b.active_ns, b.window_ns),
			pct(b.dm_ns, b.window_ns), pct(b.idle_ns, b.window_ns), b.ck_ns[TBP_COPY_H2D],
			b.ck_ns[TBP_COPY_D2H], b.ck_ns[TBP_COPY_D2D], b.ck_ns[TBP_COPY_PEER], d->kernels, d->copies,
			d->sets, d->gaps, d->gap_ns);
		fprintf(f, ",\"memory\":{\"peak_bytes\":%" PRIu64 ",\"allocations\":%" PRIu64 ",\"frees\":%" PRIu64
			   ",\"allocated_bytes\":%" PRIu64 "},\"streams\":[",
			d->mem_peak, d->allocs, d->frees, d->alloc_bytes);
		device_streams_write(a, f, d, &b, refs, json_stream);
		fprintf(f, "]}");
	}
	free(refs);
	fprintf(f, "]");
}

static void json_counts(const struct analysis *a, FILE *f)
{
	fprintf(f, ",\n\"counts\":{\"kernels\":%" PRIu64 ",\"memcpy\":%" PRIu64 ",\"memset\":%" PRIu64
		   ",\"malloc\":%" PRIu64 ",\"free\":%" PRIu64 ",\"sync\":%" PRIu64 ",\"api_calls\":%" PRIu64
		   ",\"gpu_kernels\":%" PRIu64 ",\"gpu_memcpy\":%" PRIu64 ",\"gpu_memset\":%" PRIu64
		   ",\"python_spans\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"graph_launches\":%" PRIu64
		   ",\"graph_launch_steps\":%" PRIu64 "}",
		a->n_launch - a->n_graph_launch, a->n_memcpy, a->n_memset, a->n_malloc, a->n_free, a->n_sync, a->n_api, a->n_gpu_kernel,
		a->n_gpu_memcpy, a->n_gpu_memset, a->n_spans, a->n_errors, a->n_graph_launch, a->graph_launch_iters);
}

/* ,\n"key":[every finding of v] */
static void json_finding_list(const struct analysis *a, FILE *f, const char *key, const struct vec *v)
{
	fprintf(f, ",\n\"%s\":[", key);
	for (size_t i = 0; i < v->n; i++)
		json_finding(a, f, VEC_AT(v, struct an_finding, i), i == 0);
	fputc(']', f);
}

static void json_kernels(const struct analysis *a, FILE *f)
{
	fprintf(f, ",\n\"kernels\":[");
	for (size_t i = 0; i < a->kernels.n && i < 100; i++) {
		const struct an_kernel_stat *k = VEC_AT(&a->kernels, struct an_kernel_stat, i);
		size_t nl = 0;
		const char *name = an_string(a, k->name, &nl);
		fprintf(f, "%s\n {\"name\":", i ? "," : "");
		json_str(f, name, nl);
		fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 "}", k->count, k->total_ns,
			k->max_ns);
	}
	fputc(']', f);
}

/* The host window, and the host's time by call path and by function in it. */
static void json_host_time(const struct analysis *a, FILE *f)
{
	struct host_outside out;
	fprintf(f, ",\n\"host_time_window\":");
	if (host_outside(a, &out))
		fprintf(f, "{\"scope\":\"window\",\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"window_ns\":%" PRIu64
			   ",\"before_ns\":%" PRIu64 ",\"after_ns\":%" PRIu64 ",\"imports_outside_ns\":%" PRIu64 "}",
			a->host_win.begin, a->host_win.end, a->host_win.end - a->host_win.begin, out.before_ns, out.after_ns,
			out.imports_ns);
	else
		fprintf(f, "{\"scope\":\"trace\"}");
	fprintf(f, ",\n\"host_time_by_python_path\":[");
	int win = a->host_win.on;
	for (size_t i = 0, shown = 0; i < a->spans.n && shown < 50; i++) {
		const struct an_span_stat *s = VEC_AT(&a->spans, struct an_span_stat, i);
		if (win && !s->win_count)
			continue;
		fprintf(f, "%s\n {\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64
			   ",\"trace_count\":%" PRIu64 ",\"trace_total_ns\":%" PRIu64 ",\"trace_self_ns\":%" PRIu64 ",\"where\":",
			shown++ ? "," : "", win ? s->win_count : s->count, win ? s->win_total_ns : s->total_ns,
			win ? s->win_self_ns : s->self_ns, s->count, s->total_ns, s->self_ns);
		json_where(a, f, s->callpath, 0);
		fputc('}', f);
	}
	fprintf(f, "],\n\"host_time_by_function\":[");
	struct host_row *rows;
	size_t nrows = host_rows(a, 0, &rows);
	for (size_t i = 0; i < nrows && i < 50; i++) {
		const struct host_row *r = &rows[i];
		fprintf(f, "%s\n {\"function\":", i ? "," : "");
		json_str(f, r->fr.function, r->fr.function_len);
		fprintf(f, ",\"file\":");
		json_str(f, r->fr.file, r->fr.file_len);
		fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64 ",\"paths\":%zu"
			   ",\"trace_count\":%" PRIu64 ",\"trace_total_ns\":%" PRIu64 ",\"trace_self_ns\":%" PRIu64
			   ",\"user\":%s}",
			r->count, r->total_ns, r->self_ns, r->paths, r->trace_count, r->trace_total_ns, r->trace_self_ns,
			an_frame_is_library(a, &r->fr) ? "false" : "true");
	}
	free(rows);
	fputc(']', f);
}

int an_report_json(const struct analysis *a, FILE *f)
{
	fprintf(f, "{\"schema\":\"tbprof-report\",\"schema_version\":1,\"trace_file\":");
	json_str(f, a->path, strlen(a->path));
	json_trace(a, f);
	json_window_steps(a, f);
	json_breakdown(a, f);
	if (an_has_gpu(a))
		json_idle_breakdown(a, f);
	json_devices(a, f);
	json_counts(a, f);
	json_finding_list(a, f, "findings", &a->findings);
	json_finding_list(a, f, "harness", &a->harness);
	json_finding_list(a, f, "model_step", &a->model_step);
	json_kernels(a, f);
	json_host_time(a, f);
	an_ranges_json(a, f);
	fprintf(f, ",\n\"memory\":{\"not_freed_blocks\":%" PRIu64 ",\"not_freed_bytes\":%" PRIu64 "}}\n",
		a->mem_leak_count, a->mem_leak_bytes);
	return ferror(f) ? -1 : 0;
}
