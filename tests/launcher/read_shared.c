/* A program of another project reading a trace through libtbprof-trace.so
 * and the installed header alone: prints "RECORDS KERNELS" or the error. */
#include <inttypes.h>
#include <stdio.h>

#include <tbprof/trace.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: read_shared TRACE\n");
		return 2;
	}
	struct tbp_reader *r;
	int st = tbp_reader_open(&r, argv[1]);
	uint64_t records = 0, kernels = 0;
	struct tbp_record rec;
	while (st == TBP_OK && (st = tbp_reader_next(r, &rec)) == TBP_OK) {
		records++;
		kernels += rec.kind == TBP_K_GPU_KERNEL;
	}
	if (st != TBP_END) {
		fprintf(stderr, "%s: offset %" PRIu64 ": %s\n", argv[1], r ? tbp_reader_offset(r) : 0,
			r ? tbp_reader_detail(r) : tbp_error_name(st));
		tbp_reader_close(r);
		return 1;
	}
	tbp_reader_close(r);
	printf("%" PRIu64 " %" PRIu64 "\n", records, kernels);
	return 0;
}
