#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "tt_util.h"

uint64_t tt_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Field values that exercise the codec: zeros, repeats, +1 runs, small
 * numbers, and full-width values (delta wraps around 2^64). */
static uint64_t field_value(uint64_t *st, uint64_t prev)
{
	switch (tt_rand(st) % 8) {
	case 0: return 0;
	case 1: case 2: return prev;
	case 3: return prev + 1;
	case 4: return tt_rand(st) % 100;
	case 5: return tt_rand(st);
	case 6: return prev - (tt_rand(st) % 1000);
	default: return tt_rand(st) % 100000;
	}
}

void tt_random_trace(struct tt_trace *t, uint64_t seed, size_t n)
{
	uint64_t st = seed * 7919 + 1;
	memset(t, 0, sizeof *t);
	t->n = n;
	t->recs = calloc(n, sizeof *t->recs);
	t->stream_kind = calloc(n, 1);
	t->stream_id = calloc(n, sizeof *t->stream_id);
	t->flush_after = calloc(n, 1);
	t->chunk_break = calloc(n, 1);
	size_t blob_cap = n * 64 + 70000, blob_len = 0;
	t->blobs = malloc(blob_cap);
	unsigned kinds[TBP_K__MAX], nkinds = 0;
	for (unsigned k = 0; k < TBP_K__MAX; k++)
		if (tbp_kind_lookup(k))
			kinds[nkinds++] = k;
	uint64_t prev[TBP_K__MAX][TBP_MAX_FIELDS] = {{0}};
	uint64_t ts = tt_rand(&st) % 1000000000000ull;
	unsigned sk = TBP_STREAM_DEFS;
	uint64_t sid = 0;
	int big_blob_done = 0;
	for (size_t i = 0; i < n; i++) {
		if (tt_rand(&st) % 16 == 0) {
			sk = (unsigned)(tt_rand(&st) % 3);
			sid = sk == TBP_STREAM_DEFS ? 0 : sk == TBP_STREAM_GPU ? tt_rand(&st) % 4
				: tt_rand(&st) % 2 ? (uint32_t)tt_rand(&st) : 1000 + tt_rand(&st) % 3;
		}
		t->stream_kind[i] = (uint8_t)sk;
		t->stream_id[i] = sid;
		t->chunk_break[i] = tt_rand(&st) % 50 == 0;
		t->flush_after[i] = tt_rand(&st) % 200 == 0;
		struct tbp_record *r = &t->recs[i];
		unsigned k = kinds[tt_rand(&st) % nkinds];
		const struct tbp_kind_info *ki = tbp_kind_lookup(k);
		r->kind = (uint8_t)k;
		r->nfields = ki->nfields;
		ts += tt_rand(&st) % 4 == 0 ? tt_rand(&st) % 5000 : 0;
		r->ts = tt_rand(&st) % 50 == 0 ? tt_rand(&st) : ts;
		for (unsigned f = 0; f < ki->nfields; f++)
			prev[k][f] = r->u.v[f] = field_value(&st, prev[k][f]);
		if (ki->has_blob) {
			uint32_t len = (uint32_t)(tt_rand(&st) % 5 == 0 ? 0 : tt_rand(&st) % 64);
			if (!big_blob_done && tt_rand(&st) % 100 == 0) {
				len = 65000; /* one blob bigger than typical buffers */
				big_blob_done = 1;
			}
			if (blob_len + len > blob_cap)
				len = 0;
			for (uint32_t b = 0; b < len; b++)
				t->blobs[blob_len + b] = (uint8_t)tt_rand(&st);
			r->blob_len = len;
			r->blob_len = len;
			r->blob = (void *)(uintptr_t)blob_len; /* fixed up below: arena may not move, but keep offsets */
			blob_len += len;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (tbp_kind_lookup(t->recs[i].kind)->has_blob)
			t->recs[i].blob = t->blobs + (uintptr_t)t->recs[i].blob;
}

void tt_free_trace(struct tt_trace *t)
{
	free(t->recs);
	free(t->stream_kind);
	free(t->stream_id);
	free(t->flush_after);
	free(t->chunk_break);
	free(t->blobs);
	memset(t, 0, sizeof *t);
}

int tt_write_trace(const struct tt_trace *t, int fd)
{
	struct tbp_writer *w;
	struct tbp_writer_opts opts = {.compression_level = 3, .features = TBP_FEAT_CUPTI | TBP_FEAT_PYTHON};
	int rc = tbp_writer_open_fd(&w, fd, &opts);
	if (rc != TBP_OK) {
		fprintf(stderr, "writer open: %s\n", tbp_error_name(rc));
		return -1;
	}
	int have_chunk = 0;
	unsigned sk = 0;
	uint64_t sid = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (!have_chunk || t->chunk_break[i] || sk != t->stream_kind[i] || sid != t->stream_id[i]) {
			sk = t->stream_kind[i];
			sid = t->stream_id[i];
			if (t->chunk_break[i] && have_chunk)
				tbp_writer_end_chunk(w);
			rc = tbp_writer_begin_chunk(w, sk, sid);
			have_chunk = 1;
			if (rc != TBP_OK)
				break;
		}
		rc = tbp_writer_add(w, &t->recs[i]);
		if (rc == TBP_OK && t->flush_after[i])
			rc = tbp_writer_flush(w);
		if (rc != TBP_OK)
			break;
	}
	int crc = tbp_writer_close(w);
	if (rc == TBP_OK)
		rc = crc;
	if (rc != TBP_OK) {
		fprintf(stderr, "writer: %s\n", tbp_error_name(rc));
		return -1;
	}
	return 0;
}

uint8_t *tt_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	*size = 0;
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *p = realloc(buf, cap * 2);
			if (!p) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = p;
			cap *= 2;
		}
	}
	fclose(f);
	*size = len;
	return buf;
}

int tt_write_file(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int ok = fwrite(data, 1, size, f) == size;
	return fclose(f) == 0 && ok ? 0 : -1;
}
