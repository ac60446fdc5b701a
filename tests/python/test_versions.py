"""The same checks (callpaths, linetable, spans, unsupported, the preload on
simgpu, and deep recursion under the preload) under
every other CPython 3.10-3.13 installed on this machine (python3.X on PATH,
pyenv versions), plus the layout table against each one's own headers.
Exit 77 (skipped) when no other version is installed."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("TBP_SOURCE_ROOT", os.path.dirname(os.path.dirname(HERE)))
# The Python module (libtbprof/python*.c, as libtbprof/meson.build lists them) and the C library lookups it uses.
PY_MODULE_SOURCES = sorted(glob.glob(os.path.join(SOURCE_ROOT, "libtbprof", "python*.c"))) + [
    os.path.join(SOURCE_ROOT, "libtbprof", "libc_real.c")]


def runs_as(exe, minor):
    try:
        out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[1])"], capture_output=True,
                             text=True, timeout=30)
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.strip() == str(minor)


def interpreters():
    found = {}
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv")]
    for minor in (10, 11, 12, 13):
        if minor == sys.version_info[1]:
            continue  # the other tests of this suite cover it
        candidates = []
        for root in roots:
            if root:
                candidates += sorted(glob.glob(os.path.join(root, "versions", "3.%d.*" % minor, "bin", "python3")))
        candidates.append(shutil.which("python3.%d" % minor))  # may be a shim that refuses to run
        for c in candidates:
            if c and os.access(c, os.X_OK) and runs_as(c, minor):
                found[minor] = c
                break
    return found


found = interpreters()
if not found:
    print("skip: no other CPython 3.10-3.13 installed")
    sys.exit(77)

failures = []
tmp = tempfile.mkdtemp()
for minor, exe in sorted(found.items()):
    for test in ("callpaths", "linetable", "spans", "unsupported", "preload", "deep_recursion"):
        out = subprocess.run([exe, os.path.join(HERE, "test_%s.py" % test)], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, PYTHONPATH=HERE))
        status = {0: "ok  ", 77: "skip"}.get(out.returncode, "FAIL")
        print("%s 3.%d %s" % (status, minor, test))
        if out.returncode not in (0, 77):
            print("\n".join("    " + line for line in (out.stdout + out.stderr).splitlines()
                            if not line.startswith("ok")))
            failures.append("3.%d %s" % (minor, test))
    include = subprocess.run([exe, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                             capture_output=True, text=True).stdout.strip()
    header = "internal/pycore_frame.h" if minor >= 11 else "frameobject.h"
    if not os.path.exists(os.path.join(include, header)):
        print("     3.%d offsets: no headers, not checked" % minor)
        continue
    binary = os.path.join(tmp, "offsets_3_%d" % minor)
    cc = os.environ.get("CC", "cc")
    build = subprocess.run([cc, "-std=gnu11", "-D_GNU_SOURCE", "-I" + include,
                            "-I" + os.path.join(SOURCE_ROOT, "trace", "include"),
                            "-I" + os.path.join(SOURCE_ROOT, "libtbprof"),
                            os.path.join(HERE, "offsets.c"), os.path.join(HERE, "fake_core.c"),
                            *PY_MODULE_SOURCES, "-o", binary,
                            "-lpthread", "-ldl"], capture_output=True, text=True)
    if build.returncode:
        print("FAIL 3.%d offsets: build failed\n%s" % (minor, build.stderr[-1500:]))
        failures.append("3.%d offsets build" % minor)
        continue
    run = subprocess.run([binary], capture_output=True, text=True)
    print("%s 3.%d offsets: %s" % ("ok  " if run.returncode == 0 else "FAIL", minor,
                                   run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "?"))
    if run.returncode:
        print(run.stdout)
        failures.append("3.%d offsets" % minor)
if failures:
    print("%d failed: %s" % (len(failures), ", ".join(failures)))
    sys.exit(1)
print("all versions passed: %s" % ", ".join("3.%d" % m for m in sorted(found)))
