/*
 * NVTX ranges: libtbprof is NVTX's injection library, as nsys's is.  Every copy of NVTX in the process
 * (nvtx3 is header-only: torch's libtorch_python has one, a C++ extension another, the `nvtx` package a
 * third) looks at its first call for NVTX_INJECTION64_PATH, dlopens that library, and calls its
 * InitializeInjectionNvtx2 with the copy's export-table getter; through the CALLBACKS table the
 * injection fills the copy's function pointers.  We fill the CORE module (the default domain's marks
 * and ranges) and CORE2 (domains, registered strings).  The library is already loaded (preloaded):
 * dlopen of the same file returns it, so the variable names the file the loader has.
 *
 * The hooks are thin.  Push/pop ranges live on a per-thread stack (no allocation); start/end ranges,
 * which may end on another thread, in a fixed table by id.  A range is one TBP_K_RANGE record
 * written when it ends (lifecycle.c tbp_range_emit), with the Python call path where it began.
 * While nothing is recorded (armed on demand, a capture not running) a push only keeps the depth,
 * unless --capture-range nvtx:NAME asks to compare its name.
 *
 * The ABI facts below (ids, struct layout, return values) are NVTX v3's (nvToolsExt.h,
 * nvtxDetail/nvtxTypes.h); declared here so that building needs no CUDA headers.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <strings.h>
#include <wchar.h>

#include "core.h"

/* ------------------------------------------------------------ NVTX's ABI */

typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_function_table;   /* [cbid] -> the copy's function pointer slot */
typedef const void *(*nvtx_get_export_table)(uint32_t id);

enum { NVTX_ETID_CALLBACKS = 1, NVTX_ETID_VERSIONINFO = 3 };
enum { NVTX_CB_MODULE_CORE = 1, NVTX_CB_MODULE_CORE2 = 5 };
enum {
	CORE_MarkEx = 1, CORE_MarkA = 2, CORE_MarkW = 3, CORE_RangeStartEx = 4, CORE_RangeStartA = 5,
	CORE_RangeStartW = 6, CORE_RangeEnd = 7, CORE_RangePushEx = 8, CORE_RangePushA = 9, CORE_RangePushW = 10,
	CORE_RangePop = 11,
};
enum {
	CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx = 2, CORE2_DomainRangeEnd = 3, CORE2_DomainRangePushEx = 4,
	CORE2_DomainRangePop = 5, CORE2_DomainRegisterStringA = 10, CORE2_DomainRegisterStringW = 11,
	CORE2_DomainCreateA = 12, CORE2_DomainCreateW = 13, CORE2_DomainDestroy = 14,
};
struct nvtx_export_callbacks {
	size_t struct_size;
	int (*get_module_function_table)(int module, nvtx_function_table *out_table, unsigned *out_size);
};
struct nvtx_export_version {
	size_t struct_size;
	uint32_t version;
	uint32_t reserved0;
	void (*set_injection_version)(uint32_t version);
};
enum { NVTX_MESSAGE_ASCII = 1, NVTX_MESSAGE_UNICODE = 2, NVTX_MESSAGE_REGISTERED = 3 };
struct nvtx_event_attributes {
	uint16_t version, size;
	uint32_t category;
	int32_t color_type;
	uint32_t color;
	int32_t payload_type, reserved0;
	uint64_t payload;
	int32_t message_type;
	union {
		const char *ascii;
		const wchar_t *unicode;
		const void *registered;
	} message;
};
/* nvtxRangePush's answer when no tool tracks the stack; an error otherwise is negative too. */
#define NVTX_NO_PUSH_POP_TRACKING (-2)

/* Domain and registered-string handles are the interned string ids of their names: never
 * dereferenced by NVTX or the program, and the same text gives the same handle. */
static void *handle_of(uint64_t id)
{
	return id ? (void *)(uintptr_t)id : (void *)(uintptr_t)UINT64_MAX;
}
static uint64_t id_of(const void *handle)
{
	uintptr_t v = (uintptr_t)handle;
	return v == (uintptr_t)UINT64_MAX ? 0 : (uint64_t)v;
}

/* ------------------------------------------------------------ messages */

/* UTF-8 of a wide string (UTF-32 on Linux), cut at the buffer. */
static size_t wide_to_utf8(const wchar_t *w, char *out, size_t cap)
{
	size_t n = 0;
	for (; w && *w; w++) {
		uint32_t c = (uint32_t)*w;
		char b[4];
		size_t k;
		if (c < 0x80) {
			b[0] = (char)c;
			k = 1;
		} else if (c < 0x800) {
			b[0] = (char)(0xC0 | (c >> 6));
			b[1] = (char)(0x80 | (c & 0x3F));
			k = 2;
		} else if (c < 0x10000) {
			b[0] = (char)(0xE0 | (c >> 12));
			b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
			b[2] = (char)(0x80 | (c & 0x3F));
			k = 3;
		} else {
			c = c > 0x10FFFF ? 0xFFFD : c;
			b[0] = (char)(0xF0 | (c >> 18));
			b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
			b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
			b[3] = (char)(0x80 | (c & 0x3F));
			k = 4;
		}
		if (n + k > cap)
			break;
		memcpy(out + n, b, k);
		n += k;
	}
	return n;
}

static uint64_t intern_ascii(const char *s)
{
	return s ? tbp_intern_string(s, strlen(s)) : 0;
}

static uint64_t intern_wide(const wchar_t *w)
{
	char buf[1024];
	size_t n = wide_to_utf8(w, buf, sizeof buf);
	return w ? tbp_intern_string(buf, n) : 0;
}

/* What a hook knows of a message before it is interned: interning takes a lock, so it is done only
 * when the range is recorded or its name is compared. */
struct msg {
	int type;   /* NVTX_MESSAGE_*, 0 none */
	const void *p;
};
static uint64_t msg_id(const struct msg *m)
{
	switch (m->type) {
	case NVTX_MESSAGE_ASCII: return intern_ascii(m->p);
	case NVTX_MESSAGE_UNICODE: return intern_wide(m->p);
	case NVTX_MESSAGE_REGISTERED: return id_of(m->p);
	}
	return 0;
}
static struct msg attr_msg(const struct nvtx_event_attributes *a)
{
	if (!a || a->size < offsetof(struct nvtx_event_attributes, message) + sizeof a->message)
		return (struct msg){0, NULL};
	return (struct msg){a->message_type, a->message.ascii};
}

/* Where the range begins in the program's Python, as a hook takes it (interpose/hook.h). */
static uint64_t range_callpath(void)
{
	if (!tbp_cfg.python || __atomic_load_n(&tbp_py_inert, __ATOMIC_RELAXED) || !tbp_guard_enter())
		return 0;
	uint64_t cp = tbp_py_callpath();
	tbp_guard_leave();
	return cp;
}

/* ------------------------------------------------------------ push / pop */

/* Deeper than this, a thread's ranges are counted (their depth stays right) but not recorded. */
#define STACK_MAX 64
struct open_range {
	uint64_t ts;   /* 0: not recorded (nothing was being recorded when it began) */
	uint64_t domain, name, callpath, tid;
	unsigned gen;  /* the trace it began in */
	bool capture;  /* it began a capture: its pop ends it */
};
static __thread struct {
	unsigned n, overflow;
	struct open_range e[STACK_MAX];
} stack;

static int depth_in(uint64_t domain)
{
	int d = 0;
	for (unsigned i = 0; i < stack.n; i++)
		d += stack.e[i].domain == domain;
	return d;
}

static int range_push(uint64_t domain, struct msg m)
{
	int saved_errno = errno;
	if (stack.n == STACK_MAX) {
		stack.overflow++;
		return (int)(STACK_MAX + stack.overflow - 1);
	}
	int level = depth_in(domain);
	struct open_range *r = &stack.e[stack.n++];
	*r = (struct open_range){.domain = domain};
	if (tbp_cfg.capture_range_nvtx[0]) {
		r->name = msg_id(&m);
		r->capture = tbp_nvtx_capture_begin(domain, r->name);
	}
	if (TBP_ACTIVE()) {
		if (!r->name)
			r->name = msg_id(&m);
		r->ts = tbp_range_begin(&r->tid, &r->gen);
		r->callpath = r->ts ? range_callpath() : 0;
	}
	errno = saved_errno;
	return level;
}

static int range_pop(uint64_t domain)
{
	int saved_errno = errno;
	if (stack.overflow) {
		stack.overflow--;
		return (int)(STACK_MAX + stack.overflow);
	}
	unsigned i = stack.n;
	while (i > 0 && stack.e[i - 1].domain != domain)
		i--;
	if (i == 0)
		return -1;   /* a pop without its push: NVTX's error answer */
	struct open_range r = stack.e[i - 1];
	memmove(&stack.e[i - 1], &stack.e[i], (stack.n - i) * sizeof stack.e[0]);
	stack.n--;
	int level = depth_in(domain);
	if (r.ts)
		tbp_range_emit(TBP_NVTX_PUSH, r.ts, domain, r.name, r.callpath, (uint64_t)level, 0, r.tid, r.gen);
	if (r.capture)
		tbp_nvtx_capture_end();
	errno = saved_errno;
	return level;
}

/* ------------------------------------------------------------ start / end (any thread) */

/* Ranges started and not ended: slot id % START_SLOTS.  A slot still taken when its turn comes
 * again (START_SLOTS ranges open at once) is overwritten: the older range is not recorded. */
#define START_SLOTS 1024
static struct start_slot {
	_Atomic uint64_t id;
	uint64_t ts, domain, name, callpath, tid;
	unsigned gen;
	bool capture;
} started[START_SLOTS];
static _Atomic uint64_t last_range_id;

static uint64_t range_start(uint64_t domain, struct msg m)
{
	int saved_errno = errno;
	uint64_t id = atomic_fetch_add_explicit(&last_range_id, 1, memory_order_relaxed) + 1;
	uint64_t name = 0, callpath = 0, tid = 0, ts = 0;
	unsigned gen = 0;
	bool capture = false;
	if (tbp_cfg.capture_range_nvtx[0]) {
		name = msg_id(&m);
		capture = tbp_nvtx_capture_begin(domain, name);
	}
	if (TBP_ACTIVE()) {
		if (!name)
			name = msg_id(&m);
		ts = tbp_range_begin(&tid, &gen);
		callpath = ts ? range_callpath() : 0;
	}
	if (ts || capture) {
		struct start_slot *s = &started[id % START_SLOTS];
		atomic_store_explicit(&s->id, 0, memory_order_relaxed);
		s->ts = ts;
		s->domain = domain;
		s->name = name;
		s->callpath = callpath;
		s->tid = tid;
		s->gen = gen;
		s->capture = capture;
		atomic_store_explicit(&s->id, id, memory_order_release);
	}
	errno = saved_errno;
	return id;
}

static void range_end(uint64_t id)
{
	int saved_errno = errno;
	struct start_slot *s = &started[id % START_SLOTS];
	uint64_t expect = id;
	if (!id || atomic_load_explicit(&s->id, memory_order_acquire) != id) {
		errno = saved_errno;
		return;
	}
	struct start_slot copy = {.ts = s->ts, .domain = s->domain, .name = s->name, .callpath = s->callpath,
				  .tid = s->tid, .gen = s->gen, .capture = s->capture};
	if (atomic_compare_exchange_strong(&s->id, &expect, 0)) {
		if (copy.ts)
			tbp_range_emit(TBP_NVTX_START, copy.ts, copy.domain, copy.name, copy.callpath, 0, id, copy.tid, copy.gen);
		if (copy.capture)
			tbp_nvtx_capture_end();
	}
	errno = saved_errno;
}

static void mark(uint64_t domain, struct msg m)
{
	if (!TBP_ACTIVE())
		return;
	int saved_errno = errno;
	uint64_t name = msg_id(&m), callpath = 0, tid = 0;
	unsigned gen = 0;
	uint64_t ts = tbp_range_begin(&tid, &gen);
	callpath = ts ? range_callpath() : 0;
	if (ts)
		tbp_range_emit(TBP_NVTX_MARK, ts, domain, name, callpath, 0, 0, tid, gen);
	errno = saved_errno;
}

/* ------------------------------------------------------------ the callbacks */

static void cb_mark_ex(const struct nvtx_event_attributes *a) { mark(0, attr_msg(a)); }
static void cb_mark_a(const char *s) { mark(0, (struct msg){NVTX_MESSAGE_ASCII, s}); }
static void cb_mark_w(const wchar_t *s) { mark(0, (struct msg){NVTX_MESSAGE_UNICODE, s}); }
static uint64_t cb_start_ex(const struct nvtx_event_attributes *a) { return range_start(0, attr_msg(a)); }
static uint64_t cb_start_a(const char *s) { return range_start(0, (struct msg){NVTX_MESSAGE_ASCII, s}); }
static uint64_t cb_start_w(const wchar_t *s) { return range_start(0, (struct msg){NVTX_MESSAGE_UNICODE, s}); }
static void cb_end(uint64_t id) { range_end(id); }
static int cb_push_ex(const struct nvtx_event_attributes *a) { return range_push(0, attr_msg(a)); }
static int cb_push_a(const char *s) { return range_push(0, (struct msg){NVTX_MESSAGE_ASCII, s}); }
static int cb_push_w(const wchar_t *s) { return range_push(0, (struct msg){NVTX_MESSAGE_UNICODE, s}); }
static int cb_pop(void) { return range_pop(0); }

static void cb_domain_mark_ex(const void *d, const struct nvtx_event_attributes *a) { mark(id_of(d), attr_msg(a)); }
static uint64_t cb_domain_start_ex(const void *d, const struct nvtx_event_attributes *a)
{
	return range_start(id_of(d), attr_msg(a));
}
static void cb_domain_end(const void *d, uint64_t id) { (void)d; range_end(id); }
static int cb_domain_push_ex(const void *d, const struct nvtx_event_attributes *a)
{
	return range_push(id_of(d), attr_msg(a));
}
static int cb_domain_pop(const void *d) { return range_pop(id_of(d)); }
static void *cb_register_a(const void *d, const char *s) { (void)d; return handle_of(intern_ascii(s)); }
static void *cb_register_w(const void *d, const wchar_t *s) { (void)d; return handle_of(intern_wide(s)); }
static void *cb_domain_create_a(const char *s) { return handle_of(intern_ascii(s)); }
static void *cb_domain_create_w(const wchar_t *s) { return handle_of(intern_wide(s)); }
static void cb_domain_destroy(const void *d) { (void)d; }

static void fill(nvtx_get_export_table get, int module, const nvtx_fn *fns, unsigned nfns)
{
	const struct nvtx_export_callbacks *cb = get(NVTX_ETID_CALLBACKS);
	nvtx_function_table table = NULL;
	unsigned size = 0;
	if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_function_table ||
	    !cb->get_module_function_table(module, &table, &size) || !table)
		return;
	/* The table holds `size` slots, 0 unused; a copy older than these ids has fewer. */
	for (unsigned id = 1; id < nfns && id < size; id++)
		if (fns[id] && table[id])
			*table[id] = fns[id];
}

TBP_EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table get)
{
	if (!tbp_cfg.enabled || !get)
		return 0;   /* NVTX makes every call a no-op */
	static const nvtx_fn core[] = {
		[CORE_MarkEx] = (nvtx_fn)cb_mark_ex, [CORE_MarkA] = (nvtx_fn)cb_mark_a, [CORE_MarkW] = (nvtx_fn)cb_mark_w,
		[CORE_RangeStartEx] = (nvtx_fn)cb_start_ex, [CORE_RangeStartA] = (nvtx_fn)cb_start_a,
		[CORE_RangeStartW] = (nvtx_fn)cb_start_w, [CORE_RangeEnd] = (nvtx_fn)cb_end,
		[CORE_RangePushEx] = (nvtx_fn)cb_push_ex, [CORE_RangePushA] = (nvtx_fn)cb_push_a,
		[CORE_RangePushW] = (nvtx_fn)cb_push_w, [CORE_RangePop] = (nvtx_fn)cb_pop,
	};
	static const nvtx_fn core2[] = {
		[CORE2_DomainMarkEx] = (nvtx_fn)cb_domain_mark_ex, [CORE2_DomainRangeStartEx] = (nvtx_fn)cb_domain_start_ex,
		[CORE2_DomainRangeEnd] = (nvtx_fn)cb_domain_end, [CORE2_DomainRangePushEx] = (nvtx_fn)cb_domain_push_ex,
		[CORE2_DomainRangePop] = (nvtx_fn)cb_domain_pop, [CORE2_DomainRegisterStringA] = (nvtx_fn)cb_register_a,
		[CORE2_DomainRegisterStringW] = (nvtx_fn)cb_register_w, [CORE2_DomainCreateA] = (nvtx_fn)cb_domain_create_a,
		[CORE2_DomainCreateW] = (nvtx_fn)cb_domain_create_w, [CORE2_DomainDestroy] = (nvtx_fn)cb_domain_destroy,
	};
	fill(get, NVTX_CB_MODULE_CORE, core, sizeof core / sizeof core[0]);
	fill(get, NVTX_CB_MODULE_CORE2, core2, sizeof core2 / sizeof core2[0]);
	const struct nvtx_export_version *v = get(NVTX_ETID_VERSIONINFO);
	if (v && v->struct_size >= sizeof *v && v->set_injection_version)
		v->set_injection_version(v->version);
	return 1;
}

/* ------------------------------------------------------------ the variable */

/* Before any NVTX copy initializes (at load, before main): NVTX_INJECTION64_PATH names this library
 * as the loader has it, unless set already.  A value of the user's is left alone (the launcher says
 * so; the bare preload, with TBPROF_VERBOSE). */
__attribute__((constructor(200))) static void nvtx_injection_env(void)
{
	const char *enable = getenv("TBPROF_ENABLE");
	if (enable && (!strcmp(enable, "0") || !strcasecmp(enable, "false") || !strcasecmp(enable, "no") ||
		       !strcasecmp(enable, "off")))
		return;
	Dl_info info;
	char abs[PATH_MAX];
	if (!dladdr((void *)InitializeInjectionNvtx2, &info) || !info.dli_fname || !*info.dli_fname)
		return;
	/* dlopen of another name of the same file finds the loaded library (glibc compares the file) */
	const char *self = info.dli_fname[0] == '/' ? info.dli_fname : realpath(info.dli_fname, abs);
	const char *set = getenv("NVTX_INJECTION64_PATH");
	if (!self)
		return;
	if (!set || !*set) {
		setenv("NVTX_INJECTION64_PATH", self, 1);
		return;
	}
	const char *verbose = getenv("TBPROF_VERBOSE");
	if (strcmp(set, self) && verbose && *verbose && strcmp(verbose, "0"))
		tbp_log("NVTX_INJECTION64_PATH=%s is set: NVTX ranges go there, not into the trace", set);
}
