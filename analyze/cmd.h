/* tbanalyze verbs: one file per verb, dispatched by main.c. */
#ifndef TBANALYZE_CMD_H
#define TBANALYZE_CMD_H

/* Exit statuses, pinned (scripts and CI depend on them). */
enum tba_exit {
	TBA_EXIT_OK = 0,
	TBA_EXIT_REGRESSION = 1, /* diff: a regression beyond the threshold */
	TBA_EXIT_BAD_INPUT = 2,  /* unreadable, not a trace, corrupt, too new */
	TBA_EXIT_USAGE = 3,      /* bad command line */
	TBA_EXIT_INTERNAL = 4,   /* out of memory, write error on output */
};

/* Consistency checks (an_check.c), on when TBANALYZE_CHECK=1.  A verb
 * registers each trace it read (an_check_opened), checked by an analysis of
 * it (an_run registers the traces it analyses so) or not; after the verb
 * (main.c), the unchecked ones are analysed and checked: an_check_unchecked
 * returns the verb's status, or TBA_EXIT_INTERNAL when a check failed. */
int an_check_on(void);
void an_check_opened(const char *path, int checked);
int an_check_unchecked(int rc);

/* Each verb gets argv with argv[0] = the verb name. */
int cmd_info(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);  /* default verb: tbanalyze trace.zst */
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
