/*
 * tbanalyze passes as plugins.  Every record reaches the passes once, in
 * time order, through the dispatcher (an_passes.c), which hands each class
 * of record to the hook of that class in each pass's struct an_pass_ops, as
 * perf hands events to a struct perf_tool's callbacks:
 *
 *   spans      (an_pass_spans.h)      host time by Python function
 *   steps      (an_pass_steps.h)      iterations (marks, detected steps)
 *   breakdown  (an_pass_breakdown.h)  unions of GPU work per device and stream,
 *                                     the marked window, the HTML timeline
 *   bursts     (an_pass_bursts.h)     runs of tiny kernels
 *   gaps       (an_pass_gaps.h)       idle gaps and what the host did in them
 *   copies     (an_pass_copies.h)     scalar copies, ping-pong, sync hotspots
 *   memory     (an_pass_memory.h)     allocations, churn, memory left at exit
 *   steptime   (an_pass_steptime.h)   time per step, the timeline's records
 *
 * Each pass owns its state (its ops' state_size: the dispatcher allocates it
 * zeroed, the pass reaches it by an_pass_state) and calls only the services
 * (an_services.h), never another pass: what one pass learns that another
 * needs is an event the services publish (AN_EVENTS).  Each pass's header
 * defines its ops as a static const, so that the dispatcher's calls of the
 * hooks on the hot path (every launch and kernel) are direct and inlined;
 * what they reach rarely (a gap, a burst closing) is out of line in the
 * pass's file.
 */
#ifndef TBANALYZE_AN_PASS_H
#define TBANALYZE_AN_PASS_H

#include "an_services.h"

/* The passes, in the order their hooks run (each hook, every record's and
 * every event's, and init, flush and finish: the steps' last marks are
 * emitted before the other passes close what is open, in the phase those
 * marks end).  X(name, ...) for each; the pass's ops are an_pass_<name>. */
#define AN_PASSES(X, ...)                                                                                              \
	X(spans, __VA_ARGS__)                                                                                          \
	X(steps, __VA_ARGS__)                                                                                          \
	X(breakdown, __VA_ARGS__)                                                                                      \
	X(bursts, __VA_ARGS__)                                                                                         \
	X(gaps, __VA_ARGS__)                                                                                           \
	X(copies, __VA_ARGS__)                                                                                         \
	X(memory, __VA_ARGS__)                                                                                         \
	X(steptime, __VA_ARGS__)

enum an_pass_id {
#define AN_PASS_ID(name, unused) AN_PASS_##name,
	AN_PASSES(AN_PASS_ID, 0)
#undef AN_PASS_ID
	AN_N_PASSES
};
_Static_assert(AN_N_PASSES <= AN_MAX_PASSES, "more passes than AN_MAX_PASSES");

/* A pass's own state (struct <name>_state). */
#define an_pass_state(a, name) ((struct name##_state *)(a)->st->pass[AN_PASS_##name])

/* ------------------------------------------------------------ records as the passes see them */

/* A host API call.  kind: the record's (a graph launch's: TBP_K_LAUNCH). */
struct an_call_ev {
	const struct tbp_record *r;
	unsigned kind;
	uint64_t ts, end, dur;   /* end clamped to ts */
	struct thread_st *th;    /* NULL: out of memory */
	struct an_site_stat *ss; /* its call site's statistics, NULL: none */
	int phase;               /* cur_phase() */
	int host_waits;          /* a sync in which the host waited (not cudaStreamWaitEvent) */
	int failed;              /* the runtime refused it (a poll's not-ready is no failure) */
	uint32_t item;           /* set by the steps pass: index + 1 of its step item, 0 = none */
	uint64_t api_ring;       /* set by the gaps pass: its ring's count of calls with this one, 0 = none */
};

/* A GPU record (kernel, copy, memset) on device d, stream str, with the
 * launch it was joined to (joined 0: a blank one). */
struct an_gpu_ev {
	const struct tbp_record *r;
	unsigned kind;
	uint64_t s, e; /* e clamped to s */
	struct an_device *d;
	struct an_stream *str;
	const struct corr_ent *api;
	int joined;
	uint64_t idle; /* the device's idle before it (s - the busy union's end), 0: none */
};

/* A Python span (its end clamped to its start); the spans pass, whose hook
 * runs first, fills stat. */
struct an_span_ev {
	uint32_t tid;
	uint64_t ts, end, callpath;
	const struct an_span_stat *stat; /* its function's statistics, NULL when none could be kept */
};

/* ------------------------------------------------------------ a pass */

/* A pass: its state's size and its hooks, each NULL when it has none.
 * init: 0 ok, -1 out of memory; flush: the end of the records, close what is
 * still open; finish: the results (0 ok, -1 out of memory); free. */
struct an_pass_ops {
	const char *name;
	size_t state_size;
	/* 1: the pass runs in a first analysis that only finds the steps
	 * (an_core.c run_steps): what step detection and the warm-up decision
	 * read.  The others run only in the analysis that reports. */
	int detect;
	int (*init)(struct analysis *a);
	/* Host calls, one hook per kind (on_api: any other call). */
	void (*on_launch)(struct analysis *a, struct an_call_ev *e);
	void (*on_memcpy)(struct analysis *a, struct an_call_ev *e);
	void (*on_memset)(struct analysis *a, struct an_call_ev *e);
	void (*on_sync)(struct analysis *a, struct an_call_ev *e);
	void (*on_malloc)(struct analysis *a, struct an_call_ev *e);
	void (*on_free)(struct analysis *a, struct an_call_ev *e);
	void (*on_api)(struct analysis *a, struct an_call_ev *e);
	/* GPU records: first the device's idle before the record, when it was
	 * idle (d->busy as it was: open 0, the device's first work), then the
	 * record by its kind. */
	void (*on_gpu_idle)(struct analysis *a, const struct an_gpu_ev *e, uint64_t idle);
	void (*on_kernel)(struct analysis *a, const struct an_gpu_ev *e);
	void (*on_gpu_memcpy)(struct analysis *a, const struct an_gpu_ev *e);
	void (*on_gpu_memset)(struct analysis *a, const struct an_gpu_ev *e);
	void (*on_span)(struct analysis *a, struct an_span_ev *e);
	void (*on_marker)(struct analysis *a, const struct tbp_record *r);
	/* The time st->due_ts came: before the first record at or after it. */
	void (*on_due)(struct analysis *a, uint64_t t);
	/* Events (AN_EVENTS, an_services.h). */
#define AN_EVENT_HOOK(name, params, args) void(*name) params;
	AN_EVENTS(AN_EVENT_HOOK)
#undef AN_EVENT_HOOK
	/* Once the records are read, before flush: a pass whose figures are
	 * known only at the end (the marked window) asks for the trace again
	 * by returning the record kinds it wants (bits 1 << TBP_K_*), gets
	 * each such record in the file's order, then reread_end.  One read
	 * serves every pass that asks (an_core.c). */
	uint64_t (*reread_begin)(struct analysis *a);
	void (*reread_record)(struct analysis *a, const struct tbp_record *r);
	void (*reread_end)(struct analysis *a);
	void (*flush)(struct analysis *a);
	int (*finish)(struct analysis *a);
	void (*free)(struct analysis *a);
};

#endif
