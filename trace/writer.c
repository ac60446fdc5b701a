/*
 * Trace writer: encodes records into a frame buffer (chunks of one stream
 * each, fields delta + zigzag + varint coded), compresses the buffer into
 * one checksummed zstd frame at every flush and writes it.  One writer
 * thread owns a writer; nothing here takes locks or mallocs per record.
 * doc/trace-format.md describes the bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "internal.h"

/* A frame is flushed by itself once its raw bytes pass this size, which
 * bounds both the writer's buffers and the reader's memory per frame. */
#define FRAME_AUTO_FLUSH (8u << 20)
#define RAW_INITIAL (1u << 20)
/* Worst case of one record without its blob: kind, ts, every field. */
#define RECORD_MAX (TBP_VARINT_MAX * (2 + TBP_MAX_FIELDS) + TBP_VARINT_MAX)
#define CHUNK_HEADER_MAX (2 * TBP_VARINT_MAX + TBP_COUNT_SLOT)

struct seek_entry {
	uint64_t offset, first_ts, records;
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
	size_t chunk_start;      /* offset in raw of the chunk header */
	size_t chunk_count_pos;  /* offset in raw of the record-count slot */
	uint32_t chunk_records;

	/* Delta state per kind, reset at each chunk: kind_gen[k] != gen means
	 * "all zero", so starting a chunk costs nothing per kind. */
	uint32_t gen;
	uint32_t kind_gen[TBP_K__MAX];
	uint64_t prev[TBP_K__MAX][1 + TBP_MAX_FIELDS];
	uint8_t end_from_ts[TBP_K__MAX];  /* schema flag, per kind */

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

static int reserve_raw(struct tbp_writer *w, size_t extra)
{
	if (w->raw_cap - w->raw_len >= extra)
		return TBP_OK;
	size_t cap = w->raw_cap ? w->raw_cap : RAW_INITIAL;
	while (cap - w->raw_len < extra)
		cap *= 2;
	uint8_t *p = realloc(w->raw, cap);
	if (!p)
		return TBP_ERR_NOMEM;
	w->raw = p;
	w->raw_cap = cap;
	return TBP_OK;
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
	w->gen = 1;
	for (unsigned k = 0; k < TBP_K__MAX; k++) {
		const struct tbp_kind_info *ki = tbp_kind_lookup(k);
		w->end_from_ts[k] = ki && (tbp_kind_schema_flags(ki) & TBP_SCHEMA_END_FROM_TS);
	}
	w->features = opts ? opts->features : 0;
	/* Level 1 by default: on delta-coded records it compresses better than
	 * 3 and at twice the speed (bench/trace measures both). */
	int level = opts && opts->compression_level ? opts->compression_level : 1;
	w->cctx = ZSTD_createCCtx();
	int rc = TBP_ERR_NOMEM;
	if (!w->cctx || reserve_raw(w, RAW_INITIAL) != TBP_OK)
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
	/* reserve_raw(CHUNK_HEADER_MAX) was done by the caller. */
	w->chunk_start = w->raw_len;
	uint8_t *p = w->raw + w->raw_len;
	p += tbp_put_varint(p, stream_kind);
	p += tbp_put_varint(p, stream_id);
	w->chunk_count_pos = (size_t)(p - w->raw);
	w->raw_len = w->chunk_count_pos + TBP_COUNT_SLOT;
	w->in_chunk = 1;
	w->chunk_stream_kind = stream_kind;
	w->chunk_stream_id = stream_id;
	w->chunk_records = 0;
	if (++w->gen == 0) {
		memset(w->kind_gen, 0, sizeof w->kind_gen);
		w->gen = 1;
	}
}

int tbp_writer_begin_chunk(struct tbp_writer *w, unsigned stream_kind, uint64_t stream_id)
{
	if (!w)
		return TBP_ERR_ARG;
	if (w->in_chunk)
		tbp_writer_end_chunk(w);
	int rc = reserve_raw(w, CHUNK_HEADER_MAX);
	if (rc != TBP_OK)
		return rc;
	start_chunk(w, stream_kind, stream_id);
	return TBP_OK;
}

int tbp_writer_end_chunk(struct tbp_writer *w)
{
	if (!w)
		return TBP_ERR_ARG;
	if (!w->in_chunk)
		return TBP_OK;
	w->in_chunk = 0;
	if (w->chunk_records == 0) {
		w->raw_len = w->chunk_start; /* an empty chunk carries nothing */
		return TBP_OK;
	}
	/* Padded varint: continuation bits on all but the last slot byte. */
	uint8_t *p = w->raw + w->chunk_count_pos;
	uint32_t n = w->chunk_records;
	for (int i = 0; i < TBP_COUNT_SLOT; i++, n >>= 7)
		p[i] = (uint8_t)((n & 0x7f) | (i < TBP_COUNT_SLOT - 1 ? 0x80 : 0));
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
	tbp_writer_end_chunk(w);
	int rc = flush_frame(w);
	if (rc != TBP_OK)
		w->error = rc;
	/* A chunk open across a flush continues in the next frame (frames are
	 * independently decodable, so it becomes a new chunk there). */
	if (reopen && reserve_raw(w, CHUNK_HEADER_MAX) == TBP_OK)
		start_chunk(w, sk, sid);
	return rc;
}

int tbp_writer_add(struct tbp_writer *w, const struct tbp_record *rec)
{
	if (!w || !rec || !w->in_chunk)
		return TBP_ERR_ARG;
	if (w->error)
		return w->error;
	const struct tbp_kind_info *ki = tbp_kind_lookup(rec->kind);
	if (!ki)
		return TBP_ERR_ARG;
	uint32_t blob_len = ki->has_blob ? rec->blob_len : 0;
	if (blob_len && !rec->blob)
		return TBP_ERR_ARG;
	if (w->raw_len + RECORD_MAX + blob_len > FRAME_AUTO_FLUSH || w->chunk_records == TBP_MAX_CHUNK_RECORDS) {
		int rc = tbp_writer_flush(w);
		if (rc != TBP_OK)
			return rc;
		if (!w->in_chunk)
			return TBP_ERR_NOMEM;
	}
	int rc = reserve_raw(w, RECORD_MAX + blob_len);
	if (rc != TBP_OK)
		return rc;

	unsigned k = rec->kind;
	uint64_t *prev = w->prev[k];
	if (w->kind_gen[k] != w->gen) {
		memset(prev, 0, sizeof w->prev[k]);
		w->kind_gen[k] = w->gen;
	}
	uint8_t *p = w->raw + w->raw_len;
	p += tbp_put_varint(p, k);
	p += tbp_put_varint(p, tbp_zigzag(rec->ts - prev[0]));
	prev[0] = rec->ts;
	unsigned i = 0;
	if (w->end_from_ts[k]) {
		p += tbp_put_varint(p, tbp_zigzag(rec->u.v[0] - rec->ts));
		i = 1;
	}
	for (; i < ki->nfields; i++) {
		uint64_t v = rec->u.v[i];
		p += tbp_put_varint(p, tbp_zigzag(v - prev[i + 1]));
		prev[i + 1] = v;
	}
	if (ki->has_blob) {
		p += tbp_put_varint(p, blob_len);
		if (blob_len)
			memcpy(p, rec->blob, blob_len);
		p += blob_len;
	}
	w->raw_len = (size_t)(p - w->raw);
	w->chunk_records++;
	if (rec->ts && (w->frame_first_ts == 0 || rec->ts < w->frame_first_ts))
		w->frame_first_ts = rec->ts;
	w->frame_records++;
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
	tbp_writer_end_chunk(w);
	int rc = tbp_writer_flush(w);
	if (rc == TBP_OK)
		rc = write_seek_table(w);
	if (close(w->fd) != 0 && rc == TBP_OK && errno != EINTR)
		rc = TBP_ERR_IO;
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	free(w->zbuf);
	free(w->seek);
	free(w);
	return rc;
}

uint64_t tbp_writer_bytes_written(const struct tbp_writer *w)
{
	return w ? w->bytes_written : 0;
}
