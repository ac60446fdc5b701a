/*
 * Pass: the findings, once every record is in.  Each occurrence was filed
 * under its (kind, cause, phase, call site); here the phases that count
 * are kept, each finding is placed at the innermost frame of the user's
 * code (an_user_callpath), merged with the others placed there, sorted
 * out into the findings, the runner's own cost (harness) and the model's
 * work at the runner's shared training step, and sorted biggest first.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_kind.h"
#include "an_pass.h"

static int cmp_finding(const void *x, const void *y)
{
	const struct an_finding *a = x, *b = y;
	if (a->stake_ns != b->stake_ns)
		return a->stake_ns > b->stake_ns ? -1 : 1;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind - b->kind;
	return a->callpath < b->callpath ? -1 : a->callpath > b->callpath;
}

static int keep_finding(const struct analysis *a, const struct an_finding *f)
{
	const struct an_kind *k = an_kind_of(f->kind);
	return k->keep ? k->keep(a, f) : f->count > 0;
}

/* The call path runs inside a backward() (Tensor.backward, autograd.backward,
 * the engine's entry): its caller is waiting on autograd's threads. */
static int in_backward(const struct analysis *a, uint64_t cp)
{
	struct an_frame fr[32];
	size_t n = cp ? an_callpath_frames(a, cp, fr, 32) : 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k + 8 <= fr[i].function_len; k++)
			if (!memcmp(fr[i].function + k, "backward", 8))
				return 1;
	return 0;
}

/* Where a finding is shown: the innermost frame of the user's code, unless
 * --where=leaf. */
static uint64_t place(const struct analysis *a, uint64_t cp)
{
	return cp && !a->opts.where_leaf ? an_user_callpath(a, cp) : cp;
}

static void keep_sorted(const struct analysis *a, struct vec *v)
{
	size_t w = 0;
	for (size_t i = 0; i < v->n; i++) {
		struct an_finding *f = VEC_AT(v, struct an_finding, i);
		/* A sync's cost is its wait and the GPU's idle after it (the
		 * launch gap the drained queue leaves): stake_adds_idle. */
		f->stake_ns = f->total_ns + (an_kind_of(f->kind)->stake_adds_idle ? f->idle_ns : 0);
		if (keep_finding(a, f))
			*VEC_AT(v, struct an_finding, w++) = *f;
	}
	v->n = w;
	if (w)
		qsort(v->data, w, sizeof(struct an_finding), cmp_finding);
}

/* Call sites of torch's backward(): the path autograd's threads launch
 * under (the tracer lends them the caller's), so a burst recorded at one is
 * the backward pass's kernels. */
static int backward_callers(const struct analysis *a, struct u64map *bw_callers)
{
	for (size_t i = 0; i < a->spans.n; i++) {
		const struct an_span_stat *sp = VEC_AT(&a->spans, struct an_span_stat, i);
		uint64_t caller = sp->backward_wait ? an_user_callpath(a, sp->callpath) : 0;
		if (caller && u64map_put(bw_callers, caller, 1))
			return -1;
	}
	return 0;
}

/* Which list a finding placed at `placed` goes to. */
static struct vec *finding_list(struct analysis *a, const struct an_finding *f, uint64_t placed)
{
	return f->kind == AN_F_IDLE_PART ? &a->idle_parts
	       : an_callpath_is_harness(a, placed) ? &a->harness
	       : an_callpath_is_model_step(a, placed) ? &a->model_step : &a->findings;
}

/* Merged by the lines they show, whichever call on a line made them: the
 * thresholds (keep_finding) see the line's whole count.  A kind merged by
 * loop (merged_by_loop: a burst, as its run was made, burst_kernel): the
 * lines of one function under one caller, so a loop's bursts are one
 * finding whichever of its lines had the most kernels in each (the
 * backward pass's apart). */
static uint64_t merge_key(const struct analysis *a, const struct an_finding *f, uint64_t placed, int bw)
{
	uint64_t site = an_callpath_line_key(a, placed);
	struct an_frame pf;
	if (an_kind_of(f->kind)->merged_by_loop && placed && an_callpath_frames(a, placed, &pf, 1))
		site = an_hash_combine(an_hash_combine(an_frame_function_hash(&pf), an_callpath_parent(a, placed)), 2u + bw);
	uint64_t h = an_hash_combine(an_hash_combine(f->kind, f->cause + 16u * f->edge), an_hash_combine(site, f->native));
	return h == UINT64_MAX ? 0 : h;
}

/* The first finding at its line: f placed there. */
static void merge_first(struct analysis *a, struct an_finding *o, const struct an_finding *f, uint64_t placed, int bw,
			int harness)
{
	*o = *f;
	o->callpath = placed;
	o->site_count = f->count;
	o->backward_burst = bw;
	o->harness = harness || (f->kind == AN_F_IDLE_PART && an_callpath_is_harness(a, placed));
	o->leaf_callpath = f->leaf_callpath ? f->leaf_callpath : placed != f->callpath ? f->callpath : 0;
	/* Another thread's span around the gaps explains them only when it
	 * waits on this work: inside backward(), for autograd's threads (main()
	 * around everything does not). */
	o->context_backward = in_backward(a, f->context_callpath);
	o->context_callpath = o->context_backward ? place(a, f->context_callpath) : 0;
	o->other_callpath = place(a, f->other_callpath);
}

/* The idle gap's facts about its gaps: who resumed the GPU after the
 * longest, autograd's engine's launches. */
static void merge_gap_facts(const struct analysis *a, struct an_finding *o, const struct an_finding *f)
{
	if (f->engine_gaps && (!o->engine_gaps || (!o->engine_kernel && f->engine_kernel))) {
		o->engine_kernel = f->engine_kernel;
		o->engine_tid = f->engine_tid;
	}
	o->engine_gaps += f->engine_gaps;
	o->engine_ns += f->engine_ns;
	if (f->max_ns > o->max_ns) {
		o->max_ns = f->max_ns;
		if (an_kind_of(f->kind)->other_of_longest) {
			o->other_callpath = place(a, f->other_callpath);
			o->kernel_name = f->kernel_name;
			o->launch_tid = f->launch_tid;
			o->has_launch_tid = f->has_launch_tid;
			o->longest_engine = f->longest_engine;
		}
	}
}

/* Another finding at o's line: f (placed at `placed`) added to o. */
static void merge_more(const struct analysis *a, struct an_finding *o, const struct an_finding *f, uint64_t placed,
		       const struct u64map *bw_callers)
{
	const struct an_kind *k = an_kind_of(f->kind);
	if (k->merged_by_loop && an_callpath_line_key(a, placed) != an_callpath_line_key(a, o->callpath)) {
		/* Another line of the loop: shown at the line with the most kernels. */
		if (f->count > o->site_count) {
			o->callpath = placed;
			o->leaf_callpath = f->leaf_callpath ? f->leaf_callpath : placed != f->callpath ? f->callpath : 0;
			o->site_count = f->count;
		}
	} else {
		o->site_count += f->count;
	}
	o->cycles += f->cycles;
	/* Steps with an allocation here: each call path counts its own; two of
	 * them in the same step are one step (the larger count stands: never
	 * more steps than there were). */
	if (f->iters_allocating > o->iters_allocating)
		o->iters_allocating = f->iters_allocating;
	for (int c = 0; c < AN_CAUSE_N; c++)
		o->cause_ns[c] += f->cause_ns[c];
	if (!o->context_callpath && in_backward(a, f->context_callpath)) {
		o->context_callpath = place(a, f->context_callpath);
		o->context_tid = f->context_tid;
		o->context_backward = 1;
	}
	if (k->merged_by_loop && u64map_get(bw_callers, f->callpath))
		o->backward_burst = 1;
	o->count += f->count;
	o->total_ns += f->total_ns;
	o->groups += f->groups;
	o->bytes += f->bytes;
	o->flagged += f->flagged;
	o->pageable += f->pageable;
	o->idle_ns += f->idle_ns;
	/* An idle gap's split at its site, and who resumed the GPU after the
	 * longest gap. */
	o->site_ns += f->site_ns;
	o->copy_ns += f->copy_ns;
	o->copy_bits |= f->copy_bits;
	o->no_call_ns += f->no_call_ns;
	o->alloc_bits |= f->alloc_bits;
	o->backward_wait_ns += f->backward_wait_ns;
	merge_gap_facts(a, o, f);
}

/* Keep the steady state when the runner marked one; otherwise every marked
 * iteration; otherwise everything.  Merge phases per site. */
static int merge_findings(struct analysis *a, const struct u64map *bw_callers)
{
	struct an_state *st = a->st;
	struct u64map merged = {0};
	for (size_t i = 0; i < st->all_findings.n; i++) {
		const struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, i);
		if (!phase_counts(a, f->phase))
			continue;
		uint64_t placed = place(a, f->callpath);
		struct vec *out = finding_list(a, f, placed);
		int bw = an_kind_of(f->kind)->merged_by_loop && u64map_get(bw_callers, f->callpath) != NULL;
		uint64_t h = merge_key(a, f, placed, bw);
		uint64_t *ix = u64map_get(&merged, h);
		if (ix) {
			merge_more(a, VEC_AT(out, struct an_finding, *ix), f, placed, bw_callers);
			continue;
		}
		struct an_finding *o = vec_push(out);
		if (!o || u64map_put(&merged, h, out->n - 1)) {
			u64map_free(&merged);
			return -1;
		}
		merge_first(a, o, f, placed, bw, out == &a->harness);
	}
	u64map_free(&merged);
	return 0;
}

int an_findings_finish(struct analysis *a)
{
	struct u64map bw_callers = {0};
	if (backward_callers(a, &bw_callers) || merge_findings(a, &bw_callers)) {
		u64map_free(&bw_callers);
		return -1;
	}
	u64map_free(&bw_callers);
	keep_sorted(a, &a->findings);
	keep_sorted(a, &a->harness);
	keep_sorted(a, &a->model_step);
	/* What of the idle is placed at a line: every part with a call site,
	 * but the window's edges (start-up, shutdown). */
	a->idle.placed_ns = a->idle.no_line_ns = 0;
	for (size_t i = 0; i < a->idle_parts.n; i++) {
		struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		p->stake_ns = p->total_ns;
		if (!p->edge)
			*(p->callpath || p->native ? &a->idle.placed_ns : &a->idle.no_line_ns) += p->total_ns;
	}
	if (a->idle_parts.n)
		qsort(a->idle_parts.data, a->idle_parts.n, sizeof(struct an_finding), cmp_finding);
	return 0;
}
