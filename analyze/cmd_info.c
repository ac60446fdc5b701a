/*
 * tbanalyze info TRACE [--json]
 * What a trace holds: header, process facts, threads and GPU streams with
 * record counts, records per kind, lost events, devices, clock domains and
 * their alignment error, notices, time span and how the trace ended.
 * One streaming pass; memory grows with threads/devices, not events.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "tr_common.h"

/* Lists of rare records (processes, devices, clocks, notices) keep this
 * many entries each and count the rest. */
#define KEEP_MAX 256

struct stream_stat {
	uint8_t kind;
	uint64_t id;
	uint64_t records;
	uint64_t name; /* thread name string id (THREAD records) */
	int used;
};

struct rec_list {
	struct tbp_record *items;
	size_t n, cap, dropped;
};

struct info {
	uint64_t file_size;
	struct tbp_header hdr;
	uint64_t kind_count[256];
	uint64_t total;
	uint64_t first_ts, last_ts;
	struct stream_stat *streams;
	size_t nstreams, streams_cap;
	struct stream_stat *last; /* the stream of the previous record (NULL: none) */
	uint64_t lost_by_source[8], lost_total;
	uint64_t gpu_work, gpu_work_joined; /* kernel/copy/memset records; of them with libtbprof's corr */
	struct rec_list processes, devices, clocks, notices;
	int have_end;
	struct tbp_end end;
	int truncated;
	uint64_t truncated_at;
	struct tr_strings strs;
};

static int list_add(struct rec_list *l, const struct tbp_record *rec)
{
	if (l->n == KEEP_MAX) {
		l->dropped++;
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct tbp_record *p = realloc(l->items, cap * sizeof *p);
		if (!p)
			return -1;
		l->items = p;
		l->cap = cap;
	}
	l->items[l->n] = *rec;
	l->items[l->n].blob = NULL; /* blob memory belongs to the reader */
	l->items[l->n].blob_len = 0;
	l->n++;
	return 0;
}

static size_t stream_slot(uint8_t kind, uint64_t id, size_t cap)
{
	uint64_t h = (id ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

static struct stream_stat *stream_get(struct info *in, uint8_t kind, uint64_t id)
{
	/* Records come chunk by chunk: usually the same stream as the last one. */
	if (in->last && in->last->kind == kind && in->last->id == id)
		return in->last;
	in->last = NULL;
	if ((in->nstreams + 1) * 2 > in->streams_cap) {
		size_t cap = in->streams_cap ? 2 * in->streams_cap : 64;
		struct stream_stat *s = calloc(cap, sizeof *s);
		if (!s)
			return NULL;
		for (size_t i = 0; i < in->streams_cap; i++) {
			if (!in->streams[i].used)
				continue;
			size_t j = stream_slot(in->streams[i].kind, in->streams[i].id, cap);
			while (s[j].used)
				j = (j + 1) & (cap - 1);
			s[j] = in->streams[i];
		}
		free(in->streams);
		in->streams = s;
		in->streams_cap = cap;
	}
	size_t j = stream_slot(kind, id, in->streams_cap);
	while (in->streams[j].used) {
		if (in->streams[j].kind == kind && in->streams[j].id == id)
			return in->last = &in->streams[j];
		j = (j + 1) & (in->streams_cap - 1);
	}
	in->streams[j] = (struct stream_stat){.kind = kind, .id = id, .used = 1};
	in->nstreams++;
	return in->last = &in->streams[j];
}

static int cmp_stream(const void *a, const void *b)
{
	const struct stream_stat *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Latest time a record covers: its end field where it has one. */
static uint64_t record_end(const struct tbp_record *rec)
{
	/* Per kind, once: whether field 0 is "end" (no string compare per record). */
	static int8_t has_end[256];
	int8_t *h = &has_end[rec->kind];
	if (!*h) {
		const struct tbp_kind_info *ki = tbp_kind_lookup(rec->kind);
		*h = ki && ki->nfields > 0 && !strcmp(ki->field_names[0], "end") ? 1 : -1;
	}
	if (*h > 0 && rec->u.v[0] >= rec->ts)
		return rec->u.v[0];
	return rec->ts;
}

static int observe(struct info *in, const struct tbp_record *rec)
{
	in->kind_count[rec->kind]++;
	in->total++;
	if (rec->stream_kind != TBP_STREAM_DEFS) {
		struct stream_stat *s = stream_get(in, rec->stream_kind, rec->tid);
		if (!s)
			return -1;
		s->records++;
	}
	/* Definitions carry no event time; everything else spans the trace. */
	if (rec->stream_kind != TBP_STREAM_DEFS && rec->ts) {
		if (!in->first_ts || rec->ts < in->first_ts)
			in->first_ts = rec->ts;
		uint64_t e = record_end(rec);
		if (e > in->last_ts)
			in->last_ts = e;
	}
	switch (rec->kind) {
	case TBP_K_STRING:
		return tr_strings_note(&in->strs, rec) < 0 ? -1 : 0;
	case TBP_K_THREAD: {
		struct stream_stat *s = stream_get(in, TBP_STREAM_THREAD, (uint32_t)rec->u.thread.tid);
		if (!s)
			return -1;
		s->name = rec->u.thread.name;
		return 0;
	}
	case TBP_K_PROCESS:
		return list_add(&in->processes, rec);
	case TBP_K_DEVICE:
		return list_add(&in->devices, rec);
	case TBP_K_CLOCK:
		return list_add(&in->clocks, rec);
	case TBP_K_NOTICE:
		return list_add(&in->notices, rec);
	case TBP_K_GPU_KERNEL:
	case TBP_K_GPU_MEMCPY:
	case TBP_K_GPU_MEMSET:
		in->gpu_work++;
		in->gpu_work_joined += rec->u.gpu_kernel.corr != 0; /* corr: same place in every GPU kind */
		return 0;
	case TBP_K_LOST:
		in->lost_total += rec->u.lost.count;
		in->lost_by_source[rec->u.lost.source < 8 ? rec->u.lost.source : 0] += rec->u.lost.count;
		return 0;
	case TBP_K_END:
		in->have_end = 1;
		in->end = rec->u.end;
		return 0;
	default:
		return 0;
	}
}

static const char *const feature_names[] = {"cupti", "python", "native", "hip"};

/* What a notice code means, for notices that carry no message string. */
static const char *notice_text(uint64_t code)
{
	switch (code) {
	case TBP_NOTICE_NO_CUPTI: return "API-only trace: libcupti not found";
	case TBP_NOTICE_CUPTI_IN_USE: return "API-only trace: another tool holds CUPTI";
	case TBP_NOTICE_NO_PYTHON_PATHS: return "no Python call paths (unsupported or absent CPython)";
	case TBP_NOTICE_FORK_CHILD: return "traced process is a fork child";
	case TBP_NOTICE_CUPTI_ERROR: return "CUPTI reported an error";
	case TBP_NOTICE_CUPTI_JOIN: return "how many GPU records were joined to their call";
	default: return "(no message)";
	}
}

static const char *vendor_name(uint64_t v)
{
	return v == 1 ? "NVIDIA" : v == 2 ? "AMD" : v == 3 ? "simulated" : "unknown";
}

static void format_realtime(uint64_t ns, char *buf, size_t len)
{
	time_t secs = (time_t)(ns / 1000000000u);
	struct tm tm;
	if (!gmtime_r(&secs, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(buf, len, "?");
		return;
	}
	size_t n = strlen(buf);
	snprintf(buf + n, len - n, ".%09" PRIu64 "Z", ns % 1000000000u);
}

static void print_str_text(FILE *f, const struct info *in, uint64_t id)
{
	size_t len;
	const char *s = tr_strings_get(&in->strs, id, &len);
	if (s)
		tr_json_string(f, s, len);
	else if (id)
		fprintf(f, "<string %" PRIu64 ">", id);
	else
		fputs("-", f);
}

static void print_str_json(FILE *f, const struct info *in, uint64_t id)
{
	size_t len;
	const char *s = tr_strings_get(&in->strs, id, &len);
	if (s)
		tr_json_string(f, s, len);
	else
		fputs("null", f);
}

static void print_text(FILE *f, const char *path, struct info *in, const struct stream_stat *streams, size_t ns)
{
	fprintf(f, "trace:        %s (%" PRIu64 " bytes)\n", path, in->file_size);
	fprintf(f, "format:       version %u (readable by version %u and later)\n", in->hdr.version,
		in->hdr.min_reader_version);
	fprintf(f, "features:    ");
	if (!in->hdr.features)
		fprintf(f, " none");
	for (unsigned b = 0; b < 32; b++)
		if (in->hdr.features & (1u << b)) {
			if (b < sizeof feature_names / sizeof feature_names[0])
				fprintf(f, " %s", feature_names[b]);
			else
				fprintf(f, " bit%u", b);
		}
	fputc('\n', f);
	for (size_t i = 0; i < in->processes.n; i++) {
		const struct tbp_process *p = &in->processes.items[i].u.process;
		char when[64];
		format_realtime(p->realtime_ns, when, sizeof when);
		fprintf(f, "process:      pid %" PRIu64 " (parent %" PRIu64 ") on host ", p->pid, p->ppid);
		print_str_text(f, in, p->host);
		fputc('\n', f);
		fprintf(f, "  command:    ");
		print_str_text(f, in, p->cmdline);
		fprintf(f, "\n  executable: ");
		print_str_text(f, in, p->exe);
		fprintf(f, "\n  cwd:        ");
		print_str_text(f, in, p->cwd);
		fprintf(f, "\n  started:    %s (realtime) = %" PRIu64 " ns (monotonic)\n", when, p->monotonic_ns);
		if (tbp_process_rank(p) >= 0)
			fprintf(f, "  rank:       %" PRId64 " of %" PRId64 " (local rank %" PRId64 ")\n",
				tbp_process_rank(p), tbp_process_world_size(p), tbp_process_local_rank(p));
	}
	if (in->processes.dropped)
		fprintf(f, "  (%zu more process records)\n", in->processes.dropped);
	if (in->first_ts)
		fprintf(f, "time span:    %" PRIu64 " .. %" PRIu64 " ns (%.6f s)\n", in->first_ts, in->last_ts,
			(double)(in->last_ts - in->first_ts) / 1e9);
	else
		fprintf(f, "time span:    no timed records\n");
	fprintf(f, "records:      %" PRIu64 "\n", in->total);
	for (unsigned k = 0; k < 256; k++)
		if (in->kind_count[k])
			fprintf(f, "  %-12s %" PRIu64 "\n", tbp_kind_lookup(k)->name, in->kind_count[k]);
	size_t nthreads = 0, ngpus = 0;
	for (size_t i = 0; i < ns; i++) {
		nthreads += streams[i].kind == TBP_STREAM_THREAD;
		ngpus += streams[i].kind == TBP_STREAM_GPU;
	}
	fprintf(f, "threads:      %zu\n", nthreads);
	for (size_t i = 0; i < ns; i++)
		if (streams[i].kind == TBP_STREAM_THREAD) {
			fprintf(f, "  tid %-8" PRIu64 " ", streams[i].id);
			print_str_text(f, in, streams[i].name);
			fprintf(f, "  %" PRIu64 " records\n", streams[i].records);
		}
	fprintf(f, "gpu streams:  %zu\n", ngpus);
	for (size_t i = 0; i < ns; i++)
		if (streams[i].kind == TBP_STREAM_GPU)
			fprintf(f, "  device %-5" PRIu64 " %" PRIu64 " records\n", streams[i].id, streams[i].records);
	for (size_t i = 0; i < ns; i++)
		if (streams[i].kind > TBP_STREAM_GPU)
			fprintf(f, "  stream kind %u id %" PRIu64 ": %" PRIu64 " records\n", streams[i].kind,
				streams[i].id, streams[i].records);
	fprintf(f, "devices:      %zu\n", in->devices.n);
	for (size_t i = 0; i < in->devices.n; i++) {
		const struct tbp_device *d = &in->devices.items[i].u.device;
		fprintf(f, "  device %" PRIu64 " ", d->device);
		print_str_text(f, in, d->name);
		fprintf(f, " (%s)\n", vendor_name(d->vendor));
	}
	fprintf(f, "clocks:       %zu\n", in->clocks.n);
	for (size_t i = 0; i < in->clocks.n; i++) {
		const struct tbp_clock *c = &in->clocks.items[i].u.clock;
		fprintf(f, "  domain %" PRIu64 " device %" PRIu64 ": %s, offset %+" PRId64
			" ns, alignment error +/- %" PRIu64 " ns\n", c->domain, c->device, tr_clock_method_name(c->method),
			(int64_t)c->offset_ns, c->uncertainty_ns);
	}
	fprintf(f, "lost events:  %" PRIu64, in->lost_total);
	if (in->lost_total) {
		const char *sep = " (";
		for (unsigned s = 0; s < 8; s++)
			if (in->lost_by_source[s]) {
				fprintf(f, "%s%s %" PRIu64, sep, s ? tr_lost_source_name(s) : "other", in->lost_by_source[s]);
				sep = ", ";
			}
		fputc(')', f);
	}
	fputc('\n', f);
	if (in->gpu_work)
		fprintf(f, "joined:       %.1f%% of GPU records (%" PRIu64 " of %" PRIu64 " kernels, copies and memsets "
			   "carry the call that made them)\n", 100.0 * (double)in->gpu_work_joined / (double)in->gpu_work,
			in->gpu_work_joined, in->gpu_work);
	fprintf(f, "notices:      %zu\n", in->notices.n);
	for (size_t i = 0; i < in->notices.n; i++) {
		const struct tbp_notice *nt = &in->notices.items[i].u.notice;
		fprintf(f, "  %s: ", tr_notice_level_name(nt->level));
		size_t len;
		const char *s = tr_strings_get(&in->strs, nt->message, &len);
		if (s)
			fprintf(f, "%s", s);
		else
			fprintf(f, "%s", notice_text(nt->code));
		fputc('\n', f);
	}
	if (in->truncated)
		fprintf(f, "ended:        truncated at offset %" PRIu64 " (last frame incomplete)\n", in->truncated_at);
	else if (in->have_end)
		fprintf(f, "ended:        cleanly (END record: %" PRIu64 " records, %" PRIu64 " lost)\n", in->end.records,
			in->end.lost);
	else
		fprintf(f, "ended:        without an END record (the process did not shut tbprof down)\n");
}

static void print_json(FILE *f, const char *path, struct info *in, const struct stream_stat *streams, size_t ns)
{
	fputs("{\"file\":", f);
	tr_json_string(f, path, strlen(path));
	fprintf(f, ",\"size\":%" PRIu64 ",\"version\":%u,\"min_reader_version\":%u,\"features\":[", in->file_size,
		in->hdr.version, in->hdr.min_reader_version);
	const char *sep = "";
	for (unsigned b = 0; b < 32; b++)
		if (in->hdr.features & (1u << b)) {
			if (b < sizeof feature_names / sizeof feature_names[0])
				fprintf(f, "%s\"%s\"", sep, feature_names[b]);
			else
				fprintf(f, "%s\"bit%u\"", sep, b);
			sep = ",";
		}
	fputs("],\"processes\":[", f);
	for (size_t i = 0; i < in->processes.n; i++) {
		const struct tbp_process *p = &in->processes.items[i].u.process;
		fprintf(f, "%s{\"pid\":%" PRIu64 ",\"ppid\":%" PRIu64 ",\"host\":", i ? "," : "", p->pid, p->ppid);
		print_str_json(f, in, p->host);
		fputs(",\"cmdline\":", f);
		print_str_json(f, in, p->cmdline);
		fputs(",\"exe\":", f);
		print_str_json(f, in, p->exe);
		fputs(",\"cwd\":", f);
		print_str_json(f, in, p->cwd);
		fprintf(f, ",\"realtime_ns\":%" PRIu64 ",\"monotonic_ns\":%" PRIu64, p->realtime_ns, p->monotonic_ns);
		if (tbp_process_rank(p) >= 0)
			fprintf(f, ",\"rank\":%" PRId64 ",\"world_size\":%" PRId64 ",\"local_rank\":%" PRId64,
				tbp_process_rank(p), tbp_process_world_size(p), tbp_process_local_rank(p));
		fputc('}', f);
	}
	fprintf(f, "],\"first_ts\":%" PRIu64 ",\"last_ts\":%" PRIu64 ",\"records\":%" PRIu64 ",\"kinds\":{",
		in->first_ts, in->last_ts, in->total);
	sep = "";
	for (unsigned k = 0; k < 256; k++)
		if (in->kind_count[k]) {
			fprintf(f, "%s\"%s\":%" PRIu64, sep, tbp_kind_lookup(k)->name, in->kind_count[k]);
			sep = ",";
		}
	fputs("},\"threads\":[", f);
	sep = "";
	for (size_t i = 0; i < ns; i++)
		if (streams[i].kind == TBP_STREAM_THREAD) {
			fprintf(f, "%s{\"tid\":%" PRIu64 ",\"name\":", sep, streams[i].id);
			print_str_json(f, in, streams[i].name);
			fprintf(f, ",\"records\":%" PRIu64 "}", streams[i].records);
			sep = ",";
		}
	fputs("],\"gpu_streams\":[", f);
	sep = "";
	for (size_t i = 0; i < ns; i++)
		if (streams[i].kind == TBP_STREAM_GPU) {
			fprintf(f, "%s{\"device\":%" PRIu64 ",\"records\":%" PRIu64 "}", sep, streams[i].id,
				streams[i].records);
			sep = ",";
		}
	fputs("],\"devices\":[", f);
	for (size_t i = 0; i < in->devices.n; i++) {
		const struct tbp_device *d = &in->devices.items[i].u.device;
		fprintf(f, "%s{\"device\":%" PRIu64 ",\"name\":", i ? "," : "", d->device);
		print_str_json(f, in, d->name);
		fprintf(f, ",\"vendor\":\"%s\"}", vendor_name(d->vendor));
	}
	fputs("],\"clocks\":[", f);
	for (size_t i = 0; i < in->clocks.n; i++) {
		const struct tbp_clock *c = &in->clocks.items[i].u.clock;
		fprintf(f, "%s{\"domain\":%" PRIu64 ",\"device\":%" PRIu64 ",\"method\":\"%s\",\"offset_ns\":%" PRId64
			",\"uncertainty_ns\":%" PRIu64 "}", i ? "," : "", c->domain, c->device,
			tr_clock_method_name(c->method), (int64_t)c->offset_ns, c->uncertainty_ns);
	}
	fprintf(f, "],\"lost\":{\"total\":%" PRIu64, in->lost_total);
	for (unsigned s = 0; s < 8; s++)
		if (in->lost_by_source[s])
			fprintf(f, ",\"%s\":%" PRIu64, s ? tr_lost_source_name(s) : "other", in->lost_by_source[s]);
	fputs("},\"joined\":", f);
	if (in->gpu_work)
		fprintf(f, "{\"gpu_records\":%" PRIu64 ",\"joined\":%" PRIu64 ",\"joined_pct\":%.2f}", in->gpu_work,
			in->gpu_work_joined, 100.0 * (double)in->gpu_work_joined / (double)in->gpu_work);
	else
		fputs("null", f);
	fputs(",\"notices\":[", f);
	for (size_t i = 0; i < in->notices.n; i++) {
		const struct tbp_notice *nt = &in->notices.items[i].u.notice;
		fprintf(f, "%s{\"level\":\"%s\",\"code\":%" PRIu64 ",\"message\":", i ? "," : "",
			tr_notice_level_name(nt->level), nt->code);
		print_str_json(f, in, nt->message);
		fputc('}', f);
	}
	fputs("],\"ended\":", f);
	if (in->truncated)
		fprintf(f, "\"truncated\",\"truncated_offset\":%" PRIu64, in->truncated_at);
	else if (in->have_end)
		fprintf(f, "\"clean\",\"end_records\":%" PRIu64 ",\"end_lost\":%" PRIu64, in->end.records, in->end.lost);
	else
		fputs("\"no_end_record\"", f);
	fputs("}\n", f);
}

static void info_free(struct info *in)
{
	free(in->streams);
	free(in->processes.items);
	free(in->devices.items);
	free(in->clocks.items);
	free(in->notices.items);
	tr_strings_free(&in->strs);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze info TRACE.zst [--json]\n"
		   "  header, processes, threads, record counts, losses, clock alignment; --json: as JSON\n");
}

int cmd_info(int argc, char **argv)
{
	static const struct cmd_args_spec spec = {usage, 1, 1, 1, {"TRACE.zst"}};
	const char *paths[1];
	struct cmd_args args = {paths, 0, 0};
	int status = cmd_parse(argc, argv, &spec, &args, NULL, NULL);
	if (status != CMD_GO_ON)
		return status;
	const char *path = paths[0];
	int json = args.json;
	struct tbp_reader *r;
	status = tr_open(path, &r);
	if (status != TBA_EXIT_OK)
		return status;
	an_check_opened(path, 0);
	struct info *in = calloc(1, sizeof *in);
	if (!in) {
		tbp_reader_close(r);
		return TBA_EXIT_INTERNAL;
	}
	tr_strings_init(&in->strs);
	in->hdr = *tbp_reader_header(r);
	struct stat sb;
	if (stat(path, &sb) == 0)
		in->file_size = (uint64_t)sb.st_size;
	struct tbp_record rec;
	int rc;
	while ((rc = tr_next(r, path, &rec)) > 0)
		if (observe(in, &rec)) {
			fprintf(stderr, "tbanalyze: info: out of memory\n");
			status = TBA_EXIT_INTERNAL;
			break;
		}
	if (rc < 0)
		status = tr_exit_status(r);
	if (status == TBA_EXIT_OK) {
		in->truncated = tbp_reader_truncated(r);
		in->truncated_at = in->truncated ? tbp_reader_offset(r) : 0;
		/* Compact and sort the stream table for stable output. */
		size_t ns = 0;
		for (size_t i = 0; i < in->streams_cap; i++)
			if (in->streams[i].used)
				in->streams[ns++] = in->streams[i];
		qsort(in->streams, ns, sizeof *in->streams, cmp_stream);
		if (json)
			print_json(stdout, path, in, in->streams, ns);
		else
			print_text(stdout, path, in, in->streams, ns);
		status = cmd_output_close(stdout, NULL, status);
	}
	tbp_reader_close(r);
	info_free(in);
	free(in);
	return status;
}
