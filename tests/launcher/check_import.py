#!/usr/bin/env python3
"""`import tbprof` in the traced program, whichever Python runs it (issue 30 item 5):
- `tbprof record --on-demand -- python3 -c "import tbprof; ..."` with no PYTHONPATH imports the build
  tree's package (the source tree's python/, what the launcher adds) and can capture a region with it;
- a PYTHONPATH the caller set is kept, its entries first (a module of the caller's named tbprof wins);
- python/install_pth.sh (the meson install step) writes tbprof.pth into the site-packages of the
  python3 on PATH -- here a fresh venv's -- naming only the package's directory, so that interpreter
  imports tbprof outside `tbprof record`; a staged install (DESTDIR) writes nothing.
Environment: TBPROF_CMD, TBANALYZE, TBP_SOURCE_ROOT."""
import os
import subprocess
import sys
import tempfile

TBPROF = os.environ["TBPROF_CMD"]
TBANALYZE = os.environ["TBANALYZE"]
SRC = os.environ["TBP_SOURCE_ROOT"]
failures = []

REGION = """
import os, sys, time, tbprof
print(os.path.dirname(os.path.dirname(os.path.abspath(tbprof.__file__))))
def work():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.0003:
        pass
with tbprof.capture(sys.argv[1]):
    for _ in range(300):
        work()
"""


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def main():
    pkg_dir = os.path.realpath(os.path.join(SRC, "python"))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ)
        for var in ("LD_PRELOAD", "PYTHONPATH"):
            env.pop(var, None)
        region = os.path.join(d, "region.zst")
        script = os.path.join(d, "region.py")
        with open(script, "w") as f:
            f.write(REGION)
        # from a directory where no tbprof lies: only the launcher's PYTHONPATH can find it
        p = subprocess.run([TBPROF, "record", "--on-demand", "-o", os.path.join(d, "t.zst"), "--", "python3", script,
                            region], capture_output=True, text=True, env=env, cwd=d, timeout=120)
        if p.returncode != 0 or os.path.realpath(p.stdout.strip()) != pkg_dir:
            fail(f"tbprof record --on-demand -- python3 (import tbprof): exit {p.returncode}, imported from "
                 f"{p.stdout.strip()!r} (want {pkg_dir}), {p.stderr[-500:]!r}")
        else:
            r = subprocess.run([TBANALYZE, "info", region], capture_output=True, text=True, timeout=60)
            if r.returncode != 0 or "py_span" not in r.stdout:
                fail(f"the region captured through the imported module: exit {r.returncode}, {r.stdout[-300:]!r}")
        # the caller's PYTHONPATH first: its own module named tbprof is the one imported
        own = os.path.join(d, "own")
        os.makedirs(os.path.join(own, "tbprof"))
        with open(os.path.join(own, "tbprof", "__init__.py"), "w") as f:
            f.write("MINE = True\n")
        p = subprocess.run([TBPROF, "record", "--on-demand", "--", "python3", "-c",
                            "import os, tbprof; print(getattr(tbprof, 'MINE', False), os.environ['PYTHONPATH'])"],
                           capture_output=True, text=True, env=dict(env, PYTHONPATH=own), cwd=d, timeout=120)
        want = f"True {own}:{pkg_dir}"
        if p.returncode != 0 or os.path.realpath(p.stdout.split(":")[-1].strip()) != pkg_dir \
                or not p.stdout.startswith(f"True {own}:"):
            fail(f"a PYTHONPATH of the caller's: exit {p.returncode}, {p.stdout!r} (want {want!r}), {p.stderr[-300:]!r}")
        # the install step, for the python3 on PATH (a venv's here)
        venv = os.path.join(d, "venv")
        r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"SKIP part: no venv ({r.stderr[-200:]})")
            return
        venv_env = dict(env, PATH=os.path.join(venv, "bin") + os.pathsep + env["PATH"], MESON_INSTALL_PREFIX="/p",
                        MESON_INSTALL_DESTDIR_PREFIX="/p")
        venv_env.pop("DESTDIR", None)
        r = subprocess.run(["sh", os.path.join(SRC, "python", "install_pth.sh"), pkg_dir], capture_output=True,
                           text=True, env=venv_env, cwd=d)
        check = [os.path.join(venv, "bin", "python3"), "-c", "import os, tbprof; print(os.path.dirname(os.path.dirname("
                 "os.path.abspath(tbprof.__file__))))"]
        p = subprocess.run(check, capture_output=True, text=True, env=env, cwd=d)
        if r.returncode != 0 or p.returncode != 0 or os.path.realpath(p.stdout.strip()) != pkg_dir:
            fail(f"install_pth.sh into a venv: {r.stdout!r} {r.stderr!r}; import there: exit {p.returncode}, "
                 f"{p.stdout!r} {p.stderr[-300:]!r}")
        pths = [os.path.join(dp, f) for dp, _, fs in os.walk(venv) for f in fs if f == "tbprof.pth"]
        if len(pths) != 1 or open(pths[0]).read() != pkg_dir + "\n":
            fail(f"tbprof.pth in the venv: {pths} (want one naming {pkg_dir} alone)")
        for p_ in pths:
            os.unlink(p_)
        r = subprocess.run(["sh", os.path.join(SRC, "python", "install_pth.sh"), pkg_dir], capture_output=True,
                           text=True, env=dict(venv_env, MESON_INSTALL_DESTDIR_PREFIX="/stage/p"), cwd=d)
        if r.returncode != 0 or [1 for dp, _, fs in os.walk(venv) for f in fs if f == "tbprof.pth"]:
            fail(f"a staged install wrote tbprof.pth: {r.stdout!r}")


if __name__ == "__main__":
    main()
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
