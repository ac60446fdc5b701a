/*
 * HIP runtime hooks (AMD GPUs), on the same table-driven mechanism as the
 * CUDA hooks (hook.h): every hook is one row of HIP_HOOKS below, and each
 * row also becomes a `struct tbp_hook_entry` in the linker-built
 * "tbp_hooks" table.  LD_PRELOAD puts these exported HIP entry points ahead
 * of libamdhip64.so.5; each forwards to the real function (resolved once
 * through the table), returning exactly what it returned with errno
 * preserved.  libtbprof never links libamdhip64.
 *
 * A row: name, record kind, whether its device work is timed with hipEvents
 * (hip_timing.c, opt-in), signature, the stream it runs on, and three code
 * slots:
 *   pre    before the real call, traced calls only (flush on device reset)
 *   after  after it, whether or not a record slot was free (allocation map)
 *   fill   fills the record `rec` (common fields already set) and the GPU
 *          record template `gpu` for timed APIs
 * Code slots are macro arguments: no top-level commas in them (one
 * declarator per declaration; commas inside parentheses are fine).
 *
 * hipcc's <<<>>> lowers to __hipPushCallConfiguration at the call site and
 * __hipPopCallConfiguration + hipLaunchKernel in the kernel's host stub, and
 * hipLaunchKernelGGL is an inline template calling hipLaunchKernel, so
 * recording hipLaunchKernel covers both (push/pop are not hooked).  Kernel
 * names come from __hipRegisterFunction (host stub -> device name) and
 * hipModuleGetFunction (module API), demangled and interned on first launch
 * by the shared name table (names.c); allocations go to the shared
 * allocation map (memmap.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"
#include "hook.h"

/* Deprecated HIP entry points (hipHostAlloc, hipMallocHost, hipFreeHost)
 * are still called by programs, so they are hooked like the others. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

struct hip_real hip_real;

/* Sonames to look in when the runtime is not in the global scope. */
static const char *const hip_sonames[] = {
	"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so",
};

/*
 * The real function: the next definition in the global scope, else the
 * already loaded runtime found by soname.  The second case is ROCm
 * PyTorch's: Python loads libtorch_hip.so (and with it libamdhip64) with
 * RTLD_LOCAL, so libtbprof's exported hooks are found first but RTLD_NEXT
 * cannot see the runtime behind them.  Never one of our own wrappers.
 */
static void *hip_find_real(const char *name, const void *own_wrapper)
{
	void *p = tbp_real_dlsym(RTLD_NEXT, name);
	for (size_t i = 0; !p && i < sizeof hip_sonames / sizeof *hip_sonames; i++) {
		void *h = dlopen(hip_sonames[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = tbp_real_dlsym(h, name);
			dlclose(h);
		}
	}
	return p == own_wrapper ? NULL : p;
}

static bool hip_runtime_loaded(void)
{
	for (size_t i = 0; i < sizeof hip_sonames / sizeof *hip_sonames; i++) {
		void *h = dlopen(hip_sonames[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			dlclose(h);
			return true;
		}
	}
	return false;
}

/* The core asks whether HIP is loaded when no hooked call started the trace (its header's HIP
 * feature). */
static const struct tbp_hook_ops hip_ops = {
	.runtime = TBP_RUNTIME_HIP,
	.runtime_loaded = hip_runtime_loaded,
};

__attribute__((constructor(102))) static void hip_register(void)
{
	tbp_register_hook_ops(&hip_ops);
}

void *hip_resolve(const char *name)
{
	return hip_find_real(name, NULL);
}

/* tbp_resolve_real (common.c) for HIP entries: it knows CUDA's sonames. */
void *tbp_hip_find_real(const char *name, const void *own_wrapper)
{
	return hip_find_real(name, own_wrapper);
}

/* Once per process, at the first traced HIP call: the real entry points
 * the timing code calls directly, and TBPROF_HIP_EVENTS. */
static pthread_once_t first_use_once = PTHREAD_ONCE_INIT;

static void hip_first_use_once(void)
{
	hip_real.EventCreateWithFlags = hip_resolve("hipEventCreateWithFlags");
	hip_real.EventRecord = hip_resolve("hipEventRecord");
	hip_real.EventQuery = hip_resolve("hipEventQuery");
	hip_real.EventSynchronize = hip_resolve("hipEventSynchronize");
	hip_real.EventElapsedTime = hip_resolve("hipEventElapsedTime");
	hip_real.EventDestroy = hip_resolve("hipEventDestroy");
	hip_real.StreamCreateWithFlags = hip_resolve("hipStreamCreateWithFlags");
	hip_real.StreamDestroy = hip_resolve("hipStreamDestroy");
	hip_real.StreamIsCapturing = hip_resolve("hipStreamIsCapturing");
	hip_real.PeekAtLastError = hip_resolve("hipPeekAtLastError");
	hip_real.GetLastError = hip_resolve("hipGetLastError");
	hip_real.GetDeviceCount = hip_resolve("hipGetDeviceCount");
	hip_real.DeviceGetName = hip_resolve("hipDeviceGetName");
	hip_timing_init();
}

/* tbp_hook_first_use's HIP step (common.c), at the first traced HIP call
 * of each thread until done; pthread_once makes the others wait. */
void tbp_hip_first_use(void)
{
	pthread_once(&first_use_once, hip_first_use_once);
}

/* tbp_call_end announces a device it has not seen as an NVIDIA (or simgpu)
 * one; HIP devices are described by hip_describe_devices instead. */
static inline void hip_claim_device(void)
{
	int dev = tbp_tls_device;
	if (TBP_UNLIKELY(!tbp_device_known(dev)))
		__atomic_fetch_or(&tbp_devices_seen, 1ull << dev, __ATOMIC_RELAXED);
}

/* After the first real HIP call returned (so after the runtime and the
 * core set up their exit handlers): our exit-time harvest of event timing
 * runs before both, while the runtime still works and the writer runs. */
static int exit_hook_done;
static inline void hip_after_first_call(void)
{
	if (TBP_LIKELY(__atomic_load_n(&exit_hook_done, __ATOMIC_RELAXED)))
		return;
	if (!__atomic_exchange_n(&exit_hook_done, 1, __ATOMIC_ACQ_REL))
		hip_timing_register_exit();
}

/* One DEVICE record per device (name, vendor AMD), once the runtime has
 * answered a call successfully (so asking does not fail and disturb the
 * program's error state). */
static int devices_described;
static void hip_describe_devices(void)
{
	if (__atomic_exchange_n(&devices_described, 1, __ATOMIC_ACQ_REL))
		return;
	if (!hip_real.GetDeviceCount || !hip_real.DeviceGetName)
		return;
	hipError_t saved = hip_last_error_save();
	int n = 0;
	if (hip_real.GetDeviceCount(&n) != hipSuccess)
		n = 0;
	for (int d = 0; d < n && d < 64; d++) {
		char name[256] = "";
		if (hip_real.DeviceGetName(name, sizeof name, d) != hipSuccess)
			name[0] = 0;
		name[sizeof name - 1] = 0;
		struct tbp_record rec;
		memset(&rec, 0, sizeof rec);
		rec.kind = TBP_K_DEVICE;
		rec.stream_kind = TBP_STREAM_DEFS;
		rec.ts = tbp_now();
		rec.u.device.device = (uint64_t)d;
		rec.u.device.name = name[0] ? tbp_intern_string(name, strlen(name)) : 0;
		rec.u.device.vendor = 2; /* AMD */
		tbp_emit_def(&rec);
	}
	hip_last_error_restore(saved);
}

static inline void hip_after_success(hipError_t r)
{
	if (TBP_UNLIKELY(r == hipSuccess && !__atomic_load_n(&devices_described, __ATOMIC_RELAXED)))
		hip_describe_devices();
}

/* ------------------------------------------------------------ fill helpers */

static void gpu_common(struct tbp_record *gpu, unsigned kind, const struct tbp_record *rec)
{
	gpu->kind = (uint8_t)kind;
	gpu->stream_kind = TBP_STREAM_GPU;
	gpu->tid = (uint32_t)rec->u.call.device;
	gpu->u.gpu_kernel.device = rec->u.call.device;
	gpu->u.gpu_kernel.context = 0;
	gpu->u.gpu_kernel.stream = rec->u.call.stream;
	gpu->u.gpu_kernel.corr = rec->u.call.corr;
}

static void fill_launch(struct tbp_record *rec, struct tbp_record *gpu, const void *key,
			unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			uint64_t shmem)
{
	struct tbp_launch *l = &rec->u.launch;
	l->name = tbp_names_lookup(key);
	l->grid_x = gx;
	l->grid_y = gy;
	l->grid_z = gz;
	l->block_x = bx;
	l->block_y = by;
	l->block_z = bz;
	l->shmem = shmem;
	gpu_common(gpu, TBP_K_GPU_KERNEL, rec);
	struct tbp_gpu_kernel *g = &gpu->u.gpu_kernel;
	g->name = l->name;
	g->grid_x = gx;
	g->grid_y = gy;
	g->grid_z = gz;
	g->block_x = bx;
	g->block_y = by;
	g->block_z = bz;
	g->dynamic_shmem = shmem;
}

static unsigned range_to_mem(unsigned range_kind)
{
	switch (range_kind) {
	case TBP_RANGE_DEVICE: return TBP_MEM_DEVICE;
	case TBP_RANGE_MANAGED: return TBP_MEM_MANAGED;
	case TBP_RANGE_PINNED: return TBP_MEM_PINNED;
	default: return TBP_MEM_PAGEABLE;
	}
}

/* Peer copies: D2D between devices, recorded as TBP_COPY_PEER. */
#define HIP_COPY_PEER 100

/* hipMemcpyKind has CUDA's values (0 H2H .. 4 Default), so the shared
 * classifier applies; host memory tbprof did not see allocated is pageable. */
static void fill_copy(struct tbp_record *rec, struct tbp_record *gpu, const void *dst,
		      const void *src, uint64_t bytes, int kind, unsigned flags)
{
	int peer = kind == HIP_COPY_PEER;
	tbp_classify_copy(rec, (uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
			  peer ? hipMemcpyDeviceToDevice : kind);
	struct tbp_memcpy *m = &rec->u.memcpy;
	if (peer)
		m->copy_kind = TBP_COPY_PEER;
	m->bytes = bytes;
	m->flags |= flags;
	gpu_common(gpu, TBP_K_GPU_MEMCPY, rec);
	struct tbp_gpu_memcpy *g = &gpu->u.gpu_memcpy;
	g->bytes = bytes;
	g->copy_kind = m->copy_kind;
	switch (m->copy_kind) {
	case TBP_COPY_H2D:
		g->src_kind = (m->flags & TBP_COPYF_PINNED) ? TBP_MEM_PINNED : TBP_MEM_PAGEABLE;
		g->dst_kind = TBP_MEM_DEVICE;
		break;
	case TBP_COPY_D2H:
		g->src_kind = TBP_MEM_DEVICE;
		g->dst_kind = (m->flags & TBP_COPYF_PINNED) ? TBP_MEM_PINNED : TBP_MEM_PAGEABLE;
		break;
	case TBP_COPY_D2D:
	case TBP_COPY_PEER:
		g->src_kind = TBP_MEM_DEVICE;
		g->dst_kind = TBP_MEM_DEVICE;
		break;
	default:
		g->src_kind = range_to_mem(tbp_mem_kind_of((uint64_t)(uintptr_t)src));
		g->dst_kind = range_to_mem(tbp_mem_kind_of((uint64_t)(uintptr_t)dst));
		break;
	}
}

static void fill_memset(struct tbp_record *rec, struct tbp_record *gpu, const void *ptr,
			uint64_t bytes, uint64_t value)
{
	rec->u.memset.bytes = bytes;
	rec->u.memset.value = value;
	rec->u.memset.ptr = (uint64_t)(uintptr_t)ptr;
	gpu_common(gpu, TBP_K_GPU_MEMSET, rec);
	gpu->u.gpu_memset.bytes = bytes;
	gpu->u.gpu_memset.value = value;
	unsigned range = tbp_mem_kind_of((uint64_t)(uintptr_t)ptr);
	gpu->u.gpu_memset.mem_kind = range ? range_to_mem(range) : TBP_MEM_UNKNOWN;
}

static void fill_malloc(struct tbp_record *rec, void **ptr, uint64_t bytes, unsigned flags)
{
	rec->u.malloc.ptr = ptr && rec->u.call.result == 0 ? (uint64_t)(uintptr_t)*ptr : 0;
	rec->u.malloc.bytes = bytes;
	rec->u.malloc.flags = flags;
}

static void after_malloc(hipError_t r, void **ptr, uint64_t bytes, unsigned range_kind)
{
	if (r == hipSuccess && ptr && *ptr)
		tbp_mem_add((uint64_t)(uintptr_t)*ptr, bytes, range_kind);
}

static uint64_t after_free(hipError_t r, const void *ptr)
{
	return r == hipSuccess && ptr ? tbp_mem_remove((uint64_t)(uintptr_t)ptr) : 0;
}

static void fill_sync(struct tbp_record *rec, unsigned kind, const void *handle)
{
	rec->u.sync.sync_kind = kind;
	rec->u.sync.handle = (uint64_t)(uintptr_t)handle;
	if (kind != TBP_SYNC_STREAM_WAIT_EVENT)
		tbp_py_note_wait(rec->u.call.callpath);
}

/* After the program waited for the device, finished timed work can be read
 * (by the wrapper, once its own record is committed). */
static int after_host_wait(hipError_t r)
{
	return r == hipSuccess && __atomic_load_n(&hip_timing_on, __ATOMIC_RELAXED);
}

static uint64_t graph_label_id(void)
{
	static uint64_t id;
	uint64_t v = __atomic_load_n(&id, __ATOMIC_ACQUIRE);
	if (!v) {
		v = tbp_intern_string("[hipGraph]", 10);
		__atomic_store_n(&id, v, __ATOMIC_RELEASE);
	}
	return v;
}

/* One API record per graph launch, as for cudaGraphLaunch.  With event
 * timing the graph's whole span is one GPU_KERNEL named "[hipGraph]" (HIP
 * has no per-node activity without a profiling library). */
static void fill_graph(struct tbp_record *rec, struct tbp_record *gpu, hipGraphExec_t exec)
{
	rec->u.api.arg0 = (uint64_t)(uintptr_t)exec;
	gpu_common(gpu, TBP_K_GPU_KERNEL, rec);
	gpu->u.gpu_kernel.name = graph_label_id();
}

static void after_get_function(hipError_t r, hipFunction_t *function, const char *kname)
{
	/* The caller's name string may not outlive the call: keep a copy. */
	if (r == hipSuccess && function && *function && kname) {
		char *copy = strdup(kname);
		if (copy)
			tbp_names_register(*function, copy);
	}
}

#define NO_STREAM ((hipStream_t)0)
#define NOTHING ((void)0)

/*
 * HIP_HOOK(name, KIND, timed, (params), (args), stream, pre, after, fill)
 */
#define HIP_HOOKS(X)                                                                                  \
	/* ---- launches */                                                                          \
	X(hipLaunchKernel, LAUNCH, 1,                                                                 \
	  (const void *function_address, dim3 numBlocks, dim3 dimBlocks, void **args,                 \
	   size_t sharedMemBytes, hipStream_t stream),                                                \
	  (function_address, numBlocks, dimBlocks, args, sharedMemBytes, stream), stream, NOTHING,    \
	  NOTHING,                                                                                    \
	  fill_launch(rec, &gpu, function_address, numBlocks.x, numBlocks.y,        \
		      numBlocks.z, dimBlocks.x, dimBlocks.y, dimBlocks.z, sharedMemBytes))            \
	X(hipExtLaunchKernel, LAUNCH, 1,                                                              \
	  (const void *function_address, dim3 numBlocks, dim3 dimBlocks, void **args,                 \
	   size_t sharedMemBytes, hipStream_t stream, hipEvent_t startEvent, hipEvent_t stopEvent,    \
	   int flags),                                                                                \
	  (function_address, numBlocks, dimBlocks, args, sharedMemBytes, stream, startEvent,          \
	   stopEvent, flags),                                                                         \
	  stream, NOTHING, NOTHING,                                                                   \
	  fill_launch(rec, &gpu, function_address, numBlocks.x, numBlocks.y,        \
		      numBlocks.z, dimBlocks.x, dimBlocks.y, dimBlocks.z, sharedMemBytes))            \
	X(hipLaunchCooperativeKernel, LAUNCH, 1,                                                      \
	  (const void *f, dim3 gridDim, dim3 blockDimX, void **kernelParams,                          \
	   unsigned int sharedMemBytes, hipStream_t stream),                                          \
	  (f, gridDim, blockDimX, kernelParams, sharedMemBytes, stream), stream, NOTHING, NOTHING,    \
	  fill_launch(rec, &gpu, f, gridDim.x, gridDim.y, gridDim.z, blockDimX.x,   \
		      blockDimX.y, blockDimX.z, sharedMemBytes))                                      \
	X(hipModuleLaunchKernel, LAUNCH, 1,                                                           \
	  (hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,      \
	   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                    \
	   unsigned int sharedMemBytes, hipStream_t stream, void **kernelParams, void **extra),       \
	  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, stream,  \
	   kernelParams, extra),                                                                      \
	  stream, NOTHING, NOTHING,                                                                   \
	  fill_launch(rec, &gpu, f, gridDimX, gridDimY, gridDimZ, blockDimX,        \
		      blockDimY, blockDimZ, sharedMemBytes))                                          \
	X(hipGraphLaunch, API, 1, (hipGraphExec_t graphExec, hipStream_t stream),                     \
	  (graphExec, stream), stream, NOTHING, NOTHING, fill_graph(rec, &gpu, graphExec))            \
	/* ---- copies */                                                                            \
	X(hipMemcpy, MEMCPY, 1, (void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind),   \
	  (dst, src, sizeBytes, kind), NO_STREAM, NOTHING, NOTHING,                                   \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, kind, 0))                                         \
	X(hipMemcpyWithStream, MEMCPY, 1,                                                             \
	  (void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream),     \
	  (dst, src, sizeBytes, kind, stream), stream, NOTHING, NOTHING,                              \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, kind, 0))                                         \
	X(hipMemcpyAsync, MEMCPY, 1,                                                                  \
	  (void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream),     \
	  (dst, src, sizeBytes, kind, stream), stream, NOTHING, NOTHING,                              \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, kind, TBP_COPYF_ASYNC))                           \
	X(hipMemcpyHtoD, MEMCPY, 1, (hipDeviceptr_t dst, void *src, size_t sizeBytes),                \
	  (dst, src, sizeBytes), NO_STREAM, NOTHING, NOTHING,                                         \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, hipMemcpyHostToDevice, 0))                        \
	X(hipMemcpyDtoH, MEMCPY, 1, (void *dst, hipDeviceptr_t src, size_t sizeBytes),                \
	  (dst, src, sizeBytes), NO_STREAM, NOTHING, NOTHING,                                         \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, hipMemcpyDeviceToHost, 0))                        \
	X(hipMemcpyDtoD, MEMCPY, 1, (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes),       \
	  (dst, src, sizeBytes), NO_STREAM, NOTHING, NOTHING,                                         \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, hipMemcpyDeviceToDevice, 0))                      \
	X(hipMemcpyHtoDAsync, MEMCPY, 1,                                                              \
	  (hipDeviceptr_t dst, void *src, size_t sizeBytes, hipStream_t stream),                      \
	  (dst, src, sizeBytes, stream), stream, NOTHING, NOTHING,                                    \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, hipMemcpyHostToDevice, TBP_COPYF_ASYNC))          \
	X(hipMemcpyDtoHAsync, MEMCPY, 1,                                                              \
	  (void *dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream),                      \
	  (dst, src, sizeBytes, stream), stream, NOTHING, NOTHING,                                    \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, hipMemcpyDeviceToHost, TBP_COPYF_ASYNC))          \
	X(hipMemcpyDtoDAsync, MEMCPY, 1,                                                              \
	  (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream),             \
	  (dst, src, sizeBytes, stream), stream, NOTHING, NOTHING,                                    \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, hipMemcpyDeviceToDevice, TBP_COPYF_ASYNC))        \
	X(hipMemcpyPeer, MEMCPY, 1,                                                                   \
	  (void *dst, int dstDeviceId, const void *src, int srcDeviceId, size_t sizeBytes),           \
	  (dst, dstDeviceId, src, srcDeviceId, sizeBytes), NO_STREAM, NOTHING, NOTHING,               \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, HIP_COPY_PEER, 0))                                \
	X(hipMemcpyPeerAsync, MEMCPY, 1,                                                              \
	  (void *dst, int dstDeviceId, const void *src, int srcDevice, size_t sizeBytes,              \
	   hipStream_t stream),                                                                       \
	  (dst, dstDeviceId, src, srcDevice, sizeBytes, stream), stream, NOTHING, NOTHING,            \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, HIP_COPY_PEER, TBP_COPYF_ASYNC))                  \
	X(hipMemcpy2D, MEMCPY, 1,                                                                     \
	  (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,     \
	   hipMemcpyKind kind),                                                                       \
	  (dst, dpitch, src, spitch, width, height, kind), NO_STREAM, NOTHING, NOTHING,               \
	  fill_copy(rec, &gpu, dst, src, (uint64_t)width * height, kind, TBP_COPYF_2D))               \
	X(hipMemcpy2DAsync, MEMCPY, 1,                                                                \
	  (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,     \
	   hipMemcpyKind kind, hipStream_t stream),                                                   \
	  (dst, dpitch, src, spitch, width, height, kind, stream), stream, NOTHING, NOTHING,          \
	  fill_copy(rec, &gpu, dst, src, (uint64_t)width * height, kind,                              \
		    TBP_COPYF_2D | TBP_COPYF_ASYNC))                                                  \
	X(hipMemcpyToSymbol, MEMCPY, 1,                                                               \
	  (const void *symbol, const void *src, size_t sizeBytes, size_t offset, hipMemcpyKind kind), \
	  (symbol, src, sizeBytes, offset, kind), NO_STREAM, NOTHING, NOTHING,                        \
	  fill_copy(rec, &gpu, (void *)symbol, src, sizeBytes, kind, TBP_COPYF_SYMBOL))               \
	X(hipMemcpyFromSymbol, MEMCPY, 1,                                                             \
	  (void *dst, const void *symbol, size_t sizeBytes, size_t offset, hipMemcpyKind kind),       \
	  (dst, symbol, sizeBytes, offset, kind), NO_STREAM, NOTHING, NOTHING,                        \
	  fill_copy(rec, &gpu, dst, symbol, sizeBytes, kind, TBP_COPYF_SYMBOL))                       \
	X(hipMemcpyToSymbolAsync, MEMCPY, 1,                                                          \
	  (const void *symbol, const void *src, size_t sizeBytes, size_t offset, hipMemcpyKind kind,  \
	   hipStream_t stream),                                                                       \
	  (symbol, src, sizeBytes, offset, kind, stream), stream, NOTHING, NOTHING,                   \
	  fill_copy(rec, &gpu, (void *)symbol, src, sizeBytes, kind,                                  \
		    TBP_COPYF_SYMBOL | TBP_COPYF_ASYNC))                                              \
	X(hipMemcpyFromSymbolAsync, MEMCPY, 1,                                                        \
	  (void *dst, const void *symbol, size_t sizeBytes, size_t offset, hipMemcpyKind kind,        \
	   hipStream_t stream),                                                                       \
	  (dst, symbol, sizeBytes, offset, kind, stream), stream, NOTHING, NOTHING,                   \
	  fill_copy(rec, &gpu, dst, symbol, sizeBytes, kind, TBP_COPYF_SYMBOL | TBP_COPYF_ASYNC))     \
	/* ---- memsets */                                                                           \
	X(hipMemset, MEMSET, 1, (void *dst, int value, size_t sizeBytes), (dst, value, sizeBytes),    \
	  NO_STREAM, NOTHING, NOTHING, fill_memset(rec, &gpu, dst, sizeBytes, (uint8_t)value))        \
	X(hipMemsetAsync, MEMSET, 1, (void *dst, int value, size_t sizeBytes, hipStream_t stream),    \
	  (dst, value, sizeBytes, stream), stream, NOTHING, NOTHING,                                  \
	  fill_memset(rec, &gpu, dst, sizeBytes, (uint8_t)value))                                     \
	X(hipMemsetD8, MEMSET, 1, (hipDeviceptr_t dest, unsigned char value, size_t count),           \
	  (dest, value, count), NO_STREAM, NOTHING, NOTHING,                                          \
	  fill_memset(rec, &gpu, dest, count, value))                                                 \
	X(hipMemsetD8Async, MEMSET, 1,                                                                \
	  (hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream),               \
	  (dest, value, count, stream), stream, NOTHING, NOTHING,                                     \
	  fill_memset(rec, &gpu, dest, count, value))                                                 \
	X(hipMemsetD16, MEMSET, 1, (hipDeviceptr_t dest, unsigned short value, size_t count),         \
	  (dest, value, count), NO_STREAM, NOTHING, NOTHING,                                          \
	  fill_memset(rec, &gpu, dest, (uint64_t)count * 2, value))                                   \
	X(hipMemsetD16Async, MEMSET, 1,                                                               \
	  (hipDeviceptr_t dest, unsigned short value, size_t count, hipStream_t stream),              \
	  (dest, value, count, stream), stream, NOTHING, NOTHING,                                     \
	  fill_memset(rec, &gpu, dest, (uint64_t)count * 2, value))                                   \
	X(hipMemsetD32, MEMSET, 1, (hipDeviceptr_t dest, int value, size_t count),                    \
	  (dest, value, count), NO_STREAM, NOTHING, NOTHING,                                          \
	  fill_memset(rec, &gpu, dest, (uint64_t)count * 4, (uint32_t)value))                         \
	X(hipMemsetD32Async, MEMSET, 1,                                                               \
	  (hipDeviceptr_t dst, int value, size_t count, hipStream_t stream),                          \
	  (dst, value, count, stream), stream, NOTHING, NOTHING,                                      \
	  fill_memset(rec, &gpu, dst, (uint64_t)count * 4, (uint32_t)value))                          \
	/* ---- allocation */                                                                        \
	X(hipMalloc, MALLOC, 0, (void **ptr, size_t size), (ptr, size), NO_STREAM, NOTHING,           \
	  after_malloc(r, ptr, size, TBP_RANGE_DEVICE), fill_malloc(rec, ptr, size, 0))                 \
	X(hipExtMallocWithFlags, MALLOC, 0, (void **ptr, size_t sizeBytes, unsigned int flags),       \
	  (ptr, sizeBytes, flags), NO_STREAM, NOTHING,                                                \
	  after_malloc(r, ptr, sizeBytes, TBP_RANGE_DEVICE), fill_malloc(rec, ptr, sizeBytes, 0))       \
	X(hipMallocPitch, MALLOC, 0, (void **ptr, size_t *pitch, size_t width, size_t height),        \
	  (ptr, pitch, width, height), NO_STREAM, NOTHING,                                            \
	  after_malloc(r, ptr, r == hipSuccess && pitch ? (uint64_t)*pitch * height : 0,              \
		       TBP_RANGE_DEVICE),                                                               \
	  fill_malloc(rec, ptr, r == hipSuccess && pitch ? (uint64_t)*pitch * height : 0, 0))         \
	X(hipMallocManaged, MALLOC, 0, (void **dev_ptr, size_t size, unsigned int flags),             \
	  (dev_ptr, size, flags), NO_STREAM, NOTHING,                                                 \
	  after_malloc(r, dev_ptr, size, TBP_RANGE_MANAGED),                                            \
	  fill_malloc(rec, dev_ptr, size, TBP_ALLOCF_MANAGED))                                        \
	X(hipMallocAsync, MALLOC, 0, (void **dev_ptr, size_t size, hipStream_t stream),               \
	  (dev_ptr, size, stream), stream, NOTHING, after_malloc(r, dev_ptr, size, TBP_RANGE_DEVICE),   \
	  fill_malloc(rec, dev_ptr, size, TBP_ALLOCF_ASYNC))                                          \
	X(hipHostMalloc, MALLOC, 0, (void **ptr, size_t size, unsigned int flags),                    \
	  (ptr, size, flags), NO_STREAM, NOTHING, after_malloc(r, ptr, size, TBP_RANGE_PINNED),         \
	  fill_malloc(rec, ptr, size, TBP_ALLOCF_HOST))                                               \
	X(hipHostAlloc, MALLOC, 0, (void **ptr, size_t size, unsigned int flags),                     \
	  (ptr, size, flags), NO_STREAM, NOTHING, after_malloc(r, ptr, size, TBP_RANGE_PINNED),         \
	  fill_malloc(rec, ptr, size, TBP_ALLOCF_HOST))                                               \
	X(hipMallocHost, MALLOC, 0, (void **ptr, size_t size), (ptr, size), NO_STREAM, NOTHING,       \
	  after_malloc(r, ptr, size, TBP_RANGE_PINNED), fill_malloc(rec, ptr, size, TBP_ALLOCF_HOST))   \
	X(hipFree, FREE, 0, (void *ptr), (ptr), NO_STREAM, NOTHING,                                   \
	  uint64_t freed = after_free(r, ptr),                       \
	  (rec->u.free.ptr = (uint64_t)(uintptr_t)ptr, rec->u.free.bytes = freed))                    \
	X(hipFreeAsync, FREE, 0, (void *dev_ptr, hipStream_t stream), (dev_ptr, stream), stream,      \
	  NOTHING, uint64_t freed = after_free(r, dev_ptr),      \
	  (rec->u.free.ptr = (uint64_t)(uintptr_t)dev_ptr, rec->u.free.bytes = freed))                \
	X(hipHostFree, FREE, 0, (void *ptr), (ptr), NO_STREAM, NOTHING,                               \
	  uint64_t freed = after_free(r, ptr),                       \
	  (rec->u.free.ptr = (uint64_t)(uintptr_t)ptr, rec->u.free.bytes = freed))                    \
	X(hipFreeHost, FREE, 0, (void *ptr), (ptr), NO_STREAM, NOTHING,                               \
	  uint64_t freed = after_free(r, ptr),                       \
	  (rec->u.free.ptr = (uint64_t)(uintptr_t)ptr, rec->u.free.bytes = freed))                    \
	/* ---- synchronization */                                                                   \
	X(hipDeviceSynchronize, SYNC, 0, (void), (), NO_STREAM, NOTHING, harvest_due = after_host_wait(r),          \
	  fill_sync(rec, TBP_SYNC_DEVICE, NULL))                                                      \
	X(hipStreamSynchronize, SYNC, 0, (hipStream_t stream), (stream), stream, NOTHING,             \
	  harvest_due = after_host_wait(r), fill_sync(rec, TBP_SYNC_STREAM, stream))                                \
	X(hipEventSynchronize, SYNC, 0, (hipEvent_t event), (event), NO_STREAM, NOTHING,              \
	  harvest_due = after_host_wait(r), fill_sync(rec, TBP_SYNC_EVENT, event))                                  \
	X(hipStreamWaitEvent, SYNC, 0, (hipStream_t stream, hipEvent_t event, unsigned int flags),    \
	  (stream, event, flags), stream, NOTHING, NOTHING,                                           \
	  fill_sync(rec, TBP_SYNC_STREAM_WAIT_EVENT, event))                                          \
	/* ---- per-thread-default-stream forms (a NULL stream is the thread's own) */              \
	X(hipLaunchKernel_spt, LAUNCH, 1,                                                             \
	  (const void *function_address, dim3 numBlocks, dim3 dimBlocks, void **args,                 \
	   size_t sharedMemBytes, hipStream_t stream),                                                \
	  (function_address, numBlocks, dimBlocks, args, sharedMemBytes, stream), stream, NOTHING,    \
	  NOTHING,                                                                                    \
	  fill_launch(rec, &gpu, function_address, numBlocks.x, numBlocks.y, numBlocks.z,             \
		      dimBlocks.x, dimBlocks.y, dimBlocks.z, sharedMemBytes))                         \
	X(hipLaunchCooperativeKernel_spt, LAUNCH, 1,                                                  \
	  (const void *f, dim3 gridDim, dim3 blockDim, void **kernelParams, uint32_t sharedMemBytes,  \
	   hipStream_t hStream),                                                                      \
	  (f, gridDim, blockDim, kernelParams, sharedMemBytes, hStream), hStream, NOTHING, NOTHING,   \
	  fill_launch(rec, &gpu, f, gridDim.x, gridDim.y, gridDim.z, blockDim.x, blockDim.y,          \
		      blockDim.z, sharedMemBytes))                                                    \
	X(hipMemcpy_spt, MEMCPY, 1, (void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind), \
	  (dst, src, sizeBytes, kind), NO_STREAM, NOTHING, NOTHING,                                   \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, kind, 0))                                         \
	X(hipMemcpyAsync_spt, MEMCPY, 1,                                                              \
	  (void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream),     \
	  (dst, src, sizeBytes, kind, stream), stream, NOTHING, NOTHING,                              \
	  fill_copy(rec, &gpu, dst, src, sizeBytes, kind, TBP_COPYF_ASYNC))                           \
	X(hipMemcpy2D_spt, MEMCPY, 1,                                                                 \
	  (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,     \
	   hipMemcpyKind kind),                                                                       \
	  (dst, dpitch, src, spitch, width, height, kind), NO_STREAM, NOTHING, NOTHING,               \
	  fill_copy(rec, &gpu, dst, src, (uint64_t)width * height, kind, TBP_COPYF_2D))               \
	X(hipMemcpyToSymbol_spt, MEMCPY, 1,                                                           \
	  (const void *symbol, const void *src, size_t sizeBytes, size_t offset, hipMemcpyKind kind), \
	  (symbol, src, sizeBytes, offset, kind), NO_STREAM, NOTHING, NOTHING,                        \
	  fill_copy(rec, &gpu, (void *)symbol, src, sizeBytes, kind, TBP_COPYF_SYMBOL))               \
	X(hipMemcpyFromSymbol_spt, MEMCPY, 1,                                                         \
	  (void *dst, const void *symbol, size_t sizeBytes, size_t offset, hipMemcpyKind kind),       \
	  (dst, symbol, sizeBytes, offset, kind), NO_STREAM, NOTHING, NOTHING,                        \
	  fill_copy(rec, &gpu, dst, symbol, sizeBytes, kind, TBP_COPYF_SYMBOL))                       \
	X(hipMemset_spt, MEMSET, 1, (void *dst, int value, size_t sizeBytes), (dst, value, sizeBytes), \
	  NO_STREAM, NOTHING, NOTHING, fill_memset(rec, &gpu, dst, sizeBytes, (uint8_t)value))        \
	X(hipStreamSynchronize_spt, SYNC, 0, (hipStream_t stream), (stream), stream, NOTHING,         \
	  harvest_due = after_host_wait(r), fill_sync(rec, TBP_SYNC_STREAM, stream))                  \
	X(hipStreamWaitEvent_spt, SYNC, 0,                                                            \
	  (hipStream_t stream, hipEvent_t event, unsigned int flags), (stream, event, flags), stream, \
	  NOTHING, NOTHING, fill_sync(rec, TBP_SYNC_STREAM_WAIT_EVENT, event))                        \
	/* ---- streams, events, device, modules */                                                  \
	X(hipStreamCreate, API, 0, (hipStream_t *stream), (stream), NO_STREAM, NOTHING, NOTHING,      \
	  rec->u.api.arg0 = r == hipSuccess && stream ? (uint64_t)(uintptr_t)*stream : 0)             \
	X(hipStreamCreateWithFlags, API, 0, (hipStream_t *stream, unsigned int flags),                \
	  (stream, flags), NO_STREAM, NOTHING, NOTHING,                                               \
	  (rec->u.api.arg0 = r == hipSuccess && stream ? (uint64_t)(uintptr_t)*stream : 0,            \
	   rec->u.api.arg1 = flags))                                                                  \
	X(hipStreamCreateWithPriority, API, 0,                                                        \
	  (hipStream_t *stream, unsigned int flags, int priority), (stream, flags, priority),         \
	  NO_STREAM, NOTHING, NOTHING,                                                                \
	  (rec->u.api.arg0 = r == hipSuccess && stream ? (uint64_t)(uintptr_t)*stream : 0,            \
	   rec->u.api.arg1 = flags))                                                                  \
	X(hipStreamDestroy, API, 0, (hipStream_t stream), (stream), stream, NOTHING, NOTHING,         \
	  rec->u.api.arg0 = (uint64_t)(uintptr_t)stream)                                              \
	X(hipEventRecord, API, 0, (hipEvent_t event, hipStream_t stream), (event, stream), stream,    \
	  NOTHING, NOTHING, rec->u.api.arg0 = (uint64_t)(uintptr_t)event)                             \
	X(hipDeviceReset, API, 0, (void), (), NO_STREAM, (hip_timing_reset(), tbp_drain_now(2000)),   \
	  NOTHING, NOTHING)        \
	X(hipModuleGetFunction, API, 0,                                                               \
	  (hipFunction_t *function, hipModule_t module, const char *kname),                           \
	  (function, module, kname), NO_STREAM, NOTHING,                                              \
	  after_get_function(r, function, kname),                                                     \
	  rec->u.api.arg0 = r == hipSuccess && function ? (uint64_t)(uintptr_t)*function : 0)

/*
 * The wrapper: CUDA's TBP_HOOK sequence (hook.h) plus the timing and
 * `after` steps.  Armed or off: hook.h's three-instruction forward
 * (TBP_HOOK_ARMED_PATH); not traced otherwise (inert, or re-entered): a
 * plain call of the real function.  `gpu` stays kind 0 for APIs without GPU activity.
 */
#define HIP_HOOK(NAME, KIND, TIMED, PARAMS, ARGS, STREAM, PRE, AFTER, FILL)                      \
	static hipError_t(*real_##NAME) PARAMS;                                                  \
	static hipError_t traced_##NAME PARAMS;                                                  \
	TBP_HOOK_FORWARD_SLOT(hipError_t, NAME, PARAMS);                                         \
	TBP_EXPORT hipError_t NAME PARAMS;                                                       \
	static const struct tbp_hook_entry hook_##NAME TBP_HOOK_SECTION = {                      \
		#NAME, NULL, TBP_API_##NAME, TBP_LIB_HIP, 0, (void *)NAME, (void **)&real_##NAME \
	};                                                                                       \
	TBP_HOOK_ARMED_PATH(hipError_t, NAME, PARAMS, ARGS)                                      \
	static __attribute__((noinline, used)) hipError_t traced_##NAME PARAMS                   \
	{                                                                                        \
		hipError_t(*real_fn) PARAMS = (hipError_t(*) PARAMS)tbp_real_ensure(&hook_##NAME);   \
		if (TBP_UNLIKELY(!real_fn))                                                      \
			return hipErrorNotInitialized;                                           \
		struct tbp_callstate cs;                                                         \
		if (!tbp_call_begin(&cs, TBP_LIB_HIP)) {                                         \
			TBP_HOOK_FORWARD_LEARN(NAME, real_fn);                                   \
			return real_fn ARGS;                                                     \
		}                                                                                \
		hipStream_t hook_stream = (STREAM);                                              \
		PRE;                                                                             \
		void *timing = (TIMED) ? hip_timing_begin(hook_stream) : NULL;                   \
		*cs.errp = cs.saved_errno;                                                       \
		hipError_t r = real_fn ARGS;                                                     \
		if (timing) /* first: the stop event marks the call's return */                  \
			hip_timing_stop(timing, hook_stream, r == hipSuccess);                   \
		hip_claim_device();                                                              \
		struct tbp_record *rec = tbp_call_end(&cs, TBP_K_##KIND, TBP_API_##NAME, (int64_t)r); \
		hip_after_first_call();                                                          \
		hip_after_success(r);                                                            \
		int harvest_due = 0;                                                             \
		AFTER;                                                                           \
		struct tbp_record gpu;                                                           \
		if (timing)                                                                      \
			memset(&gpu, 0, sizeof gpu); /* the template is emitted as is */        \
		gpu.kind = 0;                                                                    \
		if (TBP_LIKELY(rec != NULL)) {                                                   \
			rec->u.call.stream = (uint64_t)(uintptr_t)hook_stream;                   \
			FILL;                                                                    \
		}                                                                                \
		if (timing)                                                                      \
			harvest_due |= hip_timing_end(timing, r == hipSuccess && rec && gpu.kind, \
						      &gpu);                                     \
		/* GPU records go through this thread's buffer: commit ours first. */           \
		if (rec)                                                                         \
			tbp_slot_commit(rec);                                                    \
		if (harvest_due)                                                                 \
			hip_timing_harvest(0);                                                   \
		tbp_call_finish(&cs, NULL);                                                      \
		return r;                                                                        \
	}

HIP_HOOKS(HIP_HOOK)

/* ------------------------------------------------------------ name-only hooks
 * Registration runs in library constructors, possibly before tbprof has
 * read its configuration, and tens of thousands of times for ROCm PyTorch:
 * it only feeds the name table and writes no record (as for CUDA). */
static void *(*real_register_fat_binary)(const void *);
typedef void (*register_function_fn)(void *, const void *, char *, const char *, unsigned int,
				     void *, void *, void *, void *, int *);
static register_function_fn real_register_function;

TBP_EXPORT void *__hipRegisterFatBinary(const void *data)
{
	if (!real_register_fat_binary)
		real_register_fat_binary = (void *(*)(const void *))hip_find_real(
			"__hipRegisterFatBinary", (void *)__hipRegisterFatBinary);
	return real_register_fat_binary ? real_register_fat_binary(data) : NULL;
}

/* deviceName is a string literal of the registering library: the name
 * table keeps the pointer and interns the demangled name at first launch. */
TBP_EXPORT void __hipRegisterFunction(void *modules, const void *hostFunction,
				      char *deviceFunction, const char *deviceName,
				      unsigned int threadLimit, void *tid, void *bid,
				      void *blockDim, void *gridDim, int *wSize)
{
	if (!real_register_function)
		real_register_function = (register_function_fn)hip_find_real(
			"__hipRegisterFunction", (void *)__hipRegisterFunction);
	int saved_errno = errno;
	tbp_names_register(hostFunction, deviceName ? deviceName : deviceFunction);
	errno = saved_errno;
	if (real_register_function)
		real_register_function(modules, hostFunction, deviceFunction, deviceName, threadLimit,
				       tid, bid, blockDim, gridDim, wSize);
}

/* Not recorded: only remembers the thread's device for the records. */
static hipError_t (*real_set_device)(int);
TBP_EXPORT hipError_t hipSetDevice(int deviceId)
{
	if (!real_set_device) {
		real_set_device = (hipError_t(*)(int))hip_find_real("hipSetDevice", (void *)hipSetDevice);
		if (!real_set_device)
			return hipErrorNotInitialized;
	}
	hipError_t r = real_set_device(deviceId);
	if (r == hipSuccess)
		tbp_tls_device = deviceId;
	return r;
}
