/*
 * The schema (record kinds, field names), API and error names, and the
 * header codec.  The field-name lists mirror the per-kind structs in
 * tbprof/trace.h; the _Static_asserts keep both in step.
 */
#include <string.h>

#include "internal.h"

#define NFIELDS(type) (sizeof(struct type) / sizeof(uint64_t))
#define CALL_NAMES "end", "api", "result", "corr", "callpath", "native", "device", "stream"
#define GPU_NAMES "end", "device", "context", "stream", "corr"

static const char *const process_names[] = {"pid", "ppid", "host", "cmdline", "exe", "realtime_ns",
	"monotonic_ns", "rank", "world_size", "local_rank", "cwd"};
static const char *const thread_names[] = {"tid", "name"};
static const char *const string_names[] = {"id"};
static const char *const pyframe_names[] = {"id", "file", "function", "line"};
static const char *const callpath_names[] = {"id", "frame", "parent"};
static const char *const native_names[] = {"id", "pc", "parent"};
static const char *const module_names[] = {"start", "end", "offset", "path"};
static const char *const api_names[] = {CALL_NAMES, "arg0", "arg1"};
static const char *const launch_names[] = {CALL_NAMES, "name", "grid_x", "grid_y", "grid_z",
	"block_x", "block_y", "block_z", "shmem"};
static const char *const memcpy_names[] = {CALL_NAMES, "bytes", "copy_kind", "flags", "src", "dst"};
static const char *const memset_names[] = {CALL_NAMES, "bytes", "value", "ptr"};
static const char *const malloc_names[] = {CALL_NAMES, "ptr", "bytes", "flags"};
static const char *const free_names[] = {CALL_NAMES, "ptr", "bytes"};
static const char *const sync_names[] = {CALL_NAMES, "sync_kind", "handle"};
static const char *const gpu_kernel_names[] = {GPU_NAMES, "name", "grid_x", "grid_y", "grid_z",
	"block_x", "block_y", "block_z", "registers", "static_shmem", "dynamic_shmem"};
static const char *const gpu_memcpy_names[] = {GPU_NAMES, "bytes", "copy_kind", "src_kind", "dst_kind"};
static const char *const gpu_memset_names[] = {GPU_NAMES, "bytes", "value", "mem_kind"};
static const char *const gpu_sync_names[] = {GPU_NAMES, "sync_kind", "event"};
static const char *const py_span_names[] = {"end", "callpath"};
static const char *const marker_names[] = {"marker_kind", "value", "label"};
static const char *const range_names[] = {"end", "range_kind", "domain", "name", "callpath", "depth", "id",
	"begin_tid"};
static const char *const lost_names[] = {"count", "source", "since_ts"};
static const char *const clock_names[] = {"domain", "device", "offset_ns", "uncertainty_ns", "method"};
static const char *const notice_names[] = {"level", "code", "message"};
static const char *const device_names[] = {"device", "name", "vendor"};
static const char *const end_names[] = {"records", "lost"};
static const char *const py_lib_names[] = {"role", "path"};

#define CHECK(type, names) \
	_Static_assert(NFIELDS(type) == sizeof(names) / sizeof(names[0]), #type " field names"); \
	_Static_assert(NFIELDS(type) <= TBP_MAX_FIELDS, #type " too many fields")
CHECK(tbp_process, process_names);
CHECK(tbp_thread, thread_names);
CHECK(tbp_string, string_names);
CHECK(tbp_pyframe, pyframe_names);
CHECK(tbp_callpath, callpath_names);
CHECK(tbp_native, native_names);
CHECK(tbp_module, module_names);
CHECK(tbp_api_rec, api_names);
CHECK(tbp_launch, launch_names);
CHECK(tbp_memcpy, memcpy_names);
CHECK(tbp_memset, memset_names);
CHECK(tbp_malloc, malloc_names);
CHECK(tbp_free, free_names);
CHECK(tbp_sync, sync_names);
CHECK(tbp_gpu_kernel, gpu_kernel_names);
CHECK(tbp_gpu_memcpy, gpu_memcpy_names);
CHECK(tbp_gpu_memset, gpu_memset_names);
CHECK(tbp_gpu_sync, gpu_sync_names);
CHECK(tbp_py_span, py_span_names);
CHECK(tbp_marker, marker_names);
CHECK(tbp_lost, lost_names);
CHECK(tbp_range, range_names);
CHECK(tbp_clock, clock_names);
CHECK(tbp_notice, notice_names);
CHECK(tbp_device, device_names);
CHECK(tbp_end, end_names);
CHECK(tbp_py_lib, py_lib_names);
_Static_assert(sizeof(((struct tbp_record *)0)->u) == TBP_MAX_FIELDS * sizeof(uint64_t), "record union");

/* Bit i set: field i holds an interned string id (TBP_K_STRING). */
#define SREF(i) (1u << (i))

#define KIND(k, nm, type, names, blob, srefs) \
	[k] = {.kind = k, .nfields = NFIELDS(type), .has_blob = blob, .name = nm, .field_names = names, \
		.string_fields = srefs}
static const struct tbp_kind_info kind_table[TBP_K__MAX] = {
	KIND(TBP_K_PROCESS, "process", tbp_process, process_names, 0, SREF(2) | SREF(3) | SREF(4) | SREF(10)),
	KIND(TBP_K_THREAD, "thread", tbp_thread, thread_names, 0, SREF(1)),
	KIND(TBP_K_STRING, "string", tbp_string, string_names, 1, 0),
	KIND(TBP_K_PYFRAME, "pyframe", tbp_pyframe, pyframe_names, 0, SREF(1) | SREF(2)),
	KIND(TBP_K_CALLPATH, "callpath", tbp_callpath, callpath_names, 0, 0),
	KIND(TBP_K_NATIVE, "native", tbp_native, native_names, 0, 0),
	KIND(TBP_K_MODULE, "module", tbp_module, module_names, 0, SREF(3)),
	KIND(TBP_K_API, "api", tbp_api_rec, api_names, 0, 0),
	KIND(TBP_K_LAUNCH, "launch", tbp_launch, launch_names, 0, SREF(8)),
	KIND(TBP_K_MEMCPY, "memcpy", tbp_memcpy, memcpy_names, 0, 0),
	KIND(TBP_K_MEMSET, "memset", tbp_memset, memset_names, 0, 0),
	KIND(TBP_K_MALLOC, "malloc", tbp_malloc, malloc_names, 0, 0),
	KIND(TBP_K_FREE, "free", tbp_free, free_names, 0, 0),
	KIND(TBP_K_SYNC, "sync", tbp_sync, sync_names, 0, 0),
	KIND(TBP_K_GPU_KERNEL, "gpu_kernel", tbp_gpu_kernel, gpu_kernel_names, 0, SREF(5)),
	KIND(TBP_K_GPU_MEMCPY, "gpu_memcpy", tbp_gpu_memcpy, gpu_memcpy_names, 0, 0),
	KIND(TBP_K_GPU_MEMSET, "gpu_memset", tbp_gpu_memset, gpu_memset_names, 0, 0),
	KIND(TBP_K_GPU_SYNC, "gpu_sync", tbp_gpu_sync, gpu_sync_names, 0, 0),
	KIND(TBP_K_PY_SPAN, "py_span", tbp_py_span, py_span_names, 0, 0),
	KIND(TBP_K_MARKER, "marker", tbp_marker, marker_names, 0, SREF(2)),
	KIND(TBP_K_LOST, "lost", tbp_lost, lost_names, 0, 0),
	KIND(TBP_K_CLOCK, "clock", tbp_clock, clock_names, 0, 0),
	KIND(TBP_K_NOTICE, "notice", tbp_notice, notice_names, 0, SREF(2)),
	KIND(TBP_K_DEVICE, "device", tbp_device, device_names, 0, SREF(1)),
	KIND(TBP_K_END, "end", tbp_end, end_names, 0, 0),
	KIND(TBP_K_PY_LIB, "py_lib", tbp_py_lib, py_lib_names, 0, SREF(1)),
	KIND(TBP_K_RANGE, "range", tbp_range, range_names, 0, SREF(2) | SREF(3)),
};

const struct tbp_kind_info *tbp_kind_lookup(unsigned kind)
{
	if (kind >= TBP_K__MAX || !kind_table[kind].name)
		return NULL;
	return &kind_table[kind];
}

static const struct tbp_api_info api_table[] = {
#define TBP_API(id_, name_, family_, category_) \
	{.id = id_, .family = TBP_FAM_##family_, .category = TBP_CAT_##category_, .name = #name_},
#include "tbprof/apis.def"
#undef TBP_API
};

const struct tbp_api_info *tbp_api_lookup(unsigned id)
{
	/* apis.def lists ids in increasing order, but do not rely on it: the
	 * table is small and lookups happen at report time, not per event. */
	static const struct tbp_api_info *by_id[TBP_API__MAX];
	static int indexed;
	if (id == 0 || id >= TBP_API__MAX)
		return NULL;
	if (!__atomic_load_n(&indexed, __ATOMIC_ACQUIRE)) {
		for (size_t i = 0; i < sizeof api_table / sizeof api_table[0]; i++)
			if (api_table[i].id < TBP_API__MAX)
				by_id[api_table[i].id] = &api_table[i];
		__atomic_store_n(&indexed, 1, __ATOMIC_RELEASE);
	}
	return by_id[id];
}

int tbp_is_error(int status)
{
	return status >= TBP_ERR_IO;
}

const char *tbp_error_name(int status)
{
	switch (status) {
	case TBP_OK: return "ok";
	case TBP_END: return "end of trace";
	case TBP_ERR_IO: return "I/O error";
	case TBP_ERR_NOT_FOUND: return "no such file";
	case TBP_ERR_IS_DIR: return "is a directory";
	case TBP_ERR_EMPTY: return "empty file";
	case TBP_ERR_NOT_TRACE: return "not a tbprof trace";
	case TBP_ERR_VERSION: return "trace written for a newer reader";
	case TBP_ERR_CHECKSUM: return "checksum mismatch";
	case TBP_ERR_CORRUPT: return "corrupt data";
	case TBP_ERR_TRUNCATED: return "trace truncated";
	case TBP_ERR_NOMEM: return "out of memory";
	case TBP_ERR_ARG: return "invalid argument";
	case TBP_ERR_PERMISSION: return "permission denied";
	case TBP_ERR_NO_EVENTS: return "no events";
	default: return "unknown error";
	}
}

/* ---------------------------------------------------------------- header */

uint32_t tbp_crc32(const void *data, size_t len)
{
	/* Bitwise CRC-32 (IEEE 802.3, reflected, as in zlib): only the small
	 * header is checked with it, so no table is needed. */
	const uint8_t *p = data;
	uint32_t crc = 0xffffffffu;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

unsigned tbp_kind_schema_flags(const struct tbp_kind_info *ki)
{
	/* An interval's end is close to its start, and much closer than to
	 * the previous record's end: coding it as the duration halves the
	 * bytes zstd sees for every timed call and GPU record. */
	unsigned flags = ki->has_blob ? TBP_SCHEMA_HAS_BLOB : 0;
	if (ki->nfields > 0 && !strcmp(ki->field_names[0], "end"))
		flags |= TBP_SCHEMA_END_FROM_TS;
	return flags;
}

size_t tbp_record_size(void)
{
	return sizeof(struct tbp_record);
}

int tbp_is_trace_prefix(const void *bytes, size_t n)
{
	const uint8_t *b = bytes;
	/* skippable frame magic, u32 content size, then the file magic */
	return n >= 8 + TBP_FILE_MAGIC_LEN && tbp_get_le32(b) == TBP_MAGIC_HEADER_FRAME &&
	       !memcmp(b + 8, TBP_FILE_MAGIC, TBP_FILE_MAGIC_LEN);
}

size_t tbp_header_encoded_max(void)
{
	/* magic + version + min_reader + features + count + per kind 3 varints + crc */
	return TBP_FILE_MAGIC_LEN + 2 + 2 + 4 + TBP_VARINT_MAX + TBP_K__MAX * (2 * TBP_VARINT_MAX + 1) + 4;
}

size_t tbp_header_encode(uint8_t *out, uint32_t features)
{
	uint8_t *p = out;
	memcpy(p, TBP_FILE_MAGIC, TBP_FILE_MAGIC_LEN);
	p += TBP_FILE_MAGIC_LEN;
	tbp_put_le16(p, TBP_FORMAT_VERSION);
	tbp_put_le16(p + 2, TBP_MIN_READER_VERSION);
	tbp_put_le32(p + 4, features);
	p += 8;
	unsigned count = 0;
	for (unsigned k = 0; k < TBP_K__MAX; k++)
		count += kind_table[k].name != NULL;
	p += tbp_put_varint(p, count);
	for (unsigned k = 0; k < TBP_K__MAX; k++) {
		if (!kind_table[k].name)
			continue;
		p += tbp_put_varint(p, k);
		p += tbp_put_varint(p, kind_table[k].nfields);
		*p++ = (uint8_t)tbp_kind_schema_flags(&kind_table[k]);
	}
	tbp_put_le32(p, tbp_crc32(out, (size_t)(p - out)));
	p += 4;
	return (size_t)(p - out);
}

int tbp_header_parse(const uint8_t *p, size_t n, struct tbp_header *hdr, struct tbp_schema *schema,
	const char **why)
{
	const uint8_t *start = p, *end = p + n;
	memset(schema, 0, sizeof *schema);
	if (n < TBP_FILE_MAGIC_LEN || memcmp(p, TBP_FILE_MAGIC, TBP_FILE_MAGIC_LEN)) {
		*why = "missing TBPROF magic";
		return TBP_ERR_NOT_TRACE;
	}
	p += TBP_FILE_MAGIC_LEN;
	if (end - p < 8 + 4) {
		*why = "header too short";
		return TBP_ERR_CORRUPT;
	}
	hdr->version = tbp_get_le16(p);
	hdr->min_reader_version = tbp_get_le16(p + 2);
	hdr->features = tbp_get_le32(p + 4);
	p += 8;
	/* Version before schema: a newer writer may change the schema encoding. */
	if (hdr->min_reader_version > TBP_FORMAT_VERSION) {
		*why = "written for a newer reader";
		return TBP_ERR_VERSION;
	}
	/* The last 4 bytes are a CRC-32 of everything before them: the header
	 * is not inside a checksummed zstd frame, and a damaged schema would
	 * silently mis-decode every record. */
	end -= 4;
	if (tbp_get_le32(end) != tbp_crc32(start, (size_t)(end - start))) {
		*why = "header";
		return TBP_ERR_CHECKSUM;
	}
	uint64_t count;
	if (tbp_get_varint(&p, end, &count) || count > TBP_SCHEMA_MAX_KIND + 1) {
		*why = "bad schema kind count";
		return TBP_ERR_CORRUPT;
	}
	for (uint64_t i = 0; i < count; i++) {
		uint64_t kind, nfields;
		if (tbp_get_varint(&p, end, &kind) || tbp_get_varint(&p, end, &nfields) || p >= end) {
			*why = "schema runs past the header";
			return TBP_ERR_CORRUPT;
		}
		uint8_t flags = *p++;
		if (kind == 0 || kind > TBP_SCHEMA_MAX_KIND || nfields > TBP_SCHEMA_MAX_FIELDS ||
		    (flags & ~TBP_SCHEMA_KNOWN_FLAGS) || ((flags & TBP_SCHEMA_END_FROM_TS) && nfields == 0)) {
			*why = "bad schema entry";
			return TBP_ERR_CORRUPT;
		}
		if (schema->kind[kind].present) {
			*why = "kind listed twice in schema";
			return TBP_ERR_CORRUPT;
		}
		schema->kind[kind].present = 1;
		schema->kind[kind].nfields = (uint8_t)nfields;
		schema->kind[kind].has_blob = (flags & TBP_SCHEMA_HAS_BLOB) != 0;
		schema->kind[kind].end_from_ts = (flags & TBP_SCHEMA_END_FROM_TS) != 0;
	}
	/* Bytes between the schema and the CRC are reserved for later
	 * versions: ignored. */
	return TBP_OK;
}
