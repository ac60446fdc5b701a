/*
 * Semantics of simgpu's runtime, checked through the ops it logs:
 *   legacy   legacy default stream vs blocking / non-blocking / per-thread streams; syncs wait
 *   copies   pageable async copies are synchronous, pinned ones are not; values really move
 *   events   record / query / synchronize / elapsed time / stream wait
 *   graph    stream capture and graph launch
 *   graph_torch  what PyTorch's capture relies on: capture ids, a stream forked into a capture and
 *            joined back, user objects held by a graph and its executable
 *   errors   error codes and the per-thread last error
 *   fork     (run by simgpu_check.py fork) parent and child truth lines
 * The durations planted with SIMGPU_KERNEL_NS / *_GBPS (see meson.build) are
 * long (50-100 ms) so that the orderings checked cannot be produced by a slow
 * machine: they are semantic checks, not performance ones.
 */
#define _GNU_SOURCE
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
	size_t size, int constant, int global);

#define LEGACY_ID 7u

static struct simgpu_op last_op(void)
{
	const struct simgpu_op *o = tu_last();
	return o ? *o : (struct simgpu_op){ 0 };
}

static int test_legacy(void)
{
	cudaStream_t blocking, nonblocking;
	EXPECT_OK(cudaStreamCreate(&blocking));
	EXPECT_OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));

	EXPECT_OK(tu_launch(K_LONG, blocking));
	struct simgpu_op a = last_op();
	EXPECT(a.end_ns - a.start_ns == 100000000ull, "planted duration, got %llu", (unsigned long long)(a.end_ns - a.start_ns));
	EXPECT_OK(tu_launch(K_SHORT, 0));
	struct simgpu_op b = last_op();
	EXPECT(b.stream_id == LEGACY_ID, "legacy stream id %u", b.stream_id);
	EXPECT(b.start_ns >= a.end_ns, "legacy op waits for a blocking stream");

	EXPECT_OK(tu_launch(K_LONG, cudaStreamLegacy));
	struct simgpu_op c = last_op();
	EXPECT(c.stream_id == LEGACY_ID, "cudaStreamLegacy is the legacy stream");
	EXPECT_OK(tu_launch(K_SHORT, nonblocking));
	struct simgpu_op e = last_op();
	EXPECT(e.start_ns < c.end_ns, "non-blocking stream does not wait for the legacy stream");
	EXPECT_OK(tu_launch(K_SHORT, blocking));
	struct simgpu_op d = last_op();
	EXPECT(d.start_ns >= c.end_ns, "blocking stream waits for the legacy stream");

	/* Per-thread default stream: blocking, distinct from the legacy stream, same for NULL-ptsz and the handle. */
	dim3 g = { 1, 1, 1 }, bl = { 32, 1, 1 };
	EXPECT_OK(cudaLaunchKernel_ptsz(K_SHORT, g, bl, NULL, 0, 0));
	struct simgpu_op p1 = last_op();
	EXPECT_OK(tu_launch(K_SHORT, cudaStreamPerThread));
	struct simgpu_op p2 = last_op();
	EXPECT(p1.stream_id != LEGACY_ID && p1.stream_id == p2.stream_id, "per-thread stream ids %u %u", p1.stream_id, p2.stream_id);
	EXPECT(p1.start_ns >= c.end_ns, "per-thread default stream waits for the legacy stream");
	EXPECT(strcmp(p1.api, "cudaLaunchKernel_ptsz") == 0, "api %s", p1.api);

	/* Same-stream ops never overlap and keep their order. */
	EXPECT(d.start_ns >= a.end_ns, "FIFO on one stream");

	/* Stream sync waits for its stream only; device sync for everything. */
	EXPECT_OK(cudaDeviceSynchronize());
	uint64_t after = simgpu_now_ns();
	EXPECT(after >= d.end_ns && after >= p2.end_ns && after >= e.end_ns, "device sync waited for every stream");
	EXPECT_OK(tu_launch(K_LONG, nonblocking));
	struct simgpu_op f = last_op();
	EXPECT_OK(tu_launch(K_SHORT, blocking));
	struct simgpu_op h = last_op();
	EXPECT_OK(cudaStreamSynchronize(blocking));
	after = simgpu_now_ns();
	EXPECT(after >= h.end_ns, "stream sync returned after the stream's last op");
	EXPECT(after < f.end_ns, "stream sync did not wait for another (non-blocking) stream");
	EXPECT_OK(cudaDeviceSynchronize());
	EXPECT(simgpu_now_ns() >= f.end_ns, "device sync waited for the non-blocking stream");

	/* Legacy stream sync: covers blocking streams, not non-blocking ones. */
	EXPECT_OK(tu_launch(K_LONG, nonblocking));
	struct simgpu_op f2 = last_op();
	EXPECT_OK(tu_launch(K_SHORT, blocking));
	struct simgpu_op h2 = last_op();
	EXPECT_OK(cudaStreamSynchronize(0));
	after = simgpu_now_ns();
	EXPECT(after >= h2.end_ns, "legacy stream sync covers blocking streams");
	EXPECT(after < f2.end_ns, "legacy stream sync does not cover non-blocking streams");

	/* Work left on a destroyed stream still keeps the device busy. */
	cudaStream_t doomed;
	EXPECT_OK(cudaStreamCreateWithFlags(&doomed, cudaStreamNonBlocking));
	EXPECT_OK(tu_launch(K_LONG, doomed));
	struct simgpu_op orphan = last_op();
	EXPECT_OK(cudaStreamDestroy(doomed));
	EXPECT_OK(cudaDeviceSynchronize());
	EXPECT(simgpu_now_ns() >= orphan.end_ns && simgpu_now_ns() >= f2.end_ns, "device sync waited for a destroyed stream's work");
	struct simgpu_op s = last_op();
	EXPECT(s.kind == SIMGPU_OP_SYNC && s.sync_kind == SIMGPU_SYNC_DEVICE && s.gpu == 1, "device sync logged");
	EXPECT(cudaStreamQuery(nonblocking) == cudaSuccess, "idle stream queries ready");

	EXPECT_OK(cudaStreamDestroy(blocking));
	EXPECT_OK(cudaStreamDestroy(nonblocking));
	return tu_finish("legacy");
}

static int test_copies(void)
{
	const size_t n = 1 << 20; /* 1 MiB at 0.01 GB/s: ~100 ms */
	char *dev, *pinned, *pageable = malloc(n), *back = malloc(n);
	for (size_t i = 0; i < n; i++)
		pageable[i] = (char)(i * 7);
	EXPECT_OK(cudaMalloc((void **)&dev, n));
	EXPECT_OK(cudaMallocHost((void **)&pinned, n));
	memcpy(pinned, pageable, n);
	cudaStream_t s;
	EXPECT_OK(cudaStreamCreate(&s));

	EXPECT_OK(cudaMemcpyAsync(dev, pageable, n, cudaMemcpyHostToDevice, s));
	uint64_t after = simgpu_now_ns();
	struct simgpu_op o = last_op();
	EXPECT(o.mem_kind == SIMGPU_MEM_PAGEABLE && o.copy_kind == SIMGPU_COPY_H2D && o.is_async, "pageable H2D logged");
	EXPECT(after >= o.end_ns && o.host_end_ns >= o.end_ns, "async copy from pageable memory is synchronous");

	EXPECT_OK(cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, s));
	after = simgpu_now_ns();
	o = last_op();
	EXPECT(o.mem_kind == SIMGPU_MEM_PINNED && o.dst_mem_kind == SIMGPU_MEM_DEVICE, "pinned H2D logged");
	EXPECT(after < o.end_ns, "async copy from pinned memory returns before the copy ends");
	EXPECT_OK(cudaStreamSynchronize(s));
	EXPECT(simgpu_now_ns() >= o.end_ns, "stream sync waits for the copy");

	memset(back, 0, n);
	EXPECT_OK(cudaMemcpy(back, dev, n, cudaMemcpyDefault));
	o = last_op();
	EXPECT(o.copy_kind == SIMGPU_COPY_D2H && o.dst_mem_kind == SIMGPU_MEM_PAGEABLE, "cudaMemcpyDefault inferred D2H");
	EXPECT(memcmp(back, pageable, n) == 0, "bytes round-trip through device memory");

	/* 2D: 8 rows of 16 bytes out of a 64-byte pitch. */
	EXPECT_OK(cudaMemset(dev, 0xab, 1024));
	char rows[8 * 16];
	EXPECT_OK(cudaMemcpy2D(rows, 16, dev, 64, 16, 8, cudaMemcpyDeviceToHost));
	EXPECT(last_op().bytes == 128, "2D bytes %llu", (unsigned long long)last_op().bytes);
	EXPECT((unsigned char)rows[0] == 0xab && (unsigned char)rows[127] == 0xab, "2D copy moved memset bytes");
	/* Pitches checked per side: a narrow source pitch inside a small allocation, a wide destination pitch. */
	char *small;
	EXPECT_OK(cudaMalloc((void **)&small, 8 * 16));
	char wide[8 * 64];
	EXPECT_OK(cudaMemcpy2D(wide, 64, small, 16, 16, 8, cudaMemcpyDeviceToHost));
	EXPECT(cudaMemcpy2D(wide, 64, small, 32, 16, 8, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
		"source pitch running past the allocation");
	EXPECT(cudaMemcpy2D(wide, 8, small, 16, 16, 8, cudaMemcpyDeviceToHost) == cudaErrorInvalidPitchValue,
		"width above the pitch");
	(void)cudaGetLastError();
	EXPECT_OK(cudaFree(small));

	/* __device__ variable through the symbol APIs. */
	static float shadow[4] = { 1, 2, 3, 4 };
	static char fatbin[8];
	void **h = __cudaRegisterFatBinary(fatbin);
	__cudaRegisterVar(h, (char *)shadow, (char *)"shadow", "shadow", 0, sizeof(shadow), 0, 0);
	float got[4] = { 0 }, put[4] = { 9, 8, 7, 6 };
	EXPECT_OK(cudaMemcpyFromSymbol(got, shadow, sizeof(got), 0, cudaMemcpyDeviceToHost));
	EXPECT(got[2] == 3, "symbol starts with its initializer");
	EXPECT_OK(cudaMemcpyToSymbol(shadow, put, sizeof(put), 0, cudaMemcpyHostToDevice));
	EXPECT_OK(cudaMemcpyFromSymbol(got, shadow, 8, 8, cudaMemcpyDeviceToHost));
	EXPECT(got[0] == 7 && got[1] == 6, "symbol offset copy");
	EXPECT(cudaMemcpyToSymbol(shadow, put, sizeof(put), 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
		"past the symbol's end");

	struct cudaPointerAttributes attr;
	EXPECT_OK(cudaPointerGetAttributes(&attr, dev + 10));
	EXPECT(attr.type == cudaMemoryTypeDevice, "device pointer type %d", attr.type);
	EXPECT_OK(cudaPointerGetAttributes(&attr, pinned));
	EXPECT(attr.type == cudaMemoryTypeHost, "pinned pointer type %d", attr.type);
	EXPECT_OK(cudaPointerGetAttributes(&attr, pageable));
	EXPECT(attr.type == cudaMemoryTypeUnregistered, "pageable pointer type %d", attr.type);

	EXPECT_OK(cudaStreamDestroy(s));
	EXPECT_OK(cudaFree(dev));
	EXPECT_OK(cudaFreeHost(pinned));
	free(pageable);
	free(back);
	return tu_finish("copies");
}

static int test_events(void)
{
	cudaEvent_t e1, e2;
	cudaStream_t s1, s2;
	EXPECT_OK(cudaEventCreate(&e1));
	EXPECT_OK(cudaEventCreate(&e2));
	EXPECT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	EXPECT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	EXPECT_OK(cudaEventRecord(e1, s1));
	uint64_t e1_time = last_op().start_ns;
	EXPECT_OK(tu_launch(K_LONG, s1));
	struct simgpu_op k = last_op();
	EXPECT_OK(cudaEventRecord(e2, s1));
	struct simgpu_op rec = last_op();
	EXPECT(rec.kind == SIMGPU_OP_EVENT && rec.start_ns == k.end_ns, "event completes when the kernel before it does");
	EXPECT(cudaEventQuery(e2) == cudaErrorNotReady, "event not reached yet");
	float ms = 0;
	EXPECT(cudaEventElapsedTime(&ms, e1, e2) == cudaErrorNotReady, "elapsed time needs completed events");
	EXPECT_OK(cudaStreamWaitEvent(s2, e2, 0));
	EXPECT_OK(tu_launch(K_SHORT, s2));
	struct simgpu_op w = last_op();
	EXPECT(w.start_ns >= k.end_ns, "stream wait event orders another stream");
	EXPECT_OK(cudaEventSynchronize(e2));
	EXPECT(simgpu_now_ns() >= k.end_ns, "event sync waited");
	EXPECT(cudaEventQuery(e2) == cudaSuccess, "event reached");
	EXPECT_OK(cudaEventElapsedTime(&ms, e1, e2));
	double want_ms = (double)(k.end_ns - e1_time) / 1e6;
	EXPECT(ms >= 50.0f && ms - want_ms < 1e-3 && want_ms - ms < 1e-3, "elapsed %f ms, events %f ms apart", ms, want_ms);
	cudaEvent_t never;
	EXPECT_OK(cudaEventCreateWithFlags(&never, cudaEventDisableTiming));
	EXPECT(cudaEventElapsedTime(&ms, e1, never) == cudaErrorInvalidResourceHandle, "unrecorded/no-timing event");
	EXPECT_OK(cudaDeviceSynchronize());
	EXPECT_OK(cudaEventDestroy(e1));
	EXPECT_OK(cudaEventDestroy(e2));
	EXPECT_OK(cudaEventDestroy(never));
	EXPECT_OK(cudaStreamDestroy(s1));
	EXPECT_OK(cudaStreamDestroy(s2));
	return tu_finish("events");
}

static int test_graph(void)
{
	cudaStream_t s;
	EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	EXPECT(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) != cudaSuccess, "no capture on the legacy stream");
	(void)cudaGetLastError();
	EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	enum cudaStreamCaptureStatus st;
	EXPECT_OK(cudaStreamIsCapturing(s, &st));
	EXPECT(st == cudaStreamCaptureStatusActive, "capturing");
	int before = tu_n_ops;
	EXPECT_OK(tu_launch(K_SHORT, s));
	EXPECT_OK(tu_launch(K_OTHER, s));
	float *dev;
	EXPECT_OK(cudaMalloc((void **)&dev, 256));
	EXPECT_OK(cudaMemsetAsync(dev, 0, 256, s));
	for (int i = before; i < tu_n_ops; i++)
		if (tu_ops[i].kind != SIMGPU_OP_MALLOC)
			EXPECT(tu_ops[i].captured == 1 && tu_ops[i].gpu == 0, "op %d captured without device work", i);
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	EXPECT_OK(cudaStreamEndCapture(s, &graph));
	EXPECT_OK(cudaGraphInstantiate(&exec, graph, 0));
	before = tu_n_ops;
	EXPECT_OK(cudaGraphLaunch(exec, s));
	EXPECT_OK(cudaGraphLaunch(exec, s));
	EXPECT(tu_n_ops - before == 6, "two launches of 3 nodes logged 6 ops, got %d", tu_n_ops - before);
	if (tu_n_ops - before == 6) {
		struct simgpu_op *o = &tu_ops[before];
		EXPECT(o[0].correlation_id == o[1].correlation_id && o[1].correlation_id == o[2].correlation_id,
			"one correlation id per graph launch");
		EXPECT(o[3].correlation_id != o[0].correlation_id, "a new id for the second launch");
		EXPECT(o[0].kind == SIMGPU_OP_KERNEL && o[2].kind == SIMGPU_OP_MEMSET, "node kinds in order");
		EXPECT(strcmp(o[1].name, "_Z7k_otherPfi") == 0, "node kernel name %s", o[1].name);
		EXPECT(strcmp(o[0].api, "cudaGraphLaunch") == 0, "api %s", o[0].api);
		for (int i = 1; i < 6; i++)
			EXPECT(o[i].start_ns >= o[i - 1].end_ns, "graph nodes run in order");
		EXPECT(o[0].graph_id && o[0].graph_id == o[3].graph_id, "replays carry their graph's id");
		EXPECT(o[0].graph_node_id && o[0].graph_node_id == o[3].graph_node_id &&
			o[1].graph_node_id != o[0].graph_node_id, "each node its own id, the same in every replay");
	}
	size_t n_nodes = 0;
	EXPECT_OK(cudaGraphGetNodes(graph, NULL, &n_nodes));
	EXPECT(n_nodes == 3, "3 nodes, got %zu", n_nodes);
	cudaGraphNode_t nodes[3];
	EXPECT_OK(cudaGraphGetNodes(graph, nodes, &n_nodes));
	enum cudaGraphNodeType type;
	EXPECT_OK(cudaGraphNodeGetType(nodes[2], &type));
	EXPECT(type == cudaGraphNodeTypeMemset, "node 2 is the memset");
	EXPECT_OK(cudaStreamSynchronize(s));
	EXPECT_OK(cudaGraphExecDestroy(exec));
	EXPECT_OK(cudaGraphDestroy(graph));
	EXPECT_OK(cudaFree(dev));
	EXPECT_OK(cudaStreamDestroy(s));
	return tu_finish("graph");
}

static int destroyed;
static void on_destroy(void *arg)
{
	destroyed += *(int *)arg;
}

/* What PyTorch's capture relies on: capture ids, a second stream forked into the capture by an event and
 * joined back, user objects kept alive by a graph and its executable. */
static int test_graph_torch(void)
{
	cudaStream_t s, s2;
	EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	EXPECT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	cudaEvent_t fork, join;
	EXPECT_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	EXPECT_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	unsigned long long ids[2] = { 0, 0 };
	cudaGraph_t graphs[2];
	for (int round = 0; round < 2; round++) {
		EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		enum cudaStreamCaptureStatus st;
		EXPECT_OK(cudaStreamGetCaptureInfo(s, &st, &ids[round], NULL, NULL, NULL, NULL));
		EXPECT(st == cudaStreamCaptureStatusActive && ids[round], "capture %d active with an id", round);
		EXPECT_OK(tu_launch(K_SHORT, s));
		EXPECT_OK(cudaEventRecord(fork, s));
		EXPECT_OK(cudaStreamWaitEvent(s2, fork, 0));
		EXPECT_OK(cudaStreamIsCapturing(s2, &st));
		EXPECT(st == cudaStreamCaptureStatusActive, "the waiting stream joined the capture");
		EXPECT_OK(tu_launch(K_OTHER, s2));
		EXPECT(last_op().captured == 1 && last_op().gpu == 0, "the forked stream's launch is captured");
		EXPECT_OK(cudaEventRecord(join, s2));
		EXPECT_OK(cudaStreamWaitEvent(s, join, 0));
		EXPECT(cudaStreamEndCapture(s2, &graphs[round]) == cudaErrorStreamCaptureUnmatched,
			"only the stream that began the capture ends it");
		(void)cudaGetLastError();
		EXPECT_OK(cudaStreamEndCapture(s, &graphs[round]));
		EXPECT_OK(cudaStreamIsCapturing(s2, &st));
		EXPECT(st == cudaStreamCaptureStatusNone, "the forked stream left the capture with it");
		size_t n = 0;
		EXPECT_OK(cudaGraphGetNodes(graphs[round], NULL, &n));
		EXPECT(n == 2, "both streams' launches are nodes, got %zu", n);
	}
	EXPECT(ids[0] != ids[1], "each capture its own id");
	/* Not forked any more: the event of a capture that ended joins nothing. */
	EXPECT_OK(cudaStreamWaitEvent(s2, fork, 0));
	enum cudaStreamCaptureStatus st2;
	EXPECT_OK(cudaStreamIsCapturing(s2, &st2));
	EXPECT(st2 == cudaStreamCaptureStatusNone, "an ended capture's event joins nothing");

	int one = 1;
	cudaUserObject_t obj;
	EXPECT_OK(cudaUserObjectCreate(&obj, &one, on_destroy, 1, cudaUserObjectNoDestructorSync));
	EXPECT_OK(cudaGraphRetainUserObject(graphs[0], obj, 1, cudaGraphUserObjectMove));
	cudaGraphExec_t exec;
	EXPECT_OK(cudaGraphInstantiateWithFlags(&exec, graphs[0], cudaGraphInstantiateFlagAutoFreeOnLaunch));
	EXPECT_OK(cudaGraphUpload(exec, s));
	EXPECT_OK(cudaGraphLaunch(exec, s));
	EXPECT_OK(cudaGraphDestroy(graphs[0]));
	EXPECT(destroyed == 0, "the executable graph still holds the user object");
	EXPECT_OK(cudaGraphExecDestroy(exec));
	EXPECT(destroyed == 1, "destroyed with its last holder, got %d", destroyed);
	EXPECT_OK(cudaGraphDestroy(graphs[1]));
	EXPECT_OK(cudaStreamSynchronize(s));
	EXPECT_OK(cudaEventDestroy(fork));
	EXPECT_OK(cudaEventDestroy(join));
	EXPECT_OK(cudaStreamDestroy(s));
	EXPECT_OK(cudaStreamDestroy(s2));
	return tu_finish("graph_torch");
}

static int test_errors(void)
{
	EXPECT(cudaGetLastError() == cudaSuccess, "clean start");
	cudaStream_t bogus = (cudaStream_t)(uintptr_t)0xdeadbeef0ull;
	EXPECT(tu_launch(K_SHORT, bogus) == cudaErrorInvalidResourceHandle, "unknown stream");
	struct simgpu_op o = last_op();
	EXPECT(o.kind == SIMGPU_OP_KERNEL && o.result == cudaErrorInvalidResourceHandle && o.gpu == 0,
		"failed launch logged with its result");
	EXPECT(cudaPeekAtLastError() == cudaErrorInvalidResourceHandle, "peek sees it");
	EXPECT(cudaGetLastError() == cudaErrorInvalidResourceHandle, "get returns it");
	EXPECT(cudaGetLastError() == cudaSuccess, "and clears it");
	static char not_a_kernel;
	EXPECT(tu_launch(&not_a_kernel, 0) == cudaErrorInvalidDeviceFunction, "unregistered function");
	dim3 g = { 1, 1, 1 }, b = { 1025, 1, 1 };
	EXPECT(cudaLaunchKernel(K_SHORT, g, b, NULL, 0, 0) == cudaErrorInvalidConfiguration, "1025 threads");
	EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "last error is the latest one");
	void *p;
	EXPECT(cudaMalloc(NULL, 16) == cudaErrorInvalidValue, "NULL out pointer");
	EXPECT_OK(cudaMalloc(&p, 16));
	EXPECT(cudaMemset((char *)p + 8, 0, 16) == cudaErrorInvalidValue, "memset past the end");
	EXPECT(cudaFree((char *)p + 1) == cudaErrorInvalidValue, "free of an interior pointer");
	EXPECT(cudaFreeHost(p) == cudaErrorInvalidValue, "cudaFreeHost of device memory");
	EXPECT_OK(cudaFree(p));
	EXPECT(cudaFree(p) == cudaErrorInvalidValue, "double free");
	EXPECT(cudaStreamDestroy(bogus) == cudaErrorInvalidResourceHandle, "destroy unknown stream");
	EXPECT(cudaEventSynchronize((cudaEvent_t)bogus) == cudaErrorInvalidResourceHandle, "sync unknown event");
	int n = -1;
	EXPECT_OK(cudaGetDeviceCount(&n));
	EXPECT(n == 1, "one device by default, got %d", n);
	EXPECT(cudaSetDevice(1) == cudaErrorInvalidDevice, "device 1 does not exist");
	struct cudaDeviceProp prop;
	EXPECT_OK(cudaGetDeviceProperties(&prop, 0));
	EXPECT(prop.major == 9 && prop.multiProcessorCount == 132, "H100-like properties");
	EXPECT(strcmp(cudaGetErrorName(cudaErrorInvalidDeviceFunction), "cudaErrorInvalidDeviceFunction") == 0, "name");
	EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0, "string");
	int v = 0;
	EXPECT_OK(cudaRuntimeGetVersion(&v));
	EXPECT(v == CUDART_VERSION, "runtime version %d", v);
	(void)cudaGetLastError();

	/* Not simulated: the call exists (programs load) and says so. */
	EXPECT(cudaLaunchHostFunc(0, NULL, NULL) == cudaErrorNotSupported, "stubbed API");
	EXPECT(cudaGetLastError() == cudaErrorNotSupported, "stub sets the last error");
	struct cudaChannelFormatDesc cd = cudaCreateChannelDesc(8, 8, 0, 0, cudaChannelFormatKindUnsigned);
	EXPECT(cd.x == 8 && cd.y == 8 && cd.f == cudaChannelFormatKindUnsigned, "channel desc by value");
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	EXPECT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
	EXPECT(mode == cudaStreamCaptureModeGlobal, "previous capture mode");
	return tu_finish("errors");
}

/* SIMGPU_DEVICE_COUNT=2: per-device legacy streams and synchronization, peer copies. */
static int test_devices(void)
{
	int n = 0;
	EXPECT_OK(cudaGetDeviceCount(&n));
	EXPECT(n == 2, "two devices, got %d", n);
	cudaStream_t blocking0;
	EXPECT_OK(cudaStreamCreate(&blocking0));
	EXPECT_OK(tu_launch(K_LONG, blocking0));
	struct simgpu_op long0 = last_op();
	char *d0, *d1;
	EXPECT_OK(cudaMalloc((void **)&d0, 4096));

	EXPECT_OK(cudaSetDevice(1));
	int cur = -1;
	EXPECT_OK(cudaGetDevice(&cur));
	EXPECT(cur == 1, "current device %d", cur);
	EXPECT_OK(cudaMalloc((void **)&d1, 4096));
	EXPECT_OK(tu_launch(K_SHORT, 0));
	struct simgpu_op legacy1 = last_op();
	EXPECT(legacy1.device == 1 && legacy1.stream_id == LEGACY_ID, "device 1's legacy stream");
	EXPECT(legacy1.start_ns < long0.end_ns, "device 1's legacy stream does not wait for device 0's streams");
	EXPECT_OK(cudaDeviceSynchronize());
	EXPECT(simgpu_now_ns() < long0.end_ns, "device sync waits for the current device only");
	int can = 0;
	EXPECT_OK(cudaDeviceCanAccessPeer(&can, 1, 0));
	EXPECT(can == 1, "peer access");
	EXPECT_OK(cudaMemset(d1, 7, 4096));
	EXPECT_OK(cudaMemcpyPeer(d0, 0, d1, 1, 4096));
	struct simgpu_op peer = last_op();
	EXPECT(peer.copy_kind == SIMGPU_COPY_P2P && peer.bytes == 4096, "peer copy logged as PtoP");
	EXPECT(cudaMemcpyPeer(d0, 0, d1, 2, 16) == cudaErrorInvalidDevice, "device 2 does not exist");
	EXPECT_OK(cudaSetDevice(0));
	EXPECT_OK(cudaDeviceSynchronize());
	EXPECT(simgpu_now_ns() >= long0.end_ns, "device 0 sync waited for its stream");
	char back[16];
	EXPECT_OK(cudaMemcpy(back, d0, sizeof(back), cudaMemcpyDeviceToHost));
	EXPECT(back[0] == 7 && back[15] == 7, "peer copy moved the bytes");
	EXPECT_OK(cudaFree(d0));
	EXPECT_OK(cudaFree(d1));
	EXPECT_OK(cudaStreamDestroy(blocking0));
	(void)cudaGetLastError();
	return tu_finish("devices");
}

static int test_fork(void)
{
	/* Parent logs 2 ops before the fork (still buffered), the child 2, the parent 1 more. */
	void *p;
	EXPECT_OK(cudaMalloc(&p, 64));
	EXPECT_OK(tu_launch(K_SHORT, 0));
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		EXPECT_OK(tu_launch(K_SHORT, 0));
		EXPECT_OK(cudaDeviceSynchronize());
		exit(tu_failures ? 1 : 0);
	}
	int status = 0;
	waitpid(child, &status, 0);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	EXPECT_OK(cudaFree(p));
	return tu_finish("fork");
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	tu_register_kernels();
	if (strcmp(what, "fork") != 0)
		simgpu_set_observer(tu_observer, NULL);
	if (!strcmp(what, "legacy"))
		return test_legacy();
	if (!strcmp(what, "copies"))
		return test_copies();
	if (!strcmp(what, "events"))
		return test_events();
	if (!strcmp(what, "graph"))
		return test_graph();
	if (!strcmp(what, "graph_torch"))
		return test_graph_torch();
	if (!strcmp(what, "errors"))
		return test_errors();
	if (!strcmp(what, "fork"))
		return test_fork();
	if (!strcmp(what, "devices"))
		return test_devices();
	fprintf(stderr, "usage: test_timeline legacy|copies|events|graph|graph_torch|errors|devices|fork\n");
	return 3;
}
