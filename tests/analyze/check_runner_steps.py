#!/usr/bin/env python3
"""Suite 'analyze', test analyze-real-runner-steps: the runner (run.py) on
CPU PyTorch under the preload (TBPROF_TRACE_ALL=1): tbanalyze's time per
step, from the runner's marks, agrees with run.py's own CPU wall time per
batch for the same run within 5 %, and the warm-up iterations the runner
ran unmarked are counted as warm-up.

Exit 77 (skipped) without libtbprof.so or an importable torch.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

LIB = os.environ.get("TBPROF_LIB", "")
TBANALYZE = os.environ.get("TBANALYZE", "tbanalyze")
ROOT = os.environ.get("TBP_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
NITER = 6

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def main():
    if not os.path.exists(LIB):
        print("skip: needs libtbprof.so")
        return 77
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode:
        print("skip: needs torch")
        return 77
    with tempfile.TemporaryDirectory(prefix="tba-runner-") as tmp:
        env = dict(os.environ, LD_PRELOAD=LIB, TBPROF_TRACE_ALL="1", TBPROF_OUT=os.path.join(tmp, "trace.%p.zst"))
        p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), "-m", "soft_actor_critic", "-d", "cpu",
                            "-t", "train", "--niter", str(NITER)], env=env, capture_output=True, text=True,
                           timeout=600, cwd=tmp)
        if not check(p.returncode == 0, f"run.py runs under the preload ({p.stderr.strip()[-300:]})"):
            return 1
        m = re.search(r"CPU Wall Time per batch:\s+([0-9.]+) milliseconds", p.stdout)
        if not check(m is not None, "run.py prints its CPU wall time per batch"):
            return 1
        runpy_ms = float(m.group(1))
        # The Python process's trace is the largest (helpers the interpreter
        # spawns, if any, leave small ones).
        trace = max(glob.glob(os.path.join(tmp, "trace.*.zst")), key=os.path.getsize)
        q = subprocess.run([TBANALYZE, trace, "--json"], capture_output=True, text=True, timeout=120)
        if not check(q.returncode == 0, f"tbanalyze exits 0 ({q.stderr.strip()})"):
            return 1
        rep = json.loads(q.stdout)
        st = rep.get("steps") or {}
        check(st.get("source") == "marks" and st.get("count", 0) - st.get("warmup", 0) == NITER,
              f"steps from the runner's marks: {NITER} measured ({st})")
        check(st.get("warmup", 0) >= 1, f"the runner's unmarked warm-up iterations are counted as warm-up ({st})")
        ours_ms = st.get("median_ns", 0) / 1e6
        check(abs(ours_ms - runpy_ms) <= 0.05 * runpy_ms,
              f"time per step {ours_ms:.3f} ms agrees with run.py's {runpy_ms:.3f} ms within 5 %")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
