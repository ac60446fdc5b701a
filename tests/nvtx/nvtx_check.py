#!/usr/bin/env python3
"""NVTX ranges received as NVTX's injection library (issue 30 item 5).

    nvtx_check.py c --build B --source S --prog PROG
        PROG (nvtx_prog.c: the nvtx3 headers from C) under the bare preload: the ranges in the trace with
        their names (ASCII, wide, registered), domains, kinds, depths, and the ranges started on one
        thread and ended on another with both threads; nvtxRangePush/Pop answer depths; without the
        preload, with TBPROF_ENABLE=0, or with the user's own NVTX_INJECTION64_PATH, NVTX is as without
        tbprof (the program's output is the same, no range recorded).

    nvtx_check.py cpu --build B --source S
        scripts/nvtx_job.py with pip PyTorch on the CPU under `tbprof record`: the program's output as
        without tbprof; 20 "step", "forward", "backward" ranges and one "region", nested as pushed, each
        at the script's line; the report's NVTX section and JSON, `--steps nvtx:step` (20 steps), export's
        user_annotation events; `--capture-range nvtx:region` writes one capture holding steps 5 to 14;
        the user's NVTX_INJECTION64_PATH is left alone (tbprof says so once) and no range is recorded.

    nvtx_check.py simtorch --build B --source S
        the same job on simtorch: the GPU busy share inside the ranges, kernels inside the step ranges,
        `--steps nvtx:step`; `--capture-range nvtx:region` a trace of 10 steps with their kernels joined;
        `--capture-range nvtx:step` one capture per step (20 files).

Exit 0 pass, 1 fail, 77 skip (no PyTorch, or simgpu/simtorch not built).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def tools(args):
    return (os.path.join(args.build, "launcher", "tbprof"), os.path.join(args.build, "analyze", "tbanalyze"),
            os.path.join(args.build, "tests", "simgpu", "simtorch"), os.path.join(args.build, "libtbprof",
                                                                                  "libtbprof.so"))


def clean_env():
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "TBPROF_OUT", "NVTX_INJECTION64_PATH", "TBPROF_ENABLE", "TBPROF_CAPTURE_RANGE",
              "TBPROF_ON_DEMAND"):
        env.pop(k, None)
    return env


def ranges(tbanalyze, path):
    """The trace's range records (dump --json), and the thread records' tids."""
    p = subprocess.run([tbanalyze, "dump", path, "--json", "--kind", "range"], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        fail(f"tbanalyze dump {path}: exit {p.returncode}: {p.stderr[-300:]}")
        return []
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def report(tbanalyze, path, *opts):
    p = subprocess.run([tbanalyze, "report", path, "--json"] + list(opts), capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        fail(f"tbanalyze report {path} {opts}: exit {p.returncode}: {p.stderr[-300:]}")
        return None
    return json.loads(p.stdout)


def script_line(path, tag):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if "# RANGE:" + tag in line:
                return n
    raise SystemExit(f"no '# RANGE:{tag}' line in {path}")


def check_c(args):
    _, tbanalyze, _, lib = tools(args)
    if not args.prog or not os.path.exists(args.prog):
        print("SKIP: the nvtx3 C program was not built (no nvtx3 headers)")
        return SKIP
    env = clean_env()
    plain = subprocess.run([args.prog], capture_output=True, text=True, env=env, timeout=60)
    if plain.returncode != 0 or plain.stdout != "levels: -2 -2 -2 -2 -2 -2\n":
        fail(f"without tbprof: exit {plain.returncode}, {plain.stdout!r} (NVTX without a tool answers -2)")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "c.zst")
        traced = subprocess.run([args.prog], capture_output=True, text=True, timeout=60,
                                env=dict(env, LD_PRELOAD=lib, TBPROF_OUT=out))
        if traced.returncode != 0 or traced.stdout != "levels: 0 1 1 0 0 0\n":
            fail(f"under the preload: exit {traced.returncode}, {traced.stdout!r}, want the depths 0 1 1 0 0 0")
        rs = ranges(tbanalyze, out)
        by = {}
        for r in rs:
            by.setdefault(r.get("name_str"), []).append(r)
        want = {"outer": (0, None, 0), "inner-\u00fc": (0, None, 1), "mark-a": (2, None, 0),
                "across": (1, None, 0), "domain-across": (1, "mydomain", 0)}
        for name, (kind, dom, depth) in want.items():
            got = by.get(name, [])
            if len(got) != 1:
                fail(f"range {name!r}: {len(got)} records, want 1 ({sorted(by)})")
                continue
            g = got[0]
            if g["range_kind"] != kind or g.get("domain_str") != dom or g["depth"] != depth:
                fail(f"range {name!r}: kind {g['range_kind']} domain {g.get('domain_str')} depth {g['depth']}, "
                     f"want {kind} {dom} {depth}")
            if g["end"] < g["ts"] or (kind == 2 and g["end"] != g["ts"]):
                fail(f"range {name!r}: [{g['ts']}, {g['end']}]")
        reg = by.get("registered", [])
        if sorted(r["range_kind"] for r in reg) != [0, 2] or any(r.get("domain_str") != "mydomain" for r in reg):
            fail(f"the registered string's push and mark in mydomain: {reg}")
        for name in ("across", "domain-across"):
            for g in by.get(name, []):
                if g["sid"] == g["begin_tid"] or g["id"] == 0:
                    fail(f"{name!r} was ended on another thread: its record's thread {g['sid']}, begun on "
                         f"{g['begin_tid']}, id {g['id']}")
        o = by.get("outer", [{}])[0]
        for name in ("inner-\u00fc", "registered", "across"):
            for g in by.get(name, []):
                if o and not (o["ts"] <= g["ts"] <= g["end"] <= o["end"]):
                    fail(f"{name!r} [{g['ts']}, {g['end']}] is not inside 'outer' [{o['ts']}, {o['end']}]")
        # The user's own tool, and tbprof disabled: NVTX is left as it was.
        for what, extra in (("NVTX_INJECTION64_PATH of the user's", {"NVTX_INJECTION64_PATH": "/nonexistent/libx.so"}),
                            ("TBPROF_ENABLE=0", {"TBPROF_ENABLE": "0"})):
            out2 = os.path.join(tmp, "u.zst")
            p = subprocess.run([args.prog], capture_output=True, text=True, timeout=60,
                               env=dict(env, LD_PRELOAD=lib, TBPROF_OUT=out2, **extra))
            if p.returncode != 0 or p.stdout != plain.stdout:
                fail(f"{what}: exit {p.returncode}, {p.stdout!r}, want the output without tbprof {plain.stdout!r}")
            if os.path.exists(out2) and ranges(tbanalyze, out2):
                fail(f"{what}: ranges recorded")
    return 0


def job_path(args):
    return os.path.join(args.source, "tests", "nvtx", "scripts", "nvtx_job.py")


def check_ranges_trace(args, tbanalyze, path, gpu):
    """The whole job's trace: ranges, nesting, lines, report, steps, export."""
    job = job_path(args)
    rs = ranges(tbanalyze, path)
    names = {}
    for r in rs:
        names.setdefault(r.get("name_str"), []).append(r)
    counts = {n: len(v) for n, v in names.items()}
    if counts != {"step": 20, "forward": 20, "backward": 20, "region": 1}:
        fail(f"range counts {counts}, want step/forward/backward 20, region 1")
        return
    steps = sorted(names["step"], key=lambda r: r["ts"])
    region = names["region"][0]
    inside = [s for s in steps if region["ts"] <= s["ts"] and s["end"] <= region["end"]]
    if len(inside) != 10 or [s["depth"] for s in steps] != [0] * 5 + [1] * 10 + [0] * 5:
        fail(f"steps inside the region: {len(inside)} (want 10); depths {[s['depth'] for s in steps]}")
    for part in ("forward", "backward"):
        for r in names[part]:
            if not any(s["ts"] <= r["ts"] and r["end"] <= s["end"] and s["sid"] == r["sid"] for s in steps):
                fail(f"a {part} range [{r['ts']}, {r['end']}] lies in no step range")
                break
    with tempfile.TemporaryDirectory() as tmp:
        x = subprocess.run([tbanalyze, "export", path, "-o", tmp + "/x.json"], capture_output=True, text=True,
                           timeout=120)
        if x.returncode != 0:
            fail(f"export: exit {x.returncode}: {x.stderr[-300:]}")
        else:
            with open(tmp + "/x.json") as f:
                ev = json.load(f)
            ev = ev["traceEvents"] if isinstance(ev, dict) else ev
            ann = [e for e in ev if e.get("cat") == "user_annotation"]
            for tag in ("step", "forward", "backward", "region"):
                mine = [e for e in ann if e["name"] == tag]
                where = f"nvtx_job.py:{script_line(job, tag)} "
                if len(mine) != (1 if tag == "region" else 20) or any(
                        not any(where in fr for fr in e["args"].get("python", [])) for e in mine):
                    fail(f"export: {len(mine)} {tag!r} user_annotation events, or one without the line {where}: "
                         f"{mine[:1]}")
    r = report(tbanalyze, path)
    if r is not None:
        nv = {g["name"]: g for g in r.get("nvtx_ranges", [])}
        if nv.get("step", {}).get("count") != 20 or f"nvtx_job.py:{script_line(job, 'step')}" not in nv["step"]["where"]:
            fail(f"report JSON nvtx_ranges: {r.get('nvtx_ranges')}")
        elif gpu and not (0 < nv["step"]["gpu_busy_share"] <= 1):
            fail(f"the GPU busy share inside the steps: {nv['step']}")
        elif not gpu and nv["step"]["gpu_busy_share"] is not None:
            fail(f"a CPU run measures no GPU busy share: {nv['step']}")
    t = subprocess.run([tbanalyze, "report", path], capture_output=True, text=True, timeout=120).stdout
    if "NVTX ranges" not in t or f"nvtx_job.py:{script_line(job, 'forward')}" not in t:
        fail(f"the text report's NVTX section: {t[-800:]!r}")
    r = report(tbanalyze, path, "--steps", "nvtx:step")
    if r is not None and (not r.get("steps") or r["steps"]["count"] != 20):
        fail(f"--steps nvtx:step: {r.get('steps')}")


def check_job(args, gpu):
    tbprof, tbanalyze, simtorch, _ = tools(args)
    job = job_path(args)
    env = clean_env()
    pre = [simtorch] if gpu else []
    argv = pre + [sys.executable, job] + (["cuda"] if gpu else [])
    plain = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if plain.returncode != 0 or plain.stdout != "done\n":
        fail(f"the job without tbprof: exit {plain.returncode}, {plain.stdout!r}, {plain.stderr[-400:]!r}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([tbprof, "record", "-q", "-o", tmp + "/whole.zst", "--"] + argv, capture_output=True,
                           text=True, env=env, timeout=300)
        if p.returncode != 0 or p.stdout != plain.stdout:
            fail(f"the job under tbprof: exit {p.returncode}, {p.stdout!r}, {p.stderr[-400:]!r}")
        else:
            check_ranges_trace(args, tbanalyze, tmp + "/whole.zst", gpu)
        # A capture range: the region, steps 5 to 14.
        cap = os.path.join(tmp, "cap")
        os.mkdir(cap)
        p = subprocess.run([tbprof, "record", "-q", "--capture-range", "nvtx:region", "-o", cap + "/trace.zst", "--"]
                           + argv, capture_output=True, text=True, env=env, timeout=300)
        files = sorted(os.listdir(cap))
        if p.returncode != 0 or p.stdout != plain.stdout or files != ["trace.capture1.zst"]:
            fail(f"--capture-range nvtx:region: exit {p.returncode}, {p.stdout!r}, files {files}, {p.stderr[-400:]!r}")
        else:
            path = cap + "/trace.capture1.zst"
            rs = ranges(tbanalyze, path)
            counts = {}
            for r in rs:
                counts[r.get("name_str")] = counts.get(r.get("name_str"), 0) + 1
            if counts != {"region": 1, "step": 10, "forward": 10, "backward": 10}:
                fail(f"the region's capture holds the ranges {counts}, want the region and 10 steps")
            r = report(tbanalyze, path, "--steps", "nvtx:step")
            if r is not None:
                if not r.get("steps") or r["steps"]["count"] != 10:
                    fail(f"the region's capture, --steps nvtx:step: {r.get('steps')}")
                if gpu and r["counts"]["gpu_kernels"] == 0:
                    fail("the region's capture holds no kernel")
                if gpu and r["trace"]["joined_pct"] is not None and r["trace"]["joined_pct"] < 99:
                    fail(f"the region's capture joins {r['trace']['joined_pct']}% of its GPU records")
        if gpu:
            each = os.path.join(tmp, "each")
            os.mkdir(each)
            p = subprocess.run([tbprof, "record", "-q", "--capture-range", "nvtx:step", "-o", each + "/t.zst", "--"]
                               + argv, capture_output=True, text=True, env=env, timeout=300)
            files = sorted(os.listdir(each))
            if p.returncode != 0 or p.stdout != plain.stdout or len(files) != 20:
                fail(f"--capture-range nvtx:step: exit {p.returncode}, {len(files)} files (want 20), "
                     f"{p.stderr[-400:]!r}")
            else:
                rs = ranges(tbanalyze, each + "/t.capture7.zst")
                if sorted(r.get("name_str") for r in rs) != ["backward", "forward", "step"]:
                    fail(f"one step's capture holds {sorted(r.get('name_str') for r in rs)}")
        else:
            # The user's own injection library is left in place: one line says so, nothing is recorded.
            user = os.path.join(tmp, "user")
            os.mkdir(user)
            p = subprocess.run([tbprof, "record", "-o", user + "/t.zst", "--"] + argv, capture_output=True, text=True,
                               env=dict(env, NVTX_INJECTION64_PATH="/nonexistent/libnvtx-tool.so"), timeout=300)
            said = [line for line in p.stderr.splitlines() if "NVTX_INJECTION64_PATH" in line]
            if p.returncode != 0 or p.stdout != plain.stdout or len(said) != 1:
                fail(f"the user's NVTX_INJECTION64_PATH: exit {p.returncode}, {p.stdout!r}, said {said}")
            for f in os.listdir(user):
                if f.endswith(".zst") and ranges(tbanalyze, os.path.join(user, f)):
                    fail("the user's NVTX_INJECTION64_PATH: ranges recorded by tbprof anyway")
            # A program without NVTX: the same output, and NVTX_INJECTION64_PATH is what the program sees.
            code = "import os; print('hello', os.environ.get('NVTX_INJECTION64_PATH', '').endswith('libtbprof.so'))"
            p = subprocess.run([tbprof, "record", "-q", "-o", user + "/n.zst", "--", sys.executable, "-c", code],
                               capture_output=True, text=True, env=env, timeout=120)
            if p.returncode != 0 or p.stdout != "hello True\n":
                fail(f"a program without NVTX: exit {p.returncode}, {p.stdout!r}, {p.stderr[-300:]!r}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["c", "cpu", "simtorch"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--prog")
    args = ap.parse_args()
    if args.mode == "c":
        rc = check_c(args)
    else:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("SKIP: PyTorch is not installed")
            return SKIP
        if args.mode == "simtorch" and not os.path.exists(tools(args)[2]):
            print("SKIP: simtorch is not built")
            return SKIP
        rc = check_job(args, args.mode == "simtorch")
    if rc == SKIP:
        return SKIP
    print("FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
