#!/usr/bin/env python3
"""Suite 'analyze', test analyze-hta: our temporal and idle time breakdowns
against Holistic Trace Analysis (HTA) reading our kineto export of the
planted workload and of a simgpu trace (the ctypes planted workload under
the preload; skipped with a note when simgpu is not built).

    check_hta.py GEN_PLANTED [export]

export: HTA loads kineto exports with correlation ids in every range and one
of more than 100 000 events, finds their ProfilerSteps, runs its temporal
and idle time breakdowns (part_export).

HTA lives in its own venv (.ci/setup installs it in
~/.cache/tbprof/hta-venv, or $TBP_HTA_VENV); TBP_HTA_PYTHON names another
Python that has it.  Without one this test exits 77 (meson: SKIP) and says
why; with one, busy and kernel time more than 1 % apart fail it.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_report  # noqa: E402  (gen, run, check and the failure list)

SKIP = 77

HTA_SCRIPT = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
df = t.get_temporal_breakdown(visualize=False)
idle, _ = t.get_idle_time_breakdown(visualize=False)
out = df.to_dict(orient="records")[0]
out["idle"] = [{"stream": int(r["stream"]), "category": r["idle_category"], "idle_us": float(r["idle_time"])}
               for r in idle.to_dict(orient="records")]
print(json.dumps(out))
"""


def hta_candidates():
    cands = []
    if os.environ.get("TBP_HTA_PYTHON"):
        cands.append(os.environ["TBP_HTA_PYTHON"])
    venv = os.environ.get("TBP_HTA_VENV") or os.path.expanduser("~/.cache/tbprof/hta-venv")
    cands.append(os.path.join(venv, "bin", "python"))
    cands.append(sys.executable)
    return cands


def hta_python():
    """(python, None) for the first candidate that imports HTA, else (None, why)."""
    tried = []
    for py in hta_candidates():
        if os.sep in py and not os.path.exists(py):
            tried.append(f"{py}: not found")
            continue
        try:
            p = subprocess.run([py, "-c", "import hta.trace_analysis"], capture_output=True, text=True, timeout=120)
        except OSError as e:
            tried.append(f"{py}: {e.strerror}")
            continue
        if p.returncode == 0:
            return py, None
        last = (p.stderr.strip().splitlines() or ["import failed"])[-1]
        tried.append(f"{py}: {last}")
    return None, "; ".join(tried)


def compare(py, name, trace, tmp, ns_exact):
    """HTA's temporal and idle time breakdowns of our kineto export of
    `trace` against our report of it: within 1 % (of the stream's idle for
    its idle split), and, when the trace's times are not whole microseconds
    (ns_exact false), HTA's truncation to microseconds on top."""
    check = check_report.check
    rep = json.loads(check_report.run([trace, "--json", "--no-markers"]).stdout)
    hdir = os.path.join(tmp, "hta-" + name)
    os.makedirs(hdir)
    out = os.path.join(hdir, "rank0.json")
    check_report.run(["export", "--format", "kineto", trace, "-o", out])
    # HTA's loader stores correlation ids in the smallest integer type that
    # holds them and then writes row indices into that column: the export
    # itself keeps its ids above the rows (cmd_export.c); part "export"
    # checks that on ids of every range.
    # With ProfilerStep ranges HTA keeps to the events inside them; our
    # figures here (--no-markers) cover the whole trace, so HTA's copy goes
    # without them (part "export" checks that HTA finds them).
    with open(out) as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not e.get("name", "").startswith("ProfilerStep#")]
    with open(out, "w") as f:
        json.dump(doc, f)
    gpu_records = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in doc["traceEvents"])
    p = subprocess.run([py, "-c", HTA_SCRIPT, hdir], capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0 and p.stdout.strip(),
                 f"{name}: HTA ({py}) failed to load the kineto export: {p.stderr.strip()[-500:]}"):
        return
    h = json.loads(p.stdout.strip().splitlines()[-1])
    # HTA truncates nanosecond timestamps to microseconds ("Rounding down ns
    # resolution events"): on a trace with ns times each GPU record may lose
    # up to 1 us in HTA's figures.  The planted trace has whole microseconds.
    slack = 0 if ns_exact else 1000 * gpu_records

    def within(x, ref, pct):
        return abs(x - ref) <= pct / 100.0 * abs(ref) + slack
    hta_busy = (h["kernel_time(us)"] - h["idle_time(us)"]) * 1000
    ours = rep["breakdown"]["gpu_busy_ns"]
    check(ours > 0, f"{name}: GPU busy time")
    check(within(hta_busy, ours, 1), f"{name}: HTA busy {hta_busy:.0f} ns vs ours {ours} ns: more than 1% apart")
    hta_compute = h["compute_time(us)"] * 1000
    kern = rep["breakdown"]["kernel_ns"]
    check(within(hta_compute, kern, 1),
          f"{name}: HTA compute {hta_compute:.0f} ns vs our kernel time {kern} ns: more than 1% apart")
    print(f"{name}: HTA ({py}): busy {hta_busy:.0f} ns vs ours {ours} ns; compute {hta_compute:.0f} ns vs {kern} ns")
    # Idle time breakdown: HTA's host wait / kernel wait + other per stream
    # against ours computed to HTA's definition (doc/findings.md, "Idle time
    # by cause").
    streams = {s["stream"]: s["hta"] for d in rep["devices"] for s in d["streams"]}
    hta_idle = {}
    for r in h["idle"]:
        kind = "host_wait_ns" if r["category"] == "host_wait" else "queued_ns"
        hta_idle.setdefault(r["stream"], {"host_wait_ns": 0.0, "queued_ns": 0.0})[kind] += r["idle_us"] * 1000
    check(set(hta_idle) == set(streams), f"{name}: HTA idle breakdown streams {sorted(hta_idle)} vs ours {sorted(streams)}")
    for sid, hv in sorted(hta_idle.items()):
        for kind in ("host_wait_ns", "queued_ns"):
            ov = streams.get(sid, {}).get(kind)
            stream_idle = hv["host_wait_ns"] + hv["queued_ns"]
            check(ov is not None and (abs(hv[kind] - ov) <= 0.01 * max(stream_idle, 1.0) + slack),
                  f"{name}: HTA idle stream {sid} {kind}: {hv[kind]:.0f} vs ours {ov}: more than 1% apart")
    tot = rep["idle_breakdown"]["hta"]
    check(tot["host_wait_ns"] == sum(s["host_wait_ns"] for s in streams.values())
          and tot["queued_ns"] == sum(s["queued_ns"] for s in streams.values()),
          f"{name}: idle_breakdown.hta is the sum over streams ({tot})")
    check(sum(v["host_wait_ns"] for v in hta_idle.values()) > 0,
          f"{name}: HTA idle: the trace has host wait")
    print(f"{name}: HTA idle per stream {hta_idle}; ours {streams} (slack {slack} ns)")


# HTA on several exports in one process (its import takes seconds): each
# directory's temporal and idle time breakdowns, and the iterations it
# found from the ProfilerStep#N ranges.
HTA_LOAD_SCRIPT = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
for d in sys.argv[1:]:
    try:
        t = TraceAnalysis(trace_dir=d)
        tb = t.get_temporal_breakdown(visualize=False).to_dict(orient="records")[0]
        idle, _ = t.get_idle_time_breakdown(visualize=False)
        tr = t.t.get_trace(0)
        its = sorted(int(i) for i in set(tr["iteration"].tolist()) if i >= 0)
        print(json.dumps({"dir": d, "ok": True, "rows": len(tr), "iterations": len(its),
                          "idle_us": float(tb["idle_time(us)"]), "idle_rows": len(idle)}), flush=True)
    except Exception as e:
        print(json.dumps({"dir": d, "ok": False, "error": f"{type(e).__name__}: {e}"[-400:]}), flush=True)
"""


def part_export(py, gen_path, tmp):
    """HTA loads every kineto export whatever its correlation ids and size
    (issue 32: ids below 2^15 in a trace of more than 32767 rows failed with
    "Invalid value ... for dtype 'int16'"), finds its ProfilerSteps, and
    runs its temporal and idle time breakdowns on it."""
    check = check_report.check
    # (name, first correlation id, measured steps): ids below 2^8, between
    # 2^15 and 2^16, past 2^16 and past 2^32 on small traces; a trace of
    # more than 100 000 events with ids below 2^15.
    cases = [("ids-below-2^8", 1, 20), ("ids-2^15-2^16", 1 << 15, 20), ("ids-past-2^16", 70000, 20),
             ("ids-past-2^32", (1 << 32) + 5, 20), ("100k-events-ids-below-2^15", 1, 8000)]
    dirs, expect = [], {}
    for name, base, steps in cases:
        trace = os.path.join(tmp, name + ".zst")
        subprocess.run([gen_path, "steps-noise", trace, os.path.join(tmp, name + ".json"), f"7,0,{steps},marks"],
                       check=True, timeout=120, env=dict(os.environ, GEN_PLANTED_CORR_BASE=str(base)))
        d = os.path.join(tmp, "hta-" + name)
        os.makedirs(d)
        check_report.run(["export", "--format", "kineto", trace, "-o", os.path.join(d, "rank0.json")])
        with open(os.path.join(d, "rank0.json")) as f:
            doc = json.load(f)
        ev = doc["traceEvents"]
        records = json.loads(check_report.run([trace, "--json"]).stdout)["trace"]["events"]
        check(records >= (100000 if steps > 1000 else 1), f"{name}: {records} events in the trace")
        check(len([e for e in ev if e.get("name", "").startswith("ProfilerStep#")]) == steps + 1,
              f"{name}: the {steps} steps and the warm-up exported as ProfilerStep#N")
        check(doc.get("deviceProperties") and doc["deviceProperties"][0].get("id") == 0,
              f"{name}: deviceProperties filled ({doc.get('deviceProperties')})")
        names = {(e["name"], e["pid"], e.get("tid")) for e in ev if e.get("ph") == "M"}
        check(any(n == "thread_name" and t == 7 for n, _, t in names) and any(n == "process_name" and p == 0 for n, p, _ in names),
              f"{name}: stream and GPU names as metadata events")
        dirs.append(d)
        expect[d] = (name, steps)
    p = subprocess.run([py, "-c", HTA_LOAD_SCRIPT] + dirs, capture_output=True, text=True, timeout=1500)
    got = {}
    for line in p.stdout.splitlines():
        try:
            r = json.loads(line)
            got[r["dir"]] = r
        except ValueError:
            pass
    for d in dirs:
        name, steps = expect[d]
        r = got.get(d)
        if not check(r is not None and r["ok"], f"{name}: HTA loads the export ({r and r.get('error')}; "
                     f"{p.stderr.strip()[-300:] if r is None else ''})"):
            continue
        # HTA counts the steps between ProfilerStep ranges: all but one of them.
        check(r["iterations"] >= steps, f"{name}: HTA found the ProfilerSteps ({r['iterations']} iterations)")
        check(r["idle_rows"] > 0 and r["idle_us"] > 0, f"{name}: HTA's temporal and idle time breakdowns ran")
        print(f"{name}: HTA: {r['rows']} rows, {r['iterations']} iterations, idle {r['idle_us']:.0f} us")


def real_trace(tmp):
    """The ctypes planted workload traced on simgpu (as analyze-real-python),
    or None when libtbprof.so or simgpu is not built."""
    lib, simgpu = os.environ.get("TBPROF_LIB", ""), os.environ.get("SIMGPU_DIR", "")
    if not (os.path.exists(lib) and os.path.exists(os.path.join(simgpu, "libcudart.so.13"))):
        print("note: no simgpu trace compared (libtbprof.so or simgpu not built)")
        return None
    # A sanitizer build's libtbprof needs its runtime preloaded first (the
    # analyze-real-* tests are left out of those builds for that reason).
    deps = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    if "libasan" in deps or "libtsan" in deps:
        print("note: no simgpu trace compared (libtbprof.so is a sanitizer build)")
        return None
    trace = os.path.join(tmp, "real.zst")
    env = dict(os.environ, LD_PRELOAD=lib, LD_LIBRARY_PATH=simgpu, TBPROF_OUT=trace,
               SIMGPU_KERNEL_NS="big_matmul:300000,tiny_zero:2000")
    workload = os.path.join(os.path.dirname(os.path.abspath(__file__)), "planted_workload.py")
    p = subprocess.run([sys.executable, workload, "4"], env=env, capture_output=True, text=True, timeout=120)
    if not check_report.check(p.returncode == 0, f"simgpu workload runs under the preload ({p.stderr.strip()[-300:]})"):
        return None
    return trace


def main():
    gen_path = sys.argv[1]
    py, why = hta_python()
    if not py:
        print("SKIP: no Python with holistictraceanalysis (run .ci/setup, or set TBP_HTA_PYTHON); tried " + why)
        return SKIP
    with tempfile.TemporaryDirectory(prefix="tba-hta-") as tmp:
        if len(sys.argv) > 2 and sys.argv[2] == "export":
            part_export(py, gen_path, tmp)
            return finish()
        trace, _ = check_report.gen(gen_path, tmp, "planted")
        compare(py, "planted", trace, tmp, True)
        real = real_trace(tmp)
        if real:
            compare(py, "simgpu", real, tmp, False)
    return finish()


def finish():
    if check_report.failures:
        print(f"{len(check_report.failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
