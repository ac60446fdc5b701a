#!/usr/bin/env python3
"""An API-only trace (TBPROF_CUPTI=0) names the library kernels its driver launches carry (issue #19).

    api_only_names.py --build B

PyTorch on simgpu (simtorch) runs GEMMs: cuBLAS's (cuLaunchKernel with a CUfunction) and cuBLASLt's
(cuLaunchKernelEx with a CUkernel, as a statically linked runtime that loads its kernels as a CUlibrary
launches them; simgpu's driver, like the real one, names a CUkernel only through cuKernelGetName).
Under libtbprof with CUPTI off, every driver launch record carries the name of the kernel simgpu's truth
log says it launched -- none is "?".  Exit 0 pass, 1 fail, 77 skip (no PyTorch CUDA build).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = """
import torch
torch.manual_seed(0)
a = torch.randn(64, 128, device="cuda", requires_grad=True)
lin = torch.nn.Linear(128, 32).cuda()
for _ in range(3):
    y = lin(a)                      # addmm: cuBLASLt (cuLaunchKernelEx) with its bias epilogue
y.sum().backward()                  # the backward GEMMs
z = a.detach() @ a.detach().t()     # mm: cuBLAS (cuLaunchKernel)
b = torch.bmm(torch.randn(4, 8, 16, device="cuda"), torch.randn(4, 16, 8, device="cuda"))
torch.cuda.synchronize()
print("ok", tuple(y.shape), tuple(z.shape), tuple(b.shape))
"""


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
    tmp = tempfile.mkdtemp(prefix="tbp-api-only-names-")
    script, trace, truth = (os.path.join(tmp, n) for n in ("prog.py", "t.zst", "truth.log"))
    with open(script, "w") as f:
        f.write(SCRIPT)
    env = dict(os.environ, LD_PRELOAD=os.environ["TBPROF_LIB"], TBPROF_CUPTI="0", TBPROF_OUT=trace,
               SIMGPU_TRUTH=truth)
    p = subprocess.run([simtorch, sys.executable, script], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(f"FAIL: exit {p.returncode}\n{p.stderr[-2000:]}")
        return 1
    dump = subprocess.run([os.environ["TBANALYZE"], "dump", trace, "--json"], capture_output=True, text=True)
    if dump.returncode != 0:
        print(f"FAIL: tbanalyze dump exit {dump.returncode}: {dump.stderr[-500:]}")
        return 1
    recs = [json.loads(line) for line in dump.stdout.splitlines() if line.startswith('{"kind":"launch"')]
    got = collections.Counter((r["api_name"], r["name_str"]) for r in recs if r["api_name"].startswith("cuLaunch"))
    want = collections.Counter((t["api"], t["name"]) for t in read_truth(truth)
                               if t["op"] == "kernel" and t.get("domain") == "driver")
    for (api, name), n in sorted(got.items()):
        print(f"{n:3d} {api:20s} {name[:90]}")
    failures = 0
    if not any(api.startswith("cuLaunchKernelEx") for api, _ in want):
        print("FAIL: no cuLaunchKernelEx launch in the truth (cuBLASLt's path not exercised)")
        failures += 1
    unnamed = sum(n for (api, name), n in got.items() if name in ("?", ""))
    if unnamed:
        print(f"FAIL: {unnamed} driver launch records without a kernel name")
        failures += 1
    if got != want:
        print(f"FAIL: driver launches {sorted((got - want).items())[:4]} in the trace only, "
              f"{sorted((want - got).items())[:4]} in the truth only")
        failures += 1
    if failures:
        print(f"traces kept in {tmp}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
