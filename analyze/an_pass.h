/*
 * tbanalyze passes: what they share.  Every record reaches the passes once,
 * in time order, through the dispatcher (an_passes.c), which hands each kind
 * of record to the hooks of the passes that read it, as perf hands events to
 * a struct perf_tool's callbacks:
 *
 *   breakdown  (an_pass_breakdown.c)  unions of GPU work per device and stream,
 *                                     the marked window, the HTML timeline
 *   gaps       (an_pass_gaps.c)       idle gaps and what the host did in them,
 *                                     the idle breakdown by cause
 *   bursts     (an_pass_bursts.c)     runs of tiny kernels
 *   copies     (an_pass_copies.c)     scalar copies, ping-pong, sync hotspots
 *   memory     (an_pass_memory.c)     allocations, churn, memory left at exit
 *   spans      (an_pass_spans.c)      host time by Python function
 *   steps      (an_pass_steps.c)      iterations (marks, detected steps)
 *   findings   (an_findings.c)        findings placed, merged and sorted
 *
 * The hooks on the hot path (every launch and kernel) are inline here, so
 * that each of the dispatcher's copies specialised for a record kind stays
 * one function; what they reach rarely (a gap, a burst closing, a new run of
 * work) is out of line in the pass's file.  The other hooks (spans, marks,
 * the end of the trace) are each pass's struct an_pass_ops.
 */
#ifndef TBANALYZE_AN_PASS_H
#define TBANALYZE_AN_PASS_H

#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_gap_index.h"
#include "an_internal.h"

#define HOT_FN static inline __attribute__((always_inline))
#define COLD_FN static __attribute__((noinline))

/* ------------------------------------------------------------ per pass: state */

/* gaps: the host facts a gap is explained by, and the gaps waiting for them. */
#define API_RING 1024
#define SPAN_RING 4096
#define PENDING_GAPS 1024
struct api_ent {
	uint32_t tid;
	uint8_t kind;
	uint8_t copy; /* a copy call: an_copy_bits(), else 0 */
	uint64_t ts, end, callpath, native;
	/* The latest end of this and every call before it in the ring's
	 * order: a scan back for the calls over a gap stops at the first
	 * entry whose max_end is at or before the gap's start. */
	uint64_t max_end;
};
struct span_ent {
	uint32_t tid;
	int backward_wait; /* see struct an_span_stat */
	uint64_t ts, end, callpath;
	uint64_t wait_callpath; /* backward_wait: the user's frame that called backward() */
	uint64_t max_end; /* as api_ent's */
};
struct pgap;
struct gaps_state {
	struct api_ent api[API_RING];
	size_t api_n;
	struct span_ent span[SPAN_RING];
	size_t span_n;
	struct an_span_tree span_tree; /* the ring's slots by earliest start (an_gap_index.h) */
	/* Two queues of PENDING_GAPS pieces: [0] gaps of --gap-us or more (and
	 * short ones cut at a mark), [1] the other short ones, so that the
	 * thousands of a launch-bound loop do not push the long ones out before
	 * their spans come. */
	struct pgap *gaps; /* 2 * PENDING_GAPS */
	size_t gap_head[2], gap_n[2];
	uint64_t api_max_end, span_max_end, gap_max_end[2]; /* the rings' and the queues' latest ends */
	uint64_t gap_kernel_name; /* the kernel ending the gap being made, 0: none */
};

/* bursts: closed bursts not yet added to their finding (struct burst_iv):
 * bursts of one site on several streams overlap in time, so their spans and
 * idle are merged per (finding, device) before adding. */
struct bursts_state {
	struct vec burst_ivs;
	size_t burst_fold_at;
};

/* copies: the latest host-to-device copy to each device pointer and the
 * latest device-to-host copy to each host pointer, armed for a round trip
 * (pp, pp_back: index in pp_pool); for scalar copies, the call paths that move a module's
 * parameters and buffers, and the sites that also copy larger tensors to
 * the device (a batch's). */
struct copies_state {
	struct u64map pp, pp_back;
	struct vec pp_pool;
	struct u64map module_move; /* call path -> 1 + (1: inside Module._apply or _load_from_state_dict) */
	struct u64map batch_sites; /* hash of (call path, native) of a host-to-device copy over the scalar size */
};

/* memory: live allocations by pointer. */
struct memory_state {
	struct u64map allocs;
	struct vec alloc_pool, alloc_freelist;
};

/* spans: statistics by call path. */
struct spans_state {
	struct u64map span_idx;
};

/* steptime: the unions' measures summed over the devices at the open
 * step's begin. */
struct steptime_state {
	int open;
	uint64_t begin, busy0, dm0;
	struct vec pending; /* struct an_step_time: gap pieces of the open step */
};

/* steps: marked iterations, and what step detection keeps on a first pass
 * over a trace without marks (an_steps_detect.c reads it). */
/* 1 Mi items of each kind (32 MiB): a trace with more detects no steps. */
#define STEP_ITEMS_MAX (1u << 20)
#define STEP_ITEM_CP_MAX (1ull << 32)
/* A launch, copy or memset, consecutive ones from one call path and thread
 * as one (gpu_ns: the GPU time of their records, added as they are joined);
 * or a Python span (gpu_ns 0). */
struct step_item {
	uint64_t ts, end, gpu_ns;
	uint32_t cp, tid;
};
struct synth_mark;
struct steps_state {
	struct vec work;    /* struct step_item, time order */
	struct vec spans;   /* struct step_item, end order */
	struct vec imports; /* struct an_step: import spans (not the program's own work) */
	/* The host's other calls (syncs, allocations, the rest but launches,
	 * copies and memsets), consecutive ones from one call path and thread
	 * with no work between them as one, time order: not work, but a step's too (an .item()'s sync at
	 * the end of a step); only the last step's end reads them. */
	struct vec calls;   /* struct step_item */
	uint32_t work_cp, work_tid; /* the latest work item's */
	uint32_t call_cp, call_tid; /* the latest call item's */
	size_t call_work_n; /* work.n when it was made: work since ends it */
	int calls_full;     /* more calls than kept: the later ones are not */
	int collect_on;     /* a first pass over a trace without marks (so far) */
	int collect_full;   /* more items than kept: no detection */
	/* Marked iterations: length and phase of each (time per step). */
	struct vec iters; /* struct iter_len */
	/* Synthetic marks for detected steps (second pass), in time order. */
	struct synth_mark *synth;
	size_t n_synth, synth_at;
	int in_synth;
	uint64_t warmup_value; /* WARMUP_END's value */
	uint64_t next_synth_ts;
};

/* ------------------------------------------------------------ shared state */

/* What a GPU record needs of the call that launched it. */
struct corr_ent {
	uint64_t callpath, native, ts, end; /* end: when the call returned */
	uint32_t tid;
	uint32_t site; /* index + 1 in a->sites of the call's site, 0 = none */
	uint32_t item; /* index + 1 of its step detection item, 0 = none */
	uint32_t syncs; /* the launching thread's host syncs so far (bursts) */
};
/* 4096 entries (192 KiB, cache-resident): in time order, the launches
 * still waiting for their GPU side are about the runtime's queue depth. */
#define CORR_RING (1u << 12)
#define GRAPH_RING (1u << 10)
struct corr_slot {
	uint64_t corr; /* 0: empty */
	struct corr_ent e;
};
/* key + 1 -> index into a vector (0: empty slot); a miss falls back to the
 * map, so the cache only ever answers what the map would. */
#define HOT_CACHE 64
struct hot_cache {
	uint64_t key1[HOT_CACHE];
	uint64_t ix[HOT_CACHE];
};
static inline uint64_t *hot_get(struct hot_cache *c, uint64_t key)
{
	unsigned slot = (unsigned)(key ^ key >> 17) & (HOT_CACHE - 1);
	return c->key1[slot] == key + 1 ? &c->ix[slot] : NULL;
}
static inline void hot_put(struct hot_cache *c, uint64_t key, uint64_t ix)
{
	unsigned slot = (unsigned)(key ^ key >> 17) & (HOT_CACHE - 1);
	c->key1[slot] = key + 1;
	c->ix[slot] = ix;
}

#define SITE_DIRECT 64
struct site_direct {
	uint64_t cp, nat, ix1; /* ix1: index + 1 in a->sites, 0 = empty */
};

/* Spans that ended on a thread and whose parent has not ended yet.  Spans
 * reach the file as they end, so when one arrives, the finished spans that
 * began after it are its direct children.  Bounded: past the cap the oldest
 * are forgotten (their parent's self time then counts them). */
#define SPAN_STACK 4096
struct done_span {
	uint64_t ts, end;
	size_t stat; /* index in a->spans */
};
struct thread_st {
	uint32_t tid;
	uint32_t syncs;       /* host syncs made so far (bursts: a sync ends one) */
	int scalar_pending;   /* copies: a scalar copy was this thread's last call */
	size_t scalar_finding;
	/* spans: done[done_base, ndone) (2 * SPAN_STACK slots: a full stack
	 * forgets its oldest by moving its base, and is moved down only when
	 * the slots run out, not at every span) */
	struct done_span *done;
	size_t ndone, done_base;
};

struct an_state {
	struct u64map corr; /* corr -> index in corr_pool */
	struct vec corr_pool, corr_freelist;
	/* In front of the map: a direct-mapped table by corr's low bits.  Ids
	 * grow one by one and the GPU side comes soon after, so nearly every
	 * join is one array access; an entry pushed out by a newer id moves to
	 * the map. */
	struct corr_slot *corr_ring; /* CORR_RING entries; NULL: map only */
	int corr_ring_failed;
	/* Graph launches: every node a replay ran carries the launch's corr, so the entry is not taken
	 * by the first; the last GRAPH_RING launches stay (their replays' records come long before
	 * that many more launches). */
	struct corr_slot *graph_ring; /* GRAPH_RING entries, allocated at the first graph launch */
	struct u64map graph_corr;     /* corr -> index in graph_ring */
	uint64_t graph_next;
	int expect_gpu;

	struct u64map dev_idx, stream_idx, finding_idx, kernel_idx, site_idx, thread_idx;
	struct vec threads;

	struct vec all_findings; /* struct an_finding, every phase */
	uint64_t gpu_now; /* start of the GPU record being handled */

	/* Iterations (marks, or detected steps marked by the steps pass). */
	int in_iter, iter_markers, win_open;
	int iter_steady;  /* the iteration in progress began after WARMUP_END */
	uint64_t iter_begin_ts;
	/* The latest iteration that ended: a gap across its end is cut there. */
	uint64_t last_iter_begin_ts, last_iter_end_ts;
	int last_iter_phase;
	uint64_t iter_no; /* ITER_BEGIN marks seen */
	int phase;        /* cur_phase() since the last mark */

	/* One-entry caches: consecutive records mostly hit the same device,
	 * stream, call site and kernel name. */
	uint64_t c_dev_id, c_stream_key;
	uint64_t c_dev, c_stream, c_stream_key2, c_stream2;
	int c_dev_ok, c_stream_ok;
	uint32_t c_thread_tid;
	size_t c_thread_ix; /* index + 1 in threads, 0 = none */
	/* Call sites and kernel names alternate within a step (a loop body
	 * launches several kernels from several lines): small direct-mapped
	 * caches in front of their maps. */
	struct hot_cache site_cache, kernel_cache;
	struct site_direct site_direct[SITE_DIRECT];

	struct gaps_state gaps;
	struct bursts_state bursts;
	struct copies_state copies;
	struct memory_state mem;
	struct spans_state spans;
	struct steps_state steps;
	struct steptime_state steptime;
};

/* ------------------------------------------------------------ a pass */

/* A Python span as the passes see it (its end clamped to its start); the
 * spans pass, whose hook runs first, fills stat. */
struct an_span_ev {
	uint32_t tid;
	uint64_t ts, end, callpath;
	const struct an_span_stat *stat; /* its function's statistics, NULL when none could be kept */
};

/* The hooks of a pass for the records that are not on the hot path, and its
 * life: init (0 ok, -1 out of memory), the end of the records (flush: close
 * what is still open), the results (finish: 0 ok, -1 out of memory), free. */
struct an_pass_ops {
	const char *name;
	int (*init)(struct analysis *a);
	void (*span)(struct analysis *a, struct an_span_ev *e);
	void (*flush)(struct analysis *a);
	int (*finish)(struct analysis *a);
	void (*free)(struct analysis *a);
};
extern const struct an_pass_ops an_pass_breakdown, an_pass_gaps, an_pass_bursts, an_pass_copies, an_pass_memory,
	an_pass_spans, an_pass_steps, an_pass_findings, an_pass_steptime;

/* ------------------------------------------------------------ shared helpers (an_passes.c) */

struct an_device *get_device_slow(struct analysis *a, uint64_t id);
HOT_FN struct an_device *get_device(struct analysis *a, uint64_t id)
{
	struct an_state *st = a->st;
	if (__builtin_expect(st->c_dev_ok && st->c_dev_id == id, 1))
		return VEC_AT(&a->devices, struct an_device, st->c_dev);
	return get_device_slow(a, id);
}

struct an_stream *get_stream_slow(struct analysis *a, uint64_t key, uint64_t dev, uint64_t stream);
HOT_FN struct an_stream *get_stream(struct analysis *a, uint64_t dev, uint64_t stream)
{
	struct an_state *st = a->st;
	uint64_t key = (dev << 40) ^ stream;
	/* Two entries: kernels and copies often run on two streams. */
	if (__builtin_expect(st->c_stream_ok & 1, 1) && st->c_stream_key == key)
		return VEC_AT(&a->streams, struct an_stream, st->c_stream);
	if ((st->c_stream_ok & 2) && st->c_stream_key2 == key)
		return VEC_AT(&a->streams, struct an_stream, st->c_stream2);
	return get_stream_slow(a, key, dev, stream);
}

struct thread_st *get_thread_slow(struct an_state *st, uint32_t tid);
HOT_FN struct thread_st *get_thread(struct an_state *st, uint32_t tid)
{
	if (__builtin_expect(st->c_thread_ix && st->c_thread_tid == tid, 1))
		return VEC_AT(&st->threads, struct thread_st, st->c_thread_ix - 1);
	return get_thread_slow(st, tid);
}

/* The finding for (kind, cause, phase, site); created on first use. */
struct an_finding *finding(struct analysis *a, int kind, int cause, int phase, uint64_t cp, uint64_t nat);
/* Takes the finding out of the table's index: the next occurrence of its
 * (kind, cause, phase, site) makes a new one. */
void forget_finding(struct analysis *a, const struct an_finding *f);
static inline size_t finding_index(const struct an_state *st, const struct an_finding *f)
{
	return (size_t)(f - VEC_AT(&st->all_findings, struct an_finding, 0));
}

static inline int cur_phase(const struct analysis *a)
{
	const struct an_state *st = a->st;
	if (!st->in_iter)
		return AN_PH_OUTSIDE;
	return st->iter_steady ? AN_PH_STEADY : AN_PH_WARMUP;
}
/* Occurrences that count: with markers, those of the steady-state
 * iterations (every marked iteration when there is no warm-up mark);
 * otherwise all. */
int phase_counts(const struct analysis *a, int phase);
/* At a change of phase, the short gaps of the phase that ends are filed
 * under it (the per-kernel path only adds to one accumulator). */
void phase_update(struct analysis *a);
int u64_cmp(const void *x, const void *y);

/* ------------------------------------------------------------ breakdown */
HOT_FN void un_add(struct an_union *u, uint64_t s, uint64_t e)
{
	if (e < s)
		e = s;
	if (!u->open) {
		u->start = s;
		u->end = e;
		u->open = 1;
		return;
	}
	if (s > u->end) {
		u->closed += u->end - u->start;
		u->start = s;
		u->end = e;
	} else if (e > u->end) {
		u->end = e;
	}
}

/* un_add on a stream's busy union, which also splits the stream's idle
 * as HTA does: the host was late when the work was launched (launch_ts)
 * after the stream's previous work ended. */
HOT_FN void stream_busy_add(struct an_stream *str, uint64_t s, uint64_t e, uint64_t launch_ts)
{
	struct an_union *u = &str->busy;
	if (u->open && s > u->end)
		str->hta_gap[launch_ts > u->end] += s - u->end;
	un_add(u, s, e);
}

void hist_coarsen(struct analysis *a, uint64_t e);
HOT_FN void hist_add(struct analysis *a, struct an_stream *str, uint64_t s, uint64_t e)
{
	if (!a->hist_on) {
		a->hist_on = 1;
		a->hist_origin = s;
		a->hist_w = 1024;
	}
	if (s < a->hist_origin)
		s = a->hist_origin;
	if (e <= s)
		return;
	/* Coarsen every stream together so one bin width serves the picture
	 * (bounded: a nonsense timestamp must not overflow the width). */
	if (e - a->hist_origin > (UINT64_MAX >> 12))
		e = a->hist_origin + (UINT64_MAX >> 12);
	if (e - a->hist_origin > (uint64_t)AN_HIST_BINS * a->hist_w)
		hist_coarsen(a, e);
	uint64_t off = s - a->hist_origin, end = e - a->hist_origin;
	unsigned sh = (unsigned)__builtin_ctzll(a->hist_w);
	/* Most intervals lie inside one bin: the loop below would add end - off
	 * to that bin alone. */
	if ((off >> sh) == ((end - 1) >> sh)) {
		if ((off >> sh) < AN_HIST_BINS)
			str->hist[off >> sh] += end - off;
		return;
	}
	/* hist_w is 1024 doubled: a shift, not a division per record. */
	for (size_t b = off >> sh; b < AN_HIST_BINS && b * a->hist_w < end; b++) {
		uint64_t lo = b * a->hist_w, hi = lo + a->hist_w;
		uint64_t x0 = off > lo ? off : lo, x1 = end < hi ? end : hi;
		if (x1 > x0)
			str->hist[b] += x1 - x0;
	}
}

/* A GPU record's interval into its device's and stream's unions and the
 * timeline (the kind's own unions are the dispatcher's switch). */
HOT_FN void breakdown_gpu(struct analysis *a, struct an_device *d, struct an_stream *str, uint64_t s, uint64_t e,
			  uint64_t launch_ts)
{
	un_add(&d->busy, s, e);
	stream_busy_add(str, s, e, launch_ts);
	hist_add(a, str, s, e);
	if (s < d->first_ts)
		d->first_ts = s;
	if (e > d->last_end)
		d->last_end = e;
	if (s < str->first_ts)
		str->first_ts = s;
	if (e > str->last_end)
		str->last_end = e;
}

/* A gap or burst drawn on the HTML timeline (the longest ones are kept). */
void mark_add(struct analysis *a, int kind, uint64_t dev, uint64_t stream, uint64_t s, uint64_t e);
/* The unions' measures at time t, at a window's begin (end 0) or end. */
void snap_all(struct analysis *a, uint64_t t, int end);

/* Measure of a union up to time t. */
uint64_t an_union_at(const struct an_union *u, uint64_t t);

/* ------------------------------------------------------------ steptime */
/* A step begins, ends (in phase), a gap piece of the device's idle [s, e)
 * is explained by cause (by_cause: its split, AN_CAUSE_N entries). */
void steptime_begin(struct analysis *a, uint64_t t);
void steptime_end(struct analysis *a, uint64_t t, int phase);
void steptime_idle(struct analysis *a, uint64_t s, uint64_t e, const uint64_t *by_cause);
/* A GPU record into the HTML timeline's ring (when kept). */
HOT_FN void timeline_keep(struct analysis *a, unsigned kind, const struct tbp_gpu_kernel *g, uint64_t s, uint64_t e,
			  uint64_t callpath, unsigned copy_kind)
{
	if (__builtin_expect(!a->tl, 1))
		return;
	struct an_tl_event *t = &a->tl[a->tl_seen++ % AN_TL_EVENTS];
	t->start = s;
	t->end = e;
	t->name = kind == TBP_K_GPU_KERNEL ? g->name : 0;
	t->callpath = callpath;
	t->device = (uint32_t)g->device;
	t->stream = (uint32_t)g->stream;
	t->kind = kind == TBP_K_GPU_KERNEL ? AN_TL_KERNEL : kind == TBP_K_GPU_MEMCPY ? AN_TL_COPY : AN_TL_SET;
	t->copy_kind = (uint8_t)copy_kind;
}

/* ------------------------------------------------------------ gaps */
/* A host call into the ring the gaps are explained by. */
HOT_FN void gaps_call(struct an_state *st, uint32_t tid, unsigned kind, uint64_t ts, uint64_t end, uint64_t cp,
		      uint64_t nat, uint8_t copy)
{
	struct api_ent *ae = &st->gaps.api[st->gaps.api_n++ % API_RING];
	ae->tid = tid;
	ae->kind = (uint8_t)kind;
	ae->ts = ts;
	ae->end = end;
	ae->callpath = cp;
	ae->native = nat;
	ae->copy = copy;
	if (end > st->gaps.api_max_end)
		st->gaps.api_max_end = end;
	ae->max_end = st->gaps.api_max_end;
}
void gap_long(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch, uint64_t kernel_name);
void gap_cut_short(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch);
void gap_new(struct analysis *a, uint64_t device, uint64_t start, uint64_t end, const struct corr_ent *launch,
	     int edge);
void gap_short_host(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch);
void gap_short_queued(struct analysis *a, struct an_device *d, uint64_t idle, const struct corr_ent *launch);
/* A gap under the threshold (they come with most kernels of a launch-bound
 * loop): its idle is placed as a long one's is (at the line and cause of
 * what the host did in it), not listed as an occurrence.  The time in such
 * gaps is also summed apart (short_gaps_ns), by whether the launch was late. */
HOT_FN void gap_short(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *api, int joined,
		      uint64_t idle, int host_wait)
{
	d->short_acc[host_wait] += idle;
	if (joined && !host_wait)
		gap_short_queued(a, d, idle, api);
	else
		gap_short_host(a, d, s, joined ? api : NULL);
}
/* The device idle before GPU work starting at s, launched by api (joined:
 * a call of the trace, else one with no times): a gap, or the window's
 * leading edge before the device's first work. */
HOT_FN void gaps_gpu(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *api, int joined,
		     uint64_t kernel_name)
{
	if (d->busy.open && s > d->busy.end) {
		uint64_t idle = s - d->busy.end;
		d->idle_total += idle;
		/* Late when its call had not returned when the GPU ran dry (as
		 * gap_new's queued).  An unjoined record's launch has ts and
		 * end 0: not late. */
		int host_wait = (api->end ? api->end : api->ts) > d->busy.end;
		struct an_state *st = a->st;
		if (idle >= a->opts.gap_ns)
			gap_long(a, d, s, joined ? api : NULL, kernel_name);
		else if (__builtin_expect(st->last_iter_end_ts > d->busy.end ||
					  (st->in_iter && st->iter_begin_ts > d->busy.end), 0))
			/* Across an iteration's mark: cut there as a long one, each
			 * piece in its own iteration (whole, it went to the phase
			 * after the mark: the runner's time and the idle before the
			 * window counted as the steady state's). */
			gap_cut_short(a, d, s, joined ? api : NULL);
		else
			gap_short(a, d, s, api, joined, idle, host_wait);
	} else if (__builtin_expect(!d->busy.open, 0)) {
		/* The device's first work: the idle before it is the window's edge. */
		d->edge_from = a->first_ts < s ? a->first_ts : s;
		gap_new(a, d->id, d->edge_from, s, joined ? api : NULL, AN_EDGE_LEADING);
	}
}
/* The gaps still waiting for their spans, filed under phase from, go to to. */
void gaps_phase_moved(struct analysis *a, int from, int to);
/* One device's idle time of the window, by cause, into a->idle. */
void idle_breakdown_add(struct analysis *a, struct an_device *d, uint64_t idle);

/* ------------------------------------------------------------ bursts */
void burst_close(struct analysis *a, struct an_stream *s);
void bursts_close_all(struct analysis *a);
/* Call paths x and y end in the same function (file and name). */
int same_leaf_function(const struct analysis *a, uint64_t x, uint64_t y);

/* A kernel or memset (the launch that made it: api) into its stream's run
 * of tiny kernels issued back to back: from one loop, with gaps of launch
 * overhead (under the idle-gap threshold, so no idle gap is ever inside a
 * burst: no idle counted twice), no host sync between their launches. */
HOT_FN void burst_kernel(struct analysis *a, const struct an_device *d, struct an_stream *s, uint64_t ts,
			 uint64_t end, const struct corr_ent *api)
{
	struct an_burst_run *r = &s->run;
	uint64_t nat = api->native;
	int is_short = end - ts < a->opts.burst_kernel_ns;
	/* Keyed on the line where the finding is shown: the innermost frame of
	 * the user's code (torch.norm, `1.0 / t`, F.relu launch from inside
	 * torch's Python wrappers, the user's line is the same), the leaf with
	 * --where=leaf. */
	uint64_t cp = api->callpath && !a->opts.where_leaf ? an_user_callpath(a, api->callpath) : api->callpath;
	/* Same call site, or another line of the same loop body: a sibling
	 * line under the same caller (an optimizer's per-parameter loop), or
	 * another line of the same function run at the top (a script's own
	 * loop at module level: no caller).  One Python line launches through
	 * different C++ paths: its native stacks count only without Python. */
	int same = cp ? cp == r->callpath : nat == r->native && !r->callpath;
	if (!same && r->count && cp && an_callpath_parent(a, cp) == r->parent &&
	    (r->parent || same_leaf_function(a, cp, r->callpath)))
		same = 1;
	/* Host work between them (Python, a sync, CPU work) ends it: its gap is
	 * the host's, an idle gap of its own. */
	int apart = r->count && (ts >= r->last_end + a->opts.gap_ns ||
				 (api->tid == r->last_tid && api->syncs != r->last_syncs));
	/* In time order the device's idle since the run's last kernel is at
	 * most ts - last_end, so this never holds; a kernel that came late
	 * (beyond the reorder window) may follow an idle gap already counted
	 * past it, whose idle the run must not take in as well. */
	if (r->count && d->idle_total - r->dev_idle_last >= a->opts.gap_ns)
		apart = 1;
	if (r->count && (!is_short || !same || apart))
		burst_close(a, s);
	if (!is_short)
		return;
	uint32_t k = 0;
	while (k < r->nsites && (r->site_cp[k] != cp || (!cp && r->site_nat[k] != nat)))
		k++;
	if (k < r->nsites) {
		r->site_n[k]++;
	} else if (k < 4) {
		r->site_cp[k] = cp;
		r->site_leaf[k] = api->callpath;
		r->site_nat[k] = nat;
		r->site_n[k] = 1;
		r->nsites = k + 1;
	}
	r->last_tid = api->tid;
	r->last_syncs = api->syncs;
	if (!r->count) {
		r->first_start = ts;
		r->last_end = end;
		r->callpath = cp;
		r->native = nat;
		r->parent = an_callpath_parent(a, cp);
		r->count = 1;
		r->dev_idle_first = r->dev_idle_last = d->idle_total;
		return;
	}
	if (ts > r->last_end)
		r->idle_ns += ts - r->last_end;
	if (end > r->last_end)
		r->last_end = end;
	/* The device is busy from this kernel's start to last_end, so no gap
	 * found later ends inside the burst: this is its idle so far. */
	r->dev_idle_last = d->idle_total;
	r->count++;
}

/* ------------------------------------------------------------ copies */
/* Any host call: a scalar copy's stall includes the sync right after it. */
HOT_FN void copies_call(struct an_state *st, struct thread_st *th, int host_waits, uint64_t dur)
{
	if (th && th->scalar_pending) {
		th->scalar_pending = 0;
		if (host_waits && th->scalar_finding < st->all_findings.n) {
			struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, th->scalar_finding);
			f->flagged++;
			f->total_ns += dur;
		}
	}
}
void copies_memcpy(struct analysis *a, const struct tbp_record *r, struct thread_st *th, int phase, uint64_t dur);
void copies_sync(struct analysis *a, const struct tbp_record *r, int phase, uint64_t dur);

/* ------------------------------------------------------------ memory */
void memory_malloc(struct analysis *a, const struct tbp_record *r, struct an_site_stat *ss, int phase, uint64_t dur);
void memory_free(struct analysis *a, const struct tbp_record *r);

/* ------------------------------------------------------------ steps */
uint32_t step_item_new(struct an_state *st, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp);
/* A launch, copy or memset that the runtime accepted: the work whose lines
 * show the training loop (a trace without marks, first pass).  Returns the
 * index + 1 of its item (the GPU side adds its time there), 0: none. */
HOT_FN uint32_t steps_work(struct an_state *st, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	struct steps_state *ss = &st->steps;
	if (!ss->collect_on)
		return 0;
	if (ss->work.n && cp == ss->work_cp && tid == ss->work_tid) {
		struct step_item *w = VEC_AT(&ss->work, struct step_item, ss->work.n - 1);
		if (end > w->end)
			w->end = end;
		return (uint32_t)ss->work.n;
	}
	return step_item_new(st, tid, ts, end, cp);
}
void step_call_new(struct an_state *st, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp);
/* A host call that is not work (a sync, an allocation, another API call):
 * the steps' ends read them (an_steps_detect.c). */
HOT_FN void steps_call(struct an_state *st, uint32_t tid, uint64_t ts, uint64_t end, uint64_t cp)
{
	struct steps_state *ss = &st->steps;
	if (!ss->collect_on || ss->calls_full)
		return;
	if (ss->calls.n && cp == ss->call_cp && tid == ss->call_tid && ss->work.n == ss->call_work_n) {
		struct step_item *w = VEC_AT(&ss->calls, struct step_item, ss->calls.n - 1);
		if (end > w->end)
			w->end = end;
		return;
	}
	step_call_new(st, tid, ts, end, cp);
}
/* A joined GPU record's time, to the item of the call that made it. */
HOT_FN void steps_gpu(struct an_state *st, uint32_t item, uint64_t ns)
{
	if (__builtin_expect(item != 0, 0) && item <= st->steps.work.n)
		VEC_AT(&st->steps.work, struct step_item, item - 1)->gpu_ns += ns;
}
/* A marker (the runner's, or one of the detected steps). */
void steps_marker(struct analysis *a, const struct tbp_record *r);
/* The synthetic marks due by time t, before the record at t. */
void synth_emit(struct analysis *a, uint64_t t);
/* Step detection (an_steps_detect.c): the training loop's steps from the
 * items kept by the first pass, into a->step_ivs; a->steps.source set when
 * found, else a->steps.none says why. */
void steps_detect(struct analysis *a);

#endif
