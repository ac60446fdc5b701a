/*
 * The command-line convention every tbanalyze verb shares (doc/launcher.md):
 * a usage error is one line naming what is wrong and the verb's --help, and
 * exit status 3; the options every verb reads the same way (--help, --json,
 * FILE arguments, an unknown option) are read here; a verb that writes a
 * file refuses one of another kind and says what it wrote.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "tbprof/trace.h"

static const char *current_verb = "report";

void cmd_set_verb(const char *verb)
{
	current_verb = verb;
}

int cmd_usage_error(const char *fmt, ...)
{
	char cmd[64];
	snprintf(cmd, sizeof cmd, "tbanalyze %s", current_verb);
	va_list ap;
	va_start(ap, fmt);
	tbp_usage_error_vprint(cmd, fmt, ap);
	va_end(ap);
	return TBA_EXIT_USAGE;
}

/* An argument the verb's own options did not take: --help (the usage on
 * stdout), --json, a trace, or an unknown option / one trace too many. */
static int common_arg(const struct cmd_args_spec *spec, struct cmd_args *a, const char *arg)
{
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		spec->usage(stdout);
		return CMD_ARG_HELP;
	}
	if (spec->json && !strcmp(arg, "--json")) {
		a->json = 1;
		return CMD_ARG_TAKEN;
	}
	if (arg[0] == '-' && arg[1]) {
		cmd_usage_error("unknown option '%s'", arg);
		return CMD_ARG_ERROR;
	}
	if (a->n_paths == spec->max_paths) {
		if (spec->max_paths == 1)
			cmd_usage_error("one trace, not more ('%s' is a second)", arg);
		else
			cmd_usage_error("%zu traces, not more ('%s' is one more)", spec->max_paths, arg);
		return CMD_ARG_ERROR;
	}
	a->paths[a->n_paths++] = arg;
	return CMD_ARG_TAKEN;
}

/* After the arguments: TBA_EXIT_OK, or the missing trace named. */
static int args_done(const struct cmd_args_spec *spec, const struct cmd_args *a)
{
	if (a->n_paths >= spec->min_paths)
		return TBA_EXIT_OK;
	static const char *const nth[] = {"first", "second"};
	if (spec->min_paths == 1)
		return cmd_usage_error("no trace given (%s)", spec->path_names[0]);
	return cmd_usage_error("missing the %s trace (%s)", nth[a->n_paths], spec->path_names[a->n_paths]);
}

int cmd_parse(int argc, char **argv, const struct cmd_args_spec *spec, struct cmd_args *a, cmd_opt_fn opt,
	      void *ctx)
{
	for (int i = 1; i < argc; i++) {
		int r = opt ? opt(argc, argv, &i, ctx) : 0;
		if (!r)
			r = common_arg(spec, a, argv[i]);
		if (r != CMD_ARG_TAKEN)
			return r == CMD_ARG_HELP ? TBA_EXIT_OK : TBA_EXIT_USAGE;
	}
	return args_done(spec, a) ? TBA_EXIT_USAGE : CMD_GO_ON;
}

/* "--html FILE" or "--html=FILE" at argv[*i]: 1 taken (in *html), 0 not
 * this option, -1 said (no name).  An option in FILE's place ("--html -o
 * x.html") is a missing name, not a file called "-o" (--html=-o is one). */
int cmd_html_opt(int argc, char **argv, int *i, const char **html)
{
	const char *arg = argv[*i];
	if (!strncmp(arg, "--html=", 7)) {
		*html = arg + 7;
	} else if (!strcmp(arg, "--html")) {
		if (*i + 1 >= argc || (argv[*i + 1][0] == '-' && argv[*i + 1][1])) {
			cmd_usage_error("--html: value missing (a file name%s%s)", *i + 1 < argc ? "; got the option " : "",
					*i + 1 < argc ? argv[*i + 1] : "");
			return -1;
		}
		*html = argv[++*i];
	} else {
		return 0;
	}
	if (!**html) {
		cmd_usage_error("--html: value missing (a file name)");
		return -1;
	}
	return 1;
}

/* ------------------------------------------------------------ output files */

/* Does the file's beginning look like what this verb writes? */
static int is_of_kind(const char *head, size_t n, enum cmd_out_kind kind)
{
	switch (kind) {
	case CMD_OUT_HTML:
		return n >= 15 && !strncasecmp(head, "<!DOCTYPE html>", 15);
	case CMD_OUT_TRACE_JSON:
		/* The exports' first key: chrome's displayTimeUnit, kineto's schemaVersion. */
		return n >= 2 && head[0] == '{' &&
		       (strstr(head, "\"traceEvents\"") || !strncmp(head, "{\"displayTimeUnit\"", 18) ||
			!strncmp(head, "{\"schemaVersion\"", 16));
	}
	return 0;
}

static const char *kind_name(enum cmd_out_kind kind)
{
	return kind == CMD_OUT_HTML ? "an HTML page" : "a JSON trace (a Chrome or Kineto export)";
}

int cmd_output_check(const char *path, enum cmd_out_kind kind)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		if (errno != ENOENT) {
			fprintf(stderr, "tbanalyze %s: %s: %s\n", current_verb, path, strerror(errno));
			return TBA_EXIT_INTERNAL;
		}
		/* Not there: can it be made?  Made and removed now, so a bad name
		 * is said before a long analysis and leaves nothing. */
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0) {
			fprintf(stderr, "tbanalyze %s: %s: %s\n", current_verb, path, strerror(errno));
			return TBA_EXIT_INTERNAL;
		}
		close(fd);
		unlink(path);
		return TBA_EXIT_OK;
	}
	if (S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tbanalyze %s: %s: %s\n", current_verb, path, strerror(EISDIR));
		return TBA_EXIT_INTERNAL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		/* An empty file, a device (/dev/stdout), a pipe: nothing to lose. */
		if (access(path, W_OK) == 0)
			return TBA_EXIT_OK;
		fprintf(stderr, "tbanalyze %s: %s: %s\n", current_verb, path, strerror(errno));
		return TBA_EXIT_INTERNAL;
	}
	char head[4096];
	size_t n = 0;
	FILE *f = fopen(path, "rb");
	if (f) {
		n = fread(head, 1, sizeof head - 1, f);
		fclose(f);
	}
	head[n] = 0;
	if (!is_of_kind(head, n, kind)) {
		unsigned char magic[TBP_TRACE_PREFIX_LEN];
		size_t m = n < sizeof magic ? n : sizeof magic;
		memcpy(magic, head, m);
		fprintf(stderr, "tbanalyze %s: %s exists and is %s, not %s: not overwritten (remove it or name "
			"another file)\n", current_verb, path, tbp_is_trace_prefix(magic, m) ? "a trace" : "another file",
			kind_name(kind));
		return TBA_EXIT_BAD_INPUT;
	}
	return TBA_EXIT_OK;
}

/* "tbanalyze VERB: wrote PATH (SIZE)" on stderr. */
static void output_wrote(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return;
	double size = (double)st.st_size;
	static const char *const units[] = {"bytes", "kB", "MB", "GB", "TB"};
	unsigned u = 0;
	while (size >= 1000 && u + 1 < sizeof units / sizeof units[0]) {
		size /= 1000;
		u++;
	}
	if (u)
		fprintf(stderr, "tbanalyze %s: wrote %s (%.1f %s)\n", current_verb, path, size, units[u]);
	else
		fprintf(stderr, "tbanalyze %s: wrote %s (%.0f bytes)\n", current_verb, path, size);
}

FILE *cmd_output_open(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "tbanalyze %s: %s: %s\n", current_verb, path, strerror(errno));
	return f;
}

int cmd_output_close(FILE *f, const char *path, int status)
{
	int failed = ferror(f);
	if (path ? fclose(f) : fflush(f))
		failed = 1;
	if (status != TBA_EXIT_OK)
		return status;
	if (failed) {
		fprintf(stderr, "tbanalyze %s: %s: write failed\n", current_verb, path ? path : "standard output");
		return TBA_EXIT_INTERNAL;
	}
	if (path)
		output_wrote(path);
	return status;
}

