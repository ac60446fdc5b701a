/* What the reporters share (an_report.c, an_report_html.c, and the finding
 * kinds' writers, an_kinds.c, an_kind_*.c): the host tables' rows and the
 * labels the text and HTML forms both print. */
#ifndef TBPROF_AN_REPORT_INT_H
#define TBPROF_AN_REPORT_INT_H

#include <stdio.h>

#include "an.h"

#define MAX_FRAMES 64

/* ------------------------------------------------------------ host time, grouped */
struct host_row {
	struct an_frame fr;  /* leaf frame: the function (and line) of the row */
	uint64_t count, total_ns, self_ns; /* over the host window when there is one, else the trace */
	uint64_t trace_count, trace_total_ns, trace_self_ns; /* over the whole trace */
	int import;          /* importlib's import of a module */
	size_t paths;        /* call paths merged into this row */
	uint64_t callpath;   /* the first (largest) of them */
	int recursive;       /* leaf function also an ancestor: not inclusive */
	uint64_t outer;      /* merged paths that are not recursive: 0 means only
	                      * nested calls were recorded, inclusive unknown */
};

/* The trace outside the host window: its time before and after it, and
 * the imports' time outside it (importlib's calls, nested ones once). */
struct host_outside {
	uint64_t before_ns, after_ns, imports_ns;
};

size_t host_rows(const struct analysis *a, int by_line, struct host_row **out);
int host_outside(const struct analysis *a, struct host_outside *o);
void host_imports(const struct host_outside *o, char *buf, size_t len);
void host_win_label(const struct analysis *a, char *buf, size_t len);
size_t host_rows_shown(const struct analysis *a, size_t n);
const char *row_incl(const struct host_row *r, char *buf, size_t len);

unsigned active_devices(const struct analysis *a);
/* Why a trace with API records has no GPU timeline, as one sentence (no
 * final period) the text and HTML reports print. */
const char *no_gpu_timeline_why(const struct analysis *a);
size_t library_frames(const struct analysis *a, const struct an_finding *x, struct an_frame *fr, size_t max);
const char *edge_name(int edge);
const char *fmt_bytes(uint64_t b, char *buf, size_t len); /* "1.50 MiB" */
const char *between_label(const struct analysis *a);
/* A thread's name from its THREAD record, NULL when none. */
const char *an_tid_name(const struct analysis *a, uint32_t tid, size_t *len);
/* {"python":[frames],"native":[frames]} of a call site. */
void json_where(const struct analysis *a, FILE *f, uint64_t cp, uint64_t nat);

#endif
