/*
 * exec* hooks.  A successful exec replaces the process image without
 * running exit handlers, so the records still in the rings (up to one
 * writer period, ~100 ms, plus CUPTI's undelivered buffers) would be lost.
 * Each hook finishes the trace (tbp_before_exec) and then calls the real
 * function with the caller's arguments unchanged.  The l-variants are
 * variadic: they are rebuilt as argument vectors and passed to the real
 * v-variants, which is what glibc itself does.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "hook.h"

extern char **environ;

/* Sizes an argument list the way glibc does (it has no fixed limit either);
 * the vector lives on the stack of the exec call. */
#define ARGV_FROM_VA(first, ap_start, argv_name, envp_out)                        \
	size_t argc_ = 0;                                                            \
	/* glibc declares arg nonnull, yet execl(path, NULL) is valid: hide the  \
	 * pointer from the optimizer so the test below stays. */                \
	const char *first_ = (first);                                                \
	__asm__("" : "+r"(first_));                                                  \
	if (first_) {  /* execl(path, NULL): an empty vector */                    \
		va_list count_;                                                          \
		va_start(count_, ap_start);                                              \
		for (argc_ = 1; va_arg(count_, const char *); argc_++)                   \
			;                                                                    \
		va_end(count_);                                                          \
	}                                                                            \
	const char *argv_name[argc_ + 1];                                            \
	va_list ap_;                                                                 \
	va_start(ap_, ap_start);                                                     \
	for (size_t i_ = 0; i_ < argc_; i_++)                                        \
		argv_name[i_] = i_ == 0 ? first_ : va_arg(ap_, const char *);           \
	argv_name[argc_] = NULL;                                                     \
	if (first_)                                                                  \
		(void)va_arg(ap_, const char *);   /* the terminating NULL */         \
	envp_out;                                                                    \
	va_end(ap_)

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvp_fn)(const char *, char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

static void *real_fn(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!p) {
		int saved_errno = errno;
		p = tbp_real_dlsym(RTLD_NEXT, name);
		errno = saved_errno;
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}
static void *real_execve, *real_execvp, *real_execvpe, *real_fexecve, *real_execveat;
#define REAL(type, name) type name##_real = (type)real_fn(&real_##name, #name)

/* Resolved at load: an exec hook may run in a vfork child, which shares
 * the parent's memory and should not run the dynamic loader's lookup. */
__attribute__((constructor)) static void tbp_exec_resolve(void)
{
	(void)real_fn(&real_execve, "execve");
	(void)real_fn(&real_execvp, "execvp");
	(void)real_fn(&real_execvpe, "execvpe");
	(void)real_fn(&real_fexecve, "fexecve");
	(void)real_fn(&real_execveat, "execveat");
}

static int no_real(void)
{
	errno = ENOSYS;
	return -1;
}

TBP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	REAL(execve_fn, execve);
	if (!execve_real)
		return no_real();
	tbp_before_exec();
	return execve_real(path, argv, envp);
}

TBP_EXPORT int execv(const char *path, char *const argv[])
{
	REAL(execve_fn, execve);
	if (!execve_real)
		return no_real();
	tbp_before_exec();
	return execve_real(path, argv, environ);
}

TBP_EXPORT int execvp(const char *file, char *const argv[])
{
	REAL(execvp_fn, execvp);
	if (!execvp_real)
		return no_real();
	tbp_before_exec();
	return execvp_real(file, argv);
}

TBP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	REAL(execvpe_fn, execvpe);
	if (!execvpe_real)
		return no_real();
	tbp_before_exec();
	return execvpe_real(file, argv, envp);
}

TBP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	REAL(fexecve_fn, fexecve);
	if (!fexecve_real)
		return no_real();
	tbp_before_exec();
	return fexecve_real(fd, argv, envp);
}

TBP_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	REAL(execveat_fn, execveat);
	if (!execveat_real)
		return no_real();
	tbp_before_exec();
	return execveat_real(dirfd, path, argv, envp, flags);
}

TBP_EXPORT int execl(const char *path, const char *arg, ...)
{
	REAL(execve_fn, execve);
	if (!execve_real)
		return no_real();
	ARGV_FROM_VA(arg, arg, argv, (void)0);
	tbp_before_exec();
	return execve_real(path, (char *const *)argv, environ);
}

TBP_EXPORT int execlp(const char *file, const char *arg, ...)
{
	REAL(execvp_fn, execvp);
	if (!execvp_real)
		return no_real();
	ARGV_FROM_VA(arg, arg, argv, (void)0);
	tbp_before_exec();
	return execvp_real(file, (char *const *)argv);
}

TBP_EXPORT int execle(const char *path, const char *arg, ...)
{
	REAL(execve_fn, execve);
	if (!execve_real)
		return no_real();
	char *const *envp;
	ARGV_FROM_VA(arg, arg, argv, envp = va_arg(ap_, char *const *));
	tbp_before_exec();
	return execve_real(path, (char *const *)argv, envp);
}
