/* Pass: kernel bursts, runs of tiny kernels (an_pass_bursts.c). */
#ifndef TBANALYZE_AN_PASS_BURSTS_H
#define TBANALYZE_AN_PASS_BURSTS_H

#include "an_pass.h"

/* bursts: closed bursts not yet added to their finding (struct burst_iv):
 * bursts of one site on several streams overlap in time, so their spans and
 * idle are merged per (finding, device) before adding. */
#define BURST_SIBS 256 /* slots of bursts_state.sibs */
struct bursts_state {
	struct vec burst_ivs;
	size_t burst_fold_at;
	/* Pairs (call path, a run's first kernel's) found to be the same loop
	 * body (burst_kernel: the parent looked up, the leaf compared): a
	 * direct-mapped memo, as a run of many lines asks again at every
	 * kernel.  cp 0: empty. */
	struct { uint64_t cp, first; } sibs[BURST_SIBS];
	/* an_user_callpath's memo (an_defs.c): its hit without the call
	 * (without one, an empty memo: no call path is 0 there) */
	const struct an_cp_memo *user_memo;
};

static inline unsigned burst_sib_slot(uint64_t cp, uint64_t first)
{
	return (unsigned)((cp * 0x9e3779b97f4a7c15ull ^ first) >> 40) & (BURST_SIBS - 1);
}

void burst_close(struct analysis *a, struct an_stream *s);
/* Call paths x and y end in the same function (file and name). */
int same_leaf_function(const struct analysis *a, uint64_t x, uint64_t y);

/* A kernel or memset (the launch that made it: api) into its stream's run
 * of tiny kernels issued back to back: from one loop, with gaps of launch
 * overhead (under the idle-gap threshold, so no idle gap is ever inside a
 * burst: no idle counted twice), no host sync between their launches. */
HOT_FN void burst_kernel(struct analysis *a, const struct an_device *d, struct an_stream *s, uint64_t ts,
			 uint64_t end, const struct corr_ent *api)
{
	struct an_burst_run *r = &s->run;
	struct bursts_state *bs = an_pass_state(a, bursts);
	uint64_t nat = api->native;
	int is_short = end - ts < a->opts.burst_kernel_ns;
	/* Keyed on the line where the finding is shown: the innermost frame of
	 * the user's code (torch.norm, `1.0 / t`, F.relu launch from inside
	 * torch's Python wrappers, the user's line is the same), the leaf with
	 * --where=leaf. */
	uint64_t cp = api->callpath;
	if (cp && !a->opts.where_leaf) {
		/* (never NULL: bursts_init) */
		const struct an_cp_memo *m = &bs->user_memo[cp % AN_CP_MEMO];
		cp = m->cp == cp ? m->val : an_user_callpath(a, cp);
	}
	/* Same call site, or another line of the same loop body: a sibling
	 * line under the same caller (an optimizer's per-parameter loop), or
	 * another line of the same function run at the top (a script's own
	 * loop at module level: no caller).  One Python line launches through
	 * different C++ paths: its native stacks count only without Python. */
	/* And the site's slot in the run (k, k == nsites: none yet).  Whether a
	 * kernel is the run's depends only on its site and the run's first
	 * kernel's: a site the run has is the run's, no parent to look up. */
	uint32_t k = 0, ns = r->nsites;
	int same;
	if (cp && cp == r->callpath) { /* (the run's first site: slot 0) */
		same = 1;
	} else if (cp) {
		/* (the slots past nsites are 0: no call path; slot 0 is the run's
		 * first site, r->callpath, which cp is not: no test for it) */
		unsigned m = (unsigned)(r->site_cp[1] == cp) << 1 | (unsigned)(r->site_cp[2] == cp) << 2 |
			     (unsigned)(r->site_cp[3] == cp) << 3;
		k = m ? (uint32_t)__builtin_ctz(m) : ns;
		same = k < ns;
		if (!same && r->count) {
			unsigned slot = burst_sib_slot(cp, r->callpath);
			same = bs->sibs[slot].cp == cp && bs->sibs[slot].first == r->callpath;
			if (!same && an_callpath_parent(a, cp) == r->parent &&
			    (r->parent || same_leaf_function(a, cp, r->callpath))) {
				same = 1;
				bs->sibs[slot].cp = cp;
				bs->sibs[slot].first = r->callpath;
			}
		}
	} else {
		while (k < ns && (r->site_cp[k] || r->site_nat[k] != nat))
			k++;
		same = nat == r->native && !r->callpath;
	}
	/* Host work between them (Python, a sync, CPU work) ends it: its gap is
	 * the host's, an idle gap of its own. */
	/* In time order the device's idle since the run's last kernel is at
	 * most ts - last_end, so its test never holds; a kernel that came late
	 * (beyond the reorder window) may follow an idle gap already counted
	 * past it, whose idle the run must not take in as well.  (One test
	 * after the other, the common case's first: no flags kept.) */
	if (r->count && (!is_short || !same || ts >= r->last_end + a->opts.gap_ns ||
			 (api->tid == r->last_tid && api->syncs != r->last_syncs) ||
			 d->idle_total - r->dev_idle_last >= a->opts.gap_ns)) {
		burst_close(a, s);
		k = 0; /* (no sites now) */
	}
	if (!is_short)
		return;
	if (k < r->nsites) {
		r->site_n[k]++;
	} else if (k < 4) {
		r->site_cp[k] = cp;
		r->site_leaf[k] = api->callpath;
		r->site_nat[k] = nat;
		r->site_n[k] = 1;
		r->nsites = k + 1;
	}
	r->last_tid = api->tid;
	r->last_syncs = api->syncs;
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
	if (end > r->last_end)
		r->last_end = end;
	/* The device is busy from this kernel's start to last_end, so no gap
	 * found later ends inside the burst: this is its idle so far. */
	r->dev_idle_last = d->idle_total;
	r->count++;
}


HOT_FN void bursts_on_kernel(struct analysis *a, const struct an_gpu_ev *e)
{
	burst_kernel(a, e->d, e->str, e->s, e->e, e->api);
}

/* A copy between the kernels of a run ends it. */
HOT_FN void bursts_on_gpu_memcpy(struct analysis *a, const struct an_gpu_ev *e)
{
	burst_close(a, e->str);
}

int bursts_init(struct analysis *a);
/* Every stream's open run closes (in the phase that ends). */
void bursts_close_all(struct analysis *a);
void bursts_phase_moved(struct analysis *a, int from, int to);
void bursts_flush(struct analysis *a);
void bursts_free(struct analysis *a);

static const struct an_pass_ops an_pass_bursts = {
	.name = "bursts",
	.state_size = sizeof(struct bursts_state),
	.init = bursts_init,
	.on_kernel = bursts_on_kernel,
	.on_gpu_memcpy = bursts_on_gpu_memcpy,
	/* A short memset is a tiny kernel to the burst rule: PyTorch's zero_() on a contiguous CUDA tensor is a
	 * cudaMemsetAsync, so zero_grad's per-parameter loop is a run of memsets. */
	.on_gpu_memset = bursts_on_kernel,
	.phase_ending = bursts_close_all,
	.phase_moved = bursts_phase_moved,
	.flush = bursts_flush,
	.free = bursts_free,
};

#endif
