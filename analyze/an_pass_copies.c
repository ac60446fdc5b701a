/*
 * Pass: copies and syncs.  Scalar copies (host-to-device copies of a few
 * bytes; their stall includes a sync right after them, copies_call in
 * an_pass.h), ping-pong (the same bytes copied to the device and back) and
 * sync hotspots (the host waiting for the GPU, by call site).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass.h"

struct pp_ent {
	uint64_t callpath, native, bytes, dur;
	int armed;
};

void copies_memcpy(struct analysis *a, const struct tbp_record *r, struct thread_st *th, int phase, uint64_t dur)
{
	struct an_state *st = a->st;
	struct copies_state *cs = &st->copies;
	const struct tbp_call *c = &r->u.call;
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
				th->scalar_finding = finding_index(st, f);
			}
		}
	}
	if (m->bytes > a->opts.scalar_bytes && m->copy_kind == TBP_COPY_H2D) {
		uint64_t *ix = u64map_get(&cs->pp, m->dst);
		struct pp_ent *p;
		if (ix) {
			p = VEC_AT(&cs->pp_pool, struct pp_ent, *ix);
		} else {
			p = vec_push(&cs->pp_pool);
			if (!p || u64map_put(&cs->pp, m->dst, cs->pp_pool.n - 1))
				return;
		}
		p->callpath = c->callpath;
		p->native = c->native;
		p->bytes = m->bytes;
		p->dur = dur;
		p->armed = 1;
	} else if (m->bytes > a->opts.scalar_bytes && m->copy_kind == TBP_COPY_D2H) {
		uint64_t *ix = u64map_get(&cs->pp, m->src);
		if (!ix)
			return;
		struct pp_ent *p = VEC_AT(&cs->pp_pool, struct pp_ent, *ix);
		if (!p->armed || p->bytes != m->bytes)
			return;
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
}

/* A call in which the host waited for the GPU. */
void copies_sync(struct analysis *a, const struct tbp_record *r, int phase, uint64_t dur)
{
	const struct tbp_call *c = &r->u.call;
	struct an_finding *f = finding(a, AN_F_SYNC_HOTSPOT, 0, phase, c->callpath, c->native);
	if (f) {
		f->count++;
		f->total_ns += dur;
		if (dur > f->max_ns)
			f->max_ns = dur;
		f->device = c->device;
	}
}

static int copies_init(struct analysis *a)
{
	a->st->copies.pp_pool.item = sizeof(struct pp_ent);
	return 0;
}

static void copies_free(struct analysis *a)
{
	u64map_free(&a->st->copies.pp);
	vec_free(&a->st->copies.pp_pool);
}

const struct an_pass_ops an_pass_copies = {
	.name = "copies",
	.init = copies_init,
	.free = copies_free,
};
