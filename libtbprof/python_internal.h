/*
 * Internals of python.c shared with its tests (tests/python): the
 * per-version layout table and the line-table decoders.
 */
#ifndef TBPROF_PYTHON_INTERNAL_H
#define TBPROF_PYTHON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Offsets (bytes, LP64) of what the walker reads, for one CPython 3.x. */
struct py_layout {
	unsigned minor;
	/* thread state */
	size_t ts_top;            /* 3.10 frame, 3.11/12 cframe, 3.13 current_frame */
	size_t cframe_current;    /* 3.11/12: _PyCFrame.current_frame */
	bool has_cframe;
	/* frame (3.10 PyFrameObject, else _PyInterpreterFrame) */
	size_t fr_code, fr_prev, fr_instr, fr_owner;
	bool instr_is_index;      /* 3.10: f_lasti (int, code units) instead of a pointer */
	int owner_cstack;         /* owner value of C-stack shim frames, -1 none */
	/* code object */
	size_t co_filename;
	size_t co_name;           /* co_qualname (3.11+), co_name (3.10): reported */
	size_t co_shortname;      /* co_name: for recognizing functions */
	size_t co_firstlineno, co_linetable, co_code;
	bool linetable_310;       /* 3.10 (bytes delta, line delta) pairs */
	/* str */
	size_t ascii_size, compact_size;
};

/* NULL for versions without a table. */
const struct py_layout *tbp_py_layout_for(unsigned minor);
/* The running interpreter's layout, once the walker is ready (python_stall.c reads other threads'
 * frames with it); NULL when Python is off, absent or not supported. */
const struct py_layout *tbp_py_layout_running(void);
/* Line of code unit `index` in a 3.11+ location table, -1 unknown. */
int tbp_py_line_311(const uint8_t *table, size_t size, int firstlineno, uint32_t index);
/* Line of byte offset `addr` in a 3.10 line table, -1 unknown. */
int tbp_py_line_310(const uint8_t *table, size_t size, int firstlineno, uint32_t addr);

/* Tests only: behave as if CPython 3.`minor` were running (0: real). */
void tbp_py_test_override_minor(unsigned minor);
/* Tests/benchmarks only, GIL held: remove (0) or restore (1) the span hook. */
int tbp_py_test_hook(int on);
/* Tests only: scale the counter's rate by `factor` and re-measure it from
 * the next span on, as after a calibration read across a preemption.
 * 0 without a counter. */
int tbp_py_test_upset_rate(double factor);

#endif
