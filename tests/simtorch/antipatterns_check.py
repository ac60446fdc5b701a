#!/usr/bin/env python3
"""The paper's pre-fix patterns, found in real PyTorch on simgpu at their lines.

    antipatterns_check.py --build B --source S

Runs models/paper_antipatterns (train, --small, 12 measured iterations) under simtorch and libtbprof, with and
without --fixed, and reads tbanalyze --json:
- pre-fix: kernel_burst (zero_grad's per-parameter zero_, memsets on CUDA) at the zero_() line, scalar_copy at
  the torch.tensor(scalar) line, ping_pong at the head's .to() lines, sync_hotspot at the .item() line;
- --fixed: none of these findings at those lines, and no scalar copy, ping-pong or sync hotspot in the model;
- kernels that autograd's device thread launches during loss.backward() carry that line in their call path.
Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
MODEL_FILE = os.path.join("models", "paper_antipatterns", "__init__.py")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def source_line(source, needle):
    """Line number of the first line of the model that contains `needle` (the test follows the file)."""
    with open(os.path.join(source, MODEL_FILE)) as f:
        for n, line in enumerate(f, 1):
            if needle in line:
                return n
    raise SystemExit(f"{MODEL_FILE}: no line with {needle!r}")


def placed(finding):
    frames = (finding.get("where") or {}).get("python") or []
    return (frames[0]["file"], frames[0]["line"]) if frames else (None, None)


def in_model(path):
    return bool(path) and path.endswith(MODEL_FILE)


def traced_run(args, tmp, fixed):
    trace = os.path.join(tmp, "fixed.zst" if fixed else "prefix.zst")
    cmd = [os.path.join(args.build, "tests", "simgpu", "simtorch"), sys.executable,
           os.path.join(args.source, "run.py"), "-m", "paper_antipatterns", "-d", "cuda", "-t", "train", "--small",
           "--niter", "12", "--nwarmup", "1"] + (["--fixed"] if fixed else [])
    env = dict(os.environ, LD_PRELOAD=os.path.join(args.build, "libtbprof", "libtbprof.so"), TBPROF_OUT=trace)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        fail(f"run.py {'--fixed ' if fixed else ''}exit {p.returncode}: {p.stderr[-2000:]}")
        return None, None
    tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
    rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
    if rep.returncode != 0:
        fail(f"tbanalyze --json exit {rep.returncode}: {rep.stderr[-500:]}")
        return None, None
    return trace, json.loads(rep.stdout)


def backward_line_on_autograd_thread(args, trace, backward_line):
    tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
    dump = subprocess.run([tbanalyze, "dump", trace, "--json"], capture_output=True, text=True)
    recs = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    strings = {r["id"]: r.get("blob") for r in recs if r["kind"] == "string"}
    threads = {r["sid"]: strings.get(r.get("name"), "") for r in recs if r["kind"] == "thread"}
    paths = {r["id"]: r for r in recs if r["kind"] == "callpath"}
    frames = {r["id"]: r for r in recs if r["kind"] == "pyframe"}

    def lines_of(cp):
        out = set()
        while cp:
            node = paths.get(cp)
            if not node:
                break
            f = frames.get(node["frame"], {})
            out.add((f.get("file_str", ""), f.get("line")))
            cp = node.get("parent", 0)
        return out

    autograd = {sid for sid, name in threads.items() if name and name.startswith("pt_autograd")}
    launches = [r for r in recs if r["kind"] == "launch" and r["sid"] in autograd]
    if not launches:
        fail("no launch from autograd's device thread (pt_autograd_*) in the trace")
        return
    missing = [r for r in launches
               if not any(in_model(f) and line == backward_line for f, line in lines_of(r.get("callpath", 0)))]
    if missing:
        fail(f"{len(missing)} of {len(launches)} launches on autograd's thread lack the loss.backward() line "
             f"{backward_line} in their call path")
    else:
        print(f"{len(launches)} launches on autograd's device thread, all at the loss.backward() line")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.build, "tests", "simgpu", "simtorch")):
        print("SKIP: simtorch not built")
        return SKIP
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.strip():
        print("SKIP: no PyTorch with a CUDA build")
        return SKIP
    want = {
        "kernel_burst": {source_line(args.source, "param.grad.zero_()")},
        "scalar_copy": {source_line(args.source, "torch.tensor(self.attention_head_size")},
        "ping_pong": set(),  # below
        "sync_hotspot": {source_line(args.source, "loss.item()")},
    }
    # _head_out's .to("cpu") is the second such line (the first is in _post_init).
    with open(os.path.join(args.source, MODEL_FILE)) as f:
        to_cpu = [n for n, line in enumerate(f, 1) if 'self.model.head.to("cpu")' in line]
    want["ping_pong"] = {source_line(args.source, "self.model.head.to(self.device)")} | set(to_cpu)
    backward_line = source_line(args.source, "loss.backward()")
    with tempfile.TemporaryDirectory() as tmp:
        trace, report = traced_run(args, tmp, fixed=False)
        if report:
            for kind, lines in want.items():
                sites = [placed(x) for x in report["findings"] if x["kind"] == kind]
                hits = [s for s in sites if in_model(s[0]) and s[1] in lines]
                if hits:
                    print(f"pre-fix: {kind} at {os.path.basename(os.path.dirname(hits[0][0]))} line {hits[0][1]}")
                else:
                    fail(f"pre-fix: no {kind} at lines {sorted(lines)} of {MODEL_FILE}; {kind} placed at {sites}")
            backward_line_on_autograd_thread(args, trace, backward_line)
        trace, report = traced_run(args, tmp, fixed=True)
        if report:
            pattern_lines = set().union(*want.values())
            for x in report["findings"]:
                f, line = placed(x)
                # Tiny kernels of a --small model's backward may still form a burst at loss.backward(): that
                # is no pre-fix pattern.  The patterns' own lines, and copies/syncs anywhere, must be gone.
                if x["kind"] in want and in_model(f) and (line in pattern_lines or x["kind"] != "kernel_burst"):
                    fail(f"--fixed: {x['kind']} still reported at line {line}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
