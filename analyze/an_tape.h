/* The record tape: what the merge (an_merge.c) hands to the passes during
 * one analysis, kept in memory in the order it was handed over, so that the
 * next analysis of the same trace replays it into fresh passes instead of
 * reading, decompressing, decoding and merging the file again (an_core.c
 * run_steps).  Bounded by TBANALYZE_TAPE_MB (doc/architecture.md): past it
 * the tape is dropped and the next analysis reads the file, as before. */
#ifndef TBANALYZE_AN_TAPE_H
#define TBANALYZE_AN_TAPE_H

#include "an.h"

struct an_tape;

/* A tape under the cap TBANALYZE_TAPE_MB sets (256 MiB when unset); NULL
 * when it is 0 (no tape) or out of memory. */
struct an_tape *an_tape_new(void);
void an_tape_free(struct an_tape *t);
/* Recording is still on: nothing went past the cap or failed.  Recording
 * stops at the first entry the tape cannot take (past the cap, out of
 * memory); the entries before it stay. */
int an_tape_ok(const struct an_tape *t);

/* A record of 8 fields or fewer whose fields fit in 32 bits (a launch, a
 * kernel) in 48 bytes, as the merge queues it: its head and time where
 * struct tbp_record has them, its first 8 fields in 32 bits, the first as
 * its distance from ts (the end of a call or GPU record).  nfields past 8:
 * not one (the merge's mark of a record queued whole). */
struct an_rec48 {
	uint8_t kind, stream_kind;
	uint16_t nfields;
	uint32_t tid;
	uint64_t ts;
	uint32_t f[8];
};

/* Recording (the merge, in the order it calls): a definition (defs_add) or
 * a record the passes get alone (an_pass_record), as read; a block of n
 * records (an_pass_block: recs) with the *last_ts it was handed, and the
 * same records as the merge queued them (ents: an_rec48 where one is). */
void an_tape_single(struct an_tape *t, const struct tbp_record *r);
void an_tape_block(struct an_tape *t, const struct an_rec48 *const *ents, const struct tbp_record *const *recs,
		   unsigned n, uint64_t last_ts);
/* The read ended cleanly: what it set on the analysis besides the passes'
 * work (records, events, reorder_forced, truncated, the header). */
void an_tape_close(struct an_tape *t, const struct analysis *a);
/* The tape holds a whole read (recorded to its end, under the cap). */
int an_tape_complete(const struct an_tape *t);

/* A fresh analysis (an_pass_init done) gets what the read gave the one
 * that recorded it: the same calls of defs_add, an_pass_record and
 * an_pass_block in the same order, and, when the tape is complete, the
 * read's figures.  A tape whose recording stopped, or that is still
 * recording, gives what it holds: every entry up to where it stopped.  0
 * done, -1 out of memory. */
int an_tape_replay(struct an_tape *t, struct analysis *a);
/* Its memory freed: not complete, not recording. */
void an_tape_release(struct an_tape *t);
/* Bytes it holds (figures, tests). */
size_t an_tape_bytes(const struct an_tape *t);

#endif
