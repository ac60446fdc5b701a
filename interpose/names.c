/*
 * Kernel names.  __cudaRegisterFunction gives host stub -> mangled device
 * name; __cudaGetKernel gives cudaKernel_t -> host stub; driver launches
 * pass a CUfunction or a CUkernel, named by cuFuncGetName / cuKernelGetName.
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

/* Slots start at 4 Ki and double when half full (PyTorch's CUDA library registers ~100 k kernels at
 * load, even in a CPU run): a table sized for the worst case up front had its 24 MiB touched at random
 * by those registrations. */
#define NAMES_FIRST_LOG2 12
#define NAMES_MAX_LOG2 24

struct name_slot {
	uintptr_t key;          /* atomic; 0 = empty */
	const char *mangled;    /* atomic */
	uint64_t id;            /* atomic; 0 = not interned yet */
};
struct name_table {
	size_t mask;
	size_t used;            /* under names_lock */
	struct name_slot slot[];
};

/* Readers probe whichever table they load; tables replaced by a bigger one stay mapped, since a reader
 * may still be in one (an id cached in an old slot is looked up again: same name, same id). */
static struct name_table *slots;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

/* The launch path's one-entry cache (hook.h, tbp_names_lookup). */
uint64_t tbp_names_generation;
__thread struct tbp_last_name tbp_last_name __attribute__((tls_model("initial-exec")));
static uint64_t unknown_id;
static int table_full_warned;

static size_t slot_of(uintptr_t key, size_t mask)
{
	uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 40) & mask;
}

static struct name_table *table_new(unsigned log2)
{
	size_t n = (size_t)1 << log2;
	void *m = mmap(NULL, sizeof(struct name_table) + n * sizeof(struct name_slot), PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	struct name_table *t = m;
	t->mask = n - 1;
	return t;
}

static bool names_init_locked(void)
{
	if (slots)
		return true;
	struct name_table *t = table_new(NAMES_FIRST_LOG2);
	if (!t)
		return false;
	__atomic_store_n(&slots, t, __ATOMIC_RELEASE);
	return true;
}

static struct name_slot *find(uintptr_t key)
{
	struct name_table *t = __atomic_load_n(&slots, __ATOMIC_ACQUIRE);
	if (!t || !key)
		return NULL;
	size_t i = slot_of(key, t->mask);
	for (size_t probes = 0; probes <= t->mask; probes++) {
		uintptr_t k = __atomic_load_n(&t->slot[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return &t->slot[i];
		if (k == 0)
			return NULL;
		i = (i + 1) & t->mask;
	}
	return NULL;
}

/* Under names_lock.  false: no free slot within half the table. */
static bool table_put(struct name_table *t, uintptr_t key, const char *mangled, uint64_t id)
{
	size_t i = slot_of(key, t->mask);
	for (size_t probes = 0; probes <= t->mask / 2; probes++) {
		uintptr_t k = __atomic_load_n(&t->slot[i].key, __ATOMIC_RELAXED);
		if (k == key || k == 0) {
			/* Re-registration (a module loaded at a reused address) resets the cache. */
			__atomic_store_n(&t->slot[i].mangled, mangled, __ATOMIC_RELAXED);
			__atomic_store_n(&t->slot[i].id, id, __ATOMIC_RELAXED);
			if (k == 0) {
				__atomic_store_n(&t->slot[i].key, key, __ATOMIC_RELEASE);
				t->used++;
			}
			return true;
		}
		i = (i + 1) & t->mask;
	}
	return false;
}

static void grow_locked(void)
{
	struct name_table *old = slots;
	unsigned log2 = (unsigned)__builtin_ctzll(old->mask + 1) + 1;
	struct name_table *t = log2 <= NAMES_MAX_LOG2 ? table_new(log2) : NULL;
	if (!t)
		return;
	for (size_t i = 0; i <= old->mask; i++) {
		uintptr_t k = __atomic_load_n(&old->slot[i].key, __ATOMIC_RELAXED);
		if (k)
			table_put(t, k, __atomic_load_n(&old->slot[i].mangled, __ATOMIC_RELAXED),
				  __atomic_load_n(&old->slot[i].id, __ATOMIC_RELAXED));
	}
	__atomic_store_n(&slots, t, __ATOMIC_RELEASE);
}

static void put_locked(uintptr_t key, const char *mangled, uint64_t id)
{
	if (!key || !names_init_locked())
		return;
	if (slots->used + 1 > (slots->mask + 1) / 2)
		grow_locked();
	if (!table_put(slots, key, mangled, id))
		tbp_warn_once(&table_full_warned, "kernel name table full; some kernels will be named \"?\"");
	/* After the slot: a lookup that reads the new generation (acquire)
	 * then finds the new slot, and one that read the old caches under it. */
	__atomic_store_n(&tbp_names_generation, tbp_names_generation + 1, __ATOMIC_RELEASE);
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

uint64_t tbp_names_lookup_slow(const void *key, uint64_t generation)
{
	struct name_slot *s = find((uintptr_t)key);
	if (TBP_UNLIKELY(!s))
		return unknown();   /* not cached: a later registration names it */
	uint64_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
	if (TBP_UNLIKELY(id == 0)) {
		const char *mangled = __atomic_load_n(&s->mangled, __ATOMIC_RELAXED);
		id = mangled ? tbp_intern_kernel_name(mangled) : 0;
		if (!id)
			return unknown();
		__atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
	}
	tbp_last_name = (struct tbp_last_name){ (uintptr_t)key, generation, id };
	return id;
}

typedef int (*cu_get_name_fn)(const char **, void *);

/* The driver's function, from the driver the process uses (libtbprof does not link it), or NULL. */
static cu_get_name_fn driver_name_function(const char *symbol)
{
	cu_get_name_fn f = (cu_get_name_fn)tbp_real_dlsym(RTLD_NEXT, symbol);
	if (!f) {
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			f = (cu_get_name_fn)tbp_real_dlsym(h, symbol);
	}
	return f;
}

/* A driver launch's function handle is a CUfunction or, since CUDA 12, a CUkernel (cuLibraryGetKernel:
 * libraries whose statically linked runtime loads their kernels as a CUlibrary launch them so, cuBLASLt's
 * GEMMs through cuLaunchKernelEx on the H100).  cuFuncGetName names only the first and answers
 * CUDA_ERROR_INVALID_HANDLE for the second, cuKernelGetName the reverse: ask one, then the other.  Once per
 * handle; the id is cached in the name table. */
uint64_t tbp_names_cufunction(const void *func)
{
	struct name_slot *s = find((uintptr_t)func);
	if (s) {
		uint64_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
		if (id)
			return id;
	}
	static cu_get_name_fn func_get_name, kernel_get_name;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&func_get_name, driver_name_function("cuFuncGetName"), __ATOMIC_RELAXED);
		__atomic_store_n(&kernel_get_name, driver_name_function("cuKernelGetName"), __ATOMIC_RELAXED);
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	cu_get_name_fn by_function = __atomic_load_n(&func_get_name, __ATOMIC_RELAXED);
	cu_get_name_fn by_kernel = __atomic_load_n(&kernel_get_name, __ATOMIC_RELAXED);
	const char *mangled = NULL;
	if (!func)
		return unknown();
	if (!by_function || by_function(&mangled, (void *)func) != 0 || !mangled) {
		mangled = NULL;
		if (!by_kernel || by_kernel(&mangled, (void *)func) != 0 || !mangled)
			return unknown();
	}
	uint64_t id = tbp_intern_kernel_name(mangled);
	if (!id)
		return unknown();
	pthread_mutex_lock(&names_lock);
	/* The driver owns the string; only the interned id is kept. */
	put_locked((uintptr_t)func, NULL, id);
	pthread_mutex_unlock(&names_lock);
	return id;
}
