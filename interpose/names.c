/*
 * Kernel names.  __cudaRegisterFunction gives host stub -> mangled device
 * name; __cudaGetKernel gives cudaKernel_t -> host stub; cuLaunchKernel
 * callers have a CUfunction whose name comes from cuFuncGetName.
 *
 * Registration only stores the (static) mangled string pointer: a large
 * library registers tens of thousands of kernels and most never launch.
 * The first launch of a kernel demangles and interns its name once and
 * caches the id in the slot.  Readers (the launch path) probe the
 * open-addressing table without a lock: keys are published with a release
 * store after the value, and never removed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hook.h"

#define NAMES_CAP (1u << 20)   /* 24 MiB of address space; pages touched on use */

struct name_slot {
	uintptr_t key;          /* atomic; 0 = empty */
	const char *mangled;    /* atomic */
	uint64_t id;            /* atomic; 0 = not interned yet */
};

static struct name_slot *slots;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t unknown_id;
static int table_full_warned;

static size_t slot_of(uintptr_t key)
{
	uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 40) & (NAMES_CAP - 1);
}

static bool names_init_locked(void)
{
	if (slots)
		return true;
	void *m = mmap(NULL, NAMES_CAP * sizeof(struct name_slot), PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return false;
	__atomic_store_n(&slots, (struct name_slot *)m, __ATOMIC_RELEASE);
	return true;
}

static struct name_slot *find(uintptr_t key)
{
	struct name_slot *t = __atomic_load_n(&slots, __ATOMIC_ACQUIRE);
	if (!t || !key)
		return NULL;
	size_t i = slot_of(key);
	for (size_t probes = 0; probes < NAMES_CAP; probes++) {
		uintptr_t k = __atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return &t[i];
		if (k == 0)
			return NULL;
		i = (i + 1) & (NAMES_CAP - 1);
	}
	return NULL;
}

static void put_locked(uintptr_t key, const char *mangled, uint64_t id)
{
	if (!key || !names_init_locked())
		return;
	size_t i = slot_of(key);
	for (size_t probes = 0; probes < NAMES_CAP / 2; probes++) {
		uintptr_t k = __atomic_load_n(&slots[i].key, __ATOMIC_RELAXED);
		if (k == key || k == 0) {
			/* Re-registration (a module loaded at a reused address) resets the cache. */
			__atomic_store_n(&slots[i].mangled, mangled, __ATOMIC_RELAXED);
			__atomic_store_n(&slots[i].id, id, __ATOMIC_RELAXED);
			if (k == 0)
				__atomic_store_n(&slots[i].key, key, __ATOMIC_RELEASE);
			return;
		}
		i = (i + 1) & (NAMES_CAP - 1);
	}
	tbp_warn_once(&table_full_warned, "kernel name table full; some kernels will be named \"?\"");
}

void tbp_names_fork_prepare(void) TBP_HIDDEN;
void tbp_names_fork_parent(void) TBP_HIDDEN;
void tbp_names_fork_child(void) TBP_HIDDEN;

void tbp_names_fork_prepare(void)
{
	pthread_mutex_lock(&names_lock);
}

void tbp_names_fork_parent(void)
{
	pthread_mutex_unlock(&names_lock);
}

void tbp_names_fork_child(void)
{
	pthread_mutex_init(&names_lock, NULL);
}

void tbp_names_register(const void *key, const char *mangled)
{
	pthread_mutex_lock(&names_lock);
	put_locked((uintptr_t)key, mangled, 0);
	pthread_mutex_unlock(&names_lock);
}

void tbp_names_alias(const void *key, const void *existing_key)
{
	struct name_slot *s = find((uintptr_t)existing_key);
	if (!s)
		return;
	const char *mangled = __atomic_load_n(&s->mangled, __ATOMIC_RELAXED);
	uint64_t id = __atomic_load_n(&s->id, __ATOMIC_RELAXED);
	pthread_mutex_lock(&names_lock);
	put_locked((uintptr_t)key, mangled, id);
	pthread_mutex_unlock(&names_lock);
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* The C++ runtime's demangler, resolved at run time (nvcc programs and
 * PyTorch already have it loaded); libtbprof itself does not link
 * libstdc++. */
static char *demangle(const char *mangled)
{
	static demangle_fn fn;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		demangle_fn f = (demangle_fn)tbp_real_dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!f) {
			/* A C program or plain Python driving CUDA (ctypes): load the
			 * C++ runtime privately (RTLD_LOCAL: its symbols stay out of
			 * the program's lookup scope) once, for its demangler. */
			void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
			if (h)
				f = (demangle_fn)tbp_real_dlsym(h, "__cxa_demangle");
		}
		__atomic_store_n(&fn, f, __ATOMIC_RELAXED);
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	demangle_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
	if (!f || !mangled || mangled[0] != '_' || mangled[1] != 'Z')
		return NULL;
	int status = -1;
	char *out = f(mangled, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
	return out;
}

uint64_t tbp_intern_kernel_name(const char *mangled)
{
	if (!mangled)
		return 0;
	char *d = demangle(mangled);
	const char *name = d ? d : mangled;
	uint64_t id = tbp_intern_string(name, strlen(name));
	free(d);
	return id;
}

static uint64_t unknown(void)
{
	uint64_t id = __atomic_load_n(&unknown_id, __ATOMIC_RELAXED);
	if (!id) {
		id = tbp_intern_string("?", 1);
		__atomic_store_n(&unknown_id, id, __ATOMIC_RELAXED);
	}
	return id;
}

uint64_t tbp_names_lookup(const void *key)
{
	struct name_slot *s = find((uintptr_t)key);
	if (TBP_UNLIKELY(!s))
		return unknown();
	uint64_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
	if (TBP_LIKELY(id != 0))
		return id;
	const char *mangled = __atomic_load_n(&s->mangled, __ATOMIC_RELAXED);
	id = mangled ? tbp_intern_kernel_name(mangled) : 0;
	if (!id)
		return unknown();
	__atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
	return id;
}

typedef int (*cu_func_get_name_fn)(const char **, void *);

uint64_t tbp_names_cufunction(const void *func)
{
	struct name_slot *s = find((uintptr_t)func);
	if (s) {
		uint64_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
		if (id)
			return id;
	}
	static cu_func_get_name_fn get_name;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		cu_func_get_name_fn f = (cu_func_get_name_fn)tbp_real_dlsym(RTLD_NEXT, "cuFuncGetName");
		if (!f) {
			void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
			if (h)
				f = (cu_func_get_name_fn)tbp_real_dlsym(h, "cuFuncGetName");
		}
		__atomic_store_n(&get_name, f, __ATOMIC_RELAXED);
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	cu_func_get_name_fn f = __atomic_load_n(&get_name, __ATOMIC_RELAXED);
	const char *mangled = NULL;
	if (!f || !func || f(&mangled, (void *)func) != 0 || !mangled)
		return unknown();
	uint64_t id = tbp_intern_kernel_name(mangled);
	if (!id)
		return unknown();
	pthread_mutex_lock(&names_lock);
	/* The driver owns the string; only the interned id is kept. */
	put_locked((uintptr_t)func, NULL, id);
	pthread_mutex_unlock(&names_lock);
	return id;
}
