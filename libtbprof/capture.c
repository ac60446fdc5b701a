/*
 * libtbprof core, captures on demand (TBPROF_ON_DEMAND=1, `tbprof record --on-demand`): the process
 * runs armed, recording nothing and writing no file, until a capture is asked for:
 *   - by `tbprof capture PID [--for S | --steps N] [-o FILE]`, through a request file in the user's
 *     private directory (control_dir.h), which a control thread of ours looks for every 100 ms (a
 *     stat(2) of one name: no signal is taken from the program, no socket is opened);
 *   - from Python (python/tbprof: tbprof.capture, start, stop, mark_step), through the functions
 *     exported below.
 * A capture of N steps begins at the next step boundary (an ITER_BEGIN mark: the runner's, or
 * tbprof.mark_step()) and ends after the N-th ITER_END mark is recorded; one of S seconds begins at
 * once.  The trace machinery is the whole run's (lifecycle.c tbp_capture_begin / tbp_capture_end):
 * each capture is one complete trace file.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "control_dir.h"

enum cap_state {
	CAP_IDLE = 0,      /* armed, nothing asked */
	CAP_PENDING = 1,   /* N steps asked: begins at the next ITER_BEGIN mark */
	CAP_RUNNING = 2,   /* recording */
	CAP_ENDING = 3,    /* its steps are done: the control thread finishes the file */
};

static atomic_int cap_state;
/* The capture asked for (under capture_lock, cap_state published after them). */
static struct {
	unsigned long long id;    /* the request's id; 0: asked from Python */
	char path[PATH_MAX];
	long long steps;          /* > 0: a capture of that many steps */
	bool by_backward;         /* steps are backward() calls (the program marks none) */
	long long backwards;      /* backward() calls seen in this capture */
	uint64_t deadline_ns;     /* > 0: ends then (CLOCK_MONOTONIC) */
} cap;
static atomic_llong steps_done;
static atomic_int step_marks_seen;      /* an ITER_BEGIN mark was made in this process */
static unsigned capture_count;          /* captures this process began: default names */
/* The last capture's outcome, for Python's wait(): 1 written, 0 no event, -1 failed. */
static int last_result = -1;
static char last_path[PATH_MAX];

static char control_dir[PATH_MAX];
static char armed_path[PATH_MAX + 32];
static pid_t armed_pid;
static pthread_t control_thread;
static bool control_running;
static char fork_tag[32];          /* a forked child's pid: its default capture names carry it */
static atomic_int control_wake;    /* futex word */
static atomic_int control_quit;

/* ------------------------------------------------------------ small files */

/* Writes `text` to dir/name through a temporary name and a rename: a reader sees all of it or
 * nothing. */
static void write_small(const char *name, const char *text)
{
	char tmp[PATH_MAX + 64], path[PATH_MAX + 64];
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", control_dir, name);
	snprintf(path, sizeof path, "%s/%s", control_dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	size_t len = strlen(text);
	bool ok = write(fd, text, len) == (ssize_t)len;
	close(fd);
	if (!ok || rename(tmp, path) != 0)
		unlink(tmp);
}

void tbp_capture_answer(unsigned long long id, const char *text)
{
	if (!id || !control_dir[0])
		return;
	char name[96];
	snprintf(name, sizeof name, "%d.%llu.done", (int)getpid(), id);
	write_small(name, text);
}

/* This process's start time, clock ticks since boot (/proc/self/stat field 22). */
static unsigned long long start_ticks(void)
{
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* ------------------------------------------------------------ begin, end */

/* Caller holds capture_lock.  Begins the capture described by `cap`. */
static int begin_locked(void)
{
	capture_count++;
	atomic_store(&steps_done, 0);
	if (tbp_capture_begin(cap.path) != 0) {
		last_result = -1;
		snprintf(last_path, sizeof last_path, "%s", cap.path);
		char msg[PATH_MAX + 64];
		snprintf(msg, sizeof msg, "error cannot write %s: %s\n", cap.path, strerror(errno));
		tbp_capture_answer(cap.id, msg);
		atomic_store(&cap_state, CAP_IDLE);
		return -1;
	}
	atomic_store(&cap_state, CAP_RUNNING);
	if (tbp_cfg.verbose)
		tbp_log("capture %u of pid %d to %s", capture_count, (int)getpid(), cap.path);
	return 0;
}

/* Caller holds capture_lock.  Ends the capture in progress and answers its requester. */
static void end_locked(void)
{
	int r = tbp_capture_end();
	last_result = r < 0 ? -1 : r;
	snprintf(last_path, sizeof last_path, "%s", cap.path);
	char msg[PATH_MAX + 16];
	if (r > 0)
		snprintf(msg, sizeof msg, "ok %s\n", cap.path);
	else
		snprintf(msg, sizeof msg, "%s", r == 0 ? "empty\n" : "error the capture was not running\n");
	tbp_capture_answer(cap.id, msg);
	atomic_store(&cap_state, CAP_IDLE);
}

/* ------------------------------------------------------------ steps */

void tbp_capture_marker_before(int kind)
{
	if (tbp_cfg.flight_ns)
		return;   /* the flight recorder counts steps after the mark */
	if (kind == TBP_MARK_ITER_BEGIN && !atomic_load_explicit(&step_marks_seen, memory_order_relaxed))
		atomic_store(&step_marks_seen, 1);
	if (kind != TBP_MARK_ITER_BEGIN || atomic_load_explicit(&cap_state, memory_order_acquire) != CAP_PENDING)
		return;
	int saved_errno = errno;
	pthread_mutex_lock(&capture_lock);
	if (atomic_load(&cap_state) == CAP_PENDING)
		begin_locked();
	pthread_mutex_unlock(&capture_lock);
	errno = saved_errno;
}

void tbp_capture_marker_after(int kind)
{
	if (tbp_cfg.flight_ns) {
		tbp_flight_step_mark(kind);
		return;
	}
	if (cap.by_backward && kind == TBP_MARK_ITER_BEGIN)
		atomic_store(&step_marks_seen, 0);   /* our own marks, not the program's */
	if (kind != TBP_MARK_ITER_END || atomic_load_explicit(&cap_state, memory_order_acquire) != CAP_RUNNING ||
	    cap.steps <= 0)
		return;
	if (atomic_fetch_add(&steps_done, 1) + 1 < cap.steps)
		return;
	/* The N-th step ended: nothing after its mark is recorded.  The file is finished off this
	 * thread (the program's), by the control thread; without one, here. */
	int expected = CAP_RUNNING;
	if (!atomic_compare_exchange_strong(&cap_state, &expected, CAP_ENDING))
		return;
	atomic_store(&capture_closing, 1);
	TBP_SET_ACTIVE(0);
	if (control_running) {
		atomic_store(&control_wake, 1);
		futex_wake_all(&control_wake);
		return;
	}
	int saved_errno = errno;
	pthread_mutex_lock(&capture_lock);
	if (atomic_load(&cap_state) == CAP_ENDING)
		end_locked();
	pthread_mutex_unlock(&capture_lock);
	errno = saved_errno;
}

/* ------------------------------------------------------------ requests */

/* Reads dir/PID.req, if there is one, and acts on it. */
static void take_request(void)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%d.req", control_dir, (int)getpid());
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[PATH_MAX + 256];
	struct stat st;
	ssize_t n = -1;
	/* the directory is private; the file must still be its user's or root's */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == getuid() || st.st_uid == 0))
		n = read(fd, buf, sizeof buf - 1);
	close(fd);
	unlink(path);
	if (n <= 0)
		return;
	buf[n] = 0;
	unsigned long long id = 0;
	long long for_ms = 0, steps = 0;
	int multi = 0;
	char out[PATH_MAX] = "";
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strncmp(line, "id ", 3))
			id = strtoull(line + 3, NULL, 10);
		else if (!strncmp(line, "for_ms ", 7))
			for_ms = strtoll(line + 7, NULL, 10);
		else if (!strncmp(line, "steps ", 6))
			steps = strtoll(line + 6, NULL, 10);
		else if (!strncmp(line, "multi ", 6))
			multi = atoi(line + 6);
		else if (!strncmp(line, "out ", 4))
			snprintf(out, sizeof out, "%s", line + 4);
	}
	if (!id)
		return;
	if (tbp_cfg.flight_ns) {
		/* The flight recorder writes what it holds: the last TBPROF_FLIGHT seconds, up to now. */
		char dump_path[PATH_MAX];
		if (out[0] && multi) {
			char tag[32];
			if (tbp_cfg.rank >= 0)
				snprintf(tag, sizeof tag, "rank%lld", (long long)tbp_cfg.rank);
			else
				snprintf(tag, sizeof tag, "%d", (int)getpid());
			tbp_capture_tagged_path(dump_path, sizeof dump_path, out, tag);
		} else {
			snprintf(dump_path, sizeof dump_path, "%s", out);
		}
		if (atomic_load(&tbp_start_state) != 2) {
			tbp_capture_answer(id, "empty\n");   /* nothing traced yet: no GPU use, no mark */
			return;
		}
		tbp_flight_request(dump_path[0] ? dump_path : NULL, id, "flight recorder: dump asked by tbprof capture");
		return;
	}
	pthread_mutex_lock(&capture_lock);
	if (atomic_load(&cap_state) != CAP_IDLE || atomic_load(&tbp_start_state) == 2) {
		pthread_mutex_unlock(&capture_lock);
		tbp_capture_answer(id, "error a capture is already in progress in this process\n");
		return;
	}
	/* Several processes answer one request (the ranks under a launcher): each names its file
	 * by its rank, else its pid. */
	char tag[32] = "";
	if (multi) {
		if (tbp_cfg.rank >= 0)
			snprintf(tag, sizeof tag, "rank%lld", (long long)tbp_cfg.rank);
		else
			snprintf(tag, sizeof tag, "%d", (int)getpid());
	}
	cap.id = id;
	cap.steps = steps;
	cap.deadline_ns = 0;
	cap.by_backward = false;
	if (out[0] && tag[0])
		tbp_capture_tagged_path(cap.path, sizeof cap.path, out, tag);
	else if (out[0])
		snprintf(cap.path, sizeof cap.path, "%s", out);
	else
		tbp_capture_default_path(cap.path, sizeof cap.path, "capture", capture_count + 1,
			tag[0] ? tag : fork_tag[0] ? fork_tag : NULL);
	if (steps > 0 && multi && !atomic_load(&step_marks_seen)) {
		/* One of several processes that has marked no step: a launcher's shell, torchrun's agent.
		 * The ranks that mark them answer for the job. */
		pthread_mutex_unlock(&capture_lock);
		tbp_capture_answer(id, "nosteps\n");
		return;
	} else if (steps > 0 && !atomic_load(&step_marks_seen) && tbp_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
		/* No marks: recording begins now (the Python hooks go in) and the steps are what lies
		 * between the ends of its backward() calls, marked as the runner marks them. */
		cap.by_backward = true;
		cap.backwards = 0;
		begin_locked();
	} else if (steps > 0) {
		atomic_store(&cap_state, CAP_PENDING);
	} else {
		cap.deadline_ns = tbp_now() + (uint64_t)(for_ms > 0 ? for_ms : 5000) * 1000000ull;
		begin_locked();
	}
	pthread_mutex_unlock(&capture_lock);
}

/* dir/PID.cancel: the requester stopped waiting. */
static void take_cancel(void)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%d.cancel", control_dir, (int)getpid());
	if (unlink(path) != 0)
		return;
	pthread_mutex_lock(&capture_lock);
	int st = atomic_load(&cap_state);
	/* the requester is gone: no answer */
	if (cap.id && st == CAP_PENDING) {
		cap.id = 0;
		atomic_store(&cap_state, CAP_IDLE);
	} else if (cap.id && (st == CAP_RUNNING || st == CAP_ENDING)) {
		cap.id = 0;
		end_locked();
	}
	pthread_mutex_unlock(&capture_lock);
}

/* dir/PID.armed: `tbprof capture` finds this process by it (with its start time, so a reused pid is
 * not taken for it). */
static void publish_armed(void)
{
	armed_pid = getpid();
	char text[64], name[32];
	snprintf(text, sizeof text, "%llu\n", start_ticks());
	snprintf(name, sizeof name, "%d.armed", (int)armed_pid);
	snprintf(armed_path, sizeof armed_path, "%s/%s", control_dir, name);
	write_small(name, text);
}

static void *control_main(void *arg)
{
	bool publish_later = arg != NULL;
	tbp_tls_guard = 1;   /* nothing this thread does is traced */
	pthread_setname_np(pthread_self(), "tbprof-control");
	while (!atomic_load(&control_quit)) {
		futex_wait(&control_wake, 0, 100);
		atomic_store(&control_wake, 0);
		if (atomic_load(&control_quit))
			break;
		if (publish_later) {
			/* A forked child says it is armed only once it has lived one poll period: one that
			 * execs at once (a subprocess) leaves no file behind it. */
			publish_later = false;
			publish_armed();
		}
		take_request();
		take_cancel();
		if (tbp_cfg.flight_ns)
			tbp_flight_watch();
		int st = atomic_load(&cap_state);
		if (st == CAP_ENDING || (st == CAP_RUNNING && cap.deadline_ns && tbp_now() >= cap.deadline_ns)) {
			pthread_mutex_lock(&capture_lock);
			st = atomic_load(&cap_state);
			if (st == CAP_ENDING || (st == CAP_RUNNING && cap.deadline_ns && tbp_now() >= cap.deadline_ns))
				end_locked();
			pthread_mutex_unlock(&capture_lock);
		}
	}
	return NULL;
}

/* The control thread, which takes none of the program's signals.  publish_later: it writes
 * PID.armed itself, after its first poll period (a forked child). */
static void start_control(bool publish_later)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_store(&control_quit, 0);
	atomic_store(&control_wake, 0);
	control_running = pthread_create(&control_thread, NULL, control_main, publish_later ? (void *)1 : NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* From the constructor.  A process whose private directory cannot be had (another user's, or one
 * others may enter) says so once and is captured only from Python. */
void tbp_capture_arm(void)
{
	if (tbp_control_dir(getuid(), true, control_dir, sizeof control_dir) != 0) {
		tbp_log("on demand: %s is not a private directory of uid %u (%s); `tbprof capture` cannot "
			"reach pid %d", control_dir, (unsigned)getuid(),
			errno == EPERM ? "owned by another user or open to others" : strerror(errno), (int)getpid());
		control_dir[0] = 0;
		return;
	}
	publish_armed();
	start_control(false);
	if (!control_running) {
		unlink(armed_path);
		armed_path[0] = 0;
	}
}

void tbp_capture_disarm(void)
{
	/* The thread first: a forked child's may be about to write PID.armed. */
	if (control_running && getpid() == armed_pid) {
		atomic_store(&control_quit, 1);
		atomic_store(&control_wake, 1);
		futex_wake_all(&control_wake);
		/* Bounded: the thread may be finishing a capture (it holds capture_lock, which our
		 * caller's exit path takes next anyway). */
		struct timespec deadline;
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 6;
		if (!pthread_equal(pthread_self(), control_thread))
			pthread_timedjoin_np(control_thread, NULL, &deadline);
		control_running = false;
	}
	if (armed_path[0] && getpid() == armed_pid) {
		unlink(armed_path);
		armed_path[0] = 0;
	}
}

void tbp_capture_exit_answer(void)
{
	int st = atomic_load(&cap_state);
	if (st != CAP_RUNNING && st != CAP_ENDING)
		return;
	struct stat sb;
	bool written = lstat(cap.path, &sb) == 0;
	char msg[PATH_MAX + 16];
	snprintf(msg, sizeof msg, written ? "ok %s\n" : "empty\n", cap.path);
	tbp_capture_answer(cap.id, msg);
	last_result = written;
	snprintf(last_path, sizeof last_path, "%s", cap.path);
	atomic_store(&cap_state, CAP_IDLE);
}

/* Called in a forked child (lifecycle.c's atfork child handler): what the parent had asked for is
 * the parent's, and its control thread did not survive the fork.  An armed child gets a control
 * thread of its own, so `tbprof capture CHILD` (or of the launcher above it) reaches it. */
void tbp_capture_fork_child(void)
{
	control_running = false;
	armed_path[0] = 0;
	atomic_store(&cap_state, CAP_IDLE);
	cap.id = 0;
	atomic_store(&step_marks_seen, 0);
	/* The parent's trace names are the parent's: the child's default names carry its pid. */
	snprintf(fork_tag, sizeof fork_tag, "%d", (int)getpid());
	capture_count = 0;
	if (tbp_cfg.on_demand && tbp_cfg.enabled && control_dir[0]) {
		armed_pid = getpid();
		start_control(true);
	}
}

/* ------------------------------------------------------------ from Python (python/tbprof) */

/* Begins a capture into `path` (NULL or "": the default name) now, or, with steps > 0, at the next
 * step boundary for that many steps; with seconds > 0 it ends by itself after them.  The file's
 * name into out.  0; -1 not armed (not on demand); -2 a capture is already in progress; -3 the
 * file cannot be written (errno). */
TBP_EXPORT int tbprof_capture_start(const char *path, long long steps, double seconds, char *out, size_t cap_len)
{
	if (!tbp_cfg.on_demand)
		return -1;
	int saved_errno = errno, rc = 0;
	pthread_mutex_lock(&capture_lock);
	if (atomic_load(&cap_state) != CAP_IDLE || atomic_load(&tbp_start_state) == 2) {
		rc = -2;
	} else {
		cap.id = 0;
		cap.by_backward = false;
		cap.steps = steps > 0 ? steps : 0;
		cap.deadline_ns = seconds > 0 ? tbp_now() + (uint64_t)(seconds * 1e9) : 0;
		if (path && *path) {
			char cwd[PATH_MAX];
			size_t lc = 0, lp = strlen(path);
			if (path[0] != '/' && getcwd(cwd, sizeof cwd) && (lc = strlen(cwd)) + lp + 2 <= sizeof cap.path) {
				/* relative to the directory current now, as the program meant it */
				memcpy(cap.path, cwd, lc);
				cap.path[lc] = '/';
				memcpy(cap.path + lc + 1, path, lp + 1);
			} else {
				snprintf(cap.path, sizeof cap.path, "%s", path);
			}
		} else {
			tbp_capture_default_path(cap.path, sizeof cap.path, "capture", capture_count + 1,
				fork_tag[0] ? fork_tag : NULL);
		}
		if (out && cap_len)
			snprintf(out, cap_len, "%s", cap.path);
		if (cap.steps)
			atomic_store(&cap_state, CAP_PENDING);
		else if (begin_locked() != 0) {
			saved_errno = errno;
			rc = -3;
		}
	}
	pthread_mutex_unlock(&capture_lock);
	errno = saved_errno;
	return rc;
}

/* Ends the capture in progress (or the one still waiting for its step boundary).  1 written, 0 no
 * event recorded (no file), -1 none in progress; its file's name into out. */
static atomic_llong mark_step_count;   /* tbprof_mark_step calls: the step open is count - 1 */

TBP_EXPORT int tbprof_capture_stop(char *out, size_t cap_len)
{
	if (!tbp_cfg.on_demand)
		return -1;
	int saved_errno = errno, rc = -1;
	/* A region's last step, begun by mark_step, ends with the region: `with capture(): for ...:
	 * mark_step(); step()` holds as many steps as the loop ran. */
	long long marked = atomic_load(&mark_step_count);
	if (marked > 0 && atomic_load(&cap_state) == CAP_RUNNING)
		tbprof_marker(TBP_MARK_ITER_END, marked - 1, "step");
	pthread_mutex_lock(&capture_lock);
	int st = atomic_load(&cap_state);
	if (st == CAP_PENDING) {
		atomic_store(&cap_state, CAP_IDLE);
		tbp_capture_answer(cap.id, "error stopped before a step boundary was seen\n");
		rc = 0;
	} else if (st == CAP_RUNNING || st == CAP_ENDING) {
		end_locked();
		rc = last_result;
	}
	if (out && cap_len)
		snprintf(out, cap_len, "%s", cap.path);
	pthread_mutex_unlock(&capture_lock);
	errno = saved_errno;
	return rc;
}

/* -1 not on demand; 0 idle, 1 waiting for a step boundary, 2 recording, 3 finishing. */
TBP_EXPORT int tbprof_capture_state(void)
{
	return tbp_cfg.on_demand ? atomic_load(&cap_state) : -1;
}

/* The last capture's outcome (1 written, 0 no event, -1 failed or none) and file. */
TBP_EXPORT int tbprof_capture_last(char *out, size_t cap_len)
{
	pthread_mutex_lock(&capture_lock);
	int r = last_result;
	if (out && cap_len)
		snprintf(out, cap_len, "%s", last_path);
	pthread_mutex_unlock(&capture_lock);
	return r;
}

/* One training step ended and the next begins: the marks the runner makes around its iterations
 * (ITER_END of the step that ran, if one was begun here, then ITER_BEGIN), for a loop of one's own. */
TBP_EXPORT int tbprof_mark_step(void)
{
	long long n = atomic_fetch_add(&mark_step_count, 1);
	if (n > 0)
		tbprof_marker(TBP_MARK_ITER_END, n - 1, "step");
	return tbprof_marker(TBP_MARK_ITER_BEGIN, n, "step");
}

/* ------------------------------------------------------------ cudaProfilerStart / Stop */

static bool profiler_capture;   /* the capture in progress was begun by cudaProfilerStart (capture_lock) */

void tbp_profiler_api(bool start)
{
	const char *label = start ? "cudaProfilerStart" : "cudaProfilerStop";
	if (!tbp_cfg.capture_range_profiler) {
		/* In a trace being written: where the program asked for the range. */
		if (TBP_ACTIVE())
			tbprof_marker(TBP_MARK_USER, 0, label);
		return;
	}
	pthread_mutex_lock(&capture_lock);
	int st = atomic_load(&cap_state);
	if (start && st == CAP_IDLE && atomic_load(&tbp_start_state) != 2) {
		cap.id = 0;
		cap.by_backward = false;
		cap.steps = 0;
		cap.deadline_ns = 0;
		tbp_capture_default_path(cap.path, sizeof cap.path, "capture", capture_count + 1,
			fork_tag[0] ? fork_tag : NULL);
		if (begin_locked() == 0) {
			profiler_capture = true;
			pthread_mutex_unlock(&capture_lock);
			tbprof_marker(TBP_MARK_USER, 0, label);
			return;
		}
	} else if (!start && profiler_capture && (st == CAP_RUNNING || st == CAP_ENDING)) {
		pthread_mutex_unlock(&capture_lock);
		tbprof_marker(TBP_MARK_USER, 0, label);
		pthread_mutex_lock(&capture_lock);
		if (profiler_capture && atomic_load(&cap_state) != CAP_IDLE)
			end_locked();
		profiler_capture = false;
	}
	pthread_mutex_unlock(&capture_lock);
}

/* ------------------------------------------------------------ NVTX ranges (--capture-range nvtx:NAME) */

static bool nvtx_capture;   /* the capture in progress was begun by an NVTX range (capture_lock) */

/* The configured name and domain, interned once (ids compare with the hook's). */
static uint64_t nvtx_capture_id(const char *text, uint64_t *cache)
{
	uint64_t id = __atomic_load_n(cache, __ATOMIC_RELAXED);
	if (!id) {
		id = tbp_intern_string(text, strlen(text));
		__atomic_store_n(cache, id, __ATOMIC_RELAXED);
	}
	return id;
}

bool tbp_nvtx_capture_begin(uint64_t domain, uint64_t name)
{
	static uint64_t name_id, domain_id;
	if (!tbp_cfg.capture_range_nvtx[0] || !name || name != nvtx_capture_id(tbp_cfg.capture_range_nvtx, &name_id))
		return false;
	if (tbp_cfg.capture_range_nvtx_domain[0] &&
	    domain != nvtx_capture_id(tbp_cfg.capture_range_nvtx_domain, &domain_id))
		return false;
	if (atomic_load_explicit(&cap_state, memory_order_acquire) != CAP_IDLE)
		return false;
	int saved_errno = errno;
	bool began = false;
	pthread_mutex_lock(&capture_lock);
	if (atomic_load(&cap_state) == CAP_IDLE && atomic_load(&tbp_start_state) != 2) {
		cap.id = 0;
		cap.by_backward = false;
		cap.steps = 0;
		cap.deadline_ns = 0;
		tbp_capture_default_path(cap.path, sizeof cap.path, "capture", capture_count + 1, NULL);
		began = nvtx_capture = begin_locked() == 0;
	}
	pthread_mutex_unlock(&capture_lock);
	errno = saved_errno;
	return began;
}

void tbp_nvtx_capture_end(void)
{
	int saved_errno = errno;
	pthread_mutex_lock(&capture_lock);
	int st = atomic_load(&cap_state);
	if (nvtx_capture && (st == CAP_RUNNING || st == CAP_ENDING))
		end_locked();
	nvtx_capture = false;
	pthread_mutex_unlock(&capture_lock);
	errno = saved_errno;
}

void tbp_capture_backward_done(void)
{
	if (!cap.by_backward || atomic_load_explicit(&cap_state, memory_order_acquire) != CAP_RUNNING)
		return;
	long long n = cap.backwards++;
	/* The first backward() ends a step begun before the capture: the next one begins there. */
	if (n > 0)
		tbprof_marker(TBP_MARK_ITER_END, n - 1, "backward");
	if (atomic_load(&cap_state) == CAP_RUNNING)
		tbprof_marker(TBP_MARK_ITER_BEGIN, n, "backward");
}
