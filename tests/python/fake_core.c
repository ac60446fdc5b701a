/*
 * A stand-in for libtbprof's core, linked with libtbprof/python.c into a
 * test library that Python loads with ctypes: defs, strings and spans are
 * kept in memory and read back through the tpy_* functions below, so the
 * call-path module is tested on its own, whatever state core.c is in.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "python_internal.h"

#define API __attribute__((visibility("default")))

struct tbp_config tbp_cfg = { .enabled = true, .python = true, .py_span_ns = 100000,
			      .py_depth = 32 };
volatile int tbp_active = 1;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Strings: id = index + 1. */
static char **strings;
static size_t nstrings, capstrings;
/* Defs by id (index = id). */
struct frame_def { uint64_t file, function, line; };
struct path_def { uint64_t frame, parent; };
static struct frame_def *frames;
static size_t capframes;
static struct path_def *paths;
static size_t cappaths;
static uint64_t ndefs;
/* Spans. */
static struct tbp_record *spans;
static size_t nspans, capspans;
static unsigned nnotices;

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need < *cap)
		return p;
	size_t n = *cap ? *cap : 64;
	while (n <= need)
		n *= 2;
	p = realloc(p, n * elem);
	memset((char *)p + *cap * elem, 0, (n - *cap) * elem);
	*cap = n;
	return p;
}

static __thread int in_guard;
bool tbp_guard_enter(void)
{
	if (in_guard)
		return false;
	in_guard = 1;
	return true;
}
void tbp_guard_leave(void) { in_guard = 0; }

uint64_t tbp_intern_string(const char *s, size_t len)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nstrings; i++) {
		if (strlen(strings[i]) == len && memcmp(strings[i], s, len) == 0) {
			pthread_mutex_unlock(&lock);
			return i + 1;
		}
	}
	strings = grow(strings, &capstrings, nstrings, sizeof *strings);
	strings[nstrings] = strndup(s, len);
	uint64_t id = ++nstrings;
	pthread_mutex_unlock(&lock);
	return id;
}

void tbp_emit_def(const struct tbp_record *rec)
{
	pthread_mutex_lock(&lock);
	ndefs++;
	if (rec->kind == TBP_K_PYFRAME) {
		frames = grow(frames, &capframes, rec->u.pyframe.id, sizeof *frames);
		frames[rec->u.pyframe.id] = (struct frame_def){ rec->u.pyframe.file,
			rec->u.pyframe.function, rec->u.pyframe.line };
	} else if (rec->kind == TBP_K_CALLPATH) {
		paths = grow(paths, &cappaths, rec->u.callpath.id, sizeof *paths);
		paths[rec->u.callpath.id] = (struct path_def){ rec->u.callpath.frame,
			rec->u.callpath.parent };
	}
	pthread_mutex_unlock(&lock);
}

static __thread struct tbp_record slot;
struct tbp_record *tbp_slot_acquire(unsigned kind)
{
	memset(&slot, 0, sizeof slot);
	slot.kind = (uint8_t)kind;
	slot.stream_kind = TBP_STREAM_THREAD;
	return &slot;
}
void tbp_slot_commit(struct tbp_record *rec)
{
	pthread_mutex_lock(&lock);
	if (rec->kind == TBP_K_PY_SPAN) {
		spans = grow(spans, &capspans, nspans, sizeof *spans);
		spans[nspans++] = *rec;
	}
	pthread_mutex_unlock(&lock);
}

/* On demand (capture.c): nothing to count here. */
void tbp_capture_backward_done(void)
{
}

/* python.c lends the lifecycle its fork, start and stop steps at load; these tests call
 * tbp_py_init and tbp_py_shutdown themselves and do not fork. */
void tbp_register_hook_ops(const struct tbp_hook_ops *ops)
{
	(void)ops;
}

void tbp_notice(unsigned level, unsigned code, const char *message)
{
	__atomic_add_fetch(&nnotices, 1, __ATOMIC_RELAXED);
}
void tbp_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tbprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
void tbp_warn_once(int *flag, const char *fmt, ...)
{
	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("tbprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---------------------------------------------------- for the tests */

API void tpy_setup(int python, unsigned depth, unsigned long long span_ns)
{
	tbp_cfg.python = python;
	tbp_cfg.py_depth = depth;
	tbp_cfg.py_span_ns = span_ns;
	tbp_py_init();
}
API void tpy_override_minor(unsigned minor) { tbp_py_test_override_minor(minor); }
API int tpy_hook(int on) { return tbp_py_test_hook(on); }
API int tpy_upset_rate(double factor) { return tbp_py_test_upset_rate(factor); }
API void tpy_set_depth(unsigned depth) { tbp_cfg.py_depth = depth; }
API void tpy_set_active(int active) { tbp_active = active; }
API unsigned long long tpy_callpath(void) { return tbp_py_callpath(); }
/* Same call cost from Python, no work: the baseline for per-event costs. */
API unsigned long long tpy_noop(void) { return 0; }
API void tpy_note_wait(unsigned long long path) { tbp_py_note_wait(path); }
API unsigned long long tpy_ndefs(void) { return ndefs; }
API unsigned tpy_nnotices(void) { return nnotices; }

/* "file\tline\tfunction\n" per frame, leaf first.  Returns bytes or -1. */
API int tpy_describe(unsigned long long path, char *buf, int cap)
{
	int n = 0;
	pthread_mutex_lock(&lock);
	for (unsigned guard = 0; path && guard < 100000; guard++) {
		if (path >= cappaths || !paths[path].frame || paths[path].frame >= capframes) {
			n = -1;
			break;
		}
		struct frame_def *f = &frames[paths[path].frame];
		const char *file = f->file && f->file <= nstrings ? strings[f->file - 1] : "?";
		const char *func = f->function && f->function <= nstrings ? strings[f->function - 1] : "?";
		int w = snprintf(buf + n, cap - n, "%s\t%llu\t%s\n", file, (unsigned long long)f->line, func);
		if (w < 0 || w >= cap - n) {
			n = -1;
			break;
		}
		n += w;
		path = paths[path].parent;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

API int tpy_nspans(void) { return (int)nspans; }
API int tpy_span(int i, unsigned long long *ts, unsigned long long *end, unsigned long long *path,
		 unsigned *tid)
{
	if (i < 0 || (size_t)i >= nspans)
		return -1;
	*ts = spans[i].ts;
	*end = spans[i].u.py_span.end;
	*path = spans[i].u.py_span.callpath;
	*tid = spans[i].tid;
	return 0;
}
API void tpy_clear_spans(void)
{
	pthread_mutex_lock(&lock);
	nspans = 0;
	pthread_mutex_unlock(&lock);
}

static void *thread_main(void *out)
{
	*(uint64_t *)out = tbp_py_callpath();
	return NULL;
}
/* Call path seen by a fresh native thread with no Python frames. */
API unsigned long long tpy_callpath_in_thread(void)
{
	uint64_t result = ~0ull;
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, &result) != 0)
		return ~0ull;
	pthread_join(t, NULL);
	return result;
}

/* Average ns per tbp_py_callpath() over n calls from the current stack. */
API double tpy_bench(int n)
{
	uint64_t sink = 0, t0 = tbp_now();
	for (int i = 0; i < n; i++)
		sink += tbp_py_callpath();
	uint64_t t1 = tbp_now();
	__asm__ volatile("" : : "r"(sink));
	return (double)(t1 - t0) / n;
}

API int tpy_line_311(const unsigned char *table, size_t size, int first, unsigned index)
{
	return tbp_py_line_311(table, size, first, index);
}
API int tpy_line_310(const unsigned char *table, size_t size, int first, unsigned addr)
{
	return tbp_py_line_310(table, size, first, addr);
}
API int tpy_layout(unsigned minor, size_t *out, int n)
{
	const struct py_layout *l = tbp_py_layout_for(minor);
	if (!l || n < 8)
		return -1;
	size_t v[8] = { l->ts_top, l->cframe_current, l->fr_code, l->fr_prev, l->fr_instr,
			l->fr_owner, l->co_filename, l->co_name };
	memcpy(out, v, sizeof v);
	return 0;
}

#ifdef TPY_INERT_MAIN
/* A program without Python: the module must stay inert, without notices. */
int main(void)
{
	tbp_py_init();
	uint64_t path = tbp_py_callpath();
	tbp_py_note_wait(7);
	tbp_py_shutdown();
	printf("callpath %llu, notices %u\n", (unsigned long long)path, nnotices);
	return path == 0 && nnotices == 0 ? 0 : 1;
}
#endif
