/* tbanalyze diff --html: the page (an_diff_html.c), fed by what cmd_diff.c
 * computed. */
#ifndef TBPROF_AN_DIFF_HTML_H
#define TBPROF_AN_DIFF_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "an.h"
#include "an_stats.h"

/* One change as the diff lists it. */
struct an_diff_change {
	const char *type, *name; /* "kernel", "call_site", ...; its key */
	double a, b;             /* per step when both runs have steps */
	int regressed, over;
};
struct an_diff_page {
	const char *path[2];
	const struct analysis *an; /* the two runs */
	double threshold_pct;
	const struct an_step_cmp *cmp; /* NULL: no steps to compare */
	const char *no_steps;          /* why there is no test, or NULL */
	const char *verdict;           /* the verdict's words */
	int regression;
	const struct an_diff_change *ch;
	size_t n_ch;
};
int an_diff_html(FILE *f, const struct an_diff_page *p);

#endif
