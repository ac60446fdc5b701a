#!/usr/bin/env python3
"""How often `tbanalyze diff` finds a planted 10 % slowdown, and how often it calls two runs of one program
different (doc/findings.md, "Diff").  Not a test: prints what one run measured.

    bench_diff.py GEN_PLANTED [REPS] [--real N]

1. Planted runs (gen_planted steps-noise, seeded): for each load (loaded: like the median loaded run measured on
   the 2-core VM; heavy) and 10, 30 and 50 steps a side, REPS pairs (default 200) of a run and the same program
   again, and of a run and the program 10 % slower: the share of pairs that exit 1 and of those that say
   "no significant change".
2. Real runs (--real N, needs TBPROF_LIB): tests/analyze/diff_steps.py (30 marked steps) traced under the
   preload, N pairs one run after the other with B the same program, and N with B doing 10 % more work; the same
   counts, and the spread of the measured changes.  Two programs: steps that wait 5 ms (as a step waits for its
   GPU) with ~0.2 ms of Python, and steps of ~5 ms of Python alone (CPU-bound, at the mercy of the load).
"""
import json
import os
import subprocess
import sys
import tempfile

TBANALYZE = os.environ.get("TBANALYZE", "tbanalyze")
LIB = os.environ.get("TBPROF_LIB", "")
ROOT = os.environ.get("TBP_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def diff(a, b):
    p = subprocess.run([TBANALYZE, "diff", a, b, "--json"], capture_output=True, text=True, timeout=120)
    return p.returncode, json.loads(p.stdout)


def tally(results):
    exit1 = sum(1 for rc, _ in results if rc == 1)
    calm = sum(1 for _, d in results if d.get("verdict") == "no significant change")
    return exit1, calm


def planted(gen, tmp, reps):
    print(f"planted runs, {reps} pairs each: exit 1 / 'no significant change'")
    print("  load    steps   same program        B 10 % slower")
    for noise in ("loaded", "heavy"):
        for steps in (10, 30, 50):
            res = {0: [], 10: []}
            for r in range(reps):
                paths = {}
                for name, seed, slow in (("a", 1000 + r, 0), ("a2", 5000 + r, 0), ("b", 9000 + r, 10)):
                    paths[name] = os.path.join(tmp, name + ".zst")
                    subprocess.run([gen, "steps-noise", paths[name], os.path.join(tmp, name + ".json"),
                                    f"{seed},{slow},{steps},marks,{noise}"], check=True)
                res[0].append(diff(paths["a"], paths["a2"]))
                res[10].append(diff(paths["a"], paths["b"]))
            s1, sc = tally(res[0])
            b1, bc = tally(res[10])
            print(f"  {noise:7s} {steps:5d}   {s1:3d} / {sc:3d} of {reps}    {b1:3d} / {bc:3d} of {reps}"
                  f"   (exit 1 for +10 %: {100 * b1 / reps:.1f} %)", flush=True)


def real(tmp, n):
    if not os.path.exists(LIB):
        print("real runs: skipped (TBPROF_LIB not set)")
        return
    prog = os.path.join(ROOT, "tests", "analyze", "diff_steps.py")

    def run(name, slow, shape):
        trace = os.path.join(tmp, name + ".zst")
        env = dict(os.environ, LD_PRELOAD=LIB, TBPROF_TRACE_ALL="1", TBPROF_OUT=trace)
        subprocess.run([sys.executable, prog, "30"] + shape + ["--slow", str(slow)], env=env, check=True, timeout=300)
        return trace

    print(f"real runs (diff_steps.py, 30 steps, one run after the other), {n} pairs each; "
          f"load average {os.getloadavg()[0]:.1f}")
    for label, shape in (("waiting 5 ms", ["5000", "--wait", "5"]), ("5 ms of Python", ["140000"])):
        for slow in (0, 10):
            res = []
            for _ in range(n):
                a = run("ra", 0, shape)
                b = run("rb", slow, shape)
                res.append(diff(a, b))
            e1, calm = tally(res)
            ch = sorted(d["significance"].get("change_pct") or 0 for _, d in res)
            print(f"  steps {label:15s} B {'the same' if not slow else '+10 % work':10s}: exit 1 in {e1:2d} of {n}, "
                  f"no significant change in {calm:2d}; estimated change {ch[0]:+.1f} .. {ch[-1]:+.1f} % "
                  f"(median {ch[len(ch) // 2]:+.1f}); load average now {os.getloadavg()[0]:.1f}", flush=True)


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    gen, reps, nreal = args[0], 200, 20
    rest = args[1:]
    if rest and rest[0].isdigit():
        reps = int(rest.pop(0))
    if rest[:1] == ["--real"]:
        nreal = int(rest[1])
    with tempfile.TemporaryDirectory(prefix="tba-benchdiff-") as tmp:
        if reps:
            planted(gen, tmp, reps)
        if nreal:
            real(tmp, nreal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
