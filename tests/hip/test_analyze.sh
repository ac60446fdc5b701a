#!/bin/bash
# tbanalyze reads HIP traces like CUDA ones: its counts equal the calls the
# program made, the hipEvent GPU timeline is used, and the planted patterns
# (a burst of tiny kernels, scalar host-to-device copies, an idle gap) are
# found.
. "$(dirname "$0")/common.sh"
# A burst is >= 16 short kernels (< 10 us) with the GPU idle between them:
# tiny simulated kernels (300 ns) much shorter than the host's launch cost
# (3 us) make the idle time certain.  Event timing measures a kernel on an
# idle stream from just before its launch call (~4 us here); twice the
# planted burst keeps a run of 16 even if host delays stretch a few.
run_sim traced TBPROF_HIP_EVENTS=1 HIPWL_SCALE=2 SIMHIP_KERNEL_NS=300 SIMHIP_LAUNCH_NS=3000
[ "$(cat "$work/traced.rc")" = 0 ] || { cat "$work/traced.err" >&2; exit 1; }
# Sanitized builds run the host several times slower, which lengthens the
# measured tiny kernels past the default 10 us: widen "short" there.
burst_opt=
[ -z "${HIP_TEST_PRELOAD:-}" ] || burst_opt="--burst-kernel-us 200"
"$TBANALYZE" report --json $burst_opt "$work/traced.zst" >"$work/report.json"
calls="$work/traced.calls"
count_calls() { grep -cE "^($1) " "$calls" || true; }
count_ok() { grep -cE "^($1) 0$" "$calls" || true; }
launch='hipLaunchKernel(_spt)?|hipExtLaunchKernel|hipLaunchCooperativeKernel(_spt)?|hipModuleLaunchKernel'
copy='hipMemcpy[A-Za-z0-9_]*'
set_='hipMemset[A-Za-z0-9_]*'
# counts.kernels is successful launch calls (doc/report-schema.md).
want_kernels=$(count_ok "$launch")
want_memcpy=$(count_calls "$copy")
want_memset=$(count_calls "$set_")
want_malloc=$(count_calls 'hipMalloc|hipMallocManaged|hipHostMalloc')
want_free=$(count_calls 'hipFree|hipHostFree')
want_sync=$(count_calls 'hipDeviceSynchronize|hipStreamSynchronize(_spt)?|hipEventSynchronize|hipStreamWaitEvent(_spt)?')
want_gpu_kernels=$(( $(count_ok "$launch") + $(count_ok hipGraphLaunch) ))
want_gpu_memcpy=$(count_ok "$copy")
field() { sed -n 's/.*"counts":{[^}]*"'"$1"'":\([0-9]*\).*/\1/p' "$work/report.json"; }
fail=0
for pair in kernels:$want_kernels memcpy:$want_memcpy memset:$want_memset malloc:$want_malloc \
	free:$want_free sync:$want_sync gpu_kernels:$want_gpu_kernels gpu_memcpy:$want_gpu_memcpy; do
	name=${pair%%:*} want=${pair#*:}
	got=$(field "$name")
	if [ "$got" != "$want" ]; then
		echo "counts.$name: tbanalyze says '$got', the program made $want" >&2
		fail=1
	fi
done
grep -q '"gpu_timeline":true' "$work/report.json" || { echo "GPU timeline not used" >&2; fail=1; }
grep -q '"kind":"kernel_burst"' "$work/report.json" || { echo "no kernel_burst finding" >&2; fail=1; }
scalar=$(sed -n 's/.*"kind":"scalar_copy","count":\([0-9]*\).*"pageable":\([0-9]*\).*/\1 \2/p' "$work/report.json")
set -- $scalar
if [ -z "$scalar" ] || [ "$1" -lt 10 ] || [ "$2" -lt 10 ]; then
	echo "scalar_copy finding missing or short: '$scalar' (10 pageable scalar copies planted)" >&2
	fail=1
fi
# The workload sleeps 2 ms with nothing queued: an idle gap of at least that
# (less the little work still in flight when the sleep starts).
gap=$(sed -n 's/.*"kind":"idle_gap","cause":"[a-z_]*","count":[0-9]*,"total_ns":[0-9]*,"max_ns":\([0-9]*\).*/\1/p' "$work/report.json" | sort -n | tail -1)
if [ -z "$gap" ] || [ "$gap" -lt 1500000 ]; then
	echo "no idle_gap of >= 1.5 ms for the planted 2 ms sleep (largest: '${gap}')" >&2
	fail=1
fi
# The header says what the trace is: a HIP trace, and no CUPTI in it
# (only CUDA hooks start CUPTI).
features=$("$TBANALYZE" info "$work/traced.zst" | sed -n 's/^features: *//p')
case " $features " in *" hip "*) ;; *) echo "tbanalyze info features '$features' lack hip" >&2; fail=1 ;; esac
case " $features " in *" cupti "*) echo "tbanalyze info features '$features' claim cupti" >&2; fail=1 ;; esac
[ $fail = 0 ] || { cat "$work/report.json" >&2; exit 1; }
echo "tbanalyze counts and findings match the program"
