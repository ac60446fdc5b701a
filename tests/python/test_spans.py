"""Python function spans from the PEP 523 hook (installed from a thread that
does not hold the GIL, through Py_AddPendingCall), coexistence with
sys.setprofile, and attribution of native threads without Python frames to
the Python thread blocked in backward() or in a GPU wait."""
import os
import sys
import tempfile
import threading
import time

import tpyshim
from tpyshim import cdll, pydll, describe, check, spans

FILE = __file__
SITE = tpyshim.site_lines(FILE)
THRESHOLD_NS = 2_000_000

# GIL released during setup: the hook must arrive through a pending call.
cdll.tpy_setup(1, 32, THRESHOLD_NS)
for _ in range(10000):  # give the eval loop a chance to run pending calls
    pass


def frames(path, n):
    return [(line, func) if file == FILE else (file, line, func) for file, line, func in describe(path)[:n]]


def slow():  # site:slow_def
    time.sleep(0.005)


def fast():  # site:fast_def
    return 1


def parent():  # site:parent_def
    for _ in range(200):
        fast()
    slow()  # site:slow_call


pydll.tpy_clear_spans()
parent()  # site:parent_call
found = [(ts, end, path) for ts, end, path, tid in spans()]
by_leaf = {}
for ts, end, path in found:
    by_leaf.setdefault(frames(path, 1)[0], []).append((ts, end, path))
slow_spans = by_leaf.get((SITE["slow_def"], "slow"), [])
check("one span for slow()", len(slow_spans), 1)
if slow_spans:
    ts, end, path = slow_spans[0]
    check("slow() span: def line, then caller line, then module", frames(path, 3),
          [(SITE["slow_def"], "slow"), (SITE["slow_call"], "parent"), (SITE["parent_call"], "<module>")])
    check("slow() span lasts at least the sleep", end - ts >= 5_000_000, True)
check("parent() has a span too", any(frames(p, 1) == [(SITE["parent_def"], "parent")] for _, _, p in found),
      True)
check("no span for fast() (below the threshold)", (SITE["fast_def"], "fast") in by_leaf, False)

# Span lengths come from a CPU counter whose rate was measured at install:
# a rate that is off (its reads disturbed on a loaded VM; halved here) is
# measured again from the next span on, and the lengths are right again:
# at least the sleep, where the halved rate would read half of it (the
# upper bound only catches nonsense: a loaded machine oversleeps).
if pydll.tpy_upset_rate(0.5):
    pydll.tpy_clear_spans()
    slow()
    slow()
    lengths = [end - ts for ts, end, path, tid in spans() if frames(path, 1) == [(SITE["slow_def"], "slow")]]
    check("after an upset rate, slow() spans last the sleep, not half of it",
          len(lengths) == 2 and all(5_000_000 <= n < 100_000_000 for n in lengths), True)
    print("  lengths after the upset:", lengths)

# Other profilers keep working and spans keep coming.
calls = []


def profiler(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "slow":
        calls.append(frame.f_lineno)


pydll.tpy_clear_spans()
sys.setprofile(profiler)
slow()  # site:profiled
sys.setprofile(None)
check("sys.setprofile still sees the call", calls, [SITE["slow_def"]])
check("span recorded under sys.setprofile",
      [frames(p, 2) for _, _, p, _ in spans() if frames(p, 1) == [(SITE["slow_def"], "slow")]],
      [[(SITE["slow_def"], "slow"), (SITE["profiled"], "<module>")]])

# 3.12+: a sys.monitoring tool sees its events while spans keep coming.
if sys.version_info >= (3, 12):
    mon = sys.monitoring
    starts = []
    mon.use_tool_id(mon.PROFILER_ID, "tbprof-test")
    mon.register_callback(mon.PROFILER_ID, mon.events.PY_START,
                          lambda code, offset: starts.append(code.co_name) if code.co_name == "slow" else None)
    mon.set_events(mon.PROFILER_ID, mon.events.PY_START)
    pydll.tpy_clear_spans()
    slow()  # site:monitored
    mon.set_events(mon.PROFILER_ID, 0)
    mon.free_tool_id(mon.PROFILER_ID)
    check("sys.monitoring still sees the call", starts, ["slow"])
    check("span recorded under sys.monitoring",
          [frames(p, 2) for _, _, p, _ in spans() if frames(p, 1) == [(SITE["slow_def"], "slow")]],
          [[(SITE["slow_def"], "slow"), (SITE["monitored"], "<module>")]])

# An import runs without the hook (CPython's uninlined call path on every
# call inside it cost `import torch` ~7 % CPU): the import itself is one span
# (importlib's _find_and_load), nothing inside it; the hook is back after.
moddir = tempfile.mkdtemp()
with open(os.path.join(moddir, "tbp_slow_module.py"), "w") as f:
    f.write("import time\n\ndef slow_in_module():\n    time.sleep(0.005)\n\nslow_in_module()\n")
sys.path.insert(0, moddir)
pydll.tpy_clear_spans()
import tbp_slow_module  # noqa: E402,F401  site:import
leaves = [describe(p)[0] for _, _, p, _ in spans()]
check("no span inside an import", [leaf for leaf in leaves if leaf[2] == "slow_in_module"], [])
check("the import is one span", [leaf[0] for leaf in leaves if leaf[2] == "_find_and_load"],
      ["<frozen importlib._bootstrap>"])
pydll.tpy_clear_spans()
slow()  # site:after_import
check("spans again after the import",
      [frames(p, 2) for _, _, p, _ in spans() if frames(p, 1) == [(SITE["slow_def"], "slow")]],
      [[(SITE["slow_def"], "slow"), (SITE["after_import"], "<module>")]])

# Spans from another Python thread carry that thread's path.
pydll.tpy_clear_spans()


def thread_body():
    slow()  # site:thread_slow


t = threading.Thread(target=thread_body)
t.start()
t.join()
check("span in a thread", [frames(p, 2) for _, _, p, _ in spans() if frames(p, 1) == [(SITE["slow_def"], "slow")]],
      [[(SITE["slow_def"], "slow"), (SITE["thread_slow"], "thread_body")]])

# Inactive tracing: no spans.
pydll.tpy_set_active(0)
pydll.tpy_clear_spans()
slow()
check("no spans while inactive", len(spans()), 0)
pydll.tpy_set_active(1)

# Native threads: a fake torch.autograd.backward, like the real one, blocks
# while other threads run the work.
root = tempfile.mkdtemp()
os.makedirs(os.path.join(root, "torch", "autograd"))
open(os.path.join(root, "torch", "__init__.py"), "w").close()
with open(os.path.join(root, "torch", "autograd", "__init__.py"), "w") as f:
    f.write("def backward(work):\n    return work()\n\ndef grad(work):\n    return work()\n")
sys.path.insert(0, root)
import torch.autograd  # noqa: E402  (the fake one)

check("native thread before any wait", cdll.tpy_callpath_in_thread(), 0)


def train_step():
    return torch.autograd.backward(cdll.tpy_callpath_in_thread)  # site:backward


p = train_step()  # site:train_step
check("native thread during backward(): the backward() line", frames(p, 2) if p else p,
      [(SITE["backward"], "train_step"), (SITE["train_step"], "<module>")])
p = torch.autograd.grad(cdll.tpy_callpath_in_thread)  # site:grad
check("native thread during grad()", frames(p, 1) if p else p, [(SITE["grad"], "<module>")])
check("native thread after backward() returned", cdll.tpy_callpath_in_thread(), 0)

waiting = cdll.tpy_callpath()  # site:wait
cdll.tpy_note_wait(waiting)
p = cdll.tpy_callpath_in_thread()
check("native thread while a thread waits on the GPU", frames(p, 1) if p else p, [(SITE["wait"], "<module>")])
tpyshim.finish()
