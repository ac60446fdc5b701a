/* tbanalyze cross-rank view: text and JSON (doc/report-schema.md, "Several
 * ranks").  Computed by an_ranks.c; each rank's own report comes from
 * an_report.c. */
#include <inttypes.h>
#include <string.h>

#include "an_fmt.h"
#include "an_ranks.h"

static const char *sync_source_name(int s)
{
	switch (s) {
	case AN_SYNC_C10D: return "c10d";
	case AN_SYNC_DDP_BACKWARD: return "ddp_backward";
	default: return "none";
	}
}

static const char *rank_source_name(int s)
{
	switch (s) {
	case AN_RANK_RECORDED: return "recorded";
	case AN_RANK_FILE_NAME: return "file_name";
	default: return "order";
	}
}

static void fn_label(const struct an_ranks *R, uint64_t fn, char *buf, size_t len)
{
	struct an_frame fr;
	const struct an_rank *on;
	if (!an_ranks_fn_frame(R, fn, &fr, &on)) {
		snprintf(buf, len, "(no call path)");
		return;
	}
	size_t fl;
	const char *file = an_display_path(&on->a, fr.file, fr.file_len, &fl);
	snprintf(buf, len, "%.*s:%" PRIu64 " %.*s", (int)fl, file, fr.line, (int)fr.function_len, fr.function);
}

static void text_rank(const struct an_ranks *R, const struct an_rank *k, FILE *f)
{
	const struct analysis *a = &k->a;
	char t1[32], t2[32], t3[32], t4[32];
	fprintf(f, "\nrank %" PRIu64 ": %s", k->rank, k->path);
	if (k->pid)
		fprintf(f, " (pid %" PRIu64 ")", k->pid);
	if (k->rank_source == AN_RANK_FILE_NAME)
		fprintf(f, " [rank from the file name]");
	else if (k->rank_source == AN_RANK_ORDER)
		fprintf(f, " [no rank recorded: numbered in name order]");
	fputc('\n', f);
	fprintf(f, "  window: %s", fmt_ns(a->total.window_ns, t1, sizeof t1));
	if (a->steps.source)
		fprintf(f, ", %" PRIu64 " steps (%s, %" PRIu64 " warm-up), median %s per step", a->steps.count,
			an_steps_source_name(a->steps.source), a->steps.warmup, fmt_ns(a->steps.median_ns, t2, sizeof t2));
	fputc('\n', f);
	if (k->steps_callpath) {
		char site[512];
		an_site_label(a, k->steps_callpath, 0, site, sizeof site);
		fprintf(f, "  steps: %zu after the first (warm-up), the calls of %s (each holds a collective)\n", k->steps.n,
			site);
	}
	if (an_has_gpu(a)) {
		const struct an_breakdown *b = &a->total;
		fprintf(f, "  GPU: active %.1f%% (%s)  data movement %.1f%%  idle %.1f%% (%s)\n", pct(b->active_ns, b->window_ns),
			fmt_ns(b->active_ns, t1, sizeof t1), pct(b->dm_ns, b->window_ns), pct(b->idle_ns, b->window_ns),
			fmt_ns(b->idle_ns, t2, sizeof t2));
	} else {
		fprintf(f, "  no GPU timeline (a CPU run, or API-only)\n");
	}
	if (R->aligned_steps && R->n > 1)
		fprintf(f, "  in the %" PRIu64 " aligned steps: collectives %s, of which waiting for later ranks %s; "
			   "steps start %s and end %s after the earliest rank's (mean)\n",
			R->aligned_steps, fmt_ns(k->sync_ns, t1, sizeof t1), fmt_ns(k->wait_ns, t2, sizeof t2),
			fmt_ns(k->start_lag_ns, t3, sizeof t3), fmt_ns(k->end_lag_ns, t4, sizeof t4));
	size_t shown = a->findings.n < 3 ? a->findings.n : 3;
	if (shown > a->opts.top)
		shown = a->opts.top;
	if (shown)
		fprintf(f, "  top findings (`tbanalyze %s` for the full report):\n", k->path);
	for (size_t i = 0; i < shown; i++) {
		const struct an_finding *x = VEC_AT(&a->findings, struct an_finding, i);
		char site[512];
		an_site_label(a, x->callpath, x->native, site, sizeof site);
		fprintf(f, "    %zu. %s", i + 1, an_finding_name(x->kind));
		if (x->cause)
			fprintf(f, " (%s)", an_cause_name(x->cause));
		fprintf(f, " %s at %s\n", fmt_ns(x->total_ns, t1, sizeof t1), site);
	}
}

/* "rank 0 1.2 ms, rank 1 3.4 ms": what each rank but the straggler lost
 * waiting for it (the text and HTML reports). */
void an_ranks_print_waits(const struct an_ranks *R, FILE *f)
{
	char t1[32];
	int first = 1;
	for (size_t i = 0; i < R->n; i++) {
		if ((long)i == R->straggler)
			continue;
		fprintf(f, "%srank %" PRIu64 " %s", first ? "" : ", ", R->r[i].rank,
			fmt_ns(R->r[i].wait_for_straggler_ns, t1, sizeof t1));
		first = 0;
	}
}

void an_ranks_report_text(const struct an_ranks *R, FILE *f)
{
	char t1[32], t2[32];
	fprintf(f, "tbanalyze ranks: %zu trace%s", R->n, R->n == 1 ? "" : "s");
	if (R->n)
		fprintf(f, ", ranks %" PRIu64 " to %" PRIu64, R->r[0].rank, R->r[R->n - 1].rank);
	if (R->n && R->r[0].world_size)
		fprintf(f, " (world size %" PRIu64 ")", R->r[0].world_size);
	fputc('\n', f);
	for (size_t i = 0; i < R->skipped.n; i++) {
		const struct an_skipped *x = VEC_AT(&R->skipped, struct an_skipped, i);
		if (x->reason == AN_SKIP_SAME_RANK)
			fprintf(f, "another process of rank %" PRIu64 " (or another run's), left out: %s\n", x->rank, x->path);
		else
			fprintf(f, "not a rank (no rank recorded), left out: %s\n", x->path);
	}
	static const char *const sync_text[] = {
		"none found (the ranks' steps compared by their length)",
		"torch.distributed calls and NCCL kernels",
		"DDP's gradient all-reduce, waited for in backward()",
	};
	fprintf(f, "collectives: %s\n", sync_text[R->sync_source]);
	if (R->wall_clock_aligned)
		fprintf(f, "clocks: ranks on several machines, put on rank %" PRIu64 "'s clock by their wall clocks "
			   "(as close as the machines' clock synchronisation)\n",
			R->r[0].rank);
	if (R->n > 1)
		fprintf(f, "aligned steps: %" PRIu64 " (steady state, %s), median %s per step\n", R->aligned_steps,
			R->sync_source == AN_SYNC_NONE ? "the k-th of each rank" : "lined up by wall clock",
			fmt_ns(R->median_step_ns, t1, sizeof t1));

	if (R->straggler >= 0) {
		const struct an_rank *s = &R->r[R->straggler];
		fprintf(f, "\nstraggler: rank %" PRIu64 ", %s in %" PRIu64 " of %" PRIu64 " steps, %s %s per step (mean)\n",
			s->rank, R->sync_source == AN_SYNC_NONE ? "the slowest" : "the last to reach the collectives",
			R->straggler_steps, R->aligned_steps, fmt_ns(R->straggler_late_ns, t1, sizeof t1),
			R->sync_source == AN_SYNC_NONE ? "longer" : "late");
		if (R->n_fns) {
			char site[600];
			fn_label(R, R->fns[0].fn, site, sizeof site);
			fprintf(f, "  where: %s: %s in the aligned steps, the other ranks' median %s\n", site,
				fmt_ns(R->fns[0].self_ns, t1, sizeof t1), fmt_ns(R->fns[0].others_ns, t2, sizeof t2));
			for (size_t i = 1; i < R->n_fns; i++) {
				fn_label(R, R->fns[i].fn, site, sizeof site);
				fprintf(f, "    also %s: %s more\n", site,
					fmt_ns(R->fns[i].self_ns - R->fns[i].others_ns, t1, sizeof t1));
			}
		}
		if (R->sync_source != AN_SYNC_NONE) {
			fprintf(f, "  the other ranks lost %s waiting for it in collectives (", fmt_ns(R->wait_ns, t1, sizeof t1));
			an_ranks_print_waits(R, f);
			fprintf(f, ")\n");
		}
		fprintf(f, "  suggestion: even out the work per rank there (data loading, uneven batches, rank-only "
			   "logging or checkpointing), or move it off the step\n");
	} else if (R->n > 1) {
		if (R->aligned_steps < 3)
			fprintf(f, "\nno straggler: too few steps to compare (%" PRIu64 ")\n", R->aligned_steps);
		else
			fprintf(f, "\nno straggler: no rank arrived last in two thirds of the steps by more than 10%% of "
				   "a step\n");
	}
	for (size_t i = 0; i < R->n; i++)
		text_rank(R, &R->r[i], f);
}

static const struct analysis *a_of(const struct an_rank *k)
{
	return &k->a;
}

static void json_fn(const struct an_ranks *R, const struct an_rank_fn *x, FILE *f)
{
	struct an_frame fr;
	const struct an_rank *on;
	fputs("{\"function\":", f);
	if (an_ranks_fn_frame(R, x->fn, &fr, &on)) {
		json_str(f, fr.function, fr.function_len);
		fputs(",\"file\":", f);
		json_str(f, fr.file, fr.file_len);
		fprintf(f, ",\"line\":%" PRIu64, fr.line);
	} else {
		fputs("null,\"file\":null,\"line\":0", f);
	}
	fprintf(f, ",\"straggler_ns\":%" PRIu64 ",\"others_median_ns\":%" PRIu64 ",\"extra_ns\":%" PRIu64 "}", x->self_ns,
		x->others_ns, x->self_ns - x->others_ns);
}

int an_ranks_report_json(const struct an_ranks *R, FILE *f)
{
	fprintf(f, "{\"schema\":\"tbprof-ranks\",\"schema_version\":1,\"collectives\":\"%s\",\"aligned_steps\":%" PRIu64
		   ",\"median_step_ns\":%" PRIu64 ",\"collectives_per_step\":%" PRIu64 ",\"clock\":\"%s\",\n\"skipped\":[",
		sync_source_name(R->sync_source), R->aligned_steps, R->median_step_ns, R->syncs_per_step,
		R->wall_clock_aligned ? "wall_clock" : "monotonic");
	for (size_t i = 0; i < R->skipped.n; i++) {
		const struct an_skipped *x = VEC_AT(&R->skipped, struct an_skipped, i);
		fputs(i ? ",{\"trace_file\":" : "{\"trace_file\":", f);
		json_str(f, x->path, strlen(x->path));
		if (x->reason == AN_SKIP_SAME_RANK)
			fprintf(f, ",\"reason\":\"same_rank\",\"rank\":%" PRIu64 "}", x->rank);
		else
			fputs(",\"reason\":\"not_a_rank\",\"rank\":null}", f);
	}
	fputs("],\n\"findings\":[", f);
	if (R->straggler >= 0) {
		const struct an_rank *s = &R->r[R->straggler];
		fprintf(f, "\n {\"kind\":\"straggler\",\"rank\":%" PRIu64 ",\"late_steps\":%" PRIu64 ",\"aligned_steps\":%" PRIu64
			   ",\"late_ns_per_step\":%" PRIu64 ",\"wait_ns\":%" PRIu64 ",\"wait_by_rank\":[",
			s->rank, R->straggler_steps, R->aligned_steps, R->straggler_late_ns, R->wait_ns);
		int first = 1;
		for (size_t i = 0; i < R->n; i++) {
			if ((long)i == R->straggler)
				continue;
			fprintf(f, "%s{\"rank\":%" PRIu64 ",\"wait_ns\":%" PRIu64 "}", first ? "" : ",", R->r[i].rank,
				R->r[i].wait_for_straggler_ns);
			first = 0;
		}
		fputs("],\"where\":", f);
		if (R->n_fns)
			json_fn(R, &R->fns[0], f);
		else
			fputs("null", f);
		fputs(",\"functions\":[", f);
		for (size_t i = 0; i < R->n_fns; i++) {
			if (i)
				fputc(',', f);
			json_fn(R, &R->fns[i], f);
		}
		fputs("]}", f);
	}
	fputs("],\n\"ranks\":[", f);
	for (size_t i = 0; i < R->n; i++) {
		const struct an_rank *k = &R->r[i];
		fprintf(f, "%s\n{\"rank\":%" PRIu64 ",\"rank_source\":\"%s\",\"world_size\":%" PRIu64 ",\"pid\":%" PRIu64
			   ",\"clock_shift_ns\":%" PRId64 ",\"trace_file\":",
			i ? "," : "", k->rank, rank_source_name(k->rank_source), k->world_size, k->pid, k->clock_shift_ns);
		json_str(f, k->path, strlen(k->path));
		fputs(",\"steps_function\":", f);
		struct an_frame sf;
		if (k->steps_callpath && an_callpath_frames(a_of(k), k->steps_callpath, &sf, 1)) {
			fputs("{\"function\":", f);
			json_str(f, sf.function, sf.function_len);
			fputs(",\"file\":", f);
			json_str(f, sf.file, sf.file_len);
			fprintf(f, ",\"line\":%" PRIu64 "}", sf.line);
		} else {
			fputs("null", f);
		}
		fprintf(f, ",\"steady_steps\":%zu,\"first_aligned_step\":%zu,\"start_lag_ns\":%" PRIu64
			   ",\"end_lag_ns\":%" PRIu64 ",\"collective_ns\":%" PRIu64 ",\"wait_ns\":%" PRIu64
			   ",\"late_steps\":%" PRIu64 ",\"late_ns\":%" PRIu64 ",\n\"report\":",
			k->steps.n, k->first_step, k->start_lag_ns, k->end_lag_ns, k->sync_ns, k->wait_ns, k->late_steps,
			k->late_ns);
		if (an_report_json(&k->a, f))
			return -1;
		fputc('}', f);
	}
	fputs("]}\n", f);
	return ferror(f) ? -1 : 0;
}
