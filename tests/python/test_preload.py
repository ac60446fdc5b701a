"""End to end on the simulated libcudart: libtbprof.so preloaded into python,
a ctypes workload (workload_simgpu.py) launches and copies through CDLL and
PyDLL from plain calls, recursion, a generator, a coroutine and threads.
Every launch/copy/memset record's call path must name the exact
file:line:function the workload reports for it, in order, per thread."""
import collections
import json
import os
import subprocess
import sys
import tempfile

from traceview import Trace
from checks import check, finish  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("TBPROF_LIB", "")
SIMGPU = os.environ.get("SIMGPU_DIR", "")
if not (os.path.exists(LIB) and os.path.exists(os.path.join(SIMGPU, "libcudart.so.13"))):
    print("skip: needs libtbprof.so and simgpu's libcudart.so.13")
    sys.exit(77)

RUN = "Trainer.run" if sys.version_info >= (3, 11) else "run"  # 3.10: no co_qualname


tmp = tempfile.mkdtemp()
trace_path = os.path.join(tmp, "trace.zst")
done_path = os.path.join(tmp, "done.jsonl")
workload = os.path.join(HERE, "workload_simgpu.py")
env = dict(os.environ, LD_PRELOAD=LIB, LD_LIBRARY_PATH=SIMGPU, TBPROF_OUT=trace_path,
           PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
run = subprocess.run([sys.executable, workload, done_path], env=env, capture_output=True, text=True, timeout=120)
check("workload exits 0 under the preload", (run.returncode, run.stderr[-2000:] if run.returncode else ""), (0, ""))
if run.returncode:
    sys.exit(1)

with open(done_path) as f:
    done = [json.loads(line) for line in f]
expected = collections.defaultdict(list)
for d in done:
    expected[d["tid"]].append((d["api"], d["line"], d["function"]))

trace = Trace(trace_path)
apis = {"cudaLaunchKernel", "cudaMemcpy", "cudaMemsetAsync"}
recorded = collections.defaultdict(list)
paths = set()  # distinct whole paths
for r in sorted(trace.of_kind("launch", "memcpy", "memset"), key=lambda r: r["ts"]):
    if r.get("api_name") not in apis:
        continue
    path = trace.path(r["callpath"])
    leaf = path[0] if path else ("", 0, "")
    where = (r["api_name"], leaf[1], leaf[2]) if leaf[0] == workload else (r["api_name"], leaf)
    recorded[r["sid"]].append(where)
    paths.add(tuple(path))

check("threads with events", sorted(len(v) for v in recorded.values()), sorted(len(v) for v in expected.values()))
check("events", sum(len(v) for v in recorded.values()), len(done))
check("every event names its exact file:line:function, in order, per thread",
      {tid: recorded.get(tid) for tid in expected}, dict(expected))

# Whole paths, not just leaves.
rec = [p for p in paths if p[0][2] == "recurse"]
check("recursion: 7 recurse frames then Trainer.run", [[f for _, _, f in p[:8]] for p in rec],
      [["recurse"] * 7 + [RUN]] * len(rec) if rec else ["a path"])
launch_paths = [p for p in paths if p[0][2] == "launch"]
check("launch callers: step and generator", sorted({p[1][2] for p in launch_paths}), ["generator", "step"])
check("generator launch: generator <- Trainer.run",
      sorted({tuple(f for _, _, f in p[1:3]) for p in launch_paths if p[1][2] == "generator"}),
      [("generator", RUN)])
check("thread paths end in threading.py, main ones in the workload",
      {p[-1][0].endswith("threading.py") for p in paths}, {True, False})
# The native thread's sync (a thread with no Python frames, so not in `done`).
python_tids = set(expected)
native = [r for r in trace.of_kind("sync") if r["sid"] not in python_tids and r.get("api_name") == "cudaDeviceSynchronize"]
wsites = {}
with open(workload) as f:
    for number, text in enumerate(f, 1):
        if "# site:" in text:
            wsites[text.split("# site:")[1].split()[0]] = number
check("native thread during backward(): one sync, attributed to the backward() line",
      [trace.path(r["callpath"])[:1] for r in native], [[(workload, wsites["backward"], "native_backward")]])
finish()
