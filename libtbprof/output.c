/*
 * libtbprof core, the process facts written first, and the output file: naming, safety
 * (no symlink followed, no foreign file truncated), ranks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"
#include "tbprof/naming.h"

/* ------------------------------------------------------------ process facts */

struct tbp_record process_rec;

/* Reads a small file (under /proc) into buf, NUL-terminated; its length, or
 * -1 when it cannot be read or is empty. */
static ssize_t read_small_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return n;
}

static uint64_t intern_file(const char *path, bool nul_to_space)
{
	char buf[8192];
	ssize_t n = read_small_file(path, buf, sizeof buf);
	if (n < 0)
		return 0;
	while (n > 0 && buf[n - 1] == 0)
		n--;
	if (nul_to_space)
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
	return tbp_intern_string(buf, (size_t)n);
}

/* Is this process torchrun's agent (`torchrun`, `python -m
 * torch.distributed.run` or the older `torch.distributed.launch`)?  It starts
 * the ranks and has no rank of its own, but under srun or mpirun it carries
 * the task's SLURM_PROCID / OMPI rank; its workers get RANK and
 * TORCHELASTIC_RUN_ID, so a process with TORCHELASTIC_RUN_ID and no RANK is
 * an agent too (an agent launched by another). */
bool tbp_is_launcher_agent(void)
{
	if (getenv("TORCHELASTIC_RUN_ID") && !getenv("RANK"))
		return true;
	char buf[4096];
	ssize_t n = read_small_file("/proc/self/cmdline", buf, sizeof buf);
	if (n < 0)
		return false;
	/* argv[0] and argv[1] (the script, under an interpreter), and the
	 * module after -m */
	int argi = 0;
	bool after_m = false;
	for (char *a = buf; a < buf + n && argi < 8; a += strlen(a) + 1, argi++) {
		const char *slash = strrchr(a, '/');
		const char *base = slash ? slash + 1 : a;
		if ((argi < 2 && !strcmp(base, "torchrun")) ||
		    (after_m && (!strcmp(a, "torch.distributed.run") || !strcmp(a, "torch.distributed.launch"))))
			return true;
		after_m = !strcmp(a, "-m");
	}
	return false;
}

void tbp_build_process_record(void)
{
	struct tbp_record *r = &process_rec;
	memset(r, 0, sizeof *r);
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	r->kind = TBP_K_PROCESS;
	r->stream_kind = TBP_STREAM_DEFS;
	r->ts = tbp_now();
	r->u.process.pid = (uint64_t)getpid();
	r->u.process.ppid = (uint64_t)getppid();
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	r->u.process.host = tbp_intern_string(host, strlen(host));
	r->u.process.cmdline = intern_file("/proc/self/cmdline", true);
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	if (n > 0)
		r->u.process.exe = tbp_intern_string(path, (size_t)n);
	if (getcwd(path, sizeof path))
		r->u.process.cwd = tbp_intern_string(path, strlen(path));
	r->u.process.realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	r->u.process.monotonic_ns = r->ts;
	/* -1 (all ones on disk) = none; the agent launches ranks, it is none */
	bool ranked = tbp_cfg.rank >= 0 && !tbp_cfg.launcher_agent;
	r->u.process.rank = (uint64_t)(ranked ? tbp_cfg.rank : -1);
	r->u.process.world_size = (uint64_t)(ranked ? tbp_cfg.world_size : -1);
	r->u.process.local_rank = (uint64_t)(ranked ? tbp_cfg.local_rank : -1);
}

void tbp_announce_thread(struct tbp_tbuf *b)
{
	b->thread_announced = true;
	char name[32] = "";
	pthread_getname_np(pthread_self(), name, sizeof name);
	uint64_t name_id = tbp_intern_string(name, strlen(name));
	if (!tbp_stage_take(b))   /* the put may not be interrupted by a hook's record */
		return;
	struct tbp_record rec = { .kind = TBP_K_THREAD, .stream_kind = TBP_STREAM_THREAD };
	rec.tid = b->tid;
	rec.ts = tbp_now();
	rec.u.thread.tid = b->tid;
	rec.u.thread.name = name_id;
	tbp_ring_put(b, &rec);
	tbp_stage_release(b);
}

/* ------------------------------------------------------------ output file */

/* The output file's state, owned here: lifecycle.c opens and forgets it
 * through the functions below, the writer thread checks and finishes it. */
static struct {
	int fd;                        /* the trace's descriptor; -1 when none */
	char path[PATH_MAX];           /* as opened (relative to the cwd of then) */
	char path_abs[2 * PATH_MAX + 2]; /* made absolute when opened: the program may chdir */
	/* Identity of the trace file, so the writer notices when the program
	 * closed our descriptor (os.closerange, close_fds) and the number now
	 * names one of its own files: then nothing more is written through it. */
	dev_t dev;
	ino_t ino;
	bool gone;
	int gone_warned;
} out = { .fd = -1 };

/* A descriptor number far from the ones the program uses: programs get the
 * lowest free number, so a high one is rarely reused even after a
 * close-everything; the identity check covers the rest. */
int move_fd_high(int fd)
{
	struct rlimit rl;
	int lo = 1000;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1000 + 32)
		lo = rl.rlim_cur > 64 ? (int)rl.rlim_cur - 32 : 3;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, lo);
	if (high < 0)
		high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (high < 0)
		return fd;
	close(fd);   /* the lock stays with the shared open file */
	return high;
}

/* Writer thread, before each frame: is out.fd still our trace file? */
bool out_still_ours(void)
{
	if (out.gone)
		return false;
	struct stat st;
	if (out.fd >= 0 && fstat(out.fd, &st) == 0 && st.st_dev == out.dev && st.st_ino == out.ino)
		return true;
	out.gone = true;
	return false;
}

int tbp_output_fd(void)
{
	return out.fd;
}

const char *tbp_output_path(void)
{
	return out.path;
}

/* The output path for a message: absolute, so "Permission denied" on a
 * relative name says which directory. */
const char *tbp_output_shown(char *buf, size_t len)
{
	char cwd[PATH_MAX];
	if (out.path[0] == '/' || !getcwd(cwd, sizeof cwd))
		return out.path;
	int n = snprintf(buf, len, "%s/%s", cwd, out.path);
	return n > 0 && (size_t)n < len ? buf : out.path;
}

int tbp_output_open(void)
{
	int fd = tbp_open_output();
	if (fd < 0) {
		out.fd = -1;
		return -1;
	}
	char shown[2 * PATH_MAX + 2];
	snprintf(out.path_abs, sizeof out.path_abs, "%s", tbp_output_shown(shown, sizeof shown));
	out.fd = move_fd_high(fd);
	struct stat st;
	if (fstat(out.fd, &st) == 0) {
		out.dev = st.st_dev;
		out.ino = st.st_ino;
	}
	out.gone = false;
	return out.fd;
}

void tbp_output_none(void)
{
	out.fd = -1;
	out.path_abs[0] = 0;
}

void tbp_output_forget(void)
{
	out.fd = -1;
}

void tbp_output_after_fork(void)
{
	if (out.fd >= 0)
		close(out.fd);   /* the parent's file and lock stay the parent's */
	out.fd = -1;
	out.gone = false;
}

void tbp_output_warn_gone(uint64_t dropped)
{
	tbp_warn_once(&out.gone_warned, "the program closed the trace file descriptor of %s; "
		"tracing stops (%llu records not written)", out.path, (unsigned long long)dropped);
}

/* A trace with no event leaves no file: removed only while the path still
 * names the file we wrote, a regular one. */
void tbp_output_remove_if_empty(bool any_event)
{
	struct stat st;
	if (any_event || !out.path_abs[0] || lstat(out.path_abs, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_dev != out.dev || st.st_ino != out.ino)
		return;
	if (unlink(out.path_abs) == 0 && tbp_cfg.verbose)
		tbp_log("pid %d recorded no event: %s removed", (int)getpid(), out.path_abs);
}

/*
 * Session identity.  A session is the process tree under the topmost
 * ancestor that has libtbprof loaded (the LD_PRELOAD'ed shell, launcher or
 * program at the top of the run); a process is named by its pid and its
 * start time in clock ticks since boot (which together do not repeat),
 * plus the boot id.  Each trace carries its writer's session as an interned
 * string (SESSION_PREFIX ...) among its first definitions, so a later
 * process can tell exactly whether an existing file is from its own
 * session (keep it: take the per-pid name) or from an earlier run (take
 * the name over), with no timestamp comparison.  An exec'd image of a
 * traced process keeps pid, start time and ancestors: the same session.
 */
#define SESSION_PREFIX "tbprof-session "

/* ppid and start time (ticks since boot) of pid; false if unreadable. */
static bool proc_stat_ids(pid_t pid, pid_t *ppid, unsigned long long *start_ticks)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_small_file(path, buf, sizeof buf) < 0)
		return false;
	char *p = strrchr(buf, ')');   /* the command name may hold spaces */
	if (!p)
		return false;
	/* fields after ")": 3 state, 4 ppid, ..., 22 starttime */
	int field = 2;
	bool have_start = false;
	char *save = NULL;
	for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		++field;
		if (field == 4)
			*ppid = (pid_t)strtol(tok, NULL, 10);
		if (field == 22) {
			*start_ticks = strtoull(tok, NULL, 10);
			have_start = true;
			break;
		}
	}
	return have_start;
}

static bool process_is_traced(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool found = false;
	size_t keep = 0;
	ssize_t n;
	while (!found && (n = read(fd, buf + keep, sizeof buf - 1 - keep)) > 0) {
		size_t len = keep + (size_t)n;
		buf[len] = 0;
		found = strstr(buf, "libtbprof") != NULL;
		keep = len > 16 ? 16 : len;
		memmove(buf, buf + len - keep, keep);
	}
	close(fd);
	return found;
}

char session_text[128];

void session_compute(void)
{
	pid_t pid = getpid(), ppid = 0;
	unsigned long long ticks = 0;
	proc_stat_ids(pid, &ppid, &ticks);
	for (int depth = 0; depth < 256 && ppid > 1 && process_is_traced(ppid); depth++) {
		pid_t up = ppid;
		unsigned long long up_ticks = 0;
		if (!proc_stat_ids(up, &ppid, &up_ticks))
			break;
		pid = up;
		ticks = up_ticks;
	}
	char boot[40] = "";
	if (read_small_file("/proc/sys/kernel/random/boot_id", boot, sizeof boot) < 0)
		boot[0] = 0;
	boot[strcspn(boot, "\n")] = 0;
	snprintf(session_text, sizeof session_text, SESSION_PREFIX "%d %llu %s", (int)pid, ticks, boot);
}

/* Is path a trace written in our session?  Reads its first definitions
 * only (the session string is interned before the writer's first drain). */
static bool file_is_from_this_session(const char *path)
{
	struct tbp_reader *r = NULL;
	bool same = false;
	if (tbp_reader_open(&r, path) == TBP_OK) {
		struct tbp_record rec;
		size_t prefix = strlen(SESSION_PREFIX);
		for (int i = 0; i < 1000000 && tbp_reader_next(r, &rec) == TBP_OK; i++) {
			if (rec.stream_kind != TBP_STREAM_DEFS)
				break;   /* past the first definitions */
			if (rec.kind == TBP_K_STRING && rec.blob && rec.blob_len > prefix &&
			    !memcmp(rec.blob, SESSION_PREFIX, prefix)) {
				same = rec.blob_len == strlen(session_text) &&
					!memcmp(rec.blob, session_text, rec.blob_len);
				break;
			}
		}
	}
	if (r)
		tbp_reader_close(r);
	return same;
}


/* TBPROF_OUT naming a directory (an existing one, or any name ending in
 * '/', created here): each process writes a file in it named by what it
 * is (tbp_name_in_dir), so a torchrun job leaves rank0.zst, rank1.zst ...
 * side by side; torchrun's agent writes agent.zst, a process outside a job
 * trace.zst.  The session rules below then apply to that name. */
static void directory_out(char *base, size_t cap)
{
	size_t len = strlen(base);
	bool slash = len > 0 && base[len - 1] == '/';
	if (slash && len > 1)
		mkdir(base, 0777);   /* EEXIST is fine; other failures show when the file is opened */
	if (!tbp_name_is_dir(base))
		return;
	char name[32];
	tbp_name_in_dir(name, sizeof name, tbp_cfg.rank, tbp_cfg.launcher_agent);
	if (len + strlen(name) + 2 < cap)
		snprintf(base + len, cap - len, "%s%s", slash ? "" : "/", name);
}

/* The output's base name.  torchrun's agent starts before its ranks: with
 * a plain file name it would take the name and leave the ranks the per-pid
 * ones, so it writes "<stem>.agent<ext>" (an explicit %r names it
 * already). */
static void output_base(char *base, size_t cap, bool *had_pid)
{
	*had_pid = tbp_name_expand(base, cap, tbp_cfg.out, (long)getpid(), tbp_cfg.rank, tbp_cfg.launcher_agent);
	size_t len = strlen(base);
	directory_out(base, cap);
	if (strlen(base) == len && tbp_cfg.launcher_agent && !strstr(tbp_cfg.out, "%r")) {
		char plain[PATH_MAX];
		snprintf(plain, sizeof plain, "%s", base);
		tbp_name_tagged(base, cap, plain, "agent");
	}
}

/* May we truncate this open regular file?  Only when it is empty or a
 * tbprof trace (by its magic); anything else is the user's data.  fd is
 * write-only (a FIFO must not be opened for reading), so the bytes are
 * read through a second, read-only open of the same file; a file we
 * cannot read is not ours to overwrite either. */
static bool fd_may_truncate(int fd, const struct stat *st)
{
	if (st->st_size == 0)
		return true;
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int rfd = open(self, O_RDONLY | O_CLOEXEC);
	if (rfd < 0)
		return false;
	unsigned char head[TBP_TRACE_PREFIX_LEN];
	ssize_t n = pread(rfd, head, sizeof head, 0);
	close(rfd);
	return n > 0 && tbp_is_trace_prefix(head, (size_t)n);
}

enum out_refusal { OUT_OK, OUT_IS_SYMLINK, OUT_NOT_A_TRACE };

/* Opens an existing-or-new output without following a symlink at it;
 * sets *refused when the path is a symlink or a file we must not truncate
 * (then returns -1 with nothing changed on disk). */
static int open_output_checked(const char *path, bool truncate, enum out_refusal *refused, struct stat *st)
{
	*refused = OUT_OK;
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (errno == ELOOP)
			*refused = OUT_IS_SYMLINK;
		return -1;
	}
	if (fstat(fd, st) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st->st_mode))
		return fd;   /* /dev/null, a FIFO: written as they are */
	if (!fd_may_truncate(fd, st)) {
		close(fd);
		*refused = OUT_NOT_A_TRACE;
		return -1;
	}
	if (truncate && st->st_size > 0 && ftruncate(fd, 0) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Opens the output.  The first traced process of a session takes the plain
 * name (overwriting a stale trace from an earlier run); any other process
 * (a live holder of the lock, or a file written earlier in this session,
 * see session_compute) gets the per-pid name, created with O_EXCL.  The
 * output is never a symlink followed nor a file that is not a trace
 * truncated: such a path is refused with one line on stderr and the trace
 * goes beside it under the per-pid name, so no data is lost.  Otherwise a
 * path that cannot be written (missing directory, a directory, no
 * permission) is an error, reported by the caller, and not a reason to
 * write somewhere else.  A path that is not a regular file (/dev/null, a
 * FIFO) is written as it is. */
int tbp_open_output(void)
{
	bool had_pid;
	char base[PATH_MAX];
	if (capture_out[0]) {
		/* A capture's file, named by its requester: never a symlink followed nor a file that is
		 * not a trace overwritten; refused, the capture fails (the requester hears why). */
		snprintf(out.path, sizeof out.path, "%s", capture_out);
		enum out_refusal refused;
		struct stat st;
		int fd = open_output_checked(capture_out, true, &refused, &st);
		if (fd < 0 && refused != OUT_OK)
			errno = refused == OUT_IS_SYMLINK ? ELOOP : EEXIST;
		return fd;
	}
	output_base(base, sizeof base, &had_pid);
	snprintf(out.path, sizeof out.path, "%s", base);
	enum out_refusal refused;
	struct stat st;
	int fd = open_output_checked(base, had_pid, &refused, &st);
	if (fd < 0 && refused == OUT_OK)
		return -1;
	if (fd >= 0 && (had_pid || !S_ISREG(st.st_mode)))
		return fd;
	if (fd >= 0) {
		bool mine = flock(fd, LOCK_EX | LOCK_NB) == 0;
		if (mine && st.st_size > 0 && file_is_from_this_session(base))
			mine = false;  /* an earlier process of this session wrote it */
		if (mine) {
			if (ftruncate(fd, 0) != 0) {
				int e = errno;
				close(fd);
				errno = e;
				return -1;
			}
			return fd;
		}
		close(fd);
	}
	char uniq[PATH_MAX];
	/* trace.PID.zst, or, when that is a trace of this session (an
	 * earlier image of this very process, before an exec), the first free
	 * trace.PID-N.zst.  One from another session is a reused pid's: ours,
	 * if it is a trace (never a symlink, nor anything else). */
	fd = -1;
	for (int serial = 0; serial < 1000; serial++) {
		tbp_name_per_pid(uniq, sizeof uniq, base, (long)getpid(), serial);
		snprintf(out.path, sizeof out.path, "%s", uniq);
		fd = open(uniq, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
		if (!file_is_from_this_session(uniq)) {
			enum out_refusal r2;
			struct stat st2;
			fd = open_output_checked(uniq, true, &r2, &st2);
			if (fd >= 0 || r2 == OUT_OK)
				break;
		}
	}
	if (fd >= 0)
		flock(fd, LOCK_EX | LOCK_NB);
	if (fd >= 0 && refused != OUT_OK) {
		char shown[2 * PATH_MAX + 2];
		const char *to = tbp_output_shown(shown, sizeof shown);
		tbp_log("%s %s: not %s it; the trace goes to %s", base,
			refused == OUT_IS_SYMLINK ? "is a symbolic link" : "exists and is not a tbprof trace",
			refused == OUT_IS_SYMLINK ? "following" : "overwriting", to);
	}
	return fd;
}

/* ------------------------------------------------------------ capture names */

char capture_out[PATH_MAX];

void tbp_capture_tagged_path(char *buf, size_t cap, const char *path, const char *tag)
{
	tbp_name_tagged(buf, cap, path, tag);
}

void tbp_capture_default_path(char *buf, size_t cap, const char *word, unsigned n, const char *tag)
{
	bool had_pid;
	char base[PATH_MAX];
	output_base(base, sizeof base, &had_pid);
	tbp_name_capture(buf, cap, base, word, n, tag);
	/* A relative TBPROF_OUT: against the directory current now, made absolute so the requester
	 * can name the file. */
	if (buf[0] != '/') {
		char cwd[PATH_MAX], rel[PATH_MAX + 64];
		snprintf(rel, sizeof rel, "%s", buf);
		if (getcwd(cwd, sizeof cwd))
			snprintf(buf, cap, "%s/%s", cwd, rel);
	}
}
