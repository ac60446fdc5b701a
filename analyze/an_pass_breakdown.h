/* Pass: the breakdown (an_pass_breakdown.c): unions of GPU work per device and
 * stream, the HTML timeline's picture, the totals over devices. */
#ifndef TBANALYZE_AN_PASS_BREAKDOWN_H
#define TBANALYZE_AN_PASS_BREAKDOWN_H

#include "an_pass.h"

/* un_add on a stream's busy union, which also splits the stream's idle
 * as HTA does: the host was late when the work was launched (launch_ts)
 * after the stream's previous work ended. */
HOT_FN void stream_busy_add(struct an_stream *str, uint64_t s, uint64_t e, uint64_t launch_ts)
{
	struct an_union *u = &str->busy;
	if (u->open && s > u->end)
		str->hta_gap[launch_ts > u->end] += s - u->end;
	un_add(u, s, e);
}

/* breakdown: the timeline picture's bin the latest interval fell in, all of
 * it, as [bin_lo, bin_hi) in trace time (the bins are every stream's): the
 * next one inside it, most records, is added there without the rest of
 * hist_add's arithmetic.  bin_hi 0: none (at first, and once the bins are
 * coarsened). */
struct breakdown_state {
	uint64_t bin_lo, bin_hi;
	size_t bin;
};

void hist_coarsen(struct analysis *a, uint64_t e);
HOT_FN void hist_add(struct analysis *a, struct an_stream *str, uint64_t s, uint64_t e)
{
	struct breakdown_state *bs = an_pass_state(a, breakdown);
	if (s >= bs->bin_lo && e <= bs->bin_hi && e > s) {
		str->hist[bs->bin] += e - s;
		return;
	}
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
		if ((off >> sh) < AN_HIST_BINS) {
			str->hist[off >> sh] += end - off;
			/* (not where an end would have been cut short above) */
			if (((off >> sh) + 1) << sh <= (UINT64_MAX >> 12) &&
			    a->hist_origin <= UINT64_MAX - (UINT64_MAX >> 12)) {
				bs->bin = off >> sh;
				bs->bin_lo = a->hist_origin + (bs->bin << sh);
				bs->bin_hi = bs->bin_lo + a->hist_w;
			}
		}
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

/* A GPU record's interval into its device's and stream's unions and the
 * timeline's picture.  idle: the device's before it, as the dispatcher
 * measured it on the busy union (nonzero: the union is open and s past its
 * end, which no hook before this one moves). */
HOT_FN void breakdown_gpu(struct analysis *a, struct an_device *d, struct an_stream *str, uint64_t s, uint64_t e,
			  uint64_t launch_ts, uint64_t idle)
{
	if (__builtin_expect(stream_mirrors(str), 1)) {
		/* (stream_busy_add's split on the device's busy union, which is
		 * the stream's: its idle before s is the device's) */
		if (idle) {
			str->hta_gap[launch_ts > s - idle] += idle;
			un_add_past(&d->busy, s, e);
		} else {
			un_add(&d->busy, s, e);
		}
	} else {
		if (idle)
			un_add_past(&d->busy, s, e);
		else
			un_add(&d->busy, s, e);
		stream_busy_add(str, s, e, launch_ts);
	}
	hist_add(a, str, s, e);
}


HOT_FN void breakdown_on_kernel(struct analysis *a, const struct an_gpu_ev *e)
{
	breakdown_gpu(a, e->d, e->str, e->s, e->e, e->api->ts, e->idle);
	/* (open from the device's making, get_device_slow; a reread that
	 * empties it adds with un_add) */
	un_add_open(&e->d->kern, e->s, e->e);
}

HOT_FN void breakdown_on_gpu_memcpy(struct analysis *a, const struct an_gpu_ev *e)
{
	breakdown_gpu(a, e->d, e->str, e->s, e->e, e->api->ts, e->idle);
	un_add(&e->d->dm, e->s, e->e);
	if (!stream_mirrors(e->str))
		un_add(&e->str->dm, e->s, e->e);
	unsigned ck = e->r->u.gpu_memcpy.copy_kind;
	un_add(&e->d->ck[ck < AN_CK_N ? ck : 0], e->s, e->e);
}

HOT_FN void breakdown_on_gpu_memset(struct analysis *a, const struct an_gpu_ev *e)
{
	breakdown_gpu(a, e->d, e->str, e->s, e->e, e->api->ts, e->idle);
	un_add(&e->d->set, e->s, e->e);
}

uint64_t breakdown_reread_begin(struct analysis *a);
void breakdown_reread_record(struct analysis *a, const struct tbp_record *r);
void breakdown_reread_end(struct analysis *a);
int breakdown_finish(struct analysis *a);

static const struct an_pass_ops an_pass_breakdown = {
	.name = "breakdown",
	.state_size = sizeof(struct breakdown_state),
	.on_kernel = breakdown_on_kernel,
	.on_gpu_memcpy = breakdown_on_gpu_memcpy,
	.on_gpu_memset = breakdown_on_gpu_memset,
	.reread_begin = breakdown_reread_begin,
	.reread_record = breakdown_reread_record,
	.reread_end = breakdown_reread_end,
	.finish = breakdown_finish,
};

#endif
