/*
 * Hook table services: real-function resolution, the dlsym interposer that
 * hands wrappers to code looking CUDA entry points up by handle (ctypes,
 * Triton, NCCL), and the one-time start of CUPTI.  The C library's dlsym
 * itself is the core's (libtbprof/libc_real.c).
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "hook.h"
#include "tbp_config.h"   /* TBP_HAVE_HIP */

const struct tbp_hook_entry *tbp_hook_find(const char *name)
{
	for (const struct tbp_hook_entry *e = __start_tbp_hooks; e < __stop_tbp_hooks; e++)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

static bool own_wrapper(void *p)
{
	for (const struct tbp_hook_entry *e = __start_tbp_hooks; e < __stop_tbp_hooks; e++)
		if (e->wrapper == p)
			return true;
	return false;
}

void *tbp_resolve_real(const struct tbp_hook_entry *e)
{
	if (e->lib == TBP_LIB_HIP) {
#if TBP_HAVE_HIP
		return tbp_hip_find_real(e->name, e->wrapper);
#else
		return NULL;   /* no HIP hooks in this build: no HIP entry either */
#endif
	}
	void *p = tbp_real_dlsym(RTLD_NEXT, e->name);
	if (!p && e->lib == TBP_LIB_CUDART)
		p = dlvsym(RTLD_NEXT, e->name, "libcudart.so.13");
	if (!p) {
		/* Loaded with RTLD_LOCAL (ctypes, torch): find it by soname. */
		void *h = dlopen(e->lib == TBP_LIB_CUDART ? "libcudart.so.13" : "libcuda.so.1",
			RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = tbp_real_dlsym(h, e->name);
			dlclose(h);
		}
	}
	if (p && own_wrapper(p))
		p = NULL;
	return p;
}

static uintptr_t cudart_base;

bool tbp_addr_in_cudart(const void *addr)
{
	Dl_info info;
	if (!dladdr(addr, &info) || !info.dli_fbase)
		return false;
	uintptr_t base = __atomic_load_n(&cudart_base, __ATOMIC_RELAXED);
	if (base)
		return (uintptr_t)info.dli_fbase == base;
	if (info.dli_fname && strstr(info.dli_fname, "libcudart")) {
		__atomic_store_n(&cudart_base, (uintptr_t)info.dli_fbase, __ATOMIC_RELAXED);
		return true;
	}
	return false;
}

/* Hand out our wrapper for a real entry point found by handle, when it is
 * the same function our hook forwards to. */
static void *maybe_wrap(const struct tbp_hook_entry *e, void *real)
{
	void *have = __atomic_load_n(e->real, __ATOMIC_ACQUIRE);
	if (!have) {
		void *expected = NULL;
		__atomic_compare_exchange_n(e->real, &expected, real, false, __ATOMIC_ACQ_REL,
			__ATOMIC_ACQUIRE);
		have = __atomic_load_n(e->real, __ATOMIC_ACQUIRE);
	}
	return have == real ? e->wrapper : real;
}

/* The C part of the dlsym interposer.  Reached by a jump from the
 * trampoline, so __builtin_return_address(0) is the caller of dlsym. */
TBP_HIDDEN void *tbp_dlsym_slow(void *handle, const char *name)
{
	void *caller = __builtin_return_address(0);
	void *p = tbp_real_dlsym(handle, name);
	if (!p || !name || handle == RTLD_NEXT || handle == RTLD_DEFAULT || !tbp_cfg.enabled)
		return p;
	/* Cheap filter before the table lookup: every hooked name starts with
	 * "cu"/"cuda", "hip" or "__". */
	if (name[0] != 'c' && name[0] != '_' && name[0] != 'h')
		return p;
	const struct tbp_hook_entry *e = tbp_hook_find(name);
	if (!e || p == e->wrapper)
		return p;
	if (e->lib == TBP_LIB_CUDA && tbp_addr_in_cudart(caller))
		return p;   /* the runtime's own driver calls: recorded by runtime hooks */
	return maybe_wrap(e, p);
}

#if defined(__x86_64__)
/*
 * The exported dlsym.  dlsym(RTLD_NEXT, ...) is relative to its caller, so
 * RTLD_NEXT and RTLD_DEFAULT jump straight to the real dlsym with the
 * caller's return address intact; only lookups by handle reach C.  The real
 * dlsym is resolved here in assembly on first use because sanitizer
 * runtimes call dlsym(RTLD_NEXT, ...) before any constructor (ours
 * included) has run, and instrumented C must not run that early.
 */
__asm__(".section .rodata\n"
	"tbp_str_dlsym: .string \"dlsym\"\n"
	"tbp_str_glibc234: .string \"GLIBC_2.34\"\n"
	"tbp_str_glibc225: .string \"GLIBC_2.2.5\"\n"
	".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	endbr64\n"
	"	movq tbp_real_dlsym_fn(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 2f\n"
	"	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	movq $-1, %rdi\n"
	"	leaq tbp_str_dlsym(%rip), %rsi\n"
	"	leaq tbp_str_glibc234(%rip), %rdx\n"
	"	call dlvsym@PLT\n"
	"	testq %rax, %rax\n"
	"	jne 1f\n"
	"	movq $-1, %rdi\n"
	"	leaq tbp_str_dlsym(%rip), %rsi\n"
	"	leaq tbp_str_glibc225(%rip), %rdx\n"
	"	call dlvsym@PLT\n"
	"1:\n"
	"	movq %rax, tbp_real_dlsym_fn(%rip)\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"2:\n"
	"	cmpq $-1, %rdi\n"
	"	je 4f\n"
	"	testq %rdi, %rdi\n"
	"	je 4f\n"
	"	jmp tbp_dlsym_slow\n"
	"4:\n"
	"	jmp *%rax\n"
	"3:\n"
	"	xorl %eax, %eax\n"
	"	ret\n"
	".size dlsym, .-dlsym\n");
#else
TBP_EXPORT void *dlsym(void *handle, const char *name)
{
	return tbp_dlsym_slow(handle, name);
}
#endif

/* Wrapper handout for cuGetProcAddress (cuda_driver.c). */
void *tbp_wrap_proc(const char *symbol, void *real, int per_thread, const void *caller)
{
	if (!real || !symbol || !tbp_cfg.enabled || tbp_addr_in_cudart(caller))
		return real;
	for (const struct tbp_hook_entry *e = __start_tbp_hooks; e < __stop_tbp_hooks; e++) {
		if (!e->proc_name || e->per_thread != per_thread || strcmp(e->proc_name, symbol))
			continue;
		if (real == e->wrapper)
			return real;
		return maybe_wrap(e, real);
	}
	return real;
}

unsigned tbp_libs_ready;

void tbp_hook_first_use(unsigned lib)
{
	if (lib == TBP_LIB_HIP) {
		/* pthread_once inside: every thread waits until it is done. */
#if TBP_HAVE_HIP
		tbp_hip_first_use();
#endif
	} else if (tbp_cfg.cupti) {
		/* Called by every thread until one start has completed: a second
		 * thread blocks in tbp_cupti_start while the first starts CUPTI
		 * (and it returns after one check once started), so no thread
		 * gets past its first call before CUPTI records. */
		tbp_cupti_start();
	}
	/* Both CUDA families share CUPTI: ready together. */
	unsigned bits = lib == TBP_LIB_HIP ? 1u << TBP_LIB_HIP
		: (1u << TBP_LIB_CUDART) | (1u << TBP_LIB_CUDA);
	__atomic_or_fetch(&tbp_libs_ready, bits, __ATOMIC_RELEASE);
}

uint64_t tbp_devices_seen;

/* The device's name, from the driver (cuDeviceGet + cuDeviceGetName): the
 * runtime is not asked, because a runtime call from inside a hook could
 * change the program's per-thread error state (cudaGetLastError); driver
 * calls do not touch it.  Runtime and driver ordinals are the same (both
 * enumerate the visible devices in order).  0 when the driver is not loaded
 * or not initialized (simgpu, no driver). */
static uint64_t device_name_id(int device)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	int (*get)(int *, int) = (int (*)(int *, int))tbp_real_dlsym(h, "cuDeviceGet");
	int (*get_name)(char *, int, int) = (int (*)(char *, int, int))tbp_real_dlsym(h, "cuDeviceGetName");
	dlclose(h);   /* RTLD_NOLOAD: only drops the reference just taken */
	char name[256];
	int dev = 0;
	if (!get || !get_name || get(&dev, device) != 0 || get_name(name, (int)sizeof name, dev) != 0)
		return 0;
	name[sizeof name - 1] = 0;
	return name[0] ? tbp_intern_string(name, strlen(name)) : 0;
}

/* The vendor says whether this is simgpu's stand-in runtime (it exports
 * simgpu_*), so reports can tell. */
void tbp_announce_device(int device)
{
	uint64_t bit = 1ull << device;
	if (__atomic_fetch_or(&tbp_devices_seen, bit, __ATOMIC_RELAXED) & bit)
		return;
	struct tbp_record def = { .kind = TBP_K_DEVICE, .ts = tbp_now() };
	def.u.device.device = (uint64_t)device;
	def.u.device.name = device_name_id(device);
	def.u.device.vendor = tbp_real_dlsym(RTLD_DEFAULT, "simgpu_now_ns") ? 3 : 1;
	tbp_emit_def(&def);
}
