/*
 * CUPTI conformance: every behaviour of CUPTI that libtbprof relies on, one line each
 * ("key: value"), measured by a small CUDA program that uses CUPTI the way libtbprof does (the
 * same libcupti search, cupti_lib.c; the same choice of API records).  Run on a real GPU its table
 * is the truth; run on simgpu it says whether the stand-in behaves the same (doc/gpu.md,
 * "Conformance").
 *
 *   cupti_conformance                    prints the table (each enabling mode in a fresh process)
 *   cupti_conformance --expect FILE      and the lines that differ from FILE ("unknown" there: not
 *                                        compared, printed as MEASURED); exit 1 when any differs
 *   cupti_conformance --mode MODE        one mode's lines (what the table is made of)
 *
 * Exit 0, 1 (differences), 2 (usage), 77 (no CUDA runtime, no CUPTI or no device: nothing to
 * measure).  Libraries come from the dynamic linker's path (LD_LIBRARY_PATH: simgpu's stand-ins in
 * tests, the wheel's nvidia/cu13/lib on a GPU machine: run-real.sh).
 *
 * What runs in each mode, on the main thread unless said (every call but setup and the first
 * library calls inside a push/pop of an external id of our own, kind CUSTOM2, as libtbprof's hooks
 * do):
 *   direct    10 cudaMemsetAsync, 10 cuLaunchKernel, 1 cudaStreamSynchronize (wanted: they make
 *             GPU records), 10 cudaEventRecord, 10 cuMemAlloc and cuMemFree (not wanted);
 *   thread    5 cudaMemsetAsync on a second thread;
 *   library   5 cublasSgemm without a push (cuBLAS links its runtime statically: its runtime calls
 *             are invisible to a preload, and reach the driver inside), then 5 inside a push;
 *   graph     3 cuLaunchKernel captured into a graph on a stream (cudaStreamBeginCapture/EndCapture),
 *             instantiated twice, the second launched 3 times (cudaGraphLaunch inside a push);
 *   order     a 20 ms kernel on one stream, then 20 short ones on another, and a flush of the
 *             completed records (cuptiActivityFlushAll(0)) while the long one still runs.
 *
 * With --preload LIBTBPROF --tbanalyze TBANALYZE the table has a fourth part: --mode preload runs
 * under LD_PRELOAD=LIBTBPROF (CUPTI left to libtbprof), makes N_LIBRARY cublasSgemm calls, and the
 * trace (read with `TBANALYZE dump --json`) says whether the driver calls cuBLAS's statically linked
 * runtime makes (through an entry point from dlsym/cuGetProcAddress) reached libtbprof's hooks, and
 * whether each cuBLAS kernel was joined to one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>

#include "cupti_lib.h"

#define EXT_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
#define CLOCK_SHIFT_NS 1000000000000ull   /* the timestamp callback's clock: CLOCK_MONOTONIC + this */
#define SPIN_NS 20000000ull
#define SLACK_NS 1000ull                  /* the stand-in rounds a callback clock's offset to 1 us */
#define N_DIRECT 10
#define N_THREAD 5
#define N_LIBRARY 5
#define N_ORDER 20
#define N_GRAPH_NODES 3
#define N_GRAPH_LAUNCHES 3

static const char *const modes[] = { "per_id", "whole_kinds", "kinds_then_ids_off" };

/* ------------------------------------------------------------ libraries */
typedef int rt_result;  /* cudaError_t (cupti.h brings it in on some toolkits) */
static struct {
	rt_result (*set_device)(int);
	rt_result (*free_)(void *);
	rt_result (*malloc_)(void **, size_t);
	rt_result (*stream_create)(void **);
	rt_result (*memset_async)(void *, int, size_t, void *);
	rt_result (*event_create)(void **);
	rt_result (*event_record)(void *, void *);
	rt_result (*stream_sync)(void *);
	rt_result (*device_sync)(void);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*module_load_data)(CUmodule *, const void *);
	CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   CUstream, void **, void **);
	int (*blas_create)(void **);
	int (*blas_set_stream)(void *, void *);
	int (*blas_sgemm)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
			  const float *, float *, int);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*enable_runtime_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*enable_driver_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*get_callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*register_ts)(CUpti_TimestampCallbackFunc);
	CUptiResult (*get_next_record)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*push)(CUpti_ExternalCorrelationKind, uint64_t);
	CUptiResult (*pop)(CUpti_ExternalCorrelationKind, uint64_t *);
	rt_result (*begin_capture)(void *, int);
	rt_result (*end_capture)(void *, void **);
	rt_result (*graph_instantiate)(void **, void *, unsigned long long);
	rt_result (*graph_get_nodes)(void *, void **, size_t *);
	rt_result (*graph_launch)(void *, void *);
	/* Optional (NULL: this CUPTI lacks them): the ids CUPTI gives graphs and nodes. */
	CUptiResult (*graph_id)(CUgraph, uint32_t *);
	CUptiResult (*graph_exec_id)(CUgraphExec, uint32_t *);
	CUptiResult (*graph_node_id)(CUgraphNode, uint64_t *);
} L;

static void *need(void *lib, const char *name)
{
	void *p = lib ? dlsym(lib, name) : NULL;
	if (!p) {
		fprintf(stderr, "cupti_conformance: %s not found: %s\n", name, dlerror());
		exit(77);
	}
	return p;
}

static void *open_lib(const char *soname)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "cupti_conformance: cannot load %s: %s\n", soname, dlerror());
		exit(77);
	}
	return h;
}

#define NEED(lib, field, name) (*(void **)&L.field = need(lib, name))

static void load_libraries(int with_cupti)
{
	void *rt = open_lib("libcudart.so.13");
	void *drv = open_lib("libcuda.so.1");
	void *blas = open_lib("libcublas.so.13");
	NEED(rt, set_device, "cudaSetDevice");
	NEED(rt, free_, "cudaFree");
	NEED(rt, malloc_, "cudaMalloc");
	NEED(rt, stream_create, "cudaStreamCreate");
	NEED(rt, device_sync, "cudaDeviceSynchronize");
	NEED(blas, blas_create, "cublasCreate_v2");
	NEED(blas, blas_set_stream, "cublasSetStream_v2");
	NEED(blas, blas_sgemm, "cublasSgemm_v2");
	if (!with_cupti)
		return;
	char path[4096] = "";
	void *cupti = tbp_cupti_open(getenv("TBPROF_CUPTI_PATH"), path, sizeof path);
	if (!cupti) {
		fprintf(stderr, "cupti_conformance: libcupti not found (as libtbprof searches)\n");
		exit(77);
	}
	fprintf(stderr, "cupti_conformance: libcupti: %s\n", path);
	NEED(rt, memset_async, "cudaMemsetAsync");
	NEED(rt, event_create, "cudaEventCreate");
	NEED(rt, event_record, "cudaEventRecord");
	NEED(rt, stream_sync, "cudaStreamSynchronize");
	NEED(rt, begin_capture, "cudaStreamBeginCapture");
	NEED(rt, end_capture, "cudaStreamEndCapture");
	NEED(rt, graph_instantiate, "cudaGraphInstantiate");
	NEED(rt, graph_get_nodes, "cudaGraphGetNodes");
	NEED(rt, graph_launch, "cudaGraphLaunch");
	NEED(drv, mem_alloc, "cuMemAlloc_v2");
	NEED(drv, mem_free, "cuMemFree_v2");
	NEED(drv, module_load_data, "cuModuleLoadData");
	NEED(drv, module_get_function, "cuModuleGetFunction");
	NEED(drv, launch, "cuLaunchKernel");
	NEED(cupti, enable, "cuptiActivityEnable");
	*(void **)&L.graph_id = dlsym(cupti, "cuptiGetGraphId");
	*(void **)&L.graph_exec_id = dlsym(cupti, "cuptiGetGraphExecId");
	*(void **)&L.graph_node_id = dlsym(cupti, "cuptiGetGraphNodeId");
	NEED(cupti, enable_runtime_api, "cuptiActivityEnableRuntimeApi");
	NEED(cupti, enable_driver_api, "cuptiActivityEnableDriverApi");
	NEED(cupti, get_callback_name, "cuptiGetCallbackName");
	NEED(cupti, register_callbacks, "cuptiActivityRegisterCallbacks");
	NEED(cupti, register_ts, "cuptiActivityRegisterTimestampCallback");
	NEED(cupti, get_next_record, "cuptiActivityGetNextRecord");
	NEED(cupti, flush_all, "cuptiActivityFlushAll");
	NEED(cupti, push, "cuptiActivityPushExternalCorrelationId");
	NEED(cupti, pop, "cuptiActivityPopExternalCorrelationId");
}

/* ------------------------------------------------------------ clocks */
static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t CUPTIAPI shifted_clock(void)
{
	return mono_ns() + CLOCK_SHIFT_NS;
}

static int ts_callback_taken;
/* Our times in the clock records should be in (the callback's). */
static uint64_t now(void)
{
	return ts_callback_taken ? shifted_clock() : mono_ns();
}

/* ------------------------------------------------------------ records, as they arrive */
enum rec_kind { R_API_RUNTIME, R_API_DRIVER, R_EXT, R_KERNEL, R_MEMSET, R_SYNC, R_OTHER };
struct rec {
	enum rec_kind kind;
	uint32_t corr, cbid, thread;
	uint64_t start, end;
	uint64_t ext_id;
	uint32_t ext_kind;
	char name[64];              /* kernel */
	uint32_t graph_id;          /* kernel: graphId, graphNodeId */
	uint64_t graph_node_id;
};
static struct rec *recs;
static size_t n_recs, cap_recs;
static pthread_mutex_t recs_lock = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*size = 8u << 20;
	*buffer = aligned_alloc(8, *size);
	*max_records = 0;
}

static void keep(const struct rec *r)
{
	if (n_recs == cap_recs) {
		cap_recs = cap_recs ? 2 * cap_recs : 4096;
		recs = realloc(recs, cap_recs * sizeof *recs);
		if (!recs)
			abort();
	}
	recs[n_recs++] = *r;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	(void)ctx; (void)stream; (void)size;
	CUpti_Activity *a = NULL;
	pthread_mutex_lock(&recs_lock);
	while (buffer && L.get_next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
		struct rec r;
		memset(&r, 0, sizeof r);
		switch (a->kind) {
		case CUPTI_ACTIVITY_KIND_RUNTIME:
		case CUPTI_ACTIVITY_KIND_DRIVER: {
			const CUpti_ActivityAPI *p = (const void *)a;
			r.kind = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? R_API_RUNTIME : R_API_DRIVER;
			r.corr = p->correlationId;
			r.cbid = p->cbid;
			r.thread = p->threadId;
			r.start = p->start;
			r.end = p->end;
			break;
		}
		case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
			const CUpti_ActivityExternalCorrelation *p = (const void *)a;
			r.kind = R_EXT;
			r.corr = p->correlationId;
			r.ext_id = p->externalId;
			r.ext_kind = p->externalKind;
			break;
		}
		case CUPTI_ACTIVITY_KIND_KERNEL:
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
			const CUpti_ActivityKernel10 *p = (const void *)a;
			r.kind = R_KERNEL;
			r.corr = p->correlationId;
			r.start = p->start;
			r.end = p->end;
			snprintf(r.name, sizeof r.name, "%s", p->name ? p->name : "");
			r.graph_id = p->graphId;
			r.graph_node_id = p->graphNodeId;
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMSET: {
			const CUpti_ActivityMemset4 *p = (const void *)a;
			r.kind = R_MEMSET;
			r.corr = p->correlationId;
			r.start = p->start;
			r.end = p->end;
			break;
		}
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
			const CUpti_ActivitySynchronization2 *p = (const void *)a;
			r.kind = R_SYNC;
			r.corr = p->correlationId;
			r.start = p->start;
			r.end = p->end;
			break;
		}
		default:
			r.kind = R_OTHER;
			break;
		}
		keep(&r);
	}
	pthread_mutex_unlock(&recs_lock);
	free(buffer);
}

/* ------------------------------------------------------------ the calls we make */
struct call {
	const char *name;      /* the API (callback names start with it) */
	int driver, wanted, pushed;
	uint64_t ext_id, t0, t1;
	uint32_t pthread_id, tid;
	const char *phase;
};
static struct call calls[256];
static size_t n_calls;
static uint64_t next_ext = 7000;

static struct call *begin_call(const char *phase, const char *name, int driver, int push)
{
	struct call *c = &calls[n_calls++];
	c->phase = phase;
	c->name = name;
	c->driver = driver;
	c->wanted = tbp_cupti_join_class(driver, name) != 0;
	c->pushed = push;
	c->pthread_id = (uint32_t)(uintptr_t)pthread_self();
	c->tid = (uint32_t)syscall(SYS_gettid);
	if (push) {
		c->ext_id = next_ext++;
		L.push(EXT_KIND, c->ext_id);
	}
	c->t0 = now();
	return c;
}

static void end_call(struct call *c)
{
	c->t1 = now();
	if (c->pushed) {
		uint64_t last;
		L.pop(EXT_KIND, &last);
	}
}

static void check_cuda(const char *what, long r)
{
	if (r != 0) {
		fprintf(stderr, "cupti_conformance: %s failed (%ld)\n", what, r);
		exit(77);
	}
}

static const char ptx[] =
	".version 7.0\n.target sm_70\n.address_size 64\n"
	".visible .entry tbp_conformance_noop()\n{\n\tret;\n}\n"
	".visible .entry tbp_conformance_spin(.param .u64 ns)\n{\n"
	"\t.reg .pred %p;\n\t.reg .b64 %rd<5>;\n\tld.param.u64 %rd1, [ns];\n\tmov.u64 %rd2, %globaltimer;\n"
	"SPIN:\n\tmov.u64 %rd3, %globaltimer;\n\tsub.s64 %rd4, %rd3, %rd2;\n\tsetp.lt.u64 %p, %rd4, %rd1;\n"
	"\t@%p bra SPIN;\n\tret;\n}\n";

static void *stream1, *stream2, *devbuf;
static CUfunction f_noop, f_spin;
static uint64_t run_t0, run_t1, lib_t0, lib_t1, order_t0, graph_t0, graph_t1;
/* What CUPTI says of the graph (0: its function failed or is missing). */
static uint32_t graph_cupti_id, exec_cupti_id;
static uint64_t node_cupti_id[N_GRAPH_NODES];
static int graph_ok;

static void *thread_main(void *arg)
{
	(void)arg;
	for (int i = 0; i < N_THREAD; i++) {
		/* calls[] is the main thread's too: it waits in pthread_join meanwhile. */
		struct call *c = begin_call("thread", "cudaMemsetAsync", 0, 1);
		L.memset_async(devbuf, 0, 4096, stream2);
		end_call(c);
	}
	return NULL;
}

static void run_workload(void)
{
	void *blas = NULL;
	float *a = NULL;
	const float one = 1.0f, zero = 0.0f;
	run_t0 = now();
	check_cuda("cudaStreamCreate", L.stream_create(&stream1));
	check_cuda("cudaStreamCreate", L.stream_create(&stream2));
	check_cuda("cudaMalloc", L.malloc_(&devbuf, 1 << 20));
	void *event = NULL;
	check_cuda("cudaEventCreate", L.event_create(&event));
	check_cuda("cudaMalloc", L.malloc_((void **)&a, 3 * 64 * 64 * sizeof(float)));
	CUmodule mod;
	check_cuda("cuModuleLoadData", L.module_load_data(&mod, ptx));
	check_cuda("cuModuleGetFunction", L.module_get_function(&f_noop, mod, "tbp_conformance_noop"));
	check_cuda("cuModuleGetFunction", L.module_get_function(&f_spin, mod, "tbp_conformance_spin"));
	check_cuda("cublasCreate", L.blas_create(&blas));
	check_cuda("cublasSetStream", L.blas_set_stream(blas, stream1));
	/* The library's first call may set itself up: not measured. */
	check_cuda("cublasSgemm", L.blas_sgemm(blas, 0, 0, 64, 64, 64, &one, a, 64, a + 4096, 64, &zero, a + 8192, 64));
	check_cuda("cudaDeviceSynchronize", L.device_sync());

	for (int i = 0; i < N_DIRECT; i++) {
		struct call *c = begin_call("direct", "cudaMemsetAsync", 0, 1);
		L.memset_async(devbuf, 0, 4096, stream1);
		end_call(c);
		c = begin_call("direct", "cuLaunchKernel", 1, 1);
		L.launch(f_noop, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream1, NULL, NULL);
		end_call(c);
		c = begin_call("direct", "cudaEventRecord", 0, 1);
		L.event_record(event, stream1);
		end_call(c);
		CUdeviceptr p = 0;
		c = begin_call("direct", "cuMemAlloc", 1, 1);
		L.mem_alloc(&p, 4096);
		end_call(c);
		c = begin_call("direct", "cuMemFree", 1, 1);
		L.mem_free(p);
		end_call(c);
	}
	struct call *c = begin_call("direct", "cudaStreamSynchronize", 0, 1);
	L.stream_sync(stream1);
	end_call(c);

	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) == 0)
		pthread_join(t, NULL);

	lib_t0 = now();
	for (int i = 0; i < N_LIBRARY; i++)
		L.blas_sgemm(blas, 0, 0, 64, 64, 64, &one, a, 64, a + 4096, 64, &zero, a + 8192, 64);
	for (int i = 0; i < N_LIBRARY; i++) {
		c = begin_call("library", "cublasSgemm", 0, 1);
		L.blas_sgemm(blas, 0, 0, 64, 64, 64, &one, a, 64, a + 4096, 64, &zero, a + 8192, 64);
		end_call(c);
	}
	lib_t1 = now();
	L.device_sync();

	/* A graph of N_GRAPH_NODES kernels; the second executable made of it is the one launched, so
	 * its id cannot equal the graph's by coincidence of two counters. */
	void *graph = NULL, *exec_first = NULL, *exec = NULL;
	void *nodes[N_GRAPH_NODES] = { 0 };
	size_t n_nodes = N_GRAPH_NODES;
	graph_ok = L.begin_capture(stream1, 0 /* cudaStreamCaptureModeGlobal */) == 0;
	for (int i = 0; graph_ok && i < N_GRAPH_NODES; i++)
		graph_ok = L.launch(f_noop, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream1, NULL, NULL) == CUDA_SUCCESS;
	graph_ok = L.end_capture(stream1, &graph) == 0 && graph_ok;
	graph_ok = graph_ok && L.graph_instantiate(&exec_first, graph, 0) == 0 &&
		   L.graph_instantiate(&exec, graph, 0) == 0 && L.graph_get_nodes(graph, nodes, &n_nodes) == 0 &&
		   n_nodes == N_GRAPH_NODES;
	if (graph_ok) {
		if (!L.graph_id || L.graph_id((CUgraph)graph, &graph_cupti_id) != CUPTI_SUCCESS)
			graph_cupti_id = 0;
		if (!L.graph_exec_id || L.graph_exec_id((CUgraphExec)exec, &exec_cupti_id) != CUPTI_SUCCESS)
			exec_cupti_id = 0;
		for (int i = 0; i < N_GRAPH_NODES; i++)
			if (!L.graph_node_id || L.graph_node_id((CUgraphNode)nodes[i], &node_cupti_id[i]) != CUPTI_SUCCESS)
				node_cupti_id[i] = 0;
		graph_t0 = now();
		for (int i = 0; i < N_GRAPH_LAUNCHES; i++) {
			c = begin_call("graph", "cudaGraphLaunch", 0, 1);
			L.graph_launch(exec, stream1);
			end_call(c);
		}
		L.device_sync();
		graph_t1 = now();
	} else {
		fprintf(stderr, "cupti_conformance: capturing or instantiating the graph failed\n");
	}

	order_t0 = now();
	unsigned long long ns = SPIN_NS;
	void *params[] = { &ns };
	L.launch(f_spin, 1, 1, 1, 1, 1, 1, 0, (CUstream)stream2, params, NULL);
	for (int i = 0; i < N_ORDER; i++)
		L.launch(f_noop, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream1, NULL, NULL);
	/* The short kernels are done, the long one runs: a flush of what has completed, as
	 * libtbprof's periodic flush asks for. */
	struct timespec pause = { 0, 5000000 };
	nanosleep(&pause, NULL);
	L.flush_all(0);
	L.device_sync();
	run_t1 = now();
	L.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* ------------------------------------------------------------ enabling, as in each mode */
static void enable_api_records(const char *mode)
{
	static const struct { CUpti_CallbackDomain domain; CUpti_ActivityKind kind; uint32_t n; } d[2] = {
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_SIZE + 256 },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_SIZE + 256 },
	};
	for (int i = 0; i < 2; i++) {
		CUptiResult (*set_one)(CUpti_CallbackId, uint8_t) = i ? L.enable_driver_api : L.enable_runtime_api;
		if (strcmp(mode, "per_id") != 0)
			L.enable(d[i].kind);
		if (!strcmp(mode, "whole_kinds"))
			continue;
		for (uint32_t cbid = 1; cbid < d[i].n; cbid++) {
			const char *name = NULL;
			int wanted = L.get_callback_name(d[i].domain, cbid, &name) == CUPTI_SUCCESS &&
				     tbp_cupti_join_class(i, name);
			if (!strcmp(mode, "per_id") && wanted)
				set_one(cbid, 1);
			else if (!strcmp(mode, "kinds_then_ids_off") && !wanted)
				set_one(cbid, 0);
		}
	}
}

/* ------------------------------------------------------------ analysis */
static void line(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s: ", key);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

static const char *cb_name(int driver, uint32_t cbid)
{
	const char *name = NULL;
	if (L.get_callback_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) !=
	    CUPTI_SUCCESS)
		return "";
	return name ? name : "";
}

static int is_api(const struct rec *r) { return r->kind == R_API_RUNTIME || r->kind == R_API_DRIVER; }

/* The API records of call `c`: its name, its thread, inside its interval. */
static size_t api_records_of(const struct call *c, const struct rec **first)
{
	size_t n = 0;
	for (size_t i = 0; i < n_recs; i++) {
		const struct rec *r = &recs[i];
		if (!is_api(r) || (r->kind == R_API_DRIVER) != c->driver || (r->thread != c->pthread_id && r->thread != c->tid))
			continue;
		if (r->start + SLACK_NS < c->t0 || r->end > c->t1 + SLACK_NS)
			continue;
		if (strncmp(cb_name(c->driver, r->cbid), c->name, strlen(c->name)) != 0)
			continue;
		if (!n++ && first)
			*first = r;
	}
	return n;
}

static const struct rec *ext_of(uint64_t ext_id)
{
	for (size_t i = 0; i < n_recs; i++)
		if (recs[i].kind == R_EXT && recs[i].ext_kind == EXT_KIND && recs[i].ext_id == ext_id)
			return &recs[i];
	return NULL;
}

static const struct rec *by_corr(enum rec_kind kind, uint32_t corr)
{
	for (size_t i = 0; i < n_recs; i++)
		if (recs[i].kind == kind && recs[i].corr == corr)
			return &recs[i];
	return NULL;
}

/* "none", "wanted calls only", "every call" or the counts, over the direct phase's calls. */
static void classify(char *out, size_t len, size_t total, const size_t got[2], const size_t all[2])
{
	if (total <= 1)
		snprintf(out, len, "none");
	else if (got[1] == all[1] && got[0] == 0)
		snprintf(out, len, "wanted calls only");
	else if (got[1] == all[1] && got[0] == all[0])
		snprintf(out, len, "every call");
	else
		snprintf(out, len, "%zu of %zu wanted calls, %zu of %zu others", got[1], all[1], got[0], all[0]);
}

/* The graph's launches: their API records and pairs, and what CUPTI's records of the kernels they
 * replayed carry (correlation id, graphId, graphNodeId). */
static void analyse_graph(void)
{
	if (!graph_ok) {
		line("graph.launch_api_record", "graph not made");
		return;
	}
	size_t launches = 0, with_api = 0, paired = 0, paired_right = 0;
	uint32_t launch_corr[N_GRAPH_LAUNCHES] = { 0 };
	for (size_t i = 0; i < n_calls; i++) {
		const struct call *c = &calls[i];
		if (strcmp(c->phase, "graph") != 0)
			continue;
		const struct rec *api = NULL;
		if (api_records_of(c, &api) && launches < N_GRAPH_LAUNCHES) {
			with_api++;
			launch_corr[launches] = api->corr;
		}
		const struct rec *e = ext_of(c->ext_id);
		paired += e != NULL;
		paired_right += e && api && e->corr == api->corr;
		launches++;
	}
	line("graph.launch_api_record", "%s",
	     with_api == launches ? "one per launch" : with_api ? "some launches" : "none");
	line("graph.external_correlation", "%s",
	     paired && paired_right == launches ? "pairs with the launch's API record"
	     : paired ? "pairs with another record" : "none");
	/* The replayed kernels: the noop kernels that ran between the first launch and the sync. */
	size_t kernels = 0, carry_launch = 0, carry_api = 0, carry_zero = 0, per_launch[N_GRAPH_LAUNCHES] = { 0 };
	size_t gid_graph = 0, gid_exec = 0, gid_zero = 0, nid_node = 0, nid_zero = 0;
	for (size_t i = 0; i < n_recs; i++) {
		const struct rec *k = &recs[i];
		if (k->kind != R_KERNEL || strcmp(k->name, "tbp_conformance_noop") != 0 || k->start < graph_t0 ||
		    k->start > graph_t1)
			continue;
		kernels++;
		int which = -1;
		for (int l = 0; l < N_GRAPH_LAUNCHES; l++)
			if (launch_corr[l] && k->corr == launch_corr[l])
				which = l;
		if (which >= 0) {
			carry_launch++;
			per_launch[which]++;
		} else if (!k->corr) {
			carry_zero++;
		} else if (by_corr(R_API_RUNTIME, k->corr) || by_corr(R_API_DRIVER, k->corr)) {
			carry_api++;
		}
		gid_graph += graph_cupti_id && k->graph_id == graph_cupti_id;
		gid_exec += exec_cupti_id && k->graph_id == exec_cupti_id;
		gid_zero += !k->graph_id;
		for (int n = 0; n < N_GRAPH_NODES; n++)
			nid_node += node_cupti_id[n] && k->graph_node_id == node_cupti_id[n];
		nid_zero += !k->graph_node_id;
	}
	int each_launch = 1;
	for (int l = 0; l < N_GRAPH_LAUNCHES; l++)
		each_launch &= per_launch[l] == N_GRAPH_NODES;
	if (kernels == N_GRAPH_NODES * N_GRAPH_LAUNCHES)
		line("graph.kernel_records", "one per node per launch");
	else
		line("graph.kernel_records", "%zu for %d nodes x %d launches", kernels, N_GRAPH_NODES, N_GRAPH_LAUNCHES);
	line("graph.kernel_correlation_id", "%s",
	     !kernels ? "no kernels"
	     : carry_launch == kernels && each_launch ? "the graph launch's API record"
	     : carry_zero == kernels ? "0"
	     : carry_api == kernels ? "another API record"
	     : carry_launch + carry_api + carry_zero == 0 ? "no API record" : "mixed");
	line("graph.kernel_graph_id", "%s",
	     !kernels ? "no kernels"
	     : gid_zero == kernels ? "0"
	     : gid_graph == kernels && gid_exec == kernels ? "the graph's and the executable's (one id)"
	     : gid_graph == kernels ? "the graph's (cuptiGetGraphId)"
	     : gid_exec == kernels ? "the executable graph's (cuptiGetGraphExecId)" : "another id");
	line("graph.kernel_graph_node_id", "%s",
	     !kernels ? "no kernels"
	     : nid_zero == kernels ? "0"
	     : nid_node == kernels ? "the captured node's (cuptiGetGraphNodeId)" : "another id");
}

static void analyse(const char *mode)
{
	size_t all[2] = { 0, 0 }, with_api[2] = { 0, 0 }, with_pair[2] = { 0, 0 }, api_total = 0, ext_total = 0;
	int twice = 0;
	for (size_t i = 0; i < n_recs; i++) {
		api_total += is_api(&recs[i]);
		ext_total += recs[i].kind == R_EXT;
	}
	for (size_t i = 0; i < n_calls; i++) {
		const struct call *c = &calls[i];
		if (strcmp(c->phase, "direct") != 0)
			continue;
		all[c->wanted]++;
		size_t n = api_records_of(c, NULL);
		with_api[c->wanted] += n > 0;
		twice |= n > 1;
		with_pair[c->wanted] += ext_of(c->ext_id) != NULL;
	}
	char key[128], value[256];
	classify(value, sizeof value, api_total, with_api, all);
	snprintf(key, sizeof key, "api_records.%s", mode);
	line(key, "%s%s", value, twice ? " (some calls twice)" : "");
	classify(value, sizeof value, ext_total, with_pair, all);
	snprintf(key, sizeof key, "external_correlation.%s", mode);
	line(key, "%s", value);
	if (strcmp(mode, "kinds_then_ids_off") != 0)
		return;

	/* Which API record an external id pairs with, and which record GPU work carries. */
	size_t paired_right = 0, paired = 0, gpu_right = 0, gpu_calls = 0;
	for (size_t i = 0; i < n_calls; i++) {
		const struct call *c = &calls[i];
		if (strcmp(c->phase, "direct") != 0 || !c->wanted)
			continue;
		const struct rec *api = NULL;
		if (!api_records_of(c, &api))
			continue;
		const struct rec *e = ext_of(c->ext_id);
		paired += e != NULL;
		paired_right += e && e->corr == api->corr;
		enum rec_kind gpu = !strcmp(c->name, "cuLaunchKernel") ? R_KERNEL
				    : !strcmp(c->name, "cudaMemsetAsync") ? R_MEMSET : R_SYNC;
		gpu_calls++;
		gpu_right += by_corr(gpu, api->corr) != NULL;
	}
	line("external_correlation.pairs_with", "%s",
	     paired && paired_right == paired ? "the call's API record" : paired ? "another record" : "nothing");
	if (gpu_calls && gpu_right == gpu_calls)
		line("gpu_record.correlation_id", "the API record of the call that made it");
	else
		line("gpu_record.correlation_id", "%zu of %zu calls' GPU records carry their API record's id", gpu_right,
		     gpu_calls);

	/* Threads: CUPTI's threadId against gettid() and pthread_self(). */
	size_t as_pthread = 0, as_tid = 0, seen = 0;
	for (size_t i = 0; i < n_calls; i++) {
		const struct call *c = &calls[i];
		if (strcmp(c->phase, "direct") != 0 && strcmp(c->phase, "thread") != 0)
			continue;
		const struct rec *api = NULL;
		if (!c->wanted || !api_records_of(c, &api))
			continue;
		seen++;
		as_pthread += api->thread == c->pthread_id;
		as_tid += api->thread == c->tid;
	}
	line("api_record.thread_id", "%s",
	     !seen ? "no records" : as_pthread == seen ? "low 32 bits of pthread_self()"
			       : as_tid == seen ? "gettid()" : "neither pthread_self() nor gettid()");

	/* Clock: every record's times inside the run, in the callback's clock. */
	size_t timed = 0, in_run = 0;
	for (size_t i = 0; i < n_recs; i++) {
		const struct rec *r = &recs[i];
		if (r->kind == R_EXT || r->kind == R_OTHER)
			continue;
		timed++;
		in_run += r->start + SLACK_NS >= run_t0 && r->end <= run_t1 + SLACK_NS;
	}
	line("clock.timestamp_callback", "%s",
	     !ts_callback_taken ? "refused" : timed && in_run == timed ? "records in the callback's clock"
								       : "records in another clock");

	/* The library's runtime calls: which records come, which id its kernels carry. */
	size_t rt = 0, drv_inside = 0, lib_kernels = 0, carry_rt = 0, carry_drv = 0;
	for (size_t i = 0; i < n_recs; i++) {
		const struct rec *r = &recs[i];
		if (r->kind != R_API_RUNTIME || r->start + SLACK_NS < lib_t0 || r->end > lib_t1 + SLACK_NS)
			continue;
		rt++;
		for (size_t j = 0; j < n_recs; j++)
			drv_inside += recs[j].kind == R_API_DRIVER && recs[j].thread == r->thread &&
				      recs[j].start >= r->start && recs[j].end <= r->end;
	}
	for (size_t i = 0; i < n_recs; i++) {
		const struct rec *k = &recs[i];
		/* The library's kernels of the measured calls (its set-up call's ran before lib_t0). */
		if (k->kind != R_KERNEL || !strncmp(k->name, "tbp_conformance", 15) || k->start < lib_t0 ||
		    k->start >= order_t0)
			continue;
		lib_kernels++;
		carry_rt += by_corr(R_API_RUNTIME, k->corr) != NULL;
		carry_drv += by_corr(R_API_DRIVER, k->corr) != NULL;
	}
	line("library_call.runtime_records", "%s", rt ? "present" : "none");
	line("library_call.driver_records_inside", "%s", drv_inside ? "present" : "none");
	line("library_call.kernel_correlation_id", "%s",
	     !lib_kernels ? "no kernels" : carry_rt == lib_kernels ? "its runtime API record"
				      : carry_drv == lib_kernels ? "a driver API record"
				      : carry_rt + carry_drv == 0 ? "no API record" : "mixed");
	size_t pushed = 0, pushed_paired = 0;
	for (size_t i = 0; i < n_calls; i++) {
		const struct call *c = &calls[i];
		if (strcmp(c->phase, "library") != 0)
			continue;
		pushed++;
		const struct rec *e = ext_of(c->ext_id);
		const struct rec *api = e ? by_corr(R_API_RUNTIME, e->corr) : NULL;
		pushed_paired += api && api->start + SLACK_NS >= c->t0 && api->end <= c->t1 + SLACK_NS;
	}
	line("library_call.pushed_around_it", "%s",
	     pushed_paired == pushed ? "pairs with its runtime record" : pushed_paired ? "some pair" : "no pair");

	analyse_graph();

	/* Delivery: a record arriving after one that started later. */
	int out_of_order = 0;
	uint64_t latest = 0;
	for (size_t i = 0; i < n_recs; i++) {
		const struct rec *r = &recs[i];
		if (r->kind != R_KERNEL || strncmp(r->name, "tbp_conformance", 15) || r->start < order_t0)
			continue;
		out_of_order |= r->start < latest;
		if (r->start > latest)
			latest = r->start;
	}
	line("delivery.across_streams", "%s", out_of_order ? "out of start order" : "in start order");
}

/* Under LD_PRELOAD=libtbprof.so (--mode preload): cuBLAS's calls only, CUPTI left to libtbprof. */
static int run_preload(void)
{
	load_libraries(0);
	void *blas = NULL;
	float *a = NULL;
	const float one = 1.0f, zero = 0.0f;
	check_cuda("cudaSetDevice", L.set_device(0));
	check_cuda("cudaStreamCreate", L.stream_create(&stream1));
	check_cuda("cudaMalloc", L.malloc_((void **)&a, 3 * 64 * 64 * sizeof(float)));
	check_cuda("cublasCreate", L.blas_create(&blas));
	check_cuda("cublasSetStream", L.blas_set_stream(blas, stream1));
	for (int i = 0; i < N_LIBRARY; i++)
		check_cuda("cublasSgemm",
			   L.blas_sgemm(blas, 0, 0, 64, 64, 64, &one, a, 64, a + 4096, 64, &zero, a + 8192, 64));
	check_cuda("cudaDeviceSynchronize", L.device_sync());
	return 0;
}

/* The numeric value of "key": in a JSON line (0: none). */
static uint64_t json_u64(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(json, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* The preload lines: the program under LD_PRELOAD=libtbprof, its trace read by tbanalyze dump.
 * Appends to got[]; returns 0, or the exit code of what failed. */
static int measure_preload(const char *self, const char *libtbprof, const char *tbanalyze, char (*out)[2][384],
			   size_t *n_out)
{
	char dir[] = "/tmp/tbp_conformance_XXXXXX";
	if (!mkdtemp(dir))
		return 2;
	char trace[256], cmd[2048];
	snprintf(trace, sizeof trace, "%s/preload.zst", dir);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("LD_PRELOAD", libtbprof, 1);
		setenv("TBPROF_OUT", trace, 1);
		execl(self, self, "--mode", "preload", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "cupti_conformance: mode preload: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
		return WIFEXITED(st) && WEXITSTATUS(st) == 77 ? 77 : 1;
	}
	snprintf(cmd, sizeof cmd, "'%s' dump '%s' --json", tbanalyze, trace);
	FILE *p = popen(cmd, "r");
	if (!p)
		return 2;
	/* Launch records by corr; the library's kernels (every kernel here is cuBLAS's). */
	static uint64_t launch_corr[4096];
	static char launch_api[4096][32];
	size_t n_launch = 0, kernels = 0, joined = 0, driver_launches = 0;
	static uint64_t kernel_corr[4096];
	char buf[65536];
	while (fgets(buf, sizeof buf, p)) {
		if (strstr(buf, "\"kind\":\"launch\"") && n_launch < 4096) {
			const char *api = strstr(buf, "\"api_name\":\"");
			snprintf(launch_api[n_launch], sizeof launch_api[n_launch], "%.*s", api ? (int)strcspn(api + 12, "\"") : 0,
				 api ? api + 12 : "");
			driver_launches += api && !strncmp(api + 12, "cuLaunch", 8);
			launch_corr[n_launch++] = json_u64(buf, "corr");
		} else if (strstr(buf, "\"kind\":\"gpu_kernel\"") && kernels < 4096) {
			kernel_corr[kernels++] = json_u64(buf, "corr");
		}
	}
	int rc = pclose(p);
	for (size_t k = 0; k < kernels; k++)
		for (size_t l = 0; l < n_launch; l++)
			if (kernel_corr[k] && kernel_corr[k] == launch_corr[l] && !strncmp(launch_api[l], "cuLaunch", 8)) {
				joined++;
				break;
			}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cupti_conformance: could not remove %s\n", dir);
	if (rc != 0) {
		fprintf(stderr, "cupti_conformance: %s dump failed\n", tbanalyze);
		return 1;
	}
	snprintf(out[*n_out][0], 384, "preload.library_driver_calls");
	snprintf(out[(*n_out)++][1], 384, "%s",
		 driver_launches >= N_LIBRARY ? "reach the hooks" : driver_launches ? "some reach the hooks"
									: "do not reach the hooks");
	snprintf(out[*n_out][0], 384, "preload.library_kernels_joined");
	if (!kernels)
		snprintf(out[(*n_out)++][1], 384, "no kernels");
	else if (joined == kernels)
		snprintf(out[(*n_out)++][1], 384, "every kernel, to its driver call");
	else
		snprintf(out[(*n_out)++][1], 384, "%zu of %zu kernels", joined, kernels);
	return 0;
}

static int run_mode(const char *mode)
{
	load_libraries(1);
	check_cuda("cudaSetDevice", L.set_device(0));
	check_cuda("cudaFree", L.free_(NULL));
	ts_callback_taken = L.register_ts(shifted_clock) == CUPTI_SUCCESS;
	if (L.register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
		fprintf(stderr, "cupti_conformance: cuptiActivityRegisterCallbacks failed\n");
		return 77;
	}
	enable_api_records(mode);
	static const CUpti_ActivityKind kinds[] = {
		CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
		CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
	};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (L.enable(kinds[i]) != CUPTI_SUCCESS) {
			fprintf(stderr, "cupti_conformance: cuptiActivityEnable(%d) failed\n", (int)kinds[i]);
			return 77;
		}
	run_workload();
	pthread_mutex_lock(&recs_lock);
	analyse(mode);
	pthread_mutex_unlock(&recs_lock);
	fflush(stdout);
	return 0;
}

/* ------------------------------------------------------------ the table */
struct kv { char key[128], value[384]; };

static size_t parse(FILE *f, struct kv *out, size_t max)
{
	char buf[512];
	size_t n = 0;
	while (n < max && fgets(buf, sizeof buf, f)) {
		buf[strcspn(buf, "\n")] = 0;
		char *colon = strstr(buf, ": ");
		if (buf[0] == '#' || !colon)
			continue;
		*colon = 0;
		snprintf(out[n].key, sizeof out[n].key, "%.127s", buf);
		snprintf(out[n].value, sizeof out[n].value, "%.383s", colon + 2);
		n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *expect = NULL, *libtbprof = NULL, *tbanalyze = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
			/* simgpu's kernels last what this says (device code does not run there). */
			setenv("SIMGPU_KERNEL_NS", "tbp_conformance_spin:20000000", 0);
			if (!strcmp(argv[i + 1], "preload"))
				return run_preload();
			for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
				if (!strcmp(argv[i + 1], modes[m]))
					return run_mode(modes[m]);
			fprintf(stderr, "cupti_conformance: unknown mode '%s'\n", argv[i + 1]);
			return 2;
		} else if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
			expect = argv[++i];
		} else if (!strcmp(argv[i], "--preload") && i + 1 < argc) {
			libtbprof = argv[++i];
		} else if (!strcmp(argv[i], "--tbanalyze") && i + 1 < argc) {
			tbanalyze = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--expect FILE] [--preload LIBTBPROF --tbanalyze TBANALYZE] | "
				"--mode per_id|whole_kinds|kinds_then_ids_off|preload\n", argv[0]);
			return 2;
		}
	}
	struct kv expected[64], got[64];
	size_t n_expected = 0, n_got = 0;
	if (expect) {
		FILE *f = fopen(expect, "r");
		if (!f) {
			fprintf(stderr, "cupti_conformance: %s: %s\n", expect, strerror(errno));
			return 2;
		}
		n_expected = parse(f, expected, 64);
		fclose(f);
	}
	for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
		int fd[2];
		if (pipe(fd) != 0)
			return 2;
		pid_t pid = fork();
		if (pid == 0) {
			dup2(fd[1], 1);
			close(fd[0]);
			close(fd[1]);
			execl("/proc/self/exe", argv[0], "--mode", modes[m], (char *)NULL);
			_exit(127);
		}
		close(fd[1]);
		FILE *f = fdopen(fd[0], "r");
		size_t before = n_got;
		n_got += parse(f, got + n_got, 64 - n_got);
		fclose(f);
		int st = 0;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			fprintf(stderr, "cupti_conformance: mode %s: exit %d\n", modes[m], code);
			return code == 77 ? 77 : 1;
		}
		for (size_t i = before; i < n_got; i++)
			printf("%s: %s\n", got[i].key, got[i].value);
	}
	if (libtbprof && tbanalyze) {
		char pre[4][2][384];
		size_t n_pre = 0;
		int rc = measure_preload("/proc/self/exe", libtbprof, tbanalyze, pre, &n_pre);
		if (rc)
			return rc;
		for (size_t i = 0; i < n_pre && n_got < 64; i++, n_got++) {
			snprintf(got[n_got].key, sizeof got[n_got].key, "%.127s", pre[i][0]);
			snprintf(got[n_got].value, sizeof got[n_got].value, "%.383s", pre[i][1]);
			printf("%s: %s\n", got[n_got].key, got[n_got].value);
		}
	}
	if (!expect)
		return 0;
	int differ = 0;
	for (size_t i = 0; i < n_expected; i++) {
		const char *value = NULL;
		for (size_t j = 0; j < n_got; j++)
			if (!strcmp(got[j].key, expected[i].key))
				value = got[j].value;
		if (!strcmp(expected[i].value, "unknown")) {
			/* Not compared: what this machine says, for the file to take it up. */
			if (value)
				printf("MEASURED %s: %s (unknown in %s)\n", expected[i].key, value, expect);
			continue;
		}
		if (!value || strcmp(value, expected[i].value) != 0) {
			printf("DIFFERS %s: expected '%s', measured '%s'\n", expected[i].key, expected[i].value,
			       value ? value : "(no line)");
			differ = 1;
		}
	}
	for (size_t j = 0; j < n_got; j++) {
		int known = 0;
		for (size_t i = 0; i < n_expected; i++)
			known |= !strcmp(got[j].key, expected[i].key);
		if (!known) {
			printf("NEW %s: %s (not in %s)\n", got[j].key, got[j].value, expect);
			differ = 1;
		}
	}
	printf("%s\n", differ ? "conformance: differences above" : "conformance: no difference");
	return differ;
}
