/*
 * simgpu: a stand-in for libcupti.so.13 (activity API subset) fed by the
 * simulated runtime's timeline.
 *
 * The runtime stand-in (libcudart.so.13 from this directory) calls our
 * observer for every operation it logs in its ground truth; we turn each one
 * into the CUDA 13 activity records a consumer enabled (real struct layouts
 * from cupti_activity.h) and, as real CUPTI does, writes each one into a
 * buffer of the consumer's as soon as the (virtual) work has ended: a record
 * whose work is still running waits in a staging queue until it ends.  When
 * the current buffer is full it asks the consumer for another
 * (bufferRequested, on the thread that made the record); with none given it
 * drops records and counts them (cuptiActivityGetNumDroppedRecords).  Full
 * buffers, and the partly filled one, go back through bufferCompleted from a
 * delivery thread every flush period, or on cuptiActivityFlushAll: between
 * two deliveries it holds as many of the consumer's buffers as the records
 * made need.  Knobs and clock rules: README.md.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "simgpu.h"

#define EXPORT __attribute__((visibility("default")))
#define RECORD_ALIGN 8

/* ------------------------------------------------------------------ configuration and state */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool busy_knob, no_ts_callback_knob;
static uint64_t gpu_clock_offset = 1000000000000000000ull; /* SIMGPU_GPU_CLOCK_OFFSET_NS */
static size_t queue_limit;                                   /* SIMGPU_CUPTI_QUEUE_LIMIT, 0 = none */
static atomic_uint flush_period_ms = 100;                     /* SIMGPU_CUPTI_FLUSH_MS or cuptiActivityFlushPeriod */
static uint64_t shuffle_state;                               /* SIMGPU_CUPTI_SHUFFLE seed, 0 = in order */

/* Functions of the runtime stand-in, found at run time (never linked). */
static void (*rt_set_observer)(simgpu_observer_fn, void *);
static int (*rt_ext_push)(uint32_t, uint64_t);
static int (*rt_ext_pop)(uint32_t, uint64_t *);
static int (*rt_stream_get_id)(void *, unsigned long long *);
static int (*rt_graph_object_id)(int, const void *, uint64_t *);

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool enabled[CUPTI_ACTIVITY_KIND_COUNT];
/* API records per callback id, by domain (SIMGPU_API_RUNTIME, SIMGPU_API_DRIVER): set all at once by
 * cuptiActivityEnable(RUNTIME / DRIVER), one at a time by cuptiActivityEnableRuntimeApi / DriverApi. */
#define API_CBID_MAX 1024
static bool api_enabled[2][API_CBID_MAX];
static CUpti_BuffersCallbackRequestFunc buffer_requested;
static CUpti_BuffersCallbackCompleteFunc buffer_completed;
static _Atomic(CUpti_TimestampCallbackFunc) ts_callback;
static int64_t ts_callback_offset; /* consumer clock - CLOCK_MONOTONIC, measured at registration */
static bool subscribed;
static bool observer_installed;

/* One pending record: the biggest layout we produce, plus when it may be delivered. */
union any_record {
	CUpti_Activity head;
	CUpti_ActivityKernel10 kernel;
	CUpti_ActivityMemcpy6 memcpy;
	CUpti_ActivityMemset4 memset;
	CUpti_ActivitySynchronization2 sync;
	CUpti_ActivityExternalCorrelation ext;
	CUpti_ActivityAPI api;
};
struct pending {
	union any_record rec;
	size_t size;
	uint64_t ready_ns; /* CLOCK_MONOTONIC time from which the record is complete */
};
static struct pending *pend;
static size_t n_pend, cap_pend;
static size_t dropped;
/* The consumer's buffers (state_lock): the one records go into now (one global buffer, as CUPTI
 * since CUDA 8: completion callbacks get no context or stream), and those full, handed back unused
 * or held back (SIMGPU_CUPTI_SHUFFLE), waiting for a delivery. */
struct consumer_buffer {
	uint8_t *buf;
	size_t size, used; /* used counts from buf, alignment padding included */
	size_t max_records, n_records;
	uint64_t due_round; /* SIMGPU_CUPTI_SHUFFLE: held back until this delivery; 0 = not decided yet */
};
static struct consumer_buffer open_buffer; /* buf NULL: none */
static struct consumer_buffer *full_buffers, *delivery_batch;
static size_t n_full, cap_full, cap_delivery_batch;
static size_t n_in_buffers; /* records in open_buffer and full_buffers (SIMGPU_CUPTI_QUEUE_LIMIT) */
/* Graph launches report several ops under one correlation id, on the calling
 * thread: one API/external-correlation record per call. */
static __thread uint32_t last_api_corr;
static int64_t next_grid_id = 1;

static pthread_mutex_t deliver_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t worker;
static bool worker_started;
static atomic_bool shutting_down; /* the process is exiting: the worker delivers no more */

static uint64_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end) {
		fprintf(stderr, "simgpu-cupti: ignoring %s=%s (not an unsigned integer)\n", name, s);
		return def;
	}
	return v;
}

/* Finds the runtime stand-in: the one already loaded, else the one next to us. */
static void find_runtime(void)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	if (!h || !dlsym(h, "simgpu_set_observer")) {
		Dl_info info;
		if (dladdr((void *)find_runtime, &info) && info.dli_fname) {
			char path[4096];
			snprintf(path, sizeof(path), "%s", info.dli_fname);
			char *slash = strrchr(path, '/');
			if (slash) {
				snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "libcudart.so.13");
				h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
			}
		}
	}
	if (!h)
		return;
	rt_set_observer = (void (*)(simgpu_observer_fn, void *))dlsym(h, "simgpu_set_observer");
	rt_ext_push = (int (*)(uint32_t, uint64_t))dlsym(h, "simgpu_ext_push");
	rt_ext_pop = (int (*)(uint32_t, uint64_t *))dlsym(h, "simgpu_ext_pop");
	rt_stream_get_id = (int (*)(void *, unsigned long long *))dlsym(h, "cudaStreamGetId");
	rt_graph_object_id = (int (*)(int, const void *, uint64_t *))dlsym(h, "simgpu_graph_object_id");
}

static void start_worker(void);

/* At exit the consumer may be tearing down: only explicit flushes (on the
 * consumer's own thread) deliver from now on.  Waits for a delivery in flight. */
__attribute__((destructor)) static void stop_worker(void)
{
	atomic_store(&shutting_down, true);
	pthread_mutex_lock(&deliver_lock);
	pthread_mutex_unlock(&deliver_lock);
}

static void at_fork_prepare(void)
{
	pthread_mutex_lock(&deliver_lock);
	pthread_mutex_lock(&state_lock);
}

static void at_fork_parent(void)
{
	pthread_mutex_unlock(&state_lock);
	pthread_mutex_unlock(&deliver_lock);
}

/* The child has no delivery thread, and the parent's pending records are the parent's. */
static void at_fork_child(void)
{
	pthread_mutex_init(&state_lock, NULL);
	pthread_mutex_init(&deliver_lock, NULL);
	n_pend = 0;
	memset(&open_buffer, 0, sizeof(open_buffer));
	n_full = 0;
	n_in_buffers = 0;
	worker_started = false;
	if (buffer_requested)
		start_worker();
}

static void init(void)
{
	busy_knob = env_u64("SIMGPU_CUPTI_BUSY", 0) != 0;
	no_ts_callback_knob = env_u64("SIMGPU_CUPTI_NO_TS_CALLBACK", 0) != 0;
	gpu_clock_offset = env_u64("SIMGPU_GPU_CLOCK_OFFSET_NS", gpu_clock_offset);
	queue_limit = (size_t)env_u64("SIMGPU_CUPTI_QUEUE_LIMIT", 0);
	flush_period_ms = (unsigned)env_u64("SIMGPU_CUPTI_FLUSH_MS", flush_period_ms);
	shuffle_state = env_u64("SIMGPU_CUPTI_SHUFFLE", 0);
	find_runtime();
	pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
}

static void ensure_init(void) { pthread_once(&init_once, init); }

/* CLOCK_MONOTONIC -> the clock activity records use. */
static uint64_t to_record_clock(uint64_t mono)
{
	if (ts_callback)
		return (uint64_t)((int64_t)mono + ts_callback_offset);
	return mono + gpu_clock_offset;
}

/* ------------------------------------------------------------------ records from ops */

/* Moves the open buffer to the list waiting for a delivery; false when no memory to list it. */
static bool close_open_buffer(void)
{
	/* state_lock held */
	if (n_full == cap_full) {
		size_t ncap = cap_full ? cap_full * 2 : 64;
		struct consumer_buffer *nf = realloc(full_buffers, ncap * sizeof(*nf));
		if (!nf)
			return false;
		full_buffers = nf;
		cap_full = ncap;
	}
	full_buffers[n_full++] = open_buffer;
	memset(&open_buffer, 0, sizeof(open_buffer));
	return true;
}

/* A fresh buffer from the consumer, opened; false if none came. */
static bool request_buffer(void)
{
	/* state_lock held: as real CUPTI, the request is made on the thread whose record needs room
	 * (bufferRequested must not call back into the activity API). */
	uint8_t *buf = NULL;
	size_t size = 0, max_records = 0;
	buffer_requested(&buf, &size, &max_records);
	if (!buf || !size)
		return false;
	size_t skip = ((uintptr_t)buf & (RECORD_ALIGN - 1)) ? RECORD_ALIGN - ((uintptr_t)buf & (RECORD_ALIGN - 1)) : 0;
	open_buffer = (struct consumer_buffer){ buf, size, skip < size ? skip : size, max_records, 0, 0 };
	return true;
}

static bool open_buffer_fits(size_t size)
{
	return open_buffer.buf && open_buffer.used + size <= open_buffer.size &&
	       (open_buffer.max_records == 0 || open_buffer.n_records < open_buffer.max_records);
}

/* Writes one complete record into the consumer's buffer, asking for another when it is full; drops
 * it (counted) when the consumer gives none or one too small for it. */
static void write_record(const union any_record *r, size_t size)
{
	/* state_lock held */
	if (!open_buffer_fits(size)) {
		if (open_buffer.buf && !close_open_buffer()) {
			dropped++; /* no memory to list it: it stays open, and this record is lost */
			return;
		}
		if (!request_buffer()) {
			dropped++;
			return;
		}
		if (!open_buffer_fits(size)) {
			/* Too small for the record: it goes back empty at the next delivery. */
			open_buffer.used = 0;
			if (!close_open_buffer())
				open_buffer.used = open_buffer.size; /* never fits: the next record asks again */
			dropped++;
			return;
		}
	}
	memcpy(open_buffer.buf + open_buffer.used, r, size);
	open_buffer.used += size;
	open_buffer.n_records++;
	n_in_buffers++;
}

static void queue_record(const union any_record *r, size_t size, uint64_t ready)
{
	/* state_lock held */
	if (queue_limit && n_pend + n_in_buffers >= queue_limit) {
		dropped++;
		return;
	}
	/* Ended work goes straight into the consumer's buffer (the record exists from then on);
	 * running work waits. */
	if (buffer_requested && ready <= mono_now()) {
		write_record(r, size);
		return;
	}
	if (n_pend == cap_pend) {
		size_t ncap = cap_pend ? cap_pend * 2 : 1024;
		struct pending *np = realloc(pend, ncap * sizeof(*np));
		if (!np) {
			dropped++;
			return;
		}
		pend = np;
		cap_pend = ncap;
	}
	pend[n_pend].rec = *r;
	pend[n_pend].size = size;
	pend[n_pend].ready_ns = ready;
	n_pend++;
}

struct cbid_name { const char *name; int cbid; };
static const struct cbid_name runtime_cbids[] = {
#include "runtime_cbids.inc"
};
static const struct cbid_name driver_cbids[] = {
#include "driver_cbids.inc"
};
static const struct { const struct cbid_name *table; size_t n; } cbid_tables[2] = {
	[SIMGPU_API_RUNTIME] = { runtime_cbids, sizeof(runtime_cbids) / sizeof(runtime_cbids[0]) },
	[SIMGPU_API_DRIVER] = { driver_cbids, sizeof(driver_cbids) / sizeof(driver_cbids[0]) },
};

static int cbid_of(unsigned domain, const char *api)
{
	/* API names are string literals of the runtime and driver (distinct per domain): cache by
	 * address (state_lock held). */
	static struct { const char *api; int cbid; } cache[256];
	size_t slot = ((uintptr_t)api >> 3) & 255;
	if (cache[slot].api == api)
		return cache[slot].cbid;
	int cbid = 0;
	for (size_t i = 0; i < cbid_tables[domain].n; i++) {
		if (strcmp(cbid_tables[domain].table[i].name, api) == 0) {
			cbid = cbid_tables[domain].table[i].cbid;
			break;
		}
	}
	cache[slot].api = api;
	cache[slot].cbid = cbid;
	return cbid;
}

static uint8_t memcpy_kind(unsigned ck)
{
	switch (ck) {
	case SIMGPU_COPY_H2D: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	case SIMGPU_COPY_D2H: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	case SIMGPU_COPY_D2D: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	case SIMGPU_COPY_H2H: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
	case SIMGPU_COPY_P2P: return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	default: return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
	}
}

static uint8_t memory_kind(unsigned mk)
{
	switch (mk) {
	case SIMGPU_MEM_PAGEABLE: return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	case SIMGPU_MEM_PINNED: return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
	case SIMGPU_MEM_DEVICE: return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	case SIMGPU_MEM_MANAGED: return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
	default: return CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
	}
}

/* The ids a record of work replayed by a graph launch carries.  Not measured on a GPU yet (the
 * conformance lines graph.kernel_correlation_id, graph.kernel_graph_id, graph.kernel_graph_node_id
 * are unknown; doc/gpu.md "CUDA graphs"): taken from cupti_activity.h until measured -- the graph
 * launch call's correlation id, graphId the graph's (cuptiGetGraphId of the graph the executable
 * was instantiated from), graphNodeId its node's (cuptiGetGraphNodeId).  When run-real.sh says
 * otherwise, this is the one place to change. */
static void graph_work_ids(const struct simgpu_op *op, uint32_t *corr, uint32_t *graph_id, uint64_t *node_id)
{
	*corr = op->correlation_id;
	*graph_id = op->graph_id;
	*node_id = op->graph_node_id;
}

static void observe(const struct simgpu_op *op, void *arg)
{
	union any_record r;
	pthread_mutex_lock(&state_lock);
	if (op->gpu && op->kind == SIMGPU_OP_KERNEL &&
	    (enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] || enabled[CUPTI_ACTIVITY_KIND_KERNEL])) {
		memset(&r, 0, sizeof(r));
		CUpti_ActivityKernel10 *k = &r.kernel;
		k->kind = enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
									  : CUPTI_ACTIVITY_KIND_KERNEL;
		k->registersPerThread = 32;
		k->start = to_record_clock(op->start_ns);
		k->end = to_record_clock(op->end_ns);
		k->completed = k->end;
		k->deviceId = op->device;
		k->contextId = 1;
		k->streamId = op->stream_id;
		k->gridX = (int32_t)op->grid[0];
		k->gridY = (int32_t)op->grid[1];
		k->gridZ = (int32_t)op->grid[2];
		k->blockX = (int32_t)op->block[0];
		k->blockY = (int32_t)op->block[1];
		k->blockZ = (int32_t)op->block[2];
		k->dynamicSharedMemory = (int32_t)op->shared_mem;
		graph_work_ids(op, &k->correlationId, &k->graphId, &k->graphNodeId);
		k->gridId = next_grid_id++;
		k->name = op->name; /* the runtime keeps kernel names for the life of the process */
		k->queued = CUPTI_TIMESTAMP_UNKNOWN;
		k->submitted = CUPTI_TIMESTAMP_UNKNOWN;
		queue_record(&r, sizeof(CUpti_ActivityKernel10), op->end_ns);
	} else if (op->gpu && op->kind == SIMGPU_OP_MEMCPY && enabled[CUPTI_ACTIVITY_KIND_MEMCPY]) {
		memset(&r, 0, sizeof(r));
		CUpti_ActivityMemcpy6 *m = &r.memcpy;
		m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		m->copyKind = memcpy_kind(op->copy_kind);
		m->srcKind = memory_kind(op->mem_kind);
		m->dstKind = memory_kind(op->dst_mem_kind);
		m->flags = op->is_async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
		m->bytes = op->bytes;
		m->start = to_record_clock(op->start_ns);
		m->end = to_record_clock(op->end_ns);
		m->deviceId = op->device;
		m->contextId = 1;
		m->streamId = op->stream_id;
		graph_work_ids(op, &m->correlationId, &m->graphId, &m->graphNodeId);
		m->copyCount = 1;
		queue_record(&r, sizeof(CUpti_ActivityMemcpy6), op->end_ns);
	} else if (op->gpu && op->kind == SIMGPU_OP_MEMSET && enabled[CUPTI_ACTIVITY_KIND_MEMSET]) {
		memset(&r, 0, sizeof(r));
		CUpti_ActivityMemset4 *m = &r.memset;
		m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
		m->bytes = op->bytes;
		m->start = to_record_clock(op->start_ns);
		m->end = to_record_clock(op->end_ns);
		m->deviceId = op->device;
		m->contextId = 1;
		m->streamId = op->stream_id;
		graph_work_ids(op, &m->correlationId, &m->graphId, &m->graphNodeId);
		m->flags = op->is_async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
		m->memoryKind = memory_kind(op->mem_kind);
		queue_record(&r, sizeof(CUpti_ActivityMemset4), op->end_ns);
	} else if (op->gpu && op->kind == SIMGPU_OP_SYNC && enabled[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION]) {
		memset(&r, 0, sizeof(r));
		CUpti_ActivitySynchronization2 *s = &r.sync;
		s->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
		switch (op->sync_kind) {
		case SIMGPU_SYNC_EVENT: s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE; break;
		case SIMGPU_SYNC_STREAM_WAIT_EVENT: s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT; break;
		case SIMGPU_SYNC_STREAM: s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE; break;
		case SIMGPU_SYNC_DEVICE: s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE; break;
		default: s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN; break;
		}
		s->start = to_record_clock(op->start_ns);
		s->end = to_record_clock(op->end_ns);
		s->correlationId = op->correlation_id;
		s->contextId = 1;
		s->streamId = op->sync_kind == SIMGPU_SYNC_STREAM || op->sync_kind == SIMGPU_SYNC_STREAM_WAIT_EVENT
				      ? op->stream_id : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
		s->cudaEventId = op->event_id ? op->event_id : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
		s->returnValue = (uint32_t)op->result;
		queue_record(&r, sizeof(CUpti_ActivitySynchronization2), op->end_ns);
	}
	/* The call's API record, with the external id pushed at the call paired to it, as measured on an
	 * H100 (tests/cupti/conformance/h100.txt, doc/gpu.md):
	 * - written only while the call's whole kind (RUNTIME / DRIVER) is enabled and its callback id is
	 *   not switched off: ids enabled one by one without the kind give nothing at all;
	 * - no record for a driver call made inside a runtime call (a static runtime's launch), so an id
	 *   pushed during that driver call pairs with nothing; its device work carries the runtime call's
	 *   correlation id;
	 * - no API record, no pair. */
	unsigned domain = op->api_domain == SIMGPU_API_DRIVER ? SIMGPU_API_DRIVER : SIMGPU_API_RUNTIME;
	CUpti_ActivityKind api_kind = domain == SIMGPU_API_DRIVER ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
	bool nested_in_runtime = op->api_corr && op->api_corr != op->correlation_id;
	uint32_t api_corr = op->api_corr ? op->api_corr : op->correlation_id;
	int cbid = cbid_of(domain, op->api);
	if (cbid >= 0 && cbid < API_CBID_MAX && enabled[api_kind] && api_enabled[domain][cbid] && !nested_in_runtime &&
	    api_corr != last_api_corr) {
		last_api_corr = api_corr;
		if (op->has_ext && enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) {
			memset(&r, 0, sizeof(r));
			r.ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
			r.ext.externalKind = (CUpti_ExternalCorrelationKind)op->ext_kind;
			r.ext.externalId = op->ext_id;
			r.ext.correlationId = api_corr;
			queue_record(&r, sizeof(CUpti_ActivityExternalCorrelation), op->host_end_ns);
		}
		memset(&r, 0, sizeof(r));
		r.api.kind = api_kind;
		r.api.cbid = (CUpti_CallbackId)cbid;
		r.api.start = to_record_clock(op->host_start_ns);
		r.api.end = to_record_clock(op->host_end_ns);
		r.api.processId = op->pid;
		r.api.threadId = op->pthread_id;
		r.api.correlationId = api_corr;
		r.api.returnValue = (uint32_t)op->result;
		queue_record(&r, sizeof(CUpti_ActivityAPI), op->host_end_ns);
	}
	pthread_mutex_unlock(&state_lock);
}

/* ------------------------------------------------------------------ delivery
 * SIMGPU_CUPTI_SHUFFLE: under load real CUPTI hands buffers over late and out of order, so records
 * arrive after later ones and a buffer can stay behind for a long time.  Here each delivery holds
 * about a third of its new buffers back for 1 to 3 further deliveries (the consumer's buffers stay
 * with us meanwhile) and hands the rest, plus the held ones now due, over in a shuffled order.
 * Choices come from a xorshift generator seeded with the knob's value: a given seed makes the same
 * choices for the same sequence of deliveries.  A forced flush hands everything over (still
 * shuffled). */
static uint64_t delivery_round; /* deliver_lock */

static uint64_t shuffle_next(void)
{
	uint64_t x = shuffle_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	shuffle_state = x;
	return x;
}

/* Writes the staged records whose work has ended (all, when forced) into the consumer's buffers,
 * then hands every buffer with records -- full ones and those being filled -- back (with
 * SIMGPU_CUPTI_SHUFFLE: less those held back, in shuffled order). */
static void deliver(bool forced)
{
	pthread_mutex_lock(&deliver_lock);
	pthread_mutex_lock(&state_lock);
	CUpti_BuffersCallbackCompleteFunc done = buffer_completed;
	if (!buffer_requested || !done) {
		pthread_mutex_unlock(&state_lock);
		pthread_mutex_unlock(&deliver_lock);
		return;
	}
	delivery_round++;
	uint64_t now = mono_now();
	size_t keep = 0;
	for (size_t i = 0; i < n_pend; i++) {
		if (forced || pend[i].ready_ns <= now)
			write_record(&pend[i].rec, pend[i].size);
		else
			pend[keep++] = pend[i];
	}
	n_pend = keep;
	if (open_buffer.n_records)
		close_open_buffer();
	/* What goes now into delivery_batch; what is held back stays listed.  The program's threads go
	 * on filling new buffers while the batch is handed over. */
	size_t n_batch = 0;
	if (cap_delivery_batch < n_full) {
		struct consumer_buffer *nb = realloc(delivery_batch, cap_full * sizeof(*nb));
		if (nb) {
			delivery_batch = nb;
			cap_delivery_batch = cap_full;
		}
	}
	keep = 0;
	n_in_buffers = 0;
	for (size_t i = 0; i < n_full; i++) {
		struct consumer_buffer *b = &full_buffers[i];
		if (shuffle_state && !forced && b->due_round == 0) {
			uint64_t r = shuffle_next();
			b->due_round = r % 3 == 0 ? delivery_round + 1 + (r >> 8) % 3 : delivery_round;
		}
		if ((forced || b->due_round <= delivery_round) && n_batch < cap_delivery_batch) {
			delivery_batch[n_batch++] = *b;
		} else {
			n_in_buffers += b->n_records;
			full_buffers[keep++] = *b;
		}
	}
	n_full = keep;
	for (size_t i = n_batch; shuffle_state && i > 1; i--) {
		size_t j = (size_t)(shuffle_next() % i);
		struct consumer_buffer t = delivery_batch[i - 1];
		delivery_batch[i - 1] = delivery_batch[j];
		delivery_batch[j] = t;
	}
	pthread_mutex_unlock(&state_lock);

	/* Consumer callbacks run without our state lock: they may call back into us. */
	for (size_t i = 0; i < n_batch; i++) {
		const struct consumer_buffer *b = &delivery_batch[i];
		done(NULL, 0, b->buf, b->size, b->n_records ? b->used : 0);
	}
	pthread_mutex_unlock(&deliver_lock);
}

static void *worker_main(void *arg)
{
	for (;;) {
		unsigned ms = flush_period_ms ? flush_period_ms : 100;
		struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		if (atomic_load(&shutting_down))
			return NULL;
		deliver(false);
	}
	return NULL;
}

static void start_worker(void)
{
	/* state_lock held */
	if (worker_started)
		return;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not ours to take */
	if (pthread_create(&worker, NULL, worker_main, NULL) == 0) {
		pthread_detach(worker);
		worker_started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void install_observer(void)
{
	/* state_lock held */
	if (!observer_installed && rt_set_observer) {
		rt_set_observer(observe, NULL);
		observer_installed = true;
	}
}

/* ------------------------------------------------------------------ API */

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
	CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
	ensure_init();
	if (!funcBufferRequested || !funcBufferCompleted)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&state_lock);
	buffer_requested = funcBufferRequested;
	buffer_completed = funcBufferCompleted;
	start_worker();
	pthread_mutex_unlock(&state_lock);
	return CUPTI_SUCCESS;
}

static bool supported_kind(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_MEMCPY:
	case CUPTI_ACTIVITY_KIND_MEMSET:
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return true;
	default:
		return false;
	}
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	ensure_init();
	if (busy_knob)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	if ((unsigned)kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	if (!supported_kind(kind))
		return CUPTI_ERROR_NOT_COMPATIBLE;
	if (!rt_set_observer)
		return CUPTI_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&state_lock);
	enabled[kind] = true;
	/* The whole kind overrides per-API settings made before. */
	if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER)
		memset(api_enabled[kind == CUPTI_ACTIVITY_KIND_DRIVER], 1, sizeof(api_enabled[0]));
	install_observer();
	pthread_mutex_unlock(&state_lock);
	return CUPTI_SUCCESS;
}

static CUptiResult enable_api(unsigned domain, CUpti_CallbackId cbid, uint8_t enable)
{
	ensure_init();
	if (busy_knob)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	if (!rt_set_observer)
		return CUPTI_ERROR_NOT_INITIALIZED;
	if (cbid >= API_CBID_MAX)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&state_lock);
	api_enabled[domain][cbid] = enable != 0;
	install_observer();
	pthread_mutex_unlock(&state_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
	return enable_api(SIMGPU_API_RUNTIME, cbid, enable);
}

EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
	return enable_api(SIMGPU_API_DRIVER, cbid, enable);
}

EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
	if (!name)
		return CUPTI_ERROR_INVALID_PARAMETER;
	unsigned d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? SIMGPU_API_DRIVER : SIMGPU_API_RUNTIME;
	if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API)
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (size_t i = 0; i < cbid_tables[d].n; i++) {
		if ((uint32_t)cbid_tables[d].table[i].cbid == cbid) {
			*name = cbid_tables[d].table[i].name;
			return CUPTI_SUCCESS;
		}
	}
	return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) { return cuptiActivityEnable(kind); }

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	ensure_init();
	if ((unsigned)kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&state_lock);
	enabled[kind] = false;
	if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER)
		memset(api_enabled[kind == CUPTI_ACTIVITY_KIND_DRIVER], 0, sizeof(api_enabled[0]));
	pthread_mutex_unlock(&state_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	ensure_init();
	deliver((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t time)
{
	ensure_init();
	flush_period_ms = time;
	return CUPTI_SUCCESS;
}

static size_t record_size(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
	default: return 0;
	}
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record)
{
	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	uint8_t *base = buffer;
	if ((uintptr_t)base & (RECORD_ALIGN - 1))
		base += RECORD_ALIGN - ((uintptr_t)base & (RECORD_ALIGN - 1));
	uint8_t *end = buffer + validBufferSizeBytes;
	uint8_t *next;
	if (*record == NULL) {
		next = base;
	} else {
		uint8_t *cur = (uint8_t *)*record;
		if (cur < base || cur >= end)
			return CUPTI_ERROR_INVALID_PARAMETER;
		size_t sz = record_size(*record);
		if (!sz)
			return CUPTI_ERROR_INVALID_KIND;
		next = cur + sz;
	}
	if (next + sizeof(CUpti_Activity) > end || next >= end)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	size_t sz = record_size((CUpti_Activity *)next);
	if (!sz || next + sz > end)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped_out)
{
	ensure_init();
	if (!dropped_out)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&state_lock);
	*dropped_out = dropped;
	dropped = 0;
	pthread_mutex_unlock(&state_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
	ensure_init();
	if (no_ts_callback_knob)
		return CUPTI_ERROR_NOT_SUPPORTED;
	if (!funcTimestamp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	/* Measure the consumer clock against CLOCK_MONOTONIC: best of 64 brackets,
	 * rounded to whole microseconds so that a consumer using CLOCK_MONOTONIC
	 * itself gets records equal to the truth log to the nanosecond. */
	uint64_t best_width = UINT64_MAX;
	int64_t best_offset = 0;
	for (int i = 0; i < 64; i++) {
		uint64_t a = mono_now();
		uint64_t c = funcTimestamp();
		uint64_t b = mono_now();
		if (b - a < best_width) {
			best_width = b - a;
			best_offset = (int64_t)(c - (a + (b - a) / 2));
		}
	}
	int64_t rounded = (best_offset >= 0 ? best_offset + 500 : best_offset - 500) / 1000 * 1000;
	pthread_mutex_lock(&state_lock);
	bool any = false;
	for (int k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++)
		any |= enabled[k];
	if (!any) {
		ts_callback = funcTimestamp;
		ts_callback_offset = rounded;
	}
	pthread_mutex_unlock(&state_lock);
	/* CUPTI wants this before any kind is enabled. */
	return any ? CUPTI_ERROR_INVALID_OPERATION : CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *timestamp)
{
	ensure_init();
	if (!timestamp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	CUpti_TimestampCallbackFunc cb = ts_callback;
	*timestamp = cb ? cb() : mono_now() + gpu_clock_offset;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	ensure_init();
	if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
		return CUPTI_ERROR_INVALID_KIND;
	if (!rt_ext_push)
		return CUPTI_ERROR_NOT_INITIALIZED;
	return rt_ext_push((uint32_t)kind, id) == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_OUT_OF_MEMORY;
}

EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId)
{
	ensure_init();
	if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
		return CUPTI_ERROR_INVALID_KIND;
	if (!rt_ext_pop)
		return CUPTI_ERROR_NOT_INITIALIZED;
	return rt_ext_pop((uint32_t)kind, lastId) == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_QUEUE_EMPTY;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
	ensure_init();
	if (!subscriber)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (busy_knob)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	pthread_mutex_lock(&state_lock);
	bool was = subscribed;
	subscribed = true;
	pthread_mutex_unlock(&state_lock);
	if (was)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	static int handle_cell;
	*subscriber = (CUpti_SubscriberHandle)&handle_cell;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	ensure_init();
	pthread_mutex_lock(&state_lock);
	bool was = subscribed;
	subscribed = false;
	pthread_mutex_unlock(&state_lock);
	return was && subscriber ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

/* Callbacks are not simulated: say so instead of never calling them. */
EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
	CUpti_CallbackId cbid)
{
	return CUPTI_ERROR_NOT_SUPPORTED;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain)
{
	return CUPTI_ERROR_NOT_SUPPORTED;
}

EXPORT CUptiResult cuptiFinalize(void)
{
	ensure_init();
	deliver(true);
	pthread_mutex_lock(&state_lock);
	memset(enabled, 0, sizeof(enabled));
	memset(api_enabled, 0, sizeof(api_enabled));
	ts_callback = NULL;
	subscribed = false;
	pthread_mutex_unlock(&state_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

static const struct { int code; const char *name; } result_names[] = {
#include "cupti_result_names.inc"
};

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (size_t i = 0; i < sizeof(result_names) / sizeof(result_names[0]); i++) {
		if (result_names[i].code == (int)result) {
			*str = result_names[i].name;
			return CUPTI_SUCCESS;
		}
	}
	*str = NULL;
	return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t *streamId)
{
	ensure_init();
	if (!streamId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	unsigned long long id = 0;
	if (!rt_stream_get_id || rt_stream_get_id((void *)stream, &id) != 0)
		return CUPTI_ERROR_INVALID_STREAM;
	*streamId = (uint32_t)id;
	return CUPTI_SUCCESS;
}

/* The ids the runtime gives graphs, executable graphs and nodes, as in records of replayed work. */
static CUptiResult graph_object_id(int what, const void *handle, uint64_t *id)
{
	ensure_init();
	if (!id || !handle)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (!rt_graph_object_id)
		return CUPTI_ERROR_NOT_INITIALIZED;
	return rt_graph_object_id(what, handle, id) == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiGetGraphId(CUgraph graph, uint32_t *pId)
{
	uint64_t id = 0;
	CUptiResult r = graph_object_id(0, graph, pId ? &id : NULL);
	if (r == CUPTI_SUCCESS)
		*pId = (uint32_t)id;
	return r;
}

EXPORT CUptiResult cuptiGetGraphExecId(CUgraphExec graphExec, uint32_t *pId)
{
	uint64_t id = 0;
	CUptiResult r = graph_object_id(1, graphExec, pId ? &id : NULL);
	if (r == CUPTI_SUCCESS)
		*pId = (uint32_t)id;
	return r;
}

EXPORT CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t *nodeId)
{
	return graph_object_id(2, node, nodeId);
}

EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t *contextId)
{
	if (!contextId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*contextId = 1;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
	if (!deviceId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*deviceId = 0;
	return CUPTI_SUCCESS;
}

static size_t attr_values[16];

EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize, void *value)
{
	if (!valueSize || !value)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if ((unsigned)attr < 16 && *valueSize >= sizeof(size_t))
		memcpy(&attr_values[attr], value, sizeof(size_t));
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize, void *value)
{
	if (!valueSize || !value || *valueSize < sizeof(size_t))
		return CUPTI_ERROR_INVALID_PARAMETER;
	size_t v = (unsigned)attr < 16 ? attr_values[attr] : 0;
	memcpy(value, &v, sizeof(size_t));
	*valueSize = sizeof(size_t);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) { return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiActivityEnableLaunchAttributes(uint8_t enable) { return CUPTI_SUCCESS; }
