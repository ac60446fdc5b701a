#!/usr/bin/env python3
"""Suite 'ranks': tbanalyze's cross-rank view on planted multi-rank runs.

    check_ranks.py GEN_PLANTED PART

GEN_PLANTED writes one rank of a data-parallel run (`gen_planted rank OUT
EXPECT RANK,WORLD,STRAGGLER,MODE[,FLAGS]`, see scen_rank in gen_planted.c)
and what the view must find: the straggler's rank, the function it spends
its extra time in (data.py:31 augment), and the other ranks' wait.  PART:
  report     straggler found (rank, function, wait) for every collective kind,
             world sizes 2 and 4, the straggler at each place; none when the
             ranks are balanced; the text report says the same
  ranks      where a rank number comes from (recorded beats the file name,
             rank<N>.zst without one), the straggler's collectives too
             short to be recorded, alignment of a trace that starts a
             step early, ranks on several machines (wall clock), a process that is no rank (the agent) left out,
             several files named instead of a directory
  bad-input  an empty directory, a corrupt or missing trace among good ones,
             unrelated and nonsense traces (no crash, no straggler from one step),
             two traces of one rank (the plain name wins), --html with several (the cross-rank page)
  export     export of a directory: one chrome file, a process per rank;
             kineto: a file per rank with its rank in distributedInfo
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TBANALYZE = os.environ.get("TBANALYZE", "tbanalyze")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def run(args, expect_rc=0):
    p = subprocess.run([TBANALYZE] + args, capture_output=True, text=True, timeout=120)
    check(p.returncode == expect_rc,
          f"tbanalyze {' '.join(args)}: exit {p.returncode}, expected {expect_rc}; stderr: {p.stderr.strip()[:300]}")
    return p


def gen_run(gen, d, world, straggler, mode, flags="", names=None):
    """Writes world rank traces into directory d; returns the expectation."""
    os.makedirs(d, exist_ok=True)
    exp = None
    for r in range(world):
        name = names[r] if names else f"rank{r}.zst"
        spec = f"{r},{world},{straggler},{mode}" + (f",{flags}" if flags else "")
        ej = os.path.join(d, "expect.json.tmp")
        subprocess.run([gen, "rank", os.path.join(d, name), ej, spec], check=True, timeout=60)
        with open(ej) as f:
            exp = json.load(f)
        os.unlink(ej)
    return exp


def report(args):
    p = run(args + ["--json"])
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"tbanalyze {' '.join(args)} --json: not JSON: {p.stdout[:200]}")
        return None


def check_straggler(name, rep, exp, unrecorded=False):
    if rep is None:
        return
    if "clock" in rep and "machines" not in name:
        check(rep["clock"] == "monotonic", f"{name}: one machine, yet clock {rep['clock']}")
    fs = [f for f in rep["findings"] if f["kind"] == "straggler"]
    if exp["straggler"] < 0:
        check(not fs, f"{name}: balanced ranks, but a straggler was reported: {fs}")
        return
    if not check(len(fs) == 1, f"{name}: one straggler expected, got {fs}"):
        return
    f = fs[0]
    check(f["rank"] == exp["straggler"], f"{name}: straggler rank {f['rank']} != {exp['straggler']}")
    check(f["late_steps"] == exp["steps"] and f["aligned_steps"] == exp["steps"],
          f"{name}: late in {f['late_steps']} of {f['aligned_steps']} steps, expected all {exp['steps']}")
    w = f["where"]
    check(w is not None and (w["file"], w["function"], w["line"]) == (exp["file"], exp["function"], exp["line"]),
          f"{name}: where {w}, expected {exp['file']}:{exp['line']} {exp['function']}")
    if w:
        check(w["extra_ns"] == exp["extra_ns"], f"{name}: extra {w['extra_ns']} != {exp['extra_ns']}")
    # Where the straggler's calls were not recorded, the others wait until
    # the release, which includes the collective's own 300 us a step.
    slack = exp["steps"] * (exp["world"] - 1) * 300000 if unrecorded else 0
    check(exp["wait_ns"] <= f["wait_ns"] <= exp["wait_ns"] + slack,
          f"{name}: others' wait {f['wait_ns']} != {exp['wait_ns']} (+ {slack})")
    check(sum(x["wait_ns"] for x in f["wait_by_rank"]) == f["wait_ns"] or exp["wait_ns"] == 0,
          f"{name}: wait_by_rank {f['wait_by_rank']} does not add up to {f['wait_ns']}")
    check(len(f["wait_by_rank"]) == exp["world"] - 1, f"{name}: wait_by_rank has {len(f['wait_by_rank'])} ranks")
    # The per-rank sections: one each, in rank order, each with its own report.
    ranks = [r["rank"] for r in rep["ranks"]]
    check(ranks == list(range(exp["world"])), f"{name}: ranks {ranks}")
    for r in rep["ranks"]:
        check(r["report"]["schema"] == "tbprof-report" and r["report"]["steps"]["count"] == exp["marked_steps"],
              f"{name}: rank {r['rank']}'s own report: steps {r['report'].get('steps')}")


def part_report(gen, tmp):
    for mode, sync in (("c10d", "c10d"), ("ddp", "ddp_backward"), ("nccl", "c10d"), ("none", "none")):
        for world, straggler in ((2, 1), (2, 0), (4, 2), (4, -1), (2, -1)):
            d = os.path.join(tmp, f"{mode}-{world}-{straggler}")
            exp = gen_run(gen, d, world, straggler, mode)
            rep = report([d])
            name = f"{mode} world {world} straggler {straggler}"
            check_straggler(name, rep, exp)
            if rep:
                check(rep["collectives"] == sync, f"{name}: collectives {rep['collectives']} != {sync}")
    # The text report names the same.
    d = os.path.join(tmp, "c10d-4-2")
    out = run([d]).stdout
    check("straggler: rank 2," in out and "data.py:31 augment" in out and "rank 3:" in out,
          f"text report: straggler line or rank sections missing:\n{out[:1500]}")
    out = run([os.path.join(tmp, "c10d-4--1")]).stdout
    check("no straggler" in out and "straggler: rank" not in out, f"balanced text report:\n{out[:800]}")


def part_ranks(gen, tmp):
    # No rank recorded: the file names say it.
    d = os.path.join(tmp, "named")
    exp = gen_run(gen, d, 3, 1, "c10d", "n")
    rep = report([d])
    check_straggler("ranks from file names", rep, exp)
    if rep:
        check(all(r["rank_source"] == "file_name" for r in rep["ranks"]), "rank_source should be file_name")
    # Recorded ranks win over the file name: rank 0 written as rank1.zst and the other way round.
    d = os.path.join(tmp, "swapped")
    exp = gen_run(gen, d, 2, 0, "c10d", names=["rank1.zst", "rank0.zst"])
    rep = report([d])
    check_straggler("recorded ranks beat file names", rep, exp)
    if rep:
        files = {r["rank"]: os.path.basename(r["trace_file"]) for r in rep["ranks"]}
        check(files == {0: "rank1.zst", 1: "rank0.zst"} and all(r["rank_source"] == "recorded" for r in rep["ranks"]),
              f"recorded ranks: {files}")
    # Neither: numbered in name order, still compared.
    d = os.path.join(tmp, "plain")
    exp = gen_run(gen, d, 2, 1, "c10d", "n", names=["a.zst", "b.zst"])
    rep = report([d])
    check_straggler("ranks in name order", rep, exp)
    # The straggler's collectives too short to be spans (it never waits in
    # them): matched by their ends, it arrived at the release.
    for mode, world in (("c10d", 2), ("ddp", 2), ("c10d", 4), ("ddp", 3)):
        d = os.path.join(tmp, f"unrecorded-{mode}-{world}")
        exp = gen_run(gen, d, world, world - 1, mode, "s")
        check_straggler(f"{mode}, world {world}, the straggler's calls unrecorded", report([d]), exp, unrecorded=True)
    # Rank 1 counts one more warm-up step: its first steady step is the
    # others' second; wall clock lines them up (by index they would be a
    # step apart, and rank 1 a whole step late).
    for mode, world, straggler in (("c10d", 2, 0), ("ddp", 3, 2), ("nccl", 2, 1)):
        d = os.path.join(tmp, f"warmup-{mode}-{world}")
        exp = gen_run(gen, d, world, straggler, mode, "w")
        rep = report([d])
        check_straggler(f"{mode}, world {world}, rank 1 with two warm-up steps", rep, exp)
        if rep:
            firsts = [r["first_aligned_step"] for r in rep["ranks"]]
            check(firsts == [0 if r == 1 else 1 for r in range(world)], f"first aligned steps {firsts}")
    # Each rank on its own machine: monotonic clocks 7.5 s apart, put on
    # rank 0's clock by the wall clock; without that nothing lines up.
    for mode, world, straggler in (("c10d", 2, 1), ("ddp", 3, 0), ("nccl", 4, 2)):
        d = os.path.join(tmp, f"hosts-{mode}-{world}")
        exp = gen_run(gen, d, world, straggler, mode, "h")
        rep = report([d])
        check_straggler(f"{mode}, {world} machines", rep, exp)
        if rep:
            check(rep["clock"] == "wall_clock" and [r["clock_shift_ns"] for r in rep["ranks"]]
                  == [-r * 7500000000 for r in range(world)], f"{mode}, {world} machines: clock {rep['clock']}, "
                  f"shifts {[r['clock_shift_ns'] for r in rep['ranks']]}")
    # Every trace starts a step early (an extra step before the marks): the same.
    d = os.path.join(tmp, "early")
    exp = gen_run(gen, d, 2, 1, "ddp", "e")
    check_straggler("traces starting a step early", report([d]), exp)
    # A process that is no rank (torchrun's agent) beside the ranks: left out.
    d = os.path.join(tmp, "agent")
    exp = gen_run(gen, d, 2, 1, "c10d")
    subprocess.run([gen, "cpu", os.path.join(d, "agent.zst"), os.path.join(tmp, "agent.json")], check=True)
    rep = report([d])
    check_straggler("agent beside the ranks", rep, exp)
    if rep:
        check([(os.path.basename(x["trace_file"]), x["reason"]) for x in rep["skipped"]] == [("agent.zst", "not_a_rank")],
              f"skipped: {rep['skipped']}")
    # Files named one by one instead of the directory: the same report.
    d = os.path.join(tmp, "files")
    exp = gen_run(gen, d, 4, 3, "nccl")
    rep = report([os.path.join(d, f"rank{r}.zst") for r in (3, 1, 0, 2)])
    check_straggler("several files", rep, exp)
    # rank10 sorts after rank2 (name order with numbers).
    d = os.path.join(tmp, "eleven")
    exp = gen_run(gen, d, 11, 10, "c10d", "n")
    rep = report([d])
    check_straggler("eleven ranks by file name", rep, exp)


def part_bad_input(gen, tmp):
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    p = run([empty], expect_rc=2)
    check(empty in p.stderr and "no traces" in p.stderr, f"empty directory: stderr {p.stderr!r}")
    p = run(["export", empty], expect_rc=2)
    check(empty in p.stderr, f"export of an empty directory: stderr {p.stderr!r}")
    # A corrupt trace among good ones: named, exit 2, no report on stdout.
    d = os.path.join(tmp, "corrupt")
    gen_run(gen, d, 3, 1, "c10d")
    bad = os.path.join(d, "rank1.zst")
    with open(bad, "r+b") as f:
        data = bytearray(f.read())
        mid = len(data) // 2
        data[mid:mid + 16] = b"\xff" * 16
        f.seek(0)
        f.write(data)
    p = run([d], expect_rc=2)
    check(bad in p.stderr and "offset" in p.stderr and not p.stdout, f"corrupt trace: stderr {p.stderr!r}")
    p = run(["export", d, "-o", os.path.join(tmp, "x.json")], expect_rc=2)
    check(bad in p.stderr, f"export, corrupt trace: stderr {p.stderr!r}")
    # Not a trace at all.
    d = os.path.join(tmp, "garbage")
    gen_run(gen, d, 2, 1, "c10d")
    junk = os.path.join(d, "rank2.zst")
    with open(junk, "w") as f:
        f.write("not a trace\n")
    p = run([d], expect_rc=2)
    check(junk in p.stderr, f"not a trace: stderr {p.stderr!r}")
    # A named file that is missing.
    good = os.path.join(tmp, "corrupt", "rank0.zst")
    missing = os.path.join(tmp, "nope", "rank5.zst")
    p = run([good, missing], expect_rc=2)
    check(missing in p.stderr, f"missing trace: stderr {p.stderr!r}")
    # Two traces of rank 0 (a process rank 0 spawned with its environment,
    # or another run's): rank<N>.zst is the rank's own, the other listed.
    d = os.path.join(tmp, "dup")
    exp = gen_run(gen, d, 2, 1, "c10d")
    shutil.copy(os.path.join(d, "rank0.zst"), os.path.join(d, "rank0.4242.zst"))
    rep = report([d])
    check_straggler("a second trace of rank 0", rep, exp)
    if rep:
        check([(os.path.basename(x["trace_file"]), x["reason"], x["rank"]) for x in rep["skipped"]]
              == [("rank0.4242.zst", "same_rank", 0)] and os.path.basename(rep["ranks"][0]["trace_file"]) == "rank0.zst",
              f"a second trace of rank 0: skipped {rep['skipped']}")
    check("another process of rank 0" in run([d]).stdout, "a second trace of rank 0: not said in the text")
    out = os.path.join(tmp, "dup.json")
    run(["export", d, "-o", out])
    with open(out) as f:
        names = sorted(e["args"]["name"] for e in json.load(f)["traceEvents"] if e["name"] == "process_name")
    check(names[:2] == ["rank 0", "rank 0 (pid 5000, rank0.4242.zst)"], f"export, a second trace of rank 0: {names}")
    kdir = os.path.join(tmp, "dup-kineto")
    p = run(["export", "--format", "kineto", d, "-o", kdir])
    check(sorted(os.listdir(kdir)) == ["rank0.json", "rank1.json"] and "rank0.4242.zst" in p.stderr,
          f"kineto export, a second trace of rank 0: {sorted(os.listdir(kdir))} {p.stderr!r}")
    # A directory of one trace (a run that was not distributed) is that
    # trace: its own report (--html allowed), its own export.
    d = os.path.join(tmp, "single")
    gen_run(gen, d, 1, -1, "c10d")
    one = os.path.join(d, "rank0.zst")
    for args in ([], ["--json"], ["--where=leaf"]):
        check(run([d] + args).stdout == run([one] + args).stdout,
              f"a directory of one trace, {args}: not its report")
    check(run(["export", d]).stdout == run(["export", one]).stdout, "export of a directory of one trace")
    run([d, "--html", os.path.join(tmp, "one.html")])
    check(os.path.exists(os.path.join(tmp, "one.html")), "--html of a directory of one trace")
    # Traces of unrelated programs (and nonsense records): no crash, and no
    # rank called late (their steps, where a loop is found in them, do not
    # meet in collectives).
    others = []
    for scen in ("planted", "cpu", "threads"):
        t = os.path.join(tmp, scen + ".zst")
        subprocess.run([gen, scen, t, os.path.join(tmp, scen + ".json")], check=True)
        others.append(t)
    rep = report(others)
    check(rep is not None and rep["findings"] == [],
          f"unrelated traces: {rep and (rep['findings'], rep['aligned_steps'])}")
    for seed in range(1, 7):
        ts = []
        for k in range(3):
            t = os.path.join(tmp, f"random{seed}-{k}.zst")
            subprocess.run([gen, "random", t, os.path.join(tmp, "r.json"), str(seed * 10 + k)], check=True)
            ts.append(t)
        run(ts)
        run(ts + ["--json"])
        run(["export"] + ts + ["-o", os.path.join(tmp, "r.export.json")])  # (r.json: the generator's expectation)
    # --html of several ranks: the cross-rank page (the heat map, the straggler), beside the text report.
    d = os.path.join(tmp, "ok")
    gen_run(gen, d, 2, 1, "c10d")
    p = run([d, "--html", os.path.join(tmp, "x.html")])
    with open(os.path.join(tmp, "x.html")) as f:
        h = f.read()
    check("tbanalyze ranks" in p.stdout and 'aria-label="Step time per rank"' in h and 'class="straggler"' in h
          and "straggler: rank 1" in h, "--html of several ranks: the heat map and the straggler")


def part_export(gen, tmp):
    d = os.path.join(tmp, "run")
    gen_run(gen, d, 3, 1, "nccl")
    out = os.path.join(tmp, "run.json")
    run(["export", d, "-o", out])
    with open(out) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    hosts = sorted(v for v in names.values() if "GPU" not in v)
    gpus = sorted(v for v in names.values() if "GPU" in v)
    check(hosts == ["rank 0", "rank 1", "rank 2"], f"export: host processes {hosts}")
    check(gpus == ["rank 0 GPU 0", "rank 1 GPU 0", "rank 2 GPU 0"], f"export: GPU processes {gpus}")
    check(all(e["pid"] in names for e in ev), "export: an event outside the named processes")
    # Every rank's kernels in its own GPU process, on one time axis: the
    # ranks' collectives end together.
    nccl = {}
    for e in ev:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
            nccl.setdefault(names[e["pid"]], []).append(float(e["ts"]) + float(e["dur"]))
    check(len(nccl) == 3, f"export: NCCL kernels per rank {list(nccl)}")
    if len(nccl) == 3:
        ends = list(nccl.values())
        check(all(abs(a - b) < 0.01 for a, b in zip(ends[0], ends[1])) and len(ends[0]) == 10,
              "export: the ranks' collectives do not end together on one time axis")
    # kineto: a file per rank in a directory, each with its rank where HTA
    # reads it ("rank":\s+N), ranks from file names too; the agent left out.
    d = os.path.join(tmp, "named")
    gen_run(gen, d, 3, 1, "c10d", "n")
    subprocess.run([gen, "cpu", os.path.join(d, "agent.zst"), os.path.join(tmp, "agent.json")], check=True)
    kdir = os.path.join(tmp, "kineto")
    p = run(["export", "--format", "kineto", d, "-o", kdir])
    check(sorted(os.listdir(kdir)) == ["rank0.json", "rank1.json", "rank2.json"] and "agent.zst" in p.stderr,
          f"kineto export: files {sorted(os.listdir(kdir))}, stderr {p.stderr!r}")
    for r in range(3):
        with open(os.path.join(kdir, f"rank{r}.json")) as f:
            text = f.read()
        m = re.search(r'"rank":\s+(\d+)', text)
        doc = json.loads(text)
        check(m and int(m.group(1)) == r and doc["distributedInfo"] == {"rank": r, "world_size": 3},
              f"kineto rank{r}.json: distributedInfo {doc.get('distributedInfo')}")
    p = run(["export", "--format", "kineto", d], expect_rc=3)
    check("-o DIR" in p.stderr, f"kineto export of a directory without -o: {p.stderr!r}")
    # Ranks on several machines (monotonic clocks 7.5 s apart): one time
    # axis by the wall clocks, the collectives ending together again.
    d = os.path.join(tmp, "hosts")
    gen_run(gen, d, 2, 1, "nccl", "h")
    out = os.path.join(tmp, "hosts.json")
    run(["export", d, "-o", out])
    with open(out) as f:
        ev = json.load(f)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    ends = {}
    for e in ev:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
            ends.setdefault(names[e["pid"]], []).append(float(e["ts"]) + float(e["dur"]))
    check(len(ends) == 2 and all(abs(a - b) < 0.01 for a, b in zip(*ends.values())),
          f"export of ranks on two machines: the collectives do not end together ({list(ends.items())[:1]})")
    # Single-trace export: no rank process names (the host, its GPUs, named).
    p = run(["export", os.path.join(d, "rank0.zst")])
    one = json.loads(p.stdout)
    pn = [e["args"]["name"] for e in one["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    check(pn and pn[0] == "host" and all(n.startswith("GPU ") for n in pn[1:]),
          f"single-trace export: the host and its GPUs, no rank names ({pn})")
    # Several ranks: each rank's threads and streams named for Perfetto.
    tn = [(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
    check(any(n.startswith("stream ") for _, n in tn) and len({p for p, _ in tn}) >= 4,
          f"export of ranks: threads and streams named per rank ({tn[:4]})")


def main():
    gen, part = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="tba-ranks-") as tmp:
        {"report": part_report, "ranks": part_ranks, "bad-input": part_bad_input, "export": part_export}[part](gen, tmp)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
