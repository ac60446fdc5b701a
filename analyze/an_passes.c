/*
 * tbanalyze engine, part 2: the dispatcher.  Every record is seen once, in
 * time order (see the merge in an_merge.c), and handed to the hooks of the
 * passes that read its kind (an_pass.h lists them); each pass keeps
 * per-device, per-stream or per-call-site state only.  What every pass
 * shares is here: the device, stream and thread tables, the join of GPU
 * records to the calls that launched them, the statistics per call site
 * and per kernel name (diff), the findings table and the phases.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass.h"

/* In the order their hooks run; init, flush and finish go down the list
 * too: the steps' last marks are emitted before the other passes close what
 * is open, in the phase those marks end. */
static const struct an_pass_ops *const passes[] = {
	&an_pass_spans, &an_pass_steps, &an_pass_breakdown, &an_pass_bursts, &an_pass_gaps,
	&an_pass_copies, &an_pass_memory, &an_pass_findings, &an_pass_steptime,
};
#define N_PASSES (sizeof passes / sizeof passes[0])

/* ------------------------------------------------------------ lookups */
struct an_device *get_device_slow(struct analysis *a, uint64_t id)
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

struct an_stream *get_stream_slow(struct analysis *a, uint64_t key, uint64_t dev, uint64_t stream)
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

/* By a map, not a scan: a server process can have many threads calling CUDA. */
struct thread_st *get_thread_slow(struct an_state *st, uint32_t tid)
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

static uint64_t finding_key(int kind, int cause, int phase, uint64_t cp, uint64_t nat)
{
	uint64_t h = an_hash_combine(an_hash_combine(an_hash_combine(kind, cause), phase), an_hash_combine(cp, nat));
	return h == UINT64_MAX ? 0 : h;
}

void forget_finding(struct analysis *a, const struct an_finding *f)
{
	uint64_t h = finding_key(f->kind, f->cause, f->phase, f->callpath, f->native);
	uint64_t *ix = u64map_get(&a->st->finding_idx, h);
	if (ix && *ix == finding_index(a->st, f))
		u64map_del(&a->st->finding_idx, h);
}

/* The call path a finding of this kind is kept under while the pass runs:
 * the line it is shown at (the innermost frame of the user's code; the leaf
 * with --where=leaf), so that what a rule counts per site (allocations that
 * come back, steps with a copy, kernels of a burst) is counted per user's
 * line however many of torch's Python wrappers the calls went through.
 * Idle gaps keep their recorded path here (their host work is matched by
 * it) and are placed at the finish like every finding. */
static uint64_t finding_site(const struct analysis *a, int kind, uint64_t cp)
{
	switch (kind) {
	case AN_F_KERNEL_BURST:
	case AN_F_SCALAR_COPY:
	case AN_F_PING_PONG:
	case AN_F_SYNC_HOTSPOT:
	case AN_F_ALLOC_CHURN:
		return cp && !a->opts.where_leaf ? an_user_callpath(a, cp) : cp;
	}
	return cp;
}

struct an_finding *finding(struct analysis *a, int kind, int cause, int phase, uint64_t cp, uint64_t nat)
{
	struct an_state *st = a->st;
	uint64_t leaf = cp;
	cp = finding_site(a, kind, cp);
	int added;
	size_t ix = vec_keyed(&st->all_findings, &st->finding_idx, finding_key(kind, cause, phase, cp, nat), &added);
	if (ix == SIZE_MAX)
		return NULL;
	struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, ix);
	if (!added)
		return f;
	f->kind = kind;
	f->cause = cause;
	f->phase = phase;
	f->callpath = cp;
	f->native = nat;
	f->leaf_callpath = leaf != cp ? leaf : 0; /* (the first recorded path: its library frames shown) */
	return f;
}

void phase_update(struct analysis *a)
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

int phase_counts(const struct analysis *a, int phase)
{
	if (!a->st->iter_markers || a->opts.no_markers)
		return 1;
	return a->warmup_seen ? phase == AN_PH_STEADY : phase != AN_PH_OUTSIDE;
}

int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static struct an_site_stat *site_stat_slow(struct analysis *a, uint64_t cp, uint64_t nat);
/* In front of site_stat_slow: a direct-mapped table by (cp, nat) itself, no
 * hash to compute; it keeps what the slow path answered for that pair. */
HOT_FN struct an_site_stat *site_stat(struct analysis *a, uint64_t cp, uint64_t nat)
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
	if (st->corr_ring) {
		struct corr_slot *sl = &st->corr_ring[corr & (CORR_RING - 1)];
		if (sl->corr == corr) {
			sl->corr = 0;
			return &sl->e;
		}
		if (!st->corr.n)
			return graph_corr_find(st, corr);
	}
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

/* Kernel statistics by name (diff, the report's top kernels). */
HOT_FN void kernel_stat(struct analysis *a, uint64_t name, uint64_t ns)
{
	struct an_state *st = a->st;
	uint64_t *ix = hot_get(&st->kernel_cache, name);
	if (!ix && (ix = u64map_get(&st->kernel_idx, name)))
		hot_put(&st->kernel_cache, name, *ix);
	struct an_kernel_stat *k;
	if (ix) {
		k = VEC_AT(&a->kernels, struct an_kernel_stat, *ix);
	} else {
		k = vec_push(&a->kernels);
		if (!k || u64map_put(&st->kernel_idx, name, a->kernels.n - 1))
			return;
		k->name = name;
	}
	k->count++;
	k->total_ns += ns;
	if (ns > k->max_ns)
		k->max_ns = ns;
}

/* ------------------------------------------------------------ records */
/* GPU records, to the passes that read them; kind is a constant where the
 * hot kind takes its own copy (an_pass_record). */
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
		a->unmatched_kernels += kind == TBP_K_GPU_KERNEL;
		api = &no_launch;
	}
	st->gpu_now = s;
	gaps_gpu(a, d, s, api, joined, kind == TBP_K_GPU_KERNEL ? g->name : 0);
	breakdown_gpu(a, d, str, s, e, api->ts);
	timeline_keep(a, kind, g, s, e, api->callpath, kind == TBP_K_GPU_MEMCPY ? r->u.gpu_memcpy.copy_kind : 0);
	if (joined) {
		struct an_site_stat *ss = api->site ? VEC_AT(&a->sites, struct an_site_stat, api->site - 1)
						    : site_stat(a, api->callpath, api->native);
		if (ss)
			ss->gpu_ns += e - s;
		steps_gpu(st, api->item, e - s);
	}

	switch (kind) {
	case TBP_K_GPU_KERNEL:
		a->n_gpu_kernel++;
		d->kernels++;
		str->kernels++;
		un_add(&d->kern, s, e);
		burst_kernel(a, d, str, s, e, api);
		kernel_stat(a, g->name, e - s);
		break;
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
		burst_kernel(a, d, str, s, e, api);
		un_add(&d->set, s, e);
		break;
	}
}

/* Host API calls, to the passes that read them; kind as in on_gpu_k. */
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
	gaps_call(st, r->tid, kind == TBP_K_SYNC && !host_waits ? TBP_K_API : kind, ts, end, c->callpath, c->native,
		  kind == TBP_K_MEMCPY ? an_copy_bits(r->u.memcpy.copy_kind, r->u.memcpy.flags) : 0);
	copies_call(st, th, host_waits, dur);

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
	/* cudaErrorNotReady / CUDA_ERROR_NOT_READY / hipErrorNotReady (600) is
	 * a poll's answer (cudaStreamQuery, cudaEventQuery), not a failure. */
	int failed = c->result != 0 && c->result != 600;
	if (failed)
		a->n_errors++;
	uint32_t item = 0;
	if ((kind == TBP_K_LAUNCH || kind == TBP_K_MEMCPY || kind == TBP_K_MEMSET) && !failed)
		item = steps_work(st, r->tid, ts, end, c->callpath);
	else if (kind != TBP_K_LAUNCH && kind != TBP_K_MEMCPY && kind != TBP_K_MEMSET)
		steps_call(st, r->tid, ts, end, c->callpath);
	/* A call the runtime refused has no GPU side to wait for. */
	if (st->expect_gpu && !c->result && (kind == TBP_K_LAUNCH || kind == TBP_K_MEMCPY || kind == TBP_K_MEMSET)) {
		/* Only on_api hands an API record over as a launch: a graph launch. */
		struct corr_ent *ce = kind == TBP_K_LAUNCH && r->kind != TBP_K_LAUNCH ? graph_corr_slot(st, c->corr)
										    : corr_slot(st, c->corr);
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
			ce->item = item;
			ce->syncs = th ? th->syncs : 0;
		}
	}

	switch (kind) {
	case TBP_K_LAUNCH:
		if (!failed)
			a->n_launch++;
		break;
	case TBP_K_MEMSET:
		a->n_memset++;
		break;
	case TBP_K_MEMCPY:
		a->n_memcpy++;
		copies_memcpy(a, r, th, phase, dur);
		break;
	case TBP_K_SYNC:
		a->n_sync++;
		if (host_waits) {
			copies_sync(a, r, phase, dur);
			if (th)
				th->syncs++;
		}
		break;
	case TBP_K_MALLOC:
		a->n_malloc++;
		memory_malloc(a, r, ss, phase, dur);
		break;
	case TBP_K_FREE:
		a->n_free++;
		memory_free(a, r);
		break;
	}
}

static __attribute__((noinline)) void on_gpu(struct analysis *a, const struct tbp_record *r)
{
	on_gpu_k(a, r, r->kind);
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
			if (st->in_iter && a->graph_launch_all_last != st->iter_no) {
				a->graph_launch_all_last = st->iter_no;
				a->graph_launch_all_iters++;
				if (!a->graph_launch_first_iter)
					a->graph_launch_first_iter = st->iter_no;
			}
		}
		on_api_k(a, r, TBP_K_LAUNCH);
		return;
	}
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

/* A Python span, to every pass's span hook. */
static void on_span(struct analysis *a, const struct tbp_record *r)
{
	struct an_span_ev e = {.tid = r->tid, .ts = r->ts, .callpath = r->u.py_span.callpath};
	e.end = r->u.py_span.end < e.ts ? e.ts : r->u.py_span.end;
	note_time(a, e.ts, e.end);
	a->n_spans++;
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->span)
			passes[i]->span(a, &e);
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
		if (recs[i]->ts >= a->st->steps.next_synth_ts)
			synth_emit(a, recs[i]->ts);
		an_pass_block(a, &recs[i], 1, last_ts);
	}
}

void an_pass_block(struct analysis *a, const struct tbp_record *const *recs, unsigned n, uint64_t *last_ts)
{
	/* Records come in time order: marks of detected steps fall inside this
	 * block only if its last record reaches the next one. */
	if (__builtin_expect(n && recs[n - 1]->ts >= a->st->steps.next_synth_ts, 0)) {
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
		note_time(a, r->ts, r->ts);
		steps_marker(a, r);
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
	a->st = st;
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

int an_pass_finish(struct analysis *a)
{
	/* The end of the records: what is still open closes. */
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->flush)
			passes[i]->flush(a);
	if (a->first_ts == UINT64_MAX)
		a->first_ts = a->last_ts = 0;
	if (a->markers_used && a->win_end <= a->win_begin)
		a->markers_used = 0;
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->finish && passes[i]->finish(a))
			return -1;
	if (a->kernels.n)
		qsort(a->kernels.data, a->kernels.n, sizeof(struct an_kernel_stat), cmp_kernel);
	return 0;
}

void an_pass_free(struct analysis *a)
{
	struct an_state *st = a->st;
	if (!st)
		return;
	for (size_t i = 0; i < N_PASSES; i++)
		if (passes[i]->free)
			passes[i]->free(a);
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
	for (size_t i = 0; i < st->threads.n; i++)
		free(VEC_AT(&st->threads, struct thread_st, i)->done);
	vec_free(&st->threads);
	vec_free(&st->all_findings);
	free(st);
	a->st = NULL;
}
