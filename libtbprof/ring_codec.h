/*
 * How records sit in a thread's ring: 32-byte units.  A kernel launch is
 * packed in two units (its 17 fields, each checked to fit), a Python span
 * in one; anything else is the whole struct tbp_record in five units.
 *
 * The first byte of a record's first unit says which form follows:
 *   < 0x80                a struct tbp_record, verbatim (its `kind`), 5 units
 *   0x80 | TBP_K_LAUNCH   packed launch, 2 units
 *   0x80 | TBP_K_PY_SPAN  packed span, 1 unit
 *   TBP_RING_PAD          padding up to the ring's end (a record never wraps);
 *                         its length in units in the bytes above the first
 * Packed records are the ring thread's own (stream THREAD, its tid).
 */
#ifndef TBP_RING_CODEC_H
#define TBP_RING_CODEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tbprof/trace.h"

struct tbp_unit {
	uint64_t w[4];
} __attribute__((aligned(32)));

#define TBP_RING_PACKED 0x80u
#define TBP_RING_PAD 0xffu
#define TBP_RING_FULL_UNITS ((unsigned)(sizeof(struct tbp_record) / sizeof(struct tbp_unit)))
_Static_assert(sizeof(struct tbp_record) % sizeof(struct tbp_unit) == 0, "a record is whole units");
_Static_assert(TBP_K__MAX <= TBP_RING_PACKED, "kinds leave the top bit to the packed forms");

/* Units a record of the ring's own thread takes (stream THREAD, its tid,
 * no blob: what a hook fills). */
static inline __attribute__((always_inline)) unsigned tbp_ring_units_own(const struct tbp_record *r)
{
	if (r->kind == TBP_K_PY_SPAN)
		return 1;
	if (r->kind == TBP_K_LAUNCH) {
		const struct tbp_launch *l = &r->u.launch;
		uint64_t wide = (l->end - r->ts) | l->callpath | l->native | l->name | l->shmem | l->grid_x;
		uint64_t narrow = l->grid_y | l->grid_z | l->block_x | l->block_y | l->block_z | l->result;
		if (l->end >= r->ts && (wide >> 32) == 0 && (narrow >> 16) == 0 && ((l->api | l->device) >> 8) == 0)
			return 2;
	}
	return TBP_RING_FULL_UNITS;
}

/* Units any record `r` takes in the ring of thread `tid`. */
static inline unsigned tbp_ring_units(const struct tbp_record *r, uint32_t tid)
{
	if (r->stream_kind != TBP_STREAM_THREAD || r->tid != tid || r->blob)
		return TBP_RING_FULL_UNITS;
	return tbp_ring_units_own(r);
}

/* Writes r at u in the form tbp_ring_units gave (n units). */
static inline __attribute__((always_inline)) void tbp_ring_encode(struct tbp_unit *u, const struct tbp_record *r, unsigned n)
{
	if (n == 1) {
		u[0].w[0] = TBP_RING_PACKED | TBP_K_PY_SPAN;
		u[0].w[1] = r->ts;
		u[0].w[2] = r->u.py_span.end;
		u[0].w[3] = r->u.py_span.callpath;
	} else if (n == 2) {
		const struct tbp_launch *l = &r->u.launch;
		u[0].w[0] = (TBP_RING_PACKED | TBP_K_LAUNCH) | l->api << 8 | l->device << 16 | (l->end - r->ts) << 32;
		u[0].w[1] = r->ts;
		u[0].w[2] = l->corr;
		u[0].w[3] = l->callpath | l->native << 32;
		u[1].w[0] = l->stream;
		u[1].w[1] = l->name | l->shmem << 32;
		u[1].w[2] = l->grid_x | l->grid_y << 32 | l->grid_z << 48;
		u[1].w[3] = l->block_x | l->block_y << 16 | l->block_z << 32 | l->result << 48;
	} else {
		memcpy(u, r, sizeof *r);
	}
}

/* Where a record of n units starting at or after `head` goes: records
 * never wrap, so one that would is put at the ring's start (padding before). */
static inline uint64_t tbp_ring_fit(uint64_t head, uint64_t mask, uint64_t n)
{
	return (head & mask) + n > mask + 1 ? (head | mask) + 1 : head;
}

/* Where the producer puts its next record. */
struct tbp_ring_plan {
	uint64_t mask;     /* in force: doubled when `grew` */
	bool grew;
	uint64_t lost_at;  /* the pending LOST record's first unit */
	uint64_t at;       /* the record's first unit; the new head is at + n */
};

/* Plans a record of n units (after a LOST record when `lost`) at `head`,
 * with the writer at `tail`.  A growth requested (`grow`) happens where the
 * first of them would start, if that is an odd multiple of the capacity C
 * and the units still in the ring all lie from there - C on: they then sit
 * at the same places under the old mask and the new one (the head may be a
 * few units short of it, the padding of a record that would wrap; units
 * left from before wait for the next lap).  Returns whether it all fits
 * (the growth stands either way: it is safe at that point). */
static inline bool tbp_ring_plan(uint64_t head, uint64_t tail, uint64_t mask, bool grow, bool lost, unsigned n,
	struct tbp_ring_plan *p)
{
	uint64_t first = tbp_ring_fit(head, mask, lost ? TBP_RING_FULL_UNITS : n);
	p->grew = grow && (first & mask) == 0 && (first & (mask + 1)) != 0 && tail + mask + 1 >= first;
	if (p->grew)
		mask = mask * 2 + 1;
	p->mask = mask;
	uint64_t h = head;
	if (lost) {
		p->lost_at = tbp_ring_fit(h, mask, TBP_RING_FULL_UNITS);
		h = p->lost_at + TBP_RING_FULL_UNITS;
	} else {
		p->lost_at = h;
	}
	p->at = tbp_ring_fit(h, mask, n);
	return p->at + n - tail <= mask + 1;
}

/* Padding of n units at u (the ring may have doubled by the time the writer
 * reads it: the length, not the mask, says where it ends). */
static inline void tbp_ring_pad(struct tbp_unit *u, uint64_t n)
{
	u->w[0] = TBP_RING_PAD | n << 8;
}

static inline bool tbp_ring_is_pad(const struct tbp_unit *u)
{
	return (u->w[0] & 0xff) == TBP_RING_PAD;
}

/* Units taken at u by what tbp_ring_encode or tbp_ring_pad wrote there. */
static inline uint64_t tbp_ring_units_at(const struct tbp_unit *u)
{
	unsigned form = (unsigned)(u->w[0] & 0xff);
	if (form == TBP_RING_PAD)
		return u->w[0] >> 8;
	if (form == (TBP_RING_PACKED | TBP_K_PY_SPAN))
		return 1;
	if (form == (TBP_RING_PACKED | TBP_K_LAUNCH))
		return 2;
	return TBP_RING_FULL_UNITS;
}

/* The record at u (n units) as it was encoded; a packed one gets its kind's
 * fields only (the union's others keep what they held: the trace writer
 * reads a kind's schema fields alone). */
static inline __attribute__((always_inline)) void tbp_ring_decode(const struct tbp_unit *u, unsigned n, uint32_t tid, struct tbp_record *r)
{
	if (n == TBP_RING_FULL_UNITS) {
		memcpy(r, u, sizeof *r);
		return;
	}
	r->kind = 0;
	r->stream_kind = TBP_STREAM_THREAD;
	r->nfields = 0;
	r->tid = tid;
	r->blob = NULL;
	r->blob_len = 0;
	r->ts = u[0].w[1];
	if (n == 1) {
		r->kind = TBP_K_PY_SPAN;
		r->u.py_span.end = u[0].w[2];
		r->u.py_span.callpath = u[0].w[3];
		return;
	}
	struct tbp_launch *l = &r->u.launch;
	uint64_t w = u[0].w[0];
	r->kind = TBP_K_LAUNCH;
	l->api = w >> 8 & 0xff;
	l->device = w >> 16 & 0xff;
	l->end = r->ts + (w >> 32);
	l->corr = u[0].w[2];
	l->callpath = u[0].w[3] & 0xffffffffu;
	l->native = u[0].w[3] >> 32;
	l->stream = u[1].w[0];
	l->name = u[1].w[1] & 0xffffffffu;
	l->shmem = u[1].w[1] >> 32;
	l->grid_x = u[1].w[2] & 0xffffffffu;
	l->grid_y = u[1].w[2] >> 32 & 0xffff;
	l->grid_z = u[1].w[2] >> 48;
	l->block_x = u[1].w[3] & 0xffff;
	l->block_y = u[1].w[3] >> 16 & 0xffff;
	l->block_z = u[1].w[3] >> 32 & 0xffff;
	l->result = u[1].w[3] >> 48;
}

#endif
