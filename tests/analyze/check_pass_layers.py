#!/usr/bin/env python3
"""No analyzer pass reaches into another (issue 31, doc/architecture.md "Layers").

    check_pass_layers.py ANALYZE_DIR

The passes are the AN_PASSES list of analyze/an_pass.h; pass NAME's files are
an_pass_NAME.h and an_pass_NAME.c (and an_steps_detect.c for steps).  What a pass
owns: the functions, structs and macros its header declares and the functions its
.c defines outside file scope.  Fails, naming file, line and name, when a pass's
code (comments left out) names what another pass owns, includes another pass's
header, or takes another pass's state (an_pass_state(a, OTHER)): a pass calls the
services (an_services.h) and hears from the others through events only.
"""
import os
import re
import sys

EXTRA = {"steps": ["an_steps_detect.c"]}


def code_of(path):
    """The file's text with comments and string literals blanked (line numbers kept)."""
    text = open(path, encoding="utf-8").read()

    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', blank, text, flags=re.S)


def owned(header, source):
    names = set()
    h = code_of(header)
    names |= set(re.findall(r"^#define\s+(\w+)", h, re.M))
    names |= set(re.findall(r"^struct\s+(\w+)\s*\{", h, re.M))
    # declarations and inline definitions at the start of a line: NAME(
    for line in h.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            m = re.search(r"\b(\w+)\s*\(", line)
            if m and m.group(1) not in ("sizeof", "__attribute__"):
                names.add(m.group(1))
    for line in code_of(source).splitlines():
        if line and not line[0].isspace() and not line.startswith(("#", "static", "struct ", "}")):
            m = re.search(r"\b(\w+)\s*\(", line)
            if m and m.group(1) != "__attribute__":
                names.add(m.group(1))
    names |= {m for m in re.findall(r"__attribute__\(\(noinline\)\)\s+\w[\w\s\*]*?\b(\w+)\s*\(", code_of(source))}
    return names


def main():
    d = sys.argv[1]
    listing = code_of(os.path.join(d, "an_pass.h"))
    m = re.search(r"#define\s+AN_PASSES\(X, \.\.\.\)(.*?)\n\n", listing, re.S)
    passes = re.findall(r"X\((\w+), __VA_ARGS__\)", m.group(1)) if m else []
    if len(passes) < 2:
        print("FAIL: no AN_PASSES list found in an_pass.h")
        return 1
    files, owns = {}, {}
    for p in passes:
        h, c = os.path.join(d, f"an_pass_{p}.h"), os.path.join(d, f"an_pass_{p}.c")
        for f in (h, c):
            if not os.path.exists(f):
                print(f"FAIL: pass {p}: {f} missing")
                return 1
        files[p] = [h, c] + [os.path.join(d, x) for x in EXTRA.get(p, [])]
        owns[p] = owned(h, c) | {f"an_pass_{p}", f"{p}_state"}
    shared = set.intersection(*owns.values())
    bad = 0
    for p in passes:
        for f in files[p]:
            for no, line in enumerate(code_of(f).splitlines(), 1):
                where = f"{os.path.basename(f)}:{no}"
                for inc in re.findall(r'#include\s+"an_pass_(\w+)\.h"', open(f).read().splitlines()[no - 1]):
                    if inc != p:
                        print(f"FAIL: {where}: pass {p} includes pass {inc}'s header")
                        bad += 1
                for other in re.findall(r"an_pass_state\(\s*[^,]+,\s*(\w+)\s*\)", line):
                    if other != p:
                        print(f"FAIL: {where}: pass {p} takes pass {other}'s state")
                        bad += 1
                words = set(re.findall(r"\b[A-Za-z_]\w*\b", line))
                for q in passes:
                    if q == p:
                        continue
                    for name in sorted((words & owns[q]) - owns[p] - shared):
                        print(f"FAIL: {where}: pass {p} names {name} of pass {q}")
                        bad += 1
    if bad:
        return 1
    print(f"ok   {len(passes)} passes ({', '.join(passes)}): none names another's functions, state or header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
