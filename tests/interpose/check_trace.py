#!/usr/bin/env python3
"""Runs a program with and without libtbprof preloaded and checks that

  * stdout and the exit status are identical (the host is unchanged);
  * with --truth: every operation in simgpu's ground-truth log appears in the
    trace, in the same order per thread, with the same API, result, kernel
    name (demangled), bytes, copy direction, host memory kind and stream;
    counts are exact (one record per API call; a graph launch is one record);
  * with --expect-error: every recorded API call failed with that code, and
    the trace holds at least --min-records API records.

Usage:
  check_trace.py [--truth] [--expect-error N] [--min-records N] [--env K=V]... -- prog args...
Environment: TBPROF_LIB, TRACEDUMP (the tracedump tool).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ.get("TBP_SOURCE_ROOT", "."), "tests", "simgpu"))

RECORD_KINDS = {"launch", "memcpy", "memset", "malloc", "free", "sync", "api"}
TRUTH_TO_KIND = {"kernel": "launch", "memcpy": "memcpy", "memset": "memset", "malloc": "malloc",
                 "free": "free", "sync": "sync", "stream": "api", "event": "api", "device": "api"}
COPY_KIND = {"HtoD": 1, "DtoH": 2, "DtoD": 3, "HtoH": 4, "PtoP": 5}
PINNED, PAGEABLE = 2, 4


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def parse_dump(text):
    recs = []
    for line in text.splitlines():
        kind, rest = line.split(" ", 1)
        rec = {"kind": kind}
        for m in re.finditer(r'(\w+)=("([^"]*)"|\S+)', rest):
            key, raw, quoted = m.group(1), m.group(2), m.group(3)
            if quoted is not None:
                rec[key] = quoted
            else:
                try:
                    rec[key] = int(raw)
                except ValueError:
                    rec[key] = raw
        recs.append(rec)
    return recs


def demangle(names):
    names = sorted(set(n for n in names if n))
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                         text=True).stdout.splitlines()
    return dict(zip(names, out))


def run(cmd, env, cwd, timeout=60):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout


def dump(path):
    p = subprocess.run([os.environ["TRACEDUMP"], path], capture_output=True, text=True)
    if p.returncode not in (0, 5):
        fail(f"tracedump {path}: rc {p.returncode}: {p.stderr.strip()}")
    return parse_dump(p.stdout), p.returncode


def truth_ops(path):
    import simgpu_truth
    ops = simgpu_truth.read(path)
    out, graphs = [], set()
    for o in ops:
        if o["api"] and o["api"].startswith("cudaGraphLaunch"):
            # one API record per graph launch, however many nodes it ran
            if (o["pid"], o["corr"]) in graphs:
                continue
            graphs.add((o["pid"], o["corr"]))
            o = dict(o, op="graph")
        out.append(o)
    return out


def compare(ops, recs):
    names = demangle(o["name"] for o in ops if o["op"] == "kernel")
    by_tid_ops, by_tid_recs = {}, {}
    for o in ops:
        by_tid_ops.setdefault(o["tid"], []).append(o)
    for r in recs:
        if r["kind"] in RECORD_KINDS:
            by_tid_recs.setdefault(r["tid"], []).append(r)
    if sorted(by_tid_ops) != sorted(by_tid_recs):
        fail(f"threads differ: truth {sorted(by_tid_ops)} trace {sorted(by_tid_recs)}")
    checked = 0
    for tid, tops in by_tid_ops.items():
        trecs = by_tid_recs[tid]
        if len(tops) != len(trecs):
            tc = {}
            for o in tops:
                tc[o["op"]] = tc.get(o["op"], 0) + 1
            rc = {}
            for r in trecs:
                rc[r["kind"]] = rc.get(r["kind"], 0) + 1
            fail(f"tid {tid}: {len(tops)} truth ops {tc} vs {len(trecs)} trace records {rc}")
        for o, r in zip(tops, trecs):
            where = f"tid {tid} truth seq {o['seq']} ({o['op']} {o['api']}) vs trace {r.get('api_name')}"
            want_kind = "api" if o["op"] == "graph" else TRUTH_TO_KIND[o["op"]]
            if r["kind"] != want_kind:
                fail(f"{where}: record kind {r['kind']} != {want_kind}")
            if r["api_name"] != o["api"]:
                fail(f"{where}: api differs")
            if r["result"] != o["result"]:
                fail(f"{where}: result {r['result']} != {o['result']}")
            if o["op"] not in ("malloc", "free", "device", "event", "stream") or o["stream_handle"]:
                if o["stream_handle"] is not None and r["stream"] != o["stream_handle"]:
                    fail(f"{where}: stream {r['stream']:#x} != {o['stream_handle']:#x}")
            if o["op"] == "kernel":
                if r["kname"] != names.get(o["name"], o["name"]):
                    fail(f"{where}: kernel name {r['kname']!r} != {names.get(o['name'])!r}")
                if (r["grid_x"], r["grid_y"], r["grid_z"]) != o["grid"] or \
                        (r["block_x"], r["block_y"], r["block_z"]) != o["block"]:
                    fail(f"{where}: geometry differs")
            if o["op"] in ("memcpy", "memset", "malloc") and o["bytes"] is not None:
                if r["bytes"] != o["bytes"]:
                    fail(f"{where}: bytes {r['bytes']} != {o['bytes']}")
            if o["op"] == "free" and o["result"] == 0 and o["bytes"]:
                if r["bytes"] != o["bytes"]:
                    fail(f"{where}: freed bytes {r['bytes']} != {o['bytes']}")
            if o["op"] == "memcpy" and o["result"] == 0:
                if o["copy_kind"] and r["copy_kind"] != COPY_KIND[o["copy_kind"]]:
                    fail(f"{where}: copy kind {r['copy_kind']} != {o['copy_kind']}")
                if o["hostmem"] in ("pinned", "pageable") and o["copy_kind"] in ("HtoD", "DtoH"):
                    want = PINNED if o["hostmem"] == "pinned" else PAGEABLE
                    if not r["flags"] & want:
                        fail(f"{where}: host side should be {o['hostmem']} (flags {r['flags']})")
            checked += 1
    return checked


def check_analyzer_counts(ops, trace):
    """tbanalyze --json reports the same counts as the ground truth."""
    import json
    p = subprocess.run([os.environ["TBANALYZE"], "--json", trace], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"tbanalyze --json: rc {p.returncode}: {p.stderr.strip()}")
    counts = json.loads(p.stdout)["counts"]
    names = {"kernel": "kernels", "memcpy": "memcpy", "memset": "memset", "malloc": "malloc",
             "free": "free", "sync": "sync"}
    want = {v: 0 for v in names.values()}
    for o in ops:
        # counts.kernels is successful launch calls (doc/report-schema.md:
        # a refused launch runs no kernel); the others count every call
        if o["op"] in names and not (o["op"] == "kernel" and o["result"] != 0):
            want[names[o["op"]]] += 1
    got = {k: counts.get(k) for k in want}
    if got != want:
        fail(f"tbanalyze counts {got} != ground truth {want}")
    print(f"ok: tbanalyze --json counts equal the ground truth {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", action="store_true")
    ap.add_argument("--analyze", action="store_true", help="also check tbanalyze --json counts")
    ap.add_argument("--expect-error", type=int)
    ap.add_argument("--min-records", type=int, default=1)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    lib = os.environ["TBPROF_LIB"]
    if cmd and os.path.exists(cmd[0]):
        cmd[0] = os.path.abspath(cmd[0])
    if cmd and os.path.basename(cmd[0]).startswith("python"):
        cmd[0] = sys.executable   # the interpreter itself, not a pyenv shell shim
    base = dict(os.environ)
    # meson prepends its build directories to LD_LIBRARY_PATH; the test says
    # which runtime the program must bind (simgpu or the real one).
    if "TBP_TEST_LD_LIBRARY_PATH" in base:
        base["LD_LIBRARY_PATH"] = base["TBP_TEST_LD_LIBRARY_PATH"]
    base.pop("TBPROF_OUT", None)
    for kv in a.env:
        k, v = kv.split("=", 1)
        base[k] = v
    with tempfile.TemporaryDirectory(prefix="tbp-interpose-") as tmp:
        plain_dir, traced_dir = os.path.join(tmp, "plain"), os.path.join(tmp, "traced")
        os.mkdir(plain_dir)
        os.mkdir(traced_dir)
        env_plain = dict(base, SIMGPU_TRUTH=os.path.join(tmp, "truth-plain.log"))
        # A sanitizer runtime, when preloaded for a sanitized libtbprof, is
        # preloaded in the plain run too: it changes how crashes end.
        if base.get("TBP_PRELOAD_FIRST"):
            env_plain["LD_PRELOAD"] = base["TBP_PRELOAD_FIRST"]
        rc0, out0 = run(cmd, env_plain, plain_dir)
        env_traced = dict(base, SIMGPU_TRUTH=os.path.join(tmp, "truth.log"),
                          LD_PRELOAD=" ".join(x for x in (base.get("TBP_PRELOAD_FIRST"), lib) if x))
        rc1, out1 = run(cmd, env_traced, traced_dir)
        if rc0 != rc1:
            fail(f"exit status {rc0} without the preload, {rc1} with it")
        if out0 != out1:
            fail("stdout differs with the preload:\n--- plain\n%s\n--- traced\n%s" %
                 (out0.decode(errors="replace"), out1.decode(errors="replace")))
        traces = sorted(f for f in os.listdir(traced_dir) if f.endswith(".zst"))
        if traces != ["trace.zst"]:
            fail(f"expected exactly trace.zst, found {traces}")
        recs, drc = dump(os.path.join(traced_dir, "trace.zst"))
        if drc != 0 or not recs or recs[-1]["kind"] != "end":
            fail("trace incomplete (no END record)")
        api_recs = [r for r in recs if r["kind"] in RECORD_KINDS]
        if a.truth:
            ops = truth_ops(os.path.join(tmp, "truth.log"))
            n = compare(ops, recs)
            print(f"ok: {n} operations match the ground truth; stdout and exit status {rc1} identical")
            if a.analyze:
                check_analyzer_counts(ops, os.path.join(traced_dir, "trace.zst"))
        if a.expect_error is not None:
            bad = [r for r in api_recs if r["result"] != a.expect_error]
            if bad:
                fail(f"{len(bad)} records with result != {a.expect_error}: {bad[0]}")
            if len(api_recs) < a.min_records:
                fail(f"only {len(api_recs)} API records, expected >= {a.min_records}")
            print(f"ok: {len(api_recs)} failing calls recorded with error {a.expect_error}; "
                  f"stdout and exit status {rc1} identical")


if __name__ == "__main__":
    main()
