/*
 * libtbprof internal API: what hooks (interpose/), the CUPTI consumer
 * (libtbprof/cupti.c) and the Python call-path module (libtbprof/python.c)
 * use to record events.  Nothing here may block indefinitely, call malloc
 * on the per-event path, or acquire the GIL.
 */
#ifndef TBPROF_CORE_H
#define TBPROF_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tbprof/trace.h"

#define TBP_EXPORT __attribute__((visibility("default")))
#define TBP_HIDDEN __attribute__((visibility("hidden")))
#define TBP_LIKELY(x) __builtin_expect(!!(x), 1)
#define TBP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Configuration, read once by the constructor from TBPROF_* variables. */
struct tbp_config {
	bool enabled;            /* TBPROF_ENABLE (default 1) */
	char out[4096];          /* TBPROF_OUT (default "trace.zst") */
	size_t buffer_bytes;     /* TBPROF_BUFFER_SIZE: per-thread buffer (default 8 MiB) */
	bool python;             /* TBPROF_PYTHON: Python call paths (default 1) */
	uint64_t py_span_ns;     /* TBPROF_PY_SPAN_US * 1000 (default 100 us) */
	unsigned py_depth;       /* TBPROF_PY_DEPTH (default 32) */
	bool native;             /* TBPROF_NATIVE: native stacks (default 0) */
	unsigned native_depth;   /* TBPROF_NATIVE_DEPTH (default 16) */
	bool cupti;              /* TBPROF_CUPTI (default 1) */
	size_t cupti_buffer_bytes; /* TBPROF_CUPTI_BUFFER_SIZE: all CUPTI activity buffers (default 32 MiB; 0 = default) */
	int fork_mode;           /* TBPROF_FORK: 0 inert child, 1 child traces (default 1) */
	bool trace_all;          /* TBPROF_TRACE_ALL: write a trace even without CUDA use */
	int verbose;             /* TBPROF_VERBOSE */
	char cupti_path[4096];   /* TBPROF_CUPTI_PATH: load exactly this libcupti ("" = search) */
	bool hip_events;         /* TBPROF_HIP_EVENTS: HIP timing by hipEvents (interpose/hip_timing.c) */
	/* The process's place in a distributed job, from the launcher's
	 * variables (tbp_rank_from_env); -1 when not set. */
	int64_t rank, world_size, local_rank;
	bool launcher_agent;     /* torchrun's agent: launches ranks, is none (decided at start) */
	/* TBPROF_ON_DEMAND: armed, records nothing until a capture (capture.c) */
	bool on_demand;
	/* TBPROF_FLIGHT: the flight recorder (flight.c) keeps the last flight_ns of records in at most
	 * flight_mem bytes (TBPROF_FLIGHT_MEM) and writes them only when asked; 0: off.
	 * TBPROF_FLIGHT_SLOW: a dump when a step takes more than that many times the running median;
	 * TBPROF_FLIGHT_STALL: a dump when no step has ended for that many seconds (0: neither). */
	uint64_t flight_ns;
	size_t flight_mem;
	double flight_slow;
	uint64_t flight_stall_ns;
	/* TBPROF_CAPTURE_RANGE=cudaProfilerApi: cudaProfilerStart/Stop begin and end captures (on demand) */
	bool capture_range_profiler;
	/* TBPROF_CAPTURE_RANGE=nvtx:NAME[@DOMAIN]: each NVTX range NAME (of DOMAIN; of any domain
	 * without one) is a capture (on demand); "" when not asked */
	char capture_range_nvtx[256];
	char capture_range_nvtx_domain[256];
};
extern struct tbp_config tbp_cfg TBP_HIDDEN;

/* Current process state: 0 off/inert, 1 running.  Hooks check this first. */
extern volatile int tbp_active TBP_HIDDEN;
/* Read on every hook, written by start/stop/signal paths and the writer on
 * other threads: relaxed atomics (a stale value only costs one record). */
#define TBP_ACTIVE() __atomic_load_n(&tbp_active, __ATOMIC_RELAXED)

static inline uint64_t tbp_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Per-thread recursion guard: returns false if this thread is already
 * inside tbprof (the hook must then only forward to the real function). */
bool tbp_guard_enter(void) TBP_HIDDEN;
void tbp_guard_leave(void) TBP_HIDDEN;

/* Where a module's fork locks sit in tbprof's lock order, outermost first.  At
 * fork, lifecycle.c takes every lock in this order (the core's own at their
 * ranks), releases them in the reverse order in the parent, and resets them
 * in the child.  A module's rank says which of the core's locks it may take
 * (or call into the core under): only those of a higher rank. */
enum tbp_lock_rank {
	TBP_RANK_NONE = 0,       /* no fork callbacks */
	TBP_RANK_OUTER,          /* a module that interns, emits definitions or allocates from a thread of its own under its lock */
	TBP_RANK_CORE_CAPTURE,   /* core: the capture lock, then the writer's drain lock */
	TBP_RANK_PYTHON,         /* python.c's set-up lock (set-up may record a notice, which may start the trace) */
	TBP_RANK_CORE_START,     /* core: the start lock */
	TBP_RANK_NATIVE,         /* native.c's lock: a stack is interned under it */
	TBP_RANK_CORE_DEFS,      /* core: strings, definitions, thread registry */
	TBP_RANK_LEAF,           /* leaf locks, under which nothing of the core is called */
	TBP_RANK_COUNT
};

/* What a module lends the core's lifecycle: the hook modules (interpose/)
 * and the core's own CUPTI, Python and native-stack modules.  Each registers
 * its part from a load-time constructor (tbp_register_hook_ops), so the
 * lifecycle reaches them only through this table and never names them.
 * Any member may be NULL. */
struct tbp_hook_ops {
	/* Fork (enum tbp_lock_rank; required with any fork callback): the
	 * module's locks taken at its rank, released (parent) in the reverse
	 * order; in the child, after the core has reset its own locks, each
	 * module resets its locks and any per-process state, innermost first. */
	unsigned rank;
	void (*fork_prepare)(void);
	void (*fork_parent)(void);
	void (*fork_child)(void);
	/* The trace has started (its writer runs): a module may set up what it
	 * records with (Python's call paths). */
	void (*trace_started)(void);
	/* GPU records the module still holds are delivered now (CUPTI's flush):
	 * before a capture begins or ends and at exit.  Called only once a GPU
	 * call returned in this process. */
	void (*gpu_flush)(void);
	/* At exit, after every gpu_flush, before the writer's final drain: the
	 * GPU side stops collecting (called only once a GPU call returned),
	 * then every module's trace_stop. */
	void (*gpu_stop)(void);
	void (*trace_stop)(void);
	/* Installs `handler` for the signals tbprof flushes on, hidden from the
	 * program; signal_restore_default puts SIG_DFL back for one of them
	 * (called from the handler, so it must be async-signal-safe). */
	void (*signals_install)(void (*handler)(int));
	void (*signal_restore_default)(int sig);
	/* The GPU runtime this module hooks (enum tbp_runtime, 0: none) and whether it is loaded in
	 * the process: a trace started by no hooked call (a marker, TBPROF_TRACE_ALL) takes its header's
	 * runtime feature from the registrations. */
	unsigned runtime;
	bool (*runtime_loaded)(void);
};

/* The GPU runtimes hooks serve; the trace header's CUPTI/HIP features follow the one in use. */
enum tbp_runtime { TBP_RUNTIME_NONE = 0, TBP_RUNTIME_CUDA = 1, TBP_RUNTIME_HIP = 2 };
/* A hooked call of `runtime` is about to start the trace (the first one said is kept). */
void tbp_note_runtime(unsigned runtime) TBP_HIDDEN;
/* At most TBP_MAX_HOOK_OPS registrations; `ops` must stay valid for the
 * process's life.  A registration made after the trace started installs its
 * signal handlers at once.  Registrations come from constructor(102): after
 * libc_real.c's (101), before config.c's, which registers the fork handlers. */
#define TBP_MAX_HOOK_OPS 16
void tbp_register_hook_ops(const struct tbp_hook_ops *ops) TBP_HIDDEN;

/* A TBPROF_* boolean: 1/0, true/false, yes/no, on/off (any case); anything
 * else is one line on stderr and the default. */

/* Lazy start: first hook call starts the writer thread, opens the file. */
void tbp_ensure_started(void) TBP_HIDDEN;

/* Hot path.  Reserve a slot in this thread's buffer; NULL when disabled or
 * the buffer is full (the loss is counted and recorded as TBP_K_LOST).
 * The slot is zeroed except kind/stream_kind/tid; fill it, then commit. */
struct tbp_record *tbp_slot_acquire(unsigned kind) TBP_HIDDEN;
void tbp_slot_commit(struct tbp_record *rec) TBP_HIDDEN;
/* Same, for records of another stream (GPU activity from the CUPTI thread):
 * stream_kind/stream id are set by the caller in rec->stream_kind/rec->tid. */
void tbp_emit(const struct tbp_record *rec) TBP_HIDDEN;
/* Same, for a thread off the program's critical path (CUPTI's buffer
 * processing, HIP's event harvest): a full ring waits for the writer, up to
 * TBP_PATIENT_WAIT_MS in all until it drains, instead of dropping.  A ring
 * starts small and grows only at some heads, so a burst of thousands of GPU
 * records handed over at once would otherwise be lost to a ring still growing. */
#define TBP_PATIENT_WAIT_MS 200
void tbp_emit_patient(const struct tbp_record *rec) TBP_HIDDEN;

/* Definitions (rare: interning misses).  Copied; ordered before any record
 * committed after this call returns. */
void tbp_emit_def(const struct tbp_record *rec) TBP_HIDDEN;
/* A CLOCK definition: how GPU timestamps of `domain` were put in our clock (TBP_CLOCK_*), the
 * offset added to them and its uncertainty. */
static inline void tbp_emit_clock(uint64_t domain, int64_t offset_ns, uint64_t uncertainty_ns, unsigned method)
{
	struct tbp_record rec = { .kind = TBP_K_CLOCK, .stream_kind = TBP_STREAM_DEFS, .ts = tbp_now() };
	rec.u.clock.domain = domain;
	rec.u.clock.offset_ns = (uint64_t)offset_ns;
	rec.u.clock.uncertainty_ns = uncertainty_ns;
	rec.u.clock.method = method;
	tbp_emit_def(&rec);
}
/* Interned strings: returns a stable id > 0 (0 on failure).  Thread-safe. */
uint64_t tbp_intern_string(const char *s, size_t len) TBP_HIDDEN;

/* Around every real GPU API call, for joining GPU activity (cupti.c).
 * No-ops when CUPTI is not in use. */
void tbp_gpu_call_enter(uint64_t corr) TBP_HIDDEN;
void tbp_gpu_call_exit(uint64_t corr) TBP_HIDDEN;
/* After tbp_gpu_call_exit, for a driver call that makes GPU work (join_class: enum
 * tbp_api_category, TBP_CAT_LAUNCH for graph launches too), with its interval in CLOCK_MONOTONIC
 * ns: a library's statically linked runtime makes such calls inside runtime calls no hook sees,
 * and cupti.c joins that work through them. */
void tbp_gpu_driver_call_done(uint64_t corr, uint64_t start, uint64_t end, unsigned join_class) TBP_HIDDEN;
/* Called by hooks when CUDA is first seen in use (starts CUPTI) and on
 * cudaDeviceReset (flush); the lifecycle reaches flush and stop through
 * cupti.c's registration (gpu_flush, gpu_stop). */
void tbp_cupti_start(void) TBP_HIDDEN;
void tbp_cupti_flush(void) TBP_HIDDEN;
void tbp_cupti_stop(void) TBP_HIDDEN;

/* Python call path of the calling thread: interned TBP_K_CALLPATH id, or 0
 * (no Python, disabled, unsupported).  Safe with or without the GIL held. */
uint64_t tbp_py_callpath(void) TBP_HIDDEN;
/* Set once Python call paths are known to be unavailable for good (not a
 * Python process, or given up): hooks skip tbp_py_callpath's call, ~18 of
 * a launch's instructions in a C program (callgrind). */
extern bool tbp_py_inert TBP_HIDDEN;
/* Lazy, idempotent set-up, and the verbose summary at exit; lent to the
 * lifecycle as trace_started and trace_stop (python.c's registration). */
void tbp_py_init(void) TBP_HIDDEN;
void tbp_py_shutdown(void) TBP_HIDDEN;
/* Hooks that wait for the GPU call these so kernels from threads without
 * Python frames can be attributed to the waiting thread (python.c). */
void tbp_py_note_wait(uint64_t callpath) TBP_HIDDEN;

/* Native stack of the caller: interned TBP_K_NATIVE id, or 0. */
uint64_t tbp_native_stack(unsigned skip) TBP_HIDDEN;

/* Signal-safe diagnostics to stderr (prefix "tbprof: "). */
void tbp_log(const char *fmt, ...) TBP_HIDDEN __attribute__((format(printf, 1, 2)));
void tbp_warn_once(int *flag, const char *fmt, ...) TBP_HIDDEN
	__attribute__((format(printf, 2, 3)));

/* Exported (default visibility), resolved by the runner through
 * ctypes.CDLL(None): marks iteration boundaries (kind: enum tbp_marker_kind)
 * so tbanalyze can window its analysis to steady state.  A marker call also
 * starts tracing lazily, so CPU-only runs get a trace with Python spans.
 * Returns 0, or -1 when tbprof is disabled.
 *   int tbprof_marker(int kind, long long value, const char *label);
 */
TBP_EXPORT int tbprof_marker(int kind, long long value, const char *label);

/* cudaProfilerStart (start) / cudaProfilerStop returned success (interpose/profiler_range.c): a marker
 * in a trace being written; with TBPROF_CAPTURE_RANGE=cudaProfilerApi, a capture's begin and end. */
void tbp_profiler_api(bool start) TBP_HIDDEN;

/* NVTX ranges (interpose/nvtx.c, libtbprof as NVTX's injection library).  tbp_range_begin: when
 * records are being made (it starts the trace as a marker does), the time a range begins now, the
 * thread there, and which trace it is in (captures: each its own); else 0.  The hook takes the Python
 * call path itself (the lifecycle calls no module by name).
 * tbp_range_emit: the range's record, ended now (a mark: at `begin`), when records are being made
 * into the trace it began in. */
uint64_t tbp_range_begin(uint64_t *tid, unsigned *trace_gen) TBP_HIDDEN;
void tbp_range_emit(unsigned range_kind, uint64_t begin, uint64_t domain, uint64_t name, uint64_t callpath,
		    uint64_t depth, uint64_t id, uint64_t begin_tid, unsigned trace_gen) TBP_HIDDEN;
/* --capture-range nvtx:NAME[@DOMAIN] (TBPROF_CAPTURE_RANGE): a range named so (interned ids) begins a
 * capture when none is in progress (true: this one did), and its end ends it (capture.c). */
bool tbp_nvtx_capture_begin(uint64_t domain, uint64_t name) TBP_HIDDEN;
void tbp_nvtx_capture_end(void) TBP_HIDDEN;

/* The outermost torch backward()/autograd.grad() call returned (python.c, on demand only): a step
 * boundary for a `--steps` capture in a program without marks (capture.c). */
void tbp_capture_backward_done(void) TBP_HIDDEN;

/* Records a NOTICE (one line the analyzer shows). */
void tbp_notice(unsigned level, unsigned code, const char *message) TBP_HIDDEN;

#endif
