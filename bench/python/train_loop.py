"""A small, Python-heavy CPU training loop (many thin layers, so per-call
Python overhead matters).  Prints the final loss and the loop's own time.
BENCH_SHIM=<tbp_pytest library>: load the call-path module standalone and
install its span hook (what the preload does), without the rest of tbprof."""
import ctypes
import os
import sys
import time


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
if os.environ.get("BENCH_SHIM"):
    shim = ctypes.PyDLL(os.environ["BENCH_SHIM"])
    shim.tpy_setup.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]
    shim.tpy_setup(1, 32, 100_000)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loop_model import make_step  # noqa: E402

step = make_step()
marker = None
if os.environ.get("LD_PRELOAD"):
    marker = ctypes.CDLL(None).tbprof_marker if hasattr(ctypes.CDLL(None), "tbprof_marker") else None


for _ in range(10):  # warm-up
    step()
calls = [0]


def count_calls(frame, event, arg):
    if event == "call":
        calls[0] += 1


sys.setprofile(count_calls)
step()
sys.setprofile(None)
if os.environ.get("BENCH_AB"):
    # In one process: the span hook taken out and put back between blocks
    # of steps; the fairest comparison on a shared machine (same memory
    # layout, same moment).
    shim.tpy_hook.argtypes = [ctypes.c_int]
    blocks = {0: [], 1: []}
    for _ in range(10):
        for on in (0, 1):
            shim.tpy_hook(on)
            c = time.process_time()
            for _ in range(30):
                step()
            blocks[on].append(time.process_time() - c)
    shim.tpy_hook(1)
    print("ab_off %.6f" % min(blocks[0]))
    print("ab_on %.6f" % min(blocks[1]))
t0 = time.perf_counter()
c0 = time.process_time()
th0 = time.thread_time()
m0 = time.monotonic_ns()
for i in range(steps):
    if marker:
        marker(1, i, None)
    loss = step()
    if marker:
        marker(2, i, None)
t1 = time.perf_counter()
c1 = time.process_time()
th1 = time.thread_time()
m1 = time.monotonic_ns()
print("loss %.10g" % loss.item())
print("seconds %.6f" % (t1 - t0))
# CPU time of the whole process (tbprof's own threads included): on a
# shared machine it moves much less with other people's load than wall time.
print("cpu_seconds %.6f" % (c1 - c0))
# CPU time of this (main) thread only: not moved by tbprof's own threads
# being scheduled, nor by the other threads' start-up.
print("thread_cpu_seconds %.6f" % (th1 - th0))
# CLOCK_MONOTONIC bounds of the loop, to count a trace's records inside it.
print("loop_ns %d %d" % (m0, m1))
print("pid %d" % os.getpid())
print("step_seconds %.9f" % ((t1 - t0) / steps))
print("python_calls_per_step %d" % calls[0])
if os.environ.get("BENCH_SHIM"):
    print("spans %d" % shim.tpy_nspans())
