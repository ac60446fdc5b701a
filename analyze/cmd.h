/* tbanalyze verbs: one file per verb, dispatched by main.c. */
#ifndef TBANALYZE_CMD_H
#define TBANALYZE_CMD_H

#include <stddef.h>
#include <stdio.h>

#include "../common/exit_status.h"

/* Exit statuses: the table shared with `tbprof` (common/exit_status.def),
 * under the names the analyzer's files use. */
enum tba_exit {
	TBA_EXIT_OK = TBP_EXIT_OK,
	TBA_EXIT_REGRESSION = TBP_EXIT_NO,      /* diff: a regression beyond the threshold */
	TBA_EXIT_BAD_INPUT = TBP_EXIT_BAD_INPUT, /* unreadable, not a trace, corrupt, too new */
	TBA_EXIT_USAGE = TBP_EXIT_USAGE,         /* bad command line */
	TBA_EXIT_INTERNAL = TBP_EXIT_INTERNAL,   /* out of memory, write error on output */
};

/* Consistency checks (an_check.c), on when TBANALYZE_CHECK=1.  A verb
 * registers each trace it read (an_check_opened), checked by an analysis of
 * it (an_run registers the traces it analyses so) or not; after the verb
 * (main.c), the unchecked ones are analysed and checked: an_check_unchecked
 * returns the verb's status, or TBA_EXIT_INTERNAL when a check failed. */
int an_check_on(void);
void an_check_opened(const char *path, int checked);
int an_check_unchecked(int rc);

/* ------------------------------------------------------------ the convention
 * (cmd_common.c).  Every message names the verb: "tbanalyze VERB: ...". */
void cmd_set_verb(const char *verb); /* main.c, before the verb runs */
/* "tbanalyze VERB: MESSAGE; see tbanalyze VERB --help" on one line of
 * stderr; returns TBA_EXIT_USAGE. */
int cmd_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* What the arguments every verb reads alike may be. */
struct cmd_args_spec {
	void (*usage)(FILE *f);       /* --help */
	int json;                     /* --json is an option */
	size_t min_paths, max_paths;  /* traces (or directories) named */
	const char *path_names[2];    /* in messages: "TRACE.zst", "A.zst", "B.zst" */
};
struct cmd_args {
	const char **paths; /* room for max_paths, or argc for "any number" */
	size_t n_paths;
	int json;
};
enum { CMD_ARG_TAKEN = 1, CMD_ARG_HELP = 2, CMD_ARG_ERROR = -1 };
/* A verb's parser's answer when the verb goes on (else an exit status). */
enum { CMD_GO_ON = -1 };
/* A verb's own options at argv[*i]: CMD_ARG_TAKEN (*i past its value), 0
 * not one of them, CMD_ARG_ERROR (a usage error said). */
typedef int (*cmd_opt_fn)(int argc, char **argv, int *i, void *ctx);
/* A verb's whole command line: each argument through opt (NULL: the verb
 * has none), else the arguments every verb reads alike: --help (the usage
 * on stdout), --json, a trace, an unknown option or one trace too many
 * (said); then a missing trace is named.  CMD_GO_ON, or the status to exit
 * with (--help printed: 0; a usage error said: 3). */
int cmd_parse(int argc, char **argv, const struct cmd_args_spec *spec, struct cmd_args *a, cmd_opt_fn opt,
	      void *ctx);

/* "--html FILE" / "--html=FILE" at argv[*i] (report, diff): 1 taken (*html
 * set, *i past it), 0 another argument, -1 said (no file name). */
int cmd_html_opt(int argc, char **argv, int *i, const char **html);

/* Output files a verb writes: before, cmd_output_check refuses an existing
 * file that is not of the kind written (exit 2: a trace given as -o, a
 * user's notes) and a name that cannot be written (exit 4), leaving
 * nothing; after, cmd_output_close says "tbanalyze VERB: wrote PATH (SIZE)". */
enum cmd_out_kind { CMD_OUT_HTML, CMD_OUT_TRACE_JSON };
int cmd_output_check(const char *path, enum cmd_out_kind kind);
/* fopen(path, "w"), or NULL with the reason said (the verb exits 4). */
FILE *cmd_output_open(const char *path);
/* Ends an output the verb wrote with status so far: closes f (path NULL:
 * standard output, flushed), and when status is TBA_EXIT_OK says a write
 * error (returns TBA_EXIT_INTERNAL) or what was written (path).  Returns
 * the status. */
int cmd_output_close(FILE *f, const char *path, int status);

/* Each verb gets argv with argv[0] = the verb name. */
int cmd_info(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);  /* default verb: tbanalyze trace.zst */
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
