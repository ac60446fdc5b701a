/*
 * Python call paths for every recorded event, Python function spans, and
 * attribution of frameless threads.  Design: doc/python.md.
 *
 * Everything here reads CPython's structures directly with per-version
 * offsets, resolved at run time: libtbprof never links libpython, never
 * takes the GIL from a hook and never calls into the interpreter on the
 * per-event path.  This file: the per-version layouts, the module's state
 * and set-up, and the call path of the calling thread; python_module.h
 * lists the other files.
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

/* ------------------------------------------------------------ versions */

static const struct py_layout layout_310 = {
	.minor = 10, .ts_top = 24, .has_cframe = false,
	.fr_code = 32, .fr_prev = 24, .fr_instr = 96, .fr_owner = 0, .instr_is_index = true,
	.owner_cstack = -1,
	.co_filename = 104, .co_name = 112, .co_shortname = 112, .co_firstlineno = 40, .co_linetable = 120,
	.co_code = 48, .linetable_310 = true,
	.ascii_size = 48, .compact_size = 72,
};
static const struct py_layout layout_311 = {
	.minor = 11, .ts_top = 56, .cframe_current = 8, .has_cframe = true,
	.fr_code = 32, .fr_prev = 48, .fr_instr = 56, .fr_owner = 69, .owner_cstack = -1,
	.co_filename = 112, .co_name = 128 /* co_qualname */, .co_shortname = 120, .co_firstlineno = 72,
	.co_linetable = 136, .co_code = 184,
	.ascii_size = 48, .compact_size = 72,
};
static const struct py_layout layout_312 = {
	.minor = 12, .ts_top = 56, .cframe_current = 0, .has_cframe = true,
	.fr_code = 0, .fr_prev = 8, .fr_instr = 56, .fr_owner = 70, .owner_cstack = 3,
	.co_filename = 112, .co_name = 128, .co_shortname = 120, .co_firstlineno = 68, .co_linetable = 136,
	.co_code = 192,
	.ascii_size = 40, .compact_size = 56,
};
/* 3.13: checked/derived from _Py_DebugOffsets at init (py_layout_313_from_debug). */
static const struct py_layout layout_313 = {
	.minor = 13, .ts_top = 72, .has_cframe = false,
	.fr_code = 0, .fr_prev = 8, .fr_instr = 56, .fr_owner = 70, .owner_cstack = 3,
	.co_filename = 112, .co_name = 128, .co_shortname = 120, .co_firstlineno = 68, .co_linetable = 136,
	.co_code = 200,
	.ascii_size = 40, .compact_size = 56,
};

/* Exposed for the offsets test (tests/python). */
const struct py_layout *tbp_py_layout_for(unsigned minor)
{
	switch (minor) {
	case 10: return &layout_310;
	case 11: return &layout_311;
	case 12: return &layout_312;
	case 13: return &layout_313;
	default: return NULL;
	}
}

/* ------------------------------------------------------------ state */

_Atomic int py_state;
bool tbp_py_inert;
static pthread_mutex_t py_init_lock = PTHREAD_MUTEX_INITIALIZER;
struct py_layout L;     /* the running interpreter's layout */
static int notice_flag;

struct py_api py;

/* ------------------------------------------------------------ init */

static bool resolve(void)
{
	py.is_initialized = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	if (!py.is_initialized)
		return false;
	py.this_thread_state = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	py.gil_check = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyGILState_Check");
	py.add_pending_call = (int (*)(int (*)(void *), void *))tbp_real_dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
	py.interp_main = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
	py.get_eval = (eval_frame_fn (*)(void *))tbp_real_dlsym(RTLD_DEFAULT, "_PyInterpreterState_GetEvalFrameFunc");
	py.set_eval = (void (*)(void *, eval_frame_fn))tbp_real_dlsym(RTLD_DEFAULT, "_PyInterpreterState_SetEvalFrameFunc");
	py.intern_from_string = (void *(*)(const char *))tbp_real_dlsym(RTLD_DEFAULT, "PyUnicode_InternFromString");
	py.code_type = tbp_real_dlsym(RTLD_DEFAULT, "PyCode_Type");
	return true;
}

static unsigned minor_override; /* tests: pretend to run another 3.x */
void tbp_py_test_override_minor(unsigned minor) { minor_override = minor; }

/* Minor version of the running CPython 3.x, or 0 when it is not 3.x. */
static unsigned running_minor(void)
{
	if (minor_override)
		return minor_override;
	const unsigned long *hex = tbp_real_dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
	if (hex)
		return (*hex >> 24) == 3 ? (unsigned)((*hex >> 16) & 0xff) : 0;
	const char *(*get_version)(void) = (const char *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_GetVersion");
	unsigned major, minor;
	if (get_version && sscanf(get_version(), "%u.%u", &major, &minor) == 2 && major == 3)
		return minor;
	return 0;
}

/* 3.13: the runtime publishes its own offsets.  Find the thread-state
 * block (size, prev=0, next=8, interp=16, current_frame, ...) and the
 * interpreter-frame and code-object blocks that follow it, instead of
 * trusting a fixed position of the blocks (they moved between 3.13
 * releases).  False when they cannot be found or disagree. */
static bool layout_313_from_debug(struct py_layout *out)
{
	const char *runtime = tbp_real_dlsym(RTLD_DEFAULT, "_PyRuntime");
	if (!runtime || memcmp(runtime, "xdebugpy", 8) != 0)
		return false;
	const uint64_t *w = (const uint64_t *)(runtime + 8);
	for (unsigned i = 0; i + 22 < 128; i++) {
		if (!(w[i] > 64 && w[i] < 65536 && w[i + 1] == 0 && w[i + 2] == 8 && w[i + 3] == 16))
			continue;
		out->ts_top = w[i + 4];
		/* thread_state has 9 fields in 3.13.0; the frame block that
		 * follows starts with its size, then previous=8, executable=0. */
		for (unsigned j = i + 5; j + 16 < 128 && j < i + 16; j++) {
			if (!(w[j] > 64 && w[j] < 4096 && w[j + 1] == 8 && w[j + 2] == 0))
				continue;
			out->fr_prev = w[j + 1];
			out->fr_code = w[j + 2];
			out->fr_instr = w[j + 3];
			out->fr_owner = w[j + 5];
			const uint64_t *co = &w[j + 6]; /* size, filename, name, qualname, linetable,
							  * firstlineno, argcount, localsplusnames,
							  * localspluskinds, co_code_adaptive */
			if (!(co[0] > 64 && co[0] < 4096))
				return false;
			out->co_filename = co[1];
			out->co_shortname = co[2];
			out->co_name = co[3];
			out->co_linetable = co[4];
			out->co_firstlineno = co[5];
			out->co_code = co[9];
			return out->ts_top < 4096 && out->fr_instr < 4096 && out->co_code < 4096 &&
			       out->co_filename < out->co_code && out->co_linetable < out->co_code;
		}
		return false;
	}
	return false;
}

static void give_up(const char *why)
{
	char msg[200];
	snprintf(msg, sizeof msg, "no Python call paths: %s", why);
	tbp_warn_once(&notice_flag, "%s", msg);
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_NO_PYTHON_PATHS, msg);
	atomic_store(&py_state, PY_INERT);
	__atomic_store_n(&tbp_py_inert, true, __ATOMIC_RELAXED);
}

/* Tracing can start before the interpreter does (TBPROF_TRACE_ALL starts
 * it from the preload constructor) and a CPU-only program may never call a
 * hook that would retry.  So a small thread, with every signal blocked,
 * watches for Py_IsInitialized() (2 ms, backing off to 100 ms) and then
 * finishes the set-up: the span hook arrives through Py_AddPendingCall. */
static void try_init(void);
static void *poller_main(void *unused)
{
	(void)unused;
	unsigned delay_us = 2000;
	while (atomic_load(&py_state) == PY_WAITING) {
		if (py.is_initialized()) {
			try_init();
			break;
		}
		usleep(delay_us);
		if (delay_us < 100000)
			delay_us *= 2;
	}
	return NULL;
}

static void start_poller(void)
{
	static bool started;
	if (started)
		return;
	started = true;
	pthread_attr_t attr;
	pthread_t thread;
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&thread, &attr, poller_main, NULL) == 0)
		pthread_setname_np(thread, "tbprof-py");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

/* Fork: the set-up lock is the outermost tbprof lock (set-up may record a
 * notice, which may start the trace).  It is never held while waiting for
 * the GIL, so a fork from a thread holding the GIL can wait for it. */
static void py_fork_prepare(void)
{
	pthread_mutex_lock(&py_init_lock);
}

static void py_fork_parent(void)
{
	pthread_mutex_unlock(&py_init_lock);
}

static void py_fork_child(void)
{
	pthread_mutex_init(&py_init_lock, NULL);
}

/* Returns with py_state READY, WAITING (Python not initialized yet: try
 * again later) or INERT. */
static void try_init(void)
{
	pthread_mutex_lock(&py_init_lock);
	int st = atomic_load(&py_state);
	if (st == PY_READY || st == PY_INERT)
		goto out;
	if (st == PY_UNINIT && !resolve()) {
		atomic_store(&py_state, PY_INERT); /* not a Python process */
		__atomic_store_n(&tbp_py_inert, true, __ATOMIC_RELAXED);
		goto out;
	}
	if (!py.is_initialized()) {
		atomic_store(&py_state, PY_WAITING);
		start_poller();
		goto out;
	}
	unsigned minor = running_minor();
	const struct py_layout *base = tbp_py_layout_for(minor);
	if (!base) {
		char why[80];
		snprintf(why, sizeof why, "unsupported CPython version 3.%u", minor);
		give_up(why);
		goto out;
	}
	if (tbp_real_dlsym(RTLD_DEFAULT, "_Py_DecRefShared")) { /* only free-threaded builds have it */
		give_up("free-threaded CPython build (object layout differs)");
		goto out;
	}
	if (!py.this_thread_state || !py.code_type) {
		give_up("CPython symbols not found");
		goto out;
	}
	L = *base;
	if (minor == 13 && !layout_313_from_debug(&L)) {
		give_up("CPython 3.13 _Py_DebugOffsets not understood");
		goto out;
	}
	if (!atomic_load(&code_table.cur) && !(table_init(&code_table, 19) && table_init(&frame_table, 22) &&
						 table_init(&path_table, 23))) {
		give_up("out of memory");
		goto out;
	}
	atomic_store(&py_state, PY_READY);
	if (tbp_cfg.py_span_ns > 0)
		install_eval_hook();
	lib_paths_ask();
	atomic_store(&lib_paths_next, tbp_now() + 200000000ull);
out:
	pthread_mutex_unlock(&py_init_lock);
}

static inline bool ready(void)
{
	int st = atomic_load_explicit(&py_state, memory_order_acquire);
	if (TBP_LIKELY(st == PY_READY))
		return true;
	if (st == PY_INERT)
		return false;
	/* Not yet: cheap re-check until the interpreter is up. */
	if (st == PY_WAITING && !py.is_initialized())
		return false;
	try_init();
	return atomic_load(&py_state) == PY_READY;
}

const struct py_layout *tbp_py_layout_running(void)
{
	return tbp_cfg.python && ready() ? &L : NULL;
}

void tbp_py_init(void)
{
	if (!tbp_cfg.python)
		return;
	(void)ready();
}

/* ------------------------------------------------------- call paths */

uint64_t callpath_from(uintptr_t top)
{
	struct raw_frame frames[256];
	unsigned max = tbp_cfg.py_depth ? tbp_cfg.py_depth : 32;
	if (max > 256)
		max = 256;
	unsigned n = top ? walk(top, frames, max) : 0;
	return n ? intern_path(frames, n, 0) : 0;
}

/* PyTorch names the autograd engine's worker threads pt_autograd_N (set when each starts, before it runs any
 * work).  Python they run — a custom autograd.Function.backward, a hook, an op implemented in Python — runs
 * on behalf of the backward() call that another thread is blocked in. */
static __thread int8_t autograd_thread = -1;
static bool is_autograd_thread(void)
{
	if (TBP_UNLIKELY(autograd_thread < 0)) {
		char name[17] = { 0 };
		autograd_thread = prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strncmp(name, "pt_autograd", 11) == 0;
	}
	return autograd_thread > 0;
}

/* The thread's Python call path; on an autograd worker inside backward(), rooted at backward()'s caller, so
 * the frames it runs read as called from that line. */
uint64_t thread_callpath(uintptr_t top)
{
	uint64_t root = 0;
	if (TBP_UNLIKELY(is_autograd_thread()))
		root = atomic_load_explicit(&blocking_path, memory_order_acquire);
	if (!root)
		return callpath_from(top);
	struct raw_frame frames[256];
	unsigned max = tbp_cfg.py_depth ? tbp_cfg.py_depth : 32;
	if (max > 256)
		max = 256;
	unsigned n = top ? walk(top, frames, max) : 0;
	return n ? intern_path(frames, n, root) : 0;
}

uint64_t tbp_py_callpath(void)
{
	if (!tbp_cfg.python || !ready())
		return 0;
	/* Finalization clears this flag before it frees the other threads'
	 * states, which their TSS slots still point to. */
	if (TBP_UNLIKELY(!py.is_initialized()))
		return 0;
	uintptr_t tstate = (uintptr_t)py.this_thread_state();
	uint64_t path = 0;
	if (ptr_ok(tstate))
		path = thread_callpath(top_frame(tstate));
	return path ? path : borrowed_path();
}


void tbp_py_shutdown(void)
{
	/* Leave the hook in place: it passes calls through once tbp_active is
	 * 0, and removing it needs the GIL, which a hook must never take.
	 * The library is never unloaded (-z nodelete). */
	if (atomic_load(&py_state) != PY_READY)
		return;
	if (tbp_cfg.verbose) {
		uint64_t aside = atomic_load(&hook_suspensions);
		if (aside)
			tbp_log("python: span hook stepped aside %llu times (deep recursion)\n",
				(unsigned long long)aside);
		uint64_t full = code_table.full + frame_table.full + path_table.full;
		tbp_log("python: %llu frames, %llu call-path nodes interned%s\n",
			(unsigned long long)next_frame_id - 1, (unsigned long long)next_path_id - 1,
			full ? " (tables full: some not cached)" : "");
	}
}

/* Lent to the lifecycle (lifecycle.c) at load. */
static const struct tbp_hook_ops python_ops = {
	.rank = TBP_RANK_PYTHON,
	.fork_prepare = py_fork_prepare,
	.fork_parent = py_fork_parent,
	.fork_child = py_fork_child,
	.trace_started = tbp_py_init,
	.trace_stop = tbp_py_shutdown,
};

__attribute__((constructor(102))) static void python_register(void)
{
	tbp_register_hook_ops(&python_ops);
}
