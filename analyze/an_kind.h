/*
 * A finding kind's descriptor: everything that differs between kinds once
 * a pass has raised the finding (finding()).  The findings pass keeps and
 * places findings by it, the reporters (text, JSON, HTML) write them by it;
 * none of them switches on the kind.  an_kinds.def lists the kinds.
 */
#ifndef TBANALYZE_AN_KIND_H
#define TBANALYZE_AN_KIND_H

#include <stdio.h>

#include "an.h"

typedef void an_kind_writer(const struct analysis *a, FILE *f, const struct an_finding *x);

struct an_kind {
	const char *name; /* its name in every report form (JSON "kind") */
	/* Named with its cause: "idle_gap (sync)", JSON "cause". */
	unsigned named_with_cause : 1;
	/* Counted at the user's line while the passes run (finding_site): what
	 * its keep rule counts per site is counted per line however many of
	 * torch's wrappers the calls went through.  Unset, it is kept under the
	 * recorded call path and placed at the finish like every finding. */
	unsigned counted_at_user_line : 1;
	/* Its stake is its time and the GPU's idle after it (idle_ns): the
	 * drained queue a host wait leaves. */
	unsigned stake_adds_idle : 1;
	/* Merged by loop: its findings on the lines of one function under one
	 * caller are one, shown at the line with the most (count); those
	 * recorded at a call of backward() (the backward pass's) apart, and
	 * marked backward_burst. */
	unsigned merged_by_loop : 1;
	/* The launch that ended it (other_callpath, kernel_name, launch_tid) is
	 * the longest occurrence's, not the first's. */
	unsigned other_of_longest : 1;
	/* Kept when it passes this (thresholds from an_opts); NULL: count > 0. */
	int (*keep)(const struct analysis *a, const struct an_finding *x);

	/* text: after "NN. name" (and " (cause)"): ": its numbers" and the
	 * newline, then lines of what else explains its time. */
	an_kind_writer *text_head;
	/* text: lines under its call path (NULL: none). */
	an_kind_writer *text_tail;
	/* JSON: its own fields, ",\"key\":value", after the common ones and
	 * before "where" (NULL: none). */
	an_kind_writer *json_fields;
	/* JSON: its fields after "library", before "suggestion" (NULL: none). */
	an_kind_writer *json_tail;
	/* HTML: its numbers in <span class="num"> / <span class="cost">. */
	an_kind_writer *html_head;
	/* HTML: <p class="also"> paragraphs under the heading (NULL: none). */
	an_kind_writer *html_also;
	/* HTML: paragraphs under the advice (NULL: none). */
	an_kind_writer *html_tail;
	/* The advice, worded for this finding (may use a static buffer). */
	const char *(*suggestion)(const struct analysis *a, const struct an_finding *x);
};

/* The descriptor of kind `kind`; for AN_F_IDLE_PART and values outside
 * the table, one named "unknown" with no writers. */
const struct an_kind *an_kind_of(int kind);

#define AN_FINDING_KIND(id, descriptor) extern const struct an_kind descriptor;
#include "an_kinds.def"
#undef AN_FINDING_KIND

#endif
