"""Iteration marks for tbanalyze.

libtbprof, when LD_PRELOADed, exports
    int tbprof_marker(int kind, long long value, const char *label)
and records a MARKER event so tbanalyze can window its analysis to the
steady-state iterations.  Without the preload the symbol is absent and every
call here is a no-op, so the runner behaves the same with or without tbprof.
"""
import ctypes

# enum tbp_marker_kind in trace/include/tbprof/trace.h
USER = 0
ITER_BEGIN = 1
ITER_END = 2
WARMUP_END = 3


def _resolve():
	try:
		process = ctypes.CDLL(None)
	except OSError:
		return None
	try:
		fn = getattr(process, "tbprof_marker")
	except AttributeError:
		return None
	fn.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_char_p)
	fn.restype = ctypes.c_int
	return fn


_marker_fn = _resolve()


def available():
	"""True when libtbprof is loaded in this process."""
	return _marker_fn is not None


def mark(kind, value=0, label=""):
	"""Records a marker; returns libtbprof's result, or None without it."""
	if _marker_fn is None:
		return None
	return _marker_fn(int(kind), int(value), label.encode("utf-8", "replace"))
