/*
 * The trace file naming rules (trace/naming.c): every name libtbprof gives, the reverse match the
 * launcher uses to find them, the rank tbanalyze reads from a name, and the launcher's `-o`
 * classification (a name that is not a trace's is refused before the program runs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tbprof/naming.h"

static int failures;

static void expect_str(const char *what, const char *got, const char *want)
{
	if (strcmp(got, want)) {
		fprintf(stderr, "FAIL %s: got '%s', want '%s'\n", what, got, want);
		failures++;
	}
}

static void expect_int(const char *what, long got, long want)
{
	if (got != want) {
		fprintf(stderr, "FAIL %s: got %ld, want %ld\n", what, got, want);
		failures++;
	}
}

static void tagged(void)
{
	char b[256];
	tbp_name_tagged(b, sizeof b, "trace.zst", "capture1");
	expect_str("tagged plain", b, "trace.capture1.zst");
	tbp_name_tagged(b, sizeof b, "/a.b/run.v2.zst", "agent");
	expect_str("tagged: stem ends at the file name's first dot, not the directory's", b, "/a.b/run.agent.v2.zst");
	tbp_name_tagged(b, sizeof b, "out/noext", "7");
	expect_str("tagged without a dot", b, "out/noext.7");
	tbp_name_per_pid(b, sizeof b, "dir/trace.zst", 12345, 0);
	expect_str("per pid", b, "dir/trace.12345.zst");
	tbp_name_per_pid(b, sizeof b, "trace.zst", 12345, 2);
	expect_str("per pid, serial", b, "trace.12345-2.zst");
	tbp_name_capture(b, sizeof b, "/o/trace.zst", "capture", 1, NULL);
	expect_str("capture", b, "/o/trace.capture1.zst");
	tbp_name_capture(b, sizeof b, "/o/trace.zst", "flight", 2, "");
	expect_str("flight dump, empty tag", b, "/o/trace.flight2.zst");
	tbp_name_capture(b, sizeof b, "/o/trace.zst", "capture", 3, "rank1");
	expect_str("capture of one of several ranks", b, "/o/trace.rank1.capture3.zst");
	tbp_name_capture(b, sizeof b, "/o/rank1.zst", "capture", 1, "rank1");
	expect_str("capture in a directory OUT: the rank once", b, "/o/rank1.capture1.zst");
	tbp_name_capture(b, sizeof b, "/o/rank10.zst", "capture", 1, "rank1");
	expect_str("rank10 is not rank1", b, "/o/rank10.rank1.capture1.zst");
	tbp_name_capture(b, sizeof b, "/o/trace.zst", "capture", 1, "4242");
	expect_str("capture tagged by pid", b, "/o/trace.4242.capture1.zst");
	tbp_name_tagged(b, 8, "trace.zst", "capture1");
	expect_int("tagged truncates within cap", (long)strlen(b), 7);
}

static void in_dir_and_expand(void)
{
	char b[256];
	tbp_name_in_dir(b, sizeof b, 3, false);
	expect_str("directory: a rank", b, "rank3.zst");
	tbp_name_in_dir(b, sizeof b, 3, true);
	expect_str("directory: the agent (even with a task rank)", b, "agent.zst");
	tbp_name_in_dir(b, sizeof b, -1, false);
	expect_str("directory: outside a job", b, TBP_NAME_DEFAULT);
	expect_int("default ends in the extension", strcmp(TBP_NAME_DEFAULT + strlen(TBP_NAME_DEFAULT) - 4, TBP_NAME_EXT), 0);

	bool had = tbp_name_expand(b, sizeof b, "t-%r.%p.zst", 42, 5, false);
	expect_str("expand rank and pid", b, "t-5.42.zst");
	expect_int("expand says %p", had, 1);
	had = tbp_name_expand(b, sizeof b, "t-%r.zst", 42, 5, true);
	expect_str("expand: the agent", b, "t-agent.zst");
	expect_int("expand without %p", had, 0);
	tbp_name_expand(b, sizeof b, "t-%r.zst", 42, -1, false);
	expect_str("expand: no rank", b, "t-norank.zst");
	tbp_name_expand(b, sizeof b, "100%.zst", 42, -1, false);
	expect_str("expand: a lone %", b, "100%.zst");
	tbp_name_expand(b, 6, "%p%p%p", 123456, -1, false);
	expect_int("expand truncates within cap", (long)strlen(b), 5);
}

static void rank_of(void)
{
	expect_int("rank0.zst", tbp_name_rank_of("rank0.zst"), 0);
	expect_int("dir/rank17.zst", tbp_name_rank_of("/x/rank17.zst"), 17);
	expect_int("rank.zst", tbp_name_rank_of("rank.zst"), -1);
	expect_int("rank1.capture1.zst", tbp_name_rank_of("rank1.capture1.zst"), -1);
	expect_int("rank-1.zst", tbp_name_rank_of("rank-1.zst"), -1);
	expect_int("rank1.zst.bak", tbp_name_rank_of("rank1.zst.bak"), -1);
	expect_int("rank99999999999.zst overflows", tbp_name_rank_of("rank99999999999.zst"), -1);
	expect_int("agent.zst", tbp_name_rank_of("agent.zst"), -1);
	/* what libtbprof writes in a directory, tbanalyze reads back */
	char b[64];
	tbp_name_in_dir(b, sizeof b, 12, false);
	expect_int("round trip", tbp_name_rank_of(b), 12);
}

static void output_of(void)
{
	struct { const char *out, *file; int want; } cases[] = {
		{ "/d/trace.zst", "trace.zst", 1 },
		{ "/d/trace.zst", "trace.4242.zst", 1 },
		{ "/d/trace.zst", "trace.4242-1.zst", 1 },
		{ "/d/trace.zst", "trace.agent.zst", 1 },
		{ "/d/trace.zst", "trace.capture1.zst", 1 },
		{ "/d/trace.zst", "other.zst", 0 },
		{ "/d/trace.zst", "trace.json", 0 },
		{ "/d/t-%r.zst", "t-3.zst", 1 },
		{ "/d/t-%r.zst", "t-agent.zst", 1 },
		{ "/d/t-%r.zst", "u-3.zst", 0 },
		{ "run[1].zst", "run[1].zst", 1 },
		{ "run[1].zst", "run1.zst", 0 },
		{ "noext", "noext.4242", 1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char what[256];
		snprintf(what, sizeof what, "is %s an output of %s", cases[i].file, cases[i].out);
		expect_int(what, tbp_name_is_output_of(cases[i].out, cases[i].file), cases[i].want);
	}
	/* every name libtbprof gives for a file OUT is found */
	char b[256];
	tbp_name_per_pid(b, sizeof b, "trace.v1.zst", 99, 3);
	expect_int("per-pid name of a two-dot OUT is found", tbp_name_is_output_of("/x/trace.v1.zst", b), 1);
}

static void classify(void)
{
	char dir[] = "/tmp/tbp-naming-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(2);
	}
	char script[300], sub[300], newdir[300], newfile[300];
	snprintf(script, sizeof script, "%s/train.py", dir);
	snprintf(sub, sizeof sub, "%s/traces", dir);
	snprintf(newdir, sizeof newdir, "%s/new", dir);
	snprintf(newfile, sizeof newfile, "%s/out.json", dir);
	FILE *f = fopen(script, "w");
	if (!f) {
		perror(script);
		exit(2);
	}
	fputs("print(1)\n", f);
	fclose(f);
	mkdir(sub, 0700);
	const char *why = NULL;
	struct { const char *out; enum tbp_out_kind want; } cases[] = {
		{ "trace.zst", TBP_OUT_FILE },
		{ "x/%r.zst", TBP_OUT_FILE },
		{ "t.%p.zst", TBP_OUT_FILE },
		{ "/dev/null", TBP_OUT_FILE },
		{ script, TBP_OUT_NOT_A_TRACE },
		{ newfile, TBP_OUT_NOT_A_TRACE },
		{ "t-%p", TBP_OUT_NOT_A_TRACE },
		{ "t-%r/", TBP_OUT_NOT_A_TRACE },
		{ sub, TBP_OUT_DIR },
		{ newdir, TBP_OUT_DIR },
		{ "traces.v2/", TBP_OUT_DIR },
		{ "dir/.zst", TBP_OUT_NOT_A_TRACE },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char what[400];
		snprintf(what, sizeof what, "classify %s", cases[i].out);
		why = NULL;
		enum tbp_out_kind k = tbp_name_classify(cases[i].out, &why);
		expect_int(what, k, cases[i].want);
		if (k == TBP_OUT_NOT_A_TRACE && (!why || !*why)) {
			fprintf(stderr, "FAIL %s: refused without a reason\n", what);
			failures++;
		}
	}
	expect_int("is_dir: trailing slash", tbp_name_is_dir("nothere/"), 1);
	expect_int("is_dir: existing", tbp_name_is_dir(sub), 1);
	expect_int("is_dir: a file", tbp_name_is_dir(script), 0);
	expect_int("is_dir: missing", tbp_name_is_dir(newdir), 0);
	unlink(script);
	rmdir(sub);
	rmdir(dir);
}

int main(void)
{
	tagged();
	in_dir_and_expand();
	rank_of();
	output_of();
	classify();
	if (failures) {
		fprintf(stderr, "%d naming rule(s) wrong\n", failures);
		return 1;
	}
	printf("ok: tagged, per-pid, in-directory, %%p/%%r expansion, rank from name, reverse match, -o classification\n");
	return 0;
}
