#!/usr/bin/env python3
"""The host is unchanged under the preload: identical stdout and exit
status, and the trace files each scenario must (or must not) leave.

Usage: host_unchanged.py SCENARIO
Environment: TBPROF_LIB, TRACEDUMP, HOSTPROG (tests/interpose/hostprog),
optional TBP_PRELOAD_FIRST (sanitizer runtime to preload before libtbprof).
"""
import os
import re
import shutil
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


def DRVPROG_PATH():
    return os.environ["DRVPROG"]


def traces(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".zst"))


def dump(path, allow_truncated=False):
    """The trace's records by kind.  allow_truncated: also a trace cut short (tracedump exits 5), or cut before
    its first event (6: only its header or definitions were written, as when the program _exits or closes
    the trace's descriptor before the writer's first drain)."""
    p = subprocess.run([TRACEDUMP, path], capture_output=True, text=True)
    if p.returncode not in ((0, 5, 6) if allow_truncated else (0,)):
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
    # The programs must start from default dispositions (what the
    # handler scenarios check for), even when the suite runs under nohup.
    import signal
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
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
    elif s == "exec":
        # exec finishes the trace first: the 50 syncs made just before it
        # are in the file, which is complete (END) and not overwritten by
        # the exec'd program (it makes no GPU call)
        prog("exec", ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1, sync=50))
    elif s == "exec-fail":
        # a failed exec returns its error unchanged; the trace was finished
        # before it, so it holds the calls made until then
        prog("exec-fail", ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1, sync=5))
    elif s == "hostregister":
        # cudaHostRegister'ed memory counts as pinned in copies until
        # cudaHostUnregister: pinned, pinned, then pageable
        def check(d, g):
            complete(d, "trace.zst", malloc=1, memcpy=3, api=2)
            p = subprocess.run([TRACEDUMP, os.path.join(d, "trace.zst")], capture_output=True, text=True)
            lines = p.stdout.splitlines()
            flags = [int(re.search(r" flags=(\d+)", l).group(1)) for l in lines if l.startswith("memcpy ")]
            pinned = [bool(f & 2) for f in flags]          # TBP_COPYF_PINNED
            pageable = [bool(f & 4) for f in flags]        # TBP_COPYF_PAGEABLE
            if pinned != [True, True, False] or pageable != [False, False, True]:
                fail(f"copy flags {flags}: expected pinned, pinned, pageable")
            names = [re.search(r" api_name=(\S+)", l).group(1) for l in lines if l.startswith("api ")]
            if names != ["cudaHostRegister", "cudaHostUnregister"]:
                fail(f"api records {names}")
        prog("hostregister", ["trace.zst"], check)
    elif s == "spawn":
        prog("spawn", ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s in ("sigterm", "sigint", "abort"):
        # handled: final flush, then death by the same signal
        prog(s, ["trace.zst"], lambda d, g: complete(d, "trace.zst", malloc=1))
    elif s == "chain-handler":
        # the program's sigaction/signal see what they would without tbprof
        # (SIG_DFL, not the flush handler): it chains to nothing and exits 0
        def check(d, g):
            complete(d, "trace.zst", malloc=1)
        prog(s, ["trace.zst"], check)
        d, rc, out = run_both([HOSTPROG, s])
        for want in ("SIGTERM handler is default", "SIGINT handler is default", "SIGHUP is default",
                     "clean shutdown"):
            if want not in out:
                fail(f"{want!r} not in {out!r}")
        if rc != 0:
            fail(f"exit status {rc}")
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
    elif s == "closed-fd":
        # the program closes every descriptor after its first CUDA call and
        # reuses the trace's number for its own file: that file holds exactly
        # what the program wrote (no trace bytes), output identical, one
        # warning line
        code = ("import ctypes, os, time\n"
                "rt = ctypes.CDLL('libcudart.so.13')\n"
                "p = ctypes.c_void_p()\n"
                "print('malloc', rt.cudaMalloc(ctypes.byref(p), 64) == 0, flush=True)\n"
                "os.closerange(3, 65536)\n"
                "fds = [os.open(f'own{i}.txt', os.O_WRONLY | os.O_CREAT | os.O_TRUNC) for i in range(3)]\n"
                "big = os.open('own-high.txt', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
                "for n in range(3, 1100):\n"
                "    if n not in fds and n != big:\n"
                "        os.dup2(big, n)\n"
                "for i, fd in enumerate(fds):\n"
                "    os.write(fd, b'mine %d\\n' % i)\n"
                "for i in range(20):\n"
                "    rt.cudaMalloc(ctypes.byref(p), 64)\n"
                "    time.sleep(0.02)\n"
                "print('done', flush=True)\n")
        d, rc, out = run_both([sys.executable, "-c", code])
        plain = os.path.join(os.path.dirname(d), "plain")
        for name in ["own0.txt", "own1.txt", "own2.txt", "own-high.txt"]:
            with open(os.path.join(plain, name), "rb") as f0, open(os.path.join(d, name), "rb") as f1:
                a, b = f0.read(), f1.read()
            if a != b:
                fail(f"{name}: {len(b)} bytes with the preload, {len(a)} without ({b[:40]!r})")
        p = subprocess.run([sys.executable, "-c", code], cwd=d, env=preload_env(), capture_output=True,
                           text=True, timeout=60)
        lines = [l for l in p.stderr.splitlines() if l.startswith("tbprof: ")]
        if len(lines) != 1 or "closed the trace file descriptor" not in lines[0]:
            fail(f"expected one warning line, got {p.stderr!r}")
        dump(os.path.join(d, "trace.zst"), True)
        print(f"ok: descriptors closed and reused: the program's files untouched; {lines[0]}")
    elif s == "fork-pool":
        # fork Pool(4) after CUDA use, Python spans on: only the worker that
        # makes a CUDA call starts a trace; the others leave no file.
        # `with Pool` ends with terminate(): SIGTERM to each worker, which
        # runs tbprof's flush handler.  Under TSan the pool is closed and
        # joined instead: in the child of a multi-threaded parent (tbprof's
        # writer makes it one) TSan ignores every interceptor, so it defers
        # a signal that has a handler and never delivers it.
        end = ("        pool.close(); pool.join()\n"
               if os.environ.get("TBP_SANITIZER") == "thread" else "")
        code = ("import ctypes, multiprocessing as mp\n"
                "rt = ctypes.CDLL('libcudart.so.13')\n"
                "def work(x):\n"
                "    if x == 5:\n"
                "        p = ctypes.c_void_p()\n"
                "        rt.cudaMalloc(ctypes.byref(p), 64)\n"
                "    return sum(i * i for i in range(20000 + x))\n"
                "if __name__ == '__main__':\n"
                "    p = ctypes.c_void_p()\n"
                "    rt.cudaMalloc(ctypes.byref(p), 64)\n"
                "    with mp.get_context('fork').Pool(4) as pool:\n"
                "        print(sum(pool.map(work, range(16), chunksize=1)))\n"
                "        print(sum(pool.map(work, range(8, 16), chunksize=1)))\n" + end)
        d, rc, out = run_both([sys.executable, "-c", code])
        got = traces(d)
        if len(got) != 2 or "trace.zst" not in got:
            fail(f"trace files {got}: expected trace.zst and one worker's trace")
        complete(d, "trace.zst", malloc=1)
        child = [g for g in got if g != "trace.zst"][0]
        kinds = dump(os.path.join(d, child), True)
        if kinds.get("process") != 1 or kinds.get("malloc", 0) > 1:
            fail(f"{child}: {kinds}")
        print(f"ok: fork Pool(4): files {got}; the worker trace has {kinds}")
    elif s == "fork-race":
        if os.environ.get("TBP_SANITIZER") == "thread":
            print("SKIP: fork with a tracing child is not supported by ThreadSanitizer")
            sys.exit(77)
        # Forks racing other threads inside tbprof: (1) a thread makes the
        # first CUDA call (trace and CUPTI start, their locks held) while
        # main forks; (2) three threads allocate and free (the address map's
        # lock) while main forks.  Each child makes CUDA calls and _exits; a
        # child that inherited a lock held by a thread it does not have
        # hangs, and is counted and killed after 5 s.
        code = ("import ctypes, os, sys, threading, time\n"
                "rt = ctypes.CDLL('libcudart.so.13')\n"
                "def child():\n"
                "    p = ctypes.c_void_p(); rt.cudaMalloc(ctypes.byref(p), 64); rt.cudaFree(p); os._exit(0)\n"
                "def fork_n(n):\n"
                "    hung = 0\n"
                "    for _ in range(n):\n"
                "        pid = os.fork()\n"
                "        if pid == 0: child()\n"
                "        for _ in range(500):\n"
                "            if os.waitpid(pid, os.WNOHANG)[0]: break\n"
                "            time.sleep(0.01)\n"
                "        else:\n"
                "            hung += 1; os.kill(pid, 9); os.waitpid(pid, 0)\n"
                "    return hung\n"
                "def first():\n"
                "    p = ctypes.c_void_p(); rt.cudaMalloc(ctypes.byref(p), 64)\n"
                "t = threading.Thread(target=first); t.start()\n"
                "print('first-call race, hung children:', fork_n(40), flush=True)\n"
                "t.join()\n"
                "stop = []\n"
                "def churn():\n"
                "    ps = [ctypes.c_void_p() for _ in range(64)]\n"
                "    while not stop:\n"
                "        for p in ps: rt.cudaMalloc(ctypes.byref(p), 256)\n"
                "        for p in ps: rt.cudaFree(p)\n"
                "ts = [threading.Thread(target=churn) for _ in range(3)]\n"
                "for x in ts: x.start()\n"
                "print('alloc race, hung children:', fork_n(150), flush=True)\n"
                "stop.append(1)\n"
                "for x in ts: x.join()\n")
        d, rc, out = run_both([sys.executable, "-c", code], timeout=300)
        if rc != 0 or out.count("hung children: 0") != 2:
            fail(f"fork racing tbprof's locks: rc {rc}, {out!r}")
        print(f"ok: {out.strip()}")
    elif s == "exec-cuda":
        # an image that uses CUDA execs another that uses CUDA (same pid):
        # the pre-exec trace stays in trace.zst, the new image gets the
        # per-pid name
        code = ("import ctypes, os, sys\n"
                "rt = ctypes.CDLL('libcudart.so.13')\n"
                "p = ctypes.c_void_p()\n"
                "n = int(sys.argv[1])\n"
                "for i in range(n): rt.cudaMalloc(ctypes.byref(p), 64)\n"
                "print('image', n, flush=True)\n"
                "if n == 5: os.execv(sys.executable, [sys.executable, '-c', sys.argv[2], '2', ''])\n")
        d, rc, out = run_both([sys.executable, "-c", code, "5", code])
        got = traces(d)
        if len(got) != 2 or "trace.zst" not in got:
            fail(f"trace files {got}: expected trace.zst and trace.PID.zst")
        complete(d, "trace.zst", malloc=5)
        complete(d, [g for g in got if g != "trace.zst"][0], malloc=2)
        # the same when the pre-exec image already had the per-pid name (a
        # second program of its session): the exec'd image gets trace.PID-1.zst
        tmp = tempfile.mkdtemp(prefix="tbp-host-")
        with open(os.path.join(tmp, "x.py"), "w") as f:
            f.write(code)
        subprocess.run(["bash", "-c", f"{sys.executable} x.py 1 '' ; exec {sys.executable} x.py 5 \"$(cat x.py)\""],
                       cwd=tmp, env=preload_env(), check=True, timeout=60, capture_output=True)
        got2 = traces(tmp)
        serial = [g for g in got2 if re.fullmatch(r"trace\.\d+-1\.zst", g)]
        plain_pid = [g for g in got2 if re.fullmatch(r"trace\.\d+\.zst", g)]
        if len(got2) != 3 or len(serial) != 1 or len(plain_pid) != 1:
            fail(f"exec after a sibling: trace files {got2}")
        complete(tmp, "trace.zst", malloc=1)
        complete(tmp, plain_pid[0], malloc=5)
        complete(tmp, serial[0], malloc=2)
        print(f"ok: exec of a CUDA image: {got}, pre-exec trace kept; after a sibling: {got2}")
    elif s == "sessions":
        # back-to-back runs under traced shells: each run is a session of
        # its own and takes trace.zst over (no trace.PID.zst left behind);
        # two programs of one session: trace.zst and trace.PID.zst
        tmp = tempfile.mkdtemp(prefix="tbp-host-")
        env = preload_env()
        env.pop("TBPROF_OUT", None)
        prog_code = ("import ctypes, sys\n"
                     "rt = ctypes.CDLL('libcudart.so.13')\n"
                     "p = ctypes.c_void_p()\n"
                     "for i in range(int(sys.argv[1])): rt.cudaMalloc(ctypes.byref(p), 64)\n")
        with open(os.path.join(tmp, "m.py"), "w") as f:
            f.write(prog_code)
        py = sys.executable
        for n in (1, 3, 2):
            subprocess.run(["bash", "-c", f"{py} m.py {n}; true"], cwd=tmp, env=env, check=True, timeout=60)
            got = traces(tmp)
            if got != ["trace.zst"]:
                fail(f"after run {n}: trace files {got}")
            complete(tmp, "trace.zst", malloc=n)
        subprocess.run(["bash", "-c", f"{py} m.py 4; {py} m.py 6; true"], cwd=tmp, env=env, check=True,
                       timeout=60)
        got = traces(tmp)
        if len(got) != 2 or "trace.zst" not in got:
            fail(f"one session, two programs: {got}")
        complete(tmp, "trace.zst", malloc=4)
        complete(tmp, [g for g in got if g != "trace.zst"][0], malloc=6)
        print(f"ok: three back-to-back sessions each took trace.zst over; one session of two programs: {got}")
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
        devices = [l for l in p.stdout.splitlines() if l.startswith("device ")]
        if len(devices) != 1 or 'dname="tbprof fake GPU"' not in devices[0]:
            fail(f"DEVICE record lacks the driver's device name: {devices}")
        print(f"ok: driver API: 3 x 5 calls recorded once each ({kinds}); output identical")
    elif s == "out-pattern":
        # %p in TBPROF_OUT: the pid; the default name is not used
        d, rc, out = run_both([HOSTPROG, "plain"], {"TBPROF_OUT": "prof-%p.zst"})
        got = traces(d)
        if len(got) != 1 or not re.fullmatch(r"prof-\d+\.zst", got[0]):
            fail(f"TBPROF_OUT=prof-%p.zst made {got}")
        complete(d, got[0], malloc=1)
        print(f"ok: TBPROF_OUT=prof-%p.zst wrote {got[0]}")
    elif s == "lost":
        # a 4 KiB ring (16 records) and 20000 back-to-back calls: whatever is
        # dropped is counted exactly in LOST records (how much depends on timing)
        # (pinned to one CPU so the writer only runs when the producer is
        # preempted: drops then do happen)
        cmd = ([shutil.which("taskset"), "-c", str(min(os.sched_getaffinity(0)))]
               if shutil.which("taskset") else [])
        d, rc, out = run_both(cmd + [HOSTPROG, "burst"], {"TBPROF_BUFFER_SIZE": "4K"})
        p = subprocess.run([TRACEDUMP, os.path.join(d, "trace.zst")], capture_output=True, text=True)
        sets = sum(1 for l in p.stdout.splitlines() if l.startswith("memset "))
        lost = sum(int(re.search(r" count=(\d+)", l).group(1))
                   for l in p.stdout.splitlines() if l.startswith("lost "))
        ends = [l for l in p.stdout.splitlines() if l.startswith("end ")]
        if sets + lost != 20000:
            fail(f"{sets} memset records + {lost} lost != 20000 calls")
        if not ends or int(re.search(r" lost=(\d+)", ends[0]).group(1)) != lost:
            fail(f"END record's lost count disagrees with LOST records ({lost}): {ends}")
        print(f"ok: 4 KiB ring: {sets} calls recorded + {lost} counted as lost = 20000")
    elif s == "lost-mixed":
        # the ring holds launches packed (two 32-byte units), memsets whole
        # (five), and pads where a record would wrap: in a 4 KiB ring that
        # wraps every ~40 records, and in a 1 MiB one that starts at 128 KiB
        # and doubles as it fills (pinned to one CPU: the writer runs only
        # when the program is preempted), every launch's fields come back as
        # the program passed them and every call is recorded or counted lost
        cmd = ([shutil.which("taskset"), "-c", str(min(os.sched_getaffinity(0)))]
               if shutil.which("taskset") else [])
        for size in ("4K", "1M"):
            d, rc, out = run_both(cmd + [HOSTPROG, "burst-mixed"], {"TBPROF_BUFFER_SIZE": size})
            p = subprocess.run([TRACEDUMP, os.path.join(d, "trace.zst")], capture_output=True, text=True)
            field = lambda l, k: int(re.search(r" %s=(\d+)" % k, l).group(1))
            sets = [l for l in p.stdout.splitlines() if l.startswith("memset ")]
            launches = [l for l in p.stdout.splitlines() if l.startswith("launch ")]
            lost = sum(field(l, "count") for l in p.stdout.splitlines() if l.startswith("lost "))
            seen = set()
            for l in sets:
                i = field(l, "bytes")
                if i % 3 != 2 or i in seen:
                    fail(f"{size} ring: memset record with an unexpected size: {l}")
                seen.add(i)
            wide = 0
            for l in launches:
                i = field(l, "shmem")
                if i >= 20000 or i % 3 == 2 or i in seen:
                    fail(f"{size} ring: launch record with an unexpected shared memory size: {l}")
                seen.add(i)
                want = {"grid_x": 1 + i % 7, "grid_y": 70000 if i % 1000 == 1 else 1 + i % 3, "grid_z": 1,
                        "block_x": 32 * (1 + i % 4), "block_y": 1,
                        "block_z": 65536 if i % 1000 == 4 else 1 + i % 2}
                got = {k: field(l, k) for k in want}
                if (got != want or field(l, "name") != field(launches[0], "name") or field(l, "name") == 0 or
                        field(l, "end") < int(re.search(r" ts=(\d+)", l).group(1))):
                    fail(f"{size} ring: launch {i}: fields {got}, expected {want}: {l}")
                wide += i % 1000 in (1, 4)
            if len(seen) + lost != 20000:
                fail(f"{size} ring: {len(launches)} launches + {len(sets)} memsets + {lost} lost != 20000 calls")
            print(f"ok: {size} ring: {len(launches)} launches ({wide} too wide to pack) + {len(sets)} memsets "
                  f"recorded + {lost} counted as lost = 20000")
    elif s == "native":
        if os.environ.get("TBP_HAVE_LIBUNWIND") != "1":
            print("SKIP: built without libunwind")
            sys.exit(77)
        d, rc, out = run_both([HOSTPROG, "plain"], {"TBPROF_NATIVE": "1"})
        p = subprocess.run([TRACEDUMP, os.path.join(d, "trace.zst")], capture_output=True, text=True)
        lines = p.stdout.splitlines()
        mods = [l for l in lines if l.startswith("module ")]
        nodes = [l for l in lines if l.startswith("native ")]
        calls = [l for l in lines if l.startswith("malloc ")]
        if not mods or not nodes or not calls or " native=0 " in calls[0]:
            fail(f"native stacks missing: {len(mods)} modules, {len(nodes)} nodes, {calls[:1]}")
        # the stack's nodes chain to the root, and every pc lies in a module
        ranges = [(int(re.search(r" start=(\d+)", m).group(1)), int(re.search(r" end=(\d+)", m).group(1)))
                  for m in mods]
        byid = {int(re.search(r" id=(\d+)", n).group(1)): n for n in nodes}
        cur, depth = int(re.search(r" native=(\d+)", calls[0]).group(1)), 0
        while cur:
            node = byid[cur]
            pc = int(re.search(r" pc=(\d+)", node).group(1))
            if not any(a <= pc < b for a, b in ranges):
                fail(f"pc {pc:#x} outside every module")
            cur, depth = int(re.search(r" parent=(\d+)", node).group(1)), depth + 1
        print(f"ok: TBPROF_NATIVE=1: {depth}-frame stack, {len(mods)} module ranges")
    elif s == "marker":
        # a process that only calls tbprof_marker still gets a trace with it
        code = ("import ctypes\n"
                "lib = ctypes.CDLL(None)\n"
                "f = getattr(lib, 'tbprof_marker', None)\n"
                "r = f(1, 7, b'iter') if f else -1\n"
                "print('marker', 'ok' if f else 'absent')\n")
        tmp = tempfile.mkdtemp(prefix="tbp-host-")
        p = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=preload_env(),
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0 or "marker ok" not in p.stdout:
            fail(f"marker program: {p.returncode} {p.stdout} {p.stderr}")
        tp = subprocess.run([TRACEDUMP, os.path.join(tmp, "trace.zst")], capture_output=True, text=True)
        marks = [l for l in tp.stdout.splitlines() if l.startswith("marker ")]
        if len(marks) != 1 or "marker_kind=1 value=7" not in marks[0] or 'text="iter"' not in marks[0]:
            fail(f"marker record: {marks}")
        print("ok: tbprof_marker recorded (kind 1, value 7, label iter)")
    elif s == "bad-out":
        # an output that cannot be created: one line on stderr, tracing off,
        # the program unchanged
        bad = "/nonexistent-tbprof-dir/t.zst"
        d, rc, out = run_both([HOSTPROG, "threads"], {"TBPROF_OUT": bad})
        p = subprocess.run([HOSTPROG, "threads"], cwd=d, env=preload_env({"TBPROF_OUT": bad}),
                           capture_output=True, text=True, timeout=60)
        lines = [l for l in p.stderr.splitlines() if l.startswith("tbprof: ")]
        if len(lines) != 1 or bad not in lines[0]:
            fail(f"expected one 'tbprof:' line naming {bad}, got {p.stderr!r}")
        print(f"ok: unwritable TBPROF_OUT: one line ({lines[0]}), program unchanged")
    elif s == "bad-out-kinds":
        # /dev/full, a directory, a read-only file: one line naming the path,
        # no per-pid file anywhere, the program unchanged
        tmp = tempfile.mkdtemp(prefix="tbp-host-")
        ro = os.path.join(tmp, "ro.zst")
        with open(ro, "w") as f:
            f.write("keep")
        os.chmod(ro, 0o444)
        cases = ["/dev/full", os.path.join(tmp, "missing") + "/sub/", ro]
        if os.geteuid() == 0:
            cases.pop()   # root writes read-only files
        for bad in cases:
            d, rc, out = run_both([HOSTPROG, "plain"], {"TBPROF_OUT": bad})
            p = subprocess.run([HOSTPROG, "plain"], cwd=d, env=preload_env({"TBPROF_OUT": bad}),
                               capture_output=True, text=True, timeout=60)
            lines = [l for l in p.stderr.splitlines() if l.startswith("tbprof: ")]
            shown = bad + "trace.zst" if bad.endswith("/") else bad
            if len(lines) != 1 or not lines[0].startswith(f"tbprof: cannot write trace to {shown}: ") \
                    or not lines[0].endswith("; tracing disabled"):
                fail(f"TBPROF_OUT={bad}: expected one error line, got {p.stderr!r}")
            left = [f for f in os.listdir(tmp) if f != "ro.zst"] + traces(d)
            if left or (os.path.dirname(bad) and [f for f in os.listdir("/dev") if f.startswith("full.")]):
                fail(f"TBPROF_OUT={bad}: files created {left}")
            print(f"ok: {lines[0]}")
        # A relative name is shown absolute: the message says which directory.
        d, rc, out = run_both([HOSTPROG, "plain"], {"TBPROF_OUT": "missing/t.zst"})
        p = subprocess.run([HOSTPROG, "plain"], cwd=d, env=preload_env({"TBPROF_OUT": "missing/t.zst"}),
                           capture_output=True, text=True, timeout=60)
        want = f"tbprof: cannot write trace to {os.path.realpath(d)}/missing/t.zst: No such file or directory"
        if want not in p.stderr:
            fail(f"relative TBPROF_OUT: expected {want!r}, got {p.stderr!r}")
        print(f"ok: {want}")
        with open(ro) as f:
            if f.read() != "keep":
                fail("read-only file changed")
    elif s == "config":
        # bad TBPROF_* values: one line naming variable and value, the
        # default used, the program and its trace unchanged; good values
        # (all boolean spellings, size suffixes) accepted silently
        bad = [("TBPROF_BUFFER_SIZE", "-1"), ("TBPROF_BUFFER_SIZE", "1T"), ("TBPROF_BUFFER_SIZE", "12Q"),
               ("TBPROF_BUFFER_SIZE", "20000000000000000000K"), ("TBPROF_BUFFER_SIZE", "1K"),
               ("TBPROF_PY_SPAN_US", "-1"), ("TBPROF_PY_SPAN_US", "18446744073709551616"),
               ("TBPROF_PY_SPAN_US", "5ms"), ("TBPROF_PY_DEPTH", "0"), ("TBPROF_NATIVE_DEPTH", "500"),
               ("TBPROF_FORK", "maybe"), ("TBPROF_TSC", "2"), ("TBPROF_ENABLE", "enable"),
               ("TBPROF_CUPTI_BUFFER_SIZE", "64K"), ("TBPROF_CUPTI_BUFFER_SIZE", "32X")]
        for var, val in bad:
            d, rc, out = run_both([HOSTPROG, "plain"], {var: val})
            complete(d, "trace.zst", malloc=1)
            p = subprocess.run([HOSTPROG, "plain"], cwd=d, env=preload_env({var: val}),
                               capture_output=True, text=True, timeout=60)
            lines = [l for l in p.stderr.splitlines() if l.startswith("tbprof: ")]
            if len(lines) != 1 or not lines[0].startswith(f"tbprof: {var}={val}: ") or "default" not in lines[0]:
                fail(f"{var}={val}: expected one line naming it, got {p.stderr!r}")
        good = {"TBPROF_BUFFER_SIZE": ["4K", "64k", "1M", "2MiB", "65536"], "TBPROF_PY_SPAN_US": ["0", "250"],
                "TBPROF_CUPTI_BUFFER_SIZE": ["256K", "8M", "1G"],
                "TBPROF_FORK": ["1", "0", "true", "FALSE", "yes", "No", "on", "off"], "TBPROF_VERBOSE": ["0", "off"]}
        for var, vals in good.items():
            for val in vals:
                p = subprocess.run([HOSTPROG, "plain"], cwd=tempfile.mkdtemp(prefix="tbp-host-"),
                                   env=preload_env({var: val}), capture_output=True, text=True, timeout=60)
                if "tbprof:" in p.stderr or p.returncode != 0:
                    fail(f"{var}={val}: rc {p.returncode}, stderr {p.stderr!r}")
        for val in ("true", "yes", "ON", "1", "2"):
            p = subprocess.run([HOSTPROG, "plain"], cwd=tempfile.mkdtemp(prefix="tbp-host-"),
                               env=preload_env({"TBPROF_VERBOSE": val}), capture_output=True, text=True, timeout=60)
            if "tbprof: tracing pid" not in p.stderr:
                fail(f"TBPROF_VERBOSE={val} did not turn verbose on: {p.stderr!r}")
        print(f"ok: {len(bad)} bad values rejected with one line each; good spellings accepted")
    elif s == "clock":
        # hook timestamps (TSC converted by the writer's calibration) lie within
        # CLOCK_MONOTONIC readings taken around each call, over 1.5 s
        d, rc, out = run_both([HOSTPROG, "clock", "brackets.txt"])
        with open(os.path.join(d, "brackets.txt")) as f:
            brackets = [tuple(map(int, l.split())) for l in f]
        p = subprocess.run([TRACEDUMP, os.path.join(d, "trace.zst")], capture_output=True, text=True)
        calls = [l for l in p.stdout.splitlines() if l.startswith("memset ")]
        if len(calls) != len(brackets):
            fail(f"{len(calls)} records for {len(brackets)} calls")
        slack = 2000   # ns
        worst = 0
        for (before, after), l in zip(brackets, calls):
            ts = int(re.search(r" ts=(\d+)", l).group(1))
            end = int(re.search(r" end=(\d+)", l).group(1))
            if end < ts:
                fail(f"end {end} before start {ts}")
            worst = max(worst, before - ts, end - after)
            if ts < before - slack or end > after + slack:
                fail(f"call [{ts}, {end}] outside its bracket [{before}, {after}] by more than {slack} ns")
        print(f"ok: {len(calls)} hook timestamps within their CLOCK_MONOTONIC brackets "
              f"(worst excess {max(worst, 0)} ns, slack {slack} ns)")
    elif s == "disabled":
        # TBPROF_ENABLE=0: hooks only forward, nothing is written
        for mode in ("plain", "threads", "fork"):
            d, rc, out = run_both([HOSTPROG, mode], {"TBPROF_ENABLE": "0"})
            expect_files(d, [])
        d, rc, out = run_both([DRVPROG_PATH()], {"TBPROF_ENABLE": "0"})
        expect_files(d, [])
        print("ok: TBPROF_ENABLE=0: programs unchanged, no trace file")
    elif s == "trace-all":
        # TBPROF_TRACE_ALL=1: a Python process without CUDA still leaves a
        # complete trace; a process that is neither Python nor a CUDA user
        # (ls, a shell, timeout) leaves none, so it cannot take the name
        d, rc, out = run_both([sys.executable, "-c", "import time; time.sleep(0.01); print('hi')"],
                              {"TBPROF_TRACE_ALL": "1"})
        expect_files(d, ["trace.zst"])
        kinds = complete(d, "trace.zst", process=1)
        print(f"ok: TBPROF_TRACE_ALL=1: python unchanged, trace with {kinds}")
        helpers = [["ls", "-l", "/usr/include/linux"], ["timeout", "60", "true"]]
        # dash and bash crash with the TSan runtime preloaded, tbprof or not
        if os.environ.get("TBP_SANITIZER") != "thread":
            helpers.append(["sh", "-c", "env >/dev/null; readlink /proc/self/exe"])
        for cmd in helpers:
            d, rc, out = run_both(cmd, {"TBPROF_TRACE_ALL": "1"})
            expect_files(d, [])
        print(f"ok: TBPROF_TRACE_ALL=1: {', '.join(c[0] for c in helpers)} leave no file")
        # a CUDA user is traced as without TBPROF_TRACE_ALL
        d, rc, out = run_both([HOSTPROG, "plain"], {"TBPROF_TRACE_ALL": "1"})
        expect_files(d, ["trace.zst"])
        complete(d, "trace.zst", malloc=1)
        print("ok: TBPROF_TRACE_ALL=1: a CUDA program is traced")
    elif s == "rank":
        # The launcher's rank variables land in the PROCESS record (tbanalyze
        # info shows them); torchrun's agent and a plain process have none.
        import json
        cases = [
            ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, [], (1, 2, 1)),
            ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, [], (3, 4, 0)),
            ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"}, [], (5, 8, 1)),
            # torchrun sets RANK for its workers: it wins over the srun task's
            ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, [], (0, 2, 0)),
            ({"RANK": "x1"}, [], None),
            ({}, [], None),
            # the agent under srun carries SLURM_PROCID but is no rank
            ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8"}, ["-m", "torch.distributed.run"], None),
            ({"TORCHELASTIC_RUN_ID": "x"}, [], None),
        ]
        for extra, pyargs, want in cases:
            env = dict(extra, TBPROF_TRACE_ALL="1")
            # a stub module of torchrun's name: the command line is the agent's
            if pyargs:
                stub = tempfile.mkdtemp(prefix="tbp-agent-")
                os.makedirs(os.path.join(stub, "torch", "distributed"))
                for f in ("torch/__init__.py", "torch/distributed/__init__.py"):
                    open(os.path.join(stub, f), "w").close()
                with open(os.path.join(stub, "torch", "distributed", "run.py"), "w") as f:
                    f.write("print('agent')\n")
                env["PYTHONPATH"] = stub
                cmd = [sys.executable] + pyargs
            else:
                cmd = [sys.executable, "-c", "print('rank')"]
            d, rc, out = run_both(cmd, env)
            name = traces(d)[0] if traces(d) else fail(f"{extra}: no trace ({traces(d)})")
            info = subprocess.run([os.environ["TBANALYZE"], "info", "--json", os.path.join(d, name)],
                                  capture_output=True, text=True)
            proc = json.loads(info.stdout)["processes"][0]
            got = (proc["rank"], proc["world_size"], proc["local_rank"]) if "rank" in proc else None
            if got != want:
                fail(f"{extra} {pyargs}: rank facts {got}, expected {want}")
            print(f"ok: {extra} {pyargs}: rank facts {got}")
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
