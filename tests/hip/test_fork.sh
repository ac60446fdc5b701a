#!/bin/bash
# fork without exec under the preload with event timing: the program's
# output is unchanged and each process's own trace has its memsets (5 + 5
# in the parent, 7 in the child), each with its GPU record.
. "$(dirname "$0")/common.sh"
if [ "${HIP_TEST_SANITIZER:-}" = thread ]; then
	# TSan cannot follow a thread started in the child of a multi-threaded
	# parent (the child's tbprof threads).
	echo "SKIP: fork with a tracing child is not supported by ThreadSanitizer"
	exit 77
fi
set +e
LD_LIBRARY_PATH="$SIMHIP_DIR" "$HIP_FORK" >"$work/plain.out" 2>"$work/plain.err"
echo $? >"$work/plain.rc"
LD_LIBRARY_PATH="$SIMHIP_DIR" TBPROF_HIP_EVENTS=1 TBPROF_OUT="$work/t.zst" \
	LD_PRELOAD="$TRACED_PRELOAD" "$HIP_FORK" >"$work/traced.out" 2>"$work/traced.err"
echo $? >"$work/traced.rc"
set -e
same_behaviour plain traced
[ "$(cat "$work/plain.rc")" = 0 ] || { cat "$work/plain.out" >&2; exit 1; }
counts() { "$TBANALYZE" dump "$1" | awk '$3 == "memset" || $3 == "gpu_memset" {n[$3]++} END {print n["memset"]+0, n["gpu_memset"]+0}'; }
[ -s "$work/t.zst" ] || { echo "no parent trace" >&2; exit 1; }
child=$(ls "$work"/t.*.zst 2>/dev/null | head -1)
[ -n "$child" ] || { echo "no child trace" >&2; ls "$work" >&2; exit 1; }
got_parent=$(counts "$work/t.zst") got_child=$(counts "$child")
[ "$got_parent" = "10 10" ] || { echo "parent trace: memset/gpu_memset $got_parent, want 10 10" >&2; exit 1; }
[ "$got_child" = "7 7" ] || { echo "child trace: memset/gpu_memset $got_child, want 7 7" >&2; exit 1; }
echo "parent 10 memsets, child 7, each with GPU records"
