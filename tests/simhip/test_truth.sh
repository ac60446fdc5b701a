#!/bin/bash
# hip_workload on simhip: it runs to completion with the expected output, and
# the ground truth agrees with the program's own log of its calls and with
# HIP's stream semantics (simhip_check).
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
LD_LIBRARY_PATH="$SIMHIP_DIR" SIMHIP_TRUTH="$work/truth" HIPWL_CALLS="$work/calls" \
	"$HIP_WORKLOAD" >"$work/out"
# The simulated device worked: every call but the two deliberate failures succeeded
# and the data made the round trip host -> device -> device -> host.
grep -qx 'hipGetDeviceCount: hipSuccess devices=1' "$work/out"
grep -qx 'failed calls: 2' "$work/out" || { cat "$work/out"; exit 1; }
grep -qx 'checksum: 523776.0' "$work/out"
"$SIMHIP_CHECK" "$work/truth" "$work/calls"
# A wrong truth must be caught: drop one kernel line and check again.
awk 'BEGIN{d=0} /^op=kernel/ && !d {d=1; next} {print}' "$work/truth" >"$work/truth.bad"
if "$SIMHIP_CHECK" "$work/truth.bad" "$work/calls" 2>/dev/null; then
	echo "simhip_check accepted a truth with a kernel missing" >&2
	exit 1
fi
