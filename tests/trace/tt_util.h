/* Helpers shared by the trace tests, fuzz replay, generators and bench. */
#ifndef TT_UTIL_H
#define TT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tbprof/trace.h"

/* A synthetic trace in memory: records plus where the writer should cut
 * chunks and frames. */
struct tt_trace {
	struct tbp_record *recs;
	uint8_t *stream_kind;
	uint64_t *stream_id;
	uint8_t *flush_after;  /* 1: tbp_writer_flush() after this record */
	uint8_t *chunk_break;  /* 1: end the chunk before this record */
	size_t n;
	uint8_t *blobs;        /* arena for STRING blobs */
};

/* Deterministic PRNG (splitmix64). */
uint64_t tt_rand(uint64_t *state);

/* Random records of every kind the schema knows. */
void tt_random_trace(struct tt_trace *t, uint64_t seed, size_t n);
void tt_free_trace(struct tt_trace *t);
/* A plausible profile of a training loop: definitions (process, threads,
 * strings, Python frames and call paths, device, clock, notice), then per
 * iteration on each thread: markers, kernel launches (repeating names,
 * grids and call paths, correlation ids +1), some copies, allocations and
 * a sync, and the matching GPU activity; a LOST and an END record at the
 * end.  Frames end every `iters_per_frame` iterations.  Deterministic. */
struct tt_synth_opts {
	uint64_t seed;
	unsigned iterations;
	unsigned launches_per_iter;
	unsigned threads;
	unsigned iters_per_frame;
	int gpu;      /* GPU activity records */
	int end;      /* LOST + END records */
	unsigned jitter_ns; /* 0: launch gaps vary by 2 us, API durations by
			     * 0.5 us, kernel durations by 6 us (uniform);
			     * else all three vary by this much */
};
void tt_synth_trace(struct tt_trace *t, const struct tt_synth_opts *o);

/* Writes the trace through tbp_writer to fd (taken over).  0 or -1. */
/* Nonzero: tt_write_trace hands the writer each stretch between chunk
 * changes and flushes in one tbp_writer_add_batch call. */
extern int tt_batch_writes;
int tt_write_trace(const struct tt_trace *t, int fd);

/* The written trace as bytes in memory (via a temporary file). */
uint8_t *tt_trace_bytes(const struct tt_trace *t, size_t *size);

/* Frames of a trace file, as the zstd framing sees them. */
enum tt_frame_type { TT_FRAME_HEADER = 1, TT_FRAME_SEEK, TT_FRAME_SKIPPABLE, TT_FRAME_DATA };
struct tt_frame {
	size_t offset, size;
	int type;
};
/* Returns the number of frames (up to max), or -1 if the bytes are not a
 * complete sequence of frames. */
int tt_frames(const uint8_t *d, size_t n, struct tt_frame *out, size_t max);
/* Version-independent form of a trace for golden comparison: skippable
 * frames raw (except the seek table, which holds compressed offsets), data
 * frames decompressed.  NULL on error. */
uint8_t *tt_canonical(const uint8_t *d, size_t n, size_t *out_len);

/* Whole file into malloc'd memory (NULL on error; *size 0 for empty). */
uint8_t *tt_read_file(const char *path, size_t *size);
int tt_write_file(const char *path, const void *data, size_t size);

#endif
