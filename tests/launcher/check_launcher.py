#!/usr/bin/env python3
"""The `tbprof` command (suite 'launcher').

Usage: check_launcher.py SCENARIO
  help      tbprof --help / record --help / demo --help: man-page sections, every option
  badopts   bad command lines (every verb): one line naming the option and its verb's --help, exit status 3
            (common/exit_status.def), the command never runs
  exit      the exit status is the command's, also when it dies of a signal
  forward   a signal sent to tbprof reaches the command
  env       options become TBPROF_* variables; the caller's LD_PRELOAD is kept
  wrapper   a wrapper script under tbprof record leaves one trace, named
  report    --report runs tbanalyze on the trace
  cut       a real trace cut before its first event (inside its first frame of events, right after the header) is an error
            (exit 2, file and offset); cut after some events, a warning and a report (exit 0)
  refuse    an output name that is an existing file but not a trace (record, capture, demo -o): exit 2 before anything
            runs, the file unchanged; a trace there is written over
  exitdoc   doc/launcher.md's exit-status table is common/exit_status.def's, row for row, and both commands' --help
            print it
Environment: TBPROF_CMD (build/launcher/tbprof), TBPROF_LIB, TBANALYZE.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TBPROF = os.environ["TBPROF_CMD"]
LIB = os.path.realpath(os.environ["TBPROF_LIB"])
PY = sys.executable


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TBPROF_") and k != "LD_PRELOAD"}
    env.update(extra or {})
    return env


def tbprof(args, cwd=None, extra=None, timeout=120, **kw):
    return subprocess.run([TBPROF] + args, cwd=cwd or tempfile.mkdtemp(prefix="tbp-cmd-"), env=clean_env(extra),
                          capture_output=True, text=True, timeout=timeout, **kw)


def scenario_help():
    p = tbprof(["--help"])
    if p.returncode != 0 or "SYNOPSIS" not in p.stdout or "tbprof record" not in p.stdout:
        fail(f"tbprof --help: rc {p.returncode}, {p.stdout[:200]!r}")
    p = tbprof(["record", "--help"])
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "EXAMPLES"):
        if "\n" + section + "\n" not in "\n" + p.stdout:
            fail(f"record --help lacks the {section} section")
    for opt in ("--output", "--trace-all", "--python-depth", "--span-us", "--no-python", "--no-cupti", "--native",
                "--native-depth", "--buffer-size", "--no-fork", "--hip-events", "--report", "--quiet", "--verbose"):
        if opt not in p.stdout:
            fail(f"record --help does not document {opt}")
    if p.returncode != 0:
        fail(f"record --help: rc {p.returncode}")
    p = tbprof([])
    if p.returncode != 3 or p.stderr.count("\n") != 1 or "see tbprof --help" not in p.stderr or "record" not in p.stderr:
        fail(f"tbprof without arguments: rc {p.returncode}, stderr {p.stderr[:300]!r} (want 3, one line)")
    p = tbprof(["--help"])
    if "EXIT STATUS" not in p.stdout or not all(f"\n    {c:3d}  " in p.stdout for c in (0, 1, 2, 3, 4, 5, 126, 127)):
        fail(f"tbprof --help does not list every exit status: {p.stdout[p.stdout.find('EXIT STATUS'):][:600]!r}")
    p = tbprof(["demo", "--help"])
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "FILES", "EXIT STATUS"):
        if "\n" + section + "\n" not in "\n" + p.stdout:
            fail(f"demo --help lacks the {section} section")
    if p.returncode != 0 or "SIMULATED" not in p.stdout or "tbprof demo" not in tbprof(["--help"]).stdout:
        fail(f"demo --help: rc {p.returncode}, or tbprof --help does not name demo")
    p = tbprof(["--version"])
    if p.returncode != 0 or not p.stdout.startswith("tbprof "):
        fail(f"--version: {p.stdout!r}")
    print("ok: --help (every exit status), record --help (all sections and options), demo --help, no arguments: 3, "
          "--version")


def scenario_badopts():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    marker = os.path.join(d, "ran")
    with open(os.path.join(d, "train.py"), "w") as f:
        f.write("print('the script')\n")
    cmd = ["touch", marker]
    cases = [
        (["record", "--bogus", "--"] + cmd, "'--bogus'"),
        (["record", "-x"] + cmd, "'-x'"),
        (["record", "--python-depth", "0"] + cmd, "--python-depth: '0'"),
        (["record", "--python-depth=abc"] + cmd, "--python-depth: 'abc'"),
        (["record", "--span-us", "-5"] + cmd, "--span-us: '-5'"),
        (["record", "--buffer-size", "12Q"] + cmd, "--buffer-size: '12Q'"),
        (["record", "--buffer-size", "1K"] + cmd, "--buffer-size: '1K'"),
        (["record", "--native-depth", "500"] + cmd, "--native-depth: '500'"),
        # the launcher checks with libtbprof's parser and ranges (tbprof/options.def): it used to let
        # --flight 100000 through, which libtbprof then ignored with a warning
        (["record", "--flight", "100000"] + cmd, "--flight: '100000'"),
        (["record", "--flight-slow=0"] + cmd, "--flight-slow: '0'"),
        (["record", "--flight-mem", "512K"] + cmd, "--flight-mem: '512K'"),
        (["record", "--capture-range", "nvtx"] + cmd, "--capture-range: 'nvtx'"),
        (["record", "-o", ""] + cmd, "-o: empty"),
        # a name that is not a trace's is refused before the command runs (it used to run and write
        # the trace as train.PID.py beside the script)
        # (an existing one, as train.py here, is a file of another kind: exit 2, scenario_refuse)
        (["record", "--output=out.json"] + cmd, "--output=out.json: 'out.json'"),
        (["record", "-o", "t-%p"] + cmd, "-o: 't-%p'"),
        (["capture", "1", "-o", "notes.txt"], "-o: 'notes.txt'"),
        (["demo", "-o", "notes.txt"], "tbprof demo: -o: 'notes.txt'"),
        (["record", "--output"], "--output needs a value"),
        (["record"], "no command"),
        (["record", "--trace-all", "--"], "no command"),
        (["recrod"] + cmd, "'recrod'"),
        (["demo", "--bogus"], "tbprof demo: unexpected argument '--bogus'"),
        (["demo", "-o", ""], "tbprof demo: -o: empty"),
        (["demo", "--python"], "tbprof demo: --python needs a value"),
        (["capture"], "tbprof capture: no PID given"),
        (["capture", "12x"], "'12x' is not a process id"),
        (["capture", "1234", "--bogus"], "unknown argument '--bogus'"),
        (["capture", "1234", "--for", "0"], "--for: '0'"),
        (["capture", "1234", "--for", "1", "--steps", "2"], "one or the other"),
    ]
    for args, words in cases:
        p = tbprof(args, cwd=d)
        lines = p.stderr.strip().splitlines()
        see = "see tbprof --help" if args[0] == "recrod" else f"see tbprof {args[0]} --help"
        if p.returncode != 3 or len(lines) != 1 or words not in lines[0] or not lines[0].endswith(see):
            fail(f"tbprof {args}: rc {p.returncode}, stderr {p.stderr!r}; expected 3 and one line with {words!r} "
                 f"ending {see!r}")
        if os.path.exists(marker):
            fail(f"tbprof {args}: the command ran")
    # tbprof report is tbanalyze: the same status for the same mistake
    p = tbprof(["report", "--tops"], cwd=d)
    if p.returncode != 3 or p.stderr.count("\n") != 1 or "--tops" not in p.stderr:
        fail(f"tbprof report --tops: rc {p.returncode}, stderr {p.stderr!r} (want 3, one line naming --tops)")
    # good spellings are accepted
    p = tbprof(["record", "-q", "--buffer-size=64K", "--span-us", "0", "--python-depth=8", "--native-depth", "4",
                "--"] + cmd, cwd=d)
    if p.returncode != 0 or not os.path.exists(marker):
        fail(f"good options: rc {p.returncode}, {p.stderr!r}")
    with open(os.path.join(d, "train.py")) as f:
        if f.read() != "print('the script')\n" or [n for n in os.listdir(d) if n.startswith("train.")] != ["train.py"]:
            fail("-o train.py: the script was touched or a train.*.py written")
    # TBPROF_TRACE_ALL=false is false for the launcher too (its summary used to take any value but 0 as true)
    p = tbprof(["record", "--", "true"], cwd=d, extra={"TBPROF_TRACE_ALL": "false"})
    if p.returncode != 0 or "--trace-all traces CPU-only" not in p.stderr:
        fail(f"TBPROF_TRACE_ALL=false: the summary does not read it as false: {p.stderr!r}")
    print(f"ok: {len(cases)} bad command lines: exit 3, one line naming the option and the verb's --help, "
          f"nothing run")


def expect_like_bare(cmd, want_rc):
    """tbprof record CMD ends as CMD does: subprocess sees the same
    returncode (negative: death by that signal), a shell the same $?."""
    bare = subprocess.run(cmd, capture_output=True, env=clean_env(), timeout=60)
    traced = tbprof(["record", "-q", "--"] + cmd)
    if bare.returncode != want_rc or traced.returncode != want_rc:
        fail(f"{cmd}: bare rc {bare.returncode}, under tbprof {traced.returncode}, expected {want_rc}")
    sh = subprocess.run(["sh", "-c", '"$@"; echo "status=$?"', "sh", TBPROF, "record", "-q", "--"] + cmd,
                        capture_output=True, text=True, env=clean_env(), timeout=60)
    sh_bare = subprocess.run(["sh", "-c", '"$@"; echo "status=$?"', "sh"] + cmd,
                             capture_output=True, text=True, env=clean_env(), timeout=60)
    if sh.stdout.splitlines()[-1] != sh_bare.stdout.splitlines()[-1]:
        fail(f"{cmd}: a shell sees {sh.stdout.splitlines()[-1]} under tbprof, {sh_bare.stdout.splitlines()[-1]} bare")
    return sh.stdout.splitlines()[-1]


def scenario_exit():
    seen = []
    for code in (0, 1, 3, 42, 255):
        seen.append(expect_like_bare([PY, "-c", f"import sys; sys.exit({code})"], code))
    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGSEGV, signal.SIGABRT):
        # the core-dumping ones without a core file
        script = "import os, signal, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "
        if sig != signal.SIGKILL:
            script += f"signal.signal({int(sig)}, signal.SIG_DFL); "
        script += f"os.kill(os.getpid(), {int(sig)})"
        seen.append(expect_like_bare([PY, "-c", script], -int(sig)))
    # a CUDA program's status through the preload too (tracing on)
    p = tbprof(["record", "--trace-all", "--", PY, "-c", "import time; time.sleep(0.02); raise SystemExit(5)"])
    if p.returncode != 5 or "tbprof: trace written to trace.zst" not in p.stderr:
        fail(f"traced python exit 5: rc {p.returncode}, {p.stderr!r}")
    noexec = os.path.join(tempfile.mkdtemp(prefix="tbp-cmd-"), "data.txt")
    with open(noexec, "w") as f:
        f.write("not a program\n")
    os.chmod(noexec, 0o644)
    for cmd, rc in ((["/nonexistent/cmd"], 127), ([noexec], 126)):
        p = tbprof(["record", "--"] + cmd)
        if p.returncode != rc or cmd[0] not in p.stderr:
            fail(f"{cmd}: rc {p.returncode}, expected {rc}; {p.stderr!r}")
    print(f"ok: exit statuses and signal deaths as without tbprof ({', '.join(seen)}); 127/126")


def scenario_forward():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    script = os.path.join(d, "waiter.py")
    with open(script, "w") as f:
        f.write("import signal, sys, time\n"
                "def on(sig, frame):\n"
                "    print('got', signal.Signals(sig).name, flush=True)\n"
                "    sys.exit(7)\n"
                "for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):\n"
                "    signal.signal(s, on)\n"
                "print('ready', flush=True)\n"
                "time.sleep(60)\n"
                "sys.exit(1)\n")
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):
        p = subprocess.Popen([TBPROF, "record", "-q", "--", PY, script], cwd=d, env=clean_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.stdout.readline() != "ready\n":
            fail("the command did not start")
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
        if p.returncode != 7 or out != f"got {sig.name}\n":
            fail(f"{sig.name} to tbprof: rc {p.returncode}, stdout {out!r}, stderr {err!r}")
    # the command dies of the forwarded signal: tbprof dies of it too
    p = subprocess.Popen([TBPROF, "record", "-q", "--", PY, "-c", "print('ready', flush=True); import time; time.sleep(60)"],
                         cwd=d, env=clean_env(), stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    if p.returncode != -signal.SIGTERM:
        fail(f"SIGTERM to tbprof, command with default handler: rc {p.returncode}")
    print("ok: TERM, USR1, HUP sent to tbprof reach the command; its death by TERM is tbprof's")


def scenario_env():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    show = [PY, "-c", "import os; print(os.environ.get('LD_PRELOAD')); "
                      "print(sorted((k, v) for k, v in os.environ.items() if k.startswith('TBPROF_')))"]
    args = ["record", "-q", "-o", "x/%r.zst", "--python-depth", "9", "--span-us=50", "--no-cupti", "--native",
            "--native-depth", "5", "--buffer-size", "1M", "--trace-all", "--no-fork", "--hip-events", "-v",
            "--no-python", "--"]
    p = tbprof(args + show, cwd=d, extra={"TBPROF_TSC": "0"})
    lines = p.stdout.splitlines()
    if p.returncode != 0 or len(lines) != 2:
        fail(f"rc {p.returncode}, {p.stdout!r} {p.stderr!r}")
    if lines[0] != LIB:
        fail(f"LD_PRELOAD {lines[0]!r}, expected the absolute {LIB}")
    want = [("TBPROF_BUFFER_SIZE", "1M"), ("TBPROF_CUPTI", "0"), ("TBPROF_FORK", "0"), ("TBPROF_HIP_EVENTS", "1"),
            ("TBPROF_NATIVE", "1"), ("TBPROF_NATIVE_DEPTH", "5"), ("TBPROF_OUT", os.path.join(os.path.realpath(d), "x/%r.zst")),
            ("TBPROF_PYTHON", "0"), ("TBPROF_PY_DEPTH", "9"), ("TBPROF_PY_SPAN_US", "50"),
            ("TBPROF_TRACE_ALL", "1"), ("TBPROF_TSC", "0"), ("TBPROF_VERBOSE", "1")]
    if lines[1] != repr(want):
        fail(f"TBPROF_* variables {lines[1]}, expected {want}")
    # the caller's LD_PRELOAD entries stay, first
    other = "libm.so.6"
    p = tbprof(["record", "-q", "--"] + show, cwd=d, extra={"LD_PRELOAD": other})
    if p.stdout.splitlines()[0] != f"{other}:{LIB}":
        fail(f"LD_PRELOAD {p.stdout.splitlines()[0]!r}, expected {other}:{LIB}")
    # a program that changes directory before tracing starts: the trace is
    # still where tbprof was asked to put it
    sub = os.path.join(d, "elsewhere")
    os.mkdir(sub)
    p = tbprof(["record", "-o", "cd.zst", "--", PY, "-c",
                f"import os, ctypes; os.chdir({sub!r}); ctypes.CDLL(None).tbprof_marker(0, 0, b'x')"], cwd=d)
    if p.returncode != 0 or not os.path.exists(os.path.join(d, "cd.zst")) or os.listdir(sub):
        fail(f"chdir before tracing: rc {p.returncode}, {os.listdir(d)}, {os.listdir(sub)}, {p.stderr!r}")
    # the caller's own TBPROF_OUT (no -o) is passed on as it is
    p = tbprof(["record", "-q", "--"] + show, cwd=d, extra={"TBPROF_OUT": "mine-%p.zst"})
    if "('TBPROF_OUT', 'mine-%p.zst')" not in p.stdout:
        fail(f"inherited TBPROF_OUT: {p.stdout!r}")
    print(f"ok: options -> {len(want) - 1} TBPROF_* variables, an inherited one kept; LD_PRELOAD {other}:libtbprof; "
          "-o absolute (a chdir before tracing starts does not move the trace)")


def scenario_wrapper():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    wrapper = os.path.join(d, "python3")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nenv >/dev/null\nreadlink -f \"$0\" >/dev/null\nexec {PY} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    work = os.path.join(d, "work")
    os.mkdir(work)
    spin = "import time\nt = time.time()\nwhile time.time() - t < 0.05: pass\n"
    for cmd in ([wrapper, "-c", spin], ["timeout", "60", wrapper, "-c", spin]):
        for f in os.listdir(work):
            os.unlink(os.path.join(work, f))
        p = tbprof(["record", "--trace-all", "-o", "train.zst", "--"] + cmd, cwd=work)
        if p.returncode != 0 or sorted(os.listdir(work)) != ["train.zst"]:
            fail(f"{cmd}: rc {p.returncode}, files {sorted(os.listdir(work))}, stderr {p.stderr!r}")
        if p.stderr.strip() != "tbprof: trace written to train.zst":
            fail(f"{cmd}: summary {p.stderr!r}")
    print("ok: a wrapper script (and timeout + wrapper) under tbprof record: one trace, train.zst, reported")


def scenario_report():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    spin = "import time\nt = time.time()\nwhile time.time() - t < 0.05: pass\nprint('out')\n"
    p = tbprof(["record", "--trace-all", "--report", "--", PY, "-c", spin], cwd=d)
    if p.returncode != 0 or not p.stdout.startswith("out\ntbanalyze report: trace.zst"):
        fail(f"--report: rc {p.returncode}, stdout {p.stdout[:300]!r}, stderr {p.stderr!r}")
    p = tbprof(["report", "info", os.path.join(d, "trace.zst")])
    if p.returncode != 0 or "process:" not in p.stdout:
        fail(f"tbprof report info: rc {p.returncode}, {p.stdout[:200]!r} {p.stderr!r}")
    # the ranks of a job in a directory: one report, tbanalyze DIR's
    script = os.path.join(d, "spin.py")
    with open(script, "w") as f:
        f.write(spin)
    two = f"RANK=0 WORLD_SIZE=2 {PY} {script} && RANK=1 WORLD_SIZE=2 {PY} {script}"
    p = tbprof(["record", "--trace-all", "--report", "-o", "ranks", "--", "sh", "-c", two], cwd=d)
    if p.returncode != 0 or "tbanalyze ranks: 2 traces" not in p.stdout or p.stdout.count("tbanalyze ") != 1:
        fail(f"--report on a directory: rc {p.returncode}, stdout {p.stdout[:500]!r}, stderr {p.stderr!r}")
    print("ok: --report prints tbanalyze's report after the command's output (a directory of ranks: one "
          "cross-rank report); tbprof report runs tbanalyze")


def scenario_cut():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    # ~1 s of Python calls over 100 us each: spans, written in several frames
    spin = ("import time\ndef work():\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.0003: pass\n"
            "t0 = time.time()\nwhile time.time() - t0 < 1.0: work()\n")
    p = tbprof(["record", "--trace-all", "-o", "full.zst", "--", PY, "-c", spin], cwd=d)
    full = os.path.join(d, "full.zst")
    if p.returncode != 0 or not os.path.exists(full):
        fail(f"record: rc {p.returncode}, {p.stderr!r}")
    with open(full, "rb") as f:
        data = f.read()
    header_end = 8 + int.from_bytes(data[4:8], "little")
    analyzer = os.environ["TBANALYZE"]

    def analyze(name, size, *verb):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data[:size])
        return path, subprocess.run([analyzer, *verb, path], capture_output=True, text=True, timeout=60)

    # A cut inside the first frame that holds events: its end is the shortest cut from which info reads
    # events (bisected: how the first records fall into frames follows the host's speed -- libtbprof's
    # writer may drain before the program's first event, then the definitions are a frame of their own,
    # and a loaded host's frames are small, so no fixed size is inside that frame every time).  One byte
    # short of its end: the file ends inside the frame after the header or the definitions, and dump
    # prints the definitions it read (a whole frame of their own) before the error.
    lo, hi = header_end + 1, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        if analyze("probe.zst", mid, "info")[1].returncode == 0:
            hi = mid
        else:
            lo = mid + 1
    cut = lo - 1
    for name, size, reason in (("cut-first-events.zst", cut, r"no events: the file ends inside the frame after its "
                                                              rf"(header|definitions) \({cut} bytes"),
                               ("header.zst", header_end, r"no events: the file ends right after its header")):
        for verb in ((), ("info",), ("dump",), ("export", "--format", "kineto", "-o", os.path.join(d, "k.json"))):
            path, r = analyze(name, size, *verb)
            m = re.match(f"tbanalyze: {re.escape(path)}: offset ([0-9]+): {reason}", r.stderr)
            at = int(m.group(1)) if m else -1
            read_first = verb == ("dump",) and all(line.split()[1:2] == ["defs:0"] for line in r.stdout.splitlines())
            if (r.returncode != 2 or (r.stdout and not read_first) or not m or r.stderr.count("\n") != 1
                    or not header_end <= at <= size):
                fail(f"tbanalyze {' '.join(verb)} on {size} of {len(data)} bytes: rc {r.returncode} (want 2), "
                     f"stderr {r.stderr!r} (want offset {header_end}..{size}: {reason}), "
                     f"stdout {r.stdout[:200]!r}")
    # cut after some frames: today's warning, a report of what was read, exit 0
    path, r = analyze("cut-later.zst", len(data) * 2 // 3)
    events = [line for line in r.stdout.splitlines() if line.startswith("trace: ")]
    if (r.returncode != 0 or "warning: trace truncated at offset" not in r.stderr or not events
            or events[0].split()[1] == "0"):
        fail(f"tbanalyze on {len(data) * 2 // 3} of {len(data)} bytes: rc {r.returncode}, stderr {r.stderr!r}, "
             f"last lines {r.stdout.splitlines()[-3:]}")
    print(f"ok: a real trace ({len(data)} bytes, header {header_end}) cut inside its first frame of events ({cut} bytes) "
          f"and right after its header: "
          f"exit 2 with file and offset from report, info, dump, export; cut at 2/3: warning, {events[0]}, exit 0")


def scenario_refuse():
    d = tempfile.mkdtemp(prefix="tbp-cmd-")
    marker = os.path.join(d, "ran")
    notes = os.path.join(d, "train.py")
    with open(notes, "w") as f:
        f.write("print('the user program')\n")
    for args in (["record", "-o", "train.py", "--", "touch", marker],
                 ["record", "--output=train.py", "touch", marker],
                 ["capture", str(os.getpid()), "-o", "train.py"],
                 ["demo", "-o", "train.py", "--python", "/nonexistent/python"]):
        p = tbprof(args, cwd=d)
        if (p.returncode != 2 or p.stderr.count("\n") != 1 or "train.py: exists and is not a trace" not in p.stderr
                or os.path.exists(marker) or open(notes).read() != "print('the user program')\n"):
            fail(f"tbprof {args}: rc {p.returncode}, stderr {p.stderr!r}, ran {os.path.exists(marker)} "
                 f"(want 2, one line, nothing run, the file unchanged)")
    # a directory OUT that cannot be made (a file on its path): exit 4, nothing run
    p = tbprof(["record", "-o", "train.py/traces", "--", "touch", marker], cwd=d)
    if p.returncode != 4 or p.stderr.count("\n") != 1 or "cannot create directory" not in p.stderr or os.path.exists(marker):
        fail(f"record -o under a file: rc {p.returncode}, stderr {p.stderr!r} (want 4, one line, nothing run)")
    # an empty file and an earlier trace are the output's to take
    open(os.path.join(d, "empty.zst"), "w").close()
    p = tbprof(["record", "-q", "-o", "empty.zst", "--", "touch", marker], cwd=d)
    if p.returncode != 0 or not os.path.exists(marker):
        fail(f"record -o over an empty file: rc {p.returncode}, {p.stderr!r}")
    print("ok: record -o / capture -o / demo -o naming a file that is not a trace: exit 2, one line, nothing run, unchanged")


def scenario_exitdoc():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "common", "exit_status.def")) as f:
        rows = re.findall(r'^TBP_EXIT\((\w+), (\d+), "(.*)"\)$', f.read(), re.M)
    with open(os.path.join(root, "doc", "launcher.md")) as f:
        doc = f.read()
    m = re.search(r"<!-- exit-status-table.*?-->\n(.*?)<!-- end of exit-status-table -->", doc, re.S)
    if not rows or not m:
        fail(f"no rows in exit_status.def ({len(rows)}) or no table in doc/launcher.md")
    table = [tuple(c.strip() for c in line.strip("|").split("|")) for line in m.group(1).strip().splitlines()[2:]]
    want = [(code, meaning) for _, code, meaning in rows]
    if table != want:
        fail(f"doc/launcher.md's exit-status table differs from common/exit_status.def:\n{table}\n{want}")
    codes = [int(c) for _, c, _ in rows]
    if len(set(codes)) != len(codes):
        fail(f"a status with two meanings: {codes}")
    for cmd in ([TBPROF, "--help"], [os.environ["TBANALYZE"], "--help"]):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        flat = " ".join(out.split())
        for _, code, meaning in rows:
            if f" {code} {meaning} " not in flat + " ":
                fail(f"{' '.join(cmd)} does not print status {code} as {meaning!r}")
    print(f"ok: {len(rows)} exit statuses, one meaning each, the same in exit_status.def, doc/launcher.md, "
          f"tbprof --help and tbanalyze --help")


def main():
    if len(sys.argv) != 2:
        fail(__doc__)
    fn = globals().get("scenario_" + sys.argv[1])
    if not fn:
        fail("unknown scenario " + sys.argv[1])
    fn()


if __name__ == "__main__":
    main()
