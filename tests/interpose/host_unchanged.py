#!/usr/bin/env python3
"""The host is unchanged under the preload: identical stdout and exit
status, and the trace files each scenario must (or must not) leave.

Usage: host_unchanged.py SCENARIO
Environment: TBPROF_LIB, TRACEDUMP, HOSTPROG (tests/interpose/hostprog),
optional TBP_PRELOAD_FIRST (sanitizer runtime to preload before libtbprof).
"""
import os
import subprocess
import sys
import tempfile

LIB = os.environ["TBPROF_LIB"]
TRACEDUMP = os.environ["TRACEDUMP"]
HOSTPROG = os.environ.get("HOSTPROG", "")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def base_env():
    env = dict(os.environ)
    # meson prepends its build directories to LD_LIBRARY_PATH; the test says
    # which runtime the programs must bind (simgpu or the real one).
    if "TBP_TEST_LD_LIBRARY_PATH" in env:
        env["LD_LIBRARY_PATH"] = env["TBP_TEST_LD_LIBRARY_PATH"]
    return env


def preload_env(extra=None):
    env = base_env()
    env.pop("TBPROF_OUT", None)
    env["LD_PRELOAD"] = " ".join(x for x in (os.environ.get("TBP_PRELOAD_FIRST"), LIB) if x)
    env.update(extra or {})
    return env


def plain_env(extra=None):
    env = base_env()
    env.pop("LD_PRELOAD", None)
    # A sanitizer runtime preloaded for a sanitized libtbprof is preloaded in
    # the plain run too: it changes how crashes end.
    if os.environ.get("TBP_PRELOAD_FIRST"):
        env["LD_PRELOAD"] = os.environ["TBP_PRELOAD_FIRST"]
    env.update(extra or {})
    return env


def run_both(cmd, extra=None, timeout=60):
    """Runs cmd in two fresh directories; returns (traced_dir, rc, stdout)."""
    tmp = tempfile.mkdtemp(prefix="tbp-host-")
    plain, traced = os.path.join(tmp, "plain"), os.path.join(tmp, "traced")
    os.mkdir(plain)
    os.mkdir(traced)
    p0 = subprocess.run(cmd, cwd=plain, env=plain_env(extra), capture_output=True, timeout=timeout)
    p1 = subprocess.run(cmd, cwd=traced, env=preload_env(extra), capture_output=True, timeout=timeout)
    if p0.returncode != p1.returncode:
        fail(f"{cmd}: exit status {p0.returncode} without the preload, {p1.returncode} with it\n"
             f"stderr: {p1.stderr.decode(errors='replace')}")
    if p0.stdout != p1.stdout:
        fail(f"{cmd}: stdout differs\n--- plain\n{p0.stdout.decode()}\n--- traced\n{p1.stdout.decode()}")
    return traced, p1.returncode, p1.stdout.decode()


def traces(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".zst"))


def dump(path, allow_truncated=False):
    p = subprocess.run([TRACEDUMP, path], capture_output=True, text=True)
    if p.returncode not in ((0, 5) if allow_truncated else (0,)):
        fail(f"{path}: tracedump rc {p.returncode}: {p.stderr.strip()}")
    lines = p.stdout.splitlines()
    kinds = {}
    for line in lines:
        k = line.split(" ", 1)[0]
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


def expect_files(d, want):
    got = traces(d)
    if len(got) != len(want) or (want and "trace.zst" not in got):
        fail(f"trace files {got}, expected {want}")
    return got


def prog(mode, files, check):
    d, rc, out = run_both([HOSTPROG, mode])
    got = expect_files(d, files)
    check(d, got)
    print(f"ok: {mode}: stdout and exit status {rc} identical; trace files {got}")


def complete(d, name, **want):
    kinds = dump(os.path.join(d, name))
    if kinds.get("end") != 1:
        fail(f"{name}: no END record ({kinds})")
    for k, n in want.items():
        if kinds.get(k, 0) != n:
            fail(f"{name}: {kinds.get(k, 0)} {k} records, expected {n} ({kinds})")
    return kinds


def main():
    s = sys.argv[1]
    if s == "plain":
        prog("plain", ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s == "threads":
        # 32 threads x 200 calls, plus main's malloc; thread records for all 33
        prog("threads", ["trace.zst"],
             lambda d, g: complete(d, "trace.zst", malloc=1 + 32 * 100, launch=32 * 100,
                                   free=32 * 100, thread=33, lost=0))
    elif s == "fork":
        if os.environ.get("TBP_SANITIZER") == "thread":
            # TSan cannot follow a thread started in the child of a
            # multi-threaded parent ("dup thread with used id").
            print("SKIP: fork with a tracing child is not supported by ThreadSanitizer")
            sys.exit(77)

        def check(d, got):
            complete(d, "trace.zst", malloc=1)
            child = [g for g in got if g != "trace.zst"][0]
            complete(d, child, sync=1, malloc=0)
        prog("fork", ["trace.zst", "trace.PID.zst"], check)
    elif s == "fork-inert":
        d, rc, out = run_both([HOSTPROG, "fork"], {"TBPROF_FORK": "0"})
        expect_files(d, ["trace.zst"])
        complete(d, "trace.zst", malloc=1, sync=0)
        print(f"ok: fork with TBPROF_FORK=0: child left no trace; exit status {rc} identical")
    elif s == "forkexec":
        prog("forkexec", ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s == "spawn":
        prog("spawn", ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s in ("sigterm", "sigint", "abort"):
        # handled: final flush, then death by the same signal
        prog(s, ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s == "own-handler":
        prog(s, ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s == "_exit":
        # no exit handlers run: readable, at most the last ~100 ms lost
        prog("_exit", ["trace.zst"], lambda d, g: dump(os.path.join(d, "trace.zst"), True))
    elif s == "sigkill":
        def check(d, g):
            kinds = dump(os.path.join(d, "trace.zst"), True)
            if kinds.get("sync", 0) != 1000 or kinds.get("malloc", 0) != 1:
                fail(f"events older than the flush period were lost: {kinds}")
        prog("sigkill", ["trace.zst"], check)
    elif s == "python-os-exit":
        code = ("import ctypes, os\n"
                "rt = ctypes.CDLL('libcudart.so.13')\n"
                "p = ctypes.c_void_p()\n"
                "print('malloc', rt.cudaMalloc(ctypes.byref(p), 64) == 0)\n"
                "import time; time.sleep(0.3)\n"
                "os._exit(5)\n")
        d, rc, out = run_both([sys.executable, "-c", code])
        expect_files(d, ["trace.zst"])
        kinds = dump(os.path.join(d, "trace.zst"), True)
        if kinds.get("malloc") != 1:
            fail(f"os._exit: malloc record missing: {kinds}")
        print(f"ok: os._exit: stdout and exit status {rc} identical; trace readable")
    elif s == "driver":
        # driver entry points linked directly, fetched by dlsym(handle) and by
        # cuGetProcAddress: each call recorded once, kernel named by cuFuncGetName
        drv = os.environ["DRVPROG"]
        d, rc, out = run_both([drv])
        expect_files(d, ["trace.zst"])
        kinds = complete(d, "trace.zst", malloc=3, memcpy=3, launch=3, sync=3, free=3)
        p = subprocess.run([TRACEDUMP, os.path.join(d, "trace.zst")], capture_output=True, text=True)
        launches = [l for l in p.stdout.splitlines() if l.startswith("launch ")]
        bad = [l for l in launches if 'kname="kernel(float*, int)"' not in l or "grid_x=4 " not in l]
        if bad:
            fail(f"driver launch records lack name/geometry: {bad[0]}")
        syncs = [l for l in p.stdout.splitlines() if l.startswith("sync ")]
        if any(" result=400 " not in l for l in syncs):
            fail("driver error code not recorded")
        print(f"ok: driver API: 3 x 5 calls recorded once each ({kinds}); output identical")
    elif s == "no-cuda":
        # processes that never touch CUDA leave no file and behave the same
        d, rc, out = run_both(["ls", "-l", "/usr/include/linux"])
        expect_files(d, [])
        src = os.path.join(d, "x.c")
        with open(src, "w") as f:
            f.write("#include <stdio.h>\nint main(void){puts(\"hi\");return 0;}\n")
        for cmd in (["gcc", "-o", os.path.join(d, "x"), src], [os.path.join(d, "x")],
                    [sys.executable, "-c", "print(sum(range(10)))"]):
            subprocess.run(["gcc", "-o", os.path.join(d, "x"), src], check=True)
            d2, rc, out = run_both(cmd)
            expect_files(d2, [])
        print("ok: ls, gcc, a C program and python without CUDA leave no trace file, output identical")
    else:
        fail("unknown scenario " + s)


if __name__ == "__main__":
    main()
