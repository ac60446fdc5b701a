#!/usr/bin/env python3
"""A child forked without exec from an armed process is capturable (issue 30, "known limits"): a CPU-only
Python program under `tbprof record --on-demand` forks (os.fork, no exec) a child; both spin in Python.
`tbprof capture CHILD --for 1` writes the child's trace, named with its pid (trace.CHILD.capture1.zst, so
the parent's own captures keep their names), with Python spans; `tbprof capture LAUNCHER --for 1` answers
from both processes, each its own file; both end as they would (the child's exit status 3 seen by the
parent, the parent's 5), and no PID.armed file is left behind.  Environment: TBPROF_CMD, TBANALYZE,
TBP_SOURCE_ROOT."""
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

TBPROF = os.environ["TBPROF_CMD"]
TBANALYZE = os.environ["TBANALYZE"]
failures = []

FORKING = """
import os, sys, time
def work():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.0003:
        pass
def spin(stop):
    t0 = time.time()
    while not os.path.exists(stop) and time.time() - t0 < 60:
        work()
pid = os.fork()
if pid == 0:
    os.write(1, b"child %d\\n" % os.getpid())   # one write: the two processes share the pipe
    spin(sys.argv[1])
    sys.exit(3)
os.write(1, b"parent %d\\n" % os.getpid())
spin(sys.argv[1])
_, status = os.waitpid(pid, 0)
os.write(1, b"child exit %d\\n" % os.waitstatus_to_exitcode(status))
sys.exit(5)
"""


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def check_trace(path, what):
    r = subprocess.run([TBANALYZE, "info", path], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or "py_span" not in r.stdout:
        fail(f"{what}: tbanalyze info {path}: exit {r.returncode}, {r.stdout[-400:]!r} {r.stderr[-300:]!r}")
        return
    r = subprocess.run([TBANALYZE, "report", path], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"{what}: tbanalyze report {path}: exit {r.returncode}: {r.stderr[-300:]}")


def control_dir():
    uid = os.getuid()
    run = f"/run/user/{uid}"
    return os.path.join(run, "tbprof") if os.path.isdir(run) and os.stat(run).st_uid == uid else f"/tmp/tbprof-{uid}"


def main():
    with tempfile.TemporaryDirectory() as d:
        script, stop = os.path.join(d, "forking.py"), os.path.join(d, "stop")
        with open(script, "w") as f:
            f.write(FORKING)
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        proc = subprocess.Popen([TBPROF, "record", "--on-demand", "-o", os.path.join(d, "trace.zst"), "--",
                                 sys.executable, script, stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        pids = {}
        out_lines = queue.Queue()   # both processes' lines may come in one read: a reader thread, no select
        threading.Thread(target=lambda: [out_lines.put(l) for l in proc.stdout] + [out_lines.put("")],
                         daemon=True).start()
        out = ""
        try:
            while len(pids) < 2:
                try:
                    line = out_lines.get(timeout=60)
                except queue.Empty:
                    line = ""
                if not line:
                    fail(f"the armed program did not start: {pids}")
                    return
                out += line
                if len(line.split()) != 2:
                    fail(f"unexpected output of the program: {line!r}")
                    return
                who, pid = line.split()
                pids[who] = int(pid)
            child, parent = pids["child"], pids["parent"]
            # The child says it is armed after one poll period of its control thread (100 ms): one that
            # execs at once leaves no file.
            armed = os.path.join(control_dir(), f"{child}.armed")
            deadline = time.time() + 20
            while not os.path.exists(armed) and time.time() < deadline:
                time.sleep(0.05)
            c = subprocess.run([TBPROF, "capture", str(child), "--for", "1"], capture_output=True, text=True,
                               timeout=60)
            files = c.stdout.split()
            want = os.path.join(d, f"trace.{child}.capture1.zst")
            if c.returncode != 0 or files != [want]:
                fail(f"tbprof capture CHILD --for 1: exit {c.returncode}, {c.stdout!r} (want {want}), {c.stderr!r}")
            else:
                check_trace(files[0], "the child's capture")
            c = subprocess.run([TBPROF, "capture", str(proc.pid), "--for", "1"], capture_output=True, text=True,
                               timeout=60)
            files = sorted(c.stdout.split())
            if c.returncode != 0 or len(files) != 2 or not any(f".{child}." in f for f in files) \
                    or not any(f".{parent}." in f for f in files):
                fail(f"tbprof capture LAUNCHER --for 1: exit {c.returncode}, {c.stdout!r} (want one file for "
                     f"pid {parent} and one for {child}), {c.stderr!r}")
            else:
                for f in files:
                    check_trace(f, "the launcher-wide capture")
        finally:
            open(stop, "w").close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                fail("the program did not end")
        err = proc.stderr.read()
        while True:
            line = out_lines.get(timeout=10)
            if not line:
                break
            out += line
        if proc.returncode != 5 or "child exit 3\n" not in out:
            fail(f"the forking program under --on-demand: exit {proc.returncode} (want 5), stdout {out!r}, "
                 f"stderr {err!r}")
        for pid in pids.values():
            if os.path.exists(os.path.join(control_dir(), f"{pid}.armed")):
                fail(f"{pid}.armed left behind in {control_dir()} after the process ended")


if __name__ == "__main__":
    main()
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
