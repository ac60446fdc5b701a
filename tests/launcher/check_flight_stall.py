#!/usr/bin/env python3
"""--flight-stall dumps where each Python thread is blocked NOW (issue 30 item 3's hang dump), without a GPU:
a CPU Python program under `tbprof record --flight 3 --flight-stall 1` marks steps (tbprof.mark_step), then
its main thread blocks in Event.wait inside wait_for_batch() while a second thread sleeps in loader().
The stall dump (trace.flight1.zst) holds one NOTICE per Python thread naming its current stack, innermost
first: the main thread's passes through HANG_LINE in wait_for_batch, CALL_LINE in main and MODULE_LINE
in <module> (line 3000-odd, past 3000 padding statements: a location table of tens of KiB is read whole);
the other's is in loader at SLEEP_LINE.  None of those lines made a traced call, so only a walk of the blocked
threads can name them.  The program's output and exit status (7) are its own.
Environment: TBPROF_CMD, TBANALYZE."""
import os
import subprocess
import sys
import tempfile

TBPROF = os.environ["TBPROF_CMD"]
TBANALYZE = os.environ["TBANALYZE"]
failures = []

HANG = """import sys, threading, time
import tbprof

def wait_for_batch(ev):
    ev.wait(3.0)          # HANG_LINE

def loader(ev):
    time.sleep(2.5)       # SLEEP_LINE

def main():
    ev = threading.Event()
    t = threading.Thread(target=loader, args=(ev,))
    t.start()
    for step in range(5):
        tbprof.mark_step()
        time.sleep(0.02)
    tbprof.mark_step()
    wait_for_batch(ev)    # CALL_LINE
    t.join()
    print("done")
    sys.exit(7)

""" + "".join(f"pad_{i} = {i}\n" for i in range(3000)) + """main()                    # MODULE_LINE
"""


def line_of(tag):
    return next(i + 1 for i, l in enumerate(HANG.splitlines()) if l.endswith("# " + tag))


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def main():
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "hang.py")
        with open(script, "w") as f:
            f.write(HANG)
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        p = subprocess.run([TBPROF, "record", "--flight", "3", "--flight-stall", "1", "-o", os.path.join(d, "trace.zst"),
                            "--", sys.executable, script], capture_output=True, text=True, env=env, timeout=120)
        if p.returncode != 7 or p.stdout != "done\n":
            fail(f"the program under --flight-stall: exit {p.returncode} (want 7), stdout {p.stdout!r}, "
                 f"stderr {p.stderr[-500:]!r}")
        dump = os.path.join(d, "trace.flight1.zst")
        if not os.path.exists(dump):
            fail(f"no stall dump: {sorted(os.listdir(d))}, stderr {p.stderr[-500:]!r}")
            return
        r = subprocess.run([TBANALYZE, "dump", dump], capture_output=True, text=True, timeout=60)
        notices = [l for l in r.stdout.splitlines() if " notice " in l and "a stall: Python thread" in l]
        print("\n".join(notices))
        main_want = [f"hang.py:{line_of('HANG_LINE')} in wait_for_batch", f"hang.py:{line_of('CALL_LINE')} in main",
                     f"hang.py:{line_of('MODULE_LINE')} in <module>"]
        other_want = f"hang.py:{line_of('SLEEP_LINE')} in loader"
        main_thread = [l for l in notices if "thread 1 of 2" in l]
        other = [l for l in notices if "thread 2 of 2" in l]
        if r.returncode != 0 or len(notices) != 2:
            fail(f"tbanalyze dump: exit {r.returncode}, {len(notices)} stall notices (want 2, one per Python thread)")
        elif not main_thread or not all(w in main_thread[0] for w in main_want) \
                or not main_thread[0].index(main_want[0]) < main_thread[0].index(main_want[1]) \
                < main_thread[0].index(main_want[2]):
            fail(f"the main thread's stack now should name {main_want}, innermost first: {main_thread}")
        elif not other or other_want not in other[0]:
            fail(f"the loader thread's stack now should name {other_want}: {other}")


if __name__ == "__main__":
    main()
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
