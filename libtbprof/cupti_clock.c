/*
 * GPU timestamps in our clock (CLOCK_MONOTONIC ns).  CUPTI's timestamp callback returning
 * CLOCK_MONOTONIC puts every record in our domain (CUPTI 13 on an H100 honours it: conformance
 * table, doc/gpu.md "Clock"); where it is refused, an offset measured by bracketing
 * cuptiGetTimestamp between two CLOCK_MONOTONIC reads is added to every timestamp.
 */
#include "core.h"
#include "cupti_support.h"
#include "tbp_config.h"

/* Our CLOCK.domain for GPU activity timestamps delivered by CUPTI. */
#define TBP_CLOCK_DOMAIN_CUPTI 1

void tbp_cupti_clock_record_hook_side(void)
{
	tbp_emit_clock(TBP_CLOCK_DOMAIN_CUPTI, 0, 0, TBP_CLOCK_HOOK_SIDE);
}

#if TBP_HAVE_CUPTI
#include "cupti_internal.h"

#define CALIBRATION_ROUNDS 50

int64_t tbp_cupti_clock_offset_ns;
uint64_t tbp_cupti_clock_uncertainty_ns;
static uint64_t clock_method;

void tbp_cupti_clock_record(void)
{
	tbp_emit_clock(TBP_CLOCK_DOMAIN_CUPTI, tbp_cupti_clock_offset_ns, tbp_cupti_clock_uncertainty_ns,
		       (unsigned)clock_method);
	if (tbp_cfg.verbose)
		tbp_log("CUPTI active (%s), clock %s offset %lld ns +- %llu ns", tbp_cupti_path,
			clock_method == TBP_CLOCK_CUPTI_CALLBACK ? "callback" : "bracketed",
			(long long)tbp_cupti_clock_offset_ns, (unsigned long long)tbp_cupti_clock_uncertainty_ns);
}

static uint64_t CUPTIAPI monotonic_timestamp(void)
{
	return tbp_now();
}

/* Best (narrowest) of CALIBRATION_ROUNDS brackets m0 <= gpu <= m1. */
static int calibrate(int64_t *offset, uint64_t *uncertainty)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < CALIBRATION_ROUNDS; i++) {
		uint64_t g = 0;
		uint64_t m0 = tbp_now();
		CUptiResult r = tbp_cupti.get_timestamp(&g);
		uint64_t m1 = tbp_now();
		if (r != CUPTI_SUCCESS)
			return -1;
		uint64_t width = m1 - m0;
		if (width < best) {
			best = width;
			*offset = (int64_t)(m0 + width / 2) - (int64_t)g;
			*uncertainty = (width + 1) / 2;
		}
	}
	return 0;
}

int tbp_cupti_clock_setup(void)
{
	clock_method = TBP_CLOCK_CUPTI_CALLBACK;
	tbp_cupti_clock_offset_ns = 0;
	tbp_cupti_clock_uncertainty_ns = 0;
	CUptiResult r = tbp_cupti.register_timestamp_callback
				? tbp_cupti.register_timestamp_callback(monotonic_timestamp)
				: CUPTI_ERROR_NOT_SUPPORTED;
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		tbp_cupti_in_use("cuptiActivityRegisterTimestampCallback");
		return -1;
	}
	if (r == CUPTI_SUCCESS)
		return 0;
	int64_t offset = 0;
	uint64_t uncertainty = 0;
	if (!tbp_cupti.get_timestamp || calibrate(&offset, &uncertainty) != 0) {
		tbp_cupti_error("clock calibration (no timestamp callback, no cuptiGetTimestamp)", r);
		return -1;
	}
	clock_method = TBP_CLOCK_BRACKETED;
	tbp_cupti_clock_offset_ns = offset;
	tbp_cupti_clock_uncertainty_ns = uncertainty;
	return 0;
}
#endif /* TBP_HAVE_CUPTI */
