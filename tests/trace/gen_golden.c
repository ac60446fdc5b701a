/*
 * Golden traces: `gen_golden write DIR` (re)creates the checked-in files,
 * `gen_golden check DIR` regenerates the well-formed ones in memory and
 * compares their version-independent form (header bytes + decompressed
 * frame contents) with the checked-in files, so any change to the
 * encoding shows up as a test failure.  The expected `tbanalyze info`
 * outputs (*.info) are compared by check_golden.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "internal.h"
#include "tt_util.h"

struct golden {
	const char *name;
	struct tt_synth_opts opts;
};
static const struct golden goldens[] = {
	{"basic.zst", {.seed = 1, .iterations = 3, .launches_per_iter = 40, .threads = 2, .iters_per_frame = 1,
		.gpu = 1, .end = 1}},
	{"no-end.zst", {.seed = 2, .iterations = 1, .launches_per_iter = 12, .threads = 1, .iters_per_frame = 1,
		.gpu = 0, .end = 0}},
};
#define NGOLDEN (sizeof goldens / sizeof goldens[0])

static uint8_t *make(const struct golden *g, size_t *size)
{
	struct tt_trace t;
	tt_synth_trace(&t, &g->opts);
	uint8_t *d = tt_trace_bytes(&t, size);
	tt_free_trace(&t);
	return d;
}

static int write_to(const char *dir, const char *name, const void *d, size_t n)
{
	char path[8192];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (tt_write_file(path, d, n)) {
		fprintf(stderr, "gen_golden: cannot write %s\n", path);
		return -1;
	}
	return 0;
}

static int cmd_write(const char *dir)
{
	size_t n;
	uint8_t *basic = NULL;
	for (size_t i = 0; i < NGOLDEN; i++) {
		uint8_t *d = make(&goldens[i], &n);
		if (!d || write_to(dir, goldens[i].name, d, n))
			return 1;
		if (i == 0)
			basic = d;
		else
			free(d);
	}
	n = 0;
	free(basic);
	basic = make(&goldens[0], &n);
	struct tt_frame fr[256];
	int nf = tt_frames(basic, n, fr, 256);
	if (nf < 3 || nf > 256)
		return 1;
	int last_data = -1, first_data = -1;
	for (int i = 0; i < nf; i++)
		if (fr[i].type == TT_FRAME_DATA) {
			last_data = i;
			if (first_data < 0)
				first_data = i;
		}
	/* Cut in the middle of the last data frame. */
	size_t cut = fr[last_data].offset + fr[last_data].size / 2;
	if (write_to(dir, "truncated.zst", basic, cut))
		return 1;
	/* A byte inside the first data frame's compressed blocks changed: the
	 * frame checksum (or block decoding) must catch it. */
	uint8_t *bad = malloc(n);
	memcpy(bad, basic, n);
	bad[fr[first_data].offset + fr[first_data].size / 2] ^= 0x20;
	if (write_to(dir, "corrupt-frame.zst", bad, n))
		return 1;
	/* Written by a future writer that older readers must refuse. */
	memcpy(bad, basic, n);
	uint32_t hsize = tbp_get_le32(bad + 4);
	tbp_put_le16(bad + 8 + TBP_FILE_MAGIC_LEN, 7);      /* version */
	tbp_put_le16(bad + 8 + TBP_FILE_MAGIC_LEN + 2, 5);  /* min_reader_version */
	tbp_put_le32(bad + 8 + hsize - 4, tbp_crc32(bad + 8, hsize - 4));
	if (write_to(dir, "too-new.zst", bad, n))
		return 1;
	/* Header damaged (a schema byte): caught by the header CRC. */
	memcpy(bad, basic, n);
	bad[8 + 24] ^= 0x01;
	if (write_to(dir, "bad-header.zst", bad, n))
		return 1;
	static const char text[] = "this is not a trace, just some text\n";
	if (write_to(dir, "not-a-trace.zst", text, sizeof text - 1))
		return 1;
	free(bad);
	free(basic);
	return 0;
}

static int cmd_check(const char *dir)
{
	int failed = 0;
	for (size_t i = 0; i < NGOLDEN; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, goldens[i].name);
		size_t gn, nn, gc, nc;
		uint8_t *gold = tt_read_file(path, &gn);
		uint8_t *now = make(&goldens[i], &nn);
		uint8_t *gcan = gold ? tt_canonical(gold, gn, &gc) : NULL;
		uint8_t *ncan = now ? tt_canonical(now, nn, &nc) : NULL;
		if (!gcan || !ncan) {
			fprintf(stderr, "%s: cannot read or decode\n", path);
			failed++;
		} else if (gc != nc || memcmp(gcan, ncan, gc)) {
			size_t at = 0;
			while (at < gc && at < nc && gcan[at] == ncan[at])
				at++;
			fprintf(stderr, "%s: encoding drift: canonical bytes differ at %zu (golden %zu bytes, now %zu);"
				" if the format change is intended, bump TBP_FORMAT_VERSION and rerun gen_golden write\n",
				path, at, gc, nc);
			failed++;
		} else {
			printf("%s: %zu canonical bytes match\n", goldens[i].name, gc);
		}
		free(gold);
		free(now);
		free(gcan);
		free(ncan);
	}
	return failed ? 1 : 0;
}

/* Seed corpus for the fuzz targets: small valid traces and damaged
 * variants (reader), header contents (header). */
static int cmd_corpus(const char *dir)
{
	char sub[4096], name[64];
	struct tt_synth_opts o = {.seed = 5, .iterations = 2, .launches_per_iter = 6, .threads = 1,
		.iters_per_frame = 1, .gpu = 1, .end = 1};
	struct tt_trace t;
	size_t n, rn;
	tt_synth_trace(&t, &o);
	uint8_t *d = tt_trace_bytes(&t, &n);
	tt_free_trace(&t);
	tt_random_trace(&t, 77, 60);
	memset(t.flush_after, 0, t.n);
	t.flush_after[30] = 1;
	uint8_t *rnd = tt_trace_bytes(&t, &rn);
	tt_free_trace(&t);
	if (!d || !rnd)
		return 1;
	snprintf(sub, sizeof sub, "%s/reader", dir);
	int rc = 0;
	rc |= write_to(sub, "synth.zst", d, n);
	rc |= write_to(sub, "random.zst", rnd, rn);
	rc |= write_to(sub, "empty", "", 0);
	rc |= write_to(sub, "magic-only", d, 4);
	rc |= write_to(sub, "header-only", d, 8 + tbp_get_le32(d + 4));
	for (int i = 1; i <= 4; i++) {
		snprintf(name, sizeof name, "cut-%d.zst", i);
		rc |= write_to(sub, name, d, n * i / 5);
	}
	uint8_t *bad = malloc(n);
	static const size_t flip_at[] = {5, 20, 60, 150, 400, 700};
	for (size_t i = 0; i < sizeof flip_at / sizeof flip_at[0]; i++) {
		if (flip_at[i] >= n)
			continue;
		memcpy(bad, d, n);
		bad[flip_at[i]] ^= 0x10;
		snprintf(name, sizeof name, "flip-%zu.zst", flip_at[i]);
		rc |= write_to(sub, name, bad, n);
	}
	free(bad);
	/* Raw frame contents (the fuzz target wraps these into a valid trace),
	 * so mutations reach the chunk and record decoder. */
	struct tt_frame fr[64];
	int nf = tt_frames(d, n, fr, 64);
	for (int i = 0, k = 0; i < nf && i < 64; i++) {
		if (fr[i].type != TT_FRAME_DATA)
			continue;
		unsigned long long cs = ZSTD_getFrameContentSize(d + fr[i].offset, fr[i].size);
		uint8_t *raw = malloc((size_t)cs + 1);
		size_t got = ZSTD_decompress(raw, (size_t)cs, d + fr[i].offset, fr[i].size);
		snprintf(name, sizeof name, "content-%d", k++);
		if (!ZSTD_isError(got))
			rc |= write_to(sub, name, raw, got);
		free(raw);
	}
	snprintf(sub, sizeof sub, "%s/header", dir);
	uint32_t hsize = tbp_get_le32(d + 4);
	rc |= write_to(sub, "valid", d + 8, hsize);
	rc |= write_to(sub, "short", d + 8, hsize / 2);
	uint8_t *h = malloc(hsize);
	memcpy(h, d + 8, hsize);
	h[hsize - 1] ^= 1;
	rc |= write_to(sub, "bad-crc", h, hsize);
	memcpy(h, d + 8, hsize);
	tbp_put_le16(h + TBP_FILE_MAGIC_LEN + 2, 9);
	tbp_put_le32(h + hsize - 4, tbp_crc32(h, hsize - 4));
	rc |= write_to(sub, "too-new", h, hsize);
	free(h);
	free(d);
	free(rnd);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "corpus"))
		return cmd_corpus(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "write"))
		return cmd_write(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "check"))
		return cmd_check(argv[2]);
	fprintf(stderr, "usage: gen_golden write|check|corpus DIR\n");
	return 2;
}
