# Shared by the hip suite's scripts: a scratch directory and runners.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What goes in LD_PRELOAD for a traced run (sanitized builds: runtime first).
TRACED_PRELOAD="${HIP_TEST_PRELOAD:+$HIP_TEST_PRELOAD }$TBPROF_LIB"

# run_sim NAME [ENV...]: hip_workload on simhip under the preload; leaves
# $work/NAME.{zst,truth,calls,out,rc}.
run_sim() {
	local name=$1
	shift
	set +e
	env "$@" LD_LIBRARY_PATH="$SIMHIP_DIR" SIMHIP_TRUTH="$work/$name.truth" \
		HIPWL_CALLS="$work/$name.calls" TBPROF_OUT="$work/$name.zst" \
		LD_PRELOAD="$TRACED_PRELOAD" "$HIP_WORKLOAD" >"$work/$name.out" 2>"$work/$name.err"
	echo $? >"$work/$name.rc"
	set -e
}

# The same program without tbprof, for comparing what it printed.
run_plain() {
	local name=$1 libdir=$2
	set +e
	LD_LIBRARY_PATH="$libdir" "$HIP_WORKLOAD" >"$work/$name.out" 2>"$work/$name.err"
	echo $? >"$work/$name.rc"
	set -e
}

same_behaviour() {
	local a=$1 b=$2
	if ! cmp -s "$work/$a.out" "$work/$b.out"; then
		echo "stdout differs between $a and $b:" >&2
		diff "$work/$a.out" "$work/$b.out" >&2 || true
		exit 1
	fi
	if [ "$(cat "$work/$a.rc")" != "$(cat "$work/$b.rc")" ]; then
		echo "exit status $(cat "$work/$a.rc") ($a) vs $(cat "$work/$b.rc") ($b)" >&2
		exit 1
	fi
}
