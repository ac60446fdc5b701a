#!/usr/bin/env python3
"""A CPU DDP training script (gloo, 2 ranks through `python -m
torch.distributed.run --nproc_per_node 2`) under `tbprof record --trace-all
-o DIR`: DIR/rank0.zst and DIR/rank1.zst with the ranks recorded (the agent's
trace named apart, agent.zst), the output as without tbprof; the kineto
exports of the directory load in Holistic Trace Analysis as 2 ranks (where
HTA is installed: ~/.cache/tbprof/hta-venv or $TBP_HTA_PYTHON; otherwise that
part says SKIP and the rest still runs).  Exits 77 (SKIP) without torch.
Environment: TBPROF_CMD, TBANALYZE.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

TBPROF = os.environ["TBPROF_CMD"]
TBANALYZE = os.environ["TBANALYZE"]
HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77

HTA_SCRIPT = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
print(json.dumps(sorted(int(r) for r in t.t.get_ranks())))
"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def hta_python():
    cands = [os.environ.get("TBP_HTA_PYTHON"),
             os.path.join(os.environ.get("TBP_HTA_VENV") or os.path.expanduser("~/.cache/tbprof/hta-venv"),
                          "bin", "python")]
    for py in filter(None, cands):
        if os.path.exists(py) and subprocess.run([py, "-c", "import hta.trace_analysis"],
                                                 capture_output=True, timeout=120).returncode == 0:
            return py
    return None


def main():
    if subprocess.run([sys.executable, "-c", "import torch.distributed"], capture_output=True).returncode != 0:
        print("SKIP: torch is not installed for", sys.executable)
        sys.exit(SKIP)
    tmp = tempfile.mkdtemp(prefix="tbp-ddp-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TBPROF_") and k != "LD_PRELOAD"}
    env.update(OMP_NUM_THREADS="1", DDP_STEPS="10")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(HERE, "ddp_train.py")]
    # its own session: on a hang the whole job (agent, workers) is killed
    p = subprocess.Popen([TBPROF, "record", "--trace-all", "-o", "traces", "--"] + cmd, cwd=tmp, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        p.stdout, p.stderr = p.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        fail("the DDP job under tbprof did not finish in 600 s")
    if p.returncode != 0:
        fail(f"rc {p.returncode}\nstdout {p.stdout}\nstderr {p.stderr[-3000:]}")
    # Two processes share the pipe and print() writes the text and its newline separately, so their lines
    # may interleave ("rank 1 of 2: loss 1.02rank 0 of 2: loss 1.02\n\n"): look for each rank's report.
    ranks = sorted(re.findall(r"rank (\d+) of 2: loss", p.stdout))
    if ranks != ["0", "1"]:
        fail(f"training output {p.stdout!r}")
    out = os.path.join(tmp, "traces")
    got = sorted(os.listdir(out))
    if got != ["agent.zst", "rank0.zst", "rank1.zst"]:
        fail(f"traces {got}, expected agent.zst, rank0.zst, rank1.zst; stderr {p.stderr[-2000:]}")
    summary = [l for l in p.stderr.splitlines() if l.startswith("tbprof: ")]
    if len(summary) != 1 or not all(f"traces/{f}" in summary[0] for f in got):
        fail(f"summary {summary}")
    for f in got:
        q = subprocess.run([TBANALYZE, "info", "--json", os.path.join(out, f)], capture_output=True, text=True)
        if q.returncode != 0:
            fail(f"tbanalyze info {f}: {q.stderr}")
        proc = json.loads(q.stdout)["processes"][0]
        want = None if f == "agent.zst" else (int(f[4]), 2, int(f[4]))
        have = (proc["rank"], proc["world_size"], proc["local_rank"]) if "rank" in proc else None
        if have != want:
            fail(f"{f}: rank facts {have}, expected {want}")
        if f != "agent.zst" and "ddp_train.py" not in proc["cmdline"]:
            fail(f"{f}: the trace of {proc['cmdline']}")
    print(f"ok: {got}, ranks 0 and 1 of 2 recorded, the agent without a rank")
    # the ranks' kineto exports: one directory, HTA's multi-rank input
    kdir = os.path.join(tmp, "kineto")
    os.mkdir(kdir)
    for r in (0, 1):
        j = os.path.join(kdir, f"rank{r}.json")
        q = subprocess.run([TBANALYZE, "export", "--format", "kineto", os.path.join(out, f"rank{r}.zst"), "-o", j],
                           capture_output=True, text=True)
        if q.returncode != 0:
            fail(f"export rank{r}: {q.stderr}")
        with open(j) as fh:
            info = json.load(fh)["distributedInfo"]
        if info != {"rank": r, "world_size": 2}:
            fail(f"rank{r}.json distributedInfo {info}")
    print("ok: kineto exports carry distributedInfo rank 0 and 1 of 2")
    py = hta_python()
    if not py:
        print("SKIP (HTA part): no Python with Holistic Trace Analysis (.ci/setup installs ~/.cache/tbprof/hta-venv)")
        return
    q = subprocess.run([py, "-c", HTA_SCRIPT, kdir], capture_output=True, text=True, timeout=600)
    if q.returncode != 0:
        fail(f"HTA failed to load {kdir}: {q.stderr[-2000:]}")
    ranks = json.loads(q.stdout.strip().splitlines()[-1])
    if ranks != [0, 1]:
        fail(f"HTA sees ranks {ranks}, expected [0, 1]")
    print(f"ok: HTA ({py}) loads the exported directory as ranks {ranks}")


if __name__ == "__main__":
    main()
