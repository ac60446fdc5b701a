/*
 * tbprof trace format: the one definition shared by the writer (libtbprof,
 * inside the traced process) and every reader (tbanalyze, tests, fuzzers).
 * doc/trace-format.md describes the bytes on disk; this header is the
 * in-memory form of a record, the pinned ids, and the library API.
 *
 * Every record is a fixed header (kind, timestamp) plus up to
 * TBP_MAX_FIELDS unsigned 64-bit fields whose names and count come from one
 * schema table (tbp_kind_info).  Signed quantities are stored two's
 * complement in the u64.  Per-kind structs below overlay the field array so
 * code reads `rec.u.launch.grid_x` instead of an index.
 */
#ifndef TBPROF_TRACE_H
#define TBPROF_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TBP_FORMAT_VERSION 4
#define TBP_MIN_READER_VERSION 2
#define TBP_MAX_FIELDS 16

/* Errors: a pinned enum, stable across versions (exit codes and JSON use them). */
enum tbp_status {
	TBP_OK = 0,
	TBP_END = 1,              /* no more records: not an error */
	TBP_ERR_IO = 10,          /* read/write failed (errno kept) */
	TBP_ERR_NOT_FOUND = 11,   /* path does not exist */
	TBP_ERR_IS_DIR = 12,      /* path is a directory */
	TBP_ERR_EMPTY = 13,       /* zero-length file */
	TBP_ERR_NOT_TRACE = 14,   /* no tbprof header at offset 0 */
	TBP_ERR_VERSION = 15,     /* written for a newer reader */
	TBP_ERR_CHECKSUM = 16,    /* zstd frame checksum mismatch */
	TBP_ERR_CORRUPT = 17,     /* undecodable frame or record */
	TBP_ERR_TRUNCATED = 18,   /* last frame incomplete (warning-level) */
	TBP_ERR_NOMEM = 19,
	TBP_ERR_ARG = 20,         /* invalid argument to the library */
	TBP_ERR_PERMISSION = 21,  /* path not readable/writable */
	TBP_ERR_NO_EVENTS = 22,  /* cut short before its first event: nothing to report on */
};
int tbp_is_error(int status);          /* nonzero for TBP_ERR_* */
const char *tbp_error_name(int status); /* "checksum mismatch", ... never NULL */

/* Record kinds.  Pinned numbers. */
enum tbp_kind {
	TBP_K_PROCESS = 1,
	TBP_K_THREAD = 2,
	TBP_K_STRING = 3,     /* interned string; carries a blob */
	TBP_K_PYFRAME = 4,    /* interned (file, function, line) */
	TBP_K_CALLPATH = 5,   /* interned Python call path node (trie) */
	TBP_K_NATIVE = 6,     /* interned native stack node (trie) */
	TBP_K_MODULE = 7,     /* module map entry for native symbolization */
	TBP_K_API = 8,        /* any other intercepted API call */
	TBP_K_LAUNCH = 9,
	TBP_K_MEMCPY = 10,
	TBP_K_MEMSET = 11,
	TBP_K_MALLOC = 12,
	TBP_K_FREE = 13,
	TBP_K_SYNC = 14,
	TBP_K_GPU_KERNEL = 20,
	TBP_K_GPU_MEMCPY = 21,
	TBP_K_GPU_MEMSET = 22,
	TBP_K_GPU_SYNC = 23,
	TBP_K_PY_SPAN = 30,
	TBP_K_MARKER = 31,
	TBP_K_LOST = 32,
	TBP_K_CLOCK = 33,
	TBP_K_NOTICE = 34,
	TBP_K_DEVICE = 35,
	TBP_K_END = 36,       /* written last by a clean shutdown */
	TBP_K_PY_LIB = 37,    /* where the interpreter keeps library code (version 3) */
	TBP_K_RANGE = 38,     /* an NVTX range or mark, written when it ends (version 4) */
	TBP_K__MAX = 64,      /* kinds are < TBP_K__MAX */
};

/* Pinned API ids (apis.def). */
enum tbp_api {
	TBP_API_NONE = 0,
#define TBP_API(id, name, family, category) TBP_API_##name = id,
#include "tbprof/apis.def"
#undef TBP_API
	TBP_API__MAX = 512,
};
enum tbp_api_family { TBP_FAM_CUDART = 1, TBP_FAM_CU = 2, TBP_FAM_HIP = 3, TBP_FAM_TBP = 4 };
enum tbp_api_category {
	TBP_CAT_LAUNCH = 1, TBP_CAT_GRAPH, TBP_CAT_MEMCPY, TBP_CAT_MEMSET, TBP_CAT_MALLOC,
	TBP_CAT_FREE, TBP_CAT_SYNC, TBP_CAT_STREAM, TBP_CAT_EVENT, TBP_CAT_REGISTER,
	TBP_CAT_DEVICE, TBP_CAT_OTHER,
};
struct tbp_api_info {
	uint16_t id;
	uint8_t family;   /* enum tbp_api_family */
	uint8_t category; /* enum tbp_api_category */
	const char *name;
};
/* NULL for ids not in apis.def. */
const struct tbp_api_info *tbp_api_lookup(unsigned id);

/* Copy directions (MEMCPY.copy_kind, GPU_MEMCPY.copy_kind). */
enum tbp_copy_kind {
	TBP_COPY_UNKNOWN = 0, TBP_COPY_H2D = 1, TBP_COPY_D2H = 2, TBP_COPY_D2D = 3,
	TBP_COPY_H2H = 4, TBP_COPY_PEER = 5,
};
/* MEMCPY.flags / MEMSET flags bits. */
enum tbp_copy_flags {
	TBP_COPYF_ASYNC = 1u << 0,    /* an *Async API */
	TBP_COPYF_PINNED = 1u << 1,   /* host side is page-locked */
	TBP_COPYF_PAGEABLE = 1u << 2, /* host side is pageable (async becomes sync) */
	TBP_COPYF_2D = 1u << 3,
	TBP_COPYF_SYMBOL = 1u << 4,
};
/* GPU_MEMCPY.src_kind / dst_kind. */
enum tbp_mem_kind {
	TBP_MEM_UNKNOWN = 0, TBP_MEM_PAGEABLE = 1, TBP_MEM_PINNED = 2, TBP_MEM_DEVICE = 3,
	TBP_MEM_ARRAY = 4, TBP_MEM_MANAGED = 5,
};
/* MALLOC.flags */
enum tbp_alloc_flags {
	TBP_ALLOCF_HOST = 1u << 0,    /* page-locked host memory */
	TBP_ALLOCF_MANAGED = 1u << 1,
	TBP_ALLOCF_ASYNC = 1u << 2,   /* stream-ordered */
};
/* SYNC.sync_kind, GPU_SYNC.sync_kind */
enum tbp_sync_kind {
	TBP_SYNC_UNKNOWN = 0, TBP_SYNC_DEVICE = 1, TBP_SYNC_STREAM = 2, TBP_SYNC_EVENT = 3,
	TBP_SYNC_STREAM_WAIT_EVENT = 4, TBP_SYNC_CONTEXT = 5,
};
/* MARKER.marker_kind */
enum tbp_marker_kind {
	TBP_MARK_USER = 0, TBP_MARK_ITER_BEGIN = 1, TBP_MARK_ITER_END = 2,
	TBP_MARK_WARMUP_END = 3,
};
/* RANGE.range_kind: how the program opened it (NVTX). */
enum tbp_nvtx_kind {
	TBP_NVTX_PUSH = 0,   /* nvtxRangePush ... nvtxRangePop: one thread, nested (depth) */
	TBP_NVTX_START = 1,  /* nvtxRangeStart ... nvtxRangeEnd: by id, may end on another thread */
	TBP_NVTX_MARK = 2,   /* nvtxMark: an instant (end == ts) */
};
/* LOST.source */
enum tbp_lost_source {
	TBP_LOST_BUFFER_FULL = 1,  /* per-thread buffer full: events dropped */
	TBP_LOST_CUPTI = 2,        /* CUPTI reported dropped activity records */
	TBP_LOST_WRITE_ERROR = 3,  /* output file write failed */
	TBP_LOST_SIGNAL = 4,       /* process ended by a signal before flush */
};
/* CLOCK.method */
enum tbp_clock_method {
	TBP_CLOCK_SAME = 0,          /* domain already is CLOCK_MONOTONIC ns */
	TBP_CLOCK_CUPTI_CALLBACK = 1,/* cuptiActivityRegisterTimestampCallback */
	TBP_CLOCK_BRACKETED = 2,     /* offset calibrated by bracketing */
	TBP_CLOCK_HOOK_SIDE = 3,     /* no GPU clock: host hook times only */
};
/* PY_LIB.role: which of the interpreter's own answers the path is. */
enum tbp_py_lib_role {
	TBP_PYLIB_STDLIB = 1,     /* sysconfig.get_paths()["stdlib"] */
	TBP_PYLIB_PLATSTDLIB = 2, /* sysconfig.get_paths()["platstdlib"] */
	TBP_PYLIB_PURELIB = 3,    /* sysconfig.get_paths()["purelib"] */
	TBP_PYLIB_PLATLIB = 4,    /* sysconfig.get_paths()["platlib"] */
	TBP_PYLIB_SITE = 5,       /* one of site.getsitepackages() */
	TBP_PYLIB_USER_SITE = 6,  /* site.getusersitepackages() */
	TBP_PYLIB_TORCH = 7,      /* the torch package's own directory (a source tree's too) */
	TBP_PYLIB_FROZEN = 8,     /* the file name frozen modules' code carries, up to the module ("<frozen ") */
};
/* NOTICE.level */
enum tbp_notice_level { TBP_NOTE_INFO = 0, TBP_NOTE_WARN = 1, TBP_NOTE_ERROR = 2 };
/* NOTICE.code: machine-readable reason */
enum tbp_notice_code {
	TBP_NOTICE_TEXT = 0,
	TBP_NOTICE_NO_CUPTI = 1,         /* libcupti not found: API-only trace */
	TBP_NOTICE_CUPTI_IN_USE = 2,     /* another subscriber holds CUPTI */
	TBP_NOTICE_NO_PYTHON_PATHS = 3,  /* unsupported/absent CPython */
	TBP_NOTICE_FORK_CHILD = 4,
	TBP_NOTICE_CUPTI_ERROR = 5,
	TBP_NOTICE_CUPTI_JOIN = 6,       /* at exit: GPU records joined to their call, and why not */
};

/*
 * Per-kind field layouts.  All fields are uint64_t; the order is the
 * on-disk order.  Timestamps are nanoseconds of CLOCK_MONOTONIC on the
 * traced host (GPU records are converted with the CLOCK record's offset).
 * Interned references (strings, call paths, native stacks) are ids, 0 = none.
 */
struct tbp_process {
	uint64_t pid, ppid, host, cmdline, exe, realtime_ns, monotonic_ns, rank, world_size,
		local_rank, cwd;
};
/* The process's place in a distributed job (rank, world size, local rank,
 * from torchrun's, mpirun's or srun's variables), or -1 when it has none:
 * libtbprof writes all ones for "none" (a process outside a job, torchrun's
 * agent), and a trace without these fields reads them as 0 world size. */
static inline int64_t tbp_process_rank(const struct tbp_process *p)
{
	return p->rank != UINT64_MAX && p->world_size != 0 && p->rank <= INT32_MAX ? (int64_t)p->rank : -1;
}
static inline int64_t tbp_process_world_size(const struct tbp_process *p)
{
	return tbp_process_rank(p) >= 0 && p->world_size <= INT32_MAX ? (int64_t)p->world_size : -1;
}
static inline int64_t tbp_process_local_rank(const struct tbp_process *p)
{
	return tbp_process_rank(p) >= 0 && p->local_rank <= INT32_MAX ? (int64_t)p->local_rank : -1;
}
struct tbp_thread { uint64_t tid, name; };
struct tbp_string { uint64_t id; };             /* blob: the bytes (no NUL) */
struct tbp_pyframe { uint64_t id, file, function, line; };
struct tbp_callpath { uint64_t id, frame, parent; };  /* leaf-first walk via parent */
struct tbp_native { uint64_t id, pc, parent; };
struct tbp_module { uint64_t start, end, offset, path; };
/* Common prefix of every host-side API call record. */
#define TBP_CALL_FIELDS uint64_t end, api, result, corr, callpath, native, device, stream
struct tbp_call { TBP_CALL_FIELDS; };
struct tbp_api_rec { TBP_CALL_FIELDS; uint64_t arg0, arg1; };
struct tbp_launch {
	TBP_CALL_FIELDS;
	uint64_t name, grid_x, grid_y, grid_z, block_x, block_y, block_z, shmem;
};
struct tbp_memcpy { TBP_CALL_FIELDS; uint64_t bytes, copy_kind, flags, src, dst; };
struct tbp_memset { TBP_CALL_FIELDS; uint64_t bytes, value, ptr; };
struct tbp_malloc { TBP_CALL_FIELDS; uint64_t ptr, bytes, flags; };
struct tbp_free { TBP_CALL_FIELDS; uint64_t ptr, bytes; };
struct tbp_sync { TBP_CALL_FIELDS; uint64_t sync_kind, handle; };
#define TBP_GPU_FIELDS uint64_t end, device, context, stream, corr
struct tbp_gpu_kernel {
	TBP_GPU_FIELDS;
	uint64_t name, grid_x, grid_y, grid_z, block_x, block_y, block_z, registers,
		static_shmem, dynamic_shmem;
};
struct tbp_gpu_memcpy { TBP_GPU_FIELDS; uint64_t bytes, copy_kind, src_kind, dst_kind; };
struct tbp_gpu_memset { TBP_GPU_FIELDS; uint64_t bytes, value, mem_kind; };
struct tbp_gpu_sync { TBP_GPU_FIELDS; uint64_t sync_kind, event; };
struct tbp_py_span { uint64_t end, callpath; };
struct tbp_marker { uint64_t marker_kind, value, label; };
/* An NVTX range [ts, end) or mark (libtbprof as NVTX's injection library):
 * its domain and message (string ids; domain 0: the default domain), the
 * Python call path where it began, its nesting depth among the push/pop
 * ranges of its thread and domain (0: outermost), the id nvtxRangeStart
 * returned (start/end ranges, else 0) and the thread that began it (the
 * record's stream is the thread that ended it). */
struct tbp_range { uint64_t end, range_kind, domain, name, callpath, depth, id, begin_tid; };
struct tbp_lost { uint64_t count, source, since_ts; };
struct tbp_clock {
	uint64_t domain, device, offset_ns /* signed */, uncertainty_ns, method;
};
struct tbp_notice { uint64_t level, code, message; };
struct tbp_device { uint64_t device, name, vendor /* 1 NVIDIA, 2 AMD, 3 simulated */; };
struct tbp_end { uint64_t records, lost; };
/* A directory (role FROZEN: a file-name prefix) whose files are library
 * code, as the traced interpreter names it. */
struct tbp_py_lib { uint64_t role, path; };

struct tbp_record {
	uint8_t kind;       /* enum tbp_kind */
	uint8_t stream_kind;/* enum tbp_stream_kind of the chunk it came from */
	uint16_t nfields;   /* fields present (reader fills; writer uses schema); the reader's
			       fields past nfields are zero */
	uint32_t tid;       /* thread (host records) or device (GPU records) */
	uint64_t ts;        /* start/begin timestamp, ns */
	union {
		uint64_t v[TBP_MAX_FIELDS];
		struct tbp_process process;
		struct tbp_thread thread;
		struct tbp_string string;
		struct tbp_pyframe pyframe;
		struct tbp_callpath callpath;
		struct tbp_native native;
		struct tbp_module module;
		struct tbp_call call;
		struct tbp_api_rec api;
		struct tbp_launch launch;
		struct tbp_memcpy memcpy;
		struct tbp_memset memset;
		struct tbp_malloc malloc;
		struct tbp_free free;
		struct tbp_sync sync;
		struct tbp_gpu_kernel gpu_kernel;
		struct tbp_gpu_memcpy gpu_memcpy;
		struct tbp_gpu_memset gpu_memset;
		struct tbp_gpu_sync gpu_sync;
		struct tbp_py_span py_span;
		struct tbp_marker marker;
		struct tbp_lost lost;
		struct tbp_range range;
		struct tbp_clock clock;
		struct tbp_notice notice;
		struct tbp_device device;
		struct tbp_end end;
		struct tbp_py_lib py_lib;
	} u;
	/* Variable-length payload (TBP_K_STRING only).  Writer: caller's bytes.
	 * Reader: points into the reader's buffer, valid until the next call. */
	const void *blob;
	uint32_t blob_len;
};

/* sizeof(struct tbp_record) as the library was built: a binding that
 * mirrors the struct (Python's ctypes, python/tbprof) checks it matches. */
size_t tbp_record_size(void);

/* Chunk streams: every record belongs to one. */
enum tbp_stream_kind {
	TBP_STREAM_DEFS = 0,    /* interned definitions, process facts; id 0 */
	TBP_STREAM_THREAD = 1,  /* host thread; id = tid */
	TBP_STREAM_GPU = 2,     /* GPU activity; id = device */
};

/* Schema: one entry per kind, from trace/format.c. */
struct tbp_kind_info {
	uint8_t kind;
	uint8_t nfields;
	uint8_t has_blob;
	const char *name;              /* "launch" */
	const char *const *field_names;/* nfields names, "end", "api", ... */
	uint32_t string_fields;        /* appended: bit i set = field i is a string id */
};
/* NULL for unknown kinds. */
const struct tbp_kind_info *tbp_kind_lookup(unsigned kind);

/* Do these first bytes of a file (n of them, 16 suffice) begin a tbprof
 * trace: a header frame with the file magic?  Only the magic: a damaged
 * or truncated trace still is one.  Lets a writer tell its own earlier
 * output, which it may overwrite, from any other file, which it must not. */
#define TBP_TRACE_PREFIX_LEN 16
int tbp_is_trace_prefix(const void *bytes, size_t n);

/* ---------------------------------------------------------------- writer
 * Not thread-safe: one writer thread owns it.  Records are grouped in
 * chunks (one stream each); chunks are grouped in frames; every
 * tbp_writer_flush() ends a zstd frame (with checksum) and writes it.
 */
struct tbp_writer;
struct tbp_writer_opts {
	int compression_level; /* 0 = default (1: smallest and fastest on trace data, bench/trace) */
	uint32_t features;     /* header feature bits (TBP_FEAT_*) */
};
enum tbp_features {
	TBP_FEAT_CUPTI = 1u << 0,
	TBP_FEAT_PYTHON = 1u << 1,
	TBP_FEAT_NATIVE = 1u << 2,
	TBP_FEAT_HIP = 1u << 3,
};
/* Takes ownership of fd (closed by tbp_writer_close). */
int tbp_writer_open_fd(struct tbp_writer **out, int fd, const struct tbp_writer_opts *opts);
int tbp_writer_open(struct tbp_writer **out, const char *path, const struct tbp_writer_opts *opts);
int tbp_writer_begin_chunk(struct tbp_writer *w, unsigned stream_kind, uint64_t stream_id);
int tbp_writer_add(struct tbp_writer *w, const struct tbp_record *rec);
/* recs[0..n) in order, as tbp_writer_add would add them one by one (same
 * records read back); runs of one kind are coded a column at a time. */
int tbp_writer_add_batch(struct tbp_writer *w, const struct tbp_record *recs, size_t n);
int tbp_writer_end_chunk(struct tbp_writer *w);
/* End the current frame (if any records) and write it out. */
int tbp_writer_flush(struct tbp_writer *w);
/* Flush, close fd, free.  Does not add an END record by itself. */
int tbp_writer_close(struct tbp_writer *w);
uint64_t tbp_writer_bytes_written(const struct tbp_writer *w);

/* ---------------------------------------------------------------- reader
 * Streaming: memory is bounded by the largest frame, not the file.
 */
struct tbp_reader;
struct tbp_header {
	uint16_t version;
	uint16_t min_reader_version;
	uint32_t features;
};
/* On failure *out is still a reader in the error state (NULL only on
 * TBP_ERR_NOMEM/TBP_ERR_ARG): tbp_reader_offset()/tbp_reader_detail()
 * describe the error; close it with tbp_reader_close(). */
int tbp_reader_open(struct tbp_reader **out, const char *path);
/* Read from memory (fuzzers, tests).  The buffer must outlive the reader. */
int tbp_reader_open_mem(struct tbp_reader **out, const void *data, size_t size, const char *name);
/* TBP_OK with *rec filled, TBP_END at the end, or an error.  After
 * TBP_ERR_TRUNCATED every complete record has been returned. */
int tbp_reader_next(struct tbp_reader *r, struct tbp_record *rec);
/* Up to max records into recs[0..*n), all of one chunk and so of one
 * frame (a record that starts a frame or a chunk comes alone): TBP_OK with
 * *n >= 1, or TBP_END / an error (*n = 0) as tbp_reader_next would return
 * it at that point.  The same records in the same order as *n calls of
 * tbp_reader_next: for readers that handle a run of records per call. */
int tbp_reader_next_many(struct tbp_reader *r, struct tbp_record *recs, unsigned max, unsigned *n);
/* Hand out only the first nfields fields (1..TBP_MAX_FIELDS) of records of
 * this kind: the others read as 0 and rec.nfields says nfields, as for a
 * trace written before those fields existed.  Their columns are not
 * decoded, only checked to hold one value per record (damage inside such
 * a value goes unnoticed: it is never read).  For a reader that uses a hot
 * kind's leading fields only (tbanalyze's analysis: a kernel's time, place,
 * correlation and name, not its launch geometry).  Call it before the
 * first record is read: TBP_OK, or TBP_ERR_ARG after that or for a bad
 * argument. */
int tbp_reader_limit_fields(struct tbp_reader *r, unsigned kind, unsigned nfields);
const struct tbp_header *tbp_reader_header(const struct tbp_reader *r);
/* Byte offset in the file where the last error applies (or current frame). */
uint64_t tbp_reader_offset(const struct tbp_reader *r);
/* Human-readable detail of the last error ("frame 3: checksum mismatch"). */
const char *tbp_reader_detail(const struct tbp_reader *r);
int tbp_reader_truncated(const struct tbp_reader *r);
void tbp_reader_close(struct tbp_reader *r);

#ifdef __cplusplus
}
#endif
#endif
