/*
 * Pass: device memory.  Allocations and frees per device (current, peak),
 * allocation churn per call site (allocate, free, allocate again; or an
 * allocation in every iteration), and the memory still allocated at the
 * end of the trace.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_memory.h"

struct alloc_ent {
	uint64_t bytes, device;
	size_t finding; /* index + 1 in all_findings of the allocating site's churn finding */
};

void memory_on_malloc(struct analysis *a, struct an_call_ev *e)
{
	struct an_state *st = a->st;
	struct memory_state *ms = an_pass_state(a, memory);
	const struct tbp_record *r = e->r;
	struct an_site_stat *ss = e->ss;
	int phase = e->phase;
	uint64_t dur = e->dur;
	const struct tbp_call *c = &r->u.call;
	const struct tbp_malloc *m = &r->u.malloc;
	if (m->flags & TBP_ALLOCF_HOST)
		return; /* pinned host memory is not device memory */
	if (ss)
		ss->alloc_bytes += m->bytes;
	struct an_device *d = get_device(a, c->device);
	if (!d)
		return;
	d->allocs++;
	d->alloc_bytes += m->bytes;
	d->mem_cur = (int64_t)((uint64_t)d->mem_cur + m->bytes); /* wraps, never traps */
	if (d->mem_cur > 0 && (uint64_t)d->mem_cur > d->mem_peak)
		d->mem_peak = (uint64_t)d->mem_cur;
	if (m->ptr) {
		uint64_t i;
		if (ms->alloc_freelist.n) {
			i = *VEC_AT(&ms->alloc_freelist, uint64_t, ms->alloc_freelist.n - 1);
			ms->alloc_freelist.n--;
		} else {
			if (!vec_push(&ms->alloc_pool))
				return;
			i = ms->alloc_pool.n - 1;
		}
		struct alloc_ent *ent = VEC_AT(&ms->alloc_pool, struct alloc_ent, i);
		ent->bytes = m->bytes;
		ent->device = c->device;
		ent->finding = 0;
		u64map_put(&ms->allocs, m->ptr, i);
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
			uint64_t *ai = u64map_get(&ms->allocs, m->ptr);
			if (ai)
				VEC_AT(&ms->alloc_pool, struct alloc_ent, *ai)->finding = finding_index(st, f) + 1;
		}
	}
}

void memory_on_free(struct analysis *a, struct an_call_ev *e)
{
	struct an_state *st = a->st;
	struct memory_state *ms = an_pass_state(a, memory);
	const struct tbp_free *fr = &e->r->u.free;
	uint64_t *ix = fr->ptr ? u64map_get(&ms->allocs, fr->ptr) : NULL;
	if (!ix)
		return;
	uint64_t i = *ix;
	struct alloc_ent *ent = VEC_AT(&ms->alloc_pool, struct alloc_ent, i);
	if (ent->finding && ent->finding <= st->all_findings.n)
		VEC_AT(&st->all_findings, struct an_finding, ent->finding - 1)->frees_pending++;
	struct an_device *d = get_device(a, ent->device);
	if (d) {
		d->frees++;
		d->mem_cur = (int64_t)((uint64_t)d->mem_cur - ent->bytes);
	}
	u64map_del(&ms->allocs, fr->ptr);
	uint64_t *fl = vec_push(&ms->alloc_freelist);
	if (fl)
		*fl = i;
}

/* Memory still allocated at the end of the trace. */
int memory_finish(struct analysis *a)
{
	struct memory_state *ms = an_pass_state(a, memory);
	for (size_t i = 0; i < ms->allocs.cap; i++) {
		if (!ms->allocs.keys[i])
			continue;
		const struct alloc_ent *e = VEC_AT(&ms->alloc_pool, struct alloc_ent, ms->allocs.vals[i]);
		a->mem_leak_bytes += e->bytes;
		a->mem_leak_count++;
	}
	return 0;
}

int memory_init(struct analysis *a)
{
	struct memory_state *ms = an_pass_state(a, memory);
	ms->alloc_pool.item = sizeof(struct alloc_ent);
	ms->alloc_freelist.item = sizeof(uint64_t);
	return 0;
}

void memory_free_state(struct analysis *a)
{
	struct memory_state *ms = an_pass_state(a, memory);
	u64map_free(&ms->allocs);
	vec_free(&ms->alloc_pool);
	vec_free(&ms->alloc_freelist);
}
