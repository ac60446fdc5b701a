/*
 * Stubs for the part of the CUDA 13 CUPTI API the stand-in does not simulate
 * (list in cupti_stubs.inc): each returns CUPTI_ERROR_NOT_SUPPORTED, so a
 * program that imports them (PyTorch's Kineto imports about twenty) loads and
 * runs, and a consumer that calls one sees a feature the device lacks.  No
 * CUPTI header: the stubs take no parameters (arguments in registers are
 * ignored, harmless for functions returning an int-sized CUptiResult).
 * SIMGPU_WARN_UNSUPPORTED=1 names each call on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUPTI_NOT_SUPPORTED 27 /* CUPTI_ERROR_NOT_SUPPORTED */

static int cupti_unsupported(const char *name)
{
	static int warn = -1;
	if (warn < 0) {
		const char *v = getenv("SIMGPU_WARN_UNSUPPORTED");
		warn = v && strcmp(v, "0") != 0;
	}
	if (warn)
		fprintf(stderr, "simgpu: %s is not simulated (CUPTI_ERROR_NOT_SUPPORTED)\n", name);
	return CUPTI_NOT_SUPPORTED;
}

#define SIMGPU_CUPTI_STUB(name) \
	__attribute__((visibility("default"))) int name(void); \
	__attribute__((visibility("default"))) int name(void) { return cupti_unsupported(#name); }

#include "cupti_stubs.inc"
