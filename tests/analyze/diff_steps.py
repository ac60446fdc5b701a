"""A CPU program with marked steps, for `tbanalyze diff` on real runs.

    diff_steps.py STEPS WORK [--wait MS] [--slow PCT] [--turns IN_FD,OUT_FD] [--print]

Each step waits MS milliseconds (time.sleep: what a step waiting for its GPU does; 0 by default) and runs WORK
iterations of pure-Python arithmetic, both times 1 + PCT/100 with --slow (a planted slowdown), between the
runner's marks, ITER_BEGIN and ITER_END (tbprof_marker, present under the
preload); two warm-up steps come first, then WARMUP_END, then STEPS measured steps.  With --turns
each step waits for a byte on IN_FD before it begins and writes one to OUT_FD after it ends, so a
driver can alternate two such programs step by step and both see the same machine load (outside
their marked steps).  --print writes each measured step's own time (ns) to stdout.
"""
import ctypes
import os
import sys
import time

ITER_BEGIN, ITER_END, WARMUP_END = 1, 2, 3
WARMUP = 2


def work(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def main(argv):
    steps, n = int(argv[0]), int(argv[1])
    slow, wait, turns, show = 0.0, 0.0, None, False
    i = 2
    while i < len(argv):
        if argv[i] == "--wait":
            wait = float(argv[i + 1]) / 1000
            i += 2
        elif argv[i] == "--slow":
            slow = float(argv[i + 1])
            i += 2
        elif argv[i] == "--turns":
            turns = [int(x) for x in argv[i + 1].split(",")]
            i += 2
        elif argv[i] == "--print":
            show = True
            i += 1
        else:
            raise SystemExit(f"diff_steps.py: unknown argument {argv[i]}")
    n = int(round(n * (1 + slow / 100)))
    wait *= 1 + slow / 100
    try:
        mark = ctypes.CDLL(None).tbprof_marker
        mark.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_char_p)
    except AttributeError:
        mark = None
    times = []
    for k in range(WARMUP + steps):
        if turns:
            if not os.read(turns[0], 1):
                return 1
        if k == WARMUP and mark:
            mark(WARMUP_END, WARMUP, None)
        t0 = time.perf_counter_ns()
        if mark:
            mark(ITER_BEGIN, k, None)
        if wait:
            time.sleep(wait)
        work(n)
        if mark:
            mark(ITER_END, k, None)
        if k >= WARMUP:
            times.append(time.perf_counter_ns() - t0)
        if turns:
            os.write(turns[1], b".")
    if show:
        print(" ".join(str(t) for t in times))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
