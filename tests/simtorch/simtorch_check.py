#!/usr/bin/env python3
"""PyTorch's CUDA build on simgpu (simtorch), with and without libtbprof.

    simtorch_check.py script --build B --source S
        tests/simtorch/scripts/train_classifier.py (an example-style training script: no marks, DataLoader,
        Adam, .item() logging, its batch loop inline in train() called once per epoch, and 30 ms of one-time
        Python work on its first batch) under simtorch with and without libtbprof: same output apart from
        values, trace equal to the truth, and a report its author can act on: steps detected, one per batch
        (epochs x batches, not epochs), the first set apart as warm-up; the top findings placed at the script's
        own lines (not in torch), a sync hotspot at one of its syncs (.item(), pageable .to(device)); the
        first batch's one-time work no finding (with --no-markers, which turns steps off, it is one: the
        check can fail).

    simtorch_check.py backward --build B --source S
        tests/simtorch/scripts/slow_backward.py (a custom autograd.Function whose backward spends 20 ms in
        Python, on autograd's device thread, while the main thread waits in loss.backward()): the idle time
        during backward blamed on that backward's line, not on Tensor.backward or the loss.backward() line.

    simtorch_check.py zoo MODEL --build B [--timeout S]
        run.py -m MODEL -d cuda --small, 1 warm-up + 1 measured iteration, train and eval, under simtorch
        with and without libtbprof: both exit 0 and print the same lines apart from numbers (run.py's GPU
        lines included); the trace's kernels, copies and memsets equal simgpu's ground truth (count, start,
        end, stream, kind, GEMMs and FFTs included); the report's breakdown equals the truth's timeline over
        the report's window to the nanosecond.

    simtorch_check.py join --build B --source S
        tests/simtorch/scripts/train_join.py (an MLP trained for 4 steps: GEMMs through simgpu's cuBLAS and
        cuBLASLt, which launch as a statically linked runtime does) under simtorch with libtbprof, once with
        CUPTI's buffers in order and once with SIMGPU_CUPTI_SHUFFLE (handed over late, out of time order).  In
        each trace: the GPU records equal the truth, each is joined to the very launch that made it (its corr is
        the id simgpu saw pushed for that op) and carries a line of the script, the forward GEMMs the line that
        calls the model and the backward ones the loss.backward() line; the GPU records are in time order and
        tbanalyze reports nothing out of order.  The two reports agree on every figure that does not depend on
        the run's timing (counts per kind, device, stream and kernel name; steps; window iterations); the
        timed ones equal each run's own truth (check_trace).

    simtorch_check.py graphs SCRIPT --build B --source S
        CUDA graphs (issue #29): tests/simtorch/scripts/SCRIPT.py -- graph_replay (a training step captured whole
        with torch.cuda.graph, replayed per batch), graphed_callables (torch.cuda.make_graphed_callables), or
        compile_graphs (torch.compile(mode="reduce-overhead") on a tiny model) -- under simtorch with and without
        libtbprof: same output apart from values; the trace's GPU records equal the truth (replays included);
        the graph launches replayed (the truth's) are the trace's, and every record a replay made is joined to
        its own cudaGraphLaunch at the script's replay line (the GRAPH: comments); the report counts the graph
        launches, finds one step per iteration of the script's loop, keeps the capture out of its window (set-up)
        and advises capturing nothing in a CUDA graph.

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
    failures.append(msg)
    print("FAIL:", msg)


def torch_has_cuda_build():
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() != ""


def shape(text):
    """Output with every number replaced, so two runs compare by their lines, not their values."""
    return [" ".join(re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", line).split()) for line in text.splitlines()]


def read_truth(path):
    rows, cols = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#pid"):
                cols = line[1:].split("\t")
            elif line and not line.startswith("#"):
                rows.append(dict(zip(cols, line.split("\t"))))
    return rows


def union_ns(intervals, lo, hi):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def run(cmd, env, timeout, what):
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{what}: timed out after {timeout} s")
        return None
    if p.returncode != 0:
        fail(f"{what}: exit {p.returncode}\n{p.stderr[-3000:]}")
        return None
    return p


def check_trace(build, trace, truth_path, what):
    tbanalyze = os.path.join(build, "analyze", "tbanalyze")
    dump = subprocess.run([tbanalyze, "dump", trace, "--json"], capture_output=True, text=True)
    if dump.returncode != 0:
        fail(f"{what}: tbanalyze dump exit {dump.returncode}: {dump.stderr[-500:]}")
        return
    recs = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    truth = [t for t in read_truth(truth_path) if t["gpu"] == "1" and t["op"] in ("kernel", "memcpy", "memset")]
    kinds = {"gpu_kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    got = sorted((kinds[r["kind"]], r["ts"], r["end"], r["stream"]) for r in recs if r["kind"] in kinds)
    want = sorted((t["op"], int(t["start"]), int(t["end"]), int(t["stream"])) for t in truth)
    if got != want:
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        fail(f"{what}: {len(got)} GPU records vs {len(want)} in the truth; missing {missing} extra {extra}")
    libs = [t for t in truth if t["op"] == "kernel" and t.get("domain") == "driver"]
    if not libs and "pyhpc" not in what:  # the equation of state is elementwise work only
        fail(f"{what}: no kernel launched through the driver (cuBLAS/cuBLASLt/cuFFT) in the truth")
    rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
    if rep.returncode != 0:
        fail(f"{what}: tbanalyze --json exit {rep.returncode}: {rep.stderr[-500:]}")
        return
    report = json.loads(rep.stdout)
    lo, hi = report["window"]["begin_ns"], report["window"]["end_ns"]
    dev = report["devices"][0]
    spans = [(int(t["start"]), int(t["end"])) for t in truth]
    copies = [(int(t["start"]), int(t["end"])) for t in truth if t["op"] == "memcpy"]
    busy, moving = union_ns(spans, lo, hi), union_ns(copies, lo, hi)
    if (dev["gpu_busy_ns"], dev["data_movement_ns"]) != (busy, moving):
        fail(f"{what}: breakdown busy {dev['gpu_busy_ns']} data movement {dev['data_movement_ns']}, "
             f"truth {busy} {moving} over the window [{lo}, {hi}]")
    print(f"{what}: {len(got)} GPU records (= truth, {len(libs)} library kernels), busy {busy} ns of {hi - lo}")


GEMM_NAMES = ("gemm", "nvjet", "splitKreduce", "gemv")


def join_check(build, trace, truth_path, script_path, what):
    """Every GPU record joined to its own launch, at a line of the script; GEMMs at the forward/backward lines.
    Returns the JSON report, or None."""
    tbanalyze = os.path.join(build, "analyze", "tbanalyze")
    dump = subprocess.run([tbanalyze, "dump", trace, "--json"], capture_output=True, text=True)
    if dump.returncode != 0:
        fail(f"{what}: tbanalyze dump exit {dump.returncode}: {dump.stderr[-500:]}")
        return None
    recs = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    with open(script_path) as f:
        lines = f.readlines()
    marked = {tag: n for n, line in enumerate(lines, 1) for tag in ("forward", "backward") if f"JOIN:{tag}" in line}
    frames = {r["id"]: (os.path.realpath(r.get("file_str", "")), r["line"]) for r in recs if r["kind"] == "pyframe"}
    paths = {r["id"]: (r["frame"], r["parent"]) for r in recs if r["kind"] == "callpath"}

    def script_line(cp):
        """The innermost frame of the script on call path cp (None if the script is not on it)."""
        seen = 0
        while cp and seen < 1000:
            frame, parent = paths.get(cp, (0, 0))
            file, line = frames.get(frame, ("", 0))
            if file == script_path:
                return line
            cp, seen = parent, seen + 1
        return None

    api_kinds = {"launch", "memcpy", "memset", "api", "sync", "malloc", "free"}
    calls = {r["corr"]: r for r in recs if r["kind"] in api_kinds and r.get("corr")}
    truth = {}
    for t in read_truth(truth_path):
        if t["gpu"] == "1" and t["op"] in ("kernel", "memcpy", "memset"):
            truth[(t["op"], int(t["start"]), int(t["end"]), int(t["stream"]))] = t
    kinds = {"gpu_kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    unjoined, wrong, lineless, gemm_lines, library_memsets, last_ts, back = [], [], [], {}, {}, {}, 0
    for r in recs:
        if r["kind"] not in kinds:
            continue
        if r["ts"] < last_ts.get(r["device"], 0):
            back += 1
        last_ts[r["device"]] = max(last_ts.get(r["device"], 0), r["ts"])
        name = r.get("name_str", kinds[r["kind"]])
        call = calls.get(r["corr"])
        if not r["corr"] or call is None:
            unjoined.append(name)
            continue
        t = truth.get((kinds[r["kind"]], r["ts"], r["end"], r["stream"]))
        if t is None or t.get("ext_id", "-") == "-" or int(t["ext_id"]) != r["corr"]:
            wrong.append((name, r["corr"], t.get("ext_id") if t else None))
            continue
        line = script_line(call.get("callpath", 0))
        if line is None:
            lineless.append((name, call.get("api_name")))
            continue
        if any(g in name for g in GEMM_NAMES):
            gemm_lines[line] = gemm_lines.get(line, 0) + 1
        if r["kind"] == "gpu_memset" and call.get("api_name", "").startswith("cuMemset"):
            library_memsets[line] = library_memsets.get(line, 0) + 1
    n_gpu = sum(1 for r in recs if r["kind"] in kinds)
    if unjoined:
        fail(f"{what}: {len(unjoined)} of {n_gpu} GPU records joined to no API call, e.g. {unjoined[:3]}")
    if wrong:
        fail(f"{what}: {len(wrong)} GPU records joined to another launch than theirs (name, corr, truth id): "
             f"{wrong[:3]}")
    if lineless:
        fail(f"{what}: {len(lineless)} GPU records whose call has no line of the script: {lineless[:3]}")
    if back:
        fail(f"{what}: {back} GPU records come after later ones of their device in the trace")
    # Forward: 3 Linear layers, the first one split-K (a GEMM and its reduction), x 4 steps; backward: the weight
    # gradient of each layer and the input gradient of the two upper ones (the first layer's input needs none),
    # x 4 steps.
    fwd, bwd = gemm_lines.get(marked["forward"], 0), gemm_lines.get(marked["backward"], 0)
    if fwd != 16 or bwd != 20 or set(gemm_lines) - {marked["forward"], marked["backward"]}:
        fail(f"{what}: GEMMs by script line {gemm_lines}; want 16 at the forward line {marked['forward']}, "
             f"20 at the backward line {marked['backward']} and none elsewhere")
    # The split-K GEMM's memset, made by cuBLASLt's static runtime through the driver: one a step, at the forward
    # line (as the H100's 72 library memsets, issue #24).
    if library_memsets != {marked["forward"]: 4}:
        fail(f"{what}: library memsets by script line {library_memsets}; want 4 at the forward line "
             f"{marked['forward']}")
    rep = subprocess.run([tbanalyze, trace], capture_output=True, text=True)
    if rep.returncode != 0 or "out of time order" in rep.stdout + rep.stderr:
        fail(f"{what}: tbanalyze exit {rep.returncode}; says records are out of order:\n{rep.stdout[-1500:]}")
    rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
    if rep.returncode != 0:
        fail(f"{what}: tbanalyze --json exit {rep.returncode}")
        return None
    report = json.loads(rep.stdout)
    if report["trace"]["out_of_order"]:
        fail(f"{what}: report trace.out_of_order {report['trace']['out_of_order']}")
    print(f"{what}: {n_gpu - len(unjoined) - len(wrong)} of {n_gpu} GPU records joined to their own launch, "
          f"GEMMs {fwd} at the forward line, {bwd} at the backward line")
    return report


def untimed_figures(report):
    """The report's figures that do not depend on the run's timing."""
    return {
        "counts": {k: v for k, v in report["counts"].items() if k != "python_spans"},
        "devices": [(d["device"], d["kernels"], d["memcpy"], d["memset"],
                     sorted((s["stream"], s["kernels"], s["memcpy"], s["memset"]) for s in d["streams"]))
                    for d in report["devices"]],
        "kernels": sorted((k["name"], k["count"]) for k in report["kernels"]),
        "steps": (report["steps"]["count"], report["steps"]["warmup"]),
        "iterations": report["window"]["iterations"],
        "out_of_order": report["trace"]["out_of_order"],
    }


def join(args):
    """Every GPU record of train_join.py joined to its own launch (the truth log's pushed id), GEMMs at the forward
    and backward lines.  With main 2e54634's CUPTI enabling (API records asked for one callback id at a time,
    their kinds off) on this stand-in, 0 of the script's 111 GPU records were joined -- as ~0 on the H100
    (issue #24) -- and this test failed with "111 of 111 GPU records joined to no API call"."""
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    libtbprof = os.path.join(args.build, "libtbprof", "libtbprof.so")
    path = os.path.realpath(os.path.join(args.source, "tests", "simtorch", "scripts", "train_join.py"))
    cmd = [simtorch, sys.executable, path]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    plain = run(cmd, env, args.timeout, "join (plain)")
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        # shuffled: many deliveries (every 5 ms), a third of the buffers held back 1 to 3 of them
        for mode, extra in (("in order", {}), ("shuffled", {"SIMGPU_CUPTI_SHUFFLE": "11",
                                                             "SIMGPU_CUPTI_FLUSH_MS": "5"})):
            trace, truth = os.path.join(tmp, f"{len(reports)}.zst"), os.path.join(tmp, f"{len(reports)}.truth")
            traced = run(cmd, dict(env, LD_PRELOAD=libtbprof, TBPROF_OUT=trace, SIMGPU_TRUTH=truth, **extra),
                         args.timeout, f"join {mode} (libtbprof)")
            if not plain or not traced:
                return
            if shape(plain.stdout) != shape(traced.stdout):
                fail(f"join {mode}: stdout differs under libtbprof\n--- plain\n{plain.stdout}--- libtbprof\n"
                     f"{traced.stdout}")
            check_trace(args.build, trace, truth, f"join {mode}")
            reports[mode] = join_check(args.build, trace, truth, path, f"join {mode}")
    if all(reports.values()):
        a, b = untimed_figures(reports["in order"]), untimed_figures(reports["shuffled"])
        if a != b:
            fail(f"join: the shuffled run's report differs from the in-order one's:\n{a}\n{b}")


# Per script: the lines (GRAPH: tags) its replays' records must be joined to, and the report's unit of a step.
GRAPH_SCRIPTS = {
    "graph_replay": {"replay_lines": ("replay",), "steps": 8, "unit_kind": "graph_replay"},
    "graphed_callables": {"replay_lines": ("forward", "backward"), "steps": 8, "unit_kind": None},
    "compile_graphs": {"replay_lines": ("compiled_call",), "steps": 6, "unit_kind": None},
}
# Advice to put the step in a CUDA graph: moot where the steps already replay one.
GRAPH_ADVICE = ("with CUDA graphs", "or CUDA graphs")


def graphs(args):
    """torch.cuda.graph / make_graphed_callables / reduce-overhead on simtorch, with and without libtbprof.  Before
    issue #29 capture failed on simgpu (cudaErrorNotSupported from cudaGraphGetNodes); with capture working and
    main's tbanalyze, the replayed kernels had no line (47.1 % of the GPU records joined on graph_replay's
    predecessor), steps came from the warm-up loop and the capture's backward was the top finding."""
    name = args.model
    want = GRAPH_SCRIPTS[name]
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    libtbprof = os.path.join(args.build, "libtbprof", "libtbprof.so")
    tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
    path = os.path.realpath(os.path.join(args.source, "tests", "simtorch", "scripts", name + ".py"))
    with open(path) as f:
        lines = f.readlines()
    tags = {tag: n for n, line in enumerate(lines, 1) for tag in re.findall(r"GRAPH:(\w+)", line)}
    replay_lines = {tags[t] for t in want["replay_lines"]}
    cmd = [simtorch, sys.executable, path]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    plain = run(cmd, env, args.timeout, f"graphs {name} (plain)")
    with tempfile.TemporaryDirectory() as tmp:
        trace, truth_path = os.path.join(tmp, "g.zst"), os.path.join(tmp, "g.truth")
        traced = run(cmd, dict(env, LD_PRELOAD=libtbprof, TBPROF_OUT=trace, SIMGPU_TRUTH=truth_path), args.timeout,
                     f"graphs {name} (libtbprof)")
        if not plain or not traced:
            return
        if shape(plain.stdout) != shape(traced.stdout):
            fail(f"graphs {name}: stdout differs under libtbprof\n--- plain\n{plain.stdout}--- libtbprof\n"
                 f"{traced.stdout}")
        check_trace(args.build, trace, truth_path, f"graphs {name}")
        truth = read_truth(truth_path)
        replayed = [t for t in truth if t["api"].startswith("cudaGraphLaunch") and t["gpu"] == "1"]
        launches = {t["corr"] for t in replayed}
        captured = [t for t in truth if t["captured"] == "1"]
        if not replayed or not captured:
            fail(f"graphs {name}: the truth has {len(captured)} captured ops and {len(replayed)} replayed: "
                 f"the script captured or replayed no graph")
            return
        dump = subprocess.run([tbanalyze, "dump", trace, "--json"], capture_output=True, text=True)
        recs = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
        frames = {r["id"]: (os.path.realpath(r.get("file_str", "")), r["line"]) for r in recs if r["kind"] == "pyframe"}
        paths = {r["id"]: (r["frame"], r["parent"]) for r in recs if r["kind"] == "callpath"}

        def script_line(cp):
            seen = 0
            while cp and seen < 1000:
                frame, parent = paths.get(cp, (0, 0))
                file, line = frames.get(frame, ("", 0))
                if file == path:
                    return line
                cp, seen = parent, seen + 1
            return None

        calls = {r["corr"]: r for r in recs if r.get("corr") and r["kind"] in
                 ("launch", "memcpy", "memset", "api", "sync", "malloc", "free")}
        graph_calls = [r for r in recs if r["kind"] == "api" and r.get("api_name", "").startswith("cudaGraphLaunch")]
        if len(graph_calls) != len(launches):
            fail(f"graphs {name}: {len(graph_calls)} cudaGraphLaunch records in the trace, {len(launches)} in the truth")
        by_time = {}
        for t in truth:
            if t["gpu"] == "1" and t["op"] in ("kernel", "memcpy", "memset"):
                by_time[(t["op"], int(t["start"]), int(t["end"]), int(t["stream"]))] = t
        kinds = {"gpu_kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
        joined, wrong, lines_seen = 0, [], {}
        for r in recs:
            if r["kind"] not in kinds:
                continue
            t = by_time.get((kinds[r["kind"]], r["ts"], r["end"], r["stream"]))
            if t is None or not t["api"].startswith("cudaGraphLaunch"):
                continue
            call = calls.get(r["corr"])
            line = script_line(call.get("callpath", 0)) if call else None
            lines_seen[line] = lines_seen.get(line, 0) + 1
            if (not call or not call.get("api_name", "").startswith("cudaGraphLaunch") or t["ext_id"] == "-" or
                    int(t["ext_id"]) != r["corr"] or line not in replay_lines):
                wrong.append((r.get("name_str", r["kind"])[:40], call.get("api_name") if call else None, line))
            else:
                joined += 1
        if wrong or not joined:
            fail(f"graphs {name}: {len(wrong)} of {len(wrong) + joined} replayed GPU records not joined to their own "
                 f"graph launch at a replay line {sorted(replay_lines)}: e.g. {wrong[:3]} (lines {lines_seen})")
        rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
        if rep.returncode != 0:
            fail(f"graphs {name}: tbanalyze --json exit {rep.returncode}: {rep.stderr[-500:]}")
            return
        report = json.loads(rep.stdout)
        steps = report["steps"]
        if report["counts"].get("graph_launches") != len(launches):
            fail(f"graphs {name}: the report counts {report['counts'].get('graph_launches')} graph launches, the "
                 f"truth {len(launches)}")
        if steps.get("count") != want["steps"] or steps.get("source") != "detected":
            fail(f"graphs {name}: steps {steps}; want {want['steps']} detected (one per iteration of the loop)")
        if want["unit_kind"] and steps.get("unit_kind") != want["unit_kind"]:
            fail(f"graphs {name}: each step holds {steps.get('unit_kind')}, want {want['unit_kind']}")
        steady = steps.get("count", 0) - steps.get("warmup", 0)
        if report["counts"].get("graph_launch_steps") != steady:
            fail(f"graphs {name}: {report['counts'].get('graph_launch_steps')} of {steady} steady steps replay a graph")
        capture_end = max(int(t["host_end"]) for t in captured)
        if report["window"]["begin_ns"] < capture_end:
            fail(f"graphs {name}: the window begins at {report['window']['begin_ns']}, before the capture ended "
                 f"({capture_end}): the capture is set-up, not the steady state")
        moot = [f["suggestion"] for f in report["findings"] if any(a in f.get("suggestion", "") for a in GRAPH_ADVICE)]
        if moot:
            fail(f"graphs {name}: advice to use CUDA graphs where every step replays one: {moot[0]}")
        print(f"graphs {name}: {joined} replayed GPU records joined to their launch at lines "
              f"{sorted(l for l in lines_seen if l)}, {len(launches)} graph launches, steps {steps.get('count')} "
              f"({steps.get('warmup')} warm-up), {len(report['findings'])} findings")


def zoo(args):
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    libtbprof = os.path.join(args.build, "libtbprof", "libtbprof.so")
    run_py = os.path.join(args.source, "run.py")
    with tempfile.TemporaryDirectory() as tmp:
        for test in ("train", "eval"):
            cmd = [simtorch, sys.executable, run_py, "-m", args.model, "-d", "cuda", "-t", test, "--small",
                   "--niter", "1", "--nwarmup", "1"]
            env = dict(os.environ)
            env.pop("LD_PRELOAD", None)
            plain = run(cmd, env, args.timeout, f"{args.model} {test} (plain)")
            trace, truth = os.path.join(tmp, f"{test}.zst"), os.path.join(tmp, f"{test}.truth")
            env_t = dict(env, LD_PRELOAD=libtbprof, TBPROF_OUT=trace, SIMGPU_TRUTH=truth)
            traced = run(cmd, env_t, args.timeout, f"{args.model} {test} (libtbprof)")
            if not plain or not traced:
                continue
            for name, p in (("plain", plain), ("libtbprof", traced)):
                if "GPU Time per batch" not in p.stdout:
                    fail(f"{args.model} {test} ({name}): no 'GPU Time per batch' line:\n{p.stdout}")
            if shape(plain.stdout) != shape(traced.stdout):
                fail(f"{args.model} {test}: stdout differs under libtbprof\n--- plain\n{plain.stdout}"
                     f"--- libtbprof\n{traced.stdout}")
            check_trace(args.build, trace, truth, f"{args.model} {test}")


def script(args):
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    path = os.path.realpath(os.path.join(args.source, "tests", "simtorch", "scripts", "train_classifier.py"))
    epochs, train_size, batch_size = 2, 256, 32
    cmd = [simtorch, sys.executable, path, "--log-interval", "2", "--epochs", str(epochs), "--train-size",
           str(train_size), "--batch-size", str(batch_size), "--lazy-setup-ms", "30"]
    with open(path) as f:
        text = f.readlines()
    lazy_lines = {n for n, line in enumerate(text, 1) if "build_lookup_table(" in line}
    # Where the script waits for the GPU: the logging .item(), and the pageable host-to-device copies
    # (PyTorch synchronizes the stream after each).
    sync_lines = {n for n, line in enumerate(text, 1) if "loss.item()" in line or "data.to(device)" in line}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        plain = run(cmd, env, args.timeout, "script (plain)")
        trace, truth = os.path.join(tmp, "t.zst"), os.path.join(tmp, "t.truth")
        libtbprof = os.path.join(args.build, "libtbprof", "libtbprof.so")
        traced = run(cmd, dict(env, LD_PRELOAD=libtbprof, TBPROF_OUT=trace, SIMGPU_TRUTH=truth), args.timeout,
                     "script (libtbprof)")
        if not plain or not traced:
            return
        if shape(plain.stdout) != shape(traced.stdout):
            fail(f"script: stdout differs under libtbprof\n--- plain\n{plain.stdout}--- libtbprof\n{traced.stdout}")
        check_trace(args.build, trace, truth, "script")
        tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
        rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
        report = json.loads(rep.stdout) if rep.returncode == 0 else {}
        findings = report.get("findings", [])
        steps = report.get("steps") or {}
        batches = epochs * -(-train_size // batch_size)
        got = (steps.get("source"), steps.get("count"), steps.get("warmup"))
        if got != ("detected", batches, 1):
            fail(f"script: steps (source, count, warm-up) {got}, want ('detected', {batches}, 1): one per batch")
        else:
            print(f"script: {batches} steps detected (one per batch), 1 warm-up, "
                  f"median {steps.get('median_ns')} ns per step")

        def at_lazy(x):
            return any(os.path.realpath(f["file"]) == path and (f["line"] in lazy_lines or
                                                                f["function"] == "build_lookup_table")
                       for f in ((x.get("where") or {}).get("python") or [])[:1])
        lazy = [x["kind"] for x in findings if at_lazy(x)]
        if lazy:
            fail(f"script: the first batch's one-time work reported as steady-state findings: {lazy}")
        whole = subprocess.run([tbanalyze, trace, "--json", "--no-markers"], capture_output=True, text=True)
        whole_findings = json.loads(whole.stdout)["findings"] if whole.returncode == 0 else []
        if not any(x["kind"] == "idle_gap" and at_lazy(x) for x in whole_findings):
            fail("script: with --no-markers (no steps) no idle_gap at the first batch's one-time work: "
                 "the check above cannot fail")
        placed = []
        for x in findings[:3]:
            frames = (x.get("where") or {}).get("python") or []
            placed.append((x["kind"], os.path.realpath(frames[0]["file"]), frames[0]["line"]) if frames
                          else (x["kind"], None, None))
        outside = [p for p in placed if p[1] != path]
        if outside:
            fail(f"script: top findings placed outside the script: {outside}")
        item = [x for x in findings if x["kind"] == "sync_hotspot" and
                any(os.path.realpath(f["file"]) == path and f["line"] in sync_lines
                    for f in (x.get("where") or {}).get("python", []))]
        if not item:
            fail(f"script: no sync_hotspot at the script's syncs (lines {sorted(sync_lines)}); top findings {placed}")
        print(f"script: top findings {placed}")


def backward(args):
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    path = os.path.realpath(os.path.join(args.source, "tests", "simtorch", "scripts", "slow_backward.py"))
    with open(path) as f:
        text = f.readlines()
    # The lines of PythonScaledGrad.backward: from its def to the next def/class at its indentation or less.
    start = next(n for n, line in enumerate(text, 1) if "def backward(ctx, grad)" in line)
    stop = next((n for n, line in enumerate(text, 1) if n > start and line.strip()
                 and len(line) - len(line.lstrip()) <= len(text[start - 1]) - len(text[start - 1].lstrip())),
                len(text) + 1)
    while start > 1 and text[start - 2].strip().startswith("@"):  # a span's line is the code's first: the decorator's
        start -= 1
    backward_lines = set(range(start, stop))
    call_line = next(n for n, line in enumerate(text, 1) if line.strip() == "loss.backward()")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "b.zst")
        libtbprof = os.path.join(args.build, "libtbprof", "libtbprof.so")
        env = dict(os.environ, LD_PRELOAD=libtbprof, TBPROF_OUT=trace)
        if not run([simtorch, sys.executable, path, "--steps", "5", "--backward-ms", "20"], env, args.timeout,
                   "backward (libtbprof)"):
            return
        rep = subprocess.run([os.path.join(args.build, "analyze", "tbanalyze"), trace, "--json"],
                             capture_output=True, text=True)
        if rep.returncode != 0:
            fail(f"backward: tbanalyze --json exit {rep.returncode}: {rep.stderr[-500:]}")
            return
        report = json.loads(rep.stdout)
        gaps = [x for x in report["findings"] if x["kind"] == "idle_gap"]
        if not gaps:
            fail("backward: no idle_gap finding")
            return
        top = max(gaps, key=lambda x: x["total_ns"])
        frames = (top.get("where") or {}).get("python") or []
        leaf = frames[0] if frames else {}
        placed = (os.path.realpath(leaf.get("file", "")), leaf.get("line"), leaf.get("function"))
        if placed[0] != path or placed[1] not in backward_lines or "backward" not in (placed[2] or ""):
            fail(f"backward: the largest idle_gap ({top['total_ns']} ns, cause {top.get('cause')}) placed at "
                 f"{placed}, not in PythonScaledGrad.backward (lines {start}-{stop - 1} of {path})")
        elif top.get("cause") != "python":
            fail(f"backward: the largest idle_gap at PythonScaledGrad.backward has cause {top.get('cause')}")
        else:
            print(f"backward: {top['total_ns']} ns idle blamed on {placed[2]} line {placed[1]}")
        context = ((top.get("context") or {}).get("python") or [{}])[0]
        if (os.path.realpath(context.get("file", "")), context.get("line")) != (path, call_line):
            fail(f"backward: the gap's context is {context}, not the loss.backward() line {call_line}")
        # The main thread only waits inside torch's backward() (Tensor.backward, autograd.backward, the engine's
        # entry): no Python idle time on those calls, whose time is the engine's (host_other at the
        # loss.backward() line).  Python torch really runs there (_make_grads) may be named.
        waits = {"Tensor.backward", "backward", "_engine_run_backward"}

        def leaf(x):
            frames = (x.get("library") or []) + ((x.get("where") or {}).get("python") or [])
            return frames[0] if frames else {}
        waiting = [x for x in gaps if x.get("cause") == "python" and leaf(x).get("function") in waits and
                   "/torch/" in leaf(x).get("file", "")]
        if waiting:
            fail(f"backward: {sum(x['total_ns'] for x in waiting)} ns of Python idle time placed on the waiting "
                 f"thread (Tensor.backward / loss.backward() line {call_line})")


def gaps(args):
    """What the GPU waited for, as a user reads it (tests/simtorch/scripts/gap_causes.py): time inside
    cudaMalloc/cudaFree is the allocator's (not launch overhead), and allocating every step is churn in an
    8-step run; augment()'s CPU work is its Python, not launch overhead at its launch line; a finding names
    autograd's engine only for kernels another thread launched, and another thread's backward() only where one
    was running."""
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    path = os.path.realpath(os.path.join(args.source, "tests", "simtorch", "scripts", "gap_causes.py"))
    tbanalyze = os.path.join(args.build, "analyze", "tbanalyze")
    with open(path) as f:
        text = f.readlines()
    aug_def = next(n for n, line in enumerate(text, 1) if line.startswith("def augment"))
    aug_lines = set(range(aug_def, next(n for n, line in enumerate(text, 1) if n > aug_def and line.startswith("def "))))
    main_lines = {name: next(n for n, line in enumerate(text, 1) if line.strip().startswith(code))
                  for name, code in (("zero_grad", "opt.zero_grad()"), ("step", "opt.step()"),
                                     ("backward", "loss.backward()"))}
    libtbprof = os.path.join(args.build, "libtbprof", "libtbprof.so")
    with tempfile.TemporaryDirectory() as tmp:
        reports = {}
        for name, extra in (("empty_cache", []), ("kept", ["--no-empty-cache"])):
            trace = os.path.join(tmp, name + ".zst")
            env = dict(os.environ, LD_PRELOAD=libtbprof, TBPROF_OUT=trace)
            if not run([simtorch, sys.executable, path, "--steps", "8"] + extra, env, args.timeout, f"gaps {name}"):
                return
            rep = subprocess.run([tbanalyze, trace, "--json"], capture_output=True, text=True)
            if rep.returncode != 0:
                fail(f"gaps {name}: tbanalyze --json exit {rep.returncode}: {rep.stderr[-500:]}")
                return
            reports[name] = (trace, json.loads(rep.stdout))

        def where(x):
            fr = ((x.get("where") or {}).get("python") or [{}])[0]
            return (os.path.realpath(fr["file"]) if fr.get("file") else None, fr.get("line"), fr.get("function"))

        trace, rep = reports["empty_cache"]
        gaps = [x for x in rep["findings"] if x["kind"] == "idle_gap"]
        ib = rep["idle_breakdown"]
        # 1. The allocator: its time is its own cause, the longest gap's included, with its advice; one
        # allocation a step is churn though the run makes fewer than --churn-min (50).
        longest = max(gaps, key=lambda x: x["max_ns"]) if gaps else {}
        if ib.get("alloc_ns", 0) <= ib["launch_bound_ns"] or longest.get("cause") != "alloc" \
                or "empty_cache" not in longest.get("suggestion", ""):
            fail(f"gaps: time inside cudaMalloc/cudaFree not the allocator's (idle by cause {ib}; the longest gap's "
                 f"finding {longest.get('cause')} at {where(longest) if longest else None})")
        churn = [x for x in rep["findings"] if x["kind"] == "alloc_churn"]
        if not churn or any(x["count"] >= 50 for x in churn):
            fail(f"gaps: no alloc_churn for an allocation in every step of 8 ({[(x['count'], where(x)) for x in churn]})")
        kept = reports["kept"][1]
        if [x for x in kept["findings"] if x["kind"] == "alloc_churn"]:
            fail("gaps: alloc_churn without empty_cache() (the allocations are the first step's, kept)")
        # 2. augment(): its CPU work before its launch is its Python.
        aug = [x for x in gaps if where(x)[0] == path and where(x)[1] in aug_lines]
        if not [x for x in aug if x["cause"] == "python" and where(x)[2] == "augment"] or \
                [x for x in aug if x["cause"] == "launch_bound"]:
            fail(f"gaps: augment()'s CPU work is not its Python ({[(x['cause'], where(x)) for x in aug]})")
        # 3. Threads: a finding says autograd's engine launched a kernel only if a thread other than the main
        # one launched it; another thread's backward() is no context of zero_grad() or the optimizer's step.
        # The kernels another thread launched, by the GPU records joined to its launches (the GPU record's name
        # is the one findings use; a launch record of a library's CUkernel may name it otherwise).
        dump = [json.loads(line) for line in
                subprocess.run([tbanalyze, "dump", trace, "--json"], capture_output=True, text=True).stdout.splitlines()
                if line.strip()]
        pid = next((r["pid"] for r in dump if r["kind"] == "process"), None)
        by_other = {r["corr"] for r in dump if r["kind"] in ("launch", "api") and r.get("corr") and r.get("sid") != pid}
        other = {r.get("name_str", "") for r in dump if r["kind"] == "gpu_kernel" and r.get("corr") in by_other}
        wrong = [(where(x), x.get("kernel")) for x in gaps if x.get("autograd_engine") and x.get("kernel") not in other]
        if pid is None or wrong:
            fail(f"gaps: the autograd engine named for kernels only the main thread launched: {wrong}")
        ctx = [(x["cause"], where(x)) for x in gaps if x.get("context") and where(x)[0] == path
               and where(x)[1] in (main_lines["zero_grad"], main_lines["step"])]
        if ctx:
            fail(f"gaps: another thread's backward() named around zero_grad()/step() gaps: {ctx}")
        print(f"gaps: idle by cause {dict((k, v) for k, v in ib.items() if k.endswith('_ns') and v)}; "
              f"churn {[(x['count'], where(x)[1]) for x in churn]}; augment {[(x['cause'], x['total_ns']) for x in aug]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["zoo", "script", "join", "backward", "gaps", "graphs"])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--timeout", type=int, default=240)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.build, "tests", "simgpu", "simtorch")):
        print("SKIP: simtorch not built (no CUDA toolkit)")
        return SKIP
    if not torch_has_cuda_build():
        print("SKIP: no PyTorch with a CUDA build in this Python")
        return SKIP
    if args.mode == "zoo":
        zoo(args)
    elif args.mode == "join":
        join(args)
    elif args.mode == "graphs":
        graphs(args)
    elif args.mode == "backward":
        backward(args)
    elif args.mode == "gaps":
        gaps(args)
    else:
        script(args)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
