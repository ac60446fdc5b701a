/*
 * The C library's own dlsym and sigaction, for the core and the hooks.
 *
 * libtbprof exports interposers named dlsym, signal and sigaction
 * (interpose/common.c, interpose/signal.c) for the program's sake.  A plain
 * call to those names from inside the library would bind, through its own
 * PLT, to those interposers (the library is preloaded first and is not
 * linked -Bsymbolic): the core would then reach up into the hooks, and its
 * own signal settings would be rewritten as if the program had made them.
 * So no libtbprof file calls them by name; it calls these.
 * tests/interpose/no_self_binding.py checks that libtbprof.so holds no
 * relocation against those three names.
 */
#ifndef TBPROF_LIBC_REAL_H
#define TBPROF_LIBC_REAL_H

#include <signal.h>

#include "core.h"

/* The C library's dlsym, found once with dlvsym (which nothing interposes).
 * RTLD_NEXT is relative to libtbprof.so, as a direct call would be. */
void *tbp_real_dlsym(void *handle, const char *name) TBP_HIDDEN;
/* The resolved pointer (NULL until the first lookup): the exported dlsym's
 * assembly trampoline (interpose/common.c) reads it directly. */
extern void *tbp_real_dlsym_fn TBP_HIDDEN;

/* glibc's own entry point behind sigaction: the name `sigaction` is
 * tbprof's interposer, and a sanitizer's interceptor comes before that. */
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

/* The C library's sigaction: the kernel's disposition, read or set, unseen
 * by tbprof's interposer and by a sanitizer's.  Inline: interpose/signal.c,
 * built without sanitizer instrumentation, calls it before instrumented
 * code may run. */
static inline int tbp_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return __sigaction(sig, act, old);
}

/* SIG_DFL for `sig`, really: 0, or -1 with errno.  Async-signal-safe. */
static inline int tbp_real_signal_default(int sig)
{
	struct sigaction dfl;
	__builtin_memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	return tbp_real_sigaction(sig, &dfl, NULL);
}

#endif
