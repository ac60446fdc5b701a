/*
 * The idle_gap finding kind: stretches where the GPU sat idle, filed by
 * the gaps pass under what the host did meanwhile (its cause) and placed at
 * the user's line.  Its descriptor: how the text, JSON and HTML reports
 * write it (the other causes, the copy, CPU work or allocator its time was
 * in, the threads that ended or waited on its gaps) and its advice, which
 * depends on all of these.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an.h"
#include "an_fmt.h"
#include "an_html.h"
#include "an_kind.h"
#include "an_report_int.h"

/* An idle-gap finding whose time at its site was mostly the host inside
 * copy calls (a pageable copy staging its bytes): its advice is about the
 * copy, not about launches. */
int an_finding_in_copy(const struct an_finding *f)
{
	return f->kind == AN_F_IDLE_GAP && f->cause == AN_CAUSE_LAUNCH_BOUND && f->copy_ns &&
	       f->copy_ns * 2 >= f->site_ns;
}

/* An idle-gap finding whose time at its site was mostly the host running
 * without any GPU call for long stretches before the launch there: CPU work,
 * not launch overhead (python at that line; launch_bound only in the
 * findings of traces read before 2026-11-28, none now). */
int an_finding_cpu_bound(const struct an_finding *f)
{
	return f->kind == AN_F_IDLE_GAP && (f->cause == AN_CAUSE_LAUNCH_BOUND || f->cause == AN_CAUSE_PYTHON) &&
	       !an_finding_in_copy(f) && !an_finding_is_engine(f) && f->no_call_ns && f->no_call_ns * 2 >= f->site_ns;
}

/* An idle-gap finding whose time at its site was mostly the thread waiting
 * inside its own backward() (autograd's engine working in C++, nothing
 * queued on the GPU). */
static int finding_backward_wait(const struct an_finding *f)
{
	return f->kind == AN_F_IDLE_GAP && f->backward_wait_ns && f->backward_wait_ns * 2 >= f->site_ns;
}

/* The gaps' host work was launching from a thread with no Python of its own
 * while another thread waited in backward(): autograd's engine.  (The tracer
 * lends such a thread the backward() caller's path, so its launches show
 * the user's loss.backward() line.) */
int an_finding_is_engine(const struct an_finding *x)
{
	/* Most of its idle time in gaps ended by a launch of a thread other than the one
	 * waiting in backward(), with no Python or the path lent by the tracer
	 * (gap_engine): not the waiting thread's own launches after it returned
	 * (the optimizer's step), nor torch's Python inside backward() before
	 * the engine starts (_make_grads). */
	return x->kind == AN_F_IDLE_GAP && x->context_backward && x->engine_ns * 2 > x->total_ns &&
	       (x->cause == AN_CAUSE_LAUNCH_BOUND || x->cause == AN_CAUSE_HOST_OTHER || x->cause == AN_CAUSE_ALLOC) &&
	       (!x->callpath || x->callpath == x->context_callpath);
}

/* An idle gap blamed on Python whose recorded frames below the user's line
 * are in torch's DataLoader: the loop waited for a batch (from workers, or
 * made in the loop's own process by the dataset's __getitem__ when it has
 * no Python frames of the user's below). */
static int finding_in_dataloader(const struct analysis *a, const struct an_finding *x)
{
	if (x->kind != AN_F_IDLE_GAP || x->cause != AN_CAUSE_PYTHON)
		return 0;
	struct an_frame fr[MAX_FRAMES];
	size_t n = library_frames(a, x, fr, MAX_FRAMES);
	static const char file[] = "torch/utils/data/dataloader.py";
	for (size_t i = 0; i < n; i++)
		if (fr[i].file_len >= sizeof file - 1 &&
		    !memcmp(fr[i].file + fr[i].file_len - (sizeof file - 1), file, sizeof file - 1))
			return 1;
	return 0;
}

/* ------------------------------------------------------------ advice */
#define CPU_WORK_ADVICE                                                                                        \
	"the host ran for long stretches without any GPU call before this line while the GPU sat idle (work "   \
	"on the CPU: tensors made or computed on the CPU, numpy, .tolist(), Python in C code): make the "       \
	"tensors on the GPU (device='cuda'), move that work to the GPU or out of the loop, or overlap it "      \
	"with GPU work (DataLoader workers, prepare the next batch while this one runs)"

/* The host was inside a copy call: advice by the copy's direction and memory. */
static const char *copy_advice(const struct an_finding *f)
{
	if ((f->copy_bits & (AN_COPY_H2D | AN_COPY_PAGEABLE)) == (AN_COPY_H2D | AN_COPY_PAGEABLE))
		return "the host was inside a host-to-device copy from pageable memory while the GPU "
		       "sat idle (the call stages the bytes itself): copy from pinned memory "
		       "(DataLoader(pin_memory=True), tensor.pin_memory()) with non_blocking=True, "
		       "or prepare the next batch on the GPU ahead of the step";
	if ((f->copy_bits & (AN_COPY_D2H | AN_COPY_PAGEABLE)) == (AN_COPY_D2H | AN_COPY_PAGEABLE))
		return "the host was inside a device-to-host copy into pageable memory while the GPU "
		       "sat idle (it returns only when the bytes are there): copy into a pinned "
		       "buffer with non_blocking=True and read it after the next step is queued, "
		       "or copy less often";
	return "the host was inside a copy call while the GPU sat idle: queue the GPU's next "
	       "work before the copy, or issue the copy earlier (non_blocking=True from pinned "
	       "memory, on a side stream) so that work is queued behind it";
}

/* Host work outside Python: autograd's engine, a wait inside backward(), or native code. */
static const char *host_other_advice(const struct an_finding *f, int graphs)
{
	if (f->cause == AN_CAUSE_HOST_OTHER && an_finding_is_engine(f))
		return graphs ? "autograd's engine worked on the host before this launch with the GPU "
				"idle (its C++: backward ops with no GPU kernel, gradient hooks, waiting "
				"for the GIL or for the first launch of the pass): fuse the forward's "
				"small ops (torch.compile), or queue other GPU work meanwhile"
			      : "autograd's engine worked on the host before this launch with the GPU idle (its "
		       "C++: backward ops with no GPU kernel, gradient hooks, waiting for the GIL or "
		       "for the first launch of the pass): fuse the forward's small ops "
		       "(torch.compile), capture the step with CUDA graphs, or queue other GPU work "
		       "meanwhile";
	if (finding_backward_wait(f))
		return graphs ? "the thread waited inside backward() while autograd's engine worked "
				"in C++ with no GPU work queued (after its last launch, or before its "
				"first): the engine's own work (gradient hooks, accumulation, "
				"allocation), or a graph of many tiny ops: fuse them (torch.compile), or "
				"queue other GPU work meanwhile"
			      : "the thread waited inside backward() while autograd's engine worked in C++ "
		       "with no GPU work queued (after its last launch, or before its first): the "
		       "engine's own work (gradient hooks, accumulation, allocation), or a graph of "
		       "many tiny ops: fuse them (torch.compile), capture the step with CUDA graphs, "
		       "or queue other GPU work meanwhile";
	return "the host was busy outside Python before this launch (native code, data "
	       "loading, allocator): profile the native side or overlap it with GPU work";
}

static const char *idle_gap_suggestion(const struct analysis *a, const struct an_finding *f)
{
	/* Steps that already replay CUDA graphs get no advice to capture the step in one. */
	int graphs = an_steps_replay_graphs(a);
	switch (f->cause) {
	case AN_CAUSE_SYNC:
		return "the GPU ran dry while the host waited in this synchronization: avoid syncing "
		       "inside the loop (.item(), .cpu(), printing a tensor), or sync after the next "
		       "step's work is queued";
	case AN_CAUSE_PYTHON:
		if (an_finding_cpu_bound(f))
			return CPU_WORK_ADVICE;
		if (finding_in_dataloader(a, f))
			return "the loop waited here for the DataLoader's next batch while the GPU sat idle: "
			       "its workers do not keep up: more num_workers, a cheaper __getitem__ (decode "
			       "or augment on the GPU), persistent_workers=True, a larger prefetch_factor";
		return "the host was busy in this Python function while the GPU sat idle: take it off "
		       "the critical path (DataLoader workers, precompute, overlap it with GPU work) or "
		       "move the computation to the GPU";
	case AN_CAUSE_LAUNCH_BOUND:
		if (an_finding_in_copy(f))
			return copy_advice(f);
		if (an_finding_cpu_bound(f))
			return CPU_WORK_ADVICE;
		if (graphs)
			return "the next launch was issued late (launch-bound): batch small ops "
			       "(torch._foreach_*, fused ops), or capture more of the step into the CUDA graph "
			       "it replays (fewer, larger replays)";
		return "the next launch was issued late (launch-bound): batch small ops "
		       "(torch._foreach_*, fused ops), use torch.compile or CUDA graphs";
	case AN_CAUSE_ALLOC:
		if (f->alloc_bits == AN_ALLOC_FREE)
			return "the host was inside device memory free calls (cudaFree) while the GPU sat idle: "
			       "torch.cuda.empty_cache() (or the allocator emptying its cache to retry a failed "
			       "allocation) gives the memory back to the driver, and the next step must "
			       "allocate it again: do not empty the cache in the loop, and keep the peak "
			       "below the device's memory";
		return "the host was inside device memory allocation calls (cudaMalloc/cudaFree) while the "
		       "GPU sat idle: PyTorch's caching allocator went to the driver for memory: keep its "
		       "cache warm (no torch.cuda.empty_cache() in the loop), reuse or preallocate buffers "
		       "instead of making new ones each step, keep tensor shapes steady (or set "
		       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)";
	case AN_CAUSE_QUEUED:
		return "the next work was already queued when the GPU ran dry: it waited on the GPU side "
		       "(an event or another stream it depends on, or launch latency): check cross-stream "
		       "waits and events here";
	case AN_CAUSE_NO_HOST:
		return "nothing was recorded on the host while the GPU sat idle (a sleep, I/O, or code the "
		       "tracer does not see): profile the host side of this stretch";
	default:
		return host_other_advice(f, graphs);
	}
}

/* ------------------------------------------------------------ text */
/* What else explains the gaps' time, a line each between `open` and
 * `close`: the causes other than its own (when the host did more than one
 * thing in its gaps), and the copy, CPU work or allocator calls the time at
 * its site was in (`alloc_calls`: which allocator calls, as the text report
 * says; the HTML page does not). */
static void gap_notes(FILE *f, const struct an_finding *x, const char *open, const char *close, int alloc_calls)
{
	char t1[32], t2[32];
	int shown = 0;
	for (int c = 1; c < AN_CAUSE_N; c++) {
		if (c == x->cause || !x->cause_ns[c] || x->cause_ns[c] * 100 < x->total_ns)
			continue;
		fprintf(f, "%s%s%s %s", shown ? ", " : open, shown ? "" : "also: ", an_cause_name(c),
			fmt_ns(x->cause_ns[c], t1, sizeof t1));
		shown++;
	}
	if (shown)
		fputs(close, f);
	const char *calls = !alloc_calls ? "" : x->alloc_bits == AN_ALLOC_FREE ? "free " : x->alloc_bits == AN_ALLOC_MALLOC
		? "allocation " : "allocation and free ";
	if (an_finding_in_copy(x))
		fprintf(f, "%sof it %s inside %s copy calls here%s", open, fmt_ns(x->copy_ns, t1, sizeof t1),
			an_copy_label(x->copy_bits), close);
	else if (an_finding_cpu_bound(x))
		fprintf(f, "%sof it %s with no GPU call for %s or more before the launch (host CPU work, not launch "
			   "overhead)%s",
			open, fmt_ns(x->no_call_ns, t1, sizeof t1), fmt_ns(AN_CPU_STRETCH_NS, t2, sizeof t2), close);
	else if (x->cause == AN_CAUSE_ALLOC && x->site_ns)
		fprintf(f, "%sof it %s inside device memory %scalls here (the caching allocator going to the driver)%s", open,
			fmt_ns(x->site_ns, t1, sizeof t1), calls, close);
}

static void idle_gap_text_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32];
	fprintf(f, ": %" PRIu64 " gap%s, %s idle", x->count, x->count == 1 ? "" : "s", fmt_ns(x->total_ns, t1, sizeof t1));
	if (a->total.window_ns)
		fprintf(f, " (%.1f%% of the window)", pct(x->total_ns, a->total.window_ns));
	fprintf(f, ", longest %s\n", fmt_ns(x->max_ns, t2, sizeof t2));
	gap_notes(f, x, "      ", "\n", 1);
}

/* A kernel's name short enough for a line of text: no "void ", no
 * template arguments or parameters. */
static void kernel_short(const struct analysis *a, uint64_t name, char *buf, size_t len)
{
	size_t kl = 0;
	const char *k = an_string(a, name, &kl);
	if (!k || !kl) {
		snprintf(buf, len, "GPU work");
		return;
	}
	if (kl > 5 && !memcmp(k, "void ", 5)) {
		k += 5;
		kl -= 5;
	}
	static const char anon[] = "(anonymous namespace)";
	size_t n = 0;
	while (n < kl && k[n] != '<') {
		if (k[n] == '(') {
			if (kl - n < sizeof anon - 1 || memcmp(k + n, anon, sizeof anon - 1))
				break;
			n += sizeof anon - 2;
		}
		n++;
	}
	snprintf(buf, len, "%.*s%s", (int)(n > 72 ? 72 : n), k, n < kl ? (k[n] == '<' ? "<...>" : "") : "");
}

/* An idle gap finding's threads: who launched the work that ended its
 * gaps (autograd's engine, or the thread and line that resumed the GPU
 * after the longest), the thread's own wait in backward(), another thread
 * waiting in backward() meanwhile.  (The HTML page shows the same lines.) */
static void idle_gap_text_tail(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char th[128], site[512], t1[32], kn[96];
	if (x->context_backward && x->engine_gaps) {
		size_t nl = 0;
		const char *name = an_tid_name(a, x->engine_tid, &nl);
		kernel_short(a, x->engine_kernel, kn, sizeof kn);
		fprintf(f, "      the autograd engine's thread (%.*s%stid %" PRIu32 ", no Python of its own) launching %s",
			name ? (int)(nl > 64 ? 64 : nl) : 0, name ? name : "", name ? ", " : "", x->engine_tid, kn);
		if (x->engine_gaps < x->count)
			fprintf(f, " (%" PRIu64 " of the %" PRIu64 " gaps)", x->engine_gaps, x->count);
		fputc('\n', f);
	}
	if (finding_backward_wait(x))
		fprintf(f, "      this thread waited inside backward() here for %s with no GPU work queued "
			"(autograd's engine working in C++)\n", fmt_ns(x->backward_wait_ns, t1, sizeof t1));
	/* Who resumed the GPU, where the finding's line or threads could be
	 * read otherwise: a wait in backward() (the launch came after it), a
	 * thread other than the main one, another thread waiting meanwhile. */
	int other_thread = a->has_process && x->launch_tid != a->process.pid;
	if (x->has_launch_tid && !x->longest_engine &&
	    (finding_backward_wait(x) || other_thread || x->context_callpath || x->engine_gaps) &&
	    (x->other_callpath != x->callpath || other_thread)) {
		kernel_short(a, x->kernel_name, kn, sizeof kn);
		an_site_label(a, x->other_callpath, 0, site, sizeof site);
		fprintf(f, "      %s with %s launched by %s at %s\n",
			x->count > 1 ? "the longest gap ended" : "the gap ended", kn,
			an_thread_label(a, x->launch_tid, th, sizeof th), site);
	}
	if (x->context_callpath) {
		an_site_label(a, x->context_callpath, 0, site, sizeof site);
		fprintf(f, "      while another thread (%s) waited in backward() at %s\n",
			an_thread_label(a, x->context_tid, th, sizeof th), site);
	}
}

/* ------------------------------------------------------------ JSON */
static void idle_gap_json_fields(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	fprintf(f, ",\"causes\":{");
	for (int c = 1; c < AN_CAUSE_N; c++)
		fprintf(f, "%s\"%s_ns\":%" PRIu64, c > 1 ? "," : "", an_cause_name(c), x->cause_ns[c]);
	fputc('}', f);
}

/* Who else was at work: the thread waiting in backward() meanwhile and
 * autograd's engine, the kernel and thread that ended the gaps, where the
 * time went at the site. */
static void idle_gap_json_tail(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	if (x->context_callpath) {
		fprintf(f, ",\"context\":");
		json_where(a, f, x->context_callpath, 0);
		fprintf(f, ",\"autograd_engine\":%s,\"engine_gaps\":%" PRIu64, an_finding_is_engine(x) ? "true" : "false",
			x->engine_gaps);
	}
	uint64_t kname = an_finding_is_engine(x) ? x->engine_kernel : x->kernel_name;
	if (kname) {
		size_t kl = 0;
		const char *k = an_string(a, kname, &kl);
		fprintf(f, ",\"kernel\":");
		json_str(f, k ? k : "", k ? kl : 0);
	}
	if (x->has_launch_tid) {
		size_t tl = 0;
		const char *name = an_tid_name(a, x->launch_tid, &tl);
		fprintf(f, ",\"resumed_by_thread\":{\"tid\":%" PRIu32 ",\"main\":%s,\"name\":", x->launch_tid,
			a->has_process && x->launch_tid == a->process.pid ? "true" : "false");
		if (name)
			json_str(f, name, tl);
		else
			fputs("null", f);
		fputc('}', f);
	}
	if (x->backward_wait_ns)
		fprintf(f, ",\"backward_wait_ns\":%" PRIu64, x->backward_wait_ns);
	if (x->copy_ns) {
		fprintf(f, ",\"in_copy_ns\":%" PRIu64 ",\"copy\":", x->copy_ns);
		const char *l = an_copy_label(x->copy_bits);
		json_str(f, l, strlen(l));
	}
	if (x->no_call_ns)
		fprintf(f, ",\"no_gpu_call_ns\":%" PRIu64, x->no_call_ns);
	if (x->other_callpath && x->other_callpath != x->callpath) {
		fprintf(f, ",\"resumed_by\":");
		json_where(a, f, x->other_callpath, 0);
	}
}

/* ------------------------------------------------------------ HTML */
static void idle_gap_html_head(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32];
	fprintf(f, "<span class=\"num\">%" PRIu64 " gap%s</span><span class=\"cost\">%s idle", x->count,
		x->count == 1 ? "" : "s", fmt_ns(x->total_ns, t1, sizeof t1));
	if (a->total.window_ns)
		fprintf(f, " (%.1f%% of the window)", pct(x->total_ns, a->total.window_ns));
	fprintf(f, "</span><span class=\"num\">longest %s</span>", fmt_ns(x->max_ns, t2, sizeof t2));
}

/* What the text report says under the numbers (gap_notes). */
static void idle_gap_html_also(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	(void)a;
	gap_notes(f, x, "<p class=\"also\">", "</p>\n", 0);
}

/* Who ended the gaps, who waited meanwhile: the text report's lines. */
static void idle_gap_html_tail(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return;
	idle_gap_text_tail(a, m, x);
	if (fclose(m)) {
		free(buf);
		return;
	}
	for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		while (ll && *line == ' ')
			line++, ll--;
		if (!ll)
			continue;
		fputs("<p class=\"also\">", f);
		html_text(f, line, ll);
		fputs("</p>\n", f);
	}
	free(buf);
}

const struct an_kind an_kind_idle_gap = {
	.name = "idle_gap",
	.named_with_cause = 1,
	.other_of_longest = 1,
	.text_head = idle_gap_text_head,
	.text_tail = idle_gap_text_tail,
	.json_fields = idle_gap_json_fields,
	.json_tail = idle_gap_json_tail,
	.html_head = idle_gap_html_head,
	.html_also = idle_gap_html_also,
	.html_tail = idle_gap_html_tail,
	.suggestion = idle_gap_suggestion,
};
