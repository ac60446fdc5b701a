#!/usr/bin/env python3
"""doc/config.md and doc/launcher.md against the settings table (trace/include/tbprof/options.def,
dumped by test_options --dump):

  - doc/config.md's variable table lists exactly the table's TBPROF_* variables, each with the
    table's default ("off" or "—" where the table has none);
  - doc/launcher.md's option table lists every flag of the table with the variable it sets (and
    the value, for a flag without one), and no flag that tbprof record does not have.

A difference fails naming the row.

With --parity TBPROF LIBTBPROF: for every flag of tbprof record that takes a value, a set of good
and bad values: tbprof record accepts a value (runs the command) exactly when libtbprof, given the
same value in the variable, takes it without a word on stderr -- the two use one parser."""
import os
import re
import subprocess
import sys

LAUNCHER_ONLY = {"--report", "--quiet", "-q", "--help", "-h"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_table(dump):
    out = subprocess.run([dump, "--dump"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        var, typ, dflt, lo, hi, flag, short, sets = line.split("\t")
        rows.append(dict(var=var, type=typ, default=None if dflt == "-" else dflt, flag=None if flag == "-" else flag,
                         short=None if short == "-" else short, sets=None if sets == "-" else sets))
    if not rows:
        fail("test_options --dump printed no option")
    return rows


def md_table(path, header):
    """The rows (lists of cells) of the first table in path whose header row starts with header."""
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split(" | ")])
            return rows
    fail(f"{path}: no table with the header {header!r}")


def check_config(rows, path):
    table = {r["var"]: r for r in rows}
    seen = set()
    for cells in md_table(path, "| variable | default |"):
        m = re.fullmatch(r"`(TBPROF_[A-Z_]+)`", cells[0])
        if not m:
            fail(f"{path}: row {cells[0]!r} does not name one variable")
        var = m.group(1)
        if var not in table:
            fail(f"{path}: row {var}: not in options.def (libtbprof does not read it)")
        if var in seen:
            fail(f"{path}: row {var} twice")
        seen.add(var)
        doc_default = cells[1].replace("`", "")
        want = table[var]["default"]
        if want is None:
            if doc_default not in ("off", "—"):
                fail(f"{path}: row {var}: default {doc_default!r}; options.def has none (write off or —)")
        elif doc_default != want:
            fail(f"{path}: row {var}: default {doc_default!r}, options.def says {want!r}")
    missing = [v for v in table if v not in seen]
    if missing:
        fail(f"{path}: no row for {', '.join(missing)} (in options.def)")
    return len(seen)


def check_launcher(rows, path):
    by_flag = {}
    for r in rows:
        for spelling in (r["flag"], r["short"]):
            if spelling:
                by_flag[spelling] = r
    documented = set()
    for cells in md_table(path, "| option | variable |"):
        flags = re.findall(r"`(--?[a-z][a-z-]*)", cells[0])
        if not flags:
            fail(f"{path}: row {cells[0]!r} names no option")
        for flag in flags:
            if flag in LAUNCHER_ONLY:
                documented.add(flag)
                continue
            r = by_flag.get(flag)
            if not r:
                fail(f"{path}: row {cells[0]!r}: {flag} is not an option of tbprof record (options.def)")
            want = f"{r['var']}={r['sets']}" if r["sets"] else r["var"]
            if not re.search(r"`" + re.escape(want) + r"`", cells[1]):
                fail(f"{path}: row {cells[0]!r}: the variable column {cells[1]!r} lacks `{want}`")
            documented.add(flag)
    missing = sorted(f for f in by_flag if f not in documented)
    if missing:
        fail(f"{path}: no row for {', '.join(missing)} (options of tbprof record in options.def)")
    return len(documented)


PROBES = ["0", "1", "2.5", "32", "-1", "+5", "abc", "", "1K", "64k", "1M", "2MiB", "16G", "1T", "2T", "12Q",
          "86400", "86401", "604801", "1025", "3600000001", "18446744073709551616", "nan", "cudaProfilerApi",
          "nvtx:step", "nvtx:step@NeMo", "nvtx:", "nvtx:@dom", "nvtxstep",
          "true", "off"]


def check_parity(rows, tbprof, lib):
    env0 = {k: v for k, v in os.environ.items() if not k.startswith("TBPROF_") and k != "LD_PRELOAD"}
    checked = 0
    for r in rows:
        if not r["flag"] or r["sets"] or r["var"] == "TBPROF_OUT":
            continue
        for value in PROBES:
            if value == "":
                continue   # unset for libtbprof, a missing value for the launcher: not the same question
            p = subprocess.run([tbprof, "record", "-q", f"{r['flag']}={value}", "--", "true"], env=env0,
                               capture_output=True, text=True, timeout=60)
            launcher_ok = p.returncode == 0
            if p.returncode not in (0, 3):
                fail(f"tbprof record {r['flag']}={value}: exit {p.returncode}: {p.stderr!r}")
            q = subprocess.run(["true"], env=dict(env0, LD_PRELOAD=lib, **{r["var"]: value}),
                               capture_output=True, text=True, timeout=60)
            lib_ok = f"tbprof: {r['var']}=" not in q.stderr
            if launcher_ok != lib_ok:
                fail(f"{r['flag']}={value}: tbprof record {'accepts' if launcher_ok else 'refuses'} it, libtbprof "
                     f"{'takes' if lib_ok else 'rejects'} {r['var']}={value} ({q.stderr.strip()!r})")
            checked += 1
    print(f"ok: {checked} (flag, value) pairs: tbprof record and libtbprof accept the same values")


def main():
    if sys.argv[1] == "--parity":
        dump, tbprof, lib = sys.argv[2], sys.argv[3], sys.argv[4]
        check_parity(load_table(dump), tbprof, lib)
        return
    dump, root = sys.argv[1], sys.argv[2]
    rows = load_table(dump)
    n_vars = check_config(rows, os.path.join(root, "doc", "config.md"))
    n_flags = check_launcher(rows, os.path.join(root, "doc", "launcher.md"))
    print(f"ok: doc/config.md lists the {n_vars} variables of options.def with its defaults; "
          f"doc/launcher.md the {n_flags} spellings of tbprof record's options with their variables")


if __name__ == "__main__":
    main()
