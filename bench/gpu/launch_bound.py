#!/usr/bin/env python3
"""Launch-bound loop: what each profiler adds per launch (issue #19 item 5).

    python3 bench/gpu/launch_bound.py [--build build] [--launches 20000] [--rounds 5] [--simtorch]

LAUNCHES x `x.add_(1)` on a one-element CUDA tensor (one tiny kernel per call: the host's launch path is
all there is to measure), timed from the first launch to the synchronize after the last, in five modes:
  plain            no profiler
  CUPTI floor      the cheapest CUPTI client: kernel records only, no API records, no external ids, no
                   hooks (bench/gpu/cupti_floor.c, preloaded): what CUPTI itself costs
  libtbprof        LD_PRELOAD=libtbprof.so (CUPTI on, the default)
  TBPROF_CUPTI=0   libtbprof, API records only
  torch.profiler   torch.profiler.profile(activities=[CPU, CUDA]) around the loop (no libtbprof)
Each mode is a fresh process (after 2000 warm-up launches).  Rounds alternate the order of the modes
(rotated by one each round), so drift in the machine's speed falls on every mode alike.  Prints each
run's us per launch, then per mode the median, and the median over rounds of (mode - plain) in us per
launch and of mode / plain, plus libtbprof against torch.profiler in the same rounds.

On a machine with an NVIDIA GPU and a CUDA build of PyTorch: one command, as above.  --simtorch runs
it on simgpu (build/tests/simgpu/simtorch) to show the harness works without a GPU; simgpu's timings
are its own (a simulated launch costs what simgpu's lock and clock cost), not a GPU's.  There,
torch.profiler gets no GPU records from simgpu's CUPTI stand-in, so its figure is its host-side cost.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

MODES = ["plain", "CUPTI floor", "libtbprof", "TBPROF_CUPTI=0", "torch.profiler"]

WORKER = r"""
import ctypes, sys, time, torch
mode, n = sys.argv[1], int(sys.argv[2])
x = torch.zeros(1, device="cuda")
for _ in range(2000):
    x.add_(1)
torch.cuda.synchronize()

def loop():
    t0 = time.perf_counter_ns()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    return time.perf_counter_ns() - t0

if mode == "torch.profiler":
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        ns = loop()
else:
    ns = loop()
if mode == "floor":
    # its kernel count, flushed now: at exit CUDA may be torn down before the preload's destructor
    ctypes.CDLL(None).tbp_cupti_floor_report()
print(f"us_per_launch {ns / n / 1e3:.4f}")
"""


def wheel_cupti():
    """The libcupti.so.13 of pip torch's nvidia wheel (what torch loads), or None."""
    import glob
    import site
    roots = site.getsitepackages() + [site.getusersitepackages()]
    found = [p for r in roots for p in sorted(glob.glob(os.path.join(r, "nvidia", "**", "libcupti.so.13"),
                                                         recursive=True))]
    return found[0] if found else None


def run_mode(mode, args, worker, tmp, round_index):
    env = dict(os.environ)
    preload = env.pop("LD_PRELOAD", "")
    if mode in ("libtbprof", "TBPROF_CUPTI=0"):
        env["LD_PRELOAD"] = args.lib + (":" + preload if preload else "")
        env["TBPROF_OUT"] = os.path.join(tmp, f"r{round_index}-{mode.replace('=', '')}.zst")
        if mode == "TBPROF_CUPTI=0":
            env["TBPROF_CUPTI"] = "0"
    elif mode == "CUPTI floor":
        env["LD_PRELOAD"] = args.floor_lib + (":" + preload if preload else "")
        env["TBP_CUPTI_FLOOR"] = "1"
        env["TBP_CUPTI_FLOOR_OUT"] = floor_out = os.path.join(tmp, f"r{round_index}-floor.txt")
        if not args.simtorch and wheel_cupti():
            env["TBPROF_CUPTI_PATH"] = wheel_cupti()
    elif preload:
        env["LD_PRELOAD"] = preload
    worker_mode = {"torch.profiler": "torch.profiler", "CUPTI floor": "floor"}.get(mode, "timed")
    cmd = [sys.executable, worker, worker_mode, str(args.launches)]
    if args.simtorch:
        cmd = [os.path.join(args.build, "tests", "simgpu", "simtorch")] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    for line in p.stdout.splitlines():
        if line.startswith("us_per_launch "):
            if mode == "CUPTI floor":
                # a floor that recorded nothing would be no floor: its kernels must cover the loop
                recorded = open(floor_out).read().split() if os.path.exists(floor_out) else []
                kernels = int(recorded[1]) if len(recorded) > 1 else 0
                if kernels < args.launches:
                    sys.exit(f"CUPTI floor: recorded {kernels} kernels of the loop's {args.launches}: not measuring "
                             f"CUPTI ({p.stderr[-500:]})")
            return float(line.split()[1])
    sys.exit(f"{mode}: exit {p.returncode}, no result\n{p.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="meson build directory (default: build)")
    ap.add_argument("--lib", help="libtbprof.so (default: BUILD/libtbprof/libtbprof.so)")
    ap.add_argument("--floor-lib", help="the CUPTI floor client (default: BUILD/bench/gpu/libcupti_floor.so)")
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--simtorch", action="store_true", help="run on simgpu (no GPU needed)")
    args = ap.parse_args()
    args.lib = os.path.abspath(args.lib or os.path.join(args.build, "libtbprof", "libtbprof.so"))
    args.floor_lib = os.path.abspath(args.floor_lib or os.path.join(args.build, "bench", "gpu", "libcupti_floor.so"))
    for path, opt in ((args.lib, "--lib"), (args.floor_lib, "--floor-lib")):
        if not os.path.exists(path):
            sys.exit(f"{path}: not found (build first, or pass {opt})")
    tmp = tempfile.mkdtemp(prefix="tbp-launch-bound-")
    worker = os.path.join(tmp, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    where = "simgpu (simtorch)" if args.simtorch else "this machine's GPU"
    print(f"launch-bound loop: {args.launches} x x.add_(1) on a one-element CUDA tensor, {args.rounds} rounds, "
          f"on {where}; us per launch")
    results = {m: [] for m in MODES}
    for r in range(args.rounds):
        order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
        row = {}
        for mode in order:
            row[mode] = run_mode(mode, args, worker, tmp, r)
            results[mode].append(row[mode])
        print(f"round {r + 1}: " + "  ".join(f"{m} {row[m]:.2f}" for m in MODES))
    plain = results["plain"]
    print(f"\n{'mode':16s} {'median us':>10s} {'range':>15s} {'added us':>9s} {'x plain':>8s}")
    for m in MODES:
        v = results[m]
        added = statistics.median(a - b for a, b in zip(v, plain))
        ratio = statistics.median(a / b for a, b in zip(v, plain))
        print(f"{m:16s} {statistics.median(v):10.2f} {min(v):7.2f}-{max(v):<7.2f} {added:+9.2f} {ratio:8.3f}")
    tp = results["torch.profiler"]
    for m in ("libtbprof", "TBPROF_CUPTI=0", "CUPTI floor"):
        ratio = statistics.median(a / b for a, b in zip(results[m], tp))
        print(f"{m} / torch.profiler (median over rounds): {ratio:.3f}")
    over_floor = statistics.median(a - b for a, b in zip(results["libtbprof"], results["CUPTI floor"]))
    print(f"libtbprof over the CUPTI floor (median over rounds): {over_floor:+.2f} us per launch")
    print(f"traces in {tmp}")


if __name__ == "__main__":
    main()
