#!/bin/bash
# A Python ctypes HIP program under the preload on simhip: its output is
# unchanged, every call is recorded, and tbanalyze names the Python
# functions that launched the tiny-kernel burst and the scalar copies.
. "$(dirname "$0")/common.sh"
[ -n "${PYTHON:-}" ] || { echo "SKIP: no Python"; exit 77; }
if [ "${HIP_TEST_SANITIZER:-}" = thread ]; then
	echo "SKIP: the Python interpreter does not run under a preloaded ThreadSanitizer runtime"
	exit 77
fi
script="$(dirname "$0")/hip_ctypes.py"
set +e
# Python is not instrumented: sanitized builds preload the runtime in both runs.
LD_LIBRARY_PATH="$SIMHIP_DIR" LD_PRELOAD="${HIP_TEST_PRELOAD:-}" "$PYTHON" "$script" \
	>"$work/plain.out" 2>"$work/plain.err"
echo $? >"$work/plain.rc"
LD_LIBRARY_PATH="$SIMHIP_DIR" HIPWL_CALLS="$work/traced.calls" TBPROF_OUT="$work/traced.zst" \
	TBPROF_HIP_EVENTS=1 SIMHIP_KERNEL_NS=300 SIMHIP_LAUNCH_NS=3000 \
	LD_PRELOAD="$TRACED_PRELOAD" "$PYTHON" "$script" >"$work/traced.out" 2>"$work/traced.err"
echo $? >"$work/traced.rc"
set -e
same_behaviour plain traced
[ "$(cat "$work/plain.rc")" = 0 ] || { cat "$work/plain.err" >&2; exit 1; }
# ctypes finds hipMalloc & co. with dlsym on its own handle: tbprof's dlsym
# interposer must hand out its wrappers there.
if [ ! -s "$work/traced.zst" ] || ! "$TBANALYZE" dump "$work/traced.zst" | grep -q ' api=hip'; then
	echo "FAIL: HIP entry points looked up with dlsym(handle) were not traced" >&2
	exit 1
fi
"$HIP_TRACE_CHECK" "$work/traced.zst" "$work/traced.calls"
# What is checked here is the naming.  Event timing measures a kernel on an
# idle stream from just before its launch call, so a measured tiny kernel
# includes Python's launch overhead and any time the host was descheduled
# there (tens of ms on a loaded 2-core machine, enough to split the burst
# at 200 us): "short" is widened to 1 s.  simhip's timeline is real time, so
# the host descheduled between two launches also leaves the GPU idle past
# the idle-gap threshold (50 us), which ends a burst (40 launches cut in
# pieces under the 16 a burst needs leave none): the threshold is widened
# to 1 s too.
"$TBANALYZE" report --json --burst-kernel-us 1000000 --gap-us 1000000 "$work/traced.zst" >"$work/report.json"
"$PYTHON" - "$work/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
findings = {f["kind"]: f for f in report["findings"]}
problems = []
def named(kind, function):
    f = findings.get(kind)
    if not f:
        problems.append(f"no {kind} finding")
        return
    frames = f["where"]["python"]
    if not frames or frames[0]["function"] != function or not frames[0]["file"].endswith("hip_ctypes.py"):
        problems.append(f"{kind} names {frames[:1]}, not {function}() in hip_ctypes.py")
named("kernel_burst", "zero_grad")
named("scalar_copy", "step")
if report["counts"]["kernels"] != 120 or report["counts"]["memcpy"] != 24:
    problems.append(f"counts {report['counts']}")
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
print("tbanalyze names zero_grad() and step() in hip_ctypes.py")
PY
