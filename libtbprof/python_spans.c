/*
 * Python module (python_module.h): Python function spans from a PEP 523
 * evaluator hook, their cheap clock, and the C stack guard that keeps deep
 * recursion working while the hook is installed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "python_module.h"

/* ------------------------------------------------------------ spans */

/* Cheap ticks for timing every Python call: the hook runs on each call,
 * and two clock_gettime calls cost more than the rest of it.  Converted
 * to ns with a rate measured against CLOCK_MONOTONIC (tick_rate), and
 * span timestamps are anchored on a tbp_now() read at the span's end.
 *
 * The rate is measured between (counter, monotonic) pairs read as close
 * together as possible, first 2 ms apart at install time, then again
 * whenever a span ends 8 times the last baseline after the first pair:
 * on a loaded VM a pair read across a preemption put the 2 ms rate 10 %
 * off, and every span's length with it (a planted 20 ms sleep read
 * 18.3 ms). */
static double ns_per_tick;            /* 0: ticks are tbp_now() ns; written by tick_rate only */
static bool counter_ticks;            /* ns_per_tick > 0, as a flag (tested on every call) */
static uint64_t span_ticks;           /* the span threshold, in ticks */
static uint64_t rate_tick0, rate_ns0; /* the first pair */
static uint64_t rate_next_ns;         /* re-measure at spans ending after this */
static atomic_flag rate_busy = ATOMIC_FLAG_INIT;

static inline __attribute__((always_inline)) uint64_t counter(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}
static inline __attribute__((always_inline)) uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	if (TBP_LIKELY(counter_ticks))
		return counter();
#endif
	return tbp_now();
}
static inline uint64_t ticks_to_ns(uint64_t t)
{
	double r;
	__atomic_load(&ns_per_tick, &r, __ATOMIC_RELAXED);
	return r > 0 ? (uint64_t)((double)t * r) : t;
}

/* A (counter, monotonic ns) pair: of a few tries, the one whose monotonic
 * read the counter brackets most tightly, the counter taken at its middle. */
static void tick_pair(uint64_t *tick, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 7; i++) {
		uint64_t a = counter(), n = tbp_now(), b = counter();
		if (b >= a && b - a < best) {
			best = b - a;
			*tick = a + (b - a) / 2;
			*ns = n;
		}
	}
}

/* The counter's rate from the first pair to one read now. */
static void tick_rate(void)
{
	uint64_t t1 = 0, n1 = 0;
	tick_pair(&t1, &n1);
	if (t1 <= rate_tick0 || n1 <= rate_ns0)
		return;
	double rate = (double)(n1 - rate_ns0) / (double)(t1 - rate_tick0);
	if (rate > 0.01 && rate < 100)
		__atomic_store(&ns_per_tick, &rate, __ATOMIC_RELAXED);
	rate_next_ns = n1 + 7 * (n1 - rate_ns0);
}

/* From a span's end (rare: spans are calls longer than the threshold). */
static inline void tick_rate_refine(uint64_t now)
{
	if (TBP_UNLIKELY(counter_ticks && now >= rate_next_ns) && !atomic_flag_test_and_set(&rate_busy)) {
		if (now >= rate_next_ns)
			tick_rate();
		atomic_flag_clear(&rate_busy);
	}
}

static void calibrate_ticks(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	tick_pair(&rate_tick0, &rate_ns0);
	uint64_t n;
	do
		n = tbp_now();
	while (n - rate_ns0 < 2000000); /* 2 ms, once */
	tick_rate();
	counter_ticks = ns_per_tick > 0;
#endif
	span_ticks = ns_per_tick > 0 ? (uint64_t)((double)tbp_cfg.py_span_ns / ns_per_tick)
		: tbp_cfg.py_span_ns;
}

eval_frame_fn prev_eval;       /* evaluator installed before ours */
static _Atomic int hook_installed;
static __thread unsigned blocking_depth;
static void *s_backward, *s_grad; /* interned names for the blocking-call check */
static void *s_find_and_load;       /* importlib's import of one module (eval_import) */

static uintptr_t frame_code(void *frame)
{
	return rd_ptr((uintptr_t)frame, L.fr_code);
}

static inline bool maybe_blocking_name(uintptr_t code)
{
	uintptr_t name = rd_ptr(code, L.co_shortname);
	return name == (uintptr_t)s_backward || name == (uintptr_t)s_grad || name == (uintptr_t)s_find_and_load;
}

/* Is `code` importlib's _find_and_load (the import of one module)? */
static bool is_import_call(uintptr_t code)
{
	if (rd_ptr(code, L.co_shortname) != (uintptr_t)s_find_and_load)
		return false;
	char buf[64];
	const char *p;
	static const char file[] = "<frozen importlib._bootstrap>";
	ssize_t n = str_utf8(rd_ptr(code, L.co_filename), buf, sizeof buf, &p);
	return n == (ssize_t)sizeof file - 1 && memcmp(p, file, sizeof file - 1) == 0;
}

/* Is `code` torch's Tensor.backward / autograd.backward / autograd.grad? */
static bool is_blocking_call(uintptr_t code)
{
	uintptr_t name = rd_ptr(code, L.co_shortname);
	if (name != (uintptr_t)s_backward && name != (uintptr_t)s_grad)
		return false;
	char buf[512];
	const char *p;
	ssize_t n = str_utf8(rd_ptr(code, L.co_filename), buf, sizeof buf, &p);
	if (n < 0)
		return false;
	static const char *const files[] = { "torch/_tensor.py", "torch/autograd/__init__.py" };
	for (unsigned i = 0; i < 2; i++) {
		size_t m = strlen(files[i]);
		if ((size_t)n >= m && memcmp(p + n - m, files[i], m) == 0)
			return true;
	}
	return false;
}

/* ------------------------------------------------- C stack guard
 *
 * While any PEP 523 evaluator is installed, CPython 3.11+ stops running
 * Python-to-Python calls inline in one C frame of the default evaluator:
 * each call goes through _PyEval_Vector, our hook and a fresh
 * _PyEval_EvalFrameDefault frame (a few hundred bytes of C stack per call,
 * and C-recursion units on 3.12+).  Deep recursion that fits without tbprof
 * would then overflow.  So each thread bounds the C stack that the hooked
 * calls may take: from the outermost hooked frame of the thread, at most
 * stack/32 (and never closer than 64 KiB to the stack's end).  A call past
 * that steps aside: it takes the hook out of the interpreter (the GIL is
 * held), so deeper calls run inline again exactly as without tbprof, and
 * puts it back when that call returns.  What the program loses is at most
 * stack/32 of C stack, and spans while a thread is that deep.
 *
 * CPython 3.12+ also counts each evaluator entry against its C recursion
 * limit (2 units; 1500 units on 3.12, 10000 on 3.13): hooked calls that
 * would have run inline use these up too, so there the number of hooked
 * calls per thread is capped as well (at most ~5% of the limit). */
#define GUARD_MIN_HEADROOM (64u * 1024)
#define GUARD_UNKNOWN_BUDGET (128u * 1024) /* stack bounds unknown */

struct stack_guard {
	uintptr_t low, size;  /* this thread's stack; size 0 unknown */
	uintptr_t limit;      /* lowest frame address allowed to be hooked */
	unsigned depth;       /* hooked evaluator calls active on this thread */
	bool bounds_done;
};
/* initial-exec: read on every Python call, and a __tls_get_addr call per
 * read would cost more than the rest of the guard.  32 bytes: fits the
 * static TLS surplus glibc keeps for libraries opened later (the tests
 * load python.c with dlopen). */
static __thread struct stack_guard guard __attribute__((tls_model("initial-exec")));
static unsigned guard_max_depth = ~0u; /* hooked calls per thread */
bool hook_suspended;          /* GIL: the hook stepped aside */
_Atomic uint64_t hook_suspensions;

static void guard_bounds(struct stack_guard *g)
{
	g->bounds_done = true;
	pthread_attr_t attr;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return;
	if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0) {
		g->low = (uintptr_t)addr;
		g->size = size;
	}
	pthread_attr_destroy(&attr);
}

/* Outermost hooked call of this thread: where the budget starts. */
static __attribute__((noinline, cold)) void guard_start(struct stack_guard *g, uintptr_t sp)
{
	if (!g->bounds_done)
		guard_bounds(g);
	uintptr_t budget = GUARD_UNKNOWN_BUDGET, floor = 0;
	if (g->size && sp > g->low && sp - g->low <= g->size) {
		budget = g->size / 32;
		floor = g->low + GUARD_MIN_HEADROOM;
	}
	uintptr_t limit = sp > budget ? sp - budget : 0;
	g->limit = limit > floor ? limit : floor;
}

/* Too deep for the hook (or an import, eval_import): run this call and all
 * below it without it.  `counted`: a step-aside for depth (TBPROF_VERBOSE
 * reports them). */
static __attribute__((noinline)) void *step_aside(void *tstate, void *frame, int throwflag, bool counted)
{
	eval_frame_fn next = prev_eval;
	void *interp = py.interp_main();
	bool removed = false;
	if (!hook_suspended && interp && py.get_eval(interp) == (eval_frame_fn)tbp_eval_frame) {
		py.set_eval(interp, prev_eval);
		hook_suspended = removed = true;
		if (counted)
			atomic_fetch_add_explicit(&hook_suspensions, 1, memory_order_relaxed);
	}
	void *result = next(tstate, frame, throwflag);
	/* Still ours to undo (tbp_py_test_hook clears it) and nobody has
	 * installed another evaluator meanwhile. */
	if (removed && hook_suspended) {
		hook_suspended = false;
		if (py.get_eval(interp) == prev_eval)
			py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
	}
	return result;
}

/* Kept out of the hook's frame: its locals would cost every call stack. */
static __attribute__((noinline)) bool note_blocking(void *tstate, uintptr_t code)
{
	if (!is_blocking_call(code) || blocking_depth != 0 || !tbp_guard_enter())
		return false;
	/* The caller of backward(): its line is what kernels run by
	 * autograd threads are attributed to. */
	bool blocking = false;
	uint64_t p = callpath_from(top_frame((uintptr_t)tstate));
	if (p) {
		atomic_store_explicit(&blocking_path, p, memory_order_release);
		blocking = true;
		blocking_depth++;
	}
	tbp_guard_leave();
	return blocking;
}

static __attribute__((noinline)) void record_span(void *tstate, uintptr_t code, uint64_t dk)
{
	if (!tbp_guard_enter())
		return;
	uint64_t t1 = tbp_now();
	lib_paths_again(t1);
	tick_rate_refine(t1);
	uint64_t elapsed = ticks_to_ns(dk), t0 = t1 - elapsed;
	/* The callee's frame is gone; its code object is still held by
	 * the caller (function object on the caller's stack). */
	uint64_t parent = thread_callpath(top_frame((uintptr_t)tstate));
	uint64_t path = path_node(parent, frame_id(code, UINT32_MAX));
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_PY_SPAN);
	if (rec) {
		rec->ts = t0;
		rec->u.py_span.end = t1;
		rec->u.py_span.callpath = path;
		tbp_slot_commit(rec);
	}
	tbp_guard_leave();
}

/* The stack pointer, roughly: __builtin_frame_address would make the hook
 * keep a frame pointer (two more instructions on every Python call). */
static inline __attribute__((always_inline)) uintptr_t stack_pointer(void)
{
	uintptr_t sp;
#if defined(__x86_64__)
	__asm__("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
	__asm__("mov %0, sp" : "=r"(sp));
#else
	sp = (uintptr_t)__builtin_frame_address(0);
#endif
	return sp;
}

/* A call of torch's backward()/grad() (note_blocking said so): the same as
 * the hook's common path, plus the blocking path's bookkeeping, kept out of
 * the hook so that its frame holds no flag for it across the call. */
static __attribute__((noinline)) void *eval_blocking(void *tstate, void *frame, int throwflag, uintptr_t code)
{
	guard.depth++;
	uint64_t k0 = ticks();
	void *result = prev_eval(tstate, frame, throwflag);
	uint64_t dk = ticks() - k0;
	guard.depth--;
	blocking_depth--;
	atomic_store_explicit(&blocking_path, 0, memory_order_release);
	if (dk >= span_ticks && TBP_ACTIVE() && is_code(code))
		record_span(tstate, code, dk);
	/* A capture of N steps in a program that marks none counts its backward() calls. */
	if (tbp_cfg.on_demand)
		tbp_capture_backward_done();
	return result;
}

/* An import: the module's whole import runs without the hook (stepped
 * aside, as for deep recursion), timed here as one span.  A PEP 523 hook
 * makes every Python call take CPython's slow path (~200 instructions
 * more, 3.11), and `import torch` alone makes millions of them: with the
 * hook inside imports its process CPU time grew ~7 %; the price is no spans
 * inside an import but the import's own. */
static __attribute__((noinline)) void *eval_import(void *tstate, void *frame, int throwflag, uintptr_t code)
{
	uint64_t k0 = ticks();
	void *result = step_aside(tstate, frame, throwflag, false);
	uint64_t dk = ticks() - k0;
	if (dk >= span_ticks && TBP_ACTIVE() && is_code(code))
		record_span(tstate, code, dk);
	return result;
}

/* Runs on every Python call while installed: what it costs is what a
 * traced program pays per call (doc/python.md), so the common path is two
 * counter reads, the guard's compare, and the few loads below. */
void *tbp_eval_frame(void *tstate, void *frame, int throwflag)
{
	if (!TBP_ACTIVE() || atomic_load_explicit(&py_state, memory_order_relaxed) != PY_READY)
		return prev_eval(tstate, frame, throwflag);
	struct stack_guard *g = &guard;
	if (g->depth == 0)
		guard_start(g, stack_pointer());
	else if (TBP_UNLIKELY(stack_pointer() < g->limit || g->depth >= guard_max_depth))
		return step_aside(tstate, frame, throwflag, true);
	uintptr_t code = frame_code(frame);
	/* The name compare first: it rejects almost every call for two loads. */
	if (TBP_UNLIKELY(is_code(code) && maybe_blocking_name(code))) {
		if (is_import_call(code))
			return eval_import(tstate, frame, throwflag, code);
		if (note_blocking(tstate, code))
			return eval_blocking(tstate, frame, throwflag, code);
	}
	g->depth++;
	uint64_t k0 = ticks();
	void *result = prev_eval(tstate, frame, throwflag);
	uint64_t dk = ticks() - k0;
	guard.depth--;
	if (TBP_UNLIKELY(dk >= span_ticks) && TBP_ACTIVE() && is_code(code))
		record_span(tstate, code, dk);
	return result;
}


/* Runs with the GIL held. */
static int install_with_gil(void *unused)
{
	(void)unused;
	if (atomic_load(&hook_installed) || !py.interp_main || !py.get_eval || !py.set_eval)
		return 0;
	void *interp = py.interp_main();
	if (!interp)
		return 0;
	if (py.intern_from_string) {
		s_backward = py.intern_from_string("backward");
		s_grad = py.intern_from_string("grad");
		s_find_and_load = py.intern_from_string("_find_and_load");
	}
	eval_frame_fn current = py.get_eval(interp);
	if (current == (eval_frame_fn)tbp_eval_frame)
		return 0;
	calibrate_ticks();
	guard_max_depth = L.minor == 12 ? 32 : L.minor >= 13 ? 256 : ~0u;
	prev_eval = current;
	if (!prev_eval)
		prev_eval = (eval_frame_fn)tbp_real_dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	if (!prev_eval)
		return 0;
	py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
	atomic_store(&hook_installed, 1);
	return 0;
}

/* Tests and benchmarks only, with the GIL held: take the hook out (1 if it
 * was installed and still on top) or put it back. */
int tbp_py_test_hook(int on)
{
	if (!py.interp_main || !py.get_eval || !py.set_eval || !prev_eval)
		return 0;
	void *interp = py.interp_main();
	eval_frame_fn current = py.get_eval(interp);
	if (on && current == prev_eval) {
		py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
		return 1;
	}
	hook_suspended = false; /* a suspended hook stays as the test sets it */
	if (!on && current == (eval_frame_fn)tbp_eval_frame) {
		py.set_eval(interp, prev_eval);
		return 1;
	}
	return 0;
}

int tbp_py_test_upset_rate(double factor)
{
	if (!counter_ticks)
		return 0;
	double r = ns_per_tick * factor;
	__atomic_store(&ns_per_tick, &r, __ATOMIC_RELAXED);
	rate_next_ns = 0;
	return 1;
}

void install_eval_hook(void)
{
	if (!py.set_eval || !py.get_eval || !py.gil_check)
		return;
	/* PyGILState_Check() answers 1 when its check is disabled (e.g. with
	 * subinterpreters): also require that this thread has a thread state. */
	if (py.gil_check() && py.this_thread_state())
		install_with_gil(NULL);
	else if (py.add_pending_call)
		py.add_pending_call(install_with_gil, NULL);
}
