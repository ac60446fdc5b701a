/*
 * sigaction/signal interposers.  tbprof installs a final-flush handler for
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGABRT where the program left the
 * default; the program must not see it.  Queries return the disposition
 * the program would have had, setting SIG_DFL keeps the flush handler
 * (invisibly), and setting a handler or SIG_IGN hands the signal to the
 * program for real.  Every other signal goes straight to libc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "hook.h"

typedef void (*signal_handler)(int);
typedef signal_handler (*signal_fn)(int, signal_handler);

TBP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int rc;
	if (tbp_program_sigaction(sig, act, old, &rc))
		return rc;
	return tbp_real_sigaction(sig, act, old);
}

/* glibc's signal(): BSD semantics (handler stays, SA_RESTART, the signal
 * blocked while its handler runs), built on the sigaction above. */
TBP_EXPORT signal_handler signal(int sig, signal_handler handler)
{
	if (!tbp_signal_is_handled(sig)) {
		static signal_fn real;
		signal_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
		if (!f) {
			int saved_errno = errno;
			f = (signal_fn)tbp_real_dlsym(RTLD_NEXT, "signal");
			errno = saved_errno;
			if (!f) {
				errno = ENOSYS;
				return SIG_ERR;
			}
			__atomic_store_n(&real, f, __ATOMIC_RELEASE);
		}
		return f(sig, handler);
	}
	struct sigaction act, old;
	memset(&act, 0, sizeof act);
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
