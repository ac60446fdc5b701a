#!/usr/bin/env python3
"""Test driver of the 'simgpu' suite (run by meson; LD_LIBRARY_PATH reaches simgpu).

  simgpu_check.py prog --expected FILE --counts op=N,... [--gpu-counts op=N,...] [--env K=V ...] -- CMD...
      runs CMD with SIMGPU_TRUTH set, compares its stdout with FILE, checks op counts in the
      truth log and the timeline invariants (see check_invariants).
  simgpu_check.py fork -- CMD...
      CMD forks; checks that parent and child lines are each written once.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simgpu_truth  # noqa: E402

DEVICE_OPS = ("kernel", "memcpy", "memset")


class Failure(Exception):
    pass


def parse_counts(spec):
    out = {}
    for item in filter(None, (spec or "").split(",")):
        k, v = item.split("=")
        out[k] = int(v)
    return out


def check_invariants(ops):
    """Properties any truth log must have, whatever the program did."""
    problems = []
    by_stream = {}
    for o in ops:
        if o["end"] < o["start"]:
            problems.append(f"seq {o['seq']}: end < start")
        if o["host_end"] < o["host_start"]:
            problems.append(f"seq {o['seq']}: host_end < host_start")
        if o["op"] in DEVICE_OPS and o["gpu"]:
            if o["start"] < o["host_start"]:
                problems.append(f"seq {o['seq']}: device start before the call that enqueued it")
            by_stream.setdefault((o["pid"], o["device"], o["stream"]), []).append(o)
        if o["result"] != 0 and o["gpu"]:
            problems.append(f"seq {o['seq']}: failed call with device work")
    # One stream is a queue: in enqueue order, each op starts after the previous one ended.
    # Enqueue order is seq order except between threads, where the call times tell.
    for key, lst in by_stream.items():
        # FIFO: one thread's ops on a stream start in the order they were enqueued.
        last = {}
        for o in sorted(lst, key=lambda o: o["seq"]):
            prev = last.get(o["tid"])
            if prev is not None and o["start"] < prev["start"]:
                problems.append(f"stream {key}: seq {o['seq']} starts before the earlier seq {prev['seq']}")
            last[o["tid"]] = o
        lst.sort(key=lambda o: (o["start"], o["seq"]))
        for a, b in zip(lst, lst[1:]):
            if b["start"] < a["end"]:
                problems.append(f"stream {key}: seq {b['seq']} starts at {b['start']} before seq {a['seq']} ends at {a['end']}")
    # Synchronization really waited: a successful sync returns after the work it covers ended.
    for i, o in enumerate(ops):
        if o["op"] != "sync" or o["result"] != 0 or o["sync_kind"] not in ("device", "stream"):
            continue
        for p in ops[:i]:
            if p["pid"] != o["pid"] or p["op"] not in DEVICE_OPS or not p["gpu"] or p["device"] != o["device"]:
                continue
            if p["tid"] != o["tid"] and p["host_end"] > o["host_start"]:
                continue  # another thread's op that was not yet enqueued when the sync began
            # (legacy-stream syncs also cover blocking streams, but the log does not say which those are)
            covered = o["sync_kind"] == "device" or p["stream"] == o["stream"]
            if covered and o["host_end"] < p["end"]:
                problems.append(f"sync seq {o['seq']} returned at {o['host_end']} before seq {p['seq']} ended at {p['end']}")
    # Synchronous copies from/to pageable memory return after the copy ended.
    for o in ops:
        if o["op"] == "memcpy" and o["gpu"] and o["hostmem"] == "pageable" and o["host_end"] < o["end"]:
            problems.append(f"seq {o['seq']}: {o['api']} with pageable memory returned before the copy ended")
    # Correlation ids: unique per call (graph nodes share their launch's).
    seen = {}
    for o in ops:
        key = (o["pid"], o["corr"])
        if key in seen and not (o["api"].startswith("cudaGraphLaunch") and seen[key].startswith("cudaGraphLaunch")):
            problems.append(f"seq {o['seq']}: correlation id {o['corr']} reused")
        seen[key] = o["api"]
    return problems


def run(cmd, truth, extra_env):
    env = dict(os.environ)
    env["SIMGPU_TRUTH"] = truth
    env.update(extra_env)
    # Sanitized builds: the sanitizer runtime goes first into the program under test (not into us).
    preload = env.pop("SIMGPU_TEST_PRELOAD", "")
    if preload:
        env["LD_PRELOAD"] = preload + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


def cmd_prog(args):
    with tempfile.TemporaryDirectory() as tmp:
        truth = os.path.join(tmp, "truth.log")
        extra = dict(kv.split("=", 1) for kv in args.env or [])
        r = run(args.cmd, truth, extra)
        if r.returncode != args.exit_code:
            raise Failure(f"exit status {r.returncode}, expected {args.exit_code}; stderr:\n{r.stderr}")
        if args.expected:
            with open(args.expected) as f:
                want = f.read()
            if r.stdout != want:
                raise Failure(f"stdout differs from {args.expected}:\n--- got\n{r.stdout}--- expected\n{want}")
        ops = simgpu_truth.read(truth)
        got = simgpu_truth.counts(ops)
        for op, n in parse_counts(args.counts).items():
            if got.get(op, 0) != n:
                raise Failure(f"truth log has {got.get(op, 0)} '{op}' lines, expected {n} (all: {got})")
        gpu = simgpu_truth.counts([o for o in ops if o["gpu"]])
        for op, n in parse_counts(args.gpu_counts).items():
            if gpu.get(op, 0) != n:
                raise Failure(f"truth log has {gpu.get(op, 0)} '{op}' lines with device work, expected {n} (all: {gpu})")
        for name, n in parse_counts(args.names).items():
            got_n = sum(1 for o in ops if o["op"] == "kernel" and o["name"] == name)
            if got_n != n:
                raise Failure(f"{got_n} launches of kernel {name}, expected {n}")
        for api, n in parse_counts(args.apis).items():
            got_n = sum(1 for o in ops if o["api"] == api)
            if got_n != n:
                raise Failure(f"{got_n} {api} calls, expected {n}")
        problems = check_invariants(ops)
        if problems:
            raise Failure("timeline invariants violated:\n  " + "\n  ".join(problems[:20]))
        print(f"ok: {len(ops)} ops, counts {got}")


def cmd_fork(args):
    with tempfile.TemporaryDirectory() as tmp:
        truth = os.path.join(tmp, "truth.log")
        r = run(args.cmd, truth, {})
        if r.returncode != 0:
            raise Failure(f"exit status {r.returncode}; stderr:\n{r.stderr}")
        ops = simgpu_truth.read(truth)
        pids = sorted({o["pid"] for o in ops})
        if len(pids) != 2:
            raise Failure(f"expected lines from 2 processes, got pids {pids}")
        for pid in pids:
            seqs = [o["seq"] for o in ops if o["pid"] == pid]
            if len(seqs) != len(set(seqs)):
                raise Failure(f"pid {pid}: duplicated sequence numbers (lines written twice)")
        parent = min(pids, key=lambda p: min(o["seq"] for o in ops if o["pid"] == p))
        child = [p for p in pids if p != parent][0]
        # The parent logged its pre-fork ops once; the child starts after them and logs only its own.
        parent_n = sum(1 for o in ops if o["pid"] == parent)
        child_ops = [o for o in ops if o["pid"] == child]
        with open(truth) as f:
            headers = sum(1 for line in f if line.startswith("# simgpu truth"))
        if headers != 1:
            raise Failure(f"{headers} header lines")
        print(f"ok: parent {parent_n} lines, child {len(child_ops)} lines")
        expected = [int(x) for x in (args.expect or "").split(",") if x]
        if expected and [parent_n, len(child_ops)] != expected:
            raise Failure(f"parent/child line counts {[parent_n, len(child_ops)]}, expected {expected}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("prog")
    p.add_argument("--expected")
    p.add_argument("--counts")
    p.add_argument("--gpu-counts")
    p.add_argument("--apis", help="api=count,...: truth lines per API name")
    p.add_argument("--names", help="kernel=count,...: launches per mangled kernel name")
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--env", action="append")
    p.add_argument("cmd", nargs="+")
    f = sub.add_parser("fork")
    f.add_argument("--expect")
    f.add_argument("cmd", nargs="+")
    args = ap.parse_args()
    if os.environ.get("SIMGPU_TEST_SANITIZER") == "thread" and os.path.basename(args.cmd[0]).startswith("python"):
        print("skip: the Python interpreter does not run under a preloaded ThreadSanitizer runtime")
        return 77
    try:
        {"prog": cmd_prog, "fork": cmd_fork}[args.what](args)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
