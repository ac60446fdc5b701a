#!/usr/bin/env python3
"""On demand without a GPU (issue 30; the simtorch suite has the GPU checks): a CPU-only Python program under
`tbprof record --on-demand` writes no file while armed; `tbprof capture PID --for 1` writes a trace of its
Python spans that tbanalyze reads (exit 0); a capture of a pid that is not armed exits 2; the program ends as
it would (its output, exit status 5); `with tbprof.capture(...)` in a CPU program writes the region.
Environment: TBPROF_CMD, TBANALYZE, TBP_SOURCE_ROOT."""
import os
import select
import subprocess
import sys
import tempfile

TBPROF = os.environ["TBPROF_CMD"]
TBANALYZE = os.environ["TBANALYZE"]
SRC = os.environ["TBP_SOURCE_ROOT"]
failures = []

SPIN = """
import os, sys, time
sys.path.insert(0, %r)
import tbprof
def work():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.0003:
        pass
print("ready", flush=True)
t0 = time.time()
while not os.path.exists(sys.argv[1]) and time.time() - t0 < 40:
    work()
with tbprof.capture(sys.argv[2]):
    for _ in range(200):
        work()
print("done", flush=True)
sys.exit(5)
""" % os.path.join(SRC, "python")


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def main():
    with tempfile.TemporaryDirectory() as d:
        script, stop, region = os.path.join(d, "spin.py"), os.path.join(d, "stop"), os.path.join(d, "region.zst")
        with open(script, "w") as f:
            f.write(SPIN)
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        proc = subprocess.Popen([TBPROF, "record", "--on-demand", "-o", os.path.join(d, "trace.zst"), "--",
                                 sys.executable, script, stop, region], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            if not ready or proc.stdout.readline().strip() != "ready":
                fail("the armed program did not start")
                return
            if [f for f in os.listdir(d) if f.endswith(".zst")]:
                fail("an armed program wrote a file before any capture")
            c = subprocess.run([TBPROF, "capture", str(proc.pid), "--for", "1"], capture_output=True, text=True,
                               timeout=60)
            files = c.stdout.split()
            if c.returncode != 0 or len(files) != 1 or not files[0].endswith("trace.capture1.zst"):
                fail(f"tbprof capture --for 1: exit {c.returncode}, {c.stdout!r}, {c.stderr!r}")
            else:
                for verb in (["report"], ["info"], ["dump"]):
                    r = subprocess.run([TBANALYZE, verb[0], files[0]], capture_output=True, text=True, timeout=60)
                    if r.returncode != 0:
                        fail(f"tbanalyze {verb[0]} on the capture: exit {r.returncode}: {r.stderr[-300:]}")
                info = subprocess.run([TBANALYZE, "info", files[0]], capture_output=True, text=True).stdout
                if "py_span" not in info:
                    fail(f"the capture has no Python spans: {info[-500:]}")
            sleeper = subprocess.Popen(["sleep", "30"])
            c = subprocess.run([TBPROF, "capture", str(sleeper.pid)], capture_output=True, text=True, timeout=30)
            sleeper.kill()
            sleeper.wait()
            if c.returncode != 2:
                fail(f"capture of a process that is not armed: exit {c.returncode} (want 2), {c.stderr!r}")
        finally:
            open(stop, "w").close()
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                fail("the program did not end")
        if proc.returncode != 5 or out != "done\n":
            fail(f"the program under --on-demand: exit {proc.returncode} (want 5), stdout {out!r}, stderr {err!r}")
        if not os.path.exists(region):
            fail("with tbprof.capture(...) wrote no file")
        else:
            r = subprocess.run([TBANALYZE, "info", region], capture_output=True, text=True, timeout=60)
            if r.returncode != 0 or "py_span" not in r.stdout:
                fail(f"the region's trace: exit {r.returncode}, {r.stdout[-400:]!r}")
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
