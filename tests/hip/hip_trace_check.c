/*
 * Compares a tbprof trace of hip_workload with what really happened.
 *
 *   hip_trace_check TRACE CALLS [--truth TRUTH] [--gpu] [--no-gpu]
 *
 * CALLS is the program's own log of its calls to hooked HIP APIs ("api
 * result" per line).  Always: the trace has exactly those calls, each with
 * the same result code (as a multiset), and nothing else from HIP.
 *
 * --truth (simhip's ground truth): counts per category are exact; every
 * device operation in the truth matches one trace record issued from inside
 * that record's host interval, on the same stream, with the same kernel
 * name and geometry, or bytes, direction and pageable/pinned host side;
 * synchronous copies and copies from pageable memory, and synchronize
 * calls, return no earlier than the device work they wait for.
 *
 * --gpu: event timing was on.  GPU records are written in time order, and
 * there is one GPU record per successful
 * launch, copy and memset (joined by correlation id) and one "[hipGraph]"
 * span per graph launch, and each brackets the true device interval the
 * way hipEvents recorded just before and just after the call must:
 *   gpu.start <= true start <= max(gpu.start, api call end)
 *   true end  <= gpu.end    <= max(true end, api call end)
 * (each within EPS: float-millisecond rounding plus the clock bracket).
 * --no-gpu: there must be no GPU records (event timing off or failed).
 *
 * Exit 0 when everything holds, 1 with one line per violation otherwise,
 * 2 for unreadable input.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbprof/trace.h"
#include "truth.h"

static int failures;
#define FAIL(...)                                                                             \
	do {                                                                                  \
		if (failures < 40) {                                                          \
			fprintf(stderr, "hip_trace_check: " __VA_ARGS__);                     \
			fputc('\n', stderr);                                                  \
		}                                                                             \
		failures++;                                                                   \
	} while (0)

/* ------------------------------------------------------------ the trace */
struct vec {
	struct tbp_record *v;
	size_t n, cap;
};
static void push(struct vec *a, const struct tbp_record *r)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 256;
		a->v = realloc(a->v, a->cap * sizeof *a->v);
		if (!a->v) {
			perror("realloc");
			exit(2);
		}
	}
	a->v[a->n] = *r;
	a->v[a->n].blob = NULL;
	a->n++;
}

static struct vec calls, gpus, clocks, devices;
static char **strings;
static size_t nstrings;

static const char *string_of(uint64_t id)
{
	return id < nstrings && strings[id] ? strings[id] : "";
}

static int is_call_kind(unsigned k)
{
	return k == TBP_K_API || k == TBP_K_LAUNCH || k == TBP_K_MEMCPY || k == TBP_K_MEMSET ||
	       k == TBP_K_MALLOC || k == TBP_K_FREE || k == TBP_K_SYNC;
}

static int load_trace(const char *path)
{
	struct tbp_reader *r;
	int rc = tbp_reader_open(&r, path);
	if (rc != TBP_OK) {
		fprintf(stderr, "%s: %s\n", path, tbp_error_name(rc));
		return -1;
	}
	struct tbp_record rec;
	while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
		if (rec.kind == TBP_K_STRING) {
			uint64_t id = rec.u.string.id;
			if (id >= nstrings) {
				size_t n = id + 64;
				strings = realloc(strings, n * sizeof *strings);
				memset(strings + nstrings, 0, (n - nstrings) * sizeof *strings);
				nstrings = n;
			}
			strings[id] = strndup(rec.blob ? rec.blob : "", rec.blob_len);
		} else if (is_call_kind(rec.kind)) {
			const struct tbp_api_info *info = tbp_api_lookup((unsigned)rec.u.call.api);
			if (!info) {
				FAIL("record with unknown api id %" PRIu64, rec.u.call.api);
				continue;
			}
			if (info->family == TBP_FAM_HIP)
				push(&calls, &rec);
		} else if (rec.kind == TBP_K_GPU_KERNEL || rec.kind == TBP_K_GPU_MEMCPY ||
			   rec.kind == TBP_K_GPU_MEMSET) {
			push(&gpus, &rec);
		} else if (rec.kind == TBP_K_CLOCK) {
			push(&clocks, &rec);
		} else if (rec.kind == TBP_K_DEVICE) {
			push(&devices, &rec);
		}
	}
	if (rc != TBP_END) {
		fprintf(stderr, "%s: %s at offset %" PRIu64 ": %s\n", path, tbp_error_name(rc),
			tbp_reader_offset(r), tbp_reader_detail(r));
		tbp_reader_close(r);
		return -1;
	}
	tbp_reader_close(r);
	return 0;
}

static const char *api_name(const struct tbp_record *r)
{
	const struct tbp_api_info *info = tbp_api_lookup((unsigned)r->u.call.api);
	return info ? info->name : "?";
}

static int result_of(const struct tbp_record *r)
{
	return (int)(int64_t)r->u.call.result;
}

/* ------------------------------------------------------------ check: calls */
struct call_line {
	char api[64];
	int result;
	int used;
};

static void check_calls(const char *calls_path)
{
	FILE *f = fopen(calls_path, "r");
	if (!f) {
		fprintf(stderr, "%s: cannot open\n", calls_path);
		exit(2);
	}
	struct call_line *lines = NULL;
	size_t n = 0, cap = 0;
	char api[64];
	int result;
	while (fscanf(f, "%63s %d", api, &result) == 2) {
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			lines = realloc(lines, cap * sizeof *lines);
		}
		snprintf(lines[n].api, sizeof lines[n].api, "%s", api);
		lines[n].result = result;
		lines[n].used = 0;
		n++;
	}
	fclose(f);
	if (!n)
		FAIL("%s: the program logged no calls", calls_path);
	/* Multiset equality of (api, result). */
	for (size_t i = 0; i < calls.n; i++) {
		const struct tbp_record *r = &calls.v[i];
		size_t j;
		for (j = 0; j < n; j++)
			if (!lines[j].used && lines[j].result == result_of(r) &&
			    !strcmp(lines[j].api, api_name(r)))
				break;
		if (j == n)
			FAIL("trace has %s -> %d that the program did not make", api_name(r), result_of(r));
		else
			lines[j].used = 1;
	}
	for (size_t j = 0; j < n; j++)
		if (!lines[j].used)
			FAIL("program called %s -> %d but the trace has no such record", lines[j].api,
			     lines[j].result);
	printf("calls: %zu made, %zu recorded\n", n, calls.n);
	free(lines);
}

/* ------------------------------------------------------------ check: truth */
static struct truth truth;
static const struct tbp_record **match_of; /* per truth op */

static unsigned copy_kind_of_dir(const char *dir)
{
	if (!strcmp(dir, "h2d")) return TBP_COPY_H2D;
	if (!strcmp(dir, "d2h")) return TBP_COPY_D2H;
	if (!strcmp(dir, "d2d")) return TBP_COPY_D2D;
	return TBP_COPY_H2H;
}

static long count_calls(unsigned kind, int ok_only, const char *api)
{
	long c = 0;
	for (size_t i = 0; i < calls.n; i++) {
		const struct tbp_record *r = &calls.v[i];
		if (r->kind != kind || (ok_only && result_of(r) != 0))
			continue;
		if (api && strcmp(api_name(r), api))
			continue;
		c++;
	}
	return c;
}

/* Event timing's own waits (calibration, exit harvest) reach the runtime,
 * so the simulator logs them, but on events the program never saw. */
static int profiler_own_sync(const struct truth_op *o)
{
	if (strcmp(o->op, "sync") || strcmp(o->kind, "event"))
		return 0;
	for (size_t i = 0; i < calls.n; i++)
		if (calls.v[i].kind == TBP_K_SYNC && calls.v[i].u.sync.handle == o->handle)
			return 0;
	return 1;
}

static long count_truth(const char *op, int ok_only)
{
	long c = 0;
	for (size_t i = 0; i < truth.n; i++)
		if (!strcmp(truth.ops[i].op, op) && (!ok_only || truth.ops[i].result == 0) &&
		    !profiler_own_sync(&truth.ops[i]))
			c++;
	return c;
}

/* The trace holds the demangled name when the process had a demangler
 * loaded, else the mangled one: accept "_Z9fill_zeroPfi" as itself or as
 * "fill_zero(...)" (plain functions, which is what the workload has). */
static int name_matches(const char *traced, const char *mangled)
{
	if (!strcmp(traced, mangled))
		return 1;
	if (strncmp(mangled, "_Z", 2))
		return 0;
	char *end;
	long len = strtol(mangled + 2, &end, 10);
	if (len <= 0 || (long)strlen(end) < len)
		return 0;
	return !strncmp(traced, end, (size_t)len) && traced[len] == '(';
}

static int geometry_matches(const struct tbp_record *r, const char *name_in_truth,
			    const struct truth_op *o, const char *line)
{
	(void)o;
	unsigned gx, gy, gz, bx, by, bz;
	const char *g = strstr(line, "grid="), *b = strstr(line, "block=");
	if (!g || !b || sscanf(g, "grid=%u,%u,%u", &gx, &gy, &gz) != 3 ||
	    sscanf(b, "block=%u,%u,%u", &bx, &by, &bz) != 3)
		return 0;
	const struct tbp_launch *l = &r->u.launch;
	return name_matches(string_of(l->name), name_in_truth) && l->grid_x == gx && l->grid_y == gy &&
	       l->grid_z == gz && l->block_x == bx && l->block_y == by && l->block_z == bz;
}

static void check_truth(const char *truth_path)
{
	if (truth_load(&truth, truth_path))
		exit(2);
	/* The truth's raw lines, for the fields truth.h does not parse. */
	FILE *f = fopen(truth_path, "r");
	char **raw = calloc(truth.n + 1, sizeof *raw);
	char line[1024];
	size_t k = 0;
	while (f && fgets(line, sizeof line, f) && k < truth.n)
		if (line[0] != '\n')
			raw[k++] = strdup(line);
	if (f)
		fclose(f);

	struct {
		const char *what;
		long trace, truth;
	} counts[] = {
		{ "kernel launches", count_calls(TBP_K_LAUNCH, 1, NULL), count_truth("kernel", 1) },
		{ "graph launches", count_calls(TBP_K_API, 1, "hipGraphLaunch"), count_truth("graph", 1) },
		{ "copies", count_calls(TBP_K_MEMCPY, 1, NULL), count_truth("memcpy", 1) },
		{ "memsets", count_calls(TBP_K_MEMSET, 1, NULL), count_truth("memset", 1) },
		{ "allocations", count_calls(TBP_K_MALLOC, 1, NULL), count_truth("malloc", 1) },
		{ "frees", count_calls(TBP_K_FREE, 1, NULL), count_truth("free", 1) },
		{ "host synchronizations", count_calls(TBP_K_SYNC, 1, NULL), count_truth("sync", 1) },
	};
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
		if (counts[i].trace != counts[i].truth)
			FAIL("%s: trace has %ld, truth has %ld", counts[i].what, counts[i].trace,
			     counts[i].truth);
		printf("%s: %ld\n", counts[i].what, counts[i].truth);
	}
	if (!count_truth("kernel", 1))
		FAIL("the truth has no kernels: nothing was compared");

	/* The device is described once, by name, as an AMD device. */
	int described = 0;
	for (size_t i = 0; i < devices.n; i++)
		if (devices.v[i].u.device.device == 0 && devices.v[i].u.device.vendor == 2 &&
		    !strncmp(string_of(devices.v[i].u.device.name), "simhip 0", 8))
			described++;
	if (described != 1)
		FAIL("%d DEVICE records naming simhip's device 0 as AMD (want 1)", described);
	size_t device0 = 0;
	for (size_t i = 0; i < devices.n; i++)
		device0 += devices.v[i].u.device.device == 0;
	if (device0 != 1)
		FAIL("%zu DEVICE records for device 0 (want 1)", device0);

	/* One trace record per truth device operation. */
	match_of = calloc(truth.n, sizeof *match_of);
	char *taken = calloc(calls.n, 1);
	for (size_t i = 0; i < truth.n; i++) {
		const struct truth_op *o = &truth.ops[i];
		unsigned kind;
		if (!strcmp(o->op, "kernel"))
			kind = TBP_K_LAUNCH;
		else if (!strcmp(o->op, "memcpy"))
			kind = TBP_K_MEMCPY;
		else if (!strcmp(o->op, "memset"))
			kind = TBP_K_MEMSET;
		else if (!strcmp(o->op, "graph"))
			kind = TBP_K_API;
		else
			continue;
		size_t found = calls.n;
		for (size_t j = 0; j < calls.n && found == calls.n; j++) {
			const struct tbp_record *r = &calls.v[j];
			if (taken[j] || r->kind != kind || result_of(r) != 0 || r->u.call.stream != o->stream ||
			    strcmp(api_name(r), o->api))
				continue;
			if (kind != TBP_K_API && (o->issued < r->ts || o->issued > r->u.call.end))
				continue;
			if (kind == TBP_K_LAUNCH && !geometry_matches(r, o->name, o, raw[i]))
				continue;
			if (kind == TBP_K_MEMCPY &&
			    (r->u.memcpy.bytes != o->bytes ||
			     r->u.memcpy.copy_kind != copy_kind_of_dir(o->dir)))
				continue;
			if (kind == TBP_K_MEMSET && r->u.memset.bytes != o->bytes)
				continue;
			found = j;
		}
		if (found == calls.n) {
			FAIL("truth line %d (%s %s on stream %#" PRIx64 ") has no matching trace record",
			     o->line, o->op, o->api, o->stream);
			continue;
		}
		taken[found] = 1;
		const struct tbp_record *r = &calls.v[found];
		match_of[i] = r;
		if (kind == TBP_K_MEMCPY && strcmp(o->dir, "d2d") && strcmp(o->dir, "h2h")) {
			int pageable = (r->u.memcpy.flags & TBP_COPYF_PAGEABLE) != 0;
			int pinned = (r->u.memcpy.flags & TBP_COPYF_PINNED) != 0;
			if (pageable != o->pageable || pinned == pageable)
				FAIL("truth line %d: host side pageable=%d, trace flags %#" PRIx64, o->line,
				     o->pageable, r->u.memcpy.flags);
			if (((r->u.memcpy.flags & TBP_COPYF_ASYNC) != 0) != o->async)
				FAIL("truth line %d: async=%d, trace flags %#" PRIx64, o->line, o->async,
				     r->u.memcpy.flags);
		}
		/* Synchronous copies (and async ones from pageable memory) return
		 * only once the copy is done. */
		if (kind == TBP_K_MEMCPY && (!o->async || o->pageable) && r->u.call.end < o->end)
			FAIL("truth line %d: %s returned %" PRIu64 " ns before its copy ended", o->line,
			     o->api, o->end - r->u.call.end);
	}
	/* Synchronize calls: the simulator's wait lies inside the hooked call. */
	for (size_t i = 0; i < truth.n; i++) {
		const struct truth_op *o = &truth.ops[i];
		if (strcmp(o->op, "sync") || o->result || profiler_own_sync(o))
			continue;
		const struct tbp_record *r = NULL;
		for (size_t j = 0; j < calls.n && !r; j++)
			if (!taken[j] && calls.v[j].kind == TBP_K_SYNC && result_of(&calls.v[j]) == 0 &&
			    !strcmp(api_name(&calls.v[j]), o->api) && o->start >= calls.v[j].ts &&
			    o->end <= calls.v[j].u.call.end) {
				r = &calls.v[j];
				taken[j] = 1;
			}
		if (!r)
			FAIL("truth line %d: %s has no trace record around it", o->line, o->api);
		else if (r->u.call.end < o->until)
			FAIL("truth line %d: %s record ends before the awaited work", o->line, o->api);
	}
	free(taken);
	for (size_t i = 0; i < truth.n; i++)
		free(raw[i]);
	free(raw);
}

/* ------------------------------------------------------------ check: GPU */
static const struct tbp_record *gpu_by_corr(uint64_t corr)
{
	const struct tbp_record *found = NULL;
	for (size_t i = 0; i < gpus.n; i++)
		if (gpus.v[i].u.gpu_kernel.corr == corr) {
			if (found)
				FAIL("two GPU records with correlation id %" PRIu64, corr);
			found = &gpus.v[i];
		}
	return found;
}

static void check_gpu(int want_gpu)
{
	if (!want_gpu) {
		if (gpus.n)
			FAIL("%zu GPU records although event timing was off", gpus.n);
		return;
	}
	uint64_t eps = 2000;
	int have_clock = 0;
	for (size_t i = 0; i < clocks.n; i++)
		if (clocks.v[i].u.clock.method == TBP_CLOCK_BRACKETED) {
			have_clock = 1;
			eps += clocks.v[i].u.clock.uncertainty_ns;
		}
	if (!have_clock)
		FAIL("no bracketed CLOCK record for the event timeline");
	/* Readers merge streams assuming each is in time order. */
	for (size_t i = 1; i < gpus.n; i++)
		if (gpus.v[i].tid == gpus.v[i - 1].tid && gpus.v[i].ts < gpus.v[i - 1].ts) {
			FAIL("GPU record %zu starts %" PRIu64 " ns before the one written before it", i,
			     gpus.v[i - 1].ts - gpus.v[i].ts);
			break;
		}
	long want = count_calls(TBP_K_LAUNCH, 1, NULL) + count_calls(TBP_K_MEMCPY, 1, NULL) +
		    count_calls(TBP_K_MEMSET, 1, NULL) + count_calls(TBP_K_API, 1, "hipGraphLaunch");
	if ((long)gpus.n != want)
		FAIL("%zu GPU records for %ld successful launches/copies/memsets/graphs", gpus.n, want);
	long checked = 0;
	for (size_t i = 0; i < truth.n; i++) {
		const struct truth_op *o = &truth.ops[i];
		const struct tbp_record *api = match_of ? match_of[i] : NULL;
		if (!api)
			continue;
		const struct tbp_record *g = gpu_by_corr(api->u.call.corr);
		if (!g) {
			FAIL("truth line %d: %s has no GPU record", o->line, o->api);
			continue;
		}
		uint64_t true_start = o->start, true_end = o->end;
		if (!strcmp(o->op, "graph")) {
			/* The graph's nodes follow its line in the truth. */
			size_t k = i + 1;
			if (k < truth.n && !strcmp(truth.ops[k].op, "graph_kernel"))
				true_start = truth.ops[k].start;
			for (; k < truth.n && !strcmp(truth.ops[k].op, "graph_kernel"); k++)
				true_end = truth.ops[k].end;
			if (strcmp(string_of(g->u.gpu_kernel.name), "[hipGraph]"))
				FAIL("truth line %d: graph span named '%s'", o->line,
				     string_of(g->u.gpu_kernel.name));
		} else if (g->u.gpu_kernel.stream != api->u.call.stream) {
			FAIL("truth line %d: GPU record on another stream", o->line);
		}
		if (g->kind == TBP_K_GPU_KERNEL && strcmp(o->op, "graph") &&
		    g->u.gpu_kernel.name != api->u.launch.name)
			FAIL("truth line %d: GPU kernel name differs from the launch", o->line);
		if (g->kind == TBP_K_GPU_MEMCPY && g->u.gpu_memcpy.bytes != o->bytes)
			FAIL("truth line %d: GPU copy of %" PRIu64 " bytes, truth %" PRIu64, o->line,
			     g->u.gpu_memcpy.bytes, o->bytes);
		uint64_t gs = g->ts, ge = g->u.gpu_kernel.end;
		uint64_t call_end = api->u.call.end;
		if (gs > true_start + eps)
			FAIL("truth line %d: GPU start %" PRIu64 " ns after the true start", o->line,
			     gs - true_start);
		if (true_start > (gs > call_end ? gs : call_end) + eps)
			FAIL("truth line %d: true start %" PRIu64 " ns after both the GPU start and the call",
			     o->line, true_start - (gs > call_end ? gs : call_end));
		if (true_end > ge + eps)
			FAIL("truth line %d: GPU end %" PRIu64 " ns before the true end", o->line,
			     true_end - ge);
		/* The stop event is recorded as soon as the real call returns,
		 * before the API record's end is taken. */
		if (ge > (true_end > call_end ? true_end : call_end) + eps)
			FAIL("truth line %d: GPU end %" PRIu64 " ns after the true end and the call's return",
			     o->line, ge - (true_end > call_end ? true_end : call_end));
		checked++;
	}
	printf("GPU records: %zu, %ld bracketing checks\n", gpus.n, checked);
	if (!checked)
		FAIL("no GPU record was compared with the truth");
}

int main(int argc, char **argv)
{
	const char *trace = NULL, *callsf = NULL, *truthf = NULL;
	int gpu = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--truth") && i + 1 < argc)
			truthf = argv[++i];
		else if (!strcmp(argv[i], "--gpu"))
			gpu = 1;
		else if (!strcmp(argv[i], "--no-gpu"))
			gpu = 0;
		else if (!trace)
			trace = argv[i];
		else if (!callsf)
			callsf = argv[i];
		else {
			fprintf(stderr, "hip_trace_check: unexpected argument '%s'\n", argv[i]);
			return 3;
		}
	}
	if (!trace || !callsf || (gpu == 1 && !truthf)) {
		fprintf(stderr, "usage: hip_trace_check TRACE CALLS [--truth TRUTH] [--gpu|--no-gpu]\n");
		return 3;
	}
	if (load_trace(trace))
		return 2;
	check_calls(callsf);
	if (truthf)
		check_truth(truthf);
	if (gpu >= 0)
		check_gpu(gpu);
	if (failures) {
		fprintf(stderr, "hip_trace_check: %d problems\n", failures);
		return 1;
	}
	printf("hip_trace_check: %s consistent\n", trace);
	return 0;
}
