/*
 * The analysis's consistency check (analyze/an_check.c) can fail: an
 * analysis whose findings claim more idle time than a device had, by its
 * per-device sums (idle gaps, kernel bursts) or by the findings listed, is
 * an internal error; one within the idle passes.  The suites turn the check
 * on for every trace they make (TBANALYZE_CHECK=1): this is what it catches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_internal.h"
#include "cmd.h"

static int failures;

#define CHECK(cond, what)                                                \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "FAIL: %s\n", what);             \
			failures++;                                      \
		} else {                                                 \
			printf("ok   %s\n", what);                       \
		}                                                        \
	} while (0)

/* One device busy 600 of a 1000 ns window (idle 400), no marks. */
static void setup(struct analysis *a)
{
	memset(a, 0, sizeof *a);
	a->path = "synthetic";
	an_opts_default(&a->opts);
	a->devices.item = sizeof(struct an_device);
	a->findings.item = a->harness.item = a->model_step.item = sizeof(struct an_finding);
	if (an_pass_init(a)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	a->first_ts = 0;
	a->last_ts = 1000;
	struct an_device *d = vec_push(&a->devices);
	d->kernels = 1;
	d->busy = (struct an_union){.start = 100, .end = 700, .open = 1};
}

static void finish(struct analysis *a)
{
	an_pass_free(a);
	vec_free(&a->devices);
	vec_free(&a->findings);
	vec_free(&a->harness);
	vec_free(&a->model_step);
}

static void add_finding(struct vec *v, int kind, uint64_t total, uint64_t idle)
{
	struct an_finding *f = vec_push(v);
	f->kind = (uint8_t)kind;
	f->total_ns = total;
	f->idle_ns = idle;
}

int main(void)
{
	struct analysis a;
	struct an_device *d;

	setup(&a);
	d = VEC_AT(&a.devices, struct an_device, 0);
	d->gap_ns = 300;
	d->burst_idle_by[AN_PH_OUTSIDE] = 100;
	add_finding(&a.findings, AN_F_IDLE_GAP, 300, 0);
	add_finding(&a.findings, AN_F_KERNEL_BURST, 900, 100); /* a burst's span is not its idle */
	add_finding(&a.findings, AN_F_SYNC_HOTSPOT, 5000, 0);  /* host time, not GPU idle */
	CHECK(an_check(&a) == TBA_EXIT_OK, "gaps and bursts claiming all of the idle time, no more: passes");
	finish(&a);

	setup(&a);
	d = VEC_AT(&a.devices, struct an_device, 0);
	d->gap_ns = 300;
	d->burst_idle_by[AN_PH_OUTSIDE] = 101;
	CHECK(an_check(&a) == TBA_EXIT_INTERNAL, "a device whose gaps and bursts claim 1 ns more than its idle: fails");
	finish(&a);

	setup(&a);
	d = VEC_AT(&a.devices, struct an_device, 0);
	d->gap_ns = 200;
	add_finding(&a.findings, AN_F_IDLE_GAP, 200, 0);
	add_finding(&a.harness, AN_F_KERNEL_BURST, 1000, 150);
	add_finding(&a.model_step, AN_F_IDLE_GAP, 51, 0);
	CHECK(an_check(&a) == TBA_EXIT_INTERNAL,
	      "findings listed (findings, the runner's, the model step's) claiming 401 ns of 400: fails");
	finish(&a);

	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
