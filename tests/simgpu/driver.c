/*
 * simgpu: a stand-in for the CUDA driver, libcuda.so.1, over the simulated device of the
 * libcudart.so.13 stand-in (both see one device, one memory, one timeline, one truth log).
 *
 * What PyTorch and the CUDA libraries ask of a driver is here: device and primary-context queries,
 * cuGetProcAddress (what the runtime's cudaGetDriverEntryPoint* and statically linked runtimes use),
 * modules whose functions are known by name (cuModuleLoadData / cuModuleGetFunction: images are not
 * read), kernel launches (cuLaunchKernel, cuLaunchKernelEx, cooperative), memory, copies, memsets and
 * syncs.  Ops logged by these calls are driver calls (truth `domain` = driver).  The virtual-memory
 * API (cuMemCreate, cuMemAddressReserve, ...) answers CUDA_ERROR_NOT_SUPPORTED, as on a device
 * without it, so PyTorch's caching allocator uses cudaMalloc.  Every other function of the CUDA 13
 * driver exists as a stub (driver_stubs.inc) answering CUDA_ERROR_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

/* cuda.h maps these to their current ABI names; the driver exports both flavours. */
#undef cuDeviceGetUuid
#undef cuGetProcAddress
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

#include "simgpu.h"

#define EXPORT __attribute__((visibility("default")))

/* Private entry points of the runtime stand-in (cudart.c). */
void *simgpu_kernel_by_name(const char *name);
const char *simgpu_kernel_name(const void *kernel);
int simgpu_launch(const char *api, const void *kernel, const unsigned grid[3], const unsigned block[3],
	size_t shmem, void *stream, int ptsz);
int simgpu_alloc(const char *api, void **ptr, size_t size, int host);
int simgpu_free(const char *api, void *ptr, int host);
int simgpu_copy(const char *api, void *dst, const void *src, size_t count, void *stream, int async, int ptsz);
int simgpu_memset(const char *api, void *dst, int value, size_t count, void *stream, int async, int ptsz);
int simgpu_stream_sync(const char *api, void *stream, int ptsz);

/* cudaError_t -> CUresult for the codes the runtime stand-in returns. */
static CUresult cu_result(int e)
{
	switch (e) {
	case cudaSuccess: return CUDA_SUCCESS;
	case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
	case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
	case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
	case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
	case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_HANDLE;
	case cudaErrorInvalidConfiguration: return CUDA_ERROR_INVALID_VALUE;
	case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
	case cudaErrorStreamCaptureUnsupported: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	case cudaErrorNoDevice: return CUDA_ERROR_NO_DEVICE;
	default: return CUDA_ERROR_UNKNOWN;
	}
}

#define DRIVER_CALL(expr)                         \
	do {                                          \
		simgpu_driver_enter();                    \
		int e_ = (expr);                          \
		simgpu_driver_leave();                    \
		return cu_result(e_);                     \
	} while (0)

/* ------------------------------------------------------------------ init, version, errors */

static int initialized;

EXPORT CUresult cuInit(unsigned int flags)
{
	(void)flags;
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return CUDA_ERROR_NO_DEVICE;
	initialized = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}

static const struct { CUresult code; const char *name, *text; } errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
	{ CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
	{ CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
	{ CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	  "operation not permitted when stream is capturing" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static CUresult error_lookup(CUresult e, const char **out, int text)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (errors[i].code == e) {
			*out = text ? errors[i].text : errors[i].name;
			return CUDA_SUCCESS;
		}
	}
	*out = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **s) { return error_lookup(e, s, 1); }
EXPORT CUresult cuGetErrorName(CUresult e, const char **s) { return error_lookup(e, s, 0); }

/* ------------------------------------------------------------------ devices and contexts */

/* One primary context per device; a context handle is the address of its cell. */
static struct sim_ctx { int device; } contexts[8];
static __thread CUcontext current_ctx;

static int device_count(void)
{
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static CUresult check_device(CUdevice d)
{
	return d >= 0 && d < device_count() && d < 8 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = device_count();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (check_device(ordinal) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	struct cudaDeviceProp p;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "%s", p.name);
	return CUDA_SUCCESS;
}

/* CUdevice_attribute and cudaDeviceAttr share their numbering. */
EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	return cu_result(cudaDeviceGetAttribute(pi, (enum cudaDeviceAttr)attrib, dev));
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	struct cudaDeviceProp p;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = p.totalGlobalMem;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	struct cudaDeviceProp p;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(uuid->bytes, p.uuid.bytes, sizeof(uuid->bytes));
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	return r ? r : cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
}

EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	return cu_result(cudaDeviceGetPCIBusId(id, len, dev));
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (check_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	contexts[dev].device = dev;
	*pctx = (CUcontext)&contexts[dev];
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return check_device(dev); }
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return check_device(dev); }
EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) { (void)flags; return check_device(dev); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	if (check_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (flags)
		*flags = 0;
	if (active)
		*active = 1; /* the runtime stand-in's device is always initialised */
	return CUDA_SUCCESS;
}

static CUcontext ctx_of_current_device(void)
{
	int d = 0;
	cudaGetDevice(&d);
	contexts[d].device = d;
	return (CUcontext)&contexts[d];
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = current_ctx ? current_ctx : ctx_of_current_device();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (ctx) {
		struct sim_ctx *c = (struct sim_ctx *)ctx;
		if (c < contexts || c >= contexts + 8)
			return CUDA_ERROR_INVALID_CONTEXT;
		cudaSetDevice(c->device);
	}
	current_ctx = ctx;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	if (pctx)
		*pctx = current_ctx;
	current_ctx = NULL;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	int d = 0;
	cudaGetDevice(&d);
	*dev = d;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *v)
{
	(void)ctx;
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 3020;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	return cu_result(cudaDeviceGetStreamPriorityRange(least, greatest));
}

EXPORT CUresult cuCtxSynchronize(void)
{
	simgpu_driver_enter();
	int e = cudaDeviceSynchronize();
	simgpu_driver_leave();
	return cu_result(e);
}

EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
	(void)s;
	return cuCtxGetCurrent(pctx);
}

/* ------------------------------------------------------------------ modules and functions */

/* Images are not read: a module is a cell, and its functions are known by the names asked for. */
struct sim_module { int unused; };

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	*module = (CUmodule)calloc(1, sizeof(struct sim_module));
	return *module ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *o, void **v)
{
	(void)n; (void)o; (void)v;
	return cuModuleLoadData(module, image);
}
EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	return cuModuleLoadData(module, fname);
}
EXPORT CUresult cuModuleUnload(CUmodule module)
{
	free(module);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name)
{
	if (!f || !module || !name)
		return CUDA_ERROR_INVALID_VALUE;
	*f = (CUfunction)simgpu_kernel_by_name(name);
	return *f ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv, unsigned int nj,
	CUlibraryOption *lo, void **lv, unsigned int nl)
{
	(void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
	return cuModuleLoadData((CUmodule *)lib, code);
}
EXPORT CUresult cuLibraryUnload(CUlibrary lib) { return cuModuleUnload((CUmodule)lib); }
/* A CUkernel (cuLibraryGetKernel) is a handle of its own, as in the real driver: the functions that take a
 * CUfunction refuse it (cuFuncGetName answers CUDA_ERROR_INVALID_HANDLE; cuKernelGetName names it), while
 * the launch functions take either (CUDA 12's cuLaunchKernel and cuLaunchKernelEx accept a CUkernel
 * where a CUfunction is expected; a library whose statically linked runtime loads its kernels as a
 * CUlibrary launches them so).  Few per process: interned by function, found by a scan. */
#define CUKERNELS_MAX 4096
struct sim_cukernel { void *function; };
static struct sim_cukernel *cukernels[CUKERNELS_MAX];
static size_t n_cukernels;
static pthread_mutex_t cukernels_lock = PTHREAD_MUTEX_INITIALIZER;

static struct sim_cukernel *cukernel_of(const void *handle)
{
	struct sim_cukernel *found = NULL;
	pthread_mutex_lock(&cukernels_lock);
	for (size_t i = 0; i < n_cukernels && !found; i++)
		if ((const void *)cukernels[i] == handle)
			found = cukernels[i];
	pthread_mutex_unlock(&cukernels_lock);
	return found;
}

/* The function a launch runs: a CUfunction as it is, a CUkernel's function. */
static CUfunction launched_function(CUfunction f)
{
	if (simgpu_kernel_name(f))
		return f;
	struct sim_cukernel *k = cukernel_of(f);
	return k ? (CUfunction)k->function : f;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
	CUfunction f;
	if (!k)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cuModuleGetFunction(&f, (CUmodule)lib, name);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&cukernels_lock);
	struct sim_cukernel *found = NULL;
	for (size_t i = 0; i < n_cukernels && !found; i++)
		if (cukernels[i]->function == (void *)f)
			found = cukernels[i];
	if (!found && n_cukernels < CUKERNELS_MAX && (found = calloc(1, sizeof *found))) {
		found->function = f;
		cukernels[n_cukernels++] = found;
	}
	pthread_mutex_unlock(&cukernels_lock);
	*k = (CUkernel)found;
	return found ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuKernelGetFunction(CUfunction *f, CUkernel k)
{
	struct sim_cukernel *ck = cukernel_of(k);
	if (!f || !ck)
		return CUDA_ERROR_INVALID_HANDLE;
	*f = (CUfunction)ck->function;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	if (!name || !f)
		return CUDA_ERROR_INVALID_VALUE;
	*name = simgpu_kernel_name(f);
	return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EXPORT CUresult cuKernelGetName(const char **name, CUkernel k)
{
	if (!name || !k)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_cukernel *ck = cukernel_of(k);
	*name = ck ? simgpu_kernel_name(ck->function) : NULL;
	return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction f)
{
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!simgpu_kernel_name(launched_function(f)))
		return CUDA_ERROR_INVALID_HANDLE;
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 232448; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION:
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
	default: *pi = 0; break;
	}
	return CUDA_SUCCESS;
}
EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f; (void)a; (void)v; return CUDA_SUCCESS; }
EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c) { (void)f; (void)c; return CUDA_SUCCESS; }

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int blockSize, size_t smem)
{
	(void)f; (void)smem;
	if (!n || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	*n = 2048 / blockSize > 32 ? 32 : 2048 / blockSize;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, CUfunction f, int bs, size_t smem,
	unsigned int flags)
{
	(void)flags;
	return cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, bs, smem);
}

/* ------------------------------------------------------------------ launches */

static CUresult do_launch(const char *api, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
	unsigned by, unsigned bz, unsigned shmem, CUstream s, int ptsz)
{
	unsigned grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };
	f = launched_function(f);
	DRIVER_CALL(simgpu_launch(api, f, grid, block, shmem, s, ptsz));
}

#define LAUNCH_PARAMS CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
	unsigned int by, unsigned int bz, unsigned int shmem, CUstream s
EXPORT CUresult cuLaunchKernel(LAUNCH_PARAMS, void **params, void **extra)
{
	(void)params; (void)extra;
	return do_launch("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shmem, s, 0);
}
EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_PARAMS, void **params, void **extra)
{
	(void)params; (void)extra;
	return do_launch("cuLaunchKernel_ptsz", f, gx, gy, gz, bx, by, bz, shmem, s, 1);
}
EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_PARAMS, void **params)
{
	(void)params;
	return do_launch("cuLaunchCooperativeKernel", f, gx, gy, gz, bx, by, bz, shmem, s, 0);
}
EXPORT CUresult cuLaunchCooperativeKernel_ptsz(LAUNCH_PARAMS, void **params)
{
	(void)params;
	return do_launch("cuLaunchCooperativeKernel_ptsz", f, gx, gy, gz, bx, by, bz, shmem, s, 1);
}
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)params; (void)extra;
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	return do_launch("cuLaunchKernelEx", f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
		c->blockDimZ, c->sharedMemBytes, c->hStream, 0);
}
EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)params; (void)extra;
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	return do_launch("cuLaunchKernelEx_ptsz", f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
		c->blockDimZ, c->sharedMemBytes, c->hStream, 1);
}

/* ------------------------------------------------------------------ memory, copies, memsets, syncs */

#define P(x) ((void *)(uintptr_t)(x))

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	void *v = NULL;
	simgpu_driver_enter();
	int e = simgpu_alloc("cuMemAlloc_v2", &v, n, 0);
	simgpu_driver_leave();
	*p = (CUdeviceptr)(uintptr_t)v;
	return cu_result(e);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { DRIVER_CALL(simgpu_free("cuMemFree_v2", P(p), 0)); }
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n) { DRIVER_CALL(simgpu_alloc("cuMemAllocHost_v2", p, n, 1)); }
EXPORT CUresult cuMemFreeHost(void *p) { DRIVER_CALL(simgpu_free("cuMemFreeHost", p, 1)); }

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) { return cu_result(cudaMemGetInfo(free_b, total)); }

EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { DRIVER_CALL(simgpu_copy("cuMemcpy", P(d), P(s), n, NULL, 0, 0)); }
EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
	DRIVER_CALL(simgpu_copy("cuMemcpyAsync", P(d), P(s), n, st, 1, 0));
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { DRIVER_CALL(simgpu_copy("cuMemcpyHtoD_v2", P(d), s, n, NULL, 0, 0)); }
EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { DRIVER_CALL(simgpu_copy("cuMemcpyDtoH_v2", d, P(s), n, NULL, 0, 0)); }
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { DRIVER_CALL(simgpu_copy("cuMemcpyDtoD_v2", P(d), P(s), n, NULL, 1, 0)); }
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
	DRIVER_CALL(simgpu_copy("cuMemcpyHtoDAsync_v2", P(d), s, n, st, 1, 0));
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st)
{
	DRIVER_CALL(simgpu_copy("cuMemcpyDtoHAsync_v2", d, P(s), n, st, 1, 0));
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
	DRIVER_CALL(simgpu_copy("cuMemcpyDtoDAsync_v2", P(d), P(s), n, st, 1, 0));
}
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { DRIVER_CALL(simgpu_memset("cuMemsetD8_v2", P(d), v, n, NULL, 0, 0)); }
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st)
{
	DRIVER_CALL(simgpu_memset("cuMemsetD8Async", P(d), v, n, st, 1, 0));
}
/* 32-bit patterns are simulated as byte memsets of the same length when the pattern is one repeated byte. */
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream st)
{
	if ((v & 0xff) * 0x01010101u != v)
		return CUDA_ERROR_NOT_SUPPORTED;
	DRIVER_CALL(simgpu_memset("cuMemsetD32Async", P(d), (int)(v & 0xff), n * 4, st, 1, 0));
}
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n)
{
	if ((v & 0xff) * 0x01010101u != v)
		return CUDA_ERROR_NOT_SUPPORTED;
	DRIVER_CALL(simgpu_memset("cuMemsetD32_v2", P(d), (int)(v & 0xff), n * 4, NULL, 0, 0));
}

EXPORT CUresult cuStreamSynchronize(CUstream s) { DRIVER_CALL(simgpu_stream_sync("cuStreamSynchronize", s, 0)); }
EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) { DRIVER_CALL(simgpu_stream_sync("cuStreamSynchronize_ptsz", s, 1)); }

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	struct cudaPointerAttributes a;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (cudaPointerGetAttributes(&a, P(ptr)) != cudaSuccess)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attribute) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
					    ? CU_MEMORYTYPE_DEVICE
					    : a.type == cudaMemoryTypeHost ? CU_MEMORYTYPE_HOST : 0;
		return a.type == cudaMemoryTypeUnregistered ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a.device; return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)a.devicePointer; return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_CONTEXT: return cuCtxGetCurrent((CUcontext *)data);
	default: return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* ------------------------------------------------------------------ cuGetProcAddress */

/* Unversioned names (what callers ask cuGetProcAddress for) -> our functions; the _ptsz flavour when
 * the caller asks for per-thread default-stream semantics. */
static const struct proc { const char *name; void *fn, *fn_ptsz; } procs[] = {
#define PROC(n, f) { n, (void *)f, NULL }
#define PROC2(n, f, fp) { n, (void *)f, (void *)fp }
	PROC("cuInit", cuInit), PROC("cuDriverGetVersion", cuDriverGetVersion),
	PROC("cuGetErrorString", cuGetErrorString), PROC("cuGetErrorName", cuGetErrorName),
	PROC("cuDeviceGet", cuDeviceGet), PROC("cuDeviceGetCount", cuDeviceGetCount),
	PROC("cuDeviceGetName", cuDeviceGetName), PROC("cuDeviceGetAttribute", cuDeviceGetAttribute),
	PROC("cuDeviceTotalMem", cuDeviceTotalMem_v2), PROC("cuDeviceGetUuid", cuDeviceGetUuid_v2),
	PROC("cuDeviceComputeCapability", cuDeviceComputeCapability),
	PROC("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId),
	PROC("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
	PROC("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2),
	PROC("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2),
	PROC("cuDevicePrimaryCtxSetFlags", cuDevicePrimaryCtxSetFlags_v2),
	PROC("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState),
	PROC("cuCtxGetCurrent", cuCtxGetCurrent), PROC("cuCtxSetCurrent", cuCtxSetCurrent),
	PROC("cuCtxPushCurrent", cuCtxPushCurrent_v2), PROC("cuCtxPopCurrent", cuCtxPopCurrent_v2),
	PROC("cuCtxGetDevice", cuCtxGetDevice), PROC("cuCtxGetApiVersion", cuCtxGetApiVersion),
	PROC("cuCtxGetStreamPriorityRange", cuCtxGetStreamPriorityRange),
	PROC("cuCtxSynchronize", cuCtxSynchronize), PROC("cuStreamGetCtx", cuStreamGetCtx),
	PROC("cuModuleLoad", cuModuleLoad), PROC("cuModuleLoadData", cuModuleLoadData),
	PROC("cuModuleLoadDataEx", cuModuleLoadDataEx), PROC("cuModuleUnload", cuModuleUnload),
	PROC("cuModuleGetFunction", cuModuleGetFunction), PROC("cuLibraryLoadData", cuLibraryLoadData),
	PROC("cuLibraryUnload", cuLibraryUnload), PROC("cuLibraryGetKernel", cuLibraryGetKernel),
	PROC("cuKernelGetFunction", cuKernelGetFunction), PROC("cuKernelGetName", cuKernelGetName),
	PROC("cuFuncGetName", cuFuncGetName), PROC("cuFuncGetAttribute", cuFuncGetAttribute),
	PROC("cuFuncSetAttribute", cuFuncSetAttribute), PROC("cuFuncSetCacheConfig", cuFuncSetCacheConfig),
	PROC("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxActiveBlocksPerMultiprocessor),
	PROC("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
		cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
	PROC2("cuLaunchKernel", cuLaunchKernel, cuLaunchKernel_ptsz),
	PROC2("cuLaunchKernelEx", cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
	PROC2("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz),
	PROC("cuMemAlloc", cuMemAlloc_v2), PROC("cuMemFree", cuMemFree_v2), PROC("cuMemAllocHost", cuMemAllocHost_v2),
	PROC("cuMemFreeHost", cuMemFreeHost), PROC("cuMemGetInfo", cuMemGetInfo_v2),
	PROC("cuMemcpy", cuMemcpy), PROC("cuMemcpyAsync", cuMemcpyAsync), PROC("cuMemcpyHtoD", cuMemcpyHtoD_v2),
	PROC("cuMemcpyDtoH", cuMemcpyDtoH_v2), PROC("cuMemcpyDtoD", cuMemcpyDtoD_v2),
	PROC("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2), PROC("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2),
	PROC("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2), PROC("cuMemsetD8", cuMemsetD8_v2),
	PROC("cuMemsetD8Async", cuMemsetD8Async), PROC("cuMemsetD32", cuMemsetD32_v2),
	PROC("cuMemsetD32Async", cuMemsetD32Async),
	PROC2("cuStreamSynchronize", cuStreamSynchronize, cuStreamSynchronize_ptsz),
	PROC("cuPointerGetAttribute", cuPointerGetAttribute),
#undef PROC
#undef PROC2
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
	CUdriverProcAddressQueryResult *status)
{
	(void)cudaVersion;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	if (!strcmp(symbol, "cuGetProcAddress")) {
		*pfn = (void *)cuGetProcAddress_v2;
	} else {
		for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
			if (!strcmp(procs[i].name, symbol)) {
				int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && procs[i].fn_ptsz;
				*pfn = ptsz ? procs[i].fn_ptsz : procs[i].fn;
				break;
			}
		}
	}
	if (!*pfn) {
		/* Not simulated: the stub of that name (or its _v2 ABI name), which answers NOT_SUPPORTED. */
		char v2[256];
		snprintf(v2, sizeof(v2), "%s_v2", symbol);
		Dl_info self;
		void *h = NULL;
		if (dladdr((void *)cuGetProcAddress_v2, &self))
			h = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
		if (h) {
			*pfn = dlsym(h, v2);
			if (!*pfn)
				*pfn = dlsym(h, symbol);
			dlclose(h);
		}
	}
	if (status)
		*status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ------------------------------------------------------------------ the rest of the driver */

EXPORT int simgpu_driver_unsupported(const char *name);
EXPORT int simgpu_driver_unsupported(const char *name)
{
	static int warn = -1;
	if (warn < 0) {
		const char *v = getenv("SIMGPU_WARN_UNSUPPORTED");
		warn = v && strcmp(v, "0") != 0;
	}
	if (warn)
		fprintf(stderr, "simgpu: %s is not simulated (CUDA_ERROR_NOT_SUPPORTED)\n", name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

