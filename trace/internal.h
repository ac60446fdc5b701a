/*
 * Private to the trace library: byte-level helpers shared by the writer and
 * the reader, and the header codec (also a fuzz entry point).  Nothing here
 * is part of the public contract in tbprof/trace.h.
 */
#ifndef TBPROF_TRACE_INTERNAL_H
#define TBPROF_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tbprof/trace.h"

#define TBP_HIDDEN_FN __attribute__((visibility("hidden")))

/* zstd skippable frame magics (0x184D2A50..5F are all skippable). */
#define TBP_MAGIC_HEADER_FRAME 0x184D2A5Bu
#define TBP_MAGIC_SEEK_FRAME 0x184D2A5Cu
#define TBP_MAGIC_SKIPPABLE_MASK 0xFFFFFFF0u
#define TBP_MAGIC_SKIPPABLE_BASE 0x184D2A50u
#define TBP_MAGIC_ZSTD 0xFD2FB528u

/* "TBPROF\0\n": the NUL and newline catch text-mode mangling. */
#define TBP_FILE_MAGIC "TBPROF\0\n"
#define TBP_FILE_MAGIC_LEN 8

/* Limits a reader enforces so hostile input cannot make it allocate or loop
 * without bound.  Kinds are stored in a u8; fields beyond TBP_MAX_FIELDS are
 * decoded (to keep delta state) but dropped. */
#define TBP_SCHEMA_MAX_KIND 255u
#define TBP_SCHEMA_MAX_FIELDS 64u
/* ts, the fields, and for blob kinds the lengths and the bytes. */
#define TBP_SCHEMA_MAX_COLUMNS (TBP_SCHEMA_MAX_FIELDS + 3u)
#define TBP_MAX_FRAME_CONTENT (256u << 20)   /* decompressed bytes per frame */
#define TBP_MAX_FRAME_COMPRESSED (512u << 20)
#define TBP_MAX_HEADER_FRAME (1u << 20)


/* Schema flags byte (per kind, in the header). */
#define TBP_SCHEMA_HAS_BLOB 0x01u
#define TBP_SCHEMA_END_FROM_TS 0x02u /* field 0 ("end") coded as end - ts */
#define TBP_SCHEMA_KNOWN_FLAGS 0x03u

struct tbp_schema_entry {
	uint8_t present;
	uint8_t nfields;
	uint8_t has_blob;
	uint8_t end_from_ts;
};
struct tbp_schema {
	struct tbp_schema_entry kind[TBP_SCHEMA_MAX_KIND + 1];
};

/* Parse the content of the header skippable frame (after the 8-byte
 * skippable-frame prefix).  Returns TBP_OK, TBP_ERR_NOT_TRACE (bad magic),
 * TBP_ERR_CHECKSUM, TBP_ERR_VERSION, or TBP_ERR_CORRUPT with *why set. */
int tbp_header_parse(const uint8_t *p, size_t n, struct tbp_header *hdr, struct tbp_schema *schema,
	const char **why) TBP_HIDDEN_FN;
/* Encode the header content for this library's schema; returns bytes
 * written (buffer must hold tbp_header_encoded_max()). */
size_t tbp_header_encode(uint8_t *out, uint32_t features) TBP_HIDDEN_FN;
size_t tbp_header_encoded_max(void) TBP_HIDDEN_FN;
/* This library's schema flags for a known kind (TBP_SCHEMA_*). */
unsigned tbp_kind_schema_flags(const struct tbp_kind_info *ki) TBP_HIDDEN_FN;
/* CRC-32 (IEEE) of the header content before its last 4 bytes. */
uint32_t tbp_crc32(const void *data, size_t len) TBP_HIDDEN_FN;

static inline void tbp_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}
static inline void tbp_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void tbp_put_le64(uint8_t *p, uint64_t v)
{
	tbp_put_le32(p, (uint32_t)v);
	tbp_put_le32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t tbp_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint16_t tbp_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint64_t tbp_get_le64(const uint8_t *p)
{
	return (uint64_t)tbp_get_le32(p) | (uint64_t)tbp_get_le32(p + 4) << 32;
}

/* LEB128 unsigned varint: at most 10 bytes for a u64. */
#define TBP_VARINT_MAX 10
static inline size_t tbp_put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}
/* Decode from [*pp, end).  Returns 0 on success, -1 on a varint that runs
 * past end or does not fit in 64 bits.  Padded (non-minimal) encodings are
 * accepted: the writer uses them for patchable counts. */
static inline int tbp_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p >= end)
			return -1;
		uint8_t b = *p++;
		if (shift == 63 && b > 1)
			return -1;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*out = v;
			return 0;
		}
	}
	return -1;
}
static inline uint64_t tbp_zigzag(uint64_t delta)
{
	return (delta << 1) ^ (uint64_t)((int64_t)delta >> 63);
}
static inline uint64_t tbp_unzigzag(uint64_t z)
{
	return (z >> 1) ^ (uint64_t)-(int64_t)(z & 1);
}


/* Format version 2 codes the kinds column, and each ts or field column
 * whose coding byte says so (TBP_COLUMN_RUNS), as runs of a value x: the
 * kind, or zigzag(delta) for ts and the fields.  An entry is the varint of x * 2 + more, a 65-bit number
 * (LEB128, at most 10 bytes, the last one carrying bits 63 and 64);
 * more = 1: the varint of (run length - 2) follows, and x repeats that
 * many records.  A column that does not change (a name, a
 * grid, a stream) or changes by a fixed step (a correlation id) is one
 * entry per chunk instead of one byte per record: fewer bytes for zstd to
 * read, the writer's main cost (doc/trace-format.md 3.1). */
#define TBP_RUN_ENTRY_MAX (TBP_VARINT_MAX + 5)
/* Version 2: the first byte of a ts or field column says how it is coded
 * for the chunk: a zigzag varint per record (as version 1), or runs. */
#define TBP_COLUMN_PLAIN 0u
#define TBP_COLUMN_RUNS 1u
/* Records per chunk in version 2: runs make a chunk's size no longer bound
 * its record count, so the count is bounded instead (the reader expands
 * the kinds column into a buffer of this many bytes at most). */
#define TBP_CHUNK_MAX_RECORDS 65536u
static inline size_t tbp_put_run(uint8_t *p, uint64_t z, uint32_t n)
{
	uint64_t more = n > 1;
	size_t len;
	if (z < (1ull << 63)) {
		len = tbp_put_varint(p, z << 1 | more);
	} else {
		/* Bits 0..62 of the 65-bit entry in nine bytes, bits 63..64
		 * (the top two bits of z) in the tenth. */
		uint64_t lo = z << 1 | more;
		for (len = 0; len < 9; len++, lo >>= 7)
			p[len] = (uint8_t)(lo | 0x80);
		p[len++] = (uint8_t)(z >> 62);
	}
	if (more)
		len += tbp_put_varint(p + len, (uint64_t)n - 2);
	return len;
}
/* One run entry from [*pp, end): 0 with its value *x and length *n (1..
 * TBP_CHUNK_MAX_RECORDS) set, -1 when malformed or cut short. */
static inline int tbp_get_run(const uint8_t **pp, const uint8_t *end, uint64_t *x, uint32_t *n)
{
	const uint8_t *p = *pp;
	uint64_t v = 0, top = 0;
	for (unsigned shift = 0;; shift += 7) {
		if (p >= end)
			return -1;
		uint8_t b = *p++;
		if (shift == 63) {
			if (b > 3)
				return -1;
			v |= (uint64_t)(b & 1) << 63;
			top = b >> 1;
			break;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	uint64_t len = 1;
	if (v & 1) {
		uint64_t extra;
		if (tbp_get_varint(&p, end, &extra) || extra > TBP_CHUNK_MAX_RECORDS - 2)
			return -1;
		len = extra + 2;
	}
	*x = v >> 1 | top << 63;
	*n = (uint32_t)len;
	*pp = p;
	return 0;
}

#endif
