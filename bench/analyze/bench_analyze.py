#!/usr/bin/env python3
"""tbanalyze throughput, printed from one run (a benchmark, not a test).

    bench_analyze.py GEN_PLANTED [ITERATIONS] [--simtorch SIMTORCH --libtbprof LIBTBPROF.so
                     --script SCRIPT.py [--steps N]]

1. Writes a large launch-heavy trace with gen_planted (16 events per step),
   runs `tbanalyze report` on it and prints events/s per CPU core (user+sys
   time of the process), beside `tbanalyze info` on the same file (the trace
   reader alone); CPU times are the best of 5 runs (and the median).
   Then the same steps with the GPU records written 64 frames late.
   With TBANALYZE_BASELINE=/path/to/other/tbanalyze, the same for that build
   on the same file, its runs alternating with these, and the median of the
   per-pair time ratios.
2. With --simtorch: records a real PyTorch trace on simgpu (SCRIPT, its
   `STEPS = ...` line set to N steps: grad_rescale.py's 1000 steps make
   about 1 M records, with the Python spans, threads and joins of a real
   trace), and prints records/s per CPU core for the full report and the
   reader alone, beside TBANALYZE_BASELINE's when set (doc/analyzer-speed.md).
3. If Holistic Trace Analysis is importable (TBP_HTA_PYTHON, else
   ~/.cache/tbprof/hta-venv/bin/python from .ci/setup, else this python),
   exports a smaller trace as Kineto JSON and prints how much longer HTA's
   temporal breakdown takes than tbanalyze's full report on the same trace.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TBANALYZE = os.environ.get("TBANALYZE", "tbanalyze")
REPEAT = 5


# The timed runs are tbanalyze as a user runs it: without the consistency
# check the test suites turn on (TBANALYZE_CHECK=1 in meson's environment),
# which for `info` is a whole analysis more, not the reader alone.  Each
# trace is also analysed once with the check as the environment sets it
# (checked_once), so the bench still fails on an inconsistent report.
TIMED_ENV = dict(os.environ, TBANALYZE_CHECK="0")


def cpu_of(cmd, env=TIMED_ENV):
    """(stdout, cpu seconds user+sys, wall seconds, max RSS KiB, rusage) of one child."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            sys.exit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {err.read().decode()[-300:]}")
        return out.read(), ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss, ru


def checked_once(path):
    """One untimed report of PATH with the environment's TBANALYZE_CHECK."""
    cpu_of([TBANALYZE, path, "--json"], env=os.environ)


def hta_python():
    cands = [sys.executable]
    venv = os.path.expanduser("~/.cache/tbprof/hta-venv/bin/python")  # .ci/setup installs HTA there
    if os.path.exists(venv):
        cands.insert(0, venv)
    if os.environ.get("TBP_HTA_PYTHON"):
        cands.insert(0, os.environ["TBP_HTA_PYTHON"])
    for py in cands:
        if subprocess.run([py, "-c", "import hta.trace_analysis"], capture_output=True).returncode == 0:
            return py
    return None


HTA_SCRIPT = r"""
import logging, sys, time
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
t = TraceAnalysis(trace_dir=sys.argv[1])
t.get_temporal_breakdown(visualize=False)
print(time.perf_counter() - t1)
"""


def report_rate(label, path):
    """The full report's and the reader's records/s per core on one trace,
    best of REPEAT runs (alternating with TBANALYZE_BASELINE's runs)."""
    base = os.environ.get("TBANALYZE_BASELINE")
    checked_once(path)
    runs, infos, bruns, binfos = [], [], [], []
    for _ in range(REPEAT):
        runs.append(cpu_of([TBANALYZE, path, "--json"]))
        infos.append(cpu_of([TBANALYZE, "info", path])[1])
        if base:
            bruns.append(cpu_of([base, path, "--json"])[1])
            binfos.append(cpu_of([base, "info", path])[1])
    out, cpu, wall, rss, ru = min(runs, key=lambda r: r[1])
    records = json.loads(out)["trace"]["records"]
    med = statistics.median(r[1] for r in runs)
    print(f"{label}: {records} records ({os.path.getsize(path) / records:.2f} bytes/record on disk)")
    print(f"  full report: {cpu:.3f} s CPU ({wall:.3f} s wall) -> {records / cpu / 1e6:.2f} M records/s/core"
          f" (goal >= 10); median of {REPEAT} runs {records / med / 1e6:.2f}")
    # The kernel's share (page faults for the memory the analysis touches
    # once) is part of the figure: say it apart.
    print(f"  of which user {ru.ru_utime:.3f} s, kernel {ru.ru_stime:.3f} s ({ru.ru_minflt} page faults,"
          f" peak RSS {rss / 1024:.0f} MB)")
    print(f"  trace reader alone (tbanalyze info): {records / min(infos) / 1e6:.2f} M records/s/core")
    if base:
        rr = statistics.median(b / r[1] for b, r in zip(bruns, runs))
        print(f"  vs {base}: report {records / min(bruns) / 1e6:.2f} M records/s/core (it takes {rr:.2f}x the"
              f" time), reader {records / min(binfos) / 1e6:.2f} M records/s/core")


def bench_simtorch(simtorch, libtbprof, script, steps, tmp):
    """A real trace: SCRIPT under the preload on simgpu, its STEPS set."""
    probe = subprocess.run([simtorch, sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                           capture_output=True)
    if probe.returncode != 0:
        print("simtorch trace skipped: PyTorch on simgpu is not available here")
        return
    with open(script) as f:
        src = f.read()
    lines = src.splitlines(keepends=True)
    at = [i for i, l in enumerate(lines) if l.startswith("STEPS = ")]
    if not at:
        sys.exit(f"bench: {script} has no 'STEPS = ' line to set")
    lines[at[0]] = f"STEPS = {steps}\n"
    copy = os.path.join(tmp, os.path.basename(script))
    with open(copy, "w") as f:
        f.write("".join(lines))
    trace = os.path.join(tmp, "simtorch.zst")
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(libtbprof), TBPROF_OUT=trace)
    t0 = time.perf_counter()
    p = subprocess.run([os.path.abspath(simtorch), sys.executable, copy], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=tmp)
    if p.returncode != 0:
        sys.exit(f"bench: recording {script} failed ({p.returncode}): {p.stderr.decode()[-300:]}")
    print(f"(recorded {os.path.basename(script)} with {steps} steps on simgpu in {time.perf_counter() - t0:.0f} s)")
    report_rate(f"simtorch trace ({os.path.basename(script)}, {steps} steps)", trace)


def main():
    args = sys.argv[1:]
    opts = {}
    for name in ("--simtorch", "--libtbprof", "--script", "--steps"):
        if name in args:
            i = args.index(name)
            if i + 1 >= len(args):
                sys.exit(f"bench: {name} needs a value")
            opts[name] = args[i + 1]
            del args[i:i + 2]
    gen = args[0]
    iters = int(args[1]) if len(args) > 1 else 1000000
    with tempfile.TemporaryDirectory(prefix="tba-bench-") as tmp:
        big = os.path.join(tmp, "big.zst")
        subprocess.run([gen, "big", big, os.devnull, str(iters)], check=True)
        # Best of REPEAT CPU times: the machine is shared, other processes
        # only ever make a run slower.  With a baseline build, its runs
        # alternate with these, so both see the same load; the ratio printed
        # is the median of the per-pair ratios.
        base = os.environ.get("TBANALYZE_BASELINE")
        checked_once(big)
        runs, infos, bruns, binfos = [], [], [], []
        for _ in range(REPEAT):
            runs.append(cpu_of([TBANALYZE, big, "--json"]))
            infos.append(cpu_of([TBANALYZE, "info", big])[1])
            if base:
                bruns.append(cpu_of([base, big, "--json"])[1])
                binfos.append(cpu_of([base, "info", big])[1])
        out, cpu, wall, rss, _ = min(runs, key=lambda r: r[1])
        med = statistics.median(r[1] for r in runs)
        events = json.loads(out)["trace"]["events"]
        cpu_info = min(infos)
        print(f"tbanalyze report: {events} events, {os.path.getsize(big) / events:.2f} bytes/event on disk")
        print(f"  report: {cpu:.2f} s CPU ({wall:.2f} s wall) -> {events / cpu / 1e6:.1f} M events/s/core (goal >= 30);"
              f" median of {REPEAT} runs {events / med / 1e6:.1f}")
        print(f"  trace reader alone (tbanalyze info): {events / cpu_info / 1e6:.1f} M events/s/core")
        if base:
            bcpu, binfo = min(bruns), min(binfos)
            rr = statistics.median(b / r[1] for b, r in zip(bruns, runs))
            ri = statistics.median(b / i for b, i in zip(binfos, infos))
            print(f"  vs {base}: report {events / bcpu / 1e6:.1f} M events/s/core (it takes {rr:.2f}x the time),"
                  f" reader {events / binfo / 1e6:.1f} M events/s/core ({ri:.2f}x the time)")
        # The same steps with GPU activity written 64 frames after the host
        # calls (CUPTI hands over whole buffers late): the merge then holds a
        # backlog larger than the cache.
        lag = os.path.join(tmp, "lag.zst")
        subprocess.run([gen, "big-lag", lag, os.devnull, str(iters)], check=True)
        checked_once(lag)
        lruns = [cpu_of([TBANALYZE, lag, "--json"])[1] for _ in range(REPEAT)]
        print(f"  GPU activity 64 frames late: {events / min(lruns) / 1e6:.1f} M events/s/core;"
              f" median of {REPEAT} runs {events / statistics.median(lruns) / 1e6:.1f}")
        tenth = os.path.join(tmp, "tenth.zst")
        subprocess.run([gen, "big", tenth, os.devnull, str(max(iters // 10, 1))], check=True)
        _, _, _, rss10, _ = cpu_of([TBANALYZE, tenth, "--json"])
        print(f"  memory: max RSS {rss / 1024:.1f} MiB for {events} events, {rss10 / 1024:.1f} MiB for a tenth of them")
        report_rate("synthetic trace (gen_planted big)", big)

        if opts.get("--simtorch"):
            if not opts.get("--libtbprof") or not opts.get("--script"):
                sys.exit("bench: --simtorch needs --libtbprof and --script")
            bench_simtorch(opts["--simtorch"], opts["--libtbprof"], opts["--script"],
                           int(opts.get("--steps", "1000")), tmp)

        py = hta_python()
        if not py:
            print("HTA comparison skipped: holistictraceanalysis is not importable "
                  "(pip install holistictraceanalysis, or set TBP_HTA_PYTHON)")
            return 0
        small_iters = max(iters // 50, 1000)
        small = os.path.join(tmp, "small.zst")
        subprocess.run([gen, "big", small, os.devnull, str(small_iters)], check=True)
        hdir = os.path.join(tmp, "hta")
        os.makedirs(hdir)
        subprocess.run([TBANALYZE, "export", "--format", "kineto", small, "-o", os.path.join(hdir, "rank0.json")],
                       check=True)
        out, _, twall, _, _ = cpu_of([TBANALYZE, small, "--json"])
        sev = json.loads(out)["trace"]["events"]
        p = subprocess.run([py, "-c", HTA_SCRIPT, hdir], capture_output=True, text=True)
        if p.returncode != 0:
            print("HTA failed:", p.stderr[-300:])
            return 1
        hwall = float(p.stdout.strip().splitlines()[-1])
        print(f"HTA temporal breakdown on the same {sev} events (Kineto export): {hwall:.2f} s wall; "
              f"tbanalyze full report on the .zst: {twall:.3f} s wall -> tbanalyze is {hwall / twall:.0f}x faster "
              f"(goal >= 100x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
