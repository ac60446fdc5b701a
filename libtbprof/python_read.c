/*
 * Python module (python_module.h): reads of CPython objects without the GIL
 * (str objects, code objects) and the line tables of 3.10 and 3.11+.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "python_module.h"

/* --------------------------------------------------------- safe reads */

/* UTF-8 bytes of a str object, without the GIL: compact strings only (all
 * code object names are).  Writes to buf (cap bytes) when the text is not
 * already UTF-8 in memory.  Returns length or -1. */
ssize_t str_utf8(uintptr_t s, char *buf, size_t cap, const char **out)
{
	if (!ptr_ok(s))
		return -1;
	ssize_t length = *(const ssize_t *)(s + 16);
	uint32_t state = *(const uint32_t *)(s + 32);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || length < 0 || length > (1 << 20))
		return -1;
	if (ascii) {
		*out = (const char *)(s + L.ascii_size);
		return length;
	}
	ssize_t utf8_len = *(const ssize_t *)(s + L.ascii_size);
	const char *utf8 = *(const char *const *)(s + L.ascii_size + 8);
	if (utf8 && utf8_len >= 0 && utf8_len <= 4 * length) {
		*out = utf8;
		return utf8_len;
	}
	const unsigned char *data = (const unsigned char *)(s + L.compact_size);
	size_t n = 0;
	for (ssize_t i = 0; i < length; i++) {
		uint32_t c = kind == 1 ? data[i] : kind == 2 ? ((const uint16_t *)data)[i]
			: ((const uint32_t *)data)[i];
		if (n + 4 > cap)
			break;
		if (c < 0x80) {
			buf[n++] = (char)c;
		} else if (c < 0x800) {
			buf[n++] = (char)(0xc0 | (c >> 6));
			buf[n++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			buf[n++] = (char)(0xe0 | (c >> 12));
			buf[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			buf[n++] = (char)(0x80 | (c & 0x3f));
		} else {
			buf[n++] = (char)(0xf0 | ((c >> 18) & 7));
			buf[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
			buf[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			buf[n++] = (char)(0x80 | (c & 0x3f));
		}
	}
	*out = buf;
	return (ssize_t)n;
}

uint64_t intern_str_obj(uintptr_t s)
{
	char buf[1024];
	const char *p;
	ssize_t n = str_utf8(s, buf, sizeof buf, &p);
	if (n < 0)
		return tbp_intern_string("?", 1);
	return tbp_intern_string(p, (size_t)n);
}

/* ----------------------------------------------------- line tables */

/* 3.11+ location table varints: 6-bit groups, bit 6 = more. */
static bool lt_varint(const uint8_t **p, const uint8_t *end, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;
	while (*p < end && shift < 32) {
		uint8_t b = *(*p)++;
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64)) {
			*out = v;
			return true;
		}
	}
	return false;
}
static bool lt_svarint(const uint8_t **p, const uint8_t *end, int32_t *out)
{
	uint32_t v;
	if (!lt_varint(p, end, &v))
		return false;
	*out = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return true;
}

/* Line of code unit `index` (3.11+ table).  -1 when unknown. */
int tbp_py_line_311(const uint8_t *table, size_t size, int firstlineno, uint32_t index)
{
	const uint8_t *p = table, *end = table + size;
	uint32_t addr = 0;
	int line = firstlineno, last_known = -1;
	while (p < end) {
		uint8_t head = *p++;
		if (!(head & 0x80))
			return -1; /* not at an entry start: corrupt */
		unsigned code = (head >> 3) & 15, len = (head & 7) + 1;
		int32_t delta = 0;
		bool has_line = true;
		uint32_t skip;
		switch (code) {
		case 15: /* no location */
			has_line = false;
			break;
		case 14: /* long form */
			if (!lt_svarint(&p, end, &delta) || !lt_varint(&p, end, &skip) ||
			    !lt_varint(&p, end, &skip) || !lt_varint(&p, end, &skip))
				return last_known;
			break;
		case 13: /* no column */
			if (!lt_svarint(&p, end, &delta))
				return last_known;
			break;
		case 10: case 11: case 12: /* one line: two column bytes */
			delta = (int32_t)code - 10;
			p += 2;
			break;
		default: /* short form: one column byte */
			p += 1;
			break;
		}
		if (has_line) {
			line += delta;
			last_known = line;
		}
		if (index >= addr && index < addr + len)
			return has_line ? line : last_known;
		addr += len;
	}
	return last_known;
}

/* Line of byte offset `addr` (3.10 table: (byte delta, line delta) pairs,
 * line delta -128 = no line). */
int tbp_py_line_310(const uint8_t *table, size_t size, int firstlineno, uint32_t addr)
{
	uint32_t start = 0, end_addr = 0;
	int line = firstlineno, cur = -1, last_known = -1;
	for (size_t i = 0; i + 1 < size; i += 2) {
		start = end_addr;
		end_addr += table[i];
		int8_t ldelta = (int8_t)table[i + 1];
		if (ldelta == -128) {
			cur = -1;
		} else {
			line += ldelta;
			cur = line;
			last_known = line;
		}
		if (addr >= start && addr < end_addr)
			return cur >= 0 ? cur : last_known;
	}
	return last_known;
}

int code_line(uintptr_t code, uint32_t index)
{
	int first = rd_int(code, L.co_firstlineno);
	uintptr_t lt = rd_ptr(code, L.co_linetable);
	if (!ptr_ok(lt))
		return first;
	ssize_t size = *(const ssize_t *)(lt + 16);
	if (size < 0 || size > (1 << 24))
		return first;
	const uint8_t *table = (const uint8_t *)(lt + 32); /* PyBytesObject.ob_sval */
	int line = L.linetable_310 ? tbp_py_line_310(table, (size_t)size, first, index * 2)
		: tbp_py_line_311(table, (size_t)size, first, index);
	return line >= 0 ? line : first;
}
