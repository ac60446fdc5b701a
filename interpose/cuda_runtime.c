/*
 * CUDA runtime hooks (libcudart.so.13).  One TBP_HOOK invocation per API:
 * the invocation is the table row (name, apis.def id, signature, record
 * kind) and the FILL block says what the record carries.
 */
#include <cuda_runtime_api.h>
#include <string.h>

#include "hook.h"

#define RT_ERR cudaErrorInitializationError
#define U(x) ((uint64_t)(uintptr_t)(x))

#define RT_HOOK(NAME, API, KIND, PARAMS, ARGS, ...) \
	TBP_HOOK(cudaError_t, RT_ERR, TBP_LIB_CUDART, NAME, NULL, 0, API, KIND, PARAMS, ARGS, (void)0, __VA_ARGS__)
#define RT_HOOK_PRE(NAME, API, KIND, PARAMS, ARGS, PRE, ...) \
	TBP_HOOK(cudaError_t, RT_ERR, TBP_LIB_CUDART, NAME, NULL, 0, API, KIND, PARAMS, ARGS, PRE, __VA_ARGS__)

/* ------------------------------------------------------------ launches */

#define FILL_LAUNCH(namekey, g, b, shm, strm)                  \
	rec->u.launch.name = tbp_names_lookup(namekey);            \
	rec->u.launch.grid_x = (g).x;                              \
	rec->u.launch.grid_y = (g).y;                              \
	rec->u.launch.grid_z = (g).z;                              \
	rec->u.launch.block_x = (b).x;                             \
	rec->u.launch.block_y = (b).y;                             \
	rec->u.launch.block_z = (b).z;                             \
	rec->u.launch.shmem = (shm);                               \
	rec->u.call.stream = U(strm)

#define LAUNCH_PARAMS (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream)
#define LAUNCH_ARGS (func, gridDim, blockDim, args, sharedMem, stream)
RT_HOOK(cudaLaunchKernel, TBP_API_cudaLaunchKernel, TBP_K_LAUNCH, LAUNCH_PARAMS, LAUNCH_ARGS,
	FILL_LAUNCH(func, gridDim, blockDim, sharedMem, stream))
RT_HOOK(cudaLaunchKernel_ptsz, TBP_API_cudaLaunchKernel_ptsz, TBP_K_LAUNCH, LAUNCH_PARAMS, LAUNCH_ARGS,
	FILL_LAUNCH(func, gridDim, blockDim, sharedMem, stream))
RT_HOOK(cudaLaunchCooperativeKernel, TBP_API_cudaLaunchCooperativeKernel, TBP_K_LAUNCH, LAUNCH_PARAMS,
	LAUNCH_ARGS, FILL_LAUNCH(func, gridDim, blockDim, sharedMem, stream))
RT_HOOK(cudaLaunchCooperativeKernel_ptsz, TBP_API_cudaLaunchCooperativeKernel_ptsz, TBP_K_LAUNCH,
	LAUNCH_PARAMS, LAUNCH_ARGS, FILL_LAUNCH(func, gridDim, blockDim, sharedMem, stream))

/* nvcc 13 host stubs: __cudaGetKernel once, then __cudaLaunchKernel. */
#define KLAUNCH_PARAMS (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream)
#define KLAUNCH_ARGS (kernel, gridDim, blockDim, args, sharedMem, stream)
RT_HOOK(__cudaLaunchKernel, TBP_API___cudaLaunchKernel, TBP_K_LAUNCH, KLAUNCH_PARAMS, KLAUNCH_ARGS,
	FILL_LAUNCH((const void *)kernel, gridDim, blockDim, sharedMem, stream))
RT_HOOK(__cudaLaunchKernel_ptsz, TBP_API___cudaLaunchKernel_ptsz, TBP_K_LAUNCH, KLAUNCH_PARAMS,
	KLAUNCH_ARGS, FILL_LAUNCH((const void *)kernel, gridDim, blockDim, sharedMem, stream))

#define EXC_PARAMS (const cudaLaunchConfig_t *config, const void *func, void **args)
#define EXC_ARGS (config, func, args)
#define FILL_EXC                                                                      \
	if (config) {                                                                     \
		FILL_LAUNCH(func, config->gridDim, config->blockDim, config->dynamicSmemBytes, \
			config->stream);                                                          \
	} else {                                                                          \
		rec->u.launch.name = tbp_names_lookup(func);                                  \
	}
RT_HOOK(cudaLaunchKernelExC, TBP_API_cudaLaunchKernelExC, TBP_K_LAUNCH, EXC_PARAMS, EXC_ARGS, FILL_EXC)
RT_HOOK(cudaLaunchKernelExC_ptsz, TBP_API_cudaLaunchKernelExC_ptsz, TBP_K_LAUNCH, EXC_PARAMS, EXC_ARGS,
	FILL_EXC)

/* One API record per graph launch; CUPTI shows the kernels it ran. */
RT_HOOK(cudaGraphLaunch, TBP_API_cudaGraphLaunch, TBP_K_API,
	(cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream),
	rec->u.api.arg0 = U(graphExec); rec->u.call.stream = U(stream))
RT_HOOK(cudaGraphLaunch_ptsz, TBP_API_cudaGraphLaunch_ptsz, TBP_K_API,
	(cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream),
	rec->u.api.arg0 = U(graphExec); rec->u.call.stream = U(stream))

/* ------------------------------------------------------------ registration */

/* Not recorded: registration maps host stubs to device names. */
typedef void (*register_function_fn)(void **, const char *, char *, const char *, int, uint3 *,
	uint3 *, dim3 *, dim3 *, int *);
static void *real___cudaRegisterFunction;
TBP_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
	const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim,
	int *wSize);
static const struct tbp_hook_entry hook___cudaRegisterFunction TBP_HOOK_SECTION = {
	"__cudaRegisterFunction", NULL, TBP_API___cudaRegisterFunction, TBP_LIB_CUDART, 0,
	(void *)__cudaRegisterFunction, &real___cudaRegisterFunction };
TBP_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
	const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim,
	int *wSize)
{
	register_function_fn real = (register_function_fn)tbp_real_ensure(&hook___cudaRegisterFunction);
	int saved_errno = errno;
	if (tbp_cfg.enabled && hostFun)
		tbp_names_register(hostFun, deviceName ? deviceName : deviceFun);
	errno = saved_errno;
	if (real)
		real(fatCubinHandle, hostFun, deviceFun, deviceName, thread_limit, tid, bid, bDim, gDim,
			wSize);
}

typedef cudaError_t (*get_kernel_fn)(cudaKernel_t *, const void *);
static void *real___cudaGetKernel;
TBP_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
static const struct tbp_hook_entry hook___cudaGetKernel TBP_HOOK_SECTION = {
	"__cudaGetKernel", NULL, TBP_API___cudaGetKernel, TBP_LIB_CUDART, 0, (void *)__cudaGetKernel,
	&real___cudaGetKernel };
TBP_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
	get_kernel_fn real = (get_kernel_fn)tbp_real_ensure(&hook___cudaGetKernel);
	if (!real)
		return RT_ERR;
	cudaError_t result = real(kernel, hostFun);
	int saved_errno = errno;
	if (result == cudaSuccess && kernel && *kernel && tbp_cfg.enabled)
		tbp_names_alias((const void *)*kernel, hostFun);
	errno = saved_errno;
	return result;
}

/* ------------------------------------------------------------ copies */

#define FILL_COPY(d, s, n, k, fl, strm)                 \
	rec->u.memcpy.bytes = (n);                          \
	rec->u.memcpy.flags = (fl);                         \
	tbp_classify_copy(rec, U(d), U(s), (int)(k));       \
	rec->u.call.stream = U(strm)

RT_HOOK(cudaMemcpy, TBP_API_cudaMemcpy, TBP_K_MEMCPY,
	(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind), (dst, src, count, kind),
	FILL_COPY(dst, src, count, kind, 0, 0))
RT_HOOK(cudaMemcpy_ptds, TBP_API_cudaMemcpy_ptds, TBP_K_MEMCPY,
	(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind), (dst, src, count, kind),
	FILL_COPY(dst, src, count, kind, 0, 0))
RT_HOOK(cudaMemcpyAsync, TBP_API_cudaMemcpyAsync, TBP_K_MEMCPY,
	(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
	(dst, src, count, kind, stream), FILL_COPY(dst, src, count, kind, TBP_COPYF_ASYNC, stream))
RT_HOOK(cudaMemcpyAsync_ptsz, TBP_API_cudaMemcpyAsync_ptsz, TBP_K_MEMCPY,
	(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
	(dst, src, count, kind, stream), FILL_COPY(dst, src, count, kind, TBP_COPYF_ASYNC, stream))
RT_HOOK(cudaMemcpy2D, TBP_API_cudaMemcpy2D, TBP_K_MEMCPY,
	(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
		enum cudaMemcpyKind kind),
	(dst, dpitch, src, spitch, width, height, kind),
	FILL_COPY(dst, src, (uint64_t)width * height, kind, TBP_COPYF_2D, 0))
RT_HOOK(cudaMemcpy2DAsync, TBP_API_cudaMemcpy2DAsync, TBP_K_MEMCPY,
	(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
		enum cudaMemcpyKind kind, cudaStream_t stream),
	(dst, dpitch, src, spitch, width, height, kind, stream),
	FILL_COPY(dst, src, (uint64_t)width * height, kind, TBP_COPYF_2D | TBP_COPYF_ASYNC, stream))

#define FILL_PEER(d, s, n, fl, strm)                    \
	rec->u.memcpy.bytes = (n);                          \
	rec->u.memcpy.flags = (fl);                         \
	rec->u.memcpy.copy_kind = TBP_COPY_PEER;            \
	rec->u.memcpy.dst = U(d);                           \
	rec->u.memcpy.src = U(s);                           \
	rec->u.call.stream = U(strm)
RT_HOOK(cudaMemcpyPeer, TBP_API_cudaMemcpyPeer, TBP_K_MEMCPY,
	(void *dst, int dstDevice, const void *src, int srcDevice, size_t count),
	(dst, dstDevice, src, srcDevice, count), FILL_PEER(dst, src, count, 0, 0))
RT_HOOK(cudaMemcpyPeerAsync, TBP_API_cudaMemcpyPeerAsync, TBP_K_MEMCPY,
	(void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream),
	(dst, dstDevice, src, srcDevice, count, stream),
	FILL_PEER(dst, src, count, TBP_COPYF_ASYNC, stream))

/* Symbols live in device memory: the direction is the kind's. */
RT_HOOK(cudaMemcpyToSymbol, TBP_API_cudaMemcpyToSymbol, TBP_K_MEMCPY,
	(const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind),
	(symbol, src, count, offset, kind),
	FILL_COPY(symbol, src, count, kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind,
		TBP_COPYF_SYMBOL, 0))
RT_HOOK(cudaMemcpyFromSymbol, TBP_API_cudaMemcpyFromSymbol, TBP_K_MEMCPY,
	(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind),
	(dst, symbol, count, offset, kind),
	FILL_COPY(dst, symbol, count, kind == cudaMemcpyDefault ? cudaMemcpyDeviceToHost : kind,
		TBP_COPYF_SYMBOL, 0))
RT_HOOK(cudaMemcpyToSymbolAsync, TBP_API_cudaMemcpyToSymbolAsync, TBP_K_MEMCPY,
	(const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind,
		cudaStream_t stream),
	(symbol, src, count, offset, kind, stream),
	FILL_COPY(symbol, src, count, kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind,
		TBP_COPYF_SYMBOL | TBP_COPYF_ASYNC, stream))
RT_HOOK(cudaMemcpyFromSymbolAsync, TBP_API_cudaMemcpyFromSymbolAsync, TBP_K_MEMCPY,
	(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,
		cudaStream_t stream),
	(dst, symbol, count, offset, kind, stream),
	FILL_COPY(dst, symbol, count, kind == cudaMemcpyDefault ? cudaMemcpyDeviceToHost : kind,
		TBP_COPYF_SYMBOL | TBP_COPYF_ASYNC, stream))

/* ------------------------------------------------------------ memset */

#define FILL_SET(p, v, n, strm)               \
	rec->u.memset.bytes = (n);                \
	rec->u.memset.value = (uint64_t)(v);      \
	rec->u.memset.ptr = U(p);                 \
	rec->u.call.stream = U(strm)
RT_HOOK(cudaMemset, TBP_API_cudaMemset, TBP_K_MEMSET, (void *devPtr, int value, size_t count),
	(devPtr, value, count), FILL_SET(devPtr, value, count, 0))
RT_HOOK(cudaMemset_ptds, TBP_API_cudaMemset_ptds, TBP_K_MEMSET, (void *devPtr, int value, size_t count),
	(devPtr, value, count), FILL_SET(devPtr, value, count, 0))
RT_HOOK(cudaMemsetAsync, TBP_API_cudaMemsetAsync, TBP_K_MEMSET,
	(void *devPtr, int value, size_t count, cudaStream_t stream), (devPtr, value, count, stream),
	FILL_SET(devPtr, value, count, stream))
RT_HOOK(cudaMemsetAsync_ptsz, TBP_API_cudaMemsetAsync_ptsz, TBP_K_MEMSET,
	(void *devPtr, int value, size_t count, cudaStream_t stream), (devPtr, value, count, stream),
	FILL_SET(devPtr, value, count, stream))

/* ------------------------------------------------------------ memory */

#define FILL_MALLOC(pp, n, fl, rk, strm)                                  \
	uint64_t new_ptr = (result == cudaSuccess && (pp)) ? U(*(pp)) : 0;    \
	rec->u.malloc.ptr = new_ptr;                                              \
	rec->u.malloc.bytes = (n);                                            \
	rec->u.malloc.flags = (fl);                                           \
	rec->u.call.stream = U(strm);                                         \
	if (new_ptr)                                                          \
		tbp_mem_add(new_ptr, (n), (rk))
#define FILL_FREE(p, strm)                                                \
	rec->u.free.ptr = U(p);                                               \
	rec->u.free.bytes = result == cudaSuccess ? tbp_mem_remove(U(p)) : 0; \
	rec->u.call.stream = U(strm)

RT_HOOK(cudaMalloc, TBP_API_cudaMalloc, TBP_K_MALLOC, (void **devPtr, size_t size), (devPtr, size),
	FILL_MALLOC(devPtr, size, 0, TBP_RANGE_DEVICE, 0))
RT_HOOK(cudaMallocAsync, TBP_API_cudaMallocAsync, TBP_K_MALLOC,
	(void **devPtr, size_t size, cudaStream_t stream), (devPtr, size, stream),
	FILL_MALLOC(devPtr, size, TBP_ALLOCF_ASYNC, TBP_RANGE_DEVICE, stream))
RT_HOOK(cudaMallocAsync_ptsz, TBP_API_cudaMallocAsync_ptsz, TBP_K_MALLOC,
	(void **devPtr, size_t size, cudaStream_t stream), (devPtr, size, stream),
	FILL_MALLOC(devPtr, size, TBP_ALLOCF_ASYNC, TBP_RANGE_DEVICE, stream))
RT_HOOK(cudaMallocHost, TBP_API_cudaMallocHost, TBP_K_MALLOC, (void **ptr, size_t size), (ptr, size),
	FILL_MALLOC(ptr, size, TBP_ALLOCF_HOST, TBP_RANGE_PINNED, 0))
RT_HOOK(cudaHostAlloc, TBP_API_cudaHostAlloc, TBP_K_MALLOC,
	(void **pHost, size_t size, unsigned int flags), (pHost, size, flags),
	FILL_MALLOC(pHost, size, TBP_ALLOCF_HOST, TBP_RANGE_PINNED, 0))
RT_HOOK(cudaMallocManaged, TBP_API_cudaMallocManaged, TBP_K_MALLOC,
	(void **devPtr, size_t size, unsigned int flags), (devPtr, size, flags),
	FILL_MALLOC(devPtr, size, TBP_ALLOCF_MANAGED, TBP_RANGE_MANAGED, 0))
/* The program's memory, page-locked in place: copies to/from it are pinned
 * (tbp_classify_copy) until it is unregistered. */
RT_HOOK(cudaHostRegister, TBP_API_cudaHostRegister, TBP_K_API,
	(void *ptr, size_t size, unsigned int flags), (ptr, size, flags),
	rec->u.api.arg0 = U(ptr);
	rec->u.api.arg1 = size;
	if (result == cudaSuccess && ptr)
		tbp_mem_add(U(ptr), size, TBP_RANGE_PINNED))
RT_HOOK(cudaHostUnregister, TBP_API_cudaHostUnregister, TBP_K_API, (void *ptr), (ptr),
	rec->u.api.arg0 = U(ptr);
	rec->u.api.arg1 = result == cudaSuccess ? tbp_mem_remove(U(ptr)) : 0)
RT_HOOK(cudaFree, TBP_API_cudaFree, TBP_K_FREE, (void *devPtr), (devPtr), FILL_FREE(devPtr, 0))
RT_HOOK(cudaFreeHost, TBP_API_cudaFreeHost, TBP_K_FREE, (void *ptr), (ptr), FILL_FREE(ptr, 0))
RT_HOOK(cudaFreeAsync, TBP_API_cudaFreeAsync, TBP_K_FREE, (void *devPtr, cudaStream_t stream),
	(devPtr, stream), FILL_FREE(devPtr, stream))
RT_HOOK(cudaFreeAsync_ptsz, TBP_API_cudaFreeAsync_ptsz, TBP_K_FREE,
	(void *devPtr, cudaStream_t stream), (devPtr, stream), FILL_FREE(devPtr, stream))

/* ------------------------------------------------------------ synchronization */

#define FILL_SYNC(k, h, strm)                        \
	rec->u.sync.sync_kind = (k);                     \
	rec->u.sync.handle = U(h);                       \
	rec->u.call.stream = U(strm);                    \
	tbp_py_note_wait(rec->u.call.callpath)

RT_HOOK(cudaDeviceSynchronize, TBP_API_cudaDeviceSynchronize, TBP_K_SYNC, (void), (),
	FILL_SYNC(TBP_SYNC_DEVICE, 0, 0))
RT_HOOK(cudaStreamSynchronize, TBP_API_cudaStreamSynchronize, TBP_K_SYNC, (cudaStream_t stream),
	(stream), FILL_SYNC(TBP_SYNC_STREAM, stream, stream))
RT_HOOK(cudaStreamSynchronize_ptsz, TBP_API_cudaStreamSynchronize_ptsz, TBP_K_SYNC,
	(cudaStream_t stream), (stream), FILL_SYNC(TBP_SYNC_STREAM, stream, stream))
RT_HOOK(cudaEventSynchronize, TBP_API_cudaEventSynchronize, TBP_K_SYNC, (cudaEvent_t event), (event),
	FILL_SYNC(TBP_SYNC_EVENT, event, 0))
RT_HOOK(cudaStreamWaitEvent, TBP_API_cudaStreamWaitEvent, TBP_K_SYNC,
	(cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags),
	rec->u.sync.sync_kind = TBP_SYNC_STREAM_WAIT_EVENT; rec->u.sync.handle = U(event);
	rec->u.call.stream = U(stream))
RT_HOOK(cudaStreamWaitEvent_ptsz, TBP_API_cudaStreamWaitEvent_ptsz, TBP_K_SYNC,
	(cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags),
	rec->u.sync.sync_kind = TBP_SYNC_STREAM_WAIT_EVENT; rec->u.sync.handle = U(event);
	rec->u.call.stream = U(stream))

/* ------------------------------------------------------------ streams, events, device */

#define FILL_STREAM_CREATE(ps, fl)                                            \
	rec->u.api.arg0 = (result == cudaSuccess && (ps)) ? U(*(ps)) : 0;         \
	rec->u.api.arg1 = (fl);                                                   \
	rec->u.call.stream = rec->u.api.arg0
RT_HOOK(cudaStreamCreate, TBP_API_cudaStreamCreate, TBP_K_API, (cudaStream_t *pStream), (pStream),
	FILL_STREAM_CREATE(pStream, 0))
RT_HOOK(cudaStreamCreateWithFlags, TBP_API_cudaStreamCreateWithFlags, TBP_K_API,
	(cudaStream_t *pStream, unsigned int flags), (pStream, flags), FILL_STREAM_CREATE(pStream, flags))
RT_HOOK(cudaStreamCreateWithPriority, TBP_API_cudaStreamCreateWithPriority, TBP_K_API,
	(cudaStream_t *pStream, unsigned int flags, int priority), (pStream, flags, priority),
	FILL_STREAM_CREATE(pStream, flags))
RT_HOOK(cudaStreamDestroy, TBP_API_cudaStreamDestroy, TBP_K_API, (cudaStream_t stream), (stream),
	rec->u.api.arg0 = U(stream); rec->u.call.stream = U(stream))
RT_HOOK(cudaEventRecord, TBP_API_cudaEventRecord, TBP_K_API, (cudaEvent_t event, cudaStream_t stream),
	(event, stream), rec->u.api.arg0 = U(event); rec->u.call.stream = U(stream))
RT_HOOK(cudaEventRecord_ptsz, TBP_API_cudaEventRecord_ptsz, TBP_K_API,
	(cudaEvent_t event, cudaStream_t stream), (event, stream),
	rec->u.api.arg0 = U(event); rec->u.call.stream = U(stream))
RT_HOOK(cudaSetDevice, TBP_API_cudaSetDevice, TBP_K_API, (int device), (device),
	rec->u.api.arg0 = (uint64_t)(int64_t)device;
	if (result == cudaSuccess) tbp_tls_device = device;
	rec->u.call.device = (uint64_t)tbp_tls_device)
/* Reset destroys the context: GPU records still in CUPTI's buffers are
 * flushed, and everything recorded so far written, before it. */
RT_HOOK_PRE(cudaDeviceReset, TBP_API_cudaDeviceReset, TBP_K_API, (void), (),
	(tbp_cupti_flush(), tbp_drain_now(2000)), (void)0)
