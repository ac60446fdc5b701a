/*
 * Pass: copies and syncs.  Scalar copies (host-to-device copies of one
 * element, made again and again: the hf_Reformer torch.tensor(scalar)
 * pattern; not a module's parameters and buffers moved by .to()/.cuda(),
 * nor the small tensors of a batch; their stall includes a sync right after
 * them, copies_on_call in an_pass_copies.h), ping-pong (the same bytes copied to the
 * device and back) and sync hotspots (the host waiting for the GPU, by call
 * site).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_copies.h"

struct pp_ent {
	uint64_t callpath, native, bytes, dur;
	int armed;
};

/* torch's frames that move or load state: a module's parameters and
 * buffers (Module.to()/.cuda()/.half() all through Module._apply;
 * load_state_dict() through Module._load_from_state_dict), an optimizer's
 * state (Optimizer.load_state_dict: each parameter's 'step', a 0-d tensor),
 * a checkpoint (anything in torch/serialization.py: torch.load with
 * map_location).  Set-up, however small the tensors (a BatchNorm's
 * num_batches_tracked, a bias): not a host scalar made into a tensor. */
static const struct {
	const char *file, *function; /* function NULL: any of the file's */
} state_moves[] = {
	{"torch/nn/modules/module.py", "Module._apply"},
	{"torch/nn/modules/module.py", "Module._load_from_state_dict"},
	{"torch/optim/optimizer.py", "Optimizer.load_state_dict"},
	{"torch/serialization.py", NULL},
};

static int module_move(struct analysis *a, uint64_t cp)
{
	struct copies_state *cs = an_pass_state(a, copies);
	uint64_t *v = u64map_get(&cs->module_move, cp);
	if (v)
		return *v == 2;
	int move = 0;
	struct an_frame fr[64];
	size_t n = cp ? an_callpath_frames(a, cp, fr, 64) : 0;
	for (size_t i = 0; i < n && !move; i++)
		for (size_t k = 0; k < sizeof state_moves / sizeof state_moves[0] && !move; k++)
			move = an_frame_in_library_file(a, &fr[i], state_moves[k].file) &&
			       (!state_moves[k].function || an_frame_function_is(&fr[i], state_moves[k].function));
	u64map_put(&cs->module_move, cp, 1 + (uint64_t)move); /* out of memory: asked again */
	return move;
}

/* A copy's site: its lines (both copies of `x, y = x.cuda(), y.cuda()` are
 * one site) and native stack; the user's line, as its findings are kept
 * (a batch moved by a library's helper, `batch.to(device)`, is one site). */
static uint64_t site_key(const struct analysis *a, uint64_t cp, uint64_t nat)
{
	if (cp && !a->opts.where_leaf)
		cp = an_user_callpath(a, cp);
	uint64_t h = an_hash_combine(an_callpath_line_key(a, cp), nat);
	return h == UINT64_MAX ? 0 : h;
}

void copies_memcpy(struct analysis *a, const struct tbp_record *r, struct thread_st *th, int phase, uint64_t dur)
{
	struct an_state *st = a->st;
	struct copies_state *cs = an_pass_state(a, copies);
	const struct tbp_call *c = &r->u.call;
	const struct tbp_memcpy *m = &r->u.memcpy;
	/* A copy with neither call path nor native stack has no site: unknown
	 * sites are not one batch site (a C program traced without native
	 * stacks had its large copies hide its scalar ones). */
	if (m->copy_kind == TBP_COPY_H2D && m->bytes > a->opts.scalar_bytes && (c->callpath || c->native))
		u64map_put(&cs->batch_sites, site_key(a, c->callpath, c->native), 1); /* (out of memory: no site) */
	if (m->copy_kind == TBP_COPY_H2D && m->bytes <= a->opts.scalar_bytes && !module_move(a, c->callpath)) {
		struct an_finding *f = finding(a, AN_F_SCALAR_COPY, 0, phase, c->callpath, c->native);
		if (f) {
			if (st->in_iter && f->last_iter != st->iter_no) {
				f->last_iter = st->iter_no;
				f->iters_allocating++;
			}
			f->count++;
			f->total_ns += dur;
			f->bytes += m->bytes;
			f->device = c->device;
			if (m->flags & TBP_COPYF_PAGEABLE)
				f->pageable++;
			if (dur > f->max_ns)
				f->max_ns = dur;
			struct copies_thread *ct = th ? vec_slot(&cs->threads, thread_index(st, th)) : NULL;
			if (ct) {
				cs->pending_n += !ct->scalar_pending;
				ct->scalar_pending = 1;
				ct->scalar_finding = finding_index(st, f);
			}
		}
	}
	if (m->bytes <= a->opts.scalar_bytes || (m->copy_kind != TBP_COPY_H2D && m->copy_kind != TBP_COPY_D2H))
		return;
	/* A round trip, either way round: to the device and back from the
	 * same device pointer (a tensor offloaded after use), or to the host
	 * and back from the same host pointer (`w.cpu()` ... `w.cuda()`).  It
	 * is filed at its host-to-device copy, whichever way round it went, the
	 * device-to-host copy's site beside it: a tensor's chain of copies
	 * (`.cuda()`, `.cpu()`, `.cuda()`, ...) is one finding however the
	 * chain began (its first copy either way, as the tensor was made). */
	int h2d = m->copy_kind == TBP_COPY_H2D;
	uint64_t *back = u64map_get(h2d ? &cs->pp_back : &cs->pp, m->src);
	if (back) {
		struct pp_ent *p = VEC_AT(&cs->pp_pool, struct pp_ent, *back);
		if (p->armed && p->bytes == m->bytes) {
			/* (the copy that ends a round trip starts none: `w.cuda()`
			 * ... `w.cpu()` every step is one round trip a step, not
			 * also one for the way from `.cpu()` to the next `.cuda()`) */
			p->armed = 0;
			uint64_t to_cp = h2d ? c->callpath : p->callpath, to_nat = h2d ? c->native : p->native;
			struct an_finding *f = finding(a, AN_F_PING_PONG, 0, phase, to_cp, to_nat);
			if (f) {
				f->count++;
				f->groups++;
				f->total_ns += p->dur + dur;
				f->bytes += 2 * m->bytes;
				f->device = c->device;
				f->other_callpath = h2d ? p->callpath : c->callpath;
			}
			/* (what an earlier copy left at this destination is
			 * overwritten: it starts no round trip any more) */
			uint64_t *old = u64map_get(h2d ? &cs->pp : &cs->pp_back, m->dst);
			if (old)
				VEC_AT(&cs->pp_pool, struct pp_ent, *old)->armed = 0;
			return;
		}
	}
	/* This copy may start a round trip: keyed by where its bytes went. */
	size_t ix = vec_keyed(&cs->pp_pool, h2d ? &cs->pp : &cs->pp_back, m->dst, NULL);
	if (ix == SIZE_MAX)
		return;
	struct pp_ent *p = VEC_AT(&cs->pp_pool, struct pp_ent, ix);
	p->callpath = c->callpath;
	p->native = c->native;
	p->bytes = m->bytes;
	p->dur = dur;
	p->armed = 1;
}

/* A call in which the host waited for the GPU. */
void copies_sync(struct analysis *a, struct an_call_ev *e)
{
	const struct tbp_call *c = &e->r->u.call;
	uint64_t dur = e->dur;
	struct an_finding *f = finding(a, AN_F_SYNC_HOTSPOT, 0, e->phase, c->callpath, c->native);
	if (f) {
		struct an_state *st = a->st;
		if (st->in_iter && f->last_iter != st->iter_no) {
			f->last_iter = st->iter_no;
			f->iters_allocating++; /* (steps with a sync here) */
		}
		f->count++;
		f->total_ns += dur;
		if (dur > f->max_ns)
			f->max_ns = dur;
		f->device = c->device;
	}
}

int copies_init(struct analysis *a)
{
	struct copies_state *cs = an_pass_state(a, copies);
	cs->pp_pool.item = sizeof(struct pp_ent);
	cs->threads.item = sizeof(struct copies_thread);
	return 0;
}

/* A site that also copies tensors larger than the scalar size to the
 * device moves a batch (`x, y = x.cuda(), y.cuda()`, a collate's list of
 * tensors): its small copies are the batch's small tensors (the labels of
 * a batch of one), not host scalars.  Their findings go. */
int copies_finish(struct analysis *a)
{
	struct an_state *st = a->st;
	struct copies_state *cs = an_pass_state(a, copies);
	if (!cs->batch_sites.n)
		return 0;
	for (size_t i = 0; i < st->all_findings.n; i++) {
		struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, i);
		if (f->kind == AN_F_SCALAR_COPY && (f->callpath || f->native) && u64map_get(&cs->batch_sites, site_key(a, f->callpath, f->native)))
			f->count = f->total_ns = f->bytes = f->flagged = f->pageable = f->max_ns = f->iters_allocating = 0;
	}
	return 0;
}

void copies_free(struct analysis *a)
{
	struct copies_state *cs = an_pass_state(a, copies);
	u64map_free(&cs->pp);
	u64map_free(&cs->pp_back);
	vec_free(&cs->pp_pool);
	u64map_free(&cs->module_move);
	u64map_free(&cs->batch_sites);
	vec_free(&cs->threads);
}
