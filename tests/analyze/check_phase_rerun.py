#!/usr/bin/env python3
"""The idle by line after a second WARMUP_END (the runner's measurement run
twice): the steady steps before it become warm-up, and the steady steps after
it must get their own idle parts again.

    check_phase_rerun.py GEN_PLANTED TBANALYZE

gen_planted launch-rerun: the launch-bound scenario's 40 marked steps with a
second WARMUP_END after step 25, so steps 26..39 (14) are the steady state.
The gaps pass files most pieces long before the trace ends (its queue holds
1024, the trace has ~57 a step), so idle parts of the first steady steps were
filed, and looked up through the pass's cache of parts, before phase_move
forgot them; a cache that outlived the move would file the later steady
pieces into the forgotten (now warm-up) parts and drop them from the report.
Every figure below follows from the scenario's times (gen_planted.c,
scen_launch_bound), per steady step.
"""
import json
import os
import subprocess
import sys
import tempfile

US = 1000


def main():
    gen, tbanalyze = sys.argv[1], sys.argv[2]
    steady = 40 - 1 - 25
    with tempfile.TemporaryDirectory(prefix="tba-rerun-") as tmp:
        trace = os.path.join(tmp, "rerun.zst")
        subprocess.run([gen, "launch-rerun", trace, os.devnull], check=True)
        out = subprocess.run([tbanalyze, trace, "--json"], check=True, capture_output=True, text=True).stdout
    sites = json.loads(out)["idle_breakdown"]["sites"]
    got = {}
    for s in sites:
        py = s["where"]["python"]
        if py and s["edge"] is None:  # (the last step's last sync's tail is the trailing edge's)
            got[(s["cause"], py[0]["file"], py[0]["line"])] = s["total_ns"]
    want = {
        ("python", "data.py", 8): steady * 300 * US,
        ("launch_bound", "model.py", 20): steady * 131 * US,
        ("launch_bound", "model.py", 21): steady * 140 * US,
        ("launch_bound", "model.py", 22): steady * 140 * US,
        ("launch_bound", "model.py", 23): steady * 140 * US,
        ("launch_bound", "train.py", 12): steady * 389 * US,
        ("sync", "train.py", 12): steady * 32 * US - 2 * US,
        ("python", "model.py", 20): (steady - 1) * 20 * US,
    }
    bad = 0
    for key, ns in want.items():
        if got.get(key) != ns:
            print(f"FAIL: {key[0]} at {key[1]}:{key[2]}: {got.get(key)} ns, want {ns} ({steady} steady steps)")
            bad += 1
    print(f"{len(want) - bad} of {len(want)} steady idle parts right after a second WARMUP_END")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
