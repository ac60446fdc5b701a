/*
 * Consistency checks of an analysis, on when TBANALYZE_CHECK is set to 1 (the
 * test suites set it, so every trace they make is checked): a check that
 * fails is an analyzer bug, reported as one line on stderr and exit status 4
 * (internal error), never as a quietly wrong report.
 *
 * Idle claimed: on each device, the idle time the findings claim (idle
 * gaps, and the device idle inside kernel bursts) adds up to no more than
 * the device's idle time in the window, and the report's findings, the
 * runner's and the model step's together, to no more than all devices'.
 * The idle after the syncs that sync hotspots claim (their time at stake)
 * is another view of the same idle, checked on its own: no more than all
 * devices' idle either.
 *
 * Steps (an_pass_steptime.c): each step's GPU busy time fits in the step
 * (its length times the devices), its data movement in its busy time, the
 * idle its gap pieces explain in the rest; the counted steps' busy time adds
 * up to no more than the window's (when no GPU record came late).
 *
 * Analyses run by a verb check themselves (an_run); a trace a verb only
 * read (info, dump, export) is analysed once more at the end, when that
 * verb succeeded, so no trace of a suite goes unchecked.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "an_services.h"
#include "cmd.h"

int an_check_on(void)
{
	static int on = -1;
	if (on < 0) {
		const char *e = getenv("TBANALYZE_CHECK");
		on = e && e[0] && strcmp(e, "0");
	}
	return on;
}

/* What a finding claims of the GPU's idle time. */
static uint64_t idle_claimed(const struct an_finding *f)
{
	return f->kind == AN_F_IDLE_GAP ? f->total_ns : f->kind == AN_F_KERNEL_BURST ? f->idle_ns : 0;
}

int an_check(const struct analysis *a)
{
	char why[256] = "";
	uint64_t all_idle = 0;
	for (size_t i = 0; i < a->devices.n && !why[0]; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (!d->kernels && !d->copies && !d->sets)
			continue;
		struct an_breakdown b;
		an_device_breakdown(a, d, &b);
		all_idle += b.idle_ns;
		uint64_t bursts = 0;
		for (int ph = 0; ph < 3; ph++)
			if (phase_counts(a, ph))
				bursts += d->burst_idle_by[ph];
		if (d->gap_ns + bursts > b.idle_ns)
			snprintf(why, sizeof why,
				 "device %" PRIu64 ": the findings claim %" PRIu64 " ns of idle time (idle gaps %" PRIu64
				 ", kernel bursts %" PRIu64 "), the device was idle %" PRIu64 " ns",
				 d->id, d->gap_ns + bursts, d->gap_ns, bursts, b.idle_ns);
	}
	if (!why[0]) {
		uint64_t claimed = 0, after_syncs = 0;
		const struct vec *lists[] = {&a->findings, &a->harness, &a->model_step};
		for (size_t l = 0; l < 3; l++)
			for (size_t i = 0; i < lists[l]->n; i++) {
				const struct an_finding *f = VEC_AT(lists[l], struct an_finding, i);
				claimed += idle_claimed(f);
				if (f->kind == AN_F_SYNC_HOTSPOT)
					after_syncs += f->idle_ns;
			}
		if (claimed > all_idle)
			snprintf(why, sizeof why,
				 "the findings claim %" PRIu64 " ns of idle time, the devices were idle %" PRIu64 " ns",
				 claimed, all_idle);
		else if (after_syncs > all_idle)
			snprintf(why, sizeof why,
				 "the sync hotspots claim %" PRIu64 " ns of idle time after their syncs, the devices were "
				 "idle %" PRIu64 " ns", after_syncs, all_idle);
	}
	/* GPU records that came after the marks (a reorder window too small)
	 * are in the steps' unions late: their split is approximate then. */
	uint64_t steps_busy = 0, window_busy = 0;
	for (size_t i = 0; i < a->step_times.n && !why[0] && !a->late_gpu_records; i++) {
		const struct an_step_time *st = VEC_AT(&a->step_times, struct an_step_time, i);
		uint64_t whole = (st->end - st->begin) * st->devices, idle = 0;
		for (int c = 0; c < AN_CAUSE_N; c++)
			idle += st->idle_by[c];
		if (st->busy_ns > whole || st->dm_ns > st->busy_ns || idle > whole - st->busy_ns)
			snprintf(why, sizeof why,
				 "step %zu: busy %" PRIu64 " ns, data movement %" PRIu64 " ns, explained idle %" PRIu64
				 " ns in %" PRIu64 " ns on %u devices",
				 i + 1, st->busy_ns, st->dm_ns, idle, st->end - st->begin, st->devices);
		if (st->counted)
			steps_busy += st->busy_ns;
	}
	for (size_t i = 0; i < a->devices.n && a->markers_used; i++) {
		struct an_breakdown b;
		an_device_breakdown(a, VEC_AT(&a->devices, struct an_device, i), &b);
		window_busy += b.busy_ns;
	}
	if (!why[0] && a->markers_used && !a->late_gpu_records && steps_busy > window_busy)
		snprintf(why, sizeof why, "the counted steps' GPU busy time %" PRIu64 " ns exceeds the window's %" PRIu64 " ns",
			 steps_busy, window_busy);
	if (!why[0])
		return TBA_EXIT_OK;
	fprintf(stderr, "tbanalyze: %s: internal check failed: %s\n", a->path, why);
	return TBA_EXIT_INTERNAL;
}

/* Traces opened, and whether an analysis of them checked itself. */
static struct {
	char *path;
	int checked;
} *opened;
static size_t n_opened;

void an_check_opened(const char *path, int checked)
{
	if (!an_check_on() || !path)
		return;
	for (size_t i = 0; i < n_opened; i++)
		if (!strcmp(opened[i].path, path)) {
			opened[i].checked |= checked;
			return;
		}
	void *grown = realloc(opened, (n_opened + 1) * sizeof *opened);
	if (!grown)
		return;
	opened = grown;
	if (!(opened[n_opened].path = strdup(path)))
		return;
	opened[n_opened++].checked = checked;
}

int an_check_unchecked(int rc)
{
	/* (an_run notes the trace it opens again: the list stays whole until the end) */
	for (size_t i = 0; i < n_opened && rc == TBA_EXIT_OK; i++) {
		if (opened[i].checked)
			continue;
		struct analysis a;
		opened[i].checked = 1;
		int r = an_run(&a, opened[i].path, NULL);
		an_free(&a);
		if (r == TBA_EXIT_INTERNAL)
			rc = r;
	}
	for (size_t i = 0; i < n_opened; i++)
		free(opened[i].path);
	free(opened);
	opened = NULL;
	n_opened = 0;
	return rc;
}
