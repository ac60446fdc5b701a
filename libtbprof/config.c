/*
 * libtbprof core, configuration and diagnostics: TBPROF_* variables read once, the
 * logging every module uses, the per-thread recursion guard.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

struct tbp_config tbp_cfg;
struct tbp_tsc_params tbp_tsc;
int tbp_tsc_on;
bool tsc_wanted;      /* TBPROF_TSC (default 1) */
volatile int tbp_active;
volatile int tbp_gpu_used;
__thread int tbp_tls_device __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------ diagnostics */

void tbp_log(const char *fmt, ...)
{
	char line[512];
	int saved_errno = errno;
	memcpy(line, "tbprof: ", 8);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + 8, sizeof line - 9, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	size_t len = 8 + ((size_t)n < sizeof line - 9 ? (size_t)n : sizeof line - 9);
	if (line[len - 1] != '\n')
		line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
	errno = saved_errno;
}

void tbp_warn_once(int *flag, const char *fmt, ...)
{
	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	char msg[480];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbp_log("%s", msg);
}

/* ------------------------------------------------------------ configuration */

/* Strict parsing: a value that is not exactly of the expected form is
 * rejected with one line naming the variable and the value, and the
 * default is used (a typo must not silently mean something else). */
bool tbp_env_bool(const char *name, bool dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]))
			return true;
		if (!strcasecmp(v, no[i]))
			return false;
	}
	tbp_log("%s=%s: not a boolean (true/false, yes/no, on/off, 1/0); using the default %d",
		name, v, dflt ? 1 : 0);
	return dflt;
}

/* Unsigned decimal, optionally with a K/M/G/T suffix (powers of 1024, an
 * optional trailing B) when `suffixes`; within [lo, hi]. */
static unsigned long long env_uint(const char *name, unsigned long long dflt, unsigned long long lo,
	unsigned long long hi, bool suffixes)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	const char *why = "not a non-negative integer";
	unsigned long long n = 0;
	const char *p = v;
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned digit = (unsigned)(*p - '0');
		if (n > (ULLONG_MAX - digit) / 10) {
			why = "too large";
			goto bad;
		}
		n = n * 10 + digit;
	}
	if (*p && suffixes) {
		unsigned shift = 0;
		switch (*p) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: why = "unknown suffix (K, M, G, T)"; goto bad;
		}
		p++;
		if (*p == 'i' && (p[1] == 'B' || p[1] == 'b'))
			p++;
		if (*p == 'B' || *p == 'b')
			p++;
		if (n > (ULLONG_MAX >> shift)) {
			why = "too large";
			goto bad;
		}
		n <<= shift;
	}
	if (*p) {
		why = suffixes ? "trailing characters" : "not a non-negative integer";
		goto bad;
	}
	if (n < lo || n > hi) {
		why = "out of range";
		goto bad;
	}
	return n;
bad:
	tbp_log("%s=%s: %s (allowed %llu..%llu); using the default %llu", name, v, why, lo, hi, dflt);
	return dflt;
}

/* A positive decimal number (seconds, a factor) within (0, hi]; 0 when unset; a bad one is a line
 * on stderr and 0 (the feature stays off). */
static double env_positive(const char *name, double hi)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	char *end;
	double d = strtod(v, &end);
	if (*end || !(d > 0) || d > hi) {
		tbp_log("%s=%s: not a number in (0, %g]; ignored", name, v, hi);
		return 0;
	}
	return d;
}

/* TBPROF_VERBOSE: a boolean or a level 0..9. */
static int env_verbose(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (v[0] >= '0' && v[0] <= '9' && !v[1])
		return v[0] - '0';
	return tbp_env_bool(name, false) ? 1 : 0;
}

/* A non-negative decimal below 2^31 from a launcher's variable, else -1.
 * These variables are not ours: a malformed one is ignored silently (the
 * program may not even be distributed). */
static int64_t env_rank_value(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	int64_t n = 0;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || n > (INT32_MAX - 9) / 10)
			return -1;
		n = n * 10 + (*v - '0');
	}
	return n;
}

/* Rank, world size and local rank, from the first launcher that set a
 * rank: torchrun and torch.distributed (RANK, WORLD_SIZE, LOCAL_RANK), Open
 * MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID).  torchrun sets RANK for its workers, so under srun a
 * worker is the torchrun rank, not the srun task. */
static void tbp_rank_from_env(void)
{
	static const char *const vars[][3] = {
		{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	};
	tbp_cfg.rank = tbp_cfg.world_size = tbp_cfg.local_rank = -1;
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		int64_t rank = env_rank_value(vars[i][0]);
		if (rank < 0)
			continue;
		tbp_cfg.rank = rank;
		tbp_cfg.world_size = env_rank_value(vars[i][1]);
		tbp_cfg.local_rank = env_rank_value(vars[i][2]);
		return;
	}
}

/* The constructor only reads the environment: no allocation, no thread, no
 * file, so a process that never touches the GPU is not disturbed at all. */
__attribute__((constructor)) static void tbp_read_config(void)
{
	tbp_cfg.enabled = tbp_env_bool("TBPROF_ENABLE", true);
	const char *out = getenv("TBPROF_OUT");
	snprintf(tbp_cfg.out, sizeof tbp_cfg.out, "%s", out && *out ? out : "trace.zst");
	tbp_cfg.buffer_bytes = (size_t)env_uint("TBPROF_BUFFER_SIZE", 8ull << 20, 4u << 10, 1ull << 34, true);
	tbp_cfg.python = tbp_env_bool("TBPROF_PYTHON", true);
	/* up to one hour: the product in ns cannot overflow */
	tbp_cfg.py_span_ns = env_uint("TBPROF_PY_SPAN_US", 100, 0, 3600ull * 1000000ull, false) * 1000ull;
	tbp_cfg.py_depth = (unsigned)env_uint("TBPROF_PY_DEPTH", 32, 1, 1024, false);
	tbp_cfg.native = tbp_env_bool("TBPROF_NATIVE", false);
	tbp_cfg.native_depth = (unsigned)env_uint("TBPROF_NATIVE_DEPTH", 16, 1, 128, false);
	tbp_cfg.cupti = tbp_env_bool("TBPROF_CUPTI", true);
	tbp_cfg.cupti_buffer_bytes =
		(size_t)env_uint("TBPROF_CUPTI_BUFFER_SIZE", 32ull << 20, 256u << 10, 1ull << 34, true);
	tbp_cfg.fork_mode = tbp_env_bool("TBPROF_FORK", true) ? 1 : 0;
	tbp_cfg.trace_all = tbp_env_bool("TBPROF_TRACE_ALL", false);
	tbp_cfg.verbose = env_verbose("TBPROF_VERBOSE");
	tsc_wanted = tbp_env_bool("TBPROF_TSC", true);
	tbp_rank_from_env();
	const char *range = getenv("TBPROF_CAPTURE_RANGE");
	bool range_nvtx = range && !strncmp(range, "nvtx:", 5) && range[5] && range[5] != '@';
	if (range && *range && strcmp(range, "cudaProfilerApi") && !range_nvtx)
		tbp_log("TBPROF_CAPTURE_RANGE=%s: not a capture range (cudaProfilerApi, nvtx:NAME[@DOMAIN]); ignored", range);
	tbp_cfg.capture_range_profiler = tbp_cfg.enabled && range && !strcmp(range, "cudaProfilerApi");
	if (tbp_cfg.enabled && range_nvtx) {
		/* NAME@DOMAIN: the last '@' parts them (a range's name may hold one) */
		const char *at = strrchr(range + 5, '@');
		size_t nlen = at ? (size_t)(at - (range + 5)) : strlen(range + 5);
		if (nlen >= sizeof tbp_cfg.capture_range_nvtx)
			nlen = sizeof tbp_cfg.capture_range_nvtx - 1;
		memcpy(tbp_cfg.capture_range_nvtx, range + 5, nlen);
		tbp_cfg.capture_range_nvtx[nlen] = 0;
		if (at)
			snprintf(tbp_cfg.capture_range_nvtx_domain, sizeof tbp_cfg.capture_range_nvtx_domain, "%s", at + 1);
	}
	/* A capture range arms the process: nothing is recorded outside it. */
	tbp_cfg.on_demand = tbp_cfg.enabled && (tbp_env_bool("TBPROF_ON_DEMAND", false) || tbp_cfg.capture_range_profiler ||
		tbp_cfg.capture_range_nvtx[0]);
	tbp_cfg.flight_ns = tbp_cfg.enabled && !tbp_cfg.on_demand
		? (uint64_t)(env_positive("TBPROF_FLIGHT", 86400) * 1e9) : 0;
	tbp_cfg.flight_mem = (size_t)env_uint("TBPROF_FLIGHT_MEM", 256ull << 20, 1u << 20, 1ull << 40, true);
	tbp_cfg.flight_slow = env_positive("TBPROF_FLIGHT_SLOW", 1e6);
	tbp_cfg.flight_stall_ns = (uint64_t)(env_positive("TBPROF_FLIGHT_STALL", 86400 * 7) * 1e9);
	/* Armed: every hook returns at its first test until a capture starts. */
	TBP_SET_ACTIVE(tbp_cfg.enabled && !tbp_cfg.on_demand);
	/* Now, not at trace start: a fork while another thread is starting
	 * the trace (holding its locks) must already run the handlers. */
	if (tbp_cfg.enabled)
		tbp_register_atfork();
	/* TBPROF_TRACE_ALL traces every Python process from its start; other
	 * processes (the shells, env, readlink, timeout of a pyenv shim or a
	 * conda wrapper) only when they use CUDA/HIP, as without it, so they
	 * never take the output name from the Python process.  The
	 * interpreter's symbols are there before any constructor runs: in the
	 * executable or in a libpython it was linked with. */
	if (tbp_cfg.on_demand || tbp_cfg.flight_ns)
		tbp_capture_arm();
	if (tbp_cfg.on_demand)
		;
	else if (tbp_cfg.enabled && tbp_cfg.trace_all && tbp_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
		tbp_start_trace_all();
}

/* ------------------------------------------------------------ small helpers */

long futex_wait(atomic_int *addr, int expected, unsigned timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
	return syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

void futex_wake_all(atomic_int *addr)
{
	syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

pid_t tbp_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------ recursion guard */

__thread int tbp_tls_guard __attribute__((tls_model("initial-exec")));

bool tbp_guard_enter(void)
{
	return tbp_guard_enter_inline();
}

void tbp_guard_leave(void)
{
	tbp_guard_leave_inline();
}
