"""Read tbprof traces from Python: kernels, copies, API calls and Python
spans as pandas DataFrames (or lists of dicts where pandas is absent).

    import tbprof
    t = tbprof.load("trace.zst")
    t.kernels.groupby("name").dur.sum().nlargest(10)
    t.api_calls[t.api_calls.api == "cudaStreamSynchronize"]
    t.process["rank"]

A thin layer over libtbprof-trace.so (the trace reader tbanalyze uses, the
C API of tbprof/trace.h) through ctypes: the library does the decoding and
every check of doc/trace-format.md; this module resolves interned strings
and Python call paths and builds the tables.  Found by $TBPROF_TRACE_LIB,
then where tbprof was installed, then the loader's search path.

Times are nanoseconds of the traced host's CLOCK_MONOTONIC (GPU times are
already converted), as in the trace.  See doc/python-module.md.

In a process started armed (`tbprof record --on-demand -- python ...`, or
LD_PRELOAD=libtbprof.so TBPROF_ON_DEMAND=1), regions are captured from here:

    with tbprof.capture("cell.zst"):      # a trace of this block
        train_one_epoch()
    tbprof.start("a.zst"); ...; tbprof.stop()
    tbprof.capture(steps=10)             # the next 10 steps (a background capture)
    tbprof.mark_step()                   # a step boundary, for loops without the runner

See doc/launcher.md, "On demand".
"""
import ctypes
import ctypes.util
import os

__all__ = ["load", "records", "Trace", "TraceError", "capture", "start", "stop", "mark_step", "CaptureError",
           "NotLoadedError"]

MAX_FIELDS = 16  # TBP_MAX_FIELDS


class TraceError(Exception):
    """A trace that cannot be read: the message names the file, the byte
    offset and the reason, as tbanalyze says it."""

    def __init__(self, path, status, offset, detail):
        super().__init__(f"{path}: offset {offset}: {detail}")
        self.path, self.status, self.offset, self.detail = path, status, offset, detail


class _Record(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint8), ("stream_kind", ctypes.c_uint8), ("nfields", ctypes.c_uint16),
                ("tid", ctypes.c_uint32), ("ts", ctypes.c_uint64), ("v", ctypes.c_uint64 * MAX_FIELDS),
                ("blob", ctypes.c_void_p), ("blob_len", ctypes.c_uint32)]


class _KindInfo(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint8), ("nfields", ctypes.c_uint8), ("has_blob", ctypes.c_uint8),
                ("name", ctypes.c_char_p), ("field_names", ctypes.POINTER(ctypes.c_char_p)),
                ("string_fields", ctypes.c_uint32)]


class _ApiInfo(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint16), ("family", ctypes.c_uint8), ("category", ctypes.c_uint8),
                ("name", ctypes.c_char_p)]


_lib = None


def _library_candidates():
    env = os.environ.get("TBPROF_TRACE_LIB")
    if env:
        return [env]
    cands = []
    try:
        from . import _install  # written by meson install: where the library went
        cands.append(os.path.join(_install.LIBDIR, "libtbprof-trace.so.0"))
    except ImportError:
        pass
    found = ctypes.util.find_library("tbprof-trace")
    cands += [found] if found else []
    cands.append("libtbprof-trace.so.0")
    return cands


def _load_library():
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for cand in _library_candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("tbprof: libtbprof-trace.so not found (set TBPROF_TRACE_LIB to its path): "
                      + "; ".join(errors))
    lib.tbp_record_size.restype = ctypes.c_size_t
    if lib.tbp_record_size() != ctypes.sizeof(_Record):
        raise OSError(f"tbprof: {cand}: struct tbp_record is {lib.tbp_record_size()} bytes, this module "
                      f"expects {ctypes.sizeof(_Record)}: the library and the module are from different versions")
    lib.tbp_reader_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.tbp_reader_next_many.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Record), ctypes.c_uint,
                                         ctypes.POINTER(ctypes.c_uint)]
    lib.tbp_reader_offset.argtypes = [ctypes.c_void_p]
    lib.tbp_reader_offset.restype = ctypes.c_uint64
    lib.tbp_reader_detail.argtypes = [ctypes.c_void_p]
    lib.tbp_reader_detail.restype = ctypes.c_char_p
    lib.tbp_reader_truncated.argtypes = [ctypes.c_void_p]
    lib.tbp_reader_close.argtypes = [ctypes.c_void_p]
    lib.tbp_error_name.argtypes = [ctypes.c_int]
    lib.tbp_error_name.restype = ctypes.c_char_p
    lib.tbp_kind_lookup.argtypes = [ctypes.c_uint]
    lib.tbp_kind_lookup.restype = ctypes.POINTER(_KindInfo)
    lib.tbp_api_lookup.argtypes = [ctypes.c_uint]
    lib.tbp_api_lookup.restype = ctypes.POINTER(_ApiInfo)
    _lib = lib
    return lib


_kinds = {}


def _kind(lib, k):
    """(name, field names, string field mask) of kind k, or None."""
    if k not in _kinds:
        p = lib.tbp_kind_lookup(k)
        if not p:
            _kinds[k] = None
        else:
            ki = p.contents
            names = tuple(ki.field_names[i].decode() for i in range(ki.nfields))
            _kinds[k] = (ki.name.decode(), names, ki.string_fields)
    return _kinds[k]


_apis = {}


def api_name(api_id):
    """The API's name ("cudaLaunchKernel") for an id of apis.def."""
    if api_id not in _apis:
        p = _load_library().tbp_api_lookup(api_id)
        _apis[api_id] = p.contents.name.decode() if p else f"api#{api_id}"
    return _apis[api_id]


def _detail(lib, r, st):
    d = lib.tbp_reader_detail(r) if r else None
    return (d or lib.tbp_error_name(st)).decode(errors="replace")


def records(path, warn_truncated=True):
    """Every record of the trace, in file order, as (kind_name, dict):
    the dict has "ts", "tid" (thread, or device for GPU records), each
    field by its trace-format.md name, and
    "blob" (bytes) for strings; "chunk" is the record's stream ("defs",
    "thread", "gpu"; a field may be named "stream" too: the CUDA stream).  Raises TraceError on damage; a trace cut
    short (a killed process) yields what it has, with a warning."""
    lib = _load_library()
    r = ctypes.c_void_p()
    st = lib.tbp_reader_open(ctypes.byref(r), os.fsencode(path))
    try:
        if st != 0:
            raise TraceError(path, st, lib.tbp_reader_offset(r) if r else 0, _detail(lib, r, st))
        batch = (_Record * 1024)()
        n = ctypes.c_uint()
        streams = ("defs", "thread", "gpu")
        while True:
            st = lib.tbp_reader_next_many(r, batch, 1024, ctypes.byref(n))
            if st != 0:
                break
            for i in range(n.value):
                rec = batch[i]
                info = _kind(lib, rec.kind)
                if info is None:
                    continue
                name, fields, _ = info
                d = dict(zip(fields, rec.v[:len(fields)]))
                d["ts"] = rec.ts
                d["tid"] = rec.tid
                d["chunk"] = streams[rec.stream_kind] if rec.stream_kind < 3 else rec.stream_kind
                if rec.blob_len:
                    d["blob"] = ctypes.string_at(rec.blob, rec.blob_len)
                yield name, d
        if st == 18:  # TBP_ERR_TRUNCATED: every complete record was returned
            if warn_truncated:
                import warnings
                warnings.warn(f"{path}: trace truncated at offset {lib.tbp_reader_offset(r)} (last frame incomplete)")
        elif st != 1:  # not TBP_END
            raise TraceError(path, st, lib.tbp_reader_offset(r), _detail(lib, r, st))
    finally:
        if r:
            lib.tbp_reader_close(r)


_COPY_KIND = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "DtoD", 4: "HtoH", 5: "PtoP"}
_SIGNED_BITS = 1 << 63
_CALL_KINDS = ("api", "launch", "memcpy", "memset", "malloc", "free", "sync")


def _signed(v):
    return v - (1 << 64) if v & _SIGNED_BITS else v


class Trace:
    """One trace's tables.  kernels, copies, api_calls, spans, markers:
    pandas DataFrames, or lists of dicts when pandas is not installed (or
    load(..., frames=False)).  process: the process facts (pid, cmdline,
    rank, world_size, local_rank: -1 = none).  threads: {tid: name}."""

    def __init__(self, path, frames=None):
        self.path = path
        strings, frames_def, callpaths = {}, {}, {}
        kernels, copies, calls, spans, markers = [], [], [], [], []
        self.process, self.threads, self.devices, self.lost = {}, {}, {}, 0
        for kind, d in records(path):
            if kind == "string":
                strings[d["id"]] = d.get("blob", b"").decode(errors="replace")
            elif kind == "pyframe":
                frames_def[d["id"]] = (d["file"], d["function"], d["line"])
            elif kind == "callpath":
                callpaths[d["id"]] = (d["frame"], d["parent"])
            elif kind == "gpu_kernel":
                kernels.append(d)
            elif kind in ("gpu_memcpy", "gpu_memset"):
                d["what"] = "memcpy" if kind == "gpu_memcpy" else "memset"
                copies.append(d)
            elif kind in _CALL_KINDS:
                d["kind"] = kind
                calls.append(d)
            elif kind == "py_span":
                spans.append(d)
            elif kind == "marker":
                markers.append(d)
            elif kind == "process" and not self.process:
                self.process = d
            elif kind == "thread":
                self.threads[d["tid"]] = d["name"]
            elif kind == "device":
                self.devices[d["device"]] = d
            elif kind == "lost":
                self.lost += d["count"]

        def s(i):
            return strings.get(i, "") if i else ""

        def leaf(cp):
            """(file, function, line) of the innermost frame of call path cp."""
            node = callpaths.get(cp)
            if not node:
                return ("", "", 0)
            f = frames_def.get(node[0])
            return (s(f[0]), s(f[1]), f[2]) if f else ("", "", 0)

        def stack(cp, limit=64):
            out = []
            while cp and len(out) < limit:
                node = callpaths.get(cp)
                if not node:
                    break
                f = frames_def.get(node[0])
                if f:
                    out.append(f"{s(f[0])}:{f[2]} {s(f[1])}")
                cp = node[1]
            return out

        # The launching call of each GPU record, by correlation id: its
        # Python call path is where the kernel came from.
        launch_cp = {c["corr"]: c["callpath"] for c in calls if c["corr"]}

        def where(cp):
            f, fn, line = leaf(cp)
            return f"{f}:{line} {fn}" if f else ""

        self.kernels = [{
            "ts": k["ts"], "end": k["end"], "dur": k["end"] - k["ts"], "name": s(k["name"]),
            "device": k["device"], "stream": k["stream"], "corr": k["corr"],
            "grid": (k["grid_x"], k["grid_y"], k["grid_z"]), "block": (k["block_x"], k["block_y"], k["block_z"]),
            "registers": k["registers"], "shared_mem": k["static_shmem"] + k["dynamic_shmem"],
            "python": where(launch_cp.get(k["corr"], 0)),
        } for k in kernels]
        self.copies = [{
            "ts": c["ts"], "end": c["end"], "dur": c["end"] - c["ts"], "what": c["what"],
            "kind": _COPY_KIND.get(c.get("copy_kind", 0), "unknown") if c["what"] == "memcpy" else "memset",
            "bytes": c["bytes"], "device": c["device"], "stream": c["stream"], "corr": c["corr"],
            "python": where(launch_cp.get(c["corr"], 0)),
        } for c in copies]
        self.api_calls = [{
            "ts": c["ts"], "end": c["end"], "dur": c["end"] - c["ts"], "tid": c["tid"], "api": api_name(c["api"]),
            "kind": c["kind"], "result": _signed(c["result"]), "corr": c["corr"], "device": _signed(c["device"]),
            "stream": c["stream"], "bytes": c.get("bytes", 0), "name": s(c["name"]) if c["kind"] == "launch" else "",
            "python": where(c["callpath"]), "callpath": c["callpath"],
        } for c in calls]
        self.spans = []
        for sp in spans:
            f, fn, line = leaf(sp["callpath"])
            self.spans.append({"ts": sp["ts"], "end": sp["end"], "dur": sp["end"] - sp["ts"], "tid": sp["tid"],
                               "function": fn, "file": f, "line": line, "callpath": sp["callpath"]})
        self.markers = [{"ts": m["ts"], "tid": m["tid"], "kind": m["marker_kind"], "value": _signed(m["value"]),
                         "label": s(m["label"])} for m in markers]
        if self.process:
            p = self.process
            ranked = p["rank"] != (1 << 64) - 1 and p["world_size"] != 0
            self.process = {
                "pid": p["pid"], "ppid": p["ppid"], "host": s(p["host"]), "cmdline": s(p["cmdline"]),
                "exe": s(p["exe"]), "cwd": s(p["cwd"]),
                "rank": p["rank"] if ranked else -1,
                "world_size": p["world_size"] if ranked and p["world_size"] != (1 << 64) - 1 else -1,
                "local_rank": p["local_rank"] if ranked and p["local_rank"] != (1 << 64) - 1 else -1,
            }
        self.threads = {t: s(n) for t, n in self.threads.items()}
        self._stack = stack
        if frames is None or frames:
            try:
                import pandas as pd
            except ImportError:
                if frames:
                    raise ImportError("tbprof.load(frames=True) needs pandas (pip install pandas); "
                                      "frames=False gives lists of dicts")
                pd = None
            if pd is not None:
                cols = {
                    "kernels": ["ts", "end", "dur", "name", "device", "stream", "corr", "grid", "block",
                                "registers", "shared_mem", "python"],
                    "copies": ["ts", "end", "dur", "what", "kind", "bytes", "device", "stream", "corr", "python"],
                    "api_calls": ["ts", "end", "dur", "tid", "api", "kind", "result", "corr", "device", "stream",
                                  "bytes", "name", "python", "callpath"],
                    "spans": ["ts", "end", "dur", "tid", "function", "file", "line", "callpath"],
                    "markers": ["ts", "tid", "kind", "value", "label"],
                }
                for name, c in cols.items():
                    setattr(self, name, pd.DataFrame(getattr(self, name), columns=c))

    def python_stack(self, callpath):
        """The call path as "file:line function" strings, innermost first."""
        return self._stack(callpath)

    def __repr__(self):
        n = {k: len(getattr(self, k)) for k in ("kernels", "copies", "api_calls", "spans")}
        return f"<tbprof.Trace {self.path}: {n}>"


def load(path, frames=None):
    """Reads a whole trace: a Trace with DataFrames (frames=None: when pandas
    is installed; True: required; False: lists of dicts)."""
    return Trace(path, frames)


# ---------------------------------------------------------------- captures (libtbprof's exports)

class CaptureError(RuntimeError):
    """A capture that cannot be taken: the message says why and what to do."""


class NotLoadedError(CaptureError):
    """libtbprof is not loaded in this process (or not armed on demand)."""


_HOW = ("start the process with `tbprof record --on-demand -- python SCRIPT ...` "
        "(or LD_PRELOAD=/path/to/libtbprof.so TBPROF_ON_DEMAND=1 python SCRIPT ...)")
_cap = None


def _capture_lib():
    """libtbprof's capture functions, or NotLoadedError."""
    global _cap
    if _cap is not None:
        return _cap
    try:
        proc = ctypes.CDLL(None)
        start_fn = proc.tbprof_capture_start
    except (OSError, AttributeError):
        raise NotLoadedError("tbprof capture: libtbprof is not loaded in this process: " + _HOW) from None
    start_fn.argtypes = (ctypes.c_char_p, ctypes.c_longlong, ctypes.c_double, ctypes.c_char_p, ctypes.c_size_t)
    start_fn.restype = ctypes.c_int
    for name in ("tbprof_capture_stop", "tbprof_capture_last"):
        getattr(proc, name).argtypes = (ctypes.c_char_p, ctypes.c_size_t)
        getattr(proc, name).restype = ctypes.c_int
    proc.tbprof_capture_state.argtypes = ()
    proc.tbprof_capture_state.restype = ctypes.c_int
    proc.tbprof_mark_step.argtypes = ()
    proc.tbprof_mark_step.restype = ctypes.c_int
    _cap = proc
    return proc


class capture:
    """A capture of this process into PATH (default: the run's trace name with .captureN).

    capture(path) begins recording at once; `with capture(path): ...` records the block and the
    file is complete when it exits.  capture(path, steps=N) records the next N steps from the next
    step boundary (the runner's marks, or mark_step()); capture(path, seconds=S) S seconds from now;
    both end by themselves (wait() waits for the file; leaving a `with` block ends them there).
    """

    def __init__(self, path=None, steps=None, seconds=None):
        lib = _capture_lib()
        if steps is not None and (int(steps) != steps or steps < 1):
            raise ValueError(f"steps={steps!r}: a positive whole number of steps")
        if seconds is not None and not seconds > 0:
            raise ValueError(f"seconds={seconds!r}: a positive number of seconds")
        out = ctypes.create_string_buffer(4096)
        rc = lib.tbprof_capture_start(os.fsencode(path) if path else None, int(steps or 0), float(seconds or 0),
                                      out, len(out))
        if rc == -1:
            raise NotLoadedError("tbprof capture: this process is traced whole, not on demand: " + _HOW)
        if rc == -2:
            raise CaptureError("tbprof capture: a capture is already in progress in this process")
        if rc == -3:
            err = ctypes.get_errno()
            raise CaptureError(f"tbprof capture: cannot write {out.value.decode(errors='replace')}"
                               + (f": {os.strerror(err)}" if err else ""))
        self.path = out.value.decode(errors="replace")
        self.written = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self):
        """Ends the capture (if still running); returns its file's path, or None when nothing was recorded."""
        lib = _capture_lib()
        if lib.tbprof_capture_state() in (1, 2, 3):
            out = ctypes.create_string_buffer(4096)
            rc = lib.tbprof_capture_stop(out, len(out))
            if rc >= 0:
                self.written = rc == 1
        return self.wait(0)

    def wait(self, timeout=None):
        """Waits until the capture's file is written; its path, or None when nothing was recorded."""
        import time
        lib = _capture_lib()
        deadline = None if timeout is None else time.monotonic() + timeout
        while lib.tbprof_capture_state() in (1, 2, 3):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"tbprof capture: {self.path} not finished within {timeout} s")
            time.sleep(0.01)
        out = ctypes.create_string_buffer(4096)
        rc = lib.tbprof_capture_last(out, len(out))
        if rc < 0:
            raise CaptureError(f"tbprof capture: {self.path} could not be written")
        return self.path if rc == 1 else None


_current = None


def start(path=None, steps=None, seconds=None):
    """Begins a capture (see capture); tbprof.stop() ends it.  Returns its file's path."""
    global _current
    _current = capture(path, steps=steps, seconds=seconds)
    return _current.path


def stop():
    """Ends the capture begun by start() (or any in progress); its path, or None when nothing was recorded."""
    global _current
    lib = _capture_lib()
    if _current is not None:
        c, _current = _current, None
        return c.stop()
    out = ctypes.create_string_buffer(4096)
    rc = lib.tbprof_capture_stop(out, len(out))
    if rc < 0:
        raise CaptureError("tbprof.stop(): no capture in progress")
    return out.value.decode(errors="replace") if rc == 1 else None


def mark_step():
    """One training step ended and the next begins (what the runner's marks say around each iteration):
    steps in the report, and the boundaries `tbprof capture --steps N` counts."""
    return _capture_lib().tbprof_mark_step()
