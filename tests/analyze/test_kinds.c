/*
 * The finding-kind table (analyze/an_kinds.def, an_kinds.c): every row has
 * a descriptor that every report form can write (a name of its own, a text
 * and an HTML head, advice), values outside the table are "unknown" with no
 * writers, and every kind is documented: a `### \`name\`` section in
 * doc/findings.md and its name in doc/report-schema.md's `kind` row.
 * Usage: test_kinds FINDINGS.md REPORT-SCHEMA.md
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_kind.h"

static int failures;

static void check(int ok, const char *what, const char *name)
{
	if (!ok) {
		fprintf(stderr, "FAIL %s: %s\n", name, what);
		failures++;
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
	}
	fclose(f);
	if (!buf)
		exit(2);
	buf[n] = 0;
	return buf;
}

/* The line of the schema's table whose first cell is `kind`. */
static const char *schema_kind_row(const char *schema)
{
	const char *row = strstr(schema, "\n| `kind` |");
	return row ? row + 1 : NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_kinds FINDINGS.md REPORT-SCHEMA.md\n");
		return 2;
	}
	char *findings = slurp(argv[1]), *schema = slurp(argv[2]);
	const char *row = schema_kind_row(schema);
	check(row != NULL, "no `kind` row in the report schema", argv[2]);
	size_t row_len = row ? strcspn(row, "\n") : 0;
	int kinds = 0;
	for (int kind = 1; kind < AN_F_IDLE_PART; kind++) {
		const struct an_kind *k = an_kind_of(kind);
		char label[32];
		snprintf(label, sizeof label, "kind %d", kind);
		const char *name = k->name ? k->name : label;
		check(k->name && strcmp(k->name, "unknown") && strspn(k->name, "abcdefghijklmnopqrstuvwxyz_") == strlen(k->name),
		      "a name of lower-case letters and '_', not \"unknown\"", name);
		check(!strcmp(an_finding_name(kind), name), "an_finding_name is the descriptor's name", name);
		check(k->text_head && k->html_head && k->suggestion, "text_head, html_head and suggestion set", name);
		for (int other = 1; other < kind; other++)
			check(strcmp(an_kind_of(other)->name, name) != 0, "a name no other kind has", name);
		char heading[96], cell[96];
		snprintf(heading, sizeof heading, "\n### `%s`", name);
		check(strstr(findings, heading) != NULL, "a section `### `name`` in doc/findings.md", name);
		snprintf(cell, sizeof cell, "`%s`", name);
		char *r = row ? strndup(row, row_len) : NULL;
		check(r && strstr(r, cell), "named in doc/report-schema.md's `kind` row", name);
		free(r);
		kinds++;
	}
	check(kinds >= 6, "the table holds the six kinds at least", "table");
	int outside[] = {AN_F_NONE, AN_F_IDLE_PART, AN_F_IDLE_PART + 1, -1, 1000};
	for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
		const struct an_kind *k = an_kind_of(outside[i]);
		check(!strcmp(k->name, "unknown") && !k->text_head && !k->json_fields && !k->html_head && !k->suggestion &&
			      !k->counted_at_user_line,
		      "outside the table: \"unknown\", no writers, kept under its recorded path", "outside");
	}
	free(findings);
	free(schema);
	printf("%d kinds checked, %d failure(s)\n", kinds, failures);
	return failures ? 1 : 0;
}
