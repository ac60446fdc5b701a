/* tbanalyze report (the default verb): breakdown and findings as text,
 * JSON (--json) and/or a self-contained HTML page (--html FILE). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "an.h"
#include "an_ranks.h"
#include "cmd.h"

const char an_opts_help[] =
	"  --gap-us N          idle gap threshold in microseconds (default 50)\n"
	"  --burst-min N       short kernels in a row that make a burst (default 16)\n"
	"  --burst-kernel-us N a kernel shorter than this is short (default 10)\n"
	"  --scalar-bytes N    H2D copies up to N bytes are scalar copies (default 8: one element)\n"
	"  --scalar-min N      scalar copies per call site to report them (default 3)\n"
	"  --pingpong-min N    round trips per call site to report ping-pong (default 3)\n"
	"  --sync-min N        syncs per call site to report a sync hotspot (default 10)\n"
	"  --churn-min N       allocations per call site to report churn (default 50)\n"
	"  --top N             findings shown in the text report (default 20)\n"
	"  --no-markers        ignore the runner's iteration/warm-up markers (and detect no steps)\n"
	"  --steps nvtx:NAME   the steps are the NVTX ranges named NAME (torch.cuda.nvtx.range_push(NAME)...)\n"
	"  --where=user|leaf   place a finding at the innermost frame of the user's code (default: user, the\n"
	"                      first frame outside torch and the standard library) or at the leaf frame\n";

/* Option errors read "tbanalyze VERB: --OPTION: VALUE: REASON; see
 * tbanalyze VERB --help" (exit 3). */
static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int negative = s[0] == '-' && s[1] >= '0' && s[1] <= '9';
	if (!negative && (!*s || *end || s[0] == '-' || s[0] == '+' || s[0] == ' ' || (errno && errno != ERANGE))) {
		cmd_usage_error("%s: %s: not a whole number", opt, s);
		return -1;
	}
	if (negative || errno == ERANGE || v < min || v > max) {
		cmd_usage_error("%s: %s: out of range (%" PRIu64 " to %" PRIu64 ")", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int an_parse_opt(int argc, char **argv, int *i, struct an_opts *o)
{
	/* Bounds that keep each option meaningful: a burst is at least two
	 * kernels, a threshold of 0 would flag everything (or nothing), and
	 * microseconds stay far from overflowing nanoseconds. */
	static const struct {
		const char *name;
		int which;
		uint64_t min, max;
	} num_opts[] = {
		{"--gap-us", 0, 1, 3600000000ULL},   /* 1 us .. 1 h */
		{"--burst-min", 1, 2, UINT32_MAX},
		{"--burst-kernel-us", 2, 1, 60000000}, /* 1 us .. 1 min */
		{"--scalar-bytes", 3, 1, 1ULL << 30},
		{"--pingpong-min", 4, 1, UINT32_MAX},
		{"--sync-min", 5, 1, UINT32_MAX},
		{"--churn-min", 6, 1, UINT32_MAX},
		{"--top", 7, 0, UINT32_MAX},
		{"--scalar-min", 8, 1, UINT32_MAX},
	};
	const char *arg = argv[*i];
	if (!strcmp(arg, "--no-markers")) {
		o->no_markers = 1;
		return 1;
	}
	if (!strncmp(arg, "--steps", 7) && (arg[7] == '=' || !arg[7])) {
		const char *val = arg[7] ? arg + 8 : (*i + 1 < argc ? argv[++*i] : NULL);
		if (val && !strncmp(val, "nvtx:", 5) && val[5]) {
			o->steps_nvtx = val + 5;
			return 1;
		}
		fprintf(stderr, "tbanalyze: --steps: %s: not nvtx:NAME\n", val ? val : "value missing");
		return -1;
	}
	if (!strncmp(arg, "--where", 7) && (arg[7] == '=' || !arg[7])) {
		const char *val = arg[7] ? arg + 8 : (*i + 1 < argc ? argv[++*i] : NULL);
		if (val && (!strcmp(val, "user") || !strcmp(val, "leaf"))) {
			o->where_leaf = !strcmp(val, "leaf");
			return 1;
		}
		if (val)
			cmd_usage_error("--where: %s: not user or leaf", val);
		else
			cmd_usage_error("--where: value missing (user or leaf)");
		return -1;
	}
	for (size_t k = 0; k < sizeof num_opts / sizeof num_opts[0]; k++) {
		size_t nl = strlen(num_opts[k].name);
		const char *val = NULL;
		if (!strcmp(arg, num_opts[k].name)) {
			if (*i + 1 >= argc) {
				cmd_usage_error("%s: value missing (a number from %" PRIu64 " to %" PRIu64 ")", arg,
						num_opts[k].min, num_opts[k].max);
				return -1;
			}
			val = argv[++*i];
		} else if (!strncmp(arg, num_opts[k].name, nl) && arg[nl] == '=') {
			val = arg + nl + 1;
		} else {
			continue;
		}
		uint64_t v;
		if (parse_u64(num_opts[k].name, val, num_opts[k].min, num_opts[k].max, &v))
			return -1;
		switch (num_opts[k].which) {
		case 0: o->gap_ns = v * 1000; break;
		case 1: o->burst_min = (unsigned)v; break;
		case 2: o->burst_kernel_ns = v * 1000; break;
		case 3: o->scalar_bytes = v; break;
		case 4: o->pingpong_min = (unsigned)v; break;
		case 5: o->sync_min = (unsigned)v; break;
		case 6: o->churn_min = (unsigned)v; break;
		case 7: o->top = (unsigned)v; break;
		case 8: o->scalar_min = (unsigned)v; break;
		}
		return 1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze [report] TRACE.zst [--json] [--html FILE] [options]\n"
		   "       tbanalyze [report] DIR | TRACE.zst TRACE.zst... [--json] [options]\n"
		   "  several traces (or a directory of them, one per rank): a section per rank and the\n"
		   "  cross-rank findings (straggler)\n"
		   "  --json              print the report as JSON (doc/report-schema.md)\n"
		   "  --html FILE         also write a self-contained HTML page\n"
		   "%s",
		an_opts_help);
}

static int report_one(const char *path, const char *html, const struct an_opts *opts, int json);

/* Several traces: the cross-rank view. */
static int report_ranks(char **paths, size_t n, const struct an_opts *opts, int json, const char *html)
{
	struct an_ranks R;
	int rc = an_ranks_run(&R, paths, n, opts);
	if (!rc && html) {
		FILE *hf = cmd_output_open(html);
		if (hf)
			an_ranks_report_html(&R, hf);
		if ((rc = hf ? cmd_output_close(hf, html, rc) : TBA_EXIT_INTERNAL)) {
			an_ranks_free(&R);
			return rc;
		}
	}
	if (!rc) {
		if (json)
			an_ranks_report_json(&R, stdout);
		else
			an_ranks_report_text(&R, stdout);
		an_ranks_free(&R);
		rc = cmd_output_close(stdout, NULL, rc);
	}
	return rc;
}

struct report_args {
	struct an_opts opts;
	const char *html;
};

static int report_opt(int argc, char **argv, int *i, void *ctx)
{
	struct report_args *ra = ctx;
	int r = cmd_html_opt(argc, argv, i, &ra->html);
	return r ? r : an_parse_opt(argc, argv, i, &ra->opts);
}

int cmd_report(int argc, char **argv)
{
	struct report_args ra = {.html = NULL};
	an_opts_default(&ra.opts);
	const char *named[argc]; /* the traces named, for several */
	static const struct cmd_args_spec spec = {usage, 1, 1, SIZE_MAX, {"TRACE.zst"}};
	struct cmd_args args = {named, 0, 0};
	int rc = cmd_parse(argc, argv, &spec, &args, report_opt, &ra);
	if (rc != CMD_GO_ON)
		return rc;
	const struct an_opts opts = ra.opts;
	const char *html = ra.html;
	/* A bad --html name is refused before a long analysis, leaving no file. */
	rc = html ? cmd_output_check(html, CMD_OUT_HTML) : TBA_EXIT_OK;
	if (rc)
		return rc;
	char **paths = (char **)named;
	size_t n_paths = args.n_paths;
	const char *path = named[0];
	int json = args.json;
	struct stat ps;
	if (n_paths == 1 && stat(path, &ps) == 0 && S_ISDIR(ps.st_mode)) {
		/* A directory: its traces, one per rank; a directory of one
		 * trace (a run that was not distributed) is that trace's report. */
		char **listed;
		size_t n_listed;
		rc = an_ranks_list_dir(path, &listed, &n_listed);
		if (rc)
			return rc;
		if (n_listed == 1)
			rc = report_one(listed[0], html, &opts, json);
		else
			rc = report_ranks(listed, n_listed, &opts, json, html);
		an_ranks_free_list(listed, n_listed);
		return rc;
	}
	if (n_paths > 1)
		return report_ranks(paths, n_paths, &opts, json, html);
	return report_one(path, html, &opts, json);
}

/* One trace: breakdown and findings as text or JSON, and the HTML page. */
static int report_one(const char *path, const char *html, const struct an_opts *opts_in, int json)
{
	struct an_opts opts = *opts_in;
	opts.keep_timeline = html != NULL;

	struct analysis a;
	int rc = an_run(&a, path, &opts);
	if (rc) {
		an_free(&a);
		return rc;
	}
	if (html) {
		FILE *hf = cmd_output_open(html);
		if (hf)
			an_report_html(&a, hf);
		if ((rc = hf ? cmd_output_close(hf, html, rc) : TBA_EXIT_INTERNAL)) {
			an_free(&a);
			return rc;
		}
	}
	if (json)
		an_report_json(&a, stdout);
	else
		an_report_text(&a, stdout);
	an_free(&a);
	return cmd_output_close(stdout, NULL, TBA_EXIT_OK);
}
