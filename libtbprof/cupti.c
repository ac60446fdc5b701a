/*
 * GPU timeline from CUPTI's activity API, joined to our API records (doc/gpu.md).
 *
 * libcupti is never linked: it is found and dlopen()ed when CUDA is first seen in use
 * (tbp_cupti_start, cupti_lib.c), and every entry point is fetched with dlsym.  The CUPTI headers
 * are used for record layouts and constants only.  This file is the consumer's lifecycle (start,
 * flush, stop, fork, the periodic flush), the buffers CUPTI hands over and the conversion of its
 * records, and the hooks' per-call entry points; cupti_internal.h lists the other parts (enabling,
 * clock, join, hold).
 *
 * Threads: buffer callbacks run on CUPTI's thread (or on the thread calling cuptiActivityFlushAll:
 * ours every FLUSH_PERIOD_NS, see "periodic flush"); one mutex (proc_lock) serialises record
 * processing, the join and the hold.  Start, flush and stop are serialised by another.  The per-call
 * hot path touches only a flag, thread-locals and the CUPTI push/pop.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "cupti_support.h"
#include "tbp_config.h"

static int cupti_note_flag; /* tbp_warn_once flag */

#if !TBP_HAVE_CUPTI

/* Built without CUPTI headers: always an API-only trace. */
void tbp_cupti_start(void)
{
	static int started;
	if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
		return;
	tbp_notice(TBP_NOTE_INFO, TBP_NOTICE_NO_CUPTI,
		   "API-only trace: libcupti not found (built without CUPTI headers)");
	tbp_cupti_clock_record_hook_side();
	if (tbp_cfg.verbose)
		tbp_warn_once(&cupti_note_flag, "API-only trace: built without CUPTI support");
}
void tbp_cupti_flush(void) {}
void tbp_cupti_stop(void) {}
void tbp_gpu_call_enter(uint64_t corr) { (void)corr; }
void tbp_gpu_call_exit(uint64_t corr) { (void)corr; }
void tbp_gpu_driver_call_done(uint64_t corr, uint64_t start, uint64_t end, unsigned join_class)
{
	(void)corr; (void)start; (void)end; (void)join_class;
}

#else /* TBP_HAVE_CUPTI */

#include "cupti_internal.h"

#define NAME_CACHE_SIZE 4096        /* kernel name -> interned id */
#define CONTEXT_MAP_SIZE 64
/* CUPTI hands a buffer over when it is full, or on a flush: a quiet stream's half-full buffer
 * could stay behind for the whole run.  Every FLUSH_PERIOD_NS a thread of ours asks for the
 * completed records (cuptiActivityFlushAll(0)), so a completed record reaches us within about
 * that time, well inside the hold (cupti_hold.c). */
#define FLUSH_PERIOD_NS 250000000ull

static int cupti_busy_flag; /* tbp_warn_once flag */

struct tbp_cupti_entry_points tbp_cupti;
char tbp_cupti_path[4096];

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

const char *tbp_cupti_result_string(CUptiResult r)
{
	const char *s = NULL;
	if (tbp_cupti.get_result_string && tbp_cupti.get_result_string(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
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
		cxa_demangle = (demangle_fn)tbp_real_dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!cxa_demangle) {
			/* A C program or plain Python (ctypes) driving CUDA: the
			 * C++ runtime, privately (RTLD_LOCAL), for its demangler --
			 * as the launch hooks do, so both intern the same name. */
			void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
			if (cxx)
				cxa_demangle = (demangle_fn)tbp_real_dlsym(cxx, "__cxa_demangle");
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
		(rec)->ts = tbp_cupti_to_monotonic((m)->start);                           \
		(g)->end = tbp_cupti_to_monotonic((m)->end);                              \
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
		rec->ts = tbp_cupti_to_monotonic(s->start);
		g->end = tbp_cupti_to_monotonic(s->end);
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
	if (tbp_cupti.get_num_dropped(NULL, 0, &dropped) != CUPTI_SUCCESS || dropped == 0)
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

/* One completed buffer: pairs and API records to the join, GPU records to the hold. */
static void process_buffer(uint8_t *buffer, size_t valid)
{
	CUpti_Activity *a = NULL;
	struct tbp_record rec;
	uint32_t cupti_corr;
	uint64_t now = tbp_now();

	while (tbp_cupti.get_next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
		if (a->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
			const CUpti_ActivityExternalCorrelation *e = (const void *)a;
			if (e->externalKind == TBP_CUPTI_EXTERNAL_KIND && e->externalId)
				tbp_cupti_join_pair(e->correlationId, e->externalId);
			continue;
		}
		if (a->kind == CUPTI_ACTIVITY_KIND_RUNTIME || a->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
			tbp_cupti_join_api_record((const CUpti_ActivityAPI *)(const void *)a,
						  a->kind == CUPTI_ACTIVITY_KIND_DRIVER);
			continue;
		}
		if (convert(a, &rec, &cupti_corr))
			tbp_cupti_hold_add(&rec, cupti_corr, now);
	}
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	(void)ctx; (void)stream_id; (void)size;
	/* Whatever record comes first here -- a GPU record, CUPTI's LOST note, a notice of the join's --
	 * CUPTI's delivery thread gets the consumer's 1 MiB ring. */
	tbp_cupti_consumer_ring();
	pthread_mutex_lock(&proc_lock);
	/* After stop (or when another tool's records reach us) drop silently. */
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE && buffer) {
		process_buffer(buffer, valid);
		tbp_cupti_hold_release(0);
		check_dropped();
	}
	pthread_mutex_unlock(&proc_lock);
	buffer_release(buffer);
}

/* ------------------------------------------------------------ start failures */

static void fall_back(void)
{
	__atomic_store_n(&state, CS_FALLBACK, __ATOMIC_RELEASE);
	tbp_cupti_clock_record_hook_side();
}

void tbp_cupti_error(const char *what, CUptiResult r)
{
	char msg[512];
	snprintf(msg, sizeof msg, "API-only trace: CUPTI %s failed: %s (%d) [%.200s]", what,
		 tbp_cupti_result_string(r), (int)r, tbp_cupti_path);
	tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_ERROR, msg);
	/* Expected without a driver: stderr stays the program's own. */
	if (tbp_cfg.verbose)
		tbp_warn_once(&cupti_note_flag, "%s", msg);
	fall_back();
}

void tbp_cupti_in_use(const char *what)
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
	version_fn runtime = (version_fn)tbp_real_dlsym(RTLD_DEFAULT, "cudaDriverGetVersion");
	version_fn driver = (version_fn)tbp_real_dlsym(RTLD_DEFAULT, "cuDriverGetVersion");
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
		 tbp_cupti_path, how, crashed_in ? crashed_in : "its first call");
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
static int flush_wanted;           /* tbp_cupti_flush_soon asked (atomic) */

static void *flusher_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "tbprof-cupti");
	tbp_cupti_consumer_ring();   /* it records nothing of the program's */
	for (;;) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)(FLUSH_PERIOD_NS % 1000000000ull);
		until.tv_sec += (time_t)(FLUSH_PERIOD_NS / 1000000000ull) + until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&flusher_lock);
		if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE &&
		    !__atomic_exchange_n(&flush_wanted, 0, __ATOMIC_ACQ_REL))
			pthread_cond_timedwait(&flusher_wake, &flusher_lock, &until);
		pthread_mutex_unlock(&flusher_lock);
		if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != CS_ACTIVE)
			return NULL;
		/* Never wait for start, flush or stop: skip a round instead. */
		if (pthread_mutex_trylock(&ctl_lock) != 0)
			continue;
		int active = __atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE;
		if (active) {
			tbp_cupti.flush_all(0);
			/* Records whose hold is over go out even when no new
			 * buffer comes (a program gone quiet). */
			pthread_mutex_lock(&proc_lock);
			tbp_cupti_hold_release(0);
			pthread_mutex_unlock(&proc_lock);
		}
		pthread_mutex_unlock(&ctl_lock);
		if (!active)
			return NULL;
	}
}

void tbp_cupti_flush_soon(void)
{
	if (!flusher_started || __atomic_exchange_n(&flush_wanted, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&flusher_lock);
	pthread_cond_signal(&flusher_wake);
	pthread_mutex_unlock(&flusher_lock);
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

/* ------------------------------------------------------------ start */

#define LOOKUP(field, name, required)                                                  \
	do {                                                                           \
		*(void **)&tbp_cupti.field = tbp_real_dlsym(cupti_handle, name);                \
		if (!tbp_cupti.field && (required)) {                                  \
			missing = name;                                                \
			goto missing_symbol;                                           \
		}                                                                      \
	} while (0)

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

	cupti_handle = tbp_cupti_open(tbp_cfg.cupti_path, tbp_cupti_path, sizeof tbp_cupti_path);
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

	if (tbp_cupti_join_init() != 0) {
		tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_CUPTI_ERROR, "API-only trace: out of memory for CUPTI");
		fall_back();
		return;
	}

	/* Is another tool the CUPTI subscriber already?  Probe before touching
	 * anything that would change its state (timestamp source, buffer
	 * callbacks); release at once so a tool starting later can subscribe. */
	if (tbp_cupti.subscribe) {
		CUpti_SubscriberHandle sub = NULL;
		r = tbp_cupti.subscribe(&sub, probe_callback, NULL);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			tbp_cupti_in_use("cuptiSubscribe");
			return;
		}
		if (r != CUPTI_SUCCESS) {
			tbp_cupti_error("cuptiSubscribe", r);
			return;
		}
		if (tbp_cupti.unsubscribe)
			tbp_cupti.unsubscribe(sub);
	}

	/* Clock, before any kind is enabled. */
	if (tbp_cupti_clock_setup() != 0)
		return;

	r = tbp_cupti.register_callbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		tbp_cupti_in_use("cuptiActivityRegisterCallbacks");
		return;
	}
	if (r != CUPTI_SUCCESS) {
		tbp_cupti_error("cuptiActivityRegisterCallbacks", r);
		return;
	}

	if (tbp_cupti_enable() != 0)
		return;

	tbp_cupti_clock_record();
	lost_since_ts = tbp_now();
	__atomic_store_n(&state, CS_ACTIVE, __ATOMIC_RELEASE);
	__atomic_store_n(&pushing, 1, __ATOMIC_RELEASE);
	start_flusher();
	return;

missing_symbol: {
		char msg[512];
		snprintf(msg, sizeof msg, "API-only trace: %.300s lacks %s", tbp_cupti_path, missing);
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

/* In a child forked while CUPTI was started or starting, CUPTI is off for good (CUDA cannot be used
 * after fork) and its locks are reset. */
static void cupti_fork_child(void)
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
		tbp_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		pthread_mutex_lock(&proc_lock);
		/* Everything CUPTI had is delivered: nothing can come before it. */
		tbp_cupti_hold_release(1);
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
		tbp_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		pthread_mutex_lock(&proc_lock);
		check_dropped();
		tbp_cupti_hold_release(1);
		tbp_cupti_join_report();
		if (tbp_cfg.verbose && tbp_cupti_hold_forced_out())
			tbp_log("CUPTI: %llu GPU records written before their hold ended (hold full)",
				(unsigned long long)tbp_cupti_hold_forced_out());
		__atomic_store_n(&state, CS_STOPPED, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&proc_lock);
		/* Stop collecting what nobody will read; libcupti stays loaded
		 * (its exit handlers may still run) and is not finalized. */
		tbp_cupti_disable();
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
	if (tbp_cupti.push_external(TBP_CUPTI_EXTERNAL_KIND, corr) == CUPTI_SUCCESS)
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
		tbp_cupti.pop_external(TBP_CUPTI_EXTERNAL_KIND, &last);
	}
}

/* A driver call the hooks traced, outside any traced call: a library's static runtime may have
 * made it inside a runtime call of its own (cupti_join.c). */
void tbp_gpu_driver_call_done(uint64_t corr, uint64_t start, uint64_t end, unsigned join_class)
{
	if (__atomic_load_n(&pushing, __ATOMIC_ACQUIRE) && push_depth == 0)
		tbp_cupti_join_hooked_call(corr, start, end, join_class);
}

/* Lent to the lifecycle (lifecycle.c) at load: a registration made inside CUPTI's start, under its
 * lock, would come too late for a fork racing that start.  No lock is held across fork: the child
 * resets them (innermost rank). */
static const struct tbp_hook_ops cupti_ops = {
	.rank = TBP_RANK_LEAF,
	.fork_child = cupti_fork_child,
	.gpu_flush = tbp_cupti_flush,
	.gpu_stop = tbp_cupti_stop,
};

__attribute__((constructor(102))) static void cupti_register(void)
{
	tbp_register_hook_ops(&cupti_ops);
}

#endif /* TBP_HAVE_CUPTI */
