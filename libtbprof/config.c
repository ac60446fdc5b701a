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
#include "tbprof/options.h"

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

/* One TBPROF_* variable, by its row in tbprof/options.def, parsed by the
 * parser the launcher shares.  Strict: a value that is not exactly of the
 * option's form is rejected with one line naming the variable and the
 * value, and the default is used (a typo must not silently mean something
 * else); unset or empty is the default. */
static union tbp_opt_value opt_read(enum tbp_opt_id id)
{
	const struct tbp_option *o = &tbp_options[id];
	union tbp_opt_value dflt = tbp_opt_default(o), v;
	const char *text = getenv(o->var);
	if (!text || !*text)
		return dflt;
	const char *why;
	if (tbp_opt_parse(o, text, &v, &why))
		return v;
	switch (o->type) {
	case TBP_OPT_BOOL:
		tbp_log("%s=%s: %s; using the default %d", o->var, text, why, dflt.b ? 1 : 0);
		break;
	case TBP_OPT_LEVEL:
		tbp_log("%s=%s: %s; using the default %llu", o->var, text, why, dflt.u);
		break;
	case TBP_OPT_UINT:
	case TBP_OPT_SIZE:
		tbp_log("%s=%s: %s (allowed %llu..%llu); using the default %llu", o->var, text, why, o->lo, o->hi,
			dflt.u);
		break;
	case TBP_OPT_SECONDS:
		tbp_log("%s=%s: not a number in (0, %g]; ignored", o->var, text, (double)o->hi);
		break;
	case TBP_OPT_CHOICE:
		tbp_log("%s=%s: not one of %s; ignored", o->var, text, o->metavar);
		break;
	case TBP_OPT_STRING:
		break;
	}
	return dflt;
}

static bool opt_bool(enum tbp_opt_id id)
{
	return opt_read(id).b;
}

static unsigned long long opt_uint(enum tbp_opt_id id)
{
	return opt_read(id).u;
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
	tbp_cfg.enabled = opt_bool(TBP_OPT_ENABLE);
	snprintf(tbp_cfg.out, sizeof tbp_cfg.out, "%s", opt_read(TBP_OPT_OUT).s);
	tbp_cfg.buffer_bytes = (size_t)opt_uint(TBP_OPT_BUFFER_SIZE);
	tbp_cfg.python = opt_bool(TBP_OPT_PYTHON);
	/* up to one hour (the table's range): the product in ns cannot overflow */
	tbp_cfg.py_span_ns = opt_uint(TBP_OPT_PY_SPAN_US) * 1000ull;
	tbp_cfg.py_depth = (unsigned)opt_uint(TBP_OPT_PY_DEPTH);
	tbp_cfg.native = opt_bool(TBP_OPT_NATIVE);
	tbp_cfg.native_depth = (unsigned)opt_uint(TBP_OPT_NATIVE_DEPTH);
	tbp_cfg.cupti = opt_bool(TBP_OPT_CUPTI);
	tbp_cfg.cupti_buffer_bytes = (size_t)opt_uint(TBP_OPT_CUPTI_BUFFER_SIZE);
	const char *cupti_path = opt_read(TBP_OPT_CUPTI_PATH).s;
	snprintf(tbp_cfg.cupti_path, sizeof tbp_cfg.cupti_path, "%s", cupti_path ? cupti_path : "");
	tbp_cfg.fork_mode = opt_bool(TBP_OPT_FORK) ? 1 : 0;
	tbp_cfg.trace_all = opt_bool(TBP_OPT_TRACE_ALL);
	tbp_cfg.verbose = (int)opt_uint(TBP_OPT_VERBOSE);
	tbp_cfg.hip_events = opt_bool(TBP_OPT_HIP_EVENTS);
	tsc_wanted = opt_bool(TBP_OPT_TSC);
	tbp_rank_from_env();
	const char *range = opt_read(TBP_OPT_CAPTURE_RANGE).s;   /* said when bad, even disabled */
	tbp_cfg.capture_range_profiler = tbp_cfg.enabled && range && !strcmp(range, "cudaProfilerApi");
	if (tbp_cfg.enabled && range && !strncmp(range, "nvtx:", 5)) {
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
	tbp_cfg.on_demand = tbp_cfg.enabled && (opt_bool(TBP_OPT_ON_DEMAND) || tbp_cfg.capture_range_profiler ||
		tbp_cfg.capture_range_nvtx[0]);
	tbp_cfg.flight_ns = tbp_cfg.enabled && !tbp_cfg.on_demand ? (uint64_t)(opt_read(TBP_OPT_FLIGHT).d * 1e9) : 0;
	tbp_cfg.flight_mem = (size_t)opt_uint(TBP_OPT_FLIGHT_MEM);
	tbp_cfg.flight_slow = opt_read(TBP_OPT_FLIGHT_SLOW).d;
	tbp_cfg.flight_stall_ns = (uint64_t)(opt_read(TBP_OPT_FLIGHT_STALL).d * 1e9);
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
