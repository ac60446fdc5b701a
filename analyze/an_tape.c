/*
 * tbanalyze: the record tape (an_tape.h).  A record is 160 bytes in memory;
 * on the tape it is its head and time (16 bytes) and only the fields its
 * kind has in this trace (nfields: the reader leaves the others zero), in
 * 32 bits each when they fit (nearly every call and GPU record), and a
 * string's bytes after it, in chunks of a few MiB (no allocation per
 * record).  A block the merge handed over is one entry ahead of its
 * records, with the last_ts it was handed and which of its records are
 * compact: a launch or kernel (8 fields or fewer, each in 32 bits) as the
 * index of its head in the tape's table of heads, its time as the distance
 * from the block's record before it, and only the fields that differ from
 * their prediction, the last compact record's of the same head plus the
 * step it took there (~12 bytes instead of 48: a launch differs from the
 * one before it on its thread in its end and often its call path; its
 * correlation id counts up).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "an_internal.h"
#include "an_tape.h"
#include "tbprof/simd.h"

#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
/* SSSE3's byte shuffle (pshufb) moves a compact entry's changed fields in
 * and out of place, four at a time, where the CPU has it and TBP_SIMD
 * allows (an_tape_new asks tbp_simd_level); else one field at a time.  The entries are the same bytes either
 * way. */
#define TAPE_SSSE3 1
#include <tmmintrin.h>
/* AVX2's 8-lane permute (vpermd) moves all 8 fields at once, a table row
 * (8 bytes, widened as loaded) per mask of changed fields: fewer
 * instructions a record than two pshufb halves, where the CPU has AVX2 and
 * popcnt and TBP_SIMD allows (an_tape_new asks).  The same bytes again. */
#define TAPE_AVX2 1
#include <immintrin.h>
#endif

/* Default cap, MiB: the 1 M-record simtorch trace takes about 12. */
#define TAPE_MB_DEFAULT 256
/* A chunk with its header and slack is 8 MiB, a mapping the kernel places
 * on a huge-page boundary: every page of it a huge one (an_mem_map; pages
 * given back earlier when there are: an_mem_get). */
#define TAPE_CHUNK ((8u << 20) - sizeof(struct tape_chunk) - TAPE_REC_MAX)
/* The largest record entry without a blob (head, ts, every field). */
#define TAPE_REC_MAX (16u + 8u * TBP_MAX_FIELDS)
/* An entry kind that is no record kind (kinds are < TBP_K__MAX): a block. */
#define TAPE_OP_BLOCK 0xffu
/* Blocks of the merge are at most this many records (an_merge.c). */
#define TAPE_BLOCK_MAX 64

struct tape_chunk {
	struct tape_chunk *next;
	size_t used, cap;
	/* cap bytes, then TAPE_REC_MAX of slack: a record is written and read
	 * with fixed-size copies that may run past its own end. */
	uint64_t data[];
};

/* Heads (kind, stream kind, nfields, tid: a record's first 8 bytes) a
 * compact entry can name: its first byte, the index in the low 7 bits. */
#define TAPE_HEADS 127
/* The first byte's top bit: the time's distance in 16 bits, not 32. */
#define TAPE_DTS16 0x80u
/* The head table's hash slots (a power of two, twice the heads at most). */
#define TAPE_HEAD_SLOTS 256

/* A head's state for compact entries: the last compact record's 8 fields
 * in 32 bits (the first as its distance from ts) and their steps from the
 * one before (the prediction of the next: prev + step), side by side (one
 * address for both). */
struct tape_pred {
	uint32_t prev[8], step[8];
} __attribute__((aligned(32)));

struct an_tape {
	/* Recording's state for compact entries: each head's prediction
	 * (struct tape_pred), which the replay rebuilds as it goes; the time
	 * of the block record before; heads by index and a hash from head to
	 * index + 1. */
	struct tape_pred pred[TAPE_HEADS];
	uint64_t heads[TAPE_HEADS];
	uint64_t slot_head[TAPE_HEAD_SLOTS];
	uint8_t slot_ix[TAPE_HEAD_SLOTS];
	/* The last head of each stream kind (~0: none; kind 0xff is no
	 * record's) and its index: a block's records alternate between a
	 * thread's launches and a device's kernels. */
	uint64_t last_head[4];
	uint8_t last_ix[4];
	unsigned nheads;
	uint64_t prev_ts;
	int ssse3; /* the SSSE3 paths (TAPE_SSSE3): tbp_simd_level allows them */
	int avx2;  /* and the AVX2 ones (TAPE_AVX2): it allows AVX2, and popcnt */
	struct tape_chunk *first, *cur;
	uint8_t *w, *wend; /* the current chunk's free part */
	size_t cap_bytes, bytes;
	int ok, closed;
	/* What the read set on the analysis. */
	struct tbp_header header;
	uint64_t records, events, reorder_forced, truncated_at;
	int truncated;
};

#ifdef TAPE_AVX2
/* (the AVX2 paths' permutation tables, below) */
static void perm_tables_fill(void);
static pthread_once_t perm_once = PTHREAD_ONCE_INIT;
#endif

struct an_tape *an_tape_new(void)
{
	/* (a fraction of a MiB: tests cut the tape short on small traces) */
	double mb = TAPE_MB_DEFAULT;
	const char *env = getenv("TBANALYZE_TAPE_MB");
	if (env && *env)
		mb = strtod(env, NULL);
	if (!(mb * 1048576.0 >= 1.0) || mb > 1e9)
		return NULL;
	/* (aligned: a head's 8 fields are one 32-byte load) */
	struct an_tape *t = aligned_alloc(64, (sizeof *t + 63) / 64 * 64);
	if (!t)
		return NULL;
	memset(t, 0, sizeof *t);
	t->cap_bytes = (size_t)(mb * 1048576.0);
	t->ok = 1;
	for (unsigned i = 0; i < 4; i++)
		t->last_head[i] = ~0ull;
	enum tbp_simd_level simd = tbp_simd_level();
	(void)simd;
#ifdef TAPE_SSSE3
	t->ssse3 = simd >= TBP_SIMD_SSSE3;
#endif
#ifdef TAPE_AVX2
	t->avx2 = simd >= TBP_SIMD_AVX2 && __builtin_cpu_supports("popcnt");
	if (t->avx2)
		pthread_once(&perm_once, perm_tables_fill);
#endif
	return t;
}

void an_tape_free(struct an_tape *t)
{
	if (!t)
		return;
	an_tape_release(t);
	free(t);
}

int an_tape_ok(const struct an_tape *t)
{
	return t && t->ok;
}

int an_tape_complete(const struct an_tape *t)
{
	return t && t->ok && t->closed;
}

size_t an_tape_bytes(const struct an_tape *t)
{
	return t ? t->bytes : 0;
}

/* Recording stops at the entry that cannot be taken (past the cap, out of
 * memory, a record the tape would not give back as it was): what is on
 * the tape stays, every entry before that one. */
static void tape_stop(struct an_tape *t)
{
	if (t->cur)
		t->cur->used = (size_t)(t->w - (uint8_t *)t->cur->data);
	t->w = t->wend = NULL;
	t->ok = 0;
}

void an_tape_release(struct an_tape *t)
{
	for (struct tape_chunk *c = t->first, *n; c; c = n) {
		n = c->next;
		an_mem_unmap(c, sizeof *c + c->cap + TAPE_REC_MAX);
	}
	t->first = t->cur = NULL;
	t->w = t->wend = NULL;
	t->ok = 0;
	t->closed = 0;
}

/* Room for need bytes at t->w; 0, or -1 with the tape dropped. */
static __attribute__((noinline)) int tape_grow(struct an_tape *t, size_t need)
{
	if (t->cur)
		t->cur->used = (size_t)(t->w - (uint8_t *)t->cur->data);
	size_t chunk = t->cap_bytes < TAPE_CHUNK ? t->cap_bytes : TAPE_CHUNK;
	size_t cap = need > chunk ? need : chunk;
	struct tape_chunk *c = t->bytes + cap <= t->cap_bytes ? an_mem_get(sizeof *c + cap + TAPE_REC_MAX) : NULL;
	if (!c) {
		tape_stop(t);
		return -1;
	}
	c->next = NULL;
	c->used = 0;
	c->cap = cap;
	if (t->cur)
		t->cur->next = c;
	else
		t->first = c;
	t->cur = c;
	t->bytes += cap;
	t->w = (uint8_t *)c->data;
	t->wend = t->w + cap;
	return 0;
}

static inline int tape_room(struct an_tape *t, size_t need)
{
	if (__builtin_expect((size_t)(t->wend - t->w) >= need, 1))
		return 0;
	return tape_grow(t, need);
}

/* A record's fields past nfields are zero (the reader's rows): only the
 * first nfields are kept.  1 when that holds, 0 when not (the tape would
 * not give the record back as it was). */
static inline unsigned rec_fields(const struct tbp_record *r, int *exact)
{
	unsigned nf = r->nfields < TBP_MAX_FIELDS ? r->nfields : TBP_MAX_FIELDS;
	uint64_t rest = 0;
	/* Fields nf to the last, one instruction each (a loop took four). */
	const uint64_t *v = r->u.v;
	switch (nf) {
#define REST_FROM(i)                                                                                                   \
	case i:                                                                                                        \
		rest |= v[i];                                                                                          \
		__attribute__((fallthrough));
		REST_FROM(0) REST_FROM(1) REST_FROM(2) REST_FROM(3) REST_FROM(4) REST_FROM(5) REST_FROM(6) REST_FROM(7)
		REST_FROM(8) REST_FROM(9) REST_FROM(10) REST_FROM(11) REST_FROM(12) REST_FROM(13) REST_FROM(14)
		REST_FROM(15)
#undef REST_FROM
	default:
		break;
	}
	*exact = !rest && r->nfields <= TBP_MAX_FIELDS;
	return nf;
}

/* The stored head's nfields with this bit: a narrow record, whose fields
 * are kept in 32 bits each, the first as its distance from ts (the end of
 * a call, a GPU record or a span: a host call and its kernel have ids,
 * sizes and dimensions that fit, and only their end is a time). */
#define TAPE_NARROW 0x8000u

_Static_assert(TBP_MAX_FIELDS == 16, "the tape packs 16 fields");

/* The first nq * 4 fields (nq 2 or 4: a constant where inlined), the first
 * as its distance from ts, into 32 bits each at out; 0 when one does not
 * fit (nothing to use at out then).  The fields after them must be zero
 * (a record with nfields <= nq * 4 that rec_fields found exact). */
static inline __attribute__((always_inline)) int pack_narrow(const struct tbp_record *r, uint8_t *out, unsigned nq)
{
	uint64_t first = r->u.v[0] - r->ts;
#ifdef __SSE2__
	/* Two fields a register: the high halves or'ed together must be
	 * zero, the low halves of two registers make one of four. */
	const __m128i *v = (const __m128i *)(const void *)r->u.v;
	__m128i f[8];
	f[0] = _mm_set_epi64x((long long)r->u.v[1], (long long)first);
	__m128i any = f[0];
#pragma GCC unroll 8
	for (unsigned i = 1; i < 2 * nq; i++) {
		f[i] = _mm_loadu_si128(v + i);
		any = _mm_or_si128(any, f[i]);
	}
	if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srli_epi64(any, 32), _mm_setzero_si128())) != 0xffff)
		return 0;
#pragma GCC unroll 4
	for (unsigned i = 0; i < nq; i++) {
		__m128 lo = _mm_castsi128_ps(f[2 * i]), hi = _mm_castsi128_ps(f[2 * i + 1]);
		_mm_storeu_si128((__m128i *)(void *)(out + 16 * i),
				 _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))));
	}
	return 1;
#else
	uint64_t wide = first;
	for (unsigned i = 1; i < 4 * nq; i++)
		wide |= r->u.v[i];
	if (wide >> 32)
		return 0;
	uint32_t narrow[TBP_MAX_FIELDS];
	narrow[0] = (uint32_t)first;
	for (unsigned i = 1; i < 4 * nq; i++)
		narrow[i] = (uint32_t)r->u.v[i];
	memcpy(out, narrow, 4 * 4 * nq);
	return 1;
#endif
}

/* The other way: the first nq * 4 32-bit fields at in into r's 64-bit
 * ones (the ones after them: get_rec zeroes them). */
static inline __attribute__((always_inline)) void unpack_narrow(const uint8_t *in, struct tbp_record *r, unsigned nq)
{
#ifdef __SSE2__
	__m128i *v = (__m128i *)(void *)r->u.v, zero = _mm_setzero_si128();
#pragma GCC unroll 4
	for (unsigned i = 0; i < nq; i++) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(in + 16 * i));
		_mm_storeu_si128(v + 2 * i, _mm_unpacklo_epi32(x, zero));
		_mm_storeu_si128(v + 2 * i + 1, _mm_unpackhi_epi32(x, zero));
	}
#else
	uint32_t narrow[TBP_MAX_FIELDS];
	memcpy(narrow, in, 4 * 4 * nq);
	for (unsigned i = 0; i < 4 * nq; i++)
		r->u.v[i] = narrow[i];
#endif
	r->u.v[0] += r->ts;
}

/* A block's record of 8 fields or fewer (a launch, a kernel on most
 * traces) whose first 8 fields fit in 32 bits each (the first as its
 * distance from ts) is a compact entry: its first byte the index of its
 * head (kind, stream kind, nfields, tid) in the tape's table, with
 * TAPE_DTS16 when its time's distance from the block's record before it
 * (any entry) is in 16 bits, else in 32; a byte whose bit i says that
 * field i differs from its prediction: the last compact record's of the
 * same head plus the step it took there (32-bit arithmetic; a field that
 * stays the same, or a correlation id that goes up by one a launch, is
 * predicted); the distance; the fields that differ, 32 bits each.  All 8 fields are
 * kept whatever its nfields: fields 8 to 15 must be zero (the reader's
 * rows), and the ones between nfields and 8 come back as they were, so no
 * count of the fields past nfields, neither when packing nor when
 * unpacking.  Which of a block's records are compact is a bit each in the
 * block's entry, so a block of them alone is unpacked without a test a
 * record. */
#define TAPE_COMPACT_MAX (2u + 4u + 32u)
/* A block's entry: TAPE_OP_BLOCK | n << 32, last_ts, compact (bit i: record i). */
#define TAPE_BLOCK_HEAD 24u

#ifdef TAPE_SSSE3
/* By a mask of 4 fields (bit j: field j): the byte shuffle that packs them
 * to the front, the one that puts packed ones back at their place (zero
 * elsewhere), the fields' lanes all ones, and their bytes. */
static const int8_t pack_shuf[16][16] __attribute__((aligned(16))) = {
	{-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{4, 5, 6, 7, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 4, 5, 6, 7, -128, -128, -128, -128, -128, -128, -128, -128},
	{8, 9, 10, 11, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 8, 9, 10, 11, -128, -128, -128, -128, -128, -128, -128, -128},
	{4, 5, 6, 7, 8, 9, 10, 11, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -128, -128, -128, -128},
	{12, 13, 14, 15, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 12, 13, 14, 15, -128, -128, -128, -128, -128, -128, -128, -128},
	{4, 5, 6, 7, 12, 13, 14, 15, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, -128, -128, -128, -128},
	{8, 9, 10, 11, 12, 13, 14, 15, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, -128, -128, -128, -128},
	{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -128, -128, -128, -128},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}};
static const int8_t unpack_shuf[16][16] __attribute__((aligned(16))) = {
	{-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
	{-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128, -128, -128, -128, -128},
	{0, 1, 2, 3, 4, 5, 6, 7, -128, -128, -128, -128, -128, -128, -128, -128},
	{-128, -128, -128, -128, -128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128},
	{0, 1, 2, 3, -128, -128, -128, -128, 4, 5, 6, 7, -128, -128, -128, -128},
	{-128, -128, -128, -128, 0, 1, 2, 3, 4, 5, 6, 7, -128, -128, -128, -128},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -128, -128, -128, -128},
	{-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 0, 1, 2, 3},
	{0, 1, 2, 3, -128, -128, -128, -128, -128, -128, -128, -128, 4, 5, 6, 7},
	{-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128, 4, 5, 6, 7},
	{0, 1, 2, 3, 4, 5, 6, 7, -128, -128, -128, -128, 8, 9, 10, 11},
	{-128, -128, -128, -128, -128, -128, -128, -128, 0, 1, 2, 3, 4, 5, 6, 7},
	{0, 1, 2, 3, -128, -128, -128, -128, 4, 5, 6, 7, 8, 9, 10, 11},
	{-128, -128, -128, -128, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}};
static const int8_t lane_mask[16][16] __attribute__((aligned(16))) = {
	{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{-1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
	{-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
	{0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0},
	{-1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0},
	{0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0},
	{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0},
	{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1},
	{-1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1},
	{0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1},
	{-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1},
	{0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1},
	{-1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1},
	{0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
	{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}};
static const uint8_t mask_bytes[16] = {0, 4, 4, 8, 4, 8, 8, 12, 4, 8, 8, 12, 8, 12, 12, 16};

/* The changed fields (diff: bit i, field i of lo then hi) at o; the end. */
static inline __attribute__((target("ssse3"))) uint8_t *put_fields_ssse3(uint8_t *o, __m128i lo, __m128i hi,
									  unsigned diff)
{
	unsigned dl = diff & 15, dh = diff >> 4;
	_mm_storeu_si128((__m128i *)(void *)o,
			 _mm_shuffle_epi8(lo, _mm_load_si128((const __m128i *)(const void *)pack_shuf[dl])));
	o += mask_bytes[dl];
	_mm_storeu_si128((__m128i *)(void *)o,
			 _mm_shuffle_epi8(hi, _mm_load_si128((const __m128i *)(const void *)pack_shuf[dh])));
	return o + mask_bytes[dh];
}
#endif

#ifdef TAPE_AVX2
/* By a mask of the 8 fields (bit j: field j), a byte a lane: the lanes
 * that vpermd packs to the front (pack_perm: the changed fields in order),
 * and where each lane's field lies among the packed ones (unpack_perm;
 * 0x80 for a field not packed: widened with its sign, the lane's bytes
 * all have the top bit that vpblendvb takes the prediction by).  Filled
 * once, by that rule, when a tape first takes the AVX2 path. */
static uint64_t pack_perm[256], unpack_perm[256];

static void perm_tables_fill(void)
{
	for (unsigned m = 0; m < 256; m++) {
		uint64_t pack = 0, unpack = 0;
		unsigned k = 0;
		for (unsigned j = 0; j < 8; j++) {
			uint64_t lane = 0x80;
			if (m >> j & 1) {
				pack |= (uint64_t)j << (8 * k);
				lane = k++;
			}
			unpack |= lane << (8 * j);
		}
		pack_perm[m] = pack;
		unpack_perm[m] = unpack;
	}
}
#endif

/* The index of head in the tape's table, added when new; -1 when the table
 * is full (the record is not compact then). */
static __attribute__((noinline)) int head_index_slow(struct an_tape *t, uint64_t head)
{
	unsigned s = (unsigned)((head * 0x9e3779b97f4a7c15ull) >> 56) & (TAPE_HEAD_SLOTS - 1);
	for (;; s = (s + 1) & (TAPE_HEAD_SLOTS - 1)) {
		if (t->slot_head[s] == head && t->slot_ix[s])
			break;
		if (!t->slot_ix[s]) {
			if (t->nheads == TAPE_HEADS)
				return -1;
			t->slot_head[s] = head;
			t->heads[t->nheads] = head;
			t->slot_ix[s] = (uint8_t)++t->nheads;
			break;
		}
	}
	unsigned sk = (unsigned)(head >> 8) & 3;
	t->last_head[sk] = head;
	t->last_ix[sk] = (uint8_t)(t->slot_ix[s] - 1);
	return t->slot_ix[s] - 1;
}

static inline int head_index(struct an_tape *t, uint64_t head)
{
	/* (the stream kind's byte on a little-endian machine; elsewhere
	 * another byte of the head, as good a key) */
	unsigned sk = (unsigned)(head >> 8) & 3;
	if (__builtin_expect(t->last_head[sk] == head, 1))
		return t->last_ix[sk];
	return head_index_slow(t, head);
}

/* A compact entry's first bytes, the same on every path: the head's index
 * (TAPE_DTS16 when the time's distance fits in 16 bits), the mask of the
 * fields that follow, the distance; the fields go after them. */
static inline __attribute__((always_inline)) uint8_t *put_entry_head(uint8_t *out, int h, uint64_t dts,
								   unsigned diff)
{
	out[1] = (uint8_t)diff;
	if (dts < 0x10000) {
		out[0] = (uint8_t)(h | TAPE_DTS16);
		uint16_t d16 = (uint16_t)dts;
		memcpy(out + 2, &d16, 2);
		return out + 4;
	}
	out[0] = (uint8_t)h;
	uint32_t d32 = (uint32_t)dts;
	memcpy(out + 2, &d32, 4);
	return out + 6;
}

/* A record the merge queued as an an_rec48 (e) as a compact entry at out
 * (room for TAPE_COMPACT_MAX checked); its size, or 0 when it cannot be
 * one (its time's distance past 32 bits, the table of heads full: nothing
 * to use at out, nothing recorded then).  Its fields 8 to 15 are past its
 * nfields: zero, as the reader hands every record (struct tbp_record), and
 * zero again when replayed. */
static inline __attribute__((always_inline)) size_t put_compact(struct an_tape *t, const struct an_rec48 *e,
								 uint8_t *out, uint64_t *prev_ts, int ssse3)
{
	uint64_t dts = e->ts - *prev_ts, head;
	if (dts >> 32)
		return 0;
	memcpy(&head, e, 8);
	int h = head_index(t, head);
	if (h < 0)
		return 0;
#ifdef __SSE2__
	__m128i lo4 = _mm_loadu_si128((const __m128i *)(const void *)e->f);
	__m128i hi4 = _mm_loadu_si128((const __m128i *)(const void *)(e->f + 4));
	__m128i *pv = (__m128i *)(void *)t->pred[h].prev, *sv = (__m128i *)(void *)t->pred[h].step;
	__m128i p0 = pv[0], p1 = pv[1];
	unsigned same = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lo4, _mm_add_epi32(p0, sv[0])))) |
			(unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(hi4, _mm_add_epi32(p1, sv[1])))) << 4;
	sv[0] = _mm_sub_epi32(lo4, p0);
	sv[1] = _mm_sub_epi32(hi4, p1);
	pv[0] = lo4;
	pv[1] = hi4;
#else
	unsigned same = 0;
	for (unsigned i = 0; i < 8; i++) {
		uint32_t was = t->pred[h].prev[i];
		same |= (unsigned)(e->f[i] == (uint32_t)(was + t->pred[h].step[i])) << i;
		t->pred[h].step[i] = e->f[i] - was;
		t->pred[h].prev[i] = e->f[i];
	}
#endif
	unsigned diff = ~same & 0xffu;
	*prev_ts = e->ts;
	uint8_t *o = put_entry_head(out, h, dts, diff);
#ifdef TAPE_SSSE3
	if (ssse3)
		return (size_t)(put_fields_ssse3(o, lo4, hi4, diff) - out);
#else
	(void)ssse3;
#endif
	for (; diff; diff &= diff - 1, o += 4)
		memcpy(o, &e->f[__builtin_ctz(diff)], 4);
	return (size_t)(o - out);
}

#ifdef TAPE_AVX2
/* put_compact with the 8 fields in one register. */
static inline __attribute__((target("avx2,popcnt"))) size_t put_compact_avx2(struct an_tape *t,
									     const struct an_rec48 *e, uint8_t *out,
									     uint64_t *prev_ts)
{
	uint64_t ts = e->ts, dts = ts - *prev_ts, head;
	if (dts >> 32)
		return 0;
	memcpy(&head, e, 8);
	int h = head_index(t, head);
	if (h < 0)
		return 0;
	__m256i f = _mm256_loadu_si256((const __m256i *)(const void *)e->f);
	__m256i *pv = (__m256i *)(void *)t->pred[h].prev, *sv = (__m256i *)(void *)t->pred[h].step;
	__m256i was = _mm256_load_si256(pv);
	__m256i same = _mm256_cmpeq_epi32(f, _mm256_add_epi32(was, _mm256_load_si256(sv)));
	unsigned diff = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(same)) & 0xffu;
	_mm256_store_si256(sv, _mm256_sub_epi32(f, was));
	_mm256_store_si256(pv, f);
	*prev_ts = ts;
	uint8_t *o = put_entry_head(out, h, dts, diff);
	/* (room for 32 bytes: TAPE_REC_MAX a record is reserved) */
	__m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)&pack_perm[diff]));
	_mm256_storeu_si256((__m256i *)(void *)o, _mm256_permutevar8x32_epi32(f, ix));
	return (size_t)(o - out) + 4 * (size_t)__builtin_popcount(diff);
}
#endif

/* One record at t->w (room for TAPE_REC_MAX checked): head, ts, fields. */
static inline void put_rec(struct an_tape *t, const struct tbp_record *r, unsigned nf)
{
	/* A record of 8 fields or fewer (a launch, a kernel on most traces)
	 * packs half the registers. */
	if (!(nf <= 8 ? pack_narrow(r, t->w + 16, 2) : pack_narrow(r, t->w + 16, 4))) {
		memcpy(t->w, r, TAPE_REC_MAX); /* head, ts and every field; only nf kept */
		t->w += 16 + 8 * (size_t)nf;
		return;
	}
	uint16_t nfields = (uint16_t)(r->nfields | TAPE_NARROW);
	memcpy(t->w, r, 16);
	memcpy(t->w + 2, &nfields, 2);
	t->w += 16 + 4 * (size_t)nf;
}

void an_tape_single(struct an_tape *t, const struct tbp_record *r)
{
	if (!t->ok)
		return;
	int exact;
	unsigned nf = rec_fields(r, &exact);
	size_t blob = r->kind == TBP_K_STRING ? ((size_t)r->blob_len + 7) / 8 * 8 + 8 : 0;
	if (!exact || (!blob && (r->blob || r->blob_len))) {
		tape_stop(t);
		return;
	}
	if (tape_room(t, TAPE_REC_MAX + blob))
		return;
	put_rec(t, r, nf);
	if (blob) {
		uint64_t len = r->blob_len;
		memcpy(t->w, &len, 8);
		if (len)
			memcpy(t->w + 8, r->blob, len);
		t->w += blob;
	}
}

static inline __attribute__((always_inline)) void tape_block_k(struct an_tape *t,
								const struct an_rec48 *const *ents,
								const struct tbp_record *const *recs, unsigned n,
								uint64_t last_ts, int ssse3, int avx2)
{
	if (n > TAPE_BLOCK_MAX) {
		tape_stop(t);
		return;
	}
	if (tape_room(t, TAPE_BLOCK_HEAD + (size_t)n * TAPE_REC_MAX))
		return;
	uint8_t *at = t->w;
	uint64_t op[2] = {TAPE_OP_BLOCK | (uint64_t)n << 32, last_ts}, compact = 0;
	memcpy(t->w, op, 16);
	t->w += TAPE_BLOCK_HEAD;
#ifndef TAPE_AVX2
	(void)avx2;
#endif
	int all_exact = 1;
	/* The write position in a register (the stores through it could
	 * change t->w, as the compiler sees it), and record i's bit. */
	uint8_t *w = t->w;
	uint64_t bit = 1, prev_ts = t->prev_ts;
	for (unsigned i = 0; i < n; i++, bit <<= 1) {
		size_t size = 0;
		if (ents[i]->nfields <= 8) {
#ifdef TAPE_AVX2
			if (avx2)
				size = put_compact_avx2(t, ents[i], w, &prev_ts);
			else
#endif
				size = put_compact(t, ents[i], w, &prev_ts, ssse3);
		}
		if (size) {
			compact |= bit;
			w += size;
			continue;
		}
		const struct tbp_record *r = recs[i];
		int exact;
		unsigned nf = rec_fields(r, &exact);
		all_exact &= exact;
		t->w = w;
		put_rec(t, r, nf);
		w = t->w;
		prev_ts = r->ts;
	}
	t->prev_ts = prev_ts;
	t->w = w;
	memcpy(at + 16, &compact, 8);
	/* (queued records carry no blob: the merge cleared it) */
	if (!all_exact) {
		t->w = at; /* not this block */
		tape_stop(t);
	}
}

static void tape_block_plain(struct an_tape *t, const struct an_rec48 *const *ents, const struct tbp_record *const *recs,
			     unsigned n, uint64_t last_ts)
{
	tape_block_k(t, ents, recs, n, last_ts, 0, 0);
}

#ifdef TAPE_SSSE3
static __attribute__((target("ssse3"))) void tape_block_ssse3(struct an_tape *t, const struct an_rec48 *const *ents,
							       const struct tbp_record *const *recs, unsigned n,
							       uint64_t last_ts)
{
	tape_block_k(t, ents, recs, n, last_ts, 1, 0);
}
#endif

#ifdef TAPE_AVX2
static __attribute__((target("avx2,popcnt"))) void tape_block_avx2(struct an_tape *t,
								   const struct an_rec48 *const *ents,
								   const struct tbp_record *const *recs, unsigned n,
								   uint64_t last_ts)
{
	tape_block_k(t, ents, recs, n, last_ts, 1, 1);
}
#endif

void an_tape_block(struct an_tape *t, const struct an_rec48 *const *ents, const struct tbp_record *const *recs,
		   unsigned n, uint64_t last_ts)
{
	if (!t->ok)
		return;
#ifdef TAPE_AVX2
	if (t->avx2) {
		tape_block_avx2(t, ents, recs, n, last_ts);
		return;
	}
#endif
#ifdef TAPE_SSSE3
	if (t->ssse3) {
		tape_block_ssse3(t, ents, recs, n, last_ts);
		return;
	}
#endif
	tape_block_plain(t, ents, recs, n, last_ts);
}

void an_tape_close(struct an_tape *t, const struct analysis *a)
{
	if (!t->ok)
		return;
	if (t->cur)
		t->cur->used = (size_t)(t->w - (uint8_t *)t->cur->data);
	t->header = a->header;
	t->records = a->records;
	t->events = a->events;
	t->reorder_forced = a->reorder_forced;
	t->truncated = a->truncated;
	t->truncated_at = a->truncated_at;
	t->closed = 1;
}

/* The record at p back into *r; returns the entry's end.  set_blob 0: r's
 * blob and blob_len are left as they are (a block's slots, whose records
 * carry none: set once). */
static inline __attribute__((always_inline)) const uint8_t *get_rec_b(const uint8_t *p, struct tbp_record *r,
								      int set_blob)
{
	size_t size;
	unsigned nf;
	uint16_t nfields;
	memcpy(&nfields, p + 2, 2);
	if (nfields & TAPE_NARROW) {
		memcpy(r, p, 16);
		r->nfields = nfields & ~TAPE_NARROW;
		nf = r->nfields < TBP_MAX_FIELDS ? r->nfields : TBP_MAX_FIELDS;
		if (nf <= 8)
			unpack_narrow(p + 16, r, 2);
		else
			unpack_narrow(p + 16, r, 4);
		size = 16 + 4 * (size_t)nf;
	} else {
		memcpy(r, p, TAPE_REC_MAX);
		nf = r->nfields < TBP_MAX_FIELDS ? r->nfields : TBP_MAX_FIELDS;
		size = 16 + 8 * (size_t)nf;
	}
	/* Fields nf to the last zeroed, one store each (a loop took four). */
	uint64_t *v = r->u.v;
	switch (nf) {
#define ZERO_FROM(i)                                                                                                   \
	case i:                                                                                                        \
		v[i] = 0;                                                                                              \
		__attribute__((fallthrough));
		ZERO_FROM(0) ZERO_FROM(1) ZERO_FROM(2) ZERO_FROM(3) ZERO_FROM(4) ZERO_FROM(5) ZERO_FROM(6) ZERO_FROM(7)
		ZERO_FROM(8) ZERO_FROM(9) ZERO_FROM(10) ZERO_FROM(11) ZERO_FROM(12) ZERO_FROM(13) ZERO_FROM(14)
		ZERO_FROM(15)
#undef ZERO_FROM
	default:
		break;
	}
	if (set_blob) {
		r->blob = NULL;
		r->blob_len = 0;
	}
	return p + size;
}

/* The replay's state for compact entries: what the recording's was at the
 * same entry (an_tape's prev and step), the heads by index. */
struct tape_dec {
	/* (get_compact_avx2 loads a head's 8 fields at once) */
	struct tape_pred pred[TAPE_HEADS];
#ifdef TAPE_SSSE3
	__m128i prev4[TAPE_HEADS][2], step4[TAPE_HEADS][2]; /* get_compact_ssse3's */
#endif
	uint64_t heads[TAPE_HEADS]; /* (a copy: one load fewer a record) */
};

/* A block's compact record at p back into its slot r (blob left as it
 * is); returns the entry's end.  zero_high: the slot's fields 8 to 15 may
 * not be zero (the record it held last had more than 8 fields). */
static inline __attribute__((always_inline)) const uint8_t *get_compact(const uint8_t *p, struct tbp_record *r,
									struct tape_dec *d, uint64_t *tsp, int zero_high)
{
	unsigned b0 = p[0], diff = p[1];
	/* The time's distance in 16 or 32 bits, without a branch (the slack
	 * after a chunk's data covers the 4 bytes read). */
	unsigned short16 = b0 >> 7;
	uint32_t dts;
	memcpy(&dts, p + 2, 4);
	dts &= 0xffffffffu >> (short16 << 4);
	uint64_t ts = *tsp + dts;
	*tsp = ts;
	p += 6 - 2 * short16;
	uint32_t *pv = d->pred[b0 & ~TAPE_DTS16].prev, *sv = d->pred[b0 & ~TAPE_DTS16].step, f[8];
	for (unsigned i = 0; i < 8; i++)
		f[i] = pv[i] + sv[i];
	for (; diff; diff &= diff - 1, p += 4)
		memcpy(&f[__builtin_ctz(diff)], p, 4);
	memcpy(r, &d->heads[b0 & ~TAPE_DTS16], 8);
	r->ts = ts;
	uint64_t *v = r->u.v;
	for (unsigned i = 0; i < 8; i++) {
		sv[i] = f[i] - pv[i];
		pv[i] = f[i];
		v[i] = f[i];
	}
	v[0] += ts;
	if (zero_high)
		memset(v + 8, 0, 8 * sizeof *v);
	return p;
}

#ifdef TAPE_SSSE3
/* get_compact with the fields put in place four at a time. */
static inline __attribute__((target("ssse3"))) const uint8_t *get_compact_ssse3(const uint8_t *p, struct tbp_record *r,
									      struct tape_dec *d, uint64_t *tsp, int zero_high)
{
	unsigned b0 = p[0], diff = p[1];
	unsigned short16 = b0 >> 7;
	uint32_t dts;
	memcpy(&dts, p + 2, 4);
	dts &= 0xffffffffu >> (short16 << 4);
	uint64_t ts = *tsp + dts;
	*tsp = ts;
	p += 6 - 2 * short16;
	unsigned h = b0 & ~TAPE_DTS16, dl = diff & 15, dh = diff >> 4;
	__m128i *pv = d->prev4[h], *sv = d->step4[h];
	__m128i p0 = pv[0], p1 = pv[1];
	/* (the slack after a chunk's data covers the 16 bytes read) */
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i lo = _mm_or_si128(_mm_andnot_si128(_mm_load_si128((const __m128i *)(const void *)lane_mask[dl]),
						   _mm_add_epi32(p0, sv[0])),
				  _mm_shuffle_epi8(x, _mm_load_si128((const __m128i *)(const void *)unpack_shuf[dl])));
	p += mask_bytes[dl];
	__m128i y = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i hi = _mm_or_si128(_mm_andnot_si128(_mm_load_si128((const __m128i *)(const void *)lane_mask[dh]),
						   _mm_add_epi32(p1, sv[1])),
				  _mm_shuffle_epi8(y, _mm_load_si128((const __m128i *)(const void *)unpack_shuf[dh])));
	p += mask_bytes[dh];
	sv[0] = _mm_sub_epi32(lo, p0);
	sv[1] = _mm_sub_epi32(hi, p1);
	pv[0] = lo;
	pv[1] = hi;
	memcpy(r, &d->heads[h], 8);
	r->ts = ts;
	__m128i *v = (__m128i *)(void *)r->u.v, zero = _mm_setzero_si128();
	_mm_storeu_si128(v, _mm_add_epi64(_mm_unpacklo_epi32(lo, zero), _mm_cvtsi64_si128((long long)ts)));
	_mm_storeu_si128(v + 1, _mm_unpackhi_epi32(lo, zero));
	_mm_storeu_si128(v + 2, _mm_unpacklo_epi32(hi, zero));
	_mm_storeu_si128(v + 3, _mm_unpackhi_epi32(hi, zero));
	if (zero_high) {
		_mm_storeu_si128(v + 4, zero);
		_mm_storeu_si128(v + 5, zero);
		_mm_storeu_si128(v + 6, zero);
		_mm_storeu_si128(v + 7, zero);
	}
	return p;
}
#endif

#ifdef TAPE_AVX2
/* get_compact with the 8 fields in one register. */
static inline __attribute__((target("avx2,popcnt"))) const uint8_t *get_compact_avx2(const uint8_t *p,
										   struct tbp_record *r,
										   struct tape_dec *d, uint64_t *tsp,
										   int zero_high)
{
	/* The time's distance's mask by TAPE_DTS16 (a load, not a shift by
	 * a variable count). */
	static const uint32_t dts_mask[2] = {0xffffffffu, 0xffffu};
	unsigned b0 = p[0], diff = p[1];
	size_t short16 = b0 >> 7;
	uint32_t dts;
	memcpy(&dts, p + 2, 4);
	dts &= dts_mask[short16];
	uint64_t ts = *tsp + dts;
	*tsp = ts;
	p += 6 - 2 * short16;
	unsigned h = b0 & ~TAPE_DTS16;
	__m256i *pv = (__m256i *)(void *)d->pred[h].prev, *sv = (__m256i *)(void *)d->pred[h].step;
	__m256i was = _mm256_load_si256(pv), pred = _mm256_add_epi32(was, _mm256_load_si256(sv));
	__m256i ix = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)&unpack_perm[diff]));
	/* (the slack after a chunk's data covers the 32 bytes read) */
	__m256i x = _mm256_loadu_si256((const __m256i *)(const void *)p);
	__m256i f = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(x, ix), pred, ix);
	p += 4u * (unsigned)__builtin_popcount(diff);
	_mm256_store_si256(sv, _mm256_sub_epi32(f, was));
	_mm256_store_si256(pv, f);
	memcpy(r, &d->heads[h], 8);
	r->ts = ts;
	__m256i *v = (__m256i *)(void *)r->u.v;
	_mm256_storeu_si256(v, _mm256_add_epi64(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(f)),
						_mm256_set_epi64x(0, 0, 0, (long long)ts)));
	_mm256_storeu_si256(v + 1, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(f, 1)));
	if (zero_high) {
		_mm256_storeu_si256(v + 2, _mm256_setzero_si256());
		_mm256_storeu_si256(v + 3, _mm256_setzero_si256());
	}
	return p;
}
#endif

/* A compact entry back, one way or another (simd: 0 plain, 1 SSSE3, 2
 * AVX2; a constant where inlined). */
static inline __attribute__((always_inline)) const uint8_t *get_compact_k(const uint8_t *p, struct tbp_record *r,
									  struct tape_dec *d, uint64_t *tsp, int zero_high,
									  int simd)
{
#ifdef TAPE_AVX2
	if (simd == 2)
		return get_compact_avx2(p, r, d, tsp, zero_high);
#endif
#ifdef TAPE_SSSE3
	if (simd)
		return get_compact_ssse3(p, r, d, tsp, zero_high);
#else
	(void)simd;
#endif
	return get_compact(p, r, d, tsp, zero_high);
}

static inline __attribute__((always_inline)) const uint8_t *get_rec(const uint8_t *p, struct tbp_record *r)
{
	return get_rec_b(p, r, 1);
}

/* The tape's entries into the analysis, with dec's state (zero). */
static inline __attribute__((always_inline)) int replay_k(struct an_tape *t, struct analysis *a, struct tape_dec *dec,
							  int simd)
{
	struct tbp_record block[TAPE_BLOCK_MAX];
	const struct tbp_record *ptrs[TAPE_BLOCK_MAX];
	/* Every slot zero to begin with: blob and fields 8 to 15 too. */
	memset(block, 0, sizeof block);
	for (unsigned i = 0; i < TAPE_BLOCK_MAX; i++)
		ptrs[i] = &block[i];
	/* Bit i: slot i's fields 8 to 15 may not be zero.  ts: the time of
	 * the block record before (compact entries' distances are from it). */
	uint64_t high = 0, ts = 0;
	for (const struct tape_chunk *c = t->first; c; c = c->next) {
		const uint8_t *p = (const uint8_t *)c->data, *end = p + c->used;
		while (p < end) {
			if (*p == TAPE_OP_BLOCK) {
				uint64_t op[3];
				memcpy(op, p, TAPE_BLOCK_HEAD);
				p += TAPE_BLOCK_HEAD;
				unsigned n = (unsigned)(op[0] >> 32);
				uint64_t last_ts = op[1], compact = op[2];
				uint64_t all = n < 64 ? (1ull << n) - 1 : ~0ull;
				if (compact == all && !high) {
					/* The usual block: launches and kernels alone. */
					for (unsigned i = 0; i < n; i++)
						p = get_compact_k(p, &block[i], dec, &ts, 0, simd);
				} else {
					for (unsigned i = 0; i < n; i++) {
						if (compact >> i & 1) {
							p = get_compact_k(p, &block[i], dec, &ts, high >> i & 1,
									  simd);
							high &= ~(1ull << i);
						} else {
							p = get_rec_b(p, &block[i], 0);
							ts = block[i].ts;
							if (block[i].nfields > 8)
								high |= 1ull << i;
						}
					}
				}
				an_pass_block(a, ptrs, n, &last_ts);
				continue;
			}
			struct tbp_record r;
			p = get_rec(p, &r);
			if (r.kind == TBP_K_STRING) {
				uint64_t len;
				memcpy(&len, p, 8);
				r.blob = len ? p + 8 : NULL;
				r.blob_len = (uint32_t)len;
				p += 8 + (len + 7) / 8 * 8;
			}
			if (an_is_def_record(r.kind)) {
				if (defs_add(a->defs, &r))
					return -1;
			} else {
				an_pass_record(a, &r);
			}
		}
	}
	return 0;
}

static int replay_plain(struct an_tape *t, struct analysis *a, struct tape_dec *dec)
{
	return replay_k(t, a, dec, 0);
}

#ifdef TAPE_SSSE3
static __attribute__((target("ssse3"))) int replay_ssse3(struct an_tape *t, struct analysis *a, struct tape_dec *dec)
{
	return replay_k(t, a, dec, 1);
}
#endif

#ifdef TAPE_AVX2
static __attribute__((target("avx2,popcnt"))) int replay_avx2(struct an_tape *t, struct analysis *a,
							      struct tape_dec *dec)
{
	return replay_k(t, a, dec, 2);
}
#endif

int an_tape_replay(struct an_tape *t, struct analysis *a)
{
	if (t->ok && t->cur)
		t->cur->used = (size_t)(t->w - (uint8_t *)t->cur->data);
	if (t->closed)
		a->header = t->header;
	struct tape_dec *dec = aligned_alloc(64, (sizeof *dec + 63) / 64 * 64);
	if (!dec)
		return -1;
	memset(dec, 0, sizeof *dec);
	memcpy(dec->heads, t->heads, sizeof dec->heads);
#if defined(TAPE_AVX2)
	int rc = t->avx2 ? replay_avx2(t, a, dec) : t->ssse3 ? replay_ssse3(t, a, dec) : replay_plain(t, a, dec);
#elif defined(TAPE_SSSE3)
	int rc = t->ssse3 ? replay_ssse3(t, a, dec) : replay_plain(t, a, dec);
#else
	int rc = replay_plain(t, a, dec);
#endif
	free(dec);
	if (rc)
		return rc;
	if (t->closed) {
		a->records = t->records;
		a->events = t->events;
		a->reorder_forced = t->reorder_forced;
		a->truncated = t->truncated;
		a->truncated_at = t->truncated_at;
	}
	return 0;
}
