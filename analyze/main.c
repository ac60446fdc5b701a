/* tbanalyze: offline analysis of tbprof traces.  Verb dispatch only. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__ /* (defined by the headers above) */
#include <malloc.h>
#endif

#include "cmd.h"
#include "tbp_config.h"

struct verb {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct verb verbs[] = {
	{"report", cmd_report, "time breakdown and findings (default verb)"},
	{"info", cmd_info, "header, processes, threads, record counts, losses, clock alignment"},
	{"dump", cmd_dump, "one line per record (--json: JSON lines)"},
	{"diff", cmd_diff, "compare two traces; exit 1 on a regression"},
	{"export", cmd_export, "convert to Chrome trace / Kineto JSON"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze [VERB] TRACE.zst [options]\n"
		   "       tbanalyze [report|export] DIR|TRACE.zst... [options]   (one trace per rank: the cross-rank view)\n"
		   "\nverbs:\n");
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
	fprintf(f, "\n`tbanalyze VERB --help` describes a verb's options; `tbanalyze --version` prints the version.\n"
		   "\nexit status (shared with tbprof; doc/launcher.md):\n");
	tbp_exit_table_print(f);
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
	/* The analysis grows large vectors (the sites' log, step items, the
	 * passes' tables: tens of MiB) by realloc, and frees a first
	 * analysis's before the next.  glibc raises its mmap threshold to the
	 * size of each mapped block freed, after which such vectors live in
	 * the heap and every growth copies them; at the default fixed
	 * threshold they stay mapped and grow by mremap, and freed ones go
	 * back to the system (simtorch trace: 11.6 M instructions of copying
	 * fewer, peak RSS 111 -> 99 MB). */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
	if (argc < 2) {
		fprintf(stderr, "tbanalyze: no trace given (tbanalyze [VERB] TRACE.zst); see tbanalyze --help\n");
		return TBA_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return TBA_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("tbanalyze %s\n", TBPROF_VERSION);
		return TBA_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		if (!strcmp(argv[1], verbs[i].name)) {
			cmd_set_verb(verbs[i].name);
			return an_check_unchecked(verbs[i].run(argc - 1, argv + 1));
		}
	/* A word that is neither a verb nor a file nor a path is a mistyped
	 * verb, not a trace to open. */
	if (argv[1][0] != '-' && !strchr(argv[1], '.') && !strchr(argv[1], '/') && access(argv[1], F_OK) != 0) {
		fprintf(stderr, "tbanalyze: unknown verb '%s' (verbs:", argv[1]);
		for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
			fprintf(stderr, " %s", verbs[i].name);
		fprintf(stderr, "); see tbanalyze --help\n");
		return TBA_EXIT_USAGE;
	}
	/* No verb: `tbanalyze trace.zst [options]` is a report. */
	argv[0] = "report";
	cmd_set_verb("report");
	return an_check_unchecked(cmd_report(argc, argv));
}
