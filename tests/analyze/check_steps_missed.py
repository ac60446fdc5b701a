#!/usr/bin/env python3
"""Step detection when the loop's first line is missing from an iteration (issue 31 step 9).

    check_steps_missed.py GEN_PLANTED TBANALYZE

The tracer keeps Python calls over TBPROF_PY_SPAN_US only: on a slower machine a call near it is recorded in
some iterations and not others, and on a CPU run the steps are found from the spans alone.  gen_planted's
cpu-steps-missed traces are a loop of 12 whose first line (zero_grad at train.py:21) left no span in one
iteration (the third, with torch's once-per-step calls; the eighth and the last, without any): the steps are
12 all the same, starting at the forward's line (:22), the first line seen in every iteration.  A head chosen
at :21 made 11, one of them holding two iterations.  cpu-steps-skipped-short: no line missed, but the four
iterations whose optimizer step was skipped are 1.3 ms beside the others' 39.7 ms (as a loaded machine can
make them): they run the loop's body, they are steps: 12 from :21 (a rule by time alone made 8).
cpu-loader-epochs / cpu-loader-iter: 3 epochs of 4 batches over a DataLoader, each epoch's last fetch
(StopIteration) followed by a log line after the inner loop and an 8 ms pause making the next iterator, or by a
4 ms pause inside the last fetch and the next iterator: 12 steps from the fetch's line (:21), no iteration of
the fetch alone a step.  cpu-skip-forward: 20 iterations, 4 of which `continue` after the forward at the loop's
first line (:30), one of those warm (300 us against 1 ms): 20 steps.  cpu-steps-paused: a loop of 12 taking 15 ms
in all, then a library call that waited 25 ms for a lock (a loaded machine's pause: the span holds it, it is no
work): 12 steps from the forward's line (:21), with torch's once-per-step calls and without (-plain, batches of
varying size), and with the wait inside the loop (-between).  The loop held less than half of the time in the
program's calls from its start on: no steps (corpus notebook_ipython.py on the CPU with two CPU hogs: the cells
for steps, or no loop); tests/analyze/loaded/notebook_ipython_cpu_hogs.zst is that run (recorded under two CPU
hogs, three recorders at once; its history store after the loop waited 21 ms): 12 steps from the cell's line 5, not
the 4 cells.  Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    gen, tbanalyze = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="tbp-missed-") as tmp:
        for scenario, count, line in (("cpu-steps-missed", 12, 22), ("cpu-steps-missed-plain", 12, 22),
                                      ("cpu-steps-missed-last", 12, 22), ("cpu-steps-skipped-short", 12, 21),
                                      ("cpu-loader-epochs", 12, 21), ("cpu-loader-iter", 12, 21),
                                      ("cpu-skip-forward", 20, 30), ("cpu-steps-paused", 12, 21),
                                      ("cpu-steps-paused-plain", 12, 21), ("cpu-steps-paused-between", 12, 21)):
            trace = os.path.join(tmp, scenario + ".zst")
            subprocess.run([gen, scenario, trace, os.path.join(tmp, scenario + ".json")], check=True, timeout=120)
            p = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, TBANALYZE_CHECK="1"))
            if p.returncode:
                print(f"FAIL {scenario}: tbanalyze exit {p.returncode}: {p.stderr.strip()[-400:]}")
                failures += 1
                continue
            st = json.loads(p.stdout).get("steps") or {}
            head = ((st.get("loop") or {}).get("python") or [{}])[0]
            ok = (st.get("source") == "detected" and st.get("count") == count and st.get("warmup") == 1
                  and head.get("file") == "train.py" and head.get("line") == line)
            print(("ok   " if ok else "FAIL ") + f"{scenario}: {count} steps from train.py:{line}, 1 warm-up "
                  f"({st.get('count')} from {head.get('file')}:{head.get('line')}, warm-up {st.get('warmup')})")
            failures += not ok
    # A real run (notebook_ipython.py, TBPROF_TRACE_ALL=1, on the CPU under two CPU hogs).
    trace = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loaded", "notebook_ipython_cpu_hogs.zst")
    p = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TBANALYZE_CHECK="1"))
    st = (json.loads(p.stdout).get("steps") or {}) if not p.returncode else {}
    head = ((st.get("loop") or {}).get("python") or [{}])[0]
    ok = (st.get("source") == "detected" and st.get("count") == 12 and st.get("warmup") == 1
          and head.get("file", "").startswith("<ipython-input-3-") and head.get("line") == 5)
    print(("ok   " if ok else "FAIL ") + f"notebook_ipython_cpu_hogs.zst: 12 steps from <ipython-input-3-...>:5, 1 warm-up "
          f"({st.get('count')} from {head.get('file')}:{head.get('line')}, warm-up {st.get('warmup')}; exit {p.returncode})")
    failures += not ok
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
