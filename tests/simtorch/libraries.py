#!/usr/bin/env python3
"""simgpu's library stand-ins compute what PyTorch reads back (issue #29): cuBLAS's dot (dot, vdot, inner,
matmul of vectors; torch.optim.LBFGS) and cuSOLVER's Cholesky, LU solve, QR, SVD and symmetric eigenvalues,
against PyTorch on the CPU (scripts/library_values.py), each through its stand-in: the truth log holds the
library kernels.

    libraries.py --build B

Exit 0 pass, 1 fail, 77 skip (no PyTorch CUDA build).
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The kernel each library routine the script must reach enqueues (cublas.c, cusolver.c).
WANT_KERNELS = ["dot_kernel", "potrf_kernel", "getrf_kernel", "getrs_kernel", "geqrf_kernel", "orgqr_kernel",
                "gesvdj_batched_kernel", "syev_batched_kernel"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0 or not probe.stdout.strip() or not os.path.exists(simtorch):
        print("no PyTorch CUDA build, or simtorch not built: skipping")
        return 77
    truth = os.path.join(tempfile.mkdtemp(prefix="tbp-libraries-"), "truth.log")
    env = dict(os.environ, SIMGPU_TRUTH=truth, SIMGPU_WARN_UNSUPPORTED="1")
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([simtorch, sys.executable, os.path.join(HERE, "scripts", "library_values.py")], env=env,
                       capture_output=True, text=True, timeout=300)
    print(p.stdout)
    failures = 0
    if p.returncode != 0 or not p.stdout.rstrip().endswith("done"):
        print(f"FAIL: exit {p.returncode}\n{p.stderr[-3000:]}")
        failures += 1
    stubs = sorted({line for line in p.stderr.splitlines() if "is not simulated" in line})
    lib_stubs = [s for s in stubs if "CUBLAS" in s or "CUSOLVER" in s]
    if lib_stubs:
        print("FAIL: library stubs reached:\n  " + "\n  ".join(lib_stubs))
        failures += 1
    kernels = collections.Counter()
    cols = None
    with open(truth) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#pid"):
                cols = line[1:].split("\t")
            elif line and not line.startswith("#"):
                row = dict(zip(cols, line.split("\t")))
                if row["op"] == "kernel" and row["gpu"] == "1":
                    kernels[row["name"]] += 1
    for k in WANT_KERNELS:
        print(f"{kernels[k]:4d} {k}")
        if not kernels[k]:
            print(f"FAIL: no {k} in the truth log: the check did not go through the stand-in")
            failures += 1
    print("PASS" if not failures else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
