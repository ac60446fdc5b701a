#!/usr/bin/env python3
"""No losses at a rate a real GPU sustains (issue #15): 300 k launches/s from two threads, CUPTI on.

    sustained_rate.py --program simgpu_launch_loop --simgpu-dir D --tbanalyze T --lib L

simgpu's launch loop from 2 threads, each launch costing SIMGPU_LAUNCH_NS of host time (so the two
threads together launch at most RATE per second; slower on a loaded machine, never faster), under
libtbprof with its defaults and simgpu's CUPTI stand-in.  Checks, not timed: the trace has every launch
and every kernel, and no lost record of any source.  GPU records reach the trace from CUPTI's buffer
processing in bursts (a whole buffer, then the reorder hold's release); a per-thread ring that starts
small must not drop such a burst while it grows.  Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

RATE = 300_000          # launches per second, both threads together
THREADS = 2
SECONDS = 1.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--simgpu-dir", required=True)
    ap.add_argument("--tbanalyze", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.simgpu_dir, "libcupti.so.13")):
        print("SKIP: simgpu's CUPTI stand-in not built")
        return 77
    n = int(RATE * SECONDS)
    launch_ns = THREADS * 1_000_000_000 // RATE
    failures = 0
    with tempfile.TemporaryDirectory(prefix="tbp-rate-") as tmp:
        trace = os.path.join(tmp, "rate.zst")
        env = dict(os.environ, LD_LIBRARY_PATH=args.simgpu_dir, LD_PRELOAD=args.lib, TBPROF_OUT=trace,
                   SIMGPU_LAUNCH_NS=str(launch_ns), SIMGPU_QUEUE_NS="0", SIMGPU_KERNEL_BASE_NS="0",
                   SIMGPU_KERNEL_NS_PER_BLOCK="0")
        env.pop("SIMGPU_TRUTH", None)
        p = subprocess.run([args.program, str(n), str(THREADS)], env=env, capture_output=True, text=True,
                           timeout=600)
        print(p.stdout.strip())
        if p.returncode != 0:
            print(f"FAIL: the launch loop exited {p.returncode}: {p.stderr[-500:]}")
            return 1
        info = subprocess.run([args.tbanalyze, "info", trace, "--json"], capture_output=True, text=True)
        if info.returncode != 0:
            print(f"FAIL: tbanalyze info exit {info.returncode}: {info.stderr[-300:]}")
            return 1
        info = json.loads(info.stdout)
        kinds, lost = info.get("kinds", {}), info.get("lost", {})
        launches, kernels = kinds.get("launch", 0), kinds.get("gpu_kernel", 0)
        total_lost = lost.get("total", 0)
        print(f"{n} launches from {THREADS} threads at <= {RATE} /s: {launches} launch records, "
              f"{kernels} kernel records, lost {lost}")
        if launches != n:
            print(f"FAIL: {launches} launch records for {n} launches")
            failures += 1
        if kernels != n:
            print(f"FAIL: {kernels} kernel records for {n} launches")
            failures += 1
        if total_lost:
            print(f"FAIL: {total_lost} records lost at a rate a GPU sustains: {lost}")
            failures += 1
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
