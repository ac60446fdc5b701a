/*
 * tbanalyze engine, part 2: the dispatcher.  Every record is seen once, in
 * time order (see the merge in an_merge.c), and handed to the hook for its
 * class in each pass's ops, in the order of AN_PASSES (an_pass.h); the
 * events the services publish go the same way.  Before the passes see a
 * record, the dispatcher brings the services' state (an_services.h) up to
 * date: the device, stream and thread tables, the join of GPU records to
 * the calls that launched them, the statistics per call site and per
 * kernel name (diff), the devices' idle.
 */
/* The dispatchers' records go through one struct at a time: GCC's SLP
 * vectoriser packed pairs of their fields into vector registers through the
 * stack (a kernel's count and time, a launch's times), more instructions
 * than the plain stores (callgrind, simtorch trace: -6.7 M). */
#pragma GCC optimize("no-tree-slp-vectorize")
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_breakdown.h"
#include "an_ranges.h"
#include "an_pass_bursts.h"
#include "an_pass_copies.h"
#include "an_pass_gaps.h"
#include "an_pass_memory.h"
#include "an_pass_spans.h"
#include "an_pass_steps.h"
#include "an_pass_steptime.h"

/* The passes' ops in AN_PASSES' order, for the hooks called by a loop. */
static const struct an_pass_ops *const passes[] = {
#define AN_PASS_OPS(name, unused) &an_pass_##name,
	AN_PASSES(AN_PASS_OPS, 0)
#undef AN_PASS_OPS
};
#define N_PASSES (sizeof passes / sizeof passes[0])
_Static_assert(N_PASSES == AN_N_PASSES, "one ops per pass");

static struct an_site_stat *site_stat_slow(struct analysis *a, uint64_t cp, uint64_t nat);
/* A site's statistics and its index + 1 in a->sites (0: none, or past 32
 * bits), returned together (in two registers: no variable in memory). */
struct site_hit {
	struct an_site_stat *ss;
	uint32_t site1;
};
COLD_FN struct site_hit site_stat_ix_slow(struct analysis *a, uint64_t cp, uint64_t nat);

/* Every slot of the direct table empty (its key one no lookup reaches there). */
static void site_direct_clear(struct an_state *st)
{
	for (unsigned j = 0; j < SITE_DIRECT; j++)
		st->site_direct[j] = (struct site_direct){.cp = 0, .nat = j ^ 1};
}

/* In front of site_stat_slow: a direct-mapped table by (cp, nat) itself, no
 * hash to compute; it keeps what the slow path answered for that pair. */
HOT_FN struct an_site_stat *site_stat(struct analysis *a, uint64_t cp, uint64_t nat)
{
	struct site_direct *e = &a->st->site_direct[site_direct_slot(cp, nat)];
	if (__builtin_expect(e->cp == cp && e->nat == nat, 1))
		return e->ss;
	return site_stat_ix_slow(a, cp, nat).ss;
}

/* site_stat, with the site's index + 1 in a->sites (0: none, or past
 * 32 bits) beside it: the direct table holds it, no pointer difference to
 * divide by the entry's size.  (Its entries are sites within 32 bits: a
 * hit's is the answer.) */
HOT_FN struct site_hit site_stat_ix(struct analysis *a, uint64_t cp, uint64_t nat)
{
	struct site_direct *e = &a->st->site_direct[site_direct_slot(cp, nat)];
	if (__builtin_expect(e->cp == cp && e->nat == nat, 1)) {
		struct an_site_stat *ss = e->ss;
		/* (an entry of the table, within 32 bits: the callers' tests of
		 * the pointer and the index are not needed here) */
		if (!ss || !(uint32_t)e->ix1)
			__builtin_unreachable();
		return (struct site_hit){ss, (uint32_t)e->ix1};
	}
	return site_stat_ix_slow(a, cp, nat);
}

COLD_FN struct site_hit site_stat_ix_slow(struct analysis *a, uint64_t cp, uint64_t nat)
{
	struct an_site_stat *s = site_stat_slow(a, cp, nat);
	size_t ix1 = s ? (size_t)(s - VEC_AT(&a->sites, struct an_site_stat, 0)) + 1 : 0;
	if (!s || ix1 > UINT32_MAX)
		return (struct site_hit){s, 0};
	/* (after site_stat_slow, which may have moved the vector and emptied the table) */
	a->st->site_direct[site_direct_slot(cp, nat)] = (struct site_direct){.cp = cp, .nat = nat, .ss = s, .ix1 = ix1};
	return (struct site_hit){s, (uint32_t)ix1};
}

static struct an_site_stat *site_stat_slow(struct analysis *a, uint64_t cp, uint64_t nat)
{
	struct an_state *st = a->st;
	uint64_t h = an_hash_combine(cp, nat);
	if (h == UINT64_MAX)
		h = 0;
	uint64_t *ix = hot_get(&st->site_cache, h);
	if (ix)
		return VEC_AT(&a->sites, struct an_site_stat, *ix);
	int added;
	const void *was = a->sites.data;
	size_t i = vec_keyed(&a->sites, &st->site_idx, h, &added);
	/* The direct table's pointers are into the old vector's. */
	if (a->sites.data != was)
		site_direct_clear(st);
	if (i == SIZE_MAX)
		return NULL;
	hot_put(&st->site_cache, h, i);
	struct an_site_stat *s = VEC_AT(&a->sites, struct an_site_stat, i);
	if (added) {
		s->callpath = cp;
		s->native = nat;
	}
	return s;
}

/* ------------------------------------------------------------ iterations per site */
/* A call from site ss in iteration iter_no (the one in progress): the
 * iterations with a call from there (late_warmup reads them). */
HOT_FN void site_iter_note(struct an_site_stat *ss, uint64_t iter_no)
{
	if (ss->last_iter != iter_no) {
		if (!ss->iters)
			ss->first_iter = iter_no;
		ss->last_iter = iter_no;
		ss->iters++;
	}
}

/* A graph launch that the runtime accepted in iteration iter_no, every
 * iteration's count (graph_warmup reads it). */
HOT_FN void graph_iter_note(struct analysis *a, uint64_t iter_no)
{
	if (a->graph_launch_all_last != iter_no) {
		a->graph_launch_all_last = iter_no;
		a->graph_launch_all_iters++;
		if (!a->graph_launch_first_iter)
			a->graph_launch_first_iter = iter_no;
	}
}

/* The log of a first analysis full, or the call's distance from the one
 * before not a dt (site_log_ent): grown (vec_push doubles it), unless it
 * reached its cap or the trace has the runner's marks, whose iterations
 * need no steps detected (unless --steps nvtx names them); the distance
 * carried by SITE_LOG_SKIP entries, the first entry's from its own time. */
COLD_FN void site_log_grow(struct analysis *a, uint64_t ts, uint32_t site)
{
	struct an_state *st = a->st;
	/* (the detecting block loop that assumes the log on calls here
	 * after it ended: nothing more to log) */
	if (!st->site_log_on)
		return;
	if (st->iter_markers && !a->opts.steps_nvtx) {
		st->site_log_on = 0;
		vec_free(&st->site_log);
		return;
	}
	if (!st->site_log.n)
		st->site_log_base = st->site_log_ts = ts;
	for (;;) {
		struct site_log_ent *e = st->site_log.n - st->site_log_skips < SITE_LOG_MAX && ts >= st->site_log_ts
			? vec_push(&st->site_log) : NULL;
		if (!e) {
			st->site_log_on = 0;
			st->site_log_lost = 1;
			vec_free(&st->site_log);
			return;
		}
		if (ts - st->site_log_ts < SITE_LOG_SKIP) {
			*e = (struct site_log_ent){.dt = (uint32_t)(ts - st->site_log_ts), .site = site};
			st->site_log_ts = ts;
			return;
		}
		*e = (struct site_log_ent){.dt = SITE_LOG_SKIP, .site = 0};
		st->site_log_ts += SITE_LOG_SKIP;
		st->site_log_skips++;
	}
}

/* A call (site: index + 1 in a->sites, 0: a graph launch) into the log of a
 * first analysis (a store while it has room: every call of the trace). */
HOT_FN void site_log_add(struct analysis *a, uint64_t ts, uint32_t site)
{
	struct an_state *st = a->st;
	struct vec *v = &st->site_log;
	/* (past 32 bits when ts is earlier; below 2^31 here, a comparison
	 * with an immediate: the rest is site_log_grow's) */
	uint64_t dt = ts - st->site_log_ts;
	if (__builtin_expect(v->n < v->cap && dt <= INT32_MAX, 1)) {
		struct site_log_ent *e = (struct site_log_ent *)v->data + v->n++;
		e->dt = (uint32_t)dt;
		e->site = site;
		st->site_log_ts = ts;
	} else {
		site_log_grow(a, ts, site);
	}
}

void an_site_log_add(struct analysis *a, uint64_t ts, uint32_t site)
{
	site_log_add(a, ts, site);
}

int an_sites_replay(struct analysis *a, const struct an_step *steps, size_t n)
{
	struct an_state *st = a->st;
	/* Records in time order reach the passes with the marks due by their
	 * time emitted before them (an_pass_block, synth_emit): a call is in
	 * the iterations whose marks are at or before its time.  Out of
	 * order, the marks emitted depend on the blocks: not replayed. */
	if (!st || !st->site_log_on || st->site_log_lost || a->late_records)
		return -1;
	for (size_t i = 0; i < a->sites.n; i++) {
		struct an_site_stat *ss = VEC_AT(&a->sites, struct an_site_stat, i);
		ss->first_iter = ss->last_iter = ss->iters = 0;
	}
	a->graph_launch_first_iter = a->graph_launch_all_iters = a->graph_launch_all_last = 0;
	/* The marks as the steps pass emits them (synth_init): each step's
	 * ITER_BEGIN at its begin, then its ITER_END at its end. */
	size_t mark = 0, n_marks = 2 * n;
	int in_iter = 0;
	uint64_t iter_no = 0;
	/* The next mark's time (UINT64_MAX: none left, and no entry reaches
	 * it unless its time is UINT64_MAX too: then the mark's own test). */
	uint64_t next_mark = n ? steps[0].begin : UINT64_MAX;
	const struct site_log_ent *log = (const struct site_log_ent *)st->site_log.data;
	/* (in locals: the notes' stores could change them, as the compiler sees it) */
	size_t n_log = st->site_log.n, i = 0;
	struct an_site_stat *sites = VEC_AT(&a->sites, struct an_site_stat, 0);
	uint64_t t = st->site_log_base, u; /* the time of the entry before entry i */
	while (i < n_log) {
		t += log[i].dt; /* entry i's */
		if (__builtin_expect(t >= next_mark, 0)) {
			while (mark < n_marks && (mark % 2 ? steps[mark / 2].end : steps[mark / 2].begin) <= t) {
				in_iter = !(mark % 2);
				iter_no += in_iter;
				mark++;
			}
			next_mark = mark < n_marks ? (mark % 2 ? steps[mark / 2].end : steps[mark / 2].begin) : UINT64_MAX;
		}
		/* This entry and the ones after it before the next mark: the
		 * same iteration (or none).  (A SITE_LOG_SKIP entry notes
		 * nothing: its site is 0, its dt no graph launch's.) */
		if (!in_iter) {
			for (i++; i < n_log && (u = t + log[i].dt) < next_mark; i++)
				t = u;
			continue;
		}
		for (;;) {
			if (log[i].site)
				site_iter_note(&sites[(size_t)log[i].site - 1], iter_no); /* (64-bit: the - 1 an offset) */
			else if (log[i].dt != SITE_LOG_SKIP)
				graph_iter_note(a, iter_no);
			if (++i == n_log || (u = t + log[i].dt) >= next_mark)
				break;
			t = u;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ the join */
HOT_FN void note_time(struct analysis *a, uint64_t ts, uint64_t end)
{
	if (ts < a->first_ts)
		a->first_ts = ts;
	if (end < ts)
		end = ts;
	if (end > a->last_ts)
		a->last_ts = end;
}

/* note_time for a launch or kernel of a block (in_block): its end already
 * at or after its time, and its time no earlier than a->first_ts unless it
 * came late or first in its block, which pass_block_k checks (every record
 * of a block notes its time: the block's earlier ones are at or before it). */
static inline __attribute__((always_inline)) void note_time_k(struct analysis *a, uint64_t ts, uint64_t end,
							      int in_block)
{
	if (!in_block) {
		note_time(a, ts, end);
		return;
	}
	if (end > a->last_ts)
		a->last_ts = end;
}

COLD_FN struct corr_ent *corr_map_slot(struct an_state *st, uint64_t corr);

/* The graph launch waiting under corr, left in place for the replay's other records (NULL: none). */
COLD_FN const struct corr_ent *graph_corr_find(struct an_state *st, uint64_t corr)
{
	uint64_t *ix = st->graph_corr.n ? u64map_get(&st->graph_corr, corr) : NULL;
	return ix ? &st->graph_ring[*ix].e : NULL;
}

/* Where to write a graph launch's entry (NULL: not kept); the oldest of GRAPH_RING goes. */
COLD_FN struct corr_ent *graph_corr_slot(struct an_state *st, uint64_t corr)
{
	if (!corr)
		return NULL;
	if (!st->graph_ring && !(st->graph_ring = calloc(GRAPH_RING, sizeof *st->graph_ring)))
		return NULL;
	struct corr_slot *sl = &st->graph_ring[st->graph_next % GRAPH_RING];
	if (sl->corr)
		u64map_del(&st->graph_corr, sl->corr);
	if (u64map_put(&st->graph_corr, corr, st->graph_next % GRAPH_RING)) {
		sl->corr = 0;
		return NULL;
	}
	st->graph_next++;
	sl->corr = corr;
	return &sl->e;
}

/* The launch waiting under corr, taken out of the table (NULL: none).  Its
 * entry stays readable until the next corr_slot: the GPU record's pass
 * reads it in place. */
HOT_FN const struct corr_ent *corr_take(struct an_state *st, uint64_t corr)
{
	struct corr_slot *sl = &st->corr_ring[corr & (CORR_RING - 1)];
	if (sl->corr == corr) {
		sl->corr = 0;
		return &sl->e;
	}
	if (!st->corr.n)
		return graph_corr_find(st, corr);
	uint64_t *ix = u64map_get(&st->corr, corr);
	if (!ix)
		return graph_corr_find(st, corr);
	uint64_t i = *ix;
	u64map_del(&st->corr, corr);
	uint64_t *fl = vec_push(&st->corr_freelist);
	if (fl)
		*fl = i;
	return VEC_AT(&st->corr_pool, struct corr_ent, i);
}

/* Where to write the launch that waits under corr (every field: the entry
 * is reused), or NULL when it is not kept (corr 0, table full, no memory). */
HOT_FN struct corr_ent *corr_slot(struct an_state *st, uint64_t corr)
{
	if (!corr)
		return NULL;
	struct corr_slot *sl = &st->corr_ring[corr & (CORR_RING - 1)];
	if (sl->corr && sl->corr != corr) {
		/* Still waiting: keep it. */
		struct corr_ent *kept = corr_map_slot(st, sl->corr);
		if (kept)
			*kept = sl->e;
	}
	sl->corr = corr;
	return &sl->e;
}

COLD_FN struct corr_ent *corr_map_slot(struct an_state *st, uint64_t corr)
{
	/* Bounded: records whose GPU side never comes (lost, or no CUPTI)
	 * must not grow the map without end. */
	if (st->corr.n >= (1u << 20))
		return NULL;
	uint64_t i;
	if (st->corr_freelist.n) {
		i = *VEC_AT(&st->corr_freelist, uint64_t, st->corr_freelist.n - 1);
		st->corr_freelist.n--;
	} else {
		if (!vec_push(&st->corr_pool))
			return NULL;
		i = st->corr_pool.n - 1;
	}
	/* As before this change: an entry the map cannot take is lost. */
	struct corr_ent *e = VEC_AT(&st->corr_pool, struct corr_ent, i);
	u64map_put(&st->corr, corr, i);
	return e;
}

/* Every slot of the kernels' direct table empty. */
static void kernel_direct_clear(struct an_state *st)
{
	for (unsigned j = 0; j < KERNEL_DIRECT; j++)
		st->kernel_direct[j] = (struct kernel_direct){.name = j ^ 1};
}

/* A kernel name's entry from its map, or a new one (NULL: out of memory),
 * into the direct table. */
COLD_FN struct an_kernel_stat *kernel_stat_slow(struct analysis *a, uint64_t name)
{
	struct an_state *st = a->st;
	uint64_t *ix = u64map_get(&st->kernel_idx, name);
	struct an_kernel_stat *k;
	if (ix) {
		k = VEC_AT(&a->kernels, struct an_kernel_stat, *ix);
	} else {
		const void *was = a->kernels.data;
		k = vec_push(&a->kernels);
		if (!k || u64map_put(&st->kernel_idx, name, a->kernels.n - 1))
			return NULL;
		k->name = name;
		/* The table's pointers are into the old vector's. */
		if (a->kernels.data != was)
			kernel_direct_clear(st);
	}
	st->kernel_direct[kernel_direct_slot(name)] = (struct kernel_direct){.name = name, .k = k};
	return k;
}

/* Kernel statistics by name (diff, the report's top kernels). */
HOT_FN void kernel_stat(struct analysis *a, uint64_t name, uint64_t ns)
{
	const struct kernel_direct *e = &a->st->kernel_direct[kernel_direct_slot(name)];
	struct an_kernel_stat *k = e->k;
	if (__builtin_expect(e->name != name, 0) && !(k = kernel_stat_slow(a, name)))
		return;
	/* (a slot's key matched: its entry, no NULL) */
	if (!k)
		__builtin_unreachable();
	k->count++;
	k->total_ns += ns;
	if (ns > k->max_ns)
		k->max_ns = ns;
}

/* ------------------------------------------------------------ records */
/* The hook of each pass, in the list's order, called directly: each pass's
 * ops are a constant (its header), so a hook it does not have costs nothing
 * and the one it has is inlined where it is small. */
#define CALL_HOOK(pass, hook, ...)                                                                                     \
	if (an_pass_##pass.hook)                                                                                       \
		an_pass_##pass.hook(__VA_ARGS__);
#define DISPATCH(hook, ...) AN_PASSES(CALL_HOOK, hook, __VA_ARGS__)
/* The same, in a first analysis that only finds the steps when detect
 * (a constant where the hot paths take a copy of their own for it): only
 * the passes whose ops say detect. */
#define DISPATCH_M(only_detect, hook, ...) DISPATCH_S(only_detect, 0, hook, __VA_ARGS__)
/* (DISPATCH_M's rows) And without the steps pass's hooks when inert_steps (a
 * constant where it is 1): an analysis whose steps pass collects nothing
 * and has collected nothing, whose launch and GPU hooks then do nothing
 * (steps_work answers no item, steps_gpu finds none), and that keeps no
 * call-site log (steps_inert). */
#define CALL_HOOK_S(pass, only_detect, inert_steps, hook, ...)                                                         \
	if (an_pass_##pass.hook && (!(only_detect) || an_pass_##pass.detect) &&                                        \
	    !((inert_steps) && AN_PASS_##pass == AN_PASS_steps))                                                       \
		an_pass_##pass.hook(__VA_ARGS__);
#define DISPATCH_S(only_detect, inert_steps, hook, ...)                                                                \
	AN_PASSES(CALL_HOOK_S, only_detect, inert_steps, hook, __VA_ARGS__)

/* The events the services publish (AN_EVENTS): direct calls too. */
#define AN_UNPAREN(...) __VA_ARGS__
#define AN_EVENT_DEFINE(name, params, args)                                                                            \
	void an_publish_##name params                                                                                  \
	{                                                                                                              \
		if (a->st->detect_only) {                                                                              \
			DISPATCH_M(1, name, AN_UNPAREN args)                                                           \
		} else {                                                                                               \
			DISPATCH(name, AN_UNPAREN args)                                                                \
		}                                                                                                      \
	}
AN_EVENTS(AN_EVENT_DEFINE)
#undef AN_EVENT_DEFINE

/* GPU records, to the passes that read them; kind is a constant where the
 * hot kind takes its own copy (an_pass_record). */
static inline __attribute__((always_inline)) void on_gpu_k(struct analysis *a, const struct tbp_record *r,
							   unsigned kind, int detect, int in_block, int inert_steps)
{
	struct an_state *st = a->st;
	const struct tbp_gpu_kernel *g = &r->u.gpu_kernel; /* common prefix */
	uint64_t s = r->ts, e = g->end < r->ts ? r->ts : g->end;
	/* (a detecting analysis's times, counts of GPU records and unjoined
	 * ones are not read: it is dropped once the steps are found, and what
	 * reports replays the tape: an_core.c run_steps, an_catch_up) */
	if (!detect || !in_block)
		note_time_k(a, s, e, in_block);
	if (kind == TBP_K_GPU_SYNC) {
		a->n_gpu_sync++;
		return;
	}
	/* Finding the steps needs only the join (a work item's GPU time). */
	struct an_device *d = NULL;
	struct an_stream *str = NULL;
	if (!detect) {
		/* The pair asked last (its stream never NULL: no test for it),
		 * else get_device and get_stream. */
		d = st->c_gpu_d;
		str = st->c_gpu_s;
		if (__builtin_expect(!(st->c_gpu_dev == g->device && st->c_gpu_stream == g->stream && d), 0)) {
			struct gpu_place p = get_gpu_place_slow(a, g->device, g->stream);
			if (!p.d || !p.str)
				return;
			d = p.d;
			str = p.str;
		}
	}
	static const struct corr_ent no_launch;
	const struct corr_ent *api = g->corr ? corr_take(st, g->corr) : NULL;
	int joined = api != NULL;
	if (!joined) {
		if (!detect) {
			a->unmatched_gpu++;
			a->unmatched_kernels += kind == TBP_K_GPU_KERNEL;
		}
		api = &no_launch;
	}
	if (detect && in_block) /* (its end read after the join's store: no copy of it kept across) */
		e = g->end < s ? s : g->end;
	if (!detect) /* (read by the bursts pass alone) */
		st->gpu_now = s;
	struct an_gpu_ev ev = {.r = r, .kind = kind, .s = s, .e = e, .d = d, .str = str, .api = api, .joined = joined};
	if (detect) {
		switch (kind) {
		case TBP_K_GPU_KERNEL:
			DISPATCH_M(1, on_kernel, a, &ev)
			break;
		case TBP_K_GPU_MEMCPY:
			DISPATCH_M(1, on_gpu_memcpy, a, &ev)
			break;
		case TBP_K_GPU_MEMSET:
			DISPATCH_M(1, on_gpu_memset, a, &ev)
			break;
		}
		return;
	}
	/* The device's idle before this work (d->busy as the passes left it
	 * with the previous record): its first work, or a gap. */
	if (d->busy.open && s > d->busy.end) {
		uint64_t idle = s - d->busy.end;
		d->idle_total += idle;
		ev.idle = idle;
		DISPATCH_S(0, inert_steps, on_gpu_idle, a, &ev, idle)
	} else if (__builtin_expect(!d->busy.open, 0)) {
		DISPATCH_S(0, inert_steps, on_gpu_idle, a, &ev, 0)
	}
	if (joined) {
		/* (a site by its index is no NULL: only site_stat's answer is tested) */
		struct an_site_stat *ss;
		if (api->site)
			VEC_AT(&a->sites, struct an_site_stat, (size_t)api->site - 1)->gpu_ns += e - s;
		else if ((ss = site_stat(a, api->callpath, api->native)))
			ss->gpu_ns += e - s;
	}

	/* Each kind: its counts (the trace's, the device's, the stream's), and
	 * its hook in every pass. */
#define GPU_KIND(kind_, count, dev_count, hook)                                                                        \
	case kind_:                                                                                                    \
		a->count++;                                                                                            \
		d->dev_count++;                                                                                        \
		str->dev_count++;                                                                                      \
		DISPATCH_S(0, inert_steps, hook, a, &ev)                                                               \
		break;
	switch (kind) {
		GPU_KIND(TBP_K_GPU_KERNEL, n_gpu_kernel, kernels, on_kernel)
		GPU_KIND(TBP_K_GPU_MEMCPY, n_gpu_memcpy, copies, on_gpu_memcpy)
		GPU_KIND(TBP_K_GPU_MEMSET, n_gpu_memset, sets, on_gpu_memset)
	}
#undef GPU_KIND
	if (kind == TBP_K_GPU_KERNEL)
		kernel_stat(a, g->name, e - s);
}

/* Host API calls, to the passes that read them; kind as in on_gpu_k. */
static inline __attribute__((always_inline)) void on_api_k(struct analysis *a, const struct tbp_record *r,
							   unsigned kind, int detect, int in_block, int inert_steps)
{
	struct an_state *st = a->st;
	const struct tbp_call *c = &r->u.call;
	uint64_t ts = r->ts, end = c->end < ts ? ts : c->end;
	/* (a detecting analysis's: only its launches, copies and memsets are
	 * counted, an_pass_detect_done reads them; as in on_gpu_k) */
	if (!detect || !in_block)
		note_time_k(a, ts, end, in_block);
	if (!detect)
		a->n_api++;
	struct an_call_ev ev = {.r = r, .kind = kind, .ts = ts, .end = end, .dur = end - ts};
	ev.th = detect ? NULL : get_thread(st, r->tid);
	ev.phase = cur_phase(a);
	/* cudaStreamWaitEvent (torch's wait_stream) makes a stream wait on the
	 * GPU; the host goes on at once: not a sync of the host. */
	ev.host_waits = kind == TBP_K_SYNC && r->u.sync.sync_kind != TBP_SYNC_STREAM_WAIT_EVENT;

	/* site1: its index + 1 (0: none), for the log and the join. */
	struct site_hit hit = site_stat_ix(a, c->callpath, c->native);
	uint32_t site1 = hit.site1;
	struct an_site_stat *ss = ev.ss = hit.ss;
	if (ss) {
		/* (a first analysis that only finds the steps is dropped, its
		 * sites' times and counts unread: an_core.c run_steps) */
		if (!detect) {
			ss->api_ns += ev.dur;
			ss->calls++;
		}
		/* (detect 2: no iteration in progress and the log on, as the
		 * block loop found them: pass_block_detect) */
		if (detect != 2 && st->in_iter)
			site_iter_note(ss, st->iter_no);
		if (detect == 2 || (!inert_steps && st->site_log_on))
			site1 ? site_log_add(a, ts, site1) : (void)(st->site_log_lost = 1);
	}
	/* cudaErrorNotReady / CUDA_ERROR_NOT_READY / hipErrorNotReady (600) is
	 * a poll's answer (cudaStreamQuery, cudaEventQuery), not a failure. */
	ev.failed = c->result != 0 && c->result != 600;
	if (ev.failed && !detect)
		a->n_errors++;
	/* Each kind: its count, and its hook in every pass. */
#define CALL_KIND(kind_, count, hook)                                                                                  \
	case kind_:                                                                                                    \
		a->count += count_if;                                                                                  \
		DISPATCH_S(detect, inert_steps, hook, a, &ev)                                                          \
		break;
	int count_if = kind != TBP_K_LAUNCH || !ev.failed; /* (a refused launch is no launch) */
	switch (kind) {
		CALL_KIND(TBP_K_LAUNCH, n_launch, on_launch)
		CALL_KIND(TBP_K_MEMCPY, n_memcpy, on_memcpy)
		CALL_KIND(TBP_K_MEMSET, n_memset, on_memset)
		CALL_KIND(TBP_K_SYNC, n_sync, on_sync)
		CALL_KIND(TBP_K_MALLOC, n_malloc, on_malloc)
		CALL_KIND(TBP_K_FREE, n_free, on_free)
	default:
		DISPATCH_S(detect, inert_steps, on_api, a, &ev)
		break;
	}
#undef CALL_KIND
	/* A call the runtime refused has no GPU side to wait for. */
	if (st->expect_gpu && !c->result && (kind == TBP_K_LAUNCH || kind == TBP_K_MEMCPY || kind == TBP_K_MEMSET)) {
		/* Only on_api hands an API record over as a launch: a graph launch
		 * (the block loop's launches are launch records). */
		struct corr_ent *ce = kind == TBP_K_LAUNCH && !in_block && r->kind != TBP_K_LAUNCH
					      ? graph_corr_slot(st, c->corr)
					      : corr_slot(st, c->corr);
		if (ce && detect) {
			/* A first analysis that only finds the steps reads only
			 * the item (steps_on_gpu); its table is dropped with it. */
			ce->item = ev.item;
		} else if (ce) {
			ce->callpath = c->callpath;
			ce->native = c->native;
			ce->ts = ts;
			ce->end = end;
			ce->tid = r->tid;
			/* The GPU side adds its time to the same site: no second lookup. */
			ce->site = site1;
			ce->item = ev.item;
			ce->syncs = ev.th ? ev.th->syncs : 0;
			ce->api_ring = ev.api_ring;
		}
	}
	/* A sync the host waited in ends the thread's runs of tiny kernels
	 * (bursts): counted after the join, which keeps the count before it. */
	if (kind == TBP_K_SYNC && ev.host_waits && ev.th)
		ev.th->syncs++;
}

static __attribute__((noinline)) void on_gpu(struct analysis *a, const struct tbp_record *r)
{
	on_gpu_k(a, r, r->kind, a->st->detect_only, 0, 0);
}

/* A graph launch (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch: recorded as an API call) is a
 * launch to every pass: the kernels it replays carry its corr, so they are joined to its line, and
 * the step holding it did GPU work. */
static int is_graph_launch(const struct tbp_record *r)
{
	const struct tbp_api_info *ai = r->kind == TBP_K_API ? tbp_api_lookup((unsigned)r->u.call.api) : NULL;
	return ai && ai->category == TBP_CAT_GRAPH;
}

static __attribute__((noinline)) void on_api(struct analysis *a, const struct tbp_record *r)
{
	if (is_graph_launch(r)) {
		struct an_state *st = a->st;
		if (!r->u.call.result) {
			a->n_graph_launch++;
			if (st->in_iter && st->iter_steady && a->graph_launch_last_iter != st->iter_no) {
				a->graph_launch_last_iter = st->iter_no;
				a->graph_launch_iters++;
			}
			if (st->in_iter)
				graph_iter_note(a, st->iter_no);
			if (st->site_log_on)
				site_log_add(a, r->ts, 0);
		}
		if (st->detect_only)
			on_api_k(a, r, TBP_K_LAUNCH, 1, 0, 0);
		else
			on_api_k(a, r, TBP_K_LAUNCH, 0, 0, 0);
		return;
	}
	if (a->st->detect_only)
		on_api_k(a, r, r->kind, 1, 0, 0);
	else
		on_api_k(a, r, r->kind, 0, 0, 0);
}

/* Launches and kernels are most records: each takes a copy of on_api_k or
 * on_gpu_k specialised for its kind, and so do the copies and memsets of a
 * training step (one of each per step is common); every other kind goes
 * through the general one. */
#define SPECIALISED_KINDS(X)                                                                                           \
	X(on_launch, on_api_k, TBP_K_LAUNCH)                                                                           \
	X(on_memcpy, on_api_k, TBP_K_MEMCPY)                                                                           \
	X(on_memset, on_api_k, TBP_K_MEMSET)                                                                           \
	X(on_kernel, on_gpu_k, TBP_K_GPU_KERNEL)                                                                       \
	X(on_gpu_memcpy, on_gpu_k, TBP_K_GPU_MEMCPY)                                                                   \
	X(on_gpu_memset, on_gpu_k, TBP_K_GPU_MEMSET)
/* Each twice: for the analysis that reports, and (name_d) for a first
 * analysis that only finds the steps. */
#define KIND_COPY(name, body, kind)                                                                                    \
	COLD_FN void name(struct analysis *a, const struct tbp_record *r)                                              \
	{                                                                                                              \
		body(a, r, kind, 0, 0, 0);                                                                              \
	}                                                                                                              \
	COLD_FN void name##_d(struct analysis *a, const struct tbp_record *r)                                          \
	{                                                                                                              \
		body(a, r, kind, 1, 0, 0);                                                                              \
	}
SPECIALISED_KINDS(KIND_COPY)
#undef KIND_COPY

/* A Python span, to every pass's span hook. */
static void on_span(struct analysis *a, const struct tbp_record *r)
{
	struct an_span_ev e = {.tid = r->tid, .ts = r->ts, .callpath = r->u.py_span.callpath};
	e.end = r->u.py_span.end < e.ts ? e.ts : r->u.py_span.end;
	note_time(a, e.ts, e.end);
	a->n_spans++;
	if (a->st->detect_only) {
		DISPATCH_M(1, on_span, a, &e)
	} else {
		DISPATCH(on_span, a, &e)
	}
}

static __attribute__((noinline)) void pass_record_other(struct analysis *a, const struct tbp_record *r);

HOT_FN void record_one(struct analysis *a, const struct tbp_record *r)
{
	if (r->kind == TBP_K_LAUNCH)
		on_launch(a, r);
	else if (r->kind == TBP_K_GPU_KERNEL)
		on_kernel(a, r);
	else
		pass_record_other(a, r);
}

HOT_FN void record_one_d(struct analysis *a, const struct tbp_record *r)
{
	if (r->kind == TBP_K_LAUNCH)
		on_launch_d(a, r);
	else if (r->kind == TBP_K_GPU_KERNEL)
		on_kernel_d(a, r);
	else
		pass_record_other(a, r);
}

void an_pass_record(struct analysis *a, const struct tbp_record *r)
{
	if (a->st->detect_only)
		record_one_d(a, r);
	else
		record_one(a, r);
}

COLD_FN void pass_block_detect_general(struct analysis *a, const struct tbp_record *const *recs, unsigned n,
				       uint64_t *last_ts);
/* an_pass_block's loop, made four times with `detect` and `inert_steps`
 * constants: twice for a first analysis that only finds the steps (detect
 * 2: as pass_block_detect found it, no iteration in progress and the call
 * sites logged; 1: any), for an analysis that reports with its steps known (the replay after detection,
 * a trace with the runner's marks: inert_steps, steps_inert), and for one
 * that reports and still collects the steps' items (a first analysis in
 * full).  The launches and kernels are inlined here: a call of their own
 * saved and restored the registers again for each. */
static inline __attribute__((always_inline)) void pass_block_k(struct analysis *a, const struct tbp_record *const *recs,
							       unsigned n, uint64_t *last_ts, int detect,
							       int inert_steps)
{
	uint64_t last = *last_ts;
	/* Each record's time into a->first_ts, as note_time would: only the
	 * first and the late ones can be earlier than every record before
	 * them (the others are at or after `last`, the latest in time order). */
	if (n && recs[0]->ts < a->first_ts)
		a->first_ts = recs[0]->ts;
	/* (counted up from -n to 0 over the block's end: one register for the
	 * place and the end, which the hooks' registers otherwise push out) */
	const struct tbp_record *const *recs_end = recs + n;
	for (ptrdiff_t i = -(ptrdiff_t)n; i < 0; i++) {
		const struct tbp_record *r = recs_end[i];
		if (r->ts < last) {
			a->late_records++;
			if (r->stream_kind == TBP_STREAM_GPU)
				a->late_gpu_records++;
			if (r->ts < a->first_ts)
				a->first_ts = r->ts;
		} else {
			last = r->ts;
		}
		if (r->kind == TBP_K_LAUNCH)
			on_api_k(a, r, TBP_K_LAUNCH, detect, 1, inert_steps);
		else if (r->kind == TBP_K_GPU_KERNEL)
			on_gpu_k(a, r, TBP_K_GPU_KERNEL, detect, 1, inert_steps);
		else {
			pass_record_other(a, r);
			/* A marker that began an iteration (or anything that
			 * ended the log): the rest of the block the general way. */
			if (detect == 2 && __builtin_expect(a->st->in_iter || !a->st->site_log_on, 0)) {
				*last_ts = last;
				pass_block_detect_general(a, recs_end + i + 1, (unsigned)-(i + 1), last_ts);
				return;
			}
		}
	}
	*last_ts = last;
}

COLD_FN void pass_block_detect_general(struct analysis *a, const struct tbp_record *const *recs, unsigned n,
				       uint64_t *last_ts)
{
	pass_block_k(a, recs, n, last_ts, 1, 0);
}

/* A detecting analysis's block: most often with no iteration in progress
 * (no marks yet, or none at all) and the call-site log on, which only a
 * marker (in_iter) or the log's own growth (site_log_grow) change: the loop
 * made for that (detect 2) does not test them at every call, and hands the
 * rest of its block to the general one when a record other than a launch
 * or kernel changed them. */
COLD_FN void pass_block_detect(struct analysis *a, const struct tbp_record *const *recs, unsigned n, uint64_t *last_ts)
{
	if (!a->st->in_iter && a->st->site_log_on)
		pass_block_k(a, recs, n, last_ts, 2, 0);
	else
		pass_block_detect_general(a, recs, n, last_ts);
}

COLD_FN void pass_block_collect(struct analysis *a, const struct tbp_record *const *recs, unsigned n,
				uint64_t *last_ts)
{
	pass_block_k(a, recs, n, last_ts, 0, 0);
}

/* The steps pass collects no items and holds none: its hooks for launches,
 * copies, memsets and their GPU records do nothing (steps_work answers 0,
 * every join entry's item is 0); and no call-site log is kept.  Each is
 * on only from the start, so this holds to the end once it holds. */
static inline int steps_inert(const struct analysis *a)
{
	const struct steps_state *ss = an_pass_state(a, steps);
	return !ss->collect_on && !ss->work.n && !a->st->site_log_on;
}

/* A block with a time a pass asked for (st->due_ts) inside: each record
 * after the due hooks of its time (until the due time is past it), the
 * records between as blocks (only a due hook moves st->due_ts). */
COLD_FN void pass_block_due(struct analysis *a, const struct tbp_record *const *recs, unsigned n, uint64_t *last_ts)
{
	unsigned i = 0;
	while (i < n) {
		uint64_t t = recs[i]->ts;
		if (t >= a->st->due_ts) {
			DISPATCH(on_due, a, t)
			continue;
		}
		unsigned j = i + 1;
		while (j < n && recs[j]->ts < a->st->due_ts)
			j++;
		/* (none at or past the due time: no due hook in it) */
		an_pass_block(a, recs + i, j - i, last_ts);
		i = j;
	}
}

void an_pass_block(struct analysis *a, const struct tbp_record *const *recs, unsigned n, uint64_t *last_ts)
{
	/* Records come in time order: a time a pass asked for falls inside
	 * this block only if its last record reaches it. */
	if (__builtin_expect(n && recs[n - 1]->ts >= a->st->due_ts, 0)) {
		pass_block_due(a, recs, n, last_ts);
		return;
	}
	if (__builtin_expect(a->st->detect_only, 0)) {
		pass_block_detect(a, recs, n, last_ts);
		return;
	}
	if (__builtin_expect(!steps_inert(a), 0)) {
		pass_block_collect(a, recs, n, last_ts);
		return;
	}
	pass_block_k(a, recs, n, last_ts, 0, 1);
}

static void pass_record_other(struct analysis *a, const struct tbp_record *r)
{
	int detect = a->st->detect_only;
	switch (r->kind) {
#define KIND_CASE(name, body, kind)                                                                                    \
	case kind:                                                                                                     \
		if (detect)                                                                                            \
			name##_d(a, r);                                                                                \
		else                                                                                                   \
			name(a, r);                                                                                    \
		break;
		SPECIALISED_KINDS(KIND_CASE)
#undef KIND_CASE
	case TBP_K_API:
	case TBP_K_MALLOC:
	case TBP_K_FREE:
	case TBP_K_SYNC:
		on_api(a, r);
		break;
	case TBP_K_GPU_SYNC:
		on_gpu(a, r);
		break;
	case TBP_K_PY_SPAN:
		on_span(a, r);
		break;
	case TBP_K_MARKER:
		note_time(a, r->ts, r->ts);
		if (detect) {
			DISPATCH_M(1, on_marker, a, r)
		} else {
			DISPATCH(on_marker, a, r)
		}
		break;
	case TBP_K_RANGE:
		an_ranges_record(a, r);
		break;
	case TBP_K_LOST:
		a->lost += r->u.lost.count;
		a->lost_by_source[r->u.lost.source < 8 ? r->u.lost.source : 0] += r->u.lost.count;
		break;
	case TBP_K_END:
		a->has_end = 1;
		a->end_lost = r->u.end.lost;
		break;
	case TBP_K_NOTICE:
		if (r->u.notice.code == TBP_NOTICE_NO_CUPTI) {
			a->no_cupti_notice = 1;
			a->st->expect_gpu = 0;
		} else if (r->u.notice.code == TBP_NOTICE_CUPTI_IN_USE || r->u.notice.code == TBP_NOTICE_CUPTI_ERROR) {
			a->cupti_trouble_notice = 1;
		} else if (r->u.notice.code == TBP_NOTICE_CUPTI_JOIN) {
			a->join_notice = r->u.notice.message;
		}
		break;
	case TBP_K_PROCESS:
		if (!a->proc_cwd)
			a->proc_cwd = r->u.process.cwd;
		if (!a->has_process) {
			a->has_process = 1;
			a->process = r->u.process;
		}
		break;
	case TBP_K_THREAD: {
		/* Named once per thread; a few threads: a search is enough. */
		uint32_t tid = (uint32_t)r->u.thread.tid;
		size_t i = 0;
		while (i < a->thread_names.n && VEC_AT(&a->thread_names, struct an_thread_name, i)->tid != tid)
			i++;
		struct an_thread_name *tn = i < a->thread_names.n ? VEC_AT(&a->thread_names, struct an_thread_name, i)
				: a->thread_names.n < 4096 ? vec_push(&a->thread_names) : NULL;
		if (tn) {
			tn->tid = tid;
			tn->name = r->u.thread.name;
		}
		break;
	}
	case TBP_K_DEVICE: {
		struct an_device *d = get_device(a, r->u.device.device);
		if (d)
			d->name = r->u.device.name;
		break;
	}
	}
}

/* ------------------------------------------------------------ lifecycle */
int an_pass_init(struct analysis *a)
{
	struct an_state *st = calloc(1, sizeof *st);
	if (!st)
		return -1;
	st->corr_pool.item = sizeof(struct corr_ent);
	st->corr_freelist.item = sizeof(uint64_t);
	st->threads.item = sizeof(struct thread_st);
	st->all_findings.item = sizeof(struct an_finding);
	/* Without CUPTI nothing will claim a correlation id: do not keep them. */
	st->expect_gpu = 1;
	/* (made here, not at the first launch: the hot paths need not test
	 * for it; its pages are the kernel's zero pages until written) */
	if (!(st->corr_ring = calloc(CORR_RING, sizeof *st->corr_ring))) {
		free(st);
		return -1;
	}
	st->due_ts = UINT64_MAX;
	st->c_thread_tid = UINT64_MAX;
	site_direct_clear(st);
	kernel_direct_clear(st);
	st->site_log.item = sizeof(struct site_log_ent);
	/* A first analysis of a trace that may have steps to detect. */
	st->site_log_on = !a->opts.synth_steps && !a->opts.no_markers;
	a->st = st;
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->state_size && !(st->pass[i] = calloc(1, passes[i]->state_size)))
			return -1;
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->init && passes[i]->init(a))
			return -1;
	return 0;
}

static int cmp_kernel(const void *x, const void *y)
{
	const struct an_kernel_stat *a = x, *b = y;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	return a->name < b->name ? -1 : a->name > b->name;
}

uint64_t an_pass_reread_begin(struct analysis *a)
{
	uint64_t all = 0;
	if (a->st->detect_only)
		return 0;
	for (size_t i = 0; i < N_PASSES; i++) {
		a->st->reread_kinds[i] = passes[i]->reread_begin ? passes[i]->reread_begin(a) : 0;
		all |= a->st->reread_kinds[i];
	}
	return all;
}

void an_pass_reread_record(struct analysis *a, const struct tbp_record *r)
{
	for (size_t i = 0; i < N_PASSES; i++)
		if (a->st->reread_kinds[i] >> r->kind & 1)
			passes[i]->reread_record(a, r);
}

void an_pass_reread_end(struct analysis *a)
{
	for (size_t i = 0; i < N_PASSES; i++)
		if (a->st->reread_kinds[i] && passes[i]->reread_end)
			passes[i]->reread_end(a);
}

int an_pass_finish(struct analysis *a)
{
	int detect = a->st->detect_only;
	/* The end of the records: what is still open closes. */
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->flush && (!detect || passes[i]->detect))
			passes[i]->flush(a);
	if (a->first_ts == UINT64_MAX)
		a->first_ts = a->last_ts = 0;
	if (a->markers_used && a->win_end <= a->win_begin)
		a->markers_used = 0;
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->finish && (!detect || passes[i]->detect) && passes[i]->finish(a))
			return -1;
	/* Steps found (or not): the rest is the reporting analysis's. */
	if (detect)
		return 0;
	if (an_findings_finish(a))
		return -1;
	if (a->kernels.n)
		qsort(a->kernels.data, a->kernels.n, sizeof(struct an_kernel_stat), cmp_kernel);
	return 0;
}

void an_pass_detect_only(struct analysis *a)
{
	a->st->detect_only = 1;
}

void an_pass_steps_known(struct analysis *a)
{
	struct steps_state *ss = an_pass_state(a, steps);
	ss->collect_on = 0;
	a->st->site_log_on = 0;
}

/* A detecting analysis whose first this many records brought no Python
 * span or no GPU work reports from the file instead (an_pass_detect_done). */
#define DETECT_BET_RECORDS (1u << 14)

int an_pass_detect_done(const struct analysis *a, uint64_t handed)
{
	const struct steps_state *ss = an_pass_state(a, steps);
	/* The runner's marks (or more items than detection takes): no steps
	 * left to find, unless NVTX ranges name them. */
	if (!ss->collect_on && !a->opts.steps_nvtx)
		return 1;
	/* A bet.  Detecting first, then replaying into the full analysis,
	 * wins where a loop is found and the full passes are dear (GPU work
	 * with Python spans: the gaps pass places each idle piece among the
	 * host's calls and spans), and costs the detecting dispatch, the tape
	 * and the replay where none is: about a third more on a trace of
	 * cheap records (measured: gen_planted big, GPU work without spans,
	 * +31 %; a trace of allocations with a few spans, +35 %).  A trace
	 * that shows no span or no GPU work in its first records is analysed
	 * in full from here, as with the tape off: a loop found in it reads
	 * the file again, as before the tape. */
	if (handed >= DETECT_BET_RECORDS && (!a->n_spans || !(a->n_launch + a->n_memcpy + a->n_memset)))
		return 1;
	return 0;
}

void an_pass_free(struct analysis *a)
{
	struct an_state *st = a->st;
	if (!st)
		return;
	for (size_t i = 0; i < N_PASSES; i++) {
		/* (a pass whose state could not be made has not been set up) */
		if (passes[i]->free && (st->pass[i] || !passes[i]->state_size))
			passes[i]->free(a);
		free(st->pass[i]);
	}
	u64map_free(&st->corr);
	free(st->corr_ring);
	free(st->graph_ring);
	u64map_free(&st->graph_corr);
	vec_free(&st->corr_pool);
	vec_free(&st->corr_freelist);
	u64map_free(&st->dev_idx);
	u64map_free(&st->thread_idx);
	u64map_free(&st->stream_idx);
	u64map_free(&st->finding_idx);
	u64map_free(&st->kernel_idx);
	u64map_free(&st->site_idx);
	vec_free(&st->threads);
	vec_free(&st->all_findings);
	vec_free(&st->site_log);
	free(st);
	a->st = NULL;
}
