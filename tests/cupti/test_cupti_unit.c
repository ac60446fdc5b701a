/*
 * Unit tests of libtbprof/cupti.c against a scriptable libcupti
 * (fake_cupti.c) and an in-memory core (fake_core.c).  One scenario per
 * process (CUPTI state is once per process): test_cupti_unit SCENARIO.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cupti.h>

#include "core.h"
#include "fake_core.h"
#include "fake_cupti.h"

static int failures;
#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			failures++;                                                      \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                             \
		}                                                                        \
	} while (0)

static size_t count_kind(unsigned kind)
{
	size_t n = 0;
	for (size_t i = 0; i < fake_nrecords; i++)
		n += fake_records[i].kind == kind;
	return n;
}

static const struct tbp_record *nth_kind(unsigned kind, size_t nth)
{
	for (size_t i = 0; i < fake_nrecords; i++)
		if (fake_records[i].kind == kind && nth-- == 0)
			return &fake_records[i];
	return NULL;
}

static size_t count_gpu(void)
{
	return count_kind(TBP_K_GPU_KERNEL) + count_kind(TBP_K_GPU_MEMCPY) +
	       count_kind(TBP_K_GPU_MEMSET) + count_kind(TBP_K_GPU_SYNC);
}

/* The GPU record (any GPU kind) whose corr is `corr`, or NULL. */
static const struct tbp_record *gpu_by_corr(uint64_t corr)
{
	for (size_t i = 0; i < fake_nrecords; i++) {
		const struct tbp_record *r = &fake_records[i];
		if (r->kind >= TBP_K_GPU_KERNEL && r->kind <= TBP_K_GPU_SYNC &&
		    r->u.gpu_kernel.corr == corr)
			return r;
	}
	return NULL;
}

/* A plan of API calls, each with one GPU op (or none), run through the
 * hooks' protocol: corr = next, enter, op, exit. */
struct call { uint64_t corr; struct fakecupti_op op; int has_op; };
static struct call calls[256];
static size_t ncalls;
static uint64_t next_corr = 1000;

static void api_call(const struct fakecupti_op *op)
{
	struct call *c = &calls[ncalls++];
	c->corr = next_corr += 7;
	tbp_gpu_call_enter(c->corr);
	if (op) {
		c->op = *op;
		c->has_op = 1;
		fakecupti_op(op);
	} else {
		fakecupti_api_call();
	}
	tbp_gpu_call_exit(c->corr);
}

/* Six GPU ops of every kind, device 1, on two streams. */
static void run_workload(void)
{
	uint64_t t = tbp_now() + 1000000;
	struct fakecupti_op k = { .kind = FAKE_KERNEL, .name = "_Z6vecAddPfS_S_i", .device = 1,
				  .context = 5, .stream = 7, .start = t, .end = t + 5000,
				  .grid = { 4, 2, 1 }, .block = { 256, 1, 1 } };
	struct fakecupti_op h2d = { .kind = FAKE_MEMCPY, .device = 1, .context = 5, .stream = 7,
				    .start = t + 6000, .end = t + 9000, .bytes = 4096,
				    .copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
				    .src_kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
				    .dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE };
	struct fakecupti_op ms = { .kind = FAKE_MEMSET, .device = 1, .context = 5, .stream = 13,
				   .start = t + 9500, .end = t + 9900, .bytes = 512 };
	struct fakecupti_op d2h = { .kind = FAKE_MEMCPY, .device = 1, .context = 5, .stream = 13,
				    .start = t + 10000, .end = t + 12000, .bytes = 4,
				    .copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
				    .src_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
				    .dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED };
	struct fakecupti_op sy = { .kind = FAKE_SYNC, .device = 1, .context = 5, .stream = 0xffffffffu,
				   .start = t + 12000, .end = t + 12100,
				   .sync_type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE };
	struct fakecupti_op peer = { .kind = FAKE_PEER, .device = 1, .context = 5, .stream = 13,
				     .start = t + 12200, .end = t + 12900, .bytes = 1 << 20 };
	api_call(&k);
	api_call(NULL); /* an API call without GPU work */
	api_call(&peer);
	api_call(&h2d);
	api_call(&ms);
	api_call(&d2h);
	api_call(&sy);
}

/* Every planned op is in the trace once, joined to its call, with the
 * expected times (within `tolerance`) and fields. */
static void check_workload_plus(uint64_t tolerance, size_t others)
{
	size_t expected = others;
	for (size_t i = 0; i < ncalls; i++) {
		const struct call *c = &calls[i];
		if (!c->has_op) {
			CHECK(gpu_by_corr(c->corr) == NULL, "call %zu has no GPU work", i);
			continue;
		}
		expected++;
		const struct tbp_record *r = gpu_by_corr(c->corr);
		CHECK(r != NULL, "GPU record of call %zu (corr %llu) missing", i,
		      (unsigned long long)c->corr);
		if (!r)
			continue;
		long long dts = (long long)(r->ts - c->op.start);
		long long dte = (long long)(r->u.gpu_kernel.end - c->op.end);
		CHECK(llabs(dts) <= (long long)tolerance && llabs(dte) <= (long long)tolerance,
		      "call %zu: start off by %lld ns, end by %lld ns (tolerance %llu)", i, dts, dte,
		      (unsigned long long)tolerance);
		CHECK(r->stream_kind == TBP_STREAM_GPU, "stream kind %u", r->stream_kind);
		CHECK(r->tid == 1 && r->u.gpu_kernel.device == 1, "device %u/%llu", r->tid,
		      (unsigned long long)r->u.gpu_kernel.device);
		CHECK(r->u.gpu_kernel.stream == c->op.stream, "stream %llu",
		      (unsigned long long)r->u.gpu_kernel.stream);
		CHECK(r->u.gpu_kernel.context == 5, "context");
		switch (c->op.kind) {
		case FAKE_KERNEL:
			CHECK(r->kind == TBP_K_GPU_KERNEL, "kind %u", r->kind);
			CHECK(strcmp(fake_string(r->u.gpu_kernel.name),
				     "vecAdd(float*, float*, float*, int)") == 0,
			      "kernel name '%s'", fake_string(r->u.gpu_kernel.name));
			CHECK(r->u.gpu_kernel.grid_x == 4 && r->u.gpu_kernel.grid_y == 2 &&
			      r->u.gpu_kernel.block_x == 256 && r->u.gpu_kernel.registers == 32 &&
			      r->u.gpu_kernel.static_shmem == 1024 && r->u.gpu_kernel.dynamic_shmem == 2048,
			      "kernel geometry");
			break;
		case FAKE_MEMCPY:
			CHECK(r->kind == TBP_K_GPU_MEMCPY, "kind %u", r->kind);
			CHECK(r->u.gpu_memcpy.bytes == c->op.bytes, "bytes");
			if (c->op.copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD)
				CHECK(r->u.gpu_memcpy.copy_kind == TBP_COPY_H2D &&
				      r->u.gpu_memcpy.src_kind == TBP_MEM_PAGEABLE &&
				      r->u.gpu_memcpy.dst_kind == TBP_MEM_DEVICE, "H2D kinds");
			else
				CHECK(r->u.gpu_memcpy.copy_kind == TBP_COPY_D2H &&
				      r->u.gpu_memcpy.src_kind == TBP_MEM_DEVICE &&
				      r->u.gpu_memcpy.dst_kind == TBP_MEM_PINNED, "D2H kinds");
			break;
		case FAKE_PEER:
			CHECK(r->kind == TBP_K_GPU_MEMCPY && r->u.gpu_memcpy.copy_kind == TBP_COPY_PEER &&
			      r->u.gpu_memcpy.bytes == 1 << 20 && r->u.gpu_memcpy.src_kind == TBP_MEM_DEVICE,
			      "peer copy fields");
			break;
		case FAKE_MEMSET:
			CHECK(r->kind == TBP_K_GPU_MEMSET && r->u.gpu_memset.bytes == 512 &&
			      r->u.gpu_memset.mem_kind == TBP_MEM_DEVICE, "memset fields");
			break;
		case FAKE_SYNC:
			CHECK(r->kind == TBP_K_GPU_SYNC &&
			      r->u.gpu_sync.sync_kind == TBP_SYNC_CONTEXT && r->u.gpu_sync.event == 7,
			      "sync fields");
			break;
		}
	}
	CHECK(count_gpu() == expected, "%zu GPU records, expected %zu", count_gpu(), expected);
	CHECK(fakecupti_push_balance() == 0, "push/pop balance %ld", fakecupti_push_balance());
}

static void check_workload(uint64_t tolerance) { check_workload_plus(tolerance, 0); }

static const struct tbp_record *only_clock(void)
{
	CHECK(count_kind(TBP_K_CLOCK) == 1, "%zu CLOCK records", count_kind(TBP_K_CLOCK));
	return nth_kind(TBP_K_CLOCK, 0);
}

static size_t notices(unsigned code)
{
	size_t n = 0;
	for (size_t i = 0; i < fake_nrecords; i++)
		n += fake_records[i].kind == TBP_K_NOTICE && fake_records[i].u.notice.code == code;
	return n;
}

static void configure(struct fakecupti_config c) { fakecupti_configure(&c); }

static const struct tbp_record *join_notice(void)
{
	for (size_t i = 0; i < fake_nrecords; i++)
		if (fake_records[i].kind == TBP_K_NOTICE && fake_records[i].u.notice.code == TBP_NOTICE_CUPTI_JOIN)
			return &fake_records[i];
	return NULL;
}

/* ---------------------------------------------------------------- scenarios */

static void joined(int ext_after, size_t per_buffer)
{
	configure((struct fakecupti_config){ .ext_after = ext_after, .records_per_buffer = per_buffer });
	tbp_cupti_start();
	run_workload();
	tbp_cupti_flush();
	run_workload();   /* and once more after a flush */
	tbp_cupti_stop();
	check_workload(0);
	const struct tbp_record *c = only_clock();
	CHECK(c && c->u.clock.method == TBP_CLOCK_CUPTI_CALLBACK && c->u.clock.offset_ns == 0 &&
	      c->u.clock.uncertainty_ns == 0, "clock");
	CHECK(fakecupti_ts_callback_registered(), "timestamp callback registered");
	CHECK(fakecupti_pushes() == (long)ncalls, "%ld pushes for %zu calls", fakecupti_pushes(), ncalls);
	/* One notice: every GPU record joined (at exit, INFO: the report stays quiet). */
	CHECK(count_kind(TBP_K_NOTICE) == 1 && join_notice() && join_notice()->u.notice.level == TBP_NOTE_INFO,
	      "one notice, the join's");
	char all[64];
	snprintf(all, sizeof all, "%zu of %zu GPU records joined", count_gpu(), count_gpu());
	CHECK(join_notice() && strstr(fake_string(join_notice()->u.notice.message), all),
	      "join notice '%s' says '%s'", join_notice() ? fake_string(join_notice()->u.notice.message) : "", all);
}

static void scenario_bracketed(void)
{
	configure((struct fakecupti_config){ .refuse_ts_callback = 1, .gpu_offset_ns = 3000000000ll });
	tbp_cupti_start();
	run_workload();
	tbp_cupti_stop();
	const struct tbp_record *c = only_clock();
	CHECK(c && c->u.clock.method == TBP_CLOCK_BRACKETED, "method");
	if (!c)
		return;
	int64_t offset = (int64_t)c->u.clock.offset_ns;
	CHECK(llabs(offset + 3000000000ll) <= (long long)c->u.clock.uncertainty_ns,
	      "offset %lld, uncertainty %llu", (long long)offset,
	      (unsigned long long)c->u.clock.uncertainty_ns);
	check_workload(c->u.clock.uncertainty_ns);
}

static void scenario_orphan(void)
{
	configure((struct fakecupti_config){ 0 });
	tbp_cupti_start();
	uint64_t t = tbp_now();
	struct fakecupti_op k = { .kind = FAKE_KERNEL, .name = "plain_c_kernel", .device = 0,
				  .context = 1, .stream = 3, .start = t, .end = t + 10 };
	fakecupti_op(&k); /* GPU work from an API call we did not hook */
	run_workload();
	tbp_cupti_flush();
	tbp_cupti_flush();
	tbp_cupti_stop();
	check_workload_plus(0, 1);
	CHECK(count_gpu() == 7, "orphan emitted exactly once (%zu GPU records)", count_gpu());
	CHECK(gpu_by_corr(0) && strcmp(fake_string(gpu_by_corr(0)->u.gpu_kernel.name),
				       "plain_c_kernel") == 0, "orphan kept with corr 0");
	/* 6 of 7 joined is under 99 %: a warning, and why. */
	const struct tbp_record *n = join_notice();
	const char *text = n ? fake_string(n->u.notice.message) : "";
	CHECK(n && n->u.notice.level == TBP_NOTE_WARN && strstr(text, "6 of 7 GPU records joined") &&
	      strstr(text, "1 had no API record from CUPTI"), "join notice '%s'", text);
}

static void in_use(int at_subscribe)
{
	configure((struct fakecupti_config){ .busy_subscribe = at_subscribe, .busy_enable = !at_subscribe });
	tbp_cupti_start();
	tbp_cupti_start();
	run_workload();
	tbp_cupti_flush();
	tbp_cupti_stop();
	CHECK(notices(TBP_NOTICE_CUPTI_IN_USE) == 1, "%zu in-use notices", notices(TBP_NOTICE_CUPTI_IN_USE));
	const struct tbp_record *c = only_clock();
	CHECK(c && c->u.clock.method == TBP_CLOCK_HOOK_SIDE, "hook-side clock");
	CHECK(count_gpu() == 0, "no GPU records");
	CHECK(fakecupti_pushes() == 0, "no pushes while another tool owns CUPTI");
	CHECK(fake_warnings == 1, "%d warnings", fake_warnings);
	if (at_subscribe)
		CHECK(!fakecupti_callbacks_registered() && !fakecupti_ts_callback_registered(),
		      "the other tool's callbacks left alone");
}

static void api_only(const char *why, int no_driver)
{
	configure((struct fakecupti_config){ .no_driver = no_driver });
	tbp_cupti_start();
	run_workload();
	tbp_cupti_flush();
	tbp_cupti_stop();
	CHECK(notices(TBP_NOTICE_NO_CUPTI) == 1, "%s: %zu no-CUPTI notices", why,
	      notices(TBP_NOTICE_NO_CUPTI));
	CHECK(count_kind(TBP_K_NOTICE) == 1, "one notice only");
	const struct tbp_record *c = only_clock();
	CHECK(c && c->u.clock.method == TBP_CLOCK_HOOK_SIDE, "hook-side clock");
	CHECK(count_gpu() == 0 && fakecupti_pushes() == 0, "nothing collected");
	CHECK(!fakecupti_callbacks_registered(), "libcupti untouched");
	CHECK(fake_warnings == 0, "silent unless TBPROF_VERBOSE");
}

/* A libcupti that dies in its first call (cupti_probe.c): the probe's copy of the process dies, this
 * process never calls it -- no subscribe, no callbacks, no pushes -- and says so once, API-only. */
static void scenario_crashing_libcupti(void)
{
	setenv("FAKE_CUPTI_CRASH", "1", 1);
	configure((struct fakecupti_config){ 0 });
	tbp_cupti_start();
	run_workload();
	tbp_cupti_flush();
	tbp_cupti_stop();
	CHECK(notices(TBP_NOTICE_CUPTI_ERROR) == 1, "%zu CUPTI_ERROR notices", notices(TBP_NOTICE_CUPTI_ERROR));
	const struct tbp_record *n = nth_kind(TBP_K_NOTICE, 0);
	CHECK(n && strstr(fake_string(n->u.notice.message), "cannot work with this CUDA driver") &&
		      strstr(fake_string(n->u.notice.message), "cuptiGetVersion"),
	      "notice text: %s", n ? fake_string(n->u.notice.message) : "(none)");
	const struct tbp_record *c = only_clock();
	CHECK(c && c->u.clock.method == TBP_CLOCK_HOOK_SIDE, "hook-side clock");
	CHECK(count_gpu() == 0 && fakecupti_pushes() == 0, "nothing collected");
	CHECK(!fakecupti_callbacks_registered() && !fakecupti_ts_callback_registered(), "libcupti never called");
	CHECK(fake_warnings == 0, "silent unless TBPROF_VERBOSE");
}

static void scenario_dropped(void)
{
	configure((struct fakecupti_config){ .dropped = 17 });
	tbp_cupti_start();
	run_workload();
	tbp_cupti_stop();
	check_workload(0);
	CHECK(count_kind(TBP_K_LOST) == 1, "%zu LOST records", count_kind(TBP_K_LOST));
	const struct tbp_record *l = nth_kind(TBP_K_LOST, 0);
	CHECK(l && l->u.lost.count == 17 && l->u.lost.source == TBP_LOST_CUPTI, "lost fields");
}

/* CUPTI asking for buffers faster than it gives them back (issue #15): the first requests share the cap
 * (TBPROF_CUPTI_BUFFER_SIZE, default 32 MiB), the next get no buffer (CUPTI drops and counts), one notice
 * says so, and a buffer given back is handed out again.  The old pool allocated on every request. */
static void scenario_buffer_cap(size_t cap)
{
	tbp_cfg.cupti_buffer_bytes = cap;
	size_t want_cap = cap ? cap : 32u << 20;
	configure((struct fakecupti_config){ 0 });
	tbp_cupti_start();
	uint8_t *held[64];
	size_t sizes[64], granted = 0, total = 0, refused = 0;
	for (int i = 0; i < 64; i++) {
		held[i] = fakecupti_request_buffer(&sizes[i]);
		if (held[i]) {
			CHECK(sizes[i] > 0 && ((uintptr_t)held[i] & 7) == 0, "buffer %d: size %zu, aligned", i, sizes[i]);
			granted++;
			total += sizes[i];
		} else {
			CHECK(sizes[i] == 0, "a refused request says size 0 (got %zu)", sizes[i]);
			refused++;
		}
	}
	CHECK(total <= want_cap, "%zu bytes handed out, cap %zu", total, want_cap);
	CHECK(granted >= 4 && total + sizes[0] > want_cap, "%zu buffers, %zu bytes: the cap is used", granted, total);
	CHECK(refused == 64 - granted, "%zu refused", refused);
	CHECK(notices(TBP_NOTICE_TEXT) == 1, "%zu notices of the cap", notices(TBP_NOTICE_TEXT));
	/* One given back: the next request gets that very buffer, nothing new is allocated. */
	fakecupti_complete_buffer(held[0], sizes[0]);
	size_t again_size = 0;
	uint8_t *again = fakecupti_request_buffer(&again_size);
	CHECK(again == held[0] && again_size == sizes[0], "a buffer given back is reused");
	size_t none_size = 1;
	CHECK(!fakecupti_request_buffer(&none_size) && none_size == 0, "still at the cap");
	for (size_t i = 1; i < granted; i++)
		fakecupti_complete_buffer(held[i], sizes[i]);
	fakecupti_complete_buffer(again, again_size);
	/* Everything back: the workload still runs and joins through the pooled buffers. */
	run_workload();
	tbp_cupti_stop();
	check_workload(0);
	CHECK(notices(TBP_NOTICE_TEXT) == 1, "the cap is said once");
}

static void scenario_nesting(void)
{
	configure((struct fakecupti_config){ 0 });
	tbp_gpu_call_enter(1);   /* a call made before CUPTI starts (a HIP call, or */
	tbp_cupti_start();       /* CUDA's first use on another thread) never pushes */
	CHECK(fakecupti_pushes() == 0, "enter does not start CUPTI by itself");
	run_workload();          /* nested calls push their own ids */
	tbp_gpu_call_exit(1);    /* and must not pop what it never pushed */
	CHECK(fakecupti_push_balance() == 0, "balance %ld", fakecupti_push_balance());
	tbp_gpu_call_enter(2);
	tbp_cupti_stop();        /* stop inside a call: its exit still pops */
	tbp_gpu_call_exit(2);
	CHECK(fakecupti_push_balance() == 0, "balance after stop %ld", fakecupti_push_balance());
	check_workload(0);
	tbp_gpu_call_enter(3);   /* after stop: no push, no restart */
	tbp_gpu_call_exit(3);
	CHECK(fakecupti_pushes() == (long)ncalls + 1, "%ld pushes", fakecupti_pushes());
	CHECK(count_kind(TBP_K_CLOCK) == 1, "started once");
}

static void scenario_fork(void)
{
	configure((struct fakecupti_config){ 0 });
	tbp_cupti_start();
	run_workload();
	long pushes = fakecupti_pushes();
	size_t records = fake_nrecords;
	pid_t pid = fork();
	if (pid == 0) {
		/* CUDA is unusable in a forked child: nothing pushed, nothing
		 * flushed, no lock inherited. */
		tbp_gpu_call_enter(1);
		tbp_gpu_call_exit(1);
		tbp_cupti_flush();
		tbp_cupti_stop();
		_exit(fakecupti_pushes() == pushes && fake_nrecords == records ? 0 : 1);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	tbp_cupti_stop();
	check_workload(0);
}

#define THREADS 4
#define CALLS_PER_THREAD 200
static int flushing_done;

static void *launcher(void *arg)
{
	uint64_t base = 1000000 * (1 + (uintptr_t)arg);
	for (uint64_t i = 0; i < CALLS_PER_THREAD; i++) {
		struct fakecupti_op k = { .kind = FAKE_KERNEL, .name = "_Z4stepv", .device = 0,
					  .context = 1, .stream = (uint32_t)(uintptr_t)arg,
					  .start = base + i * 10, .end = base + i * 10 + 5 };
		tbp_gpu_call_enter(base + i);
		fakecupti_op(&k);
		tbp_gpu_call_exit(base + i);
	}
	return NULL;
}

static void *flusher(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&flushing_done, __ATOMIC_ACQUIRE))
		tbp_cupti_flush();
	return NULL;
}

/* Calls on several threads while another keeps flushing. */
static void scenario_threads(void)
{
	configure((struct fakecupti_config){ .records_per_buffer = 7 });
	tbp_cupti_start();
	pthread_t t[THREADS], f;
	pthread_create(&f, NULL, flusher, NULL);
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, launcher, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&flushing_done, 1, __ATOMIC_RELEASE);
	pthread_join(f, NULL);
	tbp_cupti_stop();
	CHECK(count_gpu() == THREADS * CALLS_PER_THREAD, "%zu GPU records", count_gpu());
	for (uint64_t th = 0; th < THREADS; th++)
		for (uint64_t i = 0; i < CALLS_PER_THREAD; i++) {
			uint64_t corr = 1000000 * (1 + th) + i;
			const struct tbp_record *r = gpu_by_corr(corr);
			CHECK(r && r->ts == 1000000 * (1 + th) + i * 10 &&
			      r->u.gpu_kernel.stream == th, "thread %llu call %llu",
			      (unsigned long long)th, (unsigned long long)i);
		}
	CHECK(fakecupti_push_balance() == 0, "balance");
}

static void *first_user(void *arg)
{
	(void)arg;
	tbp_cupti_start();
	return NULL;
}

/* Another thread's first GPU call while the first thread is still starting
 * CUPTI must wait for it, so its GPU work is on the timeline. */
static void scenario_start_race(void)
{
	configure((struct fakecupti_config){ .start_delay_ms = 200 });
	pthread_t a;
	pthread_create(&a, NULL, first_user, NULL);
	while (!fakecupti_registering())
		;
	run_workload();
	pthread_join(a, NULL);
	tbp_cupti_stop();
	check_workload(0);
}

/* Another tool's external ids (Kineto pushes CUSTOM0 per op) around our
 * calls: the join uses ours only, and theirs stay balanced. */
static void scenario_foreign_ids(void)
{
	configure((struct fakecupti_config){ .ext_after = 1 });
	tbp_cupti_start();
	cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 999);
	cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, 998);
	run_workload();
	uint64_t last = 0;
	cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, &last);
	CHECK(last == 998, "foreign UNKNOWN id intact (%llu)", (unsigned long long)last);
	cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
	CHECK(last == 999, "foreign CUSTOM0 id intact (%llu)", (unsigned long long)last);
	tbp_cupti_stop();
	check_workload_plus(0, 0);
	CHECK(gpu_by_corr(999) == NULL && gpu_by_corr(998) == NULL, "foreign ids never used");
}

/* Not a test (no assertion on time): the consumer's costs from one run.
 * enter/exit pairs with the fake's push/pop, and GPU records turned into
 * trace records (name interning, join, emit to the in-memory core). */
static void scenario_bench(void)
{
	enum { CALLS = 1000000, RECORDS = 200000 };
	configure((struct fakecupti_config){ 0 });
	tbp_cupti_start();
	uint64_t t0 = tbp_now();
	for (uint64_t i = 1; i <= CALLS; i++) {
		tbp_gpu_call_enter(i);
		tbp_gpu_call_exit(i);
	}
	uint64_t t1 = tbp_now();
	static const char *const names[] = { "_Z5scalePffi", "_Z10accumulateIfLi3EEvPT_PKS0_i",
					     "_ZN3tbp4tinyEPi", "plain_kernel" };
	for (uint64_t i = 1; i <= RECORDS; i++) {
		struct fakecupti_op k = { .kind = FAKE_KERNEL, .name = names[i % 4], .stream = 7,
					  .start = i * 100, .end = i * 100 + 50 };
		tbp_gpu_call_enter(i);
		fakecupti_op(&k);
		tbp_gpu_call_exit(i);
	}
	uint64_t t2 = tbp_now();
	tbp_cupti_flush();
	uint64_t t3 = tbp_now();
	tbp_cupti_stop();
	CHECK(count_gpu() == RECORDS, "%zu records", count_gpu());
	printf("bench: enter+exit pair (fake push/pop): %.1f ns\n", (double)(t1 - t0) / CALLS);
	printf("bench: GPU record processed (join, names, emit): %.1f ns (%d records + pairs, %.0f ns to queue each in the fake)\n",
	       (double)(t3 - t2) / RECORDS, RECORDS, (double)(t2 - t1) / RECORDS);
}

/* CUPTI hands records over as work completes; a buffer goes out in start
 * order (here: one buffer delivered newest first, some pairs late). */
static void scenario_sorted(void)
{
	configure((struct fakecupti_config){ 0 });
	tbp_cupti_start();
	uint64_t t = tbp_now() + 1000000;
	for (int i = 11; i >= 0; i--) {
		struct fakecupti_op k = { .kind = FAKE_KERNEL, .name = "_Z1kv", .stream = (uint32_t)i % 3,
					  .start = t + (uint64_t)i * 1000, .end = t + (uint64_t)i * 1000 + 500 };
		configure((struct fakecupti_config){ .ext_after = i % 2 });
		api_call(&k);
	}
	tbp_cupti_stop();
	for (size_t i = 0; i < ncalls; i++) {
		const struct tbp_record *r = gpu_by_corr(calls[i].corr);
		CHECK(r && r->ts == calls[i].op.start, "call %zu joined, start kept", i);
	}
	uint64_t last = 0;
	size_t n = 0, disorder = 0;
	for (size_t i = 0; i < fake_nrecords; i++) {
		const struct tbp_record *r = &fake_records[i];
		if (r->kind != TBP_K_GPU_KERNEL)
			continue;
		disorder += r->ts < last;
		last = r->ts;
		n++;
	}
	CHECK(n == 12 && disorder == 0, "%zu kernels, %zu out of start order", n, disorder);
}

/* One run of the `shuffled` workload in a child: CUPTI's records handed
 * over in the order `seed` gives (0: as they came), in several flushes, one
 * of them after the hold of the first records is over.  The child writes its
 * GPU records (kind, start, end, stream, corr), in the order written, to
 * `path`. */
static void shuffled_child(uint64_t seed, const char *path)
{
	configure((struct fakecupti_config){ .shuffle_seed = seed });
	tbp_cupti_start();
	const uint64_t base = 5000000000000ull; /* fixed: both children script the same times */
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 24; i++) {
			/* three streams; a long op on stream 2 overlapping later short ones */
			uint64_t start = base + (uint64_t)round * 100000000ull + (uint64_t)i * 1000;
			struct fakecupti_op op = { .kind = i % 5 == 4 ? FAKE_MEMSET : i % 7 == 3 ? FAKE_MEMCPY : FAKE_KERNEL,
						   .name = "_Z1kv", .stream = (uint32_t)i % 3, .start = start,
						   .end = start + (i % 3 == 2 ? 9000 : 500), .bytes = 64,
						   .copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD };
			api_call(&op);
			if (i % 8 == 7)
				cuptiActivityFlushAll(0);
		}
		if (round == 1) {
			/* the first rounds' records are past their hold at the next delivery */
			struct timespec d = { 1, 100000000L };
			nanosleep(&d, NULL);
		}
	}
	tbp_cupti_stop();
	FILE *f = fopen(path, "w");
	if (!f)
		_exit(3);
	for (size_t i = 0; i < fake_nrecords; i++) {
		const struct tbp_record *r = &fake_records[i];
		if (r->kind >= TBP_K_GPU_KERNEL && r->kind <= TBP_K_GPU_SYNC)
			fprintf(f, "%u %llu %llu %llu %llu\n", r->kind, (unsigned long long)r->ts,
				(unsigned long long)r->u.gpu_kernel.end, (unsigned long long)r->u.gpu_kernel.stream,
				(unsigned long long)r->u.gpu_kernel.corr);
	}
	fclose(f);
	_exit(0);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[2][1 << 16];
	static int which;
	char *b = buf[which++ & 1];
	size_t n = fread(b, 1, sizeof buf[0] - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

/* The same GPU work handed over in order and shuffled (two seeds) gives the
 * same GPU records, in the same (start-time) order, each joined. */
static void scenario_shuffled(void)
{
	char dir[] = "/tmp/tbp-shuffled-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	static const uint64_t seeds[] = { 0, 1, 77 };
	char paths[3][64];
	for (int i = 0; i < 3; i++) {
		snprintf(paths[i], sizeof paths[i], "%s/%d", dir, i);
		pid_t pid = fork();
		if (pid == 0)
			shuffled_child(seeds[i], paths[i]);
		int st = 0;
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d exit status %d", i, st);
	}
	const char *ordered = slurp(paths[0]);
	size_t lines = 0, unjoined = 0, disorder = 0;
	unsigned long long last = 0;
	for (const char *p = ordered; p && *p; p = strchr(p, '\n') + 1) {
		unsigned kind;
		unsigned long long ts, end, stream, corr;
		if (sscanf(p, "%u %llu %llu %llu %llu", &kind, &ts, &end, &stream, &corr) != 5)
			break;
		lines++;
		unjoined += corr == 0;
		disorder += ts < last;
		last = ts;
	}
	CHECK(ordered && lines == 72 && unjoined == 0 && disorder == 0,
	      "in order: %zu GPU records (want 72), %zu unjoined, %zu out of start order", lines, unjoined, disorder);
	for (int i = 1; i < 3; i++) {
		const char *shuffled = slurp(paths[i]);
		CHECK(ordered && shuffled && strcmp(ordered, shuffled) == 0,
		      "seed %llu: the GPU records differ from the in-order run's", (unsigned long long)seeds[i]);
		unlink(paths[i]);
	}
	unlink(paths[0]);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
		return 2;
	}
	/* Kernel names are demangled with the C++ runtime a CUDA process has. */
	dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
	const char *s = argv[1];
	if (!strcmp(s, "join"))
		joined(0, 0);
	else if (!strcmp(s, "reorder"))
		joined(1, 0);
	else if (!strcmp(s, "reorder-across-buffers"))
		joined(1, 1);
	else if (!strcmp(s, "small-buffers"))
		joined(0, 3);
	else if (!strcmp(s, "bracketed"))
		scenario_bracketed();
	else if (!strcmp(s, "orphan"))
		scenario_orphan();
	else if (!strcmp(s, "busy-subscribe"))
		in_use(1);
	else if (!strcmp(s, "busy-enable"))
		in_use(0);
	else if (!strcmp(s, "no-libcupti")) {
		/* TBPROF_CUPTI_PATH, as config.c reads it at start */
		snprintf(tbp_cfg.cupti_path, sizeof tbp_cfg.cupti_path, "%s", "/nonexistent/libcupti.so.13");
		api_only("not found", 0);
	} else if (!strcmp(s, "disabled")) {
		tbp_cfg.cupti = false;
		api_only("TBPROF_CUPTI=0", 0);
	} else if (!strcmp(s, "no-driver")) {
		api_only("no CUDA driver", 1);
	} else if (!strcmp(s, "crashing-libcupti"))
		scenario_crashing_libcupti();
	else if (!strcmp(s, "buffer-cap"))
		scenario_buffer_cap(0);
	else if (!strcmp(s, "buffer-cap-small"))
		scenario_buffer_cap(1u << 20);
	else if (!strcmp(s, "dropped"))
		scenario_dropped();
	else if (!strcmp(s, "sorted"))
		scenario_sorted();
	else if (!strcmp(s, "shuffled"))
		scenario_shuffled();
	else if (!strcmp(s, "bench"))
		scenario_bench();
	else if (!strcmp(s, "foreign-ids"))
		scenario_foreign_ids();
	else if (!strcmp(s, "start-race"))
		scenario_start_race();
	else if (!strcmp(s, "threads"))
		scenario_threads();
	else if (!strcmp(s, "fork"))
		scenario_fork();
	else if (!strcmp(s, "nesting"))
		scenario_nesting();
	else {
		fprintf(stderr, "unknown scenario %s\n", s);
		return 2;
	}
	if (failures)
		fprintf(stderr, "%s: %d failures\n", s, failures);
	else
		printf("%s: ok (%zu records)\n", s, fake_nrecords);
	return failures ? 1 : 0;
}
