/*
 * Pass: the breakdown.  Unions of kernel, memcpy and memset intervals per
 * device and stream (the hot part is breakdown_gpu, an_pass_breakdown.h),
 * snapshots at the window's marks, the window measured again from the GPU
 * records when they came late, the HTML timeline, and the totals over
 * devices.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_breakdown.h"

static uint64_t un_window(const struct analysis *a, const struct an_union *u)
{
	if (a->markers_used)
		return u->snap_end > u->snap_begin ? u->snap_end - u->snap_begin : 0;
	return an_union_total(u);
}

void an_device_breakdown(const struct analysis *a, const struct an_device *d, struct an_breakdown *b)
{
	memset(b, 0, sizeof *b);
	b->window_ns = a->markers_used ? a->win_end - a->win_begin
			: (a->last_ts > a->first_ts ? a->last_ts - a->first_ts : 0);
	b->busy_ns = un_window(a, &d->busy);
	b->dm_ns = un_window(a, &d->dm);
	b->active_ns = b->busy_ns > b->dm_ns ? b->busy_ns - b->dm_ns : 0;
	b->idle_ns = b->window_ns > b->busy_ns ? b->window_ns - b->busy_ns : 0;
	b->kernel_ns = un_window(a, &d->kern);
	b->memset_ns = un_window(a, &d->set);
	for (int k = 0; k < AN_CK_N; k++)
		b->ck_ns[k] = un_window(a, &d->ck[k]);
}

void an_stream_breakdown(const struct analysis *a, const struct an_stream *s, uint64_t *busy, uint64_t *dm)
{
	const struct an_union *b, *m;
	an_stream_unions(a, s, &b, &m);
	*busy = un_window(a, b);
	*dm = un_window(a, m);
}

int an_has_gpu(const struct analysis *a)
{
	return a->n_gpu_kernel + a->n_gpu_memcpy + a->n_gpu_memset > 0;
}

/* ------------------------------------------------------------ timeline */
__attribute__((noinline)) void hist_coarsen(struct analysis *a, uint64_t e)
{
	while (e - a->hist_origin > (uint64_t)AN_HIST_BINS * a->hist_w) {
		for (size_t i = 0; i < a->streams.n; i++) {
			struct an_stream *x = VEC_AT(&a->streams, struct an_stream, i);
			for (size_t b = 0; b < AN_HIST_BINS / 2; b++)
				x->hist[b] = x->hist[2 * b] + x->hist[2 * b + 1];
			memset(&x->hist[AN_HIST_BINS / 2], 0, sizeof(uint64_t) * (AN_HIST_BINS / 2));
		}
		a->hist_w *= 2;
	}
	an_pass_state(a, breakdown)->bin_hi = 0; /* (the bins changed) */
}

/* ------------------------------------------------------------ window, again
 * GPU activity that reached the analysis after a later marker makes the
 * marker snapshots inexact: the trace is read again (reread) and the unions
 * of every device and stream rebuilt from its GPU records alone (in order
 * per device stream) clipped to [win_begin, win_end]; clipping keeps each
 * stream's start order, so the unions stay exact.  snap_begin = 0,
 * snap_end = total. */
uint64_t breakdown_reread_begin(struct analysis *a)
{
	if (!a->markers_used || !a->late_gpu_records)
		return 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		struct an_union *us[] = {&d->busy, &d->dm, &d->kern, &d->set};
		for (size_t k = 0; k < 4; k++)
			memset(us[k], 0, sizeof *us[k]);
		memset(d->ck, 0, sizeof d->ck);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		struct an_stream *s = VEC_AT(&a->streams, struct an_stream, i);
		memset(&s->busy, 0, sizeof s->busy);
		memset(&s->dm, 0, sizeof s->dm);
	}
	return 1ull << TBP_K_GPU_KERNEL | 1ull << TBP_K_GPU_MEMCPY | 1ull << TBP_K_GPU_MEMSET;
}

void breakdown_reread_record(struct analysis *a, const struct tbp_record *r)
{
	const struct tbp_gpu_kernel *g = &r->u.gpu_kernel;
	uint64_t s = r->ts, e = g->end < r->ts ? r->ts : g->end;
	if (s < a->win_begin)
		s = a->win_begin;
	if (e > a->win_end)
		e = a->win_end;
	if (e <= s)
		return;
	struct an_device *d = get_device(a, g->device);
	struct an_stream *str = get_stream(a, g->device, g->stream);
	if (!d || !str)
		return;
	int own = !stream_mirrors(str);
	un_add(&d->busy, s, e);
	if (own)
		un_add(&str->busy, s, e);
	if (r->kind == TBP_K_GPU_KERNEL) {
		un_add(&d->kern, s, e);
	} else if (r->kind == TBP_K_GPU_MEMCPY) {
		un_add(&d->dm, s, e);
		if (own)
			un_add(&str->dm, s, e);
		un_add(&d->ck[r->u.gpu_memcpy.copy_kind < AN_CK_N ? r->u.gpu_memcpy.copy_kind : 0], s, e);
	} else {
		un_add(&d->set, s, e);
	}
}

static void un_whole(struct an_union *u)
{
	u->snap_begin = 0;
	u->snap_end = an_union_total(u);
}

void breakdown_reread_end(struct analysis *a)
{
	a->window_second_pass = 1;
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		un_whole(&d->busy);
		un_whole(&d->dm);
		un_whole(&d->kern);
		un_whole(&d->set);
		for (int k = 0; k < AN_CK_N; k++)
			un_whole(&d->ck[k]);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		struct an_stream *s = VEC_AT(&a->streams, struct an_stream, i);
		if (stream_mirrors(s))
			continue; /* (its device's, above) */
		un_whole(&s->busy);
		un_whole(&s->dm);
	}
}

/* ------------------------------------------------------------ totals */
/* Totals over devices, and each device's idle time by cause. */
int breakdown_finish(struct analysis *a)
{
	memset(&a->total, 0, sizeof a->total);
	memset(&a->idle, 0, sizeof a->idle);
	a->total.window_ns = a->markers_used ? a->win_end - a->win_begin
				: (a->last_ts > a->first_ts ? a->last_ts - a->first_ts : 0);
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (!d->kernels && !d->copies && !d->sets)
			continue;
		struct an_breakdown b;
		an_device_breakdown(a, d, &b);
		a->total.busy_ns += b.busy_ns;
		a->total.dm_ns += b.dm_ns;
		a->total.active_ns += b.active_ns;
		a->total.idle_ns += b.idle_ns;
		a->total.kernel_ns += b.kernel_ns;
		a->total.memset_ns += b.memset_ns;
		for (int k = 0; k < AN_CK_N; k++)
			a->total.ck_ns[k] += b.ck_ns[k];
		idle_breakdown_add(a, d, b.idle_ns);
	}
	for (size_t i = 0; i < a->streams.n; i++) {
		const struct an_stream *x = VEC_AT(&a->streams, struct an_stream, i);
		a->idle.hta_queued_ns += x->hta_gap[0];
		a->idle.hta_host_wait_ns += x->hta_gap[1];
	}
	return 0;
}
