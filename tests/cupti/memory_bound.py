#!/usr/bin/env python3
"""Memory under a CUPTI-on launch loop is bounded by configuration, not by run length (issue #15).

    memory_bound.py --program simgpu_launch_loop --simgpu-dir D

simgpu's launch loop with zero simulated costs (launches as fast as the host can make them, CUPTI on
through simgpu's stand-in) under libtbprof, at SHORT and LONG launches.  Checks, not timed:
- peak RSS (VmHWM) of the traced run minus that of the same run without libtbprof stays under
  TBPROF_CUPTI_BUFFER_SIZE + MARGIN (per-thread rings at TBPROF_BUFFER_SIZE for the launching thread and
  the stand-in's delivery thread, the stand-in's own record queue, the writer's compression state);
- the long run's peak exceeds the short run's by less than GROWTH: memory does not follow run length;
- every launch is accounted for: host side, host records <= launches + the loop's 2 other calls <=
  host records + lost (buffer_full: a ring's drops, GPU records written on that thread included);
  GPU side, kernel records <= launches <= kernel records + lost (cupti).  (The stand-in, as CUPTI, counts
  every dropped record, of whatever kind -- kernel, its correlation pair, its API record -- so the GPU
  side is an inequality.)

The stand-in delivers as real CUPTI does: it writes each record into one of our buffers as the
simulated work ends, asks us for another when that one is full (here on the launching thread), and
hands buffers back only at its delivery thread's period or a flush -- so between two deliveries it
holds as many of our buffers as the records made need, and with none given drops and counts.  It
keeps nothing of its own but records of work still running (none here: zero simulated costs).  With
libtbprof's cap removed this test fails (RSS follows run length).
Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peak_rss import run_peak  # noqa: E402

MiB = 1 << 20
SHORT, LONG = 500_000, 2_000_000
CUPTI_CAP = 32 * MiB           # TBPROF_CUPTI_BUFFER_SIZE, set explicitly below
RING = 8 * MiB                 # TBPROF_BUFFER_SIZE (default)
# What libtbprof holds besides CUPTI's buffers, each bounded by configuration, not by run length: the
# launching thread's ring (TBPROF_BUFFER_SIZE), the 1 MiB rings of the stand-in's delivery thread and of
# our flusher (they carry only the CUPTI consumer's records: GPU records, LOST notes; cupti_hold.c), the
# GPU records held for time order (65 536 x 176 bytes), the correlation map (3 MiB), and 12 MiB for the
# writer's frame buffers and compressor, the libraries, the threads' stacks and the allocator's slack.
# The sum, with the default settings, is the ~62 MiB that bench/interpose/bench_cupti_memory.py
# measures over 6 M launches (issue 30's goal: <= 64 MiB); the parent of that change added ~76 MiB (two
# 8 MiB rings for those threads) and fails here.  On a quiet host the flusher's first record is a LOST
# note: a library that sizes that ring only before a held record gives it 8 MiB and fails here too
# (+69.5 MiB at 2 M launches).
MARGIN = RING + 2 * MiB + 11 * MiB + 3 * MiB + 12 * MiB
GROWTH = 16 * MiB
# When neither run reaches the cap: records the stand-in lets wait for a delivery, and launches made
# (each makes 3 records: kernel, API, correlation pair), so most are dropped at any host speed.
QUEUE_LIMIT = 1000
QUEUE_LIMIT_LAUNCHES = 20_000
# Host records the loop makes besides its launches: cudaStreamCreateWithFlags, cudaDeviceSynchronize.
HOST_KINDS = ("api", "launch", "sync", "memcpy", "memset", "malloc", "free")
OTHER_CALLS = 2

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def counts(tbanalyze, trace):
    info = subprocess.run([tbanalyze, "info", trace, "--json"], capture_output=True, text=True)
    if info.returncode != 0:
        fail(f"tbanalyze info {trace}: exit {info.returncode}: {info.stderr[-300:]}")
        return None
    return json.loads(info.stdout)


def check_report_lost(tbanalyze, trace, lost):
    """tbanalyze report names the lost events by source, with what each means, in text and JSON."""
    text = subprocess.run([tbanalyze, "report", trace], capture_output=True, text=True)
    line = next((l for l in text.stdout.splitlines() if l.startswith("trace: ")), "")
    print("  report:", line)
    meaning = {"cupti": "CUPTI had no buffer", "buffer_full": "a thread's buffer was full"}
    for source, count in lost.items():
        if source != "total" and f"{source} {count}: {meaning.get(source, '')}" not in line:
            fail(f"report's trace line does not show {source} {count}: {line!r}")
    rep = subprocess.run([tbanalyze, "report", trace, "--json"], capture_output=True, text=True)
    try:
        by_source = json.loads(rep.stdout)["trace"]["lost_by_source"]
    except (ValueError, KeyError) as e:
        fail(f"report --json: no trace.lost_by_source ({e})")
        return
    if by_source != {k: v for k, v in lost.items() if k != "total"}:
        fail(f"report --json lost_by_source {by_source} != info's {lost}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--simgpu-dir", required=True)
    args = ap.parse_args()
    lib, tbanalyze = os.environ["TBPROF_LIB"], os.environ["TBANALYZE"]
    tmp = tempfile.mkdtemp(prefix="tbp-memory-bound-")
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    base.update({"LD_LIBRARY_PATH": args.simgpu_dir, "SIMGPU_LAUNCH_NS": "0", "SIMGPU_QUEUE_NS": "0",
                 "SIMGPU_KERNEL_BASE_NS": "0", "SIMGPU_KERNEL_NS_PER_BLOCK": "0"})
    base.pop("SIMGPU_TRUTH", None)
    peaks = {}
    # The report's lost line is checked on the first run whose launches outran the cap: how many
    # records pile up between two deliveries follows the host's speed (on a loaded machine the short
    # run's loop may never fill 32 MiB in one delivery period), so which run that is does too.
    lost_checked = False
    for n in (SHORT, LONG):
        rc, out, plain_rss = run_peak([args.program, str(n)], base, capture=True)
        if rc != 0:
            fail(f"{n} launches without libtbprof: exit {rc}")
            continue
        env = dict(base, LD_PRELOAD=lib, TBPROF_OUT=os.path.join(tmp, f"t{n}.zst"),
                   TBPROF_CUPTI_BUFFER_SIZE=str(CUPTI_CAP))
        rc, out, rss = run_peak([args.program, str(n)], env, capture=True)
        if rc != 0:
            fail(f"{n} launches under libtbprof: exit {rc}")
            continue
        added = rss - plain_rss
        peaks[n] = rss
        print(f"{n} launches: peak RSS {plain_rss / MiB:.1f} MiB plain, {rss / MiB:.1f} MiB traced "
              f"(+{added / MiB:.1f} MiB; bound {(CUPTI_CAP + MARGIN) / MiB:.0f} MiB)")
        if added > CUPTI_CAP + MARGIN:
            fail(f"{n} launches: libtbprof added {added / MiB:.1f} MiB, over the cap "
                 f"{CUPTI_CAP / MiB:.0f} MiB + margin {MARGIN / MiB:.0f} MiB")
        info = counts(tbanalyze, env["TBPROF_OUT"])
        if not info:
            continue
        kinds = info.get("kinds", {})
        lost = info["lost"]
        launches = kinds.get("launch", 0)
        kernels = kinds.get("gpu_kernel", 0)
        lost_host, lost_gpu = lost.get("buffer_full", 0), lost.get("cupti", 0)
        host = sum(kinds.get(k, 0) for k in HOST_KINDS)
        print(f"  host records {host} ({launches} launches) + lost {lost_host}; "
              f"kernels {kernels} + lost (cupti) {lost_gpu}")
        # A thread's LOST count is every record its ring refused, GPU records it wrote for CUPTI included
        # (CUPTI's buffers may be processed on the launching thread), so this side is an inequality too.
        if not launches <= n or not host <= n + OTHER_CALLS <= host + lost_host:
            fail(f"{n} launches: {host} host records ({launches} launches) + {lost_host} lost do not account "
                 f"for {n} + {OTHER_CALLS} calls")
        if not kernels <= n <= kernels + lost_gpu:
            fail(f"{n} launches: {kernels} kernels, {lost_gpu} lost by CUPTI: launches unaccounted for")
        if lost_gpu and not lost_checked:
            check_report_lost(tbanalyze, env["TBPROF_OUT"], lost)
            lost_checked = True
    if not lost_checked:
        # Neither run outran the cap (a slow or loaded host): the memory checks above still hold, and the
        # report's lost line is checked on drops the simulator makes, whatever the host's speed.
        print(f"  the cap was not reached at this host's speed; report checked on the stand-in's own drops "
              f"(SIMGPU_CUPTI_QUEUE_LIMIT={QUEUE_LIMIT})")
        env = dict(base, LD_PRELOAD=lib, TBPROF_OUT=os.path.join(tmp, "queue_limit.zst"),
                   SIMGPU_CUPTI_QUEUE_LIMIT=str(QUEUE_LIMIT))
        rc, out, _ = run_peak([args.program, str(QUEUE_LIMIT_LAUNCHES)], env, capture=True)
        info = counts(tbanalyze, env["TBPROF_OUT"]) if rc == 0 else None
        if rc != 0:
            fail(f"{QUEUE_LIMIT_LAUNCHES} launches with the stand-in's queue limited: exit {rc}")
        elif info:
            if not info["lost"].get("cupti"):
                fail(f"no CUPTI drops with SIMGPU_CUPTI_QUEUE_LIMIT={QUEUE_LIMIT}: {info['lost']}")
            check_report_lost(tbanalyze, env["TBPROF_OUT"], info["lost"])
    if SHORT in peaks and LONG in peaks and peaks[LONG] - peaks[SHORT] > GROWTH:
        fail(f"peak RSS grows with run length: {peaks[SHORT] / MiB:.1f} MiB at {SHORT} launches, "
             f"{peaks[LONG] / MiB:.1f} MiB at {LONG}")
    if failures:
        print(f"{len(failures)} failure(s); traces in {tmp}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
