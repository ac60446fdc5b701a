/*
 * The C library's dlsym and sigaction (libc_real.h): resolved without
 * passing through the interposers libtbprof exports under those names.
 */
#include <dlfcn.h>

#include "libc_real.h"

typedef void *(*dlsym_fn)(void *, const char *);
void *tbp_real_dlsym_fn;

static dlsym_fn real_dlsym_resolve(void)
{
	dlsym_fn f = (dlsym_fn)__atomic_load_n(&tbp_real_dlsym_fn, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	/* dlvsym is not interposed; glibc >= 2.34 has dlsym in libc. */
	f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!f)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&tbp_real_dlsym_fn, (void *)f, __ATOMIC_RELEASE);
	return f;
}

/* Resolved before any program code runs, so lookups made by others through
 * the exported dlsym always take the trampoline's short path. */
__attribute__((constructor(101))) static void tbp_real_dlsym_init(void)
{
	real_dlsym_resolve();
}

void *tbp_real_dlsym(void *handle, const char *name)
{
	dlsym_fn f = real_dlsym_resolve();
	return f ? f(handle, name) : NULL;
}
