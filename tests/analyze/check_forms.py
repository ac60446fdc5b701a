#!/usr/bin/env python3
"""Suite 'analyze': every report form, byte for byte, on the reference traces.

    check_forms.py GEN_PLANTED TBANALYZE [--update]

The reference traces are the generator's planted scenarios (gen_planted.c: deterministic, written anew each run), a
three-rank run, and the real traces kept in tests/analyze/ref/ (simtorch and CPU runs of corpus scripts, recorded
once).  Each form -- report text/JSON/HTML (both --where), info, dump, export chrome/kineto, diff text/JSON/HTML,
the cross-rank report and export -- is hashed; the hashes must equal tests/analyze/forms.sha256.  A refactoring of
the analyzer must leave this test passing unchanged; a change meant to alter output runs `--update`, and the commit
says why the forms changed (git diff of forms.sha256 shows which).  Exit 0 pass, 1 fail.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "forms.sha256")
REF = os.path.join(HERE, "ref")

SCENARIOS = ["planted", "clean", "markers", "apionly", "cpu", "bursts2", "threads", "allocs", "host-work",
             "unmarked", "scalars", "launch-bound", "unmarked-skips"]
# (name, A, B): diff pairs among the scenarios above and the real traces
DIFFS = [("clean-planted", "clean", "planted"), ("planted-clean", "planted", "clean"),
         ("unmarked-launch", "unmarked", "launch-bound")]


def run(tb, args, cwd):
    p = subprocess.run([tb] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    return p.returncode, p.stdout, p.stderr


def normalise(data):
    # the version is not a form's content: it changes with every release
    return re.sub(rb"tbanalyze \d+\.\d+\.\d+[^\s\"<]*", b"tbanalyze VERSION", data)


def main():
    if len(sys.argv) < 3:
        print("usage: check_forms.py GEN_PLANTED TBANALYZE [--update]", file=sys.stderr)
        return 2
    gen, tb = sys.argv[1], os.path.abspath(sys.argv[2])
    update = "--update" in sys.argv[3:]
    tmp = tempfile.mkdtemp(prefix="tbp-forms-")
    try:
        traces = []
        for s in SCENARIOS:
            name = s + ".zst"
            if s == "unmarked-skips":
                name = "skips.zst"
            subprocess.run([gen, s, os.path.join(tmp, name), os.path.join(tmp, s + ".json")], check=True,
                           stdout=subprocess.DEVNULL, timeout=120)
            traces.append(name)
        for f in sorted(os.listdir(REF)):
            if f.endswith(".zst"):
                shutil.copy(os.path.join(REF, f), os.path.join(tmp, f))
                traces.append(f)
        os.mkdir(os.path.join(tmp, "ranks"))
        for r in range(3):
            subprocess.run([gen, "rank", os.path.join(tmp, "ranks", f"rank{r}.zst"), os.path.join(tmp, f"r{r}.json"),
                            f"{r},3,1,nccl"], check=True, stdout=subprocess.DEVNULL, timeout=60)

        forms = []  # (name, bytes)

        def form(name, args, outfile=None):
            rc, out, err = run(tb, args, tmp)
            data = b"rc=%d\n" % rc + out + b"\n--stderr--\n" + err
            if outfile:
                p = os.path.join(tmp, outfile)
                data += b"\n--file--\n" + (open(p, "rb").read() if os.path.exists(p) else b"(none)")
                if os.path.isdir(p):
                    pass
                elif os.path.exists(p):
                    os.unlink(p)
            forms.append((name, normalise(data)))

        for t in traces:
            base = t[:-4]
            form(f"{base}.report.text", ["report", t])
            form(f"{base}.report.leaf", ["report", t, "--where=leaf", "--gap-us", "5"])
            form(f"{base}.report.json", ["report", t, "--json"])
            form(f"{base}.report.html", ["report", t, "--html", "out.html"], "out.html")
            form(f"{base}.info.text", ["info", t])
            form(f"{base}.info.json", ["info", t, "--json"])
            form(f"{base}.dump.json", ["dump", t, "--json"])
            form(f"{base}.export.chrome", ["export", t, "-o", "out.json"], "out.json")
            form(f"{base}.export.kineto", ["export", "--format", "kineto", t, "-o", "out.json"], "out.json")
        for name, a, b in DIFFS:
            form(f"diff.{name}.text", ["diff", a + ".zst", b + ".zst"])
            form(f"diff.{name}.json", ["diff", a + ".zst", b + ".zst", "--json"])
            form(f"diff.{name}.html", ["diff", a + ".zst", b + ".zst", "--html", "out.html"], "out.html")
        reals = [t for t in traces if os.path.exists(os.path.join(REF, t))]
        if len(reals) >= 2:
            form("diff.real.text", ["diff", reals[0], reals[1]])
            form("diff.real.json", ["diff", reals[0], reals[1], "--json"])
        form("ranks.report.text", ["report", "ranks"])
        form("ranks.report.json", ["report", "ranks", "--json"])
        form("ranks.report.html", ["report", "ranks", "--html", "out.html"], "out.html")
        form("ranks.export.chrome", ["export", "ranks", "-o", "out.json"], "out.json")

        got = {n: hashlib.sha256(d).hexdigest() for n, d in forms}
        if update:
            with open(GOLDEN, "w") as f:
                for n in sorted(got):
                    f.write(f"{got[n]}  {n}\n")
            print(f"wrote {len(got)} hashes to {GOLDEN}")
            return 0
        want = {}
        with open(GOLDEN) as f:
            for line in f:
                h, n = line.split()
                want[n] = h
        bad = 0
        for n in sorted(set(want) | set(got)):
            if want.get(n) != got.get(n):
                bad += 1
                print(f"FAIL {n}: " + ("missing from the golden file" if n not in want else
                                       "no longer produced" if n not in got else "output changed"))
        keep = os.environ.get("TBP_FORMS_KEEP")
        if keep and bad:
            os.makedirs(keep, exist_ok=True)
            for n, d in forms:
                with open(os.path.join(keep, n), "wb") as f:
                    f.write(d)
            print(f"the forms of this run are in {keep}")
        print(f"{len(got) - bad} of {len(got)} forms byte-identical to {os.path.basename(GOLDEN)}")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
