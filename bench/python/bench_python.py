"""bench/python: cost of Python call paths and spans.

1. ns per tbp_py_callpath() with a 20-deep Python stack (repeated path, and
   a path whose leaf alternates between two lines), from the standalone
   module (tests/python's tbp_pytest library) — goal <= 300 ns per event.
2. ns added per Python call by the span hook, and the whole-run overhead of
   the span hook on a CPU PyTorch training loop,
   with vs without, in one run (child processes, interleaved, best of N):
   the standalone module, and the real preload (LD_PRELOAD=libtbprof.so,
   TBPROF_TRACE_ALL=1) when it is built — goal <= 3 %.
3. With the real preload and the simulated libcudart (if both are built):
   ns added per recorded cudaSetDevice at depth 20, TBPROF_PYTHON=1 vs
   unpreloaded and vs TBPROF_PYTHON=0.
Prints ratios; asserts nothing."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("TBP_BUILD_ROOT", "")
SHIM = os.environ.get("TBP_PYTEST_SHIM") or os.path.join(BUILD, "tests/python/libtbp_pytest.so")
LIB = os.environ.get("TBPROF_LIB") or os.path.join(BUILD, "libtbprof/libtbprof.so")
SIMGPU = os.environ.get("SIMGPU_DIR") or os.path.join(BUILD, "tests/simgpu")
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))


def deep(n, fn):
    return fn() if n == 0 else deep(n - 1, fn)


def callpath_cost():
    lib = ctypes.CDLL(SHIM)
    lib.tpy_bench.restype = ctypes.c_double
    lib.tpy_setup.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]
    lib.tpy_setup(1, 32, 0)
    n = 200_000
    base = deep(0, lambda: lib.tpy_bench(n))
    at20 = min(deep(19, lambda: lib.tpy_bench(n)) for _ in range(3))

    lib.tpy_callpath.restype = ctypes.c_ulonglong
    lib.tpy_noop.restype = ctypes.c_ulonglong

    def alternating(fn):
        # From Python, the leaf line changing every event; fn is
        # tpy_callpath or tpy_noop (same ctypes cost, no work).
        def run():
            t0 = time.perf_counter_ns()
            for _ in range(20000):
                fn()
                fn()
            return (time.perf_counter_ns() - t0) / 40000
        return run
    alt = min(deep(19, alternating(lib.tpy_callpath)) - deep(19, alternating(lib.tpy_noop))
              for _ in range(5))
    print("callpath: %.0f ns/event at depth 20 (repeated path), %.0f ns from Python with the leaf line alternating, "
          "%.0f ns at depth 1; goal <= 300 ns" % (at20, alt, base))


INSTR_CHILD = r'''
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.tpy_bench.restype = ctypes.c_double
lib.tpy_setup.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]
lib.tpy_setup(1, 32, 0)
def deep(n):
    return lib.tpy_bench(int(sys.argv[2])) if n == 0 else deep(n - 1)
deep(19)
'''


def callpath_instructions():
    """Instructions per tbp_py_callpath() at depth 20 under callgrind: a
    figure that does not depend on how busy the machine is."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("callpath instructions: skipped (no valgrind)")
        return
    tmp = tempfile.mkdtemp()
    child = os.path.join(tmp, "instr.py")
    with open(child, "w") as f:
        f.write(INSTR_CHILD)
    calls = 20000
    out = os.path.join(tmp, "cg.out")
    # The real interpreter binary, not a launcher script (pyenv shims).
    exe = os.path.realpath(sys.executable)
    run = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=" + out,
                          "--toggle-collect=tbp_py_callpath", exe, child, SHIM, str(calls)],
                         capture_output=True, text=True, timeout=600)
    total = None
    if run.returncode == 0 and os.path.exists(out):
        with open(out) as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    total = int(line.split()[1])
    if total is None:
        print("callpath instructions: callgrind failed")
        return
    print("callpath: %d instructions/event at depth 20 (callgrind, machine-load independent)" % (total // calls))


def run_child(args, env_extra):
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "BENCH_SHIM", "TBPROF_TRACE_ALL"):
        env.pop(key, None)
    env.update(env_extra)
    out = subprocess.run([sys.executable] + args, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError("child failed (%s): %s" % (env_extra, out.stderr[-500:]))
    values = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        values[key] = value
    return values


CALL_CHILD = r'''
import ctypes, os, time
if os.environ.get("BENCH_SHIM"):
    lib = ctypes.PyDLL(os.environ["BENCH_SHIM"])
    lib.tpy_setup.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]
    lib.tpy_setup(1, 32, 100000)
def f():
    pass
def loop():
    t0 = time.perf_counter_ns()
    for _ in range(1000000):
        f()
    return (time.perf_counter_ns() - t0) / 1e6
print("ns", min(loop() for _ in range(5)))
'''


def per_call_cost():
    """ns per Python call without and with the span hook (children, interleaved)."""
    tmp = tempfile.mkdtemp()
    child = os.path.join(tmp, "calls.py")
    with open(child, "w") as f:
        f.write(CALL_CHILD)
    best = {}
    for _ in range(REPEATS):
        for name, extra in (("without", {}), ("with", {"BENCH_SHIM": SHIM})):
            best[name] = min(best.get(name, 1e9), float(run_child([child], extra)["ns"]))
    print("python call (empty function): %.1f ns without, %.1f ns with the span hook: +%.1f ns per call"
          % (best["without"], best["with"], best["with"] - best["without"]))
    return best["with"] - best["without"]


def training_overhead(hook_ns):
    tmp = tempfile.mkdtemp()
    variants = [("without", {})]
    if os.path.exists(SHIM):
        # (Not as a separate process: the test library's stand-in core
        # interns strings by linear search, which is not what is measured.)
        try:
            v = run_child([os.path.join(HERE, "train_loop.py")], {"BENCH_SHIM": SHIM, "BENCH_AB": "1"})
            off, on = float(v["ab_off"]), float(v["ab_on"])
            print("training loop, span hook on/off in one process (best of 10 blocks of 30 steps, CPU "
                  "time): %.4f s vs %.4f s: overhead %+.1f %% (goal <= 3 %%)" % (on, off, 100 * (on / off - 1)))
        except RuntimeError as e:
            print("training loop A/B failed: %s" % e)
    if os.path.exists(LIB):
        variants.append(("LD_PRELOAD libtbprof", {"LD_PRELOAD": LIB, "TBPROF_TRACE_ALL": "1",
                                                  "TBPROF_OUT": os.path.join(tmp, "t.zst")}))
    best = {}
    best_cpu = {}
    losses = {}
    shape = {}
    for _ in range(REPEATS):
        for name, extra in variants:
            try:
                v = run_child([os.path.join(HERE, "train_loop.py")], extra)
            except RuntimeError as e:
                print("training loop, %s: %s" % (name, e))
                continue
            best[name] = min(best.get(name, 1e9), float(v["seconds"]))
            best_cpu[name] = min(best_cpu.get(name, 1e9), float(v["cpu_seconds"]))
            losses[name] = v["loss"]
            if name == "without":
                shape = v
    base = best.get("without")
    if shape:
        calls, step_s = int(shape["python_calls_per_step"]), float(shape["step_seconds"])
        print("training loop: %d Python calls per step, %.0f us per step: the hook's per-call cost "
              "predicts %+.2f %% (less sensitive to machine load than the wall-clock ratio below)"
              % (calls, step_s * 1e6, 100 * calls * hook_ns * 1e-9 / step_s))
    for name, _ in variants[1:]:
        if name in best and base:
            print("training loop: %s: CPU %.3f s vs %.3f s without: overhead %+.1f %% (goal <= 3 %%); "
                  "wall %.3f s vs %.3f s (%+.1f %%); loss %s vs %s"
                  % (name, best_cpu[name], best_cpu["without"], 100 * (best_cpu[name] / best_cpu["without"] - 1),
                     best[name], base, 100 * (best[name] / base - 1), losses[name], losses["without"]))


PRELOAD_CHILD = r'''
import ctypes, os, sys, time
rt = ctypes.CDLL(os.path.join(sys.argv[1], "libcudart.so.13"))
ptr = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(ptr), 1024) == 0
def deep(n, fn):
    return fn() if n == 0 else deep(n - 1, fn)
def loop():
    t0 = time.perf_counter_ns()
    for _ in range(50000):
        rt.cudaSetDevice(0)  # recorded by the hooks, and cheap in simgpu
    return (time.perf_counter_ns() - t0) / 50000
rt.cudaDeviceSynchronize()
print("ns", min(deep(18, loop) for _ in range(3)))
'''


def preload_cost():
    cudart = os.path.join(SIMGPU, "libcudart.so.13")
    if not (os.path.exists(LIB) and os.path.exists(cudart)):
        print("per-event cost under the preload: skipped (libtbprof or simgpu libcudart not built)")
        return
    tmp = tempfile.mkdtemp()
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(PRELOAD_CHILD)
    common = {"LD_LIBRARY_PATH": SIMGPU, "TBPROF_OUT": os.path.join(tmp, "t.zst")}
    variants = [("without", {}), ("preload, python off", {"LD_PRELOAD": LIB, "TBPROF_PYTHON": "0"}),
                ("preload, python on", {"LD_PRELOAD": LIB, "TBPROF_PYTHON": "1"})]
    best = {}
    for _ in range(REPEATS):
        for name, extra in variants:
            try:
                v = run_child([child, SIMGPU], dict(common, **extra))
                best[name] = min(best.get(name, 1e9), float(v["ns"]))
            except RuntimeError as e:
                print("per-event child %s failed: %s" % (name, e))
    if len(best) == 3:
        print("per event at depth 20 (cudaSetDevice on simgpu): %.0f ns without, %.0f ns preloaded "
              "without Python paths, %.0f ns with: Python paths add %.0f ns/event (goal <= 300 ns)"
              % (best["without"], best["preload, python off"], best["preload, python on"],
                 best["preload, python on"] - best["preload, python off"]))


if __name__ == "__main__":
    if not os.path.exists(SHIM):
        sys.exit("build tests/python's tbp_pytest library first (or set TBP_PYTEST_SHIM)")
    callpath_cost()
    callpath_instructions()
    training_overhead(per_call_cost())
    preload_cost()
