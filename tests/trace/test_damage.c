/*
 * Damaged traces: cut at every byte of the last data frame (and at every
 * byte of a small trace), and every single-bit flip of a small trace.
 * The reader must never crash or hang, must return exactly the records of
 * the complete frames before the damage, and must say what happened
 * (TBP_ERR_TRUNCATED at the cut, TBP_ERR_NO_EVENTS for a cut before the
 * first record, an error for flips) - a flip may only go
 * unreported when every record still reads back unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tbprof/trace.h"
#include "tt_util.h"

struct result {
	int open_rc, end_rc;
	size_t nrecs, nevents; /* nevents: records of threads and devices (not definitions) */
	int prefix_ok; /* records read equal the reference's first nrecs */
};

static struct tbp_record *ref;
static size_t nref;

static int same_record(const struct tbp_record *a, const struct tbp_record *b)
{
	if (a->kind != b->kind || a->ts != b->ts || a->tid != b->tid || a->stream_kind != b->stream_kind ||
	    a->nfields != b->nfields || memcmp(a->u.v, b->u.v, sizeof a->u.v) || a->blob_len != b->blob_len)
		return 0;
	return a->blob_len == 0 || !memcmp(a->blob, b->blob, a->blob_len);
}

/* Reads everything; when `keep` is set the records are stored (the blobs
 * then point into `data`'s decompressed copy, so only compare lengths). */
static struct result read_all(const uint8_t *data, size_t size, const char *via_path)
{
	struct result res = {0};
	struct tbp_reader *r = NULL;
	res.open_rc = via_path ? tbp_reader_open(&r, via_path) : tbp_reader_open_mem(&r, data, size, "mem");
	res.prefix_ok = 1;
	if (res.open_rc != TBP_OK) {
		tbp_reader_close(r);
		return res;
	}
	struct tbp_record rec;
	int rc;
	while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
		if (res.nrecs >= nref || !same_record(&rec, &ref[res.nrecs]))
			res.prefix_ok = 0;
		res.nrecs++;
		res.nevents += rec.stream_kind != TBP_STREAM_DEFS;
	}
	res.end_rc = rc;
	/* Sticky: asking again gives the same answer, no hang. */
	if (tbp_reader_next(r, &rec) != rc)
		res.end_rc = -1;
	tbp_reader_close(r);
	return res;
}

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
	if (++failures > 20) exit(1); } } while (0)

/* Reference records, with their blobs copied (reader blobs are transient). */
static void load_reference(const uint8_t *data, size_t size)
{
	struct tbp_reader *r;
	if (tbp_reader_open_mem(&r, data, size, "ref") != TBP_OK) {
		fprintf(stderr, "reference trace does not open\n");
		exit(1);
	}
	size_t cap = 1024;
	ref = malloc(cap * sizeof *ref);
	struct tbp_record rec;
	int rc;
	while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
		if (nref == cap)
			ref = realloc(ref, (cap *= 2) * sizeof *ref);
		if (rec.blob_len) {
			void *copy = malloc(rec.blob_len);
			memcpy(copy, rec.blob, rec.blob_len);
			rec.blob = copy;
		}
		ref[nref++] = rec;
	}
	if (rc != TBP_END) {
		fprintf(stderr, "reference trace ends with %s\n", tbp_error_name(rc));
		exit(1);
	}
	tbp_reader_close(r);
}

static void free_reference(void)
{
	for (size_t i = 0; i < nref; i++)
		free((void *)ref[i].blob);
	free(ref);
	ref = NULL;
	nref = 0;
}

/* Records (and events) in the frames that end at or before `cut`. */
static struct result read_before(const uint8_t *data, const struct tt_frame *fr, int nf, size_t cut)
{
	size_t end = 0;
	for (int i = 0; i < nf; i++)
		if (fr[i].offset + fr[i].size <= cut)
			end = fr[i].offset + fr[i].size;
	if (end == 0)
		return (struct result){0};
	return read_all(data, end, NULL);
}

static size_t records_before(const uint8_t *data, const struct tt_frame *fr, int nf, size_t cut)
{
	return read_before(data, fr, nf, cut).nrecs;
}

static void test_truncation(const uint8_t *data, size_t size, int every_byte, const char *tmpdir)
{
	struct tt_frame fr[512];
	int nf = tt_frames(data, size, fr, 512);
	CHECK(nf > 2 && nf <= 512, "trace has %d frames", nf);
	if (nf <= 2 || nf > 512)
		return;
	int last_data = -1;
	for (int i = 0; i < nf; i++)
		if (fr[i].type == TT_FRAME_DATA)
			last_data = i;
	size_t header_end = fr[0].size;
	size_t from = every_byte ? 0 : fr[last_data].offset;
	size_t before_last = records_before(data, fr, nf, fr[last_data].offset);
	CHECK(before_last < nref, "last data frame holds no records");
	char path[4096];
	snprintf(path, sizeof path, "%s/cut.zst", tmpdir);
	size_t cuts = 0, before_events = 0;
	for (size_t cut = from; cut <= size; cut++, cuts++) {
		/* Every 13th cut through the file reader, the rest from memory. */
		const char *via = NULL;
		if (cut % 13 == 0 && tt_write_file(path, data, cut) == 0)
			via = path;
		struct result res = read_all(data, cut, via);
		int at_boundary = 0;
		for (int i = 0; i < nf; i++)
			at_boundary |= fr[i].offset + fr[i].size == cut;
		if (cut == 0) {
			CHECK(res.open_rc == TBP_ERR_EMPTY, "cut 0: open %s", tbp_error_name(res.open_rc));
			continue;
		}
		if (cut < 4) {
			CHECK(res.open_rc == TBP_ERR_NOT_TRACE, "cut %zu: open %s", cut, tbp_error_name(res.open_rc));
			continue;
		}
		if (cut < header_end) {
			CHECK(res.open_rc == TBP_ERR_TRUNCATED, "cut %zu in header: open %s", cut,
				tbp_error_name(res.open_rc));
			continue;
		}
		CHECK(res.open_rc == TBP_OK, "cut %zu: open %s", cut, tbp_error_name(res.open_rc));
		CHECK(res.prefix_ok, "cut %zu: records differ from the complete trace", cut);
		size_t want = cut >= fr[last_data].offset + fr[last_data].size ? nref
			: cut >= fr[last_data].offset ? before_last : records_before(data, fr, nf, cut);
		/* Cut before its first event (right after the header or the
		 * definitions, or inside the frame that holds it): nothing to
		 * report on is an error, not a truncated trace. */
		int no_events = cut < size && read_before(data, fr, nf, cut).nevents == 0;
		before_events += no_events;
		int end_want = no_events ? TBP_ERR_NO_EVENTS : at_boundary ? TBP_END : TBP_ERR_TRUNCATED;
		CHECK(res.end_rc == end_want, "cut %zu: ended with %s, want %s", cut,
			res.end_rc < 0 ? "non-sticky status" : tbp_error_name(res.end_rc), tbp_error_name(end_want));
		CHECK(res.nrecs == want, "cut %zu: %zu records, want %zu", cut, res.nrecs, want);
	}
	unlink(path);
	printf("truncation: %zu cuts checked (%s), %zu of them before the first event\n", cuts,
		every_byte ? "every byte" : "last data frame", before_events);
}

static void test_bitflips(const uint8_t *data, size_t size)
{
	/* The writer closed this trace, so it ends with a seek table: damage
	 * anywhere before it must not pass for truncation. */
	struct tt_frame fr[64];
	int nf = tt_frames(data, size, fr, 64);
	size_t seek_at = nf > 0 && nf <= 64 && fr[nf - 1].type == TT_FRAME_SEEK ? fr[nf - 1].offset : 0;
	CHECK(seek_at > 0, "small trace has no seek table");
	uint8_t *copy = malloc(size);
	size_t detected = 0, harmless = 0, flips = 0;
	for (size_t i = 0; i < size; i++)
		for (int b = 0; b < 8; b++, flips++) {
			memcpy(copy, data, size);
			copy[i] ^= (uint8_t)(1u << b);
			struct result res = read_all(copy, size, NULL);
			if (res.open_rc != TBP_OK || res.end_rc != TBP_END) {
				detected++;
				/* Whatever came before the damage is still good data. */
				CHECK(res.open_rc != TBP_OK || res.prefix_ok,
					"flip byte %zu bit %d: wrong records before the error (%s)", i, b,
					tbp_error_name(res.end_rc));
				CHECK(res.open_rc == TBP_OK || tbp_is_error(res.open_rc), "flip byte %zu bit %d: open", i, b);
				CHECK(res.end_rc >= 0, "flip byte %zu bit %d: status not sticky", i, b);
				CHECK(i >= seek_at || (res.open_rc != TBP_ERR_TRUNCATED && res.end_rc != TBP_ERR_TRUNCATED),
					"flip byte %zu bit %d (before the seek table at %zu): reported as truncation", i, b,
					seek_at);
			} else {
				harmless++;
				CHECK(res.prefix_ok && res.nrecs == nref,
					"flip byte %zu bit %d: silently read different records", i, b);
			}
		}
	free(copy);
	printf("bit flips: %zu (%zu detected, %zu harmless)\n", flips, detected, harmless);
}

int main(void)
{
	char tmpdir[] = "/tmp/tbp-damage-XXXXXX";
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	/* A several-frame trace: cut at every byte of its last data frame. */
	struct tt_synth_opts big = {.seed = 3, .iterations = 4, .launches_per_iter = 200, .threads = 2,
		.iters_per_frame = 1, .gpu = 1, .end = 1};
	struct tt_trace t;
	tt_synth_trace(&t, &big);
	size_t size;
	uint8_t *data = tt_trace_bytes(&t, &size);
	tt_free_trace(&t);
	load_reference(data, size);
	test_truncation(data, size, 0, tmpdir);
	free_reference();
	free(data);

	/* A small trace: every cut, every bit flip. */
	struct tt_synth_opts small = {.seed = 4, .iterations = 2, .launches_per_iter = 10, .threads = 1,
		.iters_per_frame = 1, .gpu = 1, .end = 1};
	tt_synth_trace(&t, &small);
	data = tt_trace_bytes(&t, &size);
	tt_free_trace(&t);
	load_reference(data, size);
	test_truncation(data, size, 1, tmpdir);
	test_bitflips(data, size);
	free_reference();
	free(data);
	rmdir(tmpdir);
	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
