/*
 * Traces whose GPU records are partly joined to no call, for the report's join line and warning
 * (issue #24): check_join.py runs tbanalyze on them.
 *
 *   gen_join OUT.zst JOINED UNJOINED_KERNELS UNJOINED_MEMSETS [NOTICE]
 *
 * One thread launches JOINED + UNJOINED_KERNELS kernels and UNJOINED_MEMSETS memsets from a Python
 * line (train.py:7); GPU records of the first JOINED launches carry their launch's corr, the others
 * corr 0, as libtbprof writes GPU work it could not join.  NOTICE (optional): the message of the
 * CUPTI_JOIN notice libtbprof writes at exit.
 *
 *   gen_join OUT.zst graph LAUNCHES NODES
 *
 * LAUNCHES cudaGraphLaunch calls (API records, as the hooks write them) from train.py:7, each followed by
 * NODES kernels carrying its corr, as a replay's records do (issue #29).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbprof/trace.h"

#define US 1000ull

static struct tbp_writer *w;

static void add(const struct tbp_record *r)
{
	if (tbp_writer_add(w, r)) {
		fprintf(stderr, "gen_join: tbp_writer_add failed\n");
		exit(4);
	}
}

static uint64_t string(uint64_t id, const char *s)
{
	struct tbp_record r = { .kind = TBP_K_STRING };
	r.u.string.id = id;
	r.blob = s;
	r.blob_len = (uint32_t)strlen(s);
	add(&r);
	return id;
}

static int graph_trace(unsigned long launches, unsigned long nodes)
{
	uint64_t t0 = 1000000 * US, period = (nodes + 2) * 10 * US;
	struct tbp_record r;
	tbp_writer_begin_chunk(w, TBP_STREAM_THREAD, 100);
	for (unsigned long i = 0; i < launches; i++) {
		r = (struct tbp_record){ .kind = TBP_K_API, .tid = 100, .ts = t0 + i * period };
		r.u.call.end = r.ts + 5 * US;
		r.u.call.api = TBP_API_cudaGraphLaunch;
		r.u.call.corr = i + 1;
		r.u.call.callpath = 11;
		r.u.api.arg0 = 0x5000;
		add(&r);
	}
	tbp_writer_end_chunk(w);
	tbp_writer_begin_chunk(w, TBP_STREAM_GPU, 0);
	for (unsigned long i = 0; i < launches; i++)
		for (unsigned long k = 0; k < nodes; k++) {
			r = (struct tbp_record){ .kind = TBP_K_GPU_KERNEL, .tid = 0,
						 .ts = t0 + i * period + (k + 1) * 10 * US };
			r.u.gpu_kernel.end = r.ts + 8 * US;
			r.u.gpu_kernel.stream = 7;
			r.u.gpu_kernel.corr = i + 1;
			r.u.gpu_kernel.name = 3;
			add(&r);
		}
	tbp_writer_end_chunk(w);
	return 0;
}

int main(int argc, char **argv)
{
	int graph = argc == 5 && !strcmp(argv[2], "graph");
	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: gen_join OUT.zst JOINED UNJOINED_KERNELS UNJOINED_MEMSETS [NOTICE]\n"
				"       gen_join OUT.zst graph LAUNCHES NODES\n");
		return 2;
	}
	unsigned long joined = graph ? 0 : strtoul(argv[2], NULL, 10), lost_k = strtoul(argv[3], NULL, 10),
		      lost_m = strtoul(argv[4], NULL, 10);
	struct tbp_writer_opts o = { .compression_level = 3, .features = TBP_FEAT_PYTHON | TBP_FEAT_CUPTI };
	if (tbp_writer_open(&w, argv[1], &o)) {
		fprintf(stderr, "gen_join: cannot write %s\n", argv[1]);
		return 4;
	}
	tbp_writer_begin_chunk(w, TBP_STREAM_DEFS, 0);
	string(1, "/home/u/train.py");
	string(2, "<module>");
	string(3, "vector_add");
	struct tbp_record r = { .kind = TBP_K_PYFRAME };
	r.u.pyframe = (struct tbp_pyframe){ .id = 10, .file = 1, .function = 2, .line = 7 };
	add(&r);
	r = (struct tbp_record){ .kind = TBP_K_CALLPATH };
	r.u.callpath = (struct tbp_callpath){ .id = 11, .frame = 10, .parent = 0 };
	add(&r);
	r = (struct tbp_record){ .kind = TBP_K_DEVICE };
	r.u.device.device = 0;
	add(&r);
	if (argc == 6) {
		r = (struct tbp_record){ .kind = TBP_K_NOTICE };
		r.u.notice = (struct tbp_notice){ .level = TBP_NOTE_WARN, .code = TBP_NOTICE_CUPTI_JOIN,
						  .message = string(4, argv[5]) };
		add(&r);
	}
	tbp_writer_end_chunk(w);

	unsigned long n = graph ? 0 : joined + lost_k + lost_m;
	uint64_t t0 = 1000000 * US;
	if (graph)
		graph_trace(lost_k, lost_m);
	tbp_writer_begin_chunk(w, TBP_STREAM_THREAD, 100);
	for (unsigned long i = 0; i < n; i++) {
		int memset = i >= joined + lost_k;
		r = (struct tbp_record){ .kind = memset ? TBP_K_MEMSET : TBP_K_LAUNCH, .tid = 100, .ts = t0 + i * 20 * US };
		r.u.call.end = r.ts + 5 * US;
		r.u.call.api = memset ? TBP_API_cudaMemsetAsync : TBP_API_cudaLaunchKernel;
		r.u.call.corr = i + 1;
		r.u.call.callpath = 11;
		if (memset)
			r.u.memset.bytes = 4096;
		else
			r.u.launch.name = 3;
		add(&r);
	}
	tbp_writer_end_chunk(w);
	tbp_writer_begin_chunk(w, TBP_STREAM_GPU, 0);
	for (unsigned long i = 0; i < n; i++) {
		int memset = i >= joined + lost_k;
		r = (struct tbp_record){ .kind = memset ? TBP_K_GPU_MEMSET : TBP_K_GPU_KERNEL, .tid = 0,
					 .ts = t0 + i * 20 * US + 10 * US };
		r.u.gpu_kernel.end = r.ts + 4 * US;
		r.u.gpu_kernel.stream = 7;
		r.u.gpu_kernel.corr = i < joined ? i + 1 : 0;
		if (memset)
			r.u.gpu_memset.bytes = 4096;
		else
			r.u.gpu_kernel.name = 3;
		add(&r);
	}
	tbp_writer_end_chunk(w);
	tbp_writer_begin_chunk(w, TBP_STREAM_DEFS, 0);
	r = (struct tbp_record){ .kind = TBP_K_END };
	add(&r);
	tbp_writer_end_chunk(w);
	if (tbp_writer_close(w)) {
		fprintf(stderr, "gen_join: closing %s failed\n", argv[1]);
		return 4;
	}
	return 0;
}
