/*
 * simgpu: a stand-in for libcudart.so.13 with no GPU behind it.
 *
 * Device memory is plain host memory, so copies and memsets really move
 * bytes and tests can check values; kernels never run their device code.
 * Every operation is placed on a virtual device timeline kept in real
 * CLOCK_MONOTONIC time (per-stream queues, legacy default stream semantics,
 * durations from launch geometry and byte counts), synchronizing calls really
 * wait until the virtual end, and each operation is written to the
 * ground-truth log (truth.c).  Knobs and formats: README.md.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "sim_core.h"

#define EXPORT __attribute__((visibility("default")))

struct sim_config sim_cfg;
pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ time */

uint64_t sim_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

EXPORT uint64_t simgpu_now_ns(void) { return sim_now(); }

void sim_spin_until(uint64_t t)
{
	while (sim_now() < t)
		;
}

/* Sleep most of a long wait (the machine is shared), spin the last stretch so
 * the call returns close to the virtual end. */
void sim_wait_until(uint64_t t)
{
	for (;;) {
		uint64_t now = sim_now();
		if (now >= t)
			return;
		if (t - now > 200000) {
			uint64_t wake = t - 100000;
			struct timespec ts = { .tv_sec = (time_t)(wake / 1000000000ull), .tv_nsec = (long)(wake % 1000000000ull) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		} else if (t - now > 20000) {
			sched_yield();
		}
	}
}

/* ------------------------------------------------------------------ map */

static size_t map_slot(uintptr_t key, size_t cap)
{
	uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

void *sim_map_get(const struct sim_map *m, uintptr_t key)
{
	if (!m->cap || !key)
		return NULL;
	for (size_t i = map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return m->vals[i];
		if (m->keys[i] == 0)
			return NULL;
	}
}

static void map_grow(struct sim_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	uintptr_t *nk = calloc(ncap, sizeof(*nk));
	void **nv = calloc(ncap, sizeof(*nv));
	if (!nk || !nv) {
		free(nk);
		free(nv);
		abort(); /* test bed: out of memory here is not worth a recovery path */
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] && m->keys[i] != (uintptr_t)-1) {
			size_t j = map_slot(m->keys[i], ncap);
			while (nk[j])
				j = (j + 1) & (ncap - 1);
			nk[j] = m->keys[i];
			nv[j] = m->vals[i];
		}
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
}

void sim_map_put(struct sim_map *m, uintptr_t key, void *val)
{
	if ((m->count + 1) * 2 > m->cap)
		map_grow(m);
	size_t i = map_slot(key, m->cap);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->count++;
	m->keys[i] = key;
	m->vals[i] = val;
}

/* Deletion re-inserts the rest of the cluster so lookups never need tombstones. */
void sim_map_del(struct sim_map *m, uintptr_t key)
{
	if (!m->cap)
		return;
	size_t i = map_slot(key, m->cap);
	while (m->keys[i] != key) {
		if (!m->keys[i])
			return;
		i = (i + 1) & (m->cap - 1);
	}
	m->keys[i] = 0;
	m->vals[i] = NULL;
	m->count--;
	for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
		uintptr_t k = m->keys[j];
		void *v = m->vals[j];
		m->keys[j] = 0;
		m->vals[j] = NULL;
		m->count--;
		sim_map_put(m, k, v);
	}
}

/* ------------------------------------------------------------------ config */

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end) {
		fprintf(stderr, "simgpu: ignoring %s=%s (not an unsigned integer)\n", name, s);
		return def;
	}
	return v;
}

static double env_gbps(const char *name, double def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	double v = strtod(s, &end);
	if (*end || !(v > 0)) {
		fprintf(stderr, "simgpu: ignoring %s=%s (not a positive number)\n", name, s);
		return def;
	}
	return v;
}

static void parse_kernel_overrides(const char *spec)
{
	/* "pattern:ns,pattern:ns"; pattern is a substring of the mangled name or "*". */
	while (spec && *spec && sim_cfg.n_overrides < SIM_MAX_KERNEL_OVERRIDES) {
		const char *comma = strchr(spec, ',');
		size_t len = comma ? (size_t)(comma - spec) : strlen(spec);
		const char *colon = memchr(spec, ':', len);
		if (colon && (size_t)(colon - spec) < sizeof(sim_cfg.overrides[0].pattern)) {
			int k = sim_cfg.n_overrides;
			memcpy(sim_cfg.overrides[k].pattern, spec, (size_t)(colon - spec));
			sim_cfg.overrides[k].pattern[colon - spec] = 0;
			char num[32] = {0};
			size_t nlen = len - (size_t)(colon - spec) - 1;
			if (nlen < sizeof(num)) {
				memcpy(num, colon + 1, nlen);
				char *end;
				unsigned long long v = strtoull(num, &end, 10);
				if (!*end && nlen) {
					sim_cfg.overrides[k].ns = v;
					sim_cfg.n_overrides++;
				} else {
					fprintf(stderr, "simgpu: ignoring SIMGPU_KERNEL_NS entry '%.*s'\n", (int)len, spec);
				}
			}
		} else if (len) {
			fprintf(stderr, "simgpu: ignoring SIMGPU_KERNEL_NS entry '%.*s'\n", (int)len, spec);
		}
		spec = comma ? comma + 1 : NULL;
	}
}

static void read_config(void)
{
	/* Defaults resemble an H100 SXM on PCIe Gen5 (see README.md). */
	sim_cfg.launch_ns = env_u64("SIMGPU_LAUNCH_NS", 2500);
	sim_cfg.queue_ns = env_u64("SIMGPU_QUEUE_NS", 3000);
	sim_cfg.kernel_base_ns = env_u64("SIMGPU_KERNEL_BASE_NS", 2000);
	sim_cfg.kernel_ns_per_block = env_u64("SIMGPU_KERNEL_NS_PER_BLOCK", 4);
	sim_cfg.h2d_gbps = env_gbps("SIMGPU_H2D_GBPS", 50.0);
	sim_cfg.d2h_gbps = env_gbps("SIMGPU_D2H_GBPS", 50.0);
	sim_cfg.pageable_gbps = env_gbps("SIMGPU_PAGEABLE_GBPS", 12.0);
	sim_cfg.d2d_gbps = env_gbps("SIMGPU_D2D_GBPS", 1500.0);
	sim_cfg.h2h_gbps = env_gbps("SIMGPU_H2H_GBPS", 10.0);
	sim_cfg.p2p_gbps = env_gbps("SIMGPU_P2P_GBPS", 400.0);
	sim_cfg.copy_latency_ns = env_u64("SIMGPU_COPY_LATENCY_NS", 1500);
	sim_cfg.memset_gbps = env_gbps("SIMGPU_MEMSET_GBPS", 2500.0);
	sim_cfg.memset_base_ns = env_u64("SIMGPU_MEMSET_BASE_NS", 1000);
	sim_cfg.malloc_ns = env_u64("SIMGPU_MALLOC_NS", 10000);
	sim_cfg.free_ns = env_u64("SIMGPU_FREE_NS", 5000);
	sim_cfg.sync_ns = env_u64("SIMGPU_SYNC_NS", 1000);
	sim_cfg.device_count = (int)env_u64("SIMGPU_DEVICE_COUNT", 1);
	if (sim_cfg.device_count > SIM_MAX_DEVICES)
		sim_cfg.device_count = SIM_MAX_DEVICES;
	sim_cfg.mem_limit = env_u64("SIMGPU_MEM_LIMIT", 8ull << 30);
	parse_kernel_overrides(getenv("SIMGPU_KERNEL_NS"));
	const char *truth = getenv("SIMGPU_TRUTH");
	if (truth && *truth && strlen(truth) < sizeof(sim_cfg.truth_path))
		strcpy(sim_cfg.truth_path, truth);
	sim_cfg.truth_unbuffered = env_u64("SIMGPU_TRUTH_UNBUFFERED", 0) != 0;
}

/* ------------------------------------------------------------------ state */

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define KERNEL_MAGIC 0x4b524e4cu
#define GRAPH_MAGIC 0x47524148u
#define EXEC_MAGIC 0x47455845u
#define NODE_REF_MAGIC 0x4e4f4445u
#define USER_OBJECT_MAGIC 0x55534f42u

/* The legacy stream's id mirrors what CUPTI usually reports for it. */
#define LEGACY_STREAM_ID 7
#define FIRST_STREAM_ID 13

struct sim_node; /* graph node */

struct sim_stream {
	uint32_t magic;
	uint32_t id;
	int device;
	unsigned flags;
	int priority;
	bool legacy, per_thread;
	uint64_t ready_ns;       /* virtual end of the last op enqueued */
	struct sim_graph *capture;
	struct sim_stream *next; /* all live streams */
};

struct sim_event {
	uint32_t magic;
	uint32_t id;
	unsigned flags;
	int device;
	bool recorded;
	uint64_t ts_ns;
	unsigned long long capture_id; /* last recorded into this capture (a fork point), else 0 */
};

struct sim_kernel {
	uint32_t magic;
	const void *host_fun;
	char *name;
};

enum node_kind { NODE_KERNEL, NODE_MEMSET, NODE_MEMCPY };
struct sim_node {
	enum node_kind kind;
	uint64_t id;             /* unique in the process, from 1: CUPTI's graphNodeId */
	struct sim_kernel *kernel;
	dim3 grid, block;
	uint32_t shmem;
	void *dst;
	const void *src;
	size_t bytes;
	int value;
	uint8_t copy_kind, src_mem, dst_mem;
};

/* A user object (cudaUserObjectCreate): destroyed when its last reference goes, the graphs' and
 * executable graphs' included. */
struct sim_user_object {
	uint32_t magic;
	unsigned refs;
	void *ptr;
	cudaHostFn_t destroy;
};

/* References a graph (or an executable graph) holds on user objects. */
struct sim_user_refs {
	struct sim_user_object **obj;
	unsigned *count;
	size_t n, cap;
};

/* A node handle given out by cudaGraphGetNodes: stable while its graph lives (nodes themselves are
 * values in a growing array). */
struct sim_node_ref {
	uint32_t magic;
	struct sim_graph *graph;
	size_t index;
};

struct sim_graph {
	uint32_t magic;
	uint32_t id;             /* unique in the process, from 1: CUPTI's graphId */
	struct sim_node *nodes;
	size_t n, cap;
	struct sim_stream *origin; /* the stream that began the capture still going on, else NULL */
	unsigned long long capture_id; /* that capture's id (cudaStreamGetCaptureInfo) */
	struct sim_node_ref **refs;
	size_t n_refs;
	struct sim_user_refs users;
};

struct sim_exec {
	uint32_t magic;
	uint32_t id;             /* unique in the process, from 1 (cuptiGetGraphExecId) */
	uint32_t graph_id;       /* the graph it was instantiated from */
	struct sim_node *nodes;
	size_t n;
	struct sim_user_refs users;
};

struct sim_alloc {
	uintptr_t base;
	size_t size;
	uint8_t mem_kind;  /* device, pinned, managed */
	uint8_t owned;     /* OWNED_* */
	int device;
};

/* Who owns the memory of an allocation-table entry. */
#define OWNED_REGISTERED 0 /* cudaHostRegister: the program's */
#define OWNED_ALLOC 1      /* ours, from a malloc API */
#define OWNED_SYMBOL 2     /* ours, a __device__ variable's storage */

struct sim_symbol {
	const void *host_var;
	char *name;
	void *storage;
	size_t size;
};

static struct sim_stream *streams;                  /* live streams, linked */
static struct sim_stream legacy[SIM_MAX_DEVICES];
static struct sim_map stream_map, event_map, kernel_by_fun, kernel_by_handle, symbol_map, graph_map, exec_map;
static struct sim_map node_ref_map, user_object_map;
/* Captures going on, by their capture id (what cudaStreamGetCaptureInfo reports): an event
 * recorded in a capture names it by id, so a wait after the capture ended finds nothing. */
static struct sim_map capturing_map;
static unsigned long long next_capture_id = 1;
static void capture_node(struct sim_graph *g, struct sim_node node);
/* Graph, executable graph and node ids (sim_lock). */
static uint32_t next_graph_id = 1, next_exec_id = 1;
static uint64_t next_node_id = 1;
static struct sim_alloc *allocs;                     /* sorted by base */
static size_t n_allocs, cap_allocs;
static uint64_t bytes_allocated;
static uint32_t next_stream_id = FIRST_STREAM_ID, next_event_id = 1;
static atomic_uint next_correlation = 1;
static bool initialized;

/* Per-thread state in one block: one TLS lookup per call in a shared library. */
static __thread struct sim_thread {
	int cur_device;
	cudaError_t last_error;
	int call_cfg_depth;
	struct sim_stream *per_thread_stream[SIM_MAX_DEVICES];
	struct { dim3 grid, block; size_t shmem; cudaStream_t stream; } call_cfg[16];
	/* Open static-runtime call (simgpu_static_begin): its op, logged at simgpu_static_end. */
	bool in_static;
	struct simgpu_op static_op;
	/* > 0 while a driver entry point (libcuda.so.1 stand-in) runs on this thread. */
	int in_driver;
	/* simgpu_next_kernel_ns: duration of this thread's next launch (0: the usual model). */
	uint64_t next_kernel_ns;
} thr;
#define cur_device (thr.cur_device)
#define last_error (thr.last_error)
#define per_thread_stream (thr.per_thread_stream)
#define call_cfg (thr.call_cfg)
#define call_cfg_depth (thr.call_cfg_depth)

static void at_fork_prepare(void) { pthread_mutex_lock(&sim_lock); }
static void at_fork_parent(void) { pthread_mutex_unlock(&sim_lock); }
static void at_fork_child(void)
{
	pthread_mutex_init(&sim_lock, NULL);
	sim_truth_after_fork_child();
}

__attribute__((constructor)) static void simgpu_init(void)
{
	if (initialized)
		return;
	initialized = true;
	read_config();
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		legacy[d].magic = STREAM_MAGIC;
		legacy[d].id = LEGACY_STREAM_ID;
		legacy[d].device = d;
		legacy[d].legacy = true;
	}
	pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
}

static inline cudaError_t set_error(cudaError_t e)
{
	if (e != cudaSuccess)
		last_error = e;
	return e;
}

static inline uint32_t new_correlation(void)
{
	return atomic_fetch_add_explicit(&next_correlation, 1, memory_order_relaxed);
}

static void op_init(struct simgpu_op *op, enum simgpu_op_kind kind, const char *api, uint64_t host_start)
{
	memset(op, 0, sizeof(*op));
	op->kind = (uint16_t)kind;
	op->api = api;
	op->device = (uint32_t)cur_device;
	op->host_start_ns = host_start;
	op->correlation_id = new_correlation();
	if (thr.in_driver) {
		op->api_domain = SIMGPU_API_DRIVER;
		/* Inside a static runtime call: the device work is the runtime call's, the API record ours. */
		if (thr.in_static) {
			op->api_corr = op->correlation_id;
			op->correlation_id = thr.static_op.correlation_id;
		}
	}
	sim_ext_current(op);
}

uint32_t simgpu_static_begin(const char *api)
{
	if (thr.in_static)
		return thr.static_op.correlation_id;
	op_init(&thr.static_op, SIMGPU_OP_API, api, sim_now());
	thr.static_op.api_domain = SIMGPU_API_RUNTIME;
	thr.in_static = true;
	return thr.static_op.correlation_id;
}

void simgpu_static_end(int result)
{
	if (!thr.in_static)
		return;
	thr.in_static = false;
	struct simgpu_op *op = &thr.static_op;
	op->host_end_ns = sim_now();
	op->start_ns = op->host_start_ns;
	op->end_ns = op->host_end_ns;
	op->result = result;
	sim_emit(op);
}

void simgpu_driver_enter(void) { thr.in_driver++; }
void simgpu_driver_leave(void) { thr.in_driver--; }

/* Finishes a host-only op (its times are the call's) and logs it. */
static cudaError_t finish_host_op(struct simgpu_op *op, cudaError_t result)
{
	op->host_end_ns = sim_now();
	op->start_ns = op->host_start_ns;
	op->end_ns = op->host_end_ns;
	op->result = result;
	op->gpu = 0;
	sim_emit(op);
	return set_error(result);
}

/* ------------------------------------------------------------------ allocations (sim_lock held) */

static struct sim_alloc *alloc_find(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	size_t lo = 0, hi = n_allocs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (allocs[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	struct sim_alloc *e = &allocs[lo - 1];
	if (a < e->base + (e->size ? e->size : 1))
		return e;
	return NULL;
}

static void alloc_insert(uintptr_t base, size_t size, uint8_t mem_kind, uint8_t owned, int device)
{
	if (n_allocs == cap_allocs) {
		size_t ncap = cap_allocs ? cap_allocs * 2 : 256;
		struct sim_alloc *n = realloc(allocs, ncap * sizeof(*n));
		if (!n)
			abort();
		allocs = n;
		cap_allocs = ncap;
	}
	size_t i = n_allocs;
	while (i > 0 && allocs[i - 1].base > base) {
		allocs[i] = allocs[i - 1];
		i--;
	}
	allocs[i] = (struct sim_alloc){ .base = base, .size = size, .mem_kind = mem_kind, .owned = owned, .device = device };
	n_allocs++;
}

static void alloc_remove(struct sim_alloc *e)
{
	size_t i = (size_t)(e - allocs);
	memmove(&allocs[i], &allocs[i + 1], (n_allocs - i - 1) * sizeof(*allocs));
	n_allocs--;
}

/* Memory kind of any pointer: ours, or pageable host memory. */
static uint8_t mem_kind_of(const void *p)
{
	struct sim_alloc *e = alloc_find(p);
	return e ? e->mem_kind : SIMGPU_MEM_PAGEABLE;
}

static bool is_device_side(uint8_t mk) { return mk == SIMGPU_MEM_DEVICE || mk == SIMGPU_MEM_MANAGED; }

/* True when [p, p+n) lies inside one live device-side allocation. */
static bool device_range_ok(const void *p, size_t n)
{
	struct sim_alloc *e = alloc_find(p);
	if (!e || !is_device_side(e->mem_kind))
		return false;
	return (uintptr_t)p + n <= e->base + e->size;
}

/* For the library stand-ins, which compute on the host: whether a matrix they were handed lies in device
 * memory (a pointer array written by a kernel holds no pointers, since kernels compute nothing). */
EXPORT int simgpu_device_range_ok(const void *p, size_t n)
{
	pthread_mutex_lock(&sim_lock);
	bool ok = device_range_ok(p, n ? n : 1);
	pthread_mutex_unlock(&sim_lock);
	return ok;
}

/* ------------------------------------------------------------------ streams (sim_lock held) */

static struct sim_stream *per_thread_default(int dev)
{
	struct sim_stream *s = per_thread_stream[dev];
	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->magic = STREAM_MAGIC;
	s->id = next_stream_id++;
	s->device = dev;
	s->per_thread = true;
	s->next = streams;
	streams = s;
	per_thread_stream[dev] = s;
	return s;
}

/* Resolves a cudaStream_t as the program passed it; NULL when invalid. */
static struct sim_stream *resolve_stream(cudaStream_t h, bool ptsz)
{
	if (h == NULL)
		return ptsz ? per_thread_default(cur_device) : &legacy[cur_device];
	if (h == cudaStreamLegacy)
		return &legacy[cur_device];
	if (h == cudaStreamPerThread)
		return per_thread_default(cur_device);
	return sim_map_get(&stream_map, (uintptr_t)h);
}

/* Places an op of `dur` ns on stream s (enqueued at `enq`): start is the
 * latest of the stream's previous end, the enqueue time plus queue latency,
 * and the legacy default stream rules:
 *  - an op on the legacy stream waits for all blocking streams of its device;
 *  - an op on a blocking stream waits for the legacy stream. */
static uint64_t schedule(struct sim_stream *s, uint64_t enq, uint64_t dur, uint64_t *end_out)
{
	uint64_t start = enq + sim_cfg.queue_ns;
	if (s->ready_ns > start)
		start = s->ready_ns;
	if (s->legacy) {
		for (struct sim_stream *t = streams; t; t = t->next)
			if (t->device == s->device && !(t->flags & cudaStreamNonBlocking) && t->ready_ns > start)
				start = t->ready_ns;
	} else if (!(s->flags & cudaStreamNonBlocking)) {
		if (legacy[s->device].ready_ns > start)
			start = legacy[s->device].ready_ns;
	}
	s->ready_ns = start + dur;
	*end_out = start + dur;
	return start;
}

/* Work still queued on destroyed streams, per device: the device is not idle before it ends. */
static uint64_t orphan_ready[SIM_MAX_DEVICES];

static uint64_t device_ready(int dev)
{
	uint64_t r = legacy[dev].ready_ns > orphan_ready[dev] ? legacy[dev].ready_ns : orphan_ready[dev];
	for (struct sim_stream *t = streams; t; t = t->next)
		if (t->device == dev && t->ready_ns > r)
			r = t->ready_ns;
	return r;
}

/* What waiting on the legacy stream covers: its own work and, by the legacy
 * rule, the work of every blocking stream of the device. */
static uint64_t legacy_ready(int dev)
{
	uint64_t r = legacy[dev].ready_ns;
	for (struct sim_stream *t = streams; t; t = t->next)
		if (t->device == dev && !(t->flags & cudaStreamNonBlocking) && t->ready_ns > r)
			r = t->ready_ns;
	return r;
}

/* ------------------------------------------------------------------ durations */

static uint64_t kernel_duration(const struct sim_kernel *k, dim3 grid)
{
	for (int i = 0; i < sim_cfg.n_overrides; i++) {
		const char *pat = sim_cfg.overrides[i].pattern;
		if ((pat[0] == '*' && pat[1] == 0) || (k && k->name && strstr(k->name, pat)))
			return sim_cfg.overrides[i].ns;
	}
	uint64_t blocks = (uint64_t)grid.x * grid.y * grid.z;
	return sim_cfg.kernel_base_ns + blocks * sim_cfg.kernel_ns_per_block;
}

static uint64_t bytes_ns(size_t bytes, double gbps)
{
	/* GB/s == bytes per ns */
	return (uint64_t)((double)bytes / gbps + 0.5);
}

static uint64_t copy_duration(uint8_t ck, uint8_t src_mem, uint8_t dst_mem, size_t bytes)
{
	double gbps;
	switch (ck) {
	case SIMGPU_COPY_H2D: gbps = src_mem == SIMGPU_MEM_PAGEABLE ? sim_cfg.pageable_gbps : sim_cfg.h2d_gbps; break;
	case SIMGPU_COPY_D2H: gbps = dst_mem == SIMGPU_MEM_PAGEABLE ? sim_cfg.pageable_gbps : sim_cfg.d2h_gbps; break;
	case SIMGPU_COPY_D2D: gbps = sim_cfg.d2d_gbps; break;
	case SIMGPU_COPY_P2P: gbps = sim_cfg.p2p_gbps; break;
	default: gbps = sim_cfg.h2h_gbps; break;
	}
	return sim_cfg.copy_latency_ns + bytes_ns(bytes, gbps);
}

static uint64_t memset_duration(size_t bytes)
{
	return sim_cfg.memset_base_ns + bytes_ns(bytes, sim_cfg.memset_gbps);
}

/* ------------------------------------------------------------------ registration */

/* Fat binary handles: unique, stable cells kept on a list (so they stay
 * reachable until unregistered). */
struct fatbin_handle {
	void *fatbin;                 /* first member: the handle points here */
	struct fatbin_handle *next;
};
static struct fatbin_handle *fatbins;

EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
	simgpu_init();
	struct fatbin_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->fatbin = fatCubin;
	pthread_mutex_lock(&sim_lock);
	h->next = fatbins;
	fatbins = h;
	pthread_mutex_unlock(&sim_lock);
	return &h->fatbin;
}

EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
	/* Kernels stay registered: some programs launch from atexit handlers. */
	pthread_mutex_lock(&sim_lock);
	for (struct fatbin_handle **pp = &fatbins; *pp; pp = &(*pp)->next) {
		if (&(*pp)->fatbin == fatCubinHandle) {
			struct fatbin_handle *h = *pp;
			*pp = h->next;
			free(h);
			break;
		}
	}
	pthread_mutex_unlock(&sim_lock);
}

EXPORT char __cudaInitModule(void **fatCubinHandle) { (void)fatCubinHandle; return 1; }

EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
	const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
	simgpu_init();
	struct sim_kernel *k = calloc(1, sizeof(*k));
	if (!k)
		return;
	k->magic = KERNEL_MAGIC;
	k->host_fun = hostFun;
	k->name = strdup(deviceFun ? deviceFun : (deviceName ? deviceName : "?"));
	pthread_mutex_lock(&sim_lock);
	sim_map_put(&kernel_by_fun, (uintptr_t)hostFun, k);
	sim_map_put(&kernel_by_handle, (uintptr_t)k, k);
	pthread_mutex_unlock(&sim_lock);
}

EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName,
	int ext, size_t size, int constant, int global)
{
	simgpu_init();
	struct sim_symbol *sym = calloc(1, sizeof(*sym));
	if (!sym)
		return;
	size_t alloc_size = size ? size : 1;
	void *storage = NULL;
	if (posix_memalign(&storage, 256, (alloc_size + 255) & ~(size_t)255) != 0) {
		free(sym);
		return;
	}
	/* The host shadow carries the variable's static initializer. */
	memcpy(storage, hostVar, size);
	sym->host_var = hostVar;
	sym->name = strdup(deviceName ? deviceName : "?");
	sym->storage = storage;
	sym->size = size;
	pthread_mutex_lock(&sim_lock);
	sim_map_put(&symbol_map, (uintptr_t)hostVar, sym);
	alloc_insert((uintptr_t)storage, alloc_size, SIMGPU_MEM_DEVICE, OWNED_SYMBOL, 0);
	pthread_mutex_unlock(&sim_lock);
}

EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
	const char *deviceName, int ext, size_t size, int constant, int global)
{
	(void)fatCubinHandle;
}

EXPORT void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName, char *hostVar, size_t size)
{
	(void)fatCubinHandle;
}

EXPORT void __cudaRegisterUnifiedTable(void *table) { (void)table; }

EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream)
{
	if (call_cfg_depth >= (int)(sizeof(call_cfg) / sizeof(call_cfg[0])))
		return 1;
	call_cfg[call_cfg_depth].grid = gridDim;
	call_cfg[call_cfg_depth].block = blockDim;
	call_cfg[call_cfg_depth].shmem = sharedMem;
	call_cfg[call_cfg_depth].stream = stream;
	call_cfg_depth++;
	return 0;
}

EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
	if (call_cfg_depth == 0)
		return set_error(cudaErrorMissingConfiguration);
	call_cfg_depth--;
	*gridDim = call_cfg[call_cfg_depth].grid;
	*blockDim = call_cfg[call_cfg_depth].block;
	*sharedMem = call_cfg[call_cfg_depth].shmem;
	*(cudaStream_t *)stream = call_cfg[call_cfg_depth].stream;
	return cudaSuccess;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
	if (!kernel)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_kernel *k = sim_map_get(&kernel_by_fun, (uintptr_t)hostFun);
	pthread_mutex_unlock(&sim_lock);
	if (!k)
		return set_error(cudaErrorInvalidDeviceFunction);
	*kernel = (cudaKernel_t)k;
	return cudaSuccess;
}

EXPORT cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
	return __cudaGetKernel(kernelPtr, entryFuncAddr);
}

EXPORT cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
	cudaKernel_t k;
	cudaError_t e = __cudaGetKernel(&k, symbolPtr);
	if (e == cudaSuccess && functionPtr)
		*functionPtr = (cudaFunction_t)k;
	return e;
}

/* ------------------------------------------------------------------ launches */

static cudaError_t check_geometry(dim3 g, dim3 b)
{
	if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z)
		return cudaErrorInvalidConfiguration;
	if (b.x > 1024 || b.y > 1024 || b.z > 64 || (uint64_t)b.x * b.y * b.z > 1024)
		return cudaErrorInvalidConfiguration;
	if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
		return cudaErrorInvalidConfiguration;
	return cudaSuccess;
}

/* The one launch path.  `k` may be NULL (unknown function): an error. */
static cudaError_t launch(const char *api, struct sim_kernel *k, dim3 grid, dim3 block, size_t shmem,
	cudaStream_t hs, bool ptsz)
{
	uint64_t t0 = sim_now();
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_KERNEL, api, t0);
	op.grid[0] = grid.x; op.grid[1] = grid.y; op.grid[2] = grid.z;
	op.block[0] = block.x; op.block[1] = block.y; op.block[2] = block.z;
	op.shared_mem = (uint32_t)shmem;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	op.is_async = 1;
	if (k)
		op.name = k->name;
	uint64_t enq = t0;
	if (sim_cfg.launch_ns) {
		sim_spin_until(t0 + sim_cfg.launch_ns);
		enq = sim_now();
	}
	if (!k)
		return finish_host_op(&op, cudaErrorInvalidDeviceFunction);
	cudaError_t e = check_geometry(grid, block);
	if (e != cudaSuccess)
		return finish_host_op(&op, e);
	if (shmem > 232448)
		return finish_host_op(&op, cudaErrorInvalidValue);

	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (!s) {
		pthread_mutex_unlock(&sim_lock);
		return finish_host_op(&op, cudaErrorInvalidResourceHandle);
	}
	op.stream_id = s->id;
	op.device = (uint32_t)s->device;
	if (s->capture) {
		capture_node(s->capture, (struct sim_node){ .kind = NODE_KERNEL, .kernel = k, .grid = grid,
			.block = block, .shmem = (uint32_t)shmem });
		pthread_mutex_unlock(&sim_lock);
		op.captured = 1;
		return finish_host_op(&op, cudaSuccess);
	}
	uint64_t dur = thr.next_kernel_ns ? thr.next_kernel_ns : kernel_duration(k, grid);
	thr.next_kernel_ns = 0;
	op.start_ns = schedule(s, enq, dur, &op.end_ns);
	pthread_mutex_unlock(&sim_lock);
	/* Clock reads are the main cost of a launch here: skip one nobody reads. */
	op.host_end_ns = sim_emit_wanted() ? sim_now() : enq;
	op.gpu = 1;
	op.result = cudaSuccess;
	sim_emit(&op);
	return cudaSuccess;
}

static struct sim_kernel *kernel_of_fun(const void *func)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_kernel *k = sim_map_get(&kernel_by_fun, (uintptr_t)func);
	if (!k)
		k = sim_map_get(&kernel_by_handle, (uintptr_t)func);
	pthread_mutex_unlock(&sim_lock);
	return k;
}

static struct sim_kernel *kernel_of_handle(cudaKernel_t h)
{
	/* Kernels are never unregistered, so a handle found once stays valid:
	 * remember the last one per thread and skip the lock on repeats. */
	static __thread cudaKernel_t last_valid;
	if (h && h == last_valid)
		return (struct sim_kernel *)h;
	pthread_mutex_lock(&sim_lock);
	struct sim_kernel *k = sim_map_get(&kernel_by_handle, (uintptr_t)h);
	pthread_mutex_unlock(&sim_lock);
	if (k)
		last_valid = h;
	return k;
}

EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
	cudaStream_t stream)
{
	return launch("__cudaLaunchKernel", kernel_of_handle(kernel), gridDim, blockDim, sharedMem, stream, false);
}

EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
	size_t sharedMem, cudaStream_t stream)
{
	return launch("__cudaLaunchKernel_ptsz", kernel_of_handle(kernel), gridDim, blockDim, sharedMem, stream, true);
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
	cudaStream_t stream)
{
	return launch("cudaLaunchKernel", kernel_of_fun(func), gridDim, blockDim, sharedMem, stream, false);
}

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
	size_t sharedMem, cudaStream_t stream)
{
	return launch("cudaLaunchKernel_ptsz", kernel_of_fun(func), gridDim, blockDim, sharedMem, stream, true);
}

EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
	size_t sharedMem, cudaStream_t stream)
{
	return launch("cudaLaunchCooperativeKernel", kernel_of_fun(func), gridDim, blockDim, sharedMem, stream, false);
}

EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
	size_t sharedMem, cudaStream_t stream)
{
	return launch("cudaLaunchCooperativeKernel_ptsz", kernel_of_fun(func), gridDim, blockDim, sharedMem, stream, true);
}

EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	if (!config)
		return set_error(cudaErrorInvalidValue);
	return launch("cudaLaunchKernelExC", kernel_of_fun(func), config->gridDim, config->blockDim,
		config->dynamicSmemBytes, config->stream, false);
}

EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	if (!config)
		return set_error(cudaErrorInvalidValue);
	return launch("cudaLaunchKernelExC_ptsz", kernel_of_fun(func), config->gridDim, config->blockDim,
		config->dynamicSmemBytes, config->stream, true);
}

/* ------------------------------------------------------------------ memory */

static cudaError_t do_alloc(const char *api, void **ptr, size_t size, uint8_t mem_kind, cudaStream_t hs, bool async)
{
	uint64_t t0 = sim_now();
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_MALLOC, api, t0);
	op.mem_kind = mem_kind;
	op.bytes = size;
	op.is_async = async;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	if (!ptr)
		return finish_host_op(&op, cudaErrorInvalidValue);
	sim_spin_until(t0 + sim_cfg.malloc_ns);
	if (async) {
		pthread_mutex_lock(&sim_lock);
		struct sim_stream *s = resolve_stream(hs, false);
		if (s)
			op.stream_id = s->id;
		pthread_mutex_unlock(&sim_lock);
		if (!s)
			return finish_host_op(&op, cudaErrorInvalidResourceHandle);
	}
	if (size == 0) {
		*ptr = NULL;
		return finish_host_op(&op, cudaSuccess);
	}
	pthread_mutex_lock(&sim_lock);
	bool over = bytes_allocated + size > sim_cfg.mem_limit;
	pthread_mutex_unlock(&sim_lock);
	void *p = NULL;
	size_t rounded = (size + 255) & ~(size_t)255;
	if (over || rounded < size || posix_memalign(&p, 256, rounded) != 0) {
		*ptr = NULL;
		return finish_host_op(&op, cudaErrorMemoryAllocation);
	}
	/* Zeroed so programs print the same thing on every run. */
	memset(p, 0, rounded);
	pthread_mutex_lock(&sim_lock);
	alloc_insert((uintptr_t)p, size, mem_kind, OWNED_ALLOC, cur_device);
	bytes_allocated += size;
	pthread_mutex_unlock(&sim_lock);
	*ptr = p;
	op.ptr = (uint64_t)(uintptr_t)p;
	return finish_host_op(&op, cudaSuccess);
}

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	return do_alloc("cudaMalloc", devPtr, size, SIMGPU_MEM_DEVICE, NULL, false);
}

EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	return do_alloc("cudaMallocManaged", devPtr, size, SIMGPU_MEM_MANAGED, NULL, false);
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return do_alloc("cudaMallocHost", ptr, size, SIMGPU_MEM_PINNED, NULL, false);
}

EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	return do_alloc("cudaHostAlloc", pHost, size, SIMGPU_MEM_PINNED, NULL, false);
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	return do_alloc("cudaMallocAsync", devPtr, size, SIMGPU_MEM_DEVICE, hStream, true);
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	return do_alloc("cudaMallocAsync_ptsz", devPtr, size, SIMGPU_MEM_DEVICE, hStream, true);
}

EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	if (!pitch)
		return set_error(cudaErrorInvalidValue);
	size_t p = (width + 511) & ~(size_t)511;
	*pitch = p;
	return do_alloc("cudaMallocPitch", devPtr, p * height, SIMGPU_MEM_DEVICE, NULL, false);
}

/* Free paths.  `want` is the memory kind the API frees (device APIs also
 * accept managed memory). */
static cudaError_t do_free(const char *api, void *ptr, bool host_api, cudaStream_t hs, bool async)
{
	uint64_t t0 = sim_now();
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_FREE, api, t0);
	op.ptr = (uint64_t)(uintptr_t)ptr;
	op.is_async = async;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	op.mem_kind = host_api ? SIMGPU_MEM_PINNED : SIMGPU_MEM_DEVICE;
	if (async) {
		pthread_mutex_lock(&sim_lock);
		struct sim_stream *s = resolve_stream(hs, false);
		if (s)
			op.stream_id = s->id;
		pthread_mutex_unlock(&sim_lock);
		if (!s)
			return finish_host_op(&op, cudaErrorInvalidResourceHandle);
	}
	if (!ptr)
		return finish_host_op(&op, cudaSuccess);
	if (!async && !host_api) {
		/* cudaFree implicitly synchronizes the device. */
		pthread_mutex_lock(&sim_lock);
		uint64_t until = device_ready(cur_device);
		pthread_mutex_unlock(&sim_lock);
		sim_wait_until(until);
	}
	sim_spin_until(sim_now() + sim_cfg.free_ns);
	pthread_mutex_lock(&sim_lock);
	struct sim_alloc *e = alloc_find(ptr);
	bool ok = e && e->base == (uintptr_t)ptr && e->owned == OWNED_ALLOC &&
		(host_api ? e->mem_kind == SIMGPU_MEM_PINNED : is_device_side(e->mem_kind));
	void *mem = NULL;
	if (ok) {
		op.bytes = e->size;
		op.mem_kind = e->mem_kind;
		bytes_allocated -= e->size;
		mem = (void *)e->base;
		alloc_remove(e);
	}
	pthread_mutex_unlock(&sim_lock);
	if (!ok)
		return finish_host_op(&op, cudaErrorInvalidValue);
	free(mem);
	return finish_host_op(&op, cudaSuccess);
}

EXPORT cudaError_t cudaFree(void *devPtr) { return do_free("cudaFree", devPtr, false, NULL, false); }
EXPORT cudaError_t cudaFreeHost(void *ptr) { return do_free("cudaFreeHost", ptr, true, NULL, false); }
EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	return do_free("cudaFreeAsync", devPtr, false, hStream, true);
}
EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
	return do_free("cudaFreeAsync_ptsz", devPtr, false, hStream, true);
}

EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	if (!ptr || !size)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	cudaError_t e = cudaSuccess;
	if (alloc_find(ptr))
		e = cudaErrorHostMemoryAlreadyRegistered;
	else
		alloc_insert((uintptr_t)ptr, size, SIMGPU_MEM_PINNED, OWNED_REGISTERED, cur_device);
	pthread_mutex_unlock(&sim_lock);
	return set_error(e);
}

EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_alloc *e = alloc_find(ptr);
	cudaError_t r = cudaSuccess;
	if (!e || e->owned != OWNED_REGISTERED || e->base != (uintptr_t)ptr)
		r = cudaErrorHostMemoryNotRegistered;
	else
		alloc_remove(e);
	pthread_mutex_unlock(&sim_lock);
	return set_error(r);
}

EXPORT cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	if (!pDevice)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	uint8_t mk = mem_kind_of(pHost);
	pthread_mutex_unlock(&sim_lock);
	if (mk != SIMGPU_MEM_PINNED)
		return set_error(cudaErrorInvalidValue);
	*pDevice = pHost;
	return cudaSuccess;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	pthread_mutex_lock(&sim_lock);
	uint64_t used = bytes_allocated;
	pthread_mutex_unlock(&sim_lock);
	if (total)
		*total = (size_t)sim_cfg.mem_limit;
	if (free_bytes)
		*free_bytes = (size_t)(sim_cfg.mem_limit - used);
	return cudaSuccess;
}

EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
	if (!attributes)
		return set_error(cudaErrorInvalidValue);
	memset(attributes, 0, sizeof(*attributes));
	pthread_mutex_lock(&sim_lock);
	struct sim_alloc *e = alloc_find(ptr);
	struct sim_alloc copy = e ? *e : (struct sim_alloc){ 0 };
	pthread_mutex_unlock(&sim_lock);
	if (!e) {
		attributes->type = cudaMemoryTypeUnregistered;
		attributes->device = -2;
		return cudaSuccess;
	}
	attributes->device = copy.device;
	switch (copy.mem_kind) {
	case SIMGPU_MEM_DEVICE:
		attributes->type = cudaMemoryTypeDevice;
		attributes->devicePointer = (void *)ptr;
		break;
	case SIMGPU_MEM_MANAGED:
		attributes->type = cudaMemoryTypeManaged;
		attributes->devicePointer = (void *)ptr;
		attributes->hostPointer = (void *)ptr;
		break;
	default:
		attributes->type = cudaMemoryTypeHost;
		attributes->devicePointer = (void *)ptr;
		attributes->hostPointer = (void *)ptr;
		break;
	}
	return cudaSuccess;
}

/* ------------------------------------------------------------------ copies and memsets */

/* Resolves the direction of a copy and validates the device side(s).
 * Caller holds sim_lock. */
static cudaError_t classify_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	uint8_t *ck, uint8_t *src_mem, uint8_t *dst_mem)
{
	if ((unsigned)kind > cudaMemcpyDefault)
		return cudaErrorInvalidMemcpyDirection;
	uint8_t sm = mem_kind_of(src), dm = mem_kind_of(dst);
	bool sdev = is_device_side(sm), ddev = is_device_side(dm);
	switch (kind) {
	case cudaMemcpyHostToHost: *ck = SIMGPU_COPY_H2H; break;
	case cudaMemcpyHostToDevice: *ck = SIMGPU_COPY_H2D; break;
	case cudaMemcpyDeviceToHost: *ck = SIMGPU_COPY_D2H; break;
	case cudaMemcpyDeviceToDevice: *ck = SIMGPU_COPY_D2D; break;
	default:
		*ck = sdev ? (ddev ? SIMGPU_COPY_D2D : SIMGPU_COPY_D2H) : (ddev ? SIMGPU_COPY_H2D : SIMGPU_COPY_H2H);
		break;
	}
	*src_mem = sm;
	*dst_mem = dm;
	if (count == 0)
		return cudaSuccess;
	if (!src || !dst)
		return cudaErrorInvalidValue;
	bool need_src_dev = *ck == SIMGPU_COPY_D2H || *ck == SIMGPU_COPY_D2D;
	bool need_dst_dev = *ck == SIMGPU_COPY_H2D || *ck == SIMGPU_COPY_D2D;
	if (need_src_dev && !device_range_ok(src, count))
		return cudaErrorInvalidValue;
	if (need_dst_dev && !device_range_ok(dst, count))
		return cudaErrorInvalidValue;
	return cudaSuccess;
}

static void capture_node(struct sim_graph *g, struct sim_node node)
{
	node.id = next_node_id++;
	if (g->n == g->cap) {
		size_t ncap = g->cap ? g->cap * 2 : 16;
		struct sim_node *nn = realloc(g->nodes, ncap * sizeof(*nn));
		if (!nn)
			abort();
		g->nodes = nn;
		g->cap = ncap;
	}
	g->nodes[g->n++] = node;
}

/* The one copy path (1D).  `sync_api`: a non-Async API, which returns only
 * when the copy is done (except device-to-device).  Async copies involving
 * pageable host memory are synchronous too, as in CUDA. */
static cudaError_t copy_common(const char *api, void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	cudaStream_t hs, bool ptsz, bool sync_api, size_t rows, size_t dpitch, size_t spitch, uint8_t force_kind)
{
	uint64_t t0 = sim_now();
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_MEMCPY, api, t0);
	size_t total = count * (rows ? rows : 1);
	op.bytes = total;
	op.ptr = (uint64_t)(uintptr_t)dst;
	op.ptr2 = (uint64_t)(uintptr_t)src;
	op.is_async = !sync_api;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	if (!sync_api)
		sim_spin_until(t0 + sim_cfg.launch_ns);

	pthread_mutex_lock(&sim_lock);
	uint8_t ck = 0, sm = 0, dm = 0;
	cudaError_t e;
	if (rows) {
		/* 2D: kinds first, then each device side against its own pitched extent. */
		e = classify_copy(dst, src, 0, kind, &ck, &sm, &dm);
		if (e == cudaSuccess && (count > dpitch || count > spitch))
			e = cudaErrorInvalidPitchValue;
		if (e == cudaSuccess && total) {
			bool src_dev = ck == SIMGPU_COPY_D2H || ck == SIMGPU_COPY_D2D;
			bool dst_dev = ck == SIMGPU_COPY_H2D || ck == SIMGPU_COPY_D2D;
			if (!src || !dst)
				e = cudaErrorInvalidValue;
			else if (src_dev && !device_range_ok(src, spitch * (rows - 1) + count))
				e = cudaErrorInvalidValue;
			else if (dst_dev && !device_range_ok(dst, dpitch * (rows - 1) + count))
				e = cudaErrorInvalidValue;
		}
	} else {
		e = classify_copy(dst, src, count, kind, &ck, &sm, &dm);
	}
	if (force_kind && e == cudaSuccess)
		ck = force_kind;
	op.copy_kind = ck;
	op.mem_kind = sm;
	op.dst_mem_kind = dm;
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (e == cudaSuccess && !s)
		e = cudaErrorInvalidResourceHandle;
	if (s) {
		op.stream_id = s->id;
		op.device = (uint32_t)s->device;
	}
	if (e != cudaSuccess || total == 0) {
		pthread_mutex_unlock(&sim_lock);
		return finish_host_op(&op, e);
	}
	if (s->capture) {
		if (rows) {
			pthread_mutex_unlock(&sim_lock);
			return finish_host_op(&op, cudaErrorStreamCaptureUnsupported);
		}
		capture_node(s->capture, (struct sim_node){ .kind = NODE_MEMCPY, .dst = dst, .src = src, .bytes = count,
			.copy_kind = ck, .src_mem = sm, .dst_mem = dm });
		pthread_mutex_unlock(&sim_lock);
		op.captured = 1;
		return finish_host_op(&op, cudaSuccess);
	}
	/* The bytes move now; the timeline says when the device did it. */
	if (rows) {
		for (size_t r = 0; r < rows; r++)
			memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, count);
	} else {
		memmove(dst, src, count);
	}
	uint64_t enq = sim_now();
	op.start_ns = schedule(s, enq, copy_duration(ck, sm, dm, total), &op.end_ns);
	pthread_mutex_unlock(&sim_lock);

	bool host_side_pageable = (ck == SIMGPU_COPY_H2D && sm == SIMGPU_MEM_PAGEABLE) ||
		(ck == SIMGPU_COPY_D2H && dm == SIMGPU_MEM_PAGEABLE) || ck == SIMGPU_COPY_H2H;
	bool waits = sync_api ? (ck != SIMGPU_COPY_D2D && ck != SIMGPU_COPY_P2P) : host_side_pageable;
	if (waits)
		sim_wait_until(op.end_ns);
	op.host_end_ns = sim_now();
	op.gpu = 1;
	op.result = cudaSuccess;
	sim_emit(&op);
	return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return copy_common("cudaMemcpy", dst, src, count, kind, NULL, false, true, 0, 0, 0, 0);
}
EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return copy_common("cudaMemcpy_ptds", dst, src, count, kind, NULL, true, true, 0, 0, 0, 0);
}
EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	cudaStream_t stream)
{
	return copy_common("cudaMemcpyAsync", dst, src, count, kind, stream, false, false, 0, 0, 0, 0);
}
EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	cudaStream_t stream)
{
	return copy_common("cudaMemcpyAsync_ptsz", dst, src, count, kind, stream, true, false, 0, 0, 0, 0);
}
EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
	size_t height, enum cudaMemcpyKind kind)
{
	return copy_common("cudaMemcpy2D", dst, src, width, kind, NULL, false, true, height ? height : 0, dpitch,
		spitch, 0);
}
EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
	size_t height, enum cudaMemcpyKind kind)
{
	return copy_common("cudaMemcpy2D_ptds", dst, src, width, kind, NULL, true, true, height, dpitch, spitch, 0);
}
EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
	size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return copy_common("cudaMemcpy2DAsync", dst, src, width, kind, stream, false, false, height, dpitch, spitch, 0);
}
EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
	size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return copy_common("cudaMemcpy2DAsync_ptsz", dst, src, width, kind, stream, true, false, height, dpitch,
		spitch, 0);
}

static cudaError_t peer_copy(const char *api, void *dst, int dstDevice, const void *src, int srcDevice,
	size_t count, cudaStream_t stream, bool sync_api)
{
	if (dstDevice < 0 || dstDevice >= sim_cfg.device_count || srcDevice < 0 || srcDevice >= sim_cfg.device_count) {
		uint64_t t0 = sim_now();
		struct simgpu_op op;
		op_init(&op, SIMGPU_OP_MEMCPY, api, t0);
		op.bytes = count;
		return finish_host_op(&op, cudaErrorInvalidDevice);
	}
	return copy_common(api, dst, src, count, cudaMemcpyDeviceToDevice, stream, false, sync_api, 0, 0, 0,
		dstDevice != srcDevice ? SIMGPU_COPY_P2P : 0);
}

EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	return peer_copy("cudaMemcpyPeer", dst, dstDevice, src, srcDevice, count, NULL, true);
}
EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
	cudaStream_t stream)
{
	return peer_copy("cudaMemcpyPeerAsync", dst, dstDevice, src, srcDevice, count, stream, false);
}

static cudaError_t symbol_copy(const char *api, const void *symbol, void *host, size_t count, size_t offset,
	enum cudaMemcpyKind kind, cudaStream_t stream, bool ptsz, bool sync_api, bool to_symbol)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_symbol *sym = sim_map_get(&symbol_map, (uintptr_t)symbol);
	struct sim_symbol copy = sym ? *sym : (struct sim_symbol){ 0 };
	pthread_mutex_unlock(&sim_lock);
	cudaError_t e = cudaSuccess;
	if (!sym)
		e = cudaErrorInvalidSymbol;
	else if (offset > copy.size || count > copy.size - offset)
		e = cudaErrorInvalidValue;
	else if (to_symbol ? (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
			   : (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault))
		e = cudaErrorInvalidMemcpyDirection;
	if (e != cudaSuccess) {
		struct simgpu_op op;
		op_init(&op, SIMGPU_OP_MEMCPY, api, sim_now());
		op.bytes = count;
		op.is_async = !sync_api;
		op.stream_handle = (uint64_t)(uintptr_t)stream;
		return finish_host_op(&op, e);
	}
	char *dev = (char *)copy.storage + offset;
	if (to_symbol)
		return copy_common(api, dev, host, count, kind, stream, ptsz, sync_api, 0, 0, 0, 0);
	return copy_common(api, host, dev, count, kind, stream, ptsz, sync_api, 0, 0, 0, 0);
}

EXPORT cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
	enum cudaMemcpyKind kind)
{
	return symbol_copy("cudaMemcpyToSymbol", symbol, (void *)src, count, offset, kind, NULL, false, true, true);
}
EXPORT cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
	enum cudaMemcpyKind kind)
{
	return symbol_copy("cudaMemcpyFromSymbol", symbol, dst, count, offset, kind, NULL, false, true, false);
}
EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
	enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy("cudaMemcpyToSymbolAsync", symbol, (void *)src, count, offset, kind, stream, false, false, true);
}
EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
	enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy("cudaMemcpyFromSymbolAsync", symbol, dst, count, offset, kind, stream, false, false, false);
}
EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
	enum cudaMemcpyKind kind)
{
	return symbol_copy("cudaMemcpyToSymbol_ptds", symbol, (void *)src, count, offset, kind, NULL, true, true, true);
}
EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
	enum cudaMemcpyKind kind)
{
	return symbol_copy("cudaMemcpyFromSymbol_ptds", symbol, dst, count, offset, kind, NULL, true, true, false);
}
EXPORT cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
	enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy("cudaMemcpyToSymbolAsync_ptsz", symbol, (void *)src, count, offset, kind, stream, true, false,
		true);
}
EXPORT cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
	enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy("cudaMemcpyFromSymbolAsync_ptsz", symbol, dst, count, offset, kind, stream, true, false,
		false);
}

EXPORT cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_symbol *sym = sim_map_get(&symbol_map, (uintptr_t)symbol);
	void *p = sym ? sym->storage : NULL;
	pthread_mutex_unlock(&sim_lock);
	if (!sym || !devPtr)
		return set_error(sym ? cudaErrorInvalidValue : cudaErrorInvalidSymbol);
	*devPtr = p;
	return cudaSuccess;
}

EXPORT cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_symbol *sym = sim_map_get(&symbol_map, (uintptr_t)symbol);
	size_t n = sym ? sym->size : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!sym || !size)
		return set_error(sym ? cudaErrorInvalidValue : cudaErrorInvalidSymbol);
	*size = n;
	return cudaSuccess;
}

static cudaError_t memset_common(const char *api, void *dev, int value, size_t count, cudaStream_t hs, bool ptsz,
	bool async)
{
	uint64_t t0 = sim_now();
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_MEMSET, api, t0);
	op.bytes = count;
	op.ptr = (uint64_t)(uintptr_t)dev;
	op.is_async = async;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	sim_spin_until(t0 + sim_cfg.launch_ns);
	pthread_mutex_lock(&sim_lock);
	cudaError_t e = cudaSuccess;
	if (count && !device_range_ok(dev, count))
		e = cudaErrorInvalidValue;
	op.mem_kind = mem_kind_of(dev);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (e == cudaSuccess && !s)
		e = cudaErrorInvalidResourceHandle;
	if (s) {
		op.stream_id = s->id;
		op.device = (uint32_t)s->device;
	}
	if (e != cudaSuccess || count == 0) {
		pthread_mutex_unlock(&sim_lock);
		return finish_host_op(&op, e);
	}
	if (s->capture) {
		capture_node(s->capture, (struct sim_node){ .kind = NODE_MEMSET, .dst = dev, .bytes = count, .value = value });
		pthread_mutex_unlock(&sim_lock);
		op.captured = 1;
		return finish_host_op(&op, cudaSuccess);
	}
	memset(dev, value, count);
	op.start_ns = schedule(s, sim_now(), memset_duration(count), &op.end_ns);
	pthread_mutex_unlock(&sim_lock);
	op.host_end_ns = sim_now();
	op.gpu = 1;
	op.result = cudaSuccess;
	sim_emit(&op);
	return cudaSuccess;
}

EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return memset_common("cudaMemset", devPtr, value, count, NULL, false, false);
}
EXPORT cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	return memset_common("cudaMemset_ptds", devPtr, value, count, NULL, true, false);
}
EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return memset_common("cudaMemsetAsync", devPtr, value, count, stream, false, true);
}
EXPORT cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return memset_common("cudaMemsetAsync_ptsz", devPtr, value, count, stream, true, true);
}

/* ------------------------------------------------------------------ streams */

static cudaError_t stream_create(const char *api, cudaStream_t *ps, unsigned flags, int priority)
{
	simgpu_init();
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_STREAM, api, sim_now());
	if (!ps || (flags & ~1u))
		return finish_host_op(&op, cudaErrorInvalidValue);
	struct sim_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return finish_host_op(&op, cudaErrorMemoryAllocation);
	s->magic = STREAM_MAGIC;
	s->flags = flags;
	s->priority = priority < -5 ? -5 : (priority > 0 ? 0 : priority);
	s->device = cur_device;
	pthread_mutex_lock(&sim_lock);
	s->id = next_stream_id++;
	s->next = streams;
	streams = s;
	sim_map_put(&stream_map, (uintptr_t)s, s);
	pthread_mutex_unlock(&sim_lock);
	*ps = (cudaStream_t)s;
	op.stream_id = s->id;
	op.stream_handle = (uint64_t)(uintptr_t)s;
	return finish_host_op(&op, cudaSuccess);
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	return stream_create("cudaStreamCreate", pStream, 0, 0);
}
EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	return stream_create("cudaStreamCreateWithFlags", pStream, flags, 0);
}
EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	return stream_create("cudaStreamCreateWithPriority", pStream, flags, priority);
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_STREAM, "cudaStreamDestroy", sim_now());
	op.stream_handle = (uint64_t)(uintptr_t)stream;
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = sim_map_get(&stream_map, (uintptr_t)stream);
	if (s) {
		op.stream_id = s->id;
		sim_map_del(&stream_map, (uintptr_t)s);
		for (struct sim_stream **pp = &streams; *pp; pp = &(*pp)->next) {
			if (*pp == s) {
				*pp = s->next;
				break;
			}
		}
		/* Work still queued on it keeps its place on the timeline: the
		 * legacy stream must wait for it (if blocking), the device too. */
		if (s->ready_ns > legacy[s->device].ready_ns && !(s->flags & cudaStreamNonBlocking))
			legacy[s->device].ready_ns = s->ready_ns;
		if (s->ready_ns > orphan_ready[s->device])
			orphan_ready[s->device] = s->ready_ns;
		s->magic = 0;
	}
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return finish_host_op(&op, cudaErrorInvalidResourceHandle);
	free(s);
	return finish_host_op(&op, cudaSuccess);
}

/* Sync helpers: log an op with the call's times after really waiting. */
static cudaError_t sync_finish(struct simgpu_op *op, uint64_t until, cudaError_t e)
{
	if (e == cudaSuccess) {
		sim_wait_until(until);
		sim_spin_until(sim_now() + sim_cfg.sync_ns);
	}
	op->host_end_ns = sim_now();
	op->start_ns = op->host_start_ns;
	op->end_ns = op->host_end_ns;
	op->result = e;
	op->gpu = e == cudaSuccess;
	sim_emit(op);
	return set_error(e);
}

static cudaError_t stream_sync(const char *api, cudaStream_t hs, bool ptsz)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_SYNC, api, sim_now());
	op.sync_kind = SIMGPU_SYNC_STREAM;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	uint64_t until = 0;
	cudaError_t e = cudaSuccess;
	if (!s) {
		e = cudaErrorInvalidResourceHandle;
	} else {
		op.stream_id = s->id;
		op.device = (uint32_t)s->device;
		/* Synchronizing the legacy stream waits for what it would wait for. */
		until = s->legacy ? legacy_ready(s->device) : s->ready_ns;
		if (s->capture)
			e = cudaErrorStreamCaptureUnsupported;
	}
	pthread_mutex_unlock(&sim_lock);
	return sync_finish(&op, until, e);
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	return stream_sync("cudaStreamSynchronize", stream, false);
}
EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	return stream_sync("cudaStreamSynchronize_ptsz", stream, true);
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_SYNC, "cudaDeviceSynchronize", sim_now());
	op.sync_kind = SIMGPU_SYNC_DEVICE;
	pthread_mutex_lock(&sim_lock);
	uint64_t until = device_ready(cur_device);
	pthread_mutex_unlock(&sim_lock);
	return sync_finish(&op, until, cudaSuccess);
}

EXPORT cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }

static cudaError_t stream_query(cudaStream_t hs, bool ptsz)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	uint64_t ready = s ? (s->legacy ? legacy_ready(s->device) : s->ready_ns) : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	/* Not ready is a status, not an error: it does not set the last error. */
	return sim_now() >= ready ? cudaSuccess : cudaErrorNotReady;
}
EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) { return stream_query(stream, false); }
EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) { return stream_query(stream, true); }

static cudaError_t stream_get(cudaStream_t hs, bool ptsz, unsigned *flags, int *prio, unsigned long long *id)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (s) {
		if (flags)
			*flags = s->flags;
		if (prio)
			*prio = s->priority;
		if (id)
			*id = s->id;
	}
	pthread_mutex_unlock(&sim_lock);
	return s ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}
EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags)
{
	return flags ? stream_get(s, false, flags, NULL, NULL) : set_error(cudaErrorInvalidValue);
}
EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
	return priority ? stream_get(s, false, NULL, priority, NULL) : set_error(cudaErrorInvalidValue);
}
EXPORT cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *streamId)
{
	return streamId ? stream_get(s, false, NULL, NULL, streamId) : set_error(cudaErrorInvalidValue);
}
EXPORT cudaError_t cudaStreamGetId_ptsz(cudaStream_t s, unsigned long long *streamId)
{
	return streamId ? stream_get(s, true, NULL, NULL, streamId) : set_error(cudaErrorInvalidValue);
}
EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return cudaSuccess;
}

/* ------------------------------------------------------------------ events */

static cudaError_t event_create(cudaEvent_t *pe, unsigned flags)
{
	simgpu_init();
	if (!pe)
		return set_error(cudaErrorInvalidValue);
	struct sim_event *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return set_error(cudaErrorMemoryAllocation);
	ev->magic = EVENT_MAGIC;
	ev->flags = flags;
	ev->device = cur_device;
	pthread_mutex_lock(&sim_lock);
	ev->id = next_event_id++;
	sim_map_put(&event_map, (uintptr_t)ev, ev);
	pthread_mutex_unlock(&sim_lock);
	*pe = (cudaEvent_t)ev;
	return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event) { return event_create(event, 0); }
EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) { return event_create(event, flags); }

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_event *ev = sim_map_get(&event_map, (uintptr_t)event);
	if (ev)
		sim_map_del(&event_map, (uintptr_t)ev);
	pthread_mutex_unlock(&sim_lock);
	if (!ev)
		return set_error(cudaErrorInvalidResourceHandle);
	ev->magic = 0;
	free(ev);
	return cudaSuccess;
}

static cudaError_t event_record(const char *api, cudaEvent_t event, cudaStream_t hs, bool ptsz)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_EVENT, api, sim_now());
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	pthread_mutex_lock(&sim_lock);
	struct sim_event *ev = sim_map_get(&event_map, (uintptr_t)event);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	cudaError_t e = cudaSuccess;
	if (!ev || !s) {
		e = cudaErrorInvalidResourceHandle;
	} else {
		op.event_id = ev->id;
		op.stream_id = s->id;
		op.device = (uint32_t)s->device;
		if (s->capture) {
			/* Recorded into the capture: a point other streams fork from (they join the capture
			 * by waiting for it); no device time now. */
			ev->capture_id = s->capture->capture_id;
			op.captured = 1;
			op.start_ns = op.end_ns = op.host_start_ns;
		} else {
			uint64_t end;
			/* An event completes when all work before it on the stream has. */
			ev->capture_id = 0;
			ev->ts_ns = schedule(s, sim_now(), 0, &end);
			ev->recorded = true;
			op.start_ns = op.end_ns = ev->ts_ns;
		}
	}
	pthread_mutex_unlock(&sim_lock);
	op.host_end_ns = sim_now();
	if (e != cudaSuccess)
		return finish_host_op(&op, e);
	op.result = cudaSuccess;
	sim_emit(&op);
	return cudaSuccess;
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	return event_record("cudaEventRecord", event, stream, false);
}
EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	return event_record("cudaEventRecord_ptsz", event, stream, true);
}
EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
	return event_record("cudaEventRecordWithFlags", event, stream, false);
}
EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
	return event_record("cudaEventRecordWithFlags_ptsz", event, stream, true);
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_event *ev = sim_map_get(&event_map, (uintptr_t)event);
	uint64_t ts = ev ? ev->ts_ns : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!ev)
		return set_error(cudaErrorInvalidResourceHandle);
	return sim_now() >= ts ? cudaSuccess : cudaErrorNotReady;
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_SYNC, "cudaEventSynchronize", sim_now());
	op.sync_kind = SIMGPU_SYNC_EVENT;
	pthread_mutex_lock(&sim_lock);
	struct sim_event *ev = sim_map_get(&event_map, (uintptr_t)event);
	uint64_t until = ev ? ev->ts_ns : 0;
	if (ev)
		op.event_id = ev->id;
	pthread_mutex_unlock(&sim_lock);
	return sync_finish(&op, until, ev ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	if (!ms)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_event *a = sim_map_get(&event_map, (uintptr_t)start);
	struct sim_event *b = sim_map_get(&event_map, (uintptr_t)end);
	cudaError_t e = cudaSuccess;
	uint64_t ta = 0, tb = 0;
	if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming) || !a->recorded ||
	    !b->recorded)
		e = cudaErrorInvalidResourceHandle;
	else {
		ta = a->ts_ns;
		tb = b->ts_ns;
	}
	pthread_mutex_unlock(&sim_lock);
	if (e != cudaSuccess)
		return set_error(e);
	uint64_t now = sim_now();
	if (now < ta || now < tb)
		return set_error(cudaErrorNotReady);
	*ms = (float)((double)((int64_t)tb - (int64_t)ta) / 1e6);
	return cudaSuccess;
}

static cudaError_t stream_wait_event(const char *api, cudaStream_t hs, cudaEvent_t event, bool ptsz)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_SYNC, api, sim_now());
	op.sync_kind = SIMGPU_SYNC_STREAM_WAIT_EVENT;
	op.stream_handle = (uint64_t)(uintptr_t)hs;
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	struct sim_event *ev = sim_map_get(&event_map, (uintptr_t)event);
	cudaError_t e = cudaSuccess;
	if (!s || !ev) {
		e = cudaErrorInvalidResourceHandle;
	} else {
		op.stream_id = s->id;
		op.device = (uint32_t)s->device;
		op.event_id = ev->id;
		struct sim_graph *forked = ev->capture_id ? sim_map_get(&capturing_map, ev->capture_id) : NULL;
		if (forked && !s->capture) {
			/* An event recorded in a capture still going on: the waiting stream joins it (CUDA's
			 * cross-stream capture) until it ends. */
			s->capture = forked;
		} else if (!ev->capture_id && !s->capture && ev->recorded && ev->ts_ns > s->ready_ns) {
			/* The host does not wait: the stream's next op does. */
			s->ready_ns = ev->ts_ns;
		}
	}
	pthread_mutex_unlock(&sim_lock);
	return sync_finish(&op, 0, e);
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	return stream_wait_event("cudaStreamWaitEvent", stream, event, false);
}
EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	return stream_wait_event("cudaStreamWaitEvent_ptsz", stream, event, true);
}

/* ------------------------------------------------------------------ graphs (stream capture) */


static struct sim_graph *graph_new(void)
{
	struct sim_graph *g = calloc(1, sizeof(*g));
	if (!g)
		abort();
	g->magic = GRAPH_MAGIC;
	g->id = next_graph_id++;
	return g;
}

static cudaError_t begin_capture(cudaStream_t hs, bool ptsz, cudaGraph_t into)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	struct sim_graph *g = into ? sim_map_get(&graph_map, (uintptr_t)into) : NULL;
	cudaError_t e = cudaSuccess;
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (s->legacy)
		e = cudaErrorStreamCaptureUnsupported;
	else if (s->capture)
		e = cudaErrorIllegalState;
	else if (into && (!g || g->origin))
		e = cudaErrorInvalidValue;
	else {
		if (!g)
			g = graph_new();
		g->origin = s;
		g->capture_id = next_capture_id++;
		sim_map_put(&capturing_map, g->capture_id, g);
		s->capture = g;
	}
	pthread_mutex_unlock(&sim_lock);
	return set_error(e);
}

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	return begin_capture(stream, false, NULL);
}
EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	return begin_capture(stream, true, NULL);
}
EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
	const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData, size_t numDependencies,
	enum cudaStreamCaptureMode mode)
{
	if (!graph)
		return set_error(cudaErrorInvalidValue);
	return begin_capture(stream, false, graph);
}
EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
	const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData, size_t numDependencies,
	enum cudaStreamCaptureMode mode)
{
	if (!graph)
		return set_error(cudaErrorInvalidValue);
	return begin_capture(stream, true, graph);
}

/* Ends the capture begun on the stream: every stream that joined it leaves it. */
static cudaError_t end_capture(cudaStream_t hs, cudaGraph_t *pGraph, bool ptsz)
{
	if (!pGraph)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	cudaError_t e = cudaSuccess;
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (!s->capture)
		e = cudaErrorIllegalState;
	else if (s->capture->origin != s)
		e = cudaErrorStreamCaptureUnmatched;
	else {
		struct sim_graph *g = s->capture;
		for (struct sim_stream *o = streams; o; o = o->next)
			if (o->capture == g)
				o->capture = NULL;
		s->capture = NULL;
		g->origin = NULL;
		sim_map_del(&capturing_map, g->capture_id);
		sim_map_put(&graph_map, (uintptr_t)g, g);
		*pGraph = (cudaGraph_t)g;
	}
	pthread_mutex_unlock(&sim_lock);
	return set_error(e);
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	return end_capture(stream, pGraph, false);
}
EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	return end_capture(stream, pGraph, true);
}

static cudaError_t is_capturing(cudaStream_t hs, enum cudaStreamCaptureStatus *st, bool ptsz)
{
	if (!st)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (s)
		*st = s->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	pthread_mutex_unlock(&sim_lock);
	return s ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}
EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
	return is_capturing(stream, pCaptureStatus, false);
}
EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
	return is_capturing(stream, pCaptureStatus, true);
}

/* Nodes are captured one after another on their streams and replayed in that order on the
 * launching stream, so a dependency change asked for during a capture changes nothing simulated. */
static cudaError_t update_capture_dependencies(cudaStream_t hs, bool ptsz)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	cudaError_t e = !s ? cudaErrorInvalidResourceHandle : !s->capture ? cudaErrorIllegalState : cudaSuccess;
	pthread_mutex_unlock(&sim_lock);
	return set_error(e);
}
EXPORT cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
	const cudaGraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags)
{
	return update_capture_dependencies(stream, false);
}
EXPORT cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream, cudaGraphNode_t *dependencies,
	const cudaGraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags)
{
	return update_capture_dependencies(stream, true);
}

/* ---- user objects */

static void user_refs_add(struct sim_user_refs *u, struct sim_user_object *o, unsigned count)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->obj[i] == o) {
			u->count[i] += count;
			return;
		}
	if (u->n == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 4;
		u->obj = realloc(u->obj, u->cap * sizeof(*u->obj));
		u->count = realloc(u->count, u->cap * sizeof(*u->count));
		if (!u->obj || !u->count)
			abort();
	}
	u->obj[u->n] = o;
	u->count[u->n++] = count;
}

/* Drops `count` references (sim_lock held); returns the object when that was its last one: the
 * caller runs its destructor after unlocking. */
static struct sim_user_object *user_object_drop(struct sim_user_object *o, unsigned count)
{
	o->refs = count >= o->refs ? 0 : o->refs - count;
	if (o->refs)
		return NULL;
	sim_map_del(&user_object_map, (uintptr_t)o);
	return o;
}

static void user_object_destroy(struct sim_user_object *o)
{
	if (!o)
		return;
	if (o->destroy)
		o->destroy(o->ptr);
	o->magic = 0;
	free(o);
}

/* Releases every reference a graph or an executable graph holds (sim_lock held); the objects
 * whose last reference went are returned in `dead` (u->n of them at most) for the caller. */
static size_t user_refs_release(struct sim_user_refs *u, struct sim_user_object **dead)
{
	size_t n_dead = 0;
	for (size_t i = 0; i < u->n; i++) {
		struct sim_user_object *o = user_object_drop(u->obj[i], u->count[i]);
		if (o)
			dead[n_dead++] = o;
	}
	return n_dead;
}

static void user_refs_free_and_destroy(struct sim_user_refs *u, struct sim_user_object **dead, size_t n_dead)
{
	for (size_t i = 0; i < n_dead; i++)
		user_object_destroy(dead[i]);
	free(dead);
	free(u->obj);
	free(u->count);
}

EXPORT cudaError_t cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr, cudaHostFn_t destroy,
	unsigned int initialRefcount, unsigned int flags)
{
	if (!object_out || !initialRefcount || flags != cudaUserObjectNoDestructorSync)
		return set_error(cudaErrorInvalidValue);
	struct sim_user_object *o = calloc(1, sizeof(*o));
	if (!o)
		return set_error(cudaErrorMemoryAllocation);
	o->magic = USER_OBJECT_MAGIC;
	o->refs = initialRefcount;
	o->ptr = ptr;
	o->destroy = destroy;
	pthread_mutex_lock(&sim_lock);
	sim_map_put(&user_object_map, (uintptr_t)o, o);
	pthread_mutex_unlock(&sim_lock);
	*object_out = (cudaUserObject_t)o;
	return cudaSuccess;
}

EXPORT cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_user_object *o = count ? sim_map_get(&user_object_map, (uintptr_t)object) : NULL;
	if (o)
		o->refs += count;
	pthread_mutex_unlock(&sim_lock);
	return o ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_user_object *o = count ? sim_map_get(&user_object_map, (uintptr_t)object) : NULL;
	struct sim_user_object *dead = o ? user_object_drop(o, count) : NULL;
	pthread_mutex_unlock(&sim_lock);
	user_object_destroy(dead);
	return o ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
	unsigned int flags)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_graph *g = sim_map_get(&graph_map, (uintptr_t)graph);
	struct sim_user_object *o = sim_map_get(&user_object_map, (uintptr_t)object);
	/* A graph still being captured is not in graph_map yet: find it among the captures. */
	if (!g)
		for (struct sim_stream *s = streams; s && !g; s = s->next)
			if (s->capture && (cudaGraph_t)s->capture == graph)
				g = s->capture;
	bool ok = g && o && count;
	if (ok) {
		/* cudaGraphUserObjectMove: the caller's references become the graph's. */
		if (!(flags & cudaGraphUserObjectMove))
			o->refs += count;
		user_refs_add(&g->users, o, count);
	}
	pthread_mutex_unlock(&sim_lock);
	return ok ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_graph *g = sim_map_get(&graph_map, (uintptr_t)graph);
	struct sim_user_object *o = sim_map_get(&user_object_map, (uintptr_t)object), *dead = NULL;
	bool ok = false;
	for (size_t i = 0; g && o && i < g->users.n; i++)
		if (g->users.obj[i] == o && g->users.count[i] >= count) {
			g->users.count[i] -= count;
			dead = user_object_drop(o, count);
			ok = true;
		}
	pthread_mutex_unlock(&sim_lock);
	user_object_destroy(dead);
	return ok ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

/* ---- graphs and their nodes */

static cudaGraphNode_t node_ref(struct sim_graph *g, size_t index)
{
	if (g->n_refs <= index) {
		struct sim_node_ref **nr = realloc(g->refs, g->n * sizeof(*nr));
		if (!nr)
			abort();
		g->refs = nr;
		for (size_t i = g->n_refs; i < g->n; i++) {
			struct sim_node_ref *r = calloc(1, sizeof(*r));
			if (!r)
				abort();
			*r = (struct sim_node_ref){ .magic = NODE_REF_MAGIC, .graph = g, .index = i };
			g->refs[i] = r;
			sim_map_put(&node_ref_map, (uintptr_t)r, r);
		}
		g->n_refs = g->n;
	}
	return (cudaGraphNode_t)g->refs[index];
}

EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
	if (!numNodes)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_graph *g = sim_map_get(&graph_map, (uintptr_t)graph);
	if (g && nodes) {
		size_t n = *numNodes < g->n ? *numNodes : g->n;
		for (size_t i = 0; i < n; i++)
			nodes[i] = node_ref(g, i);
		for (size_t i = n; i < *numNodes; i++)
			nodes[i] = NULL;
	}
	if (g)
		*numNodes = g->n;
	pthread_mutex_unlock(&sim_lock);
	return g ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
	if (!pType)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_node_ref *r = sim_map_get(&node_ref_map, (uintptr_t)node);
	if (r) {
		enum node_kind k = r->graph->nodes[r->index].kind;
		*pType = k == NODE_KERNEL ? cudaGraphNodeTypeKernel : k == NODE_MEMSET ? cudaGraphNodeTypeMemset
										 : cudaGraphNodeTypeMemcpy;
	}
	pthread_mutex_unlock(&sim_lock);
	return r ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

/* A captured node depends on the one captured before it (nodes replay in capture order). */
EXPORT cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *pDependencies,
	cudaGraphEdgeData *edgeData, size_t *pNumDependencies)
{
	if (!pNumDependencies)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_node_ref *r = sim_map_get(&node_ref_map, (uintptr_t)node);
	if (r) {
		size_t have = r->index > 0 ? 1 : 0;
		if (pDependencies && *pNumDependencies && have)
			pDependencies[0] = node_ref(r->graph, r->index - 1);
		if (edgeData && *pNumDependencies && have)
			memset(&edgeData[0], 0, sizeof(edgeData[0]));
		*pNumDependencies = have;
	}
	pthread_mutex_unlock(&sim_lock);
	return r ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

static cudaError_t instantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph)
{
	if (!pGraphExec)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_graph *g = sim_map_get(&graph_map, (uintptr_t)graph);
	struct sim_exec *x = NULL;
	if (g) {
		x = calloc(1, sizeof(*x));
		if (!x)
			abort();
		x->magic = EXEC_MAGIC;
		x->id = next_exec_id++;
		x->graph_id = g->id;
		x->n = g->n;
		x->nodes = calloc(g->n ? g->n : 1, sizeof(*x->nodes));
		if (!x->nodes)
			abort();
		memcpy(x->nodes, g->nodes, g->n * sizeof(*x->nodes));
		/* The executable graph holds the graph's user objects too (they outlive the graph). */
		for (size_t i = 0; i < g->users.n; i++) {
			g->users.obj[i]->refs += g->users.count[i];
			user_refs_add(&x->users, g->users.obj[i], g->users.count[i]);
		}
		sim_map_put(&exec_map, (uintptr_t)x, x);
	}
	pthread_mutex_unlock(&sim_lock);
	if (!g)
		return set_error(cudaErrorInvalidValue);
	*pGraphExec = (cudaGraphExec_t)x;
	return cudaSuccess;
}

EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	return instantiate(pGraphExec, graph);
}
EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
	unsigned long long flags)
{
	return instantiate(pGraphExec, graph);
}
EXPORT cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
	cudaGraphInstantiateParams *instantiateParams)
{
	cudaError_t e = instantiate(pGraphExec, graph);
	if (instantiateParams) {
		instantiateParams->result_out = e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
		instantiateParams->errNode_out = NULL;
	}
	return e;
}

EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_graph *g = sim_map_get(&graph_map, (uintptr_t)graph);
	struct sim_user_object **dead = NULL;
	size_t n_dead = 0;
	if (g) {
		sim_map_del(&graph_map, (uintptr_t)g);
		for (size_t i = 0; i < g->n_refs; i++)
			sim_map_del(&node_ref_map, (uintptr_t)g->refs[i]);
		dead = calloc(g->users.n ? g->users.n : 1, sizeof(*dead));
		if (!dead)
			abort();
		n_dead = user_refs_release(&g->users, dead);
	}
	pthread_mutex_unlock(&sim_lock);
	if (!g)
		return set_error(cudaErrorInvalidValue);
	user_refs_free_and_destroy(&g->users, dead, n_dead);
	for (size_t i = 0; i < g->n_refs; i++)
		free(g->refs[i]);
	free(g->refs);
	free(g->nodes);
	g->magic = 0;
	free(g);
	return cudaSuccess;
}

EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_exec *x = sim_map_get(&exec_map, (uintptr_t)graphExec);
	struct sim_user_object **dead = NULL;
	size_t n_dead = 0;
	if (x) {
		sim_map_del(&exec_map, (uintptr_t)x);
		dead = calloc(x->users.n ? x->users.n : 1, sizeof(*dead));
		if (!dead)
			abort();
		n_dead = user_refs_release(&x->users, dead);
	}
	pthread_mutex_unlock(&sim_lock);
	if (!x)
		return set_error(cudaErrorInvalidValue);
	user_refs_free_and_destroy(&x->users, dead, n_dead);
	free(x->nodes);
	x->magic = 0;
	free(x);
	return cudaSuccess;
}

/* Uploading ahead of the first launch changes nothing simulated: a launch costs the same. */
static cudaError_t graph_upload(cudaGraphExec_t exec, cudaStream_t hs, bool ptsz)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_exec *x = sim_map_get(&exec_map, (uintptr_t)exec);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	pthread_mutex_unlock(&sim_lock);
	return set_error(!x ? cudaErrorInvalidValue : !s ? cudaErrorInvalidResourceHandle : cudaSuccess);
}
EXPORT cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return graph_upload(graphExec, stream, false);
}
EXPORT cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return graph_upload(graphExec, stream, true);
}

/* Replays every node in order on the stream.  Each op carries the launch's correlation id and the
 * ids of its graph and node (what CUPTI's records of graph work are taken to carry: cupti.c, and
 * doc/gpu.md "CUDA graphs"); on a capturing stream the nodes are captured again instead. */
static cudaError_t graph_launch(const char *api, cudaGraphExec_t exec, cudaStream_t hs, bool ptsz)
{
	uint64_t t0 = sim_now();
	struct simgpu_op base;
	op_init(&base, SIMGPU_OP_KERNEL, api, t0);
	base.stream_handle = (uint64_t)(uintptr_t)hs;
	base.is_async = 1;
	sim_spin_until(t0 + sim_cfg.launch_ns);
	pthread_mutex_lock(&sim_lock);
	struct sim_exec *x = sim_map_get(&exec_map, (uintptr_t)exec);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (!x || !s) {
		pthread_mutex_unlock(&sim_lock);
		return finish_host_op(&base, !x ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
	}
	if (s->capture) {
		for (size_t i = 0; i < x->n; i++)
			capture_node(s->capture, x->nodes[i]);
		pthread_mutex_unlock(&sim_lock);
		base.captured = 1;
		return finish_host_op(&base, cudaSuccess);
	}
	size_t n = x->n;
	struct simgpu_op *ops = calloc(n ? n : 1, sizeof(*ops));
	if (!ops)
		abort();
	uint64_t enq = sim_now();
	for (size_t i = 0; i < n; i++) {
		struct sim_node *nd = &x->nodes[i];
		struct simgpu_op *op = &ops[i];
		*op = base;
		op->stream_id = s->id;
		op->device = (uint32_t)s->device;
		op->gpu = 1;
		op->graph_id = x->graph_id;
		op->graph_node_id = nd->id;
		uint64_t dur;
		if (nd->kind == NODE_KERNEL) {
			op->kind = SIMGPU_OP_KERNEL;
			op->name = nd->kernel->name;
			op->grid[0] = nd->grid.x; op->grid[1] = nd->grid.y; op->grid[2] = nd->grid.z;
			op->block[0] = nd->block.x; op->block[1] = nd->block.y; op->block[2] = nd->block.z;
			op->shared_mem = nd->shmem;
			dur = kernel_duration(nd->kernel, nd->grid);
		} else if (nd->kind == NODE_MEMSET) {
			op->kind = SIMGPU_OP_MEMSET;
			op->bytes = nd->bytes;
			op->ptr = (uint64_t)(uintptr_t)nd->dst;
			op->mem_kind = mem_kind_of(nd->dst);
			memset(nd->dst, nd->value, nd->bytes);
			dur = memset_duration(nd->bytes);
		} else {
			op->kind = SIMGPU_OP_MEMCPY;
			op->bytes = nd->bytes;
			op->ptr = (uint64_t)(uintptr_t)nd->dst;
			op->ptr2 = (uint64_t)(uintptr_t)nd->src;
			op->copy_kind = nd->copy_kind;
			op->mem_kind = nd->src_mem;
			op->dst_mem_kind = nd->dst_mem;
			memmove(nd->dst, nd->src, nd->bytes);
			dur = copy_duration(nd->copy_kind, nd->src_mem, nd->dst_mem, nd->bytes);
		}
		op->start_ns = schedule(s, enq, dur, &op->end_ns);
	}
	pthread_mutex_unlock(&sim_lock);
	uint64_t t1 = sim_now();
	for (size_t i = 0; i < n; i++) {
		ops[i].host_end_ns = t1;
		ops[i].result = cudaSuccess;
		sim_emit(&ops[i]);
	}
	free(ops);
	return cudaSuccess;
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return graph_launch("cudaGraphLaunch", graphExec, stream, false);
}
EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return graph_launch("cudaGraphLaunch_ptsz", graphExec, stream, true);
}

/* The ids CUPTI gives a graph, an executable graph and a node (cuptiGetGraphId, cuptiGetGraphExecId,
 * cuptiGetGraphNodeId): what = 0, 1, 2.  Returns 0, or -1 for an unknown handle. */
EXPORT int simgpu_graph_object_id(int what, const void *handle, uint64_t *id)
{
	pthread_mutex_lock(&sim_lock);
	int r = -1;
	if (what == 0) {
		struct sim_graph *g = sim_map_get(&graph_map, (uintptr_t)handle);
		for (struct sim_stream *s = streams; s && !g; s = s->next)
			if (s->capture && s->capture == handle)
				g = s->capture;
		if (g)
			*id = g->id, r = 0;
	} else if (what == 1) {
		struct sim_exec *x = sim_map_get(&exec_map, (uintptr_t)handle);
		if (x)
			*id = x->id, r = 0;
	} else if (what == 2) {
		struct sim_node_ref *nr = sim_map_get(&node_ref_map, (uintptr_t)handle);
		if (nr)
			*id = nr->graph->nodes[nr->index].id, r = 0;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* ------------------------------------------------------------------ device */

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
	simgpu_init();
	if (!count)
		return set_error(cudaErrorInvalidValue);
	*count = sim_cfg.device_count;
	return sim_cfg.device_count ? cudaSuccess : set_error(cudaErrorNoDevice);
}

EXPORT cudaError_t cudaSetDevice(int device)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_DEVICE, "cudaSetDevice", sim_now());
	op.device = (uint32_t)device;
	if (device < 0 || device >= sim_cfg.device_count)
		return finish_host_op(&op, cudaErrorInvalidDevice);
	cur_device = device;
	return finish_host_op(&op, cudaSuccess);
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return set_error(cudaErrorInvalidValue);
	*device = cur_device;
	return cudaSuccess;
}

EXPORT cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
	if (device < 0 || device >= sim_cfg.device_count)
		return set_error(cudaErrorInvalidDevice);
	return cudaSuccess;
}

EXPORT cudaError_t cudaSetDeviceFlags(unsigned int flags) { return cudaSuccess; }
EXPORT cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	if (!flags)
		return set_error(cudaErrorInvalidValue);
	*flags = 0;
	return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (!prop)
		return set_error(cudaErrorInvalidValue);
	if (device < 0 || device >= sim_cfg.device_count)
		return set_error(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "simgpu H100 (simulated)");
	prop->uuid.bytes[0] = (char)0x5e;
	prop->uuid.bytes[15] = (char)device;
	prop->totalGlobalMem = (size_t)sim_cfg.mem_limit;
	prop->sharedMemPerBlock = 48 * 1024;
	prop->regsPerBlock = 65536;
	prop->warpSize = 32;
	prop->memPitch = 2147483647;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = 1024;
	prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 2147483647;
	prop->maxGridSize[1] = 65535;
	prop->maxGridSize[2] = 65535;
	prop->totalConstMem = 65536;
	prop->major = 9;
	prop->minor = 0;
	prop->textureAlignment = 512;
	prop->texturePitchAlignment = 32;
	prop->multiProcessorCount = 132;
	prop->integrated = 0;
	prop->canMapHostMemory = 1;
	prop->concurrentKernels = 1;
	prop->pciBusID = 0x18 + device;
	prop->asyncEngineCount = 3;
	prop->unifiedAddressing = 1;
	prop->memoryBusWidth = 5120;
	prop->l2CacheSize = 50 * 1024 * 1024;
	prop->persistingL2CacheMaxSize = 32 * 1024 * 1024;
	prop->maxThreadsPerMultiProcessor = 2048;
	prop->streamPrioritiesSupported = 1;
	prop->globalL1CacheSupported = 1;
	prop->localL1CacheSupported = 1;
	prop->sharedMemPerMultiprocessor = 233472;
	prop->regsPerMultiprocessor = 65536;
	prop->managedMemory = 1;
	prop->isMultiGpuBoard = 0;
	prop->concurrentManagedAccess = 1;
	prop->sharedMemPerBlockOptin = 232448;
	prop->maxBlocksPerMultiProcessor = 32;
	prop->reservedSharedMemPerBlock = 1024;
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	if (!value)
		return set_error(cudaErrorInvalidValue);
	if (device < 0 || device >= sim_cfg.device_count)
		return set_error(cudaErrorInvalidDevice);
	struct cudaDeviceProp p;
	cudaGetDeviceProperties(&p, device);
	int v = 0;
	switch (attr) {
	case cudaDevAttrMaxThreadsPerBlock: v = p.maxThreadsPerBlock; break;
	case cudaDevAttrMaxBlockDimX: v = p.maxThreadsDim[0]; break;
	case cudaDevAttrMaxBlockDimY: v = p.maxThreadsDim[1]; break;
	case cudaDevAttrMaxBlockDimZ: v = p.maxThreadsDim[2]; break;
	case cudaDevAttrMaxGridDimX: v = p.maxGridSize[0]; break;
	case cudaDevAttrMaxGridDimY: v = p.maxGridSize[1]; break;
	case cudaDevAttrMaxGridDimZ: v = p.maxGridSize[2]; break;
	case cudaDevAttrMaxSharedMemoryPerBlock: v = (int)p.sharedMemPerBlock; break;
	case cudaDevAttrWarpSize: v = p.warpSize; break;
	case cudaDevAttrMultiProcessorCount: v = p.multiProcessorCount; break;
	case cudaDevAttrComputeCapabilityMajor: v = p.major; break;
	case cudaDevAttrComputeCapabilityMinor: v = p.minor; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = (int)p.sharedMemPerBlockOptin; break;
	case cudaDevAttrMaxThreadsPerMultiProcessor: v = p.maxThreadsPerMultiProcessor; break;
	case cudaDevAttrL2CacheSize: v = p.l2CacheSize; break;
	case cudaDevAttrUnifiedAddressing: v = 1; break;
	case cudaDevAttrConcurrentKernels: v = 1; break;
	case cudaDevAttrAsyncEngineCount: v = p.asyncEngineCount; break;
	case cudaDevAttrManagedMemory: v = 1; break;
	case cudaDevAttrGlobalMemoryBusWidth: v = p.memoryBusWidth; break;
	case cudaDevAttrMaxRegistersPerBlock: v = p.regsPerBlock; break;
	case cudaDevAttrPciBusId: v = p.pciBusID; break;
	default: v = 0; break;
	}
	*value = v;
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceReset(void)
{
	struct simgpu_op op;
	op_init(&op, SIMGPU_OP_DEVICE, "cudaDeviceReset", sim_now());
	pthread_mutex_lock(&sim_lock);
	uint64_t until = device_ready(cur_device);
	pthread_mutex_unlock(&sim_lock);
	sim_wait_until(until);
	/* Device allocations of this device are gone; pinned memory too (it
	 * belongs to the context).  Streams and events stay valid handles here:
	 * a test bed gains nothing from making stale handles crash. */
	pthread_mutex_lock(&sim_lock);
	for (size_t i = 0; i < n_allocs;) {
		struct sim_alloc *e = &allocs[i];
		if (e->owned == OWNED_ALLOC && e->device == cur_device) {
			bytes_allocated -= e->size;
			free((void *)e->base);
			alloc_remove(e);
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&sim_lock);
	finish_host_op(&op, cudaSuccess);
	simgpu_truth_flush();
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) { return cudaSuccess; }
EXPORT cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
	if (!pValue)
		return set_error(cudaErrorInvalidValue);
	*pValue = limit == cudaLimitStackSize ? 1024 : 0;
	return cudaSuccess;
}

EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	if (!attr)
		return set_error(cudaErrorInvalidValue);
	if (!kernel_of_fun(func))
		return set_error(cudaErrorInvalidDeviceFunction);
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = 1024;
	attr->numRegs = 32;
	attr->ptxVersion = 90;
	attr->binaryVersion = 90;
	return cudaSuccess;
}

EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	return kernel_of_fun(func) ? cudaSuccess : set_error(cudaErrorInvalidDeviceFunction);
}

EXPORT cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)
{
	return kernel_of_fun(func) ? cudaSuccess : set_error(cudaErrorInvalidDeviceFunction);
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
	size_t dynamicSMemSize)
{
	if (!numBlocks || blockSize <= 0)
		return set_error(cudaErrorInvalidValue);
	*numBlocks = 2048 / blockSize > 32 ? 32 : 2048 / blockSize;
	return cudaSuccess;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return set_error(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return set_error(cudaErrorInvalidValue);
	*driverVersion = CUDART_VERSION;
	return cudaSuccess;
}

EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

/* ------------------------------------------------------------------ errors */

EXPORT cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void) { return last_error; }

static const struct { int code; const char *name; } error_names[] = {
#include "cuda_error_names.inc"
};

EXPORT const char *cudaGetErrorName(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(error_names) / sizeof(error_names[0]); i++)
		if (error_names[i].code == (int)error)
			return error_names[i].name;
	return "unrecognized error code";
}

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
	switch ((int)error) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInitializationError: return "initialization error";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidPitchValue: return "invalid pitch argument";
	case cudaErrorInvalidSymbol: return "invalid device symbol";
	case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
	case cudaErrorMissingConfiguration: return "__global__ function call is not configured";
	case cudaErrorInvalidDeviceFunction: return "invalid device function";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorNotReady: return "device not ready";
	case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
	case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
	case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
	case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
	default: return cudaGetErrorName(error);
	}
}

/* ------------------------------------------------------------------ small extras */

EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	static __thread enum cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
	if (!mode)
		return set_error(cudaErrorInvalidValue);
	enum cudaStreamCaptureMode old = current;
	current = *mode;
	*mode = old;
	return cudaSuccess;
}

static bool valid_device(int d) { return d >= 0 && d < sim_cfg.device_count; }

EXPORT cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
	if (!canAccessPeer)
		return set_error(cudaErrorInvalidValue);
	if (!valid_device(device) || !valid_device(peerDevice))
		return set_error(cudaErrorInvalidDevice);
	*canAccessPeer = device != peerDevice;
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	if (!valid_device(peerDevice) || peerDevice == cur_device)
		return set_error(cudaErrorInvalidDevice);
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
	if (!valid_device(peerDevice) || peerDevice == cur_device)
		return set_error(cudaErrorInvalidDevice);
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	if (!pciBusId || len <= 0)
		return set_error(cudaErrorInvalidValue);
	if (!valid_device(device))
		return set_error(cudaErrorInvalidDevice);
	snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x18 + device);
	return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
	if (!device)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hStream, false);
	if (s)
		*device = s->device;
	pthread_mutex_unlock(&sim_lock);
	return s ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}

/* Memory placement hints: everything is host memory here, so they only validate. */
EXPORT cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
	unsigned int flags, cudaStream_t stream)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_alloc *e = alloc_find(devPtr);
	bool ok = e && e->mem_kind == SIMGPU_MEM_MANAGED && (uintptr_t)devPtr + count <= e->base + e->size;
	pthread_mutex_unlock(&sim_lock);
	return ok ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
	struct cudaMemLocation location)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_alloc *e = alloc_find(devPtr);
	bool ok = e && e->mem_kind == SIMGPU_MEM_MANAGED && (uintptr_t)devPtr + count <= e->base + e->size;
	pthread_mutex_unlock(&sim_lock);
	return ok ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

EXPORT struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
	struct cudaChannelFormatDesc d = { .x = x, .y = y, .z = z, .w = w, .f = f };
	return d;
}

/* The rest of the CUDA 13 runtime API (stubs.c) answers cudaErrorNotSupported. */
cudaError_t sim_unsupported(const char *name)
{
	static atomic_bool warn_checked, warn;
	if (!atomic_exchange(&warn_checked, true))
		atomic_store(&warn, getenv("SIMGPU_WARN_UNSUPPORTED") != NULL);
	if (atomic_load(&warn))
		fprintf(stderr, "simgpu: %s is not simulated (cudaErrorNotSupported)\n", name);
	return set_error(cudaErrorNotSupported);
}

/* ------------------------------------------------------------------ driver entry points, capture info */

/* Looks the symbol up in the libcuda.so.1 stand-in (loaded on first use, as the real runtime loads the
 * driver), so callers get the same functions whether they go through the runtime or cuGetProcAddress. */
typedef int (*sim_gpa_fn)(const char *, void **, int, unsigned long long, int *);
static sim_gpa_fn driver_gpa_fn;
static void driver_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (h)
		driver_gpa_fn = (sim_gpa_fn)dlsym(h, "cuGetProcAddress_v2");
}
static sim_gpa_fn driver_gpa(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, driver_load);
	return driver_gpa_fn;
}

static cudaError_t driver_entry_point(const char *symbol, void **funcPtr, int version, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *status)
{
	if (!symbol || !funcPtr)
		return set_error(cudaErrorInvalidValue);
	*funcPtr = NULL;
	sim_gpa_fn gpa = driver_gpa();
	int st = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
	int r = gpa ? gpa(symbol, funcPtr, version, flags, &st) : 100; /* CUDA_ERROR_NO_DEVICE */
	if (status)
		*status = (enum cudaDriverEntryPointQueryResult)(gpa ? st : cudaDriverEntryPointSymbolNotFound);
	if (!gpa)
		return set_error(cudaErrorInsufficientDriver);
	return r == 0 ? cudaSuccess : cudaSuccess; /* the runtime reports a missing symbol through status */
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return driver_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
	unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return driver_entry_point(symbol, funcPtr, (int)cudaVersion, flags, driverStatus);
}

static cudaError_t capture_info(cudaStream_t hs, enum cudaStreamCaptureStatus *st, unsigned long long *id,
	cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges, size_t *ndeps, bool ptsz)
{
	if (!st)
		return set_error(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_stream *s = resolve_stream(hs, ptsz);
	if (s) {
		*st = s->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
		if (id)
			*id = s->capture ? s->capture->capture_id : 0;
		if (graph)
			*graph = s->capture ? (cudaGraph_t)s->capture : NULL;
		if (deps)
			*deps = NULL;
		if (edges)
			*edges = NULL;
		if (ndeps)
			*ndeps = 0;
	}
	pthread_mutex_unlock(&sim_lock);
	return s ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}

EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
	unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
	const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
		numDependencies_out, false);
}

EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
	unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
	const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
		numDependencies_out, true);
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func,
	int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
	(void)flags;
	return cudaOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize, dynamicSMemSize);
}

/* ------------------------------------------------------------------ for the driver and library stand-ins */


/* A device function known by name only (a driver module's function, a library's kernel): interned, so
 * every lookup of one name gives one handle, valid for the life of the process. */
EXPORT void *simgpu_kernel_by_name(const char *name)
{
	static struct sim_map by_name; /* key: hash of the name; collisions are chained by a linear probe */
	if (!name)
		return NULL;
	uint64_t h = 1469598103934665603ull;
	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	pthread_mutex_lock(&sim_lock);
	struct sim_kernel *k;
	for (;; h++) {
		k = sim_map_get(&by_name, (uintptr_t)(h | 1));
		if (!k || strcmp(k->name, name) == 0)
			break;
	}
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (k) {
			k->magic = KERNEL_MAGIC;
			k->name = strdup(name);
			sim_map_put(&by_name, (uintptr_t)(h | 1), k);
			sim_map_put(&kernel_by_handle, (uintptr_t)k, k);
		}
	}
	pthread_mutex_unlock(&sim_lock);
	return k;
}

EXPORT const char *simgpu_kernel_name(const void *kernel)
{
	struct sim_kernel *k = kernel_of_handle((cudaKernel_t)kernel);
	return k ? k->name : NULL;
}

EXPORT void simgpu_next_kernel_ns(uint64_t ns) { thr.next_kernel_ns = ns; }

EXPORT int simgpu_launch(const char *api, const void *kernel, const unsigned grid[3], const unsigned block[3],
	size_t shmem, void *stream, int ptsz)
{
	dim3 g = { grid[0], grid[1], grid[2] }, b = { block[0], block[1], block[2] };
	return launch(api, kernel_of_handle((cudaKernel_t)kernel), g, b, shmem, (cudaStream_t)stream, ptsz != 0);
}

EXPORT int simgpu_alloc(const char *api, void **ptr, size_t size, int host)
{
	return do_alloc(api, ptr, size, host ? SIMGPU_MEM_PINNED : SIMGPU_MEM_DEVICE, NULL, false);
}

EXPORT int simgpu_free(const char *api, void *ptr, int host)
{
	return do_free(api, ptr, host != 0, NULL, false);
}

EXPORT int simgpu_copy(const char *api, void *dst, const void *src, size_t count, void *stream, int async, int ptsz)
{
	return copy_common(api, dst, src, count, cudaMemcpyDefault, (cudaStream_t)stream, ptsz != 0, !async, 0, 0, 0, 0);
}

EXPORT int simgpu_memset(const char *api, void *dst, int value, size_t count, void *stream, int async, int ptsz)
{
	return memset_common(api, dst, value, count, (cudaStream_t)stream, ptsz != 0, async != 0);
}

EXPORT int simgpu_stream_sync(const char *api, void *stream, int ptsz)
{
	return stream_sync(api, (cudaStream_t)stream, ptsz != 0);
}
