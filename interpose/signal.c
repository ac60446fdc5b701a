/*
 * sigaction/signal interposers: the program never sees tbprof's
 * final-flush handler.
 *
 * tbprof installs it (signals_install, lent to the core, at trace start) for SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT and SIGABRT where the disposition is SIG_DFL.
 * For such a signal, `view` holds the disposition the program would have
 * without tbprof; the program's calls are answered from it:
 *   - a query returns the view;
 *   - setting SIG_DFL updates the view, ours stays installed;
 *   - setting a handler or SIG_IGN installs it for real, and the old action
 *     returned is the view, so a handler that chains to the previous one
 *     unless it was SIG_DFL behaves exactly as without tbprof.
 * A program that sets SIG_DFL again while tracing gets ours back, unseen.
 * Every other signal, and every call before tracing starts, goes straight
 * to libc.
 *
 * This file is built without sanitizer instrumentation (interpose/
 * meson.build): a sanitizer runtime preloaded before libtbprof calls
 * sigaction while it initializes, before instrumented code may run.
 * Our own installs go through the first `sigaction` in the global scope
 * (a sanitizer's interceptor when there is one, so it knows our handler),
 * which lands back here with own_call set and goes to libc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "core.h"
#include "core_priv.h"   /* tbp_start_state */
#include "libc_real.h"   /* tbp_real_dlsym, tbp_real_sigaction */

/* The last four only for the flight recorder (TBPROF_FLIGHT), whose dump is for crashes. */
static const int handled_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
#define N_ALWAYS 5
#define N_HANDLED (sizeof handled_signals / sizeof handled_signals[0])

static int owned[N_HANDLED];                 /* our handler installed, program sees view[i] */
static struct sigaction view[N_HANDLED];
static void (*flush_handler)(int);
static int any_installed;                   /* fast path before the first install */
static __thread int own_call __attribute__((tls_model("initial-exec")));

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

/* Our own sigaction calls, through the global scope's first sigaction. */
static int own_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static sigaction_fn first;
	sigaction_fn f = __atomic_load_n(&first, __ATOMIC_ACQUIRE);
	if (!f) {
		int saved_errno = errno;
		f = (sigaction_fn)tbp_real_dlsym(RTLD_DEFAULT, "sigaction");
		errno = saved_errno;
		if (f)
			__atomic_store_n(&first, f, __ATOMIC_RELEASE);
	}
	if (!f)
		f = tbp_real_sigaction;
	own_call = 1;
	int rc = f(sig, act, old);
	own_call = 0;
	return rc;
}

static int handled_index(int sig)
{
	for (size_t i = 0; i < N_HANDLED; i++)
		if (handled_signals[i] == sig)
			return (int)i;
	return -1;
}

static bool is_default(const struct sigaction *a)
{
	return !(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL;
}

static bool install_one(size_t i, const struct sigaction *program_view)
{
	struct sigaction act;
	memset(&act, 0, sizeof act);
	act.sa_handler = flush_handler;
	sigfillset(&act.sa_mask);
	act.sa_flags = SA_RESTART;
	view[i] = *program_view;
	if (own_sigaction(handled_signals[i], &act, NULL) != 0)
		return false;
	__atomic_store_n(&owned[i], 1, __ATOMIC_RELEASE);
	__atomic_store_n(&any_installed, 1, __ATOMIC_RELEASE);
	return true;
}

static void signals_install(void (*handler)(int))
{
	flush_handler = handler;
	for (size_t i = 0; i < N_HANDLED; i++) {
		if (i >= N_ALWAYS && !tbp_cfg.flight_ns)
			break;
		if (__atomic_load_n(&owned[i], __ATOMIC_ACQUIRE))
			continue;   /* still ours from an earlier start (fork child) */
		struct sigaction cur;
		if (own_sigaction(handled_signals[i], NULL, &cur) != 0)
			continue;
		if (!is_default(&cur))
			continue;   /* the program's own handler, or SIG_IGN: leave it */
		install_one(i, &cur);
	}
}

static void signal_restore_default(int sig)
{
	int i = handled_index(sig);
	if (i >= 0)
		__atomic_store_n(&owned[i], 0, __ATOMIC_RELEASE);
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	own_sigaction(sig, &dfl, NULL);
}

static const struct tbp_hook_ops signal_ops = {
	.signals_install = signals_install,
	.signal_restore_default = signal_restore_default,
};

__attribute__((constructor(102))) static void signal_register(void)
{
	tbp_register_hook_ops(&signal_ops);
}

/* The program's sigaction, answered from the view for the signals we own. */
static int program_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (own_call || !__atomic_load_n(&any_installed, __ATOMIC_ACQUIRE))
		return tbp_real_sigaction(sig, act, old);
	int i = handled_index(sig);
	if (i < 0)
		return tbp_real_sigaction(sig, act, old);
	if (!__atomic_load_n(&owned[i], __ATOMIC_ACQUIRE)) {
		/* Back to the default while tracing: ours returns, unseen. */
		if (!act || !is_default(act) || !flush_handler ||
		    atomic_load(&tbp_start_state) != 2 || !TBP_ACTIVE())
			return tbp_real_sigaction(sig, act, old);
		struct sigaction cur;
		if (tbp_real_sigaction(sig, NULL, &cur) != 0)
			return -1;
		if (!install_one((size_t)i, act))
			return tbp_real_sigaction(sig, act, old);
		if (old)
			*old = cur;
		return 0;
	}
	struct sigaction before = view[i];
	if (act) {
		if (is_default(act)) {
			view[i] = *act;   /* ours stays installed */
		} else {
			/* The program's own handler (or SIG_IGN) takes over. */
			if (tbp_real_sigaction(sig, act, NULL) != 0)
				return -1;
			__atomic_store_n(&owned[i], 0, __ATOMIC_RELEASE);
		}
	}
	if (old)
		*old = before;
	return 0;
}

TBP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return program_sigaction(sig, act, old);
}

/* glibc's signal(): BSD semantics (the handler stays, SA_RESTART, the
 * signal blocked while its handler runs), through the sigaction above. */
TBP_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
	struct sigaction act, old;
	if (sig <= 0 || sig >= NSIG || handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&act, 0, sizeof act);
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	/* Not through the name `sigaction`: from inside the library that would
	 * bind to the exported interposer through our own PLT (libc_real.h). */
	if (program_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
