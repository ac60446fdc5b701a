"""The memory the preload adds to a CPU PyTorch training loop is bounded (issue 15): peak RSS of
bench/python/train_loop.py (a Python-heavy loop: 130 k distinct call paths, spans on, TBPROF_TRACE_ALL=1)
under the preload stays within 32 MiB of the same loop without it.  What each part costs is in
doc/python.md and doc/config.md.  Skips without PyTorch."""
import os
import resource
import subprocess
import sys
import tempfile

from checks import check, finish

LIMIT_KIB = 32 * 1024


def peak_rss_kib(env, steps):
    # A fresh interpreter per run, measured by the kernel (getrusage of the waited-for child).
    loop = os.path.join(os.environ["TBP_SOURCE_ROOT"], "bench", "python", "train_loop.py")
    code = ("import resource,subprocess,sys;"
            "subprocess.run([sys.executable, sys.argv[1], sys.argv[2]], check=True, stdout=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, loop, str(steps)], env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"train_loop.py failed: {out.stderr[-2000:]}")
    return int(out.stdout.strip().splitlines()[-1])


def main():
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIP: no PyTorch")
        return 77
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    with tempfile.TemporaryDirectory() as tmp:
        traced = dict(base, LD_PRELOAD=os.environ["TBPROF_LIB"], TBPROF_TRACE_ALL="1",
                      TBPROF_OUT=os.path.join(tmp, "t.%p.zst"))
        plain_kib = min(peak_rss_kib(base, 150) for _ in range(2))
        traced_kib = max(peak_rss_kib(traced, 150) for _ in range(2))
    added = traced_kib - plain_kib
    print(f"peak RSS: {plain_kib} KiB without the preload, {traced_kib} KiB with it (+{added} KiB)")
    check(f"peak RSS added by the preload within {LIMIT_KIB} KiB", added <= LIMIT_KIB, True)
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
