/*
 * Shared by every tbanalyze verb: opening a trace and reporting errors in
 * the one pinned format, the read loop's end/truncation handling, a string
 * table (interned id -> bytes) and JSON string output.
 *
 * Error lines (stderr), exit 2:   tbanalyze: FILE: offset N: REASON
 * Truncation warning (stderr):    tbanalyze: FILE: warning: trace truncated
 *                                 at offset N (last frame incomplete)
 */
#ifndef TBANALYZE_TR_COMMON_H
#define TBANALYZE_TR_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tbprof/trace.h"

/* Opens path.  On failure prints the error line, closes the reader, sets
 * *r = NULL and returns the exit status to use (TBA_EXIT_BAD_INPUT, or
 * TBA_EXIT_INTERNAL when out of memory).  Returns TBA_EXIT_OK on success. */
int tr_open(const char *path, struct tbp_reader **r);

/* One step of the read loop:
 *   1  a record in *rec
 *   0  end of the trace; a truncated trace printed its warning (exit 0;
 *      once per file per run, even if the file is read twice)
 *  -1  an error was printed; tr_exit_status() gives the exit status.
 * Typical use:
 *     int rc;
 *     while ((rc = tr_next(r, path, &rec)) > 0) ...;
 *     if (rc < 0) return tr_exit_status(r);                              */
int tr_next_end(struct tbp_reader *r, const char *path, int status);
/* Inline: the record loop of every verb pays one call per record, not two. */
static inline int tr_next(struct tbp_reader *r, const char *path, struct tbp_record *rec)
{
	int rc = tbp_reader_next(r, rec);
	return rc == TBP_OK ? 1 : tr_next_end(r, path, rc);
}
/* tr_next for a run of records (tbp_reader_next_many): 1 with *n >= 1. */
static inline int tr_next_many(struct tbp_reader *r, const char *path, struct tbp_record *recs, unsigned max,
			       unsigned *n)
{
	int rc = tbp_reader_next_many(r, recs, max, n);
	return rc == TBP_OK ? 1 : tr_next_end(r, path, rc);
}
/* Exit status for the reader's current error (TBA_EXIT_* from cmd.h). */
int tr_exit_status(const struct tbp_reader *r);
/* Prints "tbanalyze: FILE: offset N: REASON" for the reader's error. */
void tr_print_error(const struct tbp_reader *r, const char *path, int status);

/* ------------------------------------------------------------ strings
 * Interned strings (TBP_K_STRING records): id -> bytes.  Open addressing,
 * grows as needed; stored copies are NUL-terminated.  Ids are never 0. */
struct tr_strings {
	struct tr_string_slot *slots;
	size_t cap, n;
};
struct tr_string_slot {
	uint64_t id; /* 0 = empty */
	uint32_t len;
	char *bytes;
};
void tr_strings_init(struct tr_strings *s);
void tr_strings_free(struct tr_strings *s);
/* Adds or replaces.  0, or -1 out of memory. */
int tr_strings_put(struct tr_strings *s, uint64_t id, const void *bytes, size_t len);
/* Stores rec if it is a TBP_K_STRING record; returns 1 if stored, 0 if not
 * a string record, -1 out of memory. */
int tr_strings_note(struct tr_strings *s, const struct tbp_record *rec);
/* The bytes (NUL-terminated; *len without the NUL if len is non-NULL), or
 * NULL when the id is unknown. */
const char *tr_strings_get(const struct tr_strings *s, uint64_t id, size_t *len);
/* Never NULL: the string, "" for id 0, or "<string N>" when unknown
 * (formatted into a small rotating static buffer: use it before the next
 * ~8 calls). */
const char *tr_strings_show(const struct tr_strings *s, uint64_t id);

/* ------------------------------------------------------------ output */
/* Writes a JSON string literal (with quotes), escaping control bytes,
 * quotes, backslashes and invalid UTF-8 (as \u00XX of each byte). */
void tr_json_string(FILE *f, const char *s, size_t len);
/* Names of pinned enum values for display ("h2d", "buffer_full", ...);
 * never NULL ("?" when unknown). */
const char *tr_copy_kind_name(uint64_t v);
const char *tr_sync_kind_name(uint64_t v);
const char *tr_marker_kind_name(uint64_t v);
const char *tr_lost_source_name(uint64_t v);
const char *tr_clock_method_name(uint64_t v);
const char *tr_notice_level_name(uint64_t v);
const char *tr_stream_kind_name(uint64_t v);

#endif
