/*
 * CUDA driver hooks (libcuda.so.1).  Reached three ways, each recorded once:
 *  - programs linked against libcuda call our exported symbols directly;
 *  - code that fetches entry points by handle (dlsym) or through
 *    cuGetProcAddress gets our wrappers (common.c, below);
 *  - the CUDA runtime's own driver calls are NOT wrapped (its lookups are
 *    recognised by caller address), and any driver call made inside a
 *    runtime hook is only forwarded, since the recursion guard is held.
 * Exported names are the ABI names (cuMemAlloc_v2, ...); the
 * cuGetProcAddress name (proc) is the unversioned one callers ask for.
 */
#include <cuda.h>
#include <string.h>

#include "hook.h"

#define DRV_ERR CUDA_ERROR_NOT_INITIALIZED
#define U(x) ((uint64_t)(uintptr_t)(x))

#define DRV_HOOK(NAME, PROC, PT, API, KIND, PARAMS, ARGS, ...) \
	TBP_HOOK(CUresult, DRV_ERR, TBP_LIB_CUDA, NAME, PROC, PT, API, KIND, PARAMS, ARGS, (void)0, __VA_ARGS__)

/* ------------------------------------------------------------ launches */

#define FILL_CULAUNCH(f, gx, gy, gz, bx, by, bz, shm, strm) \
	rec->u.launch.name = tbp_names_cufunction(f);           \
	rec->u.launch.grid_x = (gx);                            \
	rec->u.launch.grid_y = (gy);                            \
	rec->u.launch.grid_z = (gz);                            \
	rec->u.launch.block_x = (bx);                           \
	rec->u.launch.block_y = (by);                           \
	rec->u.launch.block_z = (bz);                           \
	rec->u.launch.shmem = (shm);                            \
	rec->u.call.stream = U(strm)

#define CULAUNCH_PARAMS (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
	unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, \
	CUstream hStream, void **kernelParams, void **extra)
#define CULAUNCH_ARGS (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, \
	hStream, kernelParams, extra)
#define FILL_CUL FILL_CULAUNCH(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
	sharedMemBytes, hStream)
DRV_HOOK(cuLaunchKernel, "cuLaunchKernel", 0, TBP_API_cuLaunchKernel, TBP_K_LAUNCH, CULAUNCH_PARAMS,
	CULAUNCH_ARGS, FILL_CUL)
DRV_HOOK(cuLaunchKernel_ptsz, "cuLaunchKernel", 1, TBP_API_cuLaunchKernel_ptsz, TBP_K_LAUNCH,
	CULAUNCH_PARAMS, CULAUNCH_ARGS, FILL_CUL)
DRV_HOOK(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 0, TBP_API_cuLaunchCooperativeKernel,
	TBP_K_LAUNCH,
	(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
		unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
		unsigned int sharedMemBytes, CUstream hStream, void **kernelParams),
	(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
		kernelParams),
	FILL_CUL)

#define FILL_CULEX                                                                      \
	if (config) {                                                                       \
		FILL_CULAUNCH(f, config->gridDimX, config->gridDimY, config->gridDimZ,          \
			config->blockDimX, config->blockDimY, config->blockDimZ,                    \
			config->sharedMemBytes, config->hStream);                                   \
	} else {                                                                            \
		rec->u.launch.name = tbp_names_cufunction(f);                                   \
	}
DRV_HOOK(cuLaunchKernelEx, "cuLaunchKernelEx", 0, TBP_API_cuLaunchKernelEx, TBP_K_LAUNCH,
	(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
	(config, f, kernelParams, extra), FILL_CULEX)
DRV_HOOK(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 1, TBP_API_cuLaunchKernelEx_ptsz, TBP_K_LAUNCH,
	(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
	(config, f, kernelParams, extra), FILL_CULEX)
DRV_HOOK(cuGraphLaunch, "cuGraphLaunch", 0, TBP_API_cuGraphLaunch, TBP_K_API,
	(CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream),
	rec->u.api.arg0 = U(hGraphExec); rec->u.call.stream = U(hStream))

/* ------------------------------------------------------------ copies */

#define FILL_CUCOPY(d, s, n, k, fl, strm)               \
	rec->u.memcpy.bytes = (n);                          \
	rec->u.memcpy.flags = (fl);                         \
	tbp_classify_copy(rec, U(d), U(s), (k));            \
	rec->u.call.stream = U(strm)

/* cudaMemcpyKind numbering: 1 H2D, 2 D2H, 3 D2D, 4 infer (unified). */
DRV_HOOK(cuMemcpy, "cuMemcpy", 0, TBP_API_cuMemcpy, TBP_K_MEMCPY,
	(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount),
	FILL_CUCOPY(dst, src, ByteCount, 4, 0, 0))
DRV_HOOK(cuMemcpyAsync, "cuMemcpyAsync", 0, TBP_API_cuMemcpyAsync, TBP_K_MEMCPY,
	(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
	(dst, src, ByteCount, hStream), FILL_CUCOPY(dst, src, ByteCount, 4, TBP_COPYF_ASYNC, hStream))
DRV_HOOK(cuMemcpyHtoD_v2, "cuMemcpyHtoD", 0, TBP_API_cuMemcpyHtoD, TBP_K_MEMCPY,
	(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount),
	FILL_CUCOPY(dstDevice, srcHost, ByteCount, 1, 0, 0))
DRV_HOOK(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 0, TBP_API_cuMemcpyDtoH, TBP_K_MEMCPY,
	(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount),
	FILL_CUCOPY(dstHost, srcDevice, ByteCount, 2, 0, 0))
DRV_HOOK(cuMemcpyDtoD_v2, "cuMemcpyDtoD", 0, TBP_API_cuMemcpyDtoD, TBP_K_MEMCPY,
	(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), (dstDevice, srcDevice, ByteCount),
	FILL_CUCOPY(dstDevice, srcDevice, ByteCount, 3, 0, 0))
DRV_HOOK(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", 0, TBP_API_cuMemcpyHtoDAsync, TBP_K_MEMCPY,
	(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
	(dstDevice, srcHost, ByteCount, hStream),
	FILL_CUCOPY(dstDevice, srcHost, ByteCount, 1, TBP_COPYF_ASYNC, hStream))
DRV_HOOK(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 0, TBP_API_cuMemcpyDtoHAsync, TBP_K_MEMCPY,
	(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
	(dstHost, srcDevice, ByteCount, hStream),
	FILL_CUCOPY(dstHost, srcDevice, ByteCount, 2, TBP_COPYF_ASYNC, hStream))
DRV_HOOK(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", 0, TBP_API_cuMemcpyDtoDAsync, TBP_K_MEMCPY,
	(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
	(dstDevice, srcDevice, ByteCount, hStream),
	FILL_CUCOPY(dstDevice, srcDevice, ByteCount, 3, TBP_COPYF_ASYNC, hStream))
DRV_HOOK(cuMemcpyPeer, "cuMemcpyPeer", 0, TBP_API_cuMemcpyPeer, TBP_K_MEMCPY,
	(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
		size_t ByteCount),
	(dstDevice, dstContext, srcDevice, srcContext, ByteCount),
	rec->u.memcpy.bytes = ByteCount; rec->u.memcpy.copy_kind = TBP_COPY_PEER;
	rec->u.memcpy.dst = dstDevice; rec->u.memcpy.src = srcDevice)
DRV_HOOK(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 0, TBP_API_cuMemcpyPeerAsync, TBP_K_MEMCPY,
	(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
		size_t ByteCount, CUstream hStream),
	(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream),
	rec->u.memcpy.bytes = ByteCount; rec->u.memcpy.copy_kind = TBP_COPY_PEER;
	rec->u.memcpy.flags = TBP_COPYF_ASYNC; rec->u.memcpy.dst = dstDevice;
	rec->u.memcpy.src = srcDevice; rec->u.call.stream = U(hStream))

/* ------------------------------------------------------------ memset */

#define FILL_CUSET(p, v, n, strm)            \
	rec->u.memset.bytes = (n);               \
	rec->u.memset.value = (uint64_t)(v);     \
	rec->u.memset.ptr = (p);                 \
	rec->u.call.stream = U(strm)
DRV_HOOK(cuMemsetD8_v2, "cuMemsetD8", 0, TBP_API_cuMemsetD8, TBP_K_MEMSET,
	(CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N),
	FILL_CUSET(dstDevice, uc, N, 0))
DRV_HOOK(cuMemsetD32_v2, "cuMemsetD32", 0, TBP_API_cuMemsetD32, TBP_K_MEMSET,
	(CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, N),
	FILL_CUSET(dstDevice, ui, (uint64_t)N * 4, 0))
DRV_HOOK(cuMemsetD8Async, "cuMemsetD8Async", 0, TBP_API_cuMemsetD8Async, TBP_K_MEMSET,
	(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream),
	FILL_CUSET(dstDevice, uc, N, hStream))
DRV_HOOK(cuMemsetD32Async, "cuMemsetD32Async", 0, TBP_API_cuMemsetD32Async, TBP_K_MEMSET,
	(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream),
	FILL_CUSET(dstDevice, ui, (uint64_t)N * 4, hStream))

/* ------------------------------------------------------------ memory */

#define FILL_CUALLOC(pp, n, fl, rk, strm)                                  \
	uint64_t ptr = (result == CUDA_SUCCESS && (pp)) ? (uint64_t)*(pp) : 0; \
	rec->u.malloc.ptr = ptr;                                               \
	rec->u.malloc.bytes = (n);                                             \
	rec->u.malloc.flags = (fl);                                            \
	rec->u.call.stream = U(strm);                                          \
	if (ptr)                                                               \
		tbp_mem_add(ptr, (n), (rk))
#define FILL_CUFREE(p, strm)                                                       \
	rec->u.free.ptr = (uint64_t)(p);                                               \
	rec->u.free.bytes = result == CUDA_SUCCESS ? tbp_mem_remove((uint64_t)(p)) : 0; \
	rec->u.call.stream = U(strm)

DRV_HOOK(cuMemAlloc_v2, "cuMemAlloc", 0, TBP_API_cuMemAlloc, TBP_K_MALLOC,
	(CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize),
	FILL_CUALLOC(dptr, bytesize, 0, TBP_RANGE_DEVICE, 0))
DRV_HOOK(cuMemAllocAsync, "cuMemAllocAsync", 0, TBP_API_cuMemAllocAsync, TBP_K_MALLOC,
	(CUdeviceptr *dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream),
	FILL_CUALLOC(dptr, bytesize, TBP_ALLOCF_ASYNC, TBP_RANGE_DEVICE, hStream))
DRV_HOOK(cuMemAllocManaged, "cuMemAllocManaged", 0, TBP_API_cuMemAllocManaged, TBP_K_MALLOC,
	(CUdeviceptr *dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags),
	FILL_CUALLOC(dptr, bytesize, TBP_ALLOCF_MANAGED, TBP_RANGE_MANAGED, 0))
DRV_HOOK(cuMemAllocPitch_v2, "cuMemAllocPitch", 0, TBP_API_cuMemAllocPitch, TBP_K_MALLOC,
	(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes),
	(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes),
	uint64_t pitched = (result == CUDA_SUCCESS && pPitch) ? (uint64_t)*pPitch * Height : 0;
	FILL_CUALLOC(dptr, pitched, 0, TBP_RANGE_DEVICE, 0))
DRV_HOOK(cuMemAllocHost_v2, "cuMemAllocHost", 0, TBP_API_cuMemAllocHost, TBP_K_MALLOC,
	(void **pp, size_t bytesize), (pp, bytesize),
	uint64_t ptr = (result == CUDA_SUCCESS && pp) ? U(*pp) : 0;
	rec->u.malloc.ptr = ptr; rec->u.malloc.bytes = bytesize; rec->u.malloc.flags = TBP_ALLOCF_HOST;
	if (ptr) tbp_mem_add(ptr, bytesize, TBP_RANGE_PINNED))
DRV_HOOK(cuMemFree_v2, "cuMemFree", 0, TBP_API_cuMemFree, TBP_K_FREE, (CUdeviceptr dptr), (dptr),
	FILL_CUFREE(dptr, 0))
DRV_HOOK(cuMemFreeAsync, "cuMemFreeAsync", 0, TBP_API_cuMemFreeAsync, TBP_K_FREE,
	(CUdeviceptr dptr, CUstream hStream), (dptr, hStream), FILL_CUFREE(dptr, hStream))
DRV_HOOK(cuMemFreeHost, "cuMemFreeHost", 0, TBP_API_cuMemFreeHost, TBP_K_FREE, (void *p), (p),
	FILL_CUFREE(U(p), 0))

/* ------------------------------------------------------------ synchronization */

#define FILL_CUSYNC(k, h, strm)               \
	rec->u.sync.sync_kind = (k);              \
	rec->u.sync.handle = U(h);                \
	rec->u.call.stream = U(strm);             \
	tbp_py_note_wait(rec->u.call.callpath)
DRV_HOOK(cuCtxSynchronize, "cuCtxSynchronize", 0, TBP_API_cuCtxSynchronize, TBP_K_SYNC, (void), (),
	FILL_CUSYNC(TBP_SYNC_CONTEXT, 0, 0))
DRV_HOOK(cuStreamSynchronize, "cuStreamSynchronize", 0, TBP_API_cuStreamSynchronize, TBP_K_SYNC,
	(CUstream hStream), (hStream), FILL_CUSYNC(TBP_SYNC_STREAM, hStream, hStream))
DRV_HOOK(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 1, TBP_API_cuStreamSynchronize, TBP_K_SYNC,
	(CUstream hStream), (hStream), FILL_CUSYNC(TBP_SYNC_STREAM, hStream, hStream))
DRV_HOOK(cuEventSynchronize, "cuEventSynchronize", 0, TBP_API_cuEventSynchronize, TBP_K_SYNC,
	(CUevent hEvent), (hEvent), FILL_CUSYNC(TBP_SYNC_EVENT, hEvent, 0))
DRV_HOOK(cuStreamWaitEvent, "cuStreamWaitEvent", 0, TBP_API_cuStreamWaitEvent, TBP_K_SYNC,
	(CUstream hStream, CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags),
	rec->u.sync.sync_kind = TBP_SYNC_STREAM_WAIT_EVENT; rec->u.sync.handle = U(hEvent);
	rec->u.call.stream = U(hStream))

/* ------------------------------------------------------------ cuGetProcAddress */

/* Not recorded (lookups are not GPU work); hands out wrappers to callers
 * other than the CUDA runtime.  CUDA 12+: cuGetProcAddress_v2 (with a
 * symbol status); the 4-argument cuGetProcAddress is the CUDA 11 ABI. */
#undef cuGetProcAddress
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
static void *real_cuGetProcAddress_v2, *real_cuGetProcAddress;
TBP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
	CUdriverProcAddressQueryResult *symbolStatus);
TBP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
static const struct tbp_hook_entry hook_cuGetProcAddress_v2 TBP_HOOK_SECTION = {
	"cuGetProcAddress_v2", "cuGetProcAddress", TBP_API_cuGetProcAddress_v2, TBP_LIB_CUDA, 0,
	(void *)cuGetProcAddress_v2, &real_cuGetProcAddress_v2 };
static const struct tbp_hook_entry hook_cuGetProcAddress TBP_HOOK_SECTION = {
	"cuGetProcAddress", NULL, TBP_API_cuGetProcAddress, TBP_LIB_CUDA, 0, (void *)cuGetProcAddress,
	&real_cuGetProcAddress };

static int per_thread_flavour(cuuint64_t flags)
{
	return (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
}

TBP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
	CUdriverProcAddressQueryResult *symbolStatus)
{
	void *caller = __builtin_return_address(0);
	gpa_v2_fn real = (gpa_v2_fn)tbp_real_ensure(&hook_cuGetProcAddress_v2);
	if (!real)
		return DRV_ERR;
	CUresult result = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	int saved_errno = errno;
	/* Our wrappers use the CUDA >= 4.0 (64-bit, _v2) signatures. */
	if (result == CUDA_SUCCESS && pfn && *pfn && cudaVersion >= 4000 && symbol) {
		if (!strcmp(symbol, "cuGetProcAddress")) {
			if (tbp_cfg.enabled && !tbp_addr_in_cudart(caller) &&
			    tbp_real_get(&real_cuGetProcAddress_v2) == *pfn)
				*pfn = (void *)cuGetProcAddress_v2;
		} else {
			*pfn = tbp_wrap_proc(symbol, *pfn, per_thread_flavour(flags), caller);
		}
	}
	errno = saved_errno;
	return result;
}

TBP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	void *caller = __builtin_return_address(0);
	gpa_v1_fn real = (gpa_v1_fn)tbp_real_ensure(&hook_cuGetProcAddress);
	if (!real)
		return DRV_ERR;
	CUresult result = real(symbol, pfn, cudaVersion, flags);
	int saved_errno = errno;
	if (result == CUDA_SUCCESS && pfn && *pfn && cudaVersion >= 4000 && symbol &&
	    strcmp(symbol, "cuGetProcAddress"))
		*pfn = tbp_wrap_proc(symbol, *pfn, per_thread_flavour(flags), caller);
	errno = saved_errno;
	return result;
}
