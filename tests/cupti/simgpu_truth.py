#!/usr/bin/env python3
"""End-to-end check of tbprof's GPU timeline against simgpu's ground truth.

Runs a CUDA program on simgpu (its libcudart.so.13 and libcupti.so.13
stand-ins) under LD_PRELOAD=libtbprof.so, reads the trace back with
trace_lines, and compares with the truth log simgpu wrote (SIMGPU_TRUTH).

    simgpu_truth.py MODE --program P --simgpu-dir D --trace-lines T [--args ...]

MODE:
  callback        GPU records == truth exactly (count, start, end, stream, kind),
                  each joined to an API record by corr; CLOCK method CUPTI_CALLBACK
  no-ts-callback  SIMGPU_CUPTI_NO_TS_CALLBACK=1: same within the CLOCK record's
                  uncertainty; method BRACKETED
  no-libcupti     TBPROF_CUPTI_PATH points nowhere and simgpu's libcupti is not on
                  the search path: API records only, exactly one NO_CUPTI notice
  busy            SIMGPU_CUPTI_BUSY=1: program output unchanged, one CUPTI_IN_USE
                  notice, hook-side clock, no GPU records
  disabled        TBPROF_CUPTI=0: API records only, no CUPTI activity
  dropped         SIMGPU_CUPTI_QUEUE_LIMIT=40 (simgpu's CUPTI drops records): LOST
                  records (source CUPTI) account for it; what is kept is true
  shuffle         SIMGPU_CUPTI_SHUFFLE (buffers handed over late and out of time
                  order, seeds 1 and 7): as callback
In callback, no-ts-callback and shuffle the GPU records of each device must
also come in time order in the file.

Exit 0 pass, 1 fail, 77 skip (prerequisite not built).
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

SKIP = 77

# trace.h pinned values
CLOCK_CUPTI_CALLBACK, CLOCK_BRACKETED, CLOCK_HOOK_SIDE = 1, 2, 3
NOTICE_NO_CUPTI, NOTICE_CUPTI_IN_USE = 1, 2
LOST_CUPTI = 2
COPY = {"HtoD": 1, "DtoH": 2, "DtoD": 3, "HtoH": 4, "PtoP": 5}
MEM = {"pageable": 1, "pinned": 2, "device": 3, "managed": 5}
GPU_KIND = {"kernel": "gpu_kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset",
            "sync": "gpu_sync"}
SYNC_NO_STREAM = 0xffffffff  # CUPTI_SYNCHRONIZATION_INVALID_VALUE
API_KINDS = {"api", "launch", "memcpy", "memset", "malloc", "free", "sync"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def read_truth(path):
    """Truth lines as dicts keyed by the header's column names."""
    rows, cols = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#pid"):
                cols = line[1:].split("\t")
                continue
            if not line or line.startswith("#"):
                continue
            if cols is None:
                raise SystemExit("truth log %s has no header" % path)
            rows.append(dict(zip(cols, line.split("\t"))))
    return rows


def read_trace(trace_lines, path):
    """Records as (kind, dict of int fields, text)."""
    out = subprocess.run([trace_lines, path], capture_output=True, text=True)
    if out.returncode != 0:
        fail("trace_lines %s: exit %d: %s" % (path, out.returncode, out.stderr.strip()))
        return []
    recs = []
    for line in out.stdout.splitlines():
        head, _, text = line.partition(" text=")
        parts = head.split(" ")
        fields = {}
        for p in parts[1:]:
            k, _, v = p.partition("=")
            fields[k] = int(v)
        recs.append((parts[0], fields, text))
    return recs


def run(program, args, env, cwd):
    p = subprocess.run([program] + args, env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def strings_of(recs):
    return {f["id"]: text for kind, f, text in recs if kind == "string"}


def notices(recs, code):
    return [f for kind, f, _ in recs if kind == "notice" and f.get("code") == code]


def clocks(recs):
    return [f for kind, f, _ in recs if kind == "clock"]


_demangled = {}


def demangle(name):
    """c++filt's spelling (what __cxa_demangle gives), None without c++filt."""
    if name not in _demangled:
        try:
            out = subprocess.run(["c++filt", name], capture_output=True, text=True)
            _demangled[name] = out.stdout.strip() if out.returncode == 0 else None
        except OSError:
            _demangled[name] = None
    return _demangled[name]


def compare_with_truth(recs, truth, tolerance):
    gpu_truth = [t for t in truth if t.get("gpu") == "1" and t.get("captured", "0") == "0"
                 and t["op"] in GPU_KIND]
    gpu_recs = [(k, f) for k, f, _ in recs if k in GPU_KIND.values()]
    api_corrs = {f["corr"] for k, f, _ in recs if k in API_KINDS and f.get("corr")}
    names = strings_of(recs)

    by_kind_truth = collections.Counter(GPU_KIND[t["op"]] for t in gpu_truth)
    by_kind_trace = collections.Counter(k for k, _ in gpu_recs)
    if by_kind_truth != by_kind_trace:
        fail("GPU record counts %s, truth %s" % (dict(by_kind_trace), dict(by_kind_truth)))
    if not gpu_truth:
        fail("truth log has no GPU activity: the workload did not run on simgpu")

    # Match each truth op to the trace record joined to the same call (truth
    # ext_id is the corr libtbprof pushed; a graph launch shares one corr).
    unmatched = collections.defaultdict(list)
    for k, f in gpu_recs:
        unmatched[(k, f["corr"])].append(f)
    for t in gpu_truth:
        kind = GPU_KIND[t["op"]]
        if t.get("ext_id", "-") == "-":
            fail("truth op seq %s (%s) ran without our external id pushed" % (t["seq"], t["api"]))
            continue
        corr = int(t["ext_id"])
        cands = unmatched.get((kind, corr), [])
        start, end, stream = int(t["start"]), int(t["end"]), int(t["stream"])
        if kind == "gpu_sync" and t.get("sync_kind") in ("event", "device"):
            stream = SYNC_NO_STREAM  # CUPTI: no stream applies to these waits
        best = None
        for f in cands:
            if (abs(f["ts"] - start) <= tolerance and abs(f["end"] - end) <= tolerance
                    and f["stream"] == stream):
                best = f
                break
        if best is None:
            fail("truth op seq %s %s %s [%d, %d] stream %d corr %d: no GPU record within %d ns%s"
                 % (t["seq"], t["op"], t["api"], start, end, stream, corr, tolerance,
                    "; candidates " + ", ".join("[%d, %d] s%d" % (f["ts"], f["end"], f["stream"])
                                                 for f in cands[:3]) if cands else ""))
            continue
        cands.remove(best)
        if corr not in api_corrs:
            fail("GPU record corr %d (%s) joins no API record" % (corr, t["api"]))
        if kind == "gpu_kernel" and t.get("name", "-") != "-":
            got = names.get(best["name"], "")
            # the trace holds the demangled name; the truth the mangled one
            want = demangle(t["name"])
            if not got or (want is not None and got != want):
                fail("kernel %s: name %r in the trace, want %r" % (t["name"], got, want))
        if kind == "gpu_memcpy":
            if best["bytes"] != int(t["bytes"]):
                fail("memcpy seq %s bytes %d, truth %s" % (t["seq"], best["bytes"], t["bytes"]))
            if best["copy_kind"] != COPY.get(t["copy_kind"], 0):
                fail("memcpy seq %s copy_kind %d, truth %s" % (t["seq"], best["copy_kind"],
                                                                t["copy_kind"]))
            for side, col in (("src_kind", "src_mem"), ("dst_kind", "dst_mem")):
                want = MEM.get(t.get(col, "-"))
                if want is not None and best[side] != want:
                    fail("memcpy seq %s %s %d, truth %s" % (t["seq"], side, best[side], t[col]))
        if kind == "gpu_memset" and best["bytes"] != int(t["bytes"]):
            fail("memset seq %s bytes %d, truth %s" % (t["seq"], best["bytes"], t["bytes"]))
    extra = sum(len(v) for v in unmatched.values())
    if extra:
        fail("%d GPU records match no truth op" % extra)
    return len(gpu_truth)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["callback", "no-ts-callback", "no-libcupti", "busy",
                                     "disabled", "dropped", "shuffle"])
    ap.add_argument("--program", required=True)
    ap.add_argument("--simgpu-dir", required=True)
    ap.add_argument("--trace-lines", required=True)
    ap.add_argument("--args", nargs="*", default=["3"])
    ap.add_argument("--sim-env", action="append", default=[], metavar="VAR=VALUE",
                    help="a simgpu knob for both runs (the caller's SIMGPU_* are not passed on)")
    o = ap.parse_args()
    o.program, o.simgpu_dir, o.trace_lines = (os.path.abspath(p) for p in
                                              (o.program, o.simgpu_dir, o.trace_lines))

    lib = os.environ.get("TBPROF_LIB", "")
    for what, path in (("libtbprof", lib), ("program", o.program),
                       ("simgpu libcudart.so.13", os.path.join(o.simgpu_dir, "libcudart.so.13")),
                       ("simgpu libcupti.so.13", os.path.join(o.simgpu_dir, "libcupti.so.13")),
                       ("trace_lines", o.trace_lines)):
        if not path or not os.path.exists(path):
            print("SKIP: %s not built (%s)" % (what, path or "unset"))
            return SKIP

    if o.mode == "shuffle":
        for seed in ("1", "7"):
            rc = check(o, lib, "callback", {"SIMGPU_CUPTI_SHUFFLE": seed})
            if rc:
                return rc
        return 0
    return check(o, lib, o.mode, {})


def gpu_in_time_order(recs):
    """The GPU records of each device in the file's order never go back in time."""
    last = {}
    back = 0
    for k, f, _ in recs:
        if k in GPU_KIND.values():
            dev = f.get("device", 0)
            if f["ts"] < last.get(dev, 0):
                back += 1
            last[dev] = max(last.get(dev, 0), f["ts"])
    if back:
        fail("%d GPU records come after later ones of their device in the trace" % back)


def check(o, lib, mode, extra_env):
    with tempfile.TemporaryDirectory(prefix="tbp-cupti-") as tmp:
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("TBPROF_", "SIMGPU_", "LD_"))}
        base["LD_LIBRARY_PATH"] = o.simgpu_dir
        base.update(kv.split("=", 1) for kv in o.sim_env)
        base["SIMGPU_TRUTH"] = os.path.join(tmp, "truth-ref.tsv")
        if mode == "busy":
            base["SIMGPU_CUPTI_BUSY"] = "1"
        ref_rc, ref_out, _ = run(o.program, o.args, base, tmp)

        env = dict(base)
        env["LD_PRELOAD"] = lib
        env["TBPROF_OUT"] = os.path.join(tmp, "trace.zst")
        env["SIMGPU_TRUTH"] = os.path.join(tmp, "truth.tsv")
        env.update(extra_env)
        if mode == "no-ts-callback":
            env["SIMGPU_CUPTI_NO_TS_CALLBACK"] = "1"
        if mode == "no-libcupti":
            # The runtime must stay simgpu's: only libcupti must be missing,
            # so point the explicit override at nothing.
            env["TBPROF_CUPTI_PATH"] = os.path.join(tmp, "nowhere", "libcupti.so.13")
        if mode == "disabled":
            env["TBPROF_CUPTI"] = "0"
        if mode == "dropped":
            # Records pile up in simgpu's CUPTI until a flush; beyond 40 it drops.
            env["SIMGPU_CUPTI_QUEUE_LIMIT"] = "40"
            env["SIMGPU_CUPTI_FLUSH_MS"] = "100000"
        rc, out, err = run(o.program, o.args, env, tmp)

        if (rc, out) != (ref_rc, ref_out):
            fail("program changed by the preload: exit %d vs %d, stdout %s" %
                 (rc, ref_rc, "same" if out == ref_out else "differs"))
        if mode != "busy" and "tbprof" in err:
            fail("tbprof wrote to stderr: %s" % err.strip())
        if mode == "busy" and err.count("tbprof") > 1:
            fail("more than one tbprof warning: %s" % err.strip())
        if not os.path.exists(env["TBPROF_OUT"]):
            fail("no trace written")
            return 1
        recs = read_trace(o.trace_lines, env["TBPROF_OUT"])
        truth = read_truth(env["SIMGPU_TRUTH"])
        gpu_count = sum(1 for k, _, _ in recs if k in GPU_KIND.values())
        api_count = sum(1 for k, _, _ in recs if k in API_KINDS)
        if api_count == 0:
            fail("no API records in the trace")
        cl = clocks(recs)

        if mode in ("callback", "no-ts-callback"):
            want = CLOCK_CUPTI_CALLBACK if mode == "callback" else CLOCK_BRACKETED
            if len(cl) != 1 or cl[0]["method"] != want:
                fail("CLOCK records %s, want one with method %d" % (cl, want))
                return 1
            tol = 0 if mode == "callback" else cl[0]["uncertainty_ns"]
            n = compare_with_truth(recs, truth, tol)
            gpu_in_time_order(recs)
            print("%s: %d GPU ops matched truth (tolerance %d ns), %d API records"
                  % (mode, n, tol, api_count))
        elif mode == "dropped":
            lost = sum(f["count"] for k, f, _ in recs if k == "lost" and f.get("source") == LOST_CUPTI)
            gpu_truth = [t for t in truth if t.get("gpu") == "1" and t.get("captured", "0") == "0"
                         and t["op"] in GPU_KIND]
            true_ops = collections.Counter(
                (GPU_KIND[t["op"]], int(t["start"]), int(t["end"])) for t in gpu_truth)
            kept = collections.Counter((k, f["ts"], f["end"]) for k, f, _ in recs
                                       if k in GPU_KIND.values())
            if lost == 0:
                fail("no LOST record from CUPTI although simgpu dropped records")
            if gpu_count >= len(gpu_truth):
                fail("%d GPU records of %d: nothing was dropped?" % (gpu_count, len(gpu_truth)))
            if kept - true_ops:
                fail("GPU records not in the truth: %s" % list((kept - true_ops).items())[:3])
            print("dropped: %d of %d GPU ops kept, %d records reported lost by CUPTI"
                  % (gpu_count, len(gpu_truth), lost))
        else:
            if gpu_count:
                fail("%d GPU records in a %s trace" % (gpu_count, mode))
            if mode == "no-libcupti":
                nn = notices(recs, NOTICE_NO_CUPTI)
                if len(nn) != 1 or len([1 for k, _, _ in recs if k == "notice"]) != 1:
                    fail("want exactly one notice (NO_CUPTI), got %s" %
                         [f for k, f, _ in recs if k == "notice"])
                else:
                    msg = strings_of(recs).get(nn[0]["message"], "")
                    if msg != "API-only trace: libcupti not found":
                        fail("notice text %r" % msg)
            if mode == "busy":
                if len(notices(recs, NOTICE_CUPTI_IN_USE)) != 1:
                    fail("want one CUPTI_IN_USE notice")
                if "in use by another tool" not in err:
                    fail("no warning on stderr")
            if mode in ("no-libcupti", "busy"):
                if len(cl) != 1 or cl[0]["method"] != CLOCK_HOOK_SIDE:
                    fail("CLOCK records %s, want one hook-side" % cl)
            if mode == "disabled" and any(c["method"] != CLOCK_HOOK_SIDE for c in cl):
                # the hooks do not start CUPTI at all with TBPROF_CUPTI=0
                fail("CLOCK records %s, want none or hook-side" % cl)
            print("%s: %d API records, no GPU records" % (mode, api_count))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
