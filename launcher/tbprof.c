/*
 * tbprof: the command that profiles a program with libtbprof.
 *
 *   tbprof record [OPTIONS] [--] COMMAND [ARGS...]
 *   tbprof report ARGS...          (runs tbanalyze ARGS...)
 *   tbprof demo [OPTIONS] [-- RUN.PY ARGS]   (runner/demo.py on simgpu)
 *
 * `record` runs COMMAND with libtbprof preloaded (the library installed
 * beside this program, by absolute path, after the caller's own LD_PRELOAD
 * entries), its options turned into the TBPROF_* variables libtbprof reads
 * (doc/config.md), then says where the traces went and, with --report,
 * runs tbanalyze on them.  It exits as the command did: with its status,
 * or, when the command died of a signal, by the same signal (so a shell
 * sees 128+N, as it would for the command itself).  Signals sent to
 * tbprof alone (kill PID) are passed on to the command; the terminal's
 * (Ctrl-C) reach the command directly, so tbprof does not pass those twice.
 *
 * Why C and not a shell script: a script that waits for its child cannot
 * forward signals without races, nor tell the terminal's Ctrl-C from a
 * kill aimed at it, nor die of the child's signal after reporting.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tbp_config.h"
#include "../libtbprof/control_dir.h"
#include "tbprof/naming.h"
#include "tbprof/options.h"
#include "tbprof/trace.h"

/* Exit statuses of tbprof's own outcomes (common/exit_status.def, shared
 * with tbanalyze); once the command runs, its status is passed on. */
#include "../common/exit_status.h"

static const char main_help[] =
	"NAME\n"
	"    tbprof - profile a PyTorch (or any CUDA/HIP) program: why is the GPU idle?\n"
	"\n"
	"SYNOPSIS\n"
	"    tbprof record [OPTIONS] [--] COMMAND [ARGS...]\n"
	"    tbprof capture PID [--for SECONDS | --steps N] [-o FILE]\n"
	"    tbprof report TRACE... [TBANALYZE OPTIONS]\n"
	"    tbprof demo [-o OUT] [-- RUN.PY ARGS]\n"
	"    tbprof --help | --version\n"
	"\n"
	"DESCRIPTION\n"
	"    `tbprof record` runs COMMAND with libtbprof preloaded: every CUDA/HIP call,\n"
	"    the GPU timeline (CUPTI) and the Python call path of each event are written\n"
	"    to a trace (trace.zst by default), which `tbprof report` (tbanalyze) turns\n"
	"    into a breakdown of GPU time and findings naming the Python lines that keep\n"
	"    the GPU idle.  The command runs unmodified; its output and exit status are\n"
	"    its own.\n"
	"\n"
	"    `tbprof record --help` lists the options.  `tbprof report` is `tbanalyze`:\n"
	"    `tbprof report trace.zst`, `--json`, `--html FILE`, `info`, `diff`, `export`\n"
	"    (tbanalyze --help).\n"
	"\n"
	"    `tbprof record --on-demand` runs the command armed: nothing is recorded\n"
	"    and no file written until `tbprof capture PID` asks for a capture (a\n"
	"    trace of its own; tbprof capture --help).\n"
	"\n"
	"    `tbprof demo` shows what the findings look like on any machine, without a\n"
	"    GPU: it traces a small model that keeps the TorchBench paper's four\n"
	"    performance bugs, with real PyTorch on a SIMULATED GPU, and prints the\n"
	"    report and the lines it blames (tbprof demo --help).\n"
	"\n"
	"EXAMPLES\n"
	"    tbprof record python train.py                 # writes trace.zst\n"
	"    tbprof record --report -o run.zst -- python run.py -m hf_Bert -d cuda -t train\n"
	"    tbprof record --trace-all -o traces/ -- torchrun --nproc_per_node 2 train.py\n"
	"                                                  # traces/rank0.zst, rank1.zst\n"
	"    tbprof report trace.zst\n"
	"\n"
	"EXIT STATUS\n"
	"    record: once COMMAND runs, its status, or 128+N (by dying of signal N)\n"
	"    when it died of signal N.  Otherwise, for every verb and for tbanalyze:\n";
/* (the table of common/exit_status.def goes here) */
static const char main_help_end[] =
	"\n"
	"SEE ALSO\n"
	"    tbanalyze --help; doc/launcher.md, doc/config.md (the TBPROF_* variables).\n";

static const char record_help[] =
	"NAME\n"
	"    tbprof record - run a command under libtbprof and write its GPU trace\n"
	"\n"
	"SYNOPSIS\n"
	"    tbprof record [OPTIONS] [--] COMMAND [ARGS...]\n"
	"\n"
	"DESCRIPTION\n"
	"    Runs COMMAND with libtbprof.so preloaded (the one installed beside tbprof,\n"
	"    after any LD_PRELOAD entries already set) and the options below set as the\n"
	"    TBPROF_* variables of doc/config.md (a TBPROF_* variable already in the\n"
	"    environment applies unless an option sets it).  Every process of the\n"
	"    command that uses CUDA/HIP (with --trace-all: every Python process) writes\n"
	"    its own trace; shells and helper programs write none.  When the command\n"
	"    ends, tbprof prints on stderr where the traces went.\n"
	"\n"
	"    Options end at the first argument that is not one, or at `--`.\n"
	"\n"
	"OPTIONS\n";

/* After the options, which print_record_help writes from tbprof/options.def. */
static const char record_help_tail[] =
	"    --report\n"
	"        When the command ends, run tbanalyze on the traces it left (stdout):\n"
	"        for a directory OUT with several (a job's ranks), tbanalyze OUT, each\n"
	"        rank and the cross-rank view; otherwise each trace.\n"
	"    -q, --quiet\n"
	"        Do not print where the traces went.\n"
	"    -h, --help\n"
	"        This text.\n"
	"\n"
	"EXIT STATUS\n"
	"    The command's.  When the command dies of a signal, tbprof dies of the same\n"
	"    signal after printing where the traces went (without a core dump of its\n"
	"    own), so the caller sees what it would see for the command: a shell's $?\n"
	"    is 128+N.  If that signal does not end tbprof, it exits with 128+N, as\n"
	"    `timeout` does.  A signal sent to tbprof itself (kill PID: TERM, INT,\n"
	"    HUP, QUIT, USR1, USR2, ALRM) is passed on to the command; the terminal's\n"
	"    Ctrl-C and Ctrl-\\ reach the command directly.  tbprof's own failures,\n"
	"    before COMMAND starts: 2 an output name that is a file but not a trace,\n"
	"    3 bad command line (the option is named), 4 -o's directory cannot be\n"
	"    made (or another internal error), 5 libtbprof.so not found, 126\n"
	"    COMMAND cannot be executed, 127 COMMAND not found (tbprof --help lists\n"
	"    every status).\n"
	"\n"
	"ENVIRONMENT\n"
	"    LD_PRELOAD    kept; libtbprof.so is added after its entries.\n"
	"    PYTHONPATH    kept; the directory of the tbprof Python package (and\n"
	"                  nothing else) is added after its entries: `import tbprof`\n"
	"                  works in the command, whichever Python runs it.\n"
	"    NVTX_INJECTION64_PATH  set to libtbprof.so, which records NVTX ranges, unless\n"
	"                  set already (then the ranges go to that tool; tbprof says so).\n"
	"    TBPROF_*      passed on; options override them.  Those without an option:\n";

/* After the variables without a flag, which print_record_help writes from the table. */
static const char record_help_examples[] =
	"\n"
	"EXAMPLES\n"
	"    tbprof record python train.py\n"
	"    tbprof record -o before.zst --report -- python run.py -m resnet50 -d cuda\n"
	"    tbprof record --trace-all -o out/ -- python -m torch.distributed.run \\\n"
	"        --nproc_per_node 2 train.py          # out/rank0.zst, out/rank1.zst\n";

static const char demo_help[] =
	"NAME\n"
	"    tbprof demo - the findings on any machine: a model with the paper's bugs\n"
	"    traced on a simulated GPU\n"
	"\n"
	"SYNOPSIS\n"
	"    tbprof demo [-o OUT] [--python PYTHON] [-- RUN.PY ARGS]\n"
	"\n"
	"DESCRIPTION\n"
	"    Runs models/paper_antipatterns (a small transformer that keeps the four\n"
	"    performance bugs the TorchBench paper found: zero_grad's kernel per\n"
	"    parameter, a scalar copied to the GPU on every call, weights moved to the\n"
	"    CPU and back every step, .item() every step) for 12 training steps with\n"
	"    real PyTorch on simgpu, a SIMULATED GPU: a stand-in CUDA runtime, driver,\n"
	"    CUPTI and cuBLAS that PyTorch's CUDA build runs on unmodified, with GPU\n"
	"    times from a model, not a real GPU.  The run is traced with libtbprof;\n"
	"    then tbanalyze's report is printed, and where it puts the four patterns\n"
	"    in the model's source.  The first line of the output says that the GPU\n"
	"    is simulated.  Takes ~5-20 s; needs PyTorch's CUDA build (pip install\n"
	"    torch, the default on Linux) and a tbprof built with its tests (simgpu).\n"
	"\n"
	"    stdout: that line, the report and the patterns; stderr: progress and\n"
	"    run.py's own output.  Arguments after -- go to run.py (e.g. -- --fixed:\n"
	"    the same model with the four bugs fixed).\n"
	"\n"
	"OPTIONS\n"
	"    -o, --output OUT\n"
	"        The trace (default tbprof-demo.zst; the name ends in .zst).  A trace\n"
	"        already there is replaced; any other file is left alone (exit 2).\n"
	"    --python PYTHON\n"
	"        The Python with PyTorch (default python3 on PATH).\n"
	"    -h, --help\n"
	"        This text.\n"
	"\n"
	"FILES\n"
	"    From the build tree: build/tests/simgpu (the stand-ins) and the source\n"
	"    tree's run.py, runner/ and models/.  Installed: PREFIX/LIBDIR/tbprof/simgpu\n"
	"    and PREFIX/share/tbprof (run.py, runner/, the model), found from where\n"
	"    tbprof is (so a moved or DESTDIR install works), else at the prefix\n"
	"    configured at build time.\n"
	"\n"
	"EXIT STATUS\n"
	"    0 done; 2 -o names a file that is not a trace; 3 bad command line;\n"
	"    5 this build or machine cannot run it (no simgpu, no PyTorch or a\n"
	"    CPU-only PyTorch: the message says which); 127 PYTHON not found; else\n"
	"    the status of the step that failed (the traced run's, tbanalyze's).\n";

static const char *prog_dir;   /* directory of this executable */
static const char *cmd_name = "tbprof record"; /* in usage errors */

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tbp_usage_error_vprint(cmd_name, fmt, ap);
	va_end(ap);
	exit(TBP_EXIT_USAGE);
}

/* A failure that is not the command line's (it is named, not the --help):
 * one line, the status of common/exit_status.def given. */
static void fail_with(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail_with(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cmd_name);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

static bool file_is_trace(const char *path);

/* An output name that is an existing file, not empty and not a trace (the
 * program's own train.py, notes): refused before anything runs, exit 2,
 * rather than left alone with the trace written beside it under a name
 * nobody asked for.  A symlink, a device, a FIFO are libtbprof's to judge
 * (doc/config.md: never followed, written as they are). */
static void refuse_foreign_output(const char *opt, const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && !file_is_trace(path))
		fail_with(TBP_EXIT_BAD_INPUT, "%s %s: exists and is not a trace: not overwritten (remove it or name "
			  "another file)", opt, path);
}

/* One trace file's name (capture -o, demo -o): an existing file of another kind is bad input, any
 * other name that is not a trace file's a usage slip. */
static void require_trace_file_name(const char *opt, const char *v)
{
	struct stat st;
	if (tbp_name_classify(v, NULL) == TBP_OUT_FILE)
		return;
	if (stat(v, &st) == 0 && S_ISREG(st.st_mode))
		fail_with(TBP_EXIT_BAD_INPUT, "%s %s: exists and is not a trace: not overwritten (name a .zst file)", opt,
			  v);
	usage_error("%s: '%s' is not a trace file's name (it ends in " TBP_NAME_EXT ")", opt, v);
}

/* ------------------------------------------------------------ finding the pieces */

static bool is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory the running executable is in (symlinks resolved). */
static const char *find_prog_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
	if (n <= 0)
		return NULL;
	dir[n] = 0;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	return dir;
}

/* `to` relative to `from` (both absolute, normalized): the path that
 * leads from the install bindir to the install libdir, applied to wherever
 * tbprof runs from, so an install moved as a whole (DESTDIR, a copied
 * prefix) still finds its own library. */
static void relative_path(char *out, size_t cap, const char *from, const char *to)
{
	size_t common = 0, i = 0;
	for (; from[i] && from[i] == to[i]; i++)
		if (from[i] == '/')
			common = i + 1;
	if (!from[i] && (to[i] == '/' || !to[i]))
		common = i + (to[i] == '/');
	out[0] = 0;
	size_t o = 0;
	for (const char *p = from + common; *p;) {
		o += (size_t)snprintf(out + o, cap - o, "../");
		const char *next = strchr(p, '/');
		if (!next)
			break;
		p = next + 1;
	}
	if (o >= cap)
		o = cap - 1;
	snprintf(out + o, cap - o, "%s", to + common);
}

/* Where an installed directory is: along the bindir -> install_dir path
 * from tbprof (`relative`), or install_dir as configured. */
static void installed_dir(char *out, size_t cap, const char *install_dir, bool relative)
{
	char rel[PATH_MAX];
	relative_path(rel, sizeof rel, TBPROF_INSTALL_BINDIR, install_dir);
	if (relative && prog_dir)
		snprintf(out, cap, "%s%s%s", prog_dir, rel[0] ? "/" : "", rel);
	else
		snprintf(out, cap, "%s", install_dir);
}

/* Path of a piece that lives `build_rel` from tbprof in the build tree
 * (tests run it from there) or in `install_dir` once installed. */
static bool find_piece(char *out, size_t cap, const char *build_rel, const char *install_dir, const char *name)
{
	if (!prog_dir)
		return false;
	snprintf(out, cap, "%s/%s/%s", prog_dir, build_rel, name);
	if (is_file(out))
		return true;
	char dir[PATH_MAX];
	installed_dir(dir, sizeof dir, install_dir, true);
	if (snprintf(out, cap, "%s/%s", dir, name) < (int)cap && is_file(out))
		return true;
	snprintf(out, cap, "%s/%s", install_dir, name);
	return is_file(out);
}

/* ------------------------------------------------------------ options */

struct setting {
	const char *var, *value;
};

struct record_opts {
	const char *out;
	struct setting env[32];
	int nenv;
	bool report, quiet, on_demand;
	const char *flight, *flight_mem;
	char **command;
};

/* One setting per option of the table at most, TBPROF_OUT included. */
_Static_assert(TBP_OPT_COUNT <= sizeof ((struct record_opts *)0)->env / sizeof ((struct record_opts *)0)->env[0],
	"record_opts.env cannot hold every option of options.def");

static void set_var(struct record_opts *o, const char *var, const char *value)
{
	for (int i = 0; i < o->nenv; i++)
		if (!strcmp(o->env[i].var, var)) {
			o->env[i].value = value;
			return;
		}
	o->env[o->nenv++] = (struct setting){var, value};
}

/* A flag's value, checked now with libtbprof's own parser (tbprof/options.h)
 * so a typo is an error before the command runs, not a warning in the
 * middle of its output. */
static void check_value(const char *opt, const struct tbp_option *o, const char *v)
{
	union tbp_opt_value parsed;
	if (tbp_opt_parse(o, v, &parsed, NULL))
		return;
	switch (o->type) {
	case TBP_OPT_SIZE:
		usage_error("%s: '%s' is not a size from %llu to %llu bytes (suffixes K, M, G, T)", opt, v, o->lo, o->hi);
	case TBP_OPT_SECONDS:
		usage_error("%s: '%s' is not a positive number (at most %llu)", opt, v, o->hi);
	case TBP_OPT_CHOICE:
		usage_error("%s: '%s' is not one of: %s", opt, v, o->metavar);
	case TBP_OPT_BOOL:
	case TBP_OPT_LEVEL:
		usage_error("%s: '%s' is not a boolean (1/true/yes/on, 0/false/no/off)", opt, v);
	default:
		usage_error("%s: '%s' is not a number from %llu to %llu", opt, v, o->lo, o->hi);
	}
}

/* An unsigned decimal within [lo, hi] (the options' grammar, for the commands' own numbers). */
static void check_number(const char *opt, const char *v, unsigned long long lo, unsigned long long hi, bool size)
{
	struct tbp_option o = { .type = size ? TBP_OPT_SIZE : TBP_OPT_UINT, .lo = lo, .hi = hi };
	check_value(opt, &o, v);
}

/* 8388608 -> "8M": a table's byte count as the help writes it. */
static const char *size_text(char *buf, size_t cap, unsigned long long n)
{
	static const char units[] = "KMGT";
	int u = -1;
	while (u < 3 && n && !(n & 1023)) {
		n >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%llu", n);
	else
		snprintf(buf, cap, "%llu%c", n, units[u]);
	return buf;
}

/* Writes text wrapped at 78 columns, each line indented by 8; two spaces
 * between sentences stay two within a line. */
static void print_wrapped(const char *text)
{
	int col = 0, gap = 0;
	for (const char *p = text; *p;) {
		size_t spaces = strspn(p, " ");
		p += spaces;
		if (col)
			gap = spaces >= 2 ? 2 : 1;
		size_t len = strcspn(p, " ");
		if (!len)
			break;
		if (col && col + gap + (int)len > 78) {
			fputc('\n', stdout);
			col = 0;
		}
		printf("%*s%.*s", col ? gap : 8, "", (int)len, p);
		col += (col ? gap : 8) + (int)len;
		p += len;
	}
	if (col)
		fputc('\n', stdout);
}

/* An option's help paragraph with, in parentheses, its variable (when
 * with_var), what its flag sets or its range, and its default. */
static void option_help(char *text, size_t cap, const struct tbp_option *o, bool with_var)
{
	char lo[32], hi[32], note[256] = "";
	size_t n = 0;
	if (o->flag && o->sets)
		n += snprintf(note + n, sizeof note - n, "=%s", o->sets);
	else if (o->type == TBP_OPT_UINT)
		n += snprintf(note + n, sizeof note - n, ": %llu..%llu", o->lo, o->hi);
	else if (o->type == TBP_OPT_SIZE)
		n += snprintf(note + n, sizeof note - n, ": %s..%s, suffixes K M G T",
			size_text(lo, sizeof lo, o->lo), size_text(hi, sizeof hi, o->hi));
	else if (o->type == TBP_OPT_SECONDS)
		n += snprintf(note + n, sizeof note - n, ": 0 < %s <= %llu", o->metavar ? o->metavar : "S", o->hi);
	if (!(o->flag && o->sets) && o->dflt)
		n += snprintf(note + n, sizeof note - n, "; default %s", o->dflt);
	/* without the variable's name, the note's leading ": " or "; " goes */
	const char *shown = with_var ? note : note + (note[0] == ':' || note[0] == ';' ? 2 : 0);
	if (with_var)
		snprintf(text, cap, "%s  (%s%s)", o->help, o->var, shown);
	else if (*shown)
		snprintf(text, cap, "%s  (%s)", o->help, shown);
	else
		snprintf(text, cap, "%s", o->help);
}

/* tbprof record --help: the options are the table's (tbprof/options.def), each with the variable
 * it sets, its range and its default. */
static void print_record_help(void)
{
	fputs(record_help, stdout);
	for (size_t k = 0; k < TBP_OPT_COUNT; k++) {
		const struct tbp_option *o = &tbp_options[k];
		if (!o->flag)
			continue;
		printf("    %s%s%s%s%s\n", o->short_flag ? o->short_flag : "", o->short_flag ? ", " : "", o->flag,
			o->sets ? "" : " ", o->sets ? "" : o->metavar);
		char text[2048];
		option_help(text, sizeof text, o, true);
		print_wrapped(text);
	}
	fputs(record_help_tail, stdout);
	for (size_t k = 0; k < TBP_OPT_COUNT; k++) {
		const struct tbp_option *o = &tbp_options[k];
		if (o->flag)
			continue;
		printf("    %s\n", o->var);
		char text[2048];
		option_help(text, sizeof text, o, false);
		print_wrapped(text);
	}
	fputs(record_help_examples, stdout);
}

/* Matches argv[*i] against --name / --name=VALUE / -s [VALUE]; returns the
 * value (advancing *i past it) for options that take one. */
static bool opt_is(char **argv, int argc, int *i, const char *lng, const char *shrt, bool takes_value,
	const char **value)
{
	const char *a = argv[*i];
	size_t len = strlen(lng);
	bool eq = takes_value && !strncmp(a, lng, len) && a[len] == '=';
	if (!eq && strcmp(a, lng) && !(shrt && !strcmp(a, shrt)))
		return false;
	if (!takes_value) {
		return true;
	}
	if (eq) {
		*value = a + len + 1;
		return true;
	}
	if (*i + 1 >= argc)
		usage_error("%s needs a value", a);
	*value = argv[++*i];
	return true;
}

/* -o OUT, classified by the naming rules (tbp_name_classify): a file when
 * it ends in .zst (or is a device or FIFO such as /dev/null); a directory
 * when it is one, ends in '/', or is a new name without an extension,
 * created now (with its parents) so a mistake shows before the command
 * runs, and passed on with a trailing '/' so libtbprof takes it as one:
 * `-o traces` leaves traces/rank0.zst, traces/rank1.zst ... or
 * traces/trace.zst.  Any other name (`-o train.py`) is not a trace's:
 * refused before anything runs. */
static const char *output_name(const char *opt, const char *v)
{
	size_t len = strlen(v);
	struct stat st;
	const char *why = NULL;
	enum tbp_out_kind kind = tbp_name_classify(v, &why);
	if (kind == TBP_OUT_NOT_A_TRACE) {
		/* an existing file of another kind is bad input (as tbanalyze's -o); a new name, a usage slip */
		if (stat(v, &st) == 0)
			fail_with(TBP_EXIT_BAD_INPUT, "%s %s: exists and is not a trace: not overwritten (name a .zst "
				  "file or a directory)", opt, v);
		usage_error("%s: '%s': %s", opt, v, why);
	}
	if (kind == TBP_OUT_FILE) {
		refuse_foreign_output(opt, v);
		return v;
	}
	char *dir = malloc(len + 2);
	if (!dir)
		fail_with(TBP_EXIT_INTERNAL, "%s: out of memory", opt);
	memcpy(dir, v, len + 1);
	for (char *p = dir + 1; ; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(dir, 0777) != 0 && errno != EEXIST)
			fail_with(TBP_EXIT_INTERNAL, "%s: cannot create directory %s: %s", opt, dir, strerror(errno));
		*p = c;
		if (!c)
			break;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		fail_with(TBP_EXIT_INTERNAL, "%s: %s is not a directory", opt, dir);
	if (dir[len - 1] != '/')
		memcpy(dir + len, "/", 2);
	return dir;
}

/* The value an option of the command line set for var, or NULL. */
static const char *setting(const struct record_opts *o, const char *var)
{
	for (int i = 0; i < o->nenv; i++)
		if (!strcmp(o->env[i].var, var))
			return o->env[i].value;
	return NULL;
}

/* argv[*i] as one of the table's flags (tbprof/options.def): its value
 * checked, its variable set.  False when it is none of them. */
static bool record_flag(char **argv, int argc, int *i, struct record_opts *o)
{
	const char *a = argv[*i];
	for (size_t k = 0; k < TBP_OPT_COUNT; k++) {
		const struct tbp_option *opt = &tbp_options[k];
		const char *v = NULL;
		if (!opt->flag || !opt_is(argv, argc, i, opt->flag, opt->short_flag, !opt->sets, &v))
			continue;
		if (k == TBP_OPT_OUT) {
			if (!*v)
				usage_error("%s: empty output name", a);
			o->out = output_name(a, v);
			return true;
		}
		if (opt->sets)
			v = opt->sets;
		else
			check_value(opt->flag, opt, v);
		set_var(o, opt->var, v);
		return true;
	}
	return false;
}

static void parse_record(int argc, char **argv, struct record_opts *o)
{
	int i = 0;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || !a[1])
			break;
		if (opt_is(argv, argc, &i, "--help", "-h", false, NULL)) {
			print_record_help();
			exit(0);
		} else if (record_flag(argv, argc, &i, o)) {
			continue;
		} else if (opt_is(argv, argc, &i, "--report", NULL, false, NULL)) {
			o->report = true;
		} else if (opt_is(argv, argc, &i, "--quiet", "-q", false, NULL)) {
			o->quiet = true;
		} else {
			usage_error("unknown option '%s'", a);
		}
	}
	if (i >= argc)
		usage_error("no command to run");
	o->command = argv + i;
	o->on_demand = setting(o, tbp_options[TBP_OPT_ON_DEMAND].var) || setting(o, tbp_options[TBP_OPT_CAPTURE_RANGE].var);
	o->flight = setting(o, tbp_options[TBP_OPT_FLIGHT].var);
	o->flight_mem = setting(o, tbp_options[TBP_OPT_FLIGHT_MEM].var);
	const char *out_var = tbp_options[TBP_OPT_OUT].var;
	const char *env_out = getenv(out_var);
	if (!o->out && env_out && *env_out) {
		o->out = env_out;   /* the caller's own variable: passed on as it is */
		return;
	}
	if (!o->out)
		o->out = TBP_NAME_DEFAULT;
	/* Made absolute from here: libtbprof resolves a relative name against
	 * the directory current when tracing starts, and a program that has
	 * changed directory by then would put its trace where tbprof does
	 * not look. */
	static char abs_out[PATH_MAX + 2];
	char cwd[PATH_MAX];
	if (o->out[0] != '/' && getcwd(cwd, sizeof cwd) &&
	    snprintf(abs_out, sizeof abs_out, "%s/%s", cwd, o->out) < (int)sizeof abs_out)
		set_var(o, out_var, abs_out);
	else
		set_var(o, out_var, o->out);
}

/* ------------------------------------------------------------ running */

static volatile sig_atomic_t child_pid;

/* A signal for tbprof: pass it on to the command.  Not when the kernel
 * sent it (SI_KERNEL: the terminal's Ctrl-C, Ctrl-\, hangup go to the
 * whole foreground process group, the command got its own copy). */
static void forward_signal(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (child_pid > 0 && si->si_code != SI_KERNEL)
		kill(child_pid, sig);
}

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

/* The directory that holds the tbprof Python package and nothing else (python/meson.build installs
 * it as LIBDIR/tbprof/python beside libtbprof.so; the build tree's is the source tree's python/), so
 * `import tbprof` works in the traced program, whichever Python runs it, without putting a whole
 * site-packages (and its other packages) on its path.  "" when there is none. */
static char python_dir[PATH_MAX];

static void find_python_dir(const char *lib)
{
	char probe[PATH_MAX + 32];
	const char *slash = strrchr(lib, '/');
	int dir_len = slash ? (int)(slash - lib) : 0;
	bool build_tree = slash && dir_len >= 10 && !strncmp(slash - 10, "/libtbprof", 10);
	if (build_tree)
		snprintf(python_dir, sizeof python_dir, "%s/python", TBPROF_SOURCE_ROOT);
	else
		snprintf(python_dir, sizeof python_dir, "%.*s/tbprof/python", dir_len, lib);
	if (snprintf(probe, sizeof probe, "%s/tbprof/__init__.py", python_dir) >= (int)sizeof probe || !is_file(probe))
		python_dir[0] = 0;
}

static void child_exec(const struct record_opts *o, const char *lib)
{
	for (int i = 0; i < o->nenv; i++)
		setenv(o->env[i].var, o->env[i].value, 1);
	if (python_dir[0]) {
		/* After the caller's entries: the program's own modules come first. */
		const char *path = getenv("PYTHONPATH");
		if (!path || !*path) {
			setenv("PYTHONPATH", python_dir, 1);
		} else if (!strstr(path, python_dir)) {
			size_t len = strlen(path) + strlen(python_dir) + 2;
			char *both = malloc(len);
			if (!both)
				_exit(TBP_EXIT_CANNOT_RUN);
			snprintf(both, len, "%s:%s", path, python_dir);
			setenv("PYTHONPATH", both, 1);
		}
	}
	/* NVTX ranges come to libtbprof as NVTX's injection library (cmd_record said so when the user's
	 * own is set). */
	const char *nvtx = getenv("NVTX_INJECTION64_PATH");
	if (!nvtx || !*nvtx)
		setenv("NVTX_INJECTION64_PATH", lib, 1);
	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old) {
		setenv("LD_PRELOAD", lib, 1);
	} else if (!strstr(old, lib)) {
		/* after the caller's entries: a sanitizer runtime must stay first */
		size_t len = strlen(old) + strlen(lib) + 2;
		char *both = malloc(len);
		if (!both)
			_exit(TBP_EXIT_CANNOT_RUN);
		snprintf(both, len, "%s:%s", old, lib);
		setenv("LD_PRELOAD", both, 1);
	}
	execvp(o->command[0], o->command);
	int e = errno;
	fprintf(stderr, "tbprof: %s: %s\n", o->command[0], strerror(e));
	_exit(e == ENOENT ? TBP_EXIT_NOT_FOUND : TBP_EXIT_CANNOT_RUN);
}

/* ------------------------------------------------------------ the traces left */

struct found {
	char **paths;
	size_t n, cap;
};

static bool file_is_trace(const char *path)
{
	unsigned char head[TBP_TRACE_PREFIX_LEN];
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	size_t n = fread(head, 1, sizeof head, f);
	fclose(f);
	return tbp_is_trace_prefix(head, n);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The traces this run wrote: in OUT's directory, names libtbprof may have
 * given (OUT itself; <stem>.<pid>[-N]<ext>; %p and %r as wildcards; every
 * .zst in a directory OUT), traces by their magic, modified since the
 * command started (the coarse clock: file times come from it). */
static bool out_is_dir(const char *out)
{
	return tbp_name_is_dir(out);
}

static void find_traces(const char *out, const struct timespec *since, struct found *fd)
{
	char dir[PATH_MAX];
	struct stat st;
	bool is_dir = out_is_dir(out);
	if (is_dir) {
		snprintf(dir, sizeof dir, "%s", out);
	} else {
		const char *slash = strrchr(out, '/');
		if (slash)
			snprintf(dir, sizeof dir, "%.*s", (int)(slash - out + (slash == out)), out);
		else
			snprintf(dir, sizeof dir, ".");
	}
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (is_dir ? fnmatch("*" TBP_NAME_EXT, e->d_name, 0) : !tbp_name_is_output_of(out, e->d_name))
			continue;
		char path[2 * PATH_MAX + 2];
		if (!strcmp(dir, "."))
			snprintf(path, sizeof path, "%s", e->d_name);
		else
			snprintf(path, sizeof path, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name);
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (st.st_mtim.tv_sec < since->tv_sec ||
		    (st.st_mtim.tv_sec == since->tv_sec && st.st_mtim.tv_nsec < since->tv_nsec))
			continue;
		if (!file_is_trace(path))
			continue;
		if (fd->n == fd->cap) {
			size_t cap = fd->cap ? 2 * fd->cap : 8;
			char **p = realloc(fd->paths, cap * sizeof *p);
			if (!p)
				break;
			fd->paths = p;
			fd->cap = cap;
		}
		fd->paths[fd->n] = strdup(path);
		if (fd->paths[fd->n])
			fd->n++;
	}
	closedir(d);
	if (fd->n > 1) /* paths is NULL when none was found: qsort's arguments must not be */
		qsort(fd->paths, fd->n, sizeof *fd->paths, cmp_str);
}

static void print_summary(const struct found *fd, bool trace_all)
{
	if (!fd->n) {
		fprintf(stderr, "tbprof: no trace written: no process of the command used CUDA/HIP%s\n",
			trace_all ? " nor ran Python long enough to record anything"
				  : " (--trace-all traces CPU-only Python programs)");
		return;
	}
	if (fd->n == 1) {
		fprintf(stderr, "tbprof: trace written to %s\n", fd->paths[0]);
		return;
	}
	fprintf(stderr, "tbprof: %zu traces written:", fd->n);
	for (size_t i = 0; i < fd->n; i++)
		fprintf(stderr, " %s", fd->paths[i]);
	fputc('\n', stderr);
}

/* --report: tbanalyze on what the run left.  A directory OUT with several
 * traces (the ranks of a job) is one report, tbanalyze DIR: each rank and
 * the cross-rank view; otherwise one report per trace. */
static void run_reports(const struct found *fd, const char *out_dir)
{
	char tba[PATH_MAX];
	if (!find_piece(tba, sizeof tba, "../analyze", TBPROF_INSTALL_BINDIR, "tbanalyze")) {
		fprintf(stderr, "tbprof: --report: tbanalyze not found beside %s\n", prog_dir ? prog_dir : "tbprof");
		return;
	}
	size_t n = out_dir && fd->n > 1 ? 1 : fd->n;
	for (size_t i = 0; i < n; i++) {
		const char *what = n < fd->n ? out_dir : fd->paths[i];
		if (n > 1)
			printf("%s== %s ==\n", i ? "\n" : "", what);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			execl(tba, "tbanalyze", what, (char *)NULL);
			fprintf(stderr, "tbprof: %s: %s\n", tba, strerror(errno));
			_exit(TBP_EXIT_CANNOT_RUN);
		}
		int status;
		while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
}

/* Ends tbprof as the command ended: its exit status, or death by its
 * signal (no core file of tbprof's own: the command dumped its core, if
 * any), else 128+N. */
static void exit_like(int status)
{
	if (WIFEXITED(status))
		exit(WEXITSTATUS(status));
	int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
	struct rlimit no_core = {0, 0};
	setrlimit(RLIMIT_CORE, &no_core);
	fflush(NULL);
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	exit(128 + sig);
}

static int cmd_record(int argc, char **argv)
{
	struct record_opts o = {0};
	parse_record(argc, argv, &o);
	char lib[PATH_MAX];
	if (!find_piece(lib, sizeof lib, "../libtbprof", TBPROF_INSTALL_LIBDIR, "libtbprof.so")) {
		fprintf(stderr, "tbprof: libtbprof.so not found (looked beside %s and in %s)\n",
			prog_dir ? prog_dir : "tbprof", TBPROF_INSTALL_LIBDIR);
		return TBP_EXIT_UNAVAILABLE;
	}
	char abs_lib[PATH_MAX];
	if (realpath(lib, abs_lib))
		snprintf(lib, sizeof lib, "%s", abs_lib);
	find_python_dir(lib);
	const char *nvtx = getenv("NVTX_INJECTION64_PATH");
	if (nvtx && *nvtx && strcmp(nvtx, lib) && !o.quiet)
		fprintf(stderr, "tbprof: NVTX_INJECTION64_PATH is set (%s): NVTX ranges go there, not into the trace\n",
			nvtx);

	struct timespec start;
	clock_gettime(CLOCK_REALTIME_COARSE, &start);

	/* Signals blocked across fork: a forwarded signal never finds
	 * child_pid unset, and the child starts with the caller's mask. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "tbprof: fork: %s\n", strerror(errno));
		return TBP_EXIT_INTERNAL;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		child_exec(&o, lib);
	}
	child_pid = pid;
	if (o.on_demand && !o.quiet)
		fprintf(stderr, "tbprof: armed on demand: tbprof capture %d [--for SECONDS | --steps N]\n",
			(int)getpid());
	if (o.flight && !o.quiet)
		fprintf(stderr, "tbprof: flight recorder: the last %s s in at most %s bytes per process "
			"(--flight-mem; %s), written by tbprof capture %d or a crash\n", o.flight,
			o.flight_mem ? o.flight_mem : tbp_options[TBP_OPT_FLIGHT_MEM].dflt,
			tbp_options[TBP_OPT_FLIGHT_MEM].dflt, (int)getpid());
	struct sigaction sa = {0};
	sa.sa_sigaction = forward_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaction(forwarded[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);

	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "tbprof: waitpid: %s\n", strerror(errno));
			return TBP_EXIT_INTERNAL;
		}
	}
	child_pid = 0;
	/* The command's own launch failures (127, 126) are not a run. */
	bool ran = !(WIFEXITED(status) && (WEXITSTATUS(status) == TBP_EXIT_NOT_FOUND ||
					   WEXITSTATUS(status) == TBP_EXIT_CANNOT_RUN));
	struct found fd = {0};
	find_traces(o.out, &start, &fd);
	if (!o.quiet && (o.on_demand || o.flight) && !fd.n)
		fprintf(stderr, "tbprof: on demand: no capture under the run's trace name (captures named by "
			"tbprof capture -o or tbprof.capture(PATH) are not listed here)\n");
	else if (!o.quiet && (ran || fd.n)) {
		/* as libtbprof reads it: TBPROF_TRACE_ALL=false is false (it was true here) */
		const struct tbp_option *ta_opt = &tbp_options[TBP_OPT_TRACE_ALL];
		const char *ta = setting(&o, ta_opt->var);
		if (!ta)
			ta = getenv(ta_opt->var);
		union tbp_opt_value ta_value;
		if (!ta || !*ta || !tbp_opt_parse(ta_opt, ta, &ta_value, NULL))
			ta_value = tbp_opt_default(ta_opt);
		print_summary(&fd, ta_value.b);
	}
	if (o.report && fd.n)
		run_reports(&fd, out_is_dir(o.out) ? o.out : NULL);
	exit_like(status);
	return 0;
}


/* ------------------------------------------------------------ capture */

static const char capture_help[] =
	"NAME\n"
	"    tbprof capture - take a trace of a running process armed by\n"
	"    `tbprof record --on-demand`\n"
	"\n"
	"SYNOPSIS\n"
	"    tbprof capture PID [--for SECONDS | --steps N] [-o FILE] [--timeout SECONDS]\n"
	"\n"
	"DESCRIPTION\n"
	"    PID is a process started under `tbprof record --on-demand` (or with\n"
	"    TBPROF_ON_DEMAND=1 and libtbprof preloaded), or the `tbprof record` that\n"
	"    started it: then every traced process under it takes the capture and\n"
	"    writes its own file (a torchrun job: one per rank).  The capture is a\n"
	"    complete trace, for every tbanalyze verb.  The job does not notice: its\n"
	"    output and exit status are its own.  Captures can repeat.\n"
	"\n"
	"    The request travels through a directory only its user can enter\n"
	"    (/run/user/UID/tbprof, else /tmp/tbprof-UID, refused unless owned by\n"
	"    the user with mode 0700): only the process's user, or root, can capture it.\n"
	"\n"
	"OPTIONS\n"
	"    --for SECONDS\n"
	"        Record SECONDS from now (default: 5).\n"
	"    --steps N\n"
	"        Record N training steps from the next step boundary: the runner's\n"
	"        iteration marks, or tbprof.mark_step() in the program; in a Python\n"
	"        program without marks, from now, counting its backward() calls.\n"
	"    -o, --output FILE\n"
	"        The file, whose name ends in .zst (several processes: FILE with\n"
	"        .rank<N> or .<pid> after its stem).  Default: the process's trace\n"
	"        name with .capture<K> after its stem (trace.capture1.zst,\n"
	"        rank0.capture1.zst, ...).\n"
	"    --timeout SECONDS\n"
	"        Give up after SECONDS (default: --for's time + 30, or 600 with\n"
	"        --steps); the capture is then ended where it is.\n"
	"\n"
	"OUTPUT\n"
	"    The file(s) written, one per line, on stdout.\n"
	"\n"
	"EXIT STATUS\n"
	"    0 written; 1 timed out, or nothing recorded; 2 PID is not a process of\n"
	"    this user that tbprof traces on demand; 3 bad command line; 4 the\n"
	"    request could not be written.\n";

/* Reads a small file; its length, or -1. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = 0;
	return (ssize_t)n;
}

/* ppid and start time of pid from /proc/PID/stat; false when it is gone. */
static bool proc_ids(pid_t pid, pid_t *ppid, unsigned long long *ticks)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (slurp(path, buf, sizeof buf) <= 0)
		return false;
	char *p = strrchr(buf, ')');
	if (!p)
		return false;
	int field = 2;
	for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
		++field;
		if (field == 4)
			*ppid = (pid_t)strtol(tok, NULL, 10);
		if (field == 22) {
			*ticks = strtoull(tok, NULL, 10);
			return true;
		}
	}
	return false;
}

/* Is pid armed: its PID.armed file in dir, written by this very process (same start time)? */
static bool pid_armed(const char *dir, pid_t pid)
{
	char path[PATH_MAX + 32], buf[64];
	snprintf(path, sizeof path, "%s/%d.armed", dir, (int)pid);
	pid_t ppid;
	unsigned long long ticks;
	return slurp(path, buf, sizeof buf) > 0 && proc_ids(pid, &ppid, &ticks) && strtoull(buf, NULL, 10) == ticks;
}

/* Is pid a descendant of top? */
static bool descends_from(pid_t pid, pid_t top)
{
	for (int depth = 0; depth < 256 && pid > 1; depth++) {
		pid_t ppid;
		unsigned long long ticks;
		if (!proc_ids(pid, &ppid, &ticks))
			return false;
		if (ppid == top)
			return true;
		pid = ppid;
	}
	return false;
}

static int capture_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int capture_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tbprof capture: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return TBP_EXIT_BAD_INPUT;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmd_capture(int argc, char **argv)
{
	cmd_name = "tbprof capture";
	const char *pid_arg = NULL, *out = NULL;
	double for_s = 0, timeout_s = 0;
	long long steps = 0;
	for (int i = 0; i < argc; i++) {
		const char *v = NULL;
		if (opt_is(argv, argc, &i, "--help", "-h", false, NULL)) {
			fputs(capture_help, stdout);
			return 0;
		} else if (opt_is(argv, argc, &i, "--for", NULL, true, &v)) {
			char *end;
			for_s = strtod(v, &end);
			if (*end || !(for_s > 0) || for_s > 86400)
				usage_error("--for: '%s' is not a number of seconds (0 < S <= 86400)", v);
		} else if (opt_is(argv, argc, &i, "--timeout", NULL, true, &v)) {
			char *end;
			timeout_s = strtod(v, &end);
			if (*end || !(timeout_s > 0))
				usage_error("--timeout: '%s' is not a number of seconds", v);
		} else if (opt_is(argv, argc, &i, "--steps", NULL, true, &v)) {
			check_number("--steps", v, 1, 1000000000, false);
			steps = strtoll(v, NULL, 10);
		} else if (opt_is(argv, argc, &i, "--output", "-o", true, &v)) {
			/* a capture is one trace file: the naming rules' file name (ends in .zst) */
			require_trace_file_name("-o", v);
			out = v;
		} else if (argv[i][0] == '-' || pid_arg) {
			usage_error("unknown argument '%s'", argv[i]);
		} else {
			pid_arg = argv[i];
		}
	}
	if (!pid_arg)
		usage_error("no PID given");
	if (steps && for_s)
		usage_error("--for and --steps: one or the other");
	char *end;
	long pid_l = strtol(pid_arg, &end, 10);
	if (*end || pid_l <= 1 || pid_l > INT_MAX)
		usage_error("'%s' is not a process id", pid_arg);
	pid_t pid = (pid_t)pid_l;
	if (!for_s && !steps)
		for_s = 5;
	if (!timeout_s)
		timeout_s = steps ? 600 : for_s + 30;
	if (out)
		refuse_foreign_output("-o", out);

	char proc[64];
	struct stat st;
	snprintf(proc, sizeof proc, "/proc/%d", (int)pid);
	if (stat(proc, &st) != 0)
		return capture_fail("no process %d", (int)pid);
	if (st.st_uid != getuid() && getuid() != 0)
		return capture_fail("process %d is not yours (uid %u): only its user or root may capture it",
			(int)pid, (unsigned)st.st_uid);
	char dir[PATH_MAX];
	if (tbp_control_dir(st.st_uid, false, dir, sizeof dir) != 0)
		return capture_fail("process %d is not traced on demand%s (start it with tbprof record --on-demand)",
			(int)pid, errno == EPERM ? "; and the request directory is not private to its user, refused" : "");

	/* The process itself, or the armed processes under it (a launcher, torchrun). */
	pid_t targets[256];
	int nt = 0;
	if (pid_armed(dir, pid)) {
		targets[nt++] = pid;
	} else {
		DIR *d = opendir("/proc");
		struct dirent *e;
		while (d && (e = readdir(d)) && nt < 256) {
			char *pe;
			long p = strtol(e->d_name, &pe, 10);
			if (*pe || p <= 1)
				continue;
			if (pid_armed(dir, (pid_t)p) && descends_from((pid_t)p, pid))
				targets[nt++] = (pid_t)p;
		}
		if (d)
			closedir(d);
	}
	if (!nt)
		return capture_fail("process %d is not traced on demand, nor any process under it (start it with "
			"tbprof record --on-demand)", (int)pid);

	char abs_out[PATH_MAX + 2] = "";
	if (out) {
		char cwd[PATH_MAX];
		if (out[0] != '/' && getcwd(cwd, sizeof cwd))
			snprintf(abs_out, sizeof abs_out, "%.*s/%s", (int)(sizeof abs_out - 2 - strlen(out)), cwd, out);
		else
			snprintf(abs_out, sizeof abs_out, "%s", out);
	}
	/* The request id: unique among this user's requests (our pid and the time). */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	unsigned long long id = ((unsigned long long)getpid() << 32) ^ (unsigned long long)rt.tv_nsec ^
		((unsigned long long)rt.tv_sec << 20);
	if (!id)
		id = 1;
	for (int t = 0; t < nt; t++) {
		char req[PATH_MAX + 200], tmp[PATH_MAX + 64], path[PATH_MAX + 64];
		int n = snprintf(req, sizeof req, "id %llu\nfor_ms %lld\nsteps %lld\nmulti %d\n", id,
			steps ? 0 : (long long)(for_s * 1000 + 0.5), steps, nt > 1);
		if (abs_out[0])
			snprintf(req + n, sizeof req - (size_t)n, "out %s\n", abs_out);
		snprintf(tmp, sizeof tmp, "%s/.%d.req.tmp", dir, (int)targets[t]);
		snprintf(path, sizeof path, "%s/%d.req", dir, (int)targets[t]);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, req, strlen(req)) != (ssize_t)strlen(req) || close(fd) != 0 ||
		    rename(tmp, path) != 0) {
			capture_fail("cannot write the request %s: %s", path, strerror(errno));
			return TBP_EXIT_INTERNAL;
		}
	}
	/* The answers: PID.ID.done from each. */
	bool done[256] = {false};
	int ndone = 0, written = 0, failed = 0;
	double deadline = now_s() + timeout_s;
	while (ndone < nt) {
		for (int t = 0; t < nt; t++) {
			if (done[t])
				continue;
			char path[PATH_MAX + 96], buf[PATH_MAX + 64];
			snprintf(path, sizeof path, "%s/%d.%llu.done", dir, (int)targets[t], id);
			if (slurp(path, buf, sizeof buf) > 0) {
				unlink(path);
				buf[strcspn(buf, "\n")] = 0;
				if (!strncmp(buf, "ok ", 3)) {
					printf("%s\n", buf + 3);
					fflush(stdout);
					written++;
				} else if (!strcmp(buf, "nosteps")) {
					/* one of several (a launcher's shell, torchrun's agent) that marks no steps */
				} else if (!strcmp(buf, "empty")) {
					if (nt == 1)
						fprintf(stderr, "tbprof capture: process %d recorded nothing in the capture\n",
							(int)targets[t]);
				} else {
					fprintf(stderr, "tbprof capture: process %d: %s\n", (int)targets[t],
						!strncmp(buf, "error ", 6) ? buf + 6 : buf);
					failed++;
				}
				done[t] = true;
				ndone++;
			} else if (kill(targets[t], 0) != 0 && errno == ESRCH) {
				/* One of several may be a short-lived helper (a pyenv shim's subshell) that was
				 * armed when the launcher's processes were listed: not a failure of the job's. */
				char req[PATH_MAX + 64];
				snprintf(req, sizeof req, "%s/%d.req", dir, (int)targets[t]);
				unlink(req);
				if (nt == 1) {
					fprintf(stderr, "tbprof capture: process %d ended before its capture was written\n",
						(int)targets[t]);
					failed++;
				}
				done[t] = true;
				ndone++;
			}
		}
		if (ndone == nt)
			break;
		if (now_s() > deadline) {
			for (int t = 0; t < nt; t++) {
				if (done[t])
					continue;
				char path[PATH_MAX + 64];
				snprintf(path, sizeof path, "%s/%d.cancel", dir, (int)targets[t]);
				int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
				if (fd >= 0)
					close(fd);
				fprintf(stderr, "tbprof capture: timed out after %g s waiting for process %d%s\n", timeout_s,
					(int)targets[t], steps ? " (no step boundary seen? the runner's marks or "
					"tbprof.mark_step() make them)" : "");
			}
			return TBP_EXIT_NO;
		}
		struct timespec nap = {0, 50 * 1000000L};
		nanosleep(&nap, NULL);
	}
	if (!written && !failed)
		fprintf(stderr, "tbprof capture: nothing was recorded in the capture (%d process%s)\n", nt,
			nt > 1 ? "es" : "");
	return written ? TBP_EXIT_OK : TBP_EXIT_NO;
}

/* ------------------------------------------------------------ demo */

/* The piece of the demo named `name` in `dir` (the build tree's or the
 * install's), or a message naming where it was looked for. */
static bool demo_piece(char *out, size_t cap, const char *dir, const char *name)
{
	snprintf(out, cap, "%s/%s", dir, name);
	if (is_file(out))
		return true;
	fprintf(stderr, "tbprof demo: %s not found in %s\n", name, dir);
	return false;
}

/* Finds what runner/demo.py needs (libtbprof, tbanalyze, simgpu's
 * stand-ins and its sitecustomize, the runner and the model) beside
 * tbprof, and runs it with PYTHON.  From the build tree: the build's
 * tests/simgpu and the source tree; installed: LIBDIR/tbprof/simgpu and
 * DATADIR/tbprof. */
static int cmd_demo(int argc, char **argv)
{
	cmd_name = "tbprof demo";
	const char *out = "tbprof-demo.zst", *python = "python3";
	int i = 0;
	for (; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (opt_is(argv, argc, &i, "--help", "-h", false, NULL)) {
			fputs(demo_help, stdout);
			exit(0);
		} else if (opt_is(argv, argc, &i, "--output", "-o", true, &v)) {
			if (!*v)
				usage_error("%s: empty output name", a);
			require_trace_file_name(a, v);
			out = v;
		} else if (opt_is(argv, argc, &i, "--python", NULL, true, &v)) {
			if (!*v)
				usage_error("%s: empty name", a);
			python = v;
		} else {
			usage_error("unexpected argument '%s' (arguments for run.py go after --)", a);
		}
	}
	refuse_foreign_output("-o", out);
	char lib[PATH_MAX], tba[PATH_MAX], simgpu[PATH_MAX], site[PATH_MAX + 8], root[PATH_MAX], demo[PATH_MAX];
	if (!find_piece(lib, sizeof lib, "../libtbprof", TBPROF_INSTALL_LIBDIR, "libtbprof.so") ||
	    !find_piece(tba, sizeof tba, "../analyze", TBPROF_INSTALL_BINDIR, "tbanalyze")) {
		fprintf(stderr, "tbprof demo: libtbprof.so or tbanalyze not found beside %s\n",
			prog_dir ? prog_dir : "tbprof");
		return TBP_EXIT_UNAVAILABLE;
	}
	char probe[PATH_MAX];
	bool build_tree = prog_dir && snprintf(probe, sizeof probe, "%s/../libtbprof/libtbprof.so", prog_dir) > 0 &&
			  is_file(probe);
	if (build_tree) {
		snprintf(simgpu, sizeof simgpu, "%s/../tests/simgpu", prog_dir);
		snprintf(site, sizeof site, "%s/tests/simgpu/simtorch_site", TBPROF_SOURCE_ROOT);
		snprintf(root, sizeof root, "%s", TBPROF_SOURCE_ROOT);
	} else {
		/* The install tbprof is part of (a moved or DESTDIR one: found
		 * from here), or the configured prefix's: never pieces of two. */
		char libdir[PATH_MAX];
		installed_dir(libdir, sizeof libdir, TBPROF_INSTALL_LIBDIR, true);
		bool relative = snprintf(probe, sizeof probe, "%s/libtbprof.so", libdir) < (int)sizeof probe &&
				is_file(probe);
		installed_dir(simgpu, sizeof simgpu, TBPROF_INSTALL_SIMGPUDIR, relative);
		snprintf(site, sizeof site, "%s/site", simgpu);
		installed_dir(root, sizeof root, TBPROF_INSTALL_DEMODIR, relative);
	}
	char piece[PATH_MAX];
	if (!demo_piece(piece, sizeof piece, simgpu, "libcudart.so.13")) {
		fprintf(stderr, "tbprof demo: the simulated GPU (simgpu) is not part of this %s: it is built with the "
			"tests when the CUDA toolkit's headers are found (meson setup -Dtests=enabled "
			"-Dcudadir=...)\n", build_tree ? "build" : "install");
		return TBP_EXIT_UNAVAILABLE;
	}
	if (!demo_piece(piece, sizeof piece, site, "sitecustomize.py") ||
	    !demo_piece(piece, sizeof piece, root, "run.py") || !demo_piece(demo, sizeof demo, root, "runner/demo.py") ||
	    !demo_piece(piece, sizeof piece, root, "models/paper_antipatterns/__init__.py")) {
		fprintf(stderr, "tbprof demo: this %s lacks the demo's files (Python was not found when it was "
			"configured?)\n", build_tree ? "build" : "install");
		return TBP_EXIT_UNAVAILABLE;
	}
	char abs[PATH_MAX];
	char *paths[] = {lib, tba, simgpu, site, demo};
	for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++)
		if (realpath(paths[k], abs))
			snprintf(paths[k], PATH_MAX, "%s", abs);
	int n = argc - i;
	char **args = calloc((size_t)n + 16, sizeof *args);
	if (!args)
		return TBP_EXIT_INTERNAL;
	int k = 0;
	args[k++] = (char *)python;
	args[k++] = demo;
	args[k++] = "--lib";
	args[k++] = lib;
	args[k++] = "--tbanalyze";
	args[k++] = tba;
	args[k++] = "--simgpu";
	args[k++] = simgpu;
	args[k++] = "--site";
	args[k++] = site;
	args[k++] = "-o";
	args[k++] = (char *)out;
	args[k++] = "--";
	for (int j = 0; j < n; j++)
		args[k++] = argv[i + j];
	fflush(NULL);
	execvp(python, args);
	int e = errno;
	fprintf(stderr, "tbprof demo: %s: %s (the demo runs PyTorch: --python PATH names its Python)\n", python,
		strerror(e));
	return e == ENOENT ? TBP_EXIT_NOT_FOUND : TBP_EXIT_CANNOT_RUN;
}

int main(int argc, char **argv)
{
	prog_dir = find_prog_dir();
	if (argc < 2) {
		fputs("tbprof: no command given (record, capture, report, demo); see tbprof --help\n", stderr);
		return TBP_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(main_help, stdout);
		tbp_exit_table_print(stdout);
		fputs(main_help_end, stdout);
		return TBP_EXIT_OK;
	}
	if (!strcmp(cmd, "--version")) {
		printf("tbprof %s\n", TBPROF_VERSION);
		return TBP_EXIT_OK;
	}
	if (!strcmp(cmd, "record"))
		return cmd_record(argc - 2, argv + 2);
	if (!strcmp(cmd, "demo"))
		return cmd_demo(argc - 2, argv + 2);
	if (!strcmp(cmd, "capture"))
		return cmd_capture(argc - 2, argv + 2);
	if (!strcmp(cmd, "report")) {
		char tba[PATH_MAX];
		if (!find_piece(tba, sizeof tba, "../analyze", TBPROF_INSTALL_BINDIR, "tbanalyze")) {
			fprintf(stderr, "tbprof: tbanalyze not found beside %s\n", prog_dir ? prog_dir : "tbprof");
			return TBP_EXIT_UNAVAILABLE;
		}
		argv[1] = "tbanalyze";
		execv(tba, argv + 1);
		fprintf(stderr, "tbprof: %s: %s\n", tba, strerror(errno));
		return TBP_EXIT_UNAVAILABLE;
	}
	fprintf(stderr, "tbprof: unknown command '%s' (record, capture, report, demo); see tbprof --help\n", cmd);
	return TBP_EXIT_USAGE;
}
