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
# Three rounds each, the median reported.
for r in 1 2 3; do
	"$HIP_BENCH" "$n" >"$work/plain.$r"
	TBPROF_OUT="$work/t.zst" LD_PRELOAD="$TBPROF_LIB" "$HIP_BENCH" "$n" >"$work/traced.$r"
	TBPROF_OUT="$work/e.zst" TBPROF_HIP_EVENTS=1 LD_PRELOAD="$TBPROF_LIB" "$HIP_BENCH" "$((n / 10))" >"$work/events.$r"
done
median() { for r in 1 2 3; do sed -n "s/^$2 //p" "$work/$1.$r"; done | sort -g | sed -n 2p; }
echo "hip_bench: $n launches (events: $((n / 10))) on simhip with zero simulated cost, median of 3"
for what in launch_ns launch_thread_cpu_ns memset_ns; do
	p=$(median plain $what) t=$(median traced $what) e=$(median events $what)
	awk -v w="$what" -v p="$p" -v t="$t" -v e="$e" 'BEGIN {
		printf "  %-22s plain %7.1f  traced %7.1f (+%6.1f)  events %7.1f (+%6.1f)\n",
			w, p, t, t - p, e, e - p }'
done
