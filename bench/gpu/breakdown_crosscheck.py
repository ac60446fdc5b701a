#!/usr/bin/env python3
"""Cross-check of tbanalyze's breakdown against an independent measure (issue #19 item 5).

    python3 bench/gpu/breakdown_crosscheck.py [--build build] [-m MODEL ...] [-t train|eval]
                                              [--niter 5] [--nwarmup 3] [--bs N] [--simtorch]

For each model, run.py runs three times on `-d cuda`: once plain (no profiler), then:
  1. under libtbprof: tbanalyze's GPU-active share (`breakdown.gpu_active_pct`: kernels and memsets,
     copies excluded, over the runner's marked iterations);
  2. without libtbprof, inside torch.profiler(activities=[CPU, CUDA]), with the runner's same iteration
     marks turned into record_function ranges: the union of the profiler's kernels and memsets, less what
     overlaps its copies, over the same marked window (first iteration's start to last one's end), as a
     share of that window -- the same definition, from another tool's records.
It prints both and their difference; on a GPU the two must agree within 2 points (exit 1 otherwise).
Beside them, each run's time per iteration (run.py's median GPU time per batch, else CPU wall time, and
the range of its iterations from run.py's progress lines) against the plain run's: two runs can differ
(on an H100, hf_Bert under libtbprof had iterations of 55.6-69.3 ms), and a share measured over slower or
perturbed iterations is not the plain run's -- that must be seen, not guessed.

With --simtorch the runs use simgpu (build/tests/simgpu/simtorch) to show the harness works without a
GPU.  simgpu's CUPTI stand-in does not serve torch.profiler's (Kineto's) GPU records, so there the
independent measure is simgpu's ground-truth log of the profiled run (SIMGPU_TRUTH), over the same
window taken from the runner's marks; torch.profiler's share is printed when it has kernels.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

DEFAULT_MODELS = ["resnet50", "hf_Bert", "hf_Reformer"]

# Runs run.py inside torch.profiler, the runner's iteration marks as record_function ranges, and writes
# the window (CLOCK_MONOTONIC ns, for simgpu's truth) next to the Chrome trace.
WORKER = r"""
import json, os, sys, time
sys.argv = [os.environ["XC_RUN_PY"]] + sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.environ["XC_RUN_PY"]))
import torch
from torch.profiler import profile, ProfilerActivity, record_function
import runner.marks as marks
ranges, window = [], {"begin": None, "end": None}
def mark(kind, value=0, label=""):
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if kind == marks.ITER_BEGIN:
        if window["begin"] is None:
            window["begin"] = now
        r = record_function(f"tbp_iteration_{value}")
        r.__enter__()
        ranges.append(r)
    elif kind == marks.ITER_END and ranges:
        ranges.pop().__exit__(None, None, None)
        window["end"] = now
    return 0
marks.mark = mark
from runner.cli import main
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    try:
        main()
    except SystemExit as e:
        if e.code:
            raise
prof.export_chrome_trace(os.environ["XC_CHROME"])
with open(os.environ["XC_WINDOW"], "w") as f:
    json.dump(window, f)
"""


def union_ns(intervals, lo, hi):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def active_share(work, copies, lo, hi):
    """Busy (work and copies) less data movement (copies), as a share of [lo, hi]: tbanalyze's definition."""
    if hi <= lo:
        return None
    busy = union_ns(work + copies, lo, hi)
    return 100.0 * (busy - union_ns(copies, lo, hi)) / (hi - lo)


def profiler_share(chrome):
    with open(chrome) as f:
        events = json.load(f)["traceEvents"]
    iters = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("tbp_iteration_")]
    if not iters:
        return None, 0
    lo = min(e["ts"] for e in iters) * 1000.0
    hi = max(e["ts"] + e["dur"] for e in iters) * 1000.0
    span = lambda e: (e["ts"] * 1000.0, (e["ts"] + e.get("dur", 0)) * 1000.0)
    work = [span(e) for e in events if e.get("cat") in ("kernel", "gpu_memset")]
    copies = [span(e) for e in events if e.get("cat") == "gpu_memcpy"]
    if not work and not copies:
        return None, 0
    return active_share(work, copies, lo, hi), len(work)


def truth_share(path, window):
    rows, cols = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#pid"):
                cols = line[1:].split("\t")
            elif line and not line.startswith("#"):
                rows.append(dict(zip(cols, line.split("\t"))))
    gpu = [r for r in rows if r.get("gpu") == "1"]
    work = [(int(r["start"]), int(r["end"])) for r in gpu if r["op"] in ("kernel", "memset")]
    copies = [(int(r["start"]), int(r["end"])) for r in gpu if r["op"] == "memcpy"]
    return active_share(work, copies, window["begin"], window["end"])


def iteration_times(run):
    """(median ms, fastest, slowest, 'GPU' or 'CPU wall') of a run.py run: its median per batch from stdout,
    the range from its progress lines on stderr; None when it printed neither."""
    gpu = re.search(r"GPU Time per batch:\s*([\d.]+) milliseconds", run.stdout)
    cpu = re.search(r"CPU Wall Time per batch:\s*([\d.]+) milliseconds", run.stdout)
    if not gpu and not cpu:
        return None
    which = "GPU" if gpu else "CPU wall"
    each = []
    for m in re.finditer(r"run\.py: iteration \d+ of \d+: ([\d.]+) (ms|s)(?:, GPU ([\d.]+) (ms|s))?", run.stderr):
        value, unit = (m.group(3), m.group(4)) if gpu and m.group(3) else (m.group(1), m.group(2))
        each.append(float(value) * (1000.0 if unit == "s" else 1.0))
    median = float((gpu or cpu).group(1))
    return median, min(each, default=median), max(each, default=median), which


def fmt_times(t, plain):
    if t is None:
        return "-"
    ratio = f" (x{t[0] / plain[0]:.3f})" if plain and plain[0] else ""
    return f"{t[0]:.2f} ms [{t[1]:.2f}-{t[2]:.2f}]{ratio}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-m", "--model", action="append", help=f"(repeatable; default {' '.join(DEFAULT_MODELS)})")
    ap.add_argument("-t", "--test", default="train", choices=["train", "eval"])
    ap.add_argument("--niter", type=int, default=5)
    ap.add_argument("--nwarmup", type=int, default=3)
    ap.add_argument("--bs", type=int)
    ap.add_argument("--simtorch", action="store_true", help="run on simgpu (no GPU needed)")
    ap.add_argument("--tolerance", type=float, default=2.0, help="points (default 2)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.path.abspath(args.build)
    lib = os.path.join(build, "libtbprof", "libtbprof.so")
    tbanalyze = os.path.join(build, "analyze", "tbanalyze")
    run_py = os.path.join(root, "run.py")
    tmp = tempfile.mkdtemp(prefix="tbp-crosscheck-")
    worker = os.path.join(tmp, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    prefix = [os.path.join(build, "tests", "simgpu", "simtorch")] if args.simtorch else []
    failures = 0
    print(f"{'model':22s} {'tbanalyze':>10s} {'independent':>12s} {'diff':>7s}  measure")
    for model in args.model or DEFAULT_MODELS:
        run_args = ["-m", model, "-d", "cuda", "-t", args.test, "--niter", str(args.niter),
                    "--nwarmup", str(args.nwarmup)] + (["--bs", str(args.bs)] if args.bs else [])
        if args.simtorch:
            run_args.append("--small")
        base = dict(os.environ)
        base.pop("LD_PRELOAD", None)
        def run(what, script, env):
            """The run, or None (said) when it failed."""
            p = subprocess.run(prefix + [sys.executable, script] + run_args, cwd=root, capture_output=True,
                               text=True, env=env, timeout=3600)
            if p.returncode != 0:
                print(f"{model}: {what} run exit {p.returncode}\n{p.stderr[-1500:]}")
                return None
            return p

        trace = os.path.join(tmp, f"{model}.zst")
        plain = run("plain", run_py, base)
        traced = plain and run("traced", run_py, dict(base, LD_PRELOAD=lib, TBPROF_OUT=trace))
        if not traced:
            failures += 1
            continue
        rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
        ours = json.loads(rep.stdout)["breakdown"]["gpu_active_pct"] if rep.returncode == 0 else None
        env = dict(base, XC_RUN_PY=run_py, XC_CHROME=os.path.join(tmp, f"{model}.json"),
                   XC_WINDOW=os.path.join(tmp, f"{model}.window.json"))
        if args.simtorch:
            env["SIMGPU_TRUTH"] = os.path.join(tmp, f"{model}.truth")
        prof = run("torch.profiler", worker, env)
        if not prof:
            failures += 1
            continue
        theirs, kernels = profiler_share(env["XC_CHROME"])
        measure = f"torch.profiler ({kernels} kernels and memsets)"
        if args.simtorch:
            with open(env["XC_WINDOW"]) as f:
                window = json.load(f)
            truth = truth_share(env["SIMGPU_TRUTH"], window)
            print(f"{'':22s} torch.profiler on simgpu: {kernels} kernels and memsets"
                  + (f", {theirs:.2f} %" if theirs is not None else ""))
            theirs, measure = truth, "simgpu's truth log of the profiled run"
        if ours is None or theirs is None:
            print(f"{model:22s} {str(ours):>10s} {str(theirs):>12s} {'-':>7s}  {measure}: no GPU records")
            failures += 1
            continue
        diff = ours - theirs
        print(f"{model:22s} {ours:9.2f}% {theirs:11.2f}% {diff:+7.2f}  {measure}")
        times = [iteration_times(r) for r in (plain, traced, prof)]
        which = next((t[3] for t in times if t), "?")
        print(f"{'':22s} time per iteration ({which}, median [range]): plain {fmt_times(times[0], None)}, "
              f"libtbprof {fmt_times(times[1], times[0])}, torch.profiler {fmt_times(times[2], times[0])}")
        if not args.simtorch and abs(diff) > args.tolerance:
            failures += 1
    print(f"runs kept in {tmp}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
