/*
 * Does this libcupti survive its first call here?  Asked in a throwaway
 * copy of the process, before the process itself calls libcupti once.
 *
 * Why a separate process: the libcupti a process finds may belong to another
 * CUDA stack than the driver it runs on.  pip PyTorch loads the wheel's
 * CUPTI 13.2; under a driver that cannot serve it (none, or a stand-in such
 * as simgpu's) that CUPTI fails its private driver query (cuGetExportTable)
 * in whatever call comes first -- cuptiGetVersion, cuptiGetTimestamp,
 * cuptiSubscribe, even cuptiGetResultString -- and reports the failure by
 * calling itself until the stack overflows.  No CUPTI call fails cleanly
 * there, so no in-process probe can ask; the toolkit's CUPTI 13.0 in the
 * same setups answers CUPTI_ERROR_UNKNOWN instead, which start_locked
 * already handles.
 *
 * The probe is cuptiGetVersion: that CUPTI dies in it, and it only reads.
 * The copy is made with a raw clone() that sends no signal when it ends:
 * no SIGCHLD reaches the host, a host reaping children with waitpid(-1)
 * never sees it (only __WCLONE waits do), and no pthread_atfork handler runs
 * (the host's libraries are not told about a fork that never returns to
 * them).  The copy silences its output, cannot dump core, makes the calls
 * and exits.  Only an end before the calls returned (a signal, or an exit
 * inside libcupti) counts as "crashes"; any answer, error codes included,
 * is left to the in-process start to judge, and a copy still running after
 * PROBE_TIMEOUT_MS (a lock some other thread held at the clone, say) is
 * killed and counts as "cannot tell".  The parent hears "returned" through
 * a pipe and reaps that copy later, without waiting for it to be torn down.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cupti_support.h"

#define PROBE_TIMEOUT_MS 5000
#define PROBE_RETURNED 0xfe /* the last byte a copy writes when its calls returned */

/* The first call any consumer can make, and one that only reads: the version (CUPTI's lazy start against
 * the driver happens in it).  Nothing that starts GPU work or talks to the device: the copy shares the
 * host's open device files. */
static const char *const probe_calls[] = { "cuptiGetVersion" };

static void probe_child(void *const *fns, int report_fd)
{
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* a crash leaves no core file in the host's directory */
	struct rlimit no_core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &no_core);
	/* A crash must end the copy by its signal: the host's handlers (a sanitizer's, a runtime's that
	 * reports and exits, tbprof's own final flush, which would wait for a writer thread the copy
	 * does not have) would delay it or turn it into an exit status that reads as "returned".  The
	 * C library's sigaction: the name `signal` is tbprof's interposer, which keeps its flush handler
	 * installed for a program that asks for SIG_DFL. */
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS };
	for (unsigned i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
		tbp_real_signal_default(fatal[i]);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, STDOUT_FILENO);
		dup2(devnull, STDERR_FILENO);
	}
	for (unsigned i = 0; i < sizeof probe_calls / sizeof probe_calls[0]; i++) {
		void *fn = fns[i];
		if (!fn)
			continue;
		/* Say which call is next, so the parent can name the one that killed us. */
		unsigned char step = (unsigned char)i;
		if (write(report_fd, &step, 1) != 1)
			break;
		uint32_t version = 0;
		((int (*)(uint32_t *))fn)(&version);
	}
	/* Returned: say so now -- the parent need not wait for this copy's address space to be torn down
	 * (tens of ms for a PyTorch process), which happens before its exit status can be read. */
	unsigned char done = PROBE_RETURNED;
	if (write(report_fd, &done, 1) != 1) {
		/* the parent is gone or stopped listening: nothing to tell */
	}
	syscall(SYS_exit_group, 0);
}

/* A probe copy that returned is reaped later (tbp_cupti_probe_reap), not waited for. */
static long unreaped_pid;

void tbp_cupti_probe_reap(void)
{
	long pid = __atomic_exchange_n(&unreaped_pid, 0, __ATOMIC_ACQ_REL);
	if (pid > 0 && waitpid((pid_t)pid, NULL, __WCLONE | WNOHANG) == 0)
		__atomic_store_n(&unreaped_pid, pid, __ATOMIC_RELEASE); /* still exiting: next time */
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
enum tbp_cupti_probe tbp_cupti_probe(void *handle, const char **crashed_in, int *signal_out)
{
	*crashed_in = NULL;
	*signal_out = 0;
	/* Looked up here: dlsym in the copy could wait forever on a loader lock some other thread of ours
	 * held at the clone. */
	void *fns[sizeof probe_calls / sizeof probe_calls[0]];
	for (unsigned i = 0; i < sizeof probe_calls / sizeof probe_calls[0]; i++)
		fns[i] = tbp_real_dlsym(handle, probe_calls[i]);
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return TBP_PROBE_UNKNOWN;

	/* flags 0: a copy of the address space, no signal to us when it ends. */
	long pid = syscall(SYS_clone, 0L, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		close(fds[0]);
		probe_child(fns, fds[1]);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return TBP_PROBE_UNKNOWN;
	}

	/* Read the copy's steps until it says it returned, or its end closes the pipe (it died), or the
	 * time is up. */
	unsigned char step = 0xff, byte;
	int returned = 0, ended = 0;
	int64_t deadline = monotonic_ms() + PROBE_TIMEOUT_MS;
	while (!returned && !ended) {
		int64_t left = deadline - monotonic_ms();
		if (left <= 0)
			break;
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		int n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		ssize_t got = read(fds[0], &byte, 1);
		if (got == 1 && byte == PROBE_RETURNED)
			returned = 1;
		else if (got == 1)
			step = byte;
		else if (got == 0 || errno != EINTR)
			ended = 1;
	}
	close(fds[0]);

	if (returned) {
		__atomic_store_n(&unreaped_pid, pid, __ATOMIC_RELEASE);
		tbp_cupti_probe_reap();
		return TBP_PROBE_OK;
	}
	int status = 0;
	if (!ended) {
		/* No answer in time (a lock some other thread held at the clone, say): cannot tell. */
		kill((pid_t)pid, SIGKILL);
		waitpid((pid_t)pid, &status, __WCLONE);
		return TBP_PROBE_UNKNOWN;
	}
	if (waitpid((pid_t)pid, &status, __WCLONE) < 0)
		return TBP_PROBE_UNKNOWN; /* reaped by someone else (a host waiting with __WALL) */
	/* Ended without returning: by a signal, or by exiting inside libcupti -- either would end the host. */
	*signal_out = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	if (step < sizeof probe_calls / sizeof probe_calls[0])
		*crashed_in = probe_calls[step];
	return TBP_PROBE_CRASHES;
}
