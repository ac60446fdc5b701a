/*
 * tbanalyze engine: the record merge.  Reads a trace once, streaming:
 * definitions go into the tables (an_defs.c), facts and spans straight to
 * the passes, and the timed records of every stream (host threads, GPU
 * devices) through a bounded merge that hands them to the passes
 * (an_passes.c) in one global time order.
 *
 * Records of one stream are in time order; streams interleave frame by frame,
 * and GPU activity usually reaches the file later than the host calls that
 * caused it.  Each stream gets a FIFO; the earliest head is processed once
 * every stream that is still producing has something queued, so the passes
 * see one global time order.  A stream that got nothing in the last
 * AN_STALL_FRAMES frames does not hold the others back, and the whole buffer is capped: past
 * the cap the earliest record goes out anyway (counted in reorder_forced).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
/* AVX2 packs and unpacks a queue entry's 8 fields in one register each
 * way, where the CPU has it and TBP_SIMD allows (an_read_trace asks
 * tbp_simd_level): fewer instructions a record than two SSE2 halves, the
 * same entries. */
#define MQ_AVX2 1
#include <immintrin.h>
#endif

#include "an.h"
#include "an_internal.h"
#include "an_tape.h"
#include "cmd.h"
#include "tbprof/simd.h"
#include "tr_common.h"

#define AN_REORDER_CAP (1u << 19)
/* TBANALYZE_REORDER_CAP overrides it (tests use a tiny window to exercise
 * the late-record paths on small traces). */
static size_t reorder_cap = AN_REORDER_CAP;
/* Frames of silence after which a stream stops holding the others back. */
#define AN_STALL_FRAMES 16
/* Records an_run takes from the reader per call. */
#define AN_RUN_MAX 64
/* A queue holding more records than this (640 KiB) is a backlog that the
 * cache does not hold: its slots are prefetched ahead of use. */
#define AN_COLD_QUEUE 4096

/* A queued record: 48 bytes instead of 160 (a queue holds the host's
 * records until the GPU's come, ~100 k launches on a training loop's
 * trace).  A record of 8 fields or fewer whose fields fit in 32 bits
 * (every launch and kernel; its first field, the end, as its distance
 * from ts) is its head and time as they are and its first 8 fields; any
 * other record waits whole in its queue's side ring, the entry only its
 * head and time for the merge's order, nfields MQ_SIDE and the queue's
 * index in f[0] (struct an_rec48, an_tape.h: the tape packs it as it is).
 * The head and time are where struct tbp_record has them: the merge reads
 * ts and stream_kind alike.  Unpacked into the merge's block slots when
 * the block goes to the passes (merge_emit). */
#define MQ_SIDE 0xffffu
_Static_assert(offsetof(struct an_rec48, ts) == offsetof(struct tbp_record, ts) &&
		       offsetof(struct an_rec48, stream_kind) == offsetof(struct tbp_record, stream_kind),
	       "a queue entry's head and time are a record's");

/* Asks for the record `ahead` slots after rec in a backlog larger than the
 * cache: its address taken as a number, without the ring's wrap (a
 * prefetch of memory past the ring is harmless; near the ring's end one
 * is wasted), which spares the slot's index arithmetic at every record. */
#define PREFETCH_AHEAD 48
static inline void prefetch_ahead(const struct an_rec48 *rec)
{
	__builtin_prefetch((const void *)((uintptr_t)rec + PREFETCH_AHEAD * sizeof *rec));
}

/* A queue in the merge's heap with its head's order key, so that a heap
 * step compares keys in the heap itself, not the heads in their rings. */
struct heap_ent {
	uint64_t ts;
	uint64_t tie; /* stream kind << 32 | queue index: host before GPU, then the queue made first */
};

struct mqueue {
	uint32_t key_kind, key_id;
	struct an_rec48 *ring;
	size_t cap, head, n;
	uint64_t last_frame;
	/* The records that are no compact entry, whole, in queue order (a
	 * ring: side_cap a power of two or 0). */
	struct tbp_record *side;
	size_t side_cap, side_head, side_n;
};

struct merger {
	struct vec qs; /* struct mqueue */
	struct heap_ent *heap; /* merge_drain_runs: non-empty queues, earliest head first */
	size_t heap_cap;
	struct u64map idx;
	size_t buffered;
	uint64_t frame;
	uint64_t last_key;
	size_t last_q; /* index + 1 of the queue of last_key, 0 = none */
	uint64_t last_emitted_ts;
	/* A first analysis that only finds the steps: what the passes get is
	 * recorded on the tape (NULL: none, or caught up). */
	struct an_tape *tape;
	uint64_t handed;   /* records handed to the passes so far */
	/* A block's records unpacked from their queue entries (merge_emit):
	 * blob and fields 8 to 15 zero, never written. */
	struct tbp_record slots[64];
	int catch_up_failed;
	int avx2; /* the AVX2 paths (MQ_AVX2): tbp_simd_level allows them */
};

/* The detecting analysis becomes the full one (an_catch_up): from here on
 * the records go to every pass, and nothing is recorded. */
static __attribute__((noinline)) void merge_catch_up(struct analysis *a, struct merger *m)
{
	if (an_catch_up(a, m->tape))
		m->catch_up_failed = 1;
	m->tape = NULL;
}

/* Queue entry e (no side entry) unpacked into r. */
static inline __attribute__((always_inline)) void mq_unpack(const struct an_rec48 *e, struct tbp_record *r)
{
	memcpy(r, e, 16);
#ifdef __SSE2__
	__m128i *v = (__m128i *)(void *)r->u.v, zero = _mm_setzero_si128();
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)e->f);
	__m128i y = _mm_loadu_si128((const __m128i *)(const void *)(e->f + 4));
	_mm_storeu_si128(v, _mm_unpacklo_epi32(x, zero));
	_mm_storeu_si128(v + 1, _mm_unpackhi_epi32(x, zero));
	_mm_storeu_si128(v + 2, _mm_unpacklo_epi32(y, zero));
	_mm_storeu_si128(v + 3, _mm_unpackhi_epi32(y, zero));
#else
	for (unsigned j = 0; j < 8; j++)
		r->u.v[j] = e->f[j];
#endif
	r->u.v[0] += r->ts;
}

#ifdef MQ_AVX2
/* mq_unpack, four fields a move. */
static inline __attribute__((target("avx2"))) void mq_unpack_avx2(const struct an_rec48 *e, struct tbp_record *r)
{
	memcpy(r, e, 16);
	__m256i *v = (__m256i *)(void *)r->u.v;
	__m256i lo = _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)e->f));
	__m256i hi = _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(e->f + 4)));
	_mm256_storeu_si256(v, _mm256_add_epi64(lo, _mm256_set_epi64x(0, 0, 0, (long long)e->ts)));
	_mm256_storeu_si256(v + 1, hi);
}
#endif

/* A block's entries as records (recs): unpacked into the merge's slots, a
 * side entry's record where it waits in its queue's side ring, taken off
 * it (no queue gets records while the merge drains them). */
static inline __attribute__((always_inline)) void mq_unpack_block_k(struct merger *m,
								   const struct an_rec48 *const *ents,
								   const struct tbp_record **recs, unsigned n, int avx2)
{
#ifndef MQ_AVX2
	(void)avx2;
#endif
	for (unsigned i = 0; i < n; i++) {
		const struct an_rec48 *e = ents[i];
		if (__builtin_expect(e->nfields == MQ_SIDE, 0)) {
			struct mqueue *q = VEC_AT(&m->qs, struct mqueue, e->f[0]);
			recs[i] = &q->side[q->side_head];
			q->side_head = (q->side_head + 1) & (q->side_cap - 1);
			q->side_n--;
			continue;
		}
#ifdef MQ_AVX2
		if (avx2)
			mq_unpack_avx2(e, &m->slots[i]);
		else
#endif
			mq_unpack(e, &m->slots[i]);
		recs[i] = &m->slots[i];
	}
}

#ifdef MQ_AVX2
static __attribute__((noinline, target("avx2"))) void mq_unpack_block_avx2(struct merger *m,
									   const struct an_rec48 *const *ents,
									   const struct tbp_record **recs, unsigned n)
{
	mq_unpack_block_k(m, ents, recs, n, 1);
}
#endif

/* A block to the passes, on the tape first when one records, its entries
 * unpacked into the merge's slots (a side entry: its record where it waits
 * in its queue's side ring, taken off it; no queue gets records while the
 * merge drains them).  A block the tape cannot take goes to an analysis
 * caught up first. */
static inline void merge_emit(struct analysis *a, struct merger *m, const struct an_rec48 *const *ents, unsigned n,
			      uint64_t *last_ts)
{
	const struct tbp_record *recs[64];
#ifdef MQ_AVX2
	if (m->avx2)
		mq_unpack_block_avx2(m, ents, recs, n);
	else
#endif
		mq_unpack_block_k(m, ents, recs, n, 0);
	if (__builtin_expect(m->tape != NULL, 0)) {
		an_tape_block(m->tape, ents, recs, n, *last_ts);
		if (!an_tape_ok(m->tape))
			merge_catch_up(a, m);
	}
	an_pass_block(a, recs, n, last_ts);
	if (__builtin_expect(m->tape != NULL, 0)) {
		m->handed += n;
		if (an_pass_detect_done(a, m->handed))
			merge_catch_up(a, m);
	}
}

/* A definition or a record the passes get alone, on the tape first. */
static inline void merge_single(struct analysis *a, struct merger *m, const struct tbp_record *rec)
{
	an_tape_single(m->tape, rec);
	if (!an_tape_ok(m->tape))
		merge_catch_up(a, m);
}

static struct mqueue *mq_get_slow(struct merger *m, unsigned kind, uint32_t id);

static inline struct mqueue *mq_get(struct merger *m, unsigned kind, uint32_t id)
{
	uint64_t key = ((uint64_t)kind << 32) | id;
	/* Records come chunk by chunk: the last queue is usually the one. */
	if (__builtin_expect(m->last_q && m->last_key == key, 1))
		return VEC_AT(&m->qs, struct mqueue, m->last_q - 1);
	return mq_get_slow(m, kind, id);
}

static struct mqueue *mq_get_slow(struct merger *m, unsigned kind, uint32_t id)
{
	uint64_t key = ((uint64_t)kind << 32) | id;
	uint64_t *ix = u64map_get(&m->idx, key);
	if (ix) {
		m->last_key = key;
		m->last_q = *ix + 1;
		return VEC_AT(&m->qs, struct mqueue, *ix);
	}
	if (m->heap_cap < m->qs.n + 1) {
		size_t ncap = m->heap_cap ? 2 * m->heap_cap : 8;
		struct heap_ent *nh = realloc(m->heap, ncap * sizeof *nh);
		if (!nh)
			return NULL;
		m->heap = nh;
		m->heap_cap = ncap;
	}
	struct mqueue *q = vec_push(&m->qs);
	if (!q || u64map_put(&m->idx, key, m->qs.n - 1))
		return NULL;
	q->key_kind = kind;
	q->key_id = id;
	return q;
}

/* r as a compact entry at e; 0 when it is none (more than 8 fields, or
 * one of them past 32 bits: nothing to use at e then).  Fields 8 to 15
 * are past nfields: zero, as the reader hands every record (struct
 * tbp_record), and zero again in the merge's slots. */
static inline int mq_pack(const struct tbp_record *r, struct an_rec48 *e)
{
	if (r->nfields > 8)
		return 0;
#ifdef __SSE2__
	const __m128i *v = (const __m128i *)(const void *)r->u.v;
	__m128i f0 = _mm_set_epi64x((long long)r->u.v[1], (long long)(r->u.v[0] - r->ts));
	__m128i f1 = _mm_loadu_si128(v + 1), f2 = _mm_loadu_si128(v + 2), f3 = _mm_loadu_si128(v + 3);
	__m128i hi = _mm_srli_epi64(_mm_or_si128(_mm_or_si128(f0, f1), _mm_or_si128(f2, f3)), 32);
	if (_mm_movemask_epi8(_mm_cmpeq_epi32(hi, _mm_setzero_si128())) != 0xffff)
		return 0;
	memcpy(e, r, 16);
	_mm_storeu_si128((__m128i *)(void *)e->f, _mm_castps_si128(_mm_shuffle_ps(
		_mm_castsi128_ps(f0), _mm_castsi128_ps(f1), _MM_SHUFFLE(2, 0, 2, 0))));
	_mm_storeu_si128((__m128i *)(void *)(e->f + 4), _mm_castps_si128(_mm_shuffle_ps(
		_mm_castsi128_ps(f2), _mm_castsi128_ps(f3), _MM_SHUFFLE(2, 0, 2, 0))));
#else
	uint64_t wide = r->u.v[0] - r->ts;
	for (unsigned j = 1; j < 8; j++)
		wide |= r->u.v[j];
	if (wide >> 32)
		return 0;
	memcpy(e, r, 16);
	e->f[0] = (uint32_t)(r->u.v[0] - r->ts);
	for (unsigned j = 1; j < 8; j++)
		e->f[j] = (uint32_t)r->u.v[j];
#endif
	return 1;
}

#ifdef MQ_AVX2
/* mq_pack with the 8 fields in two registers. */
static inline __attribute__((target("avx2"))) int mq_pack_avx2(const struct tbp_record *r, struct an_rec48 *e)
{
	if (r->nfields > 8)
		return 0;
	const __m256i *v = (const __m256i *)(const void *)r->u.v;
	__m256i a = _mm256_sub_epi64(_mm256_loadu_si256(v), _mm256_set_epi64x(0, 0, 0, (long long)r->ts));
	__m256i b = _mm256_loadu_si256(v + 1);
	if (!_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_set1_epi64x((long long)0xffffffff00000000ull)))
		return 0;
	memcpy(e, r, 16);
	/* The low halves: f0 f1 f4 f5 | f2 f3 f6 f7, then in order. */
	__m256 low = _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _MM_SHUFFLE(2, 0, 2, 0));
	_mm256_storeu_si256((__m256i *)(void *)e->f,
			    _mm256_permute4x64_epi64(_mm256_castps_si256(low), _MM_SHUFFLE(3, 1, 2, 0)));
	return 1;
}
#endif

/* q's side ring grown (twice as large, at least 64). */
static __attribute__((noinline)) int mq_side_grow(struct mqueue *q)
{
	size_t ncap = q->side_cap ? q->side_cap * 2 : 64;
	struct tbp_record *ns = realloc(q->side, ncap * sizeof *ns);
	if (!ns)
		return -1;
	/* The wrapped part [0, head) moves past the old end. */
	if (q->side_head)
		memcpy(ns + q->side_cap, ns, q->side_head * sizeof *ns);
	q->side = ns;
	q->side_cap = ncap;
	return 0;
}

/* r (queue qi's) waits whole in q's side ring, its entry e says so. */
static inline int mq_push_side(struct mqueue *q, uint32_t qi, const struct tbp_record *r, struct an_rec48 *e)
{
	if (__builtin_expect(q->side_n == q->side_cap, 0) && mq_side_grow(q))
		return -1;
	struct tbp_record *slot = &q->side[(q->side_head + q->side_n) & (q->side_cap - 1)];
	*slot = *r;
	slot->blob = NULL;
	slot->blob_len = 0;
	q->side_n++;
	memcpy(e, r, 16);
	e->nfields = MQ_SIDE;
	e->f[0] = qi;
	return 0;
}

/* Room in q for k more records. */
static int mq_reserve(struct mqueue *q, size_t k)
{
	while (q->cap - q->n < k) {
		/* A mapping of its own (huge pages) grown by mremap: the records
		 * already written keep their pages (no copy, no new faults); the
		 * wrapped part [0, head) moves past the old end. */
		size_t ncap = q->cap ? q->cap * 2 : 256;
		struct an_rec48 *nr = q->ring ? an_mem_remap(q->ring, q->cap * sizeof *nr, ncap * sizeof *nr)
					    : an_mem_map(ncap * sizeof *nr);
		if (!nr)
			return -1;
		if (q->head)
			memcpy(nr + q->cap, nr, q->head * sizeof *nr);
		q->ring = nr;
		q->cap = ncap;
	}
	return 0;
}


/* Two queues (one host thread and one device, the usual case), both with
 * records: no queue is empty, so none blocks, and merge_drain_runs would
 * emit the earlier head's run and take a heap step again; host and GPU
 * records alternate, so runs are a record or two.  This emits the same
 * records in the same order, one comparison per record, until a queue runs
 * empty.  Ties: the queue whose run it is keeps going (a run breaks only on
 * a head of the other queue that is strictly earlier, host before GPU at
 * equal times); the first pick prefers the first queue. */
static inline __attribute__((always_inline)) void merge_two_k(struct analysis *a, struct merger *m, int cold);

/* One queue of merge_two or merge_three as the loops start and end with it:
 * its head and the end of the records queued after it without the ring's
 * wrap (a take moves one pointer on and compares it with one end), the
 * records queued past that end (from the ring's start), the head's time
 * and stream kind, and its place in merge_small's ix (the tie after time
 * and kind). */
struct mq_reg {
	const struct an_rec48 *p, *seg_end, *ring;
	size_t rest;
	uint64_t ts;
	unsigned kind, i;
};

/* Queue mq (not empty) as an mq_reg. */
static inline struct mq_reg mq_reg_load(const struct mqueue *mq, unsigned i)
{
	struct mq_reg x = {.p = mq->ring + mq->head, .ring = mq->ring, .i = i};
	size_t to_end = mq->cap - mq->head;
	if (mq->n <= to_end) {
		x.seg_end = x.p + mq->n;
		x.rest = 0;
	} else {
		x.seg_end = mq->ring + mq->cap;
		x.rest = mq->n - to_end;
	}
	x.ts = x.p->ts;
	x.kind = x.p->stream_kind;
	return x;
}

/* The queue's head and count back from x. */
static inline void mq_reg_store(const struct mq_reg *x, struct mqueue *mq)
{
	mq->head = (size_t)(x->p - x->ring) & (mq->cap - 1);
	mq->n = (size_t)(x->seg_end - x->p) + x->rest;
}

/* x's head before y's: time, stream kind, then the place in ix. */
static inline int mq_reg_before(const struct mq_reg *x, const struct mq_reg *y)
{
	return x->ts < y->ts || (x->ts == y->ts && (x->kind < y->kind || (x->kind == y->kind && x->i < y->i)));
}

static void merge_two(struct analysis *a, struct merger *m)
{
	const struct mqueue *q0 = VEC_AT(&m->qs, struct mqueue, 0), *q1 = VEC_AT(&m->qs, struct mqueue, 1);
	if (!q0->n || !q1->n)
		return;
	/* A copy of the loop for backlogs larger than the cache, which
	 * prefetches the records ahead of the heads. */
	if (q0->n > AN_COLD_QUEUE || q1->n > AN_COLD_QUEUE)
		merge_two_k(a, m, 1);
	else
		merge_two_k(a, m, 0);
}

static inline __attribute__((always_inline)) void merge_two_k(struct analysis *a, struct merger *m, int cold)
{
	struct mqueue *q0 = VEC_AT(&m->qs, struct mqueue, 0), *q1 = VEC_AT(&m->qs, struct mqueue, 1);
	/* The order is worked out a block at a time with no call in the loop
	 * (everything stays in registers), then the block goes to the passes:
	 * host and GPU records alternate, so runs are a record or two long.
	 * Each queue's head, end and head's time in scalars of their own (an
	 * mq_reg chosen by a flag went through the stack), one loop a queue;
	 * its ring and the records past the wrap stay in x0 and x1 (a wrap
	 * needs them).  A head's stream kind is read on equal times only. */
	struct mq_reg x0 = mq_reg_load(q0, 0), x1 = mq_reg_load(q1, 1);
	const struct an_rec48 *p0 = x0.p, *e0 = x0.seg_end, *p1 = x1.p, *e1 = x1.seg_end;
	uint64_t t0 = x0.ts, t1 = x1.ts;
	int c = t1 < t0 || (t1 == t0 && x1.kind < x0.kind);
	uint64_t last_ts = m->last_emitted_ts;
	const struct an_rec48 *block[64];
	const struct an_rec48 **const bend = block + 64;
	int more = 1;
	while (more) {
		const struct an_rec48 **b = block;
		if (c)
			goto take1;
	take0:
		for (;;) {
			const struct an_rec48 *t = p0;
			*b++ = t;
			if (__builtin_expect(++p0 == e0, 0)) {
				if (!x0.rest) {
					more = 0;
					goto emit;
				}
				/* The ring's wrap: the rest lies from its start. */
				p0 = x0.ring;
				e0 = p0 + x0.rest;
				x0.rest = 0;
			}
			if (cold)
				prefetch_ahead(t);
			t0 = p0->ts;
			/* Switch queues only on a head strictly before the current one. */
			if (t1 < t0 || (t1 == t0 && p1->stream_kind < p0->stream_kind))
				break;
			if (__builtin_expect(b == bend, 0)) {
				c = 0;
				goto emit;
			}
		}
		c = 1;
		if (b == bend)
			goto emit;
	take1:
		for (;;) {
			const struct an_rec48 *t = p1;
			*b++ = t;
			if (__builtin_expect(++p1 == e1, 0)) {
				if (!x1.rest) {
					more = 0;
					goto emit;
				}
				p1 = x1.ring;
				e1 = p1 + x1.rest;
				x1.rest = 0;
			}
			if (cold)
				prefetch_ahead(t);
			t1 = p1->ts;
			if (t0 < t1 || (t0 == t1 && p0->stream_kind < p1->stream_kind))
				break;
			if (__builtin_expect(b == bend, 0)) {
				c = 1;
				goto emit;
			}
		}
		c = 0;
		if (b != bend)
			goto take0;
	emit:
		merge_emit(a, m, block, (unsigned)(b - block), &last_ts);
		m->buffered -= (size_t)(b - block);
	}
	x0.p = p0, x0.seg_end = e0;
	x1.p = p1, x1.seg_end = e1;
	mq_reg_store(&x0, q0);
	mq_reg_store(&x1, q1);
	m->last_emitted_ts = last_ts;
}

/* Moves a queue's records to the front of its ring.  The rings grow to
 * hold the first frames (nothing is released before AN_STALL_FRAMES) and
 * are much larger than the cache later; a head that kept moving round the
 * whole ring would make every record a cache miss on the way in and out,
 * while records restarting at slot 0 keep the live part about a frame
 * long.  Only when at most an eighth as many records are left as were
 * taken out since the last move (head counts them): a record taken pays for
 * at most an eighth of one moved, and a backlog (GPU activity frames late,
 * or drained a record at a time past the reorder cap) is not moved at all:
 * it is larger than the cache anyway. */
static void mq_compact(struct mqueue *q)
{
	if (!q->head || q->n > q->head / 8)
		return;
	if (q->head + q->n <= q->cap) {
		memmove(q->ring, q->ring + q->head, q->n * sizeof *q->ring);
	} else {
		/* Wrapped: [head, cap) then [0, rest), rest < n < head: the
		 * rest moves up behind the first part, which then goes to the
		 * front without overlapping it. */
		size_t first = q->cap - q->head, rest = q->n - first;
		memmove(q->ring + first, q->ring, rest * sizeof *q->ring);
		memcpy(q->ring, q->ring + q->head, first * sizeof *q->ring);
	}
	q->head = 0;
}

static void merge_drain_runs(struct analysis *a, struct merger *m, int final);

/* Emit records in time order while allowed (or everything when final). */
static void merge_drain(struct analysis *a, struct merger *m, int final)
{
	merge_drain_runs(a, m, final);
	for (size_t i = 0; i < m->qs.n; i++)
		mq_compact(VEC_AT(&m->qs, struct mqueue, i));
}

/* Queue i's head comes before queue j's: earlier time, then host records
 * (markers, API calls) before GPU activity, then the queue made first. */
static inline int heap_before(const struct heap_ent *x, const struct heap_ent *y)
{
	return x->ts != y->ts ? x->ts < y->ts : x->tie < y->tie;
}

static inline struct heap_ent heap_key(const struct merger *m, size_t i)
{
	const struct mqueue *q = VEC_AT(&m->qs, struct mqueue, i);
	const struct an_rec48 *h = &q->ring[q->head];
	return (struct heap_ent){.ts = h->ts, .tie = (uint64_t)h->stream_kind << 32 | i};
}

static inline size_t heap_queue(const struct heap_ent *e)
{
	return (size_t)(uint32_t)e->tie;
}

static void heap_sift_down(struct heap_ent *heap, size_t n, size_t at)
{
	for (;;) {
		size_t l = 2 * at + 1, r = l + 1, min = at;
		if (l < n && heap_before(&heap[l], &heap[min]))
			min = l;
		if (r < n && heap_before(&heap[r], &heap[min]))
			min = r;
		if (min == at)
			return;
		struct heap_ent t = heap[at];
		heap[at] = heap[min];
		heap[min] = t;
		at = min;
	}
}

/* An empty queue holds the others back: a device stream always (GPU
 * activity lags by nature, CUPTI delivers whole buffers), a host thread
 * only while it was active in the last AN_STALL_FRAMES frames. */
static inline int mq_blocks(const struct merger *m, const struct mqueue *q)
{
	return q->key_kind == TBP_STREAM_GPU || q->last_frame + AN_STALL_FRAMES > m->frame;
}

#define MERGE_BLOCK 64
/* Streams handled by merge_small's loop; more take the heap. */
#define MERGE_SMALL_MAX 8

/* Three to MERGE_SMALL_MAX queues, all with records (so none blocks): the
 * same records in the same order as the heap loop below, without its heap
 * steps.  The heap loop emits from the earliest head (time, stream kind,
 * queue index) while its next record is not strictly after (time, stream
 * kind) the earliest of the other heads, then picks that one: here the
 * earliest of the other heads is kept aside and found again, over the
 * others, only when the run switches queue (runs are a record or two when
 * threads and devices alternate).  Returns when a queue runs empty; the
 * heap loop goes on from there. */
/* merge_small's loop for three queues (a host thread, autograd's thread, a
 * device: a training step's usual streams), the same records in the same
 * order.  Two of them alternate for long stretches (the forward's thread
 * and the device, then autograd's and the device), the third's head far
 * later: P and Q are the two, c says which is the current one (the other
 * is the run's limit, as in merge_two), and R is the third.  A run that
 * ends where the third is earlier than the queue just left (merge_small's
 * next limit) changes the pair. */
/* Head x (place xi in merge_small's ix) before head y (yi): mq_reg_before. */
static inline int mq_head_before(const struct an_rec48 *x, unsigned xi, const struct an_rec48 *y, unsigned yi)
{
	return x->ts < y->ts ||
	       (x->ts == y->ts && (x->stream_kind < y->stream_kind || (x->stream_kind == y->stream_kind && xi < yi)));
}

static inline __attribute__((always_inline)) void merge_three_k(struct analysis *a, struct merger *m,
								const uint32_t *ix, int cold)
{
	/* Each queue's ring and records past the wrap stay in q (a wrap needs
	 * them, once a ring's turn); the loop keeps P's, Q's and R's head, end,
	 * time and place in q in scalars of their own, which the compiler
	 * holds in registers (whole mq_regs swapped on a pair's change went
	 * through the stack, a dozen loads and stores a record).  A head's
	 * stream kind is read where it decides, on equal times only. */
	struct mq_reg q[3];
	for (unsigned i = 0; i < 3; i++)
		q[i] = mq_reg_load(VEC_AT(&m->qs, struct mqueue, ix[i]), i);
	/* The current queue: the earliest; its limit: the earlier of the others. */
	unsigned cu = mq_reg_before(&q[1], &q[0]) ? 1 : 0;
	cu = mq_reg_before(&q[2], &q[cu]) ? 2 : cu;
	unsigned o1 = cu == 0 ? 1 : 0, o2 = cu == 2 ? 1 : 2;
	unsigned nx = mq_reg_before(&q[o2], &q[o1]) ? o2 : o1;
	unsigned pi = cu, qi = nx, ri = 3 - cu - nx;
	const struct an_rec48 *pp = q[pi].p, *pe = q[pi].seg_end, *qp = q[qi].p, *qe = q[qi].seg_end;
	const struct an_rec48 *rp = q[ri].p, *re = q[ri].seg_end;
	uint64_t pts = q[pi].ts, qts = q[qi].ts, rts = q[ri].ts;
	int c = 0; /* 0: P current, Q the limit; 1: the other way */
	uint64_t last_ts = m->last_emitted_ts;
	const struct an_rec48 *block[MERGE_BLOCK];
	const struct an_rec48 **const bend = block + MERGE_BLOCK;
	size_t emitted = 0;
	int more = 1;
	while (more) {
		const struct an_rec48 **b = block;
		if (c)
			goto take_q;
	take_p:
		for (;;) {
			const struct an_rec48 *t = pp;
			*b++ = t;
			if (__builtin_expect(++pp == pe, 0)) {
				if (!q[pi].rest) {
					more = 0;
					goto emit;
				}
				/* The ring's wrap: the rest lies from its start. */
				pp = q[pi].ring;
				pe = pp + q[pi].rest;
				q[pi].rest = 0;
			}
			if (cold)
				prefetch_ahead(t);
			pts = pp->ts;
			if (pts > qts || (pts == qts && pp->stream_kind > qp->stream_kind))
				break;
			if (__builtin_expect(b == bend, 0)) {
				c = 0;
				goto emit;
			}
		}
		/* The run ends: Q goes on; its limit is R or P (R's head is
		 * mostly far later: one comparison). */
		if (__builtin_expect(rts <= pts, 0) && mq_head_before(rp, ri, pp, pi)) {
			/* P (the old Q) current, R (the old P) the third. */
			const struct an_rec48 *sp = pp, *se = pe;
			uint64_t st = pts;
			unsigned si = pi;
			pp = qp, pe = qe, pts = qts, pi = qi;
			qp = rp, qe = re, qts = rts, qi = ri;
			rp = sp, re = se, rts = st, ri = si;
			c = 0;
			if (b == bend)
				goto emit;
			goto take_p;
		}
		c = 1;
		if (b == bend)
			goto emit;
	take_q:
		for (;;) {
			const struct an_rec48 *t = qp;
			*b++ = t;
			if (__builtin_expect(++qp == qe, 0)) {
				if (!q[qi].rest) {
					more = 0;
					goto emit;
				}
				qp = q[qi].ring;
				qe = qp + q[qi].rest;
				q[qi].rest = 0;
			}
			if (cold)
				prefetch_ahead(t);
			qts = qp->ts;
			if (qts > pts || (qts == pts && qp->stream_kind > pp->stream_kind))
				break;
			if (__builtin_expect(b == bend, 0)) {
				c = 1;
				goto emit;
			}
		}
		c = 0;
		if (__builtin_expect(rts <= qts, 0) && mq_head_before(rp, ri, qp, qi)) {
			/* P current, R (now Q) its limit. */
			const struct an_rec48 *sp = qp, *se = qe;
			uint64_t st = qts;
			unsigned si = qi;
			qp = rp, qe = re, qts = rts, qi = ri;
			rp = sp, re = se, rts = st, ri = si;
		}
		if (b != bend)
			goto take_p;
	emit:
		merge_emit(a, m, block, (unsigned)(b - block), &last_ts);
		emitted += (size_t)(b - block);
	}
	q[pi].p = pp, q[pi].seg_end = pe;
	q[qi].p = qp, q[qi].seg_end = qe;
	q[ri].p = rp, q[ri].seg_end = re;
	for (unsigned i = 0; i < 3; i++)
		mq_reg_store(&q[i], VEC_AT(&m->qs, struct mqueue, ix[i]));
	m->buffered -= emitted;
	m->last_emitted_ts = last_ts;
}

static __attribute__((noinline)) void merge_three(struct analysis *a, struct merger *m, const uint32_t *ix)
{
	int cold = 0;
	for (unsigned i = 0; i < 3; i++)
		cold |= VEC_AT(&m->qs, struct mqueue, ix[i])->n > AN_COLD_QUEUE;
	if (cold)
		merge_three_k(a, m, ix, 1);
	else
		merge_three_k(a, m, ix, 0);
}

static void merge_small(struct analysis *a, struct merger *m, const uint32_t *ix, unsigned k)
{
	if (k == 3) {
		merge_three(a, m, ix);
		return;
	}
	const struct an_rec48 *ring[MERGE_SMALL_MAX];
	size_t mask[MERGE_SMALL_MAX], head[MERGE_SMALL_MAX], left[MERGE_SMALL_MAX];
	uint64_t ts[MERGE_SMALL_MAX];
	unsigned kind[MERGE_SMALL_MAX];
	int cold = 0;
	for (unsigned i = 0; i < k; i++) {
		const struct mqueue *q = VEC_AT(&m->qs, struct mqueue, ix[i]);
		ring[i] = q->ring;
		mask[i] = q->cap - 1;
		head[i] = q->head;
		left[i] = q->n;
		ts[i] = q->ring[q->head].ts;
		kind[i] = q->ring[q->head].stream_kind;
		cold |= q->n > AN_COLD_QUEUE;
	}
	/* ix is in queue order: on a tie of time and kind the lower i wins,
	 * as the heap's queue index does. */
	unsigned cur = 0;
	for (unsigned i = 1; i < k; i++)
		if (ts[i] < ts[cur] || (ts[i] == ts[cur] && kind[i] < kind[cur]))
			cur = i;
	unsigned nxt = UINT32_MAX;
	for (unsigned i = 0; i < k; i++)
		if (i != cur && (nxt == UINT32_MAX || ts[i] < ts[nxt] || (ts[i] == ts[nxt] && kind[i] < kind[nxt])))
			nxt = i;
	uint64_t last_ts = m->last_emitted_ts;
	const struct an_rec48 *block[MERGE_BLOCK];
	size_t emitted = 0;
	int more = 1;
	while (more) {
		unsigned nb = 0;
		while (nb < MERGE_BLOCK) {
			const struct an_rec48 *rc = ring[cur];
			size_t h = head[cur];
			block[nb++] = &rc[h];
			h = (h + 1) & mask[cur];
			head[cur] = h;
			if (!--left[cur]) {
				more = 0;
				break;
			}
			if (cold)
				prefetch_ahead(block[nb - 1]);
			uint64_t t = rc[h].ts;
			unsigned s = rc[h].stream_kind;
			ts[cur] = t;
			kind[cur] = s;
			if (t > ts[nxt] || (t == ts[nxt] && s > kind[nxt])) {
				/* The run ends: the earliest other head goes on, and
				 * the earliest of the rest (this queue among them)
				 * is the next limit. */
				unsigned was = cur;
				cur = nxt;
				nxt = was;
				if (k == 3) {
					/* The usual case (a host thread, autograd's,
					 * a device): one other queue to weigh. */
					unsigned o = 3 - cur - was;
					if (ts[o] < ts[was] ||
					    (ts[o] == ts[was] && (kind[o] < kind[was] || (kind[o] == kind[was] && o < was))))
						nxt = o;
					continue;
				}
				for (unsigned i = 0; i < k; i++)
					if (i != cur && i != nxt &&
					    (ts[i] < ts[nxt] || (ts[i] == ts[nxt] && (kind[i] < kind[nxt] ||
										    (kind[i] == kind[nxt] && i < nxt)))))
						nxt = i;
			}
		}
		merge_emit(a, m, block, nb, &last_ts);
		emitted += nb;
	}
	for (unsigned i = 0; i < k; i++) {
		struct mqueue *q = VEC_AT(&m->qs, struct mqueue, ix[i]);
		q->head = head[i];
		q->n = left[i];
	}
	m->buffered -= emitted;
	m->last_emitted_ts = last_ts;
}

static void merge_drain_runs(struct analysis *a, struct merger *m, int final)
{
	/* Streams are only known once they show up: give the late starters
	 * (GPU activity, other threads) a few frames to appear first. */
	if (!final && m->frame < AN_STALL_FRAMES && m->buffered <= reorder_cap)
		return;
	if (m->qs.n == 2) {
		merge_two(a, m);
	} else if (m->qs.n <= MERGE_SMALL_MAX) {
		/* Until a queue that blocks runs empty (final: any), or fewer
		 * than two have records. */
		for (;;) {
			uint32_t ix[MERGE_SMALL_MAX];
			unsigned k = 0;
			int stop = 0;
			for (size_t i = 0; i < m->qs.n; i++) {
				const struct mqueue *q = VEC_AT(&m->qs, struct mqueue, i);
				if (q->n)
					ix[k++] = (uint32_t)i;
				else if (!final && mq_blocks(m, q))
					stop = 1;
			}
			if (stop || k < 2)
				break;
			merge_small(a, m, ix, k);
		}
	}
	/* The queues with records in a heap by their heads (no queue gets
	 * records during a drain); an empty queue that blocks stays so. */
	struct heap_ent *heap = m->heap;
	size_t hn = 0;
	int blocked = 0;
	for (size_t i = 0; i < m->qs.n; i++) {
		const struct mqueue *q = VEC_AT(&m->qs, struct mqueue, i);
		if (q->n)
			heap[hn++] = heap_key(m, i);
		else if (mq_blocks(m, q))
			blocked = 1;
	}
	for (size_t i = hn / 2; i-- > 0;)
		heap_sift_down(heap, hn, i);
	/* The records go to the passes a block at a time (runs are a record
	 * or two when host threads and devices alternate); they stay in their
	 * rings until the drain returns: no queue gets records during it. */
	const struct an_rec48 *block[MERGE_BLOCK];
	unsigned nblock = 0;
	while (hn) {
		if (blocked && !final) {
			if (m->buffered <= reorder_cap)
				break;
			a->reorder_forced++;
		}
		/* Emit from the earliest queue as long as it stays ahead of every
		 * other head (the earlier of the heap's second level): one heap
		 * step per run of records.  Past the cap with a stream blocking,
		 * only down to the cap. */
		struct mqueue *best = VEC_AT(&m->qs, struct mqueue, heap_queue(&heap[0]));
		uint64_t lim_ts = UINT64_MAX;
		unsigned lim_kind = 255;
		if (hn > 1) {
			const struct heap_ent *sx = hn > 2 && heap_before(&heap[2], &heap[1]) ? &heap[2] : &heap[1];
			lim_ts = sx->ts;
			lim_kind = (unsigned)(sx->tie >> 32);
		}
		size_t take = best->n;
		if (!final && blocked && m->buffered - reorder_cap < take)
			take = m->buffered - reorder_cap;
		struct an_rec48 *ring = best->ring;
		size_t mask = best->cap - 1, head = best->head, done = 0;
		for (;;) {
			block[nblock++] = &ring[head];
			if (nblock == MERGE_BLOCK) {
				merge_emit(a, m, block, nblock, &m->last_emitted_ts);
				nblock = 0;
			}
			head = (head + 1) & mask;
			if (++done == take)
				break;
			const struct an_rec48 *r = &ring[head];
			if (r->ts > lim_ts || (r->ts == lim_ts && r->stream_kind > lim_kind))
				break;
		}
		best->head = head;
		best->n -= done;
		m->buffered -= done;
		if (!best->n) {
			if (mq_blocks(m, best))
				blocked = 1;
			heap[0] = heap[--hn];
		} else {
			heap[0] = heap_key(m, heap_queue(&heap[0]));
		}
		heap_sift_down(heap, hn, 0);
	}
	if (nblock)
		merge_emit(a, m, block, nblock, &m->last_emitted_ts);
}

static void merge_free(struct merger *m)
{
	free(m->heap);
	for (size_t i = 0; i < m->qs.n; i++) {
		struct mqueue *q = VEC_AT(&m->qs, struct mqueue, i);
		an_mem_unmap(q->ring, q->cap * sizeof *q->ring);
		free(q->side);
	}
	vec_free(&m->qs);
	u64map_free(&m->idx);
}

/* What the merge does with a record of each kind. */
enum { AN_KC_PASS, AN_KC_DEF, AN_KC_TIMED };
static uint8_t kind_class[256];

int an_is_timed_record(unsigned kind)
{
	return (kind >= TBP_K_API && kind <= TBP_K_SYNC) || (kind >= TBP_K_GPU_KERNEL && kind <= TBP_K_GPU_SYNC) ||
	       kind == TBP_K_MARKER;
}

int an_is_def_record(unsigned kind)
{
	return kind == TBP_K_STRING || kind == TBP_K_PYFRAME || kind == TBP_K_CALLPATH || kind == TBP_K_NATIVE ||
	       kind == TBP_K_MODULE || kind == TBP_K_PY_LIB;
}

static void merge_setup(void)
{
	const char *cap = getenv("TBANALYZE_REORDER_CAP");
	if (cap && atol(cap) > 0)
		reorder_cap = (size_t)atol(cap);
	for (unsigned k = 0; k < 256; k++)
		kind_class[k] = an_is_def_record(k) ? AN_KC_DEF : an_is_timed_record(k) ? AN_KC_TIMED : AN_KC_PASS;
}

/* Reads the whole trace, definitions into the tables, timed records through
 * the merge into the passes in time order, the others straight to them.
 * Closes the reader.  avx2: the queues' packing with AVX2 (a constant
 * where inlined). */
static inline __attribute__((always_inline)) int read_trace_k(struct analysis *a, struct tbp_reader *r,
							      const char *path, struct an_tape *tape, int avx2)
{
	merge_setup();
	struct merger m = {.qs = {.item = sizeof(struct mqueue)}, .tape = tape, .avx2 = avx2};
	/* A CUPTI trace will have GPU activity, possibly all of it handed over
	 * late: let device 0's queue hold the host records back from the start
	 * (bounded by the cap) instead of only once it shows up. */
	if ((a->header.features & TBP_FEAT_CUPTI) && !mq_get(&m, TBP_STREAM_GPU, 0))
		goto nomem;
	uint64_t last_off = tbp_reader_offset(r);
	/* Records come a run at a time (tbp_reader_next_many: one chunk, so
	 * one stream), decoded into `run` (which the cache holds) and packed
	 * from there into their queue (mq_push); records that are not queued
	 * (definitions, spans) are handled in place. */
	struct tbp_record run[AN_RUN_MAX];
	int st;
	for (;;) {
		/* Past the cap every queued record drains the merge: a run ends
		 * with the record that crosses it. */
		unsigned max = AN_RUN_MAX;
		size_t to_cap = m.buffered <= reorder_cap ? reorder_cap - m.buffered + 1 : 1;
		if (to_cap < max)
			max = (unsigned)to_cap;
		unsigned n;
		if ((st = tr_next_many(r, path, run, max, &n)) <= 0)
			break;
		a->records += n;
		uint64_t off = tbp_reader_offset(r);
		if (off != last_off) {
			/* A new frame: let streams that kept up release records. */
			m.frame++;
			last_off = off;
			if (m.catch_up_failed)
				goto nomem;
			merge_drain(a, &m, 0);
		}
		/* The run's queue, with room for the run reserved: its next entry
		 * w, and the ring's end, where w goes back to its start. */
		struct mqueue *q = NULL;
		struct an_rec48 *w = NULL, *wend = NULL;
		uint32_t qi = 0;
		unsigned defs = 0, timed = 0;
		const struct tbp_record *rec = run, *const run_end = run + n;
		while (rec != run_end) {
			unsigned cls = kind_class[rec->kind];
			if (__builtin_expect(cls == AN_KC_TIMED, 1)) {
				if (!q) {
					/* One chunk: every record of the run has the same queue. */
					if (!(q = mq_get(&m, rec->stream_kind, rec->tid)))
						goto nomem;
					qi = (uint32_t)(q - VEC_AT(&m.qs, struct mqueue, 0));
					q->last_frame = m.frame;
					if (mq_reserve(q, (size_t)(run_end - rec)))
						goto nomem;
					w = &q->ring[(q->head + q->n) & (q->cap - 1)];
					wend = q->ring + q->cap;
				}
				/* A stretch of timed records up to the run's end or to
				 * the ring's, whichever comes first: one end test a
				 * record for both. */
				const struct tbp_record *from = rec, *end = run_end;
				if ((size_t)(wend - w) < (size_t)(run_end - rec))
					end = rec + (wend - w);
				do {
					int packed;
#ifdef MQ_AVX2
					if (avx2)
						packed = mq_pack_avx2(rec, w);
					else
#endif
						packed = mq_pack(rec, w);
					if (__builtin_expect(!packed, 0) && mq_push_side(q, qi, rec, w))
						goto nomem;
					w++;
				} while (++rec != end && kind_class[rec->kind] == AN_KC_TIMED);
				timed += (unsigned)(rec - from);
				if (__builtin_expect(w == wend, 0))
					w = q->ring;
				continue;
			}
			if (cls == AN_KC_DEF) {
				defs++;
				if (m.tape)
					merge_single(a, &m, rec);
				if (defs_add(a->defs, rec))
					goto nomem;
			} else {
				if (m.tape)
					merge_single(a, &m, rec);
				an_pass_record(a, rec); /* facts and spans: order-free */
			}
			rec++;
		}
		if (q)
			q->n += timed;
		/* Only a run of timed records alone can reach past the cap (see
		 * max), with its last record: as draining right after it. */
		m.buffered += timed;
		if (m.buffered > reorder_cap)
			merge_drain(a, &m, 0);
		a->events += n - defs;
	}
	if (st < 0) {
		int rc = tr_exit_status(r);
		merge_free(&m);
		tbp_reader_close(r);
		return rc;
	}
	if (tbp_reader_truncated(r)) {
		a->truncated = 1;
		a->truncated_at = tbp_reader_offset(r);
	}
	merge_drain(a, &m, 1);
	merge_free(&m);
	tbp_reader_close(r);
	if (m.catch_up_failed)
		return TBA_EXIT_INTERNAL; /* (printed) */
	if (m.tape)
		an_tape_close(m.tape, a);
	return TBA_EXIT_OK;
nomem:
	merge_free(&m);
	tbp_reader_close(r);
	fprintf(stderr, "tbanalyze: %s: out of memory\n", path);
	return TBA_EXIT_INTERNAL;
}

static int read_trace_plain(struct analysis *a, struct tbp_reader *r, const char *path, struct an_tape *tape)
{
	return read_trace_k(a, r, path, tape, 0);
}

#ifdef MQ_AVX2
static __attribute__((target("avx2"))) int read_trace_avx2(struct analysis *a, struct tbp_reader *r,
							   const char *path, struct an_tape *tape)
{
	return read_trace_k(a, r, path, tape, 1);
}
#endif

int an_read_trace(struct analysis *a, struct tbp_reader *r, const char *path, struct an_tape *tape)
{
#ifdef MQ_AVX2
	if (tbp_simd_level() >= TBP_SIMD_AVX2)
		return read_trace_avx2(a, r, path, tape);
#endif
	return read_trace_plain(a, r, path, tape);
}
