/* Pass: copies and syncs (an_pass_copies.c): scalar copies, ping-pong, sync
 * hotspots. */
#ifndef TBANALYZE_AN_PASS_COPIES_H
#define TBANALYZE_AN_PASS_COPIES_H

#include "an_pass.h"

/* copies: the latest host-to-device copy to each device pointer and the
 * latest device-to-host copy to each host pointer, armed for a round trip
 * (pp, pp_back: index in pp_pool); for scalar copies, the call paths that move a module's
 * parameters and buffers, and the sites that also copy larger tensors to
 * the device (a batch's); by thread (st->threads' index), whether its last
 * call was a scalar copy. */
struct copies_thread {
	int scalar_pending;   /* a scalar copy was this thread's last call */
	size_t scalar_finding;
};
struct copies_state {
	struct u64map pp, pp_back;
	struct vec pp_pool;
	struct u64map module_move; /* call path -> 1 + (1: inside Module._apply or _load_from_state_dict) */
	struct u64map batch_sites; /* hash of (call path, native) of a host-to-device copy over the scalar size */
	struct vec threads;        /* struct copies_thread */
	size_t pending_n;          /* threads whose scalar_pending is set */
};

/* Any host call: a scalar copy's stall includes the sync right after it. */
HOT_FN void copies_on_call(struct analysis *a, struct an_call_ev *e)
{
	struct copies_state *cs = an_pass_state(a, copies);
	if (__builtin_expect(!cs->pending_n, 1))
		return;
	size_t t = e->th ? thread_index(a->st, e->th) : SIZE_MAX;
	struct copies_thread *ct = t < cs->threads.n ? VEC_AT(&cs->threads, struct copies_thread, t) : NULL;
	if (ct && ct->scalar_pending) {
		ct->scalar_pending = 0;
		cs->pending_n--;
		struct an_state *st = a->st;
		if (e->host_waits && ct->scalar_finding < st->all_findings.n) {
			struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, ct->scalar_finding);
			f->flagged++;
			f->total_ns += e->dur;
		}
	}
}
void copies_memcpy(struct analysis *a, const struct tbp_record *r, struct thread_st *th, int phase, uint64_t dur);
void copies_sync(struct analysis *a, struct an_call_ev *e);

HOT_FN void copies_on_memcpy(struct analysis *a, struct an_call_ev *e)
{
	copies_on_call(a, e);
	copies_memcpy(a, e->r, e->th, e->phase, e->dur);
}

/* A call in which the host waited for the GPU. */
HOT_FN void copies_on_sync(struct analysis *a, struct an_call_ev *e)
{
	copies_on_call(a, e);
	if (e->host_waits)
		copies_sync(a, e);
}

int copies_init(struct analysis *a);
int copies_finish(struct analysis *a);
void copies_free(struct analysis *a);

static const struct an_pass_ops an_pass_copies = {
	.name = "copies",
	.state_size = sizeof(struct copies_state),
	.init = copies_init,
	.on_launch = copies_on_call,
	.on_memcpy = copies_on_memcpy,
	.on_memset = copies_on_call,
	.on_sync = copies_on_sync,
	.on_malloc = copies_on_call,
	.on_free = copies_on_call,
	.on_api = copies_on_call,
	.finish = copies_finish,
	.free = copies_free,
};

#endif
