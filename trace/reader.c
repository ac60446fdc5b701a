/*
 * Streaming trace reader.  Holds one compressed frame and its decompressed
 * content at a time, so memory is bounded by the largest frame, not the
 * file.  Every length, count and varint from the file is bounds-checked:
 * hostile input ends in TBP_ERR_CORRUPT / TBP_ERR_CHECKSUM /
 * TBP_ERR_TRUNCATED, never a crash or a loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "internal.h"
#include "tbprof/simd.h"

#define READ_AHEAD (256u << 10)

/* Records of one kind are decoded BATCH at a time, column by column: each
 * column's loop keeps its cursor and running value in registers, which is
 * several times cheaper than visiting every column once per record. */
#define BATCH 128
#define ROW (1 + TBP_MAX_FIELDS) /* ts and the fields handed out */

/* The decode paths.  ISA_PLAIN: portable C (on x86-64, SSE2 through GCC's
 * vector types).  ISA_X86: x86-64 with BMI2, whose pext and pdep take the
 * two- and three-byte varints of a timestamp column (mixed, a word of input
 * at a time) apart in a few instructions, chosen at run time where the CPU
 * has it and pext is fast (not AMD's families 15h and 17h, where it is
 * microcoded) and the level tbp_simd_level allows is AVX2 (TBP_SIMD=plain
 * or ssse3 in the environment forces the plain path; the trace suite runs
 * both).  Both hand out the same records and fail on a damaged input at the
 * same record with the same message. */
enum { ISA_PLAIN = 0, ISA_X86 = 1 };

#if defined(__x86_64__) && defined(__GNUC__)
#define TBP_HAVE_X86 1
#include <immintrin.h>
/* In inline assembly, not the intrinsics: the code that uses them is
 * compiled once for both paths (a constant picks one), and the intrinsics
 * would need the whole function compiled for BMI2. */
static inline uint64_t bmi2_pext(uint64_t v, uint64_t mask)
{
	uint64_t r;
	__asm__("pextq %2, %1, %0" : "=r"(r) : "r"(v), "rm"(mask));
	return r;
}
static inline uint64_t bmi2_pdep(uint64_t v, uint64_t mask)
{
	uint64_t r;
	__asm__("pdepq %2, %1, %0" : "=r"(r) : "r"(v), "rm"(mask));
	return r;
}
/* pext of each byte's high bit (a word's continuation bits), the mask read
 * from memory: no 10-byte constant load a word where registers are short. */
static const uint64_t high_bits = 0x8080808080808080ull;
static inline uint64_t bmi2_pext_high(uint64_t v)
{
	uint64_t r;
	__asm__("pextq %2, %1, %0" : "=r"(r) : "r"(v), "m"(high_bits));
	return r;
}
#else
#define TBP_HAVE_X86 0
static inline uint64_t bmi2_pext_high(uint64_t v)
{
	return v; /* never called: ISA_X86 is never chosen */
}
static inline uint64_t bmi2_pext(uint64_t v, uint64_t mask)
{
	(void)mask;
	return v; /* never called: ISA_X86 is never chosen */
}
#define bmi2_pdep bmi2_pext
#endif

/* A word of varint bytes by its continuation bits (bit i: byte i's high
 * bit): how many varints of one to three bytes it starts with, two or
 * three (0: fewer, or a longer one first), the bytes they take, the bits
 * of those bytes that carry each one's magnitude (its payload but the
 * zigzag sign, bit 0 of its first byte) and its sign (for pext), and
 * where pdep puts each magnitude: varint t at bit 21 t (three 21-bit
 * lanes); its sign goes to its lane's bit 0 (LANES21_BIT0, one mask for
 * every word). */
struct varint3 {
	uint64_t magnitude, signs, lanes;
	uint16_t n, bytes;
	uint32_t cells; /* n rows of cells (n * ROW) */
};
static struct varint3 varint3_tab[256];
#define LANES21_BIT0 (1ull | 1ull << 21 | 1ull << 42)
static const uint64_t lanes21_bit0 = LANES21_BIT0;
static int cpu_isa = ISA_PLAIN;

static void isa_init(void)
{
#if TBP_HAVE_X86
	__builtin_cpu_init();
	/* (AVX2 is tbp_simd_level's, asked at every open) */
	if (!__builtin_cpu_supports("bmi") || !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("popcnt") ||
	    __builtin_cpu_is("amdfam15h") || __builtin_cpu_is("amdfam17h"))
		return;
	cpu_isa = ISA_X86;
#endif
	for (unsigned c8 = 0; c8 < 256; c8++) {
		struct varint3 *vt = &varint3_tab[c8];
		unsigned at = 0, n = 0;
		uint64_t magnitude = 0, signs = 0, lanes = 0;
		while (n < 3) {
			unsigned len = 1;
			while (at + len <= 8 && (c8 >> (at + len - 1) & 1))
				len++;
			if (at + len > 8 || len > 3)
				break; /* runs past the word, or longer than three bytes */
			for (unsigned b = at; b < at + len; b++)
				magnitude |= (b == at ? 0x7eull : 0x7full) << (8 * b);
			signs |= 1ull << (8 * at);
			lanes |= ((1ull << (7 * len - 1)) - 1) << (21 * n);
			at += len;
			n++;
		}
		/* Not for a word that starts with a one-byte varint (eight of
		 * those are taken at once) or holds four two-byte ones (four at
		 * once): n 0, as for a word this cannot take. */
		if (n >= 2 && (c8 & 1) && c8 != 0x55)
			*vt = (struct varint3){.magnitude = magnitude, .signs = signs, .lanes = lanes, .n = (uint16_t)n,
				.bytes = (uint16_t)at, .cells = n * ROW};
	}
}

/* The path a reader opened now takes. */
static int reader_isa(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, isa_init);
	return tbp_simd_level() >= TBP_SIMD_AVX2 ? cpu_isa : ISA_PLAIN;
}

/* Decoding state of one kind within the current chunk: where each of its
 * columns is read next, where it ends, the previous record's values
 * (prev[0] the ts, prev[1 + i] field i), and the decoded batch. */
struct kind_cursor {
	const uint8_t *pos[TBP_SCHEMA_MAX_COLUMNS];
	const uint8_t *end[TBP_SCHEMA_MAX_COLUMNS];
	uint64_t prev[1 + TBP_SCHEMA_MAX_FIELDS];
	const struct tbp_kind_info *ki; /* NULL: a newer writer's kind, skipped */
	unsigned ncols;   /* ts + fields (the blob columns are handled apart) */
	unsigned nout;    /* fields handed out: min(schema, this library, the caller's limit) */
	unsigned ndec;    /* columns decoded: ncols, or 1 + nout under a limit
			     (tbp_reader_limit_fields; the others are only checked) */
	uint8_t has_blob, end_from_ts;
	uint8_t runs;     /* version 2 file: each ts and field column says its coding */
	uint8_t isa;      /* the decode path: ISA_PLAIN or ISA_X86 (reader_isa) */
	uint32_t left;    /* records of this kind in the chunk not yet batched */
	unsigned bi, bn;  /* next row of the batch, rows decoded */
	const char *err;  /* set: row bn could not be decoded, for this reason */
	/* Column c of every row holds const_val[c] (bit c of const_cols): the
	 * previous batch was full and that column never changed in it, so a run
	 * of unchanged values need not be stored again.  Most fields (grid,
	 * block, device, stream, result) are constant for long stretches. */
	uint32_t const_cols[(ROW + 31) / 32];
	/* The record's first eight bytes for this kind in the current chunk
	 * (kind, stream kind, field count, thread), laid out as in struct
	 * tbp_record: a record's head is one copy. */
	struct rec_head {
		uint8_t kind, stream_kind;
		uint16_t nfields;
		uint32_t tid;
	} head;
	uint64_t const_val[ROW];
	/* Rows past nout are zero, so a record's field array is copied whole. */
	uint64_t row[BATCH][ROW];
	const uint8_t *blob[BATCH];
	uint32_t blob_len[BATCH];
	/* Version 2: which columns are runs in this chunk, and each one's
	 * current run: its delta and the records it still covers (0: the next
	 * entry is read first). */
	uint8_t col_runs[1 + TBP_SCHEMA_MAX_FIELDS];
	uint64_t run_delta[1 + TBP_SCHEMA_MAX_FIELDS];
	uint32_t run_left[1 + TBP_SCHEMA_MAX_FIELDS];
};

struct tbp_reader {
	char *name;
	int fd;            /* -1: reading from memory */

	/* Input window: buf[0] is file offset buf_off; the cursor is buf[pos]. */
	uint8_t *buf;      /* owned in file mode; the caller's data in memory mode */
	size_t buf_cap, buf_len, pos;
	uint64_t buf_off;
	int eof;

	struct tbp_header hdr;
	struct tbp_schema schema;
	ZSTD_DCtx *dctx;

	/* Current frame's decompressed content. */
	uint8_t *content;
	size_t content_cap, content_len, cpos;
	uint64_t frame_off;
	uint64_t frame_index;

	/* Current chunk: a cursor into the kinds column, and per kind present
	 * a cursor and end for each of its columns (offsets into content). */
	uint64_t chunk_left, chunk_index, record_index;
	unsigned stream_kind;
	uint64_t stream_id;
	/* The chunk's kinds, one byte per record: in the content itself when
	 * the file has them so (version 1, every kind one byte), else expanded
	 * into kinds_buf (version 2's runs, a version 1 kind over 127). */
	const uint8_t *kinds;
	uint8_t *kinds_buf;
	size_t kinds_buf_cap;
	size_t kinds_pos, chunk_end;
	int runs;          /* min_reader_version >= 2: columns are runs */
	int isa;           /* reader_isa() at open: ISA_PLAIN or ISA_X86 */
	uint8_t present[TBP_SCHEMA_MAX_KIND + 1];
	unsigned npresent;
	uint32_t count[TBP_SCHEMA_MAX_KIND + 1];
	/* Counting the kinds column: four tallies, record i in tally i % 4, so
	 * a run of one kind is not one chain of dependent increments.  Zero
	 * between chunks. */
	uint32_t tally[4][128];
	uint8_t kind_seen[128]; /* 1: the kind occurs in the column being counted */
	struct kind_cursor *cur[TBP_SCHEMA_MAX_KIND + 1]; /* allocated on first use */
	/* tbp_reader_limit_fields: fields handed out per kind, 0 for all. */
	uint8_t limit[TBP_SCHEMA_MAX_KIND + 1];

	/* A complete file ends with the writer's seek table; then a frame
	 * that runs past the end was damaged, not cut short. */
	int complete;
	uint64_t seek_off;

	int saw_events;    /* a thread's or a device's chunk with records was opened */
	int status;        /* sticky: TBP_END or an error once reached */
	uint64_t err_off;
	int truncated;
	char detail[256];
};

static int fail(struct tbp_reader *r, int status, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct tbp_reader *r, int status, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof r->detail, fmt, ap);
	va_end(ap);
	r->status = status;
	r->err_off = off;
	if (status == TBP_ERR_TRUNCATED)
		r->truncated = 1;
	return status;
}

static uint64_t cur_off(const struct tbp_reader *r)
{
	return r->buf_off + r->pos;
}

/* Make at least `need` bytes available at the cursor if the input has them.
 * Returns the number available (may be less at end of input), or -1 on a
 * read error (r->status set). */
static long long window(struct tbp_reader *r, size_t need)
{
	size_t have = r->buf_len - r->pos;
	if (have >= need || r->eof)
		return (long long)have;
	if (r->pos > 0) {
		memmove(r->buf, r->buf + r->pos, have);
		r->buf_off += r->pos;
		r->buf_len = have;
		r->pos = 0;
	}
	size_t want = need < READ_AHEAD ? READ_AHEAD : need;
	if (r->buf_cap < want) {
		uint8_t *p = realloc(r->buf, want);
		if (!p) {
			fail(r, TBP_ERR_NOMEM, cur_off(r), "out of memory for a %zu-byte window", want);
			return -1;
		}
		r->buf = p;
		r->buf_cap = want;
	}
	while (r->buf_len < need && !r->eof) {
		ssize_t n = read(r->fd, r->buf + r->buf_len, r->buf_cap - r->buf_len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail(r, TBP_ERR_IO, r->buf_off + r->buf_len, "read: %s", strerror(errno));
			return -1;
		}
		if (n == 0)
			r->eof = 1;
		r->buf_len += (size_t)n;
	}
	return (long long)(r->buf_len - r->pos);
}

/* Advance the cursor by n bytes: 0 done, 1 the input ended first, -1 a
 * read error (r->status set). */
static int skip_bytes(struct tbp_reader *r, uint64_t n)
{
	while (n > 0) {
		long long have = window(r, n < READ_AHEAD ? (size_t)n : READ_AHEAD);
		if (have < 0)
			return -1;
		if (have == 0)
			return 1;
		size_t step = (uint64_t)have < n ? (size_t)have : (size_t)n;
		r->pos += step;
		n -= step;
	}
	return 0;
}

static struct tbp_reader *reader_new(const char *name)
{
	struct tbp_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->name = strdup(name ? name : "(memory)");
	r->fd = -1;
	r->isa = reader_isa();
	if (!r->name) {
		free(r);
		return NULL;
	}
	return r;
}

static void detect_complete(struct tbp_reader *r);

static int read_header(struct tbp_reader *r)
{
	long long have = window(r, 8);
	if (have < 0)
		return r->status;
	if (have == 0)
		return fail(r, TBP_ERR_EMPTY, 0, "%s", "");
	if (have < 4 || tbp_get_le32(r->buf + r->pos) != TBP_MAGIC_HEADER_FRAME)
		return fail(r, TBP_ERR_NOT_TRACE, 0, "%s", "no tbprof header at the start of the file");
	detect_complete(r);
	if (have < 8)
		return fail(r, TBP_ERR_TRUNCATED, 0, "trace truncated inside the header");
	uint32_t size = tbp_get_le32(r->buf + r->pos + 4);
	if (size > TBP_MAX_HEADER_FRAME)
		return fail(r, TBP_ERR_CORRUPT, 4, "header frame size %u too large", size);
	have = window(r, 8 + (size_t)size);
	if (have < 0)
		return r->status;
	if ((size_t)have < 8 + (size_t)size)
		return fail(r, r->complete ? TBP_ERR_CORRUPT : TBP_ERR_TRUNCATED, 0,
			r->complete ? "header frame size runs past the end" : "trace truncated inside the header");
	const char *why = "";
	int rc = tbp_header_parse(r->buf + r->pos + 8, size, &r->hdr, &r->schema, &why);
	if (rc == TBP_ERR_VERSION)
		return fail(r, rc, 10, "format version %u needs reader version %u or later, this is %u",
			r->hdr.version, r->hdr.min_reader_version, TBP_FORMAT_VERSION);
	if (rc != TBP_OK)
		return fail(r, rc, 8, "%s", why);
	/* The column coding changed in version 2, so such files say that
	 * version 1 readers cannot read them (a later version that adds only
	 * kinds or fields keeps min_reader_version 2 and the runs). */
	r->runs = r->hdr.min_reader_version >= 2;
	r->pos += 8 + (size_t)size;
	r->dctx = ZSTD_createDCtx();
	if (!r->dctx)
		return fail(r, TBP_ERR_NOMEM, 0, "out of memory");
	r->frame_off = cur_off(r);
	return TBP_OK;
}

int tbp_reader_open_mem(struct tbp_reader **out, const void *data, size_t size, const char *name)
{
	*out = NULL;
	if (!data && size)
		return TBP_ERR_ARG;
	struct tbp_reader *r = reader_new(name);
	if (!r)
		return TBP_ERR_NOMEM;
	*out = r;
	r->buf = (uint8_t *)data;
	r->buf_len = r->buf_cap = size;
	r->eof = 1;
	return read_header(r);
}

int tbp_reader_open(struct tbp_reader **out, const char *path)
{
	*out = NULL;
	if (!path)
		return TBP_ERR_ARG;
	struct tbp_reader *r = reader_new(path);
	if (!r)
		return TBP_ERR_NOMEM;
	*out = r;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		int e = errno;
		int st = e == ENOENT || e == ENOTDIR ? TBP_ERR_NOT_FOUND
			: e == EACCES || e == EPERM ? TBP_ERR_PERMISSION
			: e == EISDIR ? TBP_ERR_IS_DIR : TBP_ERR_IO;
		/* The status name says it; keep strerror only for odd errnos. */
		return fail(r, st, 0, "%s", st == TBP_ERR_IO ? strerror(e) : "");
	}
	struct stat sb;
	if (fstat(r->fd, &sb) == 0 && S_ISDIR(sb.st_mode))
		return fail(r, TBP_ERR_IS_DIR, 0, "%s", "");
	return read_header(r);
}

/* Looks for the seek table at the end of the input (doc 4): present and
 * well-formed means the writer closed the file, so it is complete. */
static void detect_complete(struct tbp_reader *r)
{
	uint8_t tail[8], head[8];
	uint64_t size;
	if (r->fd < 0) {
		size = r->buf_len;
		if (size < 16)
			return;
		memcpy(tail, r->buf + size - 8, 8);
	} else {
		struct stat sb;
		if (fstat(r->fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 16)
			return;
		size = (uint64_t)sb.st_size;
		if (pread(r->fd, tail, 8, (off_t)(size - 8)) != 8)
			return;
	}
	if (memcmp(tail + 4, "TBSK", 4))
		return;
	uint64_t table = 24 * (uint64_t)tbp_get_le32(tail) + 8;
	if (table + 8 > size)
		return;
	uint64_t at = size - table - 8;
	if (r->fd < 0)
		memcpy(head, r->buf + at, 8);
	else if (pread(r->fd, head, 8, (off_t)at) != 8)
		return;
	if (tbp_get_le32(head) != TBP_MAGIC_SEEK_FRAME || tbp_get_le32(head + 4) != table)
		return;
	r->complete = 1;
	r->seek_off = at;
}

/* ZSTD_findFrameCompressedSize() says "needs more input" both when the
 * file ends inside the frame and when a damaged block header claims a size
 * past the end.  Walk the block headers (RFC 8878 3.1) to tell them apart:
 * a block larger than the format allows, or of the reserved type, is
 * damage.  Returns 1 for damage, 0 for "plausibly cut short". */
static int frame_damaged(const uint8_t *p, size_t n)
{
	if (n < 6)
		return 0;
	uint8_t fhd = p[4];
	if (fhd & 0x08)
		return 1; /* reserved bit */
	unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, did_flag = fhd & 3;
	static const unsigned did_size[4] = {0, 1, 2, 4};
	static const unsigned fcs_size[4] = {0, 2, 4, 8};
	size_t off = 5 + (single ? 0 : 1) + did_size[did_flag] + (fcs_flag == 0 ? single : fcs_size[fcs_flag]);
	while (off + 3 <= n) {
		uint32_t bh = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16;
		unsigned last = bh & 1, type = (bh >> 1) & 3;
		uint32_t bsize = bh >> 3;
		if (type == 3 || bsize > ZSTD_BLOCKSIZE_MAX)
			return 1;
		off += 3 + (type == 1 ? 1 : bsize);
		if (last)
			return 0;
	}
	return 0;
}

/* Move to the next data frame: skip skippable frames, decompress one zstd
 * frame into r->content.  Returns TBP_OK, TBP_END or an error. */
static int next_frame(struct tbp_reader *r)
{
	for (;;) {
		long long have = window(r, 8);
		if (have < 0)
			return r->status;
		uint64_t off = cur_off(r);
		if (have == 0)
			return TBP_END;
		if (have < 4)
			return fail(r, TBP_ERR_TRUNCATED, off, "%lld stray bytes at end of file", have);
		uint32_t magic = tbp_get_le32(r->buf + r->pos);
		if ((magic & TBP_MAGIC_SKIPPABLE_MASK) == TBP_MAGIC_SKIPPABLE_BASE) {
			if (have < 8)
				return fail(r, TBP_ERR_TRUNCATED, off, "skippable frame header incomplete");
			uint32_t size = tbp_get_le32(r->buf + r->pos + 4);
			r->pos += 8;
			int rc = skip_bytes(r, size);
			if (rc < 0)
				return r->status;
			if (rc > 0)
				return fail(r, r->complete ? TBP_ERR_CORRUPT : TBP_ERR_TRUNCATED, off,
					"skippable frame of %u bytes runs past the end", size);
			continue;
		}
		if (magic != TBP_MAGIC_ZSTD)
			return fail(r, TBP_ERR_CORRUPT, off, "no zstd frame here (magic 0x%08x)", magic);

		/* Grow the window until the whole compressed frame is in it. */
		size_t fsize;
		size_t need = (size_t)have;
		for (;;) {
			fsize = ZSTD_findFrameCompressedSize(r->buf + r->pos, (size_t)have);
			if (!ZSTD_isError(fsize))
				break;
			if (ZSTD_getErrorCode(fsize) != ZSTD_error_srcSize_wrong)
				return fail(r, TBP_ERR_CORRUPT, off, "bad zstd frame: %s", ZSTD_getErrorName(fsize));
			if (r->eof && (size_t)have == r->buf_len - r->pos) {
				if (r->complete)
					return fail(r, TBP_ERR_CORRUPT, off,
						"frame runs past the end of a complete trace (damaged block header)");
				if (frame_damaged(r->buf + r->pos, (size_t)have))
					return fail(r, TBP_ERR_CORRUPT, off, "damaged zstd block header");
				return fail(r, TBP_ERR_TRUNCATED, off, "last frame incomplete");
			}
			if (need >= TBP_MAX_FRAME_COMPRESSED)
				return fail(r, TBP_ERR_CORRUPT, off, "frame larger than %u bytes", TBP_MAX_FRAME_COMPRESSED);
			need = need < READ_AHEAD ? READ_AHEAD : 2 * need;
			have = window(r, need);
			if (have < 0)
				return r->status;
		}
		if (r->complete && off < r->seek_off && off + fsize > r->seek_off)
			return fail(r, TBP_ERR_CORRUPT, off, "frame overlaps the seek table (damaged block header)");
		const uint8_t *src = r->buf + r->pos;
		unsigned long long csize = ZSTD_getFrameContentSize(src, fsize);
		if (csize == ZSTD_CONTENTSIZE_ERROR)
			return fail(r, TBP_ERR_CORRUPT, off, "bad zstd frame header");
		if (csize != ZSTD_CONTENTSIZE_UNKNOWN && csize > TBP_MAX_FRAME_CONTENT)
			return fail(r, TBP_ERR_CORRUPT, off, "frame content of %llu bytes exceeds the %u limit",
				csize, TBP_MAX_FRAME_CONTENT);
		size_t cap = csize == ZSTD_CONTENTSIZE_UNKNOWN ? READ_AHEAD : (size_t)csize;
		if (cap == 0)
			cap = 1;
		if (r->content_cap < cap) {
			uint8_t *p = realloc(r->content, cap);
			if (!p)
				return fail(r, TBP_ERR_NOMEM, off, "out of memory for a %zu-byte frame", cap);
			r->content = p;
			r->content_cap = cap;
		}
		ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
		ZSTD_inBuffer in = {src, fsize, 0};
		ZSTD_outBuffer zo = {r->content, r->content_cap, 0};
		for (;;) {
			size_t ret = ZSTD_decompressStream(r->dctx, &zo, &in);
			if (ZSTD_isError(ret)) {
				if (ZSTD_getErrorCode(ret) == ZSTD_error_checksum_wrong)
					return fail(r, TBP_ERR_CHECKSUM, off, "data frame %llu",
						(unsigned long long)r->frame_index);
				return fail(r, TBP_ERR_CORRUPT, off, "frame %llu: %s", (unsigned long long)r->frame_index,
					ZSTD_getErrorName(ret));
			}
			if (ret == 0)
				break;
			if (zo.pos == zo.size) {
				if (r->content_cap >= TBP_MAX_FRAME_CONTENT)
					return fail(r, TBP_ERR_CORRUPT, off, "frame content exceeds %u bytes",
						TBP_MAX_FRAME_CONTENT);
				size_t ncap = 2 * r->content_cap;
				uint8_t *p = realloc(r->content, ncap);
				if (!p)
					return fail(r, TBP_ERR_NOMEM, off, "out of memory");
				r->content = p;
				r->content_cap = ncap;
				zo.dst = p;
				zo.size = ncap;
			} else if (in.pos == in.size) {
				return fail(r, TBP_ERR_CORRUPT, off, "frame %llu ends early",
					(unsigned long long)r->frame_index);
			}
		}
		r->content_len = zo.pos;
		r->cpos = 0;
		r->frame_off = off;
		r->frame_index++;
		r->chunk_index = 0;
		r->chunk_left = 0;
		r->pos += fsize;
		return TBP_OK;
	}
}

static int bad_record(struct tbp_reader *r, const char *what)
{
	return fail(r, TBP_ERR_CORRUPT, r->frame_off, "frame %llu chunk %llu record %llu: %s",
		(unsigned long long)r->frame_index - 1, (unsigned long long)r->chunk_index - 1,
		(unsigned long long)r->record_index, what);
}

static int bad_chunk(struct tbp_reader *r, const char *what)
{
	return fail(r, TBP_ERR_CORRUPT, r->frame_off, "frame %llu chunk %llu: %s",
		(unsigned long long)r->frame_index - 1, (unsigned long long)r->chunk_index - 1, what);
}

static unsigned ncolumns(const struct tbp_schema_entry *se)
{
	return 1u + se->nfields + (se->has_blob ? 2u : 0u);
}

/* The kinds column when every kind is one byte and in the schema (always,
 * but for damage): r->count and r->present as the record-by-record loop in
 * open_chunk sets them, present already in increasing order (found from a
 * byte per kind marked while counting).  0 when it
 * cannot tell: that loop then runs and reports any error as before. */
static int count_kinds_fast(struct tbp_reader *r, const uint8_t *p, uint64_t count, const uint8_t *end)
{
	if (count > (uint64_t)(end - p))
		return 0;
	uint8_t *seen = r->kind_seen;
	uint64_t i = 0, ok = 1;
	for (; i + 4 <= count; i += 4) {
		unsigned k0 = p[i], k1 = p[i + 1], k2 = p[i + 2], k3 = p[i + 3];
		if ((k0 | k1 | k2 | k3) >= 0x80) {
			ok = 0;
			break;
		}
		r->tally[0][k0]++;
		r->tally[1][k1]++;
		r->tally[2][k2]++;
		r->tally[3][k3]++;
		seen[k0] = seen[k1] = seen[k2] = seen[k3] = 1;
	}
	for (; ok && i < count; i++) {
		unsigned k = p[i];
		if (k >= 0x80) {
			ok = 0;
			break;
		}
		r->tally[0][k]++;
		seen[k] = 1;
	}
	/* Hand the tallies and marks back zeroed either way; kinds present in
	 * increasing order. */
	for (unsigned w = 0; w < 128 / 8; w++) {
		uint64_t bytes;
		memcpy(&bytes, seen + 8 * w, 8);
		for (; bytes; bytes &= bytes - 1) {
			/* A mark is the byte 1: clearing the lowest set bit
			 * clears one kind's mark. */
			unsigned k = 8 * w + (unsigned)__builtin_ctzll(bytes) / 8;
			seen[k] = 0;
			uint32_t n = r->tally[0][k] + r->tally[1][k] + r->tally[2][k] + r->tally[3][k];
			r->tally[0][k] = r->tally[1][k] = r->tally[2][k] = r->tally[3][k] = 0;
			if (!r->schema.kind[k].present)
				ok = 0;
			if (ok) {
				r->count[k] = n;
				r->present[r->npresent++] = (uint8_t)k;
			}
		}
	}
	if (!ok) {
		for (unsigned j = 0; j < r->npresent; j++)
			r->count[r->present[j]] = 0;
		r->npresent = 0;
	}
	return (int)ok;
}

#if TBP_HAVE_X86
/* The bytes under 0x80 in p[0, len), len a multiple of 32: 32 a step, the
 * high bits' mask counted (ISA_X86 has AVX2 and POPCNT). */
static __attribute__((target("avx2,popcnt"))) uint64_t count_ends_avx2(const uint8_t *p, size_t len)
{
	uint64_t high = 0;
	for (size_t i = 0; i < len; i += 32)
		high += (uint64_t)__builtin_popcount(
			(unsigned)_mm256_movemask_epi8(_mm256_loadu_si256((const __m256i *)(p + i))));
	return len - high;
}
#endif

/* A column of a field the caller left out (tbp_reader_limit_fields): not
 * decoded, but checked to hold exactly `count` values, as decoding it
 * would (a plain column: as many varints, each ending in the column, the
 * last at its end; runs: entries whose lengths add up to count), and
 * marked used up for close_chunk.  Nonzero when it does not. */
static int skip_column(struct kind_cursor *kc, unsigned c, uint64_t count)
{
	const uint8_t *p = kc->pos[c], *e = kc->end[c];
	if (kc->runs && kc->col_runs[c]) {
		/* Every entry to the column's end, then their lengths' sum
		 * against count: the same answer as stopping at count (more
		 * entries after it, or one that passes it, make the sum larger;
		 * at most 65 536 a byte, it cannot wrap). */
		uint64_t n = 0;
		const uint8_t *e1 = e - 1;
		while (p < e) {
			/* One-byte entries of one record (high and low bits
			 * clear), then a one-byte value with a one-byte length
			 * (+ 2). */
			while (p < e && !(*p & 0x81)) {
				p++;
				n++;
			}
			if (p < e1 && *p < 0x80 && p[1] < 0x80) {
				n += p[1] + 2u;
				p += 2;
				continue;
			}
			if (p == e)
				break;
			uint64_t x;
			uint32_t len;
			if (tbp_get_run(&p, e, &x, &len))
				return -1;
			n += len;
		}
		if (n != count)
			return -1;
	} else {
		/* A varint ends at each byte without the continuation bit. */
		uint64_t ends = 0;
		size_t len = (size_t)(e - p), i = 0;
#if TBP_HAVE_X86
		if (kc->isa == ISA_X86) {
			ends = count_ends_avx2(p, len & ~(size_t)31);
			i = len & ~(size_t)31;
		}
#endif
		while (i + 16 <= len) {
			/* Sixteen bytes at a time: each byte lane counts the
			 * bytes that end a varint (as signed bytes, those >= 0:
			 * the comparison's -1 subtracted), for at most 255
			 * blocks, then the lanes are summed. */
			typedef int8_t i8x16 __attribute__((vector_size(16)));
			typedef uint8_t u8x16 __attribute__((vector_size(16)));
			u8x16 lanes = {0};
			size_t stop = len - i >= 16 * 255 ? i + 16 * 255 : i + ((len - i) & ~(size_t)15);
			for (; i < stop; i += 16) {
				i8x16 v;
				memcpy(&v, p + i, 16);
				lanes -= (u8x16)(v > -1);
			}
			uint64_t half[2];
			memcpy(half, &lanes, 16);
			for (unsigned h = 0; h < 2; h++)
				ends += ((half[h] & 0x00ff00ff00ff00ffull) + ((half[h] >> 8) & 0x00ff00ff00ff00ffull)) *
						0x0001000100010001ull >> 48;
		}
		for (; i < len; i++)
			ends += p[i] < 0x80;
		if (ends != count || (len && e[-1] >= 0x80))
			return -1;
		p = e;
	}
	if (p != e)
		return -1;
	kc->pos[c] = e;
	kc->run_left[c] = 0;
	return 0;
}

/* Parse a chunk header and locate its columns (doc/trace-format.md 3.1). */
static int open_chunk(struct tbp_reader *r)
{
	const uint8_t *base = r->content, *p = base + r->cpos, *end = base + r->content_len;
	uint64_t sk, sid, count;
	r->chunk_index++;
	r->record_index = 0;
	if (tbp_get_varint(&p, end, &sk) || tbp_get_varint(&p, end, &sid) || tbp_get_varint(&p, end, &count))
		return bad_chunk(r, "chunk header runs past the frame");
	/* Version 1: every record takes at least two bytes (its kind and its
	 * ts).  Version 2: runs take no bytes per record; a chunk holds at
	 * most TBP_CHUNK_MAX_RECORDS. */
	if (sk > 255 || (r->runs ? count > TBP_CHUNK_MAX_RECORDS : count > (uint64_t)(end - p) / 2))
		return bad_chunk(r, "impossible chunk header");
	r->stream_kind = (unsigned)sk;
	r->stream_id = sid;
	r->chunk_left = count;
	r->saw_events |= count > 0 && sk != TBP_STREAM_DEFS;
	r->kinds_pos = 0;
	/* Kinds column: count the records of each kind. */
	for (unsigned i = 0; i < r->npresent; i++)
		r->count[r->present[i]] = 0;
	r->npresent = 0;
	if (!r->runs && count_kinds_fast(r, p, count, end)) {
		r->kinds = p;
		p += count;
		goto counted;
	}
	if (r->kinds_buf_cap < count) {
		/* Version 1 with a kind over 127 (a later writer's), or version
		 * 2: one byte per record, at most TBP_CHUNK_MAX_RECORDS or half
		 * the frame's content. */
		size_t cap = r->kinds_buf_cap ? r->kinds_buf_cap : 4096;
		while (cap < count)
			cap *= 2;
		/* Eight bytes more: a short run is stored as one word. */
		uint8_t *nb = realloc(r->kinds_buf, cap + 8);
		if (!nb)
			return fail(r, TBP_ERR_NOMEM, r->frame_off, "out of memory");
		r->kinds_buf = nb;
		r->kinds_buf_cap = cap;
	}
	r->kinds = r->kinds_buf;
	for (uint64_t i = 0; i < count;) {
		uint64_t kind;
		uint32_t n = 1;
		if (r->runs) {
			/* A one-byte entry of one record, or a one-byte entry and a
			 * one-byte length (a thread's launches among its spans),
			 * inline; anything else through tbp_get_run. */
			if (p < end && !(*p & 0x81)) {
				kind = *p++ >> 1;
			} else if (end - p >= 2 && *p < 0x80 && p[1] < 0x80) {
				kind = *p >> 1;
				n = p[1] + 2u;
				p += 2;
			} else if (tbp_get_run(&p, end, &kind, &n)) {
				return bad_chunk(r, "kinds column runs past the frame");
			}
			if (n > count - i)
				return bad_chunk(r, "kinds column longer than the chunk");
		} else if (p < end && *p < 0x80) {
			kind = *p++;
		} else if (tbp_get_varint(&p, end, &kind)) {
			return bad_chunk(r, "kinds column runs past the frame");
		}
		if (kind > TBP_SCHEMA_MAX_KIND || !r->schema.kind[kind].present)
			return bad_chunk(r, "record kind not in the header's schema");
		if (r->count[kind] == 0)
			r->present[r->npresent++] = (uint8_t)kind;
		r->count[kind] += n;
		if (n <= 8) {
			uint64_t word = 0x0101010101010101ull * (uint8_t)kind;
			memcpy(r->kinds_buf + i, &word, 8);
		} else {
			memset(r->kinds_buf + i, (int)kind, n);
		}
		i += n;
	}
counted:
	/* Column sections follow in increasing kind order. */
	for (unsigned i = 1; i < r->npresent; i++)
		for (unsigned j = i; j > 0 && r->present[j - 1] > r->present[j]; j--) {
			uint8_t t = r->present[j];
			r->present[j] = r->present[j - 1];
			r->present[j - 1] = t;
		}
	for (unsigned i = 0; i < r->npresent; i++) {
		unsigned k = r->present[i];
		const struct tbp_schema_entry *se = &r->schema.kind[k];
		struct kind_cursor *kc = r->cur[k];
		if (!kc) {
			kc = r->cur[k] = calloc(1, sizeof *kc);
			if (!kc)
				return fail(r, TBP_ERR_NOMEM, r->frame_off, "out of memory");
			kc->ki = tbp_kind_lookup(k);
			kc->ncols = 1u + se->nfields;
			kc->has_blob = se->has_blob;
			kc->end_from_ts = se->end_from_ts && se->nfields > 0;
			kc->runs = (uint8_t)r->runs;
			kc->isa = (uint8_t)r->isa;
			kc->nout = kc->ki ? (se->nfields < kc->ki->nfields ? se->nfields : kc->ki->nfields) : 0;
			kc->ndec = kc->ncols;
			if (r->limit[k] && r->limit[k] < se->nfields) {
				if (kc->nout > r->limit[k])
					kc->nout = r->limit[k];
				kc->ndec = 1u + kc->nout;
			}
		}
		unsigned nc = ncolumns(se);
		for (unsigned c = 0; c < nc; c++) {
			uint64_t len;
			if (tbp_get_varint(&p, end, &len) || len > (uint64_t)(end - p))
				return bad_chunk(r, "column runs past the frame");
			kc->pos[c] = p;
			kc->end[c] = p + len;
			p += len;
			if (kc->runs && c < kc->ncols) {
				/* Version 2: the column's coding, first. */
				if (len == 0 || *kc->pos[c] > TBP_COLUMN_RUNS)
					return bad_chunk(r, "column without a known coding");
				kc->col_runs[c] = *kc->pos[c]++;
				kc->run_left[c] = 0;
			}
		}
		for (unsigned c = kc->ndec; c < kc->ncols; c++)
			if (skip_column(kc, c, r->count[k]))
				return bad_chunk(r, "column of a field left out does not match its records");
		memset(kc->prev, 0, sizeof kc->prev);
		kc->head.kind = (uint8_t)k;
		kc->head.stream_kind = (uint8_t)r->stream_kind;
		kc->head.nfields = (uint16_t)kc->nout;
		kc->head.tid = (uint32_t)r->stream_id;
		kc->left = r->count[k];
		kc->bi = kc->bn = 0;
		kc->err = NULL;
	}
	r->chunk_end = (size_t)(p - base);
	return TBP_OK;
}

/* After the last record: every column must have been used up exactly. */
static int close_chunk(struct tbp_reader *r)
{
	for (unsigned i = 0; i < r->npresent; i++) {
		unsigned k = r->present[i];
		const struct kind_cursor *kc = r->cur[k];
		unsigned nc = ncolumns(&r->schema.kind[k]);
		for (unsigned c = 0; c < nc; c++)
			if (kc->pos[c] != kc->end[c] || (kc->runs && c < kc->ncols && kc->col_runs[c] && kc->run_left[c]))
				return bad_chunk(r, "column longer than its records");
	}
	r->cpos = r->chunk_end;
	return TBP_OK;
}

/* tbp_get_varint with three-byte varints inline (deltas of tens of
 * microseconds); longer ones, and any that runs short, take tbp_get_varint,
 * so every input decodes, or fails, exactly as there. */
static inline int get_varint3(const uint8_t **pp, const uint8_t *e, uint64_t *out)
{
	const uint8_t *p = *pp;
	if (e - p >= 3 && p[2] < 0x80 && (p[0] & p[1] & 0x80)) {
		*out = (p[0] & 0x7fu) | (uint64_t)(p[1] & 0x7fu) << 7 | (uint64_t)p[2] << 14;
		*pp = p + 3;
		return 0;
	}
	return tbp_get_varint(pp, e, out);
}

/* A varint of one, two or three bytes inline (nearly all of them: small
 * deltas), longer ones through get_varint3.  Nonzero when malformed. */
static inline int get_varint_small(const uint8_t **pp, const uint8_t *e, uint64_t *z)
{
	const uint8_t *p = *pp;
	if (__builtin_expect(p < e && *p < 0x80, 1)) {
		*z = *p;
		*pp = p + 1;
		return 0;
	}
	if (e - p >= 2 && p[1] < 0x80) {
		*z = (p[0] & 0x7fu) | (uint64_t)p[1] << 7;
		*pp = p + 2;
		return 0;
	}
	return get_varint3(pp, e, z);
}

/* Four two-byte varints in the eight bytes w (bytes 0, 2, 4, 6 carry the
 * continuation bit, 1, 3, 5, 7 do not): their values, one per 16-bit lane
 * (the low seven bits of the first byte, then seven of the second). */
#define TWO_BYTE4_MASK 0x8080808080808080ull
#define TWO_BYTE4_BITS 0x0080008000800080ull
static inline uint64_t two_byte4(uint64_t w)
{
	return (w & 0x007f007f007f007full) | ((w >> 1) & 0x3f803f803f803f80ull);
}
/* The four 14-bit zigzag values of two_byte4 as the deltas they code, each
 * a signed 16-bit lane (-8192..8191): one unzigzag for the four. */
static inline uint64_t unzigzag_lanes16(uint64_t z4)
{
	return ((z4 >> 1) & 0x1fff1fff1fff1fffull) ^ ((z4 & 0x0001000100010001ull) * 0xffff);
}
/* The four deltas of a TWO_BYTE4 word, each a signed 16-bit lane, as
 * unzigzag_lanes16(two_byte4(w)) gives them: on ISA_X86 each varint's
 * magnitude bits (all but the zigzag sign, bit 0 of its first byte) moved
 * to its lane by pext and pdep, their masks read from memory (no 10-byte
 * constant loads), the sign already at the lane's bit 0 in w. */
#if TBP_HAVE_X86
static const uint64_t two_byte4_magnitude = 0x7f7e7f7e7f7e7f7eull, lanes16_low13 = 0x1fff1fff1fff1fffull;
#endif
static inline uint64_t two_byte4_deltas(uint64_t w, const int isa)
{
#if TBP_HAVE_X86
	if (isa == ISA_X86) {
		uint64_t m;
		__asm__("pextq %1, %0, %0\n\tpdepq %2, %0, %0"
			: "=r"(m)
			: "m"(two_byte4_magnitude), "m"(lanes16_low13), "0"(w));
		return m ^ ((w & 0x0001000100010001ull) * 0xffff);
	}
#endif
	(void)isa;
	return unzigzag_lanes16(two_byte4(w));
}
static inline uint64_t lane16(uint64_t d4, unsigned t)
{
	return (uint64_t)(int64_t)(int16_t)(uint16_t)(d4 >> (16 * t));
}
/* Two three-byte varints in the first six bytes of w (bytes 0, 1, 3, 4 carry
 * the continuation bit, 2 and 5 do not): their values in bits 0..20 and
 * 24..44 (timestamp deltas of tens of microseconds). */
#define THREE_BYTE2_MASK 0x0000808080808080ull
#define THREE_BYTE2_BITS 0x0000008080008080ull
static inline uint64_t three_byte2(uint64_t w)
{
	return (w & 0x00007f00007full) | ((w >> 1) & 0x003f80003f80ull) | ((w >> 2) & 0x1fc0001fc000ull);
}

/* The lanes of one word: straight-line code, not a loop (-O2 does not
 * unroll these by itself). */
#if defined(__clang__)
#define TBP_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define TBP_UNROLL _Pragma("GCC unroll 8")
#else
#define TBP_UNROLL
#endif

/* The eight bytes of w, each a one-byte varint (its high bit clear), as
 * the eight deltas they code, each a signed byte (-64..63). */
static inline uint64_t unzigzag_bytes(uint64_t w)
{
	return ((w >> 1) & 0x7f7f7f7f7f7f7f7full) ^ ((w & 0x0101010101010101ull) * 0xff);
}

/* Cell i of a batch's rows (row i / ROW, column i % ROW), through a byte
 * pointer to the whole array: the rows after a row are reached without
 * pointer arithmetic past the end of that row. */
static inline void cell_put(uint8_t *cells, size_t i, uint64_t v)
{
	memcpy(cells + 8 * i, &v, 8);
}

static inline uint64_t cell_get(const uint8_t *cells, size_t i)
{
	uint64_t v;
	memcpy(&v, cells + 8 * i, 8);
	return v;
}

/* The delta of each six-bit zigzag value: a one-byte run entry's without a
 * shift, a negation and an exclusive or. */
static const int8_t unzigzag6[64] = {
	0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5, -6, 6, -7, 7, -8,
	8, -9, 9, -10, 10, -11, 11, -12, 12, -13, 13, -14, 14, -15, 15, -16,
	16, -17, 17, -18, 18, -19, 19, -20, 20, -21, 21, -22, 22, -23, 23, -24,
	24, -25, 25, -26, 26, -27, 27, -28, 28, -29, 29, -30, 30, -31, 31, -32,
};

/* One run entry: a one-byte entry (a run of one small delta: a timestamp
 * column, or the first entry of a constant column) inline, anything else
 * through tbp_get_run.  Nonzero when malformed. */
static inline __attribute__((always_inline)) int get_run(const uint8_t **pp, const uint8_t *e, uint64_t *delta, uint32_t *n,
	const int not_one_byte)
{
	const uint8_t *p = *pp;
	uint64_t z;
	if (!not_one_byte && __builtin_expect(p < e && *p < 0x80 && !(*p & 1), 1)) {
		z = *p >> 1;
		*n = 1;
		*pp = p + 1;
	} else if (e - p >= 4) {
		/* The entries of short runs: a value of one or two bytes, a
		 * run of one or a length of one byte after it (a kernel's
		 * duration repeated a few times, an id's step). */
		uint32_t w = tbp_get_le32(p);
		if (!(w & 0x80)) {
			if (w & 0x8000)
				goto general;
			/* One-byte value, more set: the length byte follows. */
			z = (w & 0x7f) >> 1;
			*n = ((w >> 8) & 0x7f) + 2;
			*pp = p + 2;
		} else if (!(w & 0x8000)) {
			uint32_t v = (w & 0x7f) | (w >> 1 & 0x3f80);
			z = v >> 1;
			if (!(v & 1)) {
				*n = 1;
				*pp = p + 2;
			} else if (!(w & 0x800000)) {
				*n = ((w >> 16) & 0x7f) + 2;
				*pp = p + 3;
			} else {
				goto general;
			}
		} else {
			goto general;
		}
	} else {
	general:
		if (tbp_get_run(pp, e, &z, n))
			return -1;
	}
	*delta = tbp_unzigzag(z);
	return 0;
}

/* One column coded as runs (version 2) into rows 0..ok of the batch: a
 * run fills its rows without reading a byte per record, and a run of zero
 * deltas over rows that already hold the column's value (from the last
 * full batch) writes nothing, as fill_batch's constant columns.  Returns
 * the rows filled (fewer than ok: the column ran short). */
static inline __attribute__((always_inline)) unsigned column_runs(struct kind_cursor *kc, unsigned c, unsigned ok,
	int dur, int keep)
{
	uint8_t *cells = (uint8_t *)kc->row;
	const uint8_t *p = kc->pos[c], *e = kc->end[c];
	uint64_t acc = kc->prev[c], d = kc->run_delta[c];
	uint32_t left = kc->run_left[c];
	uint32_t cbit = 1u << (c % 32), *cword = &kc->const_cols[c / 32];
	/* The rows this batch has not written yet hold `held` (the bit:
	 * kc->row's column holds one value).  A run of zero deltas over them
	 * writes nothing when that is the value; a chunk's first entry (the
	 * value itself, as a delta from 0) moves only row 0. */
	int hold_init = keep && !dur && (*cword & cbit);
	uint64_t held = kc->const_val[c];
	int late_move = dur; /* a move after row 0 (a duration: always) */
	unsigned j = 0;
	size_t oc = c; /* row j's cell of the column, kept beside j */
	while (j < ok) {
		if (left == 0) {
			if (keep) {
				/* Runs of one record whose entry is one byte or two (a
				 * column that moves by small, varying steps, a
				 * kernel's duration): a value per entry, without the
				 * run bookkeeping.  A two-byte entry: the first byte's
				 * high bit set and low bit (more) clear, the second's
				 * high bit clear. */
				uint64_t moved = 0;
				const uint8_t *e1 = e - 1;
				while (j < ok && p < e1) {
					unsigned b0 = p[0];
					if (!(b0 & 0x81)) {
						d = (uint64_t)(int64_t)unzigzag6[b0 >> 1];
						p++;
					} else if ((b0 & 0x81) == 0x80 && p[1] < 0x80) {
						d = tbp_unzigzag(((b0 & 0x7f) | (unsigned)p[1] << 7) >> 1);
						p += 2;
					} else {
						/* A short run inside the batch: a one-byte value
						 * and a one-byte length (a call path repeated two
						 * or three times), or a two-byte value and a
						 * one-byte length (a kernel's duration). */
						unsigned n;
						if ((b0 & 0x81) == 0x01 && p[1] < 0x80 && p[1] + 2u <= ok - j) {
							d = (uint64_t)(int64_t)unzigzag6[b0 >> 1];
							n = p[1] + 2u;
							p += 2;
						} else if ((b0 & 0x81) == 0x81 && p[1] < 0x80 && e - p >= 3 && p[2] < 0x80 &&
							   p[2] + 2u <= ok - j) {
							d = tbp_unzigzag(((b0 & 0x7f) | (unsigned)p[1] << 7) >> 1);
							n = p[2] + 2u;
							p += 3;
						} else {
							break;
						}
						if (!dur)
							moved |= d;
						unsigned t = 0;
						if (dur) {
							/* Four rows a step (a duration repeated for
							 * up to 129 kernels). */
							for (; t + 4 <= n; t += 4, oc += 4 * ROW) {
								cell_put(cells, oc, cell_get(cells, oc - c) + d);
								cell_put(cells, oc + ROW, cell_get(cells, oc + ROW - c) + d);
								cell_put(cells, oc + 2 * ROW, cell_get(cells, oc + 2 * ROW - c) + d);
								cell_put(cells, oc + 3 * ROW, cell_get(cells, oc + 3 * ROW - c) + d);
							}
						}
						for (; t < n; t++, oc += ROW) {
							if (dur) {
								cell_put(cells, oc, cell_get(cells, oc - c) + d);
							} else {
								acc += d;
								cell_put(cells, oc, acc);
							}
						}
						j += n;
						continue;
					}
					if (dur) {
						cell_put(cells, oc, cell_get(cells, oc - c) + d);
					} else {
						moved |= d;
						acc += d;
						cell_put(cells, oc, acc);
					}
					j++;
					oc += ROW;
				}
				if (moved)
					late_move = 1;
				if (j == ok)
					break;
			}
			/* A kept column's one-byte entries of one record were
			 * taken above: the next is not one, but for its last byte. */
			if (get_run(&p, e, &d, &left, 0))
				break;
		}
		unsigned take = left < ok - j ? left : ok - j;
		left -= take;
		size_t o = oc;
		if (dur) {
			if (keep) {
				/* Four rows a step: a run covers many (a kernel's
				 * constant duration, a stream of equal copies). */
				unsigned t = 0;
				for (; t + 4 <= take; t += 4, o += 4 * ROW) {
					cell_put(cells, o, cell_get(cells, o - c) + d);
					cell_put(cells, o + ROW, cell_get(cells, o + ROW - c) + d);
					cell_put(cells, o + 2 * ROW, cell_get(cells, o + 2 * ROW - c) + d);
					cell_put(cells, o + 3 * ROW, cell_get(cells, o + 3 * ROW - c) + d);
				}
				for (; t < take; t++, o += ROW)
					cell_put(cells, o, cell_get(cells, o - c) + d);
			}
		} else if (d == 0) {
			if (keep && !(hold_init && held == acc))
				for (unsigned t = 0; t < take; t++)
					cell_put(cells, o + t * ROW, acc);
		} else {
			if (j || take > 1)
				late_move = 1;
			if (keep) {
				/* Four rows a step (a correlation id's run of
				 * steps of one). */
				unsigned t = 0;
				for (; t + 4 <= take; t += 4, o += 4 * ROW) {
					cell_put(cells, o, acc + d);
					cell_put(cells, o + ROW, acc + 2 * d);
					cell_put(cells, o + 2 * ROW, acc + 3 * d);
					acc += 4 * d;
					cell_put(cells, o + 3 * ROW, acc);
				}
				for (; t < take; t++, o += ROW) {
					acc += d;
					cell_put(cells, o, acc);
				}
			} else {
				acc += d * take;
			}
		}
		j += take;
		oc += (size_t)take * ROW;
	}
	/* Every row now holds acc if the value moved at row 0 at most, and the
	 * rows past the last written hold it already. */
	if (keep && !late_move && (j == BATCH || (hold_init && held == acc))) {
		*cword |= cbit;
		kc->const_val[c] = acc;
	} else {
		*cword &= ~cbit;
	}
	kc->pos[c] = p;
	kc->prev[c] = acc;
	kc->run_delta[c] = d;
	kc->run_left[c] = left;
	return j;
}

/* column_runs with its two column types made constants: -O2 does not take
 * the tests of the loops out of them itself. */
static inline __attribute__((always_inline)) unsigned fill_column_runs(struct kind_cursor *kc, unsigned c, unsigned ok)
{
	int dur = c == 1 && kc->end_from_ts; /* end = ts + duration */
	int keep = c <= kc->nout;
	if (keep && dur)
		return column_runs(kc, c, ok, 1, 1);
	if (keep)
		return column_runs(kc, c, ok, 0, 1);
	return column_runs(kc, c, ok, dur, 0);
}

/* Decodes the next min(BATCH, left) records of one kind into kc->row.
 * A column that runs short or holds a bad varint stops the batch at the
 * first record it cannot complete: the records before it are handed out
 * first, then that record reports the error (as a record-at-a-time reader
 * would). */
static inline __attribute__((always_inline)) void fill_batch_body(struct kind_cursor *kc, const int isa)
{
	unsigned m = kc->left < BATCH ? kc->left : BATCH;
	uint8_t *cells = (uint8_t *)kc->row;
	unsigned ok = m;
	const char *err = NULL;
	for (unsigned c = 0; c < kc->ndec; c++) {
		if (kc->runs && kc->col_runs[c]) {
			/* A run of zero deltas over the whole batch in a column whose
			 * rows hold its value already (a launch's result, device and
			 * stream, a kernel's device, context and stream): what
			 * column_runs would do, without its setup. */
			if (kc->run_left[c] >= ok && kc->run_delta[c] == 0 && (kc->const_cols[c / 32] >> (c % 32) & 1) &&
			    kc->const_val[c] == kc->prev[c] && c <= kc->nout && !(c == 1 && kc->end_from_ts)) {
				kc->run_left[c] -= ok;
				continue;
			}
			unsigned j = fill_column_runs(kc, c, ok);
			if (j < ok) {
				ok = j;
				err = "column shorter than its records";
			}
			continue;
		}
		const uint8_t *p = kc->pos[c], *e = kc->end[c];
		uint64_t acc = kc->prev[c];
		int dur = c == 1 && kc->end_from_ts; /* end = ts + duration */
		int keep = c <= kc->nout;
		unsigned j = 0;
		if (!dur && keep) {
			/* The common column: a running sum of zigzag deltas. */
			uint32_t cbit = 1u << (c % 32), *cword = &kc->const_cols[c / 32];
			int rows_hold_acc = (*cword & cbit) && kc->const_val[c] == acc;
			uint64_t changed = 0;
			/* A column that already holds its value in every row and
			 * does not move in this whole batch: BATCH zero deltas, one
			 * check. */
			if (rows_hold_acc && ok == BATCH && e - p >= BATCH) {
				uint64_t wz[BATCH / 8], any = 0;
				memcpy(wz, p, sizeof wz);
				TBP_UNROLL
				for (unsigned t = 0; t < BATCH / 8; t++)
					any |= wz[t];
				if (!any) {
					p += BATCH;
					j = BATCH;
				}
			}
			/* A word of input at a time: its leading one-byte varints
			 * (up to eight: small deltas, the usual case) in one go,
			 * else two-byte varints four at a time, three-byte ones
			 * two at a time, or one of two or three bytes. */
			/* Past this, fewer than eight bytes are left (as a number:
			 * one compare a word). */
			uintptr_t last_word = (uintptr_t)e - 8;
			/* Row j's cell of the column, kept beside j (no multiply a
			 * store). */
			size_t oc = (size_t)j * ROW + c;
			while (j < ok) {
				if (__builtin_expect((uintptr_t)p > last_word, 0)) {
					uint64_t z;
					if (get_varint_small(&p, e, &z))
						break;
					changed |= z;
					acc += tbp_unzigzag(z);
					cell_put(cells, oc, acc);
					j++;
					oc += ROW;
					continue;
				}
				uint64_t w;
				memcpy(&w, p, 8);
				uint64_t cont = w & 0x8080808080808080ull;
				if (!(cont & 0x80)) {
					unsigned k = cont ? (unsigned)__builtin_ctzll(cont) >> 3 : 8;
					size_t o = oc;
					if (k >= ok - j)
						k = ok - j;
					if (k == 8) {
						changed |= w;
						if (!w) { /* eight repeats of the previous value */
							if (!rows_hold_acc || acc != kc->const_val[c]) {
								TBP_UNROLL
								for (unsigned t = 0; t < 8; t++)
									cell_put(cells, o + t * ROW, acc);
							}
						} else {
							/* Unzigzag all eight bytes at once: byte t
							 * of d is delta t as a signed byte (a
							 * one-byte varint's delta lies in -64..63). */
							uint64_t d = unzigzag_bytes(w);
							TBP_UNROLL
							for (unsigned t = 0; t < 8; t++) {
								acc += (uint64_t)(int64_t)(int8_t)(uint8_t)(d >> (8 * t));
								cell_put(cells, o + t * ROW, acc);
							}
						}
					} else {
						changed |= w & ((1ull << (8 * k)) - 1);
						uint64_t d = unzigzag_bytes(w);
						for (unsigned t = 0; t < k; t++, d >>= 8) {
							acc += (uint64_t)(int64_t)(int8_t)(uint8_t)d;
							cell_put(cells, o + t * ROW, acc);
						}
					}
					p += k;
					j += k;
					oc += (size_t)k * ROW;
					continue;
				}
				if (cont == TWO_BYTE4_BITS && j + 4 <= ok) {
					/* Four two-byte varints (timestamp and end deltas
					 * of a few microseconds), before the table: it
					 * leaves them out, its lookup would be lost. */
					/* A lane's delta is 0 exactly when its zigzag
					 * value is. */
					uint64_t d4 = two_byte4_deltas(w, isa);
					changed |= d4;
					size_t o = oc;
					TBP_UNROLL
					for (unsigned t = 0; t < 4; t++) {
						acc += lane16(d4, t);
						cell_put(cells, o + t * ROW, acc);
					}
					p += 8;
					j += 4;
					oc += 4 * ROW;
					continue;
				}
				if (isa == ISA_X86 && j + 3 <= ok && varint3_tab[bmi2_pext_high(w)].n) {
					/* Two or three varints of up to three bytes a
					 * word (timestamps: two and three bytes, mixed),
					 * while the words hold them (varint3_tab). */
					for (;;) {
						/* Steps that cannot pass the batch's rows (a
						 * step takes at most three) nor the column's
						 * last word (at most eight bytes): only the
						 * table's answer is tested in them. */
						if ((uintptr_t)p > last_word)
							break;
						size_t steps = (ok - j) / 3, words = (size_t)(last_word - (uintptr_t)p) / 8 + 1;
						if (words < steps)
							steps = words;
						if (!steps)
							break;
						do {
							memcpy(&w, p, 8);
							const struct varint3 *vt = &varint3_tab[bmi2_pext_high(w)];
							if (!vt->n)
								goto next_word;
							/* Varint t's magnitude in lane t, bits 21 t..,
							 * its sign at bit 21 t of s. */
							uint64_t x = bmi2_pdep(bmi2_pext(w, vt->magnitude), vt->lanes);
							uint64_t s = bmi2_pdep(bmi2_pext(w, vt->signs), lanes21_bit0);
							/* Unzigzagged in each lane at once (a sign
							 * becomes all its lane's 21 bits: no carry),
							 * then each lane as a signed 21-bit delta.
							 * A lane is 0 exactly when its varint is.
							 * A third lane without a varint is 0: its
							 * row gets the second one's value, stored
							 * again by the next step (j + 2 < ok). */
							x ^= s * 0x1fffff;
							changed |= x;
							uint64_t a0 = acc + (uint64_t)((int64_t)(x << 43) >> 43);
							uint64_t a1 = a0 + (uint64_t)((int64_t)(x << 22) >> 43);
							acc = a1 + (uint64_t)((int64_t)(x << 1) >> 43);
							cell_put(cells, oc, a0);
							cell_put(cells, oc + ROW, a1);
							cell_put(cells, oc + 2 * ROW, acc);
							p += vt->bytes;
							j += vt->n;
							oc += vt->cells;
						} while (--steps);
					}
				next_word:
					continue;
				}
				/* The first varint's length picks the word's one
				 * pattern left to try (it implies it): two three-byte
				 * ones; else that one alone (most words here are
				 * neither pattern). */
				uint64_t z;
				if (!(cont & 0x8000)) {
					z = (w & 0x7f) | ((w >> 1) & 0x3f80);
					p += 2;
				} else if (!(cont & 0x800000)) {
					if (j + 2 <= ok && (w & THREE_BYTE2_MASK) == THREE_BYTE2_BITS) {
						uint64_t z2 = three_byte2(w);
						changed |= z2;
						size_t o = oc;
						acc += tbp_unzigzag(z2 & 0x1fffff);
						cell_put(cells, o, acc);
						acc += tbp_unzigzag(z2 >> 24);
						cell_put(cells, o + ROW, acc);
						p += 6;
						j += 2;
						oc += 2 * ROW;
						continue;
					}
					z = (w & 0x7f) | ((w >> 1) & 0x3f80) | ((w >> 2) & 0x1fc000);
					p += 3;
				} else if (get_varint_small(&p, e, &z)) {
					break;
				}
				changed |= z;
				acc += tbp_unzigzag(z);
				cell_put(cells, oc, acc);
				j++;
				oc += ROW;
			}
			/* Every row of the column now holds acc only if the batch was
			 * full and the value never moved. */
			if (j == BATCH && !changed) {
				*cword |= cbit;
				kc->const_val[c] = acc;
			} else {
				*cword &= ~cbit;
			}
		} else if (dur && keep) {
			/* end = ts + duration: durations of a few microseconds
			 * are two-byte varints, four at a time. */
			uintptr_t last_word = (uintptr_t)e - 8;
			size_t oc = c; /* row j's cell of the column, kept beside j */
			for (; j < ok; j++, oc += ROW) {
				uint64_t w;
				if ((uintptr_t)p <= last_word) {
					memcpy(&w, p, 8);
					if (j + 4 <= ok && (w & TWO_BYTE4_MASK) == TWO_BYTE4_BITS) {
						uint64_t d4 = two_byte4_deltas(w, isa);
						size_t o = oc;
						size_t tsx = oc - c;
						TBP_UNROLL
						for (unsigned t = 0; t < 4; t++)
							cell_put(cells, o + t * ROW, cell_get(cells, tsx + t * ROW) + lane16(d4, t));
						acc = cell_get(cells, o + 3 * ROW);
						p += 8;
						j += 3;
						oc += 3 * ROW;
						continue;
					}
					if (j + 2 <= ok && (w & THREE_BYTE2_MASK) == THREE_BYTE2_BITS) {
						uint64_t z2 = three_byte2(w);
						size_t o = oc;
						size_t tsx = oc - c;
						cell_put(cells, o, cell_get(cells, tsx) + tbp_unzigzag(z2 & 0x1fffff));
						acc = cell_get(cells, tsx + ROW) + tbp_unzigzag(z2 >> 24);
						cell_put(cells, o + ROW, acc);
						p += 6;
						j += 1;
						oc += ROW;
						continue;
					}
				}
				uint64_t z;
				if (get_varint_small(&p, e, &z))
					break;
				acc = cell_get(cells, oc - c) + tbp_unzigzag(z);
				cell_put(cells, oc, acc);
			}
		} else {
			for (; j < ok; j++) {
				uint64_t z;
				if (get_varint_small(&p, e, &z))
					break;
				if (dur)
					acc = kc->row[j][0] + tbp_unzigzag(z);
				else
					acc += tbp_unzigzag(z);
				if (keep)
					kc->row[j][c] = acc;
			}
		}
		if (j < ok) {
			ok = j;
			err = "column shorter than its records";
		}
		kc->pos[c] = p;
		kc->prev[c] = acc;
	}
	if (kc->has_blob) {
		unsigned lc = kc->ncols, bc = lc + 1;
		const uint8_t *p = kc->pos[lc], *e = kc->end[lc];
		unsigned j = 0;
		for (; j < ok; j++) {
			uint64_t len;
			if (tbp_get_varint(&p, e, &len) || len > (uint64_t)(kc->end[bc] - kc->pos[bc]))
				break;
			kc->blob[j] = kc->pos[bc];
			kc->blob_len[j] = (uint32_t)len;
			kc->pos[bc] += len;
		}
		if (j < ok) {
			ok = j;
			err = "blob runs past its column";
		}
		kc->pos[lc] = p;
	}
	kc->left -= m;
	kc->bi = 0;
	kc->bn = ok;
	kc->err = ok < m ? err : NULL;
}

/* fill_batch_body for each path, the path a constant. */
static void fill_batch_plain(struct kind_cursor *kc)
{
	fill_batch_body(kc, ISA_PLAIN);
}

static void fill_batch_x86(struct kind_cursor *kc)
{
	fill_batch_body(kc, ISA_X86);
}

static inline void fill_batch(struct kind_cursor *kc)
{
	if (TBP_HAVE_X86 && kc->isa == ISA_X86)
		fill_batch_x86(kc);
	else
		fill_batch_plain(kc);
}

_Static_assert(offsetof(struct tbp_record, blob) > offsetof(struct tbp_record, u.v[TBP_MAX_FIELDS - 1]) &&
		       offsetof(struct tbp_record, blob_len) > offsetof(struct tbp_record, blob),
	       "a record's blob and its length come after its fields (zeroed with the fields past nfields)");
_Static_assert(sizeof(struct rec_head) == 8 && offsetof(struct tbp_record, ts) == 8 &&
		       offsetof(struct tbp_record, u) == 16 && sizeof(((struct tbp_record *)0)->u.v) == 8 * (ROW - 1),
	       "a record's head, ts and fields are copied as laid out in a batch row");

/* Hands out row j of a batch: head, then ts and every field in one copy
 * (rows past nout are zero); the blob arrays stay zero for kinds without
 * a blob. */
static inline void put_record(const struct kind_cursor *kc, unsigned j, struct tbp_record *rec)
{
	memcpy(rec, &kc->head, 8);
	memcpy(&rec->ts, kc->row[j], sizeof kc->row[j]);
	rec->blob = kc->blob[j];
	rec->blob_len = kc->blob_len[j];
}

/* Two records a step: the loop's own counting was a quarter of a copy. */
#if defined(__clang__)
#define TBP_COPY_UNROLL _Pragma("unroll 2")
#elif defined(__GNUC__)
#define TBP_COPY_UNROLL _Pragma("GCC unroll 2")
#else
#define TBP_COPY_UNROLL
#endif

#if TBP_HAVE_X86
/* next_many's copies of the rows of a kind without a blob, 32 bytes a move
 * (ISA_X86 has AVX2): the head, ts and the first 7 fields (fields <= 7) or
 * 11 (fields <= 11) from the row (the cells past nout are zero), zeros over
 * the rest of the record, its blob pointer and length.  Unaligned moves;
 * the last zero store overlaps the one before it. */
static inline __attribute__((target("avx2"))) void copy_rows_avx2(struct tbp_record *out,
	const uint64_t (*row)[ROW], unsigned m, uint64_t head, int eleven)
{
	const __m256i zero = _mm256_setzero_si256();
	if (eleven) {
		TBP_COPY_UNROLL
		for (unsigned t = 0; t < m; t++) {
			uint8_t *o = (uint8_t *)&out[t];
			const uint8_t *s = (const uint8_t *)row[t];
			memcpy(o, &head, 8);
			_mm256_storeu_si256((__m256i *)(o + 8), _mm256_loadu_si256((const __m256i *)s));
			_mm256_storeu_si256((__m256i *)(o + 40), _mm256_loadu_si256((const __m256i *)(s + 32)));
			_mm256_storeu_si256((__m256i *)(o + 72), _mm256_loadu_si256((const __m256i *)(s + 64)));
			_mm256_storeu_si256((__m256i *)(o + 104), zero);
			_mm256_storeu_si256((__m256i *)(o + sizeof *out - 32), zero);
		}
	} else {
		TBP_COPY_UNROLL
		for (unsigned t = 0; t < m; t++) {
			uint8_t *o = (uint8_t *)&out[t];
			const uint8_t *s = (const uint8_t *)row[t];
			memcpy(o, &head, 8);
			_mm256_storeu_si256((__m256i *)(o + 8), _mm256_loadu_si256((const __m256i *)s));
			_mm256_storeu_si256((__m256i *)(o + 40), _mm256_loadu_si256((const __m256i *)(s + 32)));
			_mm256_storeu_si256((__m256i *)(o + 72), zero);
			_mm256_storeu_si256((__m256i *)(o + 104), zero);
			_mm256_storeu_si256((__m256i *)(o + sizeof *out - 32), zero);
		}
	}
}
_Static_assert(sizeof(struct tbp_record) == 160 && sizeof(((struct kind_cursor *)0)->row[0]) == 136,
	"copy_rows_avx2 and put_record_avx2 cover a record");
#endif

/* Decode one record; returns TBP_OK (known kind, *rec filled), TBP_END
 * meaning "skipped a kind this reader does not know", or an error. */
static int decode_record(struct tbp_reader *r, struct tbp_record *rec)
{
	/* open_chunk checked the kinds column: every kind is in the schema. */
	unsigned kind = r->kinds[r->kinds_pos++];
	struct kind_cursor *kc = r->cur[kind];
	if (kc->bi == kc->bn) {
		if (kc->err)
			return bad_record(r, kc->err);
		fill_batch(kc);
		if (kc->bn == 0)
			return bad_record(r, kc->err ? kc->err : "column shorter than its records");
	}
	unsigned j = kc->bi++;
	r->record_index++;

	if (!kc->ki)
		return TBP_END; /* a newer writer's kind: skipped */
	put_record(kc, j, rec);
	return TBP_OK;
}

/* The input ended (or was cut) before the first event (a thread's or a
 * device's record; definitions alone describe nothing that ran): a trace
 * with nothing to report on is an error, as damage is, not a truncated
 * trace whose complete part can still be reported on.  A trace the writer
 * closed (its seek table read) is never this.  The offset is where the
 * cut frame starts, or the end of the file. */
static int no_events(struct tbp_reader *r, int rc)
{
	unsigned long long size = r->buf_off + r->buf_len;
	const char *what = r->frame_index == 0 ? "its header" : "its definitions";
	if (rc == TBP_END)
		return fail(r, TBP_ERR_NO_EVENTS, r->err_off, "no events: the file ends right after %s (%llu bytes: "
			"cut short, or its process had written nothing else yet)", what, size);
	return fail(r, TBP_ERR_NO_EVENTS, r->err_off, "no events: the file ends inside the frame after %s "
		"(%llu bytes: cut short, or its process is still writing)", what, size);
}

/* Everything but the common case below: a batch to decode, a chunk to
 * close or open, a frame to read, a skipped kind, an error. */
static __attribute__((noinline)) int reader_next_slow(struct tbp_reader *r, struct tbp_record *rec)
{
	for (;;) {
		if (r->status)
			return r->status;
		if (r->chunk_left > 0) {
			int rc = decode_record(r, rec);
			if (rc >= TBP_ERR_IO) /* tbp_is_error, without the call */
				return rc;
			if (--r->chunk_left == 0) {
				int crc = close_chunk(r);
				if (crc != TBP_OK)
					return crc;
			}
			if (rc == TBP_OK)
				return TBP_OK;
			continue; /* skipped a kind this reader does not know */
		}
		if (r->cpos < r->content_len) {
			int rc = open_chunk(r);
			if (rc != TBP_OK)
				return rc;
			if (r->chunk_left == 0 && (rc = close_chunk(r)) != TBP_OK)
				return rc;
			continue;
		}
		int rc = next_frame(r);
		if (rc == TBP_END) {
			r->status = TBP_END;
			r->err_off = cur_off(r);
			snprintf(r->detail, sizeof r->detail, "end of trace");
		}
		if ((rc == TBP_END || rc == TBP_ERR_TRUNCATED) && !r->saw_events && !r->complete)
			return no_events(r, rc);
		if (rc != TBP_OK)
			return rc;
	}
}

/* tbp_reader_next's common case, kept short so it needs few registers: a
 * known kind whose batch has rows left, and not the chunk's last record
 * (that one closes the chunk).  Exactly what decode_record does for it.
 * The row is put in place by PUT (put_record, or put_record_avx2 inside an
 * AVX2 function). */
#define READER_NEXT_BODY(PUT)                                                                                          \
	do {                                                                                                           \
		if (__builtin_expect(!r->status && r->chunk_left > 1, 1)) {                                            \
			struct kind_cursor *kc = r->cur[r->kinds[r->kinds_pos]];                                      \
			if (__builtin_expect(kc->bi < kc->bn && kc->ki != NULL, 1)) {                                 \
				unsigned j = kc->bi++;                                                                 \
				r->kinds_pos++;                                                                        \
				r->record_index++;                                                                     \
				r->chunk_left--;                                                                       \
				PUT(kc, j, rec);                                                                       \
				return TBP_OK;                                                                         \
			}                                                                                              \
		}                                                                                                      \
		return reader_next_slow(r, rec);                                                                       \
	} while (0)

#if TBP_HAVE_X86
/* put_record with the row's ts and fields 32 bytes a move (ISA_X86 has
 * AVX2). */
static inline __attribute__((target("avx2"))) void put_record_avx2(const struct kind_cursor *kc, unsigned j,
	struct tbp_record *rec)
{
	uint8_t *o = (uint8_t *)rec;
	const uint8_t *s = (const uint8_t *)kc->row[j];
	memcpy(o, &kc->head, 8);
	_mm256_storeu_si256((__m256i *)(o + 8), _mm256_loadu_si256((const __m256i *)s));
	_mm256_storeu_si256((__m256i *)(o + 40), _mm256_loadu_si256((const __m256i *)(s + 32)));
	_mm256_storeu_si256((__m256i *)(o + 72), _mm256_loadu_si256((const __m256i *)(s + 64)));
	_mm256_storeu_si256((__m256i *)(o + 104), _mm256_loadu_si256((const __m256i *)(s + 96)));
	memcpy(o + 8 + 128, s + 128, sizeof kc->row[j] - 128);
	rec->blob = kc->blob[j];
	rec->blob_len = kc->blob_len[j];
}

/* tbp_reader_next's common case with put_record_avx2. */
static __attribute__((target("avx2"))) int reader_next_x86(struct tbp_reader *r, struct tbp_record *rec)
{
	READER_NEXT_BODY(put_record_avx2);
}
#endif

int tbp_reader_next(struct tbp_reader *r, struct tbp_record *rec)
{
	if (!r || !rec)
		return TBP_ERR_ARG;
#if TBP_HAVE_X86
	if (r->isa == ISA_X86)
		return reader_next_x86(r, rec);
#endif
	READER_NEXT_BODY(put_record);
}

static inline __attribute__((always_inline)) int next_many_body(struct tbp_reader *r, struct tbp_record *recs,
	unsigned max, unsigned *n_out, const int isa)
{
	*n_out = 0;
	/* The fast path of tbp_reader_next, a stretch of one kind's decoded
	 * rows at a time, a batch decoded when one runs out; anything else
	 * (a chunk's last record, a kind this reader does not know, a batch
	 * that holds an error, a frame to read) ends the run, or is the run's
	 * only record when it comes first: records and errors come in the same
	 * order as from tbp_reader_next. */
	if (r->status || r->chunk_left <= 1)
		goto slow;
	const uint8_t *kinds = r->kinds + r->kinds_pos;
	unsigned n = 0;
	uint64_t left = r->chunk_left;
	/* The chunk's last record closes it: the slow path's. */
	unsigned lim = left - 1 < max ? (unsigned)(left - 1) : max;
	while (n < lim) {
		unsigned k = kinds[n];
		struct kind_cursor *kc = r->cur[k];
		if (kc->bi >= kc->bn) {
			if (kc->err || kc->left == 0 || kc->ki == NULL)
				break;
			if (TBP_HAVE_X86 && isa == ISA_X86)
				fill_batch_x86(kc);
			else
				fill_batch_plain(kc);
			if (kc->bn == 0)
				break; /* its first row is bad: the slow path says so */
		}
		if (kc->ki == NULL)
			break;
		/* The records of this kind from here on, up to its rows left. */
		unsigned avail = kc->bn - kc->bi, cap = lim - n < avail ? lim - n : avail, m = 1;
		uint64_t pattern = 0x0101010101010101ull * k;
		while (m + 8 <= cap) {
			uint64_t w;
			memcpy(&w, kinds + n + m, 8);
			w ^= pattern;
			if (w) {
				m += (unsigned)__builtin_ctzll(w) >> 3;
				goto counted;
			}
			m += 8;
		}
		while (m < cap && kinds[n + m] == k)
			m++;
counted:;
		struct tbp_record *out = recs + n;
		const uint64_t (*row)[ROW] = (const uint64_t (*)[ROW])kc->row + kc->bi;
		if (kc->has_blob) {
			for (unsigned t = 0; t < m; t++)
				put_record(kc, kc->bi + t, out + t);
#if TBP_HAVE_X86
		} else if (isa == ISA_X86 && kc->nout <= 11) {
			uint64_t head;
			memcpy(&head, &kc->head, 8);
			copy_rows_avx2(out, row, m, head, kc->nout > 7);
#endif
		} else if (kc->nout <= 7) {
			/* At most seven fields (a kernel under tbanalyze's
			 * limit, a span): the row's first eight cells, zeros
			 * stored after them rather than copied.  The head in
			 * a local: the stores could change kc->head, as the
			 * compiler sees it. */
			uint64_t head;
			memcpy(&head, &kc->head, 8);
			for (unsigned t = 0; t < m; t++) {
				memcpy(&out[t], &head, 8);
				memcpy(&out[t].ts, row[t], 8 * 8);
				memset(&out[t].u.v[7], 0, sizeof out[t].u.v - 7 * 8);
				out[t].blob = NULL;
				out[t].blob_len = 0;
			}
		} else if (kc->nout <= 11) {
			/* A launch under tbanalyze's limit (eight): the zeros
			 * over the blob's pointer and length too, in one go. */
			uint64_t head;
			memcpy(&head, &kc->head, 8);
			for (unsigned t = 0; t < m; t++) {
				memcpy(&out[t], &head, 8);
				memcpy(&out[t].ts, row[t], 12 * 8);
				memset(&out[t].u.v[11], 0, sizeof out[t] - offsetof(struct tbp_record, u.v[11]));
			}
		} else {
			/* No blob: its pointer and length are zero. */
			for (unsigned t = 0; t < m; t++) {
				memcpy(&out[t], &kc->head, 8);
				memcpy(&out[t].ts, row[t], sizeof row[t]);
				out[t].blob = NULL;
				out[t].blob_len = 0;
			}
		}
		kc->bi += m;
		n += m;
	}
	left -= n;
	r->kinds_pos += n;
	r->record_index += n;
	r->chunk_left = left;
	if (n) {
		*n_out = n;
		return TBP_OK;
	}
slow:;
	int rc = reader_next_slow(r, recs);
	if (rc == TBP_OK)
		*n_out = 1;
	return rc;
}

static int next_many_plain(struct tbp_reader *r, struct tbp_record *recs, unsigned max, unsigned *n_out)
{
	return next_many_body(r, recs, max, n_out, ISA_PLAIN);
}

#if TBP_HAVE_X86
/* The rows copied 32 bytes a move (AVX2, which ISA_X86 implies). */
static __attribute__((target("avx2"))) int next_many_x86(struct tbp_reader *r, struct tbp_record *recs, unsigned max,
	unsigned *n_out)
{
	return next_many_body(r, recs, max, n_out, ISA_X86);
}
#endif

int tbp_reader_next_many(struct tbp_reader *r, struct tbp_record *recs, unsigned max, unsigned *n_out)
{
	if (!r || !recs || !max || !n_out)
		return TBP_ERR_ARG;
#if TBP_HAVE_X86
	if (r->isa == ISA_X86)
		return next_many_x86(r, recs, max, n_out);
#endif
	return next_many_plain(r, recs, max, n_out);
}

int tbp_reader_limit_fields(struct tbp_reader *r, unsigned kind, unsigned nfields)
{
	/* Before any record: a kind's cursor takes its limit when it is
	 * made, at the kind's first chunk. */
	if (!r || kind > TBP_SCHEMA_MAX_KIND || nfields == 0 || nfields > TBP_MAX_FIELDS || r->frame_index)
		return TBP_ERR_ARG;
	r->limit[kind] = (uint8_t)nfields;
	return TBP_OK;
}

const struct tbp_header *tbp_reader_header(const struct tbp_reader *r)
{
	return &r->hdr;
}

uint64_t tbp_reader_offset(const struct tbp_reader *r)
{
	if (!r)
		return 0;
	return r->status ? r->err_off : r->frame_off;
}

const char *tbp_reader_detail(const struct tbp_reader *r)
{
	if (!r)
		return "";
	return r->detail;
}

int tbp_reader_truncated(const struct tbp_reader *r)
{
	return r ? r->truncated : 0;
}

void tbp_reader_close(struct tbp_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0) {
		close(r->fd);
		free(r->buf);
	}
	ZSTD_freeDCtx(r->dctx);
	free(r->content);
	free(r->kinds_buf);
	for (unsigned k = 0; k <= TBP_SCHEMA_MAX_KIND; k++)
		free(r->cur[k]);
	free(r->name);
	free(r);
}
