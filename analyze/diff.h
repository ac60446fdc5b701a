/* tbanalyze diff: the computed comparison of two traces (cmd_diff.c), kept
 * apart from its printing so that every reporter (text, JSON, HTML) prints
 * the same rows in the same order, and the matching of one trace's Python
 * lines to the other's across an edit (diff_match.c). */
#ifndef TBANALYZE_DIFF_H
#define TBANALYZE_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "an.h"
#include "an_stats.h"

enum diff_item_type {
	DIFF_OVERALL = 0,
	DIFF_KERNEL,
	DIFF_CALL_SITE,
	DIFF_MEMORY,
	DIFF_PYTHON_PATH, /* CPU runs: host self time by Python path */
	DIFF_N_TYPES,
};
const char *diff_type_name(int type);

struct diff_item {
	char *key;
	int type;        /* enum diff_item_type */
	double a, b;     /* per step (both traces' steps counted) or per trace; memory: bytes */
	int over;        /* B worse than A by more than the threshold, on an item that matters */
	int regressed;   /* what the verdict rests on: with steps, the time per step alone */
	int shown;       /* a row of the explanation (text, HTML): changed, and memory only when a peak changed */
	/* Call sites: calls and the iterations they were made in, per trace
	 * (whole trace), for telling whether both count steps alike. */
	uint64_t calls_a, calls_b, iters_a, iters_b;
};

struct diff_items {
	struct diff_item *v;
	size_t n, cap;
};

/* Where the time went (with steps, on a GPU): the GPU's work or the host's. */
enum { DIFF_SIDE_NONE = 0, DIFF_SIDE_HOST, DIFF_SIDE_GPU, DIFF_SIDE_BOTH };
struct diff_expl {
	int side;               /* DIFF_SIDE_* (NONE: the time per step did not move past the threshold) */
	int gpu_unchanged;      /* the GPU's work per step unchanged */
	double busy_a, busy_b, idle_a, idle_b; /* per step */
	double kps_a, kps_b;    /* kernels per step (whole trace / steps) */
	int same_kernels;       /* the same kernels (by name) in both, bar those under 1 % of the time */
	char site[600];         /* the host site whose GPU idle per step grew most ("cause key"), "" none */
	char label[400];        /* its cause and leaf ("python at data.py:33 load_batch") */
	double site_ns;         /* its growth per step */
	char text[1024];
};
const char *diff_side_name(int side);

/* A reason the two traces' steps may not be alike (so per-step figures
 * compare unlike things). */
struct diff_step_warning {
	const char *kind; /* "source", "unit", "loop", "calls_per_step" */
	char text[512];
};
#define DIFF_MAX_STEP_WARNINGS 4

struct diff_renamed {
	const char *a, *b; /* file names as displayed */
	size_t a_len, b_len;
	uint64_t matched;  /* frames alike (function and line, or matched lines) */
};

struct diff_match; /* diff_match.c */

struct diff {
	const char *paths[2];
	double threshold, min_share;
	struct analysis an[2];
	int n_an;              /* of them, analysed (to free) */
	int cpu;               /* both CPU runs: Python paths by host self time */
	int steps;             /* both have steps: the time per step decides */
	int per_iteration;     /* figures per step (both traces' steps or marks counted) */
	struct diff_items items; /* sorted: what regressed, then by change of time per step, memory after */
	size_t n_shown;
	int regressions;
	int memory_shown;      /* a device's peak changed: memory rows are shown */
	const struct diff_item *tps; /* the time per step (in items), NULL without steps */
	struct diff_item head;       /* a copy of it */
	struct an_step_cmp cmp;
	char why[256];
	const char *no_steps;  /* without steps: why there is no test */
	struct diff_expl ex;
	struct diff_step_warning warn[DIFF_MAX_STEP_WARNINGS];
	size_t n_warn;
	struct diff_renamed *renamed;
	size_t n_renamed;
	/* Lines matched across an edit: A's sites keyed at B's lines. */
	uint64_t lines_matched, lines_moved, lines_a_only, lines_b_only;
	struct diff_match *match;
};

/* Analyses both traces and compares them.  A TBA_EXIT_* status (messages
 * printed); on any status diff_free must be called. */
int diff_compute(struct diff *d, const char *path_a, const char *path_b, const struct an_opts *opts,
		 double threshold, double min_share);
void diff_free(struct diff *d);
double diff_change_pct(const struct diff_item *x);

/* ------------------------------------------------------------ diff_match.c
 * The user's Python lines of A matched to B's: files by name, or a file
 * only one trace has to the other's holding the same functions (renamed);
 * then, within each function, A's lines to B's by an order-keeping
 * alignment of what each line calls (its callees, a function's def line
 * from the spans), so lines that moved (lines added or deleted above them)
 * keep their identity.  Site keys of A are written with B's file names and
 * line numbers where matched; an unmatched line of A that would read as
 * one of B's is marked "(A)". */
struct diff_match *diff_match_build(const struct analysis an[2]);
void diff_match_free(struct diff_match *m);
/* Site key and label of trace `side` (0: A, named as B where matched). */
void diff_match_key(const struct diff_match *m, int side, const struct analysis *x, uint64_t cp, uint64_t nat,
		    char *buf, size_t len);
void diff_match_label(const struct diff_match *m, int side, const struct analysis *x, uint64_t cp, uint64_t nat,
		      char *buf, size_t len);
/* The files paired (renamed), as an array the caller frees (names point
 * into m). */
size_t diff_match_renamed(const struct diff_match *m, struct diff_renamed **out);
void diff_match_counts(const struct diff_match *m, uint64_t *matched, uint64_t *moved, uint64_t *a_only,
		       uint64_t *b_only);

#endif
