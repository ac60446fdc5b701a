#!/bin/bash
# TBPROF_HIP_EVENTS=1 on simhip: besides the API records, one GPU record per
# launch, copy and memset (and graph launch), each bracketing the true
# device interval from simhip's ground truth; the program is unchanged.
# The workload is scaled up so the periodic harvest (every 256 timed
# operations) runs between the program's own synchronizations.
. "$(dirname "$0")/common.sh"
export HIPWL_SCALE=8
run_plain plain "$SIMHIP_DIR"
run_sim traced TBPROF_HIP_EVENTS=1
same_behaviour plain traced
"$HIP_TRACE_CHECK" "$work/traced.zst" "$work/traced.calls" --truth "$work/traced.truth" --gpu
