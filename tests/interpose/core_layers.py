#!/usr/bin/env python3
"""The lifecycle reaches the modules only through their registrations (issue 31).

    core_layers.py OBJECT_DIR SIGNAL_OBJECT_DIR

libtbprof.so's objects (OBJECT_DIR: build/libtbprof/libtbprof.so.p; SIGNAL_OBJECT_DIR: the
uninstrumented sigaction/signal interposers' objects) are sorted into
  modules: cupti*.c, python*.c, native.c (the GPU timeline, Python call paths, native stacks);
  hooks:   interpose/*.c;
  core:    the rest (lifecycle.c, config.c, ring.c, writer_thread.c, ...).
lifecycle.c must refer to no symbol that a module or a hook defines: modules and hooks lend it
their fork, start, flush and stop steps through tbp_register_hook_ops, so it calls none of them by
name and none through a weak symbol.  The other core objects' references to modules or hooks are
listed for information (layers call down: the core below both).
Exit 0 pass, 1 fail, 77 skip (no nm).
"""
import os
import re
import shutil
import subprocess
import sys

MODULE = re.compile(r"^(cupti[^/]*|python[^/]*|native)\.c\.o$")
HOOK = re.compile(r"^\.\._interpose_.*\.c\.o$|^signal\.c\.o$")


def symbols(obj, defined):
    args = ["nm", "--defined-only", obj] if defined else ["nm", "-u", obj]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if defined and len(f) == 3 and f[1] in "TDBRCV":   # global definitions only
            names.add(f[2])
        elif not defined and len(f) == 2 and f[0] in "Uw":
            names.add(f[1])
    return names


def main():
    if not shutil.which("nm"):
        print("SKIP: no nm")
        return 77
    objects = []
    for d in sys.argv[1:]:
        if os.path.isdir(d):
            objects += [os.path.join(d, o) for o in os.listdir(d) if o.endswith(".o")]
    layer = {}
    for o in objects:
        base = os.path.basename(o)
        layer[o] = "module" if MODULE.match(base) else "hook" if HOOK.match(base) else "core"
    lifecycle = [o for o in objects if os.path.basename(o) == "lifecycle.c.o"]
    modules = [o for o in objects if layer[o] == "module"]
    print(f"{len(objects)} objects: {sum(v == 'core' for v in layer.values())} core, {len(modules)} module, "
          f"{sum(v == 'hook' for v in layer.values())} hook")
    if not lifecycle or not modules:
        print("FAIL: lifecycle.c.o or the module objects not found: nothing checked")
        return 1
    above = {}
    for o in objects:
        if layer[o] != "core":
            for s in symbols(o, True):
                above.setdefault(s, os.path.basename(o))
    failed = False
    for o in sorted(objects):
        if layer[o] != "core":
            continue
        ups = sorted(s for s in symbols(o, False) if s in above)
        if not ups:
            continue
        what = ", ".join(f"{s} ({above[s]})" for s in ups)
        if o in lifecycle:
            print(f"FAIL: lifecycle.c calls modules or hooks by name: {what}")
            failed = True
        else:
            print(f"note: {os.path.basename(o)} refers to {what}")
    if failed:
        return 1
    print("PASS: lifecycle.c refers to no module or hook symbol")
    return 0


if __name__ == "__main__":
    sys.exit(main())
