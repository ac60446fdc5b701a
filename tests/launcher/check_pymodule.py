#!/usr/bin/env python3
"""The Python module `tbprof` (python/tbprof) over libtbprof-trace.so.

Reads a planted trace (gen_planted) and a real one (libtbprof, a ranked
Python process), checks every table against tbanalyze's own record counts
and known values, damaged and foreign files raise TraceError naming the
offset, and pandas: DataFrames where it is installed (this Python, or the
HTA venv's), else lists of dicts and a clear error for frames=True.
Usage: check_pymodule.py GEN_PLANTED
Environment: TBPROF_TRACE_LIB (build/trace/libtbprof-trace.so), TBPROF_LIB,
TBANALYZE, TBP_SOURCE_ROOT.
"""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ["TBP_SOURCE_ROOT"]
sys.path.insert(0, os.path.join(SRC, "python"))
import tbprof  # noqa: E402

TBANALYZE = os.environ["TBANALYZE"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def kinds(path):
    p = subprocess.run([TBANALYZE, "info", "--json", path], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"tbanalyze info {path}: {p.stderr}")
    return json.loads(p.stdout)["kinds"]


def check_tables(t, path):
    k = kinds(path)
    want = {"kernels": k.get("gpu_kernel", 0), "copies": k.get("gpu_memcpy", 0) + k.get("gpu_memset", 0),
            "api_calls": sum(k.get(x, 0) for x in ("api", "launch", "memcpy", "memset", "malloc", "free", "sync")),
            "spans": k.get("py_span", 0), "markers": k.get("marker", 0)}
    for name, n in want.items():
        if len(getattr(t, name)) != n:
            fail(f"{path}: {len(getattr(t, name))} {name}, tbanalyze counts {n}")
    return want


def main():
    gen = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="tbp-pymod-")
    planted = os.path.join(tmp, "p.zst")
    subprocess.run([gen, "planted", planted, os.path.join(tmp, "p.json")], check=True)
    with open(os.path.join(tmp, "p.json")) as f:
        truth = json.load(f)
    t = tbprof.load(planted, frames=False)
    n = check_tables(t, planted)
    if n["kernels"] != truth["counts"]["kernels"] or not n["kernels"]:
        fail(f"kernels {n['kernels']}, planted {truth['counts']['kernels']}")
    k0 = t.kernels[0]
    if k0["dur"] != k0["end"] - k0["ts"] or k0["dur"] <= 0 or not k0["name"]:
        fail(f"first kernel {k0}")
    # every kernel is attributed to its launch's Python line (the planted
    # workload launches from Python everywhere but one host-only gap)
    placed = sum(1 for k in t.kernels if k["python"])
    if placed < 0.9 * len(t.kernels):
        fail(f"only {placed} of {len(t.kernels)} kernels have their launch's Python line")
    if not any(k["python"] == "optim.py:88 zero_grad" for k in t.kernels):
        fail("the planted zero_grad burst's kernels are not named optim.py:88 zero_grad")
    if not any(s["function"] == "log_metrics" and s["file"] == "log.py" for s in t.spans):
        fail("the planted log_metrics span is missing")
    if {c["kind"] for c in t.copies if c["what"] == "memcpy"} - {"HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "unknown"}:
        fail("copy kinds")
    print(f"ok: planted trace: {n}, kernels placed at their Python lines")
    # a C program linked with libtbprof-trace.so reads the same
    p = subprocess.run([os.environ["READ_SHARED"], planted], capture_output=True, text=True)
    total = sum(kinds(planted).values())
    if p.returncode != 0 or p.stdout.split() != [str(total), str(n["kernels"])]:
        fail(f"read_shared: rc {p.returncode}, {p.stdout!r} {p.stderr!r}; expected {total} {n['kernels']}")
    lib = tbprof._load_library()
    for internal in ("tbp_header_encode", "tbp_header_parse", "tbp_crc32", "tbp_kind_schema_flags"):
        if hasattr(lib, internal):
            fail(f"libtbprof-trace.so exports the internal {internal}")
    print(f"ok: a C program linked with libtbprof-trace.so reads {total} records; internals not exported")

    # a real trace with a rank
    real = os.path.join(tmp, "r.zst")
    env = dict(os.environ, LD_PRELOAD=os.environ["TBPROF_LIB"], TBPROF_TRACE_ALL="1", TBPROF_OUT=real,
               RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    subprocess.run([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<0.05: pass"],
                   env=env, check=True)
    r = tbprof.load(real, frames=False)
    check_tables(r, real)
    if (r.process["rank"], r.process["world_size"], r.process["local_rank"]) != (1, 2, 1):
        fail(f"process {r.process}")
    if r.process["pid"] <= 0 or "python" not in r.process["exe"]:
        fail(f"process {r.process}")
    print(f"ok: real trace: rank {r.process['rank']} of {r.process['world_size']}, {len(r.spans)} spans")

    # bad input: a TraceError naming file and offset
    foreign = os.path.join(tmp, "f.zst")
    with open(foreign, "wb") as f:
        f.write(b"hello, not a trace\n" * 10)
    damaged = os.path.join(tmp, "d.zst")
    data = bytearray(open(planted, "rb").read())
    data[len(data) // 2] ^= 0xFF
    with open(damaged, "wb") as f:
        f.write(data)
    for path, words in ((foreign, "no tbprof header"), (damaged, "offset"),
                        (os.path.join(tmp, "missing.zst"), "offset 0: no such file")):
        try:
            tbprof.load(path, frames=False)
        except tbprof.TraceError as e:
            if path not in str(e) or words not in str(e):
                fail(f"{path}: error {e!r}")
            print(f"ok: TraceError: {e}")
        else:
            fail(f"{path}: read without error")

    try:
        import pandas  # noqa: F401
        have_pandas = True
    except ImportError:
        have_pandas = False
    if not have_pandas:
        try:
            tbprof.load(planted, frames=True)
            fail("frames=True without pandas did not raise")
        except ImportError as e:
            if "pandas" not in str(e):
                fail(f"frames=True without pandas: {e}")
        if not isinstance(tbprof.load(planted).kernels, list):
            fail("without pandas load() should give lists")
        print("ok: without pandas: lists of dicts, frames=True says pandas is needed")
        venv = os.path.join(os.environ.get("TBP_HTA_VENV") or os.path.expanduser("~/.cache/tbprof/hta-venv"),
                            "bin", "python")
        if not os.path.exists(venv) or sys.executable == venv:
            print("SKIP (DataFrames): no Python with pandas here (.ci/setup's HTA venv has one)")
            return
        # the DataFrame part in a Python that has pandas
        p = subprocess.run([venv, __file__, gen, "--frames", planted], capture_output=True, text=True)
        print(p.stdout, end="")
        if p.returncode != 0:
            fail(f"DataFrames under {venv}: {p.stderr[-2000:]}")
        return
    frames_check(planted)


def frames_check(planted):
    t = tbprof.load(planted)
    check_tables(t, planted)
    if type(t.kernels).__name__ != "DataFrame":
        fail(f"kernels is a {type(t.kernels)}")
    by_line = t.kernels.groupby("python").dur.sum()
    if by_line.idxmax() != "model.py:30 forward":
        fail(f"kernel time by line: {by_line.to_dict()}")
    lists = tbprof.load(planted, frames=False)
    if int(t.kernels.dur.sum()) != sum(k["dur"] for k in lists.kernels):
        fail("DataFrame and lists disagree")
    print(f"ok: DataFrames ({sys.executable}): {len(t.kernels)} kernels, most time at {by_line.idxmax()}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--frames":
        frames_check(sys.argv[3])
    else:
        main()
