/*
 * Planted-workload generator for the analyze suite.
 *
 *   gen_planted SCENARIO OUT.zst EXPECT.json [ITERS]
 *
 * Writes a trace with the trace writer API (definitions, API records, GPU
 * records, Python spans, markers) in which every pattern tbanalyze looks for
 * is planted at a known call site, and EXPECT.json with what must be found:
 * the breakdown computed here independently (sort + sweep of the GPU
 * intervals, clipped to the window), the counts, and the exact set of
 * findings.  The GPU stream reaches the file one frame later than the host
 * streams, as CUPTI buffers do, so the analyzer's merge is exercised.
 *
 * Scenarios: clean, planted, markers (warm-up + steady iteration marks),
 * markers-late (GPU records all at the end of the file), apionly (no GPU
 * records), cpu (spans only; cpu-slow: one function slower), random (nonsense records, ITERS = seed),
 * big (for the bench: ITERS clean steps, written as generated), slow (clean
 * with one kernel 30 us slower, for diff), bigmem (clean with twice the
 * device memory, for diff), rank (one rank of a multi-rank run with a planted
 * straggler: see scen_rank), steps-noise (noisy step times, a planted
 * slowdown: see scen_steps_noise).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbprof/trace.h"

#define US 1000ULL

/* ------------------------------------------------------------ records */
struct evs {
	struct tbp_record *r;
	size_t n, cap;
};

static struct evs defs, host[2], gpu[2]; /* host threads 101, 102; devices 0, 1 */
static const uint32_t host_tid[2] = {101, 102};

static struct tbp_record *push(struct evs *e)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 1024;
		e->r = realloc(e->r, e->cap * sizeof *e->r);
		if (!e->r) {
			perror("realloc");
			exit(4);
		}
	}
	struct tbp_record *r = &e->r[e->n++];
	memset(r, 0, sizeof *r);
	return r;
}

static uint64_t next_id = 1;
static uint64_t intern(const char *s)
{
	struct tbp_record *r = push(&defs);
	r->kind = TBP_K_STRING;
	r->u.string.id = next_id++;
	r->blob = s;
	r->blob_len = (uint32_t)strlen(s);
	return r->u.string.id;
}

/* A Python call path node: frame (file, function, line) under parent. */
static uint64_t site(const char *file, const char *func, uint64_t line, uint64_t parent)
{
	struct tbp_record *f = push(&defs);
	f->kind = TBP_K_PYFRAME;
	f->u.pyframe.id = next_id++;
	f->u.pyframe.file = intern(file);
	f->u.pyframe.function = intern(func);
	f->u.pyframe.line = line;
	uint64_t fid = f->u.pyframe.id;
	struct tbp_record *c = push(&defs);
	c->kind = TBP_K_CALLPATH;
	c->u.callpath.id = next_id++;
	c->u.callpath.frame = fid;
	c->u.callpath.parent = parent;
	return c->u.callpath.id;
}

static uint64_t native_site(uint64_t pc)
{
	struct tbp_record *n = push(&defs);
	n->kind = TBP_K_NATIVE;
	n->u.native.id = next_id++;
	n->u.native.pc = pc;
	return n->u.native.id;
}

static uint64_t corr_next = 1000;

static void api(int th, uint8_t kind, uint64_t t, uint64_t dur, uint64_t api_id, uint64_t cp, uint64_t nat,
		uint64_t dev, uint64_t stream, uint64_t corr, const uint64_t *extra, int nextra)
{
	struct tbp_record *r = push(&host[th]);
	r->kind = kind;
	r->tid = host_tid[th];
	r->ts = t;
	r->u.call.end = t + dur;
	r->u.call.api = api_id;
	r->u.call.corr = corr;
	r->u.call.callpath = cp;
	r->u.call.native = nat;
	r->u.call.device = dev;
	r->u.call.stream = stream;
	for (int i = 0; i < nextra; i++)
		r->u.v[8 + i] = extra[i];
}

/* Ground truth: every GPU interval, kept apart per device/stream/kind. */
struct ivl {
	uint64_t s, e;
	int dev, stream, kind, ck; /* kind: 0 kernel, 1 memcpy, 2 memset */
};
static struct ivl ivls[200000];
static size_t n_ivls;
static uint64_t cnt_launch, cnt_memcpy, cnt_memset, cnt_malloc, cnt_free, cnt_sync, cnt_errors;

static void gpu_rec(int dev, uint8_t kind, uint64_t stream, uint64_t s, uint64_t e, uint64_t corr, const uint64_t *extra,
		    int nextra)
{
	struct tbp_record *r = push(&gpu[dev]);
	r->kind = kind;
	r->tid = (uint32_t)dev;
	r->ts = s;
	r->u.gpu_kernel.end = e;
	r->u.gpu_kernel.device = (uint64_t)dev;
	r->u.gpu_kernel.context = 1;
	r->u.gpu_kernel.stream = stream;
	r->u.gpu_kernel.corr = corr;
	for (int i = 0; i < nextra; i++)
		r->u.v[5 + i] = extra[i];
	if (n_ivls < sizeof ivls / sizeof ivls[0]) {
		struct ivl *v = &ivls[n_ivls++];
		v->s = s;
		v->e = e;
		v->dev = dev;
		v->stream = (int)stream;
		v->kind = kind == TBP_K_GPU_KERNEL ? 0 : kind == TBP_K_GPU_MEMCPY ? 1 : 2;
		v->ck = kind == TBP_K_GPU_MEMCPY ? (int)extra[1] : 0;
	}
}

/* A launch the runtime refused (cudaErrorInvalidConfiguration): no kernel
 * runs, so it counts as an error, not as a kernel. */
static void failed_launch(int th, uint64_t t, uint64_t cp)
{
	uint64_t ex[8] = {intern("never_runs"), 1u << 20, 1, 1, 4096, 1, 1, 0};
	api(th, TBP_K_LAUNCH, t, 2 * US, TBP_API_cudaLaunchKernel, cp, 0, 0, 7, corr_next++, ex, 8);
	host[th].r[host[th].n - 1].u.call.result = 9;
	cnt_errors++;
}

static int api_only; /* apionly scenario: host records only */
static int cut_early; /* apionly-cut: CUPTI on in the header, no GPU record, no END (a killed process) */
/* bursts2: the burst's merged span and the device idle inside it */
static int have_burst_truth;
static uint64_t burst_truth_span, burst_truth_idle;
static int gpu_at_end; /* markers-late: GPU records only after all host records */

/* Launch from thread th at host time t (API lasts 4 us) a kernel that runs
 * on the GPU over [gs, ge). */
static void kernel(int th, uint64_t t, uint64_t cp, uint64_t nat, int dev, uint64_t stream, uint64_t gs, uint64_t ge,
		   uint64_t name)
{
	uint64_t corr = corr_next++;
	uint64_t ex[8] = {name, 80, 1, 1, 256, 1, 1, 0};
	api(th, TBP_K_LAUNCH, t, 4 * US, TBP_API_cudaLaunchKernel, cp, nat, (uint64_t)dev, stream, corr, ex, 8);
	cnt_launch++;
	if (api_only)
		return;
	uint64_t gx[10] = {name, 80, 1, 1, 256, 1, 1, 32, 0, 0};
	gpu_rec(dev, TBP_K_GPU_KERNEL, stream, gs, ge, corr, gx, 10);
}

static void copy(int th, uint64_t t, uint64_t dur, uint64_t cp, int dev, uint64_t stream, uint64_t bytes, uint64_t ck,
		 uint64_t flags, uint64_t src, uint64_t dst, uint64_t gs, uint64_t ge)
{
	uint64_t corr = corr_next++;
	uint64_t ex[5] = {bytes, ck, flags, src, dst};
	api(th, TBP_K_MEMCPY, t, dur, (flags & TBP_COPYF_ASYNC) ? TBP_API_cudaMemcpyAsync : TBP_API_cudaMemcpy, cp, 0,
	    (uint64_t)dev, stream, corr, ex, 5);
	cnt_memcpy++;
	if (api_only)
		return;
	uint64_t gx[4] = {bytes, ck, ck == TBP_COPY_H2D ? TBP_MEM_PAGEABLE : TBP_MEM_DEVICE, TBP_MEM_DEVICE};
	gpu_rec(dev, TBP_K_GPU_MEMCPY, stream, gs, ge, corr, gx, 4);
}

static void memset_op(int th, uint64_t t, uint64_t cp, int dev, uint64_t stream, uint64_t gs, uint64_t ge)
{
	uint64_t corr = corr_next++;
	uint64_t ex[3] = {4096, 0, 0xd000};
	api(th, TBP_K_MEMSET, t, 3 * US, TBP_API_cudaMemsetAsync, cp, 0, (uint64_t)dev, stream, corr, ex, 3);
	cnt_memset++;
	if (api_only)
		return;
	uint64_t gx[3] = {4096, 0, TBP_MEM_DEVICE};
	gpu_rec(dev, TBP_K_GPU_MEMSET, stream, gs, ge, corr, gx, 3);
}

static void sync_call(int th, uint64_t t, uint64_t dur, uint64_t cp, uint64_t nat)
{
	uint64_t ex[2] = {TBP_SYNC_STREAM, 7};
	api(th, TBP_K_SYNC, t, dur, TBP_API_cudaStreamSynchronize, cp, nat, 0, 7, 0, ex, 2);
	cnt_sync++;
}

/* cudaStreamWaitEvent: the stream waits on the GPU, the host goes on. */
static void stream_wait_call(int th, uint64_t t, uint64_t cp)
{
	uint64_t ex[2] = {TBP_SYNC_STREAM_WAIT_EVENT, 0xe0};
	api(th, TBP_K_SYNC, t, 2 * US, TBP_API_cudaStreamWaitEvent, cp, 0, 0, 7, 0, ex, 2);
	cnt_sync++;
}

static void malloc_call(int th, uint64_t t, uint64_t cp, uint64_t ptr, uint64_t bytes)
{
	uint64_t ex[3] = {ptr, bytes, 0};
	api(th, TBP_K_MALLOC, t, 2 * US, TBP_API_cudaMalloc, cp, 0, 0, 0, 0, ex, 3);
	cnt_malloc++;
}

static void free_call(int th, uint64_t t, uint64_t cp, uint64_t ptr, uint64_t bytes)
{
	uint64_t ex[2] = {ptr, bytes};
	api(th, TBP_K_FREE, t, 2 * US, TBP_API_cudaFree, cp, 0, 0, 0, 0, ex, 2);
	cnt_free++;
}

static void span(int th, uint64_t t0, uint64_t t1, uint64_t cp)
{
	struct tbp_record *r = push(&host[th]);
	r->kind = TBP_K_PY_SPAN;
	r->tid = host_tid[th];
	r->ts = t0;
	r->u.py_span.end = t1;
	r->u.py_span.callpath = cp;
}

static void marker(uint64_t t, uint64_t kind, uint64_t value)
{
	struct tbp_record *r = push(&host[0]);
	r->kind = TBP_K_MARKER;
	r->tid = host_tid[0];
	r->ts = t;
	r->u.marker.marker_kind = kind;
	r->u.marker.value = value;
}

/* The traced process (its pid: the main thread's id) and a thread's name. */
static void process_rec(uint64_t pid)
{
	struct tbp_record *pr = push(&defs);
	pr->kind = TBP_K_PROCESS;
	pr->u.process.pid = pid;
}

static void thread_rec(uint64_t tid, const char *name)
{
	uint64_t id = intern(name);
	struct tbp_record *r = push(&defs);
	r->kind = TBP_K_THREAD;
	r->tid = (uint32_t)tid;
	r->u.thread.tid = tid;
	r->u.thread.name = id;
}

/* ------------------------------------------------------------ expectations */
struct expect_f {
	const char *kind, *cause, *file, *function;
	uint64_t line, count;
	uint64_t in_copy_ns;  /* idle_gap: of its time at the site, inside copy calls */
	const char *copy;     /* and those copies' label ("pageable host-to-device", ...) */
	const char *advice;   /* words the suggestion must hold, or NULL */
	uint64_t no_call_ns;  /* idle_gap: of its time at the site, in long stretches without a GPU call */
};
static struct expect_f expect[48];
static size_t n_expect;

static void expect_finding(const char *kind, const char *cause, const char *file, const char *func, uint64_t line,
			   uint64_t count)
{
	expect[n_expect++] = (struct expect_f){kind, cause, file, func, line, count, 0, NULL, NULL, 0};
}

/* Words the last expected finding's suggestion must hold. */
static void expect_advice(const char *words)
{
	expect[n_expect - 1].advice = words;
}

/* The last expected finding's time at its site with the host in stretches
 * of 100 us or more without any GPU call before the launch. */
static void expect_no_call(uint64_t ns)
{
	expect[n_expect - 1].no_call_ns = ns;
}

/* The last expected finding's time inside copy calls at its site. */
static void expect_in_copy(uint64_t ns, const char *label)
{
	expect[n_expect - 1].in_copy_ns = ns;
	expect[n_expect - 1].copy = label;
}

/* Idle time the report must blame on (cause, site), exactly: the idle
 * breakdown's row for that site (and its edge, when set). */
struct expect_split {
	const char *cause, *file, *function, *edge;
	uint64_t line, ns;
};
static struct expect_split splits[32];
static size_t n_splits;

static void expect_split_edge(const char *edge, const char *cause, uint64_t ns, const char *file, const char *func,
			      uint64_t line)
{
	splits[n_splits++] = (struct expect_split){cause, file, func, edge, line, ns};
}

static uint64_t exp_steps_count, exp_steps_warmup, exp_steps_median; /* 0: no steps expected */

static void expect_split(const char *cause, uint64_t ns, const char *file, const char *func, uint64_t line)
{
	expect_split_edge(NULL, cause, ns, file, func, line);
}

/* ------------------------------------------------------------ workloads */
static uint64_t k_gemm, k_relu, k_fill, k_copyk;
static uint64_t cp_main, cp_fwd, cp_bwd;

static void common_defs(void)
{
	k_gemm = intern("ampere_sgemm_128x64_tn");
	k_relu = intern("vectorized_elementwise_kernel<relu>");
	k_fill = intern("vectorized_elementwise_kernel<FillFunctor<float>>");
	k_copyk = intern("copy_kernel");
	cp_main = site("train.py", "main", 120, 0);
	cp_fwd = site("model.py", "forward", 30, cp_main);
	cp_bwd = site("train.py", "step", 60, cp_main);
}

/* One clean step on device 0 stream 7: long kernels launched ahead, small
 * GPU gaps (< 50 us).  Returns the GPU cursor after the step. */
static uint64_t clean_step(uint64_t g, uint64_t slow_ns)
{
	for (int k = 0; k < 6; k++) {
		uint64_t dur = (k % 2 ? 60 : 45) * US + (k == 3 ? slow_ns : 0);
		uint64_t gs = g + 8 * US;
		kernel(0, gs - 20 * US, k < 3 ? cp_fwd : cp_bwd, 0, 0, 7, gs, gs + dur, k == 3 ? k_gemm : k_relu);
		g = gs + dur;
	}
	/* A D2D copy on a second stream overlapping the last kernel partly. */
	copy(0, g - 50 * US, 5 * US, cp_bwd, 0, 9, 1 << 20, TBP_COPY_D2D, TBP_COPYF_ASYNC, 0xa000, 0xb000, g - 30 * US,
	     g + 10 * US);
	g += 10 * US;
	memset_op(0, g - 10 * US, cp_bwd, 0, 7, g + 5 * US, g + 12 * US);
	return g + 12 * US;
}

static uint64_t clean_alloc = 64 << 20; /* bigmem: twice as much */

static void scen_clean(int iters, uint64_t slow_ns)
{
	common_defs();
	uint64_t g = 1000 * US, t0 = g;
	malloc_call(0, g - 100 * US, cp_main, 0x10000, clean_alloc);
	copy(0, g - 90 * US, 30 * US, cp_main, 0, 7, 8 << 20, TBP_COPY_H2D, TBP_COPYF_PINNED, 0x1, 0x10000, g,
	     g + 25 * US);
	g += 25 * US;
	for (int i = 0; i < iters; i++)
		g = clean_step(g, slow_ns);
	sync_call(0, g - 30 * US, 40 * US, cp_main, 0);
	free_call(0, g + 20 * US, cp_main, 0x10000, clean_alloc);
	span(0, t0 - 150 * US, g + 30 * US, cp_main);
	/* Device 1: a few kernels overlapping device 0's time. */
	for (int i = 0; i < 3; i++) {
		uint64_t gs = t0 + 100 * US + i * 70 * US;
		kernel(1, gs - 10 * US, cp_fwd, 0, 1, 3, gs, gs + 30 * US, k_relu);
	}
}

static uint64_t gap_then_kernel(uint64_t g, uint64_t gap, int th, uint64_t cp, uint64_t nat)
{
	/* GPU idle over [g, g+gap); the launch is issued 6 us before it runs. */
	uint64_t gs = g + gap;
	kernel(th, gs - 6 * US, cp, nat, 0, 7, gs, gs + 40 * US, k_gemm);
	return gs + 40 * US;
}

static uint64_t planted_body(uint64_t g)
{
	uint64_t cp_item = site("train.py", "step", 40, cp_main);
	uint64_t cp_pre = site("data.py", "preprocess", 12, cp_main);
	uint64_t cp_late = site("model.py", "forward", 77, cp_main);
	uint64_t nat_other = native_site(0x7f0000001234ULL);
	uint64_t cp_zero = site("optim.py", "zero_grad", 88, cp_bwd);
	uint64_t cp_scalar = site("reformer.py", "attention", 55, cp_fwd);
	uint64_t cp_scalar_sync = site("reformer.py", "attention", 56, cp_fwd);
	uint64_t cp_off = site("offload.py", "offload", 30, cp_main);
	uint64_t cp_back = site("offload.py", "reload", 35, cp_main);
	uint64_t cp_eval = site("eval.py", "evaluate", 99, cp_main);
	uint64_t cp_buf = site("buf.py", "scratch", 10, cp_main);
	uint64_t cp_buf_free = site("buf.py", "scratch", 11, cp_main);

	uint64_t cp_item2 = site("train.py", "step", 45, cp_main);
	uint64_t cp_log = site("log.py", "log_metrics", 7, cp_main);
	g = clean_step(g, 0);
	/* idle_gap/sync x5: truly sync-bound: the host sits in a sync for most
	 * of the gap (190 of 200 us: the sync returns long after the GPU ran
	 * dry, as a sync on another stream's event would). */
	for (int i = 0; i < 5; i++) {
		sync_call(0, g - 30 * US, 220 * US, cp_item, 0);
		g = gap_then_kernel(g, 200 * US, 0, cp_fwd, 0);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "sync", "train.py", "step", 40, 5);
	expect_split("sync", 5 * 190 * US, "train.py", "step", 40);
	/* idle_gap/python x3: each step ends with a short .item() (5 us of the
	 * gap inside the sync) and 280 us of Python logging before the next
	 * step's launches: the gap is the Python function's, not the sync's. */
	for (int i = 0; i < 3; i++) {
		sync_call(0, g - 30 * US, 35 * US, cp_item2, 0);
		span(0, g + 8 * US, g + 288 * US, cp_log);
		g = gap_then_kernel(g, 300 * US, 0, cp_fwd, 0);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "python", "log.py", "log_metrics", 7, 3);
	expect_split("python", 3 * 280 * US, "log.py", "log_metrics", 7);
	expect_split("sync", 3 * 5 * US, "train.py", "step", 45);
	/* idle_gap/python x4: preprocess() runs while the GPU waits. */
	for (int i = 0; i < 4; i++) {
		span(0, g + 5 * US, g + 290 * US, cp_pre);
		g = gap_then_kernel(g, 300 * US, 0, cp_fwd, 0);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "python", "data.py", "preprocess", 12, 4);
	expect_split("python", 4 * 285 * US, "data.py", "preprocess", 12);
	/* idle_gap/python x2: the loop waits in the DataLoader's __next__ for
	 * a batch from its workers: placed at the loop's line, with advice
	 * about the loader (its workers do not keep up). */
	uint64_t cp_for = site("train.py", "main", 119, 0);
	uint64_t cp_next = site("/opt/py/lib/python3.11/site-packages/torch/utils/data/dataloader.py",
				"_BaseDataLoaderIter.__next__", 733, cp_for);
	for (int i = 0; i < 2; i++) {
		span(0, g + 5 * US, g + 295 * US, cp_next);
		g = gap_then_kernel(g, 300 * US, 0, cp_fwd, 0);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "python", "train.py", "main", 119, 2);
	expect_advice("num_workers");
	expect_split("python", 2 * 290 * US, "train.py", "main", 119);
	/* idle_gap/launch_bound x3: nothing else going on, the launch is late. */
	for (int i = 0; i < 3; i++) {
		g = gap_then_kernel(g, 100 * US, 0, cp_late, 0);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "launch_bound", "model.py", "forward", 77, 3);
	expect_split("launch_bound", 3 * 100 * US, "model.py", "forward", 77);
	/* idle_gap/python x3, the host 394 us without any GPU call before the
	 * late launch (a batch made on the CPU, .tolist() of the last result,
	 * no Python call of its own long enough for a span): CPU work in the
	 * function at that line, not launch overhead, and the advice says so
	 * (launch_bound with that advice before 2026-11-28); the 6 us from the
	 * launch to the kernel are the launch's. */
	uint64_t cp_make = site("infer.py", "main", 7, cp_main);
	for (int i = 0; i < 3; i++) {
		g = gap_then_kernel(g, 400 * US, 0, cp_make, 0);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "python", "infer.py", "main", 7, 3);
	expect_advice("device='cuda'");
	expect_no_call(3 * 394 * US);
	expect_split("python", 3 * 394 * US, "infer.py", "main", 7);
	/* idle_gap/host_other x2: launched from a thread without Python. */
	for (int i = 0; i < 2; i++) {
		g = gap_then_kernel(g, 80 * US, 1, 0, nat_other);
		g = clean_step(g, 0);
	}
	expect_finding("idle_gap", "host_other", NULL, NULL, 0, 2);
	expect_split("host_other", 2 * 80 * US, NULL, NULL, 0);
	/* idle_gap/launch_bound x2: an 8 MiB copy whose call is still running
	 * when the GPU runs dry (a pageable copy staging its data; simgpu copying
	 * "device" bytes on the host): the work arrives late because of the
	 * host's call, not a GPU-side wait (it was called queued before). */
	uint64_t cp_stage = site("loader.py", "stage", 21, cp_main);
	for (int i = 0; i < 2; i++) {
		uint64_t gs = g + 150 * US;
		copy(0, g - 40 * US, 185 * US, cp_stage, 0, 7, 8 << 20, TBP_COPY_D2D, TBP_COPYF_ASYNC, 0x10000,
		     0x20000, gs, gs + 20 * US);
		g = clean_step(gs + 20 * US, 0);
	}
	expect_finding("idle_gap", "launch_bound", "loader.py", "stage", 21, 2);
	expect_in_copy(2 * 145 * US, "device-to-device"); /* the call returns 5 us before the copy starts */
	expect_split("launch_bound", 2 * 150 * US, "loader.py", "stage", 21);
	/* idle_gap/launch_bound x2 inside a pageable host-to-device copy (a
	 * batch's x.cuda(): the call stages the bytes itself, the GPU has
	 * nothing queued meanwhile): the advice is about pinned memory, not
	 * about batching launches. */
	uint64_t cp_batch = site("data.py", "get_batch", 15, cp_main);
	for (int i = 0; i < 2; i++) {
		uint64_t gs = g + 200 * US;
		copy(0, g - 10 * US, 215 * US, cp_batch, 0, 7, 1 << 20, TBP_COPY_H2D,
		     TBP_COPYF_ASYNC | TBP_COPYF_PAGEABLE, 0x30000, 0x40000, gs, gs + 30 * US);
		g = clean_step(gs + 30 * US, 0);
	}
	expect_finding("idle_gap", "launch_bound", "data.py", "get_batch", 15, 2);
	expect_in_copy(2 * 200 * US, "pageable host-to-device");
	expect_split("launch_bound", 2 * 200 * US, "data.py", "get_batch", 15);
	/* kernel_burst x2 bursts of 20 tiny kernels with 5 us idle between. */
	for (int b = 0; b < 2; b++) {
		for (int k = 0; k < 20; k++) {
			uint64_t gs = g + 5 * US;
			kernel(0, gs - 30 * US, cp_zero, 0, 0, 7, gs, gs + 3 * US, k_fill);
			g = gs + 3 * US;
		}
		g = clean_step(g, 0);
	}
	expect_finding("kernel_burst", NULL, "optim.py", "zero_grad", 88, 40);
	expect_advice("torch._foreach_");
	/* kernel_burst from a loop body of three lines (Adam's per-parameter
	 * loop): one burst of 18, reported at the first kernel's line. */
	uint64_t cp_adam = site("optim.py", "step", 200, cp_bwd);
	uint64_t cp_loop[3] = {site("optim.py", "_single_tensor_adam", 101, cp_adam),
			       site("optim.py", "_single_tensor_adam", 102, cp_adam),
			       site("optim.py", "_single_tensor_adam", 103, cp_adam)};
	for (int k = 0; k < 18; k++) {
		uint64_t gs = g + 6 * US;
		kernel(0, gs - 30 * US, cp_loop[k % 3], 0, 0, 7, gs, gs + 4 * US, k_fill);
		g = gs + 4 * US;
	}
	g = clean_step(g, 0);
	expect_finding("kernel_burst", NULL, "optim.py", "_single_tensor_adam", 101, 18);
	/* kernel_burst from a script's own loop at module level (no caller):
	 * one kernel of line 3 before it, then lines 12 and 13 in turn, 12
	 * times: one burst of 25, reported at the line with the most kernels. */
	uint64_t cp_mod[3] = {site("script.py", "<module>", 3, 0), site("script.py", "<module>", 12, 0),
			      site("script.py", "<module>", 13, 0)};
	for (int k = 0; k < 25; k++) {
		uint64_t gs = g + 6 * US;
		kernel(0, gs - 30 * US, cp_mod[k == 0 ? 0 : 1 + (k - 1) % 2], 0, 0, 7, gs, gs + 4 * US, k_fill);
		g = gs + 4 * US;
	}
	g = clean_step(g, 0);
	expect_finding("kernel_burst", NULL, "script.py", "<module>", 12, 25);
	/* scalar_copy x6: 4-byte pageable H2D copies each followed by a sync. */
	for (int i = 0; i < 6; i++) {
		uint64_t gs = g + 10 * US;
		copy(0, gs - 30 * US, 15 * US, cp_scalar, 0, 7, 4, TBP_COPY_H2D, TBP_COPYF_PAGEABLE, 0x5000, 0x20000 + i * 256,
		     gs, gs + 2 * US);
		sync_call(0, gs - 14 * US, 3 * US, cp_scalar_sync, 0);
		g = gs + 2 * US;
		g = clean_step(g, 0);
	}
	expect_finding("scalar_copy", NULL, "reformer.py", "attention", 55, 6);
	/* ping_pong x4: the same 1 MiB goes to the GPU and back each time. */
	for (int i = 0; i < 4; i++) {
		uint64_t gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_off, 0, 7, 1 << 20, TBP_COPY_H2D, TBP_COPYF_PINNED | TBP_COPYF_ASYNC,
		     0x6000, 0x30000, gs, gs + 40 * US);
		g = clean_step(gs + 40 * US, 0);
		gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_back, 0, 7, 1 << 20, TBP_COPY_D2H, TBP_COPYF_PINNED | TBP_COPYF_ASYNC,
		     0x30000, 0x6000, gs, gs + 40 * US);
		g = gs + 40 * US;
	}
	expect_finding("ping_pong", NULL, "offload.py", "offload", 30, 4);
	/* ping_pong x3 through torch: the copies are made inside Module.to's
	 * convert; the finding belongs at the model's line that called .to(). */
	uint64_t cp_setup_to = site("model.py", "move", 50, cp_main);
	uint64_t cp_to = site("/opt/py/lib/python3.11/site-packages/torch/nn/modules/module.py", "Module.to", 1174,
			      cp_setup_to);
	uint64_t cp_apply = site("/opt/py/lib/python3.11/site-packages/torch/nn/modules/module.py", "Module._apply",
				 805, cp_to);
	uint64_t cp_convert = site("/opt/py/lib/python3.11/site-packages/torch/nn/modules/module.py", "convert", 1160,
				   cp_apply);
	for (int i = 0; i < 3; i++) {
		uint64_t gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_convert, 0, 7, 2 << 20, TBP_COPY_H2D,
		     TBP_COPYF_PINNED | TBP_COPYF_ASYNC, 0x7000, 0x50000, gs, gs + 40 * US);
		g = gs + 40 * US;
		gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_convert, 0, 7, 2 << 20, TBP_COPY_D2H,
		     TBP_COPYF_PINNED | TBP_COPYF_ASYNC, 0x50000, 0x7000, gs, gs + 40 * US);
		g = gs + 40 * US;
	}
	expect_finding("ping_pong", NULL, "model.py", "move", 50, 3);
	/* ping_pong x4 the other way round: a recurrent state to the host
	 * (rnn.py:70, h = state.cpu()) and straight back (:71, state =
	 * h.to(dev)), filed at the copy back to the device, where the
	 * allocator hands the state the block a cache warmed with an H2D copy
	 * before (cache.py:90): that copy's bytes are overwritten by the first
	 * trip's way back, so it starts no round trip (with the overwritten
	 * copy still armed: 1 at cache.py:90, 1 at rnn.py:70, 2 at :71, each
	 * under --pingpong-min; before round trips were seen both ways, none
	 * at all). */
	uint64_t cp_warm = site("cache.py", "warm", 90, cp_main);
	uint64_t cp_state_out = site("rnn.py", "step", 70, cp_main);
	uint64_t cp_state_in = site("rnn.py", "step", 71, cp_main);
	{
		uint64_t gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_warm, 0, 7, 1 << 20, TBP_COPY_H2D, TBP_COPYF_PINNED | TBP_COPYF_ASYNC,
		     0xa000, 0xb0000, gs, gs + 40 * US);
		g = gs + 40 * US;
	}
	for (int i = 0; i < 4; i++) {
		uint64_t gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_state_out, 0, 7, 1 << 20, TBP_COPY_D2H,
		     TBP_COPYF_PINNED | TBP_COPYF_ASYNC, i ? 0xb0000 : 0xc0000, 0xd000, gs, gs + 40 * US);
		g = gs + 40 * US;
		gs = g + 10 * US;
		copy(0, gs - 12 * US, 12 * US, cp_state_in, 0, 7, 1 << 20, TBP_COPY_H2D,
		     TBP_COPYF_PINNED | TBP_COPYF_ASYNC, 0xd000, 0xb0000, gs, gs + 40 * US);
		g = gs + 40 * US;
	}
	expect_finding("ping_pong", NULL, "rnn.py", "step", 71, 4);
	/* The runner times each batch with a sync (runner/measure.py, called
	 * from run.py): the harness's cost, not a finding about the model. */
	uint64_t cp_run = site("/opt/tb/run.py", "main", 210, 0);
	uint64_t cp_measure = site("/opt/tb/runner/measure.py", "time_batch", 41, cp_run);
	for (int i = 0; i < 12; i++) {
		uint64_t gs = g + 10 * US;
		kernel(0, gs - 20 * US, cp_fwd, 0, 0, 7, gs, gs + 50 * US, k_relu);
		sync_call(0, gs + 5 * US, 3 * US, cp_measure, 0);
		g = gs + 50 * US;
	}
	/* ... and twice the GPU drains while the runner waits in its sync:
	 * idle of the harness, not of the model. */
	for (int i = 0; i < 2; i++) {
		sync_call(0, g - 10 * US, 150 * US, cp_measure, 0);
		g = gap_then_kernel(g, 150 * US, 0, cp_fwd, 0);
	}
	/* idle_gap/python x3 in the runner's shared training step
	 * (runner/model.py BenchmarkModel.train, the step of every zoo model
	 * without its own): the optimizer's Python at its optimizer.step() line
	 * is the model's, a finding, not the harness's. */
	uint64_t cp_bm = site("/opt/tb/runner/model.py", "BenchmarkModel.train", 169, cp_measure);
	uint64_t cp_adam_step = site("/opt/py/lib/python3.11/site-packages/torch/optim/adam.py", "Adam.step", 249, cp_bm);
	for (int i = 0; i < 3; i++) {
		span(0, g + 5 * US, g + 195 * US, cp_adam_step);
		g = gap_then_kernel(g, 200 * US, 0, cp_fwd, 0);
	}
	expect_finding("idle_gap", "python", "/opt/tb/runner/model.py", "BenchmarkModel.train", 169, 3);
	expect_split("python", 3 * 190 * US, "/opt/tb/runner/model.py", "BenchmarkModel.train", 169);
	/* sync_hotspot x12: short syncs while the GPU stays busy. */
	for (int i = 0; i < 12; i++) {
		uint64_t gs = g + 10 * US;
		kernel(0, gs - 20 * US, cp_fwd, 0, 0, 7, gs, gs + 50 * US, k_relu);
		sync_call(0, gs + 5 * US, 3 * US, cp_eval, 0);
		g = gs + 50 * US;
	}
	expect_finding("sync_hotspot", NULL, "eval.py", "evaluate", 99, 12);
	/* 12 x torch.cuda.current_stream().wait_stream(side): cudaStreamWaitEvent
	 * makes the stream wait, not the host: no sync_hotspot. */
	uint64_t cp_wait = site("train.py", "main", 133, cp_main);
	for (int i = 0; i < 12; i++) {
		uint64_t gs = g + 10 * US;
		kernel(0, gs - 20 * US, cp_fwd, 0, 0, 7, gs, gs + 50 * US, k_relu);
		stream_wait_call(0, gs + 5 * US, cp_wait);
		g = gs + 50 * US;
	}
	/* alloc_churn x60: cudaMalloc/cudaFree of a scratch buffer in the loop. */
	for (int i = 0; i < 60; i++) {
		malloc_call(0, g - 40 * US, cp_buf, 0x900000 + (uint64_t)i * 0x1000, 256 << 10);
		free_call(0, g - 30 * US, cp_buf_free, 0x900000 + (uint64_t)i * 0x1000, 256 << 10);
		uint64_t gs = g + 10 * US;
		kernel(0, gs - 20 * US, cp_fwd, 0, 0, 7, gs, gs + 40 * US, k_relu);
		g = gs + 40 * US;
	}
	expect_finding("alloc_churn", NULL, "buf.py", "scratch", 10, 60);
	/* Setup: 160 buffers allocated once from one line and kept (a list
	 * comprehension of parameters): no churn. */
	uint64_t cp_setup = site("model.py", "<listcomp>", 15, cp_main);
	for (int i = 0; i < 160; i++)
		malloc_call(0, g - 20 * US + (uint64_t)i * 100, cp_setup, 0x40000000 + (uint64_t)i * 0x100000, 1 << 20);
	return g;
}

static uint64_t win_begin, win_end;
static int have_window;

static void scen_planted(int with_markers)
{
	common_defs();
	uint64_t g = 1000 * US, t0 = g;
	malloc_call(0, g - 100 * US, cp_main, 0x10000, 64 << 20);
	malloc_call(0, g - 95 * US, cp_main, 0x8000000, 16 << 20); /* never freed */
	if (with_markers) {
		uint64_t cp_warm = site("warm.py", "warmup", 5, cp_main);
		/* Warm-up iteration with a sync gap that must not be reported. */
		marker(g - 50 * US, TBP_MARK_ITER_BEGIN, 0);
		g = clean_step(g, 0);
		sync_call(0, g - 30 * US, 510 * US, cp_warm, 0);
		g = gap_then_kernel(g, 500 * US, 0, cp_fwd, 0);
		g = clean_step(g, 0);
		marker(g + 1 * US, TBP_MARK_ITER_END, 0);
		marker(g + 2 * US, TBP_MARK_WARMUP_END, 0);
		/* A gap between iterations (runner bookkeeping): not reported. */
		g += 400 * US;
		marker(g, TBP_MARK_ITER_BEGIN, 1);
		win_begin = g;
		g = planted_body(g);
		marker(g + 3 * US, TBP_MARK_ITER_END, 1);
		win_end = g + 3 * US;
		have_window = 1;
		g = clean_step(g + 100 * US, 0); /* after the window: excluded */
	} else {
		g = planted_body(g);
	}
	failed_launch(0, g + 10 * US, cp_main);
	free_call(0, g + 20 * US, cp_main, 0x10000, 64 << 20);
	uint64_t end = g + 30 * US;
	if (!with_markers) {
		/* A GPU-idle tail: 3 ms of Python after the last GPU work. */
		uint64_t cp_ckpt = site("ckpt.py", "save_checkpoint", 9, cp_main);
		span(0, g + 40 * US, g + 3040 * US, cp_ckpt);
		expect_split_edge("trailing", "python", 3000 * US, "ckpt.py", "save_checkpoint", 9);
		end = g + 3050 * US;
	}
	span(0, t0 - 150 * US, end, cp_main);
}

/* threads: loss.backward() as PyTorch runs it.  The main thread only waits
 * inside Tensor.backward; autograd's device thread (thread 1) does the host
 * work: first a custom autograd.Function.backward in Python before each of
 * its launches, then launches from the engine's C++ (no Python frames). */
static void scen_threads(void)
{
	common_defs();
	uint64_t cp_step = site("train.py", "step", 70, cp_main);
	uint64_t cp_tb = site("/opt/py/lib/python3.11/site-packages/torch/_tensor.py", "Tensor.backward", 520, cp_step);
	uint64_t cp_eng = site("/opt/py/lib/python3.11/site-packages/torch/autograd/graph.py", "_engine_run_backward", 768,
			       cp_tb);
	uint64_t cp_fn = site("reformer.py", "ReversibleFunction.backward", 300, 0);
	uint64_t cp_fn_launch = site("reformer.py", "ReversibleFunction.backward", 310, 0);
	uint64_t nat_engine = native_site(0x7f00000abcdeULL);
	uint64_t g = 1000 * US, t0 = g - 200 * US;
	g = clean_step(g, 0);
	uint64_t tb0 = g - 5 * US;
	for (int i = 0; i < 3; i++) {
		span(1, g + 5 * US, g + 405 * US, cp_fn);
		kernel(1, g + 404 * US, cp_fn_launch, 0, 0, 7, g + 410 * US, g + 450 * US, k_gemm);
		g += 450 * US;
	}
	expect_finding("idle_gap", "python", "reformer.py", "ReversibleFunction.backward", 300, 3);
	expect_split("python", 3 * 400 * US, "reformer.py", "ReversibleFunction.backward", 300);
	for (int i = 0; i < 2; i++) {
		kernel(1, g + 150 * US, 0, nat_engine, 0, 7, g + 156 * US, g + 196 * US, k_relu);
		g += 196 * US;
	}
	expect_finding("idle_gap", "host_other", NULL, NULL, 0, 2);
	expect_split("host_other", 2 * 156 * US, NULL, NULL, 0);
	/* The tracer lends such a thread the backward() caller's path
	 * (doc/python.md): its launches show train.py:70.  Launched 60 us after
	 * the GPU ran dry: launch overhead (a stretch of 100 us or more with no
	 * GPU call is host work, not launching: it was 120 us before
	 * 2026-11-28, when that still counted as launch-bound). */
	for (int i = 0; i < 2; i++) {
		kernel(1, g + 60 * US, cp_step, 0, 0, 7, g + 66 * US, g + 106 * US, k_relu);
		g += 106 * US;
	}
	expect_finding("idle_gap", "launch_bound", "train.py", "step", 70, 2);
	/* ... and a run of 20 tiny kernels 4 us apart from it: the backward
	 * pass's burst, said to be (autograd's engine, for the backward()
	 * at train.py:70). */
	for (int k = 0; k < 20; k++) {
		uint64_t gs = g + 4 * US;
		kernel(1, gs - 10 * US, cp_step, 0, 0, 7, gs, gs + 3 * US, k_fill);
		g = gs + 3 * US;
	}
	expect_finding("kernel_burst", NULL, "train.py", "step", 70, 20);
	expect_advice("backward pass");
	/* The engine finishes in C++ (no launch, no Python) for 400 us while
	 * the main thread still waits in backward(): the engine's time, at the
	 * backward() line, not Python of the waiting thread. */
	span(0, tb0, g + 410 * US, cp_eng);
	expect_finding("idle_gap", "host_other", "train.py", "step", 70, 1);
	expect_split("host_other", 410 * US, "train.py", "step", 70);
	g = clean_step(g + 440 * US, 0);
	span(0, t0, g + 30 * US, cp_main);
}

/* Marked iterations for the scenarios below: ITER_BEGIN at t, and after the
 * first iteration WARMUP_END; the window is the steady iterations. */
/* host-work-merged: the marks put around two iterations at a time (as a
 * step counted at an optimizer step that a GradScaler skipped every second
 * iteration), the last one (merge_last) alone. */
static int merge_marks, merge_last = -1;
/* launch-rerun: a second WARMUP_END after this iteration (the runner's
 * measurement run twice): the steady steps before it become warm-up. */
static int rerun_warmup_after = -1;

static void iter_begin(uint64_t t, int i)
{
	if (merge_marks && i % 2)
		return;
	marker(t, TBP_MARK_ITER_BEGIN, (uint64_t)i);
	if (i == 1)
		win_begin = t;
}

static void iter_end(uint64_t t, int i)
{
	if (merge_marks && !(i % 2) && i != merge_last)
		return;
	marker(t, TBP_MARK_ITER_END, (uint64_t)i);
	if (merge_marks ? i == 1 : !i)
		marker(t + 1 * US, TBP_MARK_WARMUP_END, 0);
	if (i == rerun_warmup_after)
		marker(t + 1 * US, TBP_MARK_WARMUP_END, 0);
	win_end = t;
	have_window = 1;
}

/* allocs: torch.cuda.empty_cache() every step, so the caching allocator
 * goes to the driver again: each of 8 steady steps (and the warm-up step)
 * spends 400 us inside a cudaMalloc of 32 MiB at the op that needs it
 * (model.py:40) with the GPU idle, and 190 us inside the cudaFree that
 * empty_cache() makes (train.py:80).  Those are allocator time, not launch
 * overhead; and one allocation per step is churn though the run makes 8,
 * not --churn-min (50).  Setup buffers allocated in one step and kept, and a
 * cache that grows in 3 of the 8 steps, are not churn. */
static void scen_allocs(void)
{
	common_defs();
	process_rec(host_tid[0]);
	uint64_t cp_op = site("model.py", "forward", 40, cp_main);
	uint64_t cp_ec_line = site("train.py", "main", 80, 0);
	uint64_t cp_ec = site("/opt/py/lib/python3.11/site-packages/torch/cuda/memory.py", "empty_cache", 218,
			      cp_ec_line);
	uint64_t cp_ec_free = site("/opt/py/lib/python3.11/site-packages/torch/cuda/memory.py", "empty_cache", 230,
				   cp_ec_line);
	uint64_t cp_log = site("train.py", "main", 81, 0);
	uint64_t cp_setup = site("model.py", "<listcomp>", 15, cp_main);
	uint64_t cp_grow = site("cache.py", "grow", 61, cp_main);
	uint64_t g = 1000 * US, t0 = g - 100 * US;
	for (int i = 0; i < 9; i++) {
		iter_begin(g - 20 * US, i);
		g = clean_step(g, 0);
		/* The op's output needs 32 MiB: cudaMalloc, then its kernel. */
		malloc_call(0, g - 5 * US, cp_op, 0x70000000, 32 << 20);
		host[0].r[host[0].n - 1].u.call.end = g + 400 * US;
		kernel(0, g + 402 * US, cp_op, 0, 0, 7, g + 410 * US, g + 450 * US, k_gemm);
		g += 450 * US;
		if (i == 1)
			for (int k = 0; k < 20; k++)
				malloc_call(0, g - 40 * US + (uint64_t)k * US, cp_setup, 0x40000000 + (uint64_t)k * 0x100000,
					    1 << 20);
		if (i == 2 || i == 5 || i == 7)
			malloc_call(0, g - 30 * US, cp_grow, 0x50000000 + (uint64_t)i * 0x100000, 1 << 20);
		g = clean_step(g, 0);
		/* empty_cache(): the block goes back to the driver. */
		span(0, g + 5 * US, g + 205 * US, cp_ec);
		free_call(0, g + 10 * US, cp_ec_free, 0x70000000, 32 << 20);
		host[0].r[host[0].n - 1].u.call.end = g + 200 * US;
		kernel(0, g + 210 * US, cp_log, 0, 0, 7, g + 216 * US, g + 226 * US, k_relu);
		g += 226 * US;
		iter_end(g + 2 * US, i);
		g += 30 * US;
	}
	expect_finding("idle_gap", "alloc", "model.py", "forward", 40, 8);
	expect_advice("empty_cache");
	expect_split("alloc", 8 * 400 * US, "model.py", "forward", 40);
	expect_finding("idle_gap", "alloc", "train.py", "main", 80, 8);
	expect_advice("empty_cache");
	expect_split("alloc", 8 * 190 * US, "train.py", "main", 80);
	expect_finding("alloc_churn", NULL, "model.py", "forward", 40, 8);
	span(0, t0, g + 50 * US, cp_main);
}

/* host-work: each step begins with augment(), a function of the user's
 * that computes on the CPU for 800 us with no GPU call and then launches
 * (return batch.flip(-1)): its time is the function's Python, placed at
 * it, not launch overhead at its launch line, also when the step starts
 * just as the function does (a detected step starts with its first span;
 * here the runner's mark).  A loop of small ops launched 70 us apart is
 * launch overhead.  Autograd's engine computing 300 us before its launch
 * is host work outside Python. */
static void scen_host_work(void)
{
	common_defs();
	process_rec(host_tid[0]);
	uint64_t cp_loop = site("train.py", "main", 18, 0);
	uint64_t cp_aug = site("train.py", "augment", 7, cp_loop);
	uint64_t cp_aug_launch = site("train.py", "augment", 9, cp_loop);
	uint64_t cp_tiny = site("ops.py", "scale_all", 12, cp_loop);
	uint64_t cp_bw_line = site("train.py", "main", 20, 0);
	uint64_t cp_tb = site("/opt/py/lib/python3.11/site-packages/torch/_tensor.py", "Tensor.backward", 520,
			      cp_bw_line);
	uint64_t g = 1000 * US, t0 = g - 100 * US;
	for (int i = 0; i < 7; i++) {
		uint64_t t = g + 30 * US;
		iter_begin(t, i);
		span(0, t, t + 800 * US, cp_aug);
		kernel(0, t + 790 * US, cp_aug_launch, 0, 0, 7, t + 800 * US, t + 820 * US, k_relu);
		g = clean_step(t + 820 * US, 0);
		for (int k = 0; k < 3; k++) {
			kernel(0, g + 64 * US, cp_tiny, 0, 0, 7, g + 70 * US, g + 90 * US, k_relu);
			g += 90 * US;
		}
		/* backward(): autograd's engine works 300 us in C++ before its
		 * launch (the path the tracer lends it) while the main thread
		 * waits: host work of the engine, not launch overhead, nor Python
		 * of the line it borrows. */
		span(0, g - 10 * US, g + 346 * US, cp_tb);
		kernel(1, g + 300 * US, cp_bw_line, 0, 0, 7, g + 306 * US, g + 346 * US, k_gemm);
		g += 346 * US;
		iter_end(g + 20 * US, i);
	}
	expect_finding("idle_gap", "python", "train.py", "augment", 7, 6);
	expect_split("python", 6 * 800 * US, "train.py", "augment", 7);
	expect_finding("idle_gap", "launch_bound", "ops.py", "scale_all", 12, 18);
	expect_advice("CUDA graphs");
	expect_finding("idle_gap", "host_other", "train.py", "main", 20, 6);
	expect_split("host_other", 6 * 300 * US, "train.py", "main", 20);
	span(0, t0, g + 50 * US, cp_main);
}

/* threads-main: a step as PyTorch runs it, the main thread's launches
 * around backward().  zero_grad()'s Python (train.py:35) before backward()'s
 * first kernel, which the main thread launches itself (_make_grads): no
 * other thread waited in backward() then.  Autograd's thread then launches
 * with the path the tracer lends it (train.py:36), 64 us apart (launch
 * overhead), while the main thread waits in backward(): those are the
 * engine's.  After its last
 * kernel the main thread waits 2 ms more in backward() (the engine's C++,
 * nothing queued), returns and launches the optimizer's kernel at
 * train.py:37: that gap is the main thread's wait, resumed by the main
 * thread's launch, no engine's launch and no other thread's backward(). */
static void scen_threads_main(void)
{
	common_defs();
	process_rec(host_tid[0]);
	thread_rec(host_tid[1], "pt_autograd_0");
	uint64_t cp_zg_line = site("train.py", "fit", 35, cp_main);
	uint64_t cp_zg = site("/opt/py/lib/python3.11/site-packages/torch/optim/optimizer.py", "Optimizer.zero_grad",
			      1065, cp_zg_line);
	uint64_t cp_bw_line = site("train.py", "fit", 36, cp_main);
	uint64_t cp_tb = site("/opt/py/lib/python3.11/site-packages/torch/_tensor.py", "Tensor.backward", 520,
			      cp_bw_line);
	uint64_t cp_grads = site("/opt/py/lib/python3.11/site-packages/torch/autograd/__init__.py", "_make_grads", 233,
				 cp_tb);
	uint64_t cp_opt_line = site("train.py", "fit", 37, cp_main);
	uint64_t cp_adam = site("/opt/py/lib/python3.11/site-packages/torch/optim/adam.py", "Adam.step", 249,
				cp_opt_line);
	uint64_t cp_mta = site("/opt/py/lib/python3.11/site-packages/torch/optim/adam.py", "_multi_tensor_adam", 554,
			       cp_opt_line);
	uint64_t k_mta = intern("multi_tensor_apply_kernel");
	uint64_t g = 1000 * US, t0 = g - 100 * US;
	for (int i = 0; i < 5; i++) {
		iter_begin(g - 10 * US, i);
		for (int k = 0; k < 3; k++) { /* forward */
			kernel(0, g + 2 * US, cp_fwd, 0, 0, 7, g + 8 * US, g + 48 * US, k_gemm);
			g += 48 * US;
		}
		uint64_t f = g;
		span(0, f + 5 * US, f + 255 * US, cp_zg);
		kernel(0, f + 270 * US, cp_grads, 0, 0, 7, f + 276 * US, f + 280 * US, k_fill);
		g = f + 280 * US;
		/* the engine: launches 64 us apart */
		for (int k = 0; k < 3; k++) {
			kernel(1, g + 64 * US, cp_bw_line, 0, 0, 7, g + 70 * US, g + 110 * US, k ? k_relu : k_gemm);
			g += 110 * US;
		}
		uint64_t e = g;
		span(0, f + 260 * US, e + 2000 * US, cp_tb);
		span(0, e + 2005 * US, e + 2100 * US, cp_adam);
		kernel(0, e + 2090 * US, cp_mta, 0, 0, 7, e + 2096 * US, e + 2136 * US, k_mta);
		g = e + 2136 * US;
		iter_end(g + 4 * US, i);
		g += 20 * US;
	}
	expect_finding("idle_gap", "python", "train.py", "fit", 35, 4);
	expect_finding("idle_gap", "launch_bound", "train.py", "fit", 36, 12);
	/* The main thread's 2 ms wait after the engine's last launch, and 16
	 * us of it in backward() before launching its first kernel. */
	expect_finding("idle_gap", "host_other", "train.py", "fit", 36, 4);
	expect_split("host_other", 4 * (2000 + 16) * US, "train.py", "fit", 36);
	span(0, t0, g + 50 * US, cp_main);
}

/* unmarked[-slow|-fixed]: a training loop without the runner's marks.  train_step (called
 * from train.py:50) runs 6 times; its forward is a span of its own (fewer
 * launches: not the loop).  Every step loads a batch in Python while the
 * GPU waits (300 us, load_batch); the first step also builds its caches
 * for 2 ms (one-time warm-up work: not a finding).  Steps are 1 ms + the
 * gap apart (STEP_NS), the warm-up step longer. */
static void scen_unmarked(uint64_t slow, uint64_t step_gap)
{
	common_defs();
	uint64_t cp_loop = site("train.py", "main", 50, 0);
	uint64_t cp_step = site("train.py", "train_step", 20, cp_loop);
	uint64_t cp_fwd_fn = site("model.py", "forward", 28, cp_step);
	uint64_t cp_load = site("data.py", "load_batch", 33, cp_step);
	uint64_t cp_warm = site("model.py", "build_caches", 90, cp_step);
	uint64_t cp_grow = site("model.py", "grow_cache", 61, cp_step);
	uint64_t g = 1000 * US, t0 = g - 100 * US;
	uint64_t begins[7];
	for (int i = 0; i < 6; i++) {
		uint64_t sb = g;
		begins[i] = sb + 1 * US;
		if (!i) { /* one-time work, GPU idle */
			span(0, g + 5 * US, g + 2005 * US, cp_warm);
			g = gap_then_kernel(g, 2010 * US, 0, cp_fwd, 0);
		}
		/* 12 buffers a step allocated and kept (a cache that grows every
		 * step): allocations in every iteration are churn. */
		for (int k = 0; k < 12; k++)
			malloc_call(0, g + 1 * US + (uint64_t)k * 100, cp_grow, 0x60000000 + ((uint64_t)i * 12 + k) * 0x10000,
				    64 << 10);
		span(0, g + 5 * US, g + step_gap - 10 * US, cp_load);
		g = gap_then_kernel(g, step_gap, 0, cp_fwd, 0);
		uint64_t fs = g - 46 * US;
		for (int k = 0; k < 8; k++) {
			uint64_t gs = g + 8 * US;
			uint64_t dur = (k == 5 ? 100 * US + slow : 100 * US);
			kernel(0, gs - 20 * US, k < 4 ? cp_fwd : cp_bwd, 0, 0, 7, gs, gs + dur, k == 5 ? k_gemm : k_relu);
			g = gs + dur;
		}
		span(0, fs, g - 400 * US, cp_fwd_fn);
		span(0, sb + 1 * US, g, cp_step);
	}
	expect_finding("idle_gap", "python", "data.py", "load_batch", 33, 5);
	expect_finding("alloc_churn", NULL, "model.py", "grow_cache", 61, 60); /* 5 steady steps x 12 */
	begins[6] = g; /* the last step ends with its span */
	/* Time per step after warm-up: each step to the next one's start. */
	uint64_t lens[5];
	for (int i = 1; i < 6; i++)
		lens[i - 1] = begins[i + 1] - begins[i];
	for (int i = 0; i < 5; i++)
		for (int j = i + 1; j < 5; j++)
			if (lens[j] < lens[i]) {
				uint64_t t = lens[i];
				lens[i] = lens[j];
				lens[j] = t;
			}
	win_begin = begins[1];
	win_end = begins[6];
	have_window = 1;
	exp_steps_count = 6;
	exp_steps_warmup = 1;
	exp_steps_median = lens[2];
	span(0, t0, g + 50 * US, cp_loop);
}

/* unmarked-accum: gradient accumulation over 2 batches, no marks: 16 steps
 * (train_step), the optimizer every second one.  Its first step (step 2)
 * builds its state for 2 ms with the GPU idle: one-time work of the loop,
 * so the warm-up runs through step 2 and that is no finding; every step
 * loads its batch for 285 us of a 300 us gap (a finding in each of the 14
 * steps after warm-up). */
static void scen_unmarked_accum(void)
{
	common_defs();
	enum { N = 16, W = 2 };
	uint64_t cp_loop = site("train.py", "main", 50, 0);
	uint64_t cp_step = site("train.py", "train_step", 20, cp_loop);
	uint64_t cp_load = site("data.py", "load_batch", 33, cp_step);
	uint64_t cp_opt = site("train.py", "train_step", 24, cp_loop);
	uint64_t cp_init = site("optim.py", "_init_group", 70, cp_opt);
	uint64_t g = 1000 * US, t0 = g - 100 * US, begins[N + 1];
	for (int i = 0; i < N; i++) {
		uint64_t sb = g;
		begins[i] = sb + 1 * US;
		span(0, g + 5 * US, g + 290 * US, cp_load);
		g = gap_then_kernel(g, 300 * US, 0, cp_fwd, 0);
		for (int k = 0; k < 6; k++) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, k < 3 ? cp_fwd : cp_bwd, 0, 0, 7, gs, gs + 100 * US, k_relu);
			g = gs + 100 * US;
		}
		if (i == 1) {
			span(0, g + 5 * US, g + 2005 * US, cp_init);
			g = gap_then_kernel(g, 2010 * US, 0, cp_opt, 0);
		} else if (i % 2) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, cp_opt, 0, 0, 7, gs, gs + 50 * US, k_fill);
			g = gs + 50 * US;
		}
		span(0, sb + 1 * US, g, cp_step);
	}
	expect_finding("idle_gap", "python", "data.py", "load_batch", 33, N - W);
	begins[N] = g;
	uint64_t lens[N - W];
	for (int i = W; i < N; i++)
		lens[i - W] = begins[i + 1] - begins[i];
	for (int i = 0; i < N - W; i++)
		for (int j = i + 1; j < N - W; j++)
			if (lens[j] < lens[i]) {
				uint64_t t = lens[i];
				lens[i] = lens[j];
				lens[j] = t;
			}
	win_begin = begins[W];
	win_end = begins[N];
	have_window = 1;
	exp_steps_count = N;
	exp_steps_warmup = W;
	exp_steps_median = (lens[(N - W) / 2 - 1] + lens[(N - W) / 2]) / 2;
	span(0, t0, g + 50 * US, cp_loop);
}

/* Optimizer steps skipped, no marks: a module-level loop of N iterations
 * (forward at train.py:20 through model.py, backward at :22, the optimizer
 * at :23 through torch.optim).  skips: the loop `continue`s before backward
 * when its loss is not finite (its check, a sync, at :21) in iterations 0, 1,
 * 2 and 5 -- its optimizer step is not taken, the iteration is a step all the
 * same: N steps.  scaler: torch.amp's GradScaler.step at :23 every
 * iteration, stepping the optimizer inside it but in those four: N steps.
 * accum: gradient accumulation over 3 micro-batches (N = 18), the optimizer
 * step of the third group skipped (no optimizer frame in its iterations): 6
 * steps of 3 iterations each.  The first step is warm-up. */
enum { SKIPS_PLAIN, SKIPS_SCALER, SKIPS_ACCUM };
static const char *joined(const char *prefix, const char *rest);
static void scen_unmarked_skips(int shape)
{
	common_defs();
	const char *torch = "/opt/py/lib/python3.11/site-packages/torch/";
	int N = shape == SKIPS_ACCUM ? 18 : 10, per = shape == SKIPS_ACCUM ? 3 : 1;
	uint64_t cp_f = site("train.py", "<module>", 20, 0);
	uint64_t cp_call = site(joined(torch, "nn/modules/module.py"), "Module._call_impl", 1740, cp_f); /* its span */
	uint64_t cp_fwd_l = site("model.py", "forward", 30, site(joined(torch, "nn/modules/module.py"), "Module._call_impl",
								  1750, cp_f));
	uint64_t cp_chk = site("train.py", "<module>", 21, 0);
	uint64_t cp_b = site(joined(torch, "autograd/__init__.py"), "backward", 260,
			     site(joined(torch, "_tensor.py"), "Tensor.backward", 620, site("train.py", "<module>", 22, 0)));
	uint64_t cp_line23 = site("train.py", "<module>", 23, 0);
	uint64_t cp_scaler = site(joined(torch, "amp/grad_scaler.py"), "GradScaler.step", 450, cp_line23);
	uint64_t cp_unscale = site(joined(torch, "amp/grad_scaler.py"), "GradScaler._unscale_grads_", 300, cp_scaler);
	uint64_t cp_opt = site(joined(torch, "optim/adam.py"), "Adam.step", 210,
			       shape == SKIPS_SCALER ? cp_scaler : cp_line23);
	uint64_t g = 1000 * US, steps = 0;
	for (int i = 0; i < N; i++) {
		int group = i / per, last_of_group = i % per == per - 1;
		int skipped = shape == SKIPS_ACCUM ? group == 2 : (i < 3 || i == 5);
		steps += i % per == 0;
		uint64_t call_begin = g - 15 * US;
		for (int k = 0; k < 4; k++) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, cp_fwd_l, 0, 0, 7, gs, gs + 60 * US, k_gemm);
			g = gs + 60 * US;
		}
		span(0, call_begin, g - 50 * US, cp_call); /* the model's call, returned before its last kernel ends */
		if (shape == SKIPS_PLAIN) {
			sync_call(0, g - 10 * US, 15 * US, cp_chk, 0);
			g += 10 * US;
			if (skipped)
				continue;
		}
		for (int k = 0; k < 4; k++) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, cp_b, 0, 0, 7, gs, gs + 60 * US, k_relu);
			g = gs + 60 * US;
		}
		if (shape == SKIPS_SCALER) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, cp_unscale, 0, 0, 7, gs, gs + 20 * US, k_fill);
			g = gs + 20 * US;
			sync_call(0, g - 5 * US, 10 * US, cp_scaler, 0); /* found_inf.item() */
			g += 5 * US;
		}
		if (skipped || !last_of_group)
			continue;
		for (int k = 0; k < 3; k++) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, cp_opt, 0, 0, 7, gs, gs + 30 * US, k_fill);
			g = gs + 30 * US;
		}
	}
	exp_steps_count = steps;
	exp_steps_warmup = 1;
	exp_steps_median = 0; /* not checked: the steps' count is the point */
}

/* unmarked-inline: an example script's shape without marks: main() calls
 * train() once per epoch (train.py:90) and evaluate() after it (train.py:91);
 * train()'s batch loop is inline (forward at train.py:42 through model.py,
 * backward at :44, optimizer at :45).  2 epochs of 4 batches: 8 steps, one
 * per batch (train()'s spans, one per epoch, are not the steps), each from
 * its forward's first launch to the next one's, the last of an epoch to the
 * end of its optimizer launch (evaluate() is between steps: its Python, the
 * GPU idle, is no finding).  The first batch
 * also builds caches for 2 ms (one-time work: no finding). */
static void scen_unmarked_inline(void)
{
	common_defs();
	uint64_t cp_m90 = site("train.py", "main", 90, 0), cp_m91 = site("train.py", "main", 91, 0);
	uint64_t cp_train = site("train.py", "train", 38, cp_m90);
	uint64_t cp_t42 = site("train.py", "train", 42, cp_m90);
	uint64_t cp_fwd42 = site("model.py", "forward", 30, cp_t42);
	uint64_t cp_t44 = site("train.py", "train", 44, cp_m90);
	uint64_t cp_t45 = site("train.py", "train", 45, cp_m90);
	uint64_t cp_warm = site("model.py", "build_caches", 90, cp_t42);
	uint64_t cp_eval = site("train.py", "evaluate", 60, cp_m91);
	uint64_t cp_evk = site("train.py", "evaluate", 63, cp_m91);
	uint64_t g = 1000 * US, t0 = g - 100 * US;
	uint64_t begins[8], ends[8];
	int n = 0;
	for (int epoch = 0; epoch < 2; epoch++) {
		uint64_t tb = g;
		for (int b = 0; b < 4; b++, n++) {
			for (int k = 0; k < 7; k++) { /* 3 forward, 3 backward, 1 optimizer kernel of 40 us */
				uint64_t gs = g + 8 * US, launch = gs - 20 * US;
				if (!k)
					begins[n] = launch;
				if (n && !k && b)
					ends[n - 1] = launch;
				kernel(0, launch, k < 3 ? cp_fwd42 : k < 6 ? cp_t44 : cp_t45, 0, 0, 7, gs, gs + 40 * US,
				       k < 3 ? k_relu : k_gemm);
				g = gs + 40 * US;
				if (!n && k == 2) { /* one-time work in the first step, GPU idle */
					span(0, g + 5 * US, g + 2005 * US, cp_warm);
					g += 2010 * US;
				}
			}
		}
		ends[n - 1] = g - 56 * US; /* the end of its optimizer launch (at g - 60 us, 4 us): evaluation is between steps */
		span(0, tb - 20 * US, g + 5 * US, cp_train);
		/* evaluate(): 500 us of Python with the GPU idle, then 2 kernels. */
		span(0, g + 10 * US, g + 510 * US, cp_eval);
		g += 520 * US;
		for (int k = 0; k < 2; k++) {
			uint64_t gs = g + 8 * US;
			kernel(0, gs - 20 * US, cp_evk, 0, 0, 7, gs, gs + 40 * US, k_relu);
			g = gs + 40 * US;
		}
		g += 30 * US;
	}
	uint64_t lens[7];
	for (int i = 1; i < 8; i++)
		lens[i - 1] = ends[i] - begins[i];
	for (int i = 0; i < 7; i++)
		for (int j = i + 1; j < 7; j++)
			if (lens[j] < lens[i]) {
				uint64_t t = lens[i];
				lens[i] = lens[j];
				lens[j] = t;
			}
	win_begin = begins[1];
	win_end = ends[7];
	have_window = 1;
	exp_steps_count = 8;
	exp_steps_warmup = 1;
	exp_steps_median = lens[3];
	span(0, t0, g + 50 * US, cp_main);
}

/* unmarked-item: an inline loop in main() without marks, 12 steps; each
 * copies its batch (train.py:30), runs forward (:31, through model.py),
 * backward (:32) and the optimizer (:33), then reads the loss with .item()
 * at :34 -- a 4-byte device-to-host copy on a side stream and a sync
 * waiting for it while the optimizer's kernel still runs (the GPU runs
 * behind the host: no idle anywhere).  After the loop, a
 * torch.cuda.synchronize() (:36, a line no step made a call from) and 1 ms
 * of Python (save_checkpoint).  Each step runs to the next one's start; the
 * last one to the end of its .item()'s sync (its own trailing host call),
 * not before it and not through the sync after the loop: 11 steady steps,
 * 11 syncs at :34 (the analyzer before ended the last step at its copy: 10). */
static void scen_unmarked_item(void)
{
	common_defs();
	enum { N = 12 };
	uint64_t cp_mod = site("train.py", "<module>", 45, 0);
	uint64_t cp_fn = site("train.py", "main", 28, cp_mod);
	uint64_t cp_copy = site("train.py", "main", 30, cp_mod);
	uint64_t cp_f = site("model.py", "forward", 12, site("train.py", "main", 31, cp_mod));
	uint64_t cp_b = site("train.py", "main", 32, cp_mod);
	uint64_t cp_o = site("train.py", "main", 33, cp_mod);
	uint64_t cp_item = site("train.py", "main", 34, cp_mod);
	uint64_t cp_after = site("train.py", "main", 36, cp_mod);
	uint64_t cp_ckpt = site("train.py", "save_checkpoint", 20, site("train.py", "main", 37, cp_mod));
	uint64_t t = 1000 * US, t0 = t - 100 * US, begins[N + 1], free7 = 0;
	for (int i = 0; i < N; i++) {
		begins[i] = t;
		/* the batch: 1 MiB, pinned, behind the last step's optimizer on the GPU */
		uint64_t g = free7 > t + 10 * US ? free7 : t + 10 * US;
		copy(0, t, 5 * US, cp_copy, 0, 7, 1 << 20, TBP_COPY_H2D, TBP_COPYF_PINNED | TBP_COPYF_ASYNC, 0x1000,
		     0x70000000, g, g + 20 * US);
		g += 20 * US;
		for (int k = 0; k < 6; k++) { /* 4 forward, 2 backward kernels of 40 us, back to back */
			kernel(0, t + 8 * US + (uint64_t)k * 5 * US, k < 4 ? cp_f : cp_b, 0, 0, 7, g, g + 40 * US,
			       k < 4 ? k_relu : k_gemm);
			g += 40 * US;
		}
		uint64_t bwd_end = g;
		kernel(0, t + 38 * US, cp_o, 0, 0, 7, g, g + 200 * US, k_gemm); /* the optimizer: 200 us */
		free7 = g + 200 * US;
		/* loss.item(): the loss copied on a side stream, the host waits for it */
		copy(0, t + 45 * US, 3 * US, cp_item, 0, 9, 4, TBP_COPY_D2H, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC,
		     0x70100000, 0x2000, bwd_end, bwd_end + 2 * US);
		sync_call(0, t + 49 * US, bwd_end + 3 * US - (t + 49 * US), cp_item, 0);
		t = bwd_end + 8 * US;
	}
	begins[N] = t - 5 * US; /* the last step ends with its sync */
	sync_call(0, t + 10 * US, free7 + 1 * US - (t + 10 * US), cp_after, 0);
	span(0, free7 + 5 * US, free7 + 1005 * US, cp_ckpt);
	expect_finding("sync_hotspot", NULL, "train.py", "main", 34, N - 1);
	uint64_t lens[N - 1];
	for (int i = 1; i < N; i++)
		lens[i - 1] = begins[i + 1] - begins[i];
	for (int i = 0; i < N - 1; i++)
		for (int j = i + 1; j < N - 1; j++)
			if (lens[j] < lens[i]) {
				uint64_t x = lens[i];
				lens[i] = lens[j];
				lens[j] = x;
			}
	win_begin = begins[1];
	win_end = begins[N];
	have_window = 1;
	exp_steps_count = N;
	exp_steps_warmup = 1;
	exp_steps_median = lens[(N - 1) / 2];
	span(0, t0, free7 + 1010 * US, cp_fn);
}

/* launch-bound: marked steps of a loop that launches faster than nothing
 * else: a 300 us data-loading function (data.py:8), a forward of 40 kernels
 * of 6 us launched every 20 us from four lines (model.py:20-23: GPU gaps of
 * 14 us, under --gap-us), and an accuracy loop that reads one sample at a
 * time (train.py:12: argmax, a 4-byte copy back, .item()'s sync, 20 us of
 * Python before the next sample).  All of the steps' idle but 1 us between
 * steps and the last step's tail is the host's at a line, placed there
 * whatever --gap-us says; the .item() line's time at stake is its waits and
 * the 25 us the GPU then waits for the next launch, per sample. */
static void scen_launch_bound(int iters)
{
	common_defs();
	process_rec(host_tid[0]);
	uint64_t cp_mod = site("train.py", "<module>", 50, 0);
	uint64_t cp_fn = site("train.py", "main", 28, cp_mod);
	uint64_t cp_load = site("data.py", "next_batch", 8, site("train.py", "main", 30, cp_mod));
	uint64_t cp_fwd_call = site("train.py", "main", 31, cp_mod), cp_lines[4];
	for (int k = 0; k < 4; k++)
		cp_lines[k] = site("model.py", "forward", 20 + (uint64_t)k, cp_fwd_call);
	uint64_t cp_acc = site("train.py", "accuracy", 12, site("train.py", "main", 34, cp_mod));
	uint64_t t = 1000 * US, t0 = t - 100 * US;
	for (int i = 0; i < iters; i++) {
		iter_begin(t, i);
		span(0, t, t + 300 * US, cp_load);
		t += 300 * US;
		for (int k = 0; k < 40; k++) {
			kernel(0, t, cp_lines[k % 4], 0, 0, 7, t + 5 * US, t + 11 * US, k % 2 ? k_gemm : k_relu);
			t += 20 * US;
		}
		for (int smp = 0; smp < 16; smp++) {
			/* argmax [t+5, t+8], its 4 bytes back [t+8, t+10], the sync
			 * returning 2 us after the copy */
			kernel(0, t, cp_acc, 0, 0, 7, t + 5 * US, t + 8 * US, k_relu);
			copy(0, t + 5 * US, 3 * US, cp_acc, 0, 7, 4, TBP_COPY_D2H, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC,
			     0x70100000, 0x2000, t + 8 * US, t + 10 * US);
			sync_call(0, t + 9 * US, 3 * US, cp_acc, 0);
			t += 32 * US;
		}
		iter_end(t, i);
		t += 1 * US;
	}
	span(0, t0, t + 50 * US, cp_fn);
	uint64_t steady = (uint64_t)iters - 1;
	expect_finding("idle_gap", "python", "data.py", "next_batch", 8, steady);
	expect_finding("sync_hotspot", NULL, "train.py", "accuracy", 12, 16 * steady);
	expect_finding("kernel_burst", NULL, "model.py", "forward", 20, 40 * steady);
	expect_split("python", steady * 300 * US, "data.py", "next_batch", 8);
	/* the first kernel's launch (5 us) and 9 gaps of 14 us; 10 gaps each */
	expect_split("launch_bound", steady * 131 * US, "model.py", "forward", 20);
	for (int k = 1; k < 4; k++)
		expect_split("launch_bound", steady * 140 * US, "model.py", "forward", 20 + (uint64_t)k);
	/* the first sample 14 us after the forward, the others 25 us after the sync */
	expect_split("launch_bound", steady * 389 * US, "train.py", "accuracy", 12);
	/* 2 us a sample; the last step's last one is the window's tail */
	expect_split("sync", steady * 32 * US - 2 * US, "train.py", "accuracy", 12);
	/* after each step but the last, 20 us without a call until the next
	 * step's data loading: CPU work charged to the launch that follows */
	expect_split("python", (steady - 1) * 20 * US, "model.py", "forward", 20);
}

/* A GPU operation of dur ns launched at t (host) on stream 7: it starts when
 * the stream is free, or 2 us after its launch (scalars, oneshot). */
static uint64_t free7;
static uint64_t gpu_at(uint64_t t, uint64_t dur)
{
	uint64_t s = free7 > t + 2 * US ? free7 : t + 2 * US;
	free7 = s + dur;
	return s;
}

static void copy7(uint64_t t, uint64_t dur, uint64_t cp, uint64_t bytes, uint64_t ck, uint64_t flags, uint64_t gdur)
{
	uint64_t gs = gpu_at(t, gdur);
	copy(0, t, dur, cp, 0, 7, bytes, ck, flags, 0x1000, 0x70000000 + bytes, gs, gs + gdur);
}

/* scalars: the runner's marks around 8 iterations (the first warm-up); in
 * each, at train.py (the host ahead of the GPU, no idle gap):
 *   :20  x, y = x.cuda(), y.cuda()   a 32 KiB batch and its one 8-byte label, one line
 *   :21  t = t.cuda()                 16 float targets, 64 bytes: a batch's, not one element
 *   :24  head.to(dev)                 two 8-byte buffers through Module.to/_apply
 *   :22  torch.tensor(scale, device)  4 bytes, pageable, then a sync: THE scalar copy
 *   :23  (iteration 5 only) three 4-byte scalars: a one-off in one step
 * Only :22 is a scalar_copy (7 copies, each followed by a sync); the
 * analyzer before found :20, :21, :23 and :24 too (every host-to-device
 * copy of 64 bytes or less; and :20 again while the batch site was keyed
 * by call path, not by line). */
static void scen_scalars(void)
{
	common_defs();
	const char *mod = "/opt/py/lib/python3.11/site-packages/torch/nn/modules/module.py";
	uint64_t cp_mod = site("train.py", "<module>", 1, 0);
	uint64_t cp_batch = site("train.py", "<module>", 20, 0);
	/* (y.cuda() is the line's second call instruction: the tracer gives it
	 * a frame and call path of its own, with the same lines) */
	uint64_t cp_batch_y = site("train.py", "<module>", 20, 0);
	uint64_t cp_tgt = site("train.py", "<module>", 21, 0);
	uint64_t cp_scalar = site("train.py", "<module>", 22, 0);
	uint64_t cp_once = site("train.py", "<module>", 23, 0);
	uint64_t cp_buf = site(mod, "Module._apply.<locals>.convert", 1326,
			       site(mod, "Module._apply", 930, site(mod, "Module.to", 1340, site("train.py", "<module>", 24, 0))));
	uint64_t cp_k = site("model.py", "forward", 12, site("train.py", "<module>", 25, 0));
	uint64_t t = 1000 * US, t0 = t - 50 * US;
	for (int i = 0; i < 8; i++) {
		marker(t, TBP_MARK_ITER_BEGIN, (uint64_t)i);
		if (i == 1) {
			win_begin = t;
			have_window = 1;
		}
		copy7(t + 1 * US, 5 * US, cp_batch, 32 << 10, TBP_COPY_H2D, TBP_COPYF_PINNED | TBP_COPYF_ASYNC, 4 * US);
		copy7(t + 7 * US, 5 * US, cp_batch_y, 8, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		copy7(t + 13 * US, 5 * US, cp_tgt, 64, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		copy7(t + 19 * US, 5 * US, cp_buf, 8, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		copy7(t + 25 * US, 5 * US, cp_buf, 8, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		t += 31 * US;
		if (i == 5)
			for (int k = 0; k < 3; k++) {
				copy7(t, 5 * US, cp_once, 4, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
				t += 6 * US;
			}
		/* torch.tensor(scale, device=dev): the copy, then a sync until the GPU has drained */
		copy7(t, 4 * US, cp_scalar, 4, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		uint64_t drained = free7 > t + 5 * US ? free7 : t + 5 * US;
		sync_call(0, t + 5 * US, drained + 1 * US - (t + 5 * US), cp_scalar, 0);
		t = drained + 2 * US;
		for (int k = 0; k < 4; k++) { /* forward: 4 kernels of 40 us, the host 5 us apart */
			uint64_t gs = gpu_at(t, 40 * US);
			kernel(0, t, cp_k, 0, 0, 7, gs, gs + 40 * US, k_gemm);
			t += 5 * US;
		}
		marker(t, TBP_MARK_ITER_END, (uint64_t)i);
		if (!i)
			marker(t, TBP_MARK_WARMUP_END, 1);
		win_end = t;
		t += 1 * US;
	}
	expect_finding("scalar_copy", NULL, "train.py", "<module>", 22, 7);
	/* Its sync, in each of the 7 steps: a sync hotspot too (fewer than
	 * --sync-min, every step). */
	expect_finding("sync_hotspot", NULL, "train.py", "<module>", 22, 7);
	span(0, t0, free7 + 20 * US, cp_mod);
}

/* oneshot: no loop, no marks (load a model, infer once):
 *   :10  model.cuda()                  a 64 KiB weight, and three buffers of 8 bytes (num_batches_tracked
 *                                      and the like) through Module.cuda/_apply: parameters and buffers moved
 *   :11  torch.load(ckpt, map_location="cuda")  four 4-byte tensors through torch/serialization.py: loaded
 *   :12  torch.tensor(0.5, device=dev) one 4-byte copy and a sync: set-up, once
 *   :14  forward: 4 kernels;  :15 .tolist(): a copy back and a sync
 * No scalar_copy at all (the analyzer before: 3 at :10, 4 at :11, 1 at :12). */
static void scen_oneshot(void)
{
	common_defs();
	const char *mod = "/opt/py/lib/python3.11/site-packages/torch/nn/modules/module.py";
	uint64_t cp_mod = site("infer.py", "<module>", 1, 0);
	uint64_t cp_cuda = site(mod, "Module.cuda", 1098, site("infer.py", "<module>", 10, 0));
	uint64_t cp_par = site(mod, "Module.cuda.<locals>.<lambda>", 1098, site(mod, "Module._apply", 933, cp_cuda));
	uint64_t cp_bufs = site(mod, "Module.cuda.<locals>.<lambda>", 1098, site(mod, "Module._apply", 1036, cp_cuda));
	uint64_t cp_load = site("/opt/py/lib/python3.11/site-packages/torch/serialization.py", "_load.<locals>.restore_location",
				1500, site("/opt/py/lib/python3.11/site-packages/torch/serialization.py", "load", 1300,
					   site("infer.py", "<module>", 11, 0)));
	uint64_t cp_scalar = site("infer.py", "<module>", 12, 0);
	uint64_t cp_k = site("infer.py", "<module>", 14, 0);
	uint64_t cp_out = site("infer.py", "<module>", 15, 0);
	uint64_t t = 1000 * US;
	copy7(t, 20 * US, cp_par, 64 << 10, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 6 * US);
	t += 21 * US;
	for (int k = 0; k < 3; k++) {
		copy7(t, 5 * US, cp_bufs, 8, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		t += 6 * US;
	}
	for (int k = 0; k < 4; k++) {
		copy7(t, 5 * US, cp_load, 4, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
		t += 6 * US;
	}
	copy7(t, 4 * US, cp_scalar, 4, TBP_COPY_H2D, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
	sync_call(0, t + 5 * US, 3 * US, cp_scalar, 0);
	t += 9 * US;
	for (int k = 0; k < 4; k++) {
		uint64_t gs = gpu_at(t, 40 * US);
		kernel(0, t, cp_k, 0, 0, 7, gs, gs + 40 * US, k_gemm);
		t += 5 * US;
	}
	copy7(t, 4 * US, cp_out, 40, TBP_COPY_D2H, TBP_COPYF_PAGEABLE | TBP_COPYF_ASYNC, 2 * US);
	sync_call(0, t + 5 * US, free7 + 1 * US - (t + 5 * US), cp_out, 0);
	span(0, 900 * US, free7 + 20 * US, cp_mod);
}

/* cpu-steps: a CPU training loop (spans only, no marks) after 2 s of imports
 * (an import span with another inside) and 300 ms of set-up (build_model),
 * 12 steps at module level -- forward (train.py:21, 4 ms), the optimizer
 * (:22, torch's Adam.step, 3 ms), slow_metric (:23, the user's own, 6 ms),
 * a log line (:24, 1 ms) --, then 50 ms saving (:30).  Steps are detected
 * from the spans; the host tables cover the 11 steps after warm-up: the
 * imports, the set-up and the save are outside them, and slow_metric leads
 * the self time (the analyzer before led with the imports' 2 s). */
static void scen_cpu_steps(void)
{
	const uint64_t MS = 1000 * US;
	const char *imp = "<frozen importlib._bootstrap>";
	uint64_t cp_mod = site("train.py", "<module>", 1, 0);
	uint64_t cp_imp = site(imp, "_find_and_load", 1165, site("train.py", "<module>", 2, 0));
	uint64_t cp_imp2 = site(imp, "_find_and_load", 1165, site("/opt/py/lib/python3.11/site-packages/torch/__init__.py",
								   "<module>", 30, cp_imp));
	uint64_t cp_build = site("train.py", "build_model", 10, site("train.py", "<module>", 15, 0));
	uint64_t cp_forward = site("model.py", "forward", 30, site("train.py", "<module>", 21, 0));
	uint64_t cp_opt = site("/opt/py/lib/python3.11/site-packages/torch/optim/adam.py", "Adam.step", 215,
			       site("train.py", "<module>", 22, 0));
	uint64_t cp_metric = site("train.py", "slow_metric", 6, site("train.py", "<module>", 23, 0));
	uint64_t cp_log = site("train.py", "log", 8, site("train.py", "<module>", 24, 0));
	uint64_t cp_save = site("train.py", "save", 12, site("train.py", "<module>", 30, 0));
	uint64_t t = 1000 * US, t0 = t;
	span(0, t + 500 * MS, t + 1500 * MS, cp_imp2);
	span(0, t, t + 2000 * MS, cp_imp);
	t += 2000 * MS;
	span(0, t + 1 * MS, t + 301 * MS, cp_build);
	t += 302 * MS;
	for (int i = 0; i < 12; i++) {
		if (i == 1)
			win_begin = t;
		span(0, t, t + 4 * MS, cp_forward);
		span(0, t + 4 * MS, t + 7 * MS, cp_opt);
		span(0, t + 7 * MS, t + 13 * MS, cp_metric);
		span(0, t + 13 * MS, t + 14 * MS, cp_log);
		t += 14 * MS + 100 * US;
	}
	span(0, t + 1 * MS, t + 51 * MS, cp_save);
	span(0, t0 - 1 * MS, t + 52 * MS, cp_mod);
}

/* cpu-steps-missed: a CPU loop of 12 (spans only, no marks) in main
 * (train.py:20), as corpus amp_scaler.py on a slower machine: zero_grad
 * (:21, 200 us) is first, but its call in iteration `missed` was under the
 * tracer's threshold and left no span; the forward (:22, 4 ms), backward
 * (:23, 5 ms) and a log line (:24, 60 us, the shortest span) in every one;
 * with `torch_units`, the backward is torch's and GradScaler.step (:25,
 * 3 ms) is seen from iteration 4 on only (the earlier ones skipped, too short
 * to be seen); without, no unit call at all (the backward a function of the
 * user's).  12 steps, from the forward's line: zero_grad's line, entered in
 * 11, is no head (it made 11 steps, one holding two iterations).  Variants:
 * cpu-steps-missed (missed 2, torch's units), -plain (missed 7, none), -last
 * (missed 11, none).  cpu-steps-skipped-short (none missed, torch's units):
 * the four skipped iterations are short (a forward and a backward of 300 us
 * each, the whole iteration 1.3 ms) beside the others' 30 ms GradScaler.step
 * (39.7 ms): next to no work by time, as a loaded machine can make them, but
 * they run the body's lines: 12 steps from zero_grad's line (:21). */
static void scen_cpu_steps_missed(int missed, int torch_units, int short_skips)
{
	const uint64_t MS = 1000 * US;
	const char *torch = "/opt/py/lib/python3.11/site-packages/torch/";
	uint64_t at_main = site("train.py", "<module>", 30, 0);
	uint64_t cp_main_call = site("train.py", "main", 20, at_main);
	uint64_t cp_build = site("train.py", "build_model", 10, site("train.py", "main", 18, at_main));
	uint64_t cp_zero = site(joined(torch, "optim/optimizer.py"), "Optimizer.zero_grad", 950,
				site("train.py", "main", 21, at_main));
	uint64_t cp_forward = site("model.py", "forward", 30, site("train.py", "main", 22, at_main));
	uint64_t cp_backward = torch_units ? site(joined(torch, "_tensor.py"), "Tensor.backward", 570,
						  site("train.py", "main", 23, at_main))
					   : site("train.py", "backward_pass", 40, site("train.py", "main", 23, at_main));
	uint64_t cp_log = site("train.py", "log", 8, site("train.py", "main", 24, at_main));
	uint64_t cp_step = site(joined(torch, "amp/grad_scaler.py"), "GradScaler.step", 375,
				site("train.py", "main", 25, at_main));
	uint64_t t = 1000 * US, t0 = t;
	span(0, t + 1 * MS, t + 201 * MS, cp_build);
	t += 202 * MS;
	for (int i = 0; i < 12; i++) {
		if (i == 1)
			win_begin = t;
		if (i != missed)
			span(0, t, t + 200 * US, cp_zero);
		if (short_skips && i < 4) {
			span(0, t + 300 * US, t + 600 * US, cp_forward);
			span(0, t + 700 * US, t + 1000 * US, cp_backward);
			span(0, t + 1100 * US, t + 1160 * US, cp_log);
			t += 1300 * US;
			continue;
		}
		if (short_skips) {
			span(0, t + 300 * US, t + 4300 * US, cp_forward);
			span(0, t + 4400 * US, t + 9400 * US, cp_backward);
			span(0, t + 9500 * US, t + 9560 * US, cp_log);
			span(0, t + 9600 * US, t + 39600 * US, cp_step);
			t += 39700 * US;
			continue;
		}
		span(0, t + 300 * US, t + 4300 * US, cp_forward);
		span(0, t + 4400 * US, t + 9400 * US, cp_backward);
		span(0, t + 9500 * US, t + 9560 * US, cp_log);
		if (torch_units && i >= 4)
			span(0, t + 9600 * US, t + 12600 * US, cp_step);
		t += 12700 * US;
	}
	span(0, t0 - 1 * MS, t + 1 * MS, cp_main_call);
}

/* cpu-loader-epochs: a CPU loop over a DataLoader (spans only, no marks):
 * main (train.py) runs 3 epochs (:20, no span) of 4 batches, each from the
 * fetch at `for xb, yb in loader` (:21, DataLoader.__next__ 300 us with its
 * fetch and collate inside), the forward (:22, 2 ms), backward (:23, 3 ms)
 * and the optimizer step (:24, 1 ms).  An epoch ends with the loader's last
 * fetch (StopIteration, nothing inside), 4 ms long (a pause on a loaded
 * machine: as long as a step's fetch and forward), and a log line after the
 * inner loop (:26, 80 us); the next epoch starts with the loader's iterator
 * made at :21 (DataLoader.__iter__, 100 us).  12 steps from :21: the log line
 * lies after the body's lines.  cpu-loader-iter: no log line; the next
 * iterator, made at the head, tells the last fetch from a step.  (The
 * shortest span, 30 us, is inside the optimizer step: the last fetch's is no
 * span near the tracer's threshold.) */
static void scen_cpu_loader_epochs(int log_line)
{
	const uint64_t MS = 1000 * US;
	const char *torch = "/opt/py/lib/python3.11/site-packages/torch/";
	uint64_t at_main = site("train.py", "<module>", 40, 0);
	uint64_t cp_main_call = site("train.py", "main", 18, at_main);
	uint64_t cp_build = site("train.py", "build_model", 10, site("train.py", "main", 19, at_main));
	uint64_t at21 = site("train.py", "main", 21, at_main);
	uint64_t cp_next = site(joined(torch, "utils/data/dataloader.py"), "_BaseDataLoaderIter.__next__", 720, at21);
	uint64_t cp_fetch = site(joined(torch, "utils/data/_utils/fetch.py"), "_MapDatasetFetcher.fetch", 49,
				 site(joined(torch, "utils/data/dataloader.py"), "_SingleProcessDataLoaderIter._next_data", 785,
				      cp_next));
	uint64_t cp_collate = site(joined(torch, "utils/data/_utils/collate.py"), "default_collate", 340, cp_fetch);
	uint64_t cp_iter = site(joined(torch, "utils/data/dataloader.py"), "DataLoader.__iter__", 492, at21);
	uint64_t cp_forward = site(joined(torch, "nn/modules/module.py"), "Module._call_impl", 1791,
				   site("train.py", "main", 22, at_main));
	uint64_t cp_backward = site(joined(torch, "_tensor.py"), "Tensor.backward", 570, site("train.py", "main", 23, at_main));
	uint64_t cp_step = site(joined(torch, "optim/adam.py"), "Adam.step", 215, site("train.py", "main", 24, at_main));
	uint64_t cp_check = site(joined(torch, "optim/optimizer.py"), "Optimizer._accelerator_graph_capture_health_check",
				 485, cp_step);
	uint64_t cp_log = site("train.py", "log_epoch", 8, site("train.py", "main", 26, at_main));
	uint64_t t = 1000 * US, t0 = t;
	span(0, t + 1 * MS, t + 101 * MS, cp_build);
	t += 102 * MS;
	for (int epoch = 0; epoch < 3; epoch++) {
		uint64_t make = 100 * US; /* the epoch's iterator */
		span(0, t, t + make, cp_iter);
		t += make + 50 * US;
		for (int b = 0; b < 4; b++) {
			if (epoch == 0 && b == 1)
				win_begin = t;
			span(0, t, t + 300 * US, cp_next);
			span(0, t + 20 * US, t + 280 * US, cp_fetch);
			span(0, t + 150 * US, t + 270 * US, cp_collate);
			span(0, t + 400 * US, t + 2400 * US, cp_forward);
			span(0, t + 2500 * US, t + 5500 * US, cp_backward);
			span(0, t + 5600 * US, t + 6600 * US, cp_step);
			span(0, t + 5610 * US, t + 5640 * US, cp_check); /* the shortest span: 30 us */
			t += 6700 * US;
		}
		uint64_t last = 4 * MS; /* the last fetch, StopIteration: a pause on a loaded machine */
		span(0, t, t + last, cp_next);
		t += last + 20 * US;
		if (log_line) {
			span(0, t, t + 80 * US, cp_log);
			t += 100 * US;
		}
	}
	span(0, t0 - 1 * MS, t + 1 * MS, cp_main_call);
}

/* cpu-skip-forward: a CPU loop of 20 over a list of batches (no fetch
 * spans): the forward at `pred = model(x)` (:30, 1 ms) is its first line;
 * batches 4, 9, 10 and 17 are outliers whose iterations `continue` after it
 * (:32, no span), the others run zero_grad (:33, 200 us), backward (:34,
 * 2 ms) and the optimizer step (:35, 1 ms).  The forward of batch 10, right
 * after batch 9's, is warm: 300 us.  Every iteration is a step: 20 from :30
 * (a rule by the iteration's time took the skipped ones, under a quarter of
 * the others' 4.3 ms, for the loader's last fetch: 16). */
static void scen_cpu_skip_forward(void)
{
	const uint64_t MS = 1000 * US;
	const char *torch = "/opt/py/lib/python3.11/site-packages/torch/";
	uint64_t at_mod = site("train.py", "<module>", 50, 0);
	uint64_t cp_main_call = site("train.py", "main", 28, at_mod);
	uint64_t cp_forward = site(joined(torch, "nn/modules/module.py"), "Module._call_impl", 1791,
				   site("train.py", "main", 30, at_mod));
	uint64_t cp_linear = site(joined(torch, "nn/modules/linear.py"), "Linear.forward", 125, cp_forward);
	uint64_t cp_zero = site(joined(torch, "optim/optimizer.py"), "Optimizer.zero_grad", 950,
				site("train.py", "main", 33, at_mod));
	uint64_t cp_backward = site(joined(torch, "_tensor.py"), "Tensor.backward", 570, site("train.py", "main", 34, at_mod));
	uint64_t cp_step = site(joined(torch, "optim/sgd.py"), "SGD.step", 100, site("train.py", "main", 35, at_mod));
	uint64_t t = 1000 * US, t0 = t;
	for (int i = 0; i < 20; i++) {
		if (i == 1)
			win_begin = t;
		int skipped = i == 4 || i == 9 || i == 10 || i == 17;
		uint64_t fwd = i == 10 ? 300 * US : 1 * MS;
		span(0, t, t + fwd, cp_forward);
		span(0, t + 10 * US, t + fwd - 10 * US, cp_linear);
		t += fwd + 50 * US;
		if (skipped)
			continue;
		span(0, t, t + 200 * US, cp_zero);
		span(0, t + 300 * US, t + 2300 * US, cp_backward);
		span(0, t + 2400 * US, t + 3400 * US, cp_step);
		t += 3500 * US;
	}
	span(0, t0 - 1 * MS, t + 1 * MS, cp_main_call);
}

/* cpu-steps-paused: a short CPU loop (spans only, no marks) on a loaded
 * machine, as corpus notebook_ipython.py ran with two CPU hogs: main
 * (train.py:18) builds the model (:19, 2 ms), then 12 iterations of 1.3 ms
 * from the forward (:21, Module._call_impl with Linear.forward inside,
 * 500 us), torch's backward (:22, 400 us), the optimizer step (:23,
 * Adam.step, 300 us) and a log line (:24, 60 us, the shortest span): 15 ms
 * of work in all.  After the loop main flushes its log (:26) through the
 * library's Handler.flush, whose call waits 25 ms for a lock another thread
 * holds (IPython's history store waited 21 ms so): no work of the
 * program's, but a span longer than the loop's work.  12 steps from :21
 * (the loop held less than half of the time in the program's calls from its
 * start on: no steps).  cpu-steps-paused-plain: the forward, the backward
 * and the step are the user's own functions, the forward's batches of
 * varying size (300 to 700 us): no once-per-step calls, the loop by its
 * work (was: no loop found).  cpu-steps-paused-between: torch's calls, the
 * wait in the loop's own flush (:25) in iteration 6: 12 steps, as before. */
static void scen_cpu_steps_paused(int torch_units, int between)
{
	const uint64_t MS = 1000 * US;
	const char *torch = "/opt/py/lib/python3.11/site-packages/torch/";
	uint64_t at_mod = site("train.py", "<module>", 40, 0);
	uint64_t cp_main_call = site("train.py", "main", 18, at_mod);
	uint64_t cp_build = site("train.py", "build_model", 10, site("train.py", "main", 19, at_mod));
	uint64_t cp_forward = torch_units ? site(joined(torch, "nn/modules/module.py"), "Module._call_impl", 1791,
						 site("train.py", "main", 21, at_mod))
					  : site("model.py", "forward", 30, site("train.py", "main", 21, at_mod));
	uint64_t cp_linear = site(joined(torch, "nn/modules/linear.py"), "Linear.forward", 125, cp_forward);
	uint64_t cp_backward = torch_units ? site(joined(torch, "_tensor.py"), "Tensor.backward", 570,
						  site("train.py", "main", 22, at_mod))
					   : site("train.py", "backward_pass", 40, site("train.py", "main", 22, at_mod));
	uint64_t cp_step = torch_units ? site(joined(torch, "optim/adam.py"), "Adam.step", 215,
					      site("train.py", "main", 23, at_mod))
				       : site("train.py", "update", 50, site("train.py", "main", 23, at_mod));
	uint64_t cp_wait = site("/opt/py/lib/python3.11/logging/__init__.py", "Handler.flush", 1090,
				site("train.py", "main", between ? 25 : 26, at_mod));
	uint64_t cp_log = site("train.py", "log", 8, site("train.py", "main", 24, at_mod));
	uint64_t t = 1000 * US, t0 = t;
	span(0, t + 1 * MS, t + 3 * MS, cp_build);
	t += 4 * MS;
	for (int i = 0; i < 12; i++) {
		if (i == 1)
			win_begin = t;
		uint64_t fwd = torch_units ? 500 * US : (300 + 100 * (uint64_t)(i % 5)) * US;
		span(0, t, t + fwd, cp_forward);
		span(0, t + 10 * US, t + fwd - 10 * US, cp_linear);
		t += fwd + 50 * US;
		span(0, t, t + 400 * US, cp_backward);
		span(0, t + 450 * US, t + 750 * US, cp_step);
		span(0, t + 800 * US, t + 860 * US, cp_log);
		t += 900 * US;
		if (between && i == 6) {
			span(0, t, t + 25 * MS, cp_wait);
			t += 25 * MS + 50 * US;
		}
	}
	if (!between) {
		span(0, t + 100 * US, t + 25100 * US, cp_wait);
		t += 25200 * US;
	}
	span(0, t0 - 1 * MS, t + 1 * MS, cp_main_call);
}

/* prefix + rest, kept for the trace's life. */
static const char *joined(const char *prefix, const char *rest)
{
	size_t a = strlen(prefix), b = strlen(rest);
	char *p = malloc(a + b + 1);
	if (!p)
		abort();
	memcpy(p, prefix, a);
	memcpy(p + a, rest, b + 1);
	return p;
}

/* slow: model.py:30 forward takes 900 us a step instead of 700 (diff).
 * moved: the same program from another checkout and virtual environment
 * (/srv/ci/job7: its files by absolute path), as two CI jobs record it. */
static void scen_cpu(int slow, int moved)
{
	common_defs();
	/* The traced program ran in /home/u/proj: its files show relative to it. */
	const char *proj = moved ? "/srv/ci/job7/proj" : "/home/u/proj";
	const char *own = moved ? "/srv/ci/job7/proj/" : ""; /* its files as CPython names them */
	struct tbp_record *pr = push(&defs);
	pr->kind = TBP_K_PROCESS;
	pr->u.process.pid = 4242;
	pr->u.process.cwd = intern(proj);
	uint64_t cp_load = site(joined(own, "data.py"), "load_batch", 21, cp_main);
	uint64_t cp_model = site(joined(own, "model.py"), "forward", 30, cp_main);
	/* One library line reached by two call paths: one row by line, one
	 * function row; shown relative to site-packages. */
	const char *linear = joined(moved ? "/srv/ci/job7/venv" : "/opt/py",
				    "/lib/python3.11/site-packages/torch/nn/modules/linear.py");
	uint64_t cp_lin_m = site(linear, "Linear.forward", 130, cp_model);
	uint64_t cp_lin_l = site(linear, "Linear.forward", 130, cp_load);
	uint64_t cp_util = site(joined(proj, "/lib/util.py"), "helper", 7, cp_model);
	uint64_t t = 1000 * US;
	for (int i = 0; i < 10; i++) {
		span(0, t, t + 300 * US, cp_load);
		/* A span's start is its end less a length measured in CPU ticks:
		 * a child may seem to start before its parent. */
		span(0, t - US / 2, t + 19500, cp_lin_l);
		uint64_t step = (slow ? 1200 : 1000) * US;
		span(0, t + 300 * US, t + step, cp_model);
		span(0, t + 400 * US, t + 450 * US, cp_lin_m);
		span(0, t + 500 * US, t + 510 * US, cp_util);
		t += step;
	}
	/* Only the inner call of a recursion left a span (the outer one began
	 * before the span hook was in, as site's .pth imports do): the inner
	 * call's 50 us are the function's inclusive time as far as known. */
	const char *imp = joined(own, "imp.py");
	uint64_t cp_find = site(imp, "find", 5, site(imp, "find", 5, cp_main));
	span(0, 1600 * US, 1650 * US, cp_find);
	/* On another thread, a recursion whose outer call left a span too: the
	 * inner call is inside the outer one's inclusive time (100 us, not 140;
	 * self 60 + 40). */
	uint64_t cp_walk = site(imp, "walk", 9, cp_main);
	span(1, 1720 * US, 1760 * US, site(imp, "walk", 9, site(imp, "walk", 11, cp_main)));
	span(1, 1700 * US, 1800 * US, cp_walk);
	span(0, 900 * US, t + 10 * US, cp_main);
}

/* Robustness: syntactically valid records with nonsense in them — ends
 * before starts, unknown ids, cyclic call paths, frames naming missing
 * strings, huge sizes, frees of unknown pointers, unmatched correlations,
 * markers out of pairs.  tbanalyze must not crash or hang on any of it. */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? rng % n : rng;
}

static void scen_random(unsigned seed, int n)
{
	rng += seed * 0x2545F4914F6CDD1DULL;
	/* Definitions: a few good, some referring to nothing, one cycle. */
	common_defs();
	for (int i = 0; i < 20; i++) {
		struct tbp_record *c = push(&defs);
		c->kind = TBP_K_CALLPATH;
		c->u.callpath.id = 500 + i;
		c->u.callpath.frame = rnd(40);
		c->u.callpath.parent = i == 7 ? 507 : 500 + rnd(25); /* 507: its own parent */
		struct tbp_record *f = push(&defs);
		f->kind = TBP_K_PYFRAME;
		f->u.pyframe.id = 600 + i;
		f->u.pyframe.file = rnd(50);
		f->u.pyframe.function = rnd(50);
		f->u.pyframe.line = rnd(0);
		struct tbp_record *nn = push(&defs);
		nn->kind = TBP_K_NATIVE;
		nn->u.native.id = 700 + i;
		nn->u.native.pc = rnd(0);
		nn->u.native.parent = 700 + rnd(22);
	}
	static const uint8_t kinds[] = {TBP_K_API, TBP_K_LAUNCH, TBP_K_MEMCPY, TBP_K_MEMSET, TBP_K_MALLOC,
					TBP_K_FREE, TBP_K_SYNC, TBP_K_PY_SPAN, TBP_K_MARKER, TBP_K_LOST};
	static const uint8_t gkinds[] = {TBP_K_GPU_KERNEL, TBP_K_GPU_MEMCPY, TBP_K_GPU_MEMSET, TBP_K_GPU_SYNC};
	uint64_t t = 1000 * US;
	for (int i = 0; i < n; i++) {
		t += rnd(200 * US);
		int gpu_side = rnd(2);
		int th = (int)rnd(2);
		struct tbp_record *r = gpu_side ? push(&gpu[th]) : push(&host[th]);
		r->kind = gpu_side ? gkinds[rnd(4)] : kinds[rnd(sizeof kinds)];
		r->tid = gpu_side ? (uint32_t)th : host_tid[th];
		r->ts = t;
		const struct tbp_kind_info *ki = tbp_kind_lookup(r->kind);
		for (unsigned k = 0; ki && k < ki->nfields; k++) {
			switch (rnd(4)) {
			case 0: r->u.v[k] = rnd(8); break;
			case 1: r->u.v[k] = 500 + rnd(30); break;
			case 2: r->u.v[k] = t + rnd(400 * US) - 100 * US; break;
			default: r->u.v[k] = rnd(0); break;
			}
		}
	}
}

/* ------------------------------------------------------------ output */
/* Order within a stream as libtbprof writes it: calls at their start,
 * Python spans when they end (only then is a span known to be long). */
/* bursts-late: a GPU record written after a later one (CUPTI's buffers
 * handed over out of order, beyond any reorder window): its start, and the
 * key it is written at instead. */
static uint64_t late_gpu_ts, late_gpu_key;

static uint64_t write_key(const struct tbp_record *r)
{
	if (late_gpu_key && r->kind == TBP_K_GPU_KERNEL && r->ts == late_gpu_ts)
		return late_gpu_key;
	return r->kind == TBP_K_PY_SPAN ? r->u.py_span.end : r->ts;
}

static int cmp_rec(const void *x, const void *y)
{
	uint64_t a = write_key(x), b = write_key(y);
	return a < b ? -1 : a > b;
}

static void write_chunk(struct tbp_writer *w, unsigned sk, uint64_t id, struct evs *e, size_t *pos, uint64_t until)
{
	if (*pos >= e->n || write_key(&e->r[*pos]) >= until)
		return;
	if (tbp_writer_begin_chunk(w, sk, id)) {
		fprintf(stderr, "gen_planted: begin_chunk failed\n");
		exit(4);
	}
	while (*pos < e->n && write_key(&e->r[*pos]) < until) {
		if (tbp_writer_add(w, &e->r[*pos])) {
			fprintf(stderr, "gen_planted: add failed (kind %u)\n", e->r[*pos].kind);
			exit(4);
		}
		(*pos)++;
	}
	tbp_writer_end_chunk(w);
}

static void write_trace(const char *path)
{
	struct tbp_writer *w;
	struct tbp_writer_opts o = {.compression_level = 3,
				    .features = TBP_FEAT_PYTHON | (api_only && !cut_early ? 0 : TBP_FEAT_CUPTI)};
	if (tbp_writer_open(&w, path, &o)) {
		fprintf(stderr, "gen_planted: cannot write %s\n", path);
		exit(4);
	}
	for (int i = 0; i < 2; i++) { /* (an unused stream has no array: qsort(NULL) is undefined) */
		if (host[i].n)
			qsort(host[i].r, host[i].n, sizeof(struct tbp_record), cmp_rec);
		if (gpu[i].n)
			qsort(gpu[i].r, gpu[i].n, sizeof(struct tbp_record), cmp_rec);
	}
	size_t dpos = 0, hpos[2] = {0}, gpos[2] = {0};
	write_chunk(w, TBP_STREAM_DEFS, 0, &defs, &dpos, UINT64_MAX);
	/* Frames of 200 us; GPU records lag the host by one frame. */
	const uint64_t frame = 200 * US;
	uint64_t maxts = 0;
	/* Frames up to the last call's start; span ends may lie beyond. */
	for (int i = 0; i < 2; i++) {
		for (size_t k = 0; k < host[i].n; k++)
			if (host[i].r[k].kind != TBP_K_PY_SPAN && host[i].r[k].ts > maxts)
				maxts = host[i].r[k].ts;
		if (gpu[i].n && gpu[i].r[gpu[i].n - 1].ts > maxts)
			maxts = gpu[i].r[gpu[i].n - 1].ts;
	}
	for (uint64_t t = frame;; t += frame) {
		for (int i = 0; i < 2; i++)
			write_chunk(w, TBP_STREAM_THREAD, host_tid[i], &host[i], &hpos[i], t);
		/* gpu_at_end: as if CUPTI handed over every buffer at shutdown. */
		for (int i = 0; i < 2; i++)
			write_chunk(w, TBP_STREAM_GPU, (uint64_t)i, &gpu[i], &gpos[i],
				    gpu_at_end && t <= maxts + frame ? 0 : t - frame);
		tbp_writer_flush(w);
		int left = 0;
		for (int i = 0; i < 2; i++)
			left |= hpos[i] < host[i].n || gpos[i] < gpu[i].n;
		if (!left)
			break;
		if (t > maxts + 2 * frame || t > UINT64_MAX / 2) {
			/* Far-future keys (the random scenario): one last frame. */
			for (int i = 0; i < 2; i++) {
				write_chunk(w, TBP_STREAM_THREAD, host_tid[i], &host[i], &hpos[i], UINT64_MAX);
				write_chunk(w, TBP_STREAM_GPU, (uint64_t)i, &gpu[i], &gpos[i], UINT64_MAX);
			}
			tbp_writer_flush(w);
			break;
		}
	}
	struct tbp_record end = {.kind = TBP_K_END};
	end.u.end.records = 0;
	if (!cut_early) {
		tbp_writer_begin_chunk(w, TBP_STREAM_DEFS, 0);
		tbp_writer_add(w, &end);
		tbp_writer_end_chunk(w);
	}
	if (tbp_writer_close(w)) {
		fprintf(stderr, "gen_planted: close failed\n");
		exit(4);
	}
}

static int cmp_ivl(const void *x, const void *y)
{
	const struct ivl *a = x, *b = y;
	return a->s < b->s ? -1 : a->s > b->s;
}

/* Measure of the union of the selected intervals, clipped to [lo, hi). */
static uint64_t union_of(int dev, int stream, int kind, int ck, uint64_t lo, uint64_t hi)
{
	static struct ivl sel[200000];
	size_t n = 0;
	for (size_t i = 0; i < n_ivls; i++) {
		const struct ivl *v = &ivls[i];
		if (v->dev != dev || (stream >= 0 && v->stream != stream) || (kind >= 0 && v->kind != kind) ||
		    (ck >= 0 && v->ck != ck))
			continue;
		uint64_t s = v->s < lo ? lo : v->s, e = v->e > hi ? hi : v->e;
		if (e > s)
			sel[n++] = (struct ivl){.s = s, .e = e};
	}
	qsort(sel, n, sizeof sel[0], cmp_ivl);
	uint64_t total = 0, cs = 0, ce = 0;
	int open = 0;
	for (size_t i = 0; i < n; i++) {
		if (open && sel[i].s <= ce) {
			if (sel[i].e > ce)
				ce = sel[i].e;
			continue;
		}
		if (open)
			total += ce - cs;
		cs = sel[i].s;
		ce = sel[i].e;
		open = 1;
	}
	if (open)
		total += ce - cs;
	return total;
}

static void json_or_null(FILE *f, const char *s)
{
	if (s)
		fprintf(f, "\"%s\"", s);
	else
		fputs("null", f);
}

static void write_expect(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(4);
	}
	/* Window: markers, else first to last timed event of any stream. */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < 2; i++) {
		struct evs *sets[2] = {&host[i], &gpu[i]};
		for (int s = 0; s < 2; s++)
			for (size_t k = 0; k < sets[s]->n; k++) {
				const struct tbp_record *r = &sets[s]->r[k];
				uint64_t e = r->kind == TBP_K_MARKER ? r->ts : r->u.call.end; /* end is field 0 for all */
				if (r->ts < lo)
					lo = r->ts;
				if (e > hi)
					hi = e;
			}
	}
	if (have_window) {
		lo = win_begin;
		hi = win_end;
	}
	fprintf(f, "{\"window_ns\": %" PRIu64 ",\n \"devices\": {", hi - lo);
	for (int d = 0; d < 2; d++) {
		uint64_t busy = union_of(d, -1, -1, -1, lo, hi), dm = union_of(d, -1, 1, -1, lo, hi);
		fprintf(f, "%s\"%d\": {\"busy\": %" PRIu64 ", \"dm\": %" PRIu64 ", \"active\": %" PRIu64 ", \"idle\": %" PRIu64
			   ", \"h2d\": %" PRIu64 ", \"d2h\": %" PRIu64 ", \"d2d\": %" PRIu64 ", \"streams\": {",
			d ? ", " : "", d, busy, dm, busy - dm, hi - lo - busy, union_of(d, -1, 1, TBP_COPY_H2D, lo, hi),
			union_of(d, -1, 1, TBP_COPY_D2H, lo, hi), union_of(d, -1, 1, TBP_COPY_D2D, lo, hi));
		int first = 1;
		for (int s = 0; s < 16; s++) {
			uint64_t sb = union_of(d, s, -1, -1, lo, hi);
			int seen = 0;
			for (size_t i = 0; i < n_ivls && !seen; i++)
				seen = ivls[i].dev == d && ivls[i].stream == s;
			if (!seen)
				continue;
			fprintf(f, "%s\"%d\": {\"busy\": %" PRIu64 ", \"dm\": %" PRIu64 "}", first ? "" : ", ", s, sb,
				union_of(d, s, 1, -1, lo, hi));
			first = 0;
		}
		fprintf(f, "}}");
	}
	fprintf(f, "},\n \"counts\": {\"kernels\": %" PRIu64 ", \"memcpy\": %" PRIu64 ", \"memset\": %" PRIu64
		   ", \"malloc\": %" PRIu64 ", \"free\": %" PRIu64 ", \"sync\": %" PRIu64 ", \"errors\": %" PRIu64
		   "},\n \"findings\": [",
		cnt_launch, cnt_memcpy, cnt_memset, cnt_malloc, cnt_free, cnt_sync, cnt_errors);
	for (size_t i = 0; i < n_expect; i++) {
		fprintf(f, "%s\n  {\"kind\": \"%s\", \"cause\": ", i ? "," : "", expect[i].kind);
		json_or_null(f, expect[i].cause);
		fprintf(f, ", \"file\": ");
		json_or_null(f, expect[i].file);
		fprintf(f, ", \"function\": ");
		json_or_null(f, expect[i].function);
		fprintf(f, ", \"line\": %" PRIu64 ", \"count\": %" PRIu64 ", \"in_copy_ns\": %" PRIu64 ", \"copy\": ",
			expect[i].line, expect[i].count, expect[i].in_copy_ns);
		json_or_null(f, expect[i].copy);
		fprintf(f, ", \"advice\": ");
		json_or_null(f, expect[i].advice);
		fprintf(f, ", \"no_gpu_call_ns\": %" PRIu64 "}", expect[i].no_call_ns);
	}
	if (exp_steps_count)
		fprintf(f, "],\n \"steps\": {\"count\": %" PRIu64 ", \"warmup\": %" PRIu64 ", \"median_ns\": %" PRIu64 "}",
			exp_steps_count, exp_steps_warmup, exp_steps_median);
	else
		fprintf(f, "],\n \"steps\": null");
	fprintf(f, ",\n \"idle_splits\": [");
	for (size_t i = 0; i < n_splits; i++) {
		fprintf(f, "%s\n  {\"cause\": \"%s\", \"ns\": %" PRIu64 ", \"edge\": ", i ? "," : "", splits[i].cause,
			splits[i].ns);
		json_or_null(f, splits[i].edge);
		fprintf(f, ", \"file\": ");
		json_or_null(f, splits[i].file);
		fprintf(f, ", \"function\": ");
		json_or_null(f, splits[i].function);
		fprintf(f, ", \"line\": %" PRIu64 "}", splits[i].line);
	}
	fprintf(f, "]");
	if (have_burst_truth)
		fprintf(f, ",\n \"burst_truth\": {\"span_ns\": %" PRIu64 ", \"idle_ns\": %" PRIu64 "}", burst_truth_span,
			burst_truth_idle);
	fprintf(f, "}\n");
	fclose(f);
}

/* bursts2: one line launches tiny kernels on two streams at once (a
 * launch loop that alternates streams).  Each stream's burst covers the same
 * time, so the finding's time is the union of the two spans and its idle
 * the device's idle inside it, counted once; the truth is measured here
 * from the intervals written.  Then tiny kernels on one stream while a long
 * kernel on another keeps the device busy: the device never idles, so that
 * line is no burst finding. */

static void scen_bursts2(void)
{
	common_defs();
	uint64_t cp_zero = site("optim.py", "zero_grad", 88, cp_bwd);
	uint64_t cp_fill = site("optim.py", "fill_", 90, cp_bwd);
	uint64_t g = clean_step(1000 * US, 0);
	uint64_t lo = g + 10 * US;
	for (int k = 0; k < 40; k++) {
		uint64_t gs = lo + (uint64_t)k * 10 * US;
		kernel(0, gs - 30 * US, cp_zero, 0, 0, 7, gs, gs + 3 * US, k_fill);
		kernel(0, gs - 26 * US, cp_zero, 0, 0, 8, gs + 4 * US, gs + 7 * US, k_fill);
	}
	uint64_t hi = lo + 39 * 10 * US + 7 * US;
	have_burst_truth = 1;
	burst_truth_span = hi - lo;
	burst_truth_idle = hi - lo - union_of(0, -1, -1, -1, lo, hi);
	expect_finding("kernel_burst", NULL, "optim.py", "zero_grad", 88, 80);
	g = clean_step(hi, 0);
	uint64_t ls = g + 10 * US;
	kernel(0, ls - 40 * US, cp_fwd, 0, 0, 9, ls, ls + 300 * US, k_gemm);
	for (int k = 0; k < 20; k++) {
		uint64_t gs = ls + 5 * US + (uint64_t)k * 12 * US;
		kernel(0, gs - 30 * US, cp_fill, 0, 0, 7, gs, gs + 3 * US, k_fill);
	}
	clean_step(ls + 300 * US, 0);
}

/* bursts-wrapped: a per-parameter loop rescaling 24 gradients (train.py
 * rescale, lines 15-18), one tiny kernel a line, the first two through
 * torch's Python wrappers (torch.norm in torch/functional.py, `1.0 / n`
 * in Tensor.__rdiv__), the other two from the user's lines: 96 kernels in
 * a row from one loop, the GPU idle between them -- one burst at the
 * user's lines, whatever the innermost frame of each launch. */
static void scen_bursts_wrapped(void)
{
	common_defs();
	const char *torch = "/opt/py/lib/python3.11/site-packages/torch/";
	uint64_t cp_fn = site("train.py", "rescale", 12, cp_bwd);
	uint64_t cp_l15 = site("train.py", "rescale", 15, cp_bwd), cp_l16 = site("train.py", "rescale", 16, cp_bwd);
	uint64_t leaf[4] = {
		site(joined(torch, "functional.py"), "norm", 1740, cp_l15),
		site(joined(torch, "_tensor.py"), "Tensor.__rdiv__", 1124,
		     site(joined(torch, "_tensor.py"), "_handle_torch_function_and_wrap_type_error_to_not_implemented.<locals>.wrapped",
			  39, cp_l16)),
		site("train.py", "rescale", 17, cp_bwd),
		site("train.py", "rescale", 18, cp_bwd),
	};
	uint64_t g = clean_step(1000 * US, 0), lo = g + 10 * US, t = lo - 40 * US;
	for (int k = 0; k < 96; k++) {
		uint64_t gs = lo + (uint64_t)k * 14 * US;
		kernel(0, t, leaf[k % 4], 0, 0, 7, gs, gs + 3 * US, k_fill);
		t = gs - 20 * US;
	}
	span(0, lo - 45 * US, lo + 96 * 14 * US, cp_fn);
	clean_step(lo + 96 * 14 * US, 0);
}

/* One stream's run of 20 tiny kernels; another stream's kernel 200 us
 * after it (an idle gap); then the first stream's 21st kernel, 5 us after
 * its 20th but written after the other stream's (late, beyond the reorder
 * window).  Read in file order, the gap is counted before the late kernel
 * comes: the run must end there, not take the gap's idle in as well. */
static void scen_bursts_late(void)
{
	common_defs();
	uint64_t cp_zero = site("optim.py", "zero_grad", 88, cp_bwd);
	uint64_t g = clean_step(1000 * US, 0);
	uint64_t lo = g + 10 * US, gs = lo;
	for (int k = 0; k < 20; k++) {
		gs = lo + (uint64_t)k * 10 * US;
		kernel(0, gs - 30 * US, cp_zero, 0, 0, 7, gs, gs + 3 * US, k_fill);
	}
	uint64_t other = gs + 3 * US + 200 * US;
	kernel(0, other - 30 * US, cp_fwd, 0, 0, 8, other, other + 100 * US, k_gemm);
	late_gpu_ts = gs + 8 * US;
	late_gpu_key = other + 1;
	kernel(0, late_gpu_ts - 30 * US, cp_zero, 0, 0, 7, late_gpu_ts, late_gpu_ts + 3 * US, k_fill);
	clean_step(other + 100 * US, 0);
}

/* Bench trace: ITERS clean steps, written as they are made so memory stays
 * flat (no expectations: the bench only times the analysis). */
/* GPU chunks written `lag` frames after the host chunks of the same steps
 * (CUPTI hands over whole buffers late); 0 = in the same frame. */
static void write_big(const char *path, long iters, unsigned lag)
{
	struct tbp_writer *w;
	struct tbp_writer_opts o = {.compression_level = 3, .features = TBP_FEAT_PYTHON | TBP_FEAT_CUPTI};
	if (tbp_writer_open(&w, path, &o)) {
		fprintf(stderr, "gen_planted: cannot write %s\n", path);
		exit(4);
	}
	common_defs();
	size_t dpos = 0;
	write_chunk(w, TBP_STREAM_DEFS, 0, &defs, &dpos, UINT64_MAX);
	struct evs *lagged = lag ? calloc(lag, sizeof *lagged) : NULL;
	unsigned nframes = 0;
	if (lag && !lagged)
		exit(4);
	uint64_t g = 1000 * US;
	for (long i = 0; i < iters; i++) {
		g = clean_step(g, 0);
		if ((i + 1) % 256 && i + 1 < iters)
			continue;
		size_t hp = 0, gp = 0;
		qsort(host[0].r, host[0].n, sizeof(struct tbp_record), cmp_rec);
		qsort(gpu[0].r, gpu[0].n, sizeof(struct tbp_record), cmp_rec);
		write_chunk(w, TBP_STREAM_THREAD, host_tid[0], &host[0], &hp, UINT64_MAX);
		if (!lag) {
			write_chunk(w, TBP_STREAM_GPU, 0, &gpu[0], &gp, UINT64_MAX);
		} else {
			/* Keep this frame's GPU records; write the ones from lag
			 * frames ago (all that are left at the end). */
			struct evs *slot = &lagged[nframes % lag];
			if (nframes >= lag) {
				size_t lp = 0;
				write_chunk(w, TBP_STREAM_GPU, 0, slot, &lp, UINT64_MAX);
			}
			slot->n = 0;
			for (size_t j = 0; j < gpu[0].n; j++)
				*push(slot) = gpu[0].r[j];
			nframes++;
			if (i + 1 >= iters)
				for (unsigned f = nframes > lag ? nframes - lag : 0; f < nframes; f++) {
					size_t lp = 0;
					write_chunk(w, TBP_STREAM_GPU, 0, &lagged[f % lag], &lp, UINT64_MAX);
				}
		}
		tbp_writer_flush(w);
		host[0].n = gpu[0].n = 0;
		n_ivls = 0;
	}
	if (tbp_writer_close(w)) {
		fprintf(stderr, "gen_planted: close failed\n");
		exit(4);
	}
}

/* ------------------------------------------------------------ ranks
 * One rank of a data-parallel run (SPEC = "RANK,WORLD,STRAGGLER,MODE[,FLAGS]"):
 * 10 marked steps (the first warm-up), each loading a batch, a forward pass
 * and a collective that every rank leaves together once the last one has
 * arrived.  Rank STRAGGLER (-1: none) also spends 3 ms a step in
 * data.py:augment first, so the others wait for it in the collective.
 * Ranks arrive RANK x 3 us apart otherwise (noise, not a straggler).
 * MODE: c10d (torch.distributed.all_reduce spans, CPU), ddp (DDP: the wait
 * is inside backward()), nccl (NCCL all-reduce kernels on the GPU), none
 * (no collective: the straggler's steps end late).  FLAGS: n = no rank in
 * the process record (the file name says it); e = the trace starts a step
 * early (an extra unmarked step before the marks: alignment by wall clock);
 * s = the straggler's collective calls are not recorded (under the span
 * threshold: it does not wait in them); w = rank 1 has two warm-up steps,
 * the others one (its first steady step is their second: wall clock lines
 * them up); h = each rank on its own machine (CLOCK_MONOTONIC apart,
 * wall clocks agreeing). */
#define RANK_STEPS 10
#define RANK_SLOW_NS (3000 * US)
static void scen_rank(const char *spec)
{
	int rank = 0, world = 2, straggler = -1;
	char mode[16] = "c10d", flags[16] = "";
	if (sscanf(spec, "%d,%d,%d,%15[a-z0-9],%15[a-z]", &rank, &world, &straggler, mode, flags) < 4 || world < 1 ||
	    world > 64 || rank < 0 || rank >= world) {
		fprintf(stderr, "gen_planted rank: bad spec %s (RANK,WORLD,STRAGGLER,MODE[,FLAGS])\n", spec);
		exit(3);
	}
	int c10d = !strcmp(mode, "c10d"), ddp = !strcmp(mode, "ddp"), nccl = !strcmp(mode, "nccl"),
	    none = !strcmp(mode, "none");
	if (!c10d && !ddp && !nccl && !none) {
		fprintf(stderr, "gen_planted rank: unknown mode %s\n", mode);
		exit(3);
	}
	api_only = !nccl;
	common_defs();
	struct tbp_record *pr = push(&defs);
	pr->kind = TBP_K_PROCESS;
	pr->u.process.pid = 5000 + (uint64_t)rank;
	if (!strchr(flags, 'n')) {
		pr->u.process.rank = (uint64_t)rank;
		pr->u.process.world_size = (uint64_t)world;
		pr->u.process.local_rank = (uint64_t)rank;
	} else {
		pr->u.process.rank = pr->u.process.world_size = pr->u.process.local_rank = UINT64_MAX;
	}
	/* h: each rank on its own machine, whose CLOCK_MONOTONIC counts from
	 * its own boot (RANK x 7.5 s later); the wall clocks agree. */
	uint64_t clock_base = strchr(flags, 'h') ? (uint64_t)rank * 7500000 * US : 0;
	char host_name[32];
	snprintf(host_name, sizeof host_name, "node%d", strchr(flags, 'h') ? rank : 0);
	pr->u.process.host = intern(strdup(host_name));
	pr->ts = clock_base + 900 * US;
	pr->u.process.monotonic_ns = pr->ts;
	pr->u.process.realtime_ns = 1700000000000000000ULL + 900 * US;
	const char *c10d_file = "/opt/py/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py";
	const char *logger_file = "/opt/py/lib/python3.11/site-packages/torch/distributed/c10d_logger.py";
	const char *tensor_file = "/opt/py/lib/python3.11/site-packages/torch/_tensor.py";
	const char *ddp_file = "/opt/py/lib/python3.11/site-packages/torch/nn/parallel/distributed.py";
	uint64_t cp_loop = site("train.py", "main", 40, 0);
	uint64_t cp_step = site("train.py", "train_step", 12, cp_loop);
	uint64_t cp_load = site("data.py", "load_batch", 20, cp_step);
	uint64_t cp_aug = site("data.py", "augment", 31, cp_load);
	uint64_t cp_ddp = site(ddp_file, "DistributedDataParallel.forward", 1600, cp_step);
	uint64_t cp_fwd_fn = site("model.py", "forward", 28, ddp ? cp_ddp : cp_step);
	uint64_t cp_wrap = site(logger_file, "_exception_logger.<locals>.wrapper", 75, cp_step);
	uint64_t cp_ar = site(c10d_file, "all_reduce", 2500, cp_wrap);
	uint64_t cp_bwd_fn = site(tensor_file, "backward", 520, cp_step);
	uint64_t k_nccl = intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	uint64_t t = clock_base + 1000 * US, t_first = t;
	int early = strchr(flags, 'e') != NULL;
	for (int i = -early; i < RANK_STEPS; i++) {
		uint64_t sb = t;
		if (i >= 0)
			marker(sb, TBP_MARK_ITER_BEGIN, (uint64_t)i);
		uint64_t at = sb + 5 * US;
		uint64_t load_end = at + 200 * US + (rank == straggler ? RANK_SLOW_NS : 0);
		span(0, at, load_end, cp_load);
		if (rank == straggler)
			span(0, at + 50 * US, at + 50 * US + RANK_SLOW_NS, cp_aug);
		at = load_end;
		/* Every rank's arrival at the collective, this one's and the last's. */
		uint64_t arrive = at + 500 * US + (uint64_t)rank * 3 * US;
		uint64_t last = sb + 5 * US + 200 * US + 500 * US + (uint64_t)(world - 1) * 3 * US;
		if (straggler >= 0 && straggler < world) {
			uint64_t sl = sb + 5 * US + 200 * US + RANK_SLOW_NS + 500 * US + (uint64_t)straggler * 3 * US;
			if (sl > last)
				last = sl;
		}
		uint64_t done = none ? arrive + 300 * US : last + 300 * US;
		if (ddp)
			span(0, at, arrive, cp_ddp);
		span(0, at + 10 * US, arrive - 10 * US, cp_fwd_fn);
		/* s: the straggler's calls, which do not wait, are too short to
		 * be recorded as spans. */
		int unrecorded = rank == straggler && strchr(flags, 's');
		if (c10d && !unrecorded) {
			span(0, arrive, done, cp_wrap);
			span(0, arrive + 2 * US, done - 1 * US, cp_ar);
		} else if (ddp && !unrecorded) {
			span(0, arrive, done, cp_bwd_fn);
		} else if (nccl) {
			kernel(0, arrive - 5 * US, cp_step, 0, 0, 13, arrive, done, k_nccl);
			sync_call(0, arrive, done - arrive + 5 * US, cp_step, 0);
		}
		uint64_t se = done + 50 * US;
		span(0, sb + 1 * US, se - 1 * US, cp_step);
		if (i >= 0)
			marker(se, TBP_MARK_ITER_END, (uint64_t)i);
		/* w: rank 1 sets two steps apart as warm-up, the others one. */
		if (i == (strchr(flags, 'w') && rank == 1 ? 1 : 0))
			marker(se + 1 * US, TBP_MARK_WARMUP_END, (uint64_t)i + 1);
		t = se + 20 * US;
	}
	span(0, t_first - 100 * US, t + 100 * US, cp_loop);
}

/* What the cross-rank view must find for SPEC (every rank writes the same). */
static void write_rank_expect(const char *path, const char *spec)
{
	int rank = 0, world = 2, straggler = -1;
	char mode[16] = "c10d", flags[16] = "";
	sscanf(spec, "%d,%d,%d,%15[a-z0-9],%15[a-z]", &rank, &world, &straggler, mode, flags);
	/* w: every rank's steps compared from rank 1's first steady step on. */
	int steps = RANK_STEPS - 1 - (strchr(flags, 'w') && world > 1);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(4);
	}
	/* The others wait from their arrival to the straggler's, each steady step. */
	uint64_t wait = 0;
	if (straggler >= 0 && strcmp(mode, "none"))
		for (int r = 0; r < world; r++)
			if (r != straggler)
				wait += (uint64_t)steps * (RANK_SLOW_NS + (uint64_t)(straggler - r) * 3 * US);
	fprintf(f, "{\"straggler\": %d, \"file\": \"data.py\", \"function\": \"augment\", \"line\": 31, "
		   "\"steps\": %d, \"marked_steps\": %d, \"wait_ns\": %" PRIu64 ", \"extra_ns\": %" PRIu64
		   ", \"world\": %d}\n",
		straggler, steps, RANK_STEPS, wait, (uint64_t)(steps * RANK_SLOW_NS), world);
	fclose(f);
}

/* ------------------------------------------------------------ noisy steps
 * steps-noise SEED,SLOW_PCT[,STEPS[,marks|detected[,loaded|heavy]]]: one run
 * of a training loop on a loaded machine, for diff's statistics.  A warm-up
 * step (3x) and STEPS measured steps (30) of 10 ms, each 60 % GPU work (4
 * kernels, a sync) and the rest Python (load_batch), times (1 + SLOW_PCT/100):
 * the planted slowdown.  The machine's load, drawn from SEED:
 *   - the run's own level: x (1 + u), u uniform in +-1 %;
 *   - step-to-step jitter: x (1 + J * g), g a standard normal (within +-3);
 *   - preemption: a share P of the steps gets an exponential extra of mean 30 %;
 *   - a load episode: a quarter of the steps in a row, x E.
 * loaded: J 2.5 %, P 10 %, E 1.10 -- like the median of ten loaded runs on
 * the 2-core development VM (30 steps of 5 ms of Python, other builds
 * running): a spread (MAD) of 3.0 % (measured 2.9 %, 1.4-14.5 %), the
 * slowest step 1.44x the median (1.42x, 1.09-1.85x); heavy: J 3 %, P 20 %,
 * E 1.15 (MAD 4.5 %, the slowest 1.65x).  Marked with the runner's marks,
 * or left to be detected (train_step spans).  EXPECT.json: the measured
 * steps' lengths. */
static uint64_t noise_rng;
static double noise_unif(void)
{
	uint64_t z = (noise_rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static uint64_t noise_lens[8192];
static int noise_n;

static void scen_steps_noise(const char *spec)
{
	unsigned seed = 1, steps = 30;
	double slow = 0;
	char mode[16] = "marks", noise[16] = "loaded";
	if (sscanf(spec, "%u,%lf,%u,%15[a-z],%15[a-z]", &seed, &slow, &steps, mode, noise) < 2 || steps < 1 ||
	    steps > 8000 || (strcmp(mode, "marks") && strcmp(mode, "detected")) ||
	    (strcmp(noise, "loaded") && strcmp(noise, "heavy"))) {
		fprintf(stderr, "gen_planted: steps-noise SEED,SLOW_PCT[,STEPS[,marks|detected[,loaded|heavy]]]: bad %s\n",
			spec);
		exit(3);
	}
	int marks = !strcmp(mode, "marks"), heavy = !strcmp(noise, "heavy");
	double jitter = heavy ? 0.03 : 0.025, preempt = heavy ? 0.2 : 0.1, episode = heavy ? 1.15 : 1.10;
	noise_rng = 0x5eed0000ULL + seed;
	common_defs();
	uint64_t cp_loop = site("train.py", "main", 50, 0);
	uint64_t cp_step = site("train.py", "train_step", 20, cp_loop);
	uint64_t cp_load = site("data.py", "load_batch", 33, cp_step);
	double level = 1 + 0.02 * (noise_unif() - 0.5);
	unsigned ep_len = steps / 4, ep_at = (unsigned)(noise_unif() * (steps - ep_len + 1));
	uint64_t t = 1000 * US, t0 = t;
	for (unsigned i = 0; i <= steps; i++) {
		double g = sqrt(-2 * log(noise_unif())) * cos(6.283185307179586 * noise_unif());
		g = g > 3 ? 3 : g < -3 ? -3 : g;
		double x = 10e6 * (1 + slow / 100) * level * (1 + jitter * g);
		if (i >= 1 && i - 1 >= ep_at && i - 1 < ep_at + ep_len)
			x *= episode;
		if (noise_unif() < preempt)
			x += 10e6 * 0.3 * -log(noise_unif());
		if (!i)
			x *= 3; /* warm-up */
		uint64_t len = (uint64_t)x;
		if (i)
			noise_lens[noise_n++] = len;
		/* The step: 4 kernels of 15 % each launched at its start, a sync
		 * until they end, then Python. */
		uint64_t g0 = t + 30 * US, k_ns = len * 15 / 100;
		for (int k = 0; k < 4; k++)
			kernel(0, t + 10 * US + (uint64_t)k * 4 * US, k < 2 ? cp_fwd : cp_bwd, 0, 0, 7, g0 + k * k_ns,
			       g0 + (k + 1) * k_ns, k == 1 ? k_gemm : k_relu);
		uint64_t gend = g0 + 4 * k_ns;
		sync_call(0, t + 40 * US, gend + 5 * US - (t + 40 * US), cp_step, 0);
		span(0, gend + 10 * US, t + len - 10 * US, cp_load);
		span(0, t, t + len, cp_step);
		if (marks) {
			marker(t, TBP_MARK_ITER_BEGIN, i);
			marker(t + len, TBP_MARK_ITER_END, i);
			if (!i)
				marker(t + len + 5 * US, TBP_MARK_WARMUP_END, 1);
			t += len + 20 * US; /* the runner's time between steps */
		} else {
			t += len; /* a step function's step lasts until its next call */
		}
	}
	span(0, t0 - 100 * US, t + 100 * US, cp_loop);
}

static void write_noise_expect(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(4);
	}
	fprintf(f, "{\"warmup\": 1, \"step_ns\": [");
	for (int i = 0; i < noise_n; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", noise_lens[i]);
	fprintf(f, "]}\n");
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: gen_planted clean|planted|markers|markers-late|apionly|apionly-cut|apionly-cut-inuse|cpu|cpu-slow|bursts2|bursts-wrapped|bursts-late|threads|threads-main|allocs|host-work|unmarked|unmarked-inline|unmarked-item|scalars|oneshot|cpu-steps|cpu-steps-missed[-plain|-last]|cpu-steps-skipped-short|cpu-steps-paused[-plain|-between]|cpu-loader-epochs|cpu-loader-iter|cpu-skip-forward|unmarked-renamed|unmarked-shifted|host-work-merged|unmarked-edited|unmarked-loaded|unmarked-slow|unmarked-fixed|random|launch-bound|launch-rerun|big|big-lag|slow|bigmem OUT.zst EXPECT.json [ITERS]\n       gen_planted rank OUT.zst EXPECT.json RANK,WORLD,STRAGGLER,c10d|ddp|nccl|none[,FLAGS]\n"
				"       gen_planted steps-noise OUT.zst EXPECT.json SEED,SLOW_PCT[,STEPS[,marks|detected[,loaded|heavy]]]\n");
		return 3;
	}
	const char *s = argv[1];
	/* Correlation ids from this number on (default 1000): the kineto export
	 * is tested with ids in every range (tests/analyze/check_hta.py). */
	if (getenv("GEN_PLANTED_CORR_BASE"))
		corr_next = strtoull(getenv("GEN_PLANTED_CORR_BASE"), NULL, 0);
	if (!strcmp(s, "rank")) {
		scen_rank(argc > 4 ? argv[4] : "0,2,-1,c10d");
		write_trace(argv[2]);
		write_rank_expect(argv[3], argc > 4 ? argv[4] : "0,2,-1,c10d");
		return 0;
	}
	if (!strcmp(s, "steps-noise")) {
		scen_steps_noise(argc > 4 ? argv[4] : "1,0");
		write_trace(argv[2]);
		write_noise_expect(argv[3]);
		return 0;
	}
	int iters = argc > 4 ? atoi(argv[4]) : 20;
	if (!strcmp(s, "clean"))
		scen_clean(iters, 0);
	else if (!strcmp(s, "slow"))
		scen_clean(iters, 30 * US);
	else if (!strcmp(s, "bigmem")) {
		clean_alloc = 128 << 20;
		scen_clean(iters, 0);
	}
	else if (!strcmp(s, "big") || !strcmp(s, "big-lag")) {
		write_big(argv[2], argc > 4 ? atol(argv[4]) : 100000, s[3] ? 64 : 0);
		return 0;
	}
	else if (!strcmp(s, "planted"))
		scen_planted(0);
	else if (!strcmp(s, "markers"))
		scen_planted(1);
	else if (!strcmp(s, "markers-late")) {
		gpu_at_end = 1;
		scen_planted(1);
	}
	else if (!strcmp(s, "apionly") || !strncmp(s, "apionly-cut", 11)) {
		api_only = 1;
		cut_early = !strncmp(s, "apionly-cut", 11);
		if (!strcmp(s, "apionly-cut-inuse")) {
			/* ... where another tool held CUPTI: libtbprof's notice says so */
			struct tbp_record *n = push(&host[0]);
			n->kind = TBP_K_NOTICE;
			n->tid = host_tid[0];
			n->ts = 900 * US;
			n->u.notice.level = TBP_NOTE_WARN;
			n->u.notice.code = TBP_NOTICE_CUPTI_IN_USE;
			n->u.notice.message = intern("API-only trace: another tool holds CUPTI");
		}
		scen_planted(0);
		/* Without GPU timestamps no idle gap or burst can be seen. */
		size_t w = 0;
		for (size_t i = 0; i < n_expect; i++)
			if (strcmp(expect[i].kind, "idle_gap") && strcmp(expect[i].kind, "kernel_burst"))
				expect[w++] = expect[i];
		n_expect = w;
	} else if (!strcmp(s, "cpu"))
		scen_cpu(0, 0);
	else if (!strcmp(s, "cpu-slow"))
		scen_cpu(1, 0);
	else if (!strcmp(s, "cpu-moved"))
		scen_cpu(0, 1);
	else if (!strcmp(s, "bursts2"))
		scen_bursts2();
	else if (!strcmp(s, "bursts-wrapped"))
		scen_bursts_wrapped();
	else if (!strcmp(s, "bursts-late"))
		scen_bursts_late();
	else if (!strcmp(s, "threads"))
		scen_threads();
	else if (!strcmp(s, "allocs"))
		scen_allocs();
	else if (!strcmp(s, "host-work-merged")) {
		merge_marks = 1;
		merge_last = 6;
		scen_host_work();
	} else if (!strcmp(s, "host-work"))
		scen_host_work();
	else if (!strcmp(s, "threads-main"))
		scen_threads_main();
	else if (!strcmp(s, "unmarked"))
		scen_unmarked(0, 300 * US);
	else if (!strcmp(s, "unmarked-inline"))
		scen_unmarked_inline();
	else if (!strcmp(s, "unmarked-accum"))
		scen_unmarked_accum();
	else if (!strcmp(s, "unmarked-skips"))
		scen_unmarked_skips(SKIPS_PLAIN);
	else if (!strcmp(s, "unmarked-scaler"))
		scen_unmarked_skips(SKIPS_SCALER);
	else if (!strcmp(s, "unmarked-accum-skip"))
		scen_unmarked_skips(SKIPS_ACCUM);
	else if (!strcmp(s, "unmarked-item"))
		scen_unmarked_item();
	else if (!strcmp(s, "scalars"))
		scen_scalars();
	else if (!strcmp(s, "oneshot"))
		scen_oneshot();
	else if (!strcmp(s, "cpu-steps"))
		scen_cpu_steps();
	else if (!strcmp(s, "cpu-steps-missed"))
		scen_cpu_steps_missed(2, 1, 0);
	else if (!strcmp(s, "cpu-steps-missed-plain"))
		scen_cpu_steps_missed(7, 0, 0);
	else if (!strcmp(s, "cpu-steps-missed-last"))
		scen_cpu_steps_missed(11, 0, 0);
	else if (!strcmp(s, "cpu-loader-epochs"))
		scen_cpu_loader_epochs(1);
	else if (!strcmp(s, "cpu-loader-iter"))
		scen_cpu_loader_epochs(0);
	else if (!strcmp(s, "cpu-skip-forward"))
		scen_cpu_skip_forward();
	else if (!strcmp(s, "cpu-steps-skipped-short"))
		scen_cpu_steps_missed(-1, 1, 1);
	else if (!strcmp(s, "cpu-steps-paused"))
		scen_cpu_steps_paused(1, 0);
	else if (!strcmp(s, "cpu-steps-paused-plain"))
		scen_cpu_steps_paused(0, 0);
	else if (!strcmp(s, "cpu-steps-paused-between"))
		scen_cpu_steps_paused(1, 1);
	else if (!strcmp(s, "unmarked-renamed")) {
		/* The same program as unmarked, its script renamed (train.py ->
		 * train_v2.py) and its model moved to another directory (model.py ->
		 * exp/model.py), as a user compares train.py with train_v2.py. */
		scen_unmarked(0, 300 * US);
		for (size_t i = 0; i < defs.n; i++) {
			struct tbp_record *r = &defs.r[i];
			if (r->kind != TBP_K_STRING)
				continue;
			if (r->blob_len == 8 && !memcmp(r->blob, "train.py", 8))
				r->blob = "train_v2.py";
			else if (r->blob_len == 8 && !memcmp(r->blob, "model.py", 8))
				r->blob = "exp/model.py";
			r->blob_len = (uint32_t)strlen(r->blob);
		}
	}
	else if (!strcmp(s, "unmarked-shifted") || !strcmp(s, "unmarked-edited")) {
		/* The same program as unmarked after an edit: 4 lines deleted at
		 * train.py:45 (in main, above the loop's line 50), so main:50 is now
		 * main:46, main:120 main:116 and step:60 step:56, train_step:20
		 * above unchanged.
		 * edited: the model's forward also renamed forward_v2 (main's line
		 * calls another function: a changed line). */
		scen_unmarked(0, 300 * US);
		for (size_t i = 0; i < defs.n; i++) {
			struct tbp_record *r = &defs.r[i];
			int in_train = 0;
			for (size_t j = 0; r->kind == TBP_K_PYFRAME && j < defs.n && !in_train; j++)
				in_train = defs.r[j].kind == TBP_K_STRING && defs.r[j].u.string.id == r->u.pyframe.file &&
					   defs.r[j].blob_len == 8 && !memcmp(defs.r[j].blob, "train.py", 8);
			if (in_train && r->u.pyframe.line >= 45)
				r->u.pyframe.line -= 4;
			if (s[9] == 'e' && r->kind == TBP_K_STRING && r->blob_len == 7 && !memcmp(r->blob, "forward", 7)) {
				r->blob = "forward_v2";
				r->blob_len = 10;
			}
		}
	}
	else if (!strcmp(s, "unmarked-slow"))
		scen_unmarked(400 * US, 300 * US);
	else if (!strcmp(s, "unmarked-fixed")) /* the data loading fixed, one kernel slower: faster steps, more GPU busy */
		scen_unmarked(100 * US, 100 * US);
	else if (!strcmp(s, "unmarked-loaded")) /* the host slower (its data loading 600 us), the GPU's work the same */
		scen_unmarked(0, 600 * US);
	else if (!strcmp(s, "random"))
		scen_random((unsigned)iters, 3000);
	else if (!strcmp(s, "launch-bound"))
		scen_launch_bound(argc > 4 ? iters : 10);
	else if (!strcmp(s, "launch-rerun")) {
		/* launch-bound, a second WARMUP_END after step 25 of 40: the
		 * gaps pass has filed the idle parts of the first steady steps
		 * (its queue holds 1024 pieces, ~57 a step) before they move. */
		rerun_warmup_after = 25;
		scen_launch_bound(40);
	}
	else {
		fprintf(stderr, "gen_planted: unknown scenario %s\n", s);
		return 3;
	}
	write_trace(argv[2]);
	write_expect(argv[3]);
	return 0;
}
