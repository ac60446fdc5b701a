#!/usr/bin/env python3
"""Suite 'analyze', test analyze-hta: our temporal breakdown against Holistic
Trace Analysis (HTA) reading our kineto export of the planted workload.

    check_hta.py GEN_PLANTED

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


def within(a, b, pct):
    return abs(a - b) <= pct / 100.0 * abs(b)


def main():
    gen_path = sys.argv[1]
    py, why = hta_python()
    if not py:
        print("SKIP: no Python with holistictraceanalysis (run .ci/setup, or set TBP_HTA_PYTHON); tried " + why)
        return SKIP
    check = check_report.check
    with tempfile.TemporaryDirectory(prefix="tba-hta-") as tmp:
        trace, _ = check_report.gen(gen_path, tmp, "planted")
        rep = json.loads(check_report.run([trace, "--json"]).stdout)
        hdir = os.path.join(tmp, "hta")
        os.makedirs(hdir)
        check_report.run(["export", "--format", "kineto", trace, "-o", os.path.join(hdir, "rank0.json")])
        p = subprocess.run([py, "-c", HTA_SCRIPT, hdir], capture_output=True, text=True, timeout=300)
        if check(p.returncode == 0 and p.stdout.strip(),
                 f"HTA ({py}) failed to load the kineto export: {p.stderr.strip()[-500:]}"):
            h = json.loads(p.stdout.strip().splitlines()[-1])
            hta_busy = (h["kernel_time(us)"] - h["idle_time(us)"]) * 1000
            ours = rep["breakdown"]["gpu_busy_ns"]
            check(ours > 0, "planted trace: GPU busy time")
            check(within(hta_busy, ours, 1), f"HTA busy {hta_busy:.0f} ns vs ours {ours} ns: more than 1% apart")
            hta_compute = h["compute_time(us)"] * 1000
            kern = rep["breakdown"]["kernel_ns"]
            check(within(hta_compute, kern, 1),
                  f"HTA compute {hta_compute:.0f} ns vs our kernel time {kern} ns: more than 1% apart")
            print(f"HTA ({py}): busy {hta_busy:.0f} ns vs ours {ours} ns; compute {hta_compute:.0f} ns vs {kern} ns")
            # Idle time breakdown: HTA's host wait / kernel wait + other per
            # stream against ours computed to HTA's definition
            # (doc/findings.md, "Idle time by cause").
            streams = {s["stream"]: s["hta"] for d in rep["devices"] for s in d["streams"]}
            hta_idle = {}
            for r in h["idle"]:
                kind = "host_wait_ns" if r["category"] == "host_wait" else "queued_ns"
                hta_idle.setdefault(r["stream"], {"host_wait_ns": 0.0, "queued_ns": 0.0})[kind] += r["idle_us"] * 1000
            check(set(hta_idle) == set(streams), f"HTA idle breakdown streams {sorted(hta_idle)} vs ours {sorted(streams)}")
            for sid, hv in sorted(hta_idle.items()):
                for kind in ("host_wait_ns", "queued_ns"):
                    ov = streams.get(sid, {}).get(kind)
                    check(ov is not None and (abs(hv[kind] - ov) <= 0.01 * max(hv[kind], 1.0)),
                          f"HTA idle stream {sid} {kind}: {hv[kind]:.0f} vs ours {ov}: more than 1% apart")
            tot = rep["idle_breakdown"]["hta"]
            check(tot["host_wait_ns"] == sum(s["host_wait_ns"] for s in streams.values())
                  and tot["queued_ns"] == sum(s["queued_ns"] for s in streams.values()),
                  f"idle_breakdown.hta is the sum over streams ({tot})")
            check(sum(v["host_wait_ns"] for v in hta_idle.values()) > 0 and sum(v["queued_ns"] for v in hta_idle.values()) > 0,
                  "HTA idle: the planted trace has both host wait and queued idle")
            print(f"HTA idle per stream {hta_idle}; ours {streams}")
    if check_report.failures:
        print(f"{len(check_report.failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
