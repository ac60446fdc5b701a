/*
 * A small CUPTI activity consumer run against simgpu's libcupti.so.13 and
 * libcudart.so.13: the records it receives must equal simgpu's ground truth.
 *   records   timestamp callback on CLOCK_MONOTONIC: times equal the truth to the ns
 *   gpuclock  timestamp callback refused (SIMGPU_CUPTI_NO_TS_CALLBACK=1): records on the GPU clock =
 *             truth + SIMGPU_GPU_CLOCK_OFFSET_NS; calibration by bracketing cuptiGetTimestamp
 *   busy      SIMGPU_CUPTI_BUSY=1: subscribe/enable refused, the program is unaffected
 *   drop      SIMGPU_CUPTI_QUEUE_LIMIT=10 and too-small buffers: records dropped and counted
 *   worker    records arrive from simgpu's delivery thread without any flush
 *   hold      zero simulated costs, no delivery for a long time: records go into our buffers at the
 *             call, a new buffer is asked for whenever one is full, all of them stay with CUPTI until a
 *             flush; asked buffers refused: records dropped and counted
 * SIMGPU_TRUTH must name a file this test may truncate.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "test_util.h"

#define MAX_RECORDS 4096

struct rec {
	int kind; /* CUpti_ActivityKind */
	uint32_t corr, stream, extra;
	uint64_t start, end, bytes, ext_id;
	int copy_kind, src_kind, dst_kind, sync_type, ext_kind;
	uint32_t cbid, ret;
	char name[128];
	bool matched;
};
static struct rec recs[MAX_RECORDS];
static int n_recs;
static atomic_int n_delivered;
static pthread_t main_thread;
static atomic_bool delivered_off_main;
static size_t buffer_bytes = 64 * 1024;

/* hold: buffers out with CUPTI now and at most, requests while none had come back, refusal. */
static atomic_int buffers_out, max_buffers_out, requests_before_first_back;
static atomic_bool any_back, refuse_buffers;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	if (refuse_buffers) {
		*buffer = NULL;
		*size = 0;
		*max_records = 0;
		return;
	}
	if (!any_back)
		requests_before_first_back++;
	int out = ++buffers_out;
	if (out > max_buffers_out)
		max_buffers_out = out;
	void *p = NULL;
	if (posix_memalign(&p, 8, buffer_bytes) != 0)
		p = NULL;
	*buffer = p;
	*size = p ? buffer_bytes : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid)
{
	if (!pthread_equal(pthread_self(), main_thread))
		delivered_off_main = true;
	any_back = true;
	buffers_out--;
	CUpti_Activity *r = NULL;
	while (valid && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS && n_recs < MAX_RECORDS) {
		struct rec *o = &recs[n_recs++];
		memset(o, 0, sizeof(*o));
		o->kind = r->kind;
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		case CUPTI_ACTIVITY_KIND_KERNEL: {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
			o->corr = k->correlationId;
			o->stream = k->streamId;
			o->start = k->start;
			o->end = k->end;
			snprintf(o->name, sizeof(o->name), "%s", k->name ? k->name : "");
			o->extra = (uint32_t)(k->gridX * k->blockX);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMCPY: {
			CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
			o->corr = m->correlationId;
			o->stream = m->streamId;
			o->start = m->start;
			o->end = m->end;
			o->bytes = m->bytes;
			o->copy_kind = m->copyKind;
			o->src_kind = m->srcKind;
			o->dst_kind = m->dstKind;
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMSET: {
			CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
			o->corr = m->correlationId;
			o->stream = m->streamId;
			o->start = m->start;
			o->end = m->end;
			o->bytes = m->bytes;
			break;
		}
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
			CUpti_ActivitySynchronization2 *s = (CUpti_ActivitySynchronization2 *)r;
			o->corr = s->correlationId;
			o->stream = s->streamId;
			o->start = s->start;
			o->end = s->end;
			o->sync_type = s->type;
			break;
		}
		case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
			CUpti_ActivityExternalCorrelation *x = (CUpti_ActivityExternalCorrelation *)r;
			o->corr = x->correlationId;
			o->ext_id = x->externalId;
			o->ext_kind = x->externalKind;
			break;
		}
		case CUPTI_ACTIVITY_KIND_RUNTIME: {
			CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
			o->corr = a->correlationId;
			o->start = a->start;
			o->end = a->end;
			o->cbid = a->cbid;
			o->ret = a->returnValue;
			break;
		}
		default:
			break;
		}
		n_delivered++;
	}
	free(buffer);
}

static uint64_t CUPTIAPI monotonic_ts(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define CUPTI_OK(call) do { CUptiResult r_ = (call); const char *s_ = NULL; cuptiGetResultString(r_, &s_); \
	EXPECT(r_ == CUPTI_SUCCESS, "%s returned %s", #call, s_ ? s_ : "?"); } while (0)

/* ------------------------------------------------------------------ truth log */

struct truth {
	char op[16], api[64], name[128], copy_kind[8], src[12], dst[12], sync_kind[24];
	uint32_t stream, corr, gpu, result, ext_kind;
	uint64_t start, end, host_start, host_end, bytes, ext_id;
	bool has_ext;
};
static struct truth truths[MAX_RECORDS];
static int n_truths;

static void read_truth(const char *path)
{
	simgpu_truth_flush();
	FILE *f = fopen(path, "r");
	EXPECT(f != NULL, "open %s", path);
	if (!f)
		return;
	char line[2048];
	while (fgets(line, sizeof(line), f) && n_truths < MAX_RECORDS) {
		if (line[0] == '#')
			continue;
		char *fields[40];
		int nf = 0;
		char *save = NULL;
		for (char *t = strtok_r(line, "\t\n", &save); t && nf < 40; t = strtok_r(NULL, "\t\n", &save))
			fields[nf++] = t;
		EXPECT(nf == 34, "truth line with %d columns", nf);
		if (nf != 34)
			continue;
		struct truth *t = &truths[n_truths++];
		snprintf(t->op, sizeof(t->op), "%s", fields[3]);
		snprintf(t->api, sizeof(t->api), "%s", fields[4]);
		t->stream = (uint32_t)strtoul(fields[6], NULL, 10);
		t->start = strtoull(fields[8], NULL, 10);
		t->end = strtoull(fields[9], NULL, 10);
		t->host_start = strtoull(fields[10], NULL, 10);
		t->host_end = strtoull(fields[11], NULL, 10);
		snprintf(t->name, sizeof(t->name), "%s", fields[12]);
		t->bytes = strtoull(fields[13], NULL, 10);
		snprintf(t->copy_kind, sizeof(t->copy_kind), "%s", fields[14]);
		snprintf(t->src, sizeof(t->src), "%s", fields[16]);
		snprintf(t->dst, sizeof(t->dst), "%s", fields[17]);
		snprintf(t->sync_kind, sizeof(t->sync_kind), "%s", fields[18]);
		t->gpu = (uint32_t)strtoul(fields[20], NULL, 10);
		t->result = (uint32_t)strtol(fields[22], NULL, 10);
		t->corr = (uint32_t)strtoul(fields[23], NULL, 10);
		t->has_ext = strcmp(fields[24], "-") != 0;
		if (t->has_ext) {
			t->ext_kind = (uint32_t)strtoul(fields[24], NULL, 10);
			t->ext_id = strtoull(fields[25], NULL, 10);
		}
	}
	fclose(f);
}

static int record_class(const char *op)
{
	if (!strcmp(op, "kernel"))
		return CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	if (!strcmp(op, "memcpy"))
		return CUPTI_ACTIVITY_KIND_MEMCPY;
	if (!strcmp(op, "memset"))
		return CUPTI_ACTIVITY_KIND_MEMSET;
	if (!strcmp(op, "sync"))
		return CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	return -1;
}

static int cupti_copy_kind(const char *s)
{
	if (!strcmp(s, "HtoD")) return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	if (!strcmp(s, "DtoH")) return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	if (!strcmp(s, "DtoD")) return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	if (!strcmp(s, "HtoH")) return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
	if (!strcmp(s, "PtoP")) return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	return -1;
}

static int cupti_mem_kind(const char *s)
{
	if (!strcmp(s, "pageable")) return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	if (!strcmp(s, "pinned")) return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
	if (!strcmp(s, "device")) return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	if (!strcmp(s, "managed")) return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
	return -1;
}

/* Every truth op with device work has exactly one record with equal fields (times shifted by
 * `offset`), every record has its truth op; external correlation and API records likewise. */
static void compare_with_truth(uint64_t offset)
{
	int gpu_truths = 0, gpu_recs = 0;
	for (int i = 0; i < n_recs; i++)
		gpu_recs += recs[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || recs[i].kind == CUPTI_ACTIVITY_KIND_MEMCPY ||
			    recs[i].kind == CUPTI_ACTIVITY_KIND_MEMSET || recs[i].kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	for (int i = 0; i < n_truths; i++) {
		struct truth *t = &truths[i];
		int cls = record_class(t->op);
		if (!t->gpu || cls < 0)
			continue;
		gpu_truths++;
		struct rec *m = NULL;
		for (int j = 0; j < n_recs && !m; j++)
			if (!recs[j].matched && recs[j].kind == cls && recs[j].corr == t->corr && recs[j].start == t->start + offset)
				m = &recs[j];
		EXPECT(m != NULL, "no %s record for corr %u (%s) starting at truth+offset", t->op, t->corr, t->api);
		if (!m)
			continue;
		m->matched = true;
		EXPECT(m->end == t->end + offset, "corr %u: end %llu vs truth %llu", t->corr, (unsigned long long)m->end,
			(unsigned long long)(t->end + offset));
		if (cls == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
			if (!strcmp(t->sync_kind, "stream") || !strcmp(t->sync_kind, "stream_wait_event"))
				EXPECT(m->stream == t->stream, "sync corr %u stream %u vs %u", t->corr, m->stream, t->stream);
			int want = !strcmp(t->sync_kind, "device") ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
				 : !strcmp(t->sync_kind, "stream") ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
				 : !strcmp(t->sync_kind, "event") ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE
								   : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
			EXPECT(m->sync_type == want, "sync corr %u type %d vs %d", t->corr, m->sync_type, want);
			continue;
		}
		EXPECT(m->stream == t->stream, "corr %u stream %u vs truth %u", t->corr, m->stream, t->stream);
		if (cls == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			EXPECT(strcmp(m->name, t->name) == 0, "corr %u name %s vs %s", t->corr, m->name, t->name);
		else
			EXPECT(m->bytes == t->bytes, "corr %u bytes %llu vs %llu", t->corr, (unsigned long long)m->bytes,
				(unsigned long long)t->bytes);
		if (cls == CUPTI_ACTIVITY_KIND_MEMCPY) {
			EXPECT(m->copy_kind == cupti_copy_kind(t->copy_kind), "corr %u copy kind", t->corr);
			EXPECT(m->src_kind == cupti_mem_kind(t->src) && m->dst_kind == cupti_mem_kind(t->dst),
				"corr %u memory kinds %d/%d vs %s/%s", t->corr, m->src_kind, m->dst_kind, t->src, t->dst);
		}
	}
	EXPECT(gpu_truths == gpu_recs, "%d truth ops with device work, %d GPU records", gpu_truths, gpu_recs);
	EXPECT(gpu_truths > 20, "workload too small: %d", gpu_truths);

	/* External correlation: one record per call that had an id pushed. */
	int ext_truth = 0, ext_recs = 0;
	uint32_t last = 0;
	for (int i = 0; i < n_truths; i++) {
		struct truth *t = &truths[i];
		if (!t->has_ext || t->corr == last)
			continue;
		last = t->corr;
		ext_truth++;
		bool found = false;
		for (int j = 0; j < n_recs; j++)
			if (recs[j].kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION && recs[j].corr == t->corr)
				found = recs[j].ext_id == t->ext_id && (uint32_t)recs[j].ext_kind == t->ext_kind;
		EXPECT(found, "external correlation for corr %u (id %llu)", t->corr, (unsigned long long)t->ext_id);
	}
	for (int j = 0; j < n_recs; j++)
		ext_recs += recs[j].kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
	EXPECT(ext_truth == ext_recs && ext_truth >= 3, "%d calls with external ids, %d records", ext_truth, ext_recs);

	/* Runtime API records: one per logged call, same result, times of the call. */
	int calls = 0, api_recs = 0;
	last = 0;
	for (int i = 0; i < n_truths; i++) {
		struct truth *t = &truths[i];
		if (t->corr == last)
			continue;
		last = t->corr;
		calls++;
		bool found = false;
		for (int j = 0; j < n_recs && !found; j++) {
			struct rec *r = &recs[j];
			if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && r->corr == t->corr) {
				found = true;
				EXPECT(r->cbid != 0 && r->ret == t->result && r->start == t->host_start + offset &&
					       r->end == t->host_end + offset, "API record of corr %u (%s)", t->corr, t->api);
			}
		}
		EXPECT(found, "API record for corr %u (%s)", t->corr, t->api);
	}
	for (int j = 0; j < n_recs; j++)
		api_recs += recs[j].kind == CUPTI_ACTIVITY_KIND_RUNTIME;
	EXPECT(calls == api_recs, "%d calls, %d API records", calls, api_recs);
}

/* ------------------------------------------------------------------ workload */

static void workload(void)
{
	cudaStream_t s1, s2;
	EXPECT_OK(cudaStreamCreate(&s1));
	EXPECT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	const size_t n = 1 << 16;
	char *dev, *pinned, *pageable = calloc(1, n);
	EXPECT_OK(cudaMalloc((void **)&dev, n));
	EXPECT_OK(cudaMallocHost((void **)&pinned, n));

	CUPTI_OK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1000));
	EXPECT_OK(tu_launch(K_SHORT, s1));
	EXPECT_OK(cudaMemcpy(dev, pageable, n, cudaMemcpyHostToDevice));
	CUPTI_OK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 2000));
	EXPECT_OK(cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, s2));
	uint64_t popped = 0;
	CUPTI_OK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped));
	EXPECT(popped == 2000, "popped %llu", (unsigned long long)popped);
	EXPECT_OK(cudaMemsetAsync(dev, 1, n, s1));
	CUPTI_OK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped));
	EXPECT(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped) ==
		       CUPTI_ERROR_QUEUE_EMPTY, "pop of an empty stack");

	for (int i = 0; i < 10; i++)
		EXPECT_OK(tu_launch(i % 2 ? K_OTHER : K_SHORT, i % 3 ? s1 : s2));
	EXPECT_OK(tu_launch(K_SHORT, 0));
	cudaEvent_t ev;
	EXPECT_OK(cudaEventCreate(&ev));
	EXPECT_OK(cudaEventRecord(ev, s1));
	EXPECT_OK(cudaStreamWaitEvent(s2, ev, 0));
	EXPECT_OK(cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, s2));
	EXPECT_OK(cudaEventSynchronize(ev));
	EXPECT_OK(cudaStreamSynchronize(s2));

	cudaGraph_t g;
	cudaGraphExec_t x;
	EXPECT_OK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
	EXPECT_OK(tu_launch(K_SHORT, s2));
	EXPECT_OK(tu_launch(K_OTHER, s2));
	EXPECT_OK(cudaStreamEndCapture(s2, &g));
	EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
	CUPTI_OK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 3000));
	EXPECT_OK(cudaGraphLaunch(x, s2));
	CUPTI_OK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &popped));
	EXPECT(cudaMemcpy((void *)0x10, pageable, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "failing call");
	(void)cudaGetLastError();
	EXPECT_OK(cudaDeviceSynchronize());
	EXPECT_OK(cudaGraphExecDestroy(x));
	EXPECT_OK(cudaGraphDestroy(g));
	EXPECT_OK(cudaEventDestroy(ev));
	EXPECT_OK(cudaFree(dev));
	EXPECT_OK(cudaFreeHost(pinned));
	EXPECT_OK(cudaStreamDestroy(s1));
	EXPECT_OK(cudaStreamDestroy(s2));
	free(pageable);
}

static void enable_all(void)
{
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
}

static int test_records(const char *truth_path)
{
	/* Shuffled: buffers of a few records, so the workload's device records span many buffers whatever the
	 * timing (one 64 KiB buffer could hold them all on a slow, sanitized run, leaving nothing to reorder). */
	const char *shuffle_knob = getenv("SIMGPU_CUPTI_SHUFFLE");
	if (shuffle_knob && *shuffle_knob && strcmp(shuffle_knob, "0") != 0)
		buffer_bytes = 4 * sizeof(CUpti_ActivityKernel10);
	CUPTI_OK(cuptiActivityRegisterTimestampCallback(monotonic_ts));
	CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	enable_all();
	EXPECT(cuptiActivityRegisterTimestampCallback(monotonic_ts) == CUPTI_ERROR_INVALID_OPERATION,
		"timestamp callback after enabling is refused");
	workload();
	CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	read_truth(truth_path);
	compare_with_truth(0);
	/* SIMGPU_CUPTI_SHUFFLE: the same records, but some device records come after later ones. */
	const char *shuffle = getenv("SIMGPU_CUPTI_SHUFFLE");
	if (shuffle && *shuffle && strcmp(shuffle, "0") != 0) {
		int back = 0;
		uint64_t latest = 0;
		for (int i = 0; i < n_recs; i++) {
			if (recs[i].kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && recs[i].kind != CUPTI_ACTIVITY_KIND_MEMCPY &&
			    recs[i].kind != CUPTI_ACTIVITY_KIND_MEMSET)
				continue;
			back += recs[i].start < latest;
			latest = recs[i].start > latest ? recs[i].start : latest;
		}
		EXPECT(back > 0, "shuffled delivery: no device record came after a later one");
	}
	size_t dropped = 1;
	CUPTI_OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
	EXPECT(dropped == 0, "dropped %zu", dropped);
	uint32_t v = 0;
	CUPTI_OK(cuptiGetVersion(&v));
	EXPECT(v == CUPTI_API_VERSION, "version %u", v);
	CUPTI_OK(cuptiFinalize());
	return tu_finish("records");
}

static int test_gpuclock(const char *truth_path)
{
	const char *off_s = getenv("SIMGPU_GPU_CLOCK_OFFSET_NS");
	uint64_t offset = off_s ? strtoull(off_s, NULL, 10) : 0;
	EXPECT(offset != 0, "SIMGPU_GPU_CLOCK_OFFSET_NS must be set for this test");
	EXPECT(cuptiActivityRegisterTimestampCallback(monotonic_ts) == CUPTI_ERROR_NOT_SUPPORTED,
		"timestamp callback refused");
	CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	enable_all();
	/* Calibrate as a consumer must: best of many brackets. */
	uint64_t best_width = UINT64_MAX;
	int64_t estimate = 0;
	for (int i = 0; i < 200; i++) {
		uint64_t a = monotonic_ts(), g = 0;
		CUPTI_OK(cuptiGetTimestamp(&g));
		uint64_t b = monotonic_ts();
		if (b - a < best_width) {
			best_width = b - a;
			estimate = (int64_t)(g - (a + (b - a) / 2));
		}
	}
	int64_t err = estimate - (int64_t)offset;
	EXPECT(err <= (int64_t)best_width && -err <= (int64_t)best_width, "calibration error %lld ns, bracket %llu ns",
		(long long)err, (unsigned long long)best_width);
	workload();
	CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	read_truth(truth_path);
	compare_with_truth(offset);
	return tu_finish("gpuclock");
}

static int test_busy(void)
{
	CUpti_SubscriberHandle sub;
	EXPECT(cuptiSubscribe(&sub, NULL, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "subscribe refused");
	CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	EXPECT(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
		"enable refused");
	const char *s = NULL;
	CUPTI_OK(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &s));
	EXPECT(s && strcmp(s, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED") == 0, "result string %s", s ? s : "");
	workload();
	CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	EXPECT(n_recs == 0, "no records while CUPTI is held by another tool, got %d", n_recs);
	return tu_finish("busy");
}

static int test_drop(void)
{
	CUpti_SubscriberHandle sub, sub2;
	CUPTI_OK(cuptiSubscribe(&sub, NULL, NULL));
	EXPECT(cuptiSubscribe(&sub2, NULL, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "one subscriber");
	CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	for (int i = 0; i < 50; i++)
		EXPECT_OK(tu_launch(K_SHORT, 0));
	CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	size_t dropped = 0;
	CUPTI_OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
	EXPECT(n_recs == 10 && dropped == 40, "queue limit 10: %d delivered, %zu dropped", n_recs, dropped);
	CUPTI_OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
	EXPECT(dropped == 0, "the count resets when read, got %zu", dropped);
	/* Buffers smaller than one record: every record is dropped and counted. */
	buffer_bytes = 16;
	n_recs = 0;
	for (int i = 0; i < 5; i++)
		EXPECT_OK(tu_launch(K_SHORT, 0));
	CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	CUPTI_OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
	EXPECT(n_recs == 0 && dropped == 5, "16-byte buffers: %d delivered, %zu dropped", n_recs, dropped);
	CUPTI_OK(cuptiUnsubscribe(sub));
	CUPTI_OK(cuptiSubscribe(&sub2, NULL, NULL));
	return tu_finish("drop");
}

static int test_hold(void)
{
	CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	buffer_bytes = 4 * sizeof(CUpti_ActivityKernel10); /* 4 records a buffer */
	for (int i = 0; i < 40; i++)
		EXPECT_OK(tu_launch(K_SHORT, 0));
	/* Nothing delivered yet (no flush, delivery period 100 s), but every record is in a buffer. */
	EXPECT(n_delivered == 0, "delivered before any flush: %d", (int)n_delivered);
	EXPECT(buffers_out == 10 && requests_before_first_back == 10,
		"40 records of 4 a buffer: %d buffers with CUPTI, %d asked for before any came back",
		(int)buffers_out, (int)requests_before_first_back);
	/* The consumer gives no more: records are dropped and counted, those already written are kept. */
	refuse_buffers = true;
	for (int i = 0; i < 6; i++)
		EXPECT_OK(tu_launch(K_SHORT, 0));
	CUPTI_OK(cuptiActivityFlushAll(0));
	size_t dropped = 0;
	CUPTI_OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
	EXPECT(n_recs == 40 && dropped == 6, "after refusals: %d delivered (want 40), %zu dropped (want 6)", n_recs,
		dropped);
	EXPECT(buffers_out == 0 && max_buffers_out == 10, "flush gave back every buffer: %d out, at most %d",
		(int)buffers_out, (int)max_buffers_out);
	/* Buffers again: the next records get one. */
	refuse_buffers = false;
	EXPECT_OK(tu_launch(K_SHORT, 0));
	CUPTI_OK(cuptiActivityFlushAll(0));
	EXPECT(n_recs == 41, "a record after buffers came back: %d delivered", n_recs);
	return tu_finish("hold");
}

static int test_worker(void)
{
	CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	for (int i = 0; i < 3; i++)
		EXPECT_OK(tu_launch(K_SHORT, 0));
	/* Bounded wait for the delivery thread (flush period 10 ms here). */
	for (int i = 0; i < 500 && n_delivered < 3; i++)
		usleep(10000);
	EXPECT(n_delivered == 3, "records delivered without a flush: %d", (int)n_delivered);
	EXPECT(delivered_off_main, "delivered from simgpu's thread");
	return tu_finish("worker");
}

int main(int argc, char **argv)
{
	main_thread = pthread_self();
	const char *what = argc > 1 ? argv[1] : "";
	const char *truth = getenv("SIMGPU_TRUTH");
	if (truth && *truth) {
		FILE *f = fopen(truth, "w"); /* start from an empty log: it is appended to */
		if (f)
			fclose(f);
	}
	tu_register_kernels();
	if (!strcmp(what, "records") && truth)
		return test_records(truth);
	if (!strcmp(what, "gpuclock") && truth)
		return test_gpuclock(truth);
	if (!strcmp(what, "busy"))
		return test_busy();
	if (!strcmp(what, "drop"))
		return test_drop();
	if (!strcmp(what, "worker"))
		return test_worker();
	if (!strcmp(what, "hold"))
		return test_hold();
	fprintf(stderr, "usage: SIMGPU_TRUTH=path test_cupti records|gpuclock|busy|drop|worker|hold\n");
	return 3;
}
