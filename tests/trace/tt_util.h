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
/* Writes the trace through tbp_writer to fd (taken over).  0 or -1. */
int tt_write_trace(const struct tt_trace *t, int fd);

/* Whole file into malloc'd memory (NULL on error; *size 0 for empty). */
uint8_t *tt_read_file(const char *path, size_t *size);
int tt_write_file(const char *path, const void *data, size_t size);

#endif
