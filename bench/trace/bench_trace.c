/*
 * Trace library benchmark.  Prints, from one run on this machine:
 *   - writer throughput (records/s per core, CPU time of the writing
 *     thread) beside a plain memcpy of the same in-memory records;
 *   - compressed bytes per event on launch-heavy synthetic streams;
 *   - reader throughput beside plain zstd decompression of the same file
 *     (libzstd in-process, and the `zstd -d` command when installed).
 * Figures are best-of-N to damp noise from other processes; compare the
 * ratios, not the absolute numbers, across machines.
 *
 * usage: bench_trace [ITERATIONS]   (default 300: ~600k records)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "tbprof/trace.h"
#include "tt_util.h"

#define REPS 3

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes t to fd the way libtbprof's writer thread does (chunks per
 * stream, a flush per frame).  Returns CPU seconds. */
static double write_trace(const struct tt_trace *t, int fd, uint64_t *bytes)
{
	double t0 = cpu_now();
	if (tt_write_trace(t, fd) != 0) {
		fprintf(stderr, "bench_trace: write failed\n");
		exit(1);
	}
	double dt = cpu_now() - t0;
	(void)bytes;
	return dt;
}

static double best_write(const struct tt_trace *t)
{
	double best = 1e9;
	for (int i = 0; i < REPS; i++) {
		int fd = open("/dev/null", O_WRONLY);
		double dt = write_trace(t, fd, NULL);
		if (dt < best)
			best = dt;
	}
	return best;
}

static double best_memcpy(const struct tt_trace *t)
{
	size_t bytes = t->n * sizeof *t->recs;
	uint8_t *dst = malloc(bytes);
	memset(dst, 1, bytes); /* fault the pages in outside the timing */
	double best = 1e9;
	volatile uint8_t sink = 0;
	for (int i = 0; i < REPS; i++) {
		double t0 = cpu_now();
		memcpy(dst, t->recs, bytes);
		sink ^= dst[bytes / 2];
		double dt = cpu_now() - t0;
		if (dt < best)
			best = dt;
	}
	(void)sink;
	free(dst);
	return best;
}

static double best_read(const char *path, uint64_t *records)
{
	double best = 1e9;
	for (int i = 0; i < REPS; i++) {
		double t0 = cpu_now();
		struct tbp_reader *r;
		if (tbp_reader_open(&r, path) != TBP_OK) {
			fprintf(stderr, "bench_trace: cannot reopen %s\n", path);
			exit(1);
		}
		struct tbp_record rec;
		uint64_t n = 0, sum = 0;
		int rc;
		while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
			n++;
			sum += rec.ts;
		}
		tbp_reader_close(r);
		if (rc != TBP_END) {
			fprintf(stderr, "bench_trace: read ended with %s\n", tbp_error_name(rc));
			exit(1);
		}
		double dt = cpu_now() - t0;
		if (dt < best)
			best = dt;
		*records = n + (sum == 1); /* keep sum alive */
	}
	return best;
}

/* Plain decompression of every frame (what `zstd -d` does), in-process. */
static double best_zstd_lib(const uint8_t *data, size_t size, size_t *content)
{
	double best = 1e9;
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	size_t cap = 1 << 20;
	uint8_t *out = malloc(cap);
	for (int i = 0; i < REPS; i++) {
		double t0 = cpu_now();
		ZSTD_inBuffer in = {data, size, 0};
		size_t total = 0;
		while (in.pos < in.size) {
			ZSTD_outBuffer o = {out, cap, 0};
			size_t ret = ZSTD_decompressStream(dctx, &o, &in);
			if (ZSTD_isError(ret)) {
				fprintf(stderr, "bench_trace: zstd: %s\n", ZSTD_getErrorName(ret));
				exit(1);
			}
			total += o.pos;
		}
		double dt = cpu_now() - t0;
		if (dt < best)
			best = dt;
		*content = total;
	}
	free(out);
	ZSTD_freeDCtx(dctx);
	return best;
}

static double best_zstd_cmd(const char *path)
{
	if (system("command -v zstd >/dev/null 2>&1") != 0)
		return -1;
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "zstd -q -d -c '%s' >/dev/null", path);
	double best = 1e9;
	for (int i = 0; i < REPS; i++) {
		double t0 = wall_now();
		if (system(cmd) != 0)
			return -1;
		double dt = wall_now() - t0;
		if (dt < best)
			best = dt;
	}
	return best;
}

static uint64_t file_bytes(const struct tt_trace *t, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || tt_write_trace(t, fd) != 0) {
		fprintf(stderr, "bench_trace: cannot write %s\n", path);
		exit(1);
	}
	size_t size;
	uint8_t *d = tt_read_file(path, &size);
	free(d);
	return size;
}

static size_t count_kind(const struct tt_trace *t, unsigned kind)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += t->recs[i].kind == kind;
	return n;
}

int main(int argc, char **argv)
{
	unsigned iters = argc > 1 ? (unsigned)atoi(argv[1]) : 300;
	char path[] = "/tmp/tbp-bench-XXXXXX";
	int tmpfd = mkstemp(path);
	if (tmpfd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(tmpfd);

	/* Launch-heavy: 1000 host calls per iteration on one thread, mostly
	 * kernel launches, with their GPU kernel records; one frame per
	 * 10 iterations (~20k records, as a writer thread flushing often). */
	struct tt_synth_opts full = {.seed = 9, .iterations = iters, .launches_per_iter = 1000, .threads = 1,
		.iters_per_frame = 10, .gpu = 1, .end = 1};
	struct tt_trace t;
	tt_synth_trace(&t, &full);
	uint64_t size = file_bytes(&t, path);
	size_t launches = count_kind(&t, TBP_K_LAUNCH), kernels = count_kind(&t, TBP_K_GPU_KERNEL);
	printf("bench_trace: %zu records (%zu launches, %zu GPU kernels), %zu bytes in memory\n", t.n, launches,
		kernels, t.n * sizeof *t.recs);

	printf("\n== bytes per event (writer default zstd level, frames of ~20k records)\n");
	printf("  launch-heavy, host API + GPU activity: %8.2f bytes/event (%llu bytes)\n", (double)size / (double)t.n,
		(unsigned long long)size);
	struct tt_synth_opts host_only = full;
	host_only.gpu = 0;
	struct tt_trace th;
	tt_synth_trace(&th, &host_only);
	uint64_t hsize = file_bytes(&th, path);
	printf("  launch-heavy, host API only:           %8.2f bytes/event (%llu bytes)\n",
		(double)hsize / (double)th.n, (unsigned long long)hsize);
	/* Short chunks (a writer thread draining rings often): delta state
	 * and column headers restart every 100 records. */
	tt_synth_trace(&th, &full);
	for (size_t i = 0; i < th.n; i += 100)
		th.chunk_break[i] = 1;
	hsize = file_bytes(&th, path);
	printf("  host API + GPU, chunks of 100 records: %8.2f bytes/event (%llu bytes)\n",
		(double)hsize / (double)th.n, (unsigned long long)hsize);
	tt_free_trace(&th);
	struct tt_synth_opts regular = full;
	regular.jitter_ns = 64;
	tt_synth_trace(&th, &regular);
	hsize = file_bytes(&th, path);
	printf("  launch-heavy, regular timing (64 ns):  %8.2f bytes/event (%llu bytes)\n",
		(double)hsize / (double)th.n, (unsigned long long)hsize);
	tt_free_trace(&th);
	printf("  (raw in-memory record: %zu bytes/event; the first line's timings carry ~2.7 bytes/event of\n"
	       "   randomness: uniform 2 us launch gaps, 0.5 us call and 6 us kernel durations)\n", sizeof *t.recs);
	tt_free_trace(&th);

	printf("\n== writer (CPU time of the writing thread, output to /dev/null)\n");
	double w = best_write(&t), m = best_memcpy(&t);
	printf("  tbp_writer:             %8.2f M records/s/core  %7.1f ns/record\n", (double)t.n / w / 1e6,
		w / (double)t.n * 1e9);
	printf("  memcpy of the records:  %8.2f M records/s/core  %7.1f ns/record  (%.0f MB/s)\n",
		(double)t.n / m / 1e6, m / (double)t.n * 1e9, (double)(t.n * sizeof *t.recs) / m / 1e6);
	printf("  ratio writer/memcpy:    %8.1fx the time\n", w / m);

	printf("\n== reader\n");
	size = file_bytes(&t, path);
	size_t fsize;
	uint8_t *data = tt_read_file(path, &fsize);
	uint64_t nread = 0;
	double rd = best_read(path, &nread);
	size_t content = 0;
	double zl = best_zstd_lib(data, fsize, &content);
	double zc = best_zstd_cmd(path);
	if (nread != t.n)
		fprintf(stderr, "bench_trace: read %llu records, wrote %zu\n", (unsigned long long)nread, t.n);
	printf("  tbp_reader (decode):    %8.2f M records/s/core  %7.1f ns/record  (%.0f MB/s of file)\n",
		(double)nread / rd / 1e6, rd / (double)nread * 1e9, (double)fsize / rd / 1e6);
	printf("  libzstd decompress:     %8.2f M records/s/core  %7.1f ns/record  (%.0f MB/s of file, %zu bytes out)\n",
		(double)nread / zl / 1e6, zl / (double)nread * 1e9, (double)fsize / zl / 1e6, content);
	if (zc > 0)
		printf("  zstd -d (command, wall):%8.2f M records/s       %7.1f ns/record  (incl. process start)\n",
			(double)nread / zc / 1e6, zc / (double)nread * 1e9);
	else
		printf("  zstd -d (command):      not installed\n");
	printf("  ratio reader/libzstd:   %8.1fx the time\n", rd / zl);
	free(data);
	tt_free_trace(&t);
	unlink(path);
	return 0;
}
