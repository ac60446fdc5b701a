/*
 * Pass: kernel bursts, runs of tiny kernels on a stream from one loop
 * (burst_kernel, on every kernel and memset, is in an_pass_bursts.h).  A closed
 * burst waits in a list until no burst still open can overlap it, then its
 * span and the device idle inside it go to its finding once, however many
 * streams' bursts cover the same time.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_bursts.h"

/* One closed burst: its span and the device's cumulative idle at both ends
 * (idle_last - idle_first is the device idle inside the span). */
struct burst_iv {
	uint64_t finding, device, start, end, idle_first, idle_last;
};

static int burst_iv_cmp(const void *x, const void *y)
{
	const struct burst_iv *a = x, *b = y;
	if (a->finding != b->finding)
		return a->finding < b->finding ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int burst_idle_cmp(const void *x, const void *y)
{
	const struct burst_iv *a = x, *b = y;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->idle_first < b->idle_first ? -1 : a->idle_first > b->idle_first;
}

/* Merges overlapping bursts of one (finding, device) and adds each merged
 * span that ends before `horizon` to its finding: its length and the device
 * idle inside it, once, however many streams' bursts cover it.  Later bursts
 * start at or after the horizon, so they cannot overlap what is added.
 * Bursts of two findings at once (two streams, two loops) share the device's
 * idle: in the order of the device's cumulative idle, each claims only what
 * no burst claimed before, so the findings' idle never adds up to more than
 * the device's. */
static void bursts_fold(struct analysis *a, uint64_t horizon)
{
	struct an_state *st = a->st;
	struct vec *v = &an_pass_state(a, bursts)->burst_ivs;
	if (v->n > 1)
		qsort(v->data, v->n, v->item, burst_iv_cmp);
	size_t kept = 0, nadd = 0;
	struct burst_iv *add = v->n ? malloc(v->n * sizeof *add) : NULL;
	for (size_t i = 0; i < v->n;) {
		struct burst_iv m = *VEC_AT(v, struct burst_iv, i);
		size_t j = i + 1;
		for (; j < v->n; j++) {
			const struct burst_iv *b = VEC_AT(v, struct burst_iv, j);
			if (b->finding != m.finding || b->device != m.device || b->start > m.end)
				break;
			if (b->end > m.end) {
				m.end = b->end;
				m.idle_last = b->idle_last;
			}
		}
		i = j;
		if (m.end >= horizon || m.finding >= st->all_findings.n || !add) {
			if (m.finding < st->all_findings.n)
				*VEC_AT(v, struct burst_iv, kept++) = m;
			continue;
		}
		add[nadd++] = m;
	}
	v->n = kept;
	if (nadd > 1)
		qsort(add, nadd, sizeof *add, burst_idle_cmp);
	for (size_t i = 0; i < nadd; i++) {
		const struct burst_iv *m = &add[i];
		struct an_finding *f = VEC_AT(&st->all_findings, struct an_finding, m->finding);
		uint64_t span = m->end - m->start;
		f->total_ns += span;
		if (span > f->max_ns)
			f->max_ns = span;
		struct an_device *d = get_device(a, m->device);
		uint64_t from = m->idle_first, idle = 0;
		if (d && d->burst_idle_to > from)
			from = d->burst_idle_to;
		if (m->idle_last > from)
			idle = m->idle_last - from;
		f->idle_ns += idle;
		if (d) {
			d->burst_idle_by[f->phase] += idle;
			if (m->idle_last > d->burst_idle_to)
				d->burst_idle_to = m->idle_last;
		}
	}
	free(add);
}

__attribute__((noinline)) void burst_close(struct analysis *a, struct an_stream *s)
{
	struct an_state *st = a->st;
	struct bursts_state *bs = an_pass_state(a, bursts);
	struct an_burst_run *r = &s->run;
	if (r->count >= a->opts.burst_min && r->dev_idle_last > r->dev_idle_first) {
		uint32_t top = 0;   /* every kernel of the run counted a site: the first is site 0 */
		for (uint32_t i = 1; i < r->nsites; i++)
			if (r->site_n[i] > r->site_n[top])
				top = i;
		struct an_finding *f = finding(a, AN_F_KERNEL_BURST, 0, cur_phase(a), r->site_cp[top], r->site_nat[top]);
		struct burst_iv *b = f ? vec_push(&bs->burst_ivs) : NULL;
		if (b) {
			if (!f->leaf_callpath && r->site_leaf[top] != f->callpath)
				f->leaf_callpath = r->site_leaf[top];
			f->count += r->count;
			f->groups++;
			f->device = s->device;
			b->finding = (uint64_t)(f - VEC_AT(&st->all_findings, struct an_finding, 0));
			b->device = s->device;
			b->start = r->first_start;
			b->end = r->last_end;
			b->idle_first = r->dev_idle_first;
			b->idle_last = r->dev_idle_last;
		}
		mark_add(a, AN_F_KERNEL_BURST, s->device, s->stream, r->first_start, r->last_end);
	}
	memset(r, 0, sizeof *r);
	if (bs->burst_ivs.n >= bs->burst_fold_at) {
		/* Nothing still to close starts before the record in hand or
		 * before a burst still open on another stream. */
		uint64_t horizon = st->gpu_now;
		for (size_t i = 0; i < a->streams.n; i++) {
			const struct an_stream *o = VEC_AT(&a->streams, struct an_stream, i);
			if (o->run.count && o->run.first_start < horizon)
				horizon = o->run.first_start;
		}
		bursts_fold(a, horizon);
		bs->burst_fold_at = bs->burst_ivs.n * 2 > 4096 ? bs->burst_ivs.n * 2 : 4096;
	}
}

int same_leaf_function(const struct analysis *a, uint64_t x, uint64_t y)
{
	struct an_frame fx, fy;
	return x && y && an_callpath_frames(a, x, &fx, 1) && an_callpath_frames(a, y, &fy, 1) &&
	       an_frame_same_function(&fx, &fy);
}

/* Every stream's open run of tiny kernels closes: the end of the trace, or
 * an iteration's mark (a burst's idle stays in the phase it is counted in). */
void bursts_close_all(struct analysis *a)
{
	for (size_t i = 0; i < a->streams.n; i++)
		burst_close(a, VEC_AT(&a->streams, struct an_stream, i));
}

/* The devices' idle inside bursts filed under phase from goes to to. */
void bursts_phase_moved(struct analysis *a, int from, int to)
{
	for (size_t i = 0; i < a->devices.n; i++) {
		struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		d->burst_idle_by[to] += d->burst_idle_by[from];
		d->burst_idle_by[from] = 0;
	}
}

void bursts_flush(struct analysis *a)
{
	bursts_close_all(a);
	bursts_fold(a, UINT64_MAX);
}

int bursts_init(struct analysis *a)
{
	struct bursts_state *bs = an_pass_state(a, bursts);
	bs->burst_ivs.item = sizeof(struct burst_iv);
	bs->burst_fold_at = 4096;
	static const struct an_cp_memo no_memo[AN_CP_MEMO];
	bs->user_memo = an_user_callpath_memo(a);
	if (!bs->user_memo)
		bs->user_memo = no_memo;
	return 0;
}

void bursts_free(struct analysis *a)
{
	vec_free(&an_pass_state(a, bursts)->burst_ivs);
}
