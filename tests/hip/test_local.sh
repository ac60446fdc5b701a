#!/bin/bash
# HIP runtime loaded with RTLD_LOCAL behind a dlopen'ed library (as Python
# loads ROCm PyTorch): the preloaded hooks still reach the runtime (every
# call succeeds as without tbprof) and every call is recorded.
. "$(dirname "$0")/common.sh"
set +e
LD_LIBRARY_PATH="$SIMHIP_DIR" "$HIP_DLOPEN_MAIN" "$HIP_LOCAL_LIB" >"$work/plain.out" 2>"$work/plain.err"
echo $? >"$work/plain.rc"
LD_LIBRARY_PATH="$SIMHIP_DIR" HIPWL_CALLS="$work/traced.calls" TBPROF_OUT="$work/traced.zst" \
	LD_PRELOAD="$TRACED_PRELOAD" "$HIP_DLOPEN_MAIN" "$HIP_LOCAL_LIB" >"$work/traced.out" 2>"$work/traced.err"
echo $? >"$work/traced.rc"
set -e
same_behaviour plain traced
[ "$(cat "$work/plain.rc")" = 0 ] || { cat "$work/plain.out" "$work/plain.err" >&2; exit 1; }
"$HIP_TRACE_CHECK" "$work/traced.zst" "$work/traced.calls"
# The kernel registered from the library's constructor is named.
if ! "$TBANALYZE" dump "$work/traced.zst" | grep -q 'name="\(_Z12local_kernelv\|local_kernel()\)"'; then
	echo "launches of local_kernel are not named" >&2
	exit 1
fi
