/*
 * libtbprof core, lifecycle: what the modules lend the core (tbp_register_hook_ops: the hooks of
 * interpose/, and CUPTI, Python, native stacks), the flush on fatal signals, lazy start, exit,
 * fork, notices and markers.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

/* ------------------------------------------------------------ hook registry */

/* Filled by the modules' load-time constructors; read lock-free (from signal
 * handlers and atfork handlers too): an entry is written before the count
 * that publishes it. */
static const struct tbp_hook_ops *hook_ops[TBP_MAX_HOOK_OPS];
static atomic_uint n_hook_ops;

static void hook_ops_restore_default(int sig)
{
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (hook_ops[i]->signal_restore_default)
			hook_ops[i]->signal_restore_default(sig);
}

static void tbp_on_signal(int sig);
/* Serializes the trace start, hook registration and fork. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

void tbp_register_hook_ops(const struct tbp_hook_ops *ops)
{
	if ((ops->fork_prepare || ops->fork_parent || ops->fork_child) &&
	    (ops->rank == TBP_RANK_NONE || ops->rank >= TBP_RANK_COUNT)) {
		tbp_log("internal: fork callbacks registered without a lock rank; ignored");
		return;
	}
	pthread_mutex_lock(&start_lock);
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_relaxed);
	if (n < TBP_MAX_HOOK_OPS) {
		hook_ops[n] = ops;
		atomic_store_explicit(&n_hook_ops, n + 1, memory_order_release);
		/* A library that started the trace from its own constructor ran
		 * before ours: the handlers are installed now. */
		if (ops->signals_install && atomic_load(&tbp_start_state) == 2)
			ops->signals_install(tbp_on_signal);
	} else {
		tbp_log("internal: more than %d hook registrations; one ignored", TBP_MAX_HOOK_OPS);
	}
	pthread_mutex_unlock(&start_lock);
}

/* ------------------------------------------------------------ signals */

/* Runs in whichever thread got the signal.  No I/O and no locks: it asks the
 * writer for a final drain, waits for it at most 2 s, then dies of the same
 * signal with the default disposition so the exit status is unchanged.
 * Installed, and hidden from the program, by interpose/signal.c. */
static void tbp_on_signal(int sig)
{
	int saved_errno = errno;
	TBP_SET_ACTIVE(0);
	if (atomic_load(&tbp_start_state) == 2 && !atomic_load(&writer_exited)) {
		atomic_store(&signal_pending, sig);
		atomic_store(&writer_wake, 1);
		futex_wake_all(&writer_wake);
		/* the flight recorder writes its dump now: longer */
		uint64_t deadline = tbp_now() + (tbp_cfg.flight_ns ? 8000000000ull : 2000000000ull);
		while (!atomic_load(&writer_exited)) {
			uint64_t now = tbp_now();
			if (now >= deadline)
				break;
			futex_wait(&writer_exited, 0, (unsigned)((deadline - now) / 1000000ull) + 1);
		}
	}
	hook_ops_restore_default(sig);
	raise(sig);   /* delivered when this handler returns (sig is blocked now) */
	errno = saved_errno;
}

static void tbp_install_signal_handlers(void)
{
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (hook_ops[i]->signals_install)
			hook_ops[i]->signals_install(tbp_on_signal);
}

/* ------------------------------------------------------------ lifecycle */

static atomic_int shutdown_done;
static atomic_int exit_hook_registered;
static bool is_fork_child;
static pid_t fork_parent_pid;
static void tbp_shutdown(void);
static void tbp_atfork_prepare(void);
static void tbp_atfork_parent(void);
static void tbp_atfork_child(void);

/* The runtime whose hooked call started the trace, TBP_RUNTIME_NONE when none did (a marker,
 * TBPROF_TRACE_ALL). */
static unsigned started_by_runtime;

void tbp_note_runtime(unsigned runtime)
{
	unsigned none = TBP_RUNTIME_NONE;
	__atomic_compare_exchange_n(&started_by_runtime, &none, runtime, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Is `runtime` loaded, as the registered hook modules that serve it say? */
static bool hook_ops_runtime_loaded(unsigned runtime)
{
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (hook_ops[i]->runtime == runtime && hook_ops[i]->runtime_loaded && hook_ops[i]->runtime_loaded())
			return true;
	return false;
}

/* Every registered module's `member` callback, in registration order. */
#define HOOK_OPS_CALL(member)                                                           \
	do {                                                                            \
		unsigned n_ = atomic_load_explicit(&n_hook_ops, memory_order_acquire);  \
		for (unsigned i_ = 0; i_ < n_; i_++)                                    \
			if (hook_ops[i_]->member)                                       \
				hook_ops[i_]->member();                                 \
	} while (0)

/* GPU records the modules still hold (CUPTI's), delivered: only once a GPU call returned. */
static void modules_gpu_flush(void)
{
	if (__atomic_load_n(&tbp_gpu_used, __ATOMIC_RELAXED))
		HOOK_OPS_CALL(gpu_flush);
}

/* Header features, decided when the writer opens (they cannot change
 * later): HIP when a HIP call started the trace or the HIP runtime is
 * loaded; CUPTI when it is wanted and the trace is not a HIP one (CUPTI
 * is only ever started by CUDA hooks); PYTHON when wanted and this process
 * runs CPython; NATIVE when wanted and built with libunwind. */
static uint32_t tbp_start_features(void)
{
	unsigned started = __atomic_load_n(&started_by_runtime, __ATOMIC_RELAXED);
	bool hip = started == TBP_RUNTIME_HIP ||
		   (started == TBP_RUNTIME_NONE && hook_ops_runtime_loaded(TBP_RUNTIME_HIP));
	uint32_t f = 0;
	if (hip)
		f |= TBP_FEAT_HIP;
	if (tbp_cfg.cupti && !hip)
		f |= TBP_FEAT_CUPTI;
	if (tbp_cfg.python && tbp_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
		f |= TBP_FEAT_PYTHON;
	if (tbp_cfg.native && TBP_HAVE_LIBUNWIND)
		f |= TBP_FEAT_NATIVE;
	return f;
}

static pid_t trace_pid;   /* the process whose trace the writer writes */
uint32_t trace_features;  /* the header's features, decided at start */

static void tbp_start_slow(void)
{
	pthread_mutex_lock(&start_lock);
	if (atomic_load(&tbp_start_state) != 0 || !TBP_ACTIVE()) {
		pthread_mutex_unlock(&start_lock);
		return;
	}
	atomic_store(&tbp_start_state, 1);
	static bool key_made;
	if (!key_made) {
		pthread_key_create(&tbuf_key, tbp_tbuf_retire);
		key_made = true;
	}
	session_compute();
	tbp_cfg.launcher_agent = tbp_is_launcher_agent();
	trace_features = tbp_start_features();
	if (tbp_cfg.native && TBP_HAVE_LIBUNWIND)
		trace_features |= TBP_FEAT_NATIVE;
	if (tbp_cfg.flight_ns) {
		/* The flight recorder: no file; the writer keeps the records (flight.c). */
		writer = NULL;
		tbp_output_none();
		events_written = false;
	} else {
		int fd = tbp_output_open();
		if (fd < 0) {
			int e = errno;
			char shown[2 * PATH_MAX + 2];
			tbp_log("cannot write trace to %s: %s; tracing disabled", tbp_output_shown(shown, sizeof shown), strerror(e));
			atomic_store(&tbp_start_state, 3);
			TBP_SET_ACTIVE(0);
			pthread_mutex_unlock(&start_lock);
			return;
		}
		struct tbp_writer_opts opts = { .compression_level = 0, .features = tbp_start_features() };
		if (tbp_cfg.native && TBP_HAVE_LIBUNWIND)
			opts.features |= TBP_FEAT_NATIVE;
		events_written = false;
		errno = 0;
		int rc = tbp_writer_open_fd(&writer, fd, &opts);
		if (rc != TBP_OK) {
			int e = errno;
			tbp_output_forget();   /* closed by tbp_writer_open_fd */
			char shown[2 * PATH_MAX + 2];
			tbp_log("cannot write trace to %s: %s; tracing disabled", tbp_output_shown(shown, sizeof shown),
				e ? strerror(e) : tbp_error_name(rc));
			atomic_store(&tbp_start_state, 3);
			TBP_SET_ACTIVE(0);
			pthread_mutex_unlock(&start_lock);
			return;
		}
	}
	trace_pid = getpid();
	tbp_intern_string(session_text, strlen(session_text));   /* see session_compute */
	if (tbp_cfg.verbose)
		tbp_log("tracing pid %d to %s", (int)getpid(), tbp_output_path());
	process_written = false;
	records_written = 0;
	tbp_build_process_record();
	atomic_store(&writer_stop, 0);
	atomic_store(&writer_exited, 0);
	atomic_store(&signal_pending, 0);
	/* The writer must not take the program's signals. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&writer_thread, NULL, tbp_writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		tbp_log("cannot start writer thread: %s; tracing disabled", strerror(rc));
		if (writer)
			tbp_writer_close(writer);
		writer = NULL;
		atomic_store(&tbp_start_state, 3);
		TBP_SET_ACTIVE(0);
		pthread_mutex_unlock(&start_lock);
		return;
	}
	/* Until the writer runs our code, its thread may still be inside the
	 * runtime's thread start-up, allocating under the allocator's locks: a
	 * fork then leaves them locked in the child (ASan's allocator has no fork
	 * handler: host_fork's child hung in its first malloc). Bounded wait. */
	uint64_t started_by = tbp_now() + 1000000000ull;
	while (!atomic_load(&writer_running) && tbp_now() < started_by)
		futex_wait(&writer_running, 0, 10);
	tbp_install_signal_handlers();
	atomic_store(&tbp_start_state, 2);
	pthread_mutex_unlock(&start_lock);
	if (is_fork_child) {
		char msg[96];
		snprintf(msg, sizeof msg, "forked child of pid %d", (int)fork_parent_pid);
		tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_FORK_CHILD, msg);
		/* Workers often end with _exit (no exit handlers) soon after:
		 * put the definitions and PROCESS record out now, so no file is
		 * ever only a header. */
		tbp_drain_now(200);
	}
	HOOK_OPS_CALL(trace_started);
}

void tbp_ensure_started(void)
{
	if (TBP_LIKELY(atomic_load_explicit(&tbp_start_state, memory_order_acquire) == 2))
		return;
	if (!TBP_ACTIVE() || atomic_load(&tbp_start_state) == 3)
		return;
	__atomic_store_n(&fork_child_waiting, 0, __ATOMIC_RELAXED);
	tbp_start_slow();
	/* A marker-only process: no GPU runtime to order against. */
}

static void tbp_register_exit_hook(void)
{
	if (atomic_exchange(&exit_hook_registered, 1))
		return;
	atexit(tbp_shutdown);
}

void tbp_note_gpu_used(void)
{
	if (__atomic_load_n(&tbp_gpu_used, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&tbp_gpu_used, 1, __ATOMIC_RELAXED);
	/* Registered now, after the GPU runtime's own exit handlers (it set them
	 * up inside the call that just returned), so ours runs first.  A marker
	 * may have registered one earlier; shutdown is idempotent. */
	atomic_store(&exit_hook_registered, 1);
	atexit(tbp_shutdown);
}

void tbp_start_trace_all(void)
{
	/* Explicit opt-in (TBPROF_TRACE_ALL): a trace even without GPU use. */
	tbp_start_slow();
	tbp_register_exit_hook();
}

pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

static void tbp_shutdown_locked(void);

static void tbp_shutdown(void)
{
	if (tbp_cfg.on_demand || tbp_cfg.flight_ns)
		tbp_capture_disarm();
	if (atomic_load(&shutdown_done))
		return;
	/* A capture ending on another thread finishes first (bounded: its writer's join). */
	if (tbp_cfg.on_demand)
		pthread_mutex_lock(&capture_lock);
	bool capturing = tbp_cfg.on_demand && atomic_load(&tbp_start_state) == 2;
	tbp_shutdown_locked();
	if (capturing)
		tbp_capture_exit_answer();   /* the capture the exit cut short is written: say so */
	if (tbp_cfg.on_demand)
		pthread_mutex_unlock(&capture_lock);
}

static void tbp_shutdown_locked(void)
{
	if (atomic_exchange(&shutdown_done, 1))
		return;
	if (atomic_load(&tbp_start_state) != 2)
		return;
	int guard = tbp_tls_guard;
	tbp_tls_guard = 1;
	if (__atomic_load_n(&tbp_gpu_used, __ATOMIC_RELAXED)) {
		HOOK_OPS_CALL(gpu_flush);
		HOOK_OPS_CALL(gpu_stop);
	}
	HOOK_OPS_CALL(trace_stop);
	atomic_store(&writer_stop, 1);
	atomic_store(&writer_wake, 1);
	futex_wake_all(&writer_wake);
	/* Bounded wait: never hang the program's exit. */
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 2;
	if (pthread_timedjoin_np(writer_thread, NULL, &deadline) != 0)
		tbp_log("writer did not finish within 2 s at exit; the trace may be truncated");
	TBP_SET_ACTIVE(0);
	atomic_store(&tbp_start_state, 3);
	tbp_tls_guard = guard;
}

/* exec replaces the process without exit handlers: finish the trace as
 * exit would (CUPTI flush, final drain, END, seek table).  If the exec then
 * fails, the process goes on untraced, exactly as without tbprof.  Not in
 * a vfork child (it shares our memory but is another pid): the trace and
 * the writer are the parent's. */
void tbp_before_exec(void)
{
	if (atomic_load(&tbp_start_state) != 2 || getpid() != trace_pid)
		return;
	int saved_errno = errno;
	if (tbp_cfg.verbose)
		tbp_log("exec: finishing the trace of pid %d", (int)trace_pid);
	if (tbp_cfg.on_demand)
		tbp_capture_disarm();
	tbp_shutdown();
	errno = saved_errno;
}

__attribute__((destructor)) static void tbp_fini(void)
{
	tbp_shutdown();
}

/* ------------------------------------------------------------ captures */

unsigned capture_gen;
atomic_int capture_closing;

/* Caller holds capture_lock. */
int tbp_capture_begin(const char *path)
{
	if (atomic_load(&tbp_start_state) == 2 || atomic_load(&shutdown_done) || !tbp_cfg.enabled)
		return -1;
	int guard = tbp_tls_guard;
	tbp_tls_guard = 1;
	snprintf(capture_out, sizeof capture_out, "%s", path);
	/* What the rings hold from before (a hook that committed as the last capture ended) is not
	 * this capture's.  No writer runs now: the tails are ours to move. */
	pthread_mutex_lock(&registry_lock);
	for (struct tbp_tbuf *b = registry; b; b = b->next)
		atomic_store_explicit(&b->tail, atomic_load_explicit(&b->head, memory_order_acquire),
			memory_order_release);
	pthread_mutex_unlock(&registry_lock);
	/* Every definition made so far goes into this file: each capture is a whole trace. */
	def_written = 0;
	atomic_store(&lost_total_all, 0);
	capture_gen++;
	/* GPU records CUPTI still holds from before (their launches were not recorded) go nowhere. */
	modules_gpu_flush();
	atomic_store(&tbp_start_state, 0);
	TBP_SET_ACTIVE(1);
	tbp_start_slow();
	int ok = atomic_load(&tbp_start_state) == 2;
	if (ok)
		tbp_register_exit_hook();   /* a capture open at exit is finished as a whole run's trace */
	if (!ok) {
		TBP_SET_ACTIVE(0);
		atomic_store(&tbp_start_state, 0);
		capture_out[0] = 0;
	}
	tbp_tls_guard = guard;
	return ok ? 0 : -1;
}

/* Caller holds capture_lock.  The hooks stop recording at once; GPU work they launched is still
 * delivered (CUPTI flush) before the writer's final drain. */
int tbp_capture_end(void)
{
	if (atomic_load(&tbp_start_state) != 2 || atomic_load(&shutdown_done))
		return -1;
	int guard = tbp_tls_guard;
	tbp_tls_guard = 1;
	atomic_store(&capture_closing, 1);
	TBP_SET_ACTIVE(0);
	modules_gpu_flush();
	atomic_store(&writer_stop, 1);
	atomic_store(&writer_wake, 1);
	futex_wake_all(&writer_wake);
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	int joined = pthread_timedjoin_np(writer_thread, NULL, &deadline) == 0;
	if (!joined)
		tbp_log("writer did not finish the capture %s within 5 s; it may be truncated", capture_out);
	atomic_store(&capture_closing, 0);
	struct stat st;
	int written = joined && lstat(capture_out, &st) == 0;
	capture_out[0] = 0;
	/* Armed again: the next capture starts the writer anew.  A writer that did not finish keeps
	 * the process from capturing again (its state is not ours to reuse). */
	atomic_store(&tbp_start_state, joined ? 0 : 3);
	tbp_tls_guard = guard;
	return written;
}

/* ------------------------------------------------------------ fork */

/* Per thread: two threads may fork at once.  The forking thread's value is
 * still there in the child. */
static __thread sigset_t fork_saved_mask __attribute__((tls_model("initial-exec")));

void tbp_register_atfork(void)
{
	pthread_atfork(tbp_atfork_prepare, tbp_atfork_parent, tbp_atfork_child);
}

/* The core's own fork locks, at their ranks (enum tbp_lock_rank). */
static void core_fork_prepare(unsigned rank)
{
	switch (rank) {
	case TBP_RANK_CORE_CAPTURE:
		pthread_mutex_lock(&capture_lock);
		/* Then the writer's: it may need the locks below to finish its drain. */
		pthread_mutex_lock(&writer_busy_lock);
		break;
	case TBP_RANK_CORE_START:
		pthread_mutex_lock(&start_lock);
		break;
	case TBP_RANK_CORE_DEFS:
		pthread_mutex_lock(&intern_lock);
		pthread_mutex_lock(&def_lock);
		pthread_mutex_lock(&registry_lock);
		break;
	}
}

static void core_fork_parent(unsigned rank)
{
	switch (rank) {
	case TBP_RANK_CORE_CAPTURE:
		pthread_mutex_unlock(&writer_busy_lock);
		pthread_mutex_unlock(&capture_lock);
		break;
	case TBP_RANK_CORE_START:
		pthread_mutex_unlock(&start_lock);
		break;
	case TBP_RANK_CORE_DEFS:
		pthread_mutex_unlock(&registry_lock);
		pthread_mutex_unlock(&def_lock);
		pthread_mutex_unlock(&intern_lock);
		break;
	}
}

/* Every lock tbprof holds is taken here, in rank order (enum tbp_lock_rank:
 * the order the code nests them), the core's and the registered modules',
 * so the child never inherits one held by a thread it does not have.
 * Within a rank, modules go in registration order. */
static void tbp_atfork_prepare(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &fork_saved_mask);
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned rank = TBP_RANK_NONE + 1; rank < TBP_RANK_COUNT; rank++) {
		core_fork_prepare(rank);
		for (unsigned i = 0; i < n; i++)
			if (hook_ops[i]->rank == rank && hook_ops[i]->fork_prepare)
				hook_ops[i]->fork_prepare();
	}
}

static void tbp_atfork_parent(void)
{
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned rank = TBP_RANK_COUNT - 1; rank > TBP_RANK_NONE; rank--) {
		for (unsigned i = n; i-- > 0;)
			if (hook_ops[i]->rank == rank && hook_ops[i]->fork_parent)
				hook_ops[i]->fork_parent();
		core_fork_parent(rank);
	}
	pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
}

/* The child has one thread and no writer.  Rings of the parent's other
 * threads are unmapped; this thread's ring is emptied (the parent writes
 * those records).  Definitions are kept and replayed into the child's own
 * file, so interned ids remain valid. */
static void tbp_atfork_child(void)
{
	pthread_mutex_init(&capture_lock, NULL);
	pthread_mutex_init(&writer_busy_lock, NULL);
	atomic_store(&writer_running, 0);   /* the parent's writer is not the child's */
	pthread_mutex_init(&registry_lock, NULL);
	pthread_mutex_init(&def_lock, NULL);
	pthread_mutex_init(&intern_lock, NULL);
	pthread_mutex_init(&start_lock, NULL);
	if (tbp_cfg.on_demand || tbp_cfg.flight_ns)
		tbp_capture_fork_child();
	if (tbp_cfg.flight_ns)
		tbp_flight_fork_child();
	/* Innermost first; a module's reset may use the core's locks, reset above. */
	unsigned n = atomic_load_explicit(&n_hook_ops, memory_order_acquire);
	for (unsigned rank = TBP_RANK_COUNT - 1; rank > TBP_RANK_NONE; rank--)
		for (unsigned i = n; i-- > 0;)
			if (hook_ops[i]->rank == rank && hook_ops[i]->fork_child)
				hook_ops[i]->fork_child();
	if (atomic_load(&tbp_start_state) != 2) {
		/* The parent was not tracing (not yet, or it could not): the
		 * child is the same kind of process, nothing else to reset. */
		pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
		return;
	}
	struct tbp_tbuf *mine = tbp_tls_buf;
	struct tbp_tbuf *b = registry;
	registry = NULL;
	while (b) {
		struct tbp_tbuf *next = b->next;
		if (b != mine)
			munmap(b, b->map_bytes);
		b = next;
	}
	if (mine) {
		atomic_store(&mine->head, 0);
		atomic_store(&mine->tail, 0);
		mine->stage_open = false;
		mine->lost = 0;
		atomic_store(&mine->lost_total, 0);
		mine->lost_reported = 0;
		atomic_store(&mine->retired, 0);
		mine->thread_announced = false;
		mine->tid = (uint32_t)tbp_gettid();
		mine->next = NULL;
		registry = mine;
	}
	tbp_output_after_fork();
	writer = NULL;       /* the parent's writer state: not ours to flush */
	def_written = 0;
	process_written = false;
	atomic_store(&writer_wake, 0);
	atomic_store(&writer_stop, 0);
	atomic_store(&writer_exited, 0);
	atomic_store(&signal_pending, 0);
	atomic_store(&shutdown_done, 0);
	atomic_store(&lost_total_all, 0);
	int was_running = atomic_load(&tbp_start_state) == 2;
	atomic_store(&tbp_start_state, 0);
	is_fork_child = true;
	fork_parent_pid = getppid();
	/* A child of a tracing parent traces only with TBPROF_FORK=1 (the
	 * default); a child of a parent that never started behaves as the
	 * parent would have. */
	if (was_running)
		TBP_SET_ACTIVE(tbp_cfg.enabled && tbp_cfg.fork_mode);
	/* A child of an armed process is armed, whatever its parent was capturing: the capture's
	 * file is the parent's.  It has no control thread (requests are answered by exec'd images). */
	if (tbp_cfg.on_demand) {
		TBP_SET_ACTIVE(0);
		capture_out[0] = 0;
		atomic_store(&capture_closing, 0);
	}
	fork_child_waiting = 1;
	pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
	if (mine && TBP_ACTIVE())
		mine->thread_announced = false;
}

/* ------------------------------------------------------------ notices, markers */

void tbp_notice(unsigned level, unsigned code, const char *message)
{
	if (!TBP_ACTIVE())
		return;
	bool entered = tbp_guard_enter();
	uint64_t msg = message ? tbp_intern_string(message, strlen(message)) : 0;
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_NOTICE);
	if (rec) {
		rec->ts = tbp_now();
		rec->u.notice.level = level;
		rec->u.notice.code = code;
		rec->u.notice.message = msg;
		tbp_slot_commit(rec);
	}
	if (entered)
		tbp_guard_leave();
}

TBP_EXPORT int tbprof_marker(int kind, long long value, const char *label)
{
	if (tbp_cfg.on_demand || tbp_cfg.flight_ns)
		tbp_capture_marker_before(kind);
	if (!tbp_cfg.enabled || !TBP_ACTIVE())
		return tbp_cfg.on_demand ? 0 : -1;
	int saved_errno = errno;
	if (!tbp_guard_enter()) {
		errno = saved_errno;
		return 0;
	}
	tbp_ensure_started();
	tbp_register_exit_hook();
	uint64_t label_id = label ? tbp_intern_string(label, strlen(label)) : 0;
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_MARKER);
	if (rec) {
		rec->ts = tbp_now();
		rec->u.marker.marker_kind = (uint64_t)kind;
		rec->u.marker.value = (uint64_t)value;
		rec->u.marker.label = label_id;
		tbp_slot_commit(rec);
	}
	tbp_guard_leave();
	if (tbp_cfg.on_demand || tbp_cfg.flight_ns)
		tbp_capture_marker_after(kind);
	errno = saved_errno;
	return TBP_ACTIVE() || tbp_cfg.on_demand ? 0 : -1;
}

/* ------------------------------------------------------------ NVTX ranges (interpose/nvtx.c) */

uint64_t tbp_range_begin(uint64_t *tid, unsigned *trace_gen)
{
	if (!tbp_cfg.enabled || !TBP_ACTIVE() || !tbp_guard_enter())
		return 0;
	/* A range starts the trace as a marker does: a CPU-only program's ranges are its trace. */
	tbp_ensure_started();
	tbp_register_exit_hook();
	uint64_t ts = 0;
	if (TBP_ACTIVE()) {
		ts = tbp_now();
		*tid = (uint64_t)tbp_gettid();
		*trace_gen = __atomic_load_n(&capture_gen, __ATOMIC_RELAXED);
	}
	tbp_guard_leave();
	return ts;
}

void tbp_range_emit(unsigned range_kind, uint64_t begin, uint64_t domain, uint64_t name, uint64_t callpath,
		    uint64_t depth, uint64_t id, uint64_t begin_tid, unsigned trace_gen)
{
	/* A range begun in an earlier capture and ended in this one began before this file did. */
	if (!TBP_ACTIVE() || trace_gen != __atomic_load_n(&capture_gen, __ATOMIC_RELAXED) || !tbp_guard_enter())
		return;
	struct tbp_record *rec = tbp_slot_acquire(TBP_K_RANGE);
	if (rec) {
		rec->ts = begin;
		rec->u.range.end = range_kind == TBP_NVTX_MARK ? begin : tbp_now();
		rec->u.range.range_kind = range_kind;
		rec->u.range.domain = domain;
		rec->u.range.name = name;
		rec->u.range.callpath = callpath;
		rec->u.range.depth = depth;
		rec->u.range.id = id;
		rec->u.range.begin_tid = begin_tid;
		tbp_slot_commit(rec);
	}
	tbp_guard_leave();
}
