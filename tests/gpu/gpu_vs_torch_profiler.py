#!/usr/bin/env python3
"""Suite 'gpu': tbprof's CUPTI kernel timeline against torch.profiler on a
real NVIDIA GPU.  Skips (exit 77) without one.

Runs gpu_workload.py twice: once under LD_PRELOAD=libtbprof.so, once (no
preload) inside torch.profiler.  Over the same window of training steps:
kernel count must be equal and total kernel time within 1 %.

    gpu_vs_torch_profiler.py --trace-lines PATH [--iters N] [--keep DIR]
Needs TBPROF_LIB in the environment (meson's test_env sets it).
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 0.01


def have_nvidia_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False, "nvidia-smi not found"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "nvidia-smi failed: %s" % e
    if out.returncode != 0 or "GPU" not in out.stdout:
        return False, "nvidia-smi lists no GPU"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, "libcuda.so.1 (the driver) not loadable"
    probe = subprocess.run([sys.executable, "-c",
                            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                           capture_output=True, timeout=300)
    if probe.returncode != 0:
        return False, "torch.cuda.is_available() is False"
    return True, out.stdout.splitlines()[0]


def our_kernels(trace_lines, trace, begin, end):
    out = subprocess.run([trace_lines, trace], capture_output=True, text=True, check=True)
    kernels, api_corrs, clocks, notices, strings = [], set(), [], [], {}
    for line in out.stdout.splitlines():
        head, _, text = line.partition(" text=")
        head = head.split(" ")
        f = {k: int(v) for k, _, v in (p.partition("=") for p in head[1:])}
        if head[0] == "gpu_kernel":
            kernels.append(f)
        elif head[0] in ("launch", "api") and f.get("corr"):
            api_corrs.add(f["corr"])
        elif head[0] == "clock":
            clocks.append(f)
        elif head[0] == "notice":
            notices.append(f)
        elif head[0] == "string":
            strings[f["id"]] = text
    for n in notices:  # why a trace has no GPU timeline, if it has none
        print("trace notice (code %d): %s" % (n["code"], strings.get(n["message"], "?")))
    inside = [k for k in kernels if begin <= k["ts"] and k["end"] <= end]
    joined = sum(1 for k in inside if k["corr"] in api_corrs)
    return inside, joined, clocks


def profiler_kernels(chrome_trace):
    with open(chrome_trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    # Chrome trace durations are microseconds (fractional: ns resolution).
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-lines", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--keep", help="keep traces and results here")
    o = ap.parse_args()

    ok, why = have_nvidia_gpu()
    if not ok:
        print("no NVIDIA GPU: skipping (%s)" % why)
        return SKIP
    print("GPU:", why)
    lib = os.environ.get("TBPROF_LIB")
    if not lib or not os.path.exists(lib):
        print("FAIL: TBPROF_LIB not set or missing")
        return 1

    tmp = o.keep or tempfile.mkdtemp(prefix="tbp-gpu-")
    os.makedirs(tmp, exist_ok=True)
    workload = [sys.executable, os.path.join(HERE, "gpu_workload.py")]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TBPROF_", "LD_PRELOAD"))}

    env = dict(base, LD_PRELOAD=lib, TBPROF_OUT=os.path.join(tmp, "tbprof.zst"))
    subprocess.run(workload + [os.path.join(tmp, "tbprof.json"), "--iters", str(o.iters)],
                   env=env, check=True, timeout=600)
    subprocess.run(workload + [os.path.join(tmp, "torch.json"), "--iters", str(o.iters),
                               "--torch-profiler", os.path.join(tmp, "torch_trace.json")],
                   env=base, check=True, timeout=600)

    with open(os.path.join(tmp, "tbprof.json")) as f:
        win = json.load(f)
    ours, joined, clocks = our_kernels(o.trace_lines, os.path.join(tmp, "tbprof.zst"),
                                       win["begin_ns"], win["end_ns"])
    theirs = profiler_kernels(os.path.join(tmp, "torch_trace.json"))
    our_ns = sum(k["end"] - k["ts"] for k in ours)
    their_ns = sum(e["dur"] for e in theirs) * 1000.0
    diff = (our_ns - their_ns) / their_ns if their_ns else float("inf")

    print("device: %s, torch %s, %d training steps" % (win["device"], win["torch"], win["iters"]))
    print("clock: %s" % clocks)
    print("kernels: tbprof %d (%d joined to an API record), torch.profiler %d"
          % (len(ours), joined, len(theirs)))
    print("total kernel time: tbprof %.3f ms, torch.profiler %.3f ms, difference %+.3f %%"
          % (our_ns / 1e6, their_ns / 1e6, 100 * diff))
    failed = False
    if len(ours) != len(theirs):
        print("FAIL: kernel counts differ")
        failed = True
    if abs(diff) > TOLERANCE:
        print("FAIL: total kernel time differs by more than %.0f %%" % (100 * TOLERANCE))
        failed = True
    if joined != len(ours):
        print("FAIL: %d kernels not joined to an API record" % (len(ours) - joined))
        failed = True
    if not o.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
