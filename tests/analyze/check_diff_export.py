"""Suite 'analyze', parts 'diff' and 'export' (loaded by check_report.py)."""
import json
import os
import subprocess


def parts(gen, run, check):
    def part_diff(gen_path, tmp):
        a, _ = gen(gen_path, tmp, "clean")
        b = os.path.join(tmp, "clean2.zst")
        subprocess.run([gen_path, "clean", b, os.path.join(tmp, "clean2.json")], check=True)
        p = run(["diff", a, b], expect_rc=0)
        check("no regression" in p.stdout, f"diff identical: verdict ({p.stdout.strip()[-200:]})")
        rep = json.loads(run(["diff", a, b, "--json"], expect_rc=0).stdout)
        check(rep["regression"] is False and rep["regressions"] == 0, "diff identical: JSON verdict")
        check(all(c["a"] == c["b"] for c in rep["changes"]), "diff identical: every change is zero")
        # One kernel (k == 3, ampere_sgemm, launched from train.py:60 step) 30 us slower per step.
        s, _ = gen(gen_path, tmp, "slow")
        p = run(["diff", a, s], expect_rc=1)
        check("REGRESSION" in p.stdout, "diff slow: verdict")
        lines = [l for l in p.stdout.splitlines() if l.startswith("REGRESSED")]
        check(any("kernel" in l and "ampere_sgemm_128x64_tn" in l for l in lines), f"diff slow: names the kernel {lines}")
        check(any("call_site" in l and "train.py:60:step" in l for l in lines), f"diff slow: names the call site {lines}")
        check(not any("vectorized_elementwise_kernel<relu>" in l for l in lines), "diff slow: unchanged kernel not blamed")
        rep = json.loads(run(["diff", a, s, "--json"], expect_rc=1).stdout)
        reg = {(c["type"], c["name"]) for c in rep["changes"] if c["regressed"]}
        check(("kernel", "ampere_sgemm_128x64_tn") in reg, f"diff slow JSON: kernel regressed {reg}")
        gemm = [c for c in rep["changes"] if c["name"] == "ampere_sgemm_128x64_tn"][0]
        check(abs(gemm["change_pct"] - 50.0) < 0.01, f"diff slow JSON: +50% on the kernel ({gemm['change_pct']})")
        # The reverse direction is an improvement, and a high threshold tolerates the slowdown.
        run(["diff", s, a], expect_rc=0)
        run(["diff", a, s, "--threshold", "60"], expect_rc=0)
        # CPU runs: their loop's steps are found from the spans (ten of
        # them, the first warm-up), so the time per step decides; host self
        # time per Python path explains it: only the path that got slower
        # (model.py:30 forward, +200 us a step) grew.
        c1, _ = gen(gen_path, tmp, "cpu")
        c2, _ = gen(gen_path, tmp, "cpu-slow")
        run(["diff", c1, c1], expect_rc=0)
        rep = json.loads(run(["diff", c1, c2, "--json"], expect_rc=1).stdout)
        reg = sorted((c["type"], c["name"]) for c in rep["changes"] if c["regressed"])
        check(rep["judged_by"] == "time_per_step" and reg == [("overall", "time_per_step_ns")],
              f"diff CPU runs: judged per step, the time per step regressed, nothing else ({reg})")
        grew = sorted(c["name"] for c in rep["changes"] if c["type"] == "python_path" and c["over_threshold"])
        check(grew == ["model.py:30:forward<train.py:120:main"], f"diff CPU runs: only the slower path grew ({grew})")
        fwd = [c for c in rep["changes"] if c["type"] == "python_path" and c["name"].startswith("model.py:30")]
        check(fwd and abs((fwd[0]["b"] - fwd[0]["a"]) * 9 - 10 * 200000) <= 9,
              f"diff CPU runs: +200 us on forward in each of the ten steps, per steady step ({fwd})")
        # The same program from another checkout and virtual environment (two
        # CI jobs): its paths are the same paths, nothing appears or vanishes.
        mv, _ = gen(gen_path, tmp, "cpu-moved")
        rep = json.loads(run(["diff", c1, mv, "--json"], expect_rc=0).stdout)
        moved = [(c["type"], c["name"], c["a"], c["b"]) for c in rep["changes"] if c["type"] != "overall"
                 and (c["a"] == 0 or c["b"] == 0 or c["a"] != c["b"])]
        check(not moved and any(c["type"] == "python_path" for c in rep["changes"]),
              f"diff of two checkouts of one program: every path matched, none changed ({moved[:4]})")
        # Twice the device memory from the same call site: a memory regression.
        m, _ = gen(gen_path, tmp, "bigmem")
        rep = json.loads(run(["diff", a, m, "--json"], expect_rc=1).stdout)
        reg = [c["name"] for c in rep["changes"] if c["regressed"]]
        check(reg == ["device 0 peak bytes"], f"diff bigmem: peak memory regressed, nothing else ({reg})")
        site = [c for c in rep["changes"] if c["name"].startswith("train.py:120:main") and c["type"] == "memory"]
        check(len(site) == 1 and site[0]["change_pct"] == 100.0, f"diff bigmem: allocations per call site ({site})")
        # Per step (no marks: steps detected).  The fix removes 200 us of data
        # loading a step and makes one kernel 100 us slower: GPU busy per
        # step +11.9 % (past the threshold) but each step 8.3 % faster:
        # improved, exit 0; the reverse is a regression, exit 1.
        u, uexp = gen(gen_path, tmp, "unmarked")
        fx, _ = gen(gen_path, tmp, "unmarked-fixed")
        sl, _ = gen(gen_path, tmp, "unmarked-slow")
        rep = json.loads(run(["diff", u, fx, "--json"], expect_rc=0).stdout)
        tps = rep.get("time_per_step") or {}
        check(rep["judged_by"] == "time_per_step" and tps.get("verdict") == "improved" and rep["regression"] is False
              and tps.get("a_ns") == uexp["steps"]["median_ns"] and tps.get("b_ns") == uexp["steps"]["median_ns"] - 100000,
              f"diff per step: the fix is an improvement ({tps})")
        busy = [c for c in rep["changes"] if c["name"] == "gpu_busy_ns"]
        check(busy and busy[0]["over_threshold"] is True and busy[0]["regressed"] is False,
              f"diff per step: more GPU busy per step is explained, not judged ({busy})")
        check(not [c for c in rep["changes"] if c["regressed"]], "diff per step: nothing regressed")
        p = run(["diff", u, fx], expect_rc=0)
        check("time per step: " in p.stdout.splitlines()[1] and "improved" in p.stdout.splitlines()[1],
              f"diff per step text: the headline is the time per step ({p.stdout.splitlines()[1:2]})")
        rep = json.loads(run(["diff", fx, u, "--json"], expect_rc=1).stdout)
        reg = [(c["type"], c["name"]) for c in rep["changes"] if c["regressed"]]
        check(rep["time_per_step"]["verdict"] == "regressed" and reg == [("overall", "time_per_step_ns")],
              f"diff per step reversed: regressed on the time per step alone ({reg})")
        run(["diff", u, sl], expect_rc=1)
        run(["diff", u, sl, "--threshold", "40"], expect_rc=0)
        # The same program with its script renamed (train.py -> train_v2.py) and its model moved (model.py ->
        # exp/model.py): every call site matched by its functions and lines, none new or gone, nothing changed
        # (the analyzer before: each site -100 % under train.py and new under train_v2.py); files both runs
        # have keep their names (unmarked against unmarked-slow: nothing renamed).
        rn, _ = gen(gen_path, tmp, "unmarked-renamed")
        rep = json.loads(run(["diff", u, rn, "--json"], expect_rc=0).stdout)
        ren = sorted((r["a"], r["b"]) for r in rep.get("renamed_files", []))
        check(ren == [("model.py", "exp/model.py"), ("train.py", "train_v2.py")], f"diff renamed: files paired ({ren})")
        odd = [(c["type"], c["name"], c["a"], c["b"]) for c in rep["changes"] if c["type"] != "overall" and c["a"] != c["b"]]
        sites = [c for c in rep["changes"] if c["type"] == "call_site"]
        check(not odd and sites and all("train_v2.py" in c["name"] for c in sites),
              f"diff renamed: every site matched under B's names, none changed ({odd[:4]})")
        check(rep["verdict"] == "no significant change", f"diff renamed: no change ({rep['verdict']})")
        txt = run(["diff", u, rn], expect_rc=0).stdout
        check("files: A's train.py compared as B's train_v2.py" in txt, f"diff renamed: the text says so ({txt.splitlines()[1:3]})")
        rep = json.loads(run(["diff", u, sl, "--json"], expect_rc=1).stdout)
        check(rep.get("renamed_files") == [], f"diff: files both runs have keep their names ({rep.get('renamed_files')})")
        # An edit that moves lines (issue #29): 4 lines deleted in train.py's main above its loop's line 50, so
        # main:50 is main:46, main:120 main:116 and step:60 step:56.  Every site matched at B's lines, nothing
        # changed (the analyzer before: each site through those lines -100 % and new), the loop the same loop.
        sh, _ = gen(gen_path, tmp, "unmarked-shifted")
        rep = json.loads(run(["diff", u, sh, "--json"], expect_rc=0).stdout)
        odd = [(c["type"], c["name"], c["a"], c["b"]) for c in rep["changes"] if c["type"] != "overall" and c["a"] != c["b"]]
        sites = [c["name"] for c in rep["changes"] if c["type"] == "call_site"]
        check(not odd and any(":116:main" in n for n in sites) and not any(":120:main" in n or ":60:step" in n for n in sites),
              f"diff across an edit: every site matched at B's lines, none changed ({odd[:4]}, {sites[:4]})")
        lines = rep.get("lines") or {}
        check(lines.get("moved") == 3 and lines.get("a_only") == 0 and lines.get("b_only") == 0,
              f"diff across an edit: three lines moved, none unmatched ({lines})")
        check(rep.get("step_warnings") == [], f"diff across an edit: the loop's moved line is its loop ({rep.get('step_warnings')})")
        rep = json.loads(run(["diff", sh, u, "--json"], expect_rc=0).stdout)
        odd = [(c["type"], c["name"], c["a"], c["b"]) for c in rep["changes"] if c["type"] != "overall" and c["a"] != c["b"]]
        check(not odd and (rep.get("lines") or {}).get("moved") == 3,
              f"diff across an edit that added the lines: every site matched ({odd[:4]}, {rep.get('lines')})")
        txt = run(["diff", u, sh], expect_rc=0).stdout
        check("no differences" in txt and "3 of them at other line numbers" in txt,
              f"diff across an edit: the text says the lines moved ({txt.splitlines()[:3]})")
        # The same edit with main's line changed to call another function (model.forward renamed forward_v2):
        # that line is not matched (gone in A, new in B), the lines the edit only moved still are.
        ed, _ = gen(gen_path, tmp, "unmarked-edited")
        rep = json.loads(run(["diff", u, ed, "--json"], expect_rc=0).stdout)
        ch = {c["name"]: c for c in rep["changes"] if c["type"] == "call_site"}
        gone = ch.get("model.py:30:forward<train.py:120:main") or {}
        new = ch.get("model.py:30:forward_v2<train.py:116:main") or {}
        check(gone.get("a", 0) > 0 and gone.get("b") == 0 and new.get("a") == 0 and new.get("b", 0) > 0
              and gone.get("shown") is True and new.get("shown") is True,
              f"diff across an edit: the changed line shows as changed ({gone}, {new})")
        same = [(n, c["a"], c["b"]) for n, c in ch.items() if ":46:main" in n and ":120:" not in n and ":116:" not in n]
        check(same and all(a == b for _, a, b in same),
              f"diff across an edit: the lines under main:50 (now 46) matched, unchanged ({same[:4]})")
        # Memory rows only when a peak changed: the unmarked runs allocate alike (a cache growing per step, the
        # same peak) -- none shown; twice the memory (bigmem) -- shown, after the time rows.
        rep = json.loads(run(["diff", u, sl, "--json"], expect_rc=1).stdout)
        mem = [c for c in rep["changes"] if c["type"] == "memory"]
        check(rep.get("memory_shown") is False and mem and not any(c["shown"] for c in mem),
              f"diff: no memory rows without a peak's change ({[(c['name'], c['shown']) for c in mem][:3]})")
        shown = [c for c in rep["changes"] if c["shown"]]
        deltas = [abs(c["b"] - c["a"]) for c in shown if not c["regressed"]]
        check(shown and shown[0]["name"] == "time_per_step_ns" and deltas == sorted(deltas, reverse=True),
              f"diff: rows by their change per step ({[(c['name'], c['b'] - c['a']) for c in shown][:6]})")
        rep = json.loads(run(["diff", a, m, "--json"], expect_rc=1).stdout)
        kinds = [c["type"] for c in rep["changes"] if c["shown"]]
        check(rep.get("memory_shown") is True and "memory" in kinds and kinds.index("memory") == len(kinds) - kinds[::-1].count("memory")
              if "memory" in kinds else False, f"diff bigmem: memory rows shown, after the time rows ({kinds})")
        # Steps counted differently: the same program with its marks around two iterations at a time (as when a
        # GradScaler skips every second optimizer step and the step is counted at it): warned, with the sites'
        # calls per step; marks against detected steps: warned; the same trace twice: no warning.
        hw, _ = gen(gen_path, tmp, "host-work")
        hm, _ = gen(gen_path, tmp, "host-work-merged")
        rep = json.loads(run(["diff", hw, hm, "--json"], expect_rc=1).stdout)
        kinds = [w["kind"] for w in rep.get("step_warnings", [])]
        check(kinds == ["calls_per_step"] and "1.75x" in rep["step_warnings"][0]["text"],
              f"diff: steps of two iterations against steps of one warned ({rep.get('step_warnings')})")
        txt = run(["diff", hw, hm], expect_rc=1).stdout
        check(any(l.startswith("warning: steps: B's steps make 1.75x the calls") for l in txt.splitlines()),
              f"diff: the warning in the text ({txt.splitlines()[:3]})")
        rep = json.loads(run(["diff", hw, u, "--json"], expect_rc=0).stdout)
        check("source" in [w["kind"] for w in rep.get("step_warnings", [])],
              f"diff: marks against detected steps warned ({rep.get('step_warnings')})")
        inl, _ = gen(gen_path, tmp, "unmarked-inline")
        rep = json.loads(run(["diff", u, inl, "--json"], expect_rc=0).stdout)
        check([w["kind"] for w in rep.get("step_warnings", [])] == ["loop"],
              f"diff: steps from another loop warned ({rep.get('step_warnings')})")
        rep = json.loads(run(["diff", hw, hw, "--json"], expect_rc=0).stdout)
        check(rep.get("step_warnings") == [], f"diff: one trace twice, no warning ({rep.get('step_warnings')})")
        # Where the time went.  The same GPU work per step, the host slower (its data loading 600 us instead of
        # 300, as under another process's load): still a regression (exit 1: the time per step decides), said to
        # be the host's, at the data loading; the analyzer before said only "regressed" beside an unchanged GPU
        # busy time.  A slower kernel is the GPU's work.
        ld, _ = gen(gen_path, tmp, "unmarked-loaded")
        rep = json.loads(run(["diff", u, ld, "--json"], expect_rc=1).stdout)
        ex = rep.get("explanation") or {}
        check(rep["verdict"] == "regressed" and ex.get("side") == "host" and ex.get("gpu_work_unchanged") is True
              and ex.get("same_kernels") is True and ex.get("gpu_busy_a_ns") == ex.get("gpu_busy_b_ns")
              and "data.py:33:load_batch" in (ex.get("idle_site") or "")
              and ex.get("idle_site_label") == "python at data.py:33 load_batch", f"diff loaded: the host's change ({ex})")
        txt = run(["diff", u, ld], expect_rc=1).stdout
        where = [l for l in txt.splitlines() if "where the time went" in l]
        check(where and "GPU work per step unchanged" in where[0] and "the host took longer" in where[0]
              and "rerun both under the same load" in where[0] and "python at data.py:33 load_batch" in where[0],
              f"diff loaded: the text says the host took longer ({where})")
        rep = json.loads(run(["diff", u, sl, "--json"], expect_rc=1).stdout)
        ex = rep.get("explanation") or {}
        check(ex.get("side") in ("gpu", "host_and_gpu") and ex.get("gpu_work_unchanged") is False,
              f"diff slow kernel: the GPU's work changed ({ex})")
        rep = json.loads(run(["diff", u, u, "--json"], expect_rc=0).stdout)
        check(rep.get("explanation", 1) is None, f"diff of one trace: nothing to explain ({rep.get('explanation')})")
        run(["diff", a], expect_rc=3)
        run(["diff", a, os.path.join(tmp, "nope.zst")], expect_rc=2)

    def part_export(gen_path, tmp):
        trace, exp = gen(gen_path, tmp, "planted")
        rep = json.loads(run([trace, "--json"]).stdout)
        c = rep["counts"]
        for fmt in ("chrome", "kineto"):
            out = os.path.join(tmp, f"{fmt}.json")
            run(["export", "--format", fmt, trace, "-o", out])
            with open(out) as f:
                doc = json.load(f)
            evs = doc["traceEvents"]
            xs = [e for e in evs if e.get("ph") == "X"]
            gpu = [e for e in xs if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
            api = [e for e in xs if e["cat"] in ("cuda_runtime", "cuda_driver")]
            spans = [e for e in xs if e["cat"] == "python_function"]
            check(len(gpu) == c["gpu_kernels"] + c["gpu_memcpy"] + c["gpu_memset"], f"{fmt}: GPU events count")
            check(len(api) == c["api_calls"], f"{fmt}: API events count {len(api)} != {c['api_calls']}")
            check(len(spans) == c["python_spans"], f"{fmt}: span events count")
            check(len([e for e in gpu if e["cat"] == "kernel"]) == c["kernels"], f"{fmt}: one kernel event per launch")
            # Busy time recomputed from the export equals the report's, to the ns.
            iv = sorted((round(float(e["ts"]) * 1000), round(float(e["ts"]) * 1000) + round(float(e["dur"]) * 1000))
                        for e in gpu)
            busy, cs, ce = 0, None, None
            for s, e in iv:
                if ce is None or s > ce:
                    if ce is not None:
                        busy += ce - cs
                    cs, ce = s, e
                else:
                    ce = max(ce, e)
            busy += ce - cs
            check(busy == rep["breakdown"]["gpu_busy_ns"], f"{fmt}: busy from export {busy} != {rep['breakdown']['gpu_busy_ns']}")
            if fmt == "kineto":
                check(doc["schemaVersion"] == 1 and doc["distributedInfo"]["rank"] == 0, "kineto: header fields")
                flows = [e for e in evs if e.get("cat") == "ac2g"]
                check(len(flows) == 2 * len(gpu), "kineto: one flow arrow per GPU event")
        # Markers keep their kind in args (the name is the label when set).
        mtrace, _ = gen(gen_path, tmp, "markers")
        out = os.path.join(tmp, "markers.export.json")  # (markers.json: the generator's expectation)
        run(["export", mtrace, "-o", out])
        with open(out) as f:
            marks = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "marker"]
        kinds = {e["args"].get("kind") for e in marks}
        check({"iteration begin", "iteration end", "warm-up end"} <= kinds, f"export: marker kinds in args ({kinds})")
        run(["export", "--format", "svg", trace], expect_rc=3)
        run(["export", os.path.join(tmp, "none.zst")], expect_rc=2)

        # The comparison with HTA is its own test (check_hta.py, analyze-hta),
        # so that a missing HTA shows as SKIP rather than as a pass here.

    return {"diff": part_diff, "export": part_export}
