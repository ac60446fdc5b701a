/*
 * NVTX ranges (TBP_K_RANGE records: torch.cuda.nvtx, Megatron/NeMo regions, nvtx3 from C/C++): kept
 * as the trace is read, grouped by (domain, name), and the GPU's busy time inside each range measured
 * against the union of the GPU's work (kernels, copies, memsets, every device): the share of a
 * range's host time during which some GPU work ran.  The work is read again from the trace after the
 * first pass, and only when the trace has ranges: a trace without them costs nothing here.
 *
 * The report (text and JSON) shows the ranges by total time; `--steps nvtx:NAME` (an_steps_detect.c)
 * takes the steps from the ranges named NAME.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_fmt.h"
#include "an_ranges.h"

struct range_item {
	uint64_t ts, end, domain, name, callpath, busy_ns;
	uint32_t kind;
};
struct range_group {
	uint64_t domain, name, count, total_ns, busy_ns, max_ns, callpath, marks;
};
struct an_ranges {
	struct vec items;   /* struct range_item, as read */
	struct vec groups;  /* struct range_group, by total time (an_ranges_finish) */
	int measured;       /* busy_ns known (the trace has GPU work) */
};

static struct an_ranges *state(struct analysis *a)
{
	if (!a->ranges) {
		a->ranges = calloc(1, sizeof *a->ranges);
		if (a->ranges) {
			a->ranges->items.item = sizeof(struct range_item);
			a->ranges->groups.item = sizeof(struct range_group);
		}
	}
	return a->ranges;
}

void an_ranges_record(struct analysis *a, const struct tbp_record *r)
{
	struct an_ranges *s = state(a);
	struct range_item *it = s ? vec_push(&s->items) : NULL;
	if (!it)
		return;
	it->ts = r->ts;
	it->end = r->u.range.end < r->ts ? r->ts : r->u.range.end;
	it->domain = r->u.range.domain;
	it->name = r->u.range.name;
	it->callpath = r->u.range.callpath;
	it->kind = (uint32_t)r->u.range.range_kind;
}

/* ------------------------------------------------------------ GPU busy inside */

struct seg {
	uint64_t s, e;
};
static int cmp_seg(const void *x, const void *y)
{
	const struct seg *p = x, *q = y;
	return (p->s > q->s) - (p->s < q->s);
}

/* Busy time of the union segs[0..n) (sorted, disjoint; before[i]: busy before segs[i]) up to t. */
static uint64_t busy_until(const struct seg *segs, const uint64_t *before, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n; /* first segment starting at or after t */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (segs[mid].s < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	const struct seg *p = &segs[lo - 1];
	return before[lo - 1] + ((t < p->e ? t : p->e) - p->s);
}

static int measure_busy(struct analysis *a, struct an_ranges *s)
{
	struct tbp_reader *r;
	if (tbp_reader_open(&r, a->path) != TBP_OK) {
		tbp_reader_close(r);
		return 0;
	}
	struct vec segs = {.item = sizeof(struct seg)};
	struct tbp_record rec;
	while (tbp_reader_next(r, &rec) == TBP_OK) {
		if (rec.kind != TBP_K_GPU_KERNEL && rec.kind != TBP_K_GPU_MEMCPY && rec.kind != TBP_K_GPU_MEMSET)
			continue;
		uint64_t end = rec.u.gpu_kernel.end; /* TBP_GPU_FIELDS: end first in each */
		if (end <= rec.ts)
			continue;
		struct seg *g = vec_push(&segs);
		if (!g)
			break;
		*g = (struct seg){rec.ts, end};
	}
	tbp_reader_close(r);
	if (!segs.n) {
		vec_free(&segs);
		return 0;
	}
	struct seg *g = segs.data;
	qsort(g, segs.n, sizeof *g, cmp_seg);
	size_t n = 0;
	for (size_t i = 0; i < segs.n; i++) {
		if (n && g[i].s <= g[n - 1].e) {
			if (g[i].e > g[n - 1].e)
				g[n - 1].e = g[i].e;
		} else {
			g[n++] = g[i];
		}
	}
	uint64_t *before = malloc(n * sizeof *before);
	if (!before) {
		vec_free(&segs);
		return 0;
	}
	for (size_t i = 0, acc = 0; i < n; i++) {
		before[i] = acc;
		acc += g[i].e - g[i].s;
	}
	for (size_t i = 0; i < s->items.n; i++) {
		struct range_item *it = VEC_AT(&s->items, struct range_item, i);
		it->busy_ns = busy_until(g, before, n, it->end) - busy_until(g, before, n, it->ts);
	}
	free(before);
	vec_free(&segs);
	return 1;
}

static int cmp_group(const void *x, const void *y)
{
	const struct range_group *p = x, *q = y;
	if (p->total_ns != q->total_ns)
		return p->total_ns < q->total_ns ? 1 : -1;
	if (p->count != q->count)
		return p->count < q->count ? 1 : -1;
	return (p->name > q->name) - (p->name < q->name);
}

int an_ranges_finish(struct analysis *a)
{
	struct an_ranges *s = a->ranges;
	if (!s || !s->items.n)
		return 0;
	s->measured = measure_busy(a, s);
	struct u64map idx = {0};
	for (size_t i = 0; i < s->items.n; i++) {
		const struct range_item *it = VEC_AT(&s->items, struct range_item, i);
		/* string ids fit 32 bits in any trace this analyzer can hold */
		uint64_t key = (it->domain << 32 ^ it->name) + 1;
		size_t k = vec_keyed(&s->groups, &idx, key, NULL);
		if (k == SIZE_MAX) {
			u64map_free(&idx);
			return -1;
		}
		struct range_group *gr = VEC_AT(&s->groups, struct range_group, k);
		gr->domain = it->domain;
		gr->name = it->name;
		if (!gr->callpath)
			gr->callpath = it->callpath;
		if (it->kind == TBP_NVTX_MARK) {
			gr->marks++;
			continue;
		}
		uint64_t d = it->end - it->ts;
		gr->count++;
		gr->total_ns += d;
		gr->busy_ns += it->busy_ns;
		if (d > gr->max_ns)
			gr->max_ns = d;
	}
	u64map_free(&idx);
	qsort(s->groups.data, s->groups.n, sizeof(struct range_group), cmp_group);
	return 0;
}

void an_ranges_free(struct analysis *a)
{
	if (!a->ranges)
		return;
	vec_free(&a->ranges->items);
	vec_free(&a->ranges->groups);
	free(a->ranges);
	a->ranges = NULL;
}

/* ------------------------------------------------------------ steps */

static int cmp_step(const void *x, const void *y)
{
	const struct an_step *p = x, *q = y;
	return (p->begin > q->begin) - (p->begin < q->begin);
}

int an_ranges_steps(const struct analysis *a, const char *name, struct vec *out)
{
	const struct an_ranges *s = a->ranges;
	size_t nl = strlen(name);
	out->item = sizeof(struct an_step);
	for (size_t i = 0; s && i < s->items.n; i++) {
		const struct range_item *it = VEC_AT(&s->items, struct range_item, i);
		size_t l;
		const char *text = an_string(a, it->name, &l);
		if (it->kind == TBP_NVTX_MARK || !text || l != nl || memcmp(text, name, nl))
			continue;
		struct an_step *st = vec_push(out);
		if (!st)
			return -1;
		*st = (struct an_step){it->ts, it->end};
	}
	qsort(out->data, out->n, sizeof(struct an_step), cmp_step);
	/* A range of that name inside another (recursion, another thread's at the same time): the
	 * outer one is the step. */
	size_t n = 0;
	struct an_step *v = out->data;
	for (size_t i = 0; i < out->n; i++)
		if (!n || v[i].begin >= v[n - 1].end)
			v[n++] = v[i];
	out->n = n;
	return 0;
}

uint64_t an_ranges_first_callpath(const struct analysis *a, const char *name)
{
	const struct an_ranges *s = a->ranges;
	size_t nl = strlen(name);
	const struct range_item *first = NULL;
	for (size_t i = 0; s && i < s->items.n; i++) {
		const struct range_item *it = VEC_AT(&s->items, struct range_item, i);
		size_t l;
		const char *text = an_string(a, it->name, &l);
		if (it->kind != TBP_NVTX_MARK && text && l == nl && !memcmp(text, name, nl) && (!first || it->ts < first->ts))
			first = it;
	}
	return first ? an_user_callpath(a, first->callpath) : 0;
}

/* ------------------------------------------------------------ reports */

#define TEXT_ROWS 10
#define JSON_ROWS 100

static void name_of(const struct analysis *a, const struct range_group *g, char *buf, size_t len)
{
	size_t nl = 0, dl = 0;
	const char *name = an_string(a, g->name, &nl), *dom = g->domain ? an_string(a, g->domain, &dl) : NULL;
	if (!name) {
		name = "(unnamed)";
		nl = strlen(name);
	}
	if (dom)
		snprintf(buf, len, "%.*s@%.*s", (int)(nl > 80 ? 80 : nl), name, (int)(dl > 40 ? 40 : dl), dom);
	else
		snprintf(buf, len, "%.*s", (int)(nl > 80 ? 80 : nl), name);
}

void an_ranges_text(const struct analysis *a, FILE *f)
{
	const struct an_ranges *s = a->ranges;
	if (!s || !s->groups.n)
		return;
	fprintf(f, "\nNVTX ranges (whole trace), by total time:\n");
	fprintf(f, "       total    count       mean        max  %srange  (first begun at)\n",
		s->measured ? "GPU busy  " : "");
	size_t shown = 0;
	for (size_t i = 0; i < s->groups.n && shown < TEXT_ROWS; i++) {
		const struct range_group *g = VEC_AT(&s->groups, struct range_group, i);
		if (!g->count)
			continue;
		char t1[32], t2[32], t3[32], busy[16] = "", name[160], site[512];
		name_of(a, g, name, sizeof name);
		an_site_label(a, an_user_callpath(a, g->callpath), 0, site, sizeof site);
		if (s->measured)
			snprintf(busy, sizeof busy, "%7.1f%%  ", g->total_ns ? 100.0 * (double)g->busy_ns / (double)g->total_ns : 0.0);
		fprintf(f, "  %10s  %7" PRIu64 "x  %9s  %9s  %s%s  (%s)\n", fmt_ns(g->total_ns, t1, sizeof t1), g->count,
			fmt_ns(g->total_ns / g->count, t2, sizeof t2), fmt_ns(g->max_ns, t3, sizeof t3), busy, name, site);
		shown++;
	}
	uint64_t marks = 0, groups = 0;
	for (size_t i = 0; i < s->groups.n; i++) {
		marks += VEC_AT(&s->groups, struct range_group, i)->marks;
		groups += VEC_AT(&s->groups, struct range_group, i)->count > 0;
	}
	if (groups > shown)
		fprintf(f, "    ... %" PRIu64 " more names (--json for up to %d)\n", groups - shown, JSON_ROWS);
	if (marks)
		fprintf(f, "  and %" PRIu64 " NVTX marks\n", marks);
}

void an_ranges_json(const struct analysis *a, FILE *f)
{
	const struct an_ranges *s = a->ranges;
	if (!s || !s->groups.n)
		return;
	fprintf(f, ",\n\"nvtx_ranges\":[");
	for (size_t i = 0, n = 0; i < s->groups.n && n < JSON_ROWS; i++) {
		const struct range_group *g = VEC_AT(&s->groups, struct range_group, i);
		size_t nl = 0, dl = 0;
		const char *name = an_string(a, g->name, &nl), *dom = g->domain ? an_string(a, g->domain, &dl) : NULL;
		fprintf(f, "%s\n {\"name\":", n++ ? "," : "");
		json_str(f, name ? name : "", name ? nl : 0);
		fputs(",\"domain\":", f);
		if (dom)
			json_str(f, dom, dl);
		else
			fputs("null", f);
		fprintf(f, ",\"count\":%" PRIu64 ",\"marks\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
			   ",\"gpu_busy_ns\":",
			g->count, g->marks, g->total_ns, g->max_ns);
		if (s->measured)
			fprintf(f, "%" PRIu64 ",\"gpu_busy_share\":%.4f", g->busy_ns,
				g->total_ns ? (double)g->busy_ns / (double)g->total_ns : 0.0);
		else
			fputs("null,\"gpu_busy_share\":null", f);
		char site[512];
		an_site_label(a, an_user_callpath(a, g->callpath), 0, site, sizeof site);
		fputs(",\"where\":", f);
		json_str(f, site, strlen(site));
		fputc('}', f);
	}
	fputc(']', f);
}
