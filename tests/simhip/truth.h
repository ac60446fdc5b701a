/*
 * Reading simhip's ground-truth log (SIMHIP_TRUTH): one operation per line,
 * space-separated key=value pairs, the first being op=<kind>.  Shared by the
 * simhip self-checks and the hip suite's trace-versus-truth checks.
 */
#ifndef SIMHIP_TRUTH_H
#define SIMHIP_TRUTH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct truth_op {
	char op[24];
	char api[48];
	char name[128];
	char dir[8];
	char mem[12];
	char kind[12];
	uint64_t stream, issued, start, end, until, bytes, ptr, handle, flags, value;
	int result, pageable, async;
	int line;
};

struct truth {
	struct truth_op *ops;
	size_t n;
};

static inline uint64_t truth_num(const char *v)
{
	return strtoull(v, NULL, 0);
}

static inline void truth_copy(char *dst, size_t cap, const char *v)
{
	snprintf(dst, cap, "%s", v);
}

/* Returns 0, or -1 with a message on stderr naming the file and line. */
static inline int truth_load(struct truth *t, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "%s: cannot open\n", path);
		return -1;
	}
	char line[1024];
	size_t cap = 0;
	int lineno = 0;
	t->ops = NULL;
	t->n = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (t->n == cap) {
			cap = cap ? cap * 2 : 256;
			t->ops = realloc(t->ops, cap * sizeof *t->ops);
			if (!t->ops) {
				fclose(f);
				return -1;
			}
		}
		struct truth_op *o = &t->ops[t->n];
		memset(o, 0, sizeof *o);
		o->line = lineno;
		char *save = NULL;
		for (char *tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			char *eq = strchr(tok, '=');
			if (!eq) {
				fprintf(stderr, "%s:%d: malformed field '%s'\n", path, lineno, tok);
				fclose(f);
				return -1;
			}
			*eq = 0;
			const char *k = tok, *v = eq + 1;
			if (!strcmp(k, "op")) truth_copy(o->op, sizeof o->op, v);
			else if (!strcmp(k, "api")) truth_copy(o->api, sizeof o->api, v);
			else if (!strcmp(k, "name")) truth_copy(o->name, sizeof o->name, v);
			else if (!strcmp(k, "dir")) truth_copy(o->dir, sizeof o->dir, v);
			else if (!strcmp(k, "mem")) truth_copy(o->mem, sizeof o->mem, v);
			else if (!strcmp(k, "kind")) truth_copy(o->kind, sizeof o->kind, v);
			else if (!strcmp(k, "stream")) o->stream = truth_num(v);
			else if (!strcmp(k, "issued")) o->issued = truth_num(v);
			else if (!strcmp(k, "start")) o->start = truth_num(v);
			else if (!strcmp(k, "end")) o->end = truth_num(v);
			else if (!strcmp(k, "until")) o->until = truth_num(v);
			else if (!strcmp(k, "bytes")) o->bytes = truth_num(v);
			else if (!strcmp(k, "ptr")) o->ptr = truth_num(v);
			else if (!strcmp(k, "handle")) o->handle = truth_num(v);
			else if (!strcmp(k, "flags")) o->flags = truth_num(v);
			else if (!strcmp(k, "value")) o->value = truth_num(v);
			else if (!strcmp(k, "result")) o->result = (int)strtol(v, NULL, 0);
			else if (!strcmp(k, "pageable")) o->pageable = atoi(v);
			else if (!strcmp(k, "async")) o->async = atoi(v);
		}
		if (!*o->op) {
			fprintf(stderr, "%s:%d: no op= field\n", path, lineno);
			fclose(f);
			return -1;
		}
		t->n++;
	}
	fclose(f);
	return 0;
}

/* Device work: placed on a stream's timeline. */
static inline int truth_is_device_op(const struct truth_op *o)
{
	return !strcmp(o->op, "kernel") || !strcmp(o->op, "graph_kernel") ||
	       !strcmp(o->op, "memcpy") || !strcmp(o->op, "memset");
}

#endif
