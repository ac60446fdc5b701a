"""Loads the call-path test library (libtbprof/python.c + fake_core.c) twice:
`cdll` releases the GIL around calls (like PyTorch ops), `pydll` keeps it."""
import ctypes
import os
import sys

PATH = os.environ.get("TBP_PYTEST_SHIM")
if not PATH:
    sys.exit("TBP_PYTEST_SHIM is not set (run through meson test)")
cdll = ctypes.CDLL(PATH)
pydll = ctypes.PyDLL(PATH)
for lib in (cdll, pydll):
    lib.tpy_callpath.restype = ctypes.c_ulonglong
    lib.tpy_callpath_in_thread.restype = ctypes.c_ulonglong
    lib.tpy_ndefs.restype = ctypes.c_ulonglong
    lib.tpy_bench.restype = ctypes.c_double
    lib.tpy_setup.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]
    lib.tpy_note_wait.argtypes = [ctypes.c_ulonglong]
    lib.tpy_upset_rate.argtypes = [ctypes.c_double]
    lib.tpy_describe.argtypes = [ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int]


def describe(path):
    """[(file, line, function), ...] leaf first."""
    buf = ctypes.create_string_buffer(1 << 20)
    n = pydll.tpy_describe(path, buf, len(buf))
    if n < 0:
        raise AssertionError("call path %d is not fully defined" % path)
    out = []
    for row in buf.raw[:n].decode().splitlines():
        file, line, func = row.split("\t")
        out.append((file, int(line), func))
    return out


def spans():
    ts, end, path, tid = (ctypes.c_ulonglong(), ctypes.c_ulonglong(), ctypes.c_ulonglong(),
                          ctypes.c_uint())
    out = []
    for i in range(pydll.tpy_nspans()):
        pydll.tpy_span(i, ctypes.byref(ts), ctypes.byref(end), ctypes.byref(path),
                       ctypes.byref(tid))
        out.append((ts.value, end.value, path.value, tid.value))
    return out


from tpyshim_sites import site_lines  # noqa: E402,F401


from checks import check, failures, finish  # noqa: E402,F401
