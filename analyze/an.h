/*
 * tbanalyze analysis engine: loading (defs, time-ordered merge of streams),
 * passes (breakdown, gaps, bursts, scalar copies, ping-pong, syncs, memory,
 * host time by Python path) and reporters (text, JSON, HTML).
 *
 * One analysis is one streaming pass over a trace.  Memory grows with the
 * number of distinct strings/frames/call paths/streams/pointers, and with a
 * bounded reorder window, never with the number of events.
 */
#ifndef TBANALYZE_AN_H
#define TBANALYZE_AN_H

#include <stdint.h>
#include <stdio.h>

#include "tbprof/trace.h"

/* ------------------------------------------------------------ small maps */
/* Open-addressing u64 -> u64 map (linear probing, backward-shift delete).
 * Keys are stored +1 so that 0 marks an empty slot; UINT64_MAX is not a
 * storable key (never used as an id, pointer or correlation id). */
struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	size_t cap; /* power of two, or 0 */
	size_t n;
};
int u64map_put(struct u64map *m, uint64_t key, uint64_t val); /* 0 ok, -1 nomem */
uint64_t *u64map_get(const struct u64map *m, uint64_t key);   /* NULL when absent */
int u64map_del(struct u64map *m, uint64_t key);               /* 1 removed */
void u64map_free(struct u64map *m);

/* Growable array of fixed-size items. */
struct vec {
	void *data;
	size_t n, cap, item;
};
void *vec_push(struct vec *v); /* zeroed new slot or NULL */
/* Room for n items (v->cap >= n); -1 when out of memory.  A vector of
 * VEC_MAP_BYTES or more lives in a mapping of its own (an_mem_map): its
 * data is given back by vec_free only, never by free(). */
int vec_reserve(struct vec *v, size_t n);
#define VEC_MAP_BYTES ((size_t)1 << 20)
/* Asks the kernel to back a large malloc'd block not yet written (step
 * detection's items and after[]) with transparent huge pages; the blocks
 * the analyzer maps itself (an_mem_map: the tape, the merge's queues, large
 * vectors) are advised there.  For 1 M records these are ~140 MB, whose
 * 4 KiB page faults cost the kernel a third of the report's time.  Only
 * whole 2 MiB pages inside glibc's own mapping of the block (advice from
 * 4 MiB on); a no-op for small blocks, and where the kernel has no huge
 * pages or says no.  From 2 MiB on, when an_mem_unmap kept pages given
 * back, the block's mapping (or its first part) is replaced by them
 * (already written: the kernel need not zero them): its contents are then
 * undefined, so a block from malloc only, never from calloc. */
void an_mem_huge(void *p, size_t bytes);
/* A zeroed block of its own mapping (a fresh one), advised before
 * anything is written to it (a page written first keeps its 2 MiB range
 * on small pages: as malloc's header does for the first range of a block
 * it maps); NULL when out of memory.  Given back with an_mem_unmap and the
 * same size. */
void *an_mem_map(size_t bytes);
/* p (from an_mem_map, old bytes) grown to bytes in place or moved by the
 * kernel, its pages kept (no copy, no new faults); NULL (p unchanged) when
 * out of memory. */
void *an_mem_remap(void *p, size_t old, size_t bytes);
/* As an_mem_map, its contents undefined: pages given back earlier
 * (an_mem_unmap keeps large mappings for such requests), which the kernel
 * need not zero again.  Given back with an_mem_unmap as well. */
void *an_mem_get(size_t bytes);
void an_mem_unmap(void *p, size_t bytes);
/* The mappings an_mem_unmap kept given back to the kernel. */
void an_mem_trim(void);
/* The index of the item filed under key in idx, or a new zeroed item's
 * (*added set, when added is not NULL); SIZE_MAX when out of memory
 * (nothing added). */
size_t vec_keyed(struct vec *v, struct u64map *idx, uint64_t key, int *added);
#define VEC_AT(v, T, i) (&((T *)(v)->data)[i])
void vec_free(struct vec *v);

/* ------------------------------------------------------------ options */
struct an_step {
	uint64_t begin, end;
};
struct an_opts {
	uint64_t gap_ns;          /* idle gap threshold (--gap-us, 50) */
	unsigned burst_min;       /* kernels in a burst (--burst-min, 16) */
	uint64_t burst_kernel_ns; /* short kernel (--burst-kernel-us, 10) */
	uint64_t scalar_bytes;    /* scalar copy size (--scalar-bytes, 8: one element) */
	unsigned scalar_min;      /* scalar copies per site (--scalar-min, 3) */
	unsigned pingpong_min;    /* round trips per site (--pingpong-min, 3) */
	unsigned sync_min;        /* syncs per site (--sync-min, 10) */
	unsigned churn_min;       /* allocations per site (--churn-min, 50) */
	unsigned top;             /* findings shown in text (--top, 20) */
	int no_markers;           /* ignore runner markers (--no-markers) */
	int where_leaf;           /* place findings at the leaf frame (--where=leaf) */
	int keep_timeline;        /* keep the last GPU records for the HTML timeline (--html) */
	/* Set by an_run for its second pass over a trace without marks: the
	 * detected steps, [begin, end) each, in time order, marked as the
	 * runner would (the first one warm-up). */
	const struct an_step *synth_steps;
	size_t n_synth_steps;
	size_t synth_warmup;      /* of them, warm-up (0: the first) */
	/* --steps nvtx:NAME: the steps are the NVTX ranges named NAME (even in a trace with marks) */
	const char *steps_nvtx;
};
void an_opts_default(struct an_opts *o);
/* Parses one analysis option at argv[*i] (advancing *i past its value):
 * 1 consumed, 0 not an analysis option, -1 bad value (message printed). */
int an_parse_opt(int argc, char **argv, int *i, struct an_opts *o);
extern const char an_opts_help[];

/* ------------------------------------------------------------ findings */
/* One value per row of an_kinds.def (AN_F_IDLE_GAP, AN_F_KERNEL_BURST, ...);
 * each kind's rules and writers are its descriptor (an_kind.h). */
enum an_finding_kind {
	AN_F_NONE = 0,
#define AN_FINDING_KIND(id, descriptor) AN_F_##id,
#include "an_kinds.def"
#undef AN_FINDING_KIND
	/* Internal: idle time of one (cause, call site), from every gap piece of
	 * any length; feeds the idle breakdown's top sites, never reported as a
	 * finding. */
	AN_F_IDLE_PART,
};
enum an_gap_cause {
	AN_CAUSE_NONE = 0,
	AN_CAUSE_SYNC,         /* host waited in a sync: pipeline drained */
	AN_CAUSE_PYTHON,       /* host busy in a Python function (a span) */
	AN_CAUSE_LAUNCH_BOUND, /* next launch issued late from Python */
	AN_CAUSE_HOST_OTHER,   /* host work outside Python */
	AN_CAUSE_NO_HOST,      /* no host activity recorded on the responsible thread */
	AN_CAUSE_QUEUED,       /* the next work was already queued: the GPU side waited */
	AN_CAUSE_ALLOC,        /* host inside a device memory allocation or free (cudaMalloc, cudaFree) */
	AN_CAUSE_N,
};
/* Where a gap piece lies: inside the window, or at its edges (before the
 * device's first GPU work, after its last). */
enum an_gap_edge {
	AN_EDGE_NONE = 0,
	AN_EDGE_LEADING = 1,
	AN_EDGE_TRAILING = 2,
};
const char *an_finding_name(int kind);
const char *an_cause_name(int cause);
/* A stretch this long with no GPU call before a late launch is the host's
 * CPU work (tensor ops on the CPU, numpy, Python in C code), not the
 * launch overhead of small ops (tens of us each in eager PyTorch). */
#define AN_CPU_STRETCH_NS 100000u

enum an_steps_source {
	AN_STEPS_NONE = 0,
	AN_STEPS_MARKS,    /* the runner's iteration marks */
	AN_STEPS_PROFILER, /* torch.profiler's ProfilerStep ranges (not recorded by this trace format yet) */
	AN_STEPS_DETECTED, /* the repeating calls of the training loop */
};
const char *an_steps_source_name(int source);
/* The call made once per detected step (doc/findings.md, "Steps"). */
enum an_step_unit { AN_UNIT_NONE = 0, AN_UNIT_OPTIMIZER, AN_UNIT_BACKWARD, AN_UNIT_FORWARD, AN_UNIT_GRAPH };
const char *an_step_unit_name(int unit);

/* Phases, so the report can keep to the runner's steady state. */
enum an_phase {
	AN_PH_OUTSIDE = 0, /* before/between marked iterations (or no markers) */
	AN_PH_WARMUP = 1,  /* in an iteration before WARMUP_END */
	AN_PH_STEADY = 2,  /* in an iteration after WARMUP_END (or none seen) */
};

struct an_finding {
	uint8_t kind, cause, phase;
	uint64_t callpath, native; /* call site */
	uint64_t count;            /* occurrences (kernels for bursts) */
	uint64_t total_ns;         /* time lost/spent */
	uint64_t groups;           /* bursts / gaps / round trips */
	uint64_t bytes;            /* copies: bytes moved */
	uint64_t flagged;          /* scalar: followed by sync; sync: item-like */
	uint64_t pageable;         /* scalar copies from pageable memory */
	uint64_t max_ns;           /* largest single occurrence */
	uint64_t other_callpath;   /* idle gap: launch that resumed the GPU */
	uint64_t device;
	uint64_t idle_ns;          /* burst: device idle inside its bursts (union of their spans);
	                            * sync hotspot: device idle after its syncs returned, until the host's
	                            * next work (an_pass_gaps.c, gap_after_sync) */
	uint64_t stake_ns;         /* time at stake, what the findings are sorted by: total_ns, and for a
	                            * sync hotspot its idle_ns too (set by the findings pass) */
	/* idle gap: */
	uint8_t edge;                      /* enum an_gap_edge */
	uint64_t cause_ns[AN_CAUSE_N];     /* the gaps' idle split by what the host did */
	uint64_t context_callpath;         /* innermost span of another thread around the gap
	                                    * (the waiting caller, e.g. backward()) */
	/* alloc churn: */
	uint64_t frees_pending;            /* allocations of this site freed, not yet re-allocated */
	uint64_t cycles;                   /* allocations after a free of this site's memory */
	uint64_t iters_allocating;         /* marked iterations with an allocation here (scalar copies: a copy) */
	uint64_t last_iter;                /* iteration number of the latest one + 1 */
	uint64_t leaf_callpath;            /* the call path as recorded, when placed at a user frame */
	uint64_t kernel_name;              /* idle gap: a kernel that ended one of the gaps (string id) */
	int context_backward;              /* idle gap: the context is inside a backward() */
	uint64_t site_ns;                  /* idle gap: of the gaps' time, what is at the finding's site */
	uint64_t copy_ns;                  /* idle gap: of site_ns, the host inside a copy call there */
	uint8_t copy_bits;                 /* idle gap: those copies' an_copy_bits(), or-ed */
	uint64_t no_call_ns;                   /* idle gap: of site_ns, the host between GPU calls in stretches
	                                    * of AN_CPU_STRETCH_NS or more (CPU work, not launching) */
	uint8_t alloc_bits;                /* idle gap: allocator calls the host was inside at the site
	                                    * (AN_ALLOC_MALLOC, AN_ALLOC_FREE), or-ed */
	uint64_t backward_wait_ns;         /* idle gap: of site_ns, the thread itself waiting inside its
	                                    * backward() (autograd's engine working in C++) */
	uint64_t engine_gaps;              /* idle gap: gaps ended by a launch of autograd's engine (a
	                                    * thread with no Python of its own, or the path the tracer lends
	                                    * it) while another thread waited in backward() */
	uint64_t engine_ns;                /* idle gap: their idle time */
	uint64_t engine_kernel;            /* idle gap: a kernel that ended one of those (string id) */
	uint32_t engine_tid;               /* idle gap: the engine's thread that launched it */
	uint32_t launch_tid;               /* idle gap: the thread that launched the work ending the longest
	                                    * gap (other_callpath and kernel_name are that gap's too) */
	int has_launch_tid;
	int longest_engine;                /* idle gap: that launch was autograd's engine's */
	uint32_t context_tid;              /* idle gap: the thread of the context span */
	int harness;                       /* placed in the runner's own code */
	int backward_burst;                /* kernel burst: launched by autograd for a backward() called at its site */
	uint64_t site_count;               /* kernel burst: the kernels at its line (callpath); count is its loop's */
};

/* A copy call's direction and host memory, for idle gaps spent inside one:
 * bit (copy_kind - 1) for H2D, D2H, D2D; AN_COPY_PAGEABLE when the host
 * side is pageable memory. */
enum { AN_COPY_H2D = 1, AN_COPY_D2H = 2, AN_COPY_D2D = 4, AN_COPY_OTHER = 8, AN_COPY_PAGEABLE = 16 };
/* An allocator call an idle gap was spent inside. */
enum { AN_ALLOC_MALLOC = 1, AN_ALLOC_FREE = 2 };
static inline uint8_t an_copy_bits(uint64_t copy_kind, uint64_t flags)
{
	uint8_t b = copy_kind == TBP_COPY_H2D ? AN_COPY_H2D : copy_kind == TBP_COPY_D2H ? AN_COPY_D2H
		: copy_kind == TBP_COPY_D2D ? AN_COPY_D2D : AN_COPY_OTHER;
	return (uint8_t)(b | (flags & TBP_COPYF_PAGEABLE ? AN_COPY_PAGEABLE : 0));
}

/* Window-wide idle time by cause, summed over devices (an_pass_finish). */
struct an_idle_breakdown {
	uint64_t idle_ns;                /* = breakdown's gpu_idle_ns */
	uint64_t by_cause[AN_CAUSE_N];   /* gap pieces of every length, edges included */
	uint64_t short_ns;               /* of which in gaps under the threshold */
	uint64_t leading_ns, trailing_ns;/* of which before the first / after the last GPU work */
	uint64_t harness_ns;             /* between marked iterations: the runner's time */
	/* Of idle_ns, placed at a line (the idle parts with a call site, edges
	 * aside: the findings pass), and in parts with no call site (no host
	 * call recorded); the rest of what is not placed is the edges and
	 * harness_ns. */
	uint64_t placed_ns, no_line_ns;
	/* HTA's definition, whole trace, summed over streams: the gaps between
	 * consecutive GPU work of a stream; host_wait when the next work was
	 * launched after the previous one ended, else queued. */
	uint64_t hta_host_wait_ns, hta_queued_ns;
};

/* ------------------------------------------------------------ breakdown */
/* Union of intervals fed in start order, with snapshots at two marks. */
struct an_union {
	uint64_t start, end, closed;
	int open;
	uint64_t snap_begin, snap_end;
};
uint64_t an_union_total(const struct an_union *u);

enum { AN_CK_N = 6 }; /* copy kinds 0..5 (enum tbp_copy_kind) */

struct an_burst_run {
	uint64_t count, first_start, last_end, callpath, native;
	uint64_t parent; /* caller of the first kernel's leaf frame: the loop's context */
	/* The device's idle_total after the first and after the latest kernel:
	 * their difference is the device idle inside [first_start, last_end]
	 * (other streams' work counts as busy). */
	uint64_t dev_idle_first, dev_idle_last;
	/* The burst's first sites (call path, native stack) and their kernels:
	 * it is reported at the one with the most (the first between equals). */
	uint64_t site_cp[4], site_nat[4];
	uint64_t site_leaf[4]; /* each site's first kernel's call path as recorded (site_cp: its user's line) */
	uint32_t site_n[4];
	uint32_t nsites;
	/* The latest kernel's launching thread and the host syncs it had made
	 * by then: a sync between two launches ends the burst. */
	uint32_t last_tid, last_syncs;
};

#define AN_HIST_BINS 512
#define AN_MAX_MARKS 256

struct an_stream {
	uint64_t device, stream;
	uint64_t hist[AN_HIST_BINS]; /* busy ns per bin (HTML timeline) */
	struct an_union busy, dm;
	uint64_t kernels, copies, sets;
	struct an_burst_run run;
	uint64_t hta_gap[2]; /* whole trace: queued, host wait (HTA's idle split) */
};

/* A gap or burst drawn on the HTML timeline (the longest ones are kept). */
struct an_mark {
	uint64_t device, stream, start, end;
	int kind; /* AN_F_IDLE_GAP (stream unused) or AN_F_KERNEL_BURST */
};

struct an_device {
	uint64_t id;
	struct an_union busy, dm, kern, set, ck[AN_CK_N];
	uint64_t kernels, copies, sets;
	uint64_t gaps, gap_ns; /* idle gaps >= threshold in the window (the pieces inside it; set at the finish) */
	uint64_t gaps_by[3], gap_ns_by[3]; /* per phase: the same */
	uint64_t idle_by[3][AN_CAUSE_N]; /* per phase: idle of gap pieces by cause */
	uint64_t idle_short[3][2];       /* per phase: gaps under the threshold, [1] launched late */
	uint64_t short_acc[2];           /* the same since the last mark (filed by phase at marks) */
	uint64_t idle_edge[3][2];        /* per phase: leading, trailing edge */
	uint64_t edge_from;              /* start of the leading edge as measured */
	uint64_t idle_total;   /* every gap between busy spans so far (bursts) */
	uint64_t burst_idle_to;      /* bursts: idle_total up to which their idle is claimed (counted once) */
	uint64_t burst_idle_by[3];   /* per phase: the idle the bursts claim */
	/* memory */
	int64_t mem_cur;
	uint64_t mem_peak, allocs, frees, alloc_bytes;
	uint64_t name; /* string id from DEVICE record */
};

/* One step (a marked iteration, or a detected step marked by the second
 * pass) split the way the breakdown splits the window: GPU busy (kernels,
 * memsets), data movement, idle by the cause of its gap pieces; sums over
 * the devices with GPU work (an_pass_steptime.c). */
struct an_step_time {
	uint64_t begin, end;
	int phase;                       /* enum an_phase */
	int counted;                     /* counted as the window's (not warm-up), as the findings are */
	uint64_t busy_ns, dm_ns;         /* busy includes dm, as an_breakdown's */
	uint64_t idle_by[AN_CAUSE_N];    /* idle of the gap pieces inside it, by cause */
	unsigned devices;                /* devices with GPU work in the trace */
};

/* A GPU record kept for the HTML timeline (the last ones of the trace). */
enum { AN_TL_KERNEL = 1, AN_TL_COPY, AN_TL_SET };
struct an_tl_event {
	uint64_t start, end, name, callpath; /* name: kernel name's string id, 0 for copies/memsets */
	uint32_t device, stream;
	uint8_t kind;
	uint8_t copy_kind;
};
#define AN_TL_EVENTS 20000

struct an_breakdown {
	uint64_t window_ns, busy_ns, active_ns, dm_ns, idle_ns;
	uint64_t ck_ns[AN_CK_N];
	uint64_t kernel_ns, memset_ns;
};

struct an_kernel_stat {
	uint64_t name; /* string id */
	uint64_t count, total_ns, max_ns;
};

struct an_span_stat {
	uint64_t callpath, count, total_ns;
	uint64_t self_ns; /* minus the spans directly inside (same thread) */
	int backward_wait; /* a call of torch's backward() / autograd.grad(): its thread waits on autograd's */
	int import;        /* importlib's import of a module: the interpreter's work, not the program's */
	/* The same over the host window (analysis.host_win, when on): the
	 * calls that overlap it, their time inside it, and that time less the
	 * spans directly inside within it. */
	uint64_t win_count, win_total_ns, win_self_ns;
};

struct an_site_stat { /* GPU and host time per call site (for diff) */
	uint64_t callpath, native;
	uint64_t gpu_ns, api_ns, calls;
	uint64_t alloc_bytes; /* device memory allocated here */
	uint64_t first_iter, last_iter, iters; /* iterations (1-based) with a call from here */
	/* Idle in gaps under --gap-us that work launched here ended, queued
	 * before the GPU ran dry, by phase: the gaps pass files them as idle
	 * parts at its end (no lookup per gap). */
	uint64_t queued_ns[3], queued_n[3], queued_device;
};

/* A host thread's name (THREAD record). */
struct an_thread_name {
	uint32_t tid;
	uint64_t name; /* string id */
};

/* ------------------------------------------------------------ the analysis */
struct an_defs;
struct an_state;

struct analysis {
	const char *path;
	struct an_opts opts;
	struct an_defs *defs;
	struct an_state *st; /* pass-internal state */

	/* Trace facts. */
	struct tbp_header header;
	uint64_t events;     /* non-definition records */
	uint64_t records;    /* all records */
	uint64_t lost;       /* sum of LOST counts */
	uint64_t end_lost;   /* END record's lost */
	uint64_t lost_by_source[8]; /* LOST counts by source (TBP_LOST_*; 0: unknown source) */
	int truncated;
	uint64_t truncated_at;
	int has_end;
	int no_cupti_notice;
	int cupti_trouble_notice; /* NOTICE CUPTI_IN_USE or CUPTI_ERROR: CUPTI did not (all) work */
	uint64_t reorder_forced; /* records emitted because the reorder window was full */
	uint64_t late_records;   /* records older than already-processed time */
	uint64_t late_gpu_records;
	int window_second_pass;  /* marked window re-measured from GPU records */

	/* Window. */
	uint64_t first_ts, last_ts;
	int markers_used;        /* breakdown window from ITER markers */
	int warmup_seen;
	uint64_t iterations;     /* ITER_END seen in the window */
	uint64_t win_begin, win_end;

	/* Counts from API records. */
	/* n_launch counts successful launches only; n_errors every API call
	 * that returned an error (a failed launch is an error, not a kernel). */
	uint64_t n_launch, n_memcpy, n_memset, n_malloc, n_free, n_sync, n_api;
	uint64_t n_errors;
	/* Graph launches (counted in n_launch too), and the iterations that held one (graph_launch_iters,
	 * counted as steps are: st->in_iter). */
	uint64_t n_graph_launch, graph_launch_iters, graph_launch_last_iter;
	/* Every phase's: the first iteration with a graph launch (0: none), and how many had one. */
	uint64_t graph_launch_first_iter, graph_launch_all_iters, graph_launch_all_last;
	/* GPU records. */
	uint64_t n_gpu_kernel, n_gpu_memcpy, n_gpu_memset, n_gpu_sync;
	uint64_t unmatched_gpu;  /* GPU records with no API record by corr */
	uint64_t unmatched_kernels; /* of them, kernels */
	uint64_t join_notice;    /* string id of libtbprof's CUPTI_JOIN notice (how, and why not), 0 = none */
	uint64_t n_spans;
	uint64_t proc_cwd;       /* string id of the traced process's cwd (PROCESS), 0 = none */
	/* The traced process's first PROCESS record (rank facts: tbp_process_rank
	 * and friends give -1 for none); has_process 0 = none read yet. */
	int has_process;
	struct tbp_process process;

	/* Results (filled by an_finish). */
	struct vec devices;  /* struct an_device */
	struct vec streams;  /* struct an_stream */
	struct an_breakdown total;
	struct vec findings; /* struct an_finding, sorted biggest first, filtered */
	struct vec harness;  /* the same, placed in the runner's own code: its cost, not the model's */
	struct vec model_step; /* the same, placed in the runner's shared training step (runner/model.py
	                        * ...): the model's work, called from the runner's code */
	struct vec kernels;  /* struct an_kernel_stat, by total desc */
	struct vec spans;    /* struct an_span_stat, by total desc */
	struct vec sites;    /* struct an_site_stat */
	struct an_idle_breakdown idle;
	/* Training steps: from the runner's marks, else detected from the loop
	 * (a step function whose calls hold most launches, or the lines of an
	 * inline loop) and marked by an_run's second pass. */
	struct {
		int source;          /* enum an_steps_source */
		uint64_t count;      /* steps in the trace, warm-up included */
		uint64_t warmup;     /* of which set apart as warm-up */
		uint64_t median_ns;  /* median time per step after warm-up */
		uint64_t loop;       /* detected: call path at the line each step starts from */
		/* Detected only: why a trace without marks has no steps (the loop
		 * found covers too little of the work, none found ...), NULL
		 * when it has steps or detection did not run. */
		const char *none;
		uint64_t unit;       /* detected: where the calls made once per step are made, 0: none
		                      * (the outermost loop's iterations are the steps) */
		int unit_kind;       /* enum an_step_unit */
	} steps;
	struct vec step_ivs;         /* detected steps (struct an_step), first pass only */
	/* What the host tables cover: with steps (marks, or detected), the
	 * analysis window -- the counted steps, not the start-up, imports and
	 * set-up before them (nor the warm-up step) or what follows them; off:
	 * the whole trace. */
	struct {
		int on;
		uint64_t begin, end;
	} host_win;
	struct vec idle_parts; /* struct an_finding (AN_F_IDLE_PART), biggest first */
	struct vec thread_names; /* struct an_thread_name, from THREAD records */
	uint64_t mem_leak_bytes, mem_leak_count;

	/* HTML timeline: bins of hist_w ns from hist_origin, and marks. */
	int hist_on;
	uint64_t hist_origin, hist_w;
	struct an_mark marks[AN_MAX_MARKS];
	size_t n_marks;
	/* HTML: the steps' breakdown (struct an_step_time, time order) and the
	 * last AN_TL_EVENTS GPU records (a ring; tl_seen of them in all), kept
	 * when opts.keep_timeline. */
	struct vec step_times;
	struct an_tl_event *tl;
	uint64_t tl_seen;
	/* NVTX ranges (an_ranges.c); NULL when the trace has none */
	struct an_ranges *ranges;
};

/* Run the whole analysis.  Returns a TBA_EXIT_* status; on bad input prints
 * the one-line error itself.  Warnings (truncation) go to stderr. */
int an_run(struct analysis *a, const char *path, const struct an_opts *opts);
void an_free(struct analysis *a);

/* Per-device breakdown within the window (markers or first..last). */
void an_device_breakdown(const struct analysis *a, const struct an_device *d, struct an_breakdown *b);
void an_stream_breakdown(const struct analysis *a, const struct an_stream *s, uint64_t *busy, uint64_t *dm);
int an_has_gpu(const struct analysis *a);

/* ------------------------------------------------------------ definitions */
const char *an_string(const struct analysis *a, uint64_t id, size_t *len); /* NULL if unknown */
/* Python frames of a call path, leaf first; returns the count (<= max). */
struct an_frame {
	const char *file, *function;
	size_t file_len, function_len;
	uint64_t line;
	uint64_t file_id; /* the file name's string id (0: unknown) */
};
size_t an_callpath_frames(const struct analysis *a, uint64_t callpath, struct an_frame *out, size_t max);
/* Frames of the same function (file and name; the line aside), and a hash
 * that agrees with it. */
int an_frame_same_function(const struct an_frame *x, const struct an_frame *y);
uint64_t an_frame_function_hash(const struct an_frame *f);
/* The frame's function is `name` (qualified: "Module._apply"). */
int an_frame_function_is(const struct an_frame *f, const char *name);
/* A library frame in the file `rel` as displayed ("torch/_tensor.py"), or
 * under it when `rel` ends with '/' ("torch/optim/"). */
int an_frame_in_library_file(const struct analysis *a, const struct an_frame *f, const char *rel);
/* One key for the call paths that show the same lines (an_defs.c). */
uint64_t an_callpath_line_key(const struct analysis *a, uint64_t callpath);
static inline uint64_t an_hash_combine(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 31);
}
/* Parent node of a call path (the caller's frame), 0 when none or unknown. */
uint64_t an_callpath_parent(const struct analysis *a, uint64_t callpath);
/* The frame's code is a library's, not the user's: one rule for every pass
 * (steps, placement, harness, bursts, the names diff keys use).  A trace
 * that records where its interpreter keeps library code (PY_LIB: sysconfig's
 * and site's directories, the torch package's, frozen modules) is read by
 * where the file lies: under one of those directories, or the interpreter's
 * frozen modules (<frozen ...>) and code a library generated under a name
 * with angle brackets and more after them (<eval_with_key>.3).  Code
 * exec'd under a pseudo name wholly in angle brackets (<ipython-input-3-..>,
 * <string>, <cell 4>) is the user's, as is a notebook's cell file
 * (/tmp/ipykernel_PID/HASH.py: under no library directory).  An older trace
 * keeps the rule by words in the path: torch (an installed torch* package or
 * any directory named torch) and the standard library (lib/python3 outside
 * site-packages), and the same rule for bracketed names. */
int an_frame_is_library(const struct analysis *a, const struct an_frame *f);
/* The call path from the innermost frame of the user's code outwards: walking
 * out from the leaf, the first frame that is not a library's
 * (an_frame_is_library; callpath itself when its leaf is user code, or when
 * every frame is a library's). */
uint64_t an_user_callpath(const struct analysis *a, uint64_t callpath);
/* an_user_callpath's memo of its answers, slot callpath % AN_CP_MEMO, key 0
 * empty (cleared in place when a PY_LIB record changes the answers): a pass
 * that asks for every kernel reads a hit inline, without the call (NULL: no
 * definitions).  It stays at one address for the analysis's life. */
struct an_cp_memo { uint64_t cp, val; };
#define AN_CP_MEMO 1024
const struct an_cp_memo *an_user_callpath_memo(const struct analysis *a);
/* The runner's own files (run.py beside runner/, runner/NAME.py): the harness. */
int an_callpath_is_harness(const struct analysis *a, uint64_t callpath);
/* The runner's shared model code (runner/model.py, hf.py, vision.py): the
 * training step of zoo models without their own, model families. */
int an_callpath_is_model_step(const struct analysis *a, uint64_t callpath);
struct an_native_frame {
	uint64_t pc, offset;
	const char *module;
	size_t module_len;
};
size_t an_native_frames(const struct analysis *a, uint64_t native, struct an_native_frame *out, size_t max);
/* A source file as a user wants to read it in a terminal: the tail of the
 * same bytes (no copy) -- relative to site-packages/dist-packages, to the
 * traced program's cwd or tbanalyze's, or to the Python stdlib directory;
 * else the whole path.  JSON keeps full paths. */
const char *an_display_path(const struct analysis *a, const char *file, size_t len, size_t *out_len);
/* "file:line function" of the leaf (display path), or the native leaf, or "(unknown)". */
void an_site_label(const struct analysis *a, uint64_t callpath, uint64_t native, char *buf, size_t len);
/* Stable text key of a call site (whole path), for diff across traces. */
void an_site_key(const struct analysis *a, uint64_t callpath, uint64_t native, char *buf, size_t len);
/* The same with each frame's file named by `name` (NULL: an_display_path;
 * the diff names one trace's renamed files as the other's) and, when `line`
 * is set, its line written by it (the diff writes A's lines that moved in an
 * edit at B's line numbers: "80", or "84(A)" for a line B lacks). */
struct an_file_namer {
	const char *(*name)(const struct analysis *a, const struct an_frame *f, const void *ctx, size_t *len);
	const void *ctx;
	void (*line)(const struct analysis *a, const struct an_frame *f, const void *ctx, char *buf, size_t len);
};
void an_site_label_named(const struct analysis *a, uint64_t callpath, uint64_t native, const struct an_file_namer *name,
			 char *buf, size_t len);
void an_site_key_named(const struct analysis *a, uint64_t callpath, uint64_t native, const struct an_file_namer *name,
		       char *buf, size_t len);
const char *an_suggestion(const struct analysis *a, const struct an_finding *f);
int an_finding_in_copy(const struct an_finding *f);
/* A late-launch finding whose site time was mostly the host running for
 * long stretches (AN_CPU_STRETCH_NS) without any GPU call. */
int an_finding_cpu_bound(const struct an_finding *f);
const char *an_copy_label(uint8_t bits);
int an_finding_is_engine(const struct an_finding *f);
/* "the main thread" (the process's own id), "thread NAME (tid N)" or
 * "thread N", for the text report. */
const char *an_thread_label(const struct analysis *a, uint32_t tid, char *buf, size_t len);

/* ------------------------------------------------------------ loading */
/* Pass 1 of export: definitions only (no analysis), the earliest event time
 * and the process id.  Returns a TBA_EXIT_* status (errors printed). */
int an_load_defs(struct analysis *a, const char *path, uint64_t *first_ts, uint64_t *pid);
/* Open a trace (tr_open: one-line error, exit status on failure). */
int an_open(struct tbp_reader **r, const char *path);

/* ------------------------------------------------------------ reporters */
void an_report_text(const struct analysis *a, FILE *f);
int an_report_json(const struct analysis *a, FILE *f);
int an_report_html(const struct analysis *a, FILE *f);
void json_str(FILE *f, const char *s, size_t len);

/* The steady state's steps replay CUDA graphs: a graph launch in half of the window's iterations or
 * more; without steps, half of the launches or more are graph launches (the work is a replay; advice
 * to capture the step in a graph would be moot). */
static inline int an_steps_replay_graphs(const struct analysis *a)
{
	if (!a->iterations)
		return a->n_graph_launch && 2 * a->n_graph_launch >= a->n_launch;
	return a->graph_launch_iters && 2 * a->graph_launch_iters >= a->iterations;
}

#endif
