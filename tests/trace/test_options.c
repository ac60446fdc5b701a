/*
 * The TBPROF_* settings table (tbprof/options.def) and its one parser (trace/options.c).
 *
 *   test_options          checks the table (every default parses, names and flags unique) and
 *                         the grammar libtbprof and the launcher share
 *   test_options --dump   prints the table, one row a line, tab-separated (variable, type,
 *                         default or "-", lo, hi, flag or "-", short flag or "-", the value a
 *                         flag sets or "-"), for tests/launcher/check_options_doc.py
 */
#include <stdio.h>
#include <string.h>

#include "tbprof/options.h"

static int failures;

static const char *const type_names[] = {
	[TBP_OPT_BOOL] = "bool", [TBP_OPT_UINT] = "uint", [TBP_OPT_SIZE] = "size", [TBP_OPT_SECONDS] = "seconds",
	[TBP_OPT_LEVEL] = "level", [TBP_OPT_STRING] = "string", [TBP_OPT_CHOICE] = "choice",
};

static void fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "FAIL ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	failures++;
}

static void check_table(void)
{
	for (size_t i = 0; i < TBP_OPT_COUNT; i++) {
		const struct tbp_option *o = &tbp_options[i];
		if (!o->var || strncmp(o->var, "TBPROF_", 7))
			fail("row %s: the variable is not TBPROF_*%s", o->var ? o->var : "(null)", "");
		if (!o->help || !*o->help)
			fail("%s: no help%s", o->var, "");
		union tbp_opt_value v;
		const char *why = NULL;
		if (o->dflt && !tbp_opt_parse(o, o->dflt, &v, &why))
			fail("%s: its default does not parse: %s", o->var, why);
		if (!o->dflt && o->type != TBP_OPT_SECONDS && o->type != TBP_OPT_STRING && o->type != TBP_OPT_CHOICE)
			fail("%s: a %s needs a default", o->var, type_names[o->type]);
		if ((o->type == TBP_OPT_UINT || o->type == TBP_OPT_SIZE) && o->lo > o->hi)
			fail("%s: empty range%s", o->var, "");
		if (o->flag && strncmp(o->flag, "--", 2))
			fail("%s: flag %s is not a long option", o->var, o->flag);
		if (o->flag && o->sets && !tbp_opt_parse(o, o->sets, &v, &why))
			fail("%s: the value its flag sets does not parse: %s", o->var, why);
		if (o->flag && !o->sets && !o->metavar)
			fail("%s: flag %s takes a value without a name", o->var, o->flag);
		if (tbp_opt_by_var(o->var) != o)
			fail("%s: the variable is in two rows%s", o->var, "");
		for (size_t j = 0; j < i; j++) {
			const struct tbp_option *p = &tbp_options[j];
			if (o->flag && p->flag && !strcmp(o->flag, p->flag))
				fail("flag %s is in two rows (%s)", o->flag, o->var);
			if (o->short_flag && p->short_flag && !strcmp(o->short_flag, p->short_flag))
				fail("short flag %s is in two rows (%s)", o->short_flag, o->var);
		}
	}
	if (strcmp(tbp_options[TBP_OPT_OUT].dflt, TBP_NAME_DEFAULT))
		fail("TBPROF_OUT's default %s is not the naming module's %s", tbp_options[TBP_OPT_OUT].dflt,
		     TBP_NAME_DEFAULT);
}

static void expect_parse(enum tbp_opt_id id, const char *text, int ok, unsigned long long want)
{
	const struct tbp_option *o = &tbp_options[id];
	union tbp_opt_value v = {0};
	const char *why = NULL;
	bool got = tbp_opt_parse(o, text, &v, &why);
	char what[256];
	snprintf(what, sizeof what, "%s=%s", o->var, text);
	if (got != (ok != 0)) {
		fail("%s: %s", what, got ? "accepted" : why);
		return;
	}
	if (got && !ok)
		return;
	if (!got && (!why || !*why))
		fail("%s: refused without a reason%s", what, "");
	if (!got || o->type == TBP_OPT_CHOICE || o->type == TBP_OPT_STRING)
		return;
	unsigned long long have = o->type == TBP_OPT_BOOL ? v.b : o->type == TBP_OPT_SECONDS ? (unsigned long long)v.d : v.u;
	if (have != want) {
		char w[64];
		snprintf(w, sizeof w, "%llu, want %llu", have, want);
		fail("%s: parsed as %s", what, w);
	}
}

static void check_grammar(void)
{
	const char *yes[] = { "1", "true", "TRUE", "yes", "Yes", "on", "ON" };
	const char *no[] = { "0", "false", "FALSE", "no", "No", "off", "Off" };
	for (size_t i = 0; i < 7; i++) {
		expect_parse(TBP_OPT_TRACE_ALL, yes[i], 1, 1);
		expect_parse(TBP_OPT_TRACE_ALL, no[i], 1, 0);
	}
	expect_parse(TBP_OPT_TRACE_ALL, "2", 0, 0);
	expect_parse(TBP_OPT_TRACE_ALL, "maybe", 0, 0);
	expect_parse(TBP_OPT_TRACE_ALL, "", 0, 0);
	expect_parse(TBP_OPT_PY_DEPTH, "32", 1, 32);
	expect_parse(TBP_OPT_PY_DEPTH, "0", 0, 0);
	expect_parse(TBP_OPT_PY_DEPTH, "1025", 0, 0);
	expect_parse(TBP_OPT_PY_DEPTH, "-1", 0, 0);
	expect_parse(TBP_OPT_PY_DEPTH, "+1", 0, 0);
	expect_parse(TBP_OPT_PY_DEPTH, "8K", 0, 0);
	expect_parse(TBP_OPT_PY_SPAN_US, "18446744073709551616", 0, 0);
	expect_parse(TBP_OPT_BUFFER_SIZE, "64k", 1, 65536);
	expect_parse(TBP_OPT_BUFFER_SIZE, "2MiB", 1, 2u << 20);
	expect_parse(TBP_OPT_BUFFER_SIZE, "1MB", 1, 1u << 20);
	expect_parse(TBP_OPT_BUFFER_SIZE, "16G", 1, 1ull << 34);
	expect_parse(TBP_OPT_BUFFER_SIZE, "1K", 0, 0);
	expect_parse(TBP_OPT_BUFFER_SIZE, "12Q", 0, 0);
	expect_parse(TBP_OPT_BUFFER_SIZE, "1M ", 0, 0);
	expect_parse(TBP_OPT_BUFFER_SIZE, "20000000000000000000K", 0, 0);
	expect_parse(TBP_OPT_FLIGHT, "2.5", 1, 2);
	expect_parse(TBP_OPT_FLIGHT, "86400", 1, 86400);
	expect_parse(TBP_OPT_FLIGHT, "86401", 0, 0);
	expect_parse(TBP_OPT_FLIGHT, "0", 0, 0);
	expect_parse(TBP_OPT_FLIGHT, "3s", 0, 0);
	expect_parse(TBP_OPT_FLIGHT, "nan", 0, 0);
	expect_parse(TBP_OPT_VERBOSE, "7", 1, 7);
	expect_parse(TBP_OPT_VERBOSE, "on", 1, 1);
	expect_parse(TBP_OPT_VERBOSE, "10", 0, 0);
	expect_parse(TBP_OPT_CAPTURE_RANGE, "cudaProfilerApi", 1, 0);
	expect_parse(TBP_OPT_CAPTURE_RANGE, "cudaProfiler", 0, 0);
	expect_parse(TBP_OPT_CAPTURE_RANGE, "cudaProfilerApix", 0, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--dump")) {
		for (size_t i = 0; i < TBP_OPT_COUNT; i++) {
			const struct tbp_option *o = &tbp_options[i];
			printf("%s\t%s\t%s\t%llu\t%llu\t%s\t%s\t%s\n", o->var, type_names[o->type], o->dflt ? o->dflt : "-",
			       o->lo, o->hi, o->flag ? o->flag : "-", o->short_flag ? o->short_flag : "-",
			       o->sets ? o->sets : "-");
		}
		return 0;
	}
	check_table();
	check_grammar();
	if (failures) {
		fprintf(stderr, "%d problem(s) in the options table or its parser\n", failures);
		return 1;
	}
	printf("ok: %d options, every default and flag value parses, names unique; the shared grammar\n",
	       (int)TBP_OPT_COUNT);
	return 0;
}
