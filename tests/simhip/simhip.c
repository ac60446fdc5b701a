/*
 * simhip: a simulated HIP runtime presenting libamdhip64.so.5 (same soname,
 * same symbol versions as Debian's ROCm 5.2 build) so plain C programs
 * written against the HIP C API run without an AMD GPU.
 *
 * Device memory is host memory.  Nothing runs on a device; instead every
 * kernel, copy and memset is placed on a virtual device timeline kept in
 * CLOCK_MONOTONIC nanoseconds (real wall time), so host waits (synchronize
 * calls, synchronous copies) really last until the simulated work ends.
 *
 *   kernel:  SIMHIP_KERNEL_NS (3000) + threads * SIMHIP_KERNEL_PS_PER_THREAD (10) / 1000
 *   copy:    SIMHIP_COPY_LATENCY_NS (2000) + bytes / SIMHIP_H2D_BYTES_PER_NS (25, also D2H)
 *            or / SIMHIP_D2D_BYTES_PER_NS (1000)
 *   memset:  SIMHIP_MEMSET_NS (1500) + bytes / SIMHIP_D2D_BYTES_PER_NS
 *   launch:  SIMHIP_LAUNCH_NS (2000) of host busy time per enqueue
 *
 * Streams: the null stream is blocking with respect to every stream not
 * created with hipStreamNonBlocking (like CUDA's legacy default stream).
 * Async copies touching pageable host memory complete before returning.
 *
 * Ground truth: with SIMHIP_TRUTH=file every call is logged as one line of
 * key=value pairs (see doc/hip.md), so tests compare a profiler's trace with
 * what really happened.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hip/hip_runtime_api.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------ parameters */
struct sim_params {
	uint64_t kernel_ns, kernel_ps_per_thread, copy_latency_ns, h2d_bytes_per_ns,
		d2d_bytes_per_ns, memset_ns, launch_ns;
	int device_count;
};
static struct sim_params params;
static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *truth;

static uint64_t env_u64(const char *name, uint64_t fallback)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return fallback;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end) {
		fprintf(stderr, "simhip: ignoring %s=%s (not a number)\n", name, s);
		return fallback;
	}
	return v;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void wait_until(uint64_t t)
{
	/* Sleep for the bulk, spin the last stretch: sync calls return close to
	 * the simulated end, as a real driver's would. */
	for (;;) {
		uint64_t n = now_ns();
		if (n >= t)
			return;
		if (t - n > 200000) {
			uint64_t wake = t - 100000;
			struct timespec ts = { (time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
}

static void spin_for(uint64_t ns)
{
	if (!ns)
		return;
	uint64_t t = now_ns() + ns;
	while (now_ns() < t)
		;
}

__attribute__((constructor)) static void sim_init(void)
{
	params.kernel_ns = env_u64("SIMHIP_KERNEL_NS", 3000);
	params.kernel_ps_per_thread = env_u64("SIMHIP_KERNEL_PS_PER_THREAD", 10);
	params.copy_latency_ns = env_u64("SIMHIP_COPY_LATENCY_NS", 2000);
	params.h2d_bytes_per_ns = env_u64("SIMHIP_H2D_BYTES_PER_NS", 25);
	params.d2d_bytes_per_ns = env_u64("SIMHIP_D2D_BYTES_PER_NS", 1000);
	params.memset_ns = env_u64("SIMHIP_MEMSET_NS", 1500);
	params.launch_ns = env_u64("SIMHIP_LAUNCH_NS", 2000);
	params.device_count = (int)env_u64("SIMHIP_DEVICES", 1);
	if (!params.h2d_bytes_per_ns)
		params.h2d_bytes_per_ns = 1;
	if (!params.d2d_bytes_per_ns)
		params.d2d_bytes_per_ns = 1;
	const char *path = getenv("SIMHIP_TRUTH");
	if (path && *path) {
		truth = fopen(path, "w");
		if (!truth)
			fprintf(stderr, "simhip: cannot write SIMHIP_TRUTH=%s: %s\n", path, strerror(errno));
		else
			setvbuf(truth, NULL, _IOFBF, 1 << 16);
	}
}

__attribute__((destructor)) static void sim_fini(void)
{
	pthread_mutex_lock(&sim_lock);
	if (truth) {
		fclose(truth);
		truth = NULL;
	}
	pthread_mutex_unlock(&sim_lock);
}

/* One line of ground truth.  Caller holds sim_lock. */
__attribute__((format(printf, 1, 2))) static void truth_log(const char *fmt, ...)
{
	if (!truth)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(truth, fmt, ap);
	va_end(ap);
	fputc('\n', truth);
	/* Flushed per line: a program killed mid-run still leaves its truth. */
	fflush(truth);
}

/* ------------------------------------------------------------ errors */
static __thread hipError_t last_error;

static hipError_t ret(hipError_t e)
{
	if (e != hipSuccess)
		last_error = e;
	return e;
}

/* ------------------------------------------------------------ memory map
 * Every allocation (device, pinned host, managed) so copies can tell their
 * direction and whether the host side is pageable. */
enum mem_kind { MEM_DEVICE = 1, MEM_PINNED = 2, MEM_MANAGED = 3 };
struct allocation {
	uintptr_t base;
	size_t size;
	enum mem_kind kind;
};
static struct allocation *allocs;
static size_t nallocs, cap_allocs;

static void *alloc_add(size_t size, enum mem_kind kind)
{
	if (nallocs == cap_allocs) {
		size_t ncap = cap_allocs ? cap_allocs * 2 : 64;
		struct allocation *n = realloc(allocs, ncap * sizeof *n);
		if (!n)
			return NULL;
		allocs = n;
		cap_allocs = ncap;
	}
	void *p = NULL;
	/* Zero-sized requests still get a distinct address, as HIP does. */
	if (posix_memalign(&p, 256, size ? size : 1))
		return NULL;
	allocs[nallocs++] = (struct allocation){ (uintptr_t)p, size ? size : 1, kind };
	return p;
}

static struct allocation *alloc_find(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	for (size_t i = 0; i < nallocs; i++)
		if (a >= allocs[i].base && a < allocs[i].base + allocs[i].size)
			return &allocs[i];
	return NULL;
}

static const char *kind_name(enum mem_kind k)
{
	return k == MEM_DEVICE ? "device" : k == MEM_PINNED ? "pinned" : "managed";
}

/* ------------------------------------------------------------ streams, events */
struct ihipStream_t {
	uint32_t magic;
	unsigned flags;
	uint64_t busy_until; /* virtual time when queued work ends */
	struct ihipStream_t *next;
};
#define STREAM_MAGIC 0x5354524du
static struct ihipStream_t null_stream = { STREAM_MAGIC, 0, 0, NULL };
static struct ihipStream_t *streams; /* created streams */

struct ihipEvent_t {
	uint32_t magic;
	int recorded;
	uint64_t ts;
};
#define EVENT_MAGIC 0x4556454eu

static struct ihipStream_t *stream_of(hipStream_t s)
{
	if (!s)
		return &null_stream;
	for (struct ihipStream_t *it = streams; it; it = it->next)
		if (it == s)
			return it;
	return NULL;
}

/* When work enqueued now on s may start.  Caller holds sim_lock. */
static uint64_t stream_ready(struct ihipStream_t *s, uint64_t now)
{
	uint64_t t = now > s->busy_until ? now : s->busy_until;
	if (s == &null_stream) {
		for (struct ihipStream_t *it = streams; it; it = it->next)
			if (!(it->flags & hipStreamNonBlocking) && it->busy_until > t)
				t = it->busy_until;
	} else if (!(s->flags & hipStreamNonBlocking) && null_stream.busy_until > t) {
		t = null_stream.busy_until;
	}
	return t;
}

static uint64_t device_idle_at(void)
{
	uint64_t t = null_stream.busy_until;
	for (struct ihipStream_t *it = streams; it; it = it->next)
		if (it->busy_until > t)
			t = it->busy_until;
	return t;
}

/* Place dur ns of work on s; returns its start, *end its end. */
static uint64_t enqueue(struct ihipStream_t *s, uint64_t dur, uint64_t *end, uint64_t *issued)
{
	*issued = now_ns();
	uint64_t start = stream_ready(s, *issued);
	s->busy_until = start + dur;
	*end = s->busy_until;
	return start;
}

/* ------------------------------------------------------------ kernels */
struct kernel_entry {
	const void *host_fn;
	char *name;
};
static struct kernel_entry *kernels;
static size_t nkernels, cap_kernels;

struct ihipModuleSymbol_t {
	uint32_t magic;
	char name[256];
	struct ihipModuleSymbol_t *next; /* the module's functions, freed with it */
};
#define FUNC_MAGIC 0x46554e43u
struct ihipModule_t {
	uint32_t magic;
	struct ihipModuleSymbol_t *functions;
};
#define MODULE_MAGIC 0x4d4f4455u

static const char *kernel_name(const void *host_fn)
{
	for (size_t i = 0; i < nkernels; i++)
		if (kernels[i].host_fn == host_fn)
			return kernels[i].name;
	return NULL;
}

static uint64_t kernel_duration(dim3 g, dim3 b)
{
	uint64_t threads = (uint64_t)g.x * g.y * g.z * b.x * b.y * b.z;
	return params.kernel_ns + threads * params.kernel_ps_per_thread / 1000;
}

static int dims_valid(dim3 g, dim3 b)
{
	return g.x && g.y && g.z && b.x && b.y && b.z && (uint64_t)b.x * b.y * b.z <= 1024;
}

/* Caller holds sim_lock. */
static hipError_t launch_locked(const char *api, const char *name, dim3 g, dim3 b, size_t shmem,
				hipStream_t stream, const char *op)
{
	struct ihipStream_t *s = stream_of(stream);
	if (!s) {
		truth_log("op=error api=%s result=%d", api, hipErrorInvalidHandle);
		return hipErrorInvalidHandle;
	}
	if (!name) {
		truth_log("op=error api=%s result=%d", api, hipErrorInvalidDeviceFunction);
		return hipErrorInvalidDeviceFunction;
	}
	if (!dims_valid(g, b)) {
		truth_log("op=error api=%s result=%d", api, hipErrorInvalidConfiguration);
		return hipErrorInvalidConfiguration;
	}
	uint64_t end, issued, start = enqueue(s, kernel_duration(g, b), &end, &issued);
	truth_log("op=%s api=%s stream=%#" PRIxPTR " issued=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64
		  " name=%s grid=%u,%u,%u block=%u,%u,%u shmem=%zu result=0",
		  op, api, (uintptr_t)stream, issued, start, end, name, g.x, g.y, g.z, b.x, b.y, b.z, shmem);
	return hipSuccess;
}

static hipError_t launch(const char *api, const char *name, dim3 g, dim3 b, size_t shmem,
			 hipStream_t stream)
{
	spin_for(params.launch_ns);
	pthread_mutex_lock(&sim_lock);
	hipError_t e = launch_locked(api, name, g, b, shmem, stream, "kernel");
	pthread_mutex_unlock(&sim_lock);
	return ret(e);
}

/* hipcc's registration entry points (not declared in the public headers). */
struct sim_fatbin_modules {
	uint32_t magic;
};
SIM_EXPORT void *__hipRegisterFatBinary(const void *data)
{
	static struct sim_fatbin_modules modules = { MODULE_MAGIC };
	(void)data;
	return &modules;
}

SIM_EXPORT void __hipRegisterFunction(void *modules, const void *hostFunction, char *deviceFunction,
				      const char *deviceName, unsigned int threadLimit, void *tid,
				      void *bid, dim3 *blockDim, dim3 *gridDim, int *wSize)
{
	const char *name = deviceName ? deviceName : deviceFunction;
	if (!hostFunction || !name)
		return;
	pthread_mutex_lock(&sim_lock);
	if (nkernels == cap_kernels) {
		size_t ncap = cap_kernels ? cap_kernels * 2 : 32;
		struct kernel_entry *n = realloc(kernels, ncap * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&sim_lock);
			return;
		}
		kernels = n;
		cap_kernels = ncap;
	}
	kernels[nkernels].host_fn = hostFunction;
	kernels[nkernels].name = strdup(name);
	nkernels++;
	truth_log("op=register name=%s", name);
	pthread_mutex_unlock(&sim_lock);
}

SIM_EXPORT void __hipUnregisterFatBinary(void *modules)
{
	(void)modules;
}

/* <<<>>> lowering: the call site pushes, the host stub pops then launches. */
struct call_config {
	dim3 grid, block;
	size_t shmem;
	hipStream_t stream;
};
static __thread struct call_config config_stack[8];
static __thread int config_depth;

SIM_EXPORT hipError_t __hipPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
						 hipStream_t stream)
{
	if (config_depth == 8)
		return ret(hipErrorInvalidValue);
	config_stack[config_depth++] = (struct call_config){ gridDim, blockDim, sharedMem, stream };
	return hipSuccess;
}

SIM_EXPORT hipError_t __hipPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
						hipStream_t *stream)
{
	if (!config_depth)
		return ret(hipErrorInvalidValue);
	struct call_config c = config_stack[--config_depth];
	*gridDim = c.grid;
	*blockDim = c.block;
	*sharedMem = c.shmem;
	*stream = c.stream;
	return hipSuccess;
}

static const char *lookup_name_locked(const void *f)
{
	return kernel_name(f);
}

SIM_EXPORT hipError_t hipLaunchKernel(const void *function_address, dim3 numBlocks, dim3 dimBlocks,
				      void **args, size_t sharedMemBytes, hipStream_t stream)
{
	pthread_mutex_lock(&sim_lock);
	const char *name = lookup_name_locked(function_address);
	pthread_mutex_unlock(&sim_lock);
	return launch("hipLaunchKernel", name, numBlocks, dimBlocks, sharedMemBytes, stream);
}

SIM_EXPORT hipError_t hipLaunchCooperativeKernel(const void *f, dim3 gridDim, dim3 blockDimX,
						 void **kernelParams, unsigned int sharedMemBytes,
						 hipStream_t stream)
{
	pthread_mutex_lock(&sim_lock);
	const char *name = lookup_name_locked(f);
	pthread_mutex_unlock(&sim_lock);
	return launch("hipLaunchCooperativeKernel", name, gridDim, blockDimX, sharedMemBytes, stream);
}

static void event_stamp_locked(hipEvent_t ev, struct ihipStream_t *s, uint64_t t)
{
	(void)s;
	ev->recorded = 1;
	ev->ts = t;
}

static int event_valid(hipEvent_t ev)
{
	return ev && ev->magic == EVENT_MAGIC;
}

SIM_EXPORT hipError_t hipExtLaunchKernel(const void *function_address, dim3 numBlocks,
					 dim3 dimBlocks, void **args, size_t sharedMemBytes,
					 hipStream_t stream, hipEvent_t startEvent,
					 hipEvent_t stopEvent, int flags)
{
	if ((startEvent && !event_valid(startEvent)) || (stopEvent && !event_valid(stopEvent)))
		return ret(hipErrorInvalidHandle);
	spin_for(params.launch_ns);
	pthread_mutex_lock(&sim_lock);
	const char *name = lookup_name_locked(function_address);
	hipError_t e = launch_locked("hipExtLaunchKernel", name, numBlocks, dimBlocks, sharedMemBytes,
				     stream, "kernel");
	if (e == hipSuccess) {
		struct ihipStream_t *s = stream_of(stream);
		uint64_t end = s->busy_until;
		uint64_t start = end - kernel_duration(numBlocks, dimBlocks);
		if (startEvent)
			event_stamp_locked(startEvent, s, start);
		if (stopEvent)
			event_stamp_locked(stopEvent, s, end);
	}
	pthread_mutex_unlock(&sim_lock);
	return ret(e);
}

SIM_EXPORT hipError_t hipModuleLoadData(hipModule_t *module, const void *image)
{
	if (!module || !image)
		return ret(hipErrorInvalidValue);
	struct ihipModule_t *m = calloc(1, sizeof *m);
	if (!m)
		return ret(hipErrorOutOfMemory);
	m->magic = MODULE_MAGIC;
	*module = m;
	return hipSuccess;
}

SIM_EXPORT hipError_t hipModuleLoad(hipModule_t *module, const char *fname)
{
	return hipModuleLoadData(module, fname);
}

SIM_EXPORT hipError_t hipModuleUnload(hipModule_t module)
{
	if (!module || module->magic != MODULE_MAGIC)
		return ret(hipErrorInvalidHandle);
	module->magic = 0;
	while (module->functions) {
		struct ihipModuleSymbol_t *f = module->functions;
		module->functions = f->next;
		f->magic = 0;
		free(f);
	}
	free(module);
	return hipSuccess;
}

/* Any kernel name resolves: the simulated module "contains" what is asked. */
SIM_EXPORT hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module,
					   const char *kname)
{
	if (!function || !kname || !module || module->magic != MODULE_MAGIC)
		return ret(hipErrorInvalidValue);
	struct ihipModuleSymbol_t *f = calloc(1, sizeof *f);
	if (!f)
		return ret(hipErrorOutOfMemory);
	f->magic = FUNC_MAGIC;
	snprintf(f->name, sizeof f->name, "%s", kname);
	pthread_mutex_lock(&sim_lock);
	f->next = module->functions;
	module->functions = f;
	pthread_mutex_unlock(&sim_lock);
	*function = f;
	return hipSuccess;
}

SIM_EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX,
					    unsigned int gridDimY, unsigned int gridDimZ,
					    unsigned int blockDimX, unsigned int blockDimY,
					    unsigned int blockDimZ, unsigned int sharedMemBytes,
					    hipStream_t stream, void **kernelParams, void **extra)
{
	const char *name = f && f->magic == FUNC_MAGIC ? f->name : NULL;
	dim3 g = { gridDimX, gridDimY, gridDimZ }, b = { blockDimX, blockDimY, blockDimZ };
	return launch("hipModuleLaunchKernel", name, g, b, sharedMemBytes, stream);
}

/* ------------------------------------------------------------ graphs */
struct graph_node {
	const char *name;
	dim3 grid, block;
	size_t shmem;
};
struct ihipGraph {
	uint32_t magic;
	struct graph_node nodes[64];
	size_t nnodes;
};
struct hipGraphExec {
	uint32_t magic;
	struct graph_node nodes[64];
	size_t nnodes;
};
struct hipGraphNode {
	int unused;
};
#define GRAPH_MAGIC 0x47524150u
static struct hipGraphNode dummy_node;

SIM_EXPORT hipError_t hipGraphCreate(hipGraph_t *pGraph, unsigned int flags)
{
	if (!pGraph)
		return ret(hipErrorInvalidValue);
	struct ihipGraph *g = calloc(1, sizeof *g);
	if (!g)
		return ret(hipErrorOutOfMemory);
	g->magic = GRAPH_MAGIC;
	*pGraph = g;
	return hipSuccess;
}

SIM_EXPORT hipError_t hipGraphAddKernelNode(hipGraphNode_t *pGraphNode, hipGraph_t graph,
					    const hipGraphNode_t *pDependencies,
					    size_t numDependencies,
					    const hipKernelNodeParams *pNodeParams)
{
	if (!graph || graph->magic != GRAPH_MAGIC || !pNodeParams || graph->nnodes == 64)
		return ret(hipErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	const char *name = lookup_name_locked(pNodeParams->func);
	pthread_mutex_unlock(&sim_lock);
	if (!name)
		return ret(hipErrorInvalidDeviceFunction);
	graph->nodes[graph->nnodes++] = (struct graph_node){ name, pNodeParams->gridDim,
							     pNodeParams->blockDim,
							     pNodeParams->sharedMemBytes };
	if (pGraphNode)
		*pGraphNode = &dummy_node;
	return hipSuccess;
}

SIM_EXPORT hipError_t hipGraphInstantiate(hipGraphExec_t *pGraphExec, hipGraph_t graph,
					  hipGraphNode_t *pErrorNode, char *pLogBuffer,
					  size_t bufferSize)
{
	if (!pGraphExec || !graph || graph->magic != GRAPH_MAGIC)
		return ret(hipErrorInvalidValue);
	struct hipGraphExec *x = calloc(1, sizeof *x);
	if (!x)
		return ret(hipErrorOutOfMemory);
	x->magic = GRAPH_MAGIC;
	memcpy(x->nodes, graph->nodes, sizeof x->nodes);
	x->nnodes = graph->nnodes;
	*pGraphExec = x;
	return hipSuccess;
}

/* The nodes run one after another on the stream (a linear chain). */
SIM_EXPORT hipError_t hipGraphLaunch(hipGraphExec_t graphExec, hipStream_t stream)
{
	if (!graphExec || graphExec->magic != GRAPH_MAGIC)
		return ret(hipErrorInvalidValue);
	spin_for(params.launch_ns);
	pthread_mutex_lock(&sim_lock);
	hipError_t e = hipSuccess;
	struct ihipStream_t *s = stream_of(stream);
	if (!s) {
		e = hipErrorInvalidHandle;
		truth_log("op=error api=hipGraphLaunch result=%d", e);
	} else {
		truth_log("op=graph api=hipGraphLaunch stream=%#" PRIxPTR " nodes=%zu result=0",
			  (uintptr_t)stream, graphExec->nnodes);
		for (size_t i = 0; i < graphExec->nnodes && e == hipSuccess; i++) {
			struct graph_node *n = &graphExec->nodes[i];
			e = launch_locked("hipGraphLaunch", n->name, n->grid, n->block, n->shmem, stream,
					  "graph_kernel");
		}
	}
	pthread_mutex_unlock(&sim_lock);
	return ret(e);
}

SIM_EXPORT hipError_t hipGraphExecDestroy(hipGraphExec_t graphExec)
{
	if (!graphExec || graphExec->magic != GRAPH_MAGIC)
		return ret(hipErrorInvalidValue);
	graphExec->magic = 0;
	free(graphExec);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipGraphDestroy(hipGraph_t graph)
{
	if (!graph || graph->magic != GRAPH_MAGIC)
		return ret(hipErrorInvalidValue);
	graph->magic = 0;
	free(graph);
	return hipSuccess;
}

/* ------------------------------------------------------------ memory */
static hipError_t do_alloc(const char *api, void **ptr, size_t size, enum mem_kind kind,
			   hipStream_t stream)
{
	if (!ptr)
		return ret(hipErrorInvalidValue);
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&sim_lock);
	if (stream && !stream_of(stream)) {
		truth_log("op=error api=%s result=%d", api, hipErrorInvalidHandle);
		pthread_mutex_unlock(&sim_lock);
		return ret(hipErrorInvalidHandle);
	}
	void *p = alloc_add(size, kind);
	hipError_t e = p ? hipSuccess : hipErrorOutOfMemory;
	*ptr = p;
	truth_log("op=malloc api=%s ptr=%#" PRIxPTR " bytes=%zu mem=%s start=%" PRIu64 " end=%" PRIu64
		  " result=%d",
		  api, (uintptr_t)p, size, kind_name(kind), t0, now_ns(), e);
	pthread_mutex_unlock(&sim_lock);
	return ret(e);
}

static hipError_t do_free(const char *api, void *ptr, int want_host)
{
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&sim_lock);
	hipError_t e = hipSuccess;
	size_t bytes = 0;
	if (ptr) {
		struct allocation *a = alloc_find(ptr);
		if (!a || a->base != (uintptr_t)ptr || (want_host != (a->kind == MEM_PINNED))) {
			e = hipErrorInvalidValue;
		} else {
			/* Freeing waits for the device to finish with the memory. */
			wait_until(device_idle_at());
			bytes = a->size;
			free((void *)a->base);
			*a = allocs[--nallocs];
		}
	}
	truth_log("op=free api=%s ptr=%#" PRIxPTR " bytes=%zu start=%" PRIu64 " end=%" PRIu64
		  " result=%d",
		  api, (uintptr_t)ptr, bytes, t0, now_ns(), e);
	pthread_mutex_unlock(&sim_lock);
	return ret(e);
}

SIM_EXPORT hipError_t hipMalloc(void **ptr, size_t size)
{
	return do_alloc("hipMalloc", ptr, size, MEM_DEVICE, NULL);
}
SIM_EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes, unsigned int flags)
{
	return do_alloc("hipExtMallocWithFlags", ptr, sizeBytes, MEM_DEVICE, NULL);
}
SIM_EXPORT hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	if (!pitch)
		return ret(hipErrorInvalidValue);
	size_t p = (width + 255) & ~(size_t)255;
	*pitch = p;
	return do_alloc("hipMallocPitch", ptr, p * height, MEM_DEVICE, NULL);
}
SIM_EXPORT hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags)
{
	return do_alloc("hipMallocManaged", dev_ptr, size, MEM_MANAGED, NULL);
}
SIM_EXPORT hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream)
{
	return do_alloc("hipMallocAsync", dev_ptr, size, MEM_DEVICE, stream);
}
SIM_EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
	return do_alloc("hipHostMalloc", ptr, size, MEM_PINNED, NULL);
}
SIM_EXPORT hipError_t hipHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	return do_alloc("hipHostAlloc", ptr, size, MEM_PINNED, NULL);
}
SIM_EXPORT hipError_t hipMallocHost(void **ptr, size_t size)
{
	return do_alloc("hipMallocHost", ptr, size, MEM_PINNED, NULL);
}
SIM_EXPORT hipError_t hipFree(void *ptr)
{
	return do_free("hipFree", ptr, 0);
}
SIM_EXPORT hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream)
{
	return do_free("hipFreeAsync", dev_ptr, 0);
}
SIM_EXPORT hipError_t hipHostFree(void *ptr)
{
	return do_free("hipHostFree", ptr, 1);
}
SIM_EXPORT hipError_t hipFreeHost(void *ptr)
{
	return do_free("hipFreeHost", ptr, 1);
}

/* ------------------------------------------------------------ copies */
static const char *dir_name(int src_dev, int dst_dev)
{
	return src_dev ? (dst_dev ? "d2d" : "d2h") : (dst_dev ? "h2d" : "h2h");
}

/*
 * One copy: checks, the data moved now (the host sees device memory), the
 * device time placed on the stream, and the host wait when the call is
 * synchronous or the host side is pageable.
 */
static hipError_t do_copy(const char *api, void *dst, const void *src, size_t bytes,
			  hipMemcpyKind kind, hipStream_t stream, int is_async)
{
	spin_for(params.launch_ns);
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	struct allocation *sa = alloc_find(src), *da = alloc_find(dst);
	int src_dev = sa && sa->kind != MEM_PINNED, dst_dev = da && da->kind != MEM_PINNED;
	int pageable = (!src_dev && !sa) || (!dst_dev && !da);
	hipError_t e = hipSuccess;
	if (!s)
		e = hipErrorInvalidHandle;
	else if (bytes && (!dst || !src))
		e = hipErrorInvalidValue;
	else if ((kind == hipMemcpyHostToDevice && !dst_dev) ||
		 (kind == hipMemcpyDeviceToHost && !src_dev) ||
		 (kind == hipMemcpyDeviceToDevice && (!src_dev || !dst_dev)))
		e = hipErrorInvalidValue;
	if (e != hipSuccess) {
		truth_log("op=error api=%s result=%d", api, e);
		pthread_mutex_unlock(&sim_lock);
		return ret(e);
	}
	if (bytes)
		memmove(dst, src, bytes);
	uint64_t bw = (src_dev && dst_dev) ? params.d2d_bytes_per_ns : params.h2d_bytes_per_ns;
	uint64_t end, issued, start = enqueue(s, params.copy_latency_ns + bytes / bw, &end, &issued);
	truth_log("op=memcpy api=%s stream=%#" PRIxPTR " issued=%" PRIu64 " start=%" PRIu64
		  " end=%" PRIu64 " bytes=%zu dir=%s pageable=%d async=%d result=0",
		  api, (uintptr_t)stream, issued, start, end, bytes, dir_name(src_dev, dst_dev), pageable,
		  is_async);
	pthread_mutex_unlock(&sim_lock);
	if (!is_async || pageable)
		wait_until(end);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind)
{
	return do_copy("hipMemcpy", dst, src, sizeBytes, kind, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyWithStream(void *dst, const void *src, size_t sizeBytes,
					  hipMemcpyKind kind, hipStream_t stream)
{
	return do_copy("hipMemcpyWithStream", dst, src, sizeBytes, kind, stream, 0);
}
SIM_EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes,
				     hipMemcpyKind kind, hipStream_t stream)
{
	return do_copy("hipMemcpyAsync", dst, src, sizeBytes, kind, stream, 1);
}
SIM_EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void *src, size_t sizeBytes)
{
	return do_copy("hipMemcpyHtoD", dst, src, sizeBytes, hipMemcpyHostToDevice, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t sizeBytes)
{
	return do_copy("hipMemcpyDtoH", dst, src, sizeBytes, hipMemcpyDeviceToHost, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes)
{
	return do_copy("hipMemcpyDtoD", dst, src, sizeBytes, hipMemcpyDeviceToDevice, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t sizeBytes,
					 hipStream_t stream)
{
	return do_copy("hipMemcpyHtoDAsync", dst, src, sizeBytes, hipMemcpyHostToDevice, stream, 1);
}
SIM_EXPORT hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t sizeBytes,
					 hipStream_t stream)
{
	return do_copy("hipMemcpyDtoHAsync", dst, src, sizeBytes, hipMemcpyDeviceToHost, stream, 1);
}
SIM_EXPORT hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes,
					 hipStream_t stream)
{
	return do_copy("hipMemcpyDtoDAsync", dst, src, sizeBytes, hipMemcpyDeviceToDevice, stream,
		       1);
}
SIM_EXPORT hipError_t hipMemcpyPeer(void *dst, int dstDeviceId, const void *src, int srcDeviceId,
				    size_t sizeBytes)
{
	return do_copy("hipMemcpyPeer", dst, src, sizeBytes, hipMemcpyDeviceToDevice, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyPeerAsync(void *dst, int dstDeviceId, const void *src,
					 int srcDevice, size_t sizeBytes, hipStream_t stream)
{
	return do_copy("hipMemcpyPeerAsync", dst, src, sizeBytes, hipMemcpyDeviceToDevice, stream,
		       1);
}
SIM_EXPORT hipError_t hipMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				  size_t width, size_t height, hipMemcpyKind kind)
{
	if (width > dpitch || width > spitch)
		return ret(hipErrorInvalidValue);
	/* Contiguous rows are one copy here; the simulator only needs the bytes. */
	return do_copy("hipMemcpy2D", dst, src, height ? dpitch * (height - 1) + width : 0, kind,
		       NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				       size_t width, size_t height, hipMemcpyKind kind,
				       hipStream_t stream)
{
	if (width > dpitch || width > spitch)
		return ret(hipErrorInvalidValue);
	return do_copy("hipMemcpy2DAsync", dst, src, height ? dpitch * (height - 1) + width : 0,
		       kind, stream, 1);
}

/* Symbols are host variables here: the "device copy" of a symbol is itself. */
SIM_EXPORT hipError_t hipMemcpyToSymbol(const void *symbol, const void *src, size_t sizeBytes,
					size_t offset, hipMemcpyKind kind)
{
	return do_copy("hipMemcpyToSymbol", (char *)symbol + offset, src, sizeBytes, hipMemcpyDefault,
		       NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyFromSymbol(void *dst, const void *symbol, size_t sizeBytes,
					  size_t offset, hipMemcpyKind kind)
{
	return do_copy("hipMemcpyFromSymbol", dst, (const char *)symbol + offset, sizeBytes,
		       hipMemcpyDefault, NULL, 0);
}

/* ------------------------------------------------------------ memset */
static hipError_t do_memset(const char *api, void *dst, int value, size_t count, size_t elem,
			    hipStream_t stream, int is_async)
{
	spin_for(params.launch_ns);
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	struct allocation *a = alloc_find(dst);
	size_t bytes = count * elem;
	hipError_t e = hipSuccess;
	if (!s)
		e = hipErrorInvalidHandle;
	else if (!a || (uintptr_t)dst + bytes > a->base + a->size)
		e = hipErrorInvalidValue;
	if (e != hipSuccess) {
		truth_log("op=error api=%s result=%d", api, e);
		pthread_mutex_unlock(&sim_lock);
		return ret(e);
	}
	for (size_t i = 0; i < count; i++) {
		if (elem == 1)
			((uint8_t *)dst)[i] = (uint8_t)value;
		else if (elem == 2)
			((uint16_t *)dst)[i] = (uint16_t)value;
		else
			((uint32_t *)dst)[i] = (uint32_t)value;
	}
	uint64_t end, issued,
		start = enqueue(s, params.memset_ns + bytes / params.d2d_bytes_per_ns, &end, &issued);
	truth_log("op=memset api=%s stream=%#" PRIxPTR " issued=%" PRIu64 " start=%" PRIu64
		  " end=%" PRIu64 " bytes=%zu value=%u async=%d result=0",
		  api, (uintptr_t)stream, issued, start, end, bytes, (unsigned)value, is_async);
	pthread_mutex_unlock(&sim_lock);
	if (!is_async)
		wait_until(end);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipMemset(void *dst, int value, size_t sizeBytes)
{
	return do_memset("hipMemset", dst, value, sizeBytes, 1, NULL, 0);
}
SIM_EXPORT hipError_t hipMemsetAsync(void *dst, int value, size_t sizeBytes, hipStream_t stream)
{
	return do_memset("hipMemsetAsync", dst, value, sizeBytes, 1, stream, 1);
}
SIM_EXPORT hipError_t hipMemsetD8(hipDeviceptr_t dest, unsigned char value, size_t count)
{
	return do_memset("hipMemsetD8", dest, value, count, 1, NULL, 0);
}
SIM_EXPORT hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count,
				       hipStream_t stream)
{
	return do_memset("hipMemsetD8Async", dest, value, count, 1, stream, 1);
}
SIM_EXPORT hipError_t hipMemsetD16(hipDeviceptr_t dest, unsigned short value, size_t count)
{
	return do_memset("hipMemsetD16", dest, value, count, 2, NULL, 0);
}
SIM_EXPORT hipError_t hipMemsetD16Async(hipDeviceptr_t dest, unsigned short value, size_t count,
					hipStream_t stream)
{
	return do_memset("hipMemsetD16Async", dest, value, count, 2, stream, 1);
}
SIM_EXPORT hipError_t hipMemsetD32(hipDeviceptr_t dest, int value, size_t count)
{
	return do_memset("hipMemsetD32", dest, value, count, 4, NULL, 0);
}
SIM_EXPORT hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int value, size_t count,
					hipStream_t stream)
{
	return do_memset("hipMemsetD32Async", dst, value, count, 4, stream, 1);
}

/* ------------------------------------------------------------ streams */
static hipError_t create_stream(const char *api, hipStream_t *stream, unsigned flags)
{
	if (!stream)
		return ret(hipErrorInvalidValue);
	struct ihipStream_t *s = calloc(1, sizeof *s);
	if (!s)
		return ret(hipErrorOutOfMemory);
	s->magic = STREAM_MAGIC;
	s->flags = flags;
	pthread_mutex_lock(&sim_lock);
	s->next = streams;
	streams = s;
	truth_log("op=stream_create api=%s stream=%#" PRIxPTR " flags=%u result=0", api,
		  (uintptr_t)s, flags);
	pthread_mutex_unlock(&sim_lock);
	*stream = s;
	return hipSuccess;
}

SIM_EXPORT hipError_t hipStreamCreate(hipStream_t *stream)
{
	return create_stream("hipStreamCreate", stream, 0);
}
SIM_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
	return create_stream("hipStreamCreateWithFlags", stream, flags);
}
SIM_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t *stream, unsigned int flags,
						  int priority)
{
	return create_stream("hipStreamCreateWithPriority", stream, flags);
}

SIM_EXPORT hipError_t hipStreamDestroy(hipStream_t stream)
{
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t **pp = &streams;
	while (*pp && *pp != stream)
		pp = &(*pp)->next;
	if (!stream || !*pp) {
		pthread_mutex_unlock(&sim_lock);
		return ret(hipErrorInvalidHandle);
	}
	*pp = stream->next;
	uint64_t until = stream->busy_until;
	truth_log("op=stream_destroy api=hipStreamDestroy stream=%#" PRIxPTR " result=0",
		  (uintptr_t)stream);
	pthread_mutex_unlock(&sim_lock);
	/* Destroying waits for the stream's work, as the real runtime does. */
	wait_until(until);
	stream->magic = 0;
	free(stream);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipStreamQuery(hipStream_t stream)
{
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	uint64_t until = s ? s->busy_until : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return ret(hipErrorInvalidHandle);
	return now_ns() >= until ? hipSuccess : hipErrorNotReady;
}

/* simhip has no stream capture: every valid stream reports "not capturing". */
SIM_EXPORT hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *pCaptureStatus)
{
	if (!pCaptureStatus)
		return ret(hipErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return ret(hipErrorInvalidHandle);
	*pCaptureStatus = hipStreamCaptureStatusNone;
	return hipSuccess;
}

/* Sync calls log the host interval and the device time waited for. */
static void log_sync(const char *api, const char *what, uintptr_t handle, uint64_t t0,
		     uint64_t until, hipError_t e)
{
	pthread_mutex_lock(&sim_lock);
	truth_log("op=sync api=%s kind=%s handle=%#" PRIxPTR " start=%" PRIu64 " end=%" PRIu64
		  " until=%" PRIu64 " result=%d",
		  api, what, handle, t0, now_ns(), until, e);
	pthread_mutex_unlock(&sim_lock);
}

SIM_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream)
{
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	uint64_t until = s ? s->busy_until : 0;
	pthread_mutex_unlock(&sim_lock);
	hipError_t e = s ? hipSuccess : hipErrorInvalidHandle;
	if (s)
		wait_until(until);
	log_sync("hipStreamSynchronize", "stream", (uintptr_t)stream, t0, until, e);
	return ret(e);
}

SIM_EXPORT hipError_t hipDeviceSynchronize(void)
{
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&sim_lock);
	uint64_t until = device_idle_at();
	pthread_mutex_unlock(&sim_lock);
	wait_until(until);
	log_sync("hipDeviceSynchronize", "device", 0, t0, until, hipSuccess);
	return hipSuccess;
}

/* ------------------------------------------------------------ events */
SIM_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags)
{
	if (!event)
		return ret(hipErrorInvalidValue);
	struct ihipEvent_t *ev = calloc(1, sizeof *ev);
	if (!ev)
		return ret(hipErrorOutOfMemory);
	ev->magic = EVENT_MAGIC;
	*event = ev;
	return hipSuccess;
}
SIM_EXPORT hipError_t hipEventCreate(hipEvent_t *event)
{
	return hipEventCreateWithFlags(event, 0);
}
SIM_EXPORT hipError_t hipEventDestroy(hipEvent_t event)
{
	if (!event_valid(event))
		return ret(hipErrorInvalidHandle);
	event->magic = 0;
	free(event);
	return hipSuccess;
}

/* An event completes when the stream reaches it: after everything queued
 * before it (including the null stream's implicit dependencies). */
SIM_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)
{
	if (!event_valid(event))
		return ret(hipErrorInvalidHandle);
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	if (s)
		event_stamp_locked(event, s, stream_ready(s, now_ns()));
	pthread_mutex_unlock(&sim_lock);
	return s ? hipSuccess : ret(hipErrorInvalidHandle);
}

SIM_EXPORT hipError_t hipEventQuery(hipEvent_t event)
{
	if (!event_valid(event))
		return ret(hipErrorInvalidHandle);
	if (!event->recorded)
		return hipSuccess;
	return now_ns() >= event->ts ? hipSuccess : hipErrorNotReady;
}

SIM_EXPORT hipError_t hipEventSynchronize(hipEvent_t event)
{
	if (!event_valid(event))
		return ret(hipErrorInvalidHandle);
	uint64_t t0 = now_ns();
	uint64_t until = event->recorded ? event->ts : 0;
	wait_until(until);
	log_sync("hipEventSynchronize", "event", (uintptr_t)event, t0, until, hipSuccess);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop)
{
	if (!ms)
		return ret(hipErrorInvalidValue);
	if (!event_valid(start) || !event_valid(stop))
		return ret(hipErrorInvalidHandle);
	if (!start->recorded || !stop->recorded)
		return ret(hipErrorInvalidHandle);
	uint64_t n = now_ns();
	if (n < start->ts || n < stop->ts)
		return ret(hipErrorNotReady);
	*ms = (float)((double)((int64_t)(stop->ts - start->ts)) / 1e6);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
	if (!event_valid(event))
		return ret(hipErrorInvalidHandle);
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	if (s && event->recorded && event->ts > s->busy_until)
		s->busy_until = event->ts;
	pthread_mutex_unlock(&sim_lock);
	return s ? hipSuccess : ret(hipErrorInvalidHandle);
}

/* ------------------------------------------------------------ per-thread default stream
 * The _spt forms, with one simplification: a NULL stream is the legacy
 * null stream here, not a per-thread stream. */
SIM_EXPORT hipError_t hipLaunchKernel_spt(const void *function_address, dim3 numBlocks,
					  dim3 dimBlocks, void **args, size_t sharedMemBytes,
					  hipStream_t stream)
{
	pthread_mutex_lock(&sim_lock);
	const char *name = lookup_name_locked(function_address);
	pthread_mutex_unlock(&sim_lock);
	return launch("hipLaunchKernel_spt", name, numBlocks, dimBlocks, sharedMemBytes, stream);
}
SIM_EXPORT hipError_t hipLaunchCooperativeKernel_spt(const void *f, dim3 gridDim, dim3 blockDim,
						     void **kernelParams, uint32_t sharedMemBytes,
						     hipStream_t hStream)
{
	pthread_mutex_lock(&sim_lock);
	const char *name = lookup_name_locked(f);
	pthread_mutex_unlock(&sim_lock);
	return launch("hipLaunchCooperativeKernel_spt", name, gridDim, blockDim, sharedMemBytes,
		      hStream);
}
SIM_EXPORT hipError_t hipMemcpy_spt(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind)
{
	return do_copy("hipMemcpy_spt", dst, src, sizeBytes, kind, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyAsync_spt(void *dst, const void *src, size_t sizeBytes,
					 hipMemcpyKind kind, hipStream_t stream)
{
	return do_copy("hipMemcpyAsync_spt", dst, src, sizeBytes, kind, stream, 1);
}
SIM_EXPORT hipError_t hipMemcpy2D_spt(void *dst, size_t dpitch, const void *src, size_t spitch,
				      size_t width, size_t height, hipMemcpyKind kind)
{
	if (width > dpitch || width > spitch)
		return ret(hipErrorInvalidValue);
	return do_copy("hipMemcpy2D_spt", dst, src, height ? dpitch * (height - 1) + width : 0, kind,
		       NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyToSymbol_spt(const void *symbol, const void *src, size_t sizeBytes,
					    size_t offset, hipMemcpyKind kind)
{
	return do_copy("hipMemcpyToSymbol_spt", (char *)symbol + offset, src, sizeBytes,
		       hipMemcpyDefault, NULL, 0);
}
SIM_EXPORT hipError_t hipMemcpyFromSymbol_spt(void *dst, const void *symbol, size_t sizeBytes,
					      size_t offset, hipMemcpyKind kind)
{
	return do_copy("hipMemcpyFromSymbol_spt", dst, (const char *)symbol + offset, sizeBytes,
		       hipMemcpyDefault, NULL, 0);
}
SIM_EXPORT hipError_t hipMemset_spt(void *dst, int value, size_t sizeBytes)
{
	return do_memset("hipMemset_spt", dst, value, sizeBytes, 1, NULL, 0);
}
SIM_EXPORT hipError_t hipStreamSynchronize_spt(hipStream_t stream)
{
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&sim_lock);
	struct ihipStream_t *s = stream_of(stream);
	uint64_t until = s ? s->busy_until : 0;
	pthread_mutex_unlock(&sim_lock);
	hipError_t e = s ? hipSuccess : hipErrorInvalidHandle;
	if (s)
		wait_until(until);
	log_sync("hipStreamSynchronize_spt", "stream", (uintptr_t)stream, t0, until, e);
	return ret(e);
}
SIM_EXPORT hipError_t hipStreamWaitEvent_spt(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
	return hipStreamWaitEvent(stream, event, flags);
}

/* ------------------------------------------------------------ device, misc */
static __thread int current_device;

SIM_EXPORT hipError_t hipInit(unsigned int flags)
{
	return hipSuccess;
}
SIM_EXPORT hipError_t hipGetDeviceCount(int *count)
{
	if (!count)
		return ret(hipErrorInvalidValue);
	*count = params.device_count;
	return params.device_count ? hipSuccess : ret(hipErrorNoDevice);
}
SIM_EXPORT hipError_t hipDeviceGetName(char *name, int len, hipDevice_t device)
{
	if (!name || len <= 0)
		return ret(hipErrorInvalidValue);
	if (device < 0 || device >= params.device_count)
		return ret(hipErrorInvalidDevice);
	snprintf(name, (size_t)len, "simhip %d (simulated AMD GPU)", device);
	return hipSuccess;
}

SIM_EXPORT hipError_t hipSetDevice(int deviceId)
{
	if (deviceId < 0 || deviceId >= params.device_count)
		return ret(hipErrorInvalidDevice);
	current_device = deviceId;
	return hipSuccess;
}
SIM_EXPORT hipError_t hipGetDevice(int *deviceId)
{
	if (!deviceId)
		return ret(hipErrorInvalidValue);
	*deviceId = current_device;
	return hipSuccess;
}
SIM_EXPORT hipError_t hipDeviceReset(void)
{
	hipDeviceSynchronize();
	return hipSuccess;
}
SIM_EXPORT hipError_t hipDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return ret(hipErrorInvalidValue);
	*driverVersion = 50221153;
	return hipSuccess;
}
SIM_EXPORT hipError_t hipRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return ret(hipErrorInvalidValue);
	*runtimeVersion = 50221153;
	return hipSuccess;
}
SIM_EXPORT hipError_t hipGetLastError(void)
{
	hipError_t e = last_error;
	last_error = hipSuccess;
	return e;
}
SIM_EXPORT hipError_t hipPeekAtLastError(void)
{
	return last_error;
}

SIM_EXPORT const char *hipGetErrorName(hipError_t hip_error)
{
	switch (hip_error) {
	case hipSuccess: return "hipSuccess";
	case hipErrorInvalidValue: return "hipErrorInvalidValue";
	case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
	case hipErrorInvalidConfiguration: return "hipErrorInvalidConfiguration";
	case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
	case hipErrorNoDevice: return "hipErrorNoDevice";
	case hipErrorInvalidHandle: return "hipErrorInvalidHandle";
	case hipErrorInvalidDeviceFunction: return "hipErrorInvalidDeviceFunction";
	case hipErrorNotReady: return "hipErrorNotReady";
	default: return "hipErrorUnknown";
	}
}
SIM_EXPORT const char *hipGetErrorString(hipError_t hipError)
{
	return hipGetErrorName(hipError);
}
