#!/usr/bin/env python3
"""Two builds of libtbprof side by side over time (a benchmark: it asserts
nothing).

On a shared or virtual machine the cost of the launch path changes from
minute to minute with what the machine passes between cores (on the
project's 2-vCPU VM the launching thread's added cost swung between ~+35
and ~+120 ns within an hour).  A single run of bench_overhead.py sees one
such phase.  This script runs simgpu's launch loop (zero simulated cost,
TBPROF_CUPTI=0) without the preload and with each library in turn, every
--every seconds, for --minutes, and prints one line per round: the
launching thread's CPU per launch (launch_loop's own figure) and the
process's CPU per launch (user + sys over the launches, start-up included)
for each.  Compare the libraries within a line, never across lines.

Usage: ab_monitor.py --lib A.so --lib B.so [--minutes 10] [--every 15] [--launches 3000000]
env: SIMGPU_DIR, LAUNCH_LOOP (as for bench_overhead.py)
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ZERO_COST = {"SIMGPU_LAUNCH_NS": "0", "SIMGPU_QUEUE_NS": "0", "SIMGPU_KERNEL_BASE_NS": "0",
             "SIMGPU_KERNEL_NS_PER_BLOCK": "0", "SIMGPU_SYNC_NS": "0"}


def one(loop, launches, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([loop, str(launches)], env=env, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"cpu_ns_per_launch=([0-9.]+)", out)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e9 / launches
    return (float(m.group(1)) if m else float("nan")), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--every", type=float, default=15)
    ap.add_argument("--launches", type=int, default=3000000)
    args = ap.parse_args()
    simgpu, loop = os.environ.get("SIMGPU_DIR", ""), os.environ.get("LAUNCH_LOOP", "")
    if not (simgpu and loop and os.path.exists(loop)):
        print("ab_monitor: set SIMGPU_DIR and LAUNCH_LOOP", file=sys.stderr)
        return 3
    base = {k: v for k, v in os.environ.items() if not k.startswith("TBPROF_") and k not in ("LD_PRELOAD",)}
    base.update(ZERO_COST, LD_LIBRARY_PATH=simgpu, TBPROF_PYTHON="0", TBPROF_CUPTI="0", LAUNCH_LOOP_WARMUP="1000")
    tmp = tempfile.mkdtemp(prefix="tbp-ab-")
    names = ["none"] + ["lib%d" % i for i in range(1, len(args.lib) + 1)]
    for i, lib in enumerate(args.lib, 1):
        print("lib%d = %s" % (i, lib))
    print("per launch, ns: thread CPU / process CPU")
    print("%-8s  " % "time" + "  ".join("%-15s" % n for n in names))
    end = time.time() + args.minutes * 60
    while time.time() < end:
        row = [one(loop, args.launches, base)]
        for lib in args.lib:
            row.append(one(loop, args.launches, dict(base, LD_PRELOAD=lib, TBPROF_OUT=os.path.join(tmp, "t.zst"))))
        print("%-8s  " % time.strftime("%H:%M:%S") + "  ".join("%6.1f / %6.1f " % r for r in row), flush=True)
        time.sleep(args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
