#!/usr/bin/env python3
"""The CUPTI probe's copy of the process dies of its own abort at once: no tbprof handler in it.

    probe_abort.py --program PROG.py --simgpu-dir D --fake-cupti LIBCUPTI

libtbprof (libtbprof/cupti_probe.c) asks a throwaway copy of the process whether a libcupti survives
its first call.  The copy sets SIG_DFL for the fatal signals first, so a crash ends it by its signal.
When the trace has started, tbprof's final-flush handler is installed for SIGABRT, and the `signal`
interposer (interpose/signal.c) keeps it installed for a program asking for SIG_DFL: the copy must
set the C library's disposition itself, or an abort in it runs the flush handler, which waits up to
2 s for a writer thread the copy does not have.

The program (simgpu's ctypes workload) runs under libtbprof with TBPROF_CUPTI_PATH naming the test's
scriptable libcupti, whose cuptiGetVersion (FAKE_CUPTI_CRASH=abort) writes what the kernel would do
with SIGABRT in the copy -- read with the raw system call -- and aborts.  Checked, none of it timed:
  - the copy saw SIGABRT at the kernel's default: no handler of ours could run;
  - the trace's notice says the probe died of signal 6 (SIGABRT) in cuptiGetVersion;
  - the program's stdout and exit status are as without libtbprof.
Exit 0 pass, 1 fail.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--simgpu-dir", required=True)
    ap.add_argument("--fake-cupti", required=True)
    args = ap.parse_args()
    failures = []
    tmp = tempfile.mkdtemp(prefix="tbp-probe-abort-")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = args.simgpu_dir
    env.pop("LD_PRELOAD", None)
    cmd = [sys.executable, args.program, "2"]
    plain = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    report = os.path.join(tmp, "disposition.txt")
    trace = os.path.join(tmp, "trace.zst")
    traced_env = dict(env)
    traced_env.update({
        "LD_PRELOAD": " ".join(x for x in (os.environ.get("TBP_PRELOAD_FIRST"), os.environ["TBPROF_LIB"]) if x),
        "TBPROF_OUT": trace,
        "TBPROF_CUPTI": "1",
        "TBPROF_CUPTI_PATH": args.fake_cupti,
        "FAKE_CUPTI_CRASH": "abort",
        "FAKE_CUPTI_REPORT": report,
    })
    traced = subprocess.run(cmd, env=traced_env, capture_output=True, text=True, timeout=120)
    print(f"exit {plain.returncode} plain, {traced.returncode} traced")
    if traced.returncode != plain.returncode or traced.stdout != plain.stdout:
        failures.append(f"the program changed under libtbprof: exit {traced.returncode} vs {plain.returncode}\n"
                        f"{traced.stdout[-800:]}\n--- without:\n{plain.stdout[-800:]}\n{traced.stderr[-1500:]}")
    seen = open(report).read().strip() if os.path.exists(report) else None
    print(f"the probe's copy, at its abort: {seen!r}")
    if seen != "SIGABRT default":
        failures.append(f"the probe's copy had {seen!r} at its abort, want 'SIGABRT default' "
                        "(tbprof's flush handler stayed installed in it)" if seen else
                        "the fake libcupti's cuptiGetVersion never ran in a probe copy (no report)")
    info = subprocess.run([os.environ["TBANALYZE"], "info", trace], capture_output=True, text=True)
    notices = [line.strip() for line in info.stdout.splitlines() if "probe process" in line]
    print("notices:", notices)
    want = f"died of signal {int(signal.SIGABRT)} in cuptiGetVersion"
    if len(notices) != 1 or want not in notices[0]:
        failures.append(f"want one notice saying {want!r}, got {notices}\n{info.stdout[-1500:]}{info.stderr[-500:]}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(f"files kept in {tmp}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
