#!/usr/bin/env python3
"""The cost of each way of running under libtbprof on the launch loop (simgpu, zero simulated cost), in one
run: plain (no preload), armed on demand (TBPROF_ON_DEMAND=1, no capture), the flight recorder
(TBPROF_FLIGHT=3), and the whole run (the default), CUPTI and Python off as in bench_interpose.py.  Prints the
median wall and thread-CPU ns per launch over interleaved rounds, the ratio to plain, and, with valgrind,
the instructions per launch of the launching thread (callgrind: not host speed), plain vs armed vs the
whole run (the slope between 10 k and 30 k launches, so start-up is not in it).  The
process's peak RSS (ru_maxrss) of each mode too: the flight recorder's ring is on top of the rings.

Usage: bench_modes.py LAUNCH_LOOP [N]    env: TBPROF_LIB, SIMGPU_DIR
"""
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ZERO_COST = {"SIMGPU_LAUNCH_NS": "0", "SIMGPU_QUEUE_NS": "0", "SIMGPU_KERNEL_BASE_NS": "0",
             "SIMGPU_KERNEL_NS_PER_BLOCK": "0", "SIMGPU_SYNC_NS": "0"}
MODES = {
    "plain": None,
    "armed (--on-demand)": {"TBPROF_ON_DEMAND": "1"},
    "flight (--flight 3)": {"TBPROF_FLIGHT": "3"},
    "whole run (default)": {},
}


def env_for(mode_env, tmp):
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ["SIMGPU_DIR"], TBPROF_PYTHON="0", TBPROF_CUPTI="0",
               TBPROF_OUT=os.path.join(tmp, "trace.zst"), **ZERO_COST)
    env.pop("SIMGPU_TRUTH", None)
    env.pop("LD_PRELOAD", None)
    if mode_env is not None:
        env["LD_PRELOAD"] = os.environ["TBPROF_LIB"]
        env.update(mode_env)
    return env


def run(prog, n, mode_env, tmp):
    """(wall ns/launch, thread CPU ns/launch, peak RSS KiB) of one run."""
    # a child of its own so ru_maxrss is this run's alone
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)\n"
            "print(p.stdout)\n"
            "print('maxrss', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code, prog, str(n)], env=env_for(mode_env, tmp), cwd=tmp,
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r" ns_per_launch=([0-9.]+) cpu_ns_per_launch=([0-9.]+)", out)
    rss = int(re.search(r"maxrss (\d+)", out).group(1))
    return float(m.group(1)), float(m.group(2)), rss


def instructions(prog, n, mode_env, tmp):
    out = os.path.join(tmp, f"cg-{len(os.listdir(tmp))}")
    os.makedirs(out)
    env = env_for(mode_env, out)
    env["LAUNCH_LOOP_WARMUP"] = "2000"
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    "--callgrind-out-file=" + os.path.join(out, "cg.out"), prog, str(n)],
                   env=env, cwd=out, capture_output=True, check=True)
    files = sorted(glob.glob(os.path.join(out, "cg.out-*")))
    with open(files[0]) as fh:   # the main (launching) thread
        return int(re.search(r"^summary: (\d+)", fh.read(), re.M).group(1))


def main():
    prog = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    rounds = 5
    results = {name: [] for name in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for name, mode_env in MODES.items():
                results[name].append(run(prog, n, mode_env, tmp))
        print(f"launch loop: {n} launches x {rounds} rounds on simgpu (zero simulated cost), CUPTI and Python off")
        print("  mode                  wall ns/launch  ratio   thread CPU ns/launch  ratio   peak RSS MiB")
        base_w = statistics.median(r[0] for r in results["plain"])
        base_c = statistics.median(r[1] for r in results["plain"])
        for name, rs in results.items():
            w = statistics.median(r[0] for r in rs)
            c = statistics.median(r[1] for r in rs)
            rss = max(r[2] for r in rs) / 1024
            print(f"  {name:22s}{w:10.1f}   {w / base_w:6.3f}  {c:14.1f}        {c / base_c:6.3f}  {rss:10.1f}")
        if shutil.which("valgrind"):
            n1, n2 = 10000, 30000
            per = {}
            for name in ("plain", "armed (--on-demand)", "whole run (default)"):
                a = instructions(prog, n1, MODES[name], tmp)
                b = instructions(prog, n2, MODES[name], tmp)
                per[name] = (b - a) / (n2 - n1)
            p, a, w = per["plain"], per["armed (--on-demand)"], per["whole run (default)"]
            print(f"  instructions/launch (callgrind, launching thread): plain {p:.1f}, armed {a:.1f}, "
                  f"added {a - p:.1f} ({100 * (a - p) / p:.2f} %); whole run {w:.1f}, added {w - p:.1f}")

if __name__ == "__main__":
    main()
