#!/usr/bin/env python3
"""The paper's pre-fix patterns, found in real PyTorch on simgpu at their lines.

    antipatterns_check.py --build B --source S

Runs models/paper_antipatterns (train, --small, 12 measured iterations) under simtorch and libtbprof, with and
without --fixed, and reads tbanalyze --json:
- pre-fix: kernel_burst (zero_grad's per-parameter zero_, memsets on CUDA) at the zero_() line, scalar_copy at
  the torch.tensor(scalar) line, ping_pong at the head's .to() lines, sync_hotspot at the .item() line;
- --fixed: none of these findings at those lines, and no scalar copy, ping-pong or sync hotspot in the model;
- kernels that autograd's device thread launches during loss.backward() carry that line in their call path;
- on every run: no finding placed in the runner (run.py, runner/), the runner's cost shown apart (its findings
  under "harness", the idle between iterations as harness_ns), and the report's time per step within 5 % of
  run.py's "GPU Time per batch";
- --small with batch 1024 (8 measured iterations), pre-fix vs --fixed (each pair run at the same time, so that
  both see the same machine load): `tbanalyze diff` judges by time per step, says improved and exits 0; the
  reverse order says regressed and exits 1 -- when run.py's own times for the two runs show the fix; when the
  machine's load hides it, the diff's verdict and exit status must be what run.py's times say; and where the
  steps themselves do not bear out run.py's change (the diff's test: not significant, or its estimate within
  the threshold), "unchanged" (no significant change) is what the diff says, with a NOTE.
Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import re
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


def in_runner(path):
    parts = os.path.normpath(path or "").split(os.sep)
    return "runner" in parts[:-1] or parts[-1] == "run.py"


def traced_runs(args, tmp, small=True):
    """Pre-fix and --fixed, run at the same time: on a shared machine both see the same load, so their times
    per step compare (run one after the other, a change of load between them moved the ratio by 20 %).
    Returns {fixed: (trace, report, run.py's GPU time per batch in ns)}."""
    # For the diff, --small with batch 1024: ~9 ms of simulated GPU work per step against ~5 ms of host work
    # on an idle machine, which the pre-fix syncs (one per attention call, .item()) serialize: the fix is
    # worth about a third of a step there; on a loaded machine each of those syncs also waits to be
    # scheduled again (-44 % at load 10 on 2 cores).  The full size was host-bound under load: its 12
    # blocks' launches dwarf what the fixes remove (+1 % at load 11, -12 % idle, so no verdict either way).
    size = ["--small", "--niter", "12"] if small else ["--small", "--bs", "1024", "--niter", "8"]
    runs = []
    for fixed in (False, True):
        name = ("fixed" if fixed else "prefix") + ("" if small else "-bs1024")
        trace = os.path.join(tmp, name + ".zst")
        cmd = [os.path.join(args.build, "tests", "simgpu", "simtorch"), sys.executable,
               os.path.join(args.source, "run.py"), "-m", "paper_antipatterns", "-d", "cuda", "-t", "train",
               "--nwarmup", "1"] + size + (["--fixed"] if fixed else [])
        env = dict(os.environ, LD_PRELOAD=os.path.join(args.build, "libtbprof", "libtbprof.so"), TBPROF_OUT=trace)
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        runs.append((fixed, name, trace, out, err, subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)))
    results = {}
    for fixed, name, trace, out, err, p in runs:
        try:
            rc = p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = "timeout"
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        if rc != 0:
            fail(f"run.py {'--fixed ' if fixed else ''}exit {rc}: {stderr[-2000:]}")
            results[fixed] = (None, None, None)
            continue
        tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
        rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
        if rep.returncode != 0:
            fail(f"tbanalyze --json exit {rep.returncode}: {rep.stderr[-500:]}")
            results[fixed] = (None, None, None)
            continue
        report = json.loads(rep.stdout)
        check_runner_apart(name, report)
        results[fixed] = (trace, report, check_time_per_step(name, report, stdout))
    return results


def check_runner_apart(name, report):
    """The runner is the harness: none of its lines is a finding about the model; its cost is shown apart."""
    for x in report["findings"]:
        f, line = placed(x)
        if in_runner(f):
            fail(f"{name}: {x['kind']} placed in the runner at {f}:{line}")
    harness = [placed(x) for x in report.get("harness", [])]
    if any(not in_runner(f) for f, _ in harness):
        fail(f"{name}: harness findings placed outside the runner: {harness}")
    if not harness and not report["idle_breakdown"].get("harness_ns"):
        fail(f"{name}: the runner's cost not shown apart (harness {harness}, "
             f"harness_ns {report['idle_breakdown'].get('harness_ns')})")


def check_time_per_step(name, report, stdout):
    m = re.search(r"GPU Time per batch:\s*([0-9.]+) milliseconds", stdout)
    steps = report.get("steps") or {}
    if not m or not steps.get("median_ns"):
        fail(f"{name}: no run.py GPU time per batch ({bool(m)}) or no time per step in the report ({steps})")
        return
    runner_ns, ours = float(m.group(1)) * 1e6, steps["median_ns"]
    if abs(ours - runner_ns) > 0.05 * runner_ns:
        fail(f"{name}: time per step {ours / 1e6:.3f} ms, run.py's GPU time per batch {runner_ns / 1e6:.3f} ms "
             f"(more than 5 % apart)")
    else:
        print(f"{name}: time per step {ours / 1e6:.3f} ms, run.py {runner_ns / 1e6:.3f} ms "
              f"({steps.get('source')}, {steps.get('count')} steps, {steps.get('warmup')} warm-up)")
    return runner_ns


def runner_verdicts(a_ns, b_ns, threshold=7.0):
    """The verdicts run.py's own figures allow for A -> B: past the threshold by more than half a point, the
    one; nearer, either side (the report's time per step is run.py's within a few hundredths of a %)."""
    change = (b_ns - a_ns) / a_ns * 100
    out = set()
    if change < -threshold + 0.5:
        out.add("improved")
    if change > threshold - 0.5:
        out.add("regressed")
    if abs(change) < threshold + 0.5:
        out.add("unchanged")
    return change, out


def check_diff(args, before, after):
    """The fix is judged by time per step, as run.py times it: improved (exit 0); the other way round,
    regressed (exit 1).  Timings on a shared machine move with its load (the fix is worth ~30 % of a step on
    an idle machine and under load 10, but one run at load 12 had --fixed 10 % slower): when run.py's own
    figures for these two runs do not show the fix, the diff must say what they say (its bug was to contradict
    them), and the test says the load hid the fix."""
    tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
    (a0, _, ra), (b0, _, rb) = before, after
    change, allowed = runner_verdicts(ra, rb)
    if allowed != {"improved"}:
        print(f"NOTE: run.py's own GPU time per batch went {ra / 1e6:.3f} -> {rb / 1e6:.3f} ms ({change:+.1f} %) "
              f"with --fixed: the machine's load hid the fix; checking that the diff agrees with run.py")
    for a, b, ran, rbn in ((a0, b0, ra, rb), (b0, a0, rb, ra)):
        _, want = runner_verdicts(ran, rbn)
        p = subprocess.run([tbanalyze, "diff", a, b, "--json"], capture_output=True, text=True)
        try:
            d = json.loads(p.stdout)
        except ValueError:
            fail(f"diff {os.path.basename(a)} {os.path.basename(b)}: exit {p.returncode}, no JSON: {p.stderr[-500:]}")
            continue
        tps = d.get("time_per_step") or {}
        verdict = tps.get("verdict")
        sig = d.get("significance") or {}
        if verdict == "unchanged" and "unchanged" not in want and sig.get("test") and (
                not sig.get("significant") or abs(sig.get("change_pct") or 0) <= 7.0):
            # The diff judges by every step of both runs (Mann-Whitney U, the Hodges-Lehmann change), run.py's
            # figure is one median a run: a change the steps do not bear out is no significant change.
            print(f"NOTE: diff {os.path.basename(a)} {os.path.basename(b)}: run.py's figures say {sorted(want)}, the "
                  f"steps say no significant change (p {sig.get('p_value')}, change {sig.get('change_pct')} %)")
            want = want | {"unchanged"}
        if d.get("judged_by") != "time_per_step" or verdict not in want or p.returncode != (verdict == "regressed"):
            fail(f"diff {os.path.basename(a)} {os.path.basename(b)}: judged_by {d.get('judged_by')}, verdict "
                 f"{verdict}, exit {p.returncode}; run.py's figures allow {sorted(want)} (exit 1 only for "
                 f"regressed); time per step {tps}")
        else:
            print(f"diff {os.path.basename(a)} -> {os.path.basename(b)}: {verdict} "
                  f"({tps.get('change_pct')} %), exit {p.returncode}")


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
    # The small pair's checks include run.py's own timing (within 5 %): on a
    # shared 2-core machine under load one attempt in many falls outside it
    # (seen once in ~10 CI runs, together with the .item() sync hotspot
    # missing from that run).  A second attempt decides; the first one's
    # failures are printed as a NOTE.
    global failures
    for attempt in (1, 2):
        kept, failures = failures, []
        with tempfile.TemporaryDirectory() as tmp:
            small_checks(args, tmp, want, backward_line)
        if not failures or attempt == 2:
            failures = kept + failures
            break
        print(f"NOTE: attempt 1 of the small runs failed ({len(failures)}: {failures}); running them again")
        failures = kept
    with tempfile.TemporaryDirectory() as tmp:
        big_batch = traced_runs(args, tmp, small=False)
        if big_batch[False][0] and big_batch[True][0]:
            check_diff(args, big_batch[False], big_batch[True])
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


def small_checks(args, tmp, want, backward_line):
    """The pre-fix patterns at their lines, none with --fixed (12 iterations, --small)."""
    small = traced_runs(args, tmp)
    trace, report, _ = small[False]
    if report:
        for kind, lines in want.items():
            sites = [placed(x) for x in report["findings"] if x["kind"] == kind]
            hits = [s for s in sites if in_model(s[0]) and s[1] in lines]
            if hits:
                print(f"pre-fix: {kind} at {os.path.basename(os.path.dirname(hits[0][0]))} line {hits[0][1]}")
            else:
                fail(f"pre-fix: no {kind} at lines {sorted(lines)} of {MODEL_FILE}; {kind} placed at {sites} "
                     f"(trace: {report['trace'].get('lost_events')} events lost, "
                     f"{report['window'].get('iterations')} iterations)")
        backward_line_on_autograd_thread(args, trace, backward_line)
    trace, report, _ = small[True]
    if report:
        pattern_lines = set().union(*want.values())
        for x in report["findings"]:
            f, line = placed(x)
            # Tiny kernels of a --small model's backward may still form a burst at loss.backward(): that
            # is no pre-fix pattern.  The patterns' own lines, and copies/syncs anywhere, must be gone.
            if x["kind"] in want and in_model(f) and (line in pattern_lines or x["kind"] != "kernel_burst"):
                fail(f"--fixed: {x['kind']} still reported at line {line}")


if __name__ == "__main__":
    sys.exit(main())
