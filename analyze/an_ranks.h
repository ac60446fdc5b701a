/*
 * tbanalyze cross-rank view: several traces of one distributed run (one per
 * rank, `tbanalyze DIR` or several files), each analysed on its own, then
 * compared step by step.
 *
 * Traces of one machine share CLOCK_MONOTONIC (every timestamp in a trace is
 * that clock's), so the k-th steady step of each rank can be lined up by
 * wall clock directly; ranks on several machines are put on one clock
 * through each process's wall clock at its start.  The straggler is the
 * rank that reaches the step's collectives last (or, without collectives,
 * takes longest over its steps); the others' time in those collectives
 * until it arrives is the time they lost waiting; the Python function where
 * the straggler spent the extra time is the one whose time (outside
 * collectives) exceeds the other ranks' most.
 */
#ifndef TBANALYZE_AN_RANKS_H
#define TBANALYZE_AN_RANKS_H

#include <stdint.h>
#include <stdio.h>

#include "an.h"

/* How a trace's rank was known. */
enum an_rank_source {
	AN_RANK_RECORDED = 0, /* the trace's process record (RANK from the launcher) */
	AN_RANK_FILE_NAME,    /* rank<N>.zst */
	AN_RANK_ORDER,        /* neither: position in name order */
};

/* What the run's collectives were seen as. */
enum an_sync_source {
	AN_SYNC_NONE = 0,
	AN_SYNC_C10D,         /* torch.distributed calls (Python spans) or NCCL kernels */
	AN_SYNC_DDP_BACKWARD, /* DDP's gradient all-reduce, waited for inside backward() (gloo on CPU) */
};

/* A span of time on one rank: a step, or one collective call. */
struct an_ivl {
	uint64_t begin, end;
};

/* A function as matched across ranks: the key of its user call path, and
 * where it was first seen (for its name). */
struct an_fn_key {
	char *key;
	size_t rank; /* index into an_ranks.r */
	uint64_t callpath;
};

/* A Python function's time outside collectives in the aligned steps. */
struct an_rank_fn {
	uint64_t fn;       /* index into an_ranks.fn_keys */
	uint64_t self_ns;  /* on the straggler */
	uint64_t others_ns;/* the median of the other ranks' */
};

struct an_rank {
	const char *path;
	size_t input;             /* position among the traces given */
	uint64_t rank;
	int rank_source;         /* enum an_rank_source */
	int has_rank;            /* the trace recorded its rank */
	uint64_t pid, world_size;/* world_size 0: not recorded */
	struct analysis a;       /* the rank's own analysis */
	struct vec steps;        /* struct an_ivl: steady steps, time order */
	uint64_t steps_callpath; /* steps found here (not by the analysis): the step function's calls */
	struct vec syncs;        /* struct an_ivl: collective calls (outermost), time order */
	struct vec step_work;    /* uint64_t per aligned step: its time outside the collectives */
	struct vec spans;        /* raw Python spans (internal) */
	struct u64map fn_of_cp;  /* call path -> function index + 1 (internal) */
	uint64_t *fn_self;       /* function index -> ns outside collectives in the aligned steps */
	size_t fn_cap;
	int ddp;                 /* DistributedDataParallel code ran */
	/* Results over the aligned steps. */
	size_t first_step;       /* index of its first aligned step in steps */
	int64_t clock_shift_ns;  /* added to its times (another machine's clock), 0 on one machine */
	uint64_t start_lag_ns;   /* mean: step start after the earliest rank's */
	uint64_t end_lag_ns;     /* mean: step end after the earliest rank's */
	uint64_t wait_ns;        /* time in collectives waiting for a later rank */
	uint64_t sync_ns;        /* time in collectives in all */
	uint64_t late_steps;     /* aligned steps in which it was the last to arrive */
	uint64_t late_ns;        /* summed over those: its arrival after the median of the others' */
	uint64_t caused_ns;      /* the others' waiting for it, in the steps it was last in */
	uint64_t wait_for_straggler_ns; /* of wait_ns, waiting for the straggler */
};

/* A trace left out of the comparison, and why. */
enum an_skip_reason {
	AN_SKIP_NOT_A_RANK = 1, /* no rank beside traces with one (torchrun's agent) */
	AN_SKIP_SAME_RANK,      /* another process of a rank (data loader worker), or another run's */
};
struct an_skipped {
	const char *path;
	int reason;    /* enum an_skip_reason */
	uint64_t rank; /* AN_SKIP_SAME_RANK: the rank */
};

struct an_ranks {
	struct an_rank *r;       /* by rank */
	size_t n;
	struct vec skipped;      /* struct an_skipped: traces left out */
	int sync_source;         /* enum an_sync_source */
	int wall_clock_aligned;  /* ranks of several machines: put on rank 0's clock by their wall clocks */
	uint64_t aligned_steps;
	uint64_t median_step_ns; /* median over the aligned steps of the slowest rank's step */
	uint64_t syncs_per_step; /* collective calls matched per aligned step (the fewest) */
	/* Functions across ranks: their keys (whole user call path), for matching. */
	struct vec fn_keys;      /* struct an_fn_key */
	struct u64map fn_index;  /* key hash -> index + 1 */
	/* The straggler finding; straggler < 0 when none. */
	long straggler;          /* index into r */
	uint64_t straggler_late_ns;   /* mean lateness per late step */
	uint64_t straggler_steps;     /* aligned steps in which it was last */
	uint64_t wait_ns;             /* the other ranks' time lost waiting for it (in every call it was last to), summed */
	struct an_rank_fn fns[5];     /* where it spent the extra time, biggest first */
	size_t n_fns;
};

/* Analyses every trace and compares them.  paths: trace files (a directory
 * is expanded by the caller with an_ranks_list_dir).  Returns a TBA_EXIT_*
 * status; errors are printed, naming the file. */
int an_ranks_run(struct an_ranks *R, char **paths, size_t n, const struct an_opts *opts);
void an_ranks_free(struct an_ranks *R);
/* The traces (*.zst) in a directory, sorted by name with numbers in order
 * (rank2 before rank10).  Returns a TBA_EXIT_* status (an empty directory is
 * bad input, named). */
int an_ranks_list_dir(const char *dir, char ***paths, size_t *n);
void an_ranks_free_list(char **paths, size_t n);
/* Rank number from a file name rank<N>.zst (any directory); -1 when not. */
long an_rank_from_name(const char *path);
/* Ranks on several machines (process records naming different hosts):
 * shift[i] = what to add to trace i's times to put them on trace 0's clock
 * (through each process's wall clock at start); returns 1.  On one machine
 * (or without the process facts) 0, every shift 0. */
int an_clock_shifts(const struct analysis *const *as, size_t n, int64_t *shift);
/* A function's display data: leaf frame of its user call path on rank r. */
int an_ranks_fn_frame(const struct an_ranks *R, uint64_t fn, struct an_frame *out, const struct an_rank **on);

void an_ranks_report_text(const struct an_ranks *R, FILE *f);
void an_ranks_print_waits(const struct an_ranks *R, FILE *f);
int an_ranks_report_json(const struct an_ranks *R, FILE *f);
/* The same as one self-contained HTML page (an_report_ranks_html.c). */
int an_ranks_report_html(const struct an_ranks *R, FILE *f);

#endif
