#!/usr/bin/env python3
"""libtbprof never calls its own dlsym/signal/sigaction interposers.

    no_self_binding.py LIBTBPROF [OBJECT_DIR]

libtbprof.so exports interposers named dlsym (interpose/common.c), signal and sigaction
(interpose/signal.c).  A call to one of those names from inside the library binds, through the
library's own PLT or GOT, to the first definition in the global scope: the interposer itself, since
the library is preloaded first.  The core would then reach up into the hooks (issue 31), and the
CUPTI probe's SIG_DFL would be kept from the kernel.  So the library must hold no dynamic relocation
against any of those names: every lookup goes through libtbprof/libc_real.h.

On failure, the objects in OBJECT_DIR (the library's .o files) that reference one of the names are
listed.  Exit 0 pass, 1 fail, 77 skip (no readelf).
"""
import os
import re
import shutil
import subprocess
import sys

INTERPOSED = ("dlsym", "signal", "sigaction")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], capture_output=True, text=True, check=True).stdout


def main():
    lib = sys.argv[1]
    objdir = sys.argv[2] if len(sys.argv) > 2 else None
    if not shutil.which("readelf"):
        print("SKIP: no readelf")
        return 77
    # What the library exports under those names: defined (section index not UND), global functions.
    exported = set()
    for line in readelf("--dyn-syms", lib).splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[4] in ("GLOBAL", "WEAK") and f[6] != "UND":
            name = f[7].split("@")[0]
            if name in INTERPOSED:
                exported.add(name)
    print("interposers exported:", sorted(exported))
    if "signal" not in exported or "sigaction" not in exported:
        print("FAIL: libtbprof.so does not export its signal/sigaction interposers: nothing checked")
        return 1
    relocs = [line for line in readelf("-r", lib).splitlines() if re.match(r"\s*[0-9a-f]+\s+[0-9a-f]+\s+R_", line)]
    print(f"{len(relocs)} dynamic relocations")
    if not relocs:
        print("FAIL: no relocations read from libtbprof.so: the check would see nothing")
        return 1
    bad = []
    for line in relocs:
        f = line.split()
        if len(f) >= 5 and f[4].split("@")[0] in exported:
            bad.append(line.strip())
    if not bad:
        print("PASS: no relocation binds to", ", ".join(sorted(exported)))
        return 0
    print("FAIL: libtbprof.so calls its own interposers through its PLT/GOT:")
    for line in bad:
        print("   ", line)
    if objdir and os.path.isdir(objdir) and shutil.which("nm"):
        for obj in sorted(os.listdir(objdir)):
            if not obj.endswith(".o"):
                continue
            out = subprocess.run(["nm", "-u", os.path.join(objdir, obj)], capture_output=True, text=True).stdout
            names = sorted({ln.split()[-1] for ln in out.splitlines() if ln.split() and ln.split()[-1] in exported})
            if names:
                print(f"    {obj} refers to {', '.join(names)}: use tbp_real_dlsym/tbp_real_sigaction (libc_real.h)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
