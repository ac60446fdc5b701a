/*
 * tbanalyze engine, part 1: an analysis from start to end.  It opens the
 * trace, reads it through the record merge (an_merge.c) into the passes
 * (an_passes.c), measures a marked window again when GPU records came late,
 * and, on a trace without marks, first only looks for the training loop
 * (the read recorded on the tape, an_tape.c), then analyses the tape's
 * records in full, with the steps found marked and their warm-up decided
 * from the first analysis; definitions and containers are in an_defs.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "an.h"
#include "an_internal.h"
#include "an_ranges.h"
#include "an_tape.h"
#include "cmd.h"
#include "tr_common.h"

/* ------------------------------------------------------------ opening */
int an_open(struct tbp_reader **r, const char *path)
{
	return tr_open(path, r);
}

/* The trace read again for the passes that ask (an_pass_reread_*): the
 * records of the kinds they want, in the file's order. */
static int reread(struct analysis *a, const char *path)
{
	uint64_t kinds = an_pass_reread_begin(a);
	if (!kinds)
		return TBA_EXIT_OK;
	struct tbp_reader *r;
	int rc = an_open(&r, path);
	if (rc)
		return rc;
	struct tbp_record rec;
	int st;
	while ((st = tr_next(r, path, &rec)) > 0)
		if (kinds >> rec.kind & 1)
			an_pass_reread_record(a, &rec);
	rc = st < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
	tbp_reader_close(r);
	if (!rc)
		an_pass_reread_end(a);
	return rc;
}

/* Where an analysis gets its records, and what it does with them (NULL:
 * a full analysis that reads the file). */
struct run_src {
	struct an_tape *record;       /* the read recorded on it */
	struct an_tape *replay;       /* its records from it, not from the file */
	int detect;                   /* only find the steps (an_pass_init); needs record */
	int steps_known;              /* a first analysis found none (an_pass_steps_known) */
};

static int run_once(struct analysis *a, const char *path, const struct an_opts *opts, const struct run_src *src);
static int analysis_init(struct analysis *a, const char *path, const struct an_opts *opts, int detect_only);


/* Steps that are warm-up when the first is not enough: work that recurs in
 * the loop (in at least an eighth of the steps) but is first called in a
 * later step — the optimizer's first step under gradient accumulation,
 * where its state is allocated and torch._dynamo imported — pays its
 * first-time cost there.  The warm-up then runs through that step, as long
 * as it is within the first eighth of the steps (work that starts later,
 * or a periodic evaluation, is the loop's, not its start-up). */
static size_t late_warmup(const struct analysis *a, size_t nsteps)
{
	size_t limit = nsteps / 8, warmup = 1;
	for (size_t i = 0; i < a->sites.n; i++) {
		const struct an_site_stat *s = VEC_AT(&a->sites, struct an_site_stat, i);
		if (s->iters >= 2 && s->iters * 8 >= nsteps && s->first_iter > warmup && s->first_iter <= limit)
			warmup = s->first_iter;
	}
	return warmup;
}

/* Steps that replay CUDA graphs from some step on, every one after it too (torch.compile's
 * mode="reduce-overhead": a step or two run eager, then one records the graph and replays it): the
 * steps up to the first one that launched a graph are set-up (warm-up), the capture among them, as
 * long as half of the steps are left. */
static size_t graph_warmup(const struct analysis *a, size_t nsteps)
{
	uint64_t first = a->graph_launch_first_iter;
	if (!first || first > nsteps / 2 || a->graph_launch_all_iters != nsteps - first + 1)
		return 1;
	return (size_t)first;
}

/* The detected loop's warm-up, in steps: the longer of the two. */
static size_t loop_warmup(const struct analysis *a, size_t nsteps)
{
	size_t late = late_warmup(a, nsteps), graph = graph_warmup(a, nsteps);
	return graph > late ? graph : late;
}

/* The warm-up decided before the analysis with the steps marked is the
 * one that analysis counts (TBANALYZE_CHECK: an_sites_replay's claim). */
static int check_warmup(const struct analysis *a, size_t nsteps, size_t decided)
{
	size_t counted = loop_warmup(a, nsteps);
	if (counted == decided)
		return TBA_EXIT_OK;
	fprintf(stderr, "tbanalyze: %s: internal check failed: a warm-up of %zu steps decided from the first analysis, "
		"the analysis with the steps marked counts %zu\n", a->path, decided, counted);
	return TBA_EXIT_INTERNAL;
}

/* A trace without the runner's marks whose training loop was found (the
 * first pass detects it from the spans or the work's lines): analysed
 * again with the steps marked as the runner would, so that the first step
 * is warm-up and the breakdown and findings are the steady state's. */
static int run_steps(struct analysis *a, const char *path, const struct an_opts *opts);

int an_run(struct analysis *a, const char *path, const struct an_opts *opts)
{
	int rc = run_steps(a, path, opts);
	/* The pages the analyses before the last one gave back, no longer of
	 * use to it. */
	an_mem_trim();
	if (rc == TBA_EXIT_OK && an_check_on()) {
		rc = an_check(a);
		an_check_opened(path, 1);
	}
	return rc;
}

/* What step detection concluded (steps_detect): kept from the analysis
 * that looked, for the one that reports after it. */
struct steps_found {
	int detected;
	const char *none;
	uint64_t loop, unit;
	int unit_kind;
	struct vec ivs;
};

static void steps_found_take(struct analysis *a, struct steps_found *f)
{
	f->detected = a->steps.source == AN_STEPS_DETECTED;
	f->none = a->steps.none;
	f->loop = a->steps.loop;
	f->unit = a->steps.unit;
	f->unit_kind = a->steps.unit_kind;
	f->ivs = a->step_ivs;
	a->step_ivs = (struct vec){.item = sizeof(struct an_step)};
}

static void steps_found_put(struct analysis *a, struct steps_found *f)
{
	if (f->detected)
		a->steps.source = AN_STEPS_DETECTED;
	a->steps.none = f->none;
	a->steps.loop = f->loop;
	a->steps.unit = f->unit;
	a->steps.unit_kind = f->unit_kind;
	vec_free(&a->step_ivs);
	a->step_ivs = f->ivs;
	f->ivs = (struct vec){0};
}

/* The first analysis of a trace that may have steps to find, with the
 * tape (an_tape.h): one that only finds them (spans, steps, the join, the
 * sites' log: no gaps, bursts, breakdown, findings), its read recorded.  It
 * becomes a full one as it reads (an_catch_up) when finding steps is of no
 * more use or the tape is full.  Ends with a full first analysis (caught
 * up: *done 0), or, having only looked for the steps, with a loop found
 * (*done 0: run_steps marks them, replaying the tape), or with none, after
 * the reporting analysis replayed the tape with the detection's outcome
 * (*done 1). */
static int run_detect_first(struct analysis *a, const char *path, const struct an_opts *opts,
			    struct an_tape *tape, int *done)
{
	struct run_src detect = {.record = tape, .detect = 1};
	int rc = run_once(a, path, opts, &detect);
	/* What the read gave back and step detection did not take (the
	 * merge's queues): kept, it would only add to the peak. */
	an_mem_trim();
	*done = rc != 0;
	if (rc || !an_tape_complete(tape) || (a->steps.source == AN_STEPS_DETECTED && a->step_ivs.n >= 2))
		return rc;
	struct steps_found found;
	steps_found_take(a, &found);
	struct an_opts again = a->opts;
	an_free(a);
	struct run_src full = {.replay = tape, .steps_known = 1};
	rc = run_once(a, path, &again, &full);
	steps_found_put(a, &found);
	vec_free(&found.ivs);
	*done = 1;
	return rc;
}

int an_catch_up(struct analysis *a, struct an_tape *t)
{
	/* What the read set so far, not on the tape (the end of a truncated
	 * trace is noted before the merge's last records go out). */
	uint64_t records = a->records, events = a->events, reorder_forced = a->reorder_forced;
	uint64_t truncated_at = a->truncated_at;
	int truncated = a->truncated;
	struct tbp_header header = a->header;
	struct an_opts opts = a->opts;
	const char *path = a->path;
	an_free(a);
	int rc = analysis_init(a, path, &opts, 0);
	if (rc)
		return rc;
	a->header = header;
	if (an_tape_replay(t, a)) {
		fprintf(stderr, "tbanalyze: %s: out of memory\n", path);
		return TBA_EXIT_INTERNAL;
	}
	a->records = records;
	a->events = events;
	a->reorder_forced = reorder_forced;
	a->truncated = truncated;
	a->truncated_at = truncated_at;
	an_tape_release(t);
	/* The tape's pages and the detecting analysis's, given back: the
	 * analysis reads on without a use for most of them (an_mem_get). */
	an_mem_trim();
	return TBA_EXIT_OK;
}

static int run_steps(struct analysis *a, const char *path, const struct an_opts *opts)
{
	/* A trace whose steps may be found needs a first analysis, whose read
	 * the next ones replay from the tape (when it fits). */
	struct an_tape *tape = opts && (opts->synth_steps || opts->no_markers) ? NULL : an_tape_new();
	int rc;
	if (tape) {
		int done;
		rc = run_detect_first(a, path, opts, tape, &done);
		if (done) {
			an_tape_free(tape);
			return rc;
		}
		if (!an_tape_complete(tape)) {
			/* Caught up: a full first analysis, as without the tape. */
			an_tape_free(tape);
			tape = NULL;
		}
	} else {
		rc = run_once(a, path, opts, NULL);
	}
	if (rc || a->steps.source != AN_STEPS_DETECTED || a->step_ivs.n < 2) {
		an_tape_free(tape);
		return rc;
	}
	const struct run_src replay = {.replay = tape}, *again_src = tape ? &replay : NULL;
	struct an_opts again = a->opts;
	struct vec steps = a->step_ivs;
	uint64_t loop = a->steps.loop, unit = a->steps.unit;
	int unit_kind = a->steps.unit_kind;
	a->step_ivs = (struct vec){0};
	/* The warm-up decided from this analysis's calls with the steps found
	 * (as the analysis with them marked would count them): that analysis
	 * is then the last.  Else it decides, and a third one runs when the
	 * warm-up is longer than the first step. */
	size_t warmup = 0;
	if (!an_sites_replay(a, steps.data, steps.n)) {
		warmup = loop_warmup(a, steps.n);
		if (warmup > 1)
			again.synth_warmup = warmup;
	}
	an_free(a);
	again.synth_steps = steps.data;
	again.n_synth_steps = steps.n;
	rc = run_once(a, path, &again, again_src);
	if (warmup && !rc && an_check_on())
		rc = check_warmup(a, steps.n, warmup);
	if (!warmup) {
		warmup = rc ? 1 : loop_warmup(a, steps.n);
		if (warmup > 1) {
			an_free(a);
			again.synth_warmup = warmup;
			rc = run_once(a, path, &again, again_src);
		}
	}
	an_tape_free(tape);
	a->opts.synth_steps = NULL;
	a->opts.n_synth_steps = 0;
	a->step_ivs = steps; /* freed with the analysis */
	a->steps.source = AN_STEPS_DETECTED;
	a->steps.loop = loop;
	a->steps.unit = unit;
	a->steps.unit_kind = unit_kind;
	return rc;
}

static int analysis_init(struct analysis *a, const char *path, const struct an_opts *opts, int detect_only)
{
	memset(a, 0, sizeof *a);
	a->path = path;
	if (opts)
		a->opts = *opts;
	else
		an_opts_default(&a->opts);
	a->devices.item = sizeof(struct an_device);
	a->streams.item = sizeof(struct an_stream);
	a->findings.item = sizeof(struct an_finding);
	a->idle_parts.item = sizeof(struct an_finding);
	a->thread_names.item = sizeof(struct an_thread_name);
	a->harness.item = sizeof(struct an_finding);
	a->model_step.item = sizeof(struct an_finding);
	a->step_ivs.item = sizeof(struct an_step);
	a->kernels.item = sizeof(struct an_kernel_stat);
	a->spans.item = sizeof(struct an_span_stat);
	a->sites.item = sizeof(struct an_site_stat);
	a->first_ts = UINT64_MAX;
	a->defs = defs_new();
	if (!a->defs || an_pass_init(a)) {
		fprintf(stderr, "tbanalyze: out of memory\n");
		return TBA_EXIT_INTERNAL;
	}
	if (detect_only)
		an_pass_detect_only(a);
	return 0;
}

static int run_once(struct analysis *a, const char *path, const struct an_opts *opts, const struct run_src *src)
{
	int rc = analysis_init(a, path, opts, src && src->detect);
	if (rc)
		return rc;
	if (src && src->steps_known)
		an_pass_steps_known(a);
	if (src && src->replay) {
		if (an_tape_replay(src->replay, a)) {
			fprintf(stderr, "tbanalyze: %s: out of memory\n", path);
			return TBA_EXIT_INTERNAL;
		}
	} else {
		struct tbp_reader *r;
		rc = an_open(&r, path);
		if (rc)
			return rc;
		/* The passes read a kernel's time, place, correlation and name, and a
		 * launch's call fields, never their grid, block, registers or shared
		 * memory: the reader leaves those columns undecoded. */
		tbp_reader_limit_fields(r, TBP_K_GPU_KERNEL, offsetof(struct tbp_gpu_kernel, name) / sizeof(uint64_t) + 1);
		tbp_reader_limit_fields(r, TBP_K_LAUNCH, sizeof(struct tbp_call) / sizeof(uint64_t));
		a->header = *tbp_reader_header(r);
		rc = an_read_trace(a, r, path, src ? src->record : NULL);
		if (rc)
			return rc;
	}
	if (an_ranges_finish(a)) {
		fprintf(stderr, "tbanalyze: %s: out of memory\n", path);
		return TBA_EXIT_INTERNAL;
	}
	rc = reread(a, path);
	if (rc)
		return rc;
	if (an_pass_finish(a)) {
		fprintf(stderr, "tbanalyze: %s: out of memory\n", path);
		return TBA_EXIT_INTERNAL;
	}
	return TBA_EXIT_OK;
}

int an_load_defs(struct analysis *a, const char *path, uint64_t *first_ts, uint64_t *pid)
{
	memset(a, 0, sizeof *a);
	a->path = path;
	an_opts_default(&a->opts);
	a->defs = defs_new();
	if (!a->defs) {
		fprintf(stderr, "tbanalyze: out of memory\n");
		return TBA_EXIT_INTERNAL;
	}
	struct tbp_reader *r;
	int rc = an_open(&r, path);
	if (rc)
		return rc;
	*first_ts = UINT64_MAX;
	*pid = 0;
	struct tbp_record rec;
	int st;
	while ((st = tr_next(r, path, &rec)) > 0) {
		a->records++;
		if (rec.kind == TBP_K_PROCESS && !a->has_process) {
			*pid = rec.u.process.pid;
			a->has_process = 1;
			a->process = rec.u.process;
		}
		if (defs_add(a->defs, &rec)) {
			tbp_reader_close(r);
			fprintf(stderr, "tbanalyze: %s: out of memory\n", path);
			return TBA_EXIT_INTERNAL;
		}
		if (an_is_timed_record(rec.kind) || rec.kind == TBP_K_PY_SPAN || rec.kind == TBP_K_RANGE)
			if (rec.ts < *first_ts)
				*first_ts = rec.ts;
	}
	rc = st < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
	a->truncated = tbp_reader_truncated(r);
	tbp_reader_close(r);
	if (*first_ts == UINT64_MAX)
		*first_ts = 0;
	return rc;
}

void an_free(struct analysis *a)
{
	an_pass_free(a);
	an_ranges_free(a);
	defs_free(a->defs);
	a->defs = NULL;
	vec_free(&a->devices);
	vec_free(&a->streams);
	vec_free(&a->findings);
	vec_free(&a->idle_parts);
	vec_free(&a->thread_names);
	vec_free(&a->harness);
	vec_free(&a->model_step);
	vec_free(&a->step_ivs);
	vec_free(&a->kernels);
	vec_free(&a->spans);
	vec_free(&a->sites);
}

