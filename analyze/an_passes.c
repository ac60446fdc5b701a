/*
 * tbanalyze engine, part 2: the passes.  Every record is seen once, in time
 * order (see the merger in an_core.c); each pass keeps per-device, per-stream
 * or per-call-site state only.
 *
 * - breakdown: unions of kernel/memcpy/memset intervals per device and
 *   stream, with snapshots at the runner's iteration markers;
 * - idle gaps: a pending list classified once host facts are in (spans may
 *   reach the file after the GPU records they explain, and vice versa);
 * - kernel bursts, scalar copies, ping-pong, sync hotspots, allocation churn;
 * - host time by Python call path from spans, kernel statistics for diff.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_internal.h"

/* Helpers on the launch and kernel paths: always inlined, so that each of
 * an_pass_record's specialised copies is one function; the rare steps they
 * reach (gaps, bursts closing, map fallbacks) stay out of line. */
#define HOT_FN static inline __attribute__((always_inline))
#define COLD_FN static __attribute__((noinline))

#define API_RING 1024
#define SPAN_RING 4096
#define PENDING_GAPS 1024

struct api_ent {
	uint32_t tid;
	uint8_t kind;
	uint8_t copy; /* a copy call: an_copy_bits(), else 0 */
	uint64_t ts, end, callpath, native;
};
struct span_ent {
	uint32_t tid;
	int backward_wait; /* see struct an_span_stat */
	uint64_t ts, end, callpath;
	uint64_t wait_callpath; /* backward_wait: the user's frame that called backward() */
};
/* A host call or Python span kept with a gap: what the responsible host
 * thread was doing during it. */
#define GAP_CALLS 24
#define GAP_SPANS 16
struct gap_call {
	uint64_t ts, end, callpath, native;
	int sync;
	uint8_t copy; /* a copy call: an_copy_bits(), else 0 */
};
struct gap_span {
	uint64_t ts, end, callpath;
	int backward_wait;
	uint64_t wait_callpath;
};
/* One piece of an idle gap (a gap crossing an iteration boundary is cut
 * there), waiting for the spans that explain it: spans reach the file as
 * they end, after the GPU records of the gap. */
struct pgap {
	uint64_t device, start, end;
	uint8_t phase, edge;
	int queued;      /* the next work was launched before the GPU ran dry */
	int has_launch;
	uint64_t launch_cp, launch_nat, launch_ts;
	uint64_t resume; /* when the host issued the next work (launch, else gap end) */
	uint32_t tid;    /* the host thread held responsible */
	int has_tid;
	struct gap_call calls[GAP_CALLS];
	unsigned ncalls;
	struct gap_span spans[GAP_SPANS];
	unsigned nspans;
	uint64_t ctx_cp, ctx_dur; /* innermost span of another thread around the piece */
	uint64_t kernel_name;     /* the kernel that ended the gap */
};
/* What a GPU record needs of the call that launched it. */
struct corr_ent {
	uint64_t callpath, native, ts, end; /* end: when the call returned */
	uint32_t tid;
	uint32_t site; /* index + 1 in a->sites of the call's site, 0 = none */
};
/* 4096 entries (192 KiB, cache-resident): in time order, the launches
 * still waiting for their GPU side are about the runtime's queue depth. */
#define CORR_RING (1u << 12)
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

struct corr_slot {
	uint64_t corr; /* 0: empty */
	struct corr_ent e;
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
	int scalar_pending;
	size_t scalar_finding;
	struct done_span *done;
	size_t ndone;
};
struct pp_ent {
	uint64_t callpath, native, bytes, dur;
	int armed;
};
struct alloc_ent {
	uint64_t bytes, device;
	size_t finding; /* index + 1 in all_findings of the allocating site's churn finding */
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
	int expect_gpu;

	struct api_ent api[API_RING];
	size_t api_n;
	struct span_ent span[SPAN_RING];
	size_t span_n;
	struct pgap gaps[PENDING_GAPS];
	size_t gap_head, gap_n;

	struct u64map dev_idx, stream_idx, finding_idx, kernel_idx, span_idx, site_idx, thread_idx;
	struct u64map pp, allocs;
	struct vec pp_pool, alloc_pool, alloc_freelist;
	struct vec threads;

	struct vec all_findings; /* struct an_finding, every phase */
	/* Closed bursts not yet added to their finding (struct burst_iv):
	 * bursts of one site on several streams overlap in time, so their
	 * spans and idle are merged per (finding, device) before adding. */
	struct vec burst_ivs;
	size_t burst_fold_at;
	uint64_t gpu_now; /* start of the GPU record being handled */

	int in_iter, iter_markers, win_open;
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
	uint64_t iter_begin_ts;
	/* The latest iteration that ended: a gap across its end is cut there. */
	uint64_t last_iter_begin_ts, last_iter_end_ts;
	int last_iter_phase;
	uint64_t iter_no; /* ITER_BEGIN marks seen */
	uint64_t gap_kernel_name; /* the kernel ending the gap being made, 0: none */
	int phase;                /* cur_phase() since the last mark */
	/* Step detection (a trace without marks): the times of the latest
	 * launches, so that a span can count the launches inside it, and per
	 * span call path the calls that held launches. */
	uint64_t launch_n;
	uint64_t launch_ring[1u << 16]; /* LAUNCH_RING */
	struct u64map cand_idx;
	struct vec cands; /* struct step_cand */
	/* Marked iterations: length and phase of each (time per step). */
	struct vec iters; /* struct iter_len */
	/* Synthetic marks for detected steps (second pass), in time order. */
	struct synth_mark *synth;
	size_t n_synth, synth_at;
	int in_synth;
	uint64_t warmup_value; /* WARMUP_END's value */
	uint64_t next_synth_ts;
	/* The launches, copies and memsets in time order, consecutive ones
	 * from one call path as one run (at most WORK_RUNS_MAX runs), kept
	 * while they may serve: a first pass, until a mark shows the steps. */
	struct vec work_runs; /* struct work_run */
	uint64_t work_run_cp; /* the last run's call path */
	int work_runs_on;
	int work_runs_full;
	struct pend_span *pend; /* spans waiting for the launches inside them */
	size_t pend_head, pend_n;
	uint64_t pend_due;      /* end of the oldest pending span, UINT64_MAX: none */
};

static int phase_counts(const struct analysis *a, int phase);

#define LAUNCH_RING (1u << 16)
#define CAND_IVS 4096 /* steps kept per candidate loop function */
struct step_cand {
	uint64_t callpath, launches, count;
	uint32_t tid;
	int unusable; /* calls on several threads, or one inside another: not a loop's steps */
	struct vec ivs; /* struct an_step */
};
/* 1 Mi runs (16 MiB): a trace with more detects its steps from spans only.
 * A run is its first call's start and, packed, its call path (ids are
 * interned in order: a trace with one past 2^32 detects from spans only)
 * and how long after its start its last call ended (ns, at most 4.3 s: a
 * longer run of one line's work is a loop of that line, not a step). */
#define WORK_RUNS_MAX (1u << 20)
#define WORK_RUN_CP_MAX (1ull << 32)
struct work_run {
	uint64_t ts, packed;
};
static inline uint64_t work_run_pack(uint64_t cp, uint64_t dur)
{
	return cp << 32 | (dur < UINT32_MAX ? dur : UINT32_MAX);
}
static inline uint64_t work_run_cp(const struct work_run *w)
{
	return w->packed >> 32;
}
static inline uint64_t work_run_end(const struct work_run *w)
{
	return w->ts + (uint32_t)w->packed;
}
struct iter_len {
	uint64_t ns;
	int phase;
};
struct synth_mark {
	uint64_t ts, kind;
};

/* ------------------------------------------------------------ unions */
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
	if (e < s)
		e = s;
	if (!u->open) {
		u->start = s;
		u->end = e;
		u->open = 1;
		return;
	}
	if (s > u->end) {
		str->hta_gap[launch_ts > u->end] += s - u->end;
		u->closed += u->end - u->start;
		u->start = s;
		u->end = e;
	} else if (e > u->end) {
		u->end = e;
	}
}

/* Measure of the union up to time t (every interval starting before t has
 * been added, so closed ones end by t). */
static uint64_t un_at(const struct an_union *u, uint64_t t)
{
	uint64_t v = u->closed;
	if (u->open && u->start < t)
		v += (u->end < t ? u->end : t) - u->start;
	return v;
}

uint64_t an_union_total(const struct an_union *u)
{
	return u->closed + (u->open ? u->end - u->start : 0);
}

static void un_snap(struct an_union *u, uint64_t t, int end)
{
	if (end)
		u->snap_end = un_at(u, t);
	else
		u->snap_begin = un_at(u, t);
}

static void snap_all(struct analysis *a, uint64_t t, int end)
{
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		un_snap(&d->busy, t, end);
		un_snap(&d->dm, t, end);
		un_snap(&d->kern, t, end);
		un_snap(&d->set, t, end);
		for (int k = 0; k < AN_CK_N; k++)
			un_snap(&d->ck[k], t, end);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		struct an_stream *s = VEC_AT(&a->streams, struct an_stream, i);
		un_snap(&s->busy, t, end);
		un_snap(&s->dm, t, end);
	}
}

static uint64_t un_window(const struct analysis *a, const struct an_union *u)
{
	if (a->markers_used)
		return u->snap_end > u->snap_begin ? u->snap_end - u->snap_begin : 0;
	return an_union_total(u);
}

void an_device_breakdown(const struct analysis *a, const struct an_device *d, struct an_breakdown *b)
{
	memset(b, 0, sizeof *b);
	b->window_ns = a->markers_used ? a->win_end - a->win_begin
			: (a->last_ts > a->first_ts ? a->last_ts - a->first_ts : 0);
	b->busy_ns = un_window(a, &d->busy);
	b->dm_ns = un_window(a, &d->dm);
	b->active_ns = b->busy_ns > b->dm_ns ? b->busy_ns - b->dm_ns : 0;
	b->idle_ns = b->window_ns > b->busy_ns ? b->window_ns - b->busy_ns : 0;
	b->kernel_ns = un_window(a, &d->kern);
	b->memset_ns = un_window(a, &d->set);
	for (int k = 0; k < AN_CK_N; k++)
		b->ck_ns[k] = un_window(a, &d->ck[k]);
}

void an_stream_breakdown(const struct analysis *a, const struct an_stream *s, uint64_t *busy, uint64_t *dm)
{
	*busy = un_window(a, &s->busy);
	*dm = un_window(a, &s->dm);
}

int an_has_gpu(const struct analysis *a)
{
	return a->n_gpu_kernel + a->n_gpu_memcpy + a->n_gpu_memset > 0;
}

/* ------------------------------------------------------------ lookups */
static struct an_device *get_device_slow(struct analysis *a, uint64_t id);
static inline struct an_device *get_device(struct analysis *a, uint64_t id)
{
	struct an_state *st = a->st;
	if (__builtin_expect(st->c_dev_ok && st->c_dev_id == id, 1))
		return VEC_AT(&a->devices, struct an_device, st->c_dev);
	return get_device_slow(a, id);
}

static struct an_device *get_device_slow(struct analysis *a, uint64_t id)
{
	struct an_state *st = a->st;
	uint64_t *ix = u64map_get(&st->dev_idx, id);
	if (ix) {
		st->c_dev_ok = 1;
		st->c_dev_id = id;
		st->c_dev = *ix;
		return VEC_AT(&a->devices, struct an_device, *ix);
	}
	struct an_device *d = vec_push(&a->devices);
	if (!d || u64map_put(&st->dev_idx, id, a->devices.n - 1))
		return NULL;
	d->id = id;
	d->first_ts = UINT64_MAX;
	return d;
}

static struct an_stream *get_stream_slow(struct analysis *a, uint64_t key, uint64_t dev, uint64_t stream);
static inline struct an_stream *get_stream(struct analysis *a, uint64_t dev, uint64_t stream)
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

static struct an_stream *get_stream_slow(struct analysis *a, uint64_t key, uint64_t dev, uint64_t stream)
{
	struct an_state *st = a->st;
	uint64_t *ix = u64map_get(&st->stream_idx, key);
	if (ix) {
		/* The entry hit before moves to the second place. */
		if (st->c_stream_ok & 1) {
			st->c_stream_key2 = st->c_stream_key;
			st->c_stream2 = st->c_stream;
			st->c_stream_ok |= 2;
		}
		st->c_stream_ok |= 1;
		st->c_stream_key = key;
		st->c_stream = *ix;
		return VEC_AT(&a->streams, struct an_stream, *ix);
	}
	struct an_stream *s = vec_push(&a->streams);
	if (!s || u64map_put(&st->stream_idx, key, a->streams.n - 1))
		return NULL;
	s->device = dev;
	s->stream = stream;
	s->first_ts = UINT64_MAX;
	return s;
}

COLD_FN struct thread_st *get_thread_slow(struct an_state *st, uint32_t tid);
HOT_FN struct thread_st *get_thread(struct an_state *st, uint32_t tid)
{
	if (__builtin_expect(st->c_thread_ix && st->c_thread_tid == tid, 1))
		return VEC_AT(&st->threads, struct thread_st, st->c_thread_ix - 1);
	return get_thread_slow(st, tid);
}

/* By a map, not a scan: a server process can have many threads calling CUDA. */
COLD_FN struct thread_st *get_thread_slow(struct an_state *st, uint32_t tid)
{
	uint64_t *ix = u64map_get(&st->thread_idx, tid);
	size_t i;
	if (ix) {
		i = *ix;
	} else {
		struct thread_st *t = vec_push(&st->threads);
		if (!t)
			return NULL;
		t->tid = tid;
		i = st->threads.n - 1;
		if (u64map_put(&st->thread_idx, tid, i)) {
			st->threads.n--;
			return NULL;
		}
	}
	st->c_thread_tid = tid;
	st->c_thread_ix = i + 1;
	return VEC_AT(&st->threads, struct thread_st, i);
}

/* A new run of work from another call path than the last one's (out of
 * line: most launches continue a run or come from a path seen before). */
static __attribute__((noinline)) void work_run_add(struct an_state *st, uint64_t ts, uint64_t end, uint64_t cp)
{
	struct work_run *w;
	st->work_run_cp = cp;
	if (cp >= WORK_RUN_CP_MAX || st->work_runs.n >= WORK_RUNS_MAX || !(w = vec_push(&st->work_runs))) {
		st->work_runs_full = 1;
		st->work_runs_on = 0;
		return;
	}
	*w = (struct work_run){.ts = ts, .packed = work_run_pack(cp, end - ts)};
}

/* The finding for (kind, cause, phase, site); created on first use. */
static struct an_finding *finding(struct analysis *a, int kind, int cause, int phase, uint64_t cp, uint64_t nat)
{
	struct an_state *st = a->st;
	uint64_t h = an_hash_combine(an_hash_combine(an_hash_combine(kind, cause), phase), an_hash_combine(cp, nat));
	if (h == UINT64_MAX)
		h = 0;
	uint64_t *ix = u64map_get(&st->finding_idx, h);
	if (ix)
		return VEC_AT(&st->all_findings, struct an_finding, *ix);
	struct an_finding *f = vec_push(&st->all_findings);
	if (!f || u64map_put(&st->finding_idx, h, st->all_findings.n - 1))
		return NULL;
	f->kind = kind;
	f->cause = cause;
	f->phase = phase;
	f->callpath = cp;
	f->native = nat;
	return f;
}

static int cur_phase(const struct analysis *a)
{
	const struct an_state *st = a->st;
	if (!st->in_iter)
		return AN_PH_OUTSIDE;
	return a->warmup_seen ? AN_PH_STEADY : AN_PH_WARMUP;
}

/* At a change of phase, the short gaps of the phase that ends are filed
 * under it (the per-kernel path only adds to one accumulator). */
static void phase_update(struct analysis *a)
{
	struct an_state *st = a->st;
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		for (int k = 0; k < 2; k++) {
			d->idle_short[st->phase][k] += d->short_acc[k];
			d->short_acc[k] = 0;
		}
	}
	st->phase = cur_phase(a);
}

static struct an_site_stat *site_stat_slow(struct analysis *a, uint64_t cp, uint64_t nat);
/* In front of site_stat_slow: a direct-mapped table by (cp, nat) itself, no
 * hash to compute; it keeps what the slow path answered for that pair. */
static inline struct an_site_stat *site_stat(struct analysis *a, uint64_t cp, uint64_t nat)
{
	struct an_state *st = a->st;
	struct site_direct *e = &st->site_direct[(cp ^ (cp >> 13) ^ nat) & (SITE_DIRECT - 1)];
	if (__builtin_expect(e->ix1 && e->cp == cp && e->nat == nat, 1))
		return VEC_AT(&a->sites, struct an_site_stat, e->ix1 - 1);
	struct an_site_stat *s = site_stat_slow(a, cp, nat);
	if (s) {
		e->cp = cp;
		e->nat = nat;
		e->ix1 = (uint64_t)(s - VEC_AT(&a->sites, struct an_site_stat, 0)) + 1;
	}
	return s;
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
	ix = u64map_get(&st->site_idx, h);
	if (ix) {
		hot_put(&st->site_cache, h, *ix);
		return VEC_AT(&a->sites, struct an_site_stat, *ix);
	}
	struct an_site_stat *s = vec_push(&a->sites);
	if (!s || u64map_put(&st->site_idx, h, a->sites.n - 1))
		return NULL;
	s->callpath = cp;
	s->native = nat;
	return s;
}

/* ------------------------------------------------------------ timeline */
COLD_FN void hist_coarsen(struct analysis *a, uint64_t e)
{
	while (e - a->hist_origin > (uint64_t)AN_HIST_BINS * a->hist_w) {
		for (size_t i = 0; i < a->streams.n; i++) {
			struct an_stream *x = VEC_AT(&a->streams, struct an_stream, i);
			for (size_t b = 0; b < AN_HIST_BINS / 2; b++)
				x->hist[b] = x->hist[2 * b] + x->hist[2 * b + 1];
			memset(&x->hist[AN_HIST_BINS / 2], 0, sizeof(uint64_t) * (AN_HIST_BINS / 2));
		}
		a->hist_w *= 2;
	}
}

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

COLD_FN void mark_add(struct analysis *a, int kind, uint64_t dev, uint64_t stream, uint64_t s, uint64_t e)
{
	size_t slot = a->n_marks;
	if (a->n_marks == AN_MAX_MARKS) {
		/* Keep the longest: replace the shortest if this one is longer. */
		slot = 0;
		for (size_t i = 1; i < AN_MAX_MARKS; i++)
			if (a->marks[i].end - a->marks[i].start < a->marks[slot].end - a->marks[slot].start)
				slot = i;
		if (a->marks[slot].end - a->marks[slot].start >= e - s)
			return;
	} else {
		a->n_marks++;
	}
	a->marks[slot] = (struct an_mark){.device = dev, .stream = stream, .start = s, .end = e, .kind = kind};
}

/* ------------------------------------------------------------ idle gaps
 * A gap's idle time is split by what the responsible host thread (the one
 * that issued the work ending the gap, else the last one to call the API)
 * was doing at each instant of it, in this order: waiting inside a sync; in
 * a Python span (the innermost one); inside another API call, or between
 * calls, charged to the next call (Python: launch overhead, launch_bound;
 * none: host work outside Python); no later call recorded: no_host.  When
 * the next work was already queued before the GPU ran dry, the host is not
 * to blame: queued. */
static void gap_consider_span(struct pgap *g, const struct span_ent *sp)
{
	if (sp->end <= g->start || sp->ts >= g->end)
		return;
	if (!g->has_tid || sp->tid != g->tid) {
		/* Another thread's span around the whole piece: the caller waiting
		 * for this work (the main thread inside backward()). */
		if (sp->ts <= g->start && sp->end >= g->end && (!g->ctx_cp || sp->end - sp->ts < g->ctx_dur)) {
			g->ctx_cp = sp->callpath;
			g->ctx_dur = sp->end - sp->ts;
		}
		return;
	}
	/* The thread waiting in backward() itself: that call is the context of
	 * what autograd's threads did meanwhile. */
	if (sp->backward_wait && (!g->ctx_cp || sp->end - sp->ts < g->ctx_dur)) {
		g->ctx_cp = sp->callpath;
		g->ctx_dur = sp->end - sp->ts;
	}
	/* A span running since before the GPU went idle and still running when
	 * the next launch was issued is a caller of everything (the training
	 * loop, main): it explains nothing. */
	if (sp->ts <= g->start && sp->end >= g->resume)
		return;
	uint64_t lo = sp->ts > g->start ? sp->ts : g->start;
	uint64_t hi = sp->end < g->end ? sp->end : g->end;
	unsigned slot = g->nspans;
	if (slot == GAP_SPANS) {
		/* Full: replace the span with the least overlap, if less than this one's. */
		uint64_t least = UINT64_MAX;
		for (unsigned i = 0; i < GAP_SPANS; i++) {
			const struct gap_span *x = &g->spans[i];
			uint64_t xl = x->ts > g->start ? x->ts : g->start, xh = x->end < g->end ? x->end : g->end;
			if (xh - xl < least) {
				least = xh - xl;
				slot = i;
			}
		}
		if (least >= hi - lo)
			return;
	} else {
		g->nspans++;
	}
	g->spans[slot] = (struct gap_span){
		.ts = sp->ts, .end = sp->end, .callpath = sp->callpath, .backward_wait = sp->backward_wait,
		.wait_callpath = sp->wait_callpath};
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

struct gap_part {
	uint8_t cause;
	uint8_t copy;      /* an_copy_bits() of the copy calls the host was inside */
	uint64_t cp, nat, ns;
	uint64_t copy_ns;  /* of ns, inside a copy call */
	uint64_t no_call_ns;   /* of ns, between calls in a long stretch (AN_CPU_STRETCH_NS) */
};
#define GAP_PARTS (2 * (GAP_CALLS + GAP_SPANS) + 4)

static void part_add(struct gap_part *parts, size_t *n, int cause, uint64_t cp, uint64_t nat, uint64_t ns,
		     uint8_t copy, uint64_t no_call_ns)
{
	uint64_t copy_ns = copy ? ns : 0;
	for (size_t i = 0; i < *n; i++)
		if (parts[i].cause == cause && parts[i].cp == cp && parts[i].nat == nat) {
			parts[i].ns += ns;
			parts[i].copy_ns += copy_ns;
			parts[i].copy |= copy;
			parts[i].no_call_ns += no_call_ns;
			return;
		}
	if (*n < GAP_PARTS)
		parts[(*n)++] = (struct gap_part){.cause = (uint8_t)cause, .copy = copy, .cp = cp, .nat = nat, .ns = ns,
						  .copy_ns = copy_ns, .no_call_ns = no_call_ns};
}

/* What the host was doing at instant t of the piece (see above); *copy:
 * the copy call it was inside, if any (an_copy_bits()); *no_call: when it
 * was between calls before a late one, how long that stretch with no call
 * lasted (from the previous call's end, or the piece's start), else 0. */
static int gap_cause_at(const struct pgap *g, uint64_t t, uint64_t *cp, uint64_t *nat, uint8_t *copy,
			uint64_t *no_call)
{
	*copy = 0;
	*no_call = 0;
	for (unsigned i = 0; i < g->ncalls; i++) {
		const struct gap_call *c = &g->calls[i];
		if (c->sync && c->ts <= t && t < c->end) {
			*cp = c->callpath;
			*nat = c->native;
			return AN_CAUSE_SYNC;
		}
	}
	const struct gap_span *inner = NULL;
	for (unsigned i = 0; i < g->nspans; i++) {
		const struct gap_span *sp = &g->spans[i];
		if (sp->ts <= t && t < sp->end && (!inner || sp->end - sp->ts < inner->end - inner->ts))
			inner = sp;
	}
	if (inner && inner->backward_wait) {
		/* The thread only waits inside backward(): the host work is the
		 * autograd engine's, in C++ (its Python, a custom Function's
		 * backward, is a span of its own thread, which launches), placed
		 * at the user's backward() call. */
		*cp = inner->wait_callpath;
		*nat = 0;
		return AN_CAUSE_HOST_OTHER;
	}
	if (inner) {
		*cp = inner->callpath;
		*nat = 0;
		return AN_CAUSE_PYTHON;
	}
	/* Calls are in time order: the first one not over by t is the call
	 * the host was in, or the next one it made. */
	uint64_t prev_end = g->start;
	for (unsigned i = 0; i < g->ncalls; i++) {
		const struct gap_call *c = &g->calls[i];
		if (c->end > t) {
			*cp = c->callpath;
			*nat = c->native;
			if (c->ts <= t)
				*copy = c->copy;
			else
				*no_call = c->ts - prev_end;
			return c->callpath ? AN_CAUSE_LAUNCH_BOUND : AN_CAUSE_HOST_OTHER;
		}
		if (c->end > prev_end)
			prev_end = c->end;
	}
	*cp = *nat = 0;
	return AN_CAUSE_NO_HOST;
}

static void gap_finalize(struct analysis *a, const struct pgap *g)
{
	uint64_t len = g->end - g->start;
	struct gap_part parts[GAP_PARTS];
	size_t np = 0;
	if (g->queued) {
		part_add(parts, &np, AN_CAUSE_QUEUED, g->launch_cp, g->launch_nat, len, 0, 0);
	} else {
		uint64_t pts[2 + 2 * (GAP_CALLS + GAP_SPANS)];
		size_t n = 0;
		pts[n++] = g->start;
		pts[n++] = g->end;
		for (unsigned i = 0; i < g->ncalls; i++) {
			pts[n++] = g->calls[i].ts;
			pts[n++] = g->calls[i].end;
		}
		for (unsigned i = 0; i < g->nspans; i++) {
			pts[n++] = g->spans[i].ts;
			pts[n++] = g->spans[i].end;
		}
		qsort(pts, n, sizeof pts[0], u64_cmp);
		for (size_t i = 0; i + 1 < n; i++) {
			uint64_t lo = pts[i] > g->start ? pts[i] : g->start;
			uint64_t hi = pts[i + 1] < g->end ? pts[i + 1] : g->end;
			if (hi <= lo)
				continue;
			uint64_t cp, nat, no_call;
			uint8_t copy;
			int cause = gap_cause_at(g, lo, &cp, &nat, &copy, &no_call);
			part_add(parts, &np, cause, cp, nat, hi - lo, copy, no_call >= AN_CPU_STRETCH_NS ? hi - lo : 0);
		}
	}
	uint64_t by_cause[AN_CAUSE_N] = {0};
	for (size_t i = 0; i < np; i++)
		by_cause[parts[i].cause] += parts[i].ns;
	int cause = AN_CAUSE_NO_HOST;
	for (int c = 1; c < AN_CAUSE_N; c++)
		if (by_cause[c] > by_cause[cause])
			cause = c;
	const struct gap_part *site = NULL;
	for (size_t i = 0; i < np; i++)
		if (parts[i].cause == cause && (!site || parts[i].ns > site->ns))
			site = &parts[i];

	struct an_device *d = get_device(a, g->device);
	if (d) {
		for (int c = 0; c < AN_CAUSE_N; c++)
			d->idle_by[g->phase][c] += by_cause[c];
		if (g->edge)
			d->idle_edge[g->phase][g->edge - 1] += len;
	}
	for (size_t i = 0; i < np; i++) {
		struct an_finding *p = finding(a, AN_F_IDLE_PART, parts[i].cause + 16 * g->edge, g->phase,
					       parts[i].cp, parts[i].nat);
		if (p) {
			p->cause = parts[i].cause;
			p->edge = g->edge;
			p->total_ns += parts[i].ns;
			p->count++;
			p->device = g->device;
		}
	}
	/* A piece under the threshold (the end of a gap cut at an iteration
	 * boundary) is idle time, not an occurrence; so is the idle before the
	 * first and after the last GPU work (start-up, shutdown: reported in
	 * the idle breakdown, not as findings about the steady state). */
	if (len < a->opts.gap_ns || g->edge)
		return;
	if (d) {
		d->gaps_by[g->phase]++;
		d->gap_ns_by[g->phase] += len;
	}
	struct an_finding *f = finding(a, AN_F_IDLE_GAP, cause, g->phase, site ? site->cp : 0, site ? site->nat : 0);
	if (!f)
		return;
	f->count++;
	f->groups++;
	f->total_ns += len;
	for (int c = 0; c < AN_CAUSE_N; c++)
		f->cause_ns[c] += by_cause[c];
	if (len > f->max_ns)
		f->max_ns = len;
	f->device = g->device;
	if (!f->other_callpath && g->has_launch)
		f->other_callpath = g->launch_cp;
	if (!f->context_callpath)
		f->context_callpath = g->ctx_cp;
	if (!f->kernel_name)
		f->kernel_name = g->kernel_name;
	if (site) {
		f->site_ns += site->ns;
		f->copy_ns += site->copy_ns;
		f->copy_bits |= site->copy;
		f->no_call_ns += site->no_call_ns;
	}
}

COLD_FN void gap_piece(struct analysis *a, const struct pgap *tmpl, uint64_t start, uint64_t end, int phase)
{
	struct an_state *st = a->st;
	if (end <= start)
		return;
	if (st->gap_n == PENDING_GAPS) {
		gap_finalize(a, &st->gaps[st->gap_head]);
		st->gap_head = (st->gap_head + 1) % PENDING_GAPS;
		st->gap_n--;
	}
	struct pgap *g = &st->gaps[(st->gap_head + st->gap_n) % PENDING_GAPS];
	st->gap_n++;
	*g = *tmpl;
	g->start = start;
	g->end = end;
	g->phase = (uint8_t)phase;
	size_t ns = st->span_n < SPAN_RING ? st->span_n : SPAN_RING;
	for (size_t i = 0; i < ns; i++)
		gap_consider_span(g, &st->span[i]);
}

/* An idle interval [start, end) of a device: host facts gathered now (API
 * calls before `end` are all in), cut at iteration boundaries so that each
 * piece counts in its own iteration and the runner's time between
 * iterations stays apart. */
COLD_FN void gap_new(struct analysis *a, uint64_t device, uint64_t start, uint64_t end, const struct corr_ent *launch,
		     int edge)
{
	struct an_state *st = a->st;
	struct pgap g;
	memset(&g, 0, sizeof g);
	g.device = device;
	g.edge = (uint8_t)edge;
	g.kernel_name = st->gap_kernel_name;
	g.resume = end;
	if (launch) {
		g.has_launch = 1;
		g.launch_cp = launch->callpath;
		g.launch_nat = launch->native;
		g.launch_ts = launch->ts;
		g.resume = launch->ts;
		g.tid = launch->tid;
		g.has_tid = 1;
		/* Queued: the call that submitted the next work had returned before
		 * the GPU ran dry, so the GPU side waited (latency, an event, another
		 * stream).  A call still running then (a pageable copy staging its
		 * data, a slow first launch) delivered the work late: the host's. */
		g.queued = (launch->end ? launch->end : launch->ts) <= start;
	}
	size_t n = st->api_n < API_RING ? st->api_n : API_RING;
	if (!g.has_tid && n) {
		/* No launch ends it (the tail): the thread that called last. */
		for (size_t k = 1; k <= n; k++) {
			const struct api_ent *e = &st->api[(st->api_n - k) % API_RING];
			if (e->ts <= end) {
				g.tid = e->tid;
				g.has_tid = 1;
				break;
			}
		}
	}
	/* The responsible thread's calls over the gap, newest first into the
	 * tail of the array (the ones nearest the resume matter most). */
	unsigned kept = 0;
	struct gap_call tmp[GAP_CALLS];
	for (size_t k = 1; k <= n && kept < GAP_CALLS - 1 && g.has_tid; k++) {
		const struct api_ent *e = &st->api[(st->api_n - k) % API_RING];
		if (e->tid != g.tid || e->ts >= end || e->end <= start)
			continue;
		tmp[GAP_CALLS - 1 - kept++] = (struct gap_call){
			.ts = e->ts, .end = e->end, .callpath = e->callpath, .native = e->native, .sync = e->kind == TBP_K_SYNC,
			.copy = e->copy};
	}
	memcpy(g.calls, &tmp[GAP_CALLS - kept], kept * sizeof tmp[0]);
	g.ncalls = kept;
	/* From its launch to its start the next work is on its way: launch
	 * overhead and latency, the launch's. */
	if (launch)
		g.calls[g.ncalls++] = (struct gap_call){
			.ts = launch->ts, .end = end, .callpath = launch->callpath, .native = launch->native};

	uint64_t t = start;
	if (st->last_iter_end_ts > t && st->last_iter_end_ts <= end) {
		uint64_t lo = st->last_iter_begin_ts > t ? st->last_iter_begin_ts : t;
		gap_piece(a, &g, lo, st->last_iter_end_ts, st->last_iter_phase);
		if (lo > t)
			gap_piece(a, &g, t, lo, AN_PH_OUTSIDE);
		t = st->last_iter_end_ts;
	}
	if (st->in_iter && st->iter_begin_ts > t) {
		gap_piece(a, &g, t, st->iter_begin_ts < end ? st->iter_begin_ts : end, AN_PH_OUTSIDE);
		t = st->iter_begin_ts;
	}
	if (t < end)
		gap_piece(a, &g, t, end, cur_phase(a));
}

COLD_FN void gap_long(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch,
		      uint64_t kernel_name)
{
	a->st->gap_kernel_name = kernel_name;
	gap_new(a, d->id, d->busy.end, s, launch, AN_EDGE_NONE);
	a->st->gap_kernel_name = 0;
	mark_add(a, AN_F_IDLE_GAP, d->id, 0, d->busy.end, s);
}

/* A gap under the threshold is not examined (they come with most kernels of
 * a launch-bound loop): a late launch is launch overhead, else queued. */
HOT_FN void gap_short(struct analysis *a, struct an_device *d, uint64_t idle, int host_wait)
{
	(void)a;
	d->short_acc[host_wait] += idle;
}

/* ------------------------------------------------------------ bursts */
/* One closed burst: its span and the device's cumulative idle at both ends
 * (idle_last - idle_first is the device idle inside the span). */
struct burst_iv {
	uint64_t finding, device, start, end, idle_first, idle_last;
};

static int burst_iv_cmp(const void *x, const void *y)
{
	const struct burst_iv *a = x, *b = y;
	if (a->finding != b->finding)
		return a->finding < b->finding ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* Merges overlapping bursts of one (finding, device) and adds each merged
 * span that ends before `horizon` to its finding: its length and the device
 * idle inside it, once, however many streams' bursts cover it.  Later bursts
 * start at or after the horizon, so they cannot overlap what is added. */
static void bursts_fold(struct analysis *a, uint64_t horizon)
{
	struct an_state *st = a->st;
	struct vec *v = &st->burst_ivs;
	if (v->n > 1)
		qsort(v->data, v->n, v->item, burst_iv_cmp);
	size_t kept = 0;
	for (size_t i = 0; i < v->n;) {
		struct burst_iv m = *VEC_AT(v, struct burst_iv, i);
		size_t j = i + 1;
		for (; j < v->n; j++) {
			const struct burst_iv *b = VEC_AT(v, struct burst_iv, j);
			if (b->finding != m.finding || b->device != m.device || b->start > m.end)
				break;
			if (b->end > m.end) {
				m.end = b->end;
				m.idle_last = b->idle_last;
			}
		}
		i = j;
		if (m.end >= horizon || m.finding >= st->all_findings.n) {
			if (m.finding < st->all_findings.n)
				*VEC_AT(v, struct burst_iv, kept++) = m;
			continue;
		}
		struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, m.finding);
		uint64_t span = m.end - m.start;
		f->total_ns += span;
		if (span > f->max_ns)
			f->max_ns = span;
		f->idle_ns += m.idle_last > m.idle_first ? m.idle_last - m.idle_first : 0;
	}
	v->n = kept;
}

COLD_FN void burst_close(struct analysis *a, struct an_stream *s)
{
	struct an_state *st = a->st;
	struct an_burst_run *r = &s->run;
	if (r->count >= a->opts.burst_min && r->dev_idle_last > r->dev_idle_first) {
		uint32_t top = 0;   /* every kernel of the run counted a site: the first is site 0 */
		for (uint32_t i = 1; i < r->nsites; i++)
			if (r->site_n[i] > r->site_n[top])
				top = i;
		struct an_finding *f = finding(a, AN_F_KERNEL_BURST, 0, cur_phase(a), r->site_cp[top], r->site_nat[top]);
		struct burst_iv *b = f ? vec_push(&st->burst_ivs) : NULL;
		if (b) {
			f->count += r->count;
			f->groups++;
			f->device = s->device;
			b->finding = (uint64_t)(f - VEC_AT(&st->all_findings, struct an_finding, 0));
			b->device = s->device;
			b->start = r->first_start;
			b->end = r->last_end;
			b->idle_first = r->dev_idle_first;
			b->idle_last = r->dev_idle_last;
		}
		mark_add(a, AN_F_KERNEL_BURST, s->device, s->stream, r->first_start, r->last_end);
	}
	memset(r, 0, sizeof *r);
	if (st->burst_ivs.n >= st->burst_fold_at) {
		/* Nothing still to close starts before the record in hand or
		 * before a burst still open on another stream. */
		uint64_t horizon = st->gpu_now;
		for (size_t i = 0; i < a->streams.n; i++) {
			const struct an_stream *o = VEC_AT(&a->streams, struct an_stream, i);
			if (o->run.count && o->run.first_start < horizon)
				horizon = o->run.first_start;
		}
		bursts_fold(a, horizon);
		st->burst_fold_at = st->burst_ivs.n * 2 > 4096 ? st->burst_ivs.n * 2 : 4096;
	}
}

/* Call paths x and y end in the same function (file and name). */
static int same_leaf_function(const struct analysis *a, uint64_t x, uint64_t y)
{
	struct an_frame fx, fy;
	return x && y && an_callpath_frames(a, x, &fx, 1) && an_callpath_frames(a, y, &fy, 1) &&
	       an_frame_same_function(&fx, &fy);
}

HOT_FN void burst_kernel(struct analysis *a, const struct an_device *d, struct an_stream *s, uint64_t ts,
			 uint64_t end, uint64_t cp, uint64_t nat)
{
	struct an_burst_run *r = &s->run;
	int is_short = end - ts < a->opts.burst_kernel_ns;
	/* Same call site, or another line of the same loop body: a sibling
	 * leaf under the same caller (an optimizer's per-parameter loop), or
	 * another line of the same function run at the top (a script's own
	 * loop at module level: no caller). */
	int same = cp == r->callpath && nat == r->native;
	if (!same && r->count && cp && an_callpath_parent(a, cp) == r->parent &&
	    (r->parent || same_leaf_function(a, cp, r->callpath)))
		same = 1;
	if (r->count && (!is_short || !same))
		burst_close(a, s);
	if (!is_short)
		return;
	uint32_t k = 0;
	while (k < r->nsites && (r->site_cp[k] != cp || r->site_nat[k] != nat))
		k++;
	if (k < r->nsites) {
		r->site_n[k]++;
	} else if (k < 4) {
		r->site_cp[k] = cp;
		r->site_nat[k] = nat;
		r->site_n[k] = 1;
		r->nsites = k + 1;
	}
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

/* ------------------------------------------------------------ records */
HOT_FN void note_time(struct analysis *a, uint64_t ts, uint64_t end)
{
	if (ts < a->first_ts)
		a->first_ts = ts;
	if (end < ts)
		end = ts;
	if (end > a->last_ts)
		a->last_ts = end;
}

COLD_FN struct corr_ent *corr_map_slot(struct an_state *st, uint64_t corr);

/* The launch waiting under corr, taken out of the table (NULL: none).  Its
 * entry stays readable until the next corr_slot: the GPU record's pass
 * reads it in place. */
HOT_FN const struct corr_ent *corr_take(struct an_state *st, uint64_t corr)
{
	if (st->corr_ring) {
		struct corr_slot *sl = &st->corr_ring[corr & (CORR_RING - 1)];
		if (sl->corr == corr) {
			sl->corr = 0;
			return &sl->e;
		}
		if (!st->corr.n)
			return NULL;
	}
	uint64_t *ix = u64map_get(&st->corr, corr);
	if (!ix)
		return NULL;
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
	if (!st->corr_ring && !st->corr_ring_failed && !(st->corr_ring = calloc(CORR_RING, sizeof *st->corr_ring)))
		st->corr_ring_failed = 1;
	if (st->corr_ring) {
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
	return corr_map_slot(st, corr);
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

/* The GPU records' pass; kind is kind, a constant where the hot kind
 * takes its own copy (an_pass_record). */
static inline __attribute__((always_inline)) void on_gpu_k(struct analysis *a, const struct tbp_record *r,
							   unsigned kind)
{
	struct an_state *st = a->st;
	const struct tbp_gpu_kernel *g = &r->u.gpu_kernel; /* common prefix */
	uint64_t s = r->ts, e = g->end < r->ts ? r->ts : g->end;
	note_time(a, s, e);
	if (kind == TBP_K_GPU_SYNC) {
		a->n_gpu_sync++;
		return;
	}
	struct an_device *d = get_device(a, g->device);
	struct an_stream *str = get_stream(a, g->device, g->stream);
	if (!d || !str)
		return;
	static const struct corr_ent no_launch;
	const struct corr_ent *api = g->corr ? corr_take(st, g->corr) : NULL;
	int joined = api != NULL;
	if (!joined) {
		a->unmatched_gpu++;
		api = &no_launch;
	}
	st->gpu_now = s;
	if (d->busy.open && s > d->busy.end) {
		uint64_t idle = s - d->busy.end;
		d->idle_total += idle;
		/* Late when its call had not returned when the GPU ran dry (as
		 * gap_new's queued).  An unjoined record's launch is no_launch,
		 * ts and end 0: not late. */
		int host_wait = (api->end ? api->end : api->ts) > d->busy.end;
		if (idle >= a->opts.gap_ns)
			gap_long(a, d, s, joined ? api : NULL, kind == TBP_K_GPU_KERNEL ? g->name : 0);
		else
			gap_short(a, d, idle, host_wait);
	} else if (__builtin_expect(!d->busy.open, 0)) {
		/* The device's first work: the idle before it is the window's edge. */
		d->edge_from = a->first_ts < s ? a->first_ts : s;
		gap_new(a, d->id, d->edge_from, s, joined ? api : NULL, AN_EDGE_LEADING);
	}
	un_add(&d->busy, s, e);
	stream_busy_add(str, s, e, api->ts);
	hist_add(a, str, s, e);
	if (s < d->first_ts)
		d->first_ts = s;
	if (e > d->last_end)
		d->last_end = e;
	if (s < str->first_ts)
		str->first_ts = s;
	if (e > str->last_end)
		str->last_end = e;
	if (joined) {
		struct an_site_stat *ss = api->site ? VEC_AT(&a->sites, struct an_site_stat, api->site - 1)
						    : site_stat(a, api->callpath, api->native);
		if (ss)
			ss->gpu_ns += e - s;
	}

	switch (kind) {
	case TBP_K_GPU_KERNEL: {
		a->n_gpu_kernel++;
		d->kernels++;
		str->kernels++;
		un_add(&d->kern, s, e);
		burst_kernel(a, d, str, s, e, api->callpath, api->native);
		uint64_t *ix = hot_get(&st->kernel_cache, g->name);
		if (!ix && (ix = u64map_get(&st->kernel_idx, g->name)))
			hot_put(&st->kernel_cache, g->name, *ix);
		struct an_kernel_stat *k;
		if (ix) {
			k = VEC_AT(&a->kernels, struct an_kernel_stat, *ix);
		} else {
			k = vec_push(&a->kernels);
			if (!k || u64map_put(&st->kernel_idx, g->name, a->kernels.n - 1))
				break;
			k->name = g->name;
		}
		k->count++;
		k->total_ns += e - s;
		if (e - s > k->max_ns)
			k->max_ns = e - s;
		break;
	}
	case TBP_K_GPU_MEMCPY: {
		a->n_gpu_memcpy++;
		d->copies++;
		str->copies++;
		burst_close(a, str);
		un_add(&d->dm, s, e);
		un_add(&str->dm, s, e);
		uint64_t ck = r->u.gpu_memcpy.copy_kind < AN_CK_N ? r->u.gpu_memcpy.copy_kind : 0;
		un_add(&d->ck[ck], s, e);
		break;
	}
	case TBP_K_GPU_MEMSET:
		a->n_gpu_memset++;
		d->sets++;
		str->sets++;
		/* A short memset is a tiny kernel to the burst rule: PyTorch's zero_() on a contiguous CUDA tensor
		 * is a cudaMemsetAsync, so zero_grad's per-parameter loop is a run of memsets. */
		burst_kernel(a, d, str, s, e, api->callpath, api->native);
		un_add(&d->set, s, e);
		break;
	}
}

/* The API records' pass; kind as in on_gpu_k. */
static inline __attribute__((always_inline)) void on_api_k(struct analysis *a, const struct tbp_record *r,
							   unsigned kind)
{
	struct an_state *st = a->st;
	const struct tbp_call *c = &r->u.call;
	uint64_t ts = r->ts, end = c->end < ts ? ts : c->end, dur = end - ts;
	note_time(a, ts, end);
	a->n_api++;
	struct thread_st *th = get_thread(st, r->tid);
	int phase = cur_phase(a);

	/* cudaStreamWaitEvent (torch's wait_stream) makes a stream wait on the
	 * GPU; the host goes on at once: not a sync of the host. */
	int host_waits = kind == TBP_K_SYNC && r->u.sync.sync_kind != TBP_SYNC_STREAM_WAIT_EVENT;
	struct api_ent *ae = &st->api[st->api_n++ % API_RING];
	ae->tid = r->tid;
	ae->kind = kind == TBP_K_SYNC && !host_waits ? TBP_K_API : kind;
	ae->ts = ts;
	ae->end = end;
	ae->callpath = c->callpath;
	ae->native = c->native;
	ae->copy = kind == TBP_K_MEMCPY ? an_copy_bits(r->u.memcpy.copy_kind, r->u.memcpy.flags) : 0;

	/* A scalar copy's stall includes the sync right after it. */
	if (th && th->scalar_pending) {
		th->scalar_pending = 0;
		if (host_waits && th->scalar_finding < st->all_findings.n) {
			struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, th->scalar_finding);
			f->flagged++;
			f->total_ns += dur;
		}
	}

	struct an_site_stat *ss = site_stat(a, c->callpath, c->native);
	if (ss) {
		ss->api_ns += dur;
		ss->calls++;
		if (st->in_iter && ss->last_iter != st->iter_no) {
			if (!ss->iters)
				ss->first_iter = st->iter_no;
			ss->last_iter = st->iter_no;
			ss->iters++;
		}
	}
	/* A call the runtime refused has no GPU side to wait for. */
	if (st->expect_gpu && !c->result && (kind == TBP_K_LAUNCH || kind == TBP_K_MEMCPY || kind == TBP_K_MEMSET)) {
		struct corr_ent *ce = corr_slot(st, c->corr);
		if (ce) {
			ce->callpath = c->callpath;
			ce->native = c->native;
			ce->ts = ts;
			ce->end = ts + dur;
			ce->tid = r->tid;
			/* The GPU side adds its time to the same site: no second lookup. */
			ce->site = ss && a->sites.n < UINT32_MAX
					   ? (uint32_t)(ss - VEC_AT(&a->sites, struct an_site_stat, 0)) + 1
					   : 0;
		}
	}

	/* cudaErrorNotReady / CUDA_ERROR_NOT_READY / hipErrorNotReady (600) is
	 * a poll's answer (cudaStreamQuery, cudaEventQuery), not a failure. */
	int failed = c->result != 0 && c->result != 600;
	if (failed)
		a->n_errors++;
	/* The lines of a training loop repeat in its work's call paths: step
	 * detection reads them (a trace without marks, first pass). */
	if ((kind == TBP_K_LAUNCH || kind == TBP_K_MEMCPY || kind == TBP_K_MEMSET) && !failed && st->work_runs_on) {
		if (st->work_runs.n && c->callpath == st->work_run_cp) {
			struct work_run *w = VEC_AT(&st->work_runs, struct work_run, st->work_runs.n - 1);
			w->packed = work_run_pack(c->callpath, end - w->ts);
		} else {
			work_run_add(st, ts, end, c->callpath);
		}
	}
	switch (kind) {
	case TBP_K_LAUNCH:
		if (!failed) {
			a->n_launch++;
			st->launch_ring[st->launch_n++ & (LAUNCH_RING - 1)] = ts;
		}
		break;
	case TBP_K_MEMSET:
		a->n_memset++;
		break;
	case TBP_K_MEMCPY: {
		a->n_memcpy++;
		const struct tbp_memcpy *m = &r->u.memcpy;
		if (m->copy_kind == TBP_COPY_H2D && m->bytes <= a->opts.scalar_bytes) {
			struct an_finding *f = finding(a, AN_F_SCALAR_COPY, 0, phase, c->callpath, c->native);
			if (f) {
				f->count++;
				f->total_ns += dur;
				f->bytes += m->bytes;
				f->device = c->device;
				if (m->flags & TBP_COPYF_PAGEABLE)
					f->pageable++;
				if (dur > f->max_ns)
					f->max_ns = dur;
				if (th) {
					th->scalar_pending = 1;
					th->scalar_finding = (size_t)(f - VEC_AT(&st->all_findings, struct an_finding, 0));
				}
			}
		}
		if (m->bytes > a->opts.scalar_bytes && m->copy_kind == TBP_COPY_H2D) {
			uint64_t *ix = u64map_get(&st->pp, m->dst);
			struct pp_ent *p;
			if (ix) {
				p = VEC_AT(&st->pp_pool, struct pp_ent, *ix);
			} else {
				p = vec_push(&st->pp_pool);
				if (!p || u64map_put(&st->pp, m->dst, st->pp_pool.n - 1))
					break;
			}
			p->callpath = c->callpath;
			p->native = c->native;
			p->bytes = m->bytes;
			p->dur = dur;
			p->armed = 1;
		} else if (m->bytes > a->opts.scalar_bytes && m->copy_kind == TBP_COPY_D2H) {
			uint64_t *ix = u64map_get(&st->pp, m->src);
			if (!ix)
				break;
			struct pp_ent *p = VEC_AT(&st->pp_pool, struct pp_ent, *ix);
			if (!p->armed || p->bytes != m->bytes)
				break;
			p->armed = 0;
			struct an_finding *f = finding(a, AN_F_PING_PONG, 0, phase, p->callpath, p->native);
			if (f) {
				f->count++;
				f->groups++;
				f->total_ns += p->dur + dur;
				f->bytes += 2 * m->bytes;
				f->device = c->device;
				f->other_callpath = c->callpath;
			}
		}
		break;
	}
	case TBP_K_SYNC: {
		a->n_sync++;
		if (!host_waits)
			break;
		struct an_finding *f = finding(a, AN_F_SYNC_HOTSPOT, 0, phase, c->callpath, c->native);
		if (f) {
			f->count++;
			f->total_ns += dur;
			if (dur > f->max_ns)
				f->max_ns = dur;
			f->device = c->device;
		}
		break;
	}
	case TBP_K_MALLOC: {
		a->n_malloc++;
		const struct tbp_malloc *m = &r->u.malloc;
		if (m->flags & TBP_ALLOCF_HOST)
			break; /* pinned host memory is not device memory */
		if (ss)
			ss->alloc_bytes += m->bytes;
		struct an_device *d = get_device(a, c->device);
		if (!d)
			break;
		d->allocs++;
		d->alloc_bytes += m->bytes;
		d->mem_cur = (int64_t)((uint64_t)d->mem_cur + m->bytes); /* wraps, never traps */
		if (d->mem_cur > 0 && (uint64_t)d->mem_cur > d->mem_peak)
			d->mem_peak = (uint64_t)d->mem_cur;
		if (m->ptr) {
			uint64_t i;
			if (st->alloc_freelist.n) {
				i = *VEC_AT(&st->alloc_freelist, uint64_t, st->alloc_freelist.n - 1);
				st->alloc_freelist.n--;
			} else {
				if (!vec_push(&st->alloc_pool))
					break;
				i = st->alloc_pool.n - 1;
			}
			struct alloc_ent *ent = VEC_AT(&st->alloc_pool, struct alloc_ent, i);
			ent->bytes = m->bytes;
			ent->device = c->device;
			ent->finding = 0;
			u64map_put(&st->allocs, m->ptr, i);
		}
		struct an_finding *f = finding(a, AN_F_ALLOC_CHURN, 0, phase, c->callpath, c->native);
		if (f) {
			f->count++;
			f->total_ns += dur;
			f->bytes += m->bytes;
			f->device = c->device;
			/* Churn is a cycle: memory of this site freed, then allocated
			 * again; or an allocation in every iteration.  Buffers allocated
			 * once and kept (setup) are neither. */
			if (f->frees_pending) {
				f->frees_pending--;
				f->cycles++;
			}
			if (st->in_iter && f->last_iter != st->iter_no) {
				f->last_iter = st->iter_no;
				f->iters_allocating++;
			}
			if (m->ptr) {
				uint64_t *ai = u64map_get(&st->allocs, m->ptr);
				if (ai)
					VEC_AT(&st->alloc_pool, struct alloc_ent, *ai)->finding =
						(size_t)(f - VEC_AT(&st->all_findings, struct an_finding, 0)) + 1;
			}
		}
		break;
	}
	case TBP_K_FREE: {
		a->n_free++;
		const struct tbp_free *fr = &r->u.free;
		uint64_t *ix = fr->ptr ? u64map_get(&st->allocs, fr->ptr) : NULL;
		if (!ix)
			break;
		uint64_t i = *ix;
		struct alloc_ent *ent = VEC_AT(&st->alloc_pool, struct alloc_ent, i);
		if (ent->finding && ent->finding <= st->all_findings.n)
			VEC_AT(&st->all_findings, struct an_finding, ent->finding - 1)->frees_pending++;
		struct an_device *d = get_device(a, ent->device);
		if (d) {
			d->frees++;
			d->mem_cur = (int64_t)((uint64_t)d->mem_cur - ent->bytes);
		}
		u64map_del(&st->allocs, fr->ptr);
		uint64_t *fl = vec_push(&st->alloc_freelist);
		if (fl)
			*fl = i;
		break;
	}
	}
}

static __attribute__((noinline)) void on_gpu(struct analysis *a, const struct tbp_record *r)
{
	on_gpu_k(a, r, r->kind);
}

static __attribute__((noinline)) void on_api(struct analysis *a, const struct tbp_record *r)
{
	on_api_k(a, r, r->kind);
}

/* Copies for the copies and memsets of a training step (one of each per
 * step is common): their kind a constant too. */
static __attribute__((noinline)) void on_memcpy(struct analysis *a, const struct tbp_record *r)
{
	on_api_k(a, r, TBP_K_MEMCPY);
}

static __attribute__((noinline)) void on_memset(struct analysis *a, const struct tbp_record *r)
{
	on_api_k(a, r, TBP_K_MEMSET);
}

static __attribute__((noinline)) void on_gpu_memcpy(struct analysis *a, const struct tbp_record *r)
{
	on_gpu_k(a, r, TBP_K_GPU_MEMCPY);
}

static __attribute__((noinline)) void on_gpu_memset(struct analysis *a, const struct tbp_record *r)
{
	on_gpu_k(a, r, TBP_K_GPU_MEMSET);
}

static void on_marker(struct analysis *a, const struct tbp_record *r)
{
	struct an_state *st = a->st;
	note_time(a, r->ts, r->ts);
	if (a->opts.no_markers)
		return;
	/* A second pass marks the detected steps itself; the trace has none. */
	if (a->opts.synth_steps && !st->in_synth)
		return;
	switch (r->u.marker.marker_kind) {
	case TBP_MARK_ITER_BEGIN:
		if (st->work_runs_on && !st->in_synth) { /* marked steps: none to detect */
			st->work_runs_on = 0;
			vec_free(&st->work_runs);
			st->work_runs.item = sizeof(struct work_run);
		}
		st->iter_markers = 1;
		st->in_iter = 1;
		st->iter_begin_ts = r->ts;
		st->iter_no++;
		if (!st->win_open) {
			snap_all(a, r->ts, 0);
			a->win_begin = r->ts;
			st->win_open = 1;
			a->iterations = 0;
		}
		break;
	case TBP_MARK_ITER_END:
		if (st->in_iter) {
			st->last_iter_phase = cur_phase(a);
			st->last_iter_begin_ts = st->iter_begin_ts;
			st->last_iter_end_ts = r->ts;
			struct iter_len *il = vec_push(&st->iters);
			if (il)
				*il = (struct iter_len){.ns = r->ts - st->iter_begin_ts, .phase = st->last_iter_phase};
		}
		st->in_iter = 0;
		if (st->win_open) {
			snap_all(a, r->ts, 1);
			a->win_end = r->ts;
			a->iterations++;
			a->markers_used = 1;
		}
		break;
	case TBP_MARK_WARMUP_END:
		/* The steady state starts at the next iteration. */
		a->warmup_seen = 1;
		st->warmup_value = r->u.marker.value; /* the runner's count of warm-up iterations */
		st->win_open = 0;
		a->markers_used = 0;
		a->iterations = 0;
		break;
	}
	phase_update(a);
}

/* Launches recorded in [ts, end) (the ring keeps the latest 65536). */
static uint64_t launches_in(const struct an_state *st, uint64_t ts, uint64_t end)
{
	uint64_t lo = st->launch_n > LAUNCH_RING ? st->launch_n - LAUNCH_RING : 0, hi = st->launch_n;
	uint64_t a0 = lo, a1 = hi;
	while (a0 < a1) { /* first launch at or after ts */
		uint64_t m = a0 + (a1 - a0) / 2;
		if (st->launch_ring[m & (LAUNCH_RING - 1)] < ts)
			a0 = m + 1;
		else
			a1 = m;
	}
	uint64_t first = a0;
	a1 = hi;
	while (a0 < a1) { /* first launch at or after end */
		uint64_t m = a0 + (a1 - a0) / 2;
		if (st->launch_ring[m & (LAUNCH_RING - 1)] < end)
			a0 = m + 1;
		else
			a1 = m;
	}
	return a0 - first;
}

/* A call of the span's function: a candidate step of the training loop
 * when it holds launches (of any thread: backward's are autograd's). */
static void step_cand_add(struct analysis *a, uint32_t tid, uint64_t cp, uint64_t ts, uint64_t end)
{
	struct an_state *st = a->st;
	uint64_t n = launches_in(st, ts, end);
	if (!n)
		return;
	uint64_t *ix = u64map_get(&st->cand_idx, cp);
	struct step_cand *c;
	if (ix) {
		c = VEC_AT(&st->cands, struct step_cand, *ix);
	} else {
		if (!(c = vec_push(&st->cands)) || u64map_put(&st->cand_idx, cp, st->cands.n - 1))
			return;
		c->callpath = cp;
		c->tid = tid;
		c->ivs.item = sizeof(struct an_step);
	}
	if (c->tid != tid)
		c->unusable = 1;
	/* Spans come as they end: one that began before the previous call
	 * ended contains it (recursion) or overlaps it. */
	if (c->ivs.n && VEC_AT(&c->ivs, struct an_step, c->ivs.n - 1)->end > ts)
		c->unusable = 1;
	c->launches += n;
	c->count++;
	struct an_step *iv = c->ivs.n < CAND_IVS ? vec_push(&c->ivs) : NULL;
	if (iv)
		*iv = (struct an_step){.begin = ts, .end = end};
}

/* A span is read as soon as it ends, before the merge has handed over the
 * launches inside it (they wait in their queues for the GPU records): it
 * is counted once the analysis has passed its end. */
#define PEND_SPANS 4096
struct pend_span {
	uint32_t tid;
	uint64_t cp, ts, end;
};

static void step_spans_flush(struct analysis *a, uint64_t now)
{
	struct an_state *st = a->st;
	while (st->pend_n && st->pend[st->pend_head].end <= now) {
		const struct pend_span *p = &st->pend[st->pend_head];
		step_cand_add(a, p->tid, p->cp, p->ts, p->end);
		st->pend_head = (st->pend_head + 1) % PEND_SPANS;
		st->pend_n--;
	}
	st->pend_due = st->pend_n ? st->pend[st->pend_head].end : UINT64_MAX;
}

static void step_span_pending(struct analysis *a, uint32_t tid, uint64_t cp, uint64_t ts, uint64_t end)
{
	struct an_state *st = a->st;
	if (!st->pend && !(st->pend = malloc(PEND_SPANS * sizeof *st->pend)))
		return;
	if (st->pend_n == PEND_SPANS) /* full: the oldest is counted now */
		step_spans_flush(a, st->pend[st->pend_head].end);
	st->pend[(st->pend_head + st->pend_n++) % PEND_SPANS] = (struct pend_span){tid, cp, ts, end};
	if (st->pend_n == 1)
		st->pend_due = end;
}

/* Steps from the lines of the loop.  A loop's body runs the same lines over
 * and over; every launch, copy or memset carries the line of each frame of
 * its call path.  A context is one function called from one place (a call
 * path node's parent and the function: two calls of train() from the same
 * line of main() are one context, so are the iterations of a loop in it);
 * in its own work, in time order, each line of the body is entered once
 * per iteration.  A context's steps are the entries into its most entered
 * line (between equals, the one entered first: the body's first line that
 * does GPU work), each step from there to the next entry (or to the user's
 * code after the loop's body, see below).  An inline loop,
 * a loop calling a function per step and a batch loop inside an epoch loop
 * all give one step per batch: the epoch loop's line is entered once per
 * epoch, its batch loop's lines once per batch.  Only the user's frames
 * are contexts: torch's own loops (over parameters, over modules) are not
 * training steps. */
/* A line entered twice may be code before and after another (a single
 * step's forward and its optimizer step): a loop's line is entered at least
 * three times (the warm-up step and two of the steady state). */
#define LOOP_MIN_STEPS 3
#define LOOP_FRAMES 8 /* user frames of one call path looked at, innermost first (of 256 frames at most) */
struct loop_ctx {
	uint64_t work;       /* runs of work in the context */
	uint32_t prev_line;  /* index of the line of its latest work, UINT32_MAX: none yet */
	uint32_t best_line;  /* its steps' line (index), UINT32_MAX: none */
};
struct loop_line {
	uint32_t ctx;
	uint64_t node;      /* a call path node at this line (the report's "loop") */
	uint64_t entries;   /* times entered from another line of its context */
	size_t first_run;   /* run of the first entry */
};
struct loop_path { /* per call path of the work: its frames' contexts and lines */
	uint32_t n;
	uint32_t ctx[LOOP_FRAMES], line[LOOP_FRAMES];
};
struct loop_scan {
	struct vec ctxs, lines, paths; /* struct loop_ctx, loop_line, loop_path */
	struct u64map ctx_idx, line_idx, path_idx;
};

/* The contexts and lines of call path cp's user frames (index into
 * ls->paths), made on first sight. */
static const struct loop_path *loop_path_of(const struct analysis *a, struct loop_scan *ls, uint64_t cp)
{
	uint64_t *ix = u64map_get(&ls->path_idx, cp);
	if (ix)
		return VEC_AT(&ls->paths, struct loop_path, *ix);
	struct loop_path lp = {0};
	uint64_t node = cp;
	for (unsigned depth = 0; node && depth < 256 && lp.n < LOOP_FRAMES; depth++) {
		struct an_frame f;
		if (!an_callpath_frames(a, node, &f, 1))
			break;
		uint64_t parent = an_callpath_parent(a, node);
		if (!an_file_is_library(f.file, f.file_len)) {
			uint64_t key = an_hash_combine(an_frame_function_hash(&f), parent) >> 1;
			uint64_t *c = u64map_get(&ls->ctx_idx, key);
			uint32_t ci;
			if (c) {
				ci = (uint32_t)*c;
			} else {
				struct loop_ctx *x = vec_push(&ls->ctxs);
				if (!x || u64map_put(&ls->ctx_idx, key, ls->ctxs.n - 1))
					return NULL;
				x->prev_line = x->best_line = UINT32_MAX;
				ci = (uint32_t)(ls->ctxs.n - 1);
			}
			uint64_t lkey = an_hash_combine(key, f.line) >> 1;
			uint64_t *l = u64map_get(&ls->line_idx, lkey);
			uint32_t li;
			if (l) {
				li = (uint32_t)*l;
			} else {
				struct loop_line *y = vec_push(&ls->lines);
				if (!y || u64map_put(&ls->line_idx, lkey, ls->lines.n - 1))
					return NULL;
				y->ctx = ci;
				y->node = node;
				li = (uint32_t)(ls->lines.n - 1);
			}
			lp.ctx[lp.n] = ci;
			lp.line[lp.n++] = li;
		}
		node = parent;
	}
	struct loop_path *p = vec_push(&ls->paths);
	if (!p || u64map_put(&ls->path_idx, cp, ls->paths.n - 1))
		return NULL;
	*p = lp;
	return p;
}

static void loop_scan_free(struct loop_scan *ls)
{
	vec_free(&ls->ctxs);
	vec_free(&ls->lines);
	vec_free(&ls->paths);
	u64map_free(&ls->ctx_idx);
	u64map_free(&ls->line_idx);
	u64map_free(&ls->path_idx);
}

/* The steps of the loop found in the work's lines into a->step_ivs;
 * returns their count (0: none found, or more runs than kept). */
static uint64_t steps_from_lines(struct analysis *a, uint64_t min_steps)
{
	struct an_state *st = a->st;
	const struct vec *runs = &st->work_runs;
	if (st->work_runs_full || runs->n < 2)
		return 0;
	struct loop_scan ls = {.ctxs.item = sizeof(struct loop_ctx), .lines.item = sizeof(struct loop_line),
			       .paths.item = sizeof(struct loop_path)};
	uint64_t total = 0, steps = 0;
	for (size_t i = 0; i < runs->n; i++) {
		const struct work_run *w = VEC_AT(runs, struct work_run, i);
		const struct loop_path *lp = loop_path_of(a, &ls, work_run_cp(w));
		total++;
		if (!lp)
			goto out;
		for (uint32_t k = 0; k < lp->n; k++) {
			struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, lp->ctx[k]);
			c->work++;
			if (c->prev_line != lp->line[k]) {
				struct loop_line *l = VEC_AT(&ls.lines, struct loop_line, lp->line[k]);
				if (!l->entries++)
					l->first_run = i;
				c->prev_line = lp->line[k];
			}
		}
	}
	for (size_t i = 0; i < ls.lines.n; i++) {
		const struct loop_line *l = VEC_AT(&ls.lines, struct loop_line, i);
		struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, l->ctx);
		const struct loop_line *b = c->best_line == UINT32_MAX ? NULL
						: VEC_AT(&ls.lines, struct loop_line, c->best_line);
		if (!b || l->entries > b->entries || (l->entries == b->entries && l->first_run < b->first_run))
			c->best_line = (uint32_t)i;
	}
	/* The loop: a context with at least half of all runs of work, with the
	 * most steps (more than the spans' candidate found); between equals,
	 * the one with the most work (the loop's own function, not one it
	 * calls once per step). */
	uint32_t best = UINT32_MAX;
	uint64_t best_work = 0;
	for (size_t i = 0; i < ls.ctxs.n; i++) {
		const struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, i);
		if (c->best_line == UINT32_MAX || 2 * c->work < total)
			continue;
		uint64_t n = VEC_AT(&ls.lines, struct loop_line, c->best_line)->entries;
		if (n < LOOP_MIN_STEPS || n <= min_steps || n < steps || (n == steps && c->work <= best_work))
			continue;
		best = (uint32_t)i, steps = n, best_work = c->work;
	}
	if (best == UINT32_MAX) {
		steps = 0;
		goto out;
	}
	const struct loop_ctx *c = VEC_AT(&ls.ctxs, struct loop_ctx, best);
	vec_free(&a->step_ivs);
	a->step_ivs.item = sizeof(struct an_step);
	/* Each step from an entry into the line to the next; when the user's
	 * code does work outside the context before that (the code after the
	 * loop's body: an evaluation pass, a checkpoint), to the end of the
	 * step's own last work: what follows is between steps, as the
	 * runner's time between its iterations. */
	uint32_t prev = UINT32_MAX;
	int open = 0;
	uint64_t last_end = 0; /* the end of the context's latest work */
	for (size_t i = 0; i < runs->n; i++) {
		const struct work_run *w = VEC_AT(runs, struct work_run, i);
		const struct loop_path *lp = loop_path_of(a, &ls, work_run_cp(w));
		uint32_t line = UINT32_MAX;
		for (uint32_t k = 0; lp && k < lp->n; k++)
			if (lp->ctx[k] == best)
				line = lp->line[k];
		if (line == UINT32_MAX) {
			/* Work of no user frame (a library's thread, no Python) leaves the step as it is. */
			if (open && lp && lp->n) {
				struct an_step *d = VEC_AT(&a->step_ivs, struct an_step, a->step_ivs.n - 1);
				d->end = last_end > d->begin ? last_end : d->begin + 1;
				open = 0;
			}
			continue;
		}
		if (work_run_end(w) > last_end)
			last_end = work_run_end(w);
		if (line == c->best_line && prev != c->best_line) {
			if (open)
				VEC_AT(&a->step_ivs, struct an_step, a->step_ivs.n - 1)->end = w->ts;
			struct an_step *d = vec_push(&a->step_ivs);
			if (!d) {
				steps = 0;
				goto out;
			}
			d->begin = w->ts;
			open = 1;
		}
		prev = line;
	}
	if (open) { /* the last: to the end of its work */
		struct an_step *d = VEC_AT(&a->step_ivs, struct an_step, a->step_ivs.n - 1);
		d->end = last_end > d->begin ? last_end : d->begin + 1;
	}
	a->steps.loop = VEC_AT(&ls.lines, struct loop_line, c->best_line)->node;
out:
	loop_scan_free(&ls);
	return steps;
}

/* The loop: the user's function whose calls (at least two, on one thread,
 * none inside another) hold at least half of all launches, the most of them;
 * between two equal, the one called fewer times (the outer).  The lines'
 * loop (above) instead when it has more steps: the spans' function is then
 * an outer loop's (epochs) or the loop is inline. */
static void steps_detect(struct analysis *a)
{
	struct an_state *st = a->st;
	const struct step_cand *best = NULL;
	for (size_t i = 0; i < st->cands.n; i++) {
		const struct step_cand *c = VEC_AT(&st->cands, struct step_cand, i);
		if (c->unusable || c->count < 2 || c->count != c->ivs.n || 2 * c->launches < a->n_launch)
			continue;
		/* torch's own functions called once per step (Tensor.backward,
		 * Optimizer.step) are inside the step, not the step. */
		struct an_frame f;
		if (an_callpath_frames(a, c->callpath, &f, 1) && an_file_is_library(f.file, f.file_len))
			continue;
		if (!best || c->launches > best->launches || (c->launches == best->launches && c->count < best->count))
			best = c;
	}
	if (steps_from_lines(a, best ? best->count : 0)) {
		a->steps.source = AN_STEPS_DETECTED;
		return;
	}
	if (!best)
		return;
	a->steps.source = AN_STEPS_DETECTED;
	a->steps.function = best->callpath;
	vec_free(&a->step_ivs);
	a->step_ivs.item = sizeof(struct an_step);
	for (size_t i = 0; i < best->ivs.n; i++) {
		struct an_step *d = vec_push(&a->step_ivs);
		if (!d)
			return;
		*d = *VEC_AT(&best->ivs, struct an_step, i);
		/* A step function's step lasts until the next call (the loop's
		 * own work between the calls is the step's too). */
		if (i)
			(d - 1)->end = d->begin;
	}
}

/* Time per step: the iterations' lengths (marks, or detected steps marked
 * by the second pass), the counted ones' median. */
static void steps_finish(struct analysis *a)
{
	struct an_state *st = a->st;
	if (!st->iters.n || a->opts.no_markers)
		return;
	uint64_t *lens = malloc(st->iters.n * sizeof *lens);
	if (!lens)
		return;
	size_t n = 0;
	for (size_t i = 0; i < st->iters.n; i++) {
		const struct iter_len *it = VEC_AT(&st->iters, struct iter_len, i);
		if (phase_counts(a, it->phase))
			lens[n++] = it->ns;
	}
	/* The runner runs its warm-up iterations unmarked and says how many
	 * in WARMUP_END's value. */
	a->steps.warmup = st->iters.n - n ? st->iters.n - n : st->warmup_value;
	a->steps.count = n + a->steps.warmup;
	a->steps.source = a->opts.synth_steps ? AN_STEPS_DETECTED : AN_STEPS_MARKS;
	if (n) {
		qsort(lens, n, sizeof *lens, u64_cmp);
		a->steps.median_ns = n % 2 ? lens[n / 2] : (lens[n / 2 - 1] + lens[n / 2]) / 2;
	}
	free(lens);
}

/* The detected steps marked as the runner marks iterations, [begin, end)
 * each, warm-up after the first (or opts.synth_warmup). */
static int synth_init(struct analysis *a)
{
	struct an_state *st = a->st;
	st->next_synth_ts = UINT64_MAX;
	size_t n = a->opts.n_synth_steps;
	if (!n)
		return 0;
	st->synth = calloc(3 * n + 1, sizeof *st->synth);
	if (!st->synth)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct an_step *s = &a->opts.synth_steps[i];
		uint64_t end = s->end;
		st->synth[st->n_synth++] = (struct synth_mark){s->begin, TBP_MARK_ITER_BEGIN};
		st->synth[st->n_synth++] = (struct synth_mark){end, TBP_MARK_ITER_END};
		if (i + 1 == (a->opts.synth_warmup ? a->opts.synth_warmup : 1))
			st->synth[st->n_synth++] = (struct synth_mark){end, TBP_MARK_WARMUP_END};
	}
	st->next_synth_ts = st->synth[0].ts;
	return 0;
}

static void on_marker(struct analysis *a, const struct tbp_record *r);

/* The synthetic marks due by time t, before the record at t. */
COLD_FN void synth_emit(struct analysis *a, uint64_t t)
{
	struct an_state *st = a->st;
	while (st->synth_at < st->n_synth && st->synth[st->synth_at].ts <= t) {
		struct tbp_record m;
		memset(&m, 0, sizeof m);
		m.kind = TBP_K_MARKER;
		m.ts = st->synth[st->synth_at].ts;
		m.u.marker.marker_kind = st->synth[st->synth_at].kind;
		st->synth_at++;
		st->in_synth = 1;
		on_marker(a, &m);
		st->in_synth = 0;
	}
	st->next_synth_ts = st->synth_at < st->n_synth ? st->synth[st->synth_at].ts : UINT64_MAX;
}

static int ends_with(const char *s, size_t n, const char *tail)
{
	size_t k = strlen(tail);
	return n >= k && !memcmp(s + n - k, tail, k);
}

/* A span of torch's backward() entry points (Tensor.backward,
 * torch.autograd.backward and .grad, the engine's entry): the calling thread
 * blocks in them while autograd's threads run the backward pass. */
static int is_backward_wait(const struct analysis *a, uint64_t cp)
{
	struct an_frame f;
	if (!cp || !an_callpath_frames(a, cp, &f, 1) || !an_file_is_library(f.file, f.file_len))
		return 0;
	static const char *const names[] = {"Tensor.backward", "backward", "grad", "_engine_run_backward"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t n = strlen(names[i]);
		if (f.function_len == n && !memcmp(f.function, names[i], n))
			return ends_with(f.file, f.file_len, "/torch/_tensor.py") ||
			       ends_with(f.file, f.file_len, "/torch/autograd/__init__.py") ||
			       ends_with(f.file, f.file_len, "/torch/autograd/graph.py");
	}
	return 0;
}

static void on_span(struct analysis *a, const struct tbp_record *r)
{
	struct an_state *st = a->st;
	uint64_t ts = r->ts, end = r->u.py_span.end < ts ? ts : r->u.py_span.end;
	note_time(a, ts, end);
	a->n_spans++;
	uint64_t cp = r->u.py_span.callpath;
	uint64_t *ix = u64map_get(&st->span_idx, cp);
	struct an_span_stat *s = NULL;
	if (ix) {
		s = VEC_AT(&a->spans, struct an_span_stat, *ix);
	} else if ((s = vec_push(&a->spans)) && u64map_put(&st->span_idx, cp, a->spans.n - 1)) {
		s = NULL;
		a->spans.n--;
	}
	if (s) {
		if (!s->count)
			s->backward_wait = is_backward_wait(a, cp);
		s->callpath = cp;
		s->count++;
		s->total_ns += end - ts;
		uint64_t self = end - ts;
		size_t sidx = (size_t)(s - VEC_AT(&a->spans, struct an_span_stat, 0));
		struct thread_st *th = get_thread(st, r->tid);
		if (th && !th->done)
			th->done = malloc(SPAN_STACK * sizeof *th->done);
		if (th && th->done) {
			/* Spans come in end order.  A span's start is its end less a
			 * length measured in CPU ticks, converted at a calibrated
			 * rate: a long span's start can be off by ~1e-4 of its
			 * length, so a child may seem to start a little before its
			 * parent.  It is still a child (only its part inside counts);
			 * a span that began well before is an earlier sibling. */
			uint64_t slack = (end - ts) / 1024 + 1000;
			while (th->ndone && th->done[th->ndone - 1].end > ts && th->done[th->ndone - 1].end <= end &&
			       th->done[th->ndone - 1].ts + slack >= ts) {
				const struct done_span *c = &th->done[--th->ndone];
				uint64_t cd = c->end - (c->ts > ts ? c->ts : ts);
				self = self > cd ? self - cd : 0;
			}
			if (th->ndone == SPAN_STACK) {
				memmove(th->done, th->done + 1, (SPAN_STACK - 1) * sizeof *th->done);
				th->ndone--;
			}
			th->done[th->ndone++] = (struct done_span){.ts = ts, .end = end, .stat = sidx};
		}
		s->self_ns += self;
	}
	if (!a->opts.synth_steps)
		step_span_pending(a, r->tid, cp, ts, end);
	struct span_ent *e = &st->span[st->span_n++ % SPAN_RING];
	e->tid = r->tid;
	e->backward_wait = s && s->backward_wait;
	e->wait_callpath = e->backward_wait ? an_user_callpath(a, cp) : 0;
	e->ts = ts;
	e->end = end;
	e->callpath = cp;
	for (size_t i = 0; i < st->gap_n; i++)
		gap_consider_span(&st->gaps[(st->gap_head + i) % PENDING_GAPS], e);
}

static __attribute__((noinline)) void pass_record_other(struct analysis *a, const struct tbp_record *r);

/* Launches and kernels are most records: each takes a copy of its pass
 * specialised for its kind; every other kind goes through the general one. */
COLD_FN void on_launch(struct analysis *a, const struct tbp_record *r)
{
	on_api_k(a, r, TBP_K_LAUNCH);
}

COLD_FN void on_kernel(struct analysis *a, const struct tbp_record *r)
{
	on_gpu_k(a, r, TBP_K_GPU_KERNEL);
}

void an_pass_record(struct analysis *a, const struct tbp_record *r)
{
	if (r->kind == TBP_K_LAUNCH)
		on_launch(a, r);
	else if (r->kind == TBP_K_GPU_KERNEL)
		on_kernel(a, r);
	else
		pass_record_other(a, r);
}

/* A block with the mark of a detected step inside: record by record, each
 * after the marks due by its time. */
COLD_FN void pass_block_marked(struct analysis *a, const struct tbp_record *const *recs, unsigned n,
			       uint64_t *last_ts)
{
	for (unsigned i = 0; i < n; i++) {
		if (recs[i]->ts >= a->st->next_synth_ts)
			synth_emit(a, recs[i]->ts);
		an_pass_block(a, &recs[i], 1, last_ts);
	}
}

void an_pass_block(struct analysis *a, const struct tbp_record *const *recs, unsigned n, uint64_t *last_ts)
{
	/* Records come in time order: marks of detected steps fall inside this
	 * block only if its last record reaches the next one. */
	if (__builtin_expect(n && recs[n - 1]->ts >= a->st->next_synth_ts, 0)) {
		pass_block_marked(a, recs, n, last_ts);
		return;
	}
	uint64_t last = *last_ts;
	for (unsigned i = 0; i < n; i++) {
		const struct tbp_record *r = recs[i];
		if (r->ts < last) {
			a->late_records++;
			if (r->stream_kind == TBP_STREAM_GPU)
				a->late_gpu_records++;
		} else {
			last = r->ts;
		}
		if (r->kind == TBP_K_LAUNCH)
			on_launch(a, r);
		else if (r->kind == TBP_K_GPU_KERNEL)
			on_kernel(a, r);
		else
			pass_record_other(a, r);
	}
	*last_ts = last;
	if (__builtin_expect(last >= a->st->pend_due, 0))
		step_spans_flush(a, last);
}

static void pass_record_other(struct analysis *a, const struct tbp_record *r)
{
	switch (r->kind) {
	case TBP_K_MEMCPY:
		on_memcpy(a, r);
		break;
	case TBP_K_MEMSET:
		on_memset(a, r);
		break;
	case TBP_K_GPU_MEMCPY:
		on_gpu_memcpy(a, r);
		break;
	case TBP_K_GPU_MEMSET:
		on_gpu_memset(a, r);
		break;
	case TBP_K_API:
	case TBP_K_LAUNCH:
	case TBP_K_MALLOC:
	case TBP_K_FREE:
	case TBP_K_SYNC:
		on_api(a, r);
		break;
	case TBP_K_GPU_KERNEL:
	case TBP_K_GPU_SYNC:
		on_gpu(a, r);
		break;
	case TBP_K_PY_SPAN:
		on_span(a, r);
		break;
	case TBP_K_MARKER:
		on_marker(a, r);
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
	case TBP_K_DEVICE: {
		struct an_device *d = get_device(a, r->u.device.device);
		if (d)
			d->name = r->u.device.name;
		break;
	}
	}
}

/* ------------------------------------------------------------ window, again
 * Second pass: the unions of every device and stream rebuilt from GPU
 * records clipped to [win_begin, win_end]; clipping keeps each stream's
 * start order, so the unions stay exact.  snap_begin = 0, snap_end = total. */
void an_window_reset(struct analysis *a)
{
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		struct an_union *us[] = {&d->busy, &d->dm, &d->kern, &d->set};
		for (size_t k = 0; k < 4; k++)
			memset(us[k], 0, sizeof *us[k]);
		memset(d->ck, 0, sizeof d->ck);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		struct an_stream *s = VEC_AT(&a->streams, struct an_stream, i);
		memset(&s->busy, 0, sizeof s->busy);
		memset(&s->dm, 0, sizeof s->dm);
	}
}

void an_window_add(struct analysis *a, const struct tbp_record *r)
{
	const struct tbp_gpu_kernel *g = &r->u.gpu_kernel;
	uint64_t s = r->ts, e = g->end < r->ts ? r->ts : g->end;
	if (s < a->win_begin)
		s = a->win_begin;
	if (e > a->win_end)
		e = a->win_end;
	if (e <= s)
		return;
	struct an_device *d = get_device(a, g->device);
	struct an_stream *str = get_stream(a, g->device, g->stream);
	if (!d || !str)
		return;
	un_add(&d->busy, s, e);
	un_add(&str->busy, s, e);
	if (r->kind == TBP_K_GPU_KERNEL) {
		un_add(&d->kern, s, e);
	} else if (r->kind == TBP_K_GPU_MEMCPY) {
		un_add(&d->dm, s, e);
		un_add(&str->dm, s, e);
		un_add(&d->ck[r->u.gpu_memcpy.copy_kind < AN_CK_N ? r->u.gpu_memcpy.copy_kind : 0], s, e);
	} else {
		un_add(&d->set, s, e);
	}
}

static void un_whole(struct an_union *u)
{
	u->snap_begin = 0;
	u->snap_end = an_union_total(u);
}

void an_window_done(struct analysis *a)
{
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		un_whole(&d->busy);
		un_whole(&d->dm);
		un_whole(&d->kern);
		un_whole(&d->set);
		for (int k = 0; k < AN_CK_N; k++)
			un_whole(&d->ck[k]);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		struct an_stream *s = VEC_AT(&a->streams, struct an_stream, i);
		un_whole(&s->busy);
		un_whole(&s->dm);
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
	st->pp_pool.item = sizeof(struct pp_ent);
	st->alloc_pool.item = sizeof(struct alloc_ent);
	st->alloc_freelist.item = sizeof(uint64_t);
	st->threads.item = sizeof(struct thread_st);
	st->all_findings.item = sizeof(struct an_finding);
	st->burst_ivs.item = sizeof(struct burst_iv);
	st->burst_fold_at = 4096;
	/* Without CUPTI nothing will claim a correlation id: do not keep them. */
	st->expect_gpu = 1;
	st->cands.item = sizeof(struct step_cand);
	st->work_runs.item = sizeof(struct work_run);
	st->work_runs_on = !a->opts.synth_steps && !a->opts.no_markers;
	st->pend_due = UINT64_MAX;
	st->iters.item = sizeof(struct iter_len);
	a->st = st;
	if (synth_init(a))
		return -1;
	return 0;
}

static int cmp_finding(const void *x, const void *y)
{
	const struct an_finding *a = x, *b = y;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind - b->kind;
	return a->callpath < b->callpath ? -1 : a->callpath > b->callpath;
}

static int cmp_kernel(const void *x, const void *y)
{
	const struct an_kernel_stat *a = x, *b = y;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	return a->name < b->name ? -1 : a->name > b->name;
}

static int cmp_span(const void *x, const void *y)
{
	const struct an_span_stat *a = x, *b = y;
	if (a->self_ns != b->self_ns)
		return a->self_ns > b->self_ns ? -1 : 1;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	return a->callpath < b->callpath ? -1 : a->callpath > b->callpath;
}

/* Occurrences that count: with markers, those of the steady-state
 * iterations (every marked iteration when there is no warm-up mark);
 * otherwise all. */
static int phase_counts(const struct analysis *a, int phase)
{
	if (!a->st->iter_markers || a->opts.no_markers)
		return 1;
	return a->warmup_seen ? phase == AN_PH_STEADY : phase != AN_PH_OUTSIDE;
}

/* One device's idle time of the window, by cause; what no counted piece
 * explains lies between marked iterations (the runner's time). */
static void idle_breakdown_add(struct analysis *a, struct an_device *d, uint64_t idle)
{
	struct an_idle_breakdown *ib = &a->idle;
	uint64_t explained = 0;
	ib->idle_ns += idle;
	d->gaps = d->gap_ns = 0;
	for (int ph = 0; ph < 3; ph++) {
		if (!phase_counts(a, ph))
			continue;
		/* The gaps of the window are pieces of its idle time: they never add up to more. */
		d->gaps += d->gaps_by[ph];
		d->gap_ns += d->gap_ns_by[ph];
		for (int c = 0; c < AN_CAUSE_N; c++) {
			ib->by_cause[c] += d->idle_by[ph][c];
			explained += d->idle_by[ph][c];
		}
		/* Gaps under the threshold: launched late is launch overhead. */
		ib->by_cause[AN_CAUSE_LAUNCH_BOUND] += d->idle_short[ph][1];
		ib->by_cause[AN_CAUSE_QUEUED] += d->idle_short[ph][0];
		explained += d->idle_short[ph][0] + d->idle_short[ph][1];
		ib->short_ns += d->idle_short[ph][0] + d->idle_short[ph][1];
		ib->leading_ns += d->idle_edge[ph][0];
		ib->trailing_ns += d->idle_edge[ph][1];
	}
	ib->harness_ns += idle > explained ? idle - explained : 0;
}

static int keep_finding(const struct analysis *a, const struct an_finding *f)
{
	switch (f->kind) {
	case AN_F_PING_PONG: return f->count >= a->opts.pingpong_min;
	case AN_F_SYNC_HOTSPOT: return f->count >= a->opts.sync_min;
	case AN_F_ALLOC_CHURN:
		return f->count >= a->opts.churn_min &&
		       (2 * f->cycles >= f->count || (a->iterations >= 2 && f->iters_allocating >= a->iterations));
	}
	return f->count > 0;
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
		if (keep_finding(a, f))
			*VEC_AT(v, struct an_finding, w++) = *f;
	}
	v->n = w;
	if (w)
		qsort(v->data, w, sizeof(struct an_finding), cmp_finding);
}

int an_pass_finish(struct analysis *a)
{
	struct an_state *st = a->st;
	synth_emit(a, UINT64_MAX);
	phase_update(a); /* files the last phase's short gaps */
	for (size_t i = 0; i < a->streams.n; i++)
		burst_close(a, VEC_AT(&a->streams, struct an_stream, i));
	bursts_fold(a, UINT64_MAX);
	/* The idle after each device's last work is the window's trailing edge. */
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (d->busy.open && a->last_ts > d->busy.end)
			gap_new(a, d->id, d->busy.end, a->last_ts, NULL, AN_EDGE_TRAILING);
		/* A Python span reaches the analysis when it ends: one that began
		 * before the device's first work moved the window's start after
		 * the leading edge was measured. */
		if (d->busy.open && a->first_ts < d->edge_from)
			gap_new(a, d->id, a->first_ts, d->edge_from, NULL, AN_EDGE_LEADING);
	}
	while (st->gap_n) {
		gap_finalize(a, &st->gaps[st->gap_head]);
		st->gap_head = (st->gap_head + 1) % PENDING_GAPS;
		st->gap_n--;
	}
	if (a->first_ts == UINT64_MAX)
		a->first_ts = a->last_ts = 0;
	if (a->markers_used && a->win_end <= a->win_begin)
		a->markers_used = 0;

	/* Call sites of torch's backward(): the path autograd's threads launch
	 * under (the tracer lends them the caller's), so a burst recorded at one
	 * is the backward pass's kernels. */
	struct u64map bw_callers = {0};
	for (size_t i = 0; i < a->spans.n; i++) {
		const struct an_span_stat *sp = VEC_AT(&a->spans, struct an_span_stat, i);
		uint64_t caller = sp->backward_wait ? an_user_callpath(a, sp->callpath) : 0;
		if (caller && u64map_put(&bw_callers, caller, 1)) {
			u64map_free(&bw_callers);
			return -1;
		}
	}
	/* Keep the steady state when the runner marked one; otherwise every
	 * marked iteration; otherwise everything.  Merge phases per site. */
	struct u64map merged = {0};
	for (size_t i = 0; i < st->all_findings.n; i++) {
		const struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, i);
		if (!phase_counts(a, f->phase))
			continue;
		uint64_t placed = place(a, f->callpath);
		struct vec *out = f->kind == AN_F_IDLE_PART ? &a->idle_parts
				  : an_callpath_is_harness(a, placed) ? &a->harness
				  : an_callpath_is_model_step(a, placed) ? &a->model_step : &a->findings;
		uint64_t h = an_hash_combine(an_hash_combine(f->kind, f->cause + 16u * f->edge), an_hash_combine(placed, f->native));
		if (h == UINT64_MAX)
			h = 0;
		uint64_t *ix = u64map_get(&merged, h);
		if (!ix) {
			struct an_finding *o = vec_push(out);
			if (!o || u64map_put(&merged, h, out->n - 1)) {
				u64map_free(&merged);
				u64map_free(&bw_callers);
				return -1;
			}
			*o = *f;
			o->callpath = placed;
			o->backward_burst = f->kind == AN_F_KERNEL_BURST && u64map_get(&bw_callers, f->callpath) != NULL;
			o->harness = out == &a->harness || (f->kind == AN_F_IDLE_PART && an_callpath_is_harness(a, placed));
			o->leaf_callpath = placed != f->callpath ? f->callpath : 0;
			/* Another thread's span around the gaps explains them only
			 * when it waits on this work: inside backward(), for
			 * autograd's threads (main() around everything does not). */
			o->context_backward = in_backward(a, f->context_callpath);
			o->context_callpath = o->context_backward ? place(a, f->context_callpath) : 0;
			o->other_callpath = place(a, f->other_callpath);
			continue;
		}
		struct an_finding *o = VEC_AT(out, struct an_finding, *ix);
		o->cycles += f->cycles;
		o->iters_allocating += f->iters_allocating;
		for (int c = 0; c < AN_CAUSE_N; c++)
			o->cause_ns[c] += f->cause_ns[c];
		if (!o->context_callpath && in_backward(a, f->context_callpath)) {
			o->context_callpath = place(a, f->context_callpath);
			o->context_backward = 1;
		}
		if (!o->kernel_name)
			o->kernel_name = f->kernel_name;
		if (f->kind == AN_F_KERNEL_BURST && u64map_get(&bw_callers, f->callpath))
			o->backward_burst = 1;
		o->count += f->count;
		o->total_ns += f->total_ns;
		o->groups += f->groups;
		o->bytes += f->bytes;
		o->flagged += f->flagged;
		o->pageable += f->pageable;
		o->idle_ns += f->idle_ns;
		if (f->max_ns > o->max_ns)
			o->max_ns = f->max_ns;
	}
	u64map_free(&merged);
	u64map_free(&bw_callers);
	keep_sorted(a, &a->findings);
	keep_sorted(a, &a->harness);
	keep_sorted(a, &a->model_step);
	step_spans_flush(a, UINT64_MAX);
	steps_finish(a);
	if (!st->iter_markers && !a->opts.no_markers && !a->opts.synth_steps)
		steps_detect(a);
	if (a->idle_parts.n)
		qsort(a->idle_parts.data, a->idle_parts.n, sizeof(struct an_finding), cmp_finding);
	if (a->kernels.n)
		qsort(a->kernels.data, a->kernels.n, sizeof(struct an_kernel_stat), cmp_kernel);
	if (a->spans.n)
		qsort(a->spans.data, a->spans.n, sizeof(struct an_span_stat), cmp_span);

	/* Memory still allocated at the end of the trace. */
	for (size_t i = 0; i < st->allocs.cap; i++) {
		if (!st->allocs.keys[i])
			continue;
		const struct alloc_ent *e = VEC_AT(&st->alloc_pool, struct alloc_ent, st->allocs.vals[i]);
		a->mem_leak_bytes += e->bytes;
		a->mem_leak_count++;
	}

	/* Totals over devices. */
	memset(&a->total, 0, sizeof a->total);
	memset(&a->idle, 0, sizeof a->idle);
	a->total.window_ns = a->markers_used ? a->win_end - a->win_begin
				: (a->last_ts > a->first_ts ? a->last_ts - a->first_ts : 0);
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (!d->kernels && !d->copies && !d->sets)
			continue;
		struct an_breakdown b;
		an_device_breakdown(a, d, &b);
		a->total.busy_ns += b.busy_ns;
		a->total.dm_ns += b.dm_ns;
		a->total.active_ns += b.active_ns;
		a->total.idle_ns += b.idle_ns;
		a->total.kernel_ns += b.kernel_ns;
		a->total.memset_ns += b.memset_ns;
		for (int k = 0; k < AN_CK_N; k++)
			a->total.ck_ns[k] += b.ck_ns[k];
		idle_breakdown_add(a, d, b.idle_ns);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		const struct an_stream *x = VEC_AT(&a->streams, struct an_stream, i);
		a->idle.hta_queued_ns += x->hta_gap[0];
		a->idle.hta_host_wait_ns += x->hta_gap[1];
	}
	return 0;
}

void an_pass_free(struct analysis *a)
{
	struct an_state *st = a->st;
	if (!st)
		return;
	u64map_free(&st->corr);
	free(st->corr_ring);
	vec_free(&st->corr_pool);
	vec_free(&st->corr_freelist);
	vec_free(&st->burst_ivs);
	u64map_free(&st->dev_idx);
	u64map_free(&st->thread_idx);
	u64map_free(&st->stream_idx);
	u64map_free(&st->finding_idx);
	u64map_free(&st->kernel_idx);
	u64map_free(&st->span_idx);
	u64map_free(&st->site_idx);
	u64map_free(&st->pp);
	u64map_free(&st->allocs);
	vec_free(&st->pp_pool);
	vec_free(&st->alloc_pool);
	vec_free(&st->alloc_freelist);
	for (size_t i = 0; i < st->threads.n; i++)
		free(VEC_AT(&st->threads, struct thread_st, i)->done);
	vec_free(&st->threads);
	vec_free(&st->all_findings);
	for (size_t i = 0; i < st->cands.n; i++)
		vec_free(&VEC_AT(&st->cands, struct step_cand, i)->ivs);
	vec_free(&st->cands);
	vec_free(&st->work_runs);
	u64map_free(&st->cand_idx);
	vec_free(&st->iters);
	free(st->synth);
	free(st->pend);
	free(st);
	a->st = NULL;
}
