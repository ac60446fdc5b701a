/*
 * A scriptable libcupti.so.13 for unit tests: the entry points
 * libtbprof/cupti.c uses, with CUDA 13 record layouts, driven by the test
 * through fake_cupti.h.  Nothing here talks to a GPU.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "fake_cupti.h"

#define EXPORT __attribute__((visibility("default")))

static struct fakecupti_config cfg;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc request_cb;
static CUpti_BuffersCallbackCompleteFunc complete_cb;
static CUpti_TimestampCallbackFunc ts_cb;
static int subscribed;
static uint32_t next_corr = 1;
static long pushes, pops;
static int kind_enabled[64];

/* Records waiting to be delivered, as the bytes CUPTI would write. */
static uint8_t *queue;
static size_t queue_len, queue_cap, queue_records;

/* Per thread, per external kind, as CUPTI keeps them. */
#define EXT_KINDS 8
static __thread uint64_t ext_stack[EXT_KINDS][64];
static __thread int ext_depth[EXT_KINDS];

static uint64_t monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t gpu_time(uint64_t mono)
{
	return ts_cb ? mono : (uint64_t)((int64_t)mono + cfg.gpu_offset_ns);
}

static size_t record_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
	default: return 0;
	}
}

static size_t aligned(size_t n) { return (n + 7) & ~(size_t)7; }

static void append(const void *rec, size_t size)
{
	if (queue_len + aligned(size) > queue_cap) {
		queue_cap = queue_cap ? queue_cap * 2 : 65536;
		queue = realloc(queue, queue_cap);
		if (!queue)
			abort();
	}
	memset(queue + queue_len, 0, aligned(size));
	memcpy(queue + queue_len, rec, size);
	queue_len += aligned(size);
	queue_records++;
}

/* One EXTERNAL_CORRELATION record per kind with an id pushed. */
static void append_ext(uint32_t corr)
{
	if (!kind_enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION])
		return;
	for (int kind = 0; kind < EXT_KINDS; kind++) {
		if (!ext_depth[kind])
			continue;
		CUpti_ActivityExternalCorrelation e;
		memset(&e, 0, sizeof e);
		e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
		e.externalKind = (CUpti_ExternalCorrelationKind)kind;
		e.externalId = ext_stack[kind][ext_depth[kind] - 1];
		e.correlationId = corr;
		append(&e, sizeof e);
	}
}

EXPORT void fakecupti_configure(const struct fakecupti_config *c) { cfg = *c; }
EXPORT long fakecupti_push_balance(void) { return pushes - pops; }
EXPORT long fakecupti_pushes(void) { return pushes; }
EXPORT int fakecupti_callbacks_registered(void) { return request_cb != NULL; }
EXPORT int fakecupti_ts_callback_registered(void) { return ts_cb != NULL; }

EXPORT uint32_t fakecupti_api_call(void)
{
	pthread_mutex_lock(&lock);
	uint32_t corr = next_corr++;
	append_ext(corr);
	pthread_mutex_unlock(&lock);
	return corr;
}

EXPORT uint32_t fakecupti_op(const struct fakecupti_op *op)
{
	union {
		CUpti_ActivityKernel10 k;
		CUpti_ActivityMemcpy6 c;
		CUpti_ActivityMemcpyPtoP4 p;
		CUpti_ActivityMemset4 s;
		CUpti_ActivitySynchronization2 y;
	} r;
	size_t size = 0;
	memset(&r, 0, sizeof r);
	pthread_mutex_lock(&lock);
	uint32_t corr = next_corr++;
	switch (op->kind) {
	case FAKE_KERNEL:
		if (!kind_enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
			goto out;
		r.k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		r.k.start = gpu_time(op->start);
		r.k.end = gpu_time(op->end);
		r.k.deviceId = op->device;
		r.k.contextId = op->context;
		r.k.streamId = op->stream;
		r.k.correlationId = corr;
		r.k.name = op->name;
		r.k.gridX = op->grid[0]; r.k.gridY = op->grid[1]; r.k.gridZ = op->grid[2];
		r.k.blockX = op->block[0]; r.k.blockY = op->block[1]; r.k.blockZ = op->block[2];
		r.k.registersPerThread = 32;
		r.k.staticSharedMemory = 1024;
		r.k.dynamicSharedMemory = 2048;
		size = sizeof r.k;
		break;
	case FAKE_MEMCPY:
		if (!kind_enabled[CUPTI_ACTIVITY_KIND_MEMCPY])
			goto out;
		r.c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		r.c.copyKind = op->copy_kind;
		r.c.srcKind = op->src_kind;
		r.c.dstKind = op->dst_kind;
		r.c.bytes = op->bytes;
		r.c.start = gpu_time(op->start);
		r.c.end = gpu_time(op->end);
		r.c.deviceId = op->device;
		r.c.contextId = op->context;
		r.c.streamId = op->stream;
		r.c.correlationId = corr;
		size = sizeof r.c;
		break;
	case FAKE_PEER:
		if (!kind_enabled[CUPTI_ACTIVITY_KIND_MEMCPY2])
			goto out;
		r.p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
		r.p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
		r.p.srcKind = r.p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		r.p.bytes = op->bytes;
		r.p.start = gpu_time(op->start);
		r.p.end = gpu_time(op->end);
		r.p.deviceId = op->device;
		r.p.contextId = op->context;
		r.p.streamId = op->stream;
		r.p.srcDeviceId = op->device;
		r.p.dstDeviceId = op->device + 1;
		r.p.correlationId = corr;
		size = sizeof r.p;
		break;
	case FAKE_MEMSET:
		if (!kind_enabled[CUPTI_ACTIVITY_KIND_MEMSET])
			goto out;
		r.s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
		r.s.value = 0;
		r.s.bytes = op->bytes;
		r.s.start = gpu_time(op->start);
		r.s.end = gpu_time(op->end);
		r.s.deviceId = op->device;
		r.s.contextId = op->context;
		r.s.streamId = op->stream;
		r.s.correlationId = corr;
		r.s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		size = sizeof r.s;
		break;
	case FAKE_SYNC:
		if (!kind_enabled[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION])
			goto out;
		r.y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
		r.y.type = op->sync_type;
		r.y.start = gpu_time(op->start);
		r.y.end = gpu_time(op->end);
		r.y.correlationId = corr;
		r.y.contextId = op->context;
		r.y.streamId = op->stream;
		r.y.cudaEventId = 7;
		size = sizeof r.y;
		break;
	}
	if (!cfg.ext_after)
		append_ext(corr);
	append(&r, size);
	if (cfg.ext_after)
		append_ext(corr);
out:
	pthread_mutex_unlock(&lock);
	return corr;
}

/* The runtime's answer libtbprof checks before it touches real CUPTI. */
EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
	*version = cfg.no_driver ? 0 : 13000;
	return cudaSuccess;
}

/* ------------------------------------------------------------ CUPTI API */

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	*str = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
		? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "fake CUPTI error";
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud)
{
	if (cfg.busy_subscribe || subscribed)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	subscribed = 1;
	*sub = (CUpti_SubscriberHandle)&subscribed;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
	subscribed = 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	if (cfg.refuse_ts_callback)
		return CUPTI_ERROR_NOT_SUPPORTED;
	ts_cb = f;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
	*ts = ts_cb ? ts_cb() : gpu_time(monotonic());
	return CUPTI_SUCCESS;
}

static int registering;
EXPORT int fakecupti_registering(void) { return __atomic_load_n(&registering, __ATOMIC_ACQUIRE); }

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						  CUpti_BuffersCallbackCompleteFunc done)
{
	if (cfg.start_delay_ms) {
		__atomic_store_n(&registering, 1, __ATOMIC_RELEASE);
		struct timespec d = { cfg.start_delay_ms / 1000, (cfg.start_delay_ms % 1000) * 1000000L };
		nanosleep(&d, NULL);
		__atomic_store_n(&registering, 0, __ATOMIC_RELEASE);
	}
	request_cb = req;
	complete_cb = done;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	if (cfg.busy_enable)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	if ((unsigned)kind >= 64)
		return CUPTI_ERROR_INVALID_KIND;
	kind_enabled[kind] = 1;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if ((unsigned)kind < 64)
		kind_enabled[kind] = 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec)
{
	size_t off = 0;
	if (*rec) {
		off = (size_t)((uint8_t *)*rec - buffer);
		off += aligned(record_size((*rec)->kind));
	}
	if (off >= valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)(buffer + off);
	return CUPTI_SUCCESS;
}

/* cfg.shuffle_seed: the queue's records in a random order (same seed, same order). */
static void shuffle_queue(void)
{
	size_t n = 0, off = 0;
	while (off < queue_len) {
		off += aligned(record_size(((CUpti_Activity *)(queue + off))->kind));
		n++;
	}
	size_t *offs = malloc(n * sizeof *offs);
	uint8_t *copy = malloc(queue_len);
	if (!offs || !copy) {
		free(offs);
		free(copy);
		return;
	}
	off = 0;
	for (size_t i = 0; i < n; i++) {
		offs[i] = off;
		off += aligned(record_size(((CUpti_Activity *)(queue + off))->kind));
	}
	for (size_t i = n; i > 1; i--) {
		uint64_t x = cfg.shuffle_seed;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		cfg.shuffle_seed = x;
		size_t j = (size_t)(x % i), t = offs[i - 1];
		offs[i - 1] = offs[j];
		offs[j] = t;
	}
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = aligned(record_size(((CUpti_Activity *)(queue + offs[i]))->kind));
		memcpy(copy + out, queue + offs[i], len);
		out += len;
	}
	memcpy(queue, copy, queue_len);
	free(copy);
	free(offs);
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	pthread_mutex_lock(&lock);
	if (cfg.shuffle_seed)
		shuffle_queue();
	size_t per_buffer = cfg.records_per_buffer ? cfg.records_per_buffer : cfg.shuffle_seed ? 3 : 0;
	size_t off = 0;
	while (off < queue_len) {
		uint8_t *buf = NULL;
		size_t size = 0, max_records = 0;
		request_cb(&buf, &size, &max_records);
		if (!buf)
			break;
		size_t used = 0, n = 0;
		while (off < queue_len) {
			CUpti_Activity *a = (CUpti_Activity *)(queue + off);
			size_t len = aligned(record_size(a->kind));
			if (used + len > size || (per_buffer && n == per_buffer))
				break;
			memcpy(buf + used, a, len);
			used += len;
			off += len;
			n++;
		}
		/* CUPTI calls back without its own locks held. */
		pthread_mutex_unlock(&lock);
		complete_cb(NULL, 0, buf, size, used);
		pthread_mutex_lock(&lock);
	}
	queue_len = 0;
	queue_records = 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped)
{
	*dropped = cfg.dropped;
	cfg.dropped = 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	if ((unsigned)kind >= EXT_KINDS || ext_depth[kind] == 64)
		return CUPTI_ERROR_INVALID_PARAMETER;
	ext_stack[kind][ext_depth[kind]++] = id;
	__atomic_fetch_add(&pushes, 1, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
	if ((unsigned)kind >= EXT_KINDS)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (!ext_depth[kind])
		return CUPTI_ERROR_QUEUE_EMPTY;
	uint64_t id = ext_stack[kind][--ext_depth[kind]];
	if (last)
		*last = id;
	__atomic_fetch_add(&pops, 1, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

/* Asks the consumer for a buffer as CUPTI does when it has records to write, without giving it back
 * (CUPTI under load holds many): the buffer-cap scenario. */
EXPORT uint8_t *fakecupti_request_buffer(size_t *size)
{
	uint8_t *buf = NULL;
	size_t max_records = 0;
	*size = 0;
	if (request_cb)
		request_cb(&buf, size, &max_records);
	return buf;
}

/* Gives a buffer back with no records in it. */
EXPORT void fakecupti_complete_buffer(uint8_t *buf, size_t size)
{
	if (complete_cb && buf)
		complete_cb(NULL, 0, buf, size, 0);
}

/* FAKE_CUPTI_CRASH=abort: first writes to the file FAKE_CUPTI_REPORT what the kernel would do with
 * SIGABRT in this process ("SIGABRT default" or "SIGABRT handler"), asked with the raw system call (no
 * library, no interposer can answer for it), then aborts (tests/cupti/probe_abort.py). */
static void report_abort_disposition(void)
{
	const char *path = getenv("FAKE_CUPTI_REPORT");
	if (!path)
		return;
	struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } k;
	if (syscall(SYS_rt_sigaction, SIGABRT, NULL, &k, sizeof k.mask) != 0)
		return;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	const char *what = k.handler == SIG_DFL ? "SIGABRT default\n" : "SIGABRT handler\n";
	if (syscall(SYS_write, fd, what, strlen(what)) < 0) {
		/* the test reads no report and fails */
	}
	syscall(SYS_close, fd);
}

/* FAKE_CUPTI_CRASH=1: dies here, as the wheel's CUPTI 13.2 does in its first call (this one too) without a
 * driver that can serve it: the crashing-libcupti scenario. */
EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
	const char *crash = getenv("FAKE_CUPTI_CRASH");
	if (crash && !strcmp(crash, "abort")) {
		report_abort_disposition();
		abort();
	}
	if (crash && *crash == '1')
		raise(SIGSEGV);
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}
