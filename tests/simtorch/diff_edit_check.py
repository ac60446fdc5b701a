#!/usr/bin/env python3
"""`tbanalyze diff` across an edit, on real runs (issue #29): PyTorch's CUDA build on simgpu (simtorch).

    diff_edit_check.py --build B --source S

tests/simtorch/scripts/edit_train.py runs under libtbprof, then its edited copy: the four lines marked EDIT:delete
(above loss.backward() in train_step) removed, which moves loss.backward() and every line below it, and the line
marked EDIT:change calling torch.sigmoid instead of torch.tanh.  Twice: edited in place (both train.py, each run
from its own directory, as a user edits and reruns) and under another name (train.py against train_v2.py).  The
diff must match every call site the edit only moved (none only in A or only in B but the changed line's), key
them at B's lines, and show the changed line as changed: its site gone in A and new in B.

Exit 0 pass, 1 fail, 77 skip (no PyTorch CUDA build, or simgpu not built).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77
failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def torch_has_cuda_build():
    try:
        p = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and p.stdout.strip() != ""


def line_of(lines, code):
    """The numbers of the lines whose code (comment aside) is `code`."""
    return [n for n, l in enumerate(lines, 1) if l.split("#")[0].strip() == code]


def traced(args, script, trace, cwd):
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    lib = os.path.join(args.build, "libtbprof", "libtbprof.so")
    env = dict(os.environ, LD_PRELOAD=lib, TBPROF_OUT=trace)
    p = subprocess.run([simtorch, sys.executable, script], env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=args.timeout)
    if p.returncode != 0 or not os.path.exists(trace):
        fail(f"{script}: exit {p.returncode} under libtbprof\n{p.stderr[-2000:]}")
        return False
    return True


def case(args, tmp, name_b):
    src = os.path.join(args.source, "tests", "simtorch", "scripts", "edit_train.py")
    with open(src) as f:
        orig = f.readlines()
    edited = [l.replace("torch.tanh(", "torch.sigmoid(") for l in orig if "# EDIT:delete" not in l]
    da, db = os.path.join(tmp, name_b + "-a"), os.path.join(tmp, name_b + "-b")
    os.makedirs(da)
    os.makedirs(db)
    with open(os.path.join(da, "train.py"), "w") as f:
        f.writelines(orig)
    with open(os.path.join(db, name_b), "w") as f:
        f.writelines(edited)
    ta, tb = os.path.join(tmp, name_b + "-a.zst"), os.path.join(tmp, name_b + "-b.zst")
    if not traced(args, "train.py", ta, da) or not traced(args, name_b, tb, db):
        return
    tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
    p = subprocess.run([tbanalyze, "diff", ta, tb, "--json"], capture_output=True, text=True, timeout=args.timeout)
    if p.returncode not in (0, 1):
        fail(f"{name_b}: tbanalyze diff exit {p.returncode}: {p.stderr[-500:]}")
        return
    rep = json.loads(p.stdout)
    what = f"edit in place (train.py)" if name_b == "train.py" else f"edit under another name (train.py -> {name_b})"
    bw_a, bw_b = line_of(orig, "loss.backward()")[0], line_of(edited, "loss.backward()")[0]
    ch_a, ch_b = line_of(orig, "h = torch.tanh(out.detach())")[0], line_of(edited, "h = torch.sigmoid(out.detach())")[0]
    sites = [c for c in rep["changes"] if c["type"] == "call_site"]
    one_sided = [(c["name"], c["a"], c["b"]) for c in sites if (c["a"] == 0) != (c["b"] == 0)]
    changed_a = re.compile(rf"^train\.py:{ch_a}(\(A\))?:train_step<")
    changed_b = re.compile(rf"^{re.escape(name_b)}:{ch_b}:train_step<")
    others = [s for s in one_sided if not changed_a.match(s[0]) and not changed_b.match(s[0])]
    if others:
        fail(f"{what}: call sites only in A or only in B beyond the changed line: {others[:6]}")
    if not any(changed_a.match(s[0]) and s[1] > 0 for s in one_sided) or \
       not any(changed_b.match(s[0]) and s[2] > 0 for s in one_sided):
        fail(f"{what}: the changed line (A's {ch_a}, B's {ch_b}) not shown gone and new: {one_sided[:6]}")
    bw = [c for c in sites if c["name"].startswith(f"{name_b}:{bw_b}:train_step<") or
          re.match(rf"^[^<]*<{re.escape(name_b)}:{bw_b}:train_step<", c["name"])]
    if not bw or not all(c["a"] > 0 and c["b"] > 0 for c in bw):
        fail(f"{what}: loss.backward() (A's line {bw_a}, B's {bw_b}) not matched: {[(c['name'], c['a'], c['b']) for c in bw]}")
    old = [c["name"] for c in sites if f":{bw_a}:train_step<" in c["name"]]
    if old:
        fail(f"{what}: sites still keyed at A's backward line {bw_a}: {old[:3]}")
    lines = rep.get("lines") or {}
    if not lines.get("moved"):
        fail(f"{what}: no line counted as moved ({lines})")
    print(f"{what}: {len(sites)} call sites, {len(one_sided)} only on one side (the changed line's); lines {lines}; "
          f"loss.backward() {bw_a} -> {bw_b} matched ({len(bw)} sites)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--timeout", type=int, default=240)
    args = ap.parse_args()
    args.build, args.source = os.path.abspath(args.build), os.path.abspath(args.source)
    if not os.path.exists(os.path.join(args.build, "tests", "simgpu", "simtorch")):
        print("SKIP: simtorch not built (no CUDA toolkit)")
        return SKIP
    if not torch_has_cuda_build():
        print("SKIP: no PyTorch with a CUDA build in this Python")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        case(args, tmp, "train.py")
        case(args, tmp, "train_v2.py")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
