#!/usr/bin/env python3
"""A libcupti that cannot work with the CUDA driver the process runs on must not crash the traced process.

    foreign_cupti.py workload --program P --simgpu-dir D --trace-lines T
        an nvcc program on simgpu (runtime and driver stand-ins) under libtbprof with TBPROF_CUPTI_PATH naming
        a real libcupti.so.13: the pip wheel's (CUPTI 13.2, which dies in its first call without a real
        driver) and the toolkit's (13.0, which answers CUPTI_ERROR_UNKNOWN).
    foreign_cupti.py simtorch --build B
        PyTorch's CUDA build on simgpu with simgpu's CUPTI left out (SIMTORCH_REAL_CUPTI=1), so torch loads
        the wheel's libcupti itself, as on issue #12's machine, where the traced process segfaulted.

Each run: the same stdout and exit status as without libtbprof, a readable trace with the program's API
records, and one NOTICE saying the trace is API-only.  Exit 0 pass, 1 fail, 77 skip (no such libcupti).
"""
import argparse
import glob
import os
import subprocess
import sys
import sysconfig
import tempfile

SKIP = 77
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def wheel_cupti():
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for path in sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", "libcupti.so.13"))):
            return path
    return None


def toolkit_cupti():
    for path in ("/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                 "/usr/local/cuda/lib/libcupti.so.13"):
        if os.path.exists(path):
            return os.path.realpath(path)
    return None


def compare(what, cmd, env, trace, expect_notice):
    tbanalyze = os.environ.get("TBANALYZE")
    plain = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    traced_env = dict(env)
    traced_env["LD_PRELOAD"] = os.environ["TBPROF_LIB"] + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    traced_env["TBPROF_OUT"] = trace
    traced = subprocess.run(cmd, env=traced_env, capture_output=True, text=True, timeout=300)
    print(f"{what}: exit {plain.returncode} plain, {traced.returncode} traced")
    if traced.returncode != plain.returncode:
        fail(f"{what}: exit {traced.returncode} under libtbprof, {plain.returncode} without\n{traced.stderr[-2000:]}")
    if traced.stdout != plain.stdout:
        fail(f"{what}: stdout differs under libtbprof:\n{traced.stdout[-1000:]}\n--- without:\n{plain.stdout[-1000:]}")
    if traced.stderr.count("tbprof:") != 0:
        fail(f"{what}: libtbprof wrote to the program's stderr without TBPROF_VERBOSE:\n{traced.stderr[-1000:]}")
    if not os.path.exists(trace):
        fail(f"{what}: no trace written")
        return
    info = subprocess.run([tbanalyze, "info", trace], capture_output=True, text=True)
    if info.returncode != 0:
        fail(f"{what}: tbanalyze info exit {info.returncode}: {info.stderr[-500:]}")
        return
    notices = [line.strip() for line in info.stdout.splitlines() if "API-only trace" in line]
    print(f"{what}: {notices}")
    if len(notices) != 1 or expect_notice not in notices[0]:
        fail(f"{what}: want one notice containing {expect_notice!r}, got {notices}")
    if "ended:        cleanly" not in info.stdout:
        fail(f"{what}: trace not ended cleanly:\n{info.stdout}")
    dump = subprocess.run([tbanalyze, "dump", trace, "--json"], capture_output=True, text=True)
    launches = sum(1 for line in dump.stdout.splitlines() if line.startswith('{"kind":"launch"'))
    print(f"{what}: {launches} launch records")
    if launches == 0:
        fail(f"{what}: no launch records in the trace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["workload", "simtorch"])
    ap.add_argument("--program")
    ap.add_argument("--simgpu-dir")
    ap.add_argument("--trace-lines")
    ap.add_argument("--build")
    args = ap.parse_args()
    wheel = wheel_cupti()
    tmp = tempfile.mkdtemp(prefix="tbp-foreign-cupti-")
    if args.mode == "workload":
        cases = []
        if wheel:
            cases.append(("wheel " + wheel, wheel, "cannot work with this CUDA driver"))
        tk = toolkit_cupti()
        if tk:
            cases.append(("toolkit " + tk, tk, "CUPTI cuptiSubscribe failed"))
        if not cases:
            print("no real libcupti.so.13 here (pip wheel or toolkit): skipping")
            return SKIP
        for i, (what, path, notice) in enumerate(cases):
            env = dict(os.environ)
            env["LD_LIBRARY_PATH"] = args.simgpu_dir
            env["TBPROF_CUPTI_PATH"] = path
            compare(what, [args.program, "2"], env, os.path.join(tmp, f"w{i}.zst"), notice)
    else:
        simtorch = os.path.join(args.build, "tests", "simgpu", "simtorch")
        probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                               capture_output=True, text=True, timeout=120)
        if probe.returncode != 0 or not probe.stdout.strip() or not wheel or not os.path.exists(simtorch):
            print("no PyTorch CUDA build with the wheel's libcupti, or simtorch not built: skipping")
            return SKIP
        script = os.path.join(tmp, "prog.py")
        with open(script, "w") as f:
            f.write("import sys, torch\n"
                    "x = torch.ones(64, device='cuda')\n"
                    "for _ in range(20):\n"
                    "    x.add_(1)\n"
                    "w = torch.nn.Linear(64, 8).cuda()\n"
                    "y = w(x.unsqueeze(0))\n"
                    "torch.cuda.synchronize()\n"
                    "print('shape', tuple(y.shape), 'sum', float(x.sum().item()))\n"
                    "import os\n"
                    "try:\n"
                    "    print('wait', os.wait())\n"  # the probe's copy must not be a child the host sees
                    "except ChildProcessError:\n"
                    "    print('wait: no children')\n"
                    "sys.exit(3)\n")
        env = dict(os.environ)
        env["SIMTORCH_REAL_CUPTI"] = "1"
        env.pop("LD_PRELOAD", None)
        compare("simtorch, wheel's libcupti loaded by torch", [simtorch, sys.executable, script], env,
                os.path.join(tmp, "t.zst"), "cannot work with this CUDA driver")
    if failures:
        print(f"{len(failures)} failure(s); traces kept in {tmp}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
