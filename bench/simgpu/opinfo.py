#!/usr/bin/env python3
"""PyTorch's OpInfo samples on simtorch and on the CPU: how much of PyTorch runs on simgpu.

    python3 bench/simgpu/opinfo.py --build BUILD [--samples 2] [--ops REGEX] [--json OUT]

Runs every op of torch.testing._internal.common_methods_invocations.op_db (float32; the first --samples
samples; forward, and backward where the op supports autograd in float32) twice, in two worker processes:
on the CPU (plain python) and on CUDA under BUILD/tests/simgpu/simtorch.  Prints how many ops run, fail on
the CPU too, fail in a CUDA library (the stand-ins' gap: a library status in the error, or a stub the op
reached, which SIMGPU_WARN_UNSUPPORTED=1 makes the stand-ins name), have no CUDA kernel in PyTorch at
all, fail on simtorch only for another reason (kernels compute no values: data-dependent shapes, values
read back; each named with its error), or crash or hang the worker.  Needs expecttest (pip) for op_db.  Not a test: it takes minutes.
"""
import argparse
import json
import os
import re
import select
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
# A CUDA library's failure as PyTorch reports it (cuBLAS, cuSOLVER, cuFFT, cuRAND, cuSPARSE statuses, MAGMA).
LIBRARY_ERROR = re.compile(r"CUBLAS_STATUS|CUSOLVER_STATUS|cusolver|CUFFT_|cuFFT error|CURAND_STATUS|"
                           r"CUSPARSE_STATUS|cusparse|MAGMA|magma", re.I)
# PyTorch itself has no CUDA kernel for the op (a real GPU fails the same way).
NOT_ON_CUDA = re.compile(r"NotImplementedError: Could not run '[^']+' with arguments from the '\w*CUDA' backend")
STUB_LINE = re.compile(r"simgpu: (\w+) is not simulated")


def op_key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def first_line(e):
    s = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
    return s[:300]


def worker(device, start, nsamples, ops_re):
    import itertools
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._pytree import tree_leaves

    # The stand-ins' "not simulated" lines go to fd 2: collect them per op from a file.
    err_path = "/tmp/opinfo_stderr.%d" % os.getpid()
    err_fd = os.open(err_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(err_fd, 2)
    err_pos = 0
    out = sys.stdout
    torch.manual_seed(0)
    for i, op in enumerate(op_db):
        if i < start or (ops_re and not re.search(ops_re, op_key(op))):
            continue
        rec = {"i": i, "op": op_key(op)}
        out.write(json.dumps({"i": i, "start": 1}) + "\n")
        out.flush()
        stage = "dtypes"
        try:
            if torch.float32 not in op.supported_dtypes(device):
                rec["status"] = "no_float32"
                raise StopIteration
            grad = op.supports_autograd and torch.float32 in op.supported_backward_dtypes(device)
            stage = "samples"
            samples = list(itertools.islice(op.sample_inputs(device, torch.float32, requires_grad=grad), nsamples))
            for s in samples:
                stage = "forward"
                result = op(s.input, *s.args, **s.kwargs)
                if device == "cuda":
                    torch.cuda.synchronize()
                if not grad:
                    continue
                stage = "backward"
                outs = [t for t in tree_leaves(s.output_process_fn_grad(result))
                        if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
                ins = [t for t in tree_leaves([s.input, s.args, s.kwargs])
                       if isinstance(t, torch.Tensor) and t.requires_grad]
                if outs and ins:
                    torch.autograd.grad(sum(o.sum() for o in outs), ins, allow_unused=True)
                    if device == "cuda":
                        torch.cuda.synchronize()
            rec["status"] = "ok"
            rec["backward"] = bool(grad)
        except StopIteration:
            pass
        except Exception as e:  # an op's failure is the measurement
            rec["status"] = "error"
            rec["stage"] = stage
            rec["error"] = first_line(e)
        os.lseek(err_fd, err_pos, os.SEEK_SET)
        chunk = b""
        while True:
            b = os.read(err_fd, 1 << 16)
            if not b:
                break
            chunk += b
        err_pos += len(chunk)
        stubs = sorted(set(STUB_LINE.findall(chunk.decode("utf-8", "replace"))))
        if stubs:
            rec["stubs"] = stubs
        out.write(json.dumps(rec) + "\n")
        out.flush()
    os.unlink(err_path)


def run_workers(device, cmd_prefix, args, silence_s):
    """Runs the worker from op 0; a worker that dies or falls silent is restarted after the op it was on."""
    results, start = {}, 0
    while True:
        env = dict(os.environ)
        env["SIMGPU_WARN_UNSUPPORTED"] = "1"
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        cmd = cmd_prefix + [sys.executable, HERE, "--worker", device, "--start", str(start),
                            "--samples", str(args.samples)] + (["--ops", args.ops] if args.ops else [])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        current, last = None, time.monotonic()
        while True:
            r, _, _ = select.select([p.stdout], [], [], 5)
            if r:
                line = p.stdout.readline()
                if not line:
                    break
                last = time.monotonic()
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("start"):
                    current = rec["i"]
                else:
                    results[rec["i"]] = rec
                    current = None
            elif current is not None and time.monotonic() - last > silence_s:
                p.kill()
                results[current] = {"i": current, "status": "hang", "error": "no answer in %d s" % silence_s}
                break
        rc = p.wait()
        if current is None:
            return results
        if current not in results:
            results[current] = {"i": current, "status": "crash", "error": "worker exit status %d" % rc}
        start = current + 1


def classify(cpu, cuda):
    """One verdict per op run on simtorch."""
    if cuda.get("status") == "ok":
        return "run"
    if cuda.get("status") == "no_float32":
        return "no_float32"
    if cpu.get("status") not in ("ok", None):
        return "cpu_fails_too"
    if cuda.get("stubs") or LIBRARY_ERROR.search(cuda.get("error", "")):
        return "library"
    if cuda.get("status") in ("hang", "crash"):
        return cuda["status"]
    if NOT_ON_CUDA.search(cuda.get("error", "")):
        return "not_on_cuda"
    return "no_values"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", choices=["cpu", "cuda"])
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--ops", help="only ops whose name (name.variant) matches this regex")
    ap.add_argument("--build", default="build")
    ap.add_argument("--json", help="write every op's two results and verdict here")
    ap.add_argument("--silence", type=int, default=120, help="seconds without an answer before an op is a hang")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.start, args.samples, args.ops)
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    import importlib.util
    if not importlib.util.find_spec("expecttest") or not importlib.util.find_spec("torch"):
        print("opinfo: needs torch and expecttest (pip install expecttest): skipping")
        return 77
    if not os.access(simtorch, os.X_OK):
        sys.exit("opinfo: %s not found (build the project first; --build names the build directory)" % simtorch)
    import concurrent.futures as cf
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(2) as ex:
        f_cpu = ex.submit(run_workers, "cpu", [], args, args.silence)
        f_cuda = ex.submit(run_workers, "cuda", [simtorch], args, args.silence)
        cpu, cuda = f_cpu.result(), f_cuda.result()
    verdicts = {}
    for i in sorted(set(cpu) | set(cuda)):
        c, g = cpu.get(i, {}), cuda.get(i, {})
        name = g.get("op") or c.get("op") or str(i)
        verdicts[name] = (classify(c, g), c, g)
    counts = {}
    for v, _, _ in verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    cpu_ok = sum(1 for c in cpu.values() if c.get("status") == "ok")
    print("opinfo: %d ops (float32, first %d samples, forward + backward where supported), %.0f s"
          % (len(verdicts), args.samples, time.monotonic() - t0))
    print("  cpu: %d run" % cpu_ok)
    labels = [("run", "run on simtorch"),
              ("cpu_fails_too", "fail on simtorch and on the CPU too"),
              ("library", "fail in a CUDA library (the stand-ins' gap)"),
              ("not_on_cuda", "have no CUDA kernel in PyTorch (fail on a real GPU too)"),
              ("no_values", "fail on simtorch only, no library involved (kernels compute no values)"),
              ("hang", "hang on simtorch"), ("crash", "crash the simtorch worker"),
              ("no_float32", "have no float32 on CUDA")]
    for key, text in labels:
        print("  %-4d %s" % (counts.get(key, 0), text))
    for key, text in labels[2:7]:
        names = [n for n, (v, _, _) in sorted(verdicts.items()) if v == key]
        if names:
            print("\n%s:" % text)
            for n in names:
                g = verdicts[n][2]
                extra = " [stubs: %s]" % ", ".join(g["stubs"]) if g.get("stubs") else ""
                print("  %-36s %-8s %s%s" % (n, g.get("stage", ""), g.get("error", ""), extra))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({n: {"verdict": v, "cpu": c, "cuda": g} for n, (v, c, g) in verdicts.items()}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
