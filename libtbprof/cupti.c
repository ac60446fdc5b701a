/*
 * GPU timeline from CUPTI's activity API, joined to our API records.
 *
 * libcupti is never linked: it is found and dlopen()ed when CUDA is first
 * seen in use (tbp_cupti_start), and every entry point is fetched with dlsym.
 * The CUPTI headers are used for record layouts and constants only.
 *
 * Joining: around every real GPU API call the hooks call
 * tbp_gpu_call_enter/exit(corr); we push our corr as a CUPTI external
 * correlation id (kind CUSTOM2) for the calling thread.  CUPTI then writes an
 * EXTERNAL_CORRELATION record (CUPTI correlation id of the API record it
 * writes for that call -> our corr), and every kernel/copy/memset/sync record
 * carries the CUPTI correlation id of the API call that caused it.  API
 * records are enabled only for the launch, copy, memset and sync callback ids
 * (runtime and driver); we keep each one's correlation id, thread and
 * interval.  A GPU record whose API record has our id is joined directly; one
 * whose API record has none (a runtime linked statically into cuBLASLt,
 * cuDNN, NCCL: CUPTI sees its runtime call, which no preload can hook, and
 * our hook sees only the driver call it makes through cuGetProcAddress) is
 * joined to the hooked call that ran on the same thread inside that API
 * record's interval.  doc/gpu.md has the paths.
 *
 * Order: CUPTI hands buffers over late and out of time order (per-stream
 * buffers, each delivered when full or flushed).  GPU records wait in a
 * bounded min-heap by start time for HOLD_NS after they arrive (or until a
 * forced flush has delivered everything, or the heap is full) and are joined
 * and written in time order, so the trace does not depend on delivery order.
 *
 * Clock: we register a timestamp callback returning CLOCK_MONOTONIC ns, so
 * GPU times arrive in our domain.  If CUPTI refuses it, we calibrate an offset
 * by bracketing cuptiGetTimestamp between two CLOCK_MONOTONIC reads and
 * convert every GPU timestamp; the CLOCK record says which, and how exact.
 *
 * Threads: buffer callbacks run on CUPTI's thread (or on the thread calling
 * cuptiActivityFlushAll: ours every FLUSH_PERIOD_NS, see "periodic flush");
 * one mutex serialises record processing.  Start, flush and stop are
 * serialised by another.  The per-call hot path touches
 * only a flag, a thread-local and the CUPTI push/pop.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "cupti_support.h"
#include "tbp_config.h"

#if TBP_HAVE_CUPTI
#include <cupti.h>
#endif

/* Our CLOCK.domain for GPU activity timestamps delivered by CUPTI. */
#define TBP_CLOCK_DOMAIN_CUPTI 1

static int cupti_note_flag; /* tbp_warn_once flag */

/* The CLOCK record: how GPU timestamps were put in our domain (HOOK_SIDE:
 * there are none, tbanalyze uses host hook times). */
static void record_clock(uint64_t method, int64_t offset, uint64_t uncertainty)
{
	struct tbp_record rec;
	memset(&rec, 0, sizeof rec);
	rec.kind = TBP_K_CLOCK;
	rec.stream_kind = TBP_STREAM_DEFS;
	rec.ts = tbp_now();
	rec.u.clock.domain = TBP_CLOCK_DOMAIN_CUPTI;
	rec.u.clock.device = 0;
	rec.u.clock.offset_ns = (uint64_t)offset;
	rec.u.clock.uncertainty_ns = uncertainty;
	rec.u.clock.method = method;
	tbp_emit_def(&rec);
}

#if !TBP_HAVE_CUPTI

/* Built without CUPTI headers: always an API-only trace. */
void tbp_cupti_start(void)
{
	static int started;
	if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
		return;
	tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_NO_CUPTI,
		   "API-only trace: libcupti not found (built without CUPTI headers)");
	record_clock(TBP_CLOCK_HOOK_SIDE, 0, 0);
	if (tbp_cfg.verbose)
		tbp_warn_once(&cupti_note_flag, "API-only trace: built without CUPTI support");
}
void tbp_cupti_flush(void) {}
void tbp_cupti_stop(void) {}
void tbp_gpu_call_enter(uint64_t corr) { (void)corr; }
void tbp_gpu_call_exit(uint64_t corr) { (void)corr; }

#else /* TBP_HAVE_CUPTI */

#define CUPTI_SONAME "libcupti.so.13"
#define CORR_MAP_BITS 17            /* last 128 Ki CUPTI correlation ids (24 bytes each: 3 MiB) */
/* API records kept per thread for the nested join (the hooked driver call
 * inside a static runtime call): a thread's last THREAD_CALLS, for up to
 * API_THREADS threads (32 bytes each: 512 KiB). */
#define THREAD_CALLS 256
#define API_THREADS 64
/* GPU records wait this long after arriving before they are written, so
 * that records CUPTI delivers later but which started earlier go first. */
#define HOLD_NS 1000000000ull
/* CUPTI hands a buffer over when it is full, or on a flush: a quiet
 * stream's half-full buffer could stay behind for the whole run.  Every
 * FLUSH_PERIOD_NS a thread of ours asks for the completed records
 * (cuptiActivityFlushAll(0)), so a completed record reaches us within about
 * that time, well inside HOLD_NS. */
#define FLUSH_PERIOD_NS 250000000ull
#define HOLD_MAX (1u << 16)         /* records held at most (192 bytes each: 12 MiB) */
#define NAME_CACHE_SIZE 4096        /* kernel name -> interned id */
#define CONTEXT_MAP_SIZE 64
#define CALIBRATION_ROUNDS 50
/* CUSTOM2: torch.profiler (Kineto) uses CUSTOM0 for its ops and CUSTOM1 for
 * user ranges; our ids must never be read as theirs if both are active. */
#define EXTERNAL_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2

static int cupti_busy_flag; /* tbp_warn_once flag */

/* ------------------------------------------------------------ entry points */
static struct {
	CUptiResult (*activity_enable)(CUpti_ActivityKind);
	CUptiResult (*activity_disable)(CUpti_ActivityKind);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
					  CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*get_next_record)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*get_num_dropped)(CUcontext, uint32_t, size_t *);
	CUptiResult (*push_external)(CUpti_ExternalCorrelationKind, uint64_t);
	CUptiResult (*pop_external)(CUpti_ExternalCorrelationKind, uint64_t *);
	/* optional */
	CUptiResult (*register_timestamp_callback)(CUpti_TimestampCallbackFunc);
	CUptiResult (*get_timestamp)(uint64_t *);
	CUptiResult (*get_result_string)(CUptiResult, const char **);
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*enable_runtime_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*enable_driver_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*get_callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
} api;

enum cupti_state {
	CS_IDLE = 0,     /* not started */
	CS_ACTIVE,       /* collecting */
	CS_FALLBACK,     /* no CUPTI, disabled, in use or failed: API-only */
	CS_STOPPED,      /* stopped: buffers are dropped */
};
static int state = CS_IDLE;        /* written under ctl_lock, read atomically */
static int pushing;                /* hot path: push/pop external ids */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;
static void *cupti_handle;
static char cupti_path[4096];

/* GPU time -> CLOCK_MONOTONIC: added to every timestamp (0 with callback). */
static int64_t clock_offset_ns;

/* Activity kinds we enabled (so stop disables exactly those). */
static CUpti_ActivityKind enabled_kinds[16];
static unsigned n_enabled_kinds;
/* API callback ids we enabled one by one (runtime, driver), for stop. */
#define API_IDS_MAX 512
static uint16_t enabled_api_ids[2][API_IDS_MAX];
static unsigned n_enabled_api_ids[2];

/* ------------------------------------------------------------ loading */

static void *try_open(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h && snprintf(cupti_path, sizeof cupti_path, "%s", path) >= (int)sizeof cupti_path)
		cupti_path[sizeof cupti_path - 1] = 0; /* only shown in messages */
	return h;
}

struct cudart_dir { char dir[4096]; };

/* dl_iterate_phdr callback: directory of the loaded libcudart.so.* */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct cudart_dir *out = arg;
	const char *name = info->dlpi_name;
	if (!name || !*name)
		return 0;
	const char *base = strrchr(name, '/');
	if (!base || strncmp(base + 1, "libcudart.so", 12) != 0)
		return 0;
	size_t len = (size_t)(base - name);
	if (len >= sizeof out->dir)
		return 0;
	memcpy(out->dir, name, len);
	out->dir[len] = 0;
	return 1;
}

/* Search order: explicit TBPROF_CUPTI_PATH (only that), an already-loaded
 * copy, the one shipped next to the loaded libcudart (PyTorch's nvidia
 * wheels), the dynamic linker's search path, the toolkit. */
static void *load_cupti(void)
{
	const char *forced = getenv("TBPROF_CUPTI_PATH");
	if (forced && *forced)
		return try_open(forced);

	void *h = dlopen(CUPTI_SONAME, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		/* Name the file: which copy the host loaded is what a user needs to know when it fails. */
		struct link_map *map = NULL;
		if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
			snprintf(cupti_path, sizeof cupti_path, "%.4000s (already loaded)", map->l_name);
		else
			snprintf(cupti_path, sizeof cupti_path, "%s (already loaded)", CUPTI_SONAME);
		return h;
	}

	struct cudart_dir cd = { { 0 } };
	if (dl_iterate_phdr(find_cudart, &cd)) {
		static const char *const rel[] = {
			"/" CUPTI_SONAME,                        /* nvidia/cu13/lib */
			"/../../cuda_cupti/lib/" CUPTI_SONAME,   /* nvidia/cuda_runtime/lib */
			"/../extras/CUPTI/lib64/" CUPTI_SONAME,  /* toolkit lib64 */
		};
		char path[4096];
		for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
			if (snprintf(path, sizeof path, "%s%s", cd.dir, rel[i]) >= (int)sizeof path)
				continue;
			if ((h = try_open(path)))
				return h;
		}
	}

	if ((h = try_open(CUPTI_SONAME)))
		return h;

	const char *roots[] = { getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda" };
	for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
		if (!roots[i] || !*roots[i])
			continue;
		char path[4096];
		if (snprintf(path, sizeof path, "%s/lib64/" CUPTI_SONAME, roots[i]) < (int)sizeof path &&
		    (h = try_open(path)))
			return h;
		if (snprintf(path, sizeof path, "%s/extras/CUPTI/lib64/" CUPTI_SONAME, roots[i]) <
			    (int)sizeof path &&
		    (h = try_open(path)))
			return h;
	}
	return NULL;
}

static const char *result_string(CUptiResult r)
{
	const char *s = NULL;
	if (api.get_result_string && api.get_result_string(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

/* ------------------------------------------------------------ correlation map
 * Per CUPTI correlation id: our corr from its EXTERNAL_CORRELATION pair, the
 * corr of the hooked call nested in it (below), and the thread of its API
 * record.  Direct-mapped: ids grow monotonically, so an entry is only
 * overwritten by a call 2^CORR_MAP_BITS ids later (GPU records wait about
 * HOLD_NS, far fewer calls).  Only touched under proc_lock. */
struct corr_slot {
	uint32_t cupti;
	uint32_t api_tid_plus1;  /* thread of its API record + 1; 0: none seen */
	uint64_t ours;           /* 0: no pair seen */
	uint64_t nested;         /* pair of a hooked call inside this one, same thread */
};
static struct corr_slot *corr_map;

static struct corr_slot *corr_slot(uint32_t cupti_corr)
{
	struct corr_slot *s = &corr_map[cupti_corr & ((1u << CORR_MAP_BITS) - 1)];
	if (s->cupti != cupti_corr)
		memset(s, 0, sizeof *s), s->cupti = cupti_corr;
	return s;
}

static struct corr_slot *corr_find(uint32_t cupti_corr)
{
	struct corr_slot *s = &corr_map[cupti_corr & ((1u << CORR_MAP_BITS) - 1)];
	return s->cupti == cupti_corr ? s : NULL;
}

/* Our corr for a GPU record carrying CUPTI correlation id `cupti_corr`, 0
 * if none is known: the pair of its API record, else (a static runtime's
 * call, which we could not hook) the pair of the hooked call made on the
 * same thread inside that call's interval. */
static uint64_t join_corr(uint32_t cupti_corr)
{
	const struct corr_slot *s = corr_find(cupti_corr);
	return !s ? 0 : s->ours ? s->ours : s->nested;
}

/* ------------------------------------------------------------ nesting
 * A static runtime's call R (no pair: we could not hook it) encloses the
 * hooked driver call D it makes, on the same thread: D's interval lies in
 * R's.  Each thread's recent API records are kept in arrival order, and the
 * link R -> D's pair is made as soon as both records and D's pair are known,
 * whichever comes last (CUPTI may deliver them in any order).  Only
 * touched under proc_lock. */
struct thread_call {
	uint32_t cupti;
	uint32_t unused;
	uint64_t start, end;     /* CUPTI clock */
	uint64_t ours;           /* its pair, 0: none (yet) */
};
struct api_thread {
	uint32_t tid_plus1;      /* 0: free */
	uint32_t next;           /* ring position of the next record */
	struct thread_call calls[THREAD_CALLS];
};
static struct api_thread *api_threads;

static struct api_thread *api_thread(uint32_t tid)
{
	unsigned home = (tid * 2654435761u) % API_THREADS;
	for (unsigned i = 0; i < API_THREADS; i++) {
		struct api_thread *t = &api_threads[(home + i) % API_THREADS];
		if (t->tid_plus1 == tid + 1)
			return t;
		if (!t->tid_plus1) {
			t->tid_plus1 = tid + 1;
			return t;
		}
	}
	/* More threads than slots: the home slot starts over for this one. */
	struct api_thread *t = &api_threads[home];
	memset(t, 0, sizeof *t);
	t->tid_plus1 = tid + 1;
	return t;
}

/* `c` just became complete enough to link: an enclosing call without a pair
 * gets c's pair as its nested one, or c (without a pair) gets the pair of a
 * call it encloses. */
static void link_nested(struct api_thread *t, const struct thread_call *c)
{
	/* Newest first: the partner is usually the record just before. */
	for (unsigned k = 1; k <= THREAD_CALLS; k++) {
		const struct thread_call *o = &t->calls[(t->next + THREAD_CALLS - k) % THREAD_CALLS];
		if (!o->cupti || o == c)
			continue;
		if (c->ours && !o->ours && o->start <= c->start && c->end <= o->end) {
			/* static runtime calls do not nest: one encloses c at most */
			struct corr_slot *s = corr_find(o->cupti);
			if (s && !s->nested)
				s->nested = c->ours;
			return;
		} else if (!c->ours && o->ours && c->start <= o->start && o->end <= c->end) {
			struct corr_slot *s = corr_find(c->cupti);
			if (s && !s->nested)
				s->nested = o->ours;
			return;
		}
	}
}

static void api_record_seen(const CUpti_ActivityAPI *r)
{
	struct corr_slot *s = corr_slot(r->correlationId);
	s->api_tid_plus1 = r->threadId + 1;
	struct api_thread *t = api_thread(r->threadId);
	struct thread_call *c = &t->calls[t->next];
	t->next = (t->next + 1) % THREAD_CALLS;
	c->cupti = r->correlationId;
	c->start = r->start;
	c->end = r->end;
	c->ours = s->ours;
	link_nested(t, c);
}

static void pair_seen(uint32_t cupti_corr, uint64_t ours)
{
	struct corr_slot *s = corr_slot(cupti_corr);
	s->ours = ours;
	if (!s->api_tid_plus1)
		return; /* linked when its API record comes */
	struct api_thread *t = api_thread(s->api_tid_plus1 - 1);
	for (unsigned i = 0; i < THREAD_CALLS; i++) {
		struct thread_call *c = &t->calls[i];
		if (c->cupti == cupti_corr) {
			c->ours = ours;
			link_nested(t, c);
			return;
		}
	}
}

/* ------------------------------------------------------------ context -> device
 * Synchronization records carry a context but no device. */
static struct { uint32_t context, device, used; } context_map[CONTEXT_MAP_SIZE];

static void context_learn(uint32_t context, uint32_t device)
{
	unsigned i = context % CONTEXT_MAP_SIZE;
	context_map[i].context = context;
	context_map[i].device = device;
	context_map[i].used = 1;
}

static uint32_t context_device(uint32_t context)
{
	unsigned i = context % CONTEXT_MAP_SIZE;
	return (context_map[i].used && context_map[i].context == context) ? context_map[i].device : 0;
}

/* ------------------------------------------------------------ kernel names
 * CUPTI gives mangled names; we intern the demangled form (the same string
 * the launch hooks intern, so both records share one id).  __cxa_demangle
 * comes from the C++ runtime the CUDA process has loaded, if any. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn cxa_demangle;
static int cxa_demangle_looked_up;

struct name_slot { char *mangled; uint64_t hash; uint64_t id; };
static struct name_slot name_cache[NAME_CACHE_SIZE];

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static uint64_t kernel_name_id(const char *mangled)
{
	if (!mangled || !*mangled)
		return 0;
	uint64_t h = fnv1a(mangled);
	struct name_slot *slot = &name_cache[h % NAME_CACHE_SIZE];
	if (slot->mangled && slot->hash == h && strcmp(slot->mangled, mangled) == 0)
		return slot->id;

	if (!cxa_demangle_looked_up) {
		cxa_demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!cxa_demangle) {
			/* A C program or plain Python (ctypes) driving CUDA: the
			 * C++ runtime, privately (RTLD_LOCAL), for its demangler --
			 * as the launch hooks do, so both intern the same name. */
			void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
			if (cxx)
				cxa_demangle = (demangle_fn)dlsym(cxx, "__cxa_demangle");
		}
		cxa_demangle_looked_up = 1;
	}
	char *demangled = NULL;
	if (cxa_demangle && mangled[0] == '_' && mangled[1] == 'Z') {
		int status = -1;
		demangled = cxa_demangle(mangled, NULL, NULL, &status);
		if (status != 0) {
			free(demangled);
			demangled = NULL;
		}
	}
	const char *use = demangled ? demangled : mangled;
	uint64_t id = tbp_intern_string(use, strlen(use));
	free(demangled);

	char *copy = strdup(mangled);
	if (copy) {
		free(slot->mangled);
		slot->mangled = copy;
		slot->hash = h;
		slot->id = id;
	}
	return id;
}

/* ------------------------------------------------------------ conversion */

static inline uint64_t to_monotonic(uint64_t gpu_ts)
{
	/* 0 means CUPTI could not take the timestamp: keep it 0. */
	return gpu_ts ? (uint64_t)((int64_t)gpu_ts + clock_offset_ns) : 0;
}

static uint64_t map_copy_kind(unsigned k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
		return TBP_COPY_H2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
		return TBP_COPY_D2H;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
		return TBP_COPY_D2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
		return TBP_COPY_H2H;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
		return TBP_COPY_PEER;
	default:
		return TBP_COPY_UNKNOWN;
	}
}

static uint64_t map_mem_kind(unsigned k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return TBP_MEM_PAGEABLE;
	case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return TBP_MEM_PINNED;
	case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
	case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return TBP_MEM_DEVICE;
	case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return TBP_MEM_ARRAY;
	case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
	case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return TBP_MEM_MANAGED;
	default: return TBP_MEM_UNKNOWN;
	}
}

static uint64_t map_sync_kind(unsigned t)
{
	switch (t) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return TBP_SYNC_EVENT;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return TBP_SYNC_STREAM_WAIT_EVENT;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return TBP_SYNC_STREAM;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return TBP_SYNC_CONTEXT;
	default: return TBP_SYNC_UNKNOWN;
	}
}

static inline uint64_t s64(int64_t v) { return (uint64_t)v; }

/* The fields every CUPTI device activity has, whatever its struct version:
 * times, device, context, stream, correlation. */
#define FILL_DEVICE_ACTIVITY(rec, g, m, record_kind)                            \
	do {                                                                    \
		(rec)->kind = (record_kind);                                    \
		(rec)->tid = (m)->deviceId;                                     \
		(rec)->ts = to_monotonic((m)->start);                           \
		(g)->end = to_monotonic((m)->end);                              \
		(g)->device = (m)->deviceId;                                    \
		(g)->context = (m)->contextId;                                  \
		(g)->stream = (m)->streamId;                                    \
		*cupti_corr = (m)->correlationId;                               \
		context_learn((m)->contextId, (m)->deviceId);                   \
	} while (0)

/* Memcpy and peer-memcpy records differ in type but share these fields. */
#define FILL_MEMCPY(rec, m)                                                     \
	do {                                                                    \
		struct tbp_gpu_memcpy *g_ = &(rec)->u.gpu_memcpy;               \
		FILL_DEVICE_ACTIVITY(rec, g_, m, TBP_K_GPU_MEMCPY);              \
		g_->bytes = (m)->bytes;                                         \
		g_->copy_kind = map_copy_kind((m)->copyKind);                   \
		g_->src_kind = map_mem_kind((m)->srcKind);                      \
		g_->dst_kind = map_mem_kind((m)->dstKind);                      \
	} while (0)

/* Fills *rec from one CUPTI activity record.  Returns 1 and the CUPTI
 * correlation id for GPU records we keep, 0 for everything else. */
static int convert(const CUpti_Activity *a, struct tbp_record *rec, uint32_t *cupti_corr)
{
	memset(rec, 0, sizeof *rec);
	rec->stream_kind = TBP_STREAM_GPU;
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)a;
		struct tbp_gpu_kernel *g = &rec->u.gpu_kernel;
		FILL_DEVICE_ACTIVITY(rec, g, k, TBP_K_GPU_KERNEL);
		g->name = kernel_name_id(k->name);
		g->grid_x = s64(k->gridX);
		g->grid_y = s64(k->gridY);
		g->grid_z = s64(k->gridZ);
		g->block_x = s64(k->blockX);
		g->block_y = s64(k->blockY);
		g->block_z = s64(k->blockZ);
		g->registers = k->registersPerThread;
		g->static_shmem = s64(k->staticSharedMemory);
		g->dynamic_shmem = s64(k->dynamicSharedMemory);
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		FILL_MEMCPY(rec, (const CUpti_ActivityMemcpy6 *)(const void *)a);
		return 1;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		/* Peer copies between devices: recorded on the issuing device. */
		FILL_MEMCPY(rec, (const CUpti_ActivityMemcpyPtoP4 *)(const void *)a);
		return 1;
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)a;
		struct tbp_gpu_memset *g = &rec->u.gpu_memset;
		FILL_DEVICE_ACTIVITY(rec, g, m, TBP_K_GPU_MEMSET);
		g->bytes = m->bytes;
		g->value = m->value;
		g->mem_kind = map_mem_kind(m->memoryKind);
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)a;
		struct tbp_gpu_sync *g = &rec->u.gpu_sync;
		uint32_t device = context_device(s->contextId);
		rec->kind = TBP_K_GPU_SYNC;
		rec->tid = device;
		rec->ts = to_monotonic(s->start);
		g->end = to_monotonic(s->end);
		g->device = device;
		g->context = s->contextId;
		/* CUPTI_SYNCHRONIZATION_INVALID_VALUE (0xffffffff) where n/a. */
		g->stream = s->streamId;
		g->sync_kind = map_sync_kind(s->type);
		g->event = s->cudaEventId;
		*cupti_corr = s->correlationId;
		return 1;
	}
	default:
		return 0;
	}
}

/* ------------------------------------------------------------ buffers
 * From a pool under the TBPROF_CUPTI_BUFFER_SIZE cap (cupti_buffers.c). */
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = tbp_cupti_buffer_get(size);
	*max_records = 0;
}

static void buffer_release(uint8_t *b)
{
	tbp_cupti_buffer_put(b);
}

static uint64_t lost_since_ts;

/* Dropped activity records -> a LOST record.  Under proc_lock. */
static void check_dropped(void)
{
	size_t dropped = 0;
	if (api.get_num_dropped(NULL, 0, &dropped) != CUPTI_SUCCESS || dropped == 0)
		return;
	struct tbp_record rec;
	memset(&rec, 0, sizeof rec);
	rec.kind = TBP_K_LOST;
	rec.stream_kind = TBP_STREAM_GPU;
	rec.tid = 0;
	rec.ts = tbp_now();
	rec.u.lost.count = dropped;
	rec.u.lost.source = TBP_LOST_CUPTI;
	rec.u.lost.since_ts = lost_since_ts;
	lost_since_ts = rec.ts;
	tbp_emit(&rec);
}

/* ------------------------------------------------------------ hold
 * GPU records wait in a min-heap by start time (then arrival order) until
 * HOLD_NS after they arrived, then are joined and written.  Under proc_lock. */
struct held {
	struct tbp_record rec;
	uint64_t arrived, seq;
	uint64_t joined;         /* join_corr when it arrived (the map slot may be reused by the time it goes out) */
	uint32_t cupti_corr;
};
static struct held *hold;
static size_t n_hold, cap_hold;
static uint64_t hold_seq;
static uint64_t unjoined;        /* GPU records written with corr 0 */
static uint64_t forced_out;      /* written before HOLD_NS because the heap was full */

static inline int held_before(const struct held *a, const struct held *b)
{
	return a->rec.ts != b->rec.ts ? a->rec.ts < b->rec.ts : a->seq < b->seq;
}

static void hold_write_first(void)
{
	struct held top = hold[0];
	/* pop: the last element sifts down from the root */
	struct held last = hold[--n_hold];
	size_t at = 0;
	for (;;) {
		size_t l = 2 * at + 1, r = l + 1, min = at;
		const struct held *mv = &last;
		if (l < n_hold && held_before(&hold[l], mv))
			min = l, mv = &hold[l];
		if (r < n_hold && held_before(&hold[r], mv))
			min = r;
		if (min == at)
			break;
		hold[at] = hold[min];
		at = min;
	}
	if (n_hold)
		hold[at] = last;

	uint64_t ours = join_corr(top.cupti_corr);
	if (!ours)
		ours = top.joined;
	unjoined += !ours;
	top.rec.u.gpu_kernel.corr = ours; /* corr is at the same place in every GPU kind */
	tbp_emit_patient(&top.rec);
}

static void hold_add(const struct tbp_record *rec, uint32_t cupti_corr, uint64_t now)
{
	if (n_hold == cap_hold) {
		size_t cap = cap_hold ? cap_hold * 2 : 1024;
		struct held *h = cap <= HOLD_MAX ? realloc(hold, cap * sizeof *h) : NULL;
		if (h) {
			hold = h;
			cap_hold = cap;
		} else {
			/* Full (or no memory): the earliest goes out now. */
			forced_out++;
			hold_write_first();
		}
	}
	size_t at = n_hold++;
	struct held e = { *rec, now, hold_seq++, join_corr(cupti_corr), cupti_corr };
	while (at) {
		size_t up = (at - 1) / 2;
		if (!held_before(&e, &hold[up]))
			break;
		hold[at] = hold[up];
		at = up;
	}
	hold[at] = e;
}

/* Writes what has waited HOLD_NS (everything when `all`). */
static void hold_release(int all)
{
	uint64_t now = tbp_now();
	while (n_hold && (all || hold[0].arrived + HOLD_NS <= now))
		hold_write_first();
}

/* One completed buffer: learn correlation pairs and API records, hold GPU
 * records (joined when written). */
static void process_buffer(uint8_t *buffer, size_t valid)
{
	CUpti_Activity *a = NULL;
	struct tbp_record rec;
	uint32_t cupti_corr;
	uint64_t now = tbp_now();

	while (api.get_next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
		if (a->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
			const CUpti_ActivityExternalCorrelation *e = (const void *)a;
			if (e->externalKind == EXTERNAL_KIND && e->externalId)
				pair_seen(e->correlationId, e->externalId);
			continue;
		}
		if (a->kind == CUPTI_ACTIVITY_KIND_RUNTIME || a->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
			api_record_seen((const CUpti_ActivityAPI *)(const void *)a);
			continue;
		}
		if (convert(a, &rec, &cupti_corr))
			hold_add(&rec, cupti_corr, now);
	}
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	(void)ctx; (void)stream_id; (void)size;
	pthread_mutex_lock(&proc_lock);
	/* After stop (or when another tool's records reach us) drop silently. */
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE && buffer) {
		process_buffer(buffer, valid);
		hold_release(0);
		check_dropped();
	}
	pthread_mutex_unlock(&proc_lock);
	buffer_release(buffer);
}

/* ------------------------------------------------------------ clock */

static uint64_t CUPTIAPI monotonic_timestamp(void)
{
	return tbp_now();
}

/* Best (narrowest) of CALIBRATION_ROUNDS brackets m0 <= gpu <= m1. */
static int calibrate(int64_t *offset, uint64_t *uncertainty)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < CALIBRATION_ROUNDS; i++) {
		uint64_t g = 0;
		uint64_t m0 = tbp_now();
		CUptiResult r = api.get_timestamp(&g);
		uint64_t m1 = tbp_now();
		if (r != CUPTI_SUCCESS)
			return -1;
		uint64_t width = m1 - m0;
		if (width < best) {
			best = width;
			*offset = (int64_t)(m0 + width / 2) - (int64_t)g;
			*uncertainty = (width + 1) / 2;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

#define LOOKUP(field, name, required)                                                  \
	do {                                                                           \
		*(void **)&api.field = dlsym(cupti_handle, name);                      \
		if (!api.field && (required)) {                                        \
			missing = name;                                                \
			goto missing_symbol;                                           \
		}                                                                      \
	} while (0)

static void fall_back(void)
{
	__atomic_store_n(&state, CS_FALLBACK, __ATOMIC_RELEASE);
	record_clock(TBP_CLOCK_HOOK_SIDE, 0, 0);
}

static void cupti_error(const char *what, CUptiResult r)
{
	char msg[512];
	snprintf(msg, sizeof msg, "API-only trace: CUPTI %s failed: %s (%d) [%.200s]", what,
		 result_string(r), (int)r, cupti_path);
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_ERROR, msg);
	/* Expected without a driver: stderr stays the program's own. */
	if (tbp_cfg.verbose)
		tbp_warn_once(&cupti_note_flag, "%s", msg);
	fall_back();
}

static void cupti_in_use(const char *what)
{
	char msg[512];
	snprintf(msg, sizeof msg,
		 "CUPTI is in use by another tool (%s: multiple subscribers not supported); "
		 "GPU times come from host hooks only", what);
	tbp_warn_once(&cupti_busy_flag, "%s", msg);
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_IN_USE, msg);
	fall_back();
}

/* Real CUPTI needs the CUDA driver: without one it fails every call, and
 * some versions (the 13.2 wheel) crash in their first call.  Asks the
 * runtime the process uses (cudaDriverGetVersion reports 0 when no driver
 * is installed; it does not initialize CUDA), else the driver API.
 * 1: certainly no driver; 0: a driver, or cannot tell. */
static int cuda_driver_missing(void)
{
	typedef int (*version_fn)(int *);
	version_fn runtime = (version_fn)dlsym(RTLD_DEFAULT, "cudaDriverGetVersion");
	version_fn driver = (version_fn)dlsym(RTLD_DEFAULT, "cuDriverGetVersion");
	int version = -1;
	if (runtime && runtime(&version) == 0)
		return version == 0;
	if (driver && driver(&version) == 0)
		return version == 0;
	return 0;
}

/* A libcupti that kills its caller in its first call (one from another CUDA stack than the driver it
 * finds: cupti_probe.c) is never called here; the trace says so, once. 1: API-only from now on. */
static int cupti_unusable(void)
{
	const char *crashed_in = NULL;
	int sig = 0;
	uint64_t t0 = tbp_now();
	enum tbp_cupti_probe verdict = tbp_cupti_probe(cupti_handle, &crashed_in, &sig);
	if (tbp_cfg.verbose)
		tbp_log("CUPTI probe (cuptiGetVersion in a copy of the process): %s in %.1f ms",
			verdict == TBP_PROBE_OK ? "returned" : verdict == TBP_PROBE_CRASHES ? "died" : "no answer",
			(double)(tbp_now() - t0) / 1e6);
	if (verdict != TBP_PROBE_CRASHES)
		return 0;
	char how[48] = "exited";
	if (sig)
		snprintf(how, sizeof how, "died of signal %d", sig);
	char msg[512];
	snprintf(msg, sizeof msg, "API-only trace: %.300s cannot work with this CUDA driver (a probe process %s in %s)",
		 cupti_path, how, crashed_in ? crashed_in : "its first call");
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_ERROR, msg);
	/* As for other CUPTI errors: the program's stderr stays its own unless asked. */
	if (tbp_cfg.verbose)
		tbp_warn_once(&cupti_note_flag, "%s", msg);
	fall_back();
	return 1;
}

static void CUPTIAPI probe_callback(void *userdata, CUpti_CallbackDomain domain,
				    CUpti_CallbackId cbid, const void *data)
{
	(void)userdata; (void)domain; (void)cbid; (void)data;
}

/* ------------------------------------------------------------ periodic flush */
static pthread_mutex_t flusher_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flusher_wake = PTHREAD_COND_INITIALIZER;
static int flusher_started;

static void *flusher_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "tbprof-cupti");
	for (;;) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)(FLUSH_PERIOD_NS % 1000000000ull);
		until.tv_sec += (time_t)(FLUSH_PERIOD_NS / 1000000000ull) + until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&flusher_lock);
		if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE)
			pthread_cond_timedwait(&flusher_wake, &flusher_lock, &until);
		pthread_mutex_unlock(&flusher_lock);
		if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != CS_ACTIVE)
			return NULL;
		/* Never wait for start, flush or stop: skip a round instead. */
		if (pthread_mutex_trylock(&ctl_lock) != 0)
			continue;
		int active = __atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE;
		if (active) {
			api.flush_all(0);
			/* Records whose hold is over go out even when no new
			 * buffer comes (a program gone quiet). */
			pthread_mutex_lock(&proc_lock);
			hold_release(0);
			pthread_mutex_unlock(&proc_lock);
		}
		pthread_mutex_unlock(&ctl_lock);
		if (!active)
			return NULL;
	}
}

/* Under ctl_lock, once active.  Signals stay with the program's threads. */
static void start_flusher(void)
{
	sigset_t all, old;
	pthread_t thread;
	pthread_attr_t attr;
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&thread, &attr, flusher_main, NULL) == 0)
		flusher_started = 1;
	else if (tbp_cfg.verbose)
		tbp_log("CUPTI: no periodic flush thread: GPU records may come later than the reorder hold");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

static void stop_flusher(void)
{
	if (!flusher_started)
		return;
	pthread_mutex_lock(&flusher_lock);
	pthread_cond_broadcast(&flusher_wake);
	pthread_mutex_unlock(&flusher_lock);
}

/* The API calls whose records join GPU work to its call: launches (kernel,
 * cooperative, graph), copies, memsets and the syncs that make
 * SYNCHRONIZATION records.  Matched on the names cuptiGetCallbackName gives
 * (with or without a version suffix); everything else PyTorch calls per op
 * (cudaGetDevice, cudaStreamIsCapturing, ...) makes no record, which is most
 * of what API records cost.  Indexed by the domain minus 1. */
static const char *const api_record_prefixes[2][11] = {
	{ "cudaLaunch", "__cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset", "cudaDeviceSynchronize",
	  "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
	  "cudaThreadSynchronize", NULL },
	{ "cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset", "cuCtxSynchronize",
	  "cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent", NULL, NULL, NULL },
};

static int api_record_wanted(unsigned domain_index, const char *name)
{
	for (const char *const *p = api_record_prefixes[domain_index]; *p; p++)
		if (strncmp(name, *p, strlen(*p)) == 0)
			return 1;
	return 0;
}

/* Turns API records on for the calls above, one callback id at a time
 * (cuptiActivityEnableRuntimeApi / DriverApi, CUDA 12+); where CUPTI cannot,
 * for every call (the RUNTIME and DRIVER kinds: each call then costs a
 * record).  0, or -1 when another tool holds CUPTI (cupti_in_use said so). */
static int enable_api_records(void)
{
	static const struct {
		CUpti_CallbackDomain domain;
		CUpti_ActivityKind kind;
		uint32_t n_ids; /* callback ids to try: the header's, and room for newer ones */
	} domains[2] = {
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_SIZE + 256 },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_SIZE + 256 },
	};
	for (unsigned d = 0; d < 2; d++) {
		CUptiResult (*enable_one)(CUpti_CallbackId, uint8_t) =
			d == 0 ? api.enable_runtime_api : api.enable_driver_api;
		unsigned n = 0;
		CUptiResult r = CUPTI_ERROR_NOT_SUPPORTED;
		if (enable_one && api.get_callback_name) {
			for (uint32_t cbid = 1; cbid < domains[d].n_ids; cbid++) {
				const char *name = NULL;
				if (api.get_callback_name(domains[d].domain, cbid, &name) != CUPTI_SUCCESS ||
				    !name || !api_record_wanted(d, name))
					continue;
				r = enable_one(cbid, 1);
				if (r != CUPTI_SUCCESS)
					break;
				if (n_enabled_api_ids[d] < API_IDS_MAX)
					enabled_api_ids[d][n_enabled_api_ids[d]++] = (uint16_t)cbid;
				n++;
			}
		}
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			cupti_in_use(d == 0 ? "cuptiActivityEnableRuntimeApi" : "cuptiActivityEnableDriverApi");
			return -1;
		}
		if (n && r == CUPTI_SUCCESS)
			continue;
		/* Per-id control missing or refused: the whole kind (every call's record). */
		for (unsigned i = 0; i < n_enabled_api_ids[d]; i++)
			enable_one(enabled_api_ids[d][i], 0);
		n_enabled_api_ids[d] = 0;
		r = api.activity_enable(domains[d].kind);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			cupti_in_use("cuptiActivityEnable");
			return -1;
		}
		if (r == CUPTI_SUCCESS)
			enabled_kinds[n_enabled_kinds++] = domains[d].kind;
		else if (tbp_cfg.verbose)
			tbp_log("CUPTI API records of domain %d not enabled: %s", (int)domains[d].domain,
				result_string(r));
	}
	return 0;
}

static void start_locked(void)
{
	const char *missing = NULL;
	CUptiResult r;

	if (!tbp_cfg.cupti) {
		tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_NO_CUPTI,
			   "API-only trace: CUPTI disabled by TBPROF_CUPTI=0");
		fall_back();
		return;
	}

	if (cuda_driver_missing()) {
		tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_NO_CUPTI,
			   "API-only trace: no CUDA driver, so no GPU timeline");
		if (tbp_cfg.verbose)
			tbp_warn_once(&cupti_note_flag, "API-only trace: no CUDA driver");
		fall_back();
		return;
	}

	cupti_handle = load_cupti();
	if (!cupti_handle) {
		tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_NO_CUPTI, "API-only trace: libcupti not found");
		if (tbp_cfg.verbose)
			tbp_warn_once(&cupti_note_flag, "API-only trace: libcupti not found");
		fall_back();
		return;
	}

	LOOKUP(activity_enable, "cuptiActivityEnable", 1);
	LOOKUP(activity_disable, "cuptiActivityDisable", 1);
	LOOKUP(register_callbacks, "cuptiActivityRegisterCallbacks", 1);
	LOOKUP(get_next_record, "cuptiActivityGetNextRecord", 1);
	LOOKUP(flush_all, "cuptiActivityFlushAll", 1);
	LOOKUP(get_num_dropped, "cuptiActivityGetNumDroppedRecords", 1);
	LOOKUP(push_external, "cuptiActivityPushExternalCorrelationId", 1);
	LOOKUP(pop_external, "cuptiActivityPopExternalCorrelationId", 1);
	LOOKUP(register_timestamp_callback, "cuptiActivityRegisterTimestampCallback", 0);
	LOOKUP(get_timestamp, "cuptiGetTimestamp", 0);
	LOOKUP(get_result_string, "cuptiGetResultString", 0);
	LOOKUP(subscribe, "cuptiSubscribe", 0);
	LOOKUP(enable_runtime_api, "cuptiActivityEnableRuntimeApi", 0);
	LOOKUP(enable_driver_api, "cuptiActivityEnableDriverApi", 0);
	LOOKUP(get_callback_name, "cuptiGetCallbackName", 0);
	LOOKUP(unsubscribe, "cuptiUnsubscribe", 0);

	if (cupti_unusable())
		return;

	/* calloc: untouched pages cost nothing until ids reach them. */
	corr_map = calloc((size_t)1 << CORR_MAP_BITS, sizeof *corr_map);
	api_threads = calloc(API_THREADS, sizeof *api_threads);
	if (!corr_map || !api_threads) {
		free(corr_map);
		free(api_threads);
		corr_map = NULL;
		api_threads = NULL;
		tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_ERROR, "API-only trace: out of memory for CUPTI");
		fall_back();
		return;
	}

	/* Is another tool the CUPTI subscriber already?  Probe before touching
	 * anything that would change its state (timestamp source, buffer
	 * callbacks); release at once so a tool starting later can subscribe. */
	if (api.subscribe) {
		CUpti_SubscriberHandle sub = NULL;
		r = api.subscribe(&sub, probe_callback, NULL);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			cupti_in_use("cuptiSubscribe");
			return;
		}
		if (r != CUPTI_SUCCESS) {
			cupti_error("cuptiSubscribe", r);
			return;
		}
		if (api.unsubscribe)
			api.unsubscribe(sub);
	}

	/* Clock, before any kind is enabled. */
	uint64_t method = TBP_CLOCK_CUPTI_CALLBACK;
	int64_t offset = 0;
	uint64_t uncertainty = 0;
	r = api.register_timestamp_callback
		? api.register_timestamp_callback(monotonic_timestamp)
		: CUPTI_ERROR_NOT_SUPPORTED;
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		cupti_in_use("cuptiActivityRegisterTimestampCallback");
		return;
	}
	if (r != CUPTI_SUCCESS) {
		if (!api.get_timestamp || calibrate(&offset, &uncertainty) != 0) {
			cupti_error("clock calibration (no timestamp callback, no cuptiGetTimestamp)",
				    r);
			return;
		}
		method = TBP_CLOCK_BRACKETED;
	}
	clock_offset_ns = offset;

	r = api.register_callbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		cupti_in_use("cuptiActivityRegisterCallbacks");
		return;
	}
	if (r != CUPTI_SUCCESS) {
		cupti_error("cuptiActivityRegisterCallbacks", r);
		return;
	}

	/* API records (which EXTERNAL_CORRELATION records accompany), then the
	 * pairs, then GPU work: no GPU record precedes what joins it. */
	if (enable_api_records() != 0)
		return; /* in use: cupti_in_use said so */
	static const struct { CUpti_ActivityKind kind; int required; } kinds[] = {
		{ CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 1 },
		{ CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1 },
		{ CUPTI_ACTIVITY_KIND_MEMCPY, 1 },
		{ CUPTI_ACTIVITY_KIND_MEMCPY2, 0 },
		{ CUPTI_ACTIVITY_KIND_MEMSET, 1 },
		{ CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, 0 },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		r = api.activity_enable(kinds[i].kind);
		if (r == CUPTI_SUCCESS) {
			enabled_kinds[n_enabled_kinds++] = kinds[i].kind;
			continue;
		}
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			/* Leave what we enabled: disabling a kind could switch it
			 * off for the other tool too. */
			cupti_in_use("cuptiActivityEnable");
			return;
		}
		if (kinds[i].required) {
			cupti_error("cuptiActivityEnable", r);
			return;
		}
		if (tbp_cfg.verbose)
			tbp_log("CUPTI activity kind %d not enabled: %s", (int)kinds[i].kind,
				result_string(r));
	}

	record_clock(method, offset, uncertainty);
	lost_since_ts = tbp_now();
	__atomic_store_n(&state, CS_ACTIVE, __ATOMIC_RELEASE);
	__atomic_store_n(&pushing, 1, __ATOMIC_RELEASE);
	start_flusher();
	if (tbp_cfg.verbose)
		tbp_log("CUPTI active (%s), clock %s offset %lld ns +- %llu ns", cupti_path,
			method == TBP_CLOCK_CUPTI_CALLBACK ? "callback" : "bracketed",
			(long long)offset, (unsigned long long)uncertainty);
	return;

missing_symbol: {
		char msg[512];
		snprintf(msg, sizeof msg, "API-only trace: %.300s lacks %s", cupti_path,
			 missing);
		tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_ERROR, msg);
		tbp_warn_once(&cupti_note_flag, "%s", msg);
		fall_back();
	}
}

/* Nonzero while some thread is inside tbp_cupti_start (set before it takes
 * ctl_lock, so a thread that sees it can wait on that lock). */
static int starting;

/* A forked child cannot use CUDA: it neither pushes ids nor processes the
 * parent's buffers, and must not inherit a lock held by another thread. */
static void after_fork_child(void)
{
	__atomic_store_n(&pushing, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&state, CS_STOPPED, __ATOMIC_RELAXED);
	pthread_mutex_init(&ctl_lock, NULL);
	pthread_mutex_init(&proc_lock, NULL);
	pthread_mutex_init(&flusher_lock, NULL);
	pthread_cond_init(&flusher_wake, NULL);
	flusher_started = 0;
	tbp_cupti_buffers_fork_child();
}

void tbp_cupti_fork_child(void)
{
	/* A parent that never started CUPTI: the child may use CUDA itself. */
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) == CS_IDLE && !__atomic_load_n(&starting, __ATOMIC_RELAXED))
		return;
	after_fork_child();
}

/* Set while this thread is inside start: CUPTI may call CUDA functions we
 * hook, and their hooks may call tbp_cupti_start again. */
static __thread int in_start __attribute__((tls_model("initial-exec")));


void tbp_cupti_start(void)
{
	if (TBP_LIKELY(__atomic_load_n(&state, __ATOMIC_ACQUIRE) != CS_IDLE) || in_start)
		return;
	in_start = 1;
	__atomic_add_fetch(&starting, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&ctl_lock);
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_IDLE)
		start_locked();
	pthread_mutex_unlock(&ctl_lock);
	__atomic_sub_fetch(&starting, 1, __ATOMIC_ACQ_REL);
	in_start = 0;
}

/* A GPU call on another thread while CUPTI is being started waits for the
 * start, so the work it makes is not run before the activity kinds are on
 * (threads racing the first CUDA call would lose theirs).  Only CUDA's
 * first-use hook starts CUPTI: HIP calls come here too. */
static void wait_for_start(void)
{
	if (in_start || !__atomic_load_n(&starting, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&ctl_lock);
	pthread_mutex_unlock(&ctl_lock);
}

void tbp_cupti_flush(void)
{
	pthread_mutex_lock(&ctl_lock);
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE) {
		/* Delivers every completed buffer through buffer_completed on
		 * this thread; FORCED includes partly filled ones. */
		api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		pthread_mutex_lock(&proc_lock);
		/* Everything CUPTI had is delivered: nothing can come before it. */
		hold_release(1);
		check_dropped();
		pthread_mutex_unlock(&proc_lock);
	}
	pthread_mutex_unlock(&ctl_lock);
}

void tbp_cupti_stop(void)
{
	tbp_cupti_probe_reap();
	pthread_mutex_lock(&ctl_lock);
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE) {
		__atomic_store_n(&pushing, 0, __ATOMIC_RELEASE);
		api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		pthread_mutex_lock(&proc_lock);
		check_dropped();
		hold_release(1);
		if (tbp_cfg.verbose)
			tbp_log("CUPTI: %llu GPU records joined to no API call, %llu written before "
				"their hold ended (hold full)", (unsigned long long)unjoined,
				(unsigned long long)forced_out);
		__atomic_store_n(&state, CS_STOPPED, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&proc_lock);
		/* Stop collecting what nobody will read; libcupti stays loaded
		 * (its exit handlers may still run) and is not finalized. */
		for (unsigned i = n_enabled_kinds; i-- > 0;)
			api.activity_disable(enabled_kinds[i]);
		n_enabled_kinds = 0;
		for (unsigned i = 0; i < n_enabled_api_ids[0]; i++)
			api.enable_runtime_api(enabled_api_ids[0][i], 0);
		for (unsigned i = 0; i < n_enabled_api_ids[1]; i++)
			api.enable_driver_api(enabled_api_ids[1][i], 0);
		n_enabled_api_ids[0] = n_enabled_api_ids[1] = 0;
		stop_flusher();
	} else if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_IDLE) {
		__atomic_store_n(&state, CS_STOPPED, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ctl_lock);
}

/* ------------------------------------------------------------ hot path
 * A bit per nesting level says whether this level pushed, so a call that
 * began before CUPTI started (or after it stopped) never pops. */
static __thread uint32_t push_depth __attribute__((tls_model("initial-exec")));
static __thread uint32_t push_bits __attribute__((tls_model("initial-exec")));

void tbp_gpu_call_enter(uint64_t corr)
{
	uint32_t depth = push_depth++;
	/* acquire: pairs with the release in start_locked, so `api` is set */
	if (TBP_UNLIKELY(!__atomic_load_n(&pushing, __ATOMIC_ACQUIRE))) {
		if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != CS_IDLE)
			return;
		wait_for_start();
		if (!__atomic_load_n(&pushing, __ATOMIC_ACQUIRE))
			return;
	}
	if (depth >= 32)
		return;
	if (api.push_external(EXTERNAL_KIND, corr) == CUPTI_SUCCESS)
		push_bits |= 1u << depth;
}

void tbp_gpu_call_exit(uint64_t corr)
{
	(void)corr;
	if (TBP_UNLIKELY(push_depth == 0))
		return;
	uint32_t depth = --push_depth;
	if (depth < 32 && (push_bits & (1u << depth))) {
		push_bits &= ~(1u << depth);
		uint64_t last;
		api.pop_external(EXTERNAL_KIND, &last);
	}
}

#endif /* TBP_HAVE_CUPTI */
