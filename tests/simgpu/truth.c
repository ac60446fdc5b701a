/*
 * Ground-truth log of the simulated runtime: one tab-separated line per
 * operation (format in README.md), buffered in memory and appended to
 * SIMGPU_TRUTH at exit, at cudaDeviceReset, when the buffer grows large, or
 * after every op with SIMGPU_TRUTH_UNBUFFERED=1.  Lines carry the pid and the
 * file is opened O_APPEND, so parent and children can share one path; a
 * forked child drops the parent's unwritten lines (the parent writes them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim_core.h"

#define TRUTH_FLUSH_BYTES (256 * 1024)

static char *truth_buf;
static size_t truth_len, truth_cap;
static _Atomic uint64_t truth_seq;
static bool truth_header_checked;
static bool truth_final; /* past our destructor: write each line at once (nothing flushes later) */

static _Atomic(simgpu_observer_fn) observer_fn;
static void *_Atomic observer_arg;

static const char *const op_names[] = {
	[SIMGPU_OP_KERNEL] = "kernel", [SIMGPU_OP_MEMCPY] = "memcpy", [SIMGPU_OP_MEMSET] = "memset",
	[SIMGPU_OP_MALLOC] = "malloc", [SIMGPU_OP_FREE] = "free", [SIMGPU_OP_SYNC] = "sync",
	[SIMGPU_OP_STREAM] = "stream", [SIMGPU_OP_EVENT] = "event", [SIMGPU_OP_DEVICE] = "device",
	[SIMGPU_OP_API] = "api",
};
static const char *const copy_names[] = {
	[SIMGPU_COPY_NONE] = "-", [SIMGPU_COPY_H2D] = "HtoD", [SIMGPU_COPY_D2H] = "DtoH",
	[SIMGPU_COPY_D2D] = "DtoD", [SIMGPU_COPY_H2H] = "HtoH", [SIMGPU_COPY_P2P] = "PtoP",
};
static const char *const mem_names[] = {
	[SIMGPU_MEM_NONE] = "-", [SIMGPU_MEM_PAGEABLE] = "pageable", [SIMGPU_MEM_PINNED] = "pinned",
	[SIMGPU_MEM_DEVICE] = "device", [SIMGPU_MEM_MANAGED] = "managed",
};
static const char *const sync_names[] = {
	[SIMGPU_SYNC_NONE] = "-", [SIMGPU_SYNC_DEVICE] = "device", [SIMGPU_SYNC_STREAM] = "stream",
	[SIMGPU_SYNC_EVENT] = "event", [SIMGPU_SYNC_STREAM_WAIT_EVENT] = "stream_wait_event",
};

#define NAME_OF(table, v) ((v) < sizeof(table) / sizeof(table[0]) && table[v] ? table[v] : "?")
const char *simgpu_op_kind_name(unsigned kind) { return NAME_OF(op_names, kind); }
const char *simgpu_copy_kind_name(unsigned kind) { return NAME_OF(copy_names, kind); }
const char *simgpu_mem_kind_name(unsigned kind) { return NAME_OF(mem_names, kind); }
const char *simgpu_sync_kind_name(unsigned kind) { return NAME_OF(sync_names, kind); }

void simgpu_set_observer(simgpu_observer_fn fn, void *arg)
{
	atomic_store(&observer_arg, arg);
	atomic_store(&observer_fn, fn);
}

/* External correlation ids: a small per-thread stack per kind, as CUPTI keeps. */
#define EXT_KINDS 8
#define EXT_DEPTH 64
static __thread struct { uint64_t ids[EXT_DEPTH]; int depth; } ext_stack[EXT_KINDS];
static __thread uint32_t ext_last_kind; /* kind of the most recent push still on a stack */
static _Atomic long ext_outstanding;     /* ids pushed and not popped, all threads: 0 skips the TLS */

int simgpu_ext_push(uint32_t kind, uint64_t id)
{
	if (kind >= EXT_KINDS || ext_stack[kind].depth >= EXT_DEPTH)
		return -1;
	ext_stack[kind].ids[ext_stack[kind].depth++] = id;
	ext_last_kind = kind;
	atomic_fetch_add_explicit(&ext_outstanding, 1, memory_order_relaxed);
	return 0;
}

int simgpu_ext_pop(uint32_t kind, uint64_t *id)
{
	if (kind >= EXT_KINDS || ext_stack[kind].depth == 0)
		return -1;
	uint64_t v = ext_stack[kind].ids[--ext_stack[kind].depth];
	atomic_fetch_sub_explicit(&ext_outstanding, 1, memory_order_relaxed);
	if (id)
		*id = v;
	return 0;
}

void sim_ext_current(struct simgpu_op *op)
{
	/* A thread's own pushes are visible to it, so 0 here means none on this thread. */
	if (atomic_load_explicit(&ext_outstanding, memory_order_relaxed) == 0)
		return;
	uint32_t kind = ext_last_kind;
	if (kind < EXT_KINDS && ext_stack[kind].depth > 0) {
		op->has_ext = 1;
		op->ext_kind = kind;
		op->ext_id = ext_stack[kind].ids[ext_stack[kind].depth - 1];
		return;
	}
	for (kind = 0; kind < EXT_KINDS; kind++) {
		if (ext_stack[kind].depth > 0) {
			op->has_ext = 1;
			op->ext_kind = kind;
			op->ext_id = ext_stack[kind].ids[ext_stack[kind].depth - 1];
			return;
		}
	}
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static const char truth_header[] =
	"# simgpu truth v1\n"
	"#pid\tseq\ttid\top\tapi\tdevice\tstream\tstream_handle\tstart\tend\thost_start\thost_end\t"
	"name\tbytes\tcopy_kind\thostmem\tsrc_mem\tdst_mem\tsync_kind\tasync\tgpu\tcaptured\t"
	"result\tcorr\text_kind\text_id\tgrid\tblock\tshmem\tptr\tptr2\tevent\tdomain\tapi_corr\n";

/* Caller holds sim_lock. */
static void truth_flush_locked(void)
{
	if (!sim_cfg.truth_path[0] || truth_len == 0)
		return;
	int saved_errno = errno;
	int fd = open(sim_cfg.truth_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		/* Several processes may share the file: one writer at a time, one header. */
		while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
		/* The header goes in once per file, by whoever finds it empty. */
		if (!truth_header_checked) {
			off_t end = lseek(fd, 0, SEEK_END);
			if (end == 0)
				write_all(fd, truth_header, sizeof(truth_header) - 1);
			truth_header_checked = true;
		}
		write_all(fd, truth_buf, truth_len);
		close(fd);
	}
	truth_len = 0;
	errno = saved_errno;
}

void simgpu_truth_flush(void)
{
	pthread_mutex_lock(&sim_lock);
	truth_flush_locked();
	pthread_mutex_unlock(&sim_lock);
}


static void truth_append_locked(const struct simgpu_op *op)
{
	char line[1024];
	const char *hostmem = "-";
	if (op->kind == SIMGPU_OP_MEMCPY) {
		if (op->copy_kind == SIMGPU_COPY_H2D || op->copy_kind == SIMGPU_COPY_H2H)
			hostmem = simgpu_mem_kind_name(op->mem_kind);
		else if (op->copy_kind == SIMGPU_COPY_D2H)
			hostmem = simgpu_mem_kind_name(op->dst_mem_kind);
	} else if (op->kind == SIMGPU_OP_MALLOC || op->kind == SIMGPU_OP_FREE) {
		hostmem = simgpu_mem_kind_name(op->mem_kind);
	}
	char ext_kind[16] = "-", ext_id[32] = "-";
	if (op->has_ext) {
		snprintf(ext_kind, sizeof(ext_kind), "%u", op->ext_kind);
		snprintf(ext_id, sizeof(ext_id), "%" PRIu64, op->ext_id);
	}
	char grid[48] = "-", block[48] = "-", shmem[16] = "-", event[16] = "-";
	if (op->kind == SIMGPU_OP_KERNEL) {
		snprintf(grid, sizeof(grid), "%u,%u,%u", op->grid[0], op->grid[1], op->grid[2]);
		snprintf(block, sizeof(block), "%u,%u,%u", op->block[0], op->block[1], op->block[2]);
		snprintf(shmem, sizeof(shmem), "%u", op->shared_mem);
	}
	if (op->event_id)
		snprintf(event, sizeof(event), "%u", op->event_id);
	int n = snprintf(line, sizeof(line),
		"%u\t%" PRIu64 "\t%u\t%s\t%s\t%u\t%u\t0x%" PRIx64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t"
		"%s\t%" PRIu64 "\t%s\t%s\t%s\t%s\t%s\t%u\t%u\t%u\t"
		"%d\t%u\t%s\t%s\t%s\t%s\t%s\t0x%" PRIx64 "\t0x%" PRIx64 "\t%s\t%s\t%u\n",
		op->pid, op->seq, op->tid, simgpu_op_kind_name(op->kind), op->api, op->device, op->stream_id,
		op->stream_handle, op->start_ns, op->end_ns, op->host_start_ns, op->host_end_ns,
		op->name ? op->name : "-", op->bytes, simgpu_copy_kind_name(op->copy_kind), hostmem,
		op->kind == SIMGPU_OP_MEMCPY ? simgpu_mem_kind_name(op->mem_kind) : "-",
		op->kind == SIMGPU_OP_MEMCPY ? simgpu_mem_kind_name(op->dst_mem_kind) : "-",
		simgpu_sync_kind_name(op->sync_kind), op->is_async, op->gpu, op->captured,
		op->result, op->correlation_id, ext_kind, ext_id, grid, block, shmem, op->ptr, op->ptr2, event,
		op->api_domain == SIMGPU_API_DRIVER ? "driver" : "runtime", op->api_corr ? op->api_corr : op->correlation_id);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (truth_len + (size_t)n > truth_cap) {
		size_t cap = truth_cap ? truth_cap * 2 : 64 * 1024;
		while (cap < truth_len + (size_t)n)
			cap *= 2;
		char *p = realloc(truth_buf, cap);
		if (!p)
			return;
		truth_buf = p;
		truth_cap = cap;
	}
	memcpy(truth_buf + truth_len, line, (size_t)n);
	truth_len += (size_t)n;
	if (sim_cfg.truth_unbuffered || truth_final || truth_len >= TRUTH_FLUSH_BYTES)
		truth_flush_locked();
}

static __thread uint32_t cached_tid;
static _Atomic uint32_t cached_pid; /* getpid() is a system call: once per process */

void sim_truth_after_fork_child(void)
{
	/* The parent still owns (and will write) the lines it had buffered. */
	truth_len = 0;
	cached_tid = 0;
	cached_pid = 0;
}

bool sim_emit_wanted(void)
{
	return sim_cfg.truth_path[0] || atomic_load_explicit(&observer_fn, memory_order_relaxed);
}

void sim_emit(struct simgpu_op *op)
{
	if (!cached_tid)
		cached_tid = (uint32_t)syscall(SYS_gettid);
	op->tid = cached_tid;
	op->pthread_id = (uint32_t)(uintptr_t)pthread_self();
	uint32_t pid = atomic_load_explicit(&cached_pid, memory_order_relaxed);
	if (!pid) {
		pid = (uint32_t)getpid();
		atomic_store_explicit(&cached_pid, pid, memory_order_relaxed);
	}
	op->pid = pid;
	if (sim_cfg.truth_path[0]) {
		/* Under the lock so that file order is seq order. */
		pthread_mutex_lock(&sim_lock);
		op->seq = atomic_fetch_add_explicit(&truth_seq, 1, memory_order_relaxed) + 1;
		truth_append_locked(op);
		pthread_mutex_unlock(&sim_lock);
	} else {
		op->seq = atomic_fetch_add_explicit(&truth_seq, 1, memory_order_relaxed) + 1;
	}
	simgpu_observer_fn fn = atomic_load(&observer_fn);
	if (fn)
		fn(op, atomic_load(&observer_arg));
}

void sim_truth_init(void)
{
	cached_tid = 0;
}

/* Other libraries' destructors (a profiler's flush) may still call the
 * runtime after this one: their ops are written as they come. */
__attribute__((destructor)) static void truth_at_exit(void)
{
	pthread_mutex_lock(&sim_lock);
	truth_final = true;
	truth_flush_locked();
	pthread_mutex_unlock(&sim_lock);
}
