/*
 * Schema evolution: files from a newer writer (an unknown record kind, a
 * kind with extra trailing fields, a new schema flag is refused only via
 * min_reader_version) and from an older writer (fewer fields) are read
 * with the file's schema.  The files are built byte by byte here, so this
 * also checks the reader against the format as documented, independently
 * of tbp_writer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "internal.h"
#include "tt_util.h"

struct buf {
	uint8_t d[1 << 16];
	size_t n;
};
static void put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->d + b->n, p, n);
	b->n += n;
}
static void varint(struct buf *b, uint64_t v)
{
	b->n += tbp_put_varint(b->d + b->n, v);
}
static void sfield(struct buf *b, int64_t delta)
{
	varint(b, tbp_zigzag((uint64_t)delta));
}

struct kind_spec {
	unsigned kind, nfields, flags;
};

/* A record as the values of its columns: v[0] the ts delta, v[1..] the
 * field deltas (or end - ts), already as signed numbers. */
struct trec {
	unsigned kind;
	unsigned nvals;
	int64_t v[24];
	const char *blob;
};

/* One chunk in the documented columnar layout: header, kinds column, then
 * per kind (increasing) each column length-prefixed, blob lengths and
 * blob bytes last for blob kinds. */
static void chunk(struct buf *b, unsigned sk, uint64_t sid, const struct trec *recs, unsigned n,
	const struct kind_spec *schema, unsigned nkinds)
{
	varint(b, sk);
	varint(b, sid);
	varint(b, n);
	for (unsigned i = 0; i < n; i++)
		varint(b, recs[i].kind);
	for (unsigned kind = 1; kind < 256; kind++) {
		const struct kind_spec *ks = NULL;
		for (unsigned i = 0; i < nkinds; i++)
			if (schema[i].kind == kind)
				ks = &schema[i];
		int used = 0;
		for (unsigned i = 0; i < n; i++)
			used |= recs[i].kind == kind;
		if (!ks || !used)
			continue;
		for (unsigned c = 0; c <= ks->nfields; c++) {
			struct buf col = {.n = 0};
			for (unsigned i = 0; i < n; i++)
				if (recs[i].kind == kind)
					sfield(&col, recs[i].v[c]);
			varint(b, col.n);
			put(b, col.d, col.n);
		}
		if (ks->flags & TBP_SCHEMA_HAS_BLOB) {
			struct buf lens = {.n = 0}, bytes = {.n = 0};
			for (unsigned i = 0; i < n; i++)
				if (recs[i].kind == kind) {
					size_t l = recs[i].blob ? strlen(recs[i].blob) : 0;
					varint(&lens, l);
					put(&bytes, recs[i].blob, l);
				}
			varint(b, lens.n);
			put(b, lens.d, lens.n);
			varint(b, bytes.n);
			put(b, bytes.d, bytes.n);
		}
	}
}

/* A whole file: header with the given schema and versions, one frame. */
static size_t build_file(uint8_t *out, const struct kind_spec *schema, unsigned nkinds, uint16_t version,
	uint16_t min_reader, const struct buf *content)
{
	struct buf h = {.n = 0};
	put(&h, TBP_FILE_MAGIC, TBP_FILE_MAGIC_LEN);
	uint8_t v[8];
	tbp_put_le16(v, version);
	tbp_put_le16(v + 2, min_reader);
	tbp_put_le32(v + 4, 0);
	put(&h, v, 8);
	varint(&h, nkinds);
	for (unsigned i = 0; i < nkinds; i++) {
		varint(&h, schema[i].kind);
		varint(&h, schema[i].nfields);
		h.d[h.n++] = (uint8_t)schema[i].flags;
	}
	put(&h, "ext", 3); /* reserved bytes a newer header might carry */
	uint8_t crc[4];
	tbp_put_le32(crc, tbp_crc32(h.d, h.n));
	put(&h, crc, 4);
	size_t n = 0;
	tbp_put_le32(out, TBP_MAGIC_HEADER_FRAME);
	tbp_put_le32(out + 4, (uint32_t)h.n);
	memcpy(out + 8, h.d, h.n);
	n = 8 + h.n;
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	n += ZSTD_compress2(c, out + n, ZSTD_compressBound(content->n), content->d, content->n);
	ZSTD_freeCCtx(c);
	/* An unknown skippable frame (a future metadata frame) at the end. */
	tbp_put_le32(out + n, 0x184D2A5Eu);
	tbp_put_le32(out + n + 4, 3);
	memcpy(out + n + 8, "abc", 3);
	return n + 11;
}

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

static void newer_writer(void)
{
	/* Kind 9 (launch) with 18 fields: two unknown trailing ones.  Kind 50:
	 * unknown to this reader, 2 fields and a blob. */
	const struct kind_spec schema[] = {
		{TBP_K_LAUNCH, 18, TBP_SCHEMA_END_FROM_TS}, {50, 2, TBP_SCHEMA_HAS_BLOB}, {TBP_K_MARKER, 3, 0},
	};
	/* launch ts=1000 end=1500 api=1 corr=10 name=5, grid..shmem 9..15, extras 9,9;
	 * an unknown kind 50 with a blob; a second launch; a marker. */
	const struct trec recs[] = {
		{TBP_K_LAUNCH, 19, {1000, 500, 1, 0, 10, 0, 0, 0, 0, 5, 9, 10, 11, 12, 13, 14, 15, 9, 9}},
		{50, 3, {1100, 3, -3}, "blob"},
		{TBP_K_LAUNCH, 19, {1000, 700, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -9, 100}},
		{TBP_K_MARKER, 4, {3000, TBP_MARK_ITER_END, 7, 0}},
	};
	struct buf c = {.n = 0};
	chunk(&c, TBP_STREAM_THREAD, 77, recs, 4, schema, 3);
	uint8_t file[1 << 17];
	size_t n = build_file(file, schema, 3, 2, 1, &c);
	struct tbp_reader *r;
	int rc = tbp_reader_open_mem(&r, file, n, "newer");
	CHECK(rc == TBP_OK, "newer writer: open %s (%s)", tbp_error_name(rc), tbp_reader_detail(r));
	if (rc != TBP_OK) {
		tbp_reader_close(r);
		return;
	}
	CHECK(tbp_reader_header(r)->version == 2, "header version not kept");
	struct tbp_record rec;
	rc = tbp_reader_next(r, &rec);
	CHECK(rc == TBP_OK && rec.kind == TBP_K_LAUNCH && rec.ts == 1000 && rec.u.launch.end == 1500 &&
		rec.u.launch.corr == 10 && rec.u.launch.name == 5 && rec.u.launch.shmem == 15 && rec.nfields == 16 &&
		rec.tid == 77 && rec.stream_kind == TBP_STREAM_THREAD, "newer writer: first launch wrong");
	rc = tbp_reader_next(r, &rec); /* kind 50 is skipped */
	CHECK(rc == TBP_OK && rec.kind == TBP_K_LAUNCH && rec.ts == 2000 && rec.u.launch.end == 2700 &&
		rec.u.launch.corr == 11 && rec.u.launch.grid_x == 9 && rec.u.launch.shmem == 15,
		"newer writer: second launch wrong (kind %u ts %llu)", rec.kind, (unsigned long long)rec.ts);
	rc = tbp_reader_next(r, &rec);
	CHECK(rc == TBP_OK && rec.kind == TBP_K_MARKER && rec.ts == 3000 && rec.u.marker.value == 7,
		"newer writer: marker wrong");
	rc = tbp_reader_next(r, &rec);
	CHECK(rc == TBP_END, "newer writer: ends with %s", tbp_error_name(rc));
	tbp_reader_close(r);

	/* Same file, but the writer says readers of this version cannot read it. */
	n = build_file(file, schema, 3, TBP_FORMAT_VERSION + 1, TBP_FORMAT_VERSION + 1, &c);
	rc = tbp_reader_open_mem(&r, file, n, "too-new");
	CHECK(rc == TBP_ERR_VERSION && tbp_reader_offset(r) == 10, "min_reader_version %u: %s at %llu",
		TBP_FORMAT_VERSION + 1, tbp_error_name(rc), (unsigned long long)tbp_reader_offset(r));
	tbp_reader_close(r);

	/* A schema flag this reader does not know, without the version bump:
	 * refused as corrupt rather than mis-decoded. */
	struct kind_spec odd[] = {{TBP_K_MARKER, 3, 0x80}};
	n = build_file(file, odd, 1, 1, 1, &c);
	rc = tbp_reader_open_mem(&r, file, n, "odd-flag");
	CHECK(rc == TBP_ERR_CORRUPT, "unknown schema flag: %s", tbp_error_name(rc));
	tbp_reader_close(r);
}

static void older_writer(void)
{
	/* An older launch had 10 fields (CALL + name + grid_x): the rest read 0. */
	const struct kind_spec schema[] = {{TBP_K_LAUNCH, 10, 0}};
	/* end is a plain delta from 0 here: no END_FROM_TS flag. */
	const struct trec recs[] = {{TBP_K_LAUNCH, 11, {100, 150, 0, 0, 0, 0, 0, 0, 0, 42, 8}}};
	struct buf c = {.n = 0};
	chunk(&c, TBP_STREAM_THREAD, 5, recs, 1, schema, 1);
	uint8_t file[1 << 16];
	size_t n = build_file(file, schema, 1, 1, 1, &c);
	struct tbp_reader *r;
	int rc = tbp_reader_open_mem(&r, file, n, "older");
	struct tbp_record rec;
	if (rc == TBP_OK)
		rc = tbp_reader_next(r, &rec);
	CHECK(rc == TBP_OK && rec.ts == 100 && rec.u.launch.end == 150 && rec.u.launch.name == 42 &&
		rec.u.launch.grid_x == 8 && rec.u.launch.grid_y == 0 && rec.u.launch.shmem == 0 && rec.nfields == 10,
		"older writer: launch wrong (%s)", tbp_error_name(rc));
	tbp_reader_close(r);
}

static void hostile_chunks(void)
{
	const struct kind_spec schema[] = {{TBP_K_MARKER, 3, 0}, {TBP_K_STRING, 1, TBP_SCHEMA_HAS_BLOB}};
	struct {
		const char *what;
		uint8_t bytes[24];
		size_t n;
	} cases[] = {
		{"record count larger than the frame", {1, 1, 0xff, 0xff, 0x03, 31, 0, 0, 0, 0}, 10},
		{"kind not in the schema", {1, 1, 1, 9, 1, 0}, 6},
		{"varint longer than 10 bytes", {1, 1, 1, 31, 11, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
			0x80, 0x80, 0x01, 1, 0, 1, 0, 1, 0}, 22},
		{"blob longer than its column", {1, 1, 1, 3, 1, 0, 1, 0, 1, 50, 1, 'a'}, 12},
		{"column runs past the frame", {1, 1, 1, 31, 5, 2}, 6},
		{"columns missing", {1, 1, 1, 31}, 4},
		{"column longer than its records", {1, 1, 1, 31, 2, 0, 0, 1, 0, 1, 0, 1, 0}, 13},
		{"stream kind out of range", {0x80, 0x02, 1, 31, 1, 0, 1, 0, 1, 0, 1, 0}, 12},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct buf c = {.n = 0};
		put(&c, cases[i].bytes, cases[i].n);
		uint8_t file[4096];
		size_t n = build_file(file, schema, 2, 1, 1, &c);
		struct tbp_reader *r;
		int rc = tbp_reader_open_mem(&r, file, n, "hostile");
		struct tbp_record rec;
		while (rc == TBP_OK)
			rc = tbp_reader_next(r, &rec);
		CHECK(rc == TBP_ERR_CORRUPT, "%s: %s, want corrupt data", cases[i].what, tbp_error_name(rc));
		CHECK(*tbp_reader_detail(r), "%s: no detail", cases[i].what);
		tbp_reader_close(r);
	}
}

/* The reader decodes records of a kind in batches; a column that runs out
 * in the middle of a batch must still hand out every record before the
 * damage, each with its right values, and then report the first record it
 * cannot complete. */
static void short_column_mid_batch(void)
{
	const struct kind_spec schema[] = {{TBP_K_MARKER, 3, 0}};
	enum { N = 100, CUT = 70 }; /* two whole batches of 32, then 6 more */
	struct buf c = {.n = 0};
	varint(&c, 1);
	varint(&c, 7);
	varint(&c, N);
	for (unsigned i = 0; i < N; i++)
		varint(&c, TBP_K_MARKER);
	for (unsigned col = 0; col <= 3; col++) {
		struct buf cb = {.n = 0};
		unsigned n = col == 2 ? CUT : N; /* the "value" column runs short */
		for (unsigned i = 0; i < n; i++) {
			/* ts: one-byte deltas (the word-at-a-time path); value:
			 * alternating one- and two-byte deltas; label: zeros. */
			int64_t d = col == 0 ? 3 : col == 1 ? (int64_t)(i % 2) : col == 2 ? (i % 2 ? 1000 : 1) : 0;
			sfield(&cb, d);
		}
		varint(&c, cb.n);
		put(&c, cb.d, cb.n);
	}
	uint8_t file[8192];
	size_t n = build_file(file, schema, 1, 1, 1, &c);
	struct tbp_reader *r;
	int rc = tbp_reader_open_mem(&r, file, n, "short");
	struct tbp_record rec;
	unsigned got = 0, bad = 0;
	uint64_t kind_sum = 0, value = 0;
	while (rc == TBP_OK && (rc = tbp_reader_next(r, &rec)) == TBP_OK) {
		kind_sum += got % 2;
		value += got % 2 ? 1000 : 1;
		if (rec.kind != TBP_K_MARKER || rec.ts != 3ull * (got + 1) || rec.u.marker.marker_kind != kind_sum ||
		    rec.u.marker.value != value || rec.u.marker.label != 0 || rec.tid != 7 || rec.nfields != 3)
			bad++;
		got++;
	}
	CHECK(got == CUT && !bad, "short column: %u records before the damage (%u wrong), want %u", got, bad, CUT);
	CHECK(rc == TBP_ERR_CORRUPT, "short column: %s, want corrupt data", tbp_error_name(rc));
	CHECK(strstr(tbp_reader_detail(r), "record 70: column shorter than its records") != NULL,
		"short column: detail '%s' does not name record 70", tbp_reader_detail(r));
	tbp_reader_close(r);
}

/* Version 2's columns, bytes as doc/trace-format.md 3.1 spells them: 5000
 * markers with ts 1000, 1010, ... (runs); marker_kind 1 (runs); value 100,
 * 101, ... (runs); label 0 (plain: a zero byte per record).  Then the same
 * chunk with label as runs one record too long. */
static void runs_v2(void)
{
	const struct kind_spec schema[] = {{TBP_K_MARKER, 3, 0}};
	static const uint8_t kinds[] = {0x3F, 0x86, 0x27};            /* kind 31, 5000 times */
	/* Each column: its coding (1 runs, 0 plain), then its values. */
	static const uint8_t ts[] = {1, 0xA0, 0x1F, 0x29, 0x85, 0x27};   /* 1000 once; +10 4999 times */
	static const uint8_t mk[] = {1, 0x04, 0x01, 0x85, 0x27};         /* 1 once; +0 4999 times */
	static const uint8_t value[] = {1, 0x90, 0x03, 0x05, 0x85, 0x27}; /* 100 once; +1 4999 times */
	static uint8_t label[1 + 5000];                                  /* plain: 0 and 4999 deltas 0 */
	static const uint8_t label_long[] = {1, 0x01, 0x87, 0x27};       /* runs: 0, 5001 times */
	for (int bad = 0; bad < 2; bad++) {
		struct buf c = {.n = 0};
		varint(&c, TBP_STREAM_THREAD);
		varint(&c, 9);
		varint(&c, 5000);
		put(&c, kinds, sizeof kinds);
		varint(&c, sizeof ts);
		put(&c, ts, sizeof ts);
		varint(&c, sizeof mk);
		put(&c, mk, sizeof mk);
		varint(&c, sizeof value);
		put(&c, value, sizeof value);
		varint(&c, bad ? sizeof label_long : sizeof label);
		put(&c, bad ? label_long : label, bad ? sizeof label_long : sizeof label);
		static uint8_t file[1 << 16];
		size_t n = build_file(file, schema, 1, 2, 2, &c);
		struct tbp_reader *r;
		int rc = tbp_reader_open_mem(&r, file, n, "runs");
		CHECK(rc == TBP_OK, "runs: open %s (%s)", tbp_error_name(rc), tbp_reader_detail(r));
		struct tbp_record rec;
		unsigned i = 0, wrong = 0;
		while (rc == TBP_OK && (rc = tbp_reader_next(r, &rec)) == TBP_OK) {
			wrong += rec.kind != TBP_K_MARKER || rec.ts != 1000 + 10ull * i || rec.u.marker.marker_kind != 1 ||
				rec.u.marker.value != 100 + i || rec.u.marker.label != 0 || rec.tid != 9;
			i++;
		}
		if (!bad)
			CHECK(rc == TBP_END && i == 5000 && !wrong, "runs: %s after %u records, %u wrong (%s)",
				tbp_error_name(rc), i, wrong, tbp_reader_detail(r));
		else
			CHECK(rc == TBP_ERR_CORRUPT && i == 4999 && !wrong,
				"runs, a run past the chunk's records: %s after %u records (%s)", tbp_error_name(rc), i,
				tbp_reader_detail(r));
		tbp_reader_close(r);
	}
}

int main(void)
{
	runs_v2();
	newer_writer();
	older_writer();
	hostile_chunks();
	short_column_mid_batch();
	printf("compat: %d failures\n", failures);
	return failures ? 1 : 0;
}
