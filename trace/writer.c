/*
 * Trace writer.  Records are grouped in chunks (one stream each) and laid
 * out column by column inside a chunk: the kinds of all records, then per
 * kind its timestamps, then each field, then blobs; every value is the
 * delta from the previous record of the same kind, and each column is
 * coded as runs of equal deltas (format version 2): a repeated name, grid
 * or +1 correlation id costs one entry per chunk, not a byte per record,
 * so zstd, the writer's largest cost, reads a fraction of the bytes.  The
 * per-record work is a compare per field; bytes are written only when a
 * run ends.
 * At every flush the frame's bytes are compressed into one checksummed
 * zstd frame and written.  One writer thread owns a writer; buffers grow
 * geometrically and are reused, so nothing mallocs per record.
 * doc/trace-format.md describes the bytes.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "internal.h"

/* A frame is flushed by itself once its raw bytes would pass this size,
 * which bounds the writer's buffers and the reader's memory per frame. */
#define FRAME_AUTO_FLUSH (2u << 20)
#define RAW_INITIAL (1u << 20)
#define COLUMN_INITIAL 1024u
/* Worst case of one record without its blob: the run entries it may end
 * (kind, ts, every field), and the blob length. */
#define RECORD_MAX (TBP_RUN_ENTRY_MAX * (2 + TBP_MAX_FIELDS) + TBP_VARINT_MAX)
#define CHUNK_HEADER_MAX (3 * TBP_VARINT_MAX)
/* Keeps any single record far below the reader's frame-content limit. */
#define TBP_MAX_BLOB (64u << 20)
#define TBP_LIKELY_W(x) __builtin_expect(!!(x), 1)
/* Two fields at a time (SSE2 / NEON, or what the compiler makes of it). */
typedef uint64_t u64x2 __attribute__((vector_size(16)));

struct seek_entry {
	uint64_t offset, first_ts, records;
};

/* The columns of one kind in the open chunk, each its own buffer (so
 * memory follows what each column holds): column 0 is ts, 1..nfields the
 * fields, then (blob kinds) the blob lengths; blob bytes go to `blob`.
 *
 * Each ts or field column is coded for the whole chunk either as runs or
 * plain (a value per record; doc/trace-format.md 3.1), chosen when the
 * kind's chunk starts from how often the column's delta changed in the
 * kind's previous chunk: runs where it rarely does (names, grids, +1 ids),
 * plain where it usually does (timestamps), whose values a run entry would
 * only make longer.  A run column's open run: the records from number
 * run_start[c] on had delta run_delta[c] (written out when a different
 * delta comes, or at the chunk's end). */
struct kind_columns {
	uint64_t run_delta[1 + TBP_MAX_FIELDS]; /* runs: the open run's; plain: the last delta */
	uint32_t run_start[1 + TBP_MAX_FIELDS];
	uint64_t changes[1 + TBP_MAX_FIELDS];   /* records whose delta differed from the last, this chunk */
	uint64_t run_mask[TBP_MAX_FIELDS];      /* all ones: field coded as runs in this chunk */
	uint32_t run_cols;       /* bit c: column c (0 ts, 1 + i field i) coded as runs in this chunk */
	uint32_t next_run_cols;  /* the choice for the kind's next chunk */
	uint32_t plain_fields;   /* bit i: field i coded plain (a delta, not an end from ts) */
	bool vector_fields;      /* this chunk: fields compared two at a time (most are runs) */
	bool next_vector;        /* the choice for the kind's next chunk (close_runs) */
	uint8_t *col[TBP_MAX_FIELDS + 2];
	uint32_t cap[TBP_MAX_FIELDS + 2];
	uint32_t len[TBP_MAX_FIELDS + 2];
	uint8_t ncols;
	uint8_t nfields;  /* the kind's schema, cached at open (no lookup per record) */
	uint8_t has_blob;
	uint32_t room;    /* records that surely fit in every column (reserve_columns) */
	uint32_t count;   /* records of this kind in the open chunk */
	uint8_t *blob;
	size_t blob_len, blob_cap;
};

struct tbp_writer {
	int fd;
	ZSTD_CCtx *cctx;
	uint32_t features;

	uint8_t *raw;      /* current frame, uncompressed */
	size_t raw_len, raw_cap;
	uint8_t *zbuf;     /* compressed frame */
	size_t zbuf_cap;

	int in_chunk;
	unsigned chunk_stream_kind;
	uint64_t chunk_stream_id;
	uint32_t chunk_records;
	size_t chunk_bytes;      /* column bytes so far (for the frame limit) */
	uint8_t *kinds;          /* kinds column */
	size_t kinds_len, kinds_cap;
	size_t kinds_room;       /* run entries that surely fit */
	unsigned kind_run;       /* the kinds column's open run: this kind ... */
	uint32_t kind_run_len;   /* ... this many records (0: none yet) */
	uint8_t present[TBP_K__MAX]; /* kinds with records in the chunk */
	unsigned npresent;

	struct kind_columns cols[TBP_K__MAX];
	uint64_t prev[TBP_K__MAX][1 + TBP_MAX_FIELDS];
	uint8_t end_from_ts[TBP_K__MAX];  /* schema flag, per kind */
	/* Per kind and field: all ones if the field is coded as a delta from
	 * the previous record (not past the kind's fields, not an `end`
	 * coded from ts). */
	uint64_t delta_mask[TBP_K__MAX][TBP_MAX_FIELDS];

	uint64_t frame_records, frame_first_ts;
	struct seek_entry *seek;
	size_t seek_len, seek_cap;

	uint64_t bytes_written;
	int error; /* sticky: first write/compress failure */
};

static int write_all(struct tbp_writer *w, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t n = write(w->fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return TBP_ERR_IO;
		}
		if (n == 0) {
			errno = EIO;
			return TBP_ERR_IO;
		}
		p += n;
		len -= (size_t)n;
		w->bytes_written += (uint64_t)n;
	}
	return TBP_OK;
}

static int write_skippable(struct tbp_writer *w, uint32_t magic, const uint8_t *content, size_t len)
{
	uint8_t prefix[8];
	tbp_put_le32(prefix, magic);
	tbp_put_le32(prefix + 4, (uint32_t)len);
	int rc = write_all(w, prefix, sizeof prefix);
	if (rc == TBP_OK)
		rc = write_all(w, content, len);
	return rc;
}

/* Grow *buf so that `extra` more bytes fit after `len`. */
static int reserve(uint8_t **buf, size_t *cap, size_t len, size_t extra, size_t initial)
{
	if (*cap - len >= extra)
		return TBP_OK;
	size_t ncap = *cap ? *cap : initial;
	while (ncap - len < extra)
		ncap *= 2;
	uint8_t *p = realloc(*buf, ncap);
	if (!p)
		return TBP_ERR_NOMEM;
	*buf = p;
	*cap = ncap;
	return TBP_OK;
}

/* Make room for at least one more value (a varint) in every column of a
 * kind, and note in kc->room how many records surely fit before the next
 * check: the per-record path then tests one counter, not every column. */
static int reserve_columns(struct kind_columns *kc)
{
	uint32_t room = UINT32_MAX;
	for (unsigned c = 0; c < kc->ncols; c++) {
		if (kc->cap[c] - kc->len[c] < TBP_RUN_ENTRY_MAX) {
			uint32_t ncap = kc->cap[c] ? 2 * kc->cap[c] : COLUMN_INITIAL;
			uint8_t *p = realloc(kc->col[c], ncap);
			if (!p) {
				kc->room = 0;
				return TBP_ERR_NOMEM;
			}
			kc->col[c] = p;
			kc->cap[c] = ncap;
		}
		uint32_t fit = (kc->cap[c] - kc->len[c]) / TBP_RUN_ENTRY_MAX;
		if (fit < room)
			room = fit;
	}
	kc->room = room;
	return TBP_OK;
}

/* A plain column's value: the zigzag varint of its delta (most are small:
 * the one-byte case is kept branch-light). */
static inline uint32_t put_plain(struct kind_columns *kc, unsigned c, uint64_t d)
{
	uint8_t *p = kc->col[c] + kc->len[c];
	uint64_t z = tbp_zigzag(d);
	uint32_t n;
	if (TBP_LIKELY_W(z < 0x80)) {
		*p = (uint8_t)z;
		n = 1;
	} else {
		n = (uint32_t)tbp_put_varint(p, z);
	}
	kc->len[c] += n;
	return n;
}

/* Writes column c's open run and starts a new one with delta d.  Every
 * record may end one run per column, which reserve_columns made room for.
 * Runs of one small delta (timestamps of a busy loop) take the short way. */
static inline uint32_t run_break_at(struct kind_columns *kc, unsigned c, uint64_t d, uint32_t index)
{
	uint8_t *p = kc->col[c] + kc->len[c];
	uint64_t z = tbp_zigzag(kc->run_delta[c]);
	uint32_t run = index - kc->run_start[c], n;
	if (TBP_LIKELY_W(run == 1 && z < 0x2000)) {
		uint64_t e = z << 1;
		if (e < 0x80) {
			p[0] = (uint8_t)e;
			n = 1;
		} else {
			p[0] = (uint8_t)(e | 0x80);
			p[1] = (uint8_t)(e >> 7);
			n = 2;
		}
	} else {
		n = (uint32_t)tbp_put_run(p, z, run);
	}
	kc->len[c] += n;
	kc->run_delta[c] = d;
	kc->run_start[c] = index;
	return n;
}

static inline uint32_t run_break(struct kind_columns *kc, unsigned c, uint64_t d)
{
	return run_break_at(kc, c, d, kc->count);
}

int tbp_writer_open_fd(struct tbp_writer **out, int fd, const struct tbp_writer_opts *opts)
{
	*out = NULL;
	if (fd < 0)
		return TBP_ERR_ARG;
	struct tbp_writer *w = calloc(1, sizeof *w);
	if (!w) {
		close(fd);
		return TBP_ERR_NOMEM;
	}
	w->fd = fd;
	for (unsigned k = 0; k < TBP_K__MAX; k++) {
		const struct tbp_kind_info *ki = tbp_kind_lookup(k);
		if (!ki)
			continue;
		w->end_from_ts[k] = (tbp_kind_schema_flags(ki) & TBP_SCHEMA_END_FROM_TS) != 0;
		for (unsigned f = w->end_from_ts[k]; f < ki->nfields; f++)
			w->delta_mask[k][f] = ~0ull;
		/* Until a chunk of the kind has shown otherwise: timestamps and
		 * durations change every record, the other fields seldom. */
		w->cols[k].next_run_cols = (uint32_t)((2ull << ki->nfields) - 1) & ~(w->end_from_ts[k] ? 3u : 1u);
		w->cols[k].ncols = (uint8_t)(1 + ki->nfields + (ki->has_blob ? 1 : 0));
		w->cols[k].nfields = ki->nfields;
		w->cols[k].has_blob = ki->has_blob ? 1 : 0;
	}
	w->features = opts ? opts->features : 0;
	/* Level 1 by default: on delta-coded columns it compresses as well as
	 * 3 at twice the speed (bench/trace measures both). */
	int level = opts && opts->compression_level ? opts->compression_level : 1;
	w->cctx = ZSTD_createCCtx();
	int rc = TBP_ERR_NOMEM;
	if (!w->cctx || reserve(&w->raw, &w->raw_cap, 0, RAW_INITIAL, RAW_INITIAL) != TBP_OK)
		goto fail;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1))) {
		rc = TBP_ERR_ARG;
		goto fail;
	}
	/* The header goes out at once, so even a trace cut short right after
	 * open is recognisable. */
	uint8_t *hdr = malloc(tbp_header_encoded_max());
	if (!hdr)
		goto fail;
	size_t len = tbp_header_encode(hdr, w->features);
	rc = write_skippable(w, TBP_MAGIC_HEADER_FRAME, hdr, len);
	free(hdr);
	if (rc != TBP_OK)
		goto fail;
	*out = w;
	return TBP_OK;
fail:
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	close(fd);
	free(w);
	return rc;
}

int tbp_writer_open(struct tbp_writer **out, const char *path, const struct tbp_writer_opts *opts)
{
	*out = NULL;
	if (!path)
		return TBP_ERR_ARG;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		switch (errno) {
		case ENOENT: return TBP_ERR_NOT_FOUND;
		case EISDIR: return TBP_ERR_IS_DIR;
		case EACCES: case EPERM: case EROFS: return TBP_ERR_PERMISSION;
		default: return TBP_ERR_IO;
		}
	}
	return tbp_writer_open_fd(out, fd, opts);
}

static void start_chunk(struct tbp_writer *w, unsigned stream_kind, uint64_t stream_id)
{
	w->in_chunk = 1;
	w->chunk_stream_kind = stream_kind;
	w->chunk_stream_id = stream_id;
	w->chunk_records = 0;
	w->chunk_bytes = 0;
	w->kinds_len = 0;
	w->kinds_room = w->kinds_cap / TBP_RUN_ENTRY_MAX;
	w->kind_run_len = 0;
	w->npresent = 0;
}

int tbp_writer_begin_chunk(struct tbp_writer *w, unsigned stream_kind, uint64_t stream_id)
{
	if (!w)
		return TBP_ERR_ARG;
	if (w->in_chunk) {
		int rc = tbp_writer_end_chunk(w);
		if (rc != TBP_OK)
			return rc;
	}
	start_chunk(w, stream_kind, stream_id);
	return TBP_OK;
}

/* Writes the runs still open at the chunk's end (one more entry per
 * column, and one in the kinds column). */
static int close_runs(struct tbp_writer *w)
{
	int rc = reserve(&w->kinds, &w->kinds_cap, w->kinds_len, TBP_RUN_ENTRY_MAX, 4096);
	if (rc != TBP_OK)
		return rc;
	w->kinds_len += tbp_put_run(w->kinds + w->kinds_len, w->kind_run, w->kind_run_len);
	for (unsigned i = 0; i < w->npresent; i++) {
		struct kind_columns *kc = &w->cols[w->present[i]];
		uint32_t next = 0;
		for (unsigned c = 0; c <= kc->nfields; c++) {
			/* Runs for the next chunk where fewer than one record in
			 * four changed the delta: an entry then stands for four or
			 * more values, each of which plain would give a byte.
			 * (changes counts 4 per change: the comparison is with
			 * count, not count / 4.) */
			if (kc->changes[c] < kc->count)
				next |= 1u << c;
			if (!(kc->run_cols & (1u << c)))
				continue;
			if (kc->cap[c] - kc->len[c] < TBP_RUN_ENTRY_MAX) {
				uint8_t *p = realloc(kc->col[c], 2 * kc->cap[c]);
				if (!p)
					return TBP_ERR_NOMEM;
				kc->col[c] = p;
				kc->cap[c] *= 2;
				kc->room = 0; /* recomputed by the next record */
			}
			kc->len[c] += (uint32_t)tbp_put_run(kc->col[c] + kc->len[c], tbp_zigzag(kc->run_delta[c]),
				kc->count - kc->run_start[c]);
		}
		kc->next_run_cols = next;
		/* Two fields at a time pays off when most fields are runs and
		 * they seldom break (a repeated kernel's launches: fewer than one
		 * break in eight records), else every break costs a scan. */
		uint64_t breaks = 0;
		for (unsigned c = 1; c <= kc->nfields; c++)
			if (next & (1u << c))
				breaks += kc->changes[c];
		kc->next_vector = (unsigned)__builtin_popcount(next >> 1) * 4 >= kc->nfields * 3u &&
			breaks * 2 < kc->count;
	}
	return TBP_OK;
}

/* Assemble the open chunk's columns into the frame buffer. */
int tbp_writer_end_chunk(struct tbp_writer *w)
{
	if (!w)
		return TBP_ERR_ARG;
	if (!w->in_chunk)
		return TBP_OK;
	w->in_chunk = 0;
	if (w->chunk_records == 0)
		return TBP_OK; /* an empty chunk carries nothing */
	int rc = close_runs(w);
	/* Kinds in increasing order (few: insertion sort). */
	for (unsigned i = 1; i < w->npresent; i++)
		for (unsigned j = i; j > 0 && w->present[j - 1] > w->present[j]; j--) {
			uint8_t t = w->present[j];
			w->present[j] = w->present[j - 1];
			w->present[j - 1] = t;
		}
	size_t need = CHUNK_HEADER_MAX + w->kinds_len;
	for (unsigned i = 0; i < w->npresent; i++) {
		const struct kind_columns *kc = &w->cols[w->present[i]];
		for (unsigned c = 0; c < kc->ncols; c++)
			need += TBP_VARINT_MAX + kc->len[c];
		need += TBP_VARINT_MAX + kc->blob_len;
	}
	if (rc == TBP_OK)
		rc = reserve(&w->raw, &w->raw_cap, w->raw_len, need, RAW_INITIAL);
	if (rc != TBP_OK) {
		/* Drop the chunk rather than leave it half-written. */
		for (unsigned i = 0; i < w->npresent; i++) {
			struct kind_columns *kc = &w->cols[w->present[i]];
			memset(kc->len, 0, sizeof kc->len);
			kc->count = 0;
			kc->blob_len = 0;
		}
		return rc;
	}
	uint8_t *p = w->raw + w->raw_len;
	p += tbp_put_varint(p, w->chunk_stream_kind);
	p += tbp_put_varint(p, w->chunk_stream_id);
	p += tbp_put_varint(p, w->chunk_records);
	memcpy(p, w->kinds, w->kinds_len);
	p += w->kinds_len;
	for (unsigned i = 0; i < w->npresent; i++) {
		struct kind_columns *kc = &w->cols[w->present[i]];
		for (unsigned c = 0; c < kc->ncols; c++) {
			if (c <= kc->nfields) {
				/* The ts and field columns start with their coding. */
				p += tbp_put_varint(p, kc->len[c] + 1u);
				*p++ = kc->run_cols & (1u << c) ? TBP_COLUMN_RUNS : TBP_COLUMN_PLAIN;
			} else {
				p += tbp_put_varint(p, kc->len[c]);
			}
			memcpy(p, kc->col[c], kc->len[c]);
			p += kc->len[c];
			kc->len[c] = 0;
		}
		if (kc->has_blob) {
			/* Blob kinds: after the lengths column, the bytes, also
			 * length-prefixed so a reader can find the next kind. */
			p += tbp_put_varint(p, kc->blob_len);
			if (kc->blob_len)
				memcpy(p, kc->blob, kc->blob_len);
			p += kc->blob_len;
		}
		kc->blob_len = 0;
		kc->count = 0;
	}
	w->raw_len = (size_t)(p - w->raw);
	return TBP_OK;
}

/* Compress and write the frame buffer; the caller has ended any chunk. */
static int flush_frame(struct tbp_writer *w)
{
	if (w->raw_len == 0)
		return TBP_OK;
	size_t bound = ZSTD_compressBound(w->raw_len);
	if (w->zbuf_cap < bound) {
		uint8_t *p = realloc(w->zbuf, bound);
		if (!p)
			return TBP_ERR_NOMEM;
		w->zbuf = p;
		w->zbuf_cap = bound;
	}
	size_t zlen = ZSTD_compress2(w->cctx, w->zbuf, w->zbuf_cap, w->raw, w->raw_len);
	if (ZSTD_isError(zlen)) {
		errno = EIO;
		return TBP_ERR_IO;
	}
	if (w->seek_len == w->seek_cap) {
		size_t cap = w->seek_cap ? 2 * w->seek_cap : 64;
		struct seek_entry *s = realloc(w->seek, cap * sizeof *s);
		if (s) {
			w->seek = s;
			w->seek_cap = cap;
		}
	}
	if (w->seek_len < w->seek_cap)
		w->seek[w->seek_len++] = (struct seek_entry){w->bytes_written, w->frame_first_ts, w->frame_records};
	w->raw_len = 0;
	w->frame_records = 0;
	w->frame_first_ts = 0;
	return write_all(w, w->zbuf, zlen);
}

int tbp_writer_flush(struct tbp_writer *w)
{
	if (!w)
		return TBP_ERR_ARG;
	if (w->error)
		return w->error;
	int reopen = w->in_chunk;
	unsigned sk = w->chunk_stream_kind;
	uint64_t sid = w->chunk_stream_id;
	int rc = tbp_writer_end_chunk(w);
	if (rc == TBP_OK)
		rc = flush_frame(w);
	if (rc == TBP_ERR_IO)
		w->error = rc;
	/* A chunk open across a flush continues in the next frame (frames are
	 * independently decodable, so it becomes a new chunk there). */
	if (reopen)
		start_chunk(w, sk, sid);
	return rc;
}

int tbp_writer_add(struct tbp_writer *w, const struct tbp_record *rec)
{
	if (!w || !rec || !w->in_chunk)
		return TBP_ERR_ARG;
	if (w->error)
		return w->error;
	unsigned k = rec->kind;
	if (k >= TBP_K__MAX || w->cols[k].ncols == 0)
		return TBP_ERR_ARG;   /* not a kind of the schema */
	struct kind_columns *kc = &w->cols[k];
	unsigned nfields = kc->nfields;
	uint32_t blob_len = kc->has_blob ? rec->blob_len : 0;
	if ((blob_len && !rec->blob) || blob_len > TBP_MAX_BLOB)
		return TBP_ERR_ARG;
	if (w->raw_len + CHUNK_HEADER_MAX + w->chunk_bytes + RECORD_MAX + blob_len > FRAME_AUTO_FLUSH &&
	    w->chunk_records + w->raw_len > 0) {
		int rc = tbp_writer_flush(w);
		if (rc != TBP_OK)
			return rc;
	}
	if (w->chunk_records == TBP_CHUNK_MAX_RECORDS) {
		/* The stream goes on in a new chunk. */
		int rc = tbp_writer_begin_chunk(w, w->chunk_stream_kind, w->chunk_stream_id);
		if (rc != TBP_OK)
			return rc;
	}
	int rc = TBP_OK;
	if (kc->room == 0)
		rc = reserve_columns(kc);
	if (rc == TBP_OK && w->kinds_room == 0) {
		rc = reserve(&w->kinds, &w->kinds_cap, w->kinds_len, TBP_RUN_ENTRY_MAX, 4096);
		w->kinds_room = (w->kinds_cap - w->kinds_len) / TBP_RUN_ENTRY_MAX;
	}
	if (rc == TBP_OK && blob_len)
		rc = reserve(&kc->blob, &kc->blob_cap, kc->blob_len, blob_len, 4096);
	if (rc != TBP_OK)
		return rc;
	kc->room--;
	w->kinds_room--;

	size_t added = 0;
	if (TBP_LIKELY_W(w->kind_run == k && w->kind_run_len)) {
		w->kind_run_len++;
	} else {
		if (w->kind_run_len)
			added = tbp_put_run(w->kinds + w->kinds_len, w->kind_run, w->kind_run_len);
		w->kinds_len += added;
		w->kind_run = k;
		w->kind_run_len = 1;
	}
	uint64_t *prev = w->prev[k];
	uint64_t *run_delta = kc->run_delta;
	if (kc->count == 0) {
		/* First record of this kind in the chunk: the columns' coding
		 * for the chunk; deltas start from 0. */
		w->present[w->npresent++] = (uint8_t)k;
		uint32_t runs = kc->run_cols = kc->next_run_cols;
		kc->plain_fields = 0;
		kc->vector_fields = kc->next_vector;
		for (unsigned f = 0; f < TBP_MAX_FIELDS; f++) {
			/* Only the kind's fields: the run check compares nothing else. */
			kc->run_mask[f] = (runs >> (f + 1)) & 1 && w->delta_mask[k][f] ? ~0ull : 0;
			if (w->delta_mask[k][f] && !kc->run_mask[f])
				kc->plain_fields |= 1u << f;
		}
		memset(kc->run_start, 0, sizeof kc->run_start);
		memset(kc->changes, 0, sizeof kc->changes);
		run_delta[0] = prev[0] = rec->ts;
		unsigned i = 0;
		if (w->end_from_ts[k]) {
			run_delta[1] = rec->u.v[0] - rec->ts;
			i = 1;
		}
		for (; i < nfields; i++)
			run_delta[i + 1] = prev[i + 1] = rec->u.v[i];
		for (unsigned c = 0; c <= nfields; c++)
			if (!(runs & (1u << c)))
				added += put_plain(kc, c, run_delta[c]);
		/* The column length prefixes and coding bytes, and the open runs
		 * end_chunk adds. */
		added += (size_t)(kc->ncols + 1) * (TBP_VARINT_MAX + 1) + (size_t)(nfields + 2) * TBP_RUN_ENTRY_MAX;
	} else {
		uint32_t runs = kc->run_cols;
		uint64_t d = rec->ts - prev[0];
		prev[0] = rec->ts;
		kc->changes[0] += d != run_delta[0] ? 4 : 0;
		if (!(runs & 1))
			added += put_plain(kc, 0, d);
		else if (d != run_delta[0])
			added += run_break(kc, 0, d);
		run_delta[0] = d;
		uint64_t dur_delta = run_delta[1];
		/* The fields, two at a time in straight-line arithmetic over all
		 * TBP_MAX_FIELDS (a fixed length the compiler vectorizes): each
		 * delta, and whether any run column's differs from its run's;
		 * delta_mask drops what the record holds past the kind's fields
		 * and an `end` coded from ts.  Every fourth record also counts,
		 * for the next chunk's choice, the fields whose delta changed
		 * (16 per change: 4 as every count here, times the four records
		 * the sample stands for). */
		const uint64_t *v = rec->u.v, *dmask = w->delta_mask[k];
		const uint64_t *rmask = kc->run_mask;
		uint64_t *pv = prev + 1, *chg = kc->changes + 1, *rd = run_delta + 1;
		if (!kc->vector_fields) {
			/* Most fields plain: field by field, each as its coding
			 * says (the vector compare would not pay for itself). */
			unsigned f = w->end_from_ts[k];
			for (; f < nfields; f++) {
				uint64_t df = v[f] - pv[f];
				pv[f] = v[f];
				if (df == rd[f])
					continue; /* a run goes on, or a plain value repeats */
				chg[f] += 4;
				if (rmask[f]) {
					added += run_break(kc, f + 1, df);
					continue;
				}
				rd[f] = df;
			}
			for (uint32_t pm = kc->plain_fields; pm; pm &= pm - 1) {
				f = (unsigned)__builtin_ctz(pm);
				added += put_plain(kc, f + 1, rd[f]);
			}
			goto fields_done;
		}
		uint64_t dd[TBP_MAX_FIELDS];
		u64x2 any_run = {0, 0};
		if (kc->count & 3) {
			for (unsigned f = 0; f < TBP_MAX_FIELDS; f += 2) {
				u64x2 vf, pf, rf, rmf;
				memcpy(&vf, v + f, sizeof vf);
				memcpy(&pf, pv + f, sizeof pf);
				memcpy(&rf, rd + f, sizeof rf);
				memcpy(&rmf, rmask + f, sizeof rmf);
				u64x2 df = vf - pf;
				memcpy(pv + f, &vf, sizeof vf);
				memcpy(dd + f, &df, sizeof df);
				any_run |= (df ^ rf) & rmf;
			}
		} else {
			for (unsigned f = 0; f < TBP_MAX_FIELDS; f += 2) {
				u64x2 vf, pf, rf, mf, rmf, cf;
				memcpy(&vf, v + f, sizeof vf);
				memcpy(&pf, pv + f, sizeof pf);
				memcpy(&rf, rd + f, sizeof rf);
				memcpy(&mf, dmask + f, sizeof mf);
				memcpy(&rmf, rmask + f, sizeof rmf);
				memcpy(&cf, chg + f, sizeof cf);
				u64x2 df = vf - pf;
				memcpy(pv + f, &vf, sizeof vf);
				memcpy(dd + f, &df, sizeof df);
				u64x2 x = (df ^ rf) & mf;
				cf += ((x | -x) >> 63) << 4;
				memcpy(chg + f, &cf, sizeof cf);
				any_run |= x & rmf;
			}
		}
		if (any_run[0] | any_run[1])
			for (unsigned f = 0; f < nfields; f++)
				if ((dd[f] ^ rd[f]) & rmask[f])
					added += run_break(kc, f + 1, dd[f]);
		for (uint32_t pm = kc->plain_fields; pm; pm &= pm - 1) {
			unsigned f = (unsigned)__builtin_ctz(pm);
			added += put_plain(kc, f + 1, dd[f]);
		}
		memcpy(run_delta + 1, dd, sizeof dd);
	fields_done:
		if (w->end_from_ts[k]) {
			d = rec->u.v[0] - rec->ts;
			kc->changes[1] += d != dur_delta ? 4 : 0;
			run_delta[1] = dur_delta;
			if (!(runs & 2))
				added += put_plain(kc, 1, d);
			else if (d != dur_delta)
				added += run_break(kc, 1, d);
			run_delta[1] = d;
		}
	}
	if (kc->has_blob) {
		unsigned c = 1 + nfields;
		uint32_t n = (uint32_t)tbp_put_varint(kc->col[c] + kc->len[c], blob_len);
		kc->len[c] += n;
		added += n;
		if (blob_len)
			memcpy(kc->blob + kc->blob_len, rec->blob, blob_len);
		kc->blob_len += blob_len;
	}
	/* Bytes written, the blob, and (first record of a kind) what end_chunk
	 * will add for this kind: an upper bound for the frame limit. */
	w->chunk_bytes += added + blob_len;
	kc->count++;
	w->chunk_records++;
	if (rec->ts && (w->frame_first_ts == 0 || rec->ts < w->frame_first_ts))
		w->frame_first_ts = rec->ts;
	w->frame_records++;
	return TBP_OK;
}

/* ------------------------------------------------------------ batches
 *
 * A run of records of one kind, coded a column at a time: the same bytes
 * per column as record by record (each column is its own buffer), but each
 * column's loop keeps its previous value and open run in registers and
 * reads one field of each record, where tbp_writer_add walks every field
 * of one record and re-checks the chunk, frame and room for each.  A
 * writer thread draining a launch loop spent most of its time in that
 * per-record walk.  The `changes` counts (the next chunk's choice of
 * coding) count every record here, 4 per change, as the per-record path
 * does for timestamps. */
#define BATCH_MAX 1024u

/* Every column of kc gets room for n more values of any size. */
static int reserve_columns_for(struct kind_columns *kc, uint32_t n)
{
	for (unsigned c = 0; c < kc->ncols; c++) {
		size_t need = (size_t)n * TBP_RUN_ENTRY_MAX;
		if (kc->cap[c] - kc->len[c] >= need)
			continue;
		size_t ncap = kc->cap[c] ? kc->cap[c] : COLUMN_INITIAL;
		while (ncap - kc->len[c] < need)
			ncap *= 2;
		if (ncap > UINT32_MAX)
			return TBP_ERR_NOMEM;
		uint8_t *p = realloc(kc->col[c], ncap);
		if (!p)
			return TBP_ERR_NOMEM;
		kc->col[c] = p;
		kc->cap[c] = (uint32_t)ncap;
	}
	kc->room = 0; /* tbp_writer_add recomputes it */
	return TBP_OK;
}

/* One column over n records: the value VAL of record i, coded as its
 * delta from the record before (DELTA) or as it is (an end coded from ts).
 * A run column writes an entry where the delta changes; a plain column
 * writes every one. */
#define CODE_COLUMN(c, VAL, DELTA)                                                           \
	do {                                                                                  \
		uint64_t rd_ = kc->run_delta[c], prev_ = prev[c], chg_ = 0;                       \
		uint32_t bytes_ = 0;                                                              \
		if ((kc->run_cols >> (c)) & 1) {                                                  \
			for (uint32_t i = 0; i < n; i++) {                                            \
				uint64_t v_ = (VAL), d_ = (DELTA) ? v_ - prev_ : v_;                      \
				prev_ = v_;                                                               \
				if (TBP_LIKELY_W(d_ == rd_))                                              \
					continue;                                                             \
				chg_ += 4;                                                                \
				kc->run_delta[c] = rd_;                                                   \
				bytes_ += run_break_at(kc, c, d_, base + i);                              \
				rd_ = d_;                                                                 \
			}                                                                             \
		} else {                                                                          \
			for (uint32_t i = 0; i < n; i++) {                                            \
				uint64_t v_ = (VAL), d_ = (DELTA) ? v_ - prev_ : v_;                      \
				prev_ = v_;                                                               \
				chg_ += d_ != rd_ ? 4 : 0;                                                \
				rd_ = d_;                                                                 \
				bytes_ += put_plain(kc, c, d_);                                           \
			}                                                                             \
		}                                                                                 \
		kc->run_delta[c] = rd_;                                                           \
		kc->changes[c] += chg_;                                                           \
		if (DELTA)                                                                        \
			prev[c] = prev_;                                                              \
		added += bytes_;                                                                  \
	} while (0)

/* Columns c and c + 1, both runs of deltas, over n records: v points at
 * the pair's values in the first record (records are sizeof(struct
 * tbp_record) apart), prev at the pair's previous values. */
static uint32_t code_run_pair(struct kind_columns *kc, uint64_t *prev, unsigned c, const uint64_t *v, uint32_t n,
	uint32_t base)
{
	u64x2 pv, rd, chg = {0, 0};
	memcpy(&pv, prev, sizeof pv);
	memcpy(&rd, kc->run_delta + c, sizeof rd);
	uint32_t bytes = 0;
	const char *at = (const char *)v;
	for (uint32_t i = 0; i < n; i++, at += sizeof(struct tbp_record)) {
		u64x2 x;
		memcpy(&x, at, sizeof x);
		u64x2 d = x - pv;
		pv = x;
		u64x2 diff = d ^ rd;
		if (TBP_LIKELY_W((diff[0] | diff[1]) == 0))
			continue;
		for (unsigned l = 0; l < 2; l++) {
			if (!diff[l])
				continue;
			chg[l] += 4;
			kc->run_delta[c + l] = rd[l];
			bytes += run_break_at(kc, c + l, d[l], base + i);
			rd[l] = d[l];
		}
	}
	memcpy(prev, &pv, sizeof pv);
	memcpy(kc->run_delta + c, &rd, sizeof rd);
	kc->changes[c] += chg[0];
	kc->changes[c + 1] += chg[1];
	return bytes;
}

/* n records of kind k after at least one of that kind in the open chunk,
 * the kinds column's open run being k's: all fit in the chunk and frame
 * (the caller checked). */
static int add_same_kind(struct tbp_writer *w, unsigned k, const struct tbp_record *recs, uint32_t n)
{
	struct kind_columns *kc = &w->cols[k];
	int rc = reserve_columns_for(kc, n);
	if (rc != TBP_OK)
		return rc;
	uint64_t *prev = w->prev[k];
	uint32_t base = kc->count;
	size_t added = 0;
	CODE_COLUMN(0, recs[i].ts, true);
	unsigned f = 0;
	if (w->end_from_ts[k]) {
		CODE_COLUMN(1, recs[i].u.v[0] - recs[i].ts, false);
		f = 1;
	}
	/* Two adjacent run columns at a time where both are runs (most of a
	 * repeated launch's fields): one 16-byte subtract and compare per
	 * record for the pair. */
	for (; f + 1 < kc->nfields && ((kc->run_cols >> (f + 1)) & 3) == 3; f += 2)
		added += code_run_pair(kc, prev + f + 1, f + 1, &recs->u.v[f], n, base);
	for (; f < kc->nfields; f++)
		CODE_COLUMN(f + 1, recs[i].u.v[f], true);
	uint64_t first_ts = w->frame_first_ts;
	for (uint32_t i = 0; i < n; i++)
		if (recs[i].ts && (first_ts == 0 || recs[i].ts < first_ts))
			first_ts = recs[i].ts;
	w->frame_first_ts = first_ts;
	w->chunk_bytes += added;
	kc->count += n;
	w->chunk_records += n;
	w->frame_records += n;
	w->kind_run_len += n;
	return TBP_OK;
}

int tbp_writer_add_batch(struct tbp_writer *w, const struct tbp_record *recs, size_t n)
{
	if (!w || (!recs && n))
		return TBP_ERR_ARG;
	size_t i = 0;
	while (i < n) {
		/* The first record of a kind's run goes the per-record way: it
		 * checks the record, starts the kind in the chunk, the kinds
		 * column's run, and cuts the chunk or frame when due. */
		int rc = tbp_writer_add(w, &recs[i]);
		if (rc != TBP_OK)
			return rc;
		unsigned k = recs[i].kind;
		i++;
		struct kind_columns *kc = &w->cols[k];
		if (kc->has_blob)
			continue;
		size_t j = i;
		while (j < n && j - i < BATCH_MAX && recs[j].kind == k)
			j++;
		uint32_t m = (uint32_t)(j - i);
		/* What the frame and the chunk still take, at the worst case
		 * per record; the rest goes on record by record. */
		size_t used = w->raw_len + CHUNK_HEADER_MAX + w->chunk_bytes;
		size_t fit = used < FRAME_AUTO_FLUSH ? (FRAME_AUTO_FLUSH - used) / RECORD_MAX : 0;
		if (m > fit)
			m = (uint32_t)fit;
		if (m > TBP_CHUNK_MAX_RECORDS - w->chunk_records)
			m = TBP_CHUNK_MAX_RECORDS - w->chunk_records;
		if (m < 2)
			continue;
		rc = add_same_kind(w, k, &recs[i], m);
		if (rc != TBP_OK)
			return rc;
		i += m;
	}
	return TBP_OK;
}

/* Seek table: entries (offset, first_ts, records) then count and a tag, so
 * a reader can find it from the last 8 bytes of a complete file. */
static int write_seek_table(struct tbp_writer *w)
{
	if (w->seek_len == 0 || w->seek_len > (TBP_MAX_HEADER_FRAME - 8) / 24)
		return TBP_OK;
	size_t len = w->seek_len * 24 + 8;
	uint8_t *buf = malloc(len);
	if (!buf)
		return TBP_OK; /* optional: a trace is complete without it */
	uint8_t *p = buf;
	for (size_t i = 0; i < w->seek_len; i++, p += 24) {
		tbp_put_le64(p, w->seek[i].offset);
		tbp_put_le64(p + 8, w->seek[i].first_ts);
		tbp_put_le64(p + 16, w->seek[i].records);
	}
	tbp_put_le32(p, (uint32_t)w->seek_len);
	memcpy(p + 4, "TBSK", 4);
	int rc = write_skippable(w, TBP_MAGIC_SEEK_FRAME, buf, len);
	free(buf);
	return rc;
}

int tbp_writer_close(struct tbp_writer *w)
{
	if (!w)
		return TBP_ERR_ARG;
	int rc = tbp_writer_end_chunk(w);
	int frc = tbp_writer_flush(w);
	if (rc == TBP_OK)
		rc = frc;
	if (rc == TBP_OK)
		rc = write_seek_table(w);
	if (close(w->fd) != 0 && rc == TBP_OK && errno != EINTR)
		rc = TBP_ERR_IO;
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	free(w->zbuf);
	free(w->seek);
	free(w->kinds);
	for (unsigned k = 0; k < TBP_K__MAX; k++) {
		for (unsigned c = 0; c < w->cols[k].ncols; c++)
			free(w->cols[k].col[c]);
		free(w->cols[k].blob);
	}
	free(w);
	return rc;
}

uint64_t tbp_writer_bytes_written(const struct tbp_writer *w)
{
	return w ? w->bytes_written : 0;
}
