/*
 * Pass: idle gaps and what the host did in them.  A gap's idle time is
 * split by what the responsible host thread (the one that issued the work
 * ending the gap, else the last one to call the API) was doing at each
 * instant of it, in this order: waiting inside a sync; inside a device
 * memory allocation or free (alloc); in a Python span (the innermost one);
 * inside another API call, or between calls, charged to the next call
 * (Python: launch overhead, launch_bound; none: host work outside Python);
 * between calls for a long stretch (AN_CPU_STRETCH_NS) before the next one:
 * CPU work, not launching (python at the next call's line, or host work
 * outside Python for autograd's engine and threads without Python); no
 * later call recorded: no_host.  When the next work was already queued
 * before the GPU ran dry, the host is not to blame: queued.
 *
 * Every gap is placed so, whatever its length (the idle breakdown by line
 * and cause does not depend on --gap-us); --gap-us only says which gaps are
 * occurrences of idle_gap findings.
 *
 * Gaps wait in a pending list for the spans that explain them (spans reach
 * the file as they end, after the GPU records of the gap).  Each piece's
 * idle by cause goes to the devices' per-phase sums (the services' idle
 * breakdown, idle_breakdown_add, adds them up) and out as the
 * idle_explained event (time per step); so does the GPU idle after each
 * sync (a sync hotspot's time at stake).  The short gaps of a launch-bound
 * loop (a launch's call alone, or queued) are summed per iteration first
 * and go out together (struct idle_batch).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_gaps.h"

_Static_assert(SPAN_RING == AN_SPAN_TREE_SLOTS, "the span tree indexes the span ring");

/* A host call or Python span kept with a gap: what the responsible host
 * thread was doing during it. */
#define GAP_CALLS 24
#define GAP_SPANS 16
struct gap_call {
	uint64_t ts, end, callpath, native;
	uint8_t sync;
	uint8_t alloc; /* a device memory allocation or free: AN_ALLOC_*, else 0 */
	uint8_t copy;  /* a copy call: an_copy_bits(), else 0 */
};
struct gap_span {
	uint64_t ts, end, callpath;
	int backward_wait;
	uint64_t wait_callpath;
};
/* One piece of an idle gap (a gap crossing an iteration boundary is cut
 * there), waiting for the spans that explain it: spans reach the file as
 * they end, after the GPU records of the gap.  The arrays last: a piece is
 * copied with the calls it has (pgap_copy).  The fields up to ctx_tid are
 * what a piece made the short way (gap_short_make: compact) has: all that
 * filing it as gap_file_launch does, a span's test of it and a phase's
 * move read; the others it gets when gap_finalize takes it (pgap_expand). */
struct pgap {
	uint64_t device, start, end;
	uint64_t gap_start; /* the whole gap's start (its pieces share it) */
	uint64_t max_end;   /* the latest end of this and every piece queued before it */
	uint64_t resume;    /* when the host issued the next work (launch, else gap end) */
	uint64_t iter_key;  /* the iteration it lies in (iter_no), or ~iter_no between iterations */
	uint64_t launch_cp, launch_nat;
	uint32_t tid;       /* the host thread held responsible */
	uint32_t site;      /* its launch's site (corr_ent.site), 0: none */
	uint8_t phase;
	/* Filed as gap_file_launch files it unless a span joins it (nspans):
	 * set as it is placed, from what no span changes.  2: a whole gap
	 * (no iteration's mark cuts it), whose idle may join the others of
	 * iter_key's iteration (struct idle_batch).  3: as 2, made the short
	 * way with the launch's next call (compact 2) and filed as
	 * gap_file_next's common case, found as it was made: the launch's
	 * part [start, calls[0].end) at its site, the next call's
	 * [calls[0].end, end) at calls[1]'s line, both of the launch's cause. */
	uint8_t launch_only;
	uint8_t has_tid;
	uint8_t q;       /* its queue: gaps_state.gap_head[q] */
	/* Made the short way (gap_short_make), the fields after ctx_tid not
	 * set (pgap_expand): 1, the launch's call alone; 2, the launch's ring
	 * call, the next call and the launch's call (calls[0, 3) set).  0: made
	 * by gap_new_q. */
	uint8_t compact;
	unsigned nspans;
	/* The innermost span of another thread running as the piece's host
	 * work ended (the caller waiting for this work: the main thread inside
	 * backward()); when it is a backward() wait, the user's line that
	 * called it (the path the tracer lends autograd's threads), else 0. */
	uint64_t ctx_cp, ctx_dur, ctx_wait_cp;
	uint32_t ctx_tid;
	uint8_t edge;
	uint8_t queued;  /* the next work was launched before the GPU ran dry */
	uint8_t has_launch;
	uint8_t syncs, allocs; /* how many of its calls are syncs, allocator calls */
	unsigned ncalls;
	uint64_t launch_ts;
	uint64_t kernel_name;     /* the kernel that ended the gap */
	struct gap_call calls[GAP_CALLS];
	struct gap_span spans[GAP_SPANS];
};

/* A piece made the short way (compact) with the fields it lacks: as
 * gap_new_q makes a late short gap with those calls. */
static void pgap_expand(struct pgap *g)
{
	g->edge = AN_EDGE_NONE;
	g->queued = 0;
	g->has_launch = 1;
	g->syncs = g->allocs = 0;
	g->launch_ts = g->resume;
	g->kernel_name = 0;
	if (g->compact == 1) {
		g->ncalls = 1;
		g->calls[0] = (struct gap_call){
			.ts = g->resume, .end = g->end, .callpath = g->launch_cp, .native = g->launch_nat};
	} else {
		/* (gap_short_make kept of the launch's two calls only what
		 * differs from the launch: its ring call's end) */
		g->ncalls = 3;
		g->calls[0] = (struct gap_call){
			.ts = g->resume, .end = g->calls[0].end, .callpath = g->launch_cp, .native = g->launch_nat};
		g->calls[2] = (struct gap_call){
			.ts = g->resume, .end = g->end, .callpath = g->launch_cp, .native = g->launch_nat};
	}
	g->compact = 0;
}

/* The piece's head (all but its calls and spans) zeroed: in 64-byte
 * stores the compiler writes as a few vector stores (one memset of it all
 * became a `rep stos`, ~27 instructions a piece). */
static inline __attribute__((always_inline)) void pgap_clear_head(struct pgap *g)
{
	char *p = (char *)g;
	size_t n = offsetof(struct pgap, calls);
	for (; n >= 64; p += 64, n -= 64)
		memset(p, 0, 64);
	memset(p, 0, n);
}

/* *dst = *src, but only the calls and spans src has. */
static inline void pgap_copy(struct pgap *dst, const struct pgap *src)
{
	memcpy(dst, src, offsetof(struct pgap, calls));
	/* A piece has a call or two and a span or none: element by element,
	 * not a libc memcpy call for each array (about 20 instructions more
	 * each, 1.5 M pieces). */
	if (src->ncalls <= 4) {
		for (unsigned i = 0; i < src->ncalls; i++)
			dst->calls[i] = src->calls[i];
	} else {
		memcpy(dst->calls, src->calls, src->ncalls * sizeof src->calls[0]);
	}
	if (src->nspans <= 4) {
		for (unsigned i = 0; i < src->nspans; i++)
			dst->spans[i] = src->spans[i];
	} else {
		memcpy(dst->spans, src->spans, src->nspans * sizeof src->spans[0]);
	}
}

static inline __attribute__((always_inline)) void gap_consider_span(struct pgap *g, const struct span_ent *sp)
{
	if (sp->end <= g->start || sp->ts >= g->end)
		return;
	if (!g->has_tid || sp->tid != g->tid) {
		/* Another thread's span running when the piece's host work ended
		 * (the next launch, or the piece's end): the caller waiting for
		 * this work (the main thread inside backward()), the innermost.
		 * The thread's own backward() is no context of its own gaps (it
		 * waited there itself, or ran torch's Python before the engine
		 * started). */
		uint64_t at = g->resume < g->end ? g->resume : g->end;
		if (sp->ts <= at && sp->end >= at && (!g->ctx_cp || sp->end - sp->ts < g->ctx_dur)) {
			g->ctx_cp = sp->callpath;
			g->ctx_dur = sp->end - sp->ts;
			g->ctx_wait_cp = sp->backward_wait ? sp->wait_callpath : 0;
			g->ctx_tid = sp->tid;
		}
		return;
	}
	/* A span running since before the GPU went idle and still running when
	 * the next launch was issued is a caller of everything (the training
	 * loop, main): it explains nothing.  Before the whole gap, not before
	 * this piece: a function that begins as an iteration does (a detected
	 * step starts with its first span) is the piece's own work. */
	if (sp->ts <= g->gap_start && sp->end >= g->resume)
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

/* What the host was doing at an instant of a piece (gap_cause_at). */
struct gap_at {
	uint64_t cp, nat;
	uint8_t copy;      /* inside a copy call: an_copy_bits() */
	uint8_t alloc;     /* inside an allocator call: AN_ALLOC_* */
	uint8_t no_call;   /* between calls in a stretch of AN_CPU_STRETCH_NS or more before the next */
	uint8_t bwait;     /* waiting inside its own backward() */
};

struct gap_part {
	uint8_t cause;
	uint8_t copy;      /* an_copy_bits() of the copy calls the host was inside */
	uint8_t alloc;     /* AN_ALLOC_* of the allocator calls the host was inside */
	uint64_t cp, nat, ns;
	uint64_t copy_ns;  /* of ns, inside a copy call */
	uint64_t no_call_ns;   /* of ns, between calls in a long stretch (AN_CPU_STRETCH_NS) */
	uint64_t bwait_ns;     /* of ns, waiting inside its own backward() */
};
#define GAP_PARTS (2 * (GAP_CALLS + GAP_SPANS) + 4)

static void part_add(struct gap_part *parts, size_t *n, int cause, const struct gap_at *at, uint64_t ns)
{
	uint64_t copy_ns = at->copy ? ns : 0, no_call_ns = at->no_call ? ns : 0, bwait_ns = at->bwait ? ns : 0;
	for (size_t i = 0; i < *n; i++)
		if (parts[i].cause == cause && parts[i].cp == at->cp && parts[i].nat == at->nat) {
			parts[i].ns += ns;
			parts[i].copy_ns += copy_ns;
			parts[i].copy |= at->copy;
			parts[i].alloc |= at->alloc;
			parts[i].no_call_ns += no_call_ns;
			parts[i].bwait_ns += bwait_ns;
			return;
		}
	if (*n < GAP_PARTS)
		parts[(*n)++] = (struct gap_part){.cause = (uint8_t)cause, .copy = at->copy, .alloc = at->alloc,
						  .cp = at->cp, .nat = at->nat, .ns = ns, .copy_ns = copy_ns,
						  .no_call_ns = no_call_ns, .bwait_ns = bwait_ns};
}

/* What the host was doing at instant t of the piece (see above), into *at.
 * engine: the piece's work was launched by autograd's engine (its calls'
 * path is the one the tracer lends it): a long stretch without calls is
 * its C++, not Python of the line it borrows. */
static int gap_cause_at(const struct pgap *g, uint64_t t, int engine, struct gap_at *at)
{
	memset(at, 0, sizeof *at);
	/* Inside a sync, else inside the allocator (the first such call):
	 * PyTorch's caching allocator asking the driver for memory (its cache
	 * emptied, or grown) or giving it back.  Before spans: the Python
	 * function around it is not what took the time.  One walk: a sync
	 * anywhere wins over an allocator call. */
	const struct gap_call *alloc = NULL;
	for (unsigned i = 0; i < (g->syncs || g->allocs ? g->ncalls : 0); i++) {
		const struct gap_call *c = &g->calls[i];
		if ((c->sync || c->alloc) && c->ts <= t && t < c->end) {
			if (c->sync) {
				at->cp = c->callpath;
				at->nat = c->native;
				return AN_CAUSE_SYNC;
			}
			if (!alloc)
				alloc = c;
		}
	}
	if (alloc) {
		at->cp = alloc->callpath;
		at->nat = alloc->native;
		at->alloc = alloc->alloc;
		return AN_CAUSE_ALLOC;
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
		at->cp = inner->wait_callpath;
		at->bwait = 1;
		return AN_CAUSE_HOST_OTHER;
	}
	if (inner) {
		at->cp = inner->callpath;
		return AN_CAUSE_PYTHON;
	}
	/* Calls are in time order: the first one not over by t is the call
	 * the host was in, or the next one it made; a stretch without calls
	 * runs from the previous one's end, or the whole gap's start (a piece
	 * cut at an iteration's mark is part of it). */
	uint64_t prev_end = g->gap_start;
	for (unsigned i = 0; i < g->ncalls; i++) {
		const struct gap_call *c = &g->calls[i];
		if (c->end > t) {
			at->cp = c->callpath;
			at->nat = c->native;
			if (c->ts <= t) {
				at->copy = c->copy;
			} else if (c->ts - prev_end >= AN_CPU_STRETCH_NS) {
				/* No GPU call for that long: the host was computing, not
				 * launching (eager PyTorch spends tens of us per op).  In
				 * Python, at the line that then launched (its function ran
				 * it, or a C call it made: a span of its own would have
				 * said so above); autograd's engine and threads without
				 * Python: host work outside Python. */
				at->no_call = 1;
				return c->callpath && !engine ? AN_CAUSE_PYTHON : AN_CAUSE_HOST_OTHER;
			}
			return c->callpath ? AN_CAUSE_LAUNCH_BOUND : AN_CAUSE_HOST_OTHER;
		}
		if (c->end > prev_end)
			prev_end = c->end;
	}
	return AN_CAUSE_NO_HOST;
}

/* The piece's work was launched by autograd's engine: another thread waited
 * in backward() as it launched, and the launch has no Python frames, or the
 * path the tracer lends the engine (the line that called backward()). */
static int gap_engine(struct analysis *a, const struct pgap *g)
{
	if (!g->has_launch || !g->ctx_wait_cp)
		return 0;
	return !g->launch_cp || an_user_callpath(a, g->launch_cp) == g->ctx_wait_cp;
}

/* The GPU idle after a sync returned in the piece, until the host did
 * something else than issue the next work (a Python span, a copy, an
 * allocation, another sync): the sync drained the queue, so the GPU waits
 * out the host's way back to launching.  Added to the sync's
 * sync_hotspot as its idle_ns (its time at stake: the wait and this).
 * Not at the window's edges (start-up, shutdown), nor when the next work
 * was queued before the GPU ran dry. */
static void gap_after_sync(struct analysis *a, const struct pgap *g)
{
	if (g->edge || g->queued || !g->syncs)
		return;
	const struct gap_call *sync = NULL;
	unsigned si = 0;
	for (unsigned i = 0; i < g->ncalls; i++) {
		const struct gap_call *c = &g->calls[i];
		if (c->sync && c->end > g->gap_start && c->end < g->end) {
			sync = c;
			si = i;
		}
	}
	if (!sync)
		return;
	uint64_t lo = sync->end > g->start ? sync->end : g->start, hi = g->end;
	for (unsigned i = si + 1; i < g->ncalls; i++) {
		const struct gap_call *c = &g->calls[i];
		if ((c->sync || c->alloc || c->copy) && c->ts >= sync->end && c->ts < hi)
			hi = c->ts;
	}
	for (unsigned i = 0; i < g->nspans; i++)
		if (g->spans[i].ts >= sync->end && g->spans[i].ts < hi)
			hi = g->spans[i].ts;
	if (hi <= lo)
		return;
	struct an_finding *f = finding(a, AN_F_SYNC_HOTSPOT, 0, g->phase, sync->callpath, sync->native);
	if (f)
		f->idle_ns += hi - lo;
}

/* finding(a, AN_F_IDLE_PART, cause, phase, cp, nat), through the cache of
 * the parts filed lately (struct part_slot). */
static __attribute__((noinline)) struct an_finding *idle_part_miss(struct analysis *a, struct part_slot *s, int cause,
								    int phase, uint64_t cp, uint64_t nat);

/* The cache's slot for (code, phase, cp, nat): code, a part's cause + 16 *
 * its edge, or GAP_CACHE_CODE + the cause of an idle_gap occurrence's
 * finding (idle_gap_finding). */
#define GAP_CACHE_CODE 64
static inline __attribute__((always_inline)) struct part_slot *part_slot_of(struct gaps_state *gs, int code, int phase,
									     uint64_t cp, uint64_t nat)
{
	uint64_t h = (cp ^ (nat * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)code << 8 | (uint64_t)phase)) * 0xff51afd7ed558ccdULL;
	_Static_assert(PART_CACHE == 2048, "the slot is the hash's top 11 bits");
	return &gs->part_cache[h >> 53];
}

/* The cache's hit inlined where a piece files its parts; a miss is a call. */
static inline __attribute__((always_inline)) struct an_finding *idle_part(struct analysis *a, int cause, int phase,
									    uint64_t cp, uint64_t nat)
{
	struct part_slot *s = part_slot_of(an_pass_state(a, gaps), cause, phase, cp, nat);
	if (s->used && s->cp == cp && s->nat == nat && s->cause == cause && s->phase == phase)
		return VEC_AT(&a->st->all_findings, struct an_finding, s->ix);
	return idle_part_miss(a, s, cause, phase, cp, nat);
}

/* finding(a, AN_F_IDLE_GAP, cause, phase, cp, nat) through the same cache
 * (an idle_gap finding is kept at its line as given, as a part's is: not
 * moved to the user's line, so that the answer for a key does not change
 * while the finding stays in the index). */
static __attribute__((noinline)) struct an_finding *idle_gap_finding(struct analysis *a, int cause, int phase,
								      uint64_t cp, uint64_t nat)
{
	_Static_assert(GAP_CACHE_CODE >= 16 * 3, "above every part's cause + 16 * its edge");
	int code = GAP_CACHE_CODE + cause;
	struct part_slot *s = part_slot_of(an_pass_state(a, gaps), code, phase, cp, nat);
	if (s->used && s->cp == cp && s->nat == nat && s->cause == code && s->phase == phase)
		return VEC_AT(&a->st->all_findings, struct an_finding, s->ix);
	struct an_finding *f = finding(a, AN_F_IDLE_GAP, cause, phase, cp, nat);
	if (f) {
		size_t ix = finding_index(a->st, f);
		*s = (struct part_slot){.cp = cp, .nat = nat, .ix = (uint32_t)ix, .cause = (uint16_t)code,
					.phase = (uint8_t)phase, .used = ix <= UINT32_MAX};
	}
	return f;
}

static struct an_finding *idle_part_miss(struct analysis *a, struct part_slot *s, int cause, int phase, uint64_t cp,
					 uint64_t nat)
{
	struct an_finding *f = finding(a, AN_F_IDLE_PART, cause, phase, cp, nat);
	if (f) {
		size_t ix = finding_index(a->st, f);
		*s = (struct part_slot){.cp = cp, .nat = nat, .ix = (uint32_t)ix, .cause = (uint16_t)cause,
					.phase = (uint8_t)phase, .used = ix <= UINT32_MAX};
	}
	return f;
}

/* The piece's parts: what the host was doing (gap_cause_at) at each
 * instant, stretch by stretch. */
static void gap_parts_by_instants(const struct pgap *g, int engine, struct gap_part *parts, size_t *np)
{
	/* The piece cut at every call's and span's ends that fall inside
	 * it (the others only make empty stretches). */
	uint64_t pts[2 + 2 * (GAP_CALLS + GAP_SPANS)];
	size_t n = 0;
	uint64_t s = g->start, e = g->end;
	pts[n++] = s;
	for (unsigned i = 0; i < g->ncalls; i++) {
		uint64_t from = g->calls[i].ts, to = g->calls[i].end;
		pts[n] = from;
		n += from > s && from < e;
		pts[n] = to;
		n += to > s && to < e;
	}
	for (unsigned i = 0; i < g->nspans; i++) {
		uint64_t from = g->spans[i].ts, to = g->spans[i].end;
		pts[n] = from;
		n += from > s && from < e;
		pts[n] = to;
		n += to > s && to < e;
	}
	pts[n++] = e;
	/* A few at most, mostly in order already: insertion sort
	 * (qsort's merge sort cost more than the rest of a short gap's
	 * placing). */
	for (size_t i = 2; i + 1 < n; i++) {
		uint64_t x = pts[i];
		size_t j = i;
		for (; pts[j - 1] > x; j--)
			pts[j] = pts[j - 1];
		pts[j] = x;
	}
	/* Consecutive stretches the host spent alike go to their part
	 * as one (the same sums). */
	struct gap_at run = {0};
	int run_cause = -1;
	uint64_t run_ns = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		uint64_t lo = pts[i], hi = pts[i + 1];
		if (hi <= lo)
			continue;
		struct gap_at at;
		int cause = gap_cause_at(g, lo, engine, &at);
		if (cause == run_cause && at.cp == run.cp && at.nat == run.nat && at.copy == run.copy &&
		    at.alloc == run.alloc && at.no_call == run.no_call && at.bwait == run.bwait) {
			run_ns += hi - lo;
			continue;
		}
		if (run_cause >= 0)
			part_add(parts, np, run_cause, &run, run_ns);
		run = at;
		run_cause = cause;
		run_ns = hi - lo;
	}
	if (run_cause >= 0)
		part_add(parts, np, run_cause, &run, run_ns);
}

/* A part of a short piece: its cause and line, and its idle. */
struct short_part {
	uint64_t cp, nat, ns;
	int cause;
};

/* The parts into their findings (idle_part), in order. */
static inline __attribute__((always_inline)) void short_parts_findings(struct analysis *a, const struct pgap *g,
									const struct short_part *parts, size_t np)
{
	for (size_t i = 0; i < np; i++) {
		struct an_finding *p = idle_part(a, parts[i].cause, g->phase, parts[i].cp, parts[i].nat);
		if (p) {
			p->cause = parts[i].cause;
			p->edge = AN_EDGE_NONE;
			p->total_ns += parts[i].ns;
			p->count++;
			p->device = g->device;
		}
	}
}

/* To its part (the first of the same cause and line: part_add's order). */
static inline __attribute__((always_inline)) void short_part_add(struct short_part *parts, size_t *np, int cause,
								   uint64_t cp, uint64_t nat, uint64_t ns)
{
	size_t i = *np;
	if (i && parts[i - 1].cause == cause && parts[i - 1].cp == cp && parts[i - 1].nat == nat) {
		parts[i - 1].ns += ns;
		return;
	}
	for (size_t j = 0; j + 1 < i; j++)
		if (parts[j].cause == cause && parts[j].cp == cp && parts[j].nat == nat) {
			parts[j].ns += ns;
			return;
		}
	parts[(*np)++] = (struct short_part){.cp = cp, .nat = nat, .ns = ns, .cause = cause};
}

/* The batch's idle to its device and out (idle_explained), as each of its
 * pieces would have been: its pieces lie in one iteration, or between the
 * same two, so in the same steps as their span [s, e), whole (the steps are
 * the iterations: an_pass_steps.c publishes step_begin and step_end at its
 * marks, and with every record in time order the marks before a piece are
 * those of its time); the sums are the same.  With a record out of time
 * order since the analysis began, piece by piece. */
static __attribute__((noinline)) void idle_batch_flush(struct analysis *a, struct idle_batch *b)
{
	if (!b->n)
		return;
	struct an_device *d = get_device(a, b->device);
	if (d)
		for (int c = 0; c < AN_CAUSE_N; c++)
			d->idle_by[b->phase][c] += b->by_cause[c];
	if (!a->late_records) {
		an_publish_idle_explained(a, b->s, b->e, b->by_cause);
	} else {
		for (size_t i = 0; i < b->n; i++) {
			const struct idle_batch_piece *p = &b->piece[i];
			uint64_t by_cause[AN_CAUSE_N] = {0};
			by_cause[p->cause] = p->ns;
			an_publish_idle_explained(a, p->s, p->e, by_cause);
		}
	}
	b->n = 0;
	memset(b->by_cause, 0, sizeof b->by_cause);
}

/* A new batch (the one before flushed). */
static __attribute__((noinline)) void idle_batch_start(struct analysis *a, struct idle_batch *b, uint64_t iter_key,
						       uint64_t device, int phase)
{
	idle_batch_flush(a, b);
	b->iter_key = iter_key;
	b->device = device;
	b->phase = (uint8_t)phase;
	b->s = UINT64_MAX;
	b->e = 0;
}

/* A whole piece's idle [s, e) of device (ns of cause, made in the iteration
 * iter_key, filed under phase) into batch b. */
static inline __attribute__((always_inline)) void idle_batch_add(struct analysis *a, struct idle_batch *b,
								 uint64_t iter_key, uint64_t device, int phase,
								 uint64_t s, uint64_t e, int cause, uint64_t ns)
{
	if (__builtin_expect(!b->n || b->n == IDLE_BATCH || b->iter_key != iter_key || b->device != device ||
				     b->phase != phase,
			     0))
		idle_batch_start(a, b, iter_key, device, phase);
	b->piece[b->n++] = (struct idle_batch_piece){.s = s, .e = e, .ns = ns, .cause = cause};
	b->by_cause[cause] += ns;
	if (s < b->s)
		b->s = s;
	if (e > b->e)
		b->e = e;
}

/* A launch-bound piece's part (idle_part), kept by its site and phase. */
static __attribute__((noinline)) struct an_finding *launch_part_miss(struct analysis *a, const struct pgap *g, int cause,
								      uint64_t cp, uint64_t nat)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	struct an_finding *p = idle_part(a, cause, g->phase, cp, nat);
	if (!p || !g->site)
		return p;
	if (g->site >= gs->site_part_n) {
		size_t n = gs->site_part_n ? gs->site_part_n : 64;
		while (n <= g->site)
			n *= 2;
		uint32_t(*t)[3] = realloc(gs->site_part, n * sizeof *t);
		if (!t)
			return p;
		memset(t + gs->site_part_n, 0, (n - gs->site_part_n) * sizeof *t);
		gs->site_part = t;
		gs->site_part_n = n;
	}
	size_t ix = finding_index(a->st, p);
	if (ix < UINT32_MAX)
		gs->site_part[g->site][g->phase] = (uint32_t)(ix + 1);
	return p;
}

/* The part's idle and count (gap_file_launch): at line cp, nat (its
 * launch's call). */
static inline __attribute__((always_inline)) void launch_part_add(struct analysis *a, const struct pgap *g, int cause,
								   uint64_t ns, uint64_t cp, uint64_t nat)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	struct an_finding *p;
	uint32_t ix1 = g->site < gs->site_part_n ? gs->site_part[g->site][g->phase] : 0;
	if (__builtin_expect(ix1 != 0, 1))
		p = VEC_AT(&a->st->all_findings, struct an_finding, ix1 - 1);
	else
		p = launch_part_miss(a, g, cause, cp, nat);
	if (p) {
		p->cause = cause;
		p->edge = AN_EDGE_NONE;
		p->total_ns += ns;
		p->count++;
		p->device = g->device;
	}
}

/* gap_next_part's part through the part cache, kept as its site's
 * (struct site_next). */
static __attribute__((noinline)) void gap_next_part_miss(struct analysis *a, const struct pgap *g, int cause,
							  uint64_t ns)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	const struct gap_call *nc = &g->calls[1];
	struct an_finding *p = idle_part(a, cause, g->phase, nc->callpath, nc->native);
	if (!p)
		return;
	p->cause = cause;
	p->edge = AN_EDGE_NONE;
	p->total_ns += ns;
	p->count++;
	p->device = g->device;
	if (!g->site)
		return;
	if (g->site >= gs->site_next_n) {
		size_t n = gs->site_next_n ? gs->site_next_n : 64;
		while (n <= g->site)
			n *= 2;
		struct site_next(*t)[3] = realloc(gs->site_next, n * sizeof *t);
		if (!t)
			return;
		memset(t + gs->site_next_n, 0, (n - gs->site_next_n) * sizeof *t);
		gs->site_next = t;
		gs->site_next_n = n;
	}
	size_t ix = finding_index(a->st, p);
	if (ix < UINT32_MAX)
		gs->site_next[g->site][g->phase] =
			(struct site_next){.cp = nc->callpath, .nat = nc->native, .ix1 = (uint32_t)(ix + 1)};
}

/* The part of the launch's next call (calls[1]) in a piece of launch_only
 * 3: ns of cause at its line (gap_file_next's second part), found by the
 * launch's site when the site's launch was followed by a call at the same
 * line lately (a loop's next operation).  (The part's cause and edge are
 * not stored again, as gap_file_launch's: the slot is set only by
 * gap_next_part_miss, which stores them, and a site's cause is its
 * launch's.) */
static inline __attribute__((always_inline)) void gap_next_part(struct analysis *a, const struct pgap *g, int cause,
								 uint64_t ns)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	const struct gap_call *nc = &g->calls[1];
	if (__builtin_expect(g->site < gs->site_next_n, 1)) {
		const struct site_next *sn = &gs->site_next[g->site][g->phase];
		if (__builtin_expect(sn->ix1 && sn->cp == nc->callpath && sn->nat == nc->native, 1)) {
			struct an_finding *p = VEC_AT(&a->st->all_findings, struct an_finding, sn->ix1) - 1;
			p->total_ns += ns;
			p->count++;
			p->device = g->device;
			return;
		}
	}
	gap_next_part_miss(a, g, cause, ns);
}

/* A piece cut at an iteration's mark: its idle to its device and out on its
 * own. */
static __attribute__((noinline)) void gap_file_launch_alone(struct analysis *a, const struct pgap *g)
{
	int cause = g->calls[0].callpath ? AN_CAUSE_LAUNCH_BOUND : AN_CAUSE_HOST_OTHER;
	uint64_t ns = g->end - g->start;
	struct an_device *d = get_device(a, g->device);
	if (d)
		d->idle_by[g->phase][cause] += ns;
	uint64_t by_cause[AN_CAUSE_N] = {0};
	by_cause[cause] = ns;
	an_publish_idle_explained(a, g->start, g->end, by_cause);
	launch_part_add(a, g, cause, ns, g->calls[0].callpath, g->calls[0].native);
}

/* A launch-bound loop's piece: short (no occurrence, no edge), not queued,
 * without spans, syncs or allocator calls, its launch's call alone, to the
 * end of the piece at least, begun before the piece or less than a long
 * stretch (AN_CPU_STRETCH_NS) after the gap's start (gap_place's
 * launch_only): one part, the launch's, all of its idle (gap_file_short's
 * walk would find the same).  Its own function, small: most pieces are
 * filed here (gap_file), through gap_file_launch's test. */
static __attribute__((noinline)) void gap_file_launch_slow(struct analysis *a, const struct pgap *g)
{
	if (__builtin_expect(g->launch_only == 1, 0)) {
		gap_file_launch_alone(a, g);
		return;
	}
	int cause = g->launch_cp ? AN_CAUSE_LAUNCH_BOUND : AN_CAUSE_HOST_OTHER;
	uint64_t ns = g->end - g->start, mid = g->launch_only == 3 ? g->calls[0].end : g->end;
	idle_batch_add(a, &an_pass_state(a, gaps)->batch, g->iter_key, g->device, g->phase, g->start, g->end, cause, ns);
	launch_part_add(a, g, cause, mid - g->start, g->launch_cp, g->launch_nat);
	if (g->launch_only == 3)
		gap_next_part(a, g, cause, g->end - mid);
}

/* gap_file_launch_slow's work for a whole piece (launch_only 2, or 3 with
 * the next call's part after the launch's) when the batch takes it as it
 * is and its site's part is known (nearly always): inline, without a call
 * that saves registers. */
static inline __attribute__((always_inline)) void gap_file_launch(struct analysis *a, const struct pgap *g)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	struct idle_batch *b = &gs->batch;
	size_t bn = b->n;
	uint32_t ix1;
	if (__builtin_expect(!bn || bn == IDLE_BATCH || b->iter_key != g->iter_key ||
				     b->device != g->device || b->phase != g->phase ||
				     g->site >= gs->site_part_n || !(ix1 = gs->site_part[g->site][g->phase]),
			     0)) {
		gap_file_launch_slow(a, g);
		return;
	}
	int cause = g->launch_cp ? AN_CAUSE_LAUNCH_BOUND : AN_CAUSE_HOST_OTHER;
	int split = g->launch_only == 3;
	uint64_t s = g->start, e = g->end, ns = e - s, device = g->device, mid = split ? g->calls[0].end : e;
	/* (the element before ix1's: the - 1 folds into the fields' offsets) */
	struct an_finding *p = VEC_AT(&a->st->all_findings, struct an_finding, ix1) - 1;
	/* (idle_batch_add's and launch_part_add's work; the part's cause and
	 * edge are not stored again: the site's slot is set only by
	 * launch_part_miss, whose caller stores them, and every part of the
	 * same key stores the same) */
	b->piece[bn] = (struct idle_batch_piece){.s = s, .e = e, .ns = ns, .cause = cause};
	b->n = bn + 1;
	b->by_cause[cause] += ns;
	if (s < b->s)
		b->s = s;
	if (e > b->e)
		b->e = e;
	p->total_ns += mid - s;
	p->count++;
	p->device = device;
	if (split)
		gap_next_part(a, g, cause, e - mid);
}

/* A short piece (no occurrence, no edge) that was not queued and has no
 * span, sync or allocator call among its host facts: nine in ten of a
 * launch-bound loop's pieces (its launch, and the launch's way to the GPU).
 * Its parts are gap_cause_at's answers over the piece, taken call by call
 * instead of instant by instant: the instants whose first call not over is
 * call k run from the latest end of the calls before it (w) to its end;
 * before its start the host was between calls (a long stretch or not),
 * after it inside it; after every call there was no host.  Filed as
 * gap_finalize files such a piece (only the parts' cause, line and idle
 * matter to it: the copy, allocator and stretch shares are an
 * occurrence's), in the same order. */
static inline __attribute__((always_inline)) size_t short_parts(struct analysis *a, const struct pgap *g,
								 struct short_part *parts)
{
	size_t np = 0;
	int engine = -1; /* gap_engine, asked only for a long stretch */
	uint64_t s = g->start, e = g->end, w = 0;
	for (unsigned k = 0; k < g->ncalls && w < e; k++) {
		const struct gap_call *c = &g->calls[k];
		uint64_t lo = w > s ? w : s, prev_end = w > g->gap_start ? w : g->gap_start;
		uint64_t hi = c->end < e ? c->end : e;
		if (c->end > w)
			w = c->end;
		if (lo >= hi)
			continue;
		int in_call = c->callpath ? AN_CAUSE_LAUNCH_BOUND : AN_CAUSE_HOST_OTHER;
		if (c->ts > lo) {
			uint64_t to = c->ts < hi ? c->ts : hi;
			int cause = in_call;
			if (c->ts - prev_end >= AN_CPU_STRETCH_NS) {
				if (c->callpath && engine < 0)
					engine = gap_engine(a, g);
				cause = c->callpath && !engine ? AN_CAUSE_PYTHON : AN_CAUSE_HOST_OTHER;
			}
			short_part_add(parts, &np, cause, c->callpath, c->native, to - lo);
			lo = to;
		}
		if (lo < hi)
			short_part_add(parts, &np, in_call, c->callpath, c->native, hi - lo);
	}
	if (w < e)
		short_part_add(parts, &np, AN_CAUSE_NO_HOST, 0, 0, e - (w > s ? w : s));
	return np;
}

/* The parts' idle to the device and out, and into their findings
 * (gap_file_short's filing). */
static inline __attribute__((always_inline)) void short_parts_file(struct analysis *a, const struct pgap *g,
								    const struct short_part *parts, size_t np)
{
	uint64_t s = g->start, e = g->end;
	uint64_t by_cause[AN_CAUSE_N] = {0};
	struct an_device *d = get_device(a, g->device);
	for (size_t i = 0; i < np; i++) {
		by_cause[parts[i].cause] += parts[i].ns;
		if (d)
			d->idle_by[g->phase][parts[i].cause] += parts[i].ns;
	}
	an_publish_idle_explained(a, s, e, by_cause);
	short_parts_findings(a, g, parts, np);
}

static void gap_file_short(struct analysis *a, const struct pgap *g)
{
	struct short_part parts[2 * GAP_CALLS + 1];
	size_t np = short_parts(a, g, parts);
	short_parts_file(a, g, parts, np);
}

/* A piece made the short way with the launch's next call (compact 2,
 * gap_short_next) that no span joined, not in gap_file_next's common case
 * (launch_only 0: gap_short_next filed that as launch_only 2 or 3):
 * gap_file_short's parts, whose idle, when they share one cause, joins the
 * batch of its iteration as a launch-bound piece's does (it is whole, made
 * in iter_key's iteration: struct idle_batch); else filed on its own as
 * gap_file_short does. */
static __attribute__((noinline)) void gap_file_next(struct analysis *a, const struct pgap *g)
{
	struct short_part parts[2 * GAP_CALLS + 1];
	size_t np = short_parts(a, g, parts);
	int one = np > 0;
	for (size_t i = 1; i < np; i++)
		one &= parts[i].cause == parts[0].cause;
	if (!one) {
		short_parts_file(a, g, parts, np);
		return;
	}
	/* (the parts tile [start, end): their idle is all of it) */
	idle_batch_add(a, &an_pass_state(a, gaps)->batch, g->iter_key, g->device, g->phase, g->start, g->end,
		       parts[0].cause, g->end - g->start);
	short_parts_findings(a, g, parts, np);
}

static __attribute__((noinline)) void gap_finalize(struct analysis *a, struct pgap *g)
{
	if (g->compact)
		pgap_expand(g);
	uint64_t len = g->end - g->start;
	if (!g->queued && !g->nspans && !g->syncs && !g->allocs && !g->edge && len < a->opts.gap_ns) {
		gap_file_short(a, g);
		return;
	}
	struct gap_part parts[GAP_PARTS];
	size_t np = 0;
	int engine = gap_engine(a, g);
	if (g->queued) {
		struct gap_at at = {.cp = g->launch_cp, .nat = g->launch_nat};
		part_add(parts, &np, AN_CAUSE_QUEUED, &at, len);
	} else {
		gap_parts_by_instants(g, engine, parts, &np);
	}
	uint64_t by_cause[AN_CAUSE_N] = {0};
	for (size_t i = 0; i < np; i++)
		by_cause[parts[i].cause] += parts[i].ns;
	/* The cause with the most idle, no_host on a tie with it, else the
	 * lowest of the tied: only the parts' causes have any. */
	int cause = AN_CAUSE_NO_HOST;
	for (size_t i = 0; i < np; i++) {
		int c = parts[i].cause;
		if (c != AN_CAUSE_NONE && (by_cause[c] > by_cause[cause] ||
					   (by_cause[c] == by_cause[cause] && cause != AN_CAUSE_NO_HOST && c < cause)))
			cause = c;
	}
	const struct gap_part *site = NULL;
	for (size_t i = 0; i < np; i++)
		if (parts[i].cause == cause && (!site || parts[i].ns > site->ns))
			site = &parts[i];

	gap_after_sync(a, g);
	struct an_device *d = get_device(a, g->device);
	if (d) {
		/* by part, not by cause: a piece has a part or two, the same sums */
		for (size_t i = 0; i < np; i++)
			d->idle_by[g->phase][parts[i].cause] += parts[i].ns;
		if (g->edge)
			d->idle_edge[g->phase][g->edge - 1] += len;
	}
	an_publish_idle_explained(a, g->start, g->end, by_cause);
	for (size_t i = 0; i < np; i++) {
		struct an_finding *p = idle_part(a, parts[i].cause + 16 * g->edge, g->phase, parts[i].cp, parts[i].nat);
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
	struct an_finding *f = idle_gap_finding(a, cause, g->phase, site ? site->cp : 0, site ? site->nat : 0);
	if (!f)
		return;
	f->count++;
	f->groups++;
	f->total_ns += len;
	for (int c = 0; c < AN_CAUSE_N; c++)
		f->cause_ns[c] += by_cause[c];
	/* What resumed the GPU: the longest gap's launch (its thread, its
	 * line, its kernel) stands for the finding's. */
	if (len > f->max_ns) {
		f->max_ns = len;
		f->other_callpath = g->has_launch ? g->launch_cp : 0;
		f->kernel_name = g->kernel_name;
		f->launch_tid = g->tid;
		f->has_launch_tid = g->has_launch;
		f->longest_engine = engine;
	}
	f->device = g->device;
	if (!f->context_callpath) {
		f->context_callpath = g->ctx_cp;
		f->context_tid = g->ctx_tid;
	}
	if (engine) {
		if (!f->engine_gaps || (!f->engine_kernel && g->kernel_name)) {
			f->engine_kernel = g->kernel_name;
			f->engine_tid = g->tid;
		}
		f->engine_gaps++;
		f->engine_ns += len;
	}
	if (site) {
		f->site_ns += site->ns;
		f->copy_ns += site->copy_ns;
		f->copy_bits |= site->copy;
		f->alloc_bits |= site->alloc;
		f->no_call_ns += site->no_call_ns;
		f->backward_wait_ns += site->bwait_ns;
	}
}

/* Piece g's idle filed (it waited for its spans). */
static inline __attribute__((always_inline)) void gap_file(struct analysis *a, struct pgap *g)
{
	/* (a whole piece, launch_only 2 or 3, nearly always: one cut at a
	 * mark is filed alone, gap_file_launch_slow) */
	if (__builtin_expect(g->launch_only >= 2, 1) && !g->nspans)
		gap_file_launch(a, g);
	else if (g->launch_only && !g->nspans)
		gap_file_launch_slow(a, g);
	else if (g->compact == 2 && !g->nspans)
		gap_file_next(a, g);
	else
		gap_finalize(a, g);
}

/* The oldest position in the span ring whose span may end after t: the
 * ring's max_end never decreases, so every span before it ended by t. */
static size_t span_first_after(struct gaps_state *gs, uint64_t t)
{
#define SPAN_MAX_END_AT(pos) (gs->span[(pos) % SPAN_RING].max_end)
	return AN_SPAN_FIRST_AFTER(&gs->span_tree, gs->span_n > SPAN_RING ? gs->span_n - SPAN_RING : 0, gs->span_n, t,
				   SPAN_MAX_END_AT);
#undef SPAN_MAX_END_AT
}

/* The next slot of queue q (its oldest piece filed when it is full). */
static inline __attribute__((always_inline)) struct pgap *gap_slot(struct analysis *a, unsigned q)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	struct pgap *queue = gs->gaps + q * PENDING_GAPS;
	if (gs->gap_n[q] == PENDING_GAPS) {
		/* (the queue stays full: the new piece takes the slot filed) */
		struct pgap *g = &queue[gs->gap_head[q]];
		gap_file(a, g);
		gs->gap_head[q] = (gs->gap_head[q] + 1) % PENDING_GAPS;
		return g;
	}
	struct pgap *g = &queue[(gs->gap_head[q] + gs->gap_n[q]) % PENDING_GAPS];
	gs->gap_n[q]++;
	return g;
}

/* Span sp (of a piece with a thread: has_tid) is one of piece g's thread's
 * callers of everything: running since
 * before the whole gap and still when the next work was issued, which
 * gap_consider_span passes over (it returns at that test).  Its start and
 * end then narrow *ts_max and *end_min, the bounds the pieces after g are
 * held to for the same to be true of it (gap_place's inert spans). */
static inline __attribute__((always_inline)) int span_inert(const struct pgap *g, const struct span_ent *sp,
							     uint64_t *ts_max, uint64_t *end_min)
{
	if (sp->tid != g->tid || sp->ts > g->gap_start || sp->end < g->resume)
		return 0;
	if (sp->ts > *ts_max)
		*ts_max = sp->ts;
	if (sp->end < *end_min)
		*end_min = sp->end;
	return 1;
}

/* gap_place's walk of the answer w (found anew unless it holds): every
 * span of it (AN_SPAN_WALK_EACH), the inert ones set apart for the pieces
 * after it. */
static __attribute__((noinline)) void gap_place_walk(struct gaps_state *gs, struct pgap *g, uint64_t start, uint64_t end)
{
	struct an_span_walk *w = &gs->walk;
	if (!an_span_walk_holds(w, gs->span_n, start, end))
		an_span_walk_find(w, &gs->span_tree, span_first_after(gs, start), gs->span_n, start, end);
	size_t kept = 0, nact = 0;
	uint64_t ts_max = 0, end_min = UINT64_MAX;
	for (size_t k = 0; k < w->n; k++) {
		unsigned slot = w->slots[k];
		const struct span_ent *sp = &gs->span[slot];
		if (sp->end <= start)
			continue;
		w->slots[kept++] = (uint16_t)slot;
		if (g->has_tid && span_inert(g, sp, &ts_max, &end_min))
			continue;
		gs->act[nact++] = (uint16_t)slot;
		gap_consider_span(g, sp);
	}
	w->n = kept;
	w->start = start;
	gs->nact = nact;
	/* (the walk's answer is for the ring as it is: w->ok, w->span_n) */
	gs->serve_from = g->has_tid ? start : UINT64_MAX;
	gs->inert_tid = g->tid;
	gs->inert_ts_max = ts_max;
	gs->inert_end_min = end_min;
}

/* Piece g [start, end) (its start, end, gap_start, resume, tid and has_tid
 * set), with the spans that may explain it.  Only those that may overlap
 * it, in the ring's slot order (as a scan of the whole ring meets them: the
 * kept spans, and which of two alike wins, do not depend on where the ring
 * wrapped): of those from the first that may end after its start, the ones
 * that start before its end (spans come as they end, before the GPU
 * records: the ring runs ahead of the gaps).  The last piece's answer
 * serves while it holds (an_span_walk): the spans it adds ended by this
 * one's start or start after its end, which gap_consider_span passes over;
 * those that ended by its start (the ring's max_end is a running maximum:
 * many did) leave the answer. */
static inline __attribute__((always_inline)) void gap_place_spans(struct gaps_state *gs, struct pgap *g, uint64_t start,
								   uint64_t end, int has_tid, uint32_t tid,
								   uint64_t gap_start, uint64_t resume)
{
	struct an_span_walk *w = &gs->walk;
	/* The thread's own callers of everything (gap_consider_span passes
	 * them over) found by the last piece serve this one too: only the
	 * other spans are considered, in the same order.  (The answer keeps
	 * the spans that ended by this piece's start: they leave it at the
	 * next piece walked whole.)  A new answer (the walk) makes them anew.
	 * (serve_from: an_span_walk_holds's tests of the ring and of the
	 * piece's start, and that the inert spans serve, in one comparison: a
	 * piece starts before UINT64_MAX.  has_tid .. resume: g's, which the
	 * caller has at hand.  inert_ts_max is at most w->start: an inert span
	 * began by the gap_start of the piece that found it, at or before that
	 * piece's start; so a piece whose gap_start is its start (a whole gap,
	 * as the short ones made in place) needs no test of it.) */
	if (__builtin_expect(start < gs->serve_from || end > w->later || !has_tid || tid != gs->inert_tid ||
				     (gap_start != start && gap_start < gs->inert_ts_max) || resume > gs->inert_end_min,
			     0)) {
		gap_place_walk(gs, g, start, end);
		return;
	}
	/* A span that is such a caller for this piece is for the pieces after
	 * it that pass the test with it counted: it leaves act too. */
	if (gs->nact) {
		size_t kept = 0;
		uint64_t ts_max = gs->inert_ts_max, end_min = gs->inert_end_min;
		for (size_t k = 0; k < gs->nact; k++) {
			unsigned slot = gs->act[k];
			const struct span_ent *sp = &gs->span[slot];
			if (sp->end <= start || span_inert(g, sp, &ts_max, &end_min))
				continue;
			gs->act[kept++] = (uint16_t)slot;
			gap_consider_span(g, sp);
		}
		gs->nact = kept;
		gs->inert_ts_max = ts_max;
		gs->inert_end_min = end_min;
	}
	/* act lost the spans that ended by this start: the answer serves no
	 * piece that starts before it (a late record's). */
	w->start = start;
	gs->serve_from = start;
}

/* Piece g, in its queue slot, is [start, end) of its gap, filed under
 * phase: with the spans that may explain it (gap_place_spans). */
static inline __attribute__((always_inline)) void gap_place(struct analysis *a, struct pgap *g, uint64_t start,
							     uint64_t end, int phase)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	unsigned q = g->q;
	g->start = start;
	g->end = end;
	g->phase = (uint8_t)phase;
	if (end > gs->gap_max_end[q])
		gs->gap_max_end[q] = end;
	g->max_end = gs->gap_max_end[q];
	gap_place_spans(gs, g, start, end, g->has_tid, g->tid, g->gap_start, g->resume);
}

/* A piece [start, end) of the gap tmpl (a gap cut at an iteration's mark). */
COLD_FN void gap_piece(struct analysis *a, const struct pgap *tmpl, uint64_t start, uint64_t end, int phase)
{
	if (end <= start)
		return;
	struct pgap *g = gap_slot(a, tmpl->q);
	pgap_copy(g, tmpl);
	g->launch_only = !g->queued && !g->syncs && !g->allocs && !g->edge && end - start < a->opts.gap_ns &&
			 g->ncalls == 1 && g->calls[0].end >= end &&
			 (g->calls[0].ts <= start || g->calls[0].ts - g->gap_start < AN_CPU_STRETCH_NS);
	gap_place(a, g, start, end, phase);
}

/* An idle interval [start, end) of a device: host facts gathered now (API
 * calls before `end` are all in), cut at iteration boundaries so that each
 * piece counts in its own iteration and the runner's time between
 * iterations stays apart. */
static inline __attribute__((always_inline)) void gap_new_q(struct analysis *a, uint64_t device, uint64_t start, uint64_t end,
		      const struct corr_ent *launch, int edge, unsigned q, int late_short)
{
	struct an_state *st = a->st;
	struct gaps_state *gs = an_pass_state(a, gaps);
	/* A gap no iteration's mark cuts (nearly all) is one piece: made in
	 * its queue slot, not copied there from a template.  late_short (a
	 * constant): gap_short_host's gap with its launch, which
	 * gaps_on_gpu_idle found whole (no mark after its start), not queued
	 * (its launch returned after it began: host_wait) and under the
	 * threshold, with no edge. */
	int whole = late_short || (start < end && !(st->last_iter_end_ts > start && st->last_iter_end_ts <= end) &&
				   !(st->in_iter && st->iter_begin_ts > start));
	struct pgap tmpl, *g = whole ? gap_slot(a, q) : &tmpl;
	pgap_clear_head(g);
	g->device = device;
	g->edge = (uint8_t)edge;
	g->q = (uint8_t)q;
	g->kernel_name = gs->gap_kernel_name;
	g->resume = end;
	g->gap_start = start;
	if (launch) {
		g->has_launch = 1;
		g->launch_cp = launch->callpath;
		g->launch_nat = launch->native;
		g->launch_ts = launch->ts;
		g->resume = launch->ts;
		g->tid = launch->tid;
		g->has_tid = 1;
		/* Queued: the call that submitted the next work had returned before
		 * the GPU ran dry, so the GPU side waited (latency, an event, another
		 * stream).  A call still running then (a pageable copy staging its
		 * data, a slow first launch) delivered the work late: the host's. */
		g->queued = !late_short && (launch->end ? launch->end : launch->ts) <= start;
	}
	size_t n = gs->api_n < API_RING ? gs->api_n : API_RING;
	if (!g->has_tid && n) {
		/* No launch ends it (the tail): the thread that called last. */
		for (size_t k = 1; k <= n; k++) {
			const struct api_ent *e = &gs->api[(gs->api_n - k) % API_RING];
			if (e->ts <= end) {
				g->tid = e->tid;
				g->has_tid = 1;
				break;
			}
		}
	}
	/* The responsible thread's calls over the gap, newest first (the ones
	 * nearest the resume matter most), then turned round in place.  The
	 * newest, when it is the launch itself (its start and line; no copy,
	 * sync or allocator call), is counted but not kept: the launch's own call added below starts
	 * as it does, at the same line, and ends at the gap's end, so at any
	 * instant gap_cause_at answers the same with or without it (nothing
	 * lies between them).  A launch-bound loop's pieces keep one call. */
	unsigned kept = 0, seen = 0;
	struct gap_call *tmp = g->calls;
	size_t k = 1;
	/* A launch-bound loop's gap: the newest call is the launch, and every
	 * call before it ended by the gap's start (the loop below would count
	 * the launch, keep nothing and stop at the next). */
	if (launch && n) {
		const struct api_ent *e = &gs->api[(gs->api_n - 1) % API_RING];
		if (e->ts == launch->ts && e->tid == launch->tid && e->callpath == launch->callpath &&
		    e->native == launch->native && e->plain && e->ts < end && e->end > start &&
		    (n == 1 || gs->api[(gs->api_n - 2) % API_RING].max_end <= start))
			k = n + 1;
	}
	for (; k <= n && seen < GAP_CALLS - 1 && g->has_tid; k++) {
		const struct api_ent *e = &gs->api[(gs->api_n - k) % API_RING];
		if (e->max_end <= start)
			break;   /* this call and every one before it ended by the gap's start */
		if (e->tid != g->tid || e->ts >= end || e->end <= start)
			continue;
		if (!seen++ && launch && e->ts == launch->ts && e->callpath == launch->callpath &&
		    e->native == launch->native && e->plain)
			continue;
		struct gap_call *c = &tmp[kept++];
		*c = (struct gap_call){
			.ts = e->ts, .end = e->end, .callpath = e->callpath, .native = e->native, .sync = e->kind == TBP_K_SYNC,
			.alloc = e->kind == TBP_K_MALLOC ? AN_ALLOC_MALLOC : e->kind == TBP_K_FREE ? AN_ALLOC_FREE : 0,
			.copy = e->copy};
		g->syncs += c->sync;
		g->allocs += c->alloc != 0;
	}
	/* Oldest first (usually one or two: no copy of the array). */
	for (unsigned i = 0, j = kept; i + 1 < j; i++) {
		struct gap_call x = g->calls[i];
		g->calls[i] = g->calls[--j];
		g->calls[j] = x;
	}
	g->ncalls = kept;
	/* From its launch to its start the next work is on its way: launch
	 * overhead and latency, the launch's. */
	if (launch)
		g->calls[g->ncalls++] = (struct gap_call){
			.ts = launch->ts, .end = end, .callpath = launch->callpath, .native = launch->native};

	if (whole) {
		/* (gap_piece's test, with what is at hand: the launch's call is
		 * the only one, from launch->ts to the piece's end) */
		g->launch_only = (uint8_t)(2 * (launch && !kept && (late_short || (!edge && !g->queued && end - start < a->opts.gap_ns)) &&
					      (launch->ts <= start || launch->ts - start < AN_CPU_STRETCH_NS)));
		g->iter_key = st->in_iter ? st->iter_no : ~st->iter_no;
		g->site = launch ? launch->site : 0;
		gap_place(a, g, start, end, cur_phase(a));
		return;
	}
	uint64_t t = start;
	if (st->last_iter_end_ts > t && st->last_iter_end_ts <= end) {
		uint64_t lo = st->last_iter_begin_ts > t ? st->last_iter_begin_ts : t;
		gap_piece(a, g, lo, st->last_iter_end_ts, st->last_iter_phase);
		if (lo > t)
			gap_piece(a, g, t, lo, AN_PH_OUTSIDE);
		t = st->last_iter_end_ts;
	}
	if (st->in_iter && st->iter_begin_ts > t) {
		gap_piece(a, g, t, st->iter_begin_ts < end ? st->iter_begin_ts : end, AN_PH_OUTSIDE);
		t = st->iter_begin_ts;
	}
	if (t < end)
		gap_piece(a, g, t, end, cur_phase(a));
}

__attribute__((noinline)) void gap_new(struct analysis *a, uint64_t device, uint64_t start, uint64_t end,
					const struct corr_ent *launch, int edge)
{
	gap_new_q(a, device, start, end, launch, edge, 0, 0);
}

__attribute__((noinline)) void gap_long(struct analysis *a, struct an_device *d, uint64_t s,
					 const struct corr_ent *launch, uint64_t kernel_name)
{
	an_pass_state(a, gaps)->gap_kernel_name = kernel_name;
	gap_new(a, d->id, d->busy.end, s, launch, AN_EDGE_NONE);
	an_pass_state(a, gaps)->gap_kernel_name = 0;
	mark_add(a, AN_F_IDLE_GAP, d->id, 0, d->busy.end, s);
}

/* A gap under the threshold across an iteration's mark: its pieces are
 * idle time of their iterations (and of none between them), not
 * occurrences; not drawn. */
__attribute__((noinline)) void gap_cut_short(struct analysis *a, struct an_device *d, uint64_t s,
					      const struct corr_ent *launch)
{
	gap_new(a, d->id, d->busy.end, s, launch, AN_EDGE_NONE);
}

/* A gap under the threshold whose launch is not in the trace: explained
 * by the host's calls and spans as gap_short_host's are, made the long
 * way. */
__attribute__((noinline)) void gap_short_unjoined(struct analysis *a, struct an_device *d, uint64_t s)
{
	gap_new_q(a, d->id, d->busy.end, s, NULL, AN_EDGE_NONE, 1, 0);
}

/* gap_short_host's gap made the long way. */
static __attribute__((noinline)) void gap_short_host_q(struct analysis *a, uint64_t device, uint64_t start, uint64_t end,
						       const struct corr_ent *launch)
{
	gap_new_q(a, device, start, end, launch, AN_EDGE_NONE, 1, 1);
}

/* gap_short_host's piece [d->busy.end, end) made the short way (compact,
 * a constant): its fields up to ctx_tid, and with compact 2 its calls: the
 * launch's ring call p and the next call nx; launch_only as gap_short_next
 * found it (0, 2 or 3; compact 1: 2).  A piece of launch_only 2 or 3 gets
 * of the launch's calls only what differs from the launch (the ring call's
 * end), pgap_expand the rest.  (The piece's start, the ring call's end and
 * the queue's head are read after the oldest piece is filed, which changes
 * none of them: fewer values kept across the filing, which then needs
 * fewer of its own on the stack.) */
static inline __attribute__((always_inline)) void gap_short_make(struct analysis *a, struct gaps_state *gs,
								  struct an_device *d, uint64_t end,
								  const struct corr_ent *launch, int compact,
								  const struct api_ent *p, const struct api_ent *nx,
								  int launch_only)
{
	/* (everything read before the piece is written: its stores may alias
	 * what is read, as far as the compiler knows) */
	struct pgap *queue = gs->gaps + PENDING_GAPS;
	struct pgap *g;
	if (gs->gap_n[1] == PENDING_GAPS) {
		/* (gap_slot's: the oldest filed first, its slot taken: the
		 * queue stays full) */
		g = &queue[gs->gap_head[1]];
		gap_file(a, g);
		gs->gap_head[1] = (gs->gap_head[1] + 1) % PENDING_GAPS;
	} else {
		g = &queue[(gs->gap_head[1] + gs->gap_n[1]) % PENDING_GAPS];
		gs->gap_n[1]++;
	}
	uint64_t start = d->busy.end, p_end = compact == 2 ? p->end : 0;
	const struct an_state *st = a->st;
	uint64_t iter_key = st->in_iter ? st->iter_no : ~st->iter_no;
	uint8_t phase = (uint8_t)cur_phase(a);
	uint64_t lts = launch->ts, cp = launch->callpath, nat = launch->native, device = d->id;
	uint32_t tid = launch->tid, site = launch->site;
	uint64_t max_end = gs->gap_max_end[1] > end ? gs->gap_max_end[1] : end;
	if (compact == 2) {
		struct gap_call n = {.ts = nx->ts, .end = nx->end, .callpath = nx->callpath, .native = nx->native};
		g->calls[1] = n;
		if (__builtin_expect(launch_only, 1)) {
			g->calls[0].end = p_end;
		} else {
			g->calls[0] = (struct gap_call){.ts = lts, .end = p_end, .callpath = cp, .native = nat};
			g->calls[2] = (struct gap_call){.ts = lts, .end = end, .callpath = cp, .native = nat};
			/* (what gap_file_next's parts read: gap_engine's has_launch) */
			g->ncalls = 3;
			g->has_launch = 1;
		}
	}
	gs->gap_max_end[1] = max_end;
	g->device = device;
	g->start = start;
	g->end = end;
	g->gap_start = start;
	g->max_end = max_end;
	g->resume = lts;
	g->iter_key = iter_key;
	g->launch_cp = cp;
	g->launch_nat = nat;
	g->tid = tid;
	g->site = site;
	g->phase = phase;
	g->launch_only = (uint8_t)launch_only;
	g->has_tid = 1;
	g->q = 1;
	g->compact = (uint8_t)compact;
	g->nspans = 0;
	g->ctx_cp = g->ctx_dur = g->ctx_wait_cp = 0;
	g->ctx_tid = 0;
	gap_place_spans(gs, g, start, end, 1, tid, start, lts);
}

/* gap_short_host's gap when the newest call in the ring is not its launch:
 * made the short way when that call is the launching thread's next one
 * (plain, begun before the gap ended, still running at its start), the
 * call before it the launch, and every call before that over by the gap's
 * start.  gap_new_q keeps both (the launch's ring call is not the newest
 * it meets), oldest first, and adds the launch's own: three calls, no
 * sync, allocator call or copy; launch_only 0 there, here 2 or 3 when
 * gap_file_next would take its common case.  (The host issued the next
 * launch before this one's work began: a short gap's second most common
 * form.)  Inlined in gap_short_host: its registers saved once. */
static inline __attribute__((always_inline)) void gap_short_next(struct analysis *a, struct an_device *d, uint64_t start,
						     uint64_t end, const struct corr_ent *launch)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	size_t n = gs->api_n;
	const struct api_ent *nx = gs->api_newest, *p = n >= 2 ? &gs->api[(n - 2) % API_RING] : NULL;
	uint64_t lts = launch->ts;
	if (!nx || !p || nx->tid != launch->tid || !nx->plain || nx->ts >= end || nx->end <= start ||
	    (nx->ts == lts && nx->callpath == launch->callpath && nx->native == launch->native) || p->ts != lts ||
	    p->tid != launch->tid || p->callpath != launch->callpath || p->native != launch->native || !p->plain ||
	    lts >= end || p->end <= start || (n > 2 && gs->api[(n - 3) % API_RING].max_end > start)) {
		gap_short_host_q(a, d->id, start, end, launch);
		return;
	}
	/* Most: the launch began by the gap's start (or less than a long
	 * stretch after it: its part then begins at the gap's start as well,
	 * the time before it charged to the launch's line) and returned
	 * inside it, the next call began less than a long stretch after that
	 * and runs to the gap's end, both at lines of the same cause.
	 * short_parts' walk then finds two parts, the launch's [start, its
	 * end) and the next call's [the launch's end, end), of one cause:
	 * launch_only 3, or 2 when the lines are one (all of it the launch's
	 * part, as a launch-bound piece's).  (Nothing tested here changes
	 * until the piece is filed; one a span joins goes to gap_finalize.) */
	uint64_t p_end = p->end, n_ts = nx->ts, cp = launch->callpath;
	int launch_only = 0;
	if (__builtin_expect((lts <= start || lts - start < AN_CPU_STRETCH_NS) && p_end < end && nx->end >= end &&
				     (n_ts <= p_end || n_ts - p_end < AN_CPU_STRETCH_NS) && !cp == !nx->callpath,
			     1))
		launch_only = nx->callpath == cp && nx->native == launch->native ? 2 : 3;
	gap_short_make(a, gs, d, end, launch, 2, p, nx, launch_only);
}

/* A gap under the threshold launched late: explained by the host's calls
 * and spans as a long one, in the queue of the short ones (one whose launch
 * is not in the trace: gap_short_unjoined).
 *
 * Most are a launch-bound loop's (nine in ten here), made the short way:
 * the newest call in the ring is the launch, every call before it ended by
 * the gap's start (gap_new_q keeps no call of the ring, only the launch's
 * own), and the launch began before the gap or less than a long stretch
 * after its start (launch_only).  Such a piece is then the launch's call
 * alone: only the fields a span, a phase's move and its filing read are
 * written (compact 1), in its queue's slot (the oldest piece filed first
 * when the queue is full, as gap_slot does).  The result is gap_new_q's,
 * field for field once pgap_expand has run.  (gap_short_next: the second
 * most common form.) */
__attribute__((noinline)) void gap_short_host(struct analysis *a, struct an_device *d, uint64_t s,
					       const struct corr_ent *launch)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	uint64_t start = d->busy.end, end = s, lts = launch->ts;
	const struct api_ent *e = gs->api_newest;
	/* The newest ring call is the launch's own when the ring has had no
	 * call since (its count then is the launch's api_ring); else one that
	 * looks the same (its start, thread and line) counts as it. */
	if (__builtin_expect(launch->api_ring != gs->api_n &&
				     (!e || e->ts != lts || e->tid != launch->tid || e->callpath != launch->callpath ||
				      e->native != launch->native),
			     0) ||
	    __builtin_expect(!e->plain || lts >= end || e->end <= start ||
				     gs->api_prev_max_end > start ||
				     (lts > start && lts - start >= AN_CPU_STRETCH_NS),
			     0)) {
		gap_short_next(a, d, start, end, launch);
		return;
	}
	gap_short_make(a, gs, d, end, launch, 1, NULL, NULL, 2);
}

/* gap_short_queued's gap (an_pass_gaps.h) in phase, made in the iteration
 * iter_key, when its batch must start anew or its launch has no site. */
__attribute__((noinline)) void gap_short_queued_slow(struct analysis *a, struct an_device *d, uint64_t idle,
						      const struct corr_ent *launch, int phase, uint64_t iter_key)
{
	/* Its idle to the device and out with the others of the iteration
	 * (struct idle_batch; a gap here is whole: gaps_on_gpu_idle found no
	 * mark after its start).  It ends where the GPU resumes. */
	idle_batch_add(a, &an_pass_state(a, gaps)->queued_batch, iter_key, d->id, phase, d->busy.end, d->busy.end + idle,
		       AN_CAUSE_QUEUED, idle);
	if (launch->site) {
		struct an_site_stat *ss = VEC_AT(&a->sites, struct an_site_stat, launch->site - 1);
		ss->queued_ns[phase] += idle;
		ss->queued_n[phase]++;
		ss->queued_device = d->id;
		return;
	}
	struct an_finding *p = idle_part(a, AN_CAUSE_QUEUED, phase, launch->callpath, launch->native);
	if (p) {
		p->cause = AN_CAUSE_QUEUED;
		p->total_ns += idle;
		p->count++;
		p->device = d->id;
	}
}

/* The queued short gaps kept with their sites, into their idle parts. */
static void gaps_queued_file(struct analysis *a)
{
	for (size_t i = 0; i < a->sites.n; i++) {
		struct an_site_stat *ss = VEC_AT(&a->sites, struct an_site_stat, i);
		for (int ph = 0; ph < 3; ph++) {
			if (!ss->queued_n[ph])
				continue;
			struct an_finding *p = finding(a, AN_F_IDLE_PART, AN_CAUSE_QUEUED, ph, ss->callpath, ss->native);
			if (p) {
				p->cause = AN_CAUSE_QUEUED;
				p->total_ns += ss->queued_ns[ph];
				p->count += ss->queued_n[ph];
				p->device = ss->queued_device;
			}
			ss->queued_ns[ph] = ss->queued_n[ph] = 0;
		}
	}
}

/* A span into the ring, and into the gaps still waiting for theirs. */
void gaps_on_span(struct analysis *a, struct an_span_ev *ev)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	size_t pos = gs->span_n++;
	gs->serve_from = UINT64_MAX; /* (a new ring: the walk's answer is found anew) */
	struct span_ent *e = &gs->span[pos % SPAN_RING];
	an_span_tree_set(&gs->span_tree, pos % SPAN_RING, ev->ts);
	e->tid = ev->tid;
	e->backward_wait = ev->stat && ev->stat->backward_wait;
	e->wait_callpath = e->backward_wait ? an_user_callpath(a, ev->callpath) : 0;
	e->ts = ev->ts;
	e->end = ev->end;
	e->callpath = ev->callpath;
	if (ev->end > gs->span_max_end)
		gs->span_max_end = ev->end;
	e->max_end = gs->span_max_end;
	/* Newest first, down to the pieces that all ended by the span's start. */
	for (unsigned q = 0; q < 2; q++) {
		struct pgap *queue = gs->gaps + q * PENDING_GAPS;
		for (size_t i = gs->gap_n[q]; i-- > 0;) {
			struct pgap *g = &queue[(gs->gap_head[q] + i) % PENDING_GAPS];
			if (g->max_end <= e->ts)
				break;
			gap_consider_span(g, e);
		}
	}
}

/* What was filed under phase from goes to to: the devices' per-phase sums
 * of the gaps, the queued short gaps kept with their sites, the gaps still
 * waiting for their spans. */
void gaps_phase_moved(struct analysis *a, int from, int to)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	/* (under their phase, moved below with the rest) */
	idle_batch_flush(a, &gs->batch);
	idle_batch_flush(a, &gs->queued_batch);
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		d->gaps_by[to] += d->gaps_by[from];
		d->gap_ns_by[to] += d->gap_ns_by[from];
		d->gaps_by[from] = d->gap_ns_by[from] = 0;
		for (int c = 0; c < AN_CAUSE_N; c++) {
			d->idle_by[to][c] += d->idle_by[from][c];
			d->idle_by[from][c] = 0;
		}
		for (int k = 0; k < 2; k++) {
			d->idle_edge[to][k] += d->idle_edge[from][k];
			d->idle_edge[from][k] = 0;
		}
	}
	for (size_t i = 0; i < a->sites.n; i++) {
		struct an_site_stat *ss = VEC_AT(&a->sites, struct an_site_stat, i);
		ss->queued_ns[to] += ss->queued_ns[from];
		ss->queued_n[to] += ss->queued_n[from];
		ss->queued_ns[from] = ss->queued_n[from] = 0;
	}
	for (unsigned q = 0; q < 2; q++)
		for (size_t i = 0; i < gs->gap_n[q]; i++) {
			struct pgap *g = &gs->gaps[q * PENDING_GAPS + (gs->gap_head[q] + i) % PENDING_GAPS];
			if (g->phase == from)
				g->phase = (uint8_t)to;
		}
	/* phase_move forgot the findings of `from` (the index no longer
	 * finds them): the cached parts may name them. */
	memset(gs->part_cache, 0, sizeof gs->part_cache);
	if (gs->site_part)
		memset(gs->site_part, 0, gs->site_part_n * sizeof *gs->site_part);
	if (gs->site_next)
		memset(gs->site_next, 0, gs->site_next_n * sizeof *gs->site_next);
}

/* The step-time pass files each piece by the steps it knows: what the
 * batches hold goes out before they change. */
static void gaps_batches_flush(struct analysis *a)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	idle_batch_flush(a, &gs->batch);
	idle_batch_flush(a, &gs->queued_batch);
}

/* The latest iteration mark (mark_after), as it is once the steps pass's
 * step_begin or step_end is done: in_iter, the iteration open or not. */
static uint64_t gaps_mark_after(const struct an_state *st, int in_iter)
{
	uint64_t t = st->last_iter_end_ts;
	if (in_iter && st->iter_begin_ts > t)
		t = st->iter_begin_ts;
	return t;
}

void gaps_step_begin(struct analysis *a, uint64_t t)
{
	(void)t;
	gaps_batches_flush(a);
	/* (the steps pass set in_iter and iter_begin_ts before publishing) */
	an_pass_state(a, gaps)->mark_after = gaps_mark_after(a->st, 1);
}

void gaps_step_end(struct analysis *a, uint64_t t, int phase)
{
	(void)t;
	(void)phase;
	gaps_batches_flush(a);
	/* (last_iter_end_ts set before publishing; in_iter cleared after) */
	an_pass_state(a, gaps)->mark_after = gaps_mark_after(a->st, 0);
}

void gaps_flush(struct analysis *a)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	gaps_queued_file(a);
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
	for (unsigned q = 0; q < 2; q++)
		while (gs->gap_n[q]) {
			gap_file(a, &gs->gaps[q * PENDING_GAPS + gs->gap_head[q]]);
			gs->gap_head[q] = (gs->gap_head[q] + 1) % PENDING_GAPS;
			gs->gap_n[q]--;
		}
	idle_batch_flush(a, &gs->batch);
	idle_batch_flush(a, &gs->queued_batch);
}

int gaps_init(struct analysis *a)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	an_span_tree_init(&gs->span_tree);
	gs->serve_from = UINT64_MAX; /* (no walk's answer yet) */
	gs->mark_after = gaps_mark_after(a->st, a->st->in_iter);
	memset(gs->part_cache, 0, sizeof gs->part_cache);
	gs->gaps = an_mem_get(2 * PENDING_GAPS * sizeof(struct pgap));
	gs->batch.piece = malloc(IDLE_BATCH * sizeof *gs->batch.piece);
	gs->queued_batch.piece = malloc(IDLE_BATCH * sizeof *gs->queued_batch.piece);
	return gs->gaps && gs->batch.piece && gs->queued_batch.piece ? 0 : -1;
}

void gaps_free(struct analysis *a)
{
	an_mem_unmap(an_pass_state(a, gaps)->gaps, 2 * PENDING_GAPS * sizeof(struct pgap));
	free(an_pass_state(a, gaps)->site_part);
	free(an_pass_state(a, gaps)->site_next);
	free(an_pass_state(a, gaps)->batch.piece);
	free(an_pass_state(a, gaps)->queued_batch.piece);
}
