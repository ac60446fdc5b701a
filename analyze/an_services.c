/*
 * tbanalyze's services, below the passes (an_services.h says what each is):
 * the tables' slow paths, the findings table, the phases, the unions'
 * measures and snapshots, the idle breakdown by cause, the timeline's marks.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_kind.h"
#include "an_services.h"

/* ------------------------------------------------------------ tables */
/* Each table's entry by its key, made on first use (zeroed, then filled by
 * the caller when *added); the one-entry caches in front of the maps
 * (an_services.h) keep what the map answered.  NULL: out of memory. */
struct an_device *get_device_slow(struct analysis *a, uint64_t id)
{
	struct an_state *st = a->st;
	int added;
	size_t ix = vec_keyed(&a->devices, &st->dev_idx, id, &added);
	if (ix == SIZE_MAX)
		return NULL;
	struct an_device *d = VEC_AT(&a->devices, struct an_device, ix);
	if (added) {
		d->id = id;
		/* Open and empty: the same measures, its kernels added without
		 * the first add's test (breakdown_on_kernel, un_add_open). */
		d->kern.open = 1;
	}
	st->c_gpu_d = NULL; /* (the table may have moved) */
	st->c_dev_ok = 1;
	st->c_dev_id = id;
	st->c_dev = ix;
	st->c_dev_p = d;
	return d;
}

/* The device of id dev, without making it (NULL: none yet). */
static const struct an_device *device_find(const struct analysis *a, uint64_t dev)
{
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (d->id == dev)
			return d;
	}
	return NULL;
}

void an_stream_unions(const struct analysis *a, const struct an_stream *s, const struct an_union **busy,
		      const struct an_union **dm)
{
	static const struct an_union none;
	*busy = &s->busy;
	*dm = &s->dm;
	if (stream_mirrors(s)) {
		/* (no device: no GPU record reached the stream) */
		const struct an_device *d = device_find(a, s->device);
		*busy = d ? &d->busy : &none;
		*dm = d ? &d->dm : &none;
	}
}

/* Stream ix of device dev, just made: its device's first stream mirrors the
 * device's unions (AN_UNION_MIRROR); a second one ends the first's
 * mirroring, which takes the device's unions as they are. */
static void stream_first_or_not(struct analysis *a, size_t ix, uint64_t dev)
{
	int first = 1;
	for (size_t i = 0; i < a->streams.n; i++) {
		struct an_stream *o = VEC_AT(&a->streams, struct an_stream, i);
		if (i == ix || o->device != dev)
			continue;
		first = 0;
		if (stream_mirrors(o)) {
			const struct an_union *busy, *dm;
			an_stream_unions(a, o, &busy, &dm);
			struct an_union b = *busy, m = *dm;
			o->busy = b;
			o->dm = m;
		}
	}
	if (first)
		VEC_AT(&a->streams, struct an_stream, ix)->busy.open = AN_UNION_MIRROR;
}

struct an_stream *get_stream_slow(struct analysis *a, uint64_t key, uint64_t dev, uint64_t stream)
{
	struct an_state *st = a->st;
	int added;
	size_t ix = vec_keyed(&a->streams, &st->stream_idx, key, &added);
	if (ix == SIZE_MAX)
		return NULL;
	struct an_stream *s = VEC_AT(&a->streams, struct an_stream, ix);
	if (added) {
		s->device = dev;
		s->stream = stream;
		stream_first_or_not(a, ix, dev);
	}
	/* The entry hit before moves to the second place. */
	if (st->c_stream_ok & 1) {
		st->c_stream_key2 = st->c_stream_key;
		st->c_stream2 = st->c_stream;
		st->c_stream_ok |= 2;
	}
	st->c_gpu_d = NULL; /* (the table may have moved) */
	st->c_stream_ok |= 1;
	st->c_stream_key = key;
	st->c_stream = ix;
	/* (the table may have moved: the second entry's place again) */
	st->c_stream_p = s;
	st->c_stream2_p = VEC_AT(&a->streams, struct an_stream, st->c_stream2);
	return s;
}

__attribute__((noinline)) struct gpu_place get_gpu_place_slow(struct analysis *a, uint64_t dev, uint64_t stream)
{
	struct an_state *st = a->st;
	struct gpu_place p;
	p.d = get_device(a, dev);
	p.str = get_stream(a, dev, stream);
	if (p.d && p.str) {
		st->c_gpu_dev = dev;
		st->c_gpu_stream = stream;
		st->c_gpu_d = p.d;
		st->c_gpu_s = p.str;
	}
	return p;
}

/* By a map, not a scan: a server process can have many threads calling CUDA. */
struct thread_st *get_thread_slow(struct an_state *st, uint32_t tid)
{
	int added;
	size_t ix = vec_keyed(&st->threads, &st->thread_idx, tid, &added);
	if (ix == SIZE_MAX)
		return NULL;
	struct thread_st *t = VEC_AT(&st->threads, struct thread_st, ix);
	if (added)
		t->tid = tid;
	st->c_thread_tid = tid;
	st->c_thread_p = t;
	return t;
}

void *vec_slot(struct vec *v, size_t i)
{
	while (v->n <= i)
		if (!vec_push(v))
			return NULL;
	return VEC_AT(v, char, i * v->item);
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
	if (an_kind_of(kind)->counted_at_user_line)
		return cp && !a->opts.where_leaf ? an_user_callpath(a, cp) : cp;
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

void phase_move(struct analysis *a, int from, int to)
{
	struct an_state *st = a->st;
	for (size_t i = 0; i < st->all_findings.n; i++) {
		struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, i);
		if (f->phase != from)
			continue;
		forget_finding(a, f);
		f->phase = to;
	}
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		for (int k = 0; k < 2; k++) {
			d->idle_short[to][k] += d->idle_short[from][k];
			d->idle_short[from][k] = 0;
		}
	}
	an_publish_phase_moved(a, from, to);
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

/* ------------------------------------------------------------ unions */
/* Measure of the union up to time t (every interval starting before t has
 * been added, so closed ones end by t). */
uint64_t an_union_at(const struct an_union *u, uint64_t t)
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
		u->snap_end = an_union_at(u, t);
	else
		u->snap_begin = an_union_at(u, t);
}

void snap_all(struct analysis *a, uint64_t t, int end)
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
		if (stream_mirrors(s))
			continue; /* (its device's, snapped above) */
		un_snap(&s->busy, t, end);
		un_snap(&s->dm, t, end);
	}
}

/* ------------------------------------------------------------ the timeline's marks */
/* Mark slot x before slot y in the heap: shorter, or as long and first. */
static inline int mark_before(const struct analysis *a, unsigned x, unsigned y)
{
	uint64_t dx = a->marks[x].end - a->marks[x].start, dy = a->marks[y].end - a->marks[y].start;
	return dx < dy || (dx == dy && x < y);
}

/* The heap's entry at i moved down to its place. */
static void mark_sift_down(const struct analysis *a, uint16_t *heap, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < AN_MAX_MARKS && mark_before(a, heap[l], heap[m]))
			m = l;
		if (l + 1 < AN_MAX_MARKS && mark_before(a, heap[l + 1], heap[m]))
			m = l + 1;
		if (m == i)
			return;
		uint16_t t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

__attribute__((noinline)) void mark_add(struct analysis *a, int kind, uint64_t dev, uint64_t stream, uint64_t s,
					uint64_t e)
{
	struct an_state *st = a->st;
	size_t slot = a->n_marks;
	if (a->n_marks == AN_MAX_MARKS) {
		/* Keep the longest: replace the shortest (the first of the
		 * shortest) if this one is longer.  The shortest is the heap's
		 * top: after a replacement its slot's mark is longer, and goes
		 * down to its place (a scan of all the marks found it before). */
		if (!st->mark_heap_ok) {
			for (size_t i = 0; i < AN_MAX_MARKS; i++)
				st->mark_heap[i] = (uint16_t)i;
			for (size_t i = AN_MAX_MARKS / 2; i-- > 0;)
				mark_sift_down(a, st->mark_heap, i);
			st->mark_heap_ok = 1;
		}
		slot = st->mark_heap[0];
		if (a->marks[slot].end - a->marks[slot].start >= e - s)
			return;
		a->marks[slot] = (struct an_mark){.device = dev, .stream = stream, .start = s, .end = e, .kind = kind};
		mark_sift_down(a, st->mark_heap, 0);
		return;
	}
	st->mark_heap_ok = 0;
	a->n_marks++;
	a->marks[slot] = (struct an_mark){.device = dev, .stream = stream, .start = s, .end = e, .kind = kind};
}

/* ------------------------------------------------------------ the idle breakdown */
/* One device's idle time of the window, by cause; what no counted piece
 * explains lies between marked iterations (the runner's time). */
void idle_breakdown_add(struct analysis *a, struct an_device *d, uint64_t idle)
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
		/* (gaps under the threshold are among the pieces: idle_by) */
		ib->short_ns += d->idle_short[ph][0] + d->idle_short[ph][1];
		ib->leading_ns += d->idle_edge[ph][0];
		ib->trailing_ns += d->idle_edge[ph][1];
	}
	ib->harness_ns += idle > explained ? idle - explained : 0;
}

