#!/bin/bash
# Against Debian's real libamdhip64 with no AMD GPU every HIP call fails:
# the program must print and return exactly what it does without tbprof,
# and the trace must hold every call with its error code.  With
# TBPROF_HIP_EVENTS=1 event timing gives up quietly (no GPU records).
. "$(dirname "$0")/common.sh"
if [ ! -e "$REAL_HIP_LIB" ]; then
	echo "SKIP: $REAL_HIP_LIB not installed"
	exit 77
fi
realdir=$(dirname "$REAL_HIP_LIB")
run_plain plain "$realdir"
grep -q 'hipMalloc a: hipError' "$work/plain.out" || {
	echo "the real runtime did not fail as expected here (is there an AMD GPU?)" >&2
	cat "$work/plain.out" >&2
	exit 77
}
for ev in 0 1; do
	set +e
	TBPROF_HIP_EVENTS=$ev LD_LIBRARY_PATH="$realdir" HIPWL_CALLS="$work/real$ev.calls" \
		TBPROF_OUT="$work/real$ev.zst" LD_PRELOAD="$TRACED_PRELOAD" "$HIP_WORKLOAD" \
		>"$work/real$ev.out" 2>"$work/real$ev.err"
	echo $? >"$work/real$ev.rc"
	set -e
	same_behaviour plain real$ev
	"$HIP_TRACE_CHECK" "$work/real$ev.zst" "$work/real$ev.calls" --no-gpu
	# Every recorded call failed, as the program saw.
	if ! grep -qv ' 0$' "$work/real$ev.calls"; then
		echo "no failing call logged" >&2
		exit 1
	fi
done
