/*
 * Round trip: random records of every kind, spread over several streams,
 * chunks and frames, written and read back field for field.  Many seeds;
 * a failing seed is printed so it can be replayed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "tbprof/trace.h"
#include "internal.h"
#include "tt_util.h"

/* Fields handed out per kind under the limits of a limited read
 * (tbp_reader_limit_fields); 0: every field. */
static const unsigned read_limit[TBP_K__MAX] = {
	[TBP_K_GPU_KERNEL] = 6, [TBP_K_LAUNCH] = 8, [TBP_K_PY_SPAN] = 1, [TBP_K_STRING] = 1,
};

static int check_equal(const struct tbp_record *want, const struct tbp_record *got, unsigned sk, uint64_t sid,
	size_t index, int limited)
{
	const struct tbp_kind_info *ki = tbp_kind_lookup(want->kind);
	unsigned nf = ki->nfields;
	if (limited && read_limit[want->kind] && read_limit[want->kind] < nf)
		nf = read_limit[want->kind];
	if (got->kind != want->kind || got->ts != want->ts || got->nfields != nf ||
	    got->stream_kind != sk || got->tid != (uint32_t)sid) {
		fprintf(stderr, "record %zu: header differs: kind %u/%u ts %llu/%llu nfields %u stream %u/%u tid %u\n",
			index, want->kind, got->kind, (unsigned long long)want->ts, (unsigned long long)got->ts,
			got->nfields, sk, got->stream_kind, got->tid);
		return -1;
	}
	for (unsigned i = 0; i < nf; i++)
		if (got->u.v[i] != want->u.v[i]) {
			fprintf(stderr, "record %zu (%s): field %s: want %llu got %llu\n", index, ki->name,
				ki->field_names[i], (unsigned long long)want->u.v[i], (unsigned long long)got->u.v[i]);
			return -1;
		}
	for (unsigned i = nf; i < TBP_MAX_FIELDS; i++)
		if (got->u.v[i] != 0) {
			fprintf(stderr, "record %zu: field %u beyond schema or limit not zero\n", index, i);
			return -1;
		}
	uint32_t want_len = ki->has_blob ? want->blob_len : 0;
	if (got->blob_len != want_len || (want_len && memcmp(got->blob, want->blob, want_len))) {
		fprintf(stderr, "record %zu: blob differs (len %u/%u)\n", index, want_len, got->blob_len);
		return -1;
	}
	return 0;
}

/* limited: read with read_limit's limits, a run of up to 64 records at a
 * time (tbp_reader_next_many): the same records, their later fields zero. */
static int run_seed(uint64_t seed, int via_file, size_t n, int no_flush, int limited)
{
	struct tt_trace t;
	tt_random_trace(&t, seed, n);
	/* Without explicit flushes the writer must cut frames by itself. */
	if (no_flush)
		memset(t.flush_after, 0, t.n);
	char path[] = "/tmp/tbp-rt-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return -1;
	}
	if (tt_write_trace(&t, fd) != 0) {
		unlink(path);
		return -1;
	}
	struct tbp_reader *r;
	size_t size = 0;
	uint8_t *data = NULL;
	int rc;
	if (no_flush) {
		/* The writer's own frame-size limit must have cut several frames. */
		uint8_t *whole = tt_read_file(path, &size);
		struct tt_frame frames[64];
		int nf = whole ? tt_frames(whole, size, frames, 64) : -1, ndata = 0;
		for (int i = 0; i < nf && i < 64; i++)
			ndata += frames[i].type == TT_FRAME_DATA;
		free(whole);
		if (ndata < 2) {
			fprintf(stderr, "seed %llu: %zu bytes in %d data frames; expected the writer to split\n",
				(unsigned long long)seed, size, ndata);
			unlink(path);
			tt_free_trace(&t);
			return -1;
		}
		printf("large trace: %zu records, %zu bytes, %d data frames\n", t.n, size, ndata);
	}
	if (via_file) {
		rc = tbp_reader_open(&r, path);
	} else {
		data = tt_read_file(path, &size);
		rc = tbp_reader_open_mem(&r, data, size, path);
	}
	unlink(path);
	if (rc != TBP_OK) {
		fprintf(stderr, "seed %llu: open: %s: %s\n", (unsigned long long)seed, tbp_error_name(rc),
			tbp_reader_detail(r));
		return -1;
	}
	static struct tbp_record run[64];
	size_t i = 0;
	int status = 0;
	for (unsigned k = 0; limited && k < TBP_K__MAX; k++)
		if (read_limit[k] && tbp_reader_limit_fields(r, k, read_limit[k]) != TBP_OK) {
			fprintf(stderr, "seed %llu: tbp_reader_limit_fields refused\n", (unsigned long long)seed);
			status = -1;
		}
	for (;;) {
		unsigned got_n = 1;
		rc = limited ? tbp_reader_next_many(r, run, 64, &got_n) : tbp_reader_next(r, &run[0]);
		if (rc != TBP_OK || status)
			break;
		/* Too late once records were read. */
		if (limited && i == 0 && tbp_reader_limit_fields(r, TBP_K_API, 2) != TBP_ERR_ARG) {
			fprintf(stderr, "seed %llu: a limit set after the first record\n", (unsigned long long)seed);
			status = -1;
			break;
		}
		for (unsigned j = 0; j < got_n && !status; j++, i++) {
			if (i >= t.n) {
				fprintf(stderr, "seed %llu: more records than written\n", (unsigned long long)seed);
				status = -1;
			} else if (check_equal(&t.recs[i], &run[j], t.stream_kind[i], t.stream_id[i], i, limited)) {
				fprintf(stderr, "seed %llu mismatch%s\n", (unsigned long long)seed, limited ? " (limited)" : "");
				status = -1;
			}
		}
		if (status)
			break;
	}
	if (!status && (rc != TBP_END || i != t.n)) {
		fprintf(stderr, "seed %llu: ended with %s after %zu of %zu records: %s\n", (unsigned long long)seed,
			tbp_error_name(rc), i, t.n, tbp_reader_detail(r));
		status = -1;
	}
	if (!status && tbp_reader_header(r)->version != TBP_FORMAT_VERSION) {
		fprintf(stderr, "header version wrong\n");
		status = -1;
	}
	tbp_reader_close(r);
	free(data);
	tt_free_trace(&t);
	return status;
}

/* The seek table at the end names every data frame and its record count. */
static int seek_table(void)
{
	struct tt_trace t;
	tt_random_trace(&t, 99, 3000);
	size_t size;
	uint8_t *d = tt_trace_bytes(&t, &size);
	struct tt_frame fr[256];
	int nf = d ? tt_frames(d, size, fr, 256) : -1, failed = 0;
	if (nf < 3 || nf > 256 || fr[nf - 1].type != TT_FRAME_SEEK || memcmp(d + size - 4, "TBSK", 4)) {
		fprintf(stderr, "seek table: not the last frame\n");
		failed = 1;
	} else {
		const uint8_t *tab = d + fr[nf - 1].offset + 8;
		uint32_t count = tbp_get_le32(d + size - 8);
		uint64_t records = 0;
		int ndata = 0;
		for (int i = 0; i < nf; i++)
			if (fr[i].type == TT_FRAME_DATA) {
				if (ndata >= (int)count || tbp_get_le64(tab + 24 * ndata) != fr[i].offset)
					failed = 1;
				records += tbp_get_le64(tab + 24 * ndata + 16);
				ndata++;
			}
		if (failed || ndata != (int)count || records != t.n) {
			fprintf(stderr, "seek table: %u entries for %d frames, %llu records for %zu\n", count, ndata,
				(unsigned long long)records, t.n);
			failed = 1;
		}
	}
	free(d);
	tt_free_trace(&t);
	return failed;
}

/* Long runs (format version 2): one stream of 200 k launches whose fields
 * stay put or step by a fixed amount for thousands of records, so runs
 * span many reader batches and the writer's TBP_CHUNK_MAX_RECORDS cut;
 * a marker every 70 k records breaks the kinds column's run, and a field
 * that jumps between 0 and ~0 takes the 65-bit entries. */
static int long_runs(void)
{
	size_t n = 200000;
	struct tt_trace t = {.n = n};
	t.recs = calloc(n, sizeof *t.recs);
	t.stream_kind = calloc(n, 1);
	t.stream_id = calloc(n, sizeof *t.stream_id);
	t.flush_after = calloc(n, 1);
	t.chunk_break = calloc(n, 1);
	if (!t.recs || !t.stream_kind || !t.stream_id || !t.flush_after || !t.chunk_break)
		return 1;
	uint64_t ts = 1000000, step = 700;
	for (size_t i = 0; i < n; i++) {
		struct tbp_record *r = &t.recs[i];
		t.stream_kind[i] = TBP_STREAM_THREAD;
		t.stream_id[i] = 42;
		if (i % 1000 == 999)
			step += 13;
		ts += step;
		r->ts = ts;
		if (i % 70000 == 69999) {
			r->kind = TBP_K_MARKER;
			r->u.marker.value = i;
			continue;
		}
		r->kind = TBP_K_LAUNCH;
		r->u.launch.end = ts + (i % 5000 < 4000 ? 300 : 300 + i % 7);
		r->u.launch.api = 3;
		r->u.launch.corr = 100 + i;
		r->u.launch.callpath = 7 + i / 30000;
		r->u.launch.stream = i < 150000 ? 0 : UINT64_MAX - 5;
		r->u.launch.name = 11;
		r->u.launch.grid_x = (i / 3000) % 2 ? 0 : ~0ull;
		r->u.launch.block_x = 256;
	}
	t.flush_after[n / 2] = 1;
	size_t size;
	uint8_t *d = tt_trace_bytes(&t, &size);
	struct tbp_reader *r = NULL;
	int failed = !d || tbp_reader_open_mem(&r, d, size, "long-runs") != TBP_OK;
	struct tbp_record got;
	size_t i = 0;
	int rc = TBP_OK;
	while (!failed && (rc = tbp_reader_next(r, &got)) == TBP_OK) {
		if (i >= n || check_equal(&t.recs[i], &got, TBP_STREAM_THREAD, 42, i, 0)) {
			failed = 1;
			break;
		}
		i++;
	}
	if (!failed && (rc != TBP_END || i != n)) {
		fprintf(stderr, "long runs: %s after %zu of %zu records: %s\n", tbp_error_name(rc), i, n,
			tbp_reader_detail(r));
		failed = 1;
	}
	if (!failed)
		printf("long runs: %zu records in %zu bytes (%.2f bytes/record)\n", n, size, (double)size / n);
	tbp_reader_close(r);
	free(d);
	tt_free_trace(&t);
	return failed;
}

/* Writer misuse and write failures are reported, never crash. */
static int writer_errors(void)
{
	int failed = 0;
	struct tbp_writer *w;
	struct tbp_record rec = {.kind = TBP_K_LAUNCH, .ts = 1};
	char path[] = "/tmp/tbp-we-XXXXXX";
	int fd = mkstemp(path);
	if (tbp_writer_open_fd(&w, fd, NULL) != TBP_OK)
		return 1;
	unlink(path);
	if (tbp_writer_add(w, &rec) != TBP_ERR_ARG) {
		fprintf(stderr, "add outside a chunk was accepted\n");
		failed++;
	}
	tbp_writer_begin_chunk(w, TBP_STREAM_THREAD, 1);
	rec.kind = 60; /* no such kind */
	if (tbp_writer_add(w, &rec) != TBP_ERR_ARG) {
		fprintf(stderr, "unknown kind was accepted\n");
		failed++;
	}
	rec.kind = TBP_K_STRING;
	rec.blob = NULL;
	rec.blob_len = 5;
	if (tbp_writer_add(w, &rec) != TBP_ERR_ARG) {
		fprintf(stderr, "blob_len without blob was accepted\n");
		failed++;
	}
	tbp_writer_close(w);
	if (tbp_writer_open(&w, "/nonexistent-dir/x.zst", NULL) != TBP_ERR_NOT_FOUND || w) {
		fprintf(stderr, "open in a missing directory: wrong status\n");
		failed++;
	}
	/* A full disk: the header write or the first flush fails with IO. */
	fd = open("/dev/full", O_WRONLY);
	if (fd >= 0) {
		int rc = tbp_writer_open_fd(&w, fd, NULL);
		if (rc == TBP_OK) {
			tbp_writer_begin_chunk(w, TBP_STREAM_THREAD, 1);
			rec = (struct tbp_record){.kind = TBP_K_MARKER, .ts = 5};
			tbp_writer_add(w, &rec);
			rc = tbp_writer_flush(w);
			int crc = tbp_writer_close(w);
			if (rc == TBP_OK)
				rc = crc;
		}
		if (rc != TBP_ERR_IO) {
			fprintf(stderr, "/dev/full: %s, want I/O error\n", tbp_error_name(rc));
			failed++;
		}
	}
	return failed;
}

int main(int argc, char **argv)
{
	int seeds = argc > 1 ? atoi(argv[1]) : 40;
	int failed = 0;
	/* Record by record, then the same traces through tbp_writer_add_batch
	 * (runs of a kind coded a column at a time): the same records back. */
	for (tt_batch_writes = 0; tt_batch_writes < 2; tt_batch_writes++) {
		for (int s = 1; s <= seeds; s++)
			if (run_seed((uint64_t)s, s & 1, 1500, 0, 0) || run_seed((uint64_t)s, s & 1, 1500, 0, 1))
				failed++;
		/* A file of several MB through the streaming file reader (window
		 * refills), with frames cut by the writer's size limit. */
		if (run_seed(1000, 1, 300000, 1, 0) || run_seed(1000, 1, 300000, 1, 1))
			failed++;
		failed += long_runs();
	}
	tt_batch_writes = 0;
	failed += writer_errors();
	failed += seek_table();
	printf("%d seeds + 1 large (each also read with field limits) + writer errors + seek table, %d failed\n", seeds,
	       failed);
	return failed ? 1 : 0;
}
