/*
 * tbanalyze export --format chrome|kineto TRACE.zst [-o OUT.json]
 *
 * Two streaming passes: the first collects definitions (names, call paths)
 * and the earliest timestamp, the second writes one JSON event per record
 * in file order (viewers and HTA sort by themselves).  Timestamps are
 * microseconds from the first event with nanosecond decimals.
 *
 * chrome: the Trace Event Format that Perfetto and chrome://tracing open.
 * kineto: the same events with PyTorch profiler (Kineto) conventions, so
 *         Holistic Trace Analysis loads it: schemaVersion, distributedInfo,
 *         deviceProperties, categories cuda_runtime/kernel/gpu_memcpy/
 *         gpu_memset/python_function, GPU events on pid=device tid=stream,
 *         args.correlation/stream/device, ac2g flow arrows.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "an.h"
#include "an_ranks.h"
#include "cmd.h"
#include "tr_common.h"

struct exporter {
	FILE *f;
	const struct analysis *defs;
	uint64_t base, host_pid;
	int kineto;
	uint64_t events;
	int first;
	/* Several ranks in one file: a rank's GPUs are processes gpu_pid_base +
	 * device, named when first seen (devices below 64 tracked). */
	int multi;
	int64_t rank;
	uint64_t gpu_pid_base;
	uint64_t gpus_named;
	/* Added to every correlation id but 0 (kineto): see export_one. */
	uint64_t corr_base;
	/* What the metadata events at the end name: host threads, GPU
	 * (device, stream) pairs. */
	struct u64map threads, streams;
	struct vec stream_list; /* struct dev_stream, in the order first seen */
};

struct dev_stream {
	uint64_t device, stream;
};

static void stream_seen(struct exporter *x, uint64_t device, uint64_t stream)
{
	uint64_t key = (device << 40) ^ stream;
	if (u64map_get(&x->streams, key))
		return;
	struct dev_stream *ds = vec_push(&x->stream_list);
	if (ds) {
		*ds = (struct dev_stream){device, stream};
		u64map_put(&x->streams, key, x->stream_list.n);
	}
}

static uint64_t corr_out(const struct exporter *x, uint64_t corr)
{
	return corr ? corr + x->corr_base : 0;
}

static void ts_us(FILE *f, uint64_t ns, uint64_t base)
{
	uint64_t rel = ns > base ? ns - base : 0;
	fprintf(f, "%" PRIu64 ".%03" PRIu64, rel / 1000, rel % 1000);
}

static void ev_begin(struct exporter *x)
{
	fputs(x->first ? "\n" : ",\n", x->f);
	x->first = 0;
}

static uint64_t gpu_pid(struct exporter *x, uint64_t device)
{
	if (x->multi && device < 64 && !(x->gpus_named >> device & 1)) {
		x->gpus_named |= 1ULL << device;
		ev_begin(x);
		fprintf(x->f,
			"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu64 ",\"tid\":0,\"args\":{\"name\":\"rank %" PRId64
			" GPU %" PRIu64 "\"}}",
			x->gpu_pid_base + device, x->rank, device);
		ev_begin(x);
		fprintf(x->f,
			"{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%" PRIu64 ",\"tid\":0,\"args\":{\"sort_index\":%" PRId64
			"}}",
			x->gpu_pid_base + device, x->rank * 100 + 1 + (int64_t)device);
	}
	return x->gpu_pid_base + device;
}

static void name_str(struct exporter *x, uint64_t id, const char *fallback)
{
	size_t len;
	const char *s = an_string(x->defs, id, &len);
	if (s)
		json_str(x->f, s, len);
	else
		json_str(x->f, fallback, strlen(fallback));
}

/* Python call path as args.python "file:line function" leaf first. */
static void callpath_arg(struct exporter *x, uint64_t cp)
{
	struct an_frame fr[32];
	size_t n = an_callpath_frames(x->defs, cp, fr, 32);
	if (!n)
		return;
	fputs(",\"python\":[", x->f);
	for (size_t i = 0; i < n; i++) {
		char buf[600];
		snprintf(buf, sizeof buf, "%.*s:%" PRIu64 " %.*s", (int)(fr[i].file_len > 400 ? 400 : fr[i].file_len),
			 fr[i].file, fr[i].line, (int)(fr[i].function_len > 150 ? 150 : fr[i].function_len), fr[i].function);
		if (i)
			fputc(',', x->f);
		json_str(x->f, buf, strlen(buf));
	}
	fputc(']', x->f);
}

static const char *copy_name(uint64_t ck, uint64_t src_kind, uint64_t dst_kind)
{
	static char buf[96];
	static const char *dir[] = {"Memcpy Unknown", "Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD", "Memcpy HtoH",
				    "Memcpy PtoP"};
	static const char *mk[] = {"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed"};
	snprintf(buf, sizeof buf, "%s (%s -> %s)", dir[ck < 6 ? ck : 0], mk[src_kind < 6 ? src_kind : 0],
		 mk[dst_kind < 6 ? dst_kind : 0]);
	return buf;
}

static void export_record(struct exporter *x, const struct tbp_record *r)
{
	FILE *f = x->f;
	switch (r->kind) {
	case TBP_K_API:
	case TBP_K_LAUNCH:
	case TBP_K_MEMCPY:
	case TBP_K_MEMSET:
	case TBP_K_MALLOC:
	case TBP_K_FREE:
	case TBP_K_SYNC: {
		const struct tbp_call *c = &r->u.call;
		const struct tbp_api_info *ai = tbp_api_lookup((unsigned)c->api);
		uint64_t end = c->end < r->ts ? r->ts : c->end;
		ev_begin(x);
		fprintf(f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":",
			ai && ai->family == TBP_FAM_CU ? "cuda_driver" : "cuda_runtime");
		if (ai)
			json_str(f, ai->name, strlen(ai->name));
		else
			fprintf(f, "\"api_%" PRIu64 "\"", c->api);
		fprintf(f, ",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", x->host_pid, r->tid);
		ts_us(f, r->ts, x->base);
		fputs(",\"dur\":", f);
		ts_us(f, end, r->ts);
		fprintf(f, ",\"args\":{\"correlation\":%" PRIu64 ",\"External id\":%" PRIu64 ",\"device\":%" PRIu64
			   ",\"result\":%" PRIu64,
			corr_out(x, c->corr), corr_out(x, c->corr), c->device, c->result);
		u64map_put(&x->threads, r->tid, 1);
		if (r->kind == TBP_K_MEMCPY)
			fprintf(f, ",\"bytes\":%" PRIu64 ",\"kind\":\"%s\"", r->u.memcpy.bytes,
				tr_copy_kind_name(r->u.memcpy.copy_kind));
		if (r->kind == TBP_K_MALLOC || r->kind == TBP_K_FREE)
			fprintf(f, ",\"bytes\":%" PRIu64 ",\"ptr\":\"0x%" PRIx64 "\"",
				r->kind == TBP_K_MALLOC ? r->u.malloc.bytes : r->u.free.bytes,
				r->kind == TBP_K_MALLOC ? r->u.malloc.ptr : r->u.free.ptr);
		callpath_arg(x, c->callpath);
		fputs("}}", f);
		x->events++;
		/* A call the runtime refused put nothing on the GPU: no arrow. */
		if (x->kineto && c->corr && !c->result &&
		    (r->kind == TBP_K_LAUNCH || r->kind == TBP_K_MEMCPY || r->kind == TBP_K_MEMSET)) {
			ev_begin(x);
			fprintf(f, "{\"ph\":\"s\",\"id\":%" PRIu64 ",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":",
				corr_out(x, c->corr), x->host_pid, r->tid);
			ts_us(f, r->ts, x->base);
			fputs(",\"cat\":\"ac2g\",\"name\":\"ac2g\"}", f);
		}
		break;
	}
	case TBP_K_GPU_KERNEL:
	case TBP_K_GPU_MEMCPY:
	case TBP_K_GPU_MEMSET: {
		const struct tbp_gpu_kernel *g = &r->u.gpu_kernel;
		uint64_t end = g->end < r->ts ? r->ts : g->end;
		uint64_t gp = gpu_pid(x, g->device); /* (its name first, when new) */
		ev_begin(x);
		if (r->kind == TBP_K_GPU_KERNEL) {
			fputs("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":", f);
			name_str(x, g->name, "(unnamed kernel)");
		} else if (r->kind == TBP_K_GPU_MEMCPY) {
			const char *n = copy_name(r->u.gpu_memcpy.copy_kind, r->u.gpu_memcpy.src_kind, r->u.gpu_memcpy.dst_kind);
			fputs("{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":", f);
			json_str(f, n, strlen(n));
		} else {
			fputs("{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset (Device)\"", f);
		}
		fprintf(f, ",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", gp, g->stream);
		ts_us(f, r->ts, x->base);
		fputs(",\"dur\":", f);
		ts_us(f, end, r->ts);
		fprintf(f, ",\"args\":{\"device\":%" PRIu64 ",\"context\":%" PRIu64 ",\"stream\":%" PRIu64
			   ",\"correlation\":%" PRIu64 ",\"External id\":%" PRIu64,
			g->device, g->context, g->stream, corr_out(x, g->corr), corr_out(x, g->corr));
		stream_seen(x, g->device, g->stream);
		if (r->kind == TBP_K_GPU_KERNEL)
			fprintf(f, ",\"grid\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\"block\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64
				   "],\"registers per thread\":%" PRIu64 ",\"shared memory\":%" PRIu64,
				g->grid_x, g->grid_y, g->grid_z, g->block_x, g->block_y, g->block_z, g->registers,
				g->static_shmem + g->dynamic_shmem);
		else if (r->kind == TBP_K_GPU_MEMCPY)
			fprintf(f, ",\"bytes\":%" PRIu64 ",\"memory bandwidth (GB/s)\":%.3f", r->u.gpu_memcpy.bytes,
				end > r->ts ? (double)r->u.gpu_memcpy.bytes / (double)(end - r->ts) : 0.0);
		else
			fprintf(f, ",\"bytes\":%" PRIu64, r->u.gpu_memset.bytes);
		fputs("}}", f);
		x->events++;
		if (x->kineto && g->corr) {
			ev_begin(x);
			fprintf(f, "{\"ph\":\"f\",\"id\":%" PRIu64 ",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":",
				corr_out(x, g->corr), gp, g->stream);
			ts_us(f, r->ts, x->base);
			fputs(",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}", f);
		}
		break;
	}
	case TBP_K_PY_SPAN: {
		uint64_t end = r->u.py_span.end < r->ts ? r->ts : r->u.py_span.end;
		struct an_frame fr;
		char name[600];
		if (an_callpath_frames(x->defs, r->u.py_span.callpath, &fr, 1))
			snprintf(name, sizeof name, "%.*s(%" PRIu64 "): %.*s", (int)(fr.file_len > 400 ? 400 : fr.file_len),
				 fr.file, fr.line, (int)(fr.function_len > 150 ? 150 : fr.function_len), fr.function);
		else
			snprintf(name, sizeof name, "(python)");
		ev_begin(x);
		u64map_put(&x->threads, r->tid, 1);
		fputs("{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":", f);
		json_str(f, name, strlen(name));
		fprintf(f, ",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", x->host_pid, r->tid);
		ts_us(f, r->ts, x->base);
		fputs(",\"dur\":", f);
		ts_us(f, end, r->ts);
		fputs(",\"args\":{", f);
		fprintf(f, "\"callpath\":%" PRIu64, r->u.py_span.callpath);
		callpath_arg(x, r->u.py_span.callpath);
		fputs("}}", f);
		x->events++;
		break;
	}
	case TBP_K_RANGE: {
		/* An NVTX range as torch.profiler writes a record_function range (a user annotation) on
		 * the thread that began it; a mark as an instant. */
		const struct tbp_range *g = &r->u.range;
		uint32_t tid = g->begin_tid ? (uint32_t)g->begin_tid : r->tid;
		ev_begin(x);
		u64map_put(&x->threads, tid, 1);
		fputs(g->range_kind == TBP_NVTX_MARK ? "{\"ph\":\"i\",\"s\":\"t\"" : "{\"ph\":\"X\"", f);
		fputs(",\"cat\":\"user_annotation\",\"name\":", f);
		name_str(x, g->name, "(nvtx)");
		fprintf(f, ",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", x->host_pid, tid);
		ts_us(f, r->ts, x->base);
		if (g->range_kind != TBP_NVTX_MARK) {
			fputs(",\"dur\":", f);
			ts_us(f, g->end < r->ts ? r->ts : g->end, r->ts);
		}
		fputs(",\"args\":{\"nvtx\":", f);
		fputs(g->range_kind == TBP_NVTX_MARK ? "\"mark\"" : g->range_kind == TBP_NVTX_START ? "\"start_end\"" : "\"push_pop\"", f);
		if (g->domain) {
			fputs(",\"domain\":", f);
			name_str(x, g->domain, "");
		}
		if (g->range_kind == TBP_NVTX_PUSH)
			fprintf(f, ",\"depth\":%" PRIu64, g->depth);
		if (g->range_kind == TBP_NVTX_START && r->tid != tid)
			fprintf(f, ",\"end_tid\":%u", r->tid);
		callpath_arg(x, g->callpath);
		fputs("}}", f);
		x->events++;
		break;
	}
	case TBP_K_MARKER: {
		static const char *mk[] = {"user", "iteration begin", "iteration end", "warm-up end"};
		uint64_t k = r->u.marker.marker_kind;
		ev_begin(x);
		fputs("{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"marker\",\"name\":", f);
		size_t ll;
		const char *label = an_string(x->defs, r->u.marker.label, &ll);
		if (label)
			json_str(f, label, ll);
		else
			json_str(f, k < 4 ? mk[k] : "marker", strlen(k < 4 ? mk[k] : "marker"));
		fprintf(f, ",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", x->host_pid, r->tid);
		ts_us(f, r->ts, x->base);
		/* The name is the label when there is one: the kind goes in args
		 * so iteration begin/end and warm-up end stay distinguishable. */
		fputs(",\"args\":{\"kind\":", f);
		json_str(f, k < 4 ? mk[k] : "marker", strlen(k < 4 ? mk[k] : "marker"));
		fprintf(f, ",\"value\":%" PRIu64 "}}", r->u.marker.value);
		break;
	}
	}
}

static int cmp_u64_export(const void *p, const void *q)
{
	uint64_t a = *(const uint64_t *)p, b = *(const uint64_t *)q;
	return (a > b) - (a < b);
}

/* Names for Perfetto and HTA as metadata events: each host thread (its
 * THREAD name, "main thread" for the process's own), each GPU (its DEVICE
 * name) and each of its streams. */
static void export_names(struct exporter *x, const struct analysis *an)
{
	FILE *f = x->f;
	uint64_t *tids = x->threads.n ? malloc(x->threads.n * sizeof *tids) : NULL;
	size_t nt = 0;
	for (size_t j = 0; tids && j < x->threads.cap; j++)
		if (x->threads.keys[j])
			tids[nt++] = x->threads.keys[j] - 1;
	qsort(tids, nt, sizeof *tids, cmp_u64_export);
	for (size_t i = 0; i < nt; i++) {
		char label[160];
		if (an)
			an_thread_label(an, (uint32_t)tids[i], label, sizeof label);
		else
			snprintf(label, sizeof label, "thread %" PRIu64, tids[i]);
		ev_begin(x);
		fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"args\":{\"name\":",
			x->host_pid, tids[i]);
		json_str(f, label, strlen(label));
		fputs("}}", f);
		ev_begin(x);
		fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64
			   ",\"args\":{\"sort_index\":%zu}}", x->host_pid, tids[i], i);
	}
	free(tids);
	uint64_t named = 0;
	for (size_t i = 0; i < x->stream_list.n; i++) {
		const struct dev_stream *ds = VEC_AT(&x->stream_list, struct dev_stream, i);
		uint64_t gp = x->gpu_pid_base + ds->device;
		if (!x->multi && ds->device < 64 && !(named >> ds->device & 1)) {
			named |= 1ULL << ds->device;
			const char *name = NULL;
			size_t nl = 0;
			for (size_t k = 0; an && k < an->devices.n && !name; k++) {
				const struct an_device *d = VEC_AT(&an->devices, struct an_device, k);
				if (d->id == ds->device && d->name)
					name = an_string(an, d->name, &nl);
			}
			char label[200];
			snprintf(label, sizeof label, "GPU %" PRIu64 "%s%.*s", ds->device, name ? ": " : "",
				 name ? (int)(nl > 120 ? 120 : nl) : 0, name ? name : "");
			ev_begin(x);
			fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu64 ",\"tid\":0,\"args\":{\"name\":", gp);
			json_str(f, label, strlen(label));
			fputs("}}", f);
			ev_begin(x);
			fprintf(f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%" PRIu64
				   ",\"tid\":0,\"args\":{\"sort_index\":%" PRIu64 "}}", gp, 1 + ds->device);
		}
		ev_begin(x);
		fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64
			   ",\"args\":{\"name\":\"stream %" PRIu64 "\"}}", gp, ds->stream, ds->stream);
	}
}

/* The steps the analysis found (marks, or the detected loop's) as the
 * PyTorch profiler's ProfilerStep#N ranges on the main thread: HTA's
 * per-iteration figures and Perfetto's step lane read them. */
static void export_steps(struct exporter *x, const struct analysis *an)
{
	uint64_t tid = an->has_process ? an->process.pid : x->host_pid;
	for (size_t i = 0; i < an->step_times.n; i++) {
		const struct an_step_time *st = VEC_AT(&an->step_times, struct an_step_time, i);
		ev_begin(x);
		fprintf(x->f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%zu\",\"pid\":%" PRIu64
			   ",\"tid\":%" PRIu64 ",\"ts\":", i + 1, x->host_pid, tid);
		ts_us(x->f, st->begin, x->base);
		fputs(",\"dur\":", x->f);
		ts_us(x->f, st->end, st->begin);
		fprintf(x->f, ",\"args\":{\"warmup\":%s}}", st->counted ? "false" : "true");
		x->events++;
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze export [--format chrome|kineto] TRACE.zst [-o OUT.json]\n"
		   "       tbanalyze export DIR | TRACE.zst TRACE.zst... [-o OUT.json]\n"
		   "  several traces (one per rank, or a directory of them): one chrome file, a process per rank;\n"
		   "  with --format kineto, -o DIR gets DIR/rank<N>.json per rank (HTA loads DIR as a multi-rank trace)\n"
		   "  chrome: Trace Event Format (Perfetto, chrome://tracing)\n"
		   "  kineto: PyTorch profiler conventions (Holistic Trace Analysis)\n");
}

/* One trace into one file (out NULL: standard output).  rank >= 0 stands
 * for the trace's own in kineto's distributedInfo (ranks known by file name
 * or place), with world. */
static int export_one(const struct analysis *defs, uint64_t base, uint64_t pid, const char *path, const char *out,
		      int kineto, int64_t rank, int64_t world)
{
	struct tbp_reader *r;
	int rc = an_open(&r, path);
	if (rc)
		return rc;
	FILE *f = out ? cmd_output_open(out) : stdout;
	if (!f) {
		tbp_reader_close(r);
		return TBA_EXIT_INTERNAL;
	}
	/* pid_max is at most 2^22 on Linux: above it cannot clash with a device. */
	struct exporter x = {.f = f, .defs = defs, .base = base, .host_pid = pid ? pid : (1u << 22) + 1,
			     .kineto = kineto, .first = 1};
	x.stream_list.item = sizeof(struct dev_stream);
	/* HTA (0.5) stores the correlation column in the smallest integer
	 * type that holds its values, then writes row numbers into a column of
	 * that type (transform_correlation_to_index): ids all below 2^15 in a
	 * trace of more than 32767 events fail with "Invalid value ... for
	 * dtype 'int16'", ids below 2^7 in one of more than 127.  Ids above
	 * the number of rows it can make (records, flow and metadata events
	 * included) give the column a type that holds every row number. */
	if (kineto)
		x.corr_base = 2 * defs->records + 65536;
	/* The analysis: the steps (marked or detected) as ProfilerStep#N
	 * ranges, the devices' names (an export without it has neither). */
	struct analysis an;
	struct an_opts opts;
	an_opts_default(&opts);
	int an_ok = an_run(&an, path, &opts) == TBA_EXIT_OK;
	if (!an_ok)
		an_free(&an);
	fputs("{", f);
	if (x.kineto) {
		/* HTA takes each file's rank from distributedInfo.rank: a
		 * directory of rank<N>.json loads as a multi-rank trace.  A
		 * process outside a job is rank 0 of 1, as the PyTorch profiler
		 * writes it. */
		if (rank < 0) {
			rank = defs->has_process ? tbp_process_rank(&defs->process) : -1;
			world = defs->has_process ? tbp_process_world_size(&defs->process) : -1;
		}
		if (rank < 0)
			rank = 0, world = 1;
		/* "rank": N with the space: HTA finds a file's rank with the
		 * regular expression "rank":\s+(\d+) (hta/common/trace_file.py)
		 * and takes a file it cannot match for rank 0. */
		fprintf(f, "\"schemaVersion\":1,\"distributedInfo\":{\"rank\": %" PRId64, rank);
		if (world > 0)
			fprintf(f, ",\"world_size\":%" PRId64, world);
		fputs("},\"deviceProperties\":[", f);
		for (size_t i = 0, k = 0; an_ok && i < an.devices.n; i++) {
			const struct an_device *d = VEC_AT(&an.devices, struct an_device, i);
			size_t nl = 0;
			const char *name = d->name ? an_string(&an, d->name, &nl) : NULL;
			fprintf(f, "%s{\"id\":%" PRIu64 ",\"name\":", k++ ? "," : "", d->id);
			if (name)
				json_str(f, name, nl);
			else
				fprintf(f, "\"GPU %" PRIu64 "\"", d->id);
			fputs("}", f);
		}
		fprintf(f, "],\"baseTimeNanoseconds\":%" PRIu64 ",\"traceName\":", base);
		json_str(f, path, strlen(path));
		fputs(",", f);
	}
	fputs("\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
	ev_begin(&x);
	fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu64 ",\"tid\":0,\"args\":{\"name\":\"host\"}}",
		x.host_pid);
	struct tbp_record rec;
	int st;
	while ((st = tr_next(r, path, &rec)) > 0)
		export_record(&x, &rec);
	rc = st < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
	export_names(&x, an_ok ? &an : NULL);
	if (an_ok)
		export_steps(&x, &an);
	fprintf(f, "\n]}\n");
	tbp_reader_close(r);
	u64map_free(&x.threads);
	u64map_free(&x.streams);
	vec_free(&x.stream_list);
	if (an_ok)
		an_free(&an);
	return cmd_output_close(f, out, rc);
}

/* The ranks of the traces, as the report takes them: recorded, else the
 * file name's rank<N>.zst; when no trace has either, their places; -1 for a
 * trace without one beside traces with one (torchrun's agent). */
static void export_rank_of(const struct analysis *defs, char **paths, size_t n, int64_t *ranks)
{
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		ranks[i] = defs[i].has_process ? tbp_process_rank(&defs[i].process) : -1;
		if (ranks[i] < 0)
			ranks[i] = an_rank_from_name(paths[i]);
		any |= ranks[i] >= 0;
	}
	if (!any)
		for (size_t i = 0; i < n; i++)
			ranks[i] = (int64_t)i;
}

/* Which trace is its rank's own: the one named rank<N>.zst (the rank's
 * process starts first and takes the plain name), else the one with the
 * most records; the others of a rank (processes it spawned with its
 * environment, or another run's) are not, nor is a trace without a rank. */
static void export_rank_own(const struct analysis *defs, char **paths, size_t n, const int64_t *ranks, int *own)
{
	for (size_t i = 0; i < n; i++) {
		own[i] = ranks[i] >= 0;
		for (size_t j = 0; j < n && own[i]; j++) {
			if (j == i || ranks[j] != ranks[i])
				continue;
			int plain_i = an_rank_from_name(paths[i]) == ranks[i], plain_j = an_rank_from_name(paths[j]) == ranks[j];
			if (plain_j > plain_i || (plain_j == plain_i && (defs[j].records > defs[i].records ||
									  (defs[j].records == defs[i].records && j < i))))
				own[i] = 0;
		}
	}
}

/* Several traces of one run in one chrome file: every rank's host as a
 * process named "rank N", its GPUs as processes "rank N GPU d", all on
 * one time axis (the traces of one machine share CLOCK_MONOTONIC). */
static int export_ranks(char **paths, size_t n, const char *out)
{
	struct analysis *defs = calloc(n, sizeof *defs);
	uint64_t *firsts = calloc(n, sizeof *firsts), *pids = calloc(n, sizeof *pids);
	int64_t *ranks = calloc(n, sizeof *ranks), *shifts = calloc(n, sizeof *shifts);
	const struct analysis **as = calloc(n, sizeof *as);
	int *own = calloc(n, sizeof *own);
	int rc = TBA_EXIT_OK;
	size_t loaded = 0;
	FILE *f = NULL;
	if (!defs || !firsts || !pids || !ranks || !own || !shifts || !as) {
		fprintf(stderr, "tbanalyze: out of memory\n");
		rc = TBA_EXIT_INTERNAL;
		goto out;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		loaded = i + 1;
		rc = an_load_defs(&defs[i], paths[i], &firsts[i], &pids[i]);
	}
	if (rc)
		goto out;
	export_rank_of(defs, paths, n, ranks);
	export_rank_own(defs, paths, n, ranks, own);
	/* Ranks on several machines: on the first one's clock, by wall clock. */
	for (size_t i = 0; i < n; i++)
		as[i] = &defs[i];
	an_clock_shifts(as, n, shifts);
	uint64_t base = UINT64_MAX;
	for (size_t i = 0; i < n; i++)
		if (firsts[i] && firsts[i] + (uint64_t)shifts[i] < base)
			base = firsts[i] + (uint64_t)shifts[i];
	if (base == UINT64_MAX)
		base = 0;
	f = out ? cmd_output_open(out) : stdout;
	if (!f) {
		rc = TBA_EXIT_INTERNAL;
		goto out;
	}
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
	int first = 1;
	for (size_t i = 0; i < n && !rc; i++) {
		/* A process that is no rank (the agent) goes last, by its file name. */
		int64_t rank = ranks[i];
		const char *base_name = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
		/* Processes of two machines may share a pid: then the rank's
		 * place stands in, above pid_max (2^22) and below its GPUs'. */
		uint64_t host_pid = pids[i];
		for (size_t j = 0; j < n && host_pid; j++)
			if (j != i && pids[j] == host_pid)
				host_pid = 0;
		if (!host_pid)
			host_pid = (1u << 22) + 1 + i;
		/* (a shifted trace's times are measured from base less its shift) */
		struct exporter x = {.f = f, .defs = &defs[i], .base = base - (uint64_t)shifts[i], .host_pid = host_pid,
				     .first = first,
				     .multi = 1, .rank = rank, .gpu_pid_base = (1u << 23) + 64 * (uint64_t)i};
		ev_begin(&x);
		fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu64 ",\"tid\":0,\"args\":{\"name\":",
			host_pid);
		/* Another process of a rank goes right after it, by its pid; a
		 * process that is no rank (the agent) last, by its file name. */
		char label[96];
		int64_t sort = rank * 100;
		if (rank >= 0 && own[i]) {
			snprintf(label, sizeof label, "rank %" PRId64, rank);
		} else if (rank >= 0) {
			snprintf(label, sizeof label, "rank %" PRId64 " (pid %" PRIu64 ", %.40s)", rank, pids[i], base_name);
			sort += 50;
		} else {
			snprintf(label, sizeof label, "%.50s", base_name);
			x.rank = rank = INT32_MAX;
			sort = rank * 100;
		}
		json_str(f, label, strlen(label));
		fputs("}}", f);
		ev_begin(&x);
		fprintf(f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%" PRIu64
			   ",\"tid\":0,\"args\":{\"sort_index\":%" PRId64 "}}",
			host_pid, sort);
		struct tbp_reader *r;
		rc = an_open(&r, paths[i]);
		if (rc)
			break;
		an_check_opened(paths[i], 0);
		struct tbp_record rec;
		int st;
		x.stream_list.item = sizeof(struct dev_stream);
		while ((st = tr_next(r, paths[i], &rec)) > 0)
			export_record(&x, &rec);
		rc = st < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
		tbp_reader_close(r);
		export_names(&x, &defs[i]); /* threads and streams (the GPUs are named as they come) */
		u64map_free(&x.threads);
		u64map_free(&x.streams);
		vec_free(&x.stream_list);
		first = x.first;
	}
	fprintf(f, "\n]}\n");
	rc = cmd_output_close(f, out, rc);
out:
	for (size_t i = 0; i < loaded; i++)
		an_free(&defs[i]);
	free(defs);
	free(firsts);
	free(pids);
	free(ranks);
	free(own);
	free(shifts);
	free(as);
	return rc;
}

/* Several traces in kineto form: OUT/rank<N>.json each, with its rank in
 * distributedInfo, the directory Holistic Trace Analysis loads as one
 * multi-rank trace. */
static int export_ranks_kineto(char **paths, size_t n, const char *outdir)
{
	struct stat st;
	const char *why = NULL;
	if (stat(outdir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			why = "not a directory";
	} else if (mkdir(outdir, 0777)) {
		why = strerror(errno);
	}
	if (why) {
		fprintf(stderr, "tbanalyze: %s: %s (a kineto export of several traces writes a directory)\n", outdir, why);
		return TBA_EXIT_INTERNAL;
	}
	struct analysis *defs = calloc(n, sizeof *defs);
	uint64_t *firsts = calloc(n, sizeof *firsts), *pids = calloc(n, sizeof *pids);
	int64_t *ranks = calloc(n, sizeof *ranks);
	int *own = calloc(n, sizeof *own);
	char *name = malloc(strlen(outdir) + 40);
	int rc = TBA_EXIT_OK;
	size_t loaded = 0;
	if (!defs || !firsts || !pids || !ranks || !own || !name) {
		fprintf(stderr, "tbanalyze: out of memory\n");
		rc = TBA_EXIT_INTERNAL;
		goto out;
	}
	int64_t world = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		loaded = i + 1;
		rc = an_load_defs(&defs[i], paths[i], &firsts[i], &pids[i]);
		if (rc)
			break;
		int64_t w = defs[i].has_process ? tbp_process_world_size(&defs[i].process) : -1;
		if (w > world)
			world = w;
	}
	if (!rc) {
		export_rank_of(defs, paths, n, ranks);
		export_rank_own(defs, paths, n, ranks, own);
	}
	size_t n_ranks = 0;
	for (size_t i = 0; i < n; i++)
		n_ranks += own[i];
	if ((int64_t)n_ranks > world)
		world = (int64_t)n_ranks;
	/* Every rank's file may be written, before the first is. */
	for (size_t i = 0; i < n && !rc; i++) {
		if (ranks[i] < 0 || !own[i])
			continue;
		sprintf(name, "%s/rank%" PRId64 ".json", outdir, ranks[i]);
		rc = cmd_output_check(name, CMD_OUT_TRACE_JSON);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		if (ranks[i] < 0) {
			fprintf(stderr, "tbanalyze: %s: not a rank (no rank recorded), left out\n", paths[i]);
			continue;
		}
		if (!own[i]) {
			fprintf(stderr, "tbanalyze: %s: another process of rank %" PRId64 " (or another run's), left out\n",
				paths[i], ranks[i]);
			continue;
		}
		sprintf(name, "%s/rank%" PRId64 ".json", outdir, ranks[i]);
		rc = export_one(&defs[i], firsts[i], pids[i], paths[i], name, 1, ranks[i], world);
	}
out:
	for (size_t i = 0; i < loaded; i++)
		an_free(&defs[i]);
	free(defs);
	free(firsts);
	free(pids);
	free(ranks);
	free(own);
	free(name);
	return rc;
}

/* One trace into out (NULL: standard output). */
static int export_single(const char *path, const char *out, int kineto)
{
	int rc = out ? cmd_output_check(out, CMD_OUT_TRACE_JSON) : TBA_EXIT_OK;
	if (rc)
		return rc;
	struct analysis defs;
	uint64_t base, pid;
	rc = an_load_defs(&defs, path, &base, &pid);
	if (!rc)
		rc = export_one(&defs, base, pid, path, out, kineto, -1, -1);
	an_free(&defs);
	return rc;
}

/* Several traces (one per rank): one chrome file, or kineto's OUT/rank<N>.json. */
static int export_several(char **paths, size_t n, const char *out, int kineto)
{
	if (kineto && !out)
		return cmd_usage_error("--format kineto of several traces writes one file per rank into a directory: "
				       "-o DIR missing");
	if (kineto)
		return export_ranks_kineto(paths, n, out);
	int rc = out ? cmd_output_check(out, CMD_OUT_TRACE_JSON) : TBA_EXIT_OK;
	return rc ? rc : export_ranks(paths, n, out);
}

struct export_args {
	const char *format, *out;
};

/* "--format F" / "--format=F" / "-o OUT" at argv[*i]: 1 taken, 0 another
 * argument, -1 said. */
static int export_opt(int argc, char **argv, int *i, void *ctx)
{
	struct export_args *ea = ctx;
	const char **format = &ea->format, **out = &ea->out;
	const char *arg = argv[*i];
	if (!strncmp(arg, "--format=", 9)) {
		*format = arg + 9;
	} else if (!strcmp(arg, "--format") || !strcmp(arg, "-o")) {
		int is_o = arg[1] == 'o';
		if (*i + 1 >= argc || (argv[*i + 1][0] == '-' && argv[*i + 1][1])) {
			cmd_usage_error("%s: value missing (%s)", arg, is_o ? "an output file name" : "chrome or kineto");
			return -1;
		}
		*(is_o ? out : format) = argv[++*i];
		return 1;
	} else {
		return 0;
	}
	return 1;
}

int cmd_export(int argc, char **argv)
{
	struct export_args ea = {"chrome", NULL};
	const char *named[argc]; /* the traces named, for several */
	static const struct cmd_args_spec spec = {usage, 0, 1, SIZE_MAX, {"TRACE.zst"}};
	struct cmd_args args = {named, 0, 0};
	int rc = cmd_parse(argc, argv, &spec, &args, export_opt, &ea);
	if (rc != CMD_GO_ON)
		return rc;
	const char *format = ea.format, *out = ea.out;
	if (strcmp(format, "chrome") && strcmp(format, "kineto"))
		return cmd_usage_error("--format: %s: unknown format (valid: chrome, kineto)", format);
	char **paths = (char **)named;
	size_t n_paths = args.n_paths;
	const char *path = paths[0];
	int kineto = !strcmp(format, "kineto");
	struct stat ps;
	if (n_paths == 1 && !(stat(path, &ps) == 0 && S_ISDIR(ps.st_mode)))
		return export_single(path, out, kineto);
	if (n_paths > 1)
		return export_several(paths, n_paths, out, kineto);
	char **list;
	size_t n;
	rc = an_ranks_list_dir(path, &list, &n);
	if (rc)
		return rc;
	rc = n == 1 ? export_single(list[0], out, kineto) /* a directory of one trace is that trace */
		    : export_several(list, n, out, kineto);
	an_ranks_free_list(list, n);
	return rc;
}
