/* Internal seams between the loader (an_core.c, the record merge in
 * an_merge.c), the passes (an_passes.c and an_pass_*.c) and the definition
 * tables (an_defs.c).  The loader calls the passes and fills the tables;
 * the passes read the tables only. */
#ifndef TBANALYZE_AN_INTERNAL_H
#define TBANALYZE_AN_INTERNAL_H

#include "an.h"

/* Definition tables (an_defs.c), filled by the loader. */
struct an_defs *defs_new(void);
void defs_free(struct an_defs *d);
int defs_add(struct an_defs *d, const struct tbp_record *r); /* 0 ok, -1 nomem */

struct an_tape;
/* Reads the whole trace, definitions into the tables, timed records through
 * the merge into the passes in time order, the others straight to them.
 * Closes the reader.  Returns a TBA_EXIT_* status (errors printed).  tape:
 * NULL, or a (an_pass_detect_only) only finds the steps and what its passes
 * get is recorded on the tape (an_tape.h), up to where an_catch_up makes it
 * a full analysis: the tape cannot take the next entry, or
 * an_pass_detect_done says finding steps is of no more use.  A read that
 * ends still recording closes the tape (an_tape_complete). */
int an_read_trace(struct analysis *a, struct tbp_reader *r, const char *path, struct an_tape *tape);
/* The detecting analysis a made into a full one (of the same trace and
 * options) that has had every record the tape holds; the tape released.
 * An analysis's result is the same whichever record this happens at.
 * 0, or a TBA_EXIT_* status (printed). */
int an_catch_up(struct analysis *a, struct an_tape *t);
/* Definitions: the records the merge puts in the tables (defs_add). */
int an_is_def_record(unsigned kind);
/* Records of a thread's or a device's stream that carry a time (API calls,
 * GPU activity, markers): the ones the merge puts in order. */
int an_is_timed_record(unsigned kind);

/* The analysis's consistency checks (an_check.c): TBA_EXIT_OK, or the
 * failure printed and TBA_EXIT_INTERNAL. */
int an_check(const struct analysis *a);

int an_pass_init(struct analysis *a);
/* Right after an_pass_init: a first analysis that only finds the steps
 * (the passes whose ops say detect, no findings, no second read); its
 * results are a->steps, a->step_ivs and the sites' log (an_sites_replay),
 * nothing else. */
void an_pass_detect_only(struct analysis *a);
/* An analysis after one that looked for the steps and found none: it
 * neither keeps what detection reads nor the sites' log (the caller sets
 * a->steps' detection outcome as the first found it). */
void an_pass_steps_known(struct analysis *a);
/* A detecting analysis (an_pass_detect_only) that has had `handed`
 * records: 1 when finding steps is of no more use (an_core.c run_steps). */
int an_pass_detect_done(const struct analysis *a, uint64_t handed);
/* One record, in time order for API/GPU/marker records; definitions never
 * come here; facts (LOST, END, NOTICE, ...) and Python spans come as read. */
void an_pass_record(struct analysis *a, const struct tbp_record *r);
/* n records in time order, as n calls of an_pass_record after the late
 * check: a record older than *last_ts counts as late (a->late_records,
 * a->late_gpu_records), else *last_ts moves to it. */
void an_pass_block(struct analysis *a, const struct tbp_record *const *recs, unsigned n, uint64_t *last_ts);
int an_pass_finish(struct analysis *a);
/* The sites' iterations (first_iter, last_iter, iters) and the graph
 * launches' (graph_launch_first_iter, _all_iters, _all_last) as an analysis
 * of the same trace with steps[0..n) marked (opts.synth_steps) counts them,
 * from this analysis's log of its calls (a first analysis of a trace
 * without marks).  0 done; -1 the log cannot tell (not kept, cut short, or
 * records came out of time order): analyse again to count them. */
int an_sites_replay(struct analysis *a, const struct an_step *steps, size_t n);
void an_pass_free(struct analysis *a);
/* The passes' second read of the trace, once it is read (ops reread_*):
 * the record kinds some pass asks for (bits 1 << TBP_K_*; 0: no read), each
 * record of the read, and its end. */
uint64_t an_pass_reread_begin(struct analysis *a);
void an_pass_reread_record(struct analysis *a, const struct tbp_record *r);
void an_pass_reread_end(struct analysis *a);

#endif
