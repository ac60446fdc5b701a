#!/usr/bin/env bash
# The GPU checks of issue #24 as one prepared run on a lent GPU machine (doc/gpu.md, "On a lent GPU"):
#   here:   bash bench/gpu/fetch_deps.sh
#   device: run command "bash bench/gpu/device_check.sh" with carry [".deps"], timeout_s 600
# Builds (zstd from the carried .deb), then runs, each step with its own time limit (595 s in all:
# one 10-minute call; a stuck step leaves the rest their time): the CUPTI conformance table against the H100's, `meson test --suite
# gpu`, bench/gpu/launch_bound.py (CUPTI floor included) and breakdown_crosscheck.py.  Everything
# goes to $OUT (or /tmp/tbp-device), one log per step and summary.txt.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-/tmp/tbp-device}
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
say() { printf '%s %s\n' "$(date +%T)" "$*" | tee -a "$summary"; }

deps=/tmp/tbp-deps
if ls .deps/*.deb >/dev/null 2>&1; then
	for f in .deps/*.deb; do dpkg -x "$f" "$deps"; done
	lib=$deps/usr/lib/x86_64-linux-gnu
	export CPATH=$deps/usr/include${CPATH:+:$CPATH}
	export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
	export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	say "unpacked $(ls .deps/*.deb | wc -l) carried packages into $deps"
fi
nvidia-smi -L 2>&1 | tee -a "$summary"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' 2>&1 | tee -a "$summary"

step() { # NAME LIMIT_S COMMAND...
	local name=$1 limit=$2
	shift 2
	local t0=$SECONDS
	timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
	local rc=$?
	say "$name: exit $rc in $((SECONDS - t0)) s (log $name.log)"
	return $rc
}

build=$root/build-device
step setup 60 meson setup "$build" "$root" -Dnative_stacks=disabled -Dhip=disabled || { tail -30 "$out/setup.log"; exit 1; }
step build 150 ninja -C "$build" || { tail -30 "$out/build.log"; exit 1; }
step conformance 45 tests/cupti/conformance/run-real.sh "$build"
grep -E "^(DIFFERS|NEW|MEASURED|conformance:)" "$out/conformance.log" | tee -a "$summary"
step gpu-suite 150 meson test -C "$build" --suite gpu --print-errorlogs -v
grep -E "kernels|joined|OK|FAIL|SKIP" "$out/gpu-suite.log" | tail -12 | tee -a "$summary"
step launch-bound 90 python3 bench/gpu/launch_bound.py --build "$build" --rounds 3
tail -14 "$out/launch-bound.log" | tee -a "$summary"
step crosscheck 100 python3 bench/gpu/breakdown_crosscheck.py --build "$build" -m hf_Bert --niter 5 --nwarmup 3
tail -12 "$out/crosscheck.log" | tee -a "$summary"
