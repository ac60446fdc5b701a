/* NVTX ranges in the analysis (an_ranges.c): kept as read, measured after the read, reported. */
#ifndef TBANALYZE_AN_RANGES_H
#define TBANALYZE_AN_RANGES_H

#include <stdio.h>

#include "an.h"

/* A TBP_K_RANGE record, as the trace is read. */
void an_ranges_record(struct analysis *a, const struct tbp_record *r);
/* After the read: groups by name, GPU busy inside (reads the trace's GPU work again when there are
 * ranges).  0, or -1 out of memory. */
int an_ranges_finish(struct analysis *a);
void an_ranges_free(struct analysis *a);
/* The ranges named `name` (marks aside; one inside another of that name: the outer one), in time
 * order, as steps [begin, end) into out (struct an_step).  0, or -1 out of memory. */
int an_ranges_steps(const struct analysis *a, const char *name, struct vec *out);
/* The user's call path where the first range named `name` began (0: none). */
uint64_t an_ranges_first_callpath(const struct analysis *a, const char *name);
/* The report's section: nothing when the trace has no ranges. */
void an_ranges_text(const struct analysis *a, FILE *f);
void an_ranges_json(const struct analysis *a, FILE *f);

#endif
