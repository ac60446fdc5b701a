#!/usr/bin/env python3
"""Issue #15's figures, each as a ratio measured in one run (a benchmark,
not a test: it asserts nothing).

Every figure comes from alternating runs (A B, then B A, ...) of separate
processes, and is the median over the rounds of the per-round ratio, so a
change in the machine's load hits both sides of a ratio alike.

1. Launch loop: simgpu's launch loop (an empty kernel, every simulated
   cost zero, a fixed warm-up of 1000 launches), TBPROF_CUPTI=0, with vs
   without the preload: whole-process CPU time per launch (user + sys of
   the process: the launching thread's hook and the writer thread's
   encoding and compression) as the slope between runs of N and 3N
   launches, so what a process pays once (start-up, the final flush) is
   not spread over the launches and is shown apart; the added ns per
   launch (goal <= 60) and the ratio; the records the last traced run
   dropped (a writer that cannot keep up drops rather than blocks).  Also
   with TBPROF_BUFFER_SIZE=512M, where nothing is dropped at this rate, so
   every launch is encoded.
2. Python calls: ns per call of an empty Python function (1 M calls) without
   the preload, with it and the span hook (TBPROF_TRACE_ALL=1), and with it
   but no hook (TBPROF_PY_SPAN_US=0); with valgrind, also instructions per
   call (callgrind, 100 k -> 300 k calls: independent of the load).
3. CPU training loop (cpu_loop.py: six 256x256 Linear, Adam, batch 64,
   300 steps, one thread): none, tbprof (LD_PRELOAD, TBPROF_TRACE_ALL=1),
   torch.profiler (CPU activity), torch.profiler with_stack=True: the loop's
   wall time, the main thread's CPU time, and the process's wall and CPU
   time (import and exit included: torch.profiler's post-processing, the
   preload's start-up and final flush) and peak RSS, each as a ratio to
   none (goal for tbprof: <= x1.03) and tbprof's time as a ratio to
   torch.profiler's.

Usage: bench_overhead.py [--quick] [--sections=1,2,3]
env: TBPROF_LIB, SIMGPU_DIR, LAUNCH_LOOP (section 1 skipped without them),
     TBANALYZE (drop counts), BENCH_ROUNDS (default 5; 7 for the launch loop)
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("TBPROF_LIB", "")
SIMGPU = os.environ.get("SIMGPU_DIR", "")
LAUNCH_LOOP = os.environ.get("LAUNCH_LOOP", "")
TBANALYZE = os.environ.get("TBANALYZE", "")
QUICK = "--quick" in sys.argv
SECTIONS = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--sections=")), ["1", "2", "3"])
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3" if QUICK else "5"))
ZERO_COST = {"SIMGPU_LAUNCH_NS": "0", "SIMGPU_QUEUE_NS": "0", "SIMGPU_KERNEL_BASE_NS": "0",
             "SIMGPU_KERNEL_NS_PER_BLOCK": "0", "SIMGPU_SYNC_NS": "0"}
# Variables that must not leak into a run from the caller's environment
# (meson puts the build's library folders, simgpu's included, in
# LD_LIBRARY_PATH: PyTorch would load simgpu's libcudart.so.13).
OURS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "TBPROF_TRACE_ALL", "TBPROF_PY_SPAN_US", "TBPROF_OUT", "TBPROF_CUPTI",
        "TBPROF_PYTHON", "TBPROF_BUFFER_SIZE")


def run(cmd, extra, cwd=None):
    """(stdout, wall s, user+sys s, peak RSS KiB) of one child process."""
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    env.update(extra)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("%s failed (exit %d) with %s" % (cmd[0], os.waitstatus_to_exitcode(status), extra))
        out.seek(0)
        text = out.read().decode()
    return text, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def alternate(variants, rounds, one):
    """variants: [(name, arg)]; one(arg) -> dict of figures.  Returns
    {name: [figures per round]}, the order reversed every other round."""
    res = {name: [] for name, _ in variants}
    for r in range(rounds):
        for name, arg in (variants if r % 2 == 0 else variants[::-1]):
            res[name].append(one(arg))
    return res


def ratio(res, a, b, key):
    """Median over rounds of a's figure / b's (same round)."""
    return statistics.median(x[key] / y[key] for x, y in zip(res[a], res[b]))


def med(res, a, key):
    return statistics.median(x[key] for x in res[a])


def lost_in(trace):
    if not TBANALYZE or not os.path.exists(trace):
        return None
    out = subprocess.run([TBANALYZE, "info", trace], capture_output=True, text=True).stdout
    m = re.search(r"^lost events:\s+(\d+)", out, re.M)
    r = re.search(r"^records:\s+(\d+)", out, re.M)
    return (int(m.group(1)) if m else 0, int(r.group(1)) if r else 0)


def launch_loop():
    if not (LIB and SIMGPU and LAUNCH_LOOP and os.path.exists(LAUNCH_LOOP)):
        print("1. launch loop: skipped (TBPROF_LIB, SIMGPU_DIR, LAUNCH_LOOP not all set)")
        return
    n = 300000 if QUICK else 1000000
    tmp = tempfile.mkdtemp(prefix="tbp-bench-")
    base = dict(ZERO_COST, LD_LIBRARY_PATH=SIMGPU, TBPROF_PYTHON="0", TBPROF_CUPTI="0", LAUNCH_LOOP_WARMUP="1000")
    rounds = max(ROUNDS, 7)
    print("1. launch loop on simgpu (zero simulated cost), TBPROF_CUPTI=0, slope between %d and %d launches, "
          "%d alternating rounds:" % (n, 3 * n, rounds))
    for label, extra in (("default ring", {}), ("TBPROF_BUFFER_SIZE=512M", {"TBPROF_BUFFER_SIZE": "512M"})):
        trace = os.path.join(tmp, "trace.zst")

        def one(arg):
            launches, preload = arg
            env = dict(base, **extra)
            if preload:
                env.update(LD_PRELOAD=LIB, TBPROF_OUT=trace)
            _, _, cpu, _ = run([LAUNCH_LOOP, str(launches)], env, cwd=tmp)
            return {"cpu": cpu * 1e9}
        res = alternate([("without", (n, False)), ("with", (n, True)), ("without3", (3 * n, False)),
                         ("with3", (3 * n, True))], rounds, one)
        lost = lost_in(trace)

        def per_launch(a, b):
            return [(y["cpu"] - x["cpu"]) / (2 * n) for x, y in zip(res[a], res[b])]
        without, with_ = per_launch("without", "without3"), per_launch("with", "with3")
        added = statistics.median(w - o for w, o in zip(with_, without))
        once = statistics.median((x["cpu"] - n * w) - (y["cpu"] - n * o)
                                 for x, y, w, o in zip(res["with"], res["without"], with_, without)) / 1e6
        print("   %-24s process CPU per launch %6.1f ns without, %6.1f ns with: added %5.1f ns (goal <= 60), "
              "x%.3f; once per process %+.1f ms%s"
              % (label, statistics.median(without), statistics.median(with_), added,
                 statistics.median(w / o for w, o in zip(with_, without)), once,
                 "; last run: %d of %d records dropped" % (lost[0], lost[0] + lost[1]) if lost else ""))
    shutil.rmtree(tmp, ignore_errors=True)


CALLS = r"""
import sys, time
def f():
    pass
def loop(n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        f()
    return time.perf_counter_ns() - t0
n = int(sys.argv[1])
if len(sys.argv) > 2:
    loop(n)  # callgrind: the count is what matters
else:
    print("ns %.3f" % (min(loop(n) for _ in range(3)) / n))
"""


def python_calls():
    if not LIB:
        print("2. Python calls: skipped (TBPROF_LIB not set)")
        return
    tmp = tempfile.mkdtemp(prefix="tbp-bench-")
    child = os.path.join(tmp, "calls.py")
    with open(child, "w") as f:
        f.write(CALLS)
    trace = os.path.join(tmp, "t.%p.zst")
    variants = [("none", {}),
                ("hook", {"LD_PRELOAD": LIB, "TBPROF_TRACE_ALL": "1", "TBPROF_OUT": trace}),
                ("nohook", {"LD_PRELOAD": LIB, "TBPROF_TRACE_ALL": "1", "TBPROF_PY_SPAN_US": "0",
                            "TBPROF_OUT": trace})]
    n = 300000 if QUICK else 1000000

    def one(extra):
        out, _, _, _ = run([sys.executable, child, str(n)], extra)
        return {"ns": float(out.split()[1])}
    res = alternate(variants, max(ROUNDS, 5), one)
    print("2. Python call of an empty function (best of 3 x %d calls per run, medians of %d alternating rounds):"
          % (n, max(ROUNDS, 5)))
    print("   %.1f ns without tbprof, %.1f ns with the span hook (x%.3f, +%.1f ns per call), %.1f ns preloaded "
          "without the hook (TBPROF_PY_SPAN_US=0, x%.3f)"
          % (med(res, "none", "ns"), med(res, "hook", "ns"), ratio(res, "hook", "none", "ns"),
             statistics.median(x["ns"] - y["ns"] for x, y in zip(res["hook"], res["none"])),
             med(res, "nohook", "ns"), ratio(res, "nohook", "none", "ns")))
    valgrind = shutil.which("valgrind")
    if valgrind:
        exe = os.path.realpath(sys.executable)
        per_call = {}
        for name, extra in variants:
            extra = dict(extra)
            if name == "hook":
                extra["TBPROF_PY_SPAN_US"] = "3600000000"  # valgrind's slowness would make spans of every call
            counts = []
            for calls in (100000, 300000):
                out = os.path.join(tmp, "cg.%s.%d" % (name, calls))
                run([valgrind, "--tool=callgrind", "--callgrind-out-file=" + out, exe, child, str(calls), "cg"],
                    extra)
                with open(out) as f:
                    counts.append(int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1)))
            per_call[name] = (counts[1] - counts[0]) / 200000
        print("   instructions per call (callgrind, all threads): %.0f without, %.0f with the span hook (+%.0f: "
              "CPython's uninlined call path plus the hook's own), %.0f without the hook"
              % (per_call["none"], per_call["hook"], per_call["hook"] - per_call["none"], per_call["nohook"]))
    shutil.rmtree(tmp, ignore_errors=True)


def cpu_loop():
    try:
        import torch  # noqa: F401  (only whether it is there)
    except ImportError:
        print("3. CPU training loop: skipped (no torch)")
        return
    tmp = tempfile.mkdtemp(prefix="tbp-bench-")
    steps = "100" if QUICK else "300"
    script = os.path.join(HERE, "cpu_loop.py")
    variants = [("none", ([], {})), ("torch.profiler", (["profiler"], {})),
                ("torch.profiler(with_stack)", (["profiler-stack"], {}))]
    if LIB:
        variants.insert(1, ("tbprof", ([], {"LD_PRELOAD": LIB, "TBPROF_TRACE_ALL": "1",
                                             "TBPROF_OUT": os.path.join(tmp, "t.%p.zst")})))

    losses = set()

    def one(arg):
        args, extra = arg
        out, wall, cpu, rss = run([sys.executable, script, steps] + (args or ["none"]), extra)
        v = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        losses.add(v["loss"])
        return {"loop": float(v["wall"]), "thread": float(v["thread_cpu"]), "pwall": wall, "pcpu": cpu,
                "rss": rss / 1024.0}
    res = alternate(variants, ROUNDS, one)
    print("3. CPU training loop (six 256x256 Linear, Adam, batch 64, %s steps, 1 thread), %d alternating rounds, "
          "ratios to none (medians of per-round ratios):" % (steps, ROUNDS))
    print("   %-28s %10s %12s %13s %12s %14s" % ("", "loop wall", "main thread", "process wall", "process CPU",
                                                   "peak RSS"))
    for name, _ in variants:
        print("   %-28s %9.3fx %11.3fx %12.3fx %11.3fx %+9.1f MiB" % (
            name, ratio(res, name, "none", "loop"), ratio(res, name, "none", "thread"),
            ratio(res, name, "none", "pwall"), ratio(res, name, "none", "pcpu"),
            statistics.median(x["rss"] - y["rss"] for x, y in zip(res[name], res["none"]))))
    print("   (none: loop %.3f s wall, %.3f s main-thread CPU; process %.2f s wall; goal for tbprof: <= x1.03)"
          % (med(res, "none", "loop"), med(res, "none", "thread"), med(res, "none", "pwall")))
    if LIB:
        for other in ("torch.profiler", "torch.profiler(with_stack)"):
            print("   tbprof / %-26s loop wall x%.3f, process wall x%.3f" % (
                other, ratio(res, "tbprof", other, "loop"), ratio(res, "tbprof", other, "pwall")))
    print("   final losses %s" % ("identical" if len(losses) == 1 else "DIFFER: %s" % sorted(losses)))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    for number, section in (("1", launch_loop), ("2", python_calls), ("3", cpu_loop)):
        if number in SECTIONS:
            section()
