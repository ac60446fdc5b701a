#!/usr/bin/env python3
"""`tbprof demo`: what tbprof finds, on any machine, without a GPU.

Runs models/paper_antipatterns (the TorchBench paper's pre-fix patterns in a small transformer) with
real PyTorch on simgpu, the simulated GPU (a stand-in CUDA runtime, driver, CUPTI and cuBLAS/cuFFT that
PyTorch's CUDA build runs on unmodified: tests/simgpu/README.md), traces it with libtbprof, prints
tbanalyze's report, then where the report puts the paper's four patterns in the model's source.
stdout: the first line says the GPU is simulated, then the report and the patterns; stderr: progress
(and run.py's own output).

The `tbprof` command finds the pieces and runs this script:
    demo.py --lib LIBTBPROF --tbanalyze TBANALYZE --simgpu DIR --site DIR [-o OUT] [-- RUN.PY ARGS]
with the Python that runs it running the model.
Exit status (common/exit_status.def, shared with tbprof and tbanalyze): 0 done; 2 the output path is not a
trace's; 3 bad command line; 5 this machine cannot run it (no PyTorch, or a PyTorch without its CUDA build);
else the failing step's status (the traced run's, tbanalyze's).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

EXIT_BAD_INPUT = 2      # common/exit_status.def
EXIT_UNAVAILABLE = 5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "paper_antipatterns"
MODEL_FILE = os.path.join(ROOT, "models", MODEL, "__init__.py")
# --small and 12 measured iterations: ~5 s on two cores, and enough steps for every pattern to recur.
RUN_ARGS = ["-m", MODEL, "-d", "cuda", "-t", "train", "--small", "--nwarmup", "1", "--niter", "12"]
# simgpu's stand-ins, preloaded after libtbprof as tests/simgpu/simtorch.in does: torch's libraries find
# the wheel's own CUDA libraries by RPATH, and a library already loaded under the same soname wins.
SIMGPU_LIBS = ["libcudart.so.13", "libcuda.so.1", "libcupti.so.13", "libcublasLt.so.13", "libcublas.so.13",
               "libcufft.so.12", "libcusolver.so.12"]
TRACE_MAGIC = b"\x5b\x2a\x4d\x18"   # the header frame's, TBP_MAGIC_HEADER_FRAME (trace/internal.h)

BANNER = ("tbprof demo: SIMULATED GPU. PyTorch, the model, libtbprof and tbanalyze are real; the GPU is simgpu, "
          "a stand-in CUDA runtime on the CPU, and its times are a model's, not a real GPU's.")

# The paper's four patterns as models/paper_antipatterns keeps them: the finding each should produce, and
# text that marks its line(s) in the model's source.
PATTERNS = [
    ("zero_grad before the fix: one tiny kernel per parameter (paper Listing 2)", "kernel_burst",
     ["param.grad.zero_()"]),
    ("a scalar made a GPU tensor on every call, hf_Reformer's (paper Listing 3)", "scalar_copy",
     ["torch.tensor(self.attention_head_size"]),
    ("weights offloaded to the CPU and back every step, pig2's (paper 4.1.2)", "ping_pong",
     ["self.model.head.to(self.device)", 'self.model.head.to("cpu")']),
    ("the loss read with .item() every step: a sync per step", "sync_hotspot", ["loss.item()"]),
]


def say(*parts):
    print("tbprof demo:", *parts, file=sys.stderr, flush=True)


def parse(argv):
    parser = argparse.ArgumentParser(prog="tbprof demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--tbanalyze", required=True)
    parser.add_argument("--simgpu", required=True)
    parser.add_argument("--site", required=True)
    parser.add_argument("-o", "--output", default="tbprof-demo.zst")
    parser.add_argument("run_args", nargs="*", help="more arguments for run.py (after --)")
    return parser.parse_args(argv)


def traced_env(args):
    env = dict(os.environ)
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p]
    sims = [os.path.join(args.simgpu, name) for name in SIMGPU_LIBS if os.path.exists(os.path.join(args.simgpu, name))]
    env["LD_PRELOAD"] = ":".join(preload + [args.lib] + sims)
    env["LD_LIBRARY_PATH"] = ":".join([args.simgpu] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    env["PYTHONPATH"] = ":".join([args.site] + [p for p in env.get("PYTHONPATH", "").split(":") if p])
    env["TBPROF_OUT"] = args.output
    return env


def check_output_path(path):
    """The trace's name: a trace left by an earlier demo is replaced, anything else is not touched."""
    if not os.path.isdir(os.path.dirname(path)):
        return "its directory does not exist"
    if not os.path.lexists(path):
        return None
    if os.path.islink(path) or not os.path.isfile(path):
        return "exists and is not a regular file"
    with open(path, "rb") as f:
        if f.read(4) != TRACE_MAGIC:
            return "exists and is not a trace (not overwritten)"
    os.unlink(path)
    return None


def pattern_lines(needles):
    with open(MODEL_FILE) as f:
        return [(n, line.strip()) for n, line in enumerate(f, 1) if any(needle in line for needle in needles)]


def placed(finding):
    frames = (finding.get("where") or {}).get("python") or []
    return (frames[0]["file"], frames[0]["line"]) if frames else (None, None)


def describe(f):
    ms = lambda ns: "%.2f ms" % (ns / 1e6)  # noqa: E731
    if f["kind"] == "kernel_burst":
        return f"{f.get('bursts', f['count'])} bursts of tiny kernels, GPU idle {ms(f.get('idle_ns') or 0)} inside them"
    if f["kind"] == "scalar_copy":
        return f"{f['count']} scalar host-to-device copies, {ms(f.get('total_ns') or 0)} stalled"
    if f["kind"] == "ping_pong":
        return f"{f['count']} round trips, {ms(f.get('total_ns') or 0)} in copies"
    return f"{f['count']} syncs, {ms(f.get('total_ns') or 0)} waiting"


def pattern_hits(report):
    """Per pattern (title, kind, its lines): the findings of its kind that tbanalyze placed at its lines of the
    model, with their rank in the report."""
    model = os.path.realpath(MODEL_FILE)
    for title, kind, needles in PATTERNS:
        lines = dict(pattern_lines(needles))
        hits = [(rank, f) for rank, f in enumerate(report["findings"], 1) if f["kind"] == kind
                and placed(f)[0] and os.path.realpath(placed(f)[0]) == model and placed(f)[1] in lines]
        yield title, kind, lines, hits


def print_patterns(report):
    rel = os.path.relpath(MODEL_FILE, ROOT)
    print()
    print(f"The paper's four patterns, where this report places them ({rel}, lines of the run above):")
    found = 0
    for i, (title, kind, lines, hits) in enumerate(pattern_hits(report), 1):
        print(f" {i}. {title}")
        if not hits:
            print(f"      not found in this run: no {kind} finding at line {', '.join(map(str, sorted(lines)))}")
            continue
        found += 1
        for rank, f in hits:
            line = placed(f)[1]
            print(f"      {kind} (finding {rank}) at line {line}: {lines[line]}")
            print(f"        {describe(f)}")
    return found


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    print(BANNER, flush=True)
    args.output = os.path.abspath(args.output)
    problem = check_output_path(args.output)
    if problem:
        say(f"error: -o {args.output}: {problem}")
        return EXIT_BAD_INPUT
    if importlib.util.find_spec("torch") is None:
        say("error: PyTorch is not installed for", sys.executable, "(pip install torch: its CUDA build, the "
            "default on Linux, is what runs on the simulated GPU)")
        return EXIT_UNAVAILABLE
    cmd = [sys.executable, os.path.join(ROOT, "run.py")] + RUN_ARGS + list(args.run_args)
    say(f"tracing {MODEL} (train, --small, 1 warm-up + 12 measured iterations: ~5-20 s) on the simulated GPU "
        f"under libtbprof -> {args.output}")
    t0 = time.monotonic()
    # run.py's stdout (TorchBench's lines) goes to stderr with its progress: stdout holds the report alone.
    run = subprocess.run(cmd, env=traced_env(args), stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        if "torch.cuda.is_available() is False" in run.stderr:
            say("error: this PyTorch cannot use the simulated GPU: it is a CPU-only build (torch.version.cuda "
                "is None); the demo needs PyTorch's CUDA build (pip install torch, the default on Linux)")
            return EXIT_UNAVAILABLE
        say(f"error: the traced run failed (exit {run.returncode}): {' '.join(cmd)}")
        return run.returncode if run.returncode > 0 else 1
    say(f"traced in {time.monotonic() - t0:.1f} s; tbanalyze's report follows")
    print(flush=True)
    js = subprocess.run([args.tbanalyze, args.output, "--json"], capture_output=True, text=True)
    if js.returncode != 0:
        sys.stderr.write(js.stderr)
        return js.returncode
    findings = json.loads(js.stdout)
    # The report lists every finding the summary below names (its default is the top 20).
    top = max([20] + [rank for _, _, _, hits in pattern_hits(findings) for rank, _ in hits])
    report = subprocess.run([args.tbanalyze, args.output, "--top", str(top)])
    if report.returncode != 0:
        return report.returncode
    found = print_patterns(findings)
    print()
    print(f"{found} of 4 found.  The GPU above was simulated: its times are simgpu's, not a real GPU's; the "
          f"patterns and their lines are what tbprof finds on a real one.  On your own program: "
          f"tbprof record python train.py, then tbanalyze trace.zst.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
