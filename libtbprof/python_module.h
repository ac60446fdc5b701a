/*
 * What the files of the Python module share with each other (not with the
 * tests: python_internal.h):
 *   python.c          versions, state, set-up, the call path of a thread
 *   python_read.c     reads of CPython objects without the GIL, line tables
 *   python_walk.c     lock-free intern tables, the frame walker, frameless-thread attribution
 *   python_spans.c    the evaluator hook (spans) and its C stack guard
 *   python_libdirs.c  the interpreter's library directories (PY_LIB records)
 * Design: doc/python.md.
 */
#ifndef TBPROF_PYTHON_MODULE_H
#define TBPROF_PYTHON_MODULE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.h"
#include "libc_real.h"   /* tbp_real_dlsym: never our own interposer */
#include "python_internal.h"

/* ------------------------------------------------------------ state (python.c) */

enum py_state { PY_UNINIT = 0, PY_WAITING = 1, PY_READY = 2, PY_INERT = 3 };
extern _Atomic int py_state TBP_HIDDEN;
extern struct py_layout L TBP_HIDDEN;     /* the running interpreter's layout */

/* CPython entry points, resolved with dlsym. */
typedef void *(*eval_frame_fn)(void *tstate, void *frame, int throwflag);
struct py_api {
	int (*is_initialized)(void);
	void *(*this_thread_state)(void);
	int (*gil_check)(void);
	int (*add_pending_call)(int (*)(void *), void *);
	void *(*interp_main)(void);
	eval_frame_fn (*get_eval)(void *interp);
	void (*set_eval)(void *interp, eval_frame_fn fn);
	void *(*intern_from_string)(const char *);
	const void *code_type;
};
extern struct py_api py TBP_HIDDEN;

uint64_t callpath_from(uintptr_t top) TBP_HIDDEN;
uint64_t thread_callpath(uintptr_t top) TBP_HIDDEN;

/* ------------------------------------------------------------ safe reads (python_read.c) */

static inline bool ptr_ok(uintptr_t p)
{
	/* User-space, 8-byte aligned, not in the first page. */
	return p >= 4096 && p < (1ull << 56) && (p & 7) == 0;
}
static inline uintptr_t rd_ptr(uintptr_t base, size_t off)
{
	return *(const uintptr_t *)(base + off);
}
static inline int rd_int(uintptr_t base, size_t off)
{
	return *(const int *)(base + off);
}
static inline bool is_code(uintptr_t obj)
{
	return ptr_ok(obj) && rd_ptr(obj, 8) == (uintptr_t)py.code_type;
}

ssize_t str_utf8(uintptr_t s, char *buf, size_t cap, const char **out) TBP_HIDDEN;
uint64_t intern_str_obj(uintptr_t s) TBP_HIDDEN;
int code_line(uintptr_t code, uint32_t index) TBP_HIDDEN;

/* ------------------------------------------------------------ intern tables, walker (python_walk.c) */

struct slots;
struct table {
	_Atomic(struct slots *) cur;
	unsigned max_log2;
	_Atomic uint64_t count;
	_Atomic uint64_t full; /* inserts given up: probe sequence exhausted */
	_Atomic int growing;
};
extern struct table code_table TBP_HIDDEN, frame_table TBP_HIDDEN, path_table TBP_HIDDEN;
bool table_init(struct table *t, unsigned max_log2) TBP_HIDDEN;
extern _Atomic uint64_t next_frame_id TBP_HIDDEN, next_path_id TBP_HIDDEN;
uint64_t frame_id(uintptr_t code, uint32_t index) TBP_HIDDEN;
uint64_t path_node(uint64_t parent, uint64_t frame) TBP_HIDDEN;

struct raw_frame { uintptr_t code; uint32_t index; };
uintptr_t top_frame(uintptr_t tstate) TBP_HIDDEN;
unsigned walk(uintptr_t frame, struct raw_frame *out, unsigned max) TBP_HIDDEN;
uint64_t intern_path(const struct raw_frame *frames, unsigned n, uint64_t parent) TBP_HIDDEN;
extern _Atomic uint64_t blocking_path TBP_HIDDEN;     /* caller of backward() now running, or 0 */
uint64_t borrowed_path(void) TBP_HIDDEN;

/* ------------------------------------------------------------ spans (python_spans.c) */

void *tbp_eval_frame(void *tstate, void *frame, int throwflag) TBP_HIDDEN;
extern eval_frame_fn prev_eval TBP_HIDDEN;       /* evaluator installed before ours */
extern bool hook_suspended TBP_HIDDEN;          /* GIL: the hook stepped aside */
extern _Atomic uint64_t hook_suspensions TBP_HIDDEN;
void install_eval_hook(void) TBP_HIDDEN;

/* ------------------------------------------------------------ library directories (python_libdirs.c) */

extern _Atomic uint64_t lib_paths_next TBP_HIDDEN; /* tbp_now() of the next ask from a span, 0: not yet asked */
void lib_paths_ask(void) TBP_HIDDEN;
void lib_paths_again(uint64_t now) TBP_HIDDEN;

#endif
