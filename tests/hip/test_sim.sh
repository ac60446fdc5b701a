#!/bin/bash
# HIP hooks on simhip, event timing off: the program behaves as without
# tbprof, and the trace holds every call the program made (with its result)
# and every operation of simhip's ground truth, with exact counts.
. "$(dirname "$0")/common.sh"
run_plain plain "$SIMHIP_DIR"
run_sim traced
same_behaviour plain traced
[ -s "$work/traced.zst" ] || { echo "no trace written" >&2; cat "$work/traced.err" >&2; exit 1; }
"$HIP_TRACE_CHECK" "$work/traced.zst" "$work/traced.calls" --truth "$work/traced.truth" --no-gpu
# The checker must notice a call missing from the trace.
cp "$work/traced.calls" "$work/extra.calls"
echo "hipLaunchKernel 0" >>"$work/extra.calls"
if "$HIP_TRACE_CHECK" "$work/traced.zst" "$work/extra.calls" >/dev/null 2>&1; then
	echo "hip_trace_check accepted a call missing from the trace" >&2
	exit 1
fi
