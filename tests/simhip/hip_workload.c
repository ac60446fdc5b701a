/*
 * A plain C HIP program that does what hipcc output and PyTorch's ROCm build
 * do at the HIP API level: fat binary and kernel registration, <<<>>>
 * launches lowered to __hipPushCallConfiguration / __hipPopCallConfiguration
 * + hipLaunchKernel, module launches, extended and cooperative launches, a
 * graph, sync and async copies and memsets on several streams, allocation,
 * all three kinds of synchronization, and a few calls that fail on purpose.
 * It also plants the patterns tbanalyze looks for: a burst of tiny kernels
 * (one per "parameter", like optimizer.zero_grad()), scalar host-to-device
 * copies, and an idle gap while the host sleeps.
 *
 * Stdout is a deterministic function of what the runtime returned, so the
 * same binary's output can be compared with and without a profiler.
 *
 * HIPWL_CALLS=file: one line "api result" per call to an API that tbprof
 *   hooks (the test checks the trace has exactly these, in order per thread).
 * HIPWL_SCALE=n: multiply loop counts (default 1).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hip/hip_runtime_api.h>

/* hipcc's registration entry points (not in the public headers). */
void *__hipRegisterFatBinary(const void *data);
void __hipRegisterFunction(void *modules, const void *hostFunction, char *deviceFunction,
			   const char *deviceName, unsigned int threadLimit, void *tid, void *bid,
			   dim3 *blockDim, dim3 *gridDim, int *wSize);
void __hipUnregisterFatBinary(void *modules);

static FILE *calls_log;
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static int failures_seen;

static hipError_t logged(const char *api, hipError_t e)
{
	if (calls_log) {
		pthread_mutex_lock(&calls_lock);
		fprintf(calls_log, "%s %d\n", api, (int)e);
		pthread_mutex_unlock(&calls_lock);
	}
	if (e != hipSuccess)
		failures_seen++;
	return e;
}
/* A call to a hooked API: evaluated once, logged with its result. */
#define CALL(api, args) logged(#api, api args)

static dim3 d3(unsigned x, unsigned y, unsigned z)
{
	dim3 d = { x, y, z };
	return d;
}

/* ---- what hipcc generates for `__global__ void k(...)`: a host stub that
 * pops the launch configuration pushed at the <<<>>> site and launches
 * itself by address. */
static void vector_add(float *a, const float *b, int n)
{
	dim3 grid, block;
	size_t shmem;
	hipStream_t stream;
	if (__hipPopCallConfiguration(&grid, &block, &shmem, &stream) != hipSuccess)
		return;
	void *args[] = { &a, &b, &n };
	CALL(hipLaunchKernel, ((const void *)vector_add, grid, block, args, shmem, stream));
}

static void fill_zero(float *p, int n)
{
	dim3 grid, block;
	size_t shmem;
	hipStream_t stream;
	if (__hipPopCallConfiguration(&grid, &block, &shmem, &stream) != hipSuccess)
		return;
	void *args[] = { &p, &n };
	CALL(hipLaunchKernel, ((const void *)fill_zero, grid, block, args, shmem, stream));
}

/* Never registered: launching it must fail. */
static void not_registered(void)
{
	dim3 grid, block;
	size_t shmem;
	hipStream_t stream;
	if (__hipPopCallConfiguration(&grid, &block, &shmem, &stream) != hipSuccess)
		return;
	CALL(hipLaunchKernel, ((const void *)not_registered, grid, block, NULL, shmem, stream));
}

/* kernel<<<grid, block, shmem, stream>>>(args) */
#define LAUNCH(kernel, grid, block, shmem, stream, ...)                                       \
	do {                                                                                  \
		if (__hipPushCallConfiguration(grid, block, shmem, stream) == hipSuccess)     \
			kernel(__VA_ARGS__);                                                  \
	} while (0)

static struct {
	unsigned magic, version;
	const void *binary;
	void *unused;
} fatbin_wrapper = { 0x48495046u /* "HIPF" */, 1, "simulated code object", NULL };

static void *modules;

static void register_kernels(void)
{
	modules = __hipRegisterFatBinary(&fatbin_wrapper);
	__hipRegisterFunction(modules, (const void *)vector_add, "_Z10vector_addPfPKfi",
			      "_Z10vector_addPfPKfi", (unsigned)-1, NULL, NULL, NULL, NULL, NULL);
	__hipRegisterFunction(modules, (const void *)fill_zero, "_Z9fill_zeroPfi",
			      "_Z9fill_zeroPfi", (unsigned)-1, NULL, NULL, NULL, NULL, NULL);
}

static int scale = 1;

/* A second host thread with its own stream, as a data loader would have. */
static void *worker(void *arg)
{
	float *dev = arg;
	hipStream_t s;
	if (CALL(hipStreamCreateWithFlags, (&s, hipStreamNonBlocking)) != hipSuccess)
		return NULL;
	for (int i = 0; i < 5 * scale; i++)
		LAUNCH(fill_zero, d3(2, 1, 1), d3(128, 1, 1), 0, s, dev, 256);
	CALL(hipStreamSynchronize, (s));
	CALL(hipStreamDestroy, (s));
	return NULL;
}

int main(void)
{
	const char *calls_path = getenv("HIPWL_CALLS");
	if (calls_path && *calls_path)
		calls_log = fopen(calls_path, "w");
	const char *sc = getenv("HIPWL_SCALE");
	if (sc && atoi(sc) > 0)
		scale = atoi(sc);

	int ndev = -1;
	hipError_t e = hipGetDeviceCount(&ndev);
	printf("hipGetDeviceCount: %s devices=%d\n", hipGetErrorName(e), e == hipSuccess ? ndev : 0);
	register_kernels();

	enum { N = 1024 };
	float *host = malloc(N * sizeof(float));
	float *result = calloc(N, sizeof(float));
	for (int i = 0; i < N; i++)
		host[i] = (float)i;
	float *da = NULL, *db = NULL, *dc = NULL, *pinned = NULL;
	printf("hipMalloc a: %s\n", hipGetErrorName(CALL(hipMalloc, ((void **)&da, N * sizeof(float)))));
	printf("hipMalloc b: %s\n", hipGetErrorName(CALL(hipMalloc, ((void **)&db, N * sizeof(float)))));
	printf("hipMallocManaged c: %s\n",
	       hipGetErrorName(CALL(hipMallocManaged, ((void **)&dc, N * sizeof(float), hipMemAttachGlobal))));
	printf("hipHostMalloc: %s\n",
	       hipGetErrorName(CALL(hipHostMalloc, ((void **)&pinned, N * sizeof(float), 0))));

	hipStream_t s1 = NULL;
	printf("hipStreamCreate: %s\n", hipGetErrorName(CALL(hipStreamCreate, (&s1))));

	/* Copies: sync pageable, async pinned, async pageable, explicit-direction forms. */
	printf("hipMemcpy h2d: %s\n",
	       hipGetErrorName(CALL(hipMemcpy, (da, host, N * sizeof(float), hipMemcpyHostToDevice))));
	if (pinned)
		memcpy(pinned, host, N * sizeof(float));
	printf("hipMemcpyAsync pinned: %s\n",
	       hipGetErrorName(CALL(hipMemcpyAsync, (db, pinned, N * sizeof(float), hipMemcpyHostToDevice, s1))));
	printf("hipMemcpyAsync pageable: %s\n",
	       hipGetErrorName(CALL(hipMemcpyAsync, (db, host, N * sizeof(float), hipMemcpyHostToDevice, s1))));
	printf("hipMemcpyHtoD: %s\n",
	       hipGetErrorName(CALL(hipMemcpyHtoD, (dc, host, N * sizeof(float)))));
	printf("hipMemcpyDtoD: %s\n",
	       hipGetErrorName(CALL(hipMemcpyDtoD, (dc, da, N * sizeof(float)))));
	printf("hipMemcpyHtoDAsync: %s\n",
	       hipGetErrorName(CALL(hipMemcpyHtoDAsync, (da, pinned, 64, s1))));
	printf("hipMemcpyDtoHAsync: %s\n",
	       hipGetErrorName(CALL(hipMemcpyDtoHAsync, (pinned, da, 64, s1))));

	/* Memsets. */
	printf("hipMemset: %s\n", hipGetErrorName(CALL(hipMemset, (dc, 0, 128))));
	printf("hipMemsetAsync: %s\n", hipGetErrorName(CALL(hipMemsetAsync, (dc, 0, 256, s1))));
	printf("hipMemsetD32: %s\n", hipGetErrorName(CALL(hipMemsetD32, (dc, 7, 16))));
	printf("hipMemsetD8Async: %s\n", hipGetErrorName(CALL(hipMemsetD8Async, (dc, 1, 32, s1))));

	/* <<<>>> launches on the null stream and on s1.  The first is large
	 * (a long simulated kernel), so the launch on blocking stream s1 right
	 * after must wait for the null stream's work. */
	LAUNCH(vector_add, d3(16384, 1, 1), d3(256, 1, 1), 0, NULL, da, db, N);
	for (int i = 0; i < 3 * scale; i++)
		LAUNCH(vector_add, d3(N / 256, 1, 1), d3(256, 1, 1), 0, NULL, da, db, N);
	LAUNCH(vector_add, d3(N / 128, 1, 1), d3(128, 1, 1), 512, s1, db, da, N);

	/* Tiny-kernel burst: one small kernel per "parameter". */
	for (int i = 0; i < 40 * scale; i++)
		LAUNCH(fill_zero, d3(1, 1, 1), d3(32, 1, 1), 0, NULL, dc, 32);

	/* Scalar host-to-device copies, one per step. */
	for (int i = 0; i < 10 * scale; i++) {
		float scalar = (float)i;
		CALL(hipMemcpy, (da + i, &scalar, sizeof scalar, hipMemcpyHostToDevice));
	}

	/* Module launch (what PyTorch's JIT kernels and Triton use). */
	hipModule_t mod = NULL;
	hipFunction_t fn = NULL;
	e = hipModuleLoadData(&mod, "simulated code object");
	if (e == hipSuccess)
		e = CALL(hipModuleGetFunction, (&fn, mod, "triton_poi_fused_add_0"));
	printf("hipModuleGetFunction: %s\n", hipGetErrorName(e));
	{
		int n = N;
		void *params[] = { &da, &n };
		printf("hipModuleLaunchKernel: %s\n",
		       hipGetErrorName(CALL(hipModuleLaunchKernel, (fn, 4, 1, 1, 256, 1, 1, 0, s1, params, NULL))));
	}

	/* Extended launch with its own timing events, and a cooperative launch. */
	hipEvent_t ev_start = NULL, ev_stop = NULL;
	hipEventCreate(&ev_start);
	hipEventCreate(&ev_stop);
	{
		int n = N;
		void *args[] = { &da, &db, &n };
		printf("hipExtLaunchKernel: %s\n",
		       hipGetErrorName(CALL(hipExtLaunchKernel, ((const void *)vector_add, d3(8, 1, 1), d3(128, 1, 1),
								 args, 0, NULL, ev_start, ev_stop, 0))));
		printf("hipLaunchCooperativeKernel: %s\n",
		       hipGetErrorName(CALL(hipLaunchCooperativeKernel, ((const void *)vector_add, d3(2, 1, 1),
									 d3(64, 1, 1), args, 0, s1))));
	}

	/* A graph of three kernels, launched twice. */
	hipGraph_t graph = NULL;
	hipGraphExec_t exec = NULL;
	e = hipGraphCreate(&graph, 0);
	for (int i = 0; e == hipSuccess && i < 3; i++) {
		int n = N;
		void *args[] = { &dc, &n };
		hipKernelNodeParams p = { d3(64, 1, 1), NULL, (void *)fill_zero, d3(4, 1, 1), args, 0 };
		hipGraphNode_t node;
		e = hipGraphAddKernelNode(&node, graph, NULL, 0, &p);
	}
	if (e == hipSuccess)
		e = hipGraphInstantiate(&exec, graph, NULL, NULL, 0);
	printf("graph build: %s\n", hipGetErrorName(e));
	for (int i = 0; i < 2; i++)
		printf("hipGraphLaunch: %s\n", hipGetErrorName(CALL(hipGraphLaunch, (exec, s1))));

	/* Synchronization of each kind. */
	printf("hipEventRecord: %s\n", hipGetErrorName(CALL(hipEventRecord, (ev_stop, s1))));
	printf("hipEventSynchronize: %s\n", hipGetErrorName(CALL(hipEventSynchronize, (ev_stop))));
	printf("hipStreamSynchronize: %s\n", hipGetErrorName(CALL(hipStreamSynchronize, (s1))));

	/* The per-thread-default-stream forms that hipcc -fgpu-default-stream=
	 * per-thread (HIP_API_PER_THREAD_DEFAULT_STREAM) calls instead. */
	{
		dim3 g = d3(2, 1, 1), b = d3(64, 1, 1);
		int n = N;
		void *args[] = { &da, &db, &n };
		printf("hipLaunchKernel_spt: %s\n",
		       hipGetErrorName(CALL(hipLaunchKernel_spt, ((const void *)vector_add, g, b, args, 0, NULL))));
		printf("hipMemcpy_spt: %s\n",
		       hipGetErrorName(CALL(hipMemcpy_spt, (db, host, 256, hipMemcpyHostToDevice))));
		printf("hipMemcpyAsync_spt: %s\n",
		       hipGetErrorName(CALL(hipMemcpyAsync_spt, (pinned, db, 256, hipMemcpyDeviceToHost, NULL))));
		printf("hipMemset_spt: %s\n", hipGetErrorName(CALL(hipMemset_spt, (dc, 0, 64))));
		printf("hipStreamSynchronize_spt: %s\n",
		       hipGetErrorName(CALL(hipStreamSynchronize_spt, (NULL))));
	}

	/* Idle gap: the host works while the device has nothing to do. */
	usleep(2000);

	pthread_t th;
	int have_thread = pthread_create(&th, NULL, worker, dc) == 0;
	if (have_thread)
		pthread_join(th, NULL);

	printf("hipMemcpy d2h: %s\n",
	       hipGetErrorName(CALL(hipMemcpy, (result, db, N * sizeof(float), hipMemcpyDeviceToHost))));
	printf("hipDeviceSynchronize: %s\n", hipGetErrorName(CALL(hipDeviceSynchronize, ())));
	/* A profiler's own runtime calls must not show through the error state. */
	printf("hipGetLastError after work: %s\n", hipGetErrorName(hipGetLastError()));

	/* Calls that must fail on any runtime. */
	int on_stack;
	printf("hipFree(stack address) fails: %d\n", CALL(hipFree, (&on_stack)) != hipSuccess);
	LAUNCH(not_registered, d3(1, 1, 1), d3(1, 1, 1), 0, NULL);

	double checksum = 0;
	for (int i = 0; i < N; i++)
		checksum += result[i];
	printf("checksum: %.1f\n", checksum);

	if (exec)
		hipGraphExecDestroy(exec);
	if (graph)
		hipGraphDestroy(graph);
	if (mod)
		hipModuleUnload(mod);
	hipEventDestroy(ev_start);
	hipEventDestroy(ev_stop);
	printf("hipStreamDestroy: %s\n", hipGetErrorName(CALL(hipStreamDestroy, (s1))));
	printf("hipFree a: %s\n", hipGetErrorName(CALL(hipFree, (da))));
	printf("hipFree b: %s\n", hipGetErrorName(CALL(hipFree, (db))));
	printf("hipFree c: %s\n", hipGetErrorName(CALL(hipFree, (dc))));
	printf("hipHostFree: %s\n", hipGetErrorName(CALL(hipHostFree, (pinned))));
	printf("hipGetLastError at the end: %s\n", hipGetErrorName(hipGetLastError()));
	__hipUnregisterFatBinary(modules);
	free(host);
	free(result);
	if (calls_log)
		fclose(calls_log);
	printf("failed calls: %d\n", failures_seen);
	return 0;
}
