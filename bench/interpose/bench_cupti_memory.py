#!/usr/bin/env python3
"""Peak memory of the CUPTI-on launch loop (issue 30 item 7: goal <= 64 MiB added over 6 M launches).

simgpu's launch loop with zero simulated costs (launches as fast as the host makes them; simgpu's CUPTI
stand-in delivers as CUPTI does, so GPU records outrun the writer and every bound is reached), N launches,
plain and under libtbprof with CUPTI on and the default settings, ROUNDS alternating rounds.  Peak RSS is
the process's own VmHWM, polled as tests/cupti/memory_bound.py does (tests/cupti/peak_rss.py).  Prints
each run's peak, the lost records by source (tbanalyze info), and the largest added peak.  Not a test: the bound is the sum of configured caps,
listed in doc/launcher.md.

Usage: bench_cupti_memory.py LAUNCH_LOOP [N [ROUNDS]]    env: TBPROF_LIB, SIMGPU_DIR, TBANALYZE
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "cupti"))
from peak_rss import run_peak  # noqa: E402

ZERO_COST = {"SIMGPU_LAUNCH_NS": "0", "SIMGPU_QUEUE_NS": "0", "SIMGPU_KERNEL_BASE_NS": "0",
             "SIMGPU_KERNEL_NS_PER_BLOCK": "0", "SIMGPU_SYNC_NS": "0"}
MiB = 1 << 20


def main():
    prog = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 6000000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    base = dict(os.environ, LD_LIBRARY_PATH=os.environ["SIMGPU_DIR"], **ZERO_COST)
    for var in ("LD_PRELOAD", "SIMGPU_TRUTH", "TBPROF_CUPTI", "TBPROF_CUPTI_BUFFER_SIZE", "TBPROF_BUFFER_SIZE"):
        base.pop(var, None)
    tbanalyze = os.environ.get("TBANALYZE")
    added = []
    print(f"CUPTI-on launch loop: {n} launches on simgpu (zero simulated cost), default settings, {rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            rc, _, plain = run_peak([prog, str(n)], base)
            trace = os.path.join(tmp, f"t{r}.zst")
            rc2, _, traced = run_peak([prog, str(n)], dict(base, LD_PRELOAD=os.environ["TBPROF_LIB"], TBPROF_OUT=trace))
            lost = ""
            if tbanalyze and rc2 == 0:
                info = subprocess.run([tbanalyze, "info", trace], capture_output=True, text=True).stdout
                m = re.search(r"^lost events:\s*(.*)$", info, re.M)
                lost = m.group(1) if m else "0"
            added.append((traced - plain) / MiB)
            print(f"  round {r + 1}: peak RSS plain {plain / MiB:.1f} MiB (exit {rc}), traced {traced / MiB:.1f} MiB "
                  f"(exit {rc2}), added {added[-1]:.1f} MiB; lost: {lost}")
    print(f"  largest added peak: {max(added):.1f} MiB (issue 30 goal: <= 64 MiB)")


if __name__ == "__main__":
    main()
