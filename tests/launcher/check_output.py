#!/usr/bin/env python3
"""Output naming and safety of libtbprof's trace file (suite 'launcher').

Usage: check_output.py SCENARIO
  wrapper   a wrapper script (helpers, then exec python) and `timeout 60
            python` leave exactly one trace, the Python process's, under
            the requested name
  empty     a process that recorded no event leaves no file
  symlink   a symlink at the output path is not followed; the trace goes beside
  foreign   a file that is not a trace is not overwritten; the trace goes beside
  ranks     a directory output: rank<N>.zst per rank, agent.zst, trace.zst;
            %r in a file name
Environment: TBPROF_LIB, TBANALYZE.
"""
import json
import os
import subprocess
import sys
import tempfile

LIB = os.environ["TBPROF_LIB"]
TBANALYZE = os.environ["TBANALYZE"]
PY = sys.executable


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def env_with(extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TBPROF_") or k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
            del env[k]
    env["LD_PRELOAD"] = LIB
    env.update(extra)
    return env


def run(cmd, cwd, extra, expect_rc=0):
    p = subprocess.run(cmd, cwd=cwd, env=env_with(extra), capture_output=True, text=True, timeout=120)
    if p.returncode != expect_rc:
        fail(f"{cmd}: exit status {p.returncode}, expected {expect_rc}; stderr {p.stderr!r}")
    return p


def files(d):
    return sorted(os.listdir(d))


def info(path):
    p = subprocess.run([TBANALYZE, "info", "--json", path], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"tbanalyze info {path}: rc {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def one_line(stderr, *words):
    lines = [l for l in stderr.splitlines() if l.startswith("tbprof: ")]
    if len(lines) != 1 or not all(w in lines[0] for w in words):
        fail(f"expected one 'tbprof:' line with {words}, got {stderr!r}")
    return lines[0]


SPIN = "import time\nt = time.time()\nwhile time.time() - t < 0.05: pass\nprint('done')\n"


def scenario_wrapper():
    tmp = tempfile.mkdtemp(prefix="tbp-launch-")
    script = os.path.join(tmp, "work.py")
    with open(script, "w") as f:
        f.write(SPIN)
    # As pyenv's shim and conda's wrappers do: helpers, a sub-shell, then exec.
    wrapper = os.path.join(tmp, "python-wrapper")
    with open(wrapper, "w") as f:
        f.write("#!/bin/bash\nset -e\nenv >/dev/null\nreadlink -f /proc/self/exe >/dev/null\n"
                "v=$(bash -c 'echo 3' | head -n 1)\ndirname \"$0\" >/dev/null\n"
                f"exec {PY} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    for cmd in ([wrapper, script], ["timeout", "60", PY, script], ["timeout", "60", wrapper, script]):
        d = tempfile.mkdtemp(prefix="tbp-launch-")
        p = run(cmd, d, {"TBPROF_TRACE_ALL": "1", "TBPROF_OUT": "t.zst"})
        if p.stdout != "done\n":
            fail(f"{cmd}: stdout {p.stdout!r}")
        if files(d) != ["t.zst"]:
            fail(f"{cmd}: files {files(d)}, expected exactly ['t.zst']")
        exe = info(os.path.join(d, "t.zst"))["processes"][0]["exe"]
        if os.path.realpath(exe) != os.path.realpath(PY):
            fail(f"{cmd}: t.zst is the trace of {exe}, not of python")
        print(f"ok: {cmd[0]} ...: one trace t.zst, python's")


def scenario_empty():
    d = tempfile.mkdtemp(prefix="tbp-launch-")
    # no spans, no CUDA: the process records nothing but its definitions
    run([PY, "-c", "pass"], d, {"TBPROF_TRACE_ALL": "1", "TBPROF_PY_SPAN_US": "0"})
    if files(d):
        fail(f"a process that recorded no event left {files(d)}")
    # a stale trace from an earlier run is not kept for it either: the run
    # took the name over, and an empty run leaves nothing
    run([PY, "-c", SPIN], d, {"TBPROF_TRACE_ALL": "1"})
    if files(d) != ["trace.zst"]:
        fail(f"a process with events left {files(d)}")
    print("ok: a process that recorded no event leaves no file; one that did leaves its trace")


def scenario_symlink():
    d = tempfile.mkdtemp(prefix="tbp-launch-")
    victim = os.path.join(d, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, os.path.join(d, "link.zst"))
    # also a dangling link: following it would create the file it names
    os.symlink(os.path.join(d, "elsewhere.zst"), os.path.join(d, "dangling.zst"))
    for name in ("link.zst", "dangling.zst"):
        p = run([PY, "-c", SPIN], d, {"TBPROF_TRACE_ALL": "1", "TBPROF_OUT": name})
        line = one_line(p.stderr, name, "symbolic link", "not following")
        got = [f for f in files(d) if f.startswith(name.split(".")[0] + ".") and f != name]
        if len(got) != 1 or not line.endswith(os.path.join(os.path.realpath(d), got[0])):
            fail(f"{name}: trace beside {got}, message {line!r}")
        info(os.path.join(d, got[0]))
        print(f"ok: {line}")
    with open(victim) as f:
        if f.read() != "precious\n":
            fail("the symlink's target was changed")
    if os.path.exists(os.path.join(d, "elsewhere.zst")):
        fail("the dangling symlink was followed")
    if not os.path.islink(os.path.join(d, "link.zst")):
        fail("the symlink itself was replaced")


def scenario_foreign():
    d = tempfile.mkdtemp(prefix="tbp-launch-")
    data = os.path.join(d, "results.zst")
    content = b"\x28\xb5\x2f\xfd not a tbprof trace, a zstd file of the user's\n"
    with open(data, "wb") as f:
        f.write(content)
    for out in ("results.zst", "results.zst", os.path.join(d, "results.zst")):
        p = run([PY, "-c", SPIN], d, {"TBPROF_TRACE_ALL": "1", "TBPROF_OUT": out})
        one_line(p.stderr, out, "not a tbprof trace", "not overwriting")
    with open(data, "rb") as f:
        if f.read() != content:
            fail("the foreign file was changed")
    beside = [f for f in files(d) if f != "results.zst"]
    if len(beside) != 3:
        fail(f"expected three traces beside it, got {beside}")
    for f in beside:
        info(os.path.join(d, f))
    # an empty file holds nothing to lose: taken
    open(os.path.join(d, "empty.zst"), "w").close()
    run([PY, "-c", SPIN], d, {"TBPROF_TRACE_ALL": "1", "TBPROF_OUT": "empty.zst"})
    info(os.path.join(d, "empty.zst"))
    print(f"ok: a file that is not a trace is kept; traces beside it: {beside}; an empty file is taken")


def scenario_ranks():
    d = tempfile.mkdtemp(prefix="tbp-launch-")
    out = os.path.join(d, "run")
    os.mkdir(out)
    for extra in ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
                  {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"},
                  {"TORCHELASTIC_RUN_ID": "job"}, {}):
        run([PY, "-c", SPIN], d, dict(extra, TBPROF_TRACE_ALL="1", TBPROF_OUT=out))
    want = ["agent.zst", "rank0.zst", "rank1.zst", "trace.zst"]
    if files(out) != want:
        fail(f"directory output: {files(out)}, expected {want}")
    for r in (0, 1):
        proc = info(os.path.join(out, f"rank{r}.zst"))["processes"][0]
        if proc.get("rank") != r or proc.get("world_size") != 2:
            fail(f"rank{r}.zst: process {proc}")
    # a name ending in '/' is a directory, created if missing
    run([PY, "-c", SPIN], d, {"RANK": "3", "WORLD_SIZE": "4", "TBPROF_TRACE_ALL": "1", "TBPROF_OUT": "new/"})
    if files(os.path.join(d, "new")) != ["rank3.zst"]:
        fail(f"new/: {files(os.path.join(d, 'new'))}")
    for extra, name in (({"RANK": "2", "WORLD_SIZE": "4"}, "t-2.zst"), ({}, "t-norank.zst"),
                        ({"TORCHELASTIC_RUN_ID": "job"}, "t-agent.zst")):
        run([PY, "-c", SPIN], d, dict(extra, TBPROF_TRACE_ALL="1", TBPROF_OUT="t-%r.zst"))
        if not os.path.exists(os.path.join(d, name)):
            fail(f"%r with {extra}: {files(d)}, expected {name}")
    # torchrun's agent with a file name: named apart, the ranks keep the name
    run([PY, "-c", SPIN], d, {"TORCHELASTIC_RUN_ID": "job", "TBPROF_TRACE_ALL": "1", "TBPROF_OUT": "job.zst"})
    if not os.path.exists(os.path.join(d, "job.agent.zst")) or os.path.exists(os.path.join(d, "job.zst")):
        fail(f"agent with TBPROF_OUT=job.zst: {files(d)}, expected job.agent.zst")
    print(f"ok: directory output {want}, new/rank3.zst, %r expanded, the agent's job.agent.zst")


def main():
    if len(sys.argv) != 2:
        fail(__doc__)
    fn = globals().get("scenario_" + sys.argv[1])
    if not fn:
        fail("unknown scenario " + sys.argv[1])
    fn()


if __name__ == "__main__":
    main()
