/*
 * ring_codec: every record libtbprof's rings hold comes back from the
 * writer's decode as the hook filled it.  Launches whose fields all fit go
 * packed (two units), each field one past its limit goes whole (five), and
 * both read back the same; spans are one unit; records of another stream or
 * thread, or with a blob, are whole.  Exit 0 when all hold, 1 otherwise.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_codec.h"

static int failures;

#define CHECK(cond, ...)                                   \
	do {                                                   \
		if (!(cond)) {                                     \
			failures++;                                    \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                  \
			fputc('\n', stderr);                           \
		}                                                  \
	} while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static struct tbp_record launch(void)
{
	struct tbp_record r;
	memset(&r, 0, sizeof r);
	r.kind = TBP_K_LAUNCH;
	r.stream_kind = TBP_STREAM_THREAD;
	r.tid = 4242;
	r.ts = next() >> 2;
	struct tbp_launch *l = &r.u.launch;
	l->end = r.ts + (next() & 0xffffffffu);
	l->api = next() & 0xff;
	l->result = next() & 0xffff;
	l->corr = next();
	l->callpath = next() & 0xffffffffu;
	l->native = next() & 0xffffffffu;
	l->device = next() & 0xff;
	l->stream = next();
	l->name = next() & 0xffffffffu;
	l->grid_x = next() & 0xffffffffu;
	l->grid_y = next() & 0xffff;
	l->grid_z = next() & 0xffff;
	l->block_x = next() & 0xffff;
	l->block_y = next() & 0xffff;
	l->block_z = next() & 0xffff;
	l->shmem = next() & 0xffffffffu;
	return r;
}

/* Encodes r at a unit offset, decodes it and compares what the trace
 * writer reads (header, ts, the kind's fields). */
static void roundtrip(const struct tbp_record *r, unsigned want_units, const char *what)
{
	struct tbp_unit ring[8];
	memset(ring, 0xa5, sizeof ring);
	unsigned n = tbp_ring_units(r, 4242);
	CHECK(n == want_units, "%s: %u units, expected %u", what, n, want_units);
	tbp_ring_encode(ring, r, n);
	CHECK(tbp_ring_units_at(ring) == n, "%s: units_at says %llu, encoded %u", what,
	      (unsigned long long)tbp_ring_units_at(ring), n);
	struct tbp_record back;
	memset(&back, 0x5a, sizeof back);
	tbp_ring_decode(ring, n, 4242, &back);
	const struct tbp_kind_info *ki = tbp_kind_lookup(r->kind);
	unsigned nf = ki ? ki->nfields : TBP_MAX_FIELDS;
	CHECK(back.kind == r->kind && back.stream_kind == r->stream_kind && back.tid == r->tid && back.ts == r->ts &&
		      back.blob == r->blob && back.blob_len == r->blob_len,
	      "%s: header differs", what);
	for (unsigned i = 0; i < nf; i++)
		CHECK(back.u.v[i] == r->u.v[i], "%s: field %u (%s) %llu, expected %llu", what, i,
		      ki ? ki->field_names[i] : "?", (unsigned long long)back.u.v[i], (unsigned long long)r->u.v[i]);
}

/* A ring driven as libtbprof drives it (tbp_ring_put's steps, the writer's
 * walk), by one thread in a random order: records of 1, 2 and 5 units, a
 * writer that snapshots the head, lets the producer go on (and grow the
 * ring) and then reads up to the snapshot with the mask it finds then, drops
 * when full.  Every record comes back in order, every drop is counted. */
#define MODEL_MAX_UNITS 4096u
static struct tbp_unit model_units[MODEL_MAX_UNITS];

/* The writer's walk from *tail to `upto`: every record must be the next
 * one made (numbered in its ts), after the drops its LOST records count. */
static bool model_drain(int round, uint64_t mask, uint64_t *tail, uint64_t upto, uint64_t *read, uint64_t *lost_seen)
{
	while (*tail < upto) {
		const struct tbp_unit *u = &model_units[*tail & mask];
		uint64_t len = tbp_ring_units_at(u);
		CHECK(len >= 1 && len <= mask + 1, "round %d: %llu units at %llu", round, (unsigned long long)len,
		      (unsigned long long)*tail);
		if (len < 1 || len > mask + 1)
			return false;
		if (tbp_ring_is_pad(u)) {
			*tail += len;
			continue;
		}
		struct tbp_record r;
		tbp_ring_decode(u, (unsigned)len, 4242, &r);
		*tail += len;
		if (r.kind == TBP_K_LOST) {
			*lost_seen += r.u.lost.count;
			continue;
		}
		uint64_t want = *read + *lost_seen;
		CHECK(r.ts == want && r.u.v[0] == r.ts + 1 && r.u.v[1] == (r.ts & 0xff),
		      "round %d: record %llu read as ts %llu field %llu", round, (unsigned long long)want,
		      (unsigned long long)r.ts, (unsigned long long)r.u.v[0]);
		if (r.ts != want)
			return false;
		(*read)++;
	}
	return true;
}

static void ring_model(void)
{
	uint64_t total_dropped = 0, total_grew = 0;
	for (int round = 0; round < 200; round++) {
		uint64_t mask = (16u << (round % 4)) - 1, head = 0, tail = 0, lost = 0, lost_seen = 0;
		bool grow = false;
		uint64_t made = 0, read = 0, dropped = 0, grew = 0;
		uint64_t snap = 0;
		bool have_snap = false;
		for (int step = 0; step < 20000; step++) {
			if (next() % (4 + 16 * (round % 8))) {
				/* the producer: a record numbered `made` in its ts */
				struct tbp_record r;
				memset(&r, 0, sizeof r);
				r.stream_kind = TBP_STREAM_THREAD;
				r.tid = 4242;
				r.ts = made;
				unsigned pick = (unsigned)(next() % 3);
				r.kind = pick == 0 ? TBP_K_PY_SPAN : pick == 1 ? TBP_K_LAUNCH : TBP_K_MEMSET;
				r.u.v[0] = made + 1;
				r.u.v[1] = made & 0xff;
				unsigned n = tbp_ring_units(&r, 4242);
				struct tbp_ring_plan p;
				bool fits = tbp_ring_plan(head, tail, mask, grow, lost != 0, n, &p);
				if (p.grew) {
					mask = p.mask;
					grow = false;
					grew++;
				}
				made++;
				if (!fits) {
					lost++;
					dropped++;
					continue;
				}
				if (lost) {
					struct tbp_record l;
					memset(&l, 0, sizeof l);
					l.kind = TBP_K_LOST;
					l.stream_kind = TBP_STREAM_THREAD;
					l.tid = 4242;
					l.u.lost.count = lost;
					if (p.lost_at != head)
						tbp_ring_pad(&model_units[head & mask], p.lost_at - head);
					tbp_ring_encode(&model_units[p.lost_at & mask], &l, TBP_RING_FULL_UNITS);
					head = p.lost_at + TBP_RING_FULL_UNITS;
					lost = 0;
				}
				if (p.at != head)
					tbp_ring_pad(&model_units[head & mask], p.at - head);
				tbp_ring_encode(&model_units[p.at & mask], &r, n);
				head = p.at + n;
				if (head - tail > (mask + 1) / 2 && mask + 1 < MODEL_MAX_UNITS && next() % 2)
					grow = true;
			} else if (!have_snap) {
				snap = head;   /* the writer's acquire of the head */
				have_snap = true;
			} else {
				/* the writer, with the mask it reads now */
				if (!model_drain(round, mask, &tail, snap, &read, &lost_seen))
					return;
				have_snap = false;
			}
		}
		if (!model_drain(round, mask, &tail, head, &read, &lost_seen))   /* the final drain */
			return;
		CHECK(read + lost_seen + lost == made && dropped == lost_seen + lost,
		      "round %d: %llu made, %llu read, %llu dropped, %llu reported", round, (unsigned long long)made,
		      (unsigned long long)read, (unsigned long long)dropped, (unsigned long long)(lost_seen + lost));
		total_dropped += dropped;
		total_grew += grew;
	}
	printf("ring model: 200 rounds, %llu records dropped, %llu growths\n", (unsigned long long)total_dropped,
	       (unsigned long long)total_grew);
	CHECK(total_dropped > 0 && total_grew > 100, "the model should drop and grow");
}

int main(void)
{
	for (int i = 0; i < 10000; i++) {
		struct tbp_record r = launch();
		roundtrip(&r, 2, "random launch");
	}
	/* Each field's largest packed value packs; one more goes whole. */
	struct {
		const char *name;
		size_t off;
		uint64_t max;
	} lim[] = {
		{ "api", offsetof(struct tbp_launch, api), 0xff },
		{ "device", offsetof(struct tbp_launch, device), 0xff },
		{ "result", offsetof(struct tbp_launch, result), 0xffff },
		{ "callpath", offsetof(struct tbp_launch, callpath), 0xffffffffu },
		{ "native", offsetof(struct tbp_launch, native), 0xffffffffu },
		{ "name", offsetof(struct tbp_launch, name), 0xffffffffu },
		{ "shmem", offsetof(struct tbp_launch, shmem), 0xffffffffu },
		{ "grid_x", offsetof(struct tbp_launch, grid_x), 0xffffffffu },
		{ "grid_y", offsetof(struct tbp_launch, grid_y), 0xffff },
		{ "grid_z", offsetof(struct tbp_launch, grid_z), 0xffff },
		{ "block_x", offsetof(struct tbp_launch, block_x), 0xffff },
		{ "block_y", offsetof(struct tbp_launch, block_y), 0xffff },
		{ "block_z", offsetof(struct tbp_launch, block_z), 0xffff },
	};
	for (size_t k = 0; k < sizeof lim / sizeof lim[0]; k++) {
		for (uint64_t v = lim[k].max - 1; v != lim[k].max + 3; v++) {
			struct tbp_record r = launch();
			memcpy((char *)&r.u.launch + lim[k].off, &v, sizeof v);
			char what[64];
			snprintf(what, sizeof what, "%s=%llu", lim[k].name, (unsigned long long)v);
			roundtrip(&r, v <= lim[k].max ? 2 : TBP_RING_FULL_UNITS, what);
		}
		struct tbp_record r = launch();
		uint64_t all = ~0ull;
		memcpy((char *)&r.u.launch + lim[k].off, &all, sizeof all);
		roundtrip(&r, TBP_RING_FULL_UNITS, lim[k].name);
	}
	/* Duration: up to 2^32 - 1 ns packs; longer, or an end before the start, does not. */
	struct tbp_record r = launch();
	r.u.launch.end = r.ts + 0xffffffffu;
	roundtrip(&r, 2, "4.29 s launch");
	r.u.launch.end = r.ts + 0x100000000ull;
	roundtrip(&r, TBP_RING_FULL_UNITS, "longer launch");
	r.u.launch.end = r.ts - 1;
	roundtrip(&r, TBP_RING_FULL_UNITS, "end before start");
	/* Not the ring's own: whole. */
	r = launch();
	r.tid = 7;
	roundtrip(&r, TBP_RING_FULL_UNITS, "another thread's launch");
	r = launch();
	r.stream_kind = TBP_STREAM_GPU;
	roundtrip(&r, TBP_RING_FULL_UNITS, "GPU stream");
	r = launch();
	r.blob = "x";
	r.blob_len = 1;
	roundtrip(&r, TBP_RING_FULL_UNITS, "with a blob");
	/* Spans: one unit, any values. */
	for (int i = 0; i < 1000; i++) {
		memset(&r, 0, sizeof r);
		r.kind = TBP_K_PY_SPAN;
		r.stream_kind = TBP_STREAM_THREAD;
		r.tid = 4242;
		r.ts = next();
		r.u.py_span.end = next();
		r.u.py_span.callpath = next();
		roundtrip(&r, 1, "span");
	}
	/* Other kinds: whole, every field kept. */
	memset(&r, 0, sizeof r);
	r.kind = TBP_K_MEMCPY;
	r.stream_kind = TBP_STREAM_THREAD;
	r.tid = 4242;
	r.ts = next();
	for (unsigned i = 0; i < TBP_MAX_FIELDS; i++)
		r.u.v[i] = next();
	roundtrip(&r, TBP_RING_FULL_UNITS, "memcpy");
	/* Padding says its own length (the ring may have grown since). */
	struct tbp_unit pad[1];
	for (uint64_t len = 1; len < (1ull << 40); len = len * 3 + 1) {
		tbp_ring_pad(pad, len);
		CHECK(tbp_ring_units_at(pad) == len, "padding of %llu units", (unsigned long long)len);
	}
	ring_model();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		printf("ok: ring records: launches packed at every field's limit and whole past it, spans, whole records, padding\n");
	return failures ? 1 : 0;
}
