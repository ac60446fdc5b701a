#!/usr/bin/env python3
"""meson install step (python/meson.build, through install_pth.sh): makes `import tbprof` work in the python3 on PATH.

    install_pth.py DIR

DIR holds the tbprof package and nothing else (PREFIX/LIBDIR/tbprof/python).  Writes DIR into
tbprof.pth in the site-packages (purelib) of the interpreter running this script: the python3 on
PATH (install_pth.sh runs it), e.g. pyenv's, which does not search PREFIX's site-packages.  A .pth
entry adds only DIR to that interpreter's path, not PREFIX's other packages.  Skipped for a staged
install (DESTDIR: the system's interpreter is not the staged tree's) and said, never failing the
install, where that site-packages cannot be written.
"""
import os
import sys
import sysconfig


def main():
    target = sys.argv[1]
    destdir = os.environ.get("DESTDIR", "")
    if destdir or os.environ.get("MESON_INSTALL_DESTDIR_PREFIX", "") != os.environ.get("MESON_INSTALL_PREFIX", ""):
        print(f"tbprof: staged install (DESTDIR): no tbprof.pth written for {sys.executable}")
        return
    purelib = sysconfig.get_paths()["purelib"]
    pth = os.path.join(purelib, "tbprof.pth")
    try:
        os.makedirs(purelib, exist_ok=True)
        with open(pth, "w") as f:
            f.write(target + "\n")
    except OSError as e:
        print(f"tbprof: cannot write {pth} ({e.strerror}): for `import tbprof` in {sys.executable} "
              f"outside `tbprof record`, set PYTHONPATH={target}")
        return
    print(f"tbprof: {pth} -> {target} (import tbprof in {sys.executable})")


if __name__ == "__main__":
    main()
