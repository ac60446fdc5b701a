/*
 * simgpu private interface: what the libcudart.so.13 stand-in exports (besides
 * the CUDA runtime API) for the libcupti.so.13 stand-in and for tests.
 *
 * Every operation the stand-in runtime performs is described by one
 * `struct simgpu_op`; the same record is written to the ground-truth log
 * (SIMGPU_TRUTH) and handed to the registered observer (the CUPTI stand-in),
 * so the two can never disagree.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libcudart.so.13 (built with hidden visibility by default). */
#pragma GCC visibility push(default)

enum simgpu_op_kind {
	SIMGPU_OP_KERNEL = 1,
	SIMGPU_OP_MEMCPY = 2,
	SIMGPU_OP_MEMSET = 3,
	SIMGPU_OP_MALLOC = 4,
	SIMGPU_OP_FREE = 5,
	SIMGPU_OP_SYNC = 6,
	SIMGPU_OP_STREAM = 7,  /* stream create/destroy */
	SIMGPU_OP_EVENT = 8,   /* event record */
	SIMGPU_OP_DEVICE = 9,  /* cudaDeviceReset, cudaSetDevice */
	SIMGPU_OP_API = 10,    /* an API call with no op of its own: the runtime call of a statically
	                        * linked runtime (simgpu_static_begin/end), logged when it returns */
};

/* Which API a call belongs to: its CUPTI activity kind (RUNTIME or DRIVER) and callback-id table. */
enum simgpu_api_domain {
	SIMGPU_API_RUNTIME = 0, /* libcudart.so.13 stand-in, or a static runtime inside a library */
	SIMGPU_API_DRIVER = 1,  /* libcuda.so.1 stand-in (cu* entry points) */
};

enum simgpu_copy_kind {
	SIMGPU_COPY_NONE = 0, SIMGPU_COPY_H2D = 1, SIMGPU_COPY_D2H = 2, SIMGPU_COPY_D2D = 3,
	SIMGPU_COPY_H2H = 4, SIMGPU_COPY_P2P = 5,
};

/* Kind of the host-side memory of a copy, or of an allocation. */
enum simgpu_mem_kind {
	SIMGPU_MEM_NONE = 0, SIMGPU_MEM_PAGEABLE = 1, SIMGPU_MEM_PINNED = 2, SIMGPU_MEM_DEVICE = 3,
	SIMGPU_MEM_MANAGED = 4,
};

enum simgpu_sync_kind {
	SIMGPU_SYNC_NONE = 0, SIMGPU_SYNC_DEVICE = 1, SIMGPU_SYNC_STREAM = 2, SIMGPU_SYNC_EVENT = 3,
	SIMGPU_SYNC_STREAM_WAIT_EVENT = 4,
};

struct simgpu_op {
	uint64_t seq;          /* per-process order in which ops were logged */
	uint32_t pid, tid;
	uint16_t kind;         /* enum simgpu_op_kind */
	uint8_t gpu;           /* 1: device-side activity (a CUPTI record is due) */
	uint8_t copy_kind;     /* enum simgpu_copy_kind */
	uint8_t mem_kind;      /* enum simgpu_mem_kind: host side of a copy, or the allocation */
	uint8_t dst_mem_kind;  /* memcpy: destination side (source side is mem_kind) */
	uint8_t sync_kind;     /* enum simgpu_sync_kind */
	uint8_t is_async;      /* an *Async API (or a stream-ordered op) */
	uint8_t captured;      /* enqueued while its stream was capturing a graph: no device work now */
	const char *api;       /* API name as exported ("cudaMemcpyAsync") */
	const char *name;      /* kernel: mangled device name; else NULL */
	uint32_t device;
	uint32_t stream_id;    /* simgpu stream id (what CUPTI reports as streamId) */
	uint64_t stream_handle;/* cudaStream_t value as passed by the program */
	uint64_t start_ns, end_ns;           /* CLOCK_MONOTONIC; device times for gpu ops */
	uint64_t host_start_ns, host_end_ns; /* the API call itself */
	uint64_t bytes;
	uint64_t ptr;          /* malloc/free/memset: the device pointer; memcpy: dst */
	uint64_t ptr2;         /* memcpy: src */
	uint32_t grid[3], block[3];
	uint32_t shared_mem;
	uint32_t event_id;     /* sync on event / wait event / event record */
	int32_t result;        /* cudaError_t returned */
	uint32_t correlation_id; /* one per API call; all ops of a graph launch share it */
	uint32_t ext_kind;     /* CUpti_ExternalCorrelationKind of the pushed id, 0 if none */
	uint64_t ext_id;       /* external id pushed on this thread at the call, 0 if none */
	uint8_t has_ext;
	uint8_t api_domain;    /* enum simgpu_api_domain of `api` */
	/* Correlation id of the API record of this call when it is not correlation_id: a driver call made
	 * inside a static runtime call (simgpu_static_begin) gets its own id for its DRIVER API record,
	 * while its device work carries the enclosing runtime call's id (correlation_id), as real CUPTI
	 * does.  An external id pushed during the driver call (has_ext/ext_id) pairs with api_corr.
	 * 0: the API record's id is correlation_id. */
	uint32_t api_corr;
	/* The calling thread as CUPTI names it in API records (threadId): the low 32 bits of its
	 * pthread_self(), measured on an H100 (tests/cupti/conformance/h100.txt), not its gettid() (tid). */
	uint32_t pthread_id;
	/* Work of a graph launch: the ids of the graph it was instantiated from and of its node (what
	 * CUPTI's records carry as graphId and graphNodeId); 0 for work not launched by a graph. */
	uint32_t graph_id;
	uint64_t graph_node_id;
};

/* Observer called (outside simgpu's lock, on the calling thread) after each op
 * is logged.  One observer at a time; NULL removes it. */
typedef void (*simgpu_observer_fn)(const struct simgpu_op *op, void *arg);
void simgpu_set_observer(simgpu_observer_fn fn, void *arg);

/* Per-thread external correlation stack, owned by the runtime so that each op
 * can carry the id pushed at its call.  Return 0 on success, -1 on empty pop. */
int simgpu_ext_push(uint32_t kind, uint64_t id);
int simgpu_ext_pop(uint32_t kind, uint64_t *id);

/* A CUDA runtime linked statically into a library (cuBLAS, cuBLASLt, cuDNN, NCCL do this): no
 * preload can interpose its calls.  simgpu_static_begin opens such a runtime call on this thread
 * (named `api`, e.g. "cudaLaunchKernel") and returns its correlation id; the library then calls a
 * driver entry point it got from cuGetProcAddress (possibly wrapped by a profiler).  Device work that
 * driver call enqueues carries the runtime call's correlation id; the driver call's own API record
 * gets a fresh one (simgpu_op.api_corr).  simgpu_static_end closes the call and logs it as an
 * SIMGPU_OP_API op (domain RUNTIME, the whole call's host times, `result`).  Calls nest one deep. */
uint32_t simgpu_static_begin(const char *api);
void simgpu_static_end(int result);

/* The libcuda.so.1 stand-in brackets each of its entry points with these: ops logged inside are
 * driver calls (api_domain DRIVER). */
void simgpu_driver_enter(void);
void simgpu_driver_leave(void);

/* The ids of a cudaGraph_t (what = 0), cudaGraphExec_t (1) or cudaGraphNode_t (2), as CUPTI's
 * cuptiGetGraphId / cuptiGetGraphExecId / cuptiGetGraphNodeId report them.  0, or -1: unknown handle. */
int simgpu_graph_object_id(int what, const void *handle, uint64_t *id);

/* 1 when [p, p + n) lies inside one live device (or managed) allocation. */
int simgpu_device_range_ok(const void *p, size_t n);

/* CLOCK_MONOTONIC ns, as used by the timeline. */
uint64_t simgpu_now_ns(void);

/* Writes pending truth lines now (also done at exit and cudaDeviceReset). */
void simgpu_truth_flush(void);

/* Names for the enums above, as used in the truth log. */
const char *simgpu_op_kind_name(unsigned kind);
const char *simgpu_copy_kind_name(unsigned kind);
const char *simgpu_mem_kind_name(unsigned kind);
const char *simgpu_sync_kind_name(unsigned kind);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
