#!/usr/bin/env python3
"""Added host cost per intercepted launch.

Runs the launch loop (>= 1 M launches of an empty kernel via the nvcc 13
__cudaLaunchKernel path) on simgpu with every simulated cost set to zero,
alternately without and with libtbprof preloaded (call paths off: a C
program has none anyway), and prints the median ns/launch of each, their
difference, and the trace's lost-record count (a writer that cannot keep up
drops records rather than blocking; dropped launches still pay the hook).

Timings (median of 3 rounds): wall-clock ns/launch of the launch loop, the
launching thread's CPU time per launch (what the hook costs the caller; on
a shared machine wall time also counts time the thread was descheduled),
and the process CPU time per launch (adds the writer thread that encodes and
compresses on another core).

Instruction counts (independent of machine load): when valgrind is
installed (and TBP_BENCH_CALLGRIND is not 0), the loop also runs under
callgrind with a fixed warm-up at two launch counts, with and without the
preload; the difference of the two counts per thread, divided by the
difference in launches, is the instructions per launch of the launching
thread (hook included) and of the writer thread (encoding + zstd per record).

Usage: bench_interpose.py LAUNCH_LOOP [N]    env: TBPROF_LIB, SIMGPU_DIR, TRACEDUMP
"""
import os
import glob
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ZERO_COST = {"SIMGPU_LAUNCH_NS": "0", "SIMGPU_QUEUE_NS": "0", "SIMGPU_KERNEL_BASE_NS": "0",
             "SIMGPU_KERNEL_NS_PER_BLOCK": "0", "SIMGPU_SYNC_NS": "0"}


def run(prog, n, preload, cwd):
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ["SIMGPU_DIR"], **ZERO_COST)
    env.pop("SIMGPU_TRUTH", None)
    env["TBPROF_PYTHON"] = "0"
    env["TBPROF_CUPTI"] = "0"
    if preload:
        env["LD_PRELOAD"] = os.environ["TBPROF_LIB"]
    before = os.times()
    out = subprocess.run([prog, str(n)], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    after = os.times()
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    m = re.search(r" ns_per_launch=([0-9.]+) cpu_ns_per_launch=([0-9.]+)", out.stdout)
    return float(m.group(1)), float(m.group(2)), cpu * 1e9 / n


def callgrind_counts(prog, n, preload, tmp):
    """Instructions per thread (thread order: main first, then the writer)."""
    out = os.path.join(tmp, f"cg-{int(preload)}-{n}")
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ["SIMGPU_DIR"], LAUNCH_LOOP_WARMUP="2000",
               TBPROF_PYTHON="0", TBPROF_CUPTI="0", TBPROF_BUFFER_SIZE="512M", **ZERO_COST)
    env.pop("SIMGPU_TRUTH", None)
    if preload:
        env["LD_PRELOAD"] = os.environ["TBPROF_LIB"]
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    "--callgrind-out-file=" + os.path.join(out, "cg.out"), prog, str(n)],
                   env=env, cwd=out, capture_output=True, check=True)
    counts = []
    for f in sorted(glob.glob(os.path.join(out, "cg.out-*"))):
        with open(f) as fh:
            m = re.search(r"^summary: (\d+)", fh.read(), re.M)
        counts.append(int(m.group(1)) if m else 0)
    return counts


def instructions_per_launch(prog, tmp):
    n1, n2 = 10000, 30000
    res = {}
    for preload in (False, True):
        a = callgrind_counts(prog, n1, preload, tmp)
        b = callgrind_counts(prog, n2, preload, tmp)
        res[preload] = [(y - x) / (n2 - n1) for x, y in zip(a, b)]
    return res


def main():
    prog = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    rounds = 3
    plain, traced = [], []
    lost = records = 0
    with tempfile.TemporaryDirectory(prefix="tbp-bench-") as tmp:
        for _ in range(rounds):
            plain.append(run(prog, n, False, tmp))
            traced.append(run(prog, n, True, tmp))
        plain_proc = statistics.median(c for _, _, c in plain)
        traced_proc = statistics.median(c for _, _, c in traced)
        plain_thr = statistics.median(c for _, c, _ in plain)
        traced_thr = statistics.median(c for _, c, _ in traced)
        plain = [w for w, _, _ in plain]
        traced = [w for w, _, _ in traced]
        tracedump = os.environ.get("TRACEDUMP")
        if tracedump:
            p = subprocess.run([tracedump, os.path.join(tmp, "trace.zst")], capture_output=True, text=True)
            for line in p.stdout.splitlines():
                if line.startswith("launch "):
                    records += 1
                m = re.match(r"lost .* count=(\d+)", line)
                if m:
                    lost += int(m.group(1))
        cg = None
        if shutil.which("valgrind") and os.environ.get("TBP_BENCH_CALLGRIND", "1") != "0":
            cg = instructions_per_launch(prog, tmp)
    p, t = statistics.median(plain), statistics.median(traced)
    print(f"launch loop: {n} launches x {rounds} rounds on simgpu (zero simulated cost)")
    print("                      without   with libtbprof   added")
    print(f"  wall ns/launch       {p:8.1f}   {t:8.1f}       {t - p:8.1f}   (goal: added <= 60 ns)")
    print(f"  thread CPU ns/launch {plain_thr:8.1f}   {traced_thr:8.1f}       {traced_thr - plain_thr:8.1f}"
          "   (launching thread only)")
    print(f"  process CPU ns/launch{plain_proc:8.1f}   {traced_proc:8.1f}       {traced_proc - plain_proc:8.1f}"
          "   (all threads incl. the writer, and start-up)")
    if cg:
        plain_main, traced_main = cg[False][0], cg[True][0]
        writer = cg[True][1] if len(cg[True]) > 1 else float("nan")
        print(f"  instructions/launch  {plain_main:8.0f}   {traced_main:8.0f}       {traced_main - plain_main:8.0f}"
              "   (callgrind, launching thread)")
        print(f"  writer instructions/record                      {writer:8.0f}   (callgrind: encode + zstd)")
    if tracedump:
        print(f"  last traced run: {records} launch records in the trace, {lost} dropped (buffer full)")


if __name__ == "__main__":
    main()
