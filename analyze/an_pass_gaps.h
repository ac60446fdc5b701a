/* Pass: idle gaps and what the host did in them (an_pass_gaps.c). */
#ifndef TBANALYZE_AN_PASS_GAPS_H
#define TBANALYZE_AN_PASS_GAPS_H

#include "an_gap_index.h"
#include "an_pass.h"

/* gaps: the host facts a gap is explained by, and the gaps waiting for them. */
#define API_RING 1024
#define SPAN_RING 4096
#define PENDING_GAPS 1024
struct api_ent {
	uint32_t tid;
	uint8_t kind;
	uint8_t copy; /* a copy call: an_copy_bits(), else 0 */
	uint8_t plain; /* not a copy, sync or allocator call (a launch, another API call) */
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
/* A piece's idle part filed lately: (cause, phase, path, native) -> its
 * finding's index in all_findings, so that the next piece at the same line
 * skips finding()'s hashing and map lookup.  Valid while no finding leaves
 * the index: only phase_move forgets them, and its phase_moved event
 * empties the cache (gaps_phase_moved). */
#define PART_CACHE 2048
struct part_slot {
	uint64_t cp, nat;
	uint32_t ix;
	uint16_t cause; /* as filed: the cause + 16 * the edge */
	uint8_t phase, used;
};
/* The idle of whole launch-bound pieces filed one after another in the same
 * iteration (or between the same two), device and phase, summed by cause:
 * added to the device and published (idle_explained) once for them all
 * (idle_batch_flush, an_pass_gaps.c). */
#define IDLE_BATCH 4096
struct idle_batch_piece {
	uint64_t s, e, ns;
	int cause;
};
struct idle_batch {
	size_t n; /* pieces in it; 0: empty */
	uint64_t iter_key, device;
	uint8_t phase;
	uint64_t s, e; /* the earliest start and latest end of its pieces */
	uint64_t by_cause[AN_CAUSE_N];
	/* The pieces (IDLE_BATCH at most: then it is flushed), published one
	 * by one instead when a record reached the analysis out of time order
	 * (a->late_records): the iteration a piece was made in may then not be
	 * the step its time falls in.  Flushed before every step begins or
	 * ends, so that the step-time pass takes its pieces as it would have
	 * when each was filed. */
	struct idle_batch_piece *piece;
};
struct gaps_state {
	struct api_ent api[API_RING];
	size_t api_n;
	/* The newest call in the ring (NULL: none yet) and the latest end of
	 * the calls before it (gap_short_host's test of a launch-bound loop's
	 * gap: is the newest call its launch, every one before it over). */
	const struct api_ent *api_newest;
	uint64_t api_prev_max_end;
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
	/* The latest iteration mark so far: the last iteration's end, or the
	 * open one's begin when later (st->last_iter_end_ts, st->in_iter,
	 * st->iter_begin_ts, which the steps pass sets as it publishes
	 * step_begin and step_end): a gap that began before it is cut there
	 * (gaps_on_gpu_idle), in one comparison. */
	uint64_t mark_after;
	uint64_t gap_kernel_name; /* the kernel ending the gap being made, 0: none */
	struct an_span_walk walk; /* the last span walk's answer (an_gap_index.h) */
	/* The walk's answer less the spans that explain nothing to a piece of
	 * thread inert_tid whose gap began at or after inert_ts_max and whose
	 * next work was issued by inert_end_min: the thread's own functions
	 * running since before the gap and still after it (the training loop,
	 * an iteration's function; five in six of a launch-bound loop's
	 * spans).  act[0, nact), in the answer's order.  serve_from: while
	 * the walk's answer was found for the ring as it is (no span came
	 * since) by a piece with a thread, so that these serve, the answer's
	 * start (walk.start); else UINT64_MAX (gap_place_spans's first tests
	 * in one comparison). */
	uint64_t serve_from;
	uint32_t inert_tid;
	uint64_t inert_ts_max, inert_end_min;
	size_t nact;
	uint16_t act[SPAN_RING];
	struct part_slot part_cache[PART_CACHE];
	struct idle_batch batch;        /* gap_file_launch's */
	struct idle_batch queued_batch; /* gap_short_queued's */
	/* A launch-bound piece's part by its launch's site (corr_ent.site):
	 * site_part[site][phase] = the finding's index + 1 in all_findings,
	 * 0: not known (row 0, site 0 (none), stays 0: a site is looked up
	 * without a subtraction).  Its cause and line are the site's
	 * (gap_file_launch), so the site and phase are the key; emptied with
	 * the part cache. */
	uint32_t (*site_part)[3];
	size_t site_part_n;
	/* The part of the call that followed a site's launch in its piece
	 * lately (gap_next_part): site_next[site][phase], as site_part (the
	 * key the site, the phase and the call's line), emptied with it. */
	struct site_next {
		uint64_t cp, nat;
		uint32_t ix1; /* the finding's index + 1 in all_findings, 0: none */
	} (*site_next)[3];
	size_t site_next_n;
};

/* A host call into the ring the gaps are explained by. */
HOT_FN void gaps_on_call(struct analysis *a, struct an_call_ev *e)
{
	struct gaps_state *gs = an_pass_state(a, gaps);
	const struct tbp_call *c = &e->r->u.call;
	size_t n = gs->api_n;
	struct api_ent *ae = &gs->api[n % API_RING];
	gs->api_n = n + 1;
	e->api_ring = n + 1;
	uint8_t kind = (uint8_t)(e->kind == TBP_K_SYNC && !e->host_waits ? TBP_K_API : e->kind);
	uint8_t copy = e->kind == TBP_K_MEMCPY ? an_copy_bits(e->r->u.memcpy.copy_kind, e->r->u.memcpy.flags) : 0;
	uint64_t prev_max_end = gs->api_max_end, max_end = e->end > prev_max_end ? e->end : prev_max_end;
	/* (the entry written whole from what is at hand: its fields are not
	 * read back, nor its address taken again) */
	*ae = (struct api_ent){
		.tid = e->r->tid,
		.kind = kind,
		.copy = copy,
		.plain = !copy && kind != TBP_K_SYNC && kind != TBP_K_MALLOC && kind != TBP_K_FREE,
		.ts = e->ts,
		.end = e->end,
		.callpath = c->callpath,
		.native = c->native,
		.max_end = max_end};
	gs->api_newest = ae;
	gs->api_prev_max_end = prev_max_end;
	gs->api_max_end = max_end;
}
void gap_long(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch, uint64_t kernel_name);
void gap_cut_short(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch);
void gap_new(struct analysis *a, uint64_t device, uint64_t start, uint64_t end, const struct corr_ent *launch,
	     int edge);
void gap_short_host(struct analysis *a, struct an_device *d, uint64_t s, const struct corr_ent *launch);
void gap_short_unjoined(struct analysis *a, struct an_device *d, uint64_t s);
void gap_short_queued_slow(struct analysis *a, struct an_device *d, uint64_t idle, const struct corr_ent *launch,
			   int phase, uint64_t iter_key);
/* A gap under the threshold whose work was queued before the GPU ran dry:
 * all of it queued, at the launch's line (as gap_finalize files a queued
 * gap), without the host's calls and spans, which it does not need; kept
 * with the launch's site until the end (gaps_queued_file).  Inline when the
 * batch takes it as it is and its launch has a site (nearly always):
 * gap_short_queued_slow's work without its call. */
HOT_FN void gap_short_queued(struct analysis *a, struct an_device *d, uint64_t idle, const struct corr_ent *launch)
{
	int phase = cur_phase(a);
	const struct an_state *st = a->st;
	uint64_t iter_key = st->in_iter ? st->iter_no : ~st->iter_no, device = d->id;
	struct idle_batch *b = &an_pass_state(a, gaps)->queued_batch;
	size_t bn = b->n;
	if (__builtin_expect(!bn || bn == IDLE_BATCH || b->iter_key != iter_key || b->device != device ||
				     b->phase != phase || !launch->site,
			     0)) {
		gap_short_queued_slow(a, d, idle, launch, phase, iter_key);
		return;
	}
	uint64_t s = d->busy.end, e = s + idle;
	b->piece[bn] = (struct idle_batch_piece){.s = s, .e = e, .ns = idle, .cause = AN_CAUSE_QUEUED};
	b->n = bn + 1;
	b->by_cause[AN_CAUSE_QUEUED] += idle;
	if (s < b->s)
		b->s = s;
	if (e > b->e)
		b->e = e;
	struct an_site_stat *ss = VEC_AT(&a->sites, struct an_site_stat, launch->site - 1);
	ss->queued_ns[phase] += idle;
	ss->queued_n[phase]++;
	ss->queued_device = device;
}
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
	else if (__builtin_expect(joined, 1))
		gap_short_host(a, d, s, api);
	else
		gap_short_unjoined(a, d, s);
}
/* The device idle before GPU work starting at s, launched by api (joined:
 * a call of the trace, else one with no times): a gap, or the window's
 * leading edge before the device's first work. */
/* The device idle before GPU work starting at s, launched by api (joined:
 * a call of the trace, else one with no times): a gap, or the window's
 * leading edge before the device's first work. */
HOT_FN void gaps_on_gpu_idle(struct analysis *a, const struct an_gpu_ev *ev, uint64_t idle)
{
	struct an_device *d = ev->d;
	uint64_t s = ev->s;
	const struct corr_ent *api = ev->api;
	int joined = ev->joined;
	if (__builtin_expect(d->busy.open, 1)) {
		/* Late when its call had not returned when the GPU ran dry (as
		 * gap_new's queued).  An unjoined record's launch has ts and
		 * end 0: not late.  (A join entry's end is at or after its ts,
		 * both 0 or end set: end alone says when the call returned.) */
		int host_wait = api->end > d->busy.end;
		if (idle >= a->opts.gap_ns)
			gap_long(a, d, s, joined ? api : NULL, ev->kind == TBP_K_GPU_KERNEL ? ev->r->u.gpu_kernel.name : 0);
		else if (__builtin_expect(an_pass_state(a, gaps)->mark_after > d->busy.end, 0))
			/* Across an iteration's mark: cut there as a long one, each
			 * piece in its own iteration (whole, it went to the phase
			 * after the mark: the runner's time and the idle before the
			 * window counted as the steady state's). */
			gap_cut_short(a, d, s, joined ? api : NULL);
		else
			gap_short(a, d, s, api, joined, idle, host_wait);
	} else {
		/* The device's first work: the idle before it is the window's edge. */
		d->edge_from = a->first_ts < s ? a->first_ts : s;
		gap_new(a, d->id, d->edge_from, s, joined ? api : NULL, AN_EDGE_LEADING);
	}
}

int gaps_init(struct analysis *a);
void gaps_on_span(struct analysis *a, struct an_span_ev *ev);
/* The gaps still waiting for their spans, filed under phase from, go to to. */
void gaps_phase_moved(struct analysis *a, int from, int to);
void gaps_flush(struct analysis *a);
void gaps_free(struct analysis *a);
/* A step begins or ends: the batched idle goes out first (idle_batch). */
void gaps_step_begin(struct analysis *a, uint64_t t);
void gaps_step_end(struct analysis *a, uint64_t t, int phase);

static const struct an_pass_ops an_pass_gaps = {
	.name = "gaps",
	.state_size = sizeof(struct gaps_state),
	.init = gaps_init,
	.on_launch = gaps_on_call,
	.on_memcpy = gaps_on_call,
	.on_memset = gaps_on_call,
	.on_sync = gaps_on_call,
	.on_malloc = gaps_on_call,
	.on_free = gaps_on_call,
	.on_api = gaps_on_call,
	.on_gpu_idle = gaps_on_gpu_idle,
	.on_span = gaps_on_span,
	.step_begin = gaps_step_begin,
	.step_end = gaps_step_end,
	.phase_moved = gaps_phase_moved,
	.flush = gaps_flush,
	.free = gaps_free,
};

#endif
