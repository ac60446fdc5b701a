/*
 * The enabling sequence: API records for the calls that join GPU work to its call, external
 * correlation records, then the GPU activity kinds (no GPU record precedes what joins it).
 *
 * API records, as CUPTI 13 behaved on an H100 (tests/cupti/conformance/h100.txt, doc/gpu.md):
 *  - callback ids enabled one by one (cuptiActivityEnableRuntimeApi/DriverApi(cbid, 1)) without
 *    their kind, as cupti_activity.h suggests for "a small set": every call answers CUPTI_SUCCESS
 *    and CUPTI delivers no API record at all, and so no external correlation record either (how
 *    libtbprof joined 0 % of its kernels there until issue #24);
 *  - the RUNTIME and DRIVER kinds whole: a record for every call, also the many cudaGetDevice,
 *    cudaStreamIsCapturing, ... PyTorch makes per op (5-9 us per launch, issue #19);
 *  - the kinds whole, then every callback id not wanted switched off (cbid, 0): one record per
 *    wanted call.  This is what we do.
 */
#include "tbp_config.h"

#if TBP_HAVE_CUPTI
#include <string.h>

#include "cupti_internal.h"

/* Callback ids to try per domain: the header's, and room for ids a newer CUPTI adds. */
#define RUNTIME_CBIDS (CUPTI_RUNTIME_TRACE_CBID_SIZE + 256)
#define DRIVER_CBIDS (CUPTI_DRIVER_TRACE_CBID_SIZE + 256)
#define CBIDS_MAX (RUNTIME_CBIDS > DRIVER_CBIDS ? RUNTIME_CBIDS : DRIVER_CBIDS)

static uint8_t cbid_class[2][CBIDS_MAX];        /* join class per callback id, by domain */
static CUpti_ActivityKind enabled_kinds[16];    /* what tbp_cupti_disable turns off */
static unsigned n_enabled_kinds;

unsigned tbp_cupti_cbid_class(int driver, uint32_t cbid)
{
	return cbid < CBIDS_MAX ? cbid_class[driver != 0][cbid] : 0;
}

static const struct {
	CUpti_CallbackDomain domain;
	CUpti_ActivityKind kind;
	uint32_t n_cbids;
	const char *enable_name;
} domains[2] = {
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_ACTIVITY_KIND_RUNTIME, RUNTIME_CBIDS, "cuptiActivityEnableRuntimeApi" },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_ACTIVITY_KIND_DRIVER, DRIVER_CBIDS, "cuptiActivityEnableDriverApi" },
};

/* 0, or -1 when another tool holds CUPTI (said). */
static int enable_api_records(void)
{
	for (int d = 0; d < 2; d++) {
		if (tbp_cupti.get_callback_name) {
			for (uint32_t cbid = 1; cbid < domains[d].n_cbids; cbid++) {
				const char *name = NULL;
				if (tbp_cupti.get_callback_name(domains[d].domain, cbid, &name) == CUPTI_SUCCESS && name)
					cbid_class[d][cbid] = (uint8_t)tbp_cupti_join_class(d, name);
			}
		}
		CUptiResult r = tbp_cupti.activity_enable(domains[d].kind);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			tbp_cupti_in_use("cuptiActivityEnable");
			return -1;
		}
		if (r != CUPTI_SUCCESS) {
			/* No API records of this domain: its GPU records stay unjoined, and the join's
			 * NOTICE at exit says how many. */
			if (tbp_cfg.verbose)
				tbp_log("CUPTI API records of domain %d not enabled: %s", (int)domains[d].domain,
					tbp_cupti_result_string(r));
			continue;
		}
		enabled_kinds[n_enabled_kinds++] = domains[d].kind;

		CUptiResult (*set_one)(CUpti_CallbackId, uint8_t) =
			d ? tbp_cupti.enable_driver_api : tbp_cupti.enable_runtime_api;
		if (!set_one || !tbp_cupti.get_callback_name) {
			if (tbp_cfg.verbose)
				tbp_log("CUPTI: no per-callback-id control (%s): a record for every call of domain %d",
					domains[d].enable_name, (int)domains[d].domain);
			continue;
		}
		unsigned off = 0;
		for (uint32_t cbid = 1; cbid < domains[d].n_cbids; cbid++) {
			if (cbid_class[d][cbid])
				continue;
			/* Ids this CUPTI does not have answer an error: nothing to switch off. */
			r = set_one(cbid, 0);
			if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
				tbp_cupti_in_use(domains[d].enable_name);
				return -1;
			}
			off += r == CUPTI_SUCCESS;
		}
		if (tbp_cfg.verbose)
			tbp_log("CUPTI: API records of domain %d: kind enabled, %u callback ids switched off",
				(int)domains[d].domain, off);
	}
	return 0;
}

int tbp_cupti_enable(void)
{
	if (enable_api_records() != 0)
		return -1;
	static const struct { CUpti_ActivityKind kind; int required; } kinds[] = {
		{ CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 1 },
		{ CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1 },
		{ CUPTI_ACTIVITY_KIND_MEMCPY, 1 },
		{ CUPTI_ACTIVITY_KIND_MEMCPY2, 0 },
		{ CUPTI_ACTIVITY_KIND_MEMSET, 1 },
		{ CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, 0 },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		CUptiResult r = tbp_cupti.activity_enable(kinds[i].kind);
		if (r == CUPTI_SUCCESS) {
			enabled_kinds[n_enabled_kinds++] = kinds[i].kind;
			continue;
		}
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			/* Leave what we enabled: disabling a kind could switch it off for the other
			 * tool too. */
			tbp_cupti_in_use("cuptiActivityEnable");
			return -1;
		}
		if (kinds[i].required) {
			tbp_cupti_error("cuptiActivityEnable", r);
			return -1;
		}
		if (tbp_cfg.verbose)
			tbp_log("CUPTI activity kind %d not enabled: %s", (int)kinds[i].kind, tbp_cupti_result_string(r));
	}
	return 0;
}

void tbp_cupti_disable(void)
{
	/* The ids switched off stay off: with their kind off they make nothing, and a kind enabled
	 * later overrides them (cupti_activity.h says so; not measured). */
	for (unsigned i = n_enabled_kinds; i-- > 0;)
		tbp_cupti.activity_disable(enabled_kinds[i]);
	n_enabled_kinds = 0;
}

#endif /* TBP_HAVE_CUPTI */
