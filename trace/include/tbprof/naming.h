/*
 * tbprof's trace file naming rules, in one place: libtbprof names its output with them, the
 * launcher classifies `-o OUT` and finds what a run wrote with them, tbanalyze reads a rank from a
 * file name with them (doc/config.md, "Output file naming").  Internal to the project (not part of
 * libtbprof-trace.so's API); no allocation, so libtbprof may call it anywhere.
 */
#ifndef TBPROF_NAMING_H
#define TBPROF_NAMING_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The output when none is named. */
#define TBP_NAME_DEFAULT "trace.zst"
/* What every trace file name ends with (a file name OUT must, for the launcher). */
#define TBP_NAME_EXT ".zst"

/* "dir/trace.zst" -> "dir/trace.<tag>.zst": the tag goes after the stem, which ends at the first
 * dot of the file name ("a.b.zst" -> "a.<tag>.b.zst"); a name without a dot gets ".<tag>" at its
 * end.  Per-pid names, captures, flight dumps, the agent's name and per-rank captures are all
 * this with their own tag. */
void tbp_name_tagged(char *dst, size_t cap, const char *base, const char *tag);

/* The name of a second process of the same run: "trace.<pid>.zst", or "trace.<pid>-<serial>.zst"
 * when serial > 0 (an earlier image of the same pid, before an exec, took the first). */
void tbp_name_per_pid(char *dst, size_t cap, const char *base, long pid, int serial);

/* The file a process writes in a directory OUT: "rank<N>.zst" for a rank (rank >= 0 and not an
 * agent), "agent.zst" for torchrun's agent, "trace.zst" otherwise. */
void tbp_name_in_dir(char *dst, size_t cap, long long rank, bool agent);

/* A capture's or a flight dump's file, from the process's output name: "trace.zst" ->
 * "trace.<word><n>.zst" (trace.capture1.zst, trace.flight2.zst), then, when several processes
 * answer one request, the process's tag after the stem ("trace.rank1.capture1.zst"), unless the
 * name already starts with it (a directory OUT's rank1.zst: "rank1.capture1.zst").  tag may be
 * NULL or "". */
void tbp_name_capture(char *dst, size_t cap, const char *base, const char *word, unsigned n, const char *tag);

/* OUT with "%p" replaced by pid and "%r" by the rank ("agent" for torchrun's agent, "norank"
 * outside a job); returns whether it held "%p". */
bool tbp_name_expand(char *dst, size_t cap, const char *pattern, long pid, long long rank, bool agent);

/* Does OUT name a directory for libtbprof: it ends in '/' or is an existing directory. */
bool tbp_name_is_dir(const char *out);

/* N for a file named rank<N>.zst (in any directory), else -1. */
long tbp_name_rank_of(const char *path);

/* Could `file` (a name in OUT's directory, without directory) have been given by libtbprof to a
 * process of a run whose (file, not directory) output is `out`: OUT's own name with %p and %r
 * matching anything, or a tagged one (<stem>.<anything><ext>: per-pid, agent, captures). */
bool tbp_name_is_output_of(const char *out, const char *file);

/* How the launcher takes `-o OUT`, decided before the program runs. */
enum tbp_out_kind {
	TBP_OUT_FILE,        /* a trace file: ends in .zst, or an existing device or FIFO (/dev/null) */
	TBP_OUT_DIR,         /* a directory: ends in '/', exists as one, or a new name without extension */
	TBP_OUT_NOT_A_TRACE, /* refused: an existing file, or a name with another extension (train.py) */
};
/* Classifies OUT; for TBP_OUT_NOT_A_TRACE, *why (when given) says why in a few words. */
enum tbp_out_kind tbp_name_classify(const char *out, const char **why);

#ifdef __cplusplus
}
#endif
#endif
