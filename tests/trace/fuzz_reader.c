/*
 * Fuzz target: the whole reader (tbp_reader_open_mem, then tbp_reader_next
 * until it stops) on arbitrary bytes.  Must never crash, hang or leak; and
 * tbp_reader_next_many must hand out the same records, then the same
 * status, offset and detail, as tbp_reader_next.
 *
 * Mutated zstd frames almost always fail their checksum, which would leave
 * the chunk/record decoder unexplored; so an input that does not start
 * like a trace is taken as the decompressed content of one data frame and
 * wrapped into a valid trace (header + checksummed frame) first.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_everything(const uint8_t *data, size_t size)
{
	struct tbp_reader *r = NULL;
	int rc = tbp_reader_open_mem(&r, data, size, "fuzz");
	if (rc == TBP_OK) {
		struct tbp_record rec;
		uint64_t sum = 0;
		while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
			/* Touch everything the reader hands out. */
			sum += rec.ts + rec.nfields + rec.tid;
			for (unsigned i = 0; i < rec.nfields && i < TBP_MAX_FIELDS; i++)
				sum += rec.u.v[i];
			for (uint32_t i = 0; i < rec.blob_len; i++)
				sum += ((const uint8_t *)rec.blob)[i];
		}
		(void)sum;
		/* Errors are sticky. */
		if (tbp_reader_next(r, &rec) != rc)
			__builtin_trap();
	}
	(void)tbp_reader_offset(r);
	if (r && !tbp_reader_detail(r))
		__builtin_trap();
	tbp_reader_close(r);
}

static int same_record(const struct tbp_record *x, const struct tbp_record *y)
{
	if (x->kind != y->kind || x->stream_kind != y->stream_kind || x->nfields != y->nfields || x->tid != y->tid ||
	    x->ts != y->ts || memcmp(&x->u, &y->u, sizeof x->u) || x->blob_len != y->blob_len)
		return 0;
	return !x->blob_len || !memcmp(x->blob, y->blob, x->blob_len);
}

/* Runs of every length from 1 to 65 in turn, against one record at a time. */
static void compare_many(const uint8_t *data, size_t size)
{
	struct tbp_reader *one = NULL, *many = NULL;
	int rc1 = tbp_reader_open_mem(&one, data, size, "fuzz");
	int rc2 = tbp_reader_open_mem(&many, data, size, "fuzz");
	if (rc1 != rc2)
		__builtin_trap();
	static struct tbp_record recs[65];
	unsigned max = 1;
	while (rc1 == TBP_OK) {
		unsigned n = 99;
		rc2 = tbp_reader_next_many(many, recs, max, &n);
		if (rc2 == TBP_OK ? n < 1 || n > max : n != 0)
			__builtin_trap();
		for (unsigned i = 0; i < n; i++) {
			struct tbp_record rec;
			if (tbp_reader_next(one, &rec) != TBP_OK || !same_record(&rec, &recs[i]))
				__builtin_trap();
		}
		if (rc2 != TBP_OK) {
			struct tbp_record rec;
			rc1 = tbp_reader_next(one, &rec);
			if (rc1 != rc2)
				__builtin_trap();
		}
		max = max % 65 + 1;
	}
	if (tbp_reader_offset(one) != tbp_reader_offset(many) ||
	    strcmp(tbp_reader_detail(one), tbp_reader_detail(many)) ||
	    tbp_reader_truncated(one) != tbp_reader_truncated(many))
		__builtin_trap();
	tbp_reader_close(one);
	tbp_reader_close(many);
}

/* A reader told to hand out only a kernel's first six fields and a
 * launch's first eight (tbp_reader_limit_fields, as tbanalyze's analysis
 * does) against the full reader: each record it hands out is the full
 * reader's with the later fields zero and nfields the limit, and it ends in
 * an error only when the full reader does (it may be earlier: a skipped column
 * that does not hold one value per record fails its chunk at once). */
static void compare_limited(const uint8_t *data, size_t size)
{
	struct tbp_reader *full = NULL, *lim = NULL;
	int rcf = tbp_reader_open_mem(&full, data, size, "fuzz");
	int rcl = tbp_reader_open_mem(&lim, data, size, "fuzz");
	if (rcf != rcl)
		__builtin_trap();
	if (rcl == TBP_OK && (tbp_reader_limit_fields(lim, TBP_K_GPU_KERNEL, 6) != TBP_OK ||
			      tbp_reader_limit_fields(lim, TBP_K_LAUNCH, 8) != TBP_OK))
		__builtin_trap();
	static struct tbp_record recs[65];
	unsigned max = 1;
	while (rcl == TBP_OK) {
		unsigned n = 0;
		rcl = tbp_reader_next_many(lim, recs, max, &n);
		for (unsigned i = 0; i < n; i++) {
			struct tbp_record x;
			if (tbp_reader_next(full, &x) != TBP_OK)
				__builtin_trap();
			unsigned keep = x.kind == TBP_K_GPU_KERNEL ? 6 : x.kind == TBP_K_LAUNCH ? 8 : TBP_MAX_FIELDS;
			if (keep < x.nfields) {
				for (unsigned f = keep; f < TBP_MAX_FIELDS; f++)
					x.u.v[f] = 0;
				x.nfields = (uint16_t)keep;
			}
			if (!same_record(&x, &recs[i]))
				__builtin_trap();
		}
		max = max % 65 + 1;
	}
	if (rcf == TBP_OK) {
		/* It never reports an error the full reader does not; it may
		 * miss one inside a value it skipped (a varint too long). */
		struct tbp_record x;
		int more = 0;
		while ((rcf = tbp_reader_next(full, &x)) == TBP_OK)
			more = 1;
		if (tbp_is_error(rcl) ? !tbp_is_error(rcf) : (more || rcf != rcl) && !tbp_is_error(rcf))
			__builtin_trap();
	}
	tbp_reader_close(full);
	tbp_reader_close(lim);
}

/* The reader's plain decode path (TBP_SIMD=plain) against the one the
 * CPU takes (the x86 one where it has BMI2; else both are plain): the same
 * records, then the same status, offset and detail, in full and with the
 * analysis's field limits. */
static int open_plain(struct tbp_reader **r, const uint8_t *data, size_t size)
{
	const char *was = getenv("TBP_SIMD");
	char *saved = was ? strdup(was) : NULL;
	setenv("TBP_SIMD", "plain", 1);
	int rc = tbp_reader_open_mem(r, data, size, "fuzz");
	if (saved) {
		setenv("TBP_SIMD", saved, 1);
		free(saved);
	} else {
		unsetenv("TBP_SIMD");
	}
	return rc;
}

static void compare_paths(const uint8_t *data, size_t size, int limited)
{
	struct tbp_reader *plain = NULL, *cpu = NULL;
	int rcp = open_plain(&plain, data, size);
	int rcc = tbp_reader_open_mem(&cpu, data, size, "fuzz");
	if (rcp != rcc)
		__builtin_trap();
	if (rcp == TBP_OK && limited)
		for (unsigned i = 0; i < 2; i++) {
			struct tbp_reader *r = i ? cpu : plain;
			if (tbp_reader_limit_fields(r, TBP_K_GPU_KERNEL, 6) != TBP_OK ||
			    tbp_reader_limit_fields(r, TBP_K_LAUNCH, 8) != TBP_OK)
				__builtin_trap();
		}
	static struct tbp_record recs_p[65], recs_c[65];
	unsigned max = 64;
	while (rcp == TBP_OK) {
		unsigned np = 0, nc = 0;
		rcp = tbp_reader_next_many(plain, recs_p, max, &np);
		rcc = tbp_reader_next_many(cpu, recs_c, max, &nc);
		if (rcp != rcc || np != nc)
			__builtin_trap();
		for (unsigned i = 0; i < np; i++)
			if (!same_record(&recs_p[i], &recs_c[i]))
				__builtin_trap();
		max = max % 65 + 1;
	}
	if (tbp_reader_offset(plain) != tbp_reader_offset(cpu) ||
	    strcmp(tbp_reader_detail(plain), tbp_reader_detail(cpu)) ||
	    tbp_reader_truncated(plain) != tbp_reader_truncated(cpu))
		__builtin_trap();
	tbp_reader_close(plain);
	tbp_reader_close(cpu);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 4 && tbp_get_le32(data) == TBP_MAGIC_HEADER_FRAME) {
		read_everything(data, size);
		compare_many(data, size);
		compare_limited(data, size);
		compare_paths(data, size, 0);
		compare_paths(data, size, 1);
		return 0;
	}
	if (size > (1u << 20))
		return 0;
	uint8_t hdr[2048];
	size_t hlen = tbp_header_encode(hdr, 0);
	size_t bound = ZSTD_compressBound(size);
	uint8_t *file = malloc(8 + hlen + bound);
	if (!file)
		return 0;
	tbp_put_le32(file, TBP_MAGIC_HEADER_FRAME);
	tbp_put_le32(file + 4, (uint32_t)hlen);
	memcpy(file + 8, hdr, hlen);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
	size_t z = ZSTD_compress2(cctx, file + 8 + hlen, bound, data, size);
	ZSTD_freeCCtx(cctx);
	if (!ZSTD_isError(z)) {
		read_everything(file, 8 + hlen + (size ? z : 0));
		compare_many(file, 8 + hlen + (size ? z : 0));
		compare_limited(file, 8 + hlen + (size ? z : 0));
		compare_paths(file, 8 + hlen + (size ? z : 0), 0);
		compare_paths(file, 8 + hlen + (size ? z : 0), 1);
	}
	free(file);
	return 0;
}
