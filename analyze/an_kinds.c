/*
 * The finding-kind table, built from an_kinds.def, and the descriptors of
 * the kinds raised by the bursts, copies, sync and memory passes (the idle
 * gap's is an_kind_idle_gap.c): their keep rules, what each report form
 * writes of them, their advice.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "an.h"
#include "an_fmt.h"
#include "an_kind.h"
#include "an_report_int.h"

static const struct an_kind *const kinds[AN_F_IDLE_PART] = {
#define AN_FINDING_KIND(id, descriptor) [AN_F_##id] = &descriptor,
#include "an_kinds.def"
#undef AN_FINDING_KIND
};

static const struct an_kind unknown_kind = {.name = "unknown"};

const struct an_kind *an_kind_of(int kind)
{
	if (kind <= 0 || kind >= AN_F_IDLE_PART || !kinds[kind])
		return &unknown_kind;
	return kinds[kind];
}

const char *an_finding_name(int kind)
{
	return an_kind_of(kind)->name;
}

const char *an_suggestion(const struct analysis *a, const struct an_finding *f)
{
	const struct an_kind *k = an_kind_of(f->kind);
	return k->suggestion ? k->suggestion(a, f) : "";
}

/* ------------------------------------------------------------ kernel_burst */
static void burst_text_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32];
	(void)a;
	/* Spans are merged across streams, idle is the device's: both are
	 * wall time, within the window. */
	fprintf(f, ": %" PRIu64 " burst%s, %" PRIu64 " short kernels spanning %s, GPU idle %s inside them\n", x->groups,
		x->groups == 1 ? "" : "s", x->count, fmt_ns(x->total_ns, t1, sizeof t1), fmt_ns(x->idle_ns, t2, sizeof t2));
}

static void burst_text_tail(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	if (x->backward_burst)
		fprintf(f, "      launched by autograd's engine for the backward() called here\n");
}

static void burst_json_fields(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	fprintf(f, ",\"bursts\":%" PRIu64 ",\"idle_ns\":%" PRIu64, x->groups, x->idle_ns);
}

static void burst_json_tail(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	fprintf(f, ",\"backward\":%s", x->backward_burst ? "true" : "false");
}

static void burst_html_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32];
	(void)a;
	fprintf(f, "<span class=\"num\">%" PRIu64 " burst%s, %" PRIu64 " short kernels</span>"
		   "<span class=\"cost\">spanning %s, GPU idle %s inside them</span>",
		x->groups, x->groups == 1 ? "" : "s", x->count, fmt_ns(x->total_ns, t1, sizeof t1),
		fmt_ns(x->idle_ns, t2, sizeof t2));
}

static const char *burst_suggestion(const struct analysis *a, const struct an_finding *x)
{
	/* Steps that already replay CUDA graphs get no advice to capture the step in one. */
	int graphs = an_steps_replay_graphs(a);
	if (x->backward_burst && graphs)
		return "the backward pass launches many tiny kernels here (autograd runs one or more per "
		       "op of the forward) with the GPU idling between them: fuse the forward's small ops "
		       "(torch.compile), capture the backward into the CUDA graph the step replays too, or "
		       "give each op more work (a larger batch)";
	if (x->backward_burst)
		return "the backward pass launches many tiny kernels here (autograd runs one or more per "
		       "op of the forward) with the GPU idling between them: fuse the forward's small "
		       "ops (torch.compile), capture the step with CUDA graphs, or give each op more work "
		       "(a larger batch)";
	if (graphs)
		return "many tiny kernels in a row from this line with the GPU idling between them: use "
		       "torch._foreach_* (e.g. zero_grad(set_to_none=True), foreach=True optimizers), fuse "
		       "with torch.compile, or capture more of the step into the CUDA graph it replays "
		       "(fewer, larger replays)";
	return "many tiny kernels in a row from this line with the GPU idling between them: use "
	       "torch._foreach_* (e.g. zero_grad(set_to_none=True), foreach=True optimizers), fuse "
	       "with torch.compile, or capture the loop with CUDA graphs";
}

const struct an_kind an_kind_kernel_burst = {
	.name = "kernel_burst",
	.counted_at_user_line = 1,
	.merged_by_loop = 1,
	.text_head = burst_text_head,
	.text_tail = burst_text_tail,
	.json_fields = burst_json_fields,
	.json_tail = burst_json_tail,
	.html_head = burst_html_head,
	.suggestion = burst_suggestion,
};

/* ------------------------------------------------------------ scalar_copy */
/* Repeated: at least scalar_min copies, and with steps in at least two of
 * them (one-time set-up, or a one-off inside one step, is not the
 * pattern). */
static int scalar_keep(const struct analysis *a, const struct an_finding *x)
{
	return x->count >= a->opts.scalar_min && (a->iterations < 2 || x->iters_allocating >= 2);
}

static void scalar_text_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32];
	fprintf(f, ": %" PRIu64 " copies of <= %" PRIu64 " bytes, %s stalled (%" PRIu64 " followed by a sync, %" PRIu64
		   " pageable)\n",
		x->count, a->opts.scalar_bytes, fmt_ns(x->total_ns, t1, sizeof t1), x->flagged, x->pageable);
}

static void scalar_json_fields(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	fprintf(f, ",\"bytes\":%" PRIu64 ",\"followed_by_sync\":%" PRIu64 ",\"pageable\":%" PRIu64, x->bytes, x->flagged,
		x->pageable);
}

static void scalar_html_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32];
	fprintf(f, "<span class=\"num\">%" PRIu64 " copies of &lt;= %" PRIu64 " bytes</span><span class=\"cost\">%s "
		   "stalled</span><span class=\"num\">%" PRIu64 " followed by a sync, %" PRIu64 " pageable</span>",
		x->count, a->opts.scalar_bytes, fmt_ns(x->total_ns, t1, sizeof t1), x->flagged, x->pageable);
}

static const char *scalar_suggestion(const struct analysis *a, const struct an_finding *x)
{
	static char buf[512];
	(void)a;
	snprintf(buf, sizeof buf,
		 "scalar host-to-device copies (%" PRIu64 " pageable, %" PRIu64 " followed by a sync): "
		 "keep the scalar on the host (a Python float or numpy value) instead of making a "
		 "device tensor of it, as the hf_Reformer fix did",
		 x->pageable, x->flagged);
	return buf;
}

const struct an_kind an_kind_scalar_copy = {
	.name = "scalar_copy",
	.counted_at_user_line = 1,
	.keep = scalar_keep,
	.text_head = scalar_text_head,
	.json_fields = scalar_json_fields,
	.html_head = scalar_html_head,
	.suggestion = scalar_suggestion,
};

/* ------------------------------------------------------------ ping_pong */
static int pingpong_keep(const struct analysis *a, const struct an_finding *x)
{
	return x->count >= a->opts.pingpong_min;
}

static void pingpong_text_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], b1[32];
	(void)a;
	fprintf(f, ": %" PRIu64 " round trips, %s moved, %s in copies\n", x->count, fmt_bytes(x->bytes, b1, sizeof b1),
		fmt_ns(x->total_ns, t1, sizeof t1));
}

static void pingpong_json_fields(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	fprintf(f, ",\"bytes\":%" PRIu64, x->bytes);
}

static void pingpong_html_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], b1[32];
	(void)a;
	fprintf(f, "<span class=\"num\">%" PRIu64 " round trips, %s moved</span><span class=\"cost\">%s in copies</span>",
		x->count, fmt_bytes(x->bytes, b1, sizeof b1), fmt_ns(x->total_ns, t1, sizeof t1));
}

static const char *pingpong_suggestion(const struct analysis *a, const struct an_finding *x)
{
	(void)a, (void)x;
	return "the same bytes are copied to the GPU and back again and again: keep the tensor on "
	       "one side across steps instead of offloading it each time";
}

const struct an_kind an_kind_ping_pong = {
	.name = "ping_pong",
	.counted_at_user_line = 1,
	.keep = pingpong_keep,
	.text_head = pingpong_text_head,
	.json_fields = pingpong_json_fields,
	.html_head = pingpong_html_head,
	.suggestion = pingpong_suggestion,
};

/* ------------------------------------------------------------ sync_hotspot */
/* --sync-min syncs, or, with steps, a sync in nearly every counted step
 * (three quarters of them, at least 3): an .item() logged each step of a
 * 10-step loop is the pattern, 9 syncs in its 9 steady steps (a step whose
 * boundary falls before its sync leaves one without). */
static int sync_keep(const struct analysis *a, const struct an_finding *x)
{
	return x->count >= a->opts.sync_min ||
	       (a->iterations >= 3 && x->iters_allocating >= 3 && 4 * x->iters_allocating >= 3 * a->iterations);
}

static void sync_text_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32];
	(void)a;
	fprintf(f, ": %" PRIu64 " syncs, %s waiting, longest %s\n", x->count, fmt_ns(x->total_ns, t1, sizeof t1),
		fmt_ns(x->max_ns, t2, sizeof t2));
}

static void sync_html_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32];
	(void)a;
	fprintf(f, "<span class=\"num\">%" PRIu64 " syncs</span><span class=\"cost\">%s waiting</span>"
		   "<span class=\"num\">longest %s</span>",
		x->count, fmt_ns(x->total_ns, t1, sizeof t1), fmt_ns(x->max_ns, t2, sizeof t2));
}

static const char *sync_suggestion(const struct analysis *a, const struct an_finding *x)
{
	(void)a, (void)x;
	return "the host blocks here waiting for the GPU (.item(), .cpu(), synchronize): read "
	       "values less often, accumulate on the device, or use non_blocking copies and events";
}

const struct an_kind an_kind_sync_hotspot = {
	.name = "sync_hotspot",
	.counted_at_user_line = 1,
	.stake_adds_idle = 1,
	.keep = sync_keep,
	.text_head = sync_text_head,
	.html_head = sync_html_head,
	.suggestion = sync_suggestion,
};

/* ------------------------------------------------------------ alloc_churn */
/* Allocations that come back (allocate, free, allocate again) or are made
 * in every iteration, --churn-min of them at least; or, with steps, made in
 * most of them (at least 3): a short run makes fewer than --churn-min even
 * when every step allocates (its cache emptied each step).  One-time setup
 * allocates in one step. */
static int churn_keep(const struct analysis *a, const struct an_finding *x)
{
	return (x->count >= a->opts.churn_min &&
		(2 * x->cycles >= x->count || (a->iterations >= 2 && x->iters_allocating >= a->iterations))) ||
	       (a->iterations >= 3 && x->iters_allocating >= 3 && 2 * x->iters_allocating > a->iterations);
}

static void churn_text_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], b1[32];
	fprintf(f, ": %" PRIu64 " allocations, %s, %s in the allocator", x->count, fmt_bytes(x->bytes, b1, sizeof b1),
		fmt_ns(x->total_ns, t1, sizeof t1));
	if (a->iterations && x->iters_allocating)
		fprintf(f, ", in %" PRIu64 " of the %" PRIu64 " steps", x->iters_allocating, a->iterations);
	fputc('\n', f);
}

static void churn_json_fields(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	fprintf(f, ",\"bytes\":%" PRIu64 ",\"steps_allocating\":%" PRIu64, x->bytes, a->iterations ? x->iters_allocating : 0);
}

static void churn_html_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], b1[32];
	fprintf(f, "<span class=\"num\">%" PRIu64 " allocations, %s</span><span class=\"cost\">%s in the allocator</span>",
		x->count, fmt_bytes(x->bytes, b1, sizeof b1), fmt_ns(x->total_ns, t1, sizeof t1));
	if (a->iterations && x->iters_allocating)
		fprintf(f, "<span class=\"num\">in %" PRIu64 " of the %" PRIu64 " steps</span>", x->iters_allocating,
			a->iterations);
}

static const char *churn_suggestion(const struct analysis *a, const struct an_finding *x)
{
	(void)a, (void)x;
	return "device memory is allocated here over and over: reuse buffers, let the caching "
	       "allocator keep them (no torch.cuda.empty_cache() in the loop)";
}

const struct an_kind an_kind_alloc_churn = {
	.name = "alloc_churn",
	.counted_at_user_line = 1,
	.keep = churn_keep,
	.text_head = churn_text_head,
	.json_fields = churn_json_fields,
	.html_head = churn_html_head,
	.suggestion = churn_suggestion,
};
