"""CPU PyTorch under the preload: a training loop gives exactly the same
losses as without tbprof, and the trace holds Python spans for every
training step, at the step function's def line under its caller's line.
A torch.compile'd function (Dynamo) still works and gives eager's results."""
import collections
import contextlib
import io
import os
import subprocess
import sys
import tempfile

from tpyshim_sites import site_lines
from traceview import Trace
import checks  # noqa: E402
from checks import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("TBPROF_LIB", "")
try:
    import torch  # noqa: F401
except ImportError:
    print("skip: torch is not installed")
    sys.exit(77)
if not os.path.exists(LIB):
    print("skip: needs libtbprof.so")
    sys.exit(77)

CHILD = os.path.join(HERE, "torch_train.py")
SITE = site_lines(CHILD)


def start(args, preload, trace=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env.update(LD_PRELOAD=LIB, TBPROF_TRACE_ALL="1", TBPROF_OUT=trace)
    return subprocess.Popen([sys.executable, CHILD] + args, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(child):
    out, err = child.communicate(timeout=150)
    if child.returncode != 0:
        print(err[-3000:])
    return child.returncode, out.splitlines()


# The reference losses come from this process (no preload), the traced
# ones from a preloaded child: one torch import less than two children.
tmp = tempfile.mkdtemp()
trace_path = os.path.join(tmp, "train.zst")
child = start(["compile"], True, trace_path)
reference = io.StringIO()
with contextlib.redirect_stdout(reference):
    import torch_train  # noqa: E402  (builds the same model from the same seed)
    torch_train.main(20)
plain = reference.getvalue().splitlines()
rc0 = 0
rc1, traced = finish(child)
check("exit codes", (rc0, rc1), (0, 0))
losses = [line for line in plain if line.startswith("loss ")]
check("20 losses printed", len(losses), 20)
check("same losses with and without the preload", [line for line in traced if line.startswith("loss ")], losses)
check("torch.compile (Dynamo, eager backend) under the preload matches eager",
      [line for line in traced if line.startswith("compiled")],
      ["compiled 0.0 True", "compiled 1.0 True", "compiled 2.0 True"])

trace = Trace(trace_path)
spans = trace.of_kind("py_span")
check("spans recorded", len(spans) > 20, True)
step_spans = [s for s in spans if trace.path(s["callpath"])[:1] == [(CHILD, SITE["train_step"], "train_step")]]
check("one span per training step", len(step_spans), 23)
callers = collections.Counter(tuple(trace.path(s["callpath"])[1:2]) for s in step_spans)
check("step spans sit under main()'s call line, 20 of them, and 3 after torch.compile ran",
      dict(callers), {((CHILD, SITE["train_call"], "main"),): 20,
                      ((CHILD, SITE["after_call"], "after_compile"),): 3})
check("span end after begin", all(s["end"] >= s["ts"] for s in spans), True)
markers = trace.of_kind("marker")
if markers:
    begins = [m["ts"] for m in markers if m["marker_kind"] == 1]
    ends = [m["ts"] for m in markers if m["marker_kind"] == 2]
    # A span's start is its end less a length measured in CPU ticks: it can
    # read up to ~1e-4 of the length early (the analyzer allows the same
    # slack: doc/findings.md, "Reading the text report"), so the start is
    # compared with that slack.
    def slack(s):
        return (s["end"] - s["ts"]) // 1024 + 1000
    inside = sum(1 for s in step_spans
                 if any(b <= s["ts"] + slack(s) and s["end"] <= e for b, e in zip(begins, ends)))
    check("each step span of main() lies inside its iteration markers", inside, 20)
checks.finish()
