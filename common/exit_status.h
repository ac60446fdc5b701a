/*
 * One exit status per meaning, shared by the launcher (`tbprof`) and the
 * analyzer (`tbanalyze`): the table is exit_status.def.  `tbprof record`
 * exits with the traced command's own status once the command runs; these
 * are for the commands' own outcomes.
 */
#ifndef TBPROF_EXIT_STATUS_H
#define TBPROF_EXIT_STATUS_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum tbp_exit {
#define TBP_EXIT(name, code, meaning) TBP_EXIT_##name = code,
#include "exit_status.def"
#undef TBP_EXIT
};

/* A usage error as every command prints it: one line naming the command
 * and what is wrong, then where the usage is ("see CMD --help"). */
static inline void tbp_usage_error_vprint(const char *cmd, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "; see %s --help\n", cmd);
}

/* The table for --help: "    CODE  MEANING", MEANING wrapped at word
 * boundaries to 80 columns, so each command's help prints the same list. */
static inline void tbp_exit_table_print(FILE *f)
{
	static const struct {
		int code;
		const char *meaning;
	} rows[] = {
#define TBP_EXIT(name, code, meaning) {code, meaning},
#include "exit_status.def"
#undef TBP_EXIT
	};
	const int indent = 9, width = 80;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		fprintf(f, "    %3d  ", rows[i].code);
		const char *p = rows[i].meaning;
		while (*p) {
			size_t room = (size_t)(width - indent), len = strlen(p);
			size_t cut = len;
			if (len > room) {
				cut = room;
				while (cut > 0 && p[cut] != ' ')
					cut--;
				if (!cut)
					cut = room;
			}
			fprintf(f, "%.*s\n", (int)cut, p);
			p += cut;
			while (*p == ' ')
				p++;
			if (*p)
				fprintf(f, "%*s", indent, "");
		}
	}
}

#endif
