#!/bin/bash
# Added host cost per hipLaunchKernel / hipMemsetAsync: hip_bench on simhip
# with its launch cost and kernel time at zero, without tbprof, with it
# (API records only, no Python call paths), and with TBPROF_HIP_EVENTS=1.
# One run each; figures only, nothing asserted.
set -eu
n=${HIP_BENCH_N:-1000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH="$SIMHIP_DIR" SIMHIP_LAUNCH_NS=0 SIMHIP_KERNEL_NS=0 \
	SIMHIP_KERNEL_PS_PER_THREAD=0 SIMHIP_MEMSET_NS=0 TBPROF_PYTHON=0
"$HIP_BENCH" "$n" >"$work/plain"
TBPROF_OUT="$work/t.zst" LD_PRELOAD="$TBPROF_LIB" "$HIP_BENCH" "$n" >"$work/traced"
TBPROF_OUT="$work/e.zst" TBPROF_HIP_EVENTS=1 LD_PRELOAD="$TBPROF_LIB" "$HIP_BENCH" "$((n / 10))" >"$work/events"
get() { sed -n "s/^$2 //p" "$work/$1"; }
for what in launch_ns memset_ns; do
	p=$(get plain $what) t=$(get traced $what) e=$(get events $what)
	awk -v w="$what" -v p="$p" -v t="$t" -v e="$e" 'BEGIN {
		printf "%s: plain %.1f ns, traced %.1f ns (+%.1f ns, x%.2f), events %.1f ns (+%.1f ns)\n",
			w, p, t, t - p, t / p, e, e - p }'
done
