/*
 * The built-in layout table of libtbprof/python.c for the CPython these
 * tests run on, checked against that CPython's own (internal) headers.  tests/python's
 * 'versions' test builds it for every other CPython 3.10-3.13 it finds.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_MINOR_VERSION >= 11
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#else
#include <frameobject.h>
#endif
#include <stddef.h>
#include <stdio.h>

#include "python_internal.h"

static int failures;
static void expect(const char *what, size_t got, size_t want)
{
	if (got != want) {
		printf("FAIL %s: table %zu, headers %zu\n", what, got, want);
		failures++;
	} else {
		printf("ok   %s = %zu\n", what, got);
	}
}

int main(void)
{
	const struct py_layout *l = tbp_py_layout_for(PY_MINOR_VERSION);
	if (!l) {
		printf("FAIL no layout for 3.%d\n", PY_MINOR_VERSION);
		return 1;
	}
#if PY_MINOR_VERSION == 11 || PY_MINOR_VERSION == 12
	expect("tstate->cframe", l->ts_top, offsetof(PyThreadState, cframe));
	expect("cframe->current_frame", l->cframe_current, offsetof(_PyCFrame, current_frame));
	expect("frame->f_code", l->fr_code, offsetof(_PyInterpreterFrame, f_code));
	expect("frame->prev_instr", l->fr_instr, offsetof(_PyInterpreterFrame, prev_instr));
#elif PY_MINOR_VERSION == 13
	expect("tstate->current_frame", l->ts_top, offsetof(PyThreadState, current_frame));
	expect("frame->f_executable", l->fr_code, offsetof(_PyInterpreterFrame, f_executable));
	expect("frame->instr_ptr", l->fr_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_MINOR_VERSION == 10
	expect("tstate->frame", l->ts_top, offsetof(PyThreadState, frame));
	expect("frame->f_code", l->fr_code, offsetof(PyFrameObject, f_code));
	expect("frame->f_back", l->fr_prev, offsetof(PyFrameObject, f_back));
	expect("frame->f_lasti", l->fr_instr, offsetof(PyFrameObject, f_lasti));
	expect("code->co_code", l->co_code, offsetof(PyCodeObject, co_code));
#endif
#if PY_MINOR_VERSION >= 11
	expect("frame->previous", l->fr_prev, offsetof(_PyInterpreterFrame, previous));
	expect("frame->owner", l->fr_owner, offsetof(_PyInterpreterFrame, owner));
	expect("code->co_qualname", l->co_name, offsetof(PyCodeObject, co_qualname));
	expect("code->co_code_adaptive", l->co_code, offsetof(PyCodeObject, co_code_adaptive));
#endif
	expect("code->co_filename", l->co_filename, offsetof(PyCodeObject, co_filename));
	expect("code->co_name", l->co_shortname, offsetof(PyCodeObject, co_name));
	expect("code->co_firstlineno", l->co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	expect("code->co_linetable", l->co_linetable, offsetof(PyCodeObject, co_linetable));
	expect("sizeof(PyASCIIObject)", l->ascii_size, sizeof(PyASCIIObject));
	expect("sizeof(PyCompactUnicodeObject)", l->compact_size, sizeof(PyCompactUnicodeObject));
	expect("PyASCIIObject.length", 16, offsetof(PyASCIIObject, length));
	expect("PyASCIIObject.state", 32, offsetof(PyASCIIObject, state));
	expect("PyBytesObject.ob_sval", 32, offsetof(PyBytesObject, ob_sval));
	expect("ob_type", 8, offsetof(PyObject, ob_type));
	printf(failures ? "%d mismatches\n" : "all offsets match\n", failures);
	return failures ? 1 : 0;
}
