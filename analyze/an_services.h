/*
 * tbanalyze's services: what every pass may call, below the passes (a pass
 * calls these, never another pass).  The dispatcher (an_passes.c) owns the
 * state here and keeps it up to date before any pass sees a record:
 *
 *   tables     devices, streams, threads (get_device, get_stream, get_thread)
 *   join       each GPU record's launch (struct corr_ent)
 *   findings   the table every pass files into (finding, forget_finding)
 *   phases     the iteration in progress and its phase (cur_phase,
 *              phase_counts, phase_update); the steps pass drives them
 *   unions     the device and stream unions' measures (an_union_at,
 *              snap_all), the idle breakdown by cause (idle_breakdown_add)
 *   marks      gaps and bursts drawn on the HTML timeline (mark_add)
 *   events     what one pass learns that others need, published to the
 *              passes that take it (AN_EVENTS: an_publish_*)
 */
#ifndef TBANALYZE_AN_SERVICES_H
#define TBANALYZE_AN_SERVICES_H

#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_internal.h"

#define HOT_FN static inline __attribute__((always_inline))
#define COLD_FN static __attribute__((noinline))

/* At most this many passes (an_pass.h checks its list against it). */
#define AN_MAX_PASSES 16

/* Events a pass publishes through the services for the passes that take
 * them (a hook of the same name in struct an_pass_ops); each is
 * (name, parameters, arguments):
 *   phase_ending    a mark is about to end the phase in progress (an
 *                   iteration's begin or end, WARMUP_END, the open iteration
 *                   closed at the end of the trace): close what is open in it
 *   step_begin      a step (marked iteration, or detected) begins at t
 *   step_end        it ends at t, in phase
 *   idle_explained  a piece [s, e) of a device's idle, split by cause
 *                   (by_cause: AN_CAUSE_N entries); or the sum of pieces
 *                   that lie in one iteration (or between the same two),
 *                   [s, e) from the earliest start to the latest end
 *                   (the gaps pass's idle_batch)
 *   phase_moved     what was filed under phase from is now under to (a
 *                   second WARMUP_END) */
#define AN_EVENTS(X)                                                                                                   \
	X(phase_ending, (struct analysis * a), (a))                                                                    \
	X(step_begin, (struct analysis * a, uint64_t t), (a, t))                                                       \
	X(step_end, (struct analysis * a, uint64_t t, int phase), (a, t, phase))                                       \
	X(idle_explained, (struct analysis * a, uint64_t s, uint64_t e, const uint64_t *by_cause), (a, s, e, by_cause)) \
	X(phase_moved, (struct analysis * a, int from, int to), (a, from, to))

/* ------------------------------------------------------------ shared state */

/* What a GPU record needs of the call that launched it. */
struct corr_ent {
	uint64_t callpath, native, ts, end; /* end: when the call returned */
	uint32_t tid;
	uint32_t site; /* index + 1 in a->sites of the call's site, 0 = none */
	uint32_t item; /* index + 1 of its step detection item, 0 = none */
	uint32_t syncs; /* the launching thread's host syncs so far (bursts) */
	/* The gaps pass's count of ring calls once this call was in its ring
	 * (an_call_ev.api_ring): equal to the count now, the newest ring call
	 * is this one (gap_short_host); 0: none. */
	uint64_t api_ring;
};
/* 4096 entries (256 KiB, cache-resident): in time order, the launches
 * still waiting for their GPU side are about the runtime's queue depth. */
#define CORR_RING (1u << 12)
#define GRAPH_RING (1u << 10)
struct corr_slot {
	uint64_t corr; /* 0: empty */
	struct corr_ent e;
};
_Static_assert(sizeof(struct corr_slot) == 64, "64 bytes: a slot's address is a shift, not a multiply");
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

/* A call site's entry in a->sites by (cp, nat) itself, the answer's
 * pointer kept (no index to scale on the hot path), dropped when the vector
 * moves (site_direct_clear).  An empty slot j holds the key (0, j ^ 1),
 * which site_direct_slot never places at j: the key's test alone tells a
 * hit, no flag to test. */
#define SITE_DIRECT 64
struct site_direct {
	uint64_t cp, nat;
	struct an_site_stat *ss;
	uint64_t ix1; /* index + 1 in a->sites, at most UINT32_MAX (a later site is not kept here) */
};
_Static_assert(sizeof(struct site_direct) == 32, "32 bytes: a slot's address is a shift");
static inline unsigned site_direct_slot(uint64_t cp, uint64_t nat)
{
	return (unsigned)(cp ^ (cp >> 13) ^ nat) & (SITE_DIRECT - 1);
}

/* A kernel name's statistics in a->kernels, direct-mapped by the name as
 * site_direct is by its pair (an empty slot j: the name j ^ 1, which
 * kernel_direct_slot never places at j), dropped when the vector moves. */
#define KERNEL_DIRECT 64
struct kernel_direct {
	uint64_t name;
	struct an_kernel_stat *k;
};
static inline unsigned kernel_direct_slot(uint64_t name)
{
	return (unsigned)(name ^ name >> 17) & (KERNEL_DIRECT - 1);
}

struct thread_st {
	uint32_t tid;
	uint32_t syncs;       /* host syncs made so far (bursts: a sync ends one) */
};

/* A call from site (index + 1; 0: a graph launch) at the time of the entry
 * before it + dt (an_state.site_log; 8 bytes, not 16: the entries are in
 * time order, one a call, most microseconds apart; the first's distance is
 * from an_state.site_log_base).  A distance of SITE_LOG_SKIP or more (4.3 s
 * without a call) is carried by entries of dt SITE_LOG_SKIP and site 0
 * before the call's, which only move the time (no call's dt is
 * SITE_LOG_SKIP).  A call earlier than the one before (a late record,
 * which the log cannot answer for anyway) ends the log (site_log_lost). */
struct site_log_ent {
	uint32_t dt;
	uint32_t site;
};
#define SITE_LOG_SKIP UINT32_MAX
/* The log's cap (32 MiB, SITE_LOG_SKIP entries aside): a longer trace is
 * analysed again to count the calls. */
#define SITE_LOG_MAX (1u << 22)
struct analysis;
/* A call into the log as the dispatcher logs it (an_passes.c; for tests). */
void an_site_log_add(struct analysis *a, uint64_t ts, uint32_t site);

struct an_state {
	struct u64map corr; /* corr -> index in corr_pool */
	struct vec corr_pool, corr_freelist;
	/* In front of the map: a direct-mapped table by corr's low bits.  Ids
	 * grow one by one and the GPU side comes soon after, so nearly every
	 * join is one array access; an entry pushed out by a newer id moves to
	 * the map. */
	struct corr_slot *corr_ring; /* CORR_RING entries (an_pass_init); the map holds what they cannot */
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
	 * stream, call site and kernel name.
	 * The entries themselves, not their index: only the slow paths add
	 * to the tables (and may move them), and they set the caches again. */
	uint64_t c_dev_id, c_stream_key;
	uint64_t c_dev, c_stream, c_stream_key2, c_stream2;
	int c_dev_ok, c_stream_ok;
	/* The tid get_thread answered last (a 32-bit value: UINT64_MAX, set
	 * by an_pass_init, is none, one test for a hit) */
	uint64_t c_thread_tid;
	struct an_device *c_dev_p;
	struct an_stream *c_stream_p, *c_stream2_p;
	struct thread_st *c_thread_p;
	/* A GPU record's device and stream together (get_gpu_place_slow): the
	 * last pair asked for, neither NULL, while c_gpu_d is not (the slow
	 * paths, which may move the tables, set it NULL: the hit's one test). */
	uint64_t c_gpu_dev, c_gpu_stream;
	struct an_device *c_gpu_d;
	struct an_stream *c_gpu_s;
	/* Once the timeline's marks are full (mark_add): their slots as a
	 * binary min-heap by (length, slot), the first of the shortest at the
	 * top; mark_heap_ok 0: to be built. */
	uint16_t mark_heap[AN_MAX_MARKS];
	int mark_heap_ok;
	/* Call sites and kernel names alternate within a step (a loop body
	 * launches several kernels from several lines): small direct-mapped
	 * caches in front of their maps. */
	struct hot_cache site_cache;
	struct site_direct site_direct[SITE_DIRECT];
	struct kernel_direct kernel_direct[KERNEL_DIRECT];

	/* Each pass's own state (its ops' state_size, zeroed), by its
	 * AN_PASS_* number (an_pass.h). */
	void *pass[AN_MAX_PASSES];
	/* The record kinds each pass asked to read again (an_pass_reread_begin). */
	uint64_t reread_kinds[AN_MAX_PASSES];
	/* A pass's due hook runs before the first record at or after due_ts
	 * (the steps pass: the marks of detected steps). */
	uint64_t due_ts;

	/* A first analysis of a trace without marks: each call's time and
	 * site, and each graph launch's time, so that the sites' iterations
	 * (late_warmup, graph_warmup: an_core.c) can be counted for the steps
	 * it finds without analysing the trace again (an_sites_replay). */
	struct vec site_log; /* struct site_log_ent, in the order the calls came */
	uint64_t site_log_base;  /* the time its first entry's dt is from */
	uint64_t site_log_ts;    /* the time of its latest entry */
	size_t site_log_skips;   /* its SITE_LOG_SKIP entries (not counted to SITE_LOG_MAX) */
	int site_log_on;     /* logging */
	int site_log_lost;   /* an entry could not be kept: the log cannot answer */
	int detect_only;     /* a first analysis that only finds the steps (an_passes.c, an_core.c) */
};

/* an_publish_<event>(...): the event to each pass that takes it, in the
 * passes' order (defined by the dispatcher, an_passes.c, which knows them). */
#define AN_EVENT_PUBLISH(name, params, args) void an_publish_##name params;
AN_EVENTS(AN_EVENT_PUBLISH)
#undef AN_EVENT_PUBLISH

/* ------------------------------------------------------------ tables, findings, phases (an_services.c) */

struct an_device *get_device_slow(struct analysis *a, uint64_t id);
HOT_FN struct an_device *get_device(struct analysis *a, uint64_t id)
{
	struct an_state *st = a->st;
	if (__builtin_expect(st->c_dev_ok && st->c_dev_id == id, 1))
		return st->c_dev_p;
	return get_device_slow(a, id);
}

struct an_stream *get_stream_slow(struct analysis *a, uint64_t key, uint64_t dev, uint64_t stream);
HOT_FN struct an_stream *get_stream(struct analysis *a, uint64_t dev, uint64_t stream)
{
	struct an_state *st = a->st;
	uint64_t key = (dev << 40) ^ stream;
	/* Two entries: kernels and copies often run on two streams. */
	if (__builtin_expect(st->c_stream_ok & 1, 1) && st->c_stream_key == key)
		return st->c_stream_p;
	if ((st->c_stream_ok & 2) && st->c_stream_key2 == key)
		return st->c_stream2_p;
	return get_stream_slow(a, key, dev, stream);
}

/* get_device and get_stream of a GPU record (NULL each when out of
 * memory), in that order; the pair, when neither is NULL, kept for the
 * next record (c_gpu_*: the dispatcher's on_gpu_k tests it first).
 * Returned together (in two registers: no variable in memory). */
struct gpu_place {
	struct an_device *d;
	struct an_stream *str;
};
struct gpu_place get_gpu_place_slow(struct analysis *a, uint64_t dev, uint64_t stream);

struct thread_st *get_thread_slow(struct an_state *st, uint32_t tid);
HOT_FN struct thread_st *get_thread(struct an_state *st, uint32_t tid)
{
	if (__builtin_expect(st->c_thread_tid == tid, 1)) {
		/* (an entry of the table: no NULL for the callers to test) */
		if (!st->c_thread_p)
			__builtin_unreachable();
		return st->c_thread_p;
	}
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
/* What was filed under phase from is now under to (a second WARMUP_END):
 * the findings (their key goes: later occurrences under from make new
 * ones), the devices' short gaps, and, by the phase_moved event, what each
 * pass filed. */
void phase_move(struct analysis *a, int from, int to);
int u64_cmp(const void *x, const void *y);

/* A thread's index in st->threads (a pass keeps its per-thread state by it). */
static inline size_t thread_index(const struct an_state *st, const struct thread_st *th)
{
	return (size_t)(th - VEC_AT(&st->threads, struct thread_st, 0));
}

/* Item i of v (zeroed items pushed up to it), NULL when out of memory: a
 * pass's own table by an index of the services' (a thread's). */
void *vec_slot(struct vec *v, size_t i);

/* ------------------------------------------------------------ unions */
/* A stream's busy union whose open is this stands for its device's busy
 * and dm unions: the device's first stream, while it has no other, has
 * every GPU record of the device, so its unions are the device's (the
 * same records in the same order); its own are made when a second stream
 * of the device comes (get_stream_slow).  Its readers: an_stream_unions. */
#define AN_UNION_MIRROR 2
static inline int stream_mirrors(const struct an_stream *s)
{
	return s->busy.open == AN_UNION_MIRROR;
}
/* Stream s's busy and dm unions (its device's while it mirrors them). */
void an_stream_unions(const struct analysis *a, const struct an_stream *s, const struct an_union **busy,
		      const struct an_union **dm);

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

/* un_add on a union made open and empty (start = end = closed = 0): as
 * un_add would from the closed empty union, with the same measures
 * (an_union_at, an_union_total), without the test for its first add. */
HOT_FN void un_add_open(struct an_union *u, uint64_t s, uint64_t e)
{
	if (e < s)
		e = s;
	if (s > u->end) {
		u->closed += u->end - u->start;
		u->start = s;
		u->end = e;
	} else if (e > u->end) {
		u->end = e;
	}
}

/* un_add on an open union that s is past the end of (the dispatcher's
 * idle before a GPU record, an_gpu_ev.idle, says so): its interval so far
 * closes, s starts the next. */
HOT_FN void un_add_past(struct an_union *u, uint64_t s, uint64_t e)
{
	if (e < s)
		e = s;
	u->closed += u->end - u->start;
	u->start = s;
	u->end = e;
}

/* Measure of a union up to time t. */
uint64_t an_union_at(const struct an_union *u, uint64_t t);
/* The unions' measures at time t, at a window's begin (end 0) or end. */
void snap_all(struct analysis *a, uint64_t t, int end);
/* One device's idle time of the window, by cause, into a->idle. */
void idle_breakdown_add(struct analysis *a, struct an_device *d, uint64_t idle);
/* A gap or burst drawn on the HTML timeline (the longest ones are kept). */
void mark_add(struct analysis *a, int kind, uint64_t dev, uint64_t stream, uint64_t s, uint64_t e);

/* The findings' end (an_findings.c): placed, merged, kept and sorted, after
 * every pass has finished. */
int an_findings_finish(struct analysis *a);

#endif
