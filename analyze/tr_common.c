/* Shared helpers for tbanalyze verbs: see tr_common.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "tr_common.h"

void tr_print_error(const struct tbp_reader *r, const char *path, int status)
{
	const char *detail = r ? tbp_reader_detail(r) : "";
	uint64_t off = r ? tbp_reader_offset(r) : 0;
	const char *name = tbp_error_name(status);
	if (detail && *detail && !strncmp(detail, name, strlen(name)))
		fprintf(stderr, "tbanalyze: %s: offset %" PRIu64 ": %s\n", path, off, detail); /* says it already */
	else if (detail && *detail)
		fprintf(stderr, "tbanalyze: %s: offset %" PRIu64 ": %s: %s\n", path, off, name, detail);
	else
		fprintf(stderr, "tbanalyze: %s: offset %" PRIu64 ": %s\n", path, off, tbp_error_name(status));
}

static int exit_for(int status)
{
	if (status == TBP_ERR_NOMEM)
		return TBA_EXIT_INTERNAL;
	return tbp_is_error(status) ? TBA_EXIT_BAD_INPUT : TBA_EXIT_OK;
}

int tr_open(const char *path, struct tbp_reader **r)
{
	*r = NULL;
	struct tbp_reader *rd = NULL;
	int rc = tbp_reader_open(&rd, path);
	if (rc == TBP_OK) {
		*r = rd;
		return TBA_EXIT_OK;
	}
	tr_print_error(rd, path, rc);
	tbp_reader_close(rd);
	return rc == TBP_ERR_NOMEM ? TBA_EXIT_INTERNAL : TBA_EXIT_BAD_INPUT;
}

/* tr_next's answer for a reader status other than TBP_OK. */
int tr_next_end(struct tbp_reader *r, const char *path, int rc)
{
	if (rc == TBP_END)
		return 0;
	if (rc == TBP_ERR_TRUNCATED) {
		/* Once per file per run, even when a verb reads a file twice
		 * (definitions first, then events). */
		static char *warned[16];
		static unsigned nwarned;
		for (unsigned i = 0; i < nwarned; i++)
			if (!strcmp(warned[i], path))
				return 0;
		fprintf(stderr, "tbanalyze: %s: warning: trace truncated at offset %" PRIu64
			" (last frame incomplete)\n", path, tbp_reader_offset(r));
		if (nwarned < 16 && (warned[nwarned] = strdup(path)))
			nwarned++;
		return 0;
	}
	tr_print_error(r, path, rc);
	return -1;
}

int tr_exit_status(const struct tbp_reader *r)
{
	struct tbp_record rec;
	/* The reader's status is sticky: asking again returns the same error. */
	int rc = tbp_reader_next((struct tbp_reader *)r, &rec);
	if (rc == TBP_ERR_TRUNCATED || rc == TBP_END || rc == TBP_OK)
		return TBA_EXIT_OK;
	return exit_for(rc);
}

/* ------------------------------------------------------------ strings */

void tr_strings_init(struct tr_strings *s)
{
	memset(s, 0, sizeof *s);
}

void tr_strings_free(struct tr_strings *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slots[i].bytes);
	free(s->slots);
	memset(s, 0, sizeof *s);
}

static size_t slot_of(uint64_t id, size_t cap)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 17) & (cap - 1);
}

static int grow(struct tr_strings *s)
{
	size_t cap = s->cap ? s->cap * 2 : 256;
	struct tr_string_slot *slots = calloc(cap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->slots[i].id)
			continue;
		size_t j = slot_of(s->slots[i].id, cap);
		while (slots[j].id)
			j = (j + 1) & (cap - 1);
		slots[j] = s->slots[i];
	}
	free(s->slots);
	s->slots = slots;
	s->cap = cap;
	return 0;
}

int tr_strings_put(struct tr_strings *s, uint64_t id, const void *bytes, size_t len)
{
	if (id == 0)
		return 0;
	if ((s->n + 1) * 4 > s->cap * 3 && grow(s))
		return -1;
	char *copy = malloc(len + 1);
	if (!copy)
		return -1;
	if (len)
		memcpy(copy, bytes, len);
	copy[len] = 0;
	size_t j = slot_of(id, s->cap);
	while (s->slots[j].id && s->slots[j].id != id)
		j = (j + 1) & (s->cap - 1);
	if (s->slots[j].id == id) {
		free(s->slots[j].bytes);
	} else {
		s->slots[j].id = id;
		s->n++;
	}
	s->slots[j].bytes = copy;
	s->slots[j].len = (uint32_t)len;
	return 0;
}

int tr_strings_note(struct tr_strings *s, const struct tbp_record *rec)
{
	if (rec->kind != TBP_K_STRING)
		return 0;
	return tr_strings_put(s, rec->u.string.id, rec->blob, rec->blob_len) ? -1 : 1;
}

const char *tr_strings_get(const struct tr_strings *s, uint64_t id, size_t *len)
{
	if (id == 0 || s->cap == 0)
		return NULL;
	size_t j = slot_of(id, s->cap);
	while (s->slots[j].id) {
		if (s->slots[j].id == id) {
			if (len)
				*len = s->slots[j].len;
			return s->slots[j].bytes;
		}
		j = (j + 1) & (s->cap - 1);
	}
	return NULL;
}

const char *tr_strings_show(const struct tr_strings *s, uint64_t id)
{
	static char ring[8][32];
	static unsigned next;
	if (id == 0)
		return "";
	const char *str = tr_strings_get(s, id, NULL);
	if (str)
		return str;
	char *buf = ring[next++ % 8];
	snprintf(buf, sizeof ring[0], "<string %" PRIu64 ">", id);
	return buf;
}

/* ------------------------------------------------------------ output */

/* Length of a valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	unsigned c = p[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void tr_json_string(FILE *f, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	putc('"', f);
	for (size_t i = 0; i < len;) {
		unsigned c = p[i];
		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc((int)c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c == '\r') {
			fputs("\\r", f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else {
			size_t n = utf8_len(p + i, len - i);
			if (n == 0) {
				fprintf(f, "\\u%04x", c);
				i++;
			} else {
				fwrite(p + i, 1, n, f);
				i += n;
			}
		}
	}
	putc('"', f);
}

#define NAME_OR_Q(table, v) ((v) < sizeof(table) / sizeof(table[0]) && table[v] ? table[v] : "?")

const char *tr_copy_kind_name(uint64_t v)
{
	static const char *const n[] = {"unknown", "h2d", "d2h", "d2d", "h2h", "peer"};
	return NAME_OR_Q(n, v);
}
const char *tr_sync_kind_name(uint64_t v)
{
	static const char *const n[] = {"unknown", "device", "stream", "event", "stream_wait_event", "context"};
	return NAME_OR_Q(n, v);
}
const char *tr_marker_kind_name(uint64_t v)
{
	static const char *const n[] = {"user", "iter_begin", "iter_end", "warmup_end"};
	return NAME_OR_Q(n, v);
}
const char *tr_lost_source_name(uint64_t v)
{
	static const char *const n[] = {NULL, "buffer_full", "cupti", "write_error", "signal"};
	return NAME_OR_Q(n, v);
}
const char *tr_clock_method_name(uint64_t v)
{
	static const char *const n[] = {"same", "cupti_callback", "bracketed", "hook_side"};
	return NAME_OR_Q(n, v);
}
const char *tr_notice_level_name(uint64_t v)
{
	static const char *const n[] = {"info", "warning", "error"};
	return NAME_OR_Q(n, v);
}
const char *tr_stream_kind_name(uint64_t v)
{
	static const char *const n[] = {"defs", "thread", "gpu"};
	return NAME_OR_Q(n, v);
}
