/*
 * tbanalyze reporters: text (terminal) and JSON (doc/report-schema.md); the
 * HTML page is an_report_html.c.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "an_fmt.h"
#include "an.h"
#include "an_report_int.h"
#include "tr_common.h"

void json_str(FILE *f, const char *s, size_t len)
{
	tr_json_string(f, s ? s : "", s ? len : 0);
}

const char *fmt_bytes(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ULL << 30))
		snprintf(buf, len, "%.2f GiB", b / (double)(1ULL << 30));
	else if (b >= (1ULL << 20))
		snprintf(buf, len, "%.2f MiB", b / (double)(1ULL << 20));
	else if (b >= (1ULL << 10))
		snprintf(buf, len, "%.1f KiB", b / 1024.0);
	else
		snprintf(buf, len, "%" PRIu64 " B", b);
	return buf;
}

const char *no_gpu_timeline_why(const struct analysis *a)
{
	/* The header says whether CUPTI was wanted when the trace began; a
	 * notice, that it could not be had (no libcupti, another tool holds
	 * it, an error): then the trace is API-only.  Otherwise no GPU record
	 * means they were not written, not that there were none. */
	if (!(a->header.features & TBP_FEAT_CUPTI) || a->no_cupti_notice || a->cupti_trouble_notice)
		return "no GPU timeline in this trace (API-only, no CUPTI records)";
	if (!a->has_end)
		return "no GPU timeline: the trace ends early (no END record: the process was killed, or the file is "
		       "still being written) and the GPU records were not written, although CUPTI was on (features: cupti)";
	return "no GPU timeline: no GPU record reached the trace, although CUPTI was on (features: cupti); GPU records "
	       "reach the writer a second or so after the work (CUPTI's buffers, the ordering hold), so a short capture "
	       "or a crash's flight dump can end before any";
}

unsigned active_devices(const struct analysis *a)
{
	unsigned n = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (d->kernels || d->copies || d->sets)
			n++;
	}
	return n;
}

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

/* A thread's name from its THREAD record, NULL when none. */
static const char *thread_name(const struct analysis *a, uint32_t tid, size_t *len)
{
	for (size_t i = 0; i < a->thread_names.n; i++) {
		const struct an_thread_name *tn = VEC_AT(&a->thread_names, struct an_thread_name, i);
		const char *name = tn->tid == tid ? an_string(a, tn->name, len) : NULL;
		if (name && *len)
			return name;
	}
	return NULL;
}

const char *an_thread_label(const struct analysis *a, uint32_t tid, char *buf, size_t len)
{
	size_t nl = 0;
	const char *name = thread_name(a, tid, &nl);
	if (a->has_process && a->process.pid == tid)
		snprintf(buf, len, "the main thread");
	else if (name)
		snprintf(buf, len, "thread %.*s (tid %" PRIu32 ")", (int)(nl > 64 ? 64 : nl), name, tid);
	else
		snprintf(buf, len, "thread %" PRIu32, tid);
	return buf;
}

/* "pageable host-to-device", "device-to-host", "mixed", ... */
const char *an_copy_label(uint8_t bits)
{
	int pageable = (bits & AN_COPY_PAGEABLE) != 0;
	switch (bits & ~AN_COPY_PAGEABLE) {
	case AN_COPY_H2D: return pageable ? "pageable host-to-device" : "host-to-device";
	case AN_COPY_D2H: return pageable ? "pageable device-to-host" : "device-to-host";
	case AN_COPY_D2D: return "device-to-device";
	default: return pageable ? "pageable" : "mixed";
	}
}

static int finding_in_dataloader(const struct analysis *a, const struct an_finding *x);

#define CPU_WORK_ADVICE                                                                                        \
	"the host ran for long stretches without any GPU call before this line while the GPU sat idle (work "   \
	"on the CPU: tensors made or computed on the CPU, numpy, .tolist(), Python in C code): make the "       \
	"tensors on the GPU (device='cuda'), move that work to the GPU or out of the loop, or overlap it "      \
	"with GPU work (DataLoader workers, prepare the next batch while this one runs)"

const char *an_suggestion(const struct analysis *a, const struct an_finding *f)
{
	static char buf[512];
	/* Steps that already replay CUDA graphs get no advice to capture the step in one. */
	int graphs = an_steps_replay_graphs(a);
	switch (f->kind) {
	case AN_F_IDLE_GAP:
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
			if (an_finding_in_copy(f)) {
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
	case AN_F_KERNEL_BURST:
		if (f->backward_burst && graphs)
			return "the backward pass launches many tiny kernels here (autograd runs one or more per "
			       "op of the forward) with the GPU idling between them: fuse the forward's small ops "
			       "(torch.compile), capture the backward into the CUDA graph the step replays too, or "
			       "give each op more work (a larger batch)";
		if (f->backward_burst)
			return "the backward pass launches many tiny kernels here (autograd runs one or more per "
			       "op of the forward) with the GPU idling between them: fuse the forward's small "
			       "ops (torch.compile), capture the step with CUDA graphs, or give each op more work "
			       "(a larger batch)";
		if (graphs)
			return "many tiny kernels in a row from this line with the GPU idling between them: use "
			       "torch._foreach_* (e.g. zero_grad(set_to_none=True), foreach=True optimizers), fuse "
			       "with torch.compile, or capture more of the step into the CUDA graph it replays "
			       "(fewer, larger replays)";
		return "many tiny kernels in a row from this line with the GPU idling between them: use "
		       "torch._foreach_* (e.g. zero_grad(set_to_none=True), foreach=True optimizers), fuse "
		       "with torch.compile, or capture the loop with CUDA graphs";
	case AN_F_SCALAR_COPY:
		snprintf(buf, sizeof buf,
			 "scalar host-to-device copies (%" PRIu64 " pageable, %" PRIu64 " followed by a sync): "
			 "keep the scalar on the host (a Python float or numpy value) instead of making a "
			 "device tensor of it, as the hf_Reformer fix did",
			 f->pageable, f->flagged);
		return buf;
	case AN_F_PING_PONG:
		return "the same bytes are copied to the GPU and back again and again: keep the tensor on "
		       "one side across steps instead of offloading it each time";
	case AN_F_SYNC_HOTSPOT:
		return "the host blocks here waiting for the GPU (.item(), .cpu(), synchronize): read "
		       "values less often, accumulate on the device, or use non_blocking copies and events";
	case AN_F_ALLOC_CHURN:
		return "device memory is allocated here over and over: reuse buffers, let the caching "
		       "allocator keep them (no torch.cuda.empty_cache() in the loop)";
	}
	(void)a;
	return "";
}

/* ------------------------------------------------------------ text */
/* The call site, leaf first; lib: the library frames the finding was
 * recorded in below its user frame (leaf first), shown under the "at" line
 * in call order. */
static void text_where_lib(const struct analysis *a, FILE *f, uint64_t cp, uint64_t nat, const char *indent,
			   const struct an_frame *lib, size_t nl)
{
	struct an_frame fr[MAX_FRAMES];
	size_t n = an_callpath_frames(a, cp, fr, MAX_FRAMES);
	for (size_t i = 0; i < n && i < 8; i++) {
		size_t fl;
		const char *file = an_display_path(a, fr[i].file, fr[i].file_len, &fl);
		fprintf(f, "%s%s %.*s:%" PRIu64 " in %.*s\n", indent, i ? "from" : "at  ", (int)fl, file, fr[i].line,
			(int)fr[i].function_len, fr[i].function);
		for (size_t k = nl; !i && k-- > 0;) {
			file = an_display_path(a, lib[k].file, lib[k].file_len, &fl);
			fprintf(f, "%svia  %.*s:%" PRIu64 " in %.*s\n", indent, (int)fl, file, lib[k].line,
				(int)lib[k].function_len, lib[k].function);
		}
	}
	if (n > 8)
		fprintf(f, "%s     ... %zu more frames\n", indent, n - 8);
	if (n)
		return;
	struct an_native_frame nf[MAX_FRAMES];
	size_t nn = an_native_frames(a, nat, nf, MAX_FRAMES);
	for (size_t i = 0; i < nn && i < 6; i++) {
		if (nf[i].module)
			fprintf(f, "%s%s %.*s+0x%" PRIx64 "\n", indent, i ? "from" : "at  ", (int)nf[i].module_len,
				nf[i].module, nf[i].offset);
		else
			fprintf(f, "%s%s 0x%" PRIx64 "\n", indent, i ? "from" : "at  ", nf[i].pc);
	}
	if (!nn)
		fprintf(f, "%sat   (no call path recorded)\n", indent);
}

/* Frames of a finding's recorded call path inside the library, below the
 * user frame it is placed at (leaf first); 0 when placed at its leaf. */
size_t library_frames(const struct analysis *a, const struct an_finding *x, struct an_frame *fr, size_t max)
{
	if (!x->leaf_callpath)
		return 0;
	size_t n = 0;
	for (uint64_t node = x->leaf_callpath; node && node != x->callpath && n < max;
	     node = an_callpath_parent(a, node))
		if (!an_callpath_frames(a, node, &fr[n++], 1))
			return 0;
	return n;
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

/* The causes of an idle gap finding other than its own, when the host did
 * more than one thing in its gaps. */
static void text_cause_split(FILE *f, const struct an_finding *x)
{
	char t1[32];
	int shown = 0;
	for (int c = 1; c < AN_CAUSE_N; c++) {
		if (c == x->cause || !x->cause_ns[c] || x->cause_ns[c] * 100 < x->total_ns)
			continue;
		fprintf(f, "%s%s %s", shown++ ? ", " : "      also: ", an_cause_name(c), fmt_ns(x->cause_ns[c], t1, sizeof t1));
	}
	if (shown)
		fputc('\n', f);
}

const char *edge_name(int edge)
{
	return edge == AN_EDGE_LEADING ? "before the first GPU work" : edge == AN_EDGE_TRAILING ? "after the last GPU work" : "";
}

/* The window's idle time by cause (all devices), with the call sites that
 * take most of each. */
/* Idle outside every step: the runner's between its marked iterations; with
 * detected steps, the script's code after the loop's body (evaluation). */
const char *between_label(const struct analysis *a)
{
	return a->steps.source == AN_STEPS_DETECTED ? "between steps (outside the loop)" : "between iterations (runner)";
}

/* How much of the idle is placed at a line, and why the rest is not. */
static void text_idle_placed(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	char t1[32], t2[32];
	uint64_t unplaced = ib->idle_ns > ib->placed_ns ? ib->idle_ns - ib->placed_ns : 0;
	fprintf(f, "      placed at lines %s (%.1f%%), not placed %s", fmt_ns(ib->placed_ns, t1, sizeof t1),
		pct(ib->placed_ns, ib->idle_ns), fmt_ns(unplaced, t2, sizeof t2));
	const struct {
		const char *why;
		uint64_t ns;
	} rest[] = {{"before the first GPU work", ib->leading_ns}, {"after the last GPU work", ib->trailing_ns},
		    {between_label(a), ib->harness_ns}, {"no host call recorded", ib->no_line_ns}};
	int shown = 0;
	for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
		if (rest[i].ns)
			fprintf(f, "%s%s %s", shown++ ? ", " : ": ", rest[i].why, fmt_ns(rest[i].ns, t1, sizeof t1));
	fputc('\n', f);
}

static void text_idle_breakdown(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	char t1[32], t2[32];
	if (!ib->idle_ns)
		return;
	fprintf(f, "idle by cause (%s):", fmt_ns(ib->idle_ns, t1, sizeof t1));
	for (int c = 1; c < AN_CAUSE_N; c++)
		if (ib->by_cause[c])
			fprintf(f, "  %s %.1f%%", an_cause_name(c), pct(ib->by_cause[c], ib->idle_ns));
	if (ib->harness_ns)
		fprintf(f, "  %s %.1f%%", between_label(a), pct(ib->harness_ns, ib->idle_ns));
	fputc('\n', f);
	if (ib->leading_ns || ib->trailing_ns)
		fprintf(f, "      of which before the first GPU work %s, after the last %s\n",
			fmt_ns(ib->leading_ns, t1, sizeof t1), fmt_ns(ib->trailing_ns, t2, sizeof t2));
	text_idle_placed(a, f);
	size_t shown = 0;
	for (size_t i = 0; i < a->idle_parts.n && shown < 5; i++) {
		const struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		if (p->total_ns * 100 < ib->idle_ns)
			break;
		char site[512];
		an_site_label(a, p->callpath, p->native, site, sizeof site);
		fprintf(f, "      %10s  %-12s %s%s%s%s%s\n", fmt_ns(p->total_ns, t1, sizeof t1), an_cause_name(p->cause),
			p->callpath || p->native ? site : "(no host activity recorded)", p->edge ? " (" : "",
			edge_name(p->edge), p->edge ? ")" : "", p->harness ? " [the runner's]" : "");
		shown++;
	}
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
 * waiting in backward() meanwhile. */
void text_gap_threads(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char th[128], site[512], t1[32], kn[96];
	if (x->context_backward && x->engine_gaps) {
		size_t nl = 0;
		const char *name = thread_name(a, x->engine_tid, &nl);
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

/* Steps the window holds (its per-step figures), 0: none. */
static uint64_t window_steps(const struct analysis *a)
{
	return a->markers_used ? a->iterations : 0;
}

/* A finding's time at stake, per step and as a share of the steps' time
 * (of the window without steps). */
static void text_stake(const struct analysis *a, FILE *f, const struct an_finding *x)
{
	char t1[32], t2[32], t3[32];
	uint64_t win = a->total.window_ns, steps = window_steps(a);
	if (!win)
		return;
	if (steps)
		fprintf(f, "      at stake: %s per step (%.1f%% of the step time)",
			fmt_ns(x->stake_ns / steps, t1, sizeof t1), pct(x->stake_ns, win));
	else
		fprintf(f, "      at stake: %s (%.1f%% of the window)", fmt_ns(x->stake_ns, t1, sizeof t1),
			pct(x->stake_ns, win));
	if (x->kind == AN_F_SYNC_HOTSPOT && x->idle_ns)
		fprintf(f, ": %s waiting, then %s of GPU idle until the host's next work", fmt_ns(x->total_ns, t2, sizeof t2),
			fmt_ns(x->idle_ns, t3, sizeof t3));
	fputc('\n', f);
}

static void text_finding(const struct analysis *a, FILE *f, size_t idx, const struct an_finding *x)
{
	char t1[32], t2[32], b1[32];
	fprintf(f, "%2zu. %s", idx, an_finding_name(x->kind));
	switch (x->kind) {
	case AN_F_IDLE_GAP:
		fprintf(f, " (%s): %" PRIu64 " gap%s, %s idle", an_cause_name(x->cause), x->count,
			x->count == 1 ? "" : "s", fmt_ns(x->total_ns, t1, sizeof t1));
		if (a->total.window_ns)
			fprintf(f, " (%.1f%% of the window)", pct(x->total_ns, a->total.window_ns));
		fprintf(f, ", longest %s\n", fmt_ns(x->max_ns, t2, sizeof t2));
		text_cause_split(f, x);
		if (an_finding_in_copy(x))
			fprintf(f, "      of it %s inside %s copy calls here\n", fmt_ns(x->copy_ns, t1, sizeof t1),
				an_copy_label(x->copy_bits));
		else if (an_finding_cpu_bound(x))
			fprintf(f, "      of it %s with no GPU call for %s or more before the launch (host CPU work, "
				"not launch overhead)\n", fmt_ns(x->no_call_ns, t1, sizeof t1),
				fmt_ns(AN_CPU_STRETCH_NS, t2, sizeof t2));
		else if (x->cause == AN_CAUSE_ALLOC && x->site_ns)
			fprintf(f, "      of it %s inside device memory %s calls here (the caching allocator going to "
				"the driver)\n", fmt_ns(x->site_ns, t1, sizeof t1),
				x->alloc_bits == AN_ALLOC_FREE ? "free" : x->alloc_bits == AN_ALLOC_MALLOC ? "allocation"
				: "allocation and free");
		break;
	case AN_F_KERNEL_BURST:
		/* Spans are merged across streams, idle is the device's: both
		 * are wall time, within the window. */
		fprintf(f, ": %" PRIu64 " burst%s, %" PRIu64 " short kernels spanning %s, GPU idle %s inside them\n",
			x->groups, x->groups == 1 ? "" : "s", x->count, fmt_ns(x->total_ns, t1, sizeof t1),
			fmt_ns(x->idle_ns, t2, sizeof t2));
		break;
	case AN_F_SCALAR_COPY:
		fprintf(f, ": %" PRIu64 " copies of <= %" PRIu64 " bytes, %s stalled (%" PRIu64
			   " followed by a sync, %" PRIu64 " pageable)\n",
			x->count, a->opts.scalar_bytes, fmt_ns(x->total_ns, t1, sizeof t1), x->flagged, x->pageable);
		break;
	case AN_F_PING_PONG:
		fprintf(f, ": %" PRIu64 " round trips, %s moved, %s in copies\n", x->count,
			fmt_bytes(x->bytes, b1, sizeof b1), fmt_ns(x->total_ns, t1, sizeof t1));
		break;
	case AN_F_SYNC_HOTSPOT:
		fprintf(f, ": %" PRIu64 " syncs, %s waiting, longest %s\n", x->count,
			fmt_ns(x->total_ns, t1, sizeof t1), fmt_ns(x->max_ns, t2, sizeof t2));
		break;
	case AN_F_ALLOC_CHURN:
		fprintf(f, ": %" PRIu64 " allocations, %s, %s in the allocator", x->count,
			fmt_bytes(x->bytes, b1, sizeof b1), fmt_ns(x->total_ns, t1, sizeof t1));
		if (a->iterations && x->iters_allocating)
			fprintf(f, ", in %" PRIu64 " of the %" PRIu64 " steps", x->iters_allocating, a->iterations);
		fputc('\n', f);
		break;
	}
	text_stake(a, f, x);
	struct an_frame lib[MAX_FRAMES];
	size_t nl = library_frames(a, x, lib, MAX_FRAMES);
	text_where_lib(a, f, x->callpath, x->native, "      ", lib, nl);
	if (x->kind == AN_F_KERNEL_BURST && x->backward_burst)
		fprintf(f, "      launched by autograd's engine for the backward() called here\n");
	if (x->kind == AN_F_IDLE_GAP)
		text_gap_threads(a, f, x);
	fprintf(f, "      -> %s\n", an_suggestion(a, x));
}

/* ------------------------------------------------------------ host time, grouped
 * Span statistics are per whole call path; a reader wants them per function
 * (inclusive time: where does the step's time go) and per source line (self
 * time), with rows that only differ deeper in the path merged. */
/* Orders by bytes, not by string id: two ids may carry the same name. */
static int bytes_cmp(const char *x, size_t xl, const char *y, size_t yl)
{
	int c = memcmp(x ? x : "", y ? y : "", xl < yl ? xl : yl);
	return c ? c : (xl > yl) - (xl < yl);
}

static int row_key_cmp(const struct host_row *x, const struct host_row *y, int by_line)
{
	int c = bytes_cmp(x->fr.file, x->fr.file_len, y->fr.file, y->fr.file_len);
	if (!c)
		c = bytes_cmp(x->fr.function, x->fr.function_len, y->fr.function, y->fr.function_len);
	if (!c && by_line && x->fr.line != y->fr.line)
		c = x->fr.line < y->fr.line ? -1 : 1;
	return c;
}
static int cmp_row_fn(const void *a, const void *b) { return row_key_cmp(a, b, 0); }
static int cmp_row_line(const void *a, const void *b) { return row_key_cmp(a, b, 1); }
static int cmp_row_total(const void *a, const void *b)
{
	const struct host_row *x = a, *y = b;
	return x->total_ns != y->total_ns ? (x->total_ns < y->total_ns ? 1 : -1) : (x->self_ns < y->self_ns) - (x->self_ns > y->self_ns);
}
static int cmp_row_self(const void *a, const void *b)
{
	const struct host_row *x = a, *y = b;
	return x->self_ns != y->self_ns ? (x->self_ns < y->self_ns ? 1 : -1) : (x->total_ns < y->total_ns) - (x->total_ns > y->total_ns);
}

/* A call of function `fr` (by file and name), made from call path `caller`. */
static uint64_t call_key(const struct an_frame *fr, uint64_t caller)
{
	return an_hash_combine(an_frame_function_hash(fr), caller);
}

/* The calls that left a span: keys of call_key. */
static void recorded_calls(const struct analysis *a, struct u64map *out)
{
	for (size_t i = 0; i < a->spans.n; i++) {
		uint64_t cp = VEC_AT(&a->spans, struct an_span_stat, i)->callpath;
		struct an_frame fr;
		if (an_callpath_frames(a, cp, &fr, 1) == 1 &&
		    u64map_put(out, call_key(&fr, an_callpath_parent(a, cp)), 1))
			break;   /* out of memory: fewer calls count as nested */
	}
}

/* Rows grouped by leaf function (by_line 0) or leaf line (1), biggest first
 * (inclusive time, or self time): over the host window when there is one
 * (rows with no call in it left out unless all), else the whole trace.
 * Returns the row count; *out is malloc'd (NULL when none or no memory). */
static size_t host_rows_all(const struct analysis *a, int by_line, struct host_row **out, int all)
{
	*out = NULL;
	if (!a->spans.n)
		return 0;
	struct host_row *rows = calloc(a->spans.n, sizeof *rows);
	if (!rows)
		return 0;
	struct u64map recorded = { 0 };
	recorded_calls(a, &recorded);
	size_t n = 0;
	for (size_t i = 0; i < a->spans.n; i++) {
		const struct an_span_stat *sp = VEC_AT(&a->spans, struct an_span_stat, i);
		struct an_frame fr[MAX_FRAMES];
		size_t nf = an_callpath_frames(a, sp->callpath, fr, MAX_FRAMES);
		if (!nf)
			continue;
		int win = a->host_win.on;
		if (win && !sp->win_count && !all)
			continue;
		struct host_row *r = &rows[n++];
		r->fr = fr[0];
		r->count = win ? sp->win_count : sp->count;
		r->total_ns = win ? sp->win_total_ns : sp->total_ns;
		r->self_ns = win ? sp->win_self_ns : sp->self_ns;
		r->trace_count = sp->count;
		r->trace_total_ns = sp->total_ns;
		r->trace_self_ns = sp->self_ns;
		r->import = sp->import;
		r->paths = 1;
		r->callpath = sp->callpath;
		/* A call inside another call of the same function is already in
		 * the outer call's inclusive time, when that call was recorded: an
		 * import running when the span hook went in (site's .pth files),
		 * or a thread's loop still running at exit, left no span. */
		uint64_t up = an_callpath_parent(a, sp->callpath);
		for (size_t j = 1; j < nf && !r->recursive; j++) {
			up = an_callpath_parent(a, up);   /* the path that called fr[j] */
			if (an_frame_same_function(&fr[j], &fr[0]) && u64map_get(&recorded, call_key(&fr[0], up)))
				r->recursive = 1;
		}
	}
	u64map_free(&recorded);
	qsort(rows, n, sizeof *rows, by_line ? cmp_row_line : cmp_row_fn);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		struct host_row *r = &rows[i];
		uint64_t incl = r->recursive ? 0 : r->total_ns, trace_incl = r->recursive ? 0 : r->trace_total_ns;
		if (m && !row_key_cmp(&rows[m - 1], r, by_line)) {
			struct host_row *g = &rows[m - 1];
			g->count += r->count;
			g->total_ns += incl;
			g->self_ns += r->self_ns;
			g->trace_count += r->trace_count;
			g->trace_total_ns += trace_incl;
			g->trace_self_ns += r->trace_self_ns;
			g->import |= r->import;
			g->paths++;
			g->outer += !r->recursive;
			continue;
		}
		rows[m] = *r;
		rows[m].total_ns = incl;
		rows[m].trace_total_ns = trace_incl;
		rows[m].outer = !r->recursive;
		rows[m].recursive = 0;
		m++;
	}
	qsort(rows, m, sizeof *rows, by_line ? cmp_row_self : cmp_row_total);
	*out = rows;
	return m;
}

size_t host_rows(const struct analysis *a, int by_line, struct host_row **out)
{
	return host_rows_all(a, by_line, out, 0);
}

/* The trace outside the host window: its time before and after it, and
 * the imports' time outside it (importlib's calls, nested ones once). */
int host_outside(const struct analysis *a, struct host_outside *o)
{
	memset(o, 0, sizeof *o);
	if (!a->host_win.on)
		return 0;
	o->before_ns = a->host_win.begin > a->first_ts ? a->host_win.begin - a->first_ts : 0;
	o->after_ns = a->last_ts > a->host_win.end ? a->last_ts - a->host_win.end : 0;
	struct host_row *rows;
	size_t n = host_rows_all(a, 0, &rows, 1);
	for (size_t i = 0; i < n; i++)
		if (rows[i].import && rows[i].trace_total_ns > rows[i].total_ns)
			o->imports_ns += rows[i].trace_total_ns - rows[i].total_ns;
	free(rows);
	return 1;
}

/* ", imports 3.296 s" (nothing without imports outside the window) */
void host_imports(const struct host_outside *o, char *buf, size_t len)
{
	char t[32];
	if (o->imports_ns)
		snprintf(buf, len, ", imports %s", fmt_ns(o->imports_ns, t, sizeof t));
	else
		buf[0] = 0;
}

/* "the 14 steps after warm-up, 334.777 ms" */
void host_win_label(const struct analysis *a, char *buf, size_t len)
{
	char t[32];
	uint64_t steady = a->steps.count > a->steps.warmup ? a->steps.count - a->steps.warmup : a->iterations;
	snprintf(buf, len, "the %" PRIu64 " step%s after warm-up, %s", steady, steady == 1 ? "" : "s",
		 fmt_ns(a->host_win.end - a->host_win.begin, t, sizeof t));
}

/* Rows shown in the host tables: at least 12, more with a larger --top. */
size_t host_rows_shown(const struct analysis *a, size_t n)
{
	size_t lim = a->opts.top > 12 ? a->opts.top : 12;
	return n < lim ? n : lim;
}

/* Inclusive time of a row; "nested" when only calls made inside another
 * call of the same function were recorded (the outer one is not a span). */
const char *row_incl(const struct host_row *r, char *buf, size_t len)
{
	return r->outer ? fmt_ns(r->total_ns, buf, len) : "nested";
}

static void text_host_time(const struct analysis *a, FILE *f)
{
	char t1[32], t2[48], t3[32], lab[96];
	struct host_row *rows;
	struct host_outside out;
	if (host_outside(a, &out)) {
		host_win_label(a, lab, sizeof lab);
		host_imports(&out, t2, sizeof t2);
		fprintf(f, "\nhost time over the analysis window (%s); outside it, not in the tables below: %s before it "
			   "(start-up%s, set-up, warm-up) and %s after it\n",
			lab, fmt_ns(out.before_ns, t1, sizeof t1), t2, fmt_ns(out.after_ns, t3, sizeof t3));
	}
	size_t n = host_rows(a, 0, &rows);
	if (n) {
		fprintf(f, "\ntop Python functions by inclusive time (spans: calls longer than the tracer's threshold):\n");
		fprintf(f, "  %10s  %10s  %7s  %s\n", "inclusive", "self", "calls", "function");
		for (size_t i = 0; i < host_rows_shown(a, n); i++) {
			const struct host_row *r = &rows[i];
			size_t fl;
			const char *file = an_display_path(a, r->fr.file, r->fr.file_len, &fl);
			fprintf(f, "  %10s  %10s  %6" PRIu64 "x  %.*s  (%.*s)\n", row_incl(r, t1, sizeof t1),
				fmt_ns(r->self_ns, t2, sizeof t2), r->count, (int)r->fr.function_len, r->fr.function,
				(int)fl, file);
		}
	}
	free(rows);
	n = host_rows(a, 1, &rows);
	/* The program's own functions apart when torch's or the standard
	 * library's lead the table: where the user's code spends its time. */
	size_t own = 0;
	for (size_t i = 0; i < n; i++)
		own += !an_frame_is_library(a, &rows[i].fr);
	for (int mine = 0; mine <= (own && n && an_frame_is_library(a, &rows[0].fr)); mine++) {
		if (!n)
			break;
		fprintf(f, mine ? "\nthe program's own functions by self time (its files: not torch's, not the standard "
				  "library's):\n"
				: "\ntop Python functions by self time (line: where the function is defined):\n");
		fprintf(f, "  %10s  %10s  %7s  %s\n", "self", "inclusive", "calls", "function");
		size_t lim = host_rows_shown(a, mine ? own : n);
		for (size_t i = 0, shown = 0; i < n && shown < lim; i++) {
			const struct host_row *r = &rows[i];
			if (mine && an_frame_is_library(a, &r->fr))
				continue;
			shown++;
			size_t fl;
			const char *file = an_display_path(a, r->fr.file, r->fr.file_len, &fl);
			fprintf(f, "  %10s  %10s  %6" PRIu64 "x  %.*s:%" PRIu64 " %.*s", fmt_ns(r->self_ns, t1, sizeof t1),
				row_incl(r, t2, sizeof t2), r->count, (int)fl, file, r->fr.line,
				(int)r->fr.function_len, r->fr.function);
			struct an_frame fr[2];
			if (r->paths > 1) {
				fprintf(f, "  (%zu call paths)", r->paths);
			} else if (an_callpath_frames(a, r->callpath, fr, 2) == 2) {
				size_t cl;
				const char *cf = an_display_path(a, fr[1].file, fr[1].file_len, &cl);
				fprintf(f, "  (from %.*s:%" PRIu64 " %.*s)", (int)cl, cf, fr[1].line, (int)fr[1].function_len,
					fr[1].function);
			}
			fputc('\n', f);
		}
	}
	free(rows);
}

/* Streams grouped by device, each group in the streams' own order: a
 * device's listing walks its group, not every stream (a damaged trace can
 * name thousands of devices and streams). */
struct stream_ref {
	uint64_t device;
	size_t ix;
};

static int cmp_stream_ref(const void *x, const void *y)
{
	const struct stream_ref *a = x, *b = y;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->ix < b->ix ? -1 : a->ix > b->ix;
}

/* NULL when there are none or out of memory: the callers then scan them all. */
static struct stream_ref *streams_by_device(const struct analysis *a)
{
	struct stream_ref *refs = a->streams.n ? malloc(a->streams.n * sizeof *refs) : NULL;
	if (!refs)
		return NULL;
	for (size_t i = 0; i < a->streams.n; i++)
		refs[i] = (struct stream_ref){VEC_AT(&a->streams, struct an_stream, i)->device, i};
	qsort(refs, a->streams.n, sizeof *refs, cmp_stream_ref);
	return refs;
}

/* [*lo, *hi): where device dev's streams are in refs (every stream without refs). */
static void device_streams(const struct analysis *a, const struct stream_ref *refs, uint64_t dev, size_t *lo,
			   size_t *hi)
{
	*lo = 0;
	*hi = a->streams.n;
	if (!refs)
		return;
	size_t l = 0, h = a->streams.n;
	while (l < h) {
		size_t mid = l + (h - l) / 2;
		if (refs[mid].device < dev)
			l = mid + 1;
		else
			h = mid;
	}
	*lo = l;
	while (l < a->streams.n && refs[l].device == dev)
		l++;
	*hi = l;
}

static const struct an_stream *stream_at(const struct analysis *a, const struct stream_ref *refs, size_t k)
{
	return VEC_AT(&a->streams, struct an_stream, refs ? refs[k].ix : k);
}
/* What each source of LOST records means, for a reader who has not read the trace format. */
static const char *lost_source_meaning(unsigned source)
{
	switch (source) {
	case TBP_LOST_BUFFER_FULL: return "a thread's buffer was full";
	case TBP_LOST_CUPTI: return "CUPTI had no buffer";
	case TBP_LOST_WRITE_ERROR: return "the trace file could not be written";
	case TBP_LOST_SIGNAL: return "the process died of a signal before they were written";
	default: return "unknown source";
	}
}

/* " (cupti 1200: CUPTI had no buffer; buffer_full 34: ...)", biggest first; "" when nothing was lost
 * or only the END record counted it (no source known). */
static void lost_by_source_text(const struct analysis *a, char *out, size_t size)
{
	out[0] = 0;
	if (!a->lost)
		return;
	unsigned order[8], n = 0;
	for (unsigned s = 0; s < 8; s++)
		if (a->lost_by_source[s])
			order[n++] = s;
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && a->lost_by_source[order[j]] > a->lost_by_source[order[j - 1]]; j--) {
			unsigned t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	size_t at = 0;
	for (unsigned i = 0; i < n && at < size; i++) {
		unsigned s = order[i];
		int w = snprintf(out + at, size - at, "%s%s %" PRIu64 ": %s", i ? "; " : " (",
				 s ? tr_lost_source_name(s) : "other", a->lost_by_source[s], lost_source_meaning(s));
		if (w < 0)
			break;
		at += (size_t)w;
	}
	if (at < size)
		snprintf(out + at, size - at, ")");
}


/* GPU work records (kernels, copies, memsets) and those joined to the call that made them. */
static uint64_t gpu_work_records(const struct analysis *a)
{
	return a->n_gpu_kernel + a->n_gpu_memcpy + a->n_gpu_memset;
}

static double joined_pct(const struct analysis *a)
{
	uint64_t n = gpu_work_records(a);
	return n ? 100.0 * (double)(n - a->unmatched_gpu) / (double)n : 100.0;
}

/* Why GPU records were not joined, as libtbprof said at exit (its CUPTI_JOIN notice). */
static const char *join_note(const struct analysis *a, size_t *len)
{
	const char *s = a->join_notice ? an_string(a, a->join_notice, len) : NULL;
	static const char prefix[] = "CUPTI join: ";
	if (s && *len >= sizeof prefix - 1 && !memcmp(s, prefix, sizeof prefix - 1)) {
		s += sizeof prefix - 1;
		*len -= sizeof prefix - 1;
	}
	return s;
}

/* The header's join line, and below 99 % the warning: those GPU records have no Python line. */
static void text_join(const struct analysis *a, FILE *f)
{
	uint64_t n = gpu_work_records(a);
	if (!n)
		return;
	fprintf(f, "joined: %.1f%% of GPU records (%" PRIu64 " of %" PRIu64 " kernels, copies and memsets) to the call "
		   "that made them\n", joined_pct(a), n - a->unmatched_gpu, n);
	if (joined_pct(a) >= 99.0)
		return;
	size_t len = 0;
	const char *why = join_note(a, &len);
	fprintf(f, "warning: %" PRIu64 " kernel%s", a->unmatched_kernels, a->unmatched_kernels == 1 ? "" : "s");
	if (a->unmatched_gpu > a->unmatched_kernels)
		fprintf(f, " and %" PRIu64 " copies/memsets", a->unmatched_gpu - a->unmatched_kernels);
	fprintf(f, " have no Python line (joined to no call)");
	if (why)
		fprintf(f, "; libtbprof: %.*s\n", (int)len, why);
	else
		fprintf(f, "; the trace does not say why (no join notice: a trace from before libtbprof reported its joins, "
			   "a HIP trace, or a process that did not exit cleanly)\n");
}

void an_report_text(const struct analysis *a, FILE *f)
{
	char t1[32], t2[32], t3[32], t4[32], b1[32];
	fprintf(f, "tbanalyze report: %s\n", a->path);
	uint64_t win = a->total.window_ns;
	if (a->markers_used && a->steps.source == AN_STEPS_DETECTED && a->steps.warmup > 1)
		fprintf(f, "window: %s, %" PRIu64 " step%s after the first %" PRIu64 " (warm-up: work of the loop "
			   "first called in step %" PRIu64 "), detected (no marks in the trace)\n",
			fmt_ns(win, t1, sizeof t1), a->iterations, a->iterations == 1 ? "" : "s", a->steps.warmup,
			a->steps.warmup);
	else if (a->markers_used && a->steps.source == AN_STEPS_DETECTED)
		fprintf(f, "window: %s, %" PRIu64 " step%s after the first (warm-up), detected (no marks in the trace)\n",
			fmt_ns(win, t1, sizeof t1), a->iterations, a->iterations == 1 ? "" : "s");
	else if (a->markers_used)
		fprintf(f, "window: %s, %" PRIu64 " marked iteration%s%s\n", fmt_ns(win, t1, sizeof t1), a->iterations,
			a->iterations == 1 ? "" : "s", a->warmup_seen ? " after warm-up" : "");
	else
		fprintf(f, "window: %s, first to last event\n", fmt_ns(win, t1, sizeof t1));
	if (a->steps.source) {
		fprintf(f, "steps: %" PRIu64 " (%s", a->steps.count, an_steps_source_name(a->steps.source));
		if (a->steps.loop) {
			char site[512];
			an_site_label(a, a->steps.loop, 0, site, sizeof site);
			fprintf(f, ": the loop whose steps start at %s", site);
		}
		if (a->steps.unit) {
			static const char *const what[] = {"", "one optimizer step()", "one backward()", "one forward of the model",
							   "one CUDA graph replay"};
			char site[512];
			an_site_label(a, a->steps.unit, 0, site, sizeof site);
			fprintf(f, ", each holding %s at %s", what[a->steps.unit_kind <= AN_UNIT_GRAPH ? a->steps.unit_kind : 0], site);
		}
		fprintf(f, "), %" PRIu64 " warm-up set apart, median %s per step\n", a->steps.warmup,
			fmt_ns(a->steps.median_ns, t2, sizeof t2));
	} else if (a->steps.none) {
		fprintf(f, "steps: no steps detected (%s): the whole trace is analysed\n", a->steps.none);
	}

	text_join(a, f);
	if (!an_has_gpu(a)) {
		if (a->n_launch + a->n_memcpy + a->n_memset)
			fprintf(f, "%s: GPU time cannot be measured; findings below come from host-side API times\n",
				no_gpu_timeline_why(a));
		else
			fprintf(f, "no GPU activity recorded (a CPU run): host time by Python function follows\n");
	} else {
		struct stream_ref *refs = streams_by_device(a);
		for (size_t i = 0; i < a->devices.n; i++) {
			const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
			if (!d->kernels && !d->copies && !d->sets)
				continue;
			struct an_breakdown b;
			an_device_breakdown(a, d, &b);
			size_t nl;
			const char *name = an_string(a, d->name, &nl);
			fprintf(f, "GPU %" PRIu64 "%s%.*s%s: active %.1f%% (%s)  data movement %.1f%% (%s)  idle %.1f%% (%s)\n",
				d->id, name ? " (" : "", name ? (int)nl : 0, name ? name : "", name ? ")" : "",
				pct(b.active_ns, b.window_ns), fmt_ns(b.active_ns, t1, sizeof t1),
				pct(b.dm_ns, b.window_ns), fmt_ns(b.dm_ns, t2, sizeof t2), pct(b.idle_ns, b.window_ns),
				fmt_ns(b.idle_ns, t3, sizeof t3));
			if (b.dm_ns)
				fprintf(f, "      copies: H2D %s  D2H %s  D2D %s  peer %s\n",
					fmt_ns(b.ck_ns[TBP_COPY_H2D], t1, sizeof t1), fmt_ns(b.ck_ns[TBP_COPY_D2H], t2, sizeof t2),
					fmt_ns(b.ck_ns[TBP_COPY_D2D], t3, sizeof t3), fmt_ns(b.ck_ns[TBP_COPY_PEER], t4, sizeof t4));
			size_t lo, hi;
			device_streams(a, refs, d->id, &lo, &hi);
			for (size_t j = lo; j < hi; j++) {
				const struct an_stream *s = stream_at(a, refs, j);
				if (s->device != d->id)
					continue;
				uint64_t busy, dm;
				an_stream_breakdown(a, s, &busy, &dm);
				fprintf(f, "      stream %" PRIu64 ": busy %.1f%% (%s), data movement %s, %" PRIu64
					   " kernels, %" PRIu64 " copies, %" PRIu64 " memsets\n",
					s->stream, pct(busy, b.window_ns), fmt_ns(busy, t1, sizeof t1), fmt_ns(dm, t2, sizeof t2),
					s->kernels, s->copies, s->sets);
			}
		}
		free(refs);
		text_idle_breakdown(a, f);
	}
	fprintf(f, "counts: %" PRIu64 " kernels, %" PRIu64 " memcpy, %" PRIu64 " memset, %" PRIu64 " malloc, %" PRIu64
		   " free, %" PRIu64 " sync",
		a->n_launch - a->n_graph_launch, a->n_memcpy, a->n_memset, a->n_malloc, a->n_free, a->n_sync);
	if (a->n_graph_launch)
		fprintf(f, ", %" PRIu64 " CUDA graph launch%s", a->n_graph_launch, a->n_graph_launch == 1 ? "" : "es");
	if (a->n_graph_launch && a->iterations)
		fprintf(f, " (%" PRIu64 " of %" PRIu64 " steps replay one)", a->graph_launch_iters, a->iterations);
	if (a->n_errors)
		fprintf(f, ", %" PRIu64 " failed API call%s (not counted as kernels)", a->n_errors,
			a->n_errors == 1 ? "" : "s");
	fputc('\n', f);

	if (a->model_step.n) {
		fprintf(f, "\nthe model's work at the runner's shared training step (runner/model.py: the step of "
			   "models without their own train()), biggest first:\n");
		size_t shown = a->model_step.n < a->opts.top ? a->model_step.n : a->opts.top;
		for (size_t i = 0; i < shown; i++)
			text_finding(a, f, i + 1, VEC_AT(&a->model_step, struct an_finding, i));
		if (shown < a->model_step.n)
			fprintf(f, "    ... %zu more (--top N, or --json for all)\n", a->model_step.n - shown);
	}
	if (a->findings.n) {
		fprintf(f, "\nfindings, biggest first:\n");
		size_t shown = a->findings.n < a->opts.top ? a->findings.n : a->opts.top;
		for (size_t i = 0; i < shown; i++)
			text_finding(a, f, i + 1, VEC_AT(&a->findings, struct an_finding, i));
		if (shown < a->findings.n)
			fprintf(f, "    ... %zu more (--top N, or --json for all)\n", a->findings.n - shown);
	} else {
		fprintf(f, a->model_step.n ? "\nno other findings\n" : "\nno findings\n");
	}
	if (a->harness.n) {
		char site[512];
		fprintf(f, "\nthe runner's own cost (harness, not the model's):\n");
		for (size_t i = 0; i < a->harness.n; i++) {
			const struct an_finding *x = VEC_AT(&a->harness, struct an_finding, i);
			an_site_label(a, x->callpath, x->native, site, sizeof site);
			fprintf(f, "  %s%s%s: %" PRIu64 "x, %s at %s\n", an_finding_name(x->kind),
				x->kind == AN_F_IDLE_GAP ? " " : "", x->kind == AN_F_IDLE_GAP ? an_cause_name(x->cause) : "",
				x->count, fmt_ns(x->total_ns, t1, sizeof t1), site);
		}
	}

	if (a->kernels.n) {
		fprintf(f, "\ntop kernels:\n");
		for (size_t i = 0; i < a->kernels.n && i < 10; i++) {
			const struct an_kernel_stat *k = VEC_AT(&a->kernels, struct an_kernel_stat, i);
			size_t nl;
			const char *name = an_string(a, k->name, &nl);
			fprintf(f, "  %10s  %7" PRIu64 "x  %.*s\n", fmt_ns(k->total_ns, t1, sizeof t1), k->count,
				name ? (int)(nl > 100 ? 100 : nl) : 9, name ? name : "(unnamed)");
		}
	}
	if (a->spans.n && (!an_has_gpu(a) || a->opts.top > 20))
		text_host_time(a, f);
	int any_mem = 0;
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		if (!d->allocs)
			continue;
		if (!any_mem++)
			fprintf(f, "\nmemory:\n");
		fprintf(f, "  device %" PRIu64 ": peak %s, %" PRIu64 " allocations (%s), %" PRIu64 " frees\n", d->id,
			fmt_bytes(d->mem_peak, b1, sizeof b1), d->allocs, fmt_bytes(d->alloc_bytes, t1, sizeof t1), d->frees);
	}
	if (a->mem_leak_count)
		fprintf(f, "  not freed at the end of the trace: %" PRIu64 " blocks, %s\n", a->mem_leak_count,
			fmt_bytes(a->mem_leak_bytes, b1, sizeof b1));

	char by_source[400];
	lost_by_source_text(a, by_source, sizeof by_source);
	fprintf(f, "\ntrace: %" PRIu64 " events, %" PRIu64 " lost%s%s%s\n", a->events, a->lost ? a->lost : a->end_lost,
		by_source, a->truncated ? ", TRUNCATED (report covers the complete part)" : "",
		!a->truncated && !a->has_end ? ", no end record (process did not shut down cleanly)" : "");
	if (a->reorder_forced || a->late_records)
		fprintf(f, "note: %" PRIu64 " records arrived out of time order beyond the reorder window\n",
			a->late_records);
}

/* ------------------------------------------------------------ JSON */
static void json_where(const struct analysis *a, FILE *f, uint64_t cp, uint64_t nat)
{
	struct an_frame fr[MAX_FRAMES];
	size_t n = an_callpath_frames(a, cp, fr, MAX_FRAMES);
	fprintf(f, "{\"python\":[");
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"file\":", i ? "," : "");
		json_str(f, fr[i].file, fr[i].file_len);
		fprintf(f, ",\"line\":%" PRIu64 ",\"function\":", fr[i].line);
		json_str(f, fr[i].function, fr[i].function_len);
		fputc('}', f);
	}
	fprintf(f, "],\"native\":[");
	struct an_native_frame nf[MAX_FRAMES];
	size_t nn = an_native_frames(a, nat, nf, MAX_FRAMES);
	for (size_t i = 0; i < nn; i++) {
		fprintf(f, "%s{\"pc\":\"0x%" PRIx64 "\"", i ? "," : "", nf[i].pc);
		if (nf[i].module) {
			fprintf(f, ",\"module\":");
			json_str(f, nf[i].module, nf[i].module_len);
			fprintf(f, ",\"offset\":\"0x%" PRIx64 "\"", nf[i].offset);
		}
		fputc('}', f);
	}
	fprintf(f, "]}");
}

static void json_causes(FILE *f, const char *name, const uint64_t *by_cause)
{
	fprintf(f, ",\"%s\":{", name);
	for (int c = 1; c < AN_CAUSE_N; c++)
		fprintf(f, "%s\"%s_ns\":%" PRIu64, c > 1 ? "," : "", an_cause_name(c), by_cause[c]);
	fputc('}', f);
}

static void json_idle_breakdown(const struct analysis *a, FILE *f)
{
	const struct an_idle_breakdown *ib = &a->idle;
	fprintf(f, ",\n\"idle_breakdown\":{\"idle_ns\":%" PRIu64, ib->idle_ns);
	for (int c = 1; c < AN_CAUSE_N; c++)
		fprintf(f, ",\"%s_ns\":%" PRIu64, an_cause_name(c), ib->by_cause[c]);
	fprintf(f, ",\"placed_ns\":%" PRIu64 ",\"unplaced_ns\":%" PRIu64 ",\"no_line_ns\":%" PRIu64, ib->placed_ns,
		ib->idle_ns > ib->placed_ns ? ib->idle_ns - ib->placed_ns : 0, ib->no_line_ns);
	fprintf(f, ",\"harness_ns\":%" PRIu64 ",\"short_gaps_ns\":%" PRIu64 ",\"leading_edge_ns\":%" PRIu64
		   ",\"trailing_edge_ns\":%" PRIu64 ",\"hta\":{\"host_wait_ns\":%" PRIu64 ",\"queued_ns\":%" PRIu64 "}"
		   ",\"sites\":[",
		ib->harness_ns, ib->short_ns, ib->leading_ns, ib->trailing_ns, ib->hta_host_wait_ns, ib->hta_queued_ns);
	for (size_t i = 0; i < a->idle_parts.n && i < 50; i++) {
		const struct an_finding *p = VEC_AT(&a->idle_parts, struct an_finding, i);
		fprintf(f, "%s\n {\"cause\":\"%s\",\"edge\":%s,\"total_ns\":%" PRIu64 ",\"pieces\":%" PRIu64
			   ",\"device\":%" PRIu64 ",\"harness\":%s,\"where\":",
			i ? "," : "", an_cause_name(p->cause),
			p->edge == AN_EDGE_LEADING ? "\"leading\"" : p->edge == AN_EDGE_TRAILING ? "\"trailing\"" : "null",
			p->total_ns, p->count, p->device, p->harness ? "true" : "false");
		json_where(a, f, p->callpath, p->native);
		fputc('}', f);
	}
	fprintf(f, "]}");
}

static void json_finding(const struct analysis *a, FILE *f, const struct an_finding *x, int first)
{
	fprintf(f, "%s\n {\"kind\":\"%s\",", first ? "" : ",", an_finding_name(x->kind));
	if (x->kind == AN_F_IDLE_GAP)
		fprintf(f, "\"cause\":\"%s\",", an_cause_name(x->cause));
	fprintf(f, "\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"device\":%" PRIu64,
		x->count, x->total_ns, x->max_ns, x->device);
	uint64_t steps = window_steps(a);
	fprintf(f, ",\"stake_ns\":%" PRIu64, x->stake_ns);
	if (steps)
		fprintf(f, ",\"stake_per_step_ns\":%" PRIu64, x->stake_ns / steps);
	else
		fprintf(f, ",\"stake_per_step_ns\":null");
	fprintf(f, ",\"stake_share\":%.4f", a->total.window_ns ? (double)x->stake_ns / (double)a->total.window_ns : 0.0);
	if (x->kind == AN_F_SYNC_HOTSPOT)
		fprintf(f, ",\"idle_after_ns\":%" PRIu64, x->idle_ns);
	switch (x->kind) {
	case AN_F_KERNEL_BURST:
		fprintf(f, ",\"bursts\":%" PRIu64 ",\"idle_ns\":%" PRIu64, x->groups, x->idle_ns);
		break;
	case AN_F_SCALAR_COPY:
		fprintf(f, ",\"bytes\":%" PRIu64 ",\"followed_by_sync\":%" PRIu64 ",\"pageable\":%" PRIu64, x->bytes,
			x->flagged, x->pageable);
		break;
	case AN_F_PING_PONG:
		fprintf(f, ",\"bytes\":%" PRIu64, x->bytes);
		break;
	case AN_F_ALLOC_CHURN:
		fprintf(f, ",\"bytes\":%" PRIu64 ",\"steps_allocating\":%" PRIu64, x->bytes,
			a->iterations ? x->iters_allocating : 0);
		break;
	}
	if (x->kind == AN_F_IDLE_GAP)
		json_causes(f, "causes", x->cause_ns);
	fprintf(f, ",\"where\":");
	json_where(a, f, x->callpath, x->native);
	struct an_frame fr[MAX_FRAMES];
	size_t nl = library_frames(a, x, fr, MAX_FRAMES);
	fprintf(f, ",\"library\":[");
	for (size_t i = 0; i < nl; i++) {
		fprintf(f, "%s{\"file\":", i ? "," : "");
		json_str(f, fr[i].file, fr[i].file_len);
		fprintf(f, ",\"line\":%" PRIu64 ",\"function\":", fr[i].line);
		json_str(f, fr[i].function, fr[i].function_len);
		fputc('}', f);
	}
	fputc(']', f);
	if (x->kind == AN_F_IDLE_GAP && x->context_callpath) {
		fprintf(f, ",\"context\":");
		json_where(a, f, x->context_callpath, 0);
	}
	if (x->kind == AN_F_IDLE_GAP && x->context_callpath)
		fprintf(f, ",\"autograd_engine\":%s,\"engine_gaps\":%" PRIu64, an_finding_is_engine(x) ? "true" : "false",
			x->engine_gaps);
	uint64_t kname = an_finding_is_engine(x) ? x->engine_kernel : x->kernel_name;
	if (x->kind == AN_F_IDLE_GAP && kname) {
		size_t kl = 0;
		const char *k = an_string(a, kname, &kl);
		fprintf(f, ",\"kernel\":");
		json_str(f, k ? k : "", k ? kl : 0);
	}
	if (x->kind == AN_F_IDLE_GAP && x->has_launch_tid) {
		size_t tl = 0;
		const char *name = thread_name(a, x->launch_tid, &tl);
		fprintf(f, ",\"resumed_by_thread\":{\"tid\":%" PRIu32 ",\"main\":%s,\"name\":", x->launch_tid,
			a->has_process && x->launch_tid == a->process.pid ? "true" : "false");
		if (name)
			json_str(f, name, tl);
		else
			fputs("null", f);
		fputc('}', f);
	}
	if (x->kind == AN_F_IDLE_GAP && x->backward_wait_ns)
		fprintf(f, ",\"backward_wait_ns\":%" PRIu64, x->backward_wait_ns);
	if (x->kind == AN_F_KERNEL_BURST)
		fprintf(f, ",\"backward\":%s", x->backward_burst ? "true" : "false");
	if (x->kind == AN_F_IDLE_GAP && x->copy_ns) {
		fprintf(f, ",\"in_copy_ns\":%" PRIu64 ",\"copy\":", x->copy_ns);
		const char *l = an_copy_label(x->copy_bits);
		json_str(f, l, strlen(l));
	}
	if (x->kind == AN_F_IDLE_GAP && x->no_call_ns)
		fprintf(f, ",\"no_gpu_call_ns\":%" PRIu64, x->no_call_ns);
	if (x->kind == AN_F_IDLE_GAP && x->other_callpath && x->other_callpath != x->callpath) {
		fprintf(f, ",\"resumed_by\":");
		json_where(a, f, x->other_callpath, 0);
	}
	fprintf(f, ",\"suggestion\":");
	const char *sug = an_suggestion(a, x);
	json_str(f, sug, strlen(sug));
	fputc('}', f);
}

int an_report_json(const struct analysis *a, FILE *f)
{
	int gpu = an_has_gpu(a);
	unsigned ndev = active_devices(a);
	uint64_t cap = a->total.window_ns * (ndev ? ndev : 1);
	fprintf(f, "{\"schema\":\"tbprof-report\",\"schema_version\":1,\"trace_file\":");
	json_str(f, a->path, strlen(a->path));
	fprintf(f, ",\n\"trace\":{\"events\":%" PRIu64 ",\"records\":%" PRIu64 ",\"lost_events\":%" PRIu64
		   ",\"truncated\":%s,\"clean_end\":%s,\"gpu_timeline\":%s,\"api_only\":%s,\"out_of_order\":%" PRIu64
		   ",\"window_remeasured\":%s,\"lost_by_source\":{",
		a->events, a->records, a->lost ? a->lost : a->end_lost, a->truncated ? "true" : "false",
		a->has_end ? "true" : "false", gpu ? "true" : "false",
		!gpu && (a->n_launch + a->n_memcpy + a->n_memset) ? "true" : "false", a->late_records,
		a->window_second_pass ? "true" : "false");
	for (unsigned s = 0, n = 0; s < 8; s++)
		if (a->lost_by_source[s])
			fprintf(f, "%s\"%s\":%" PRIu64, n++ ? "," : "", s ? tr_lost_source_name(s) : "other",
				a->lost_by_source[s]);
	fprintf(f, "},\"gpu_records\":%" PRIu64 ",\"gpu_records_joined\":%" PRIu64 ",\"joined_pct\":",
		gpu_work_records(a), gpu_work_records(a) - a->unmatched_gpu);
	if (gpu_work_records(a))
		fprintf(f, "%.2f", joined_pct(a));
	else
		fputs("null", f);
	size_t note_len = 0;
	const char *note = join_note(a, &note_len);
	fprintf(f, ",\"join_note\":");
	if (note)
		json_str(f, note, note_len);
	else
		fputs("null", f);
	fprintf(f, "}");
	fprintf(f, ",\n\"window\":{\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"source\":\"%s\",\"iterations\":%" PRIu64
		   ",\"warmup_excluded\":%s}",
		a->markers_used ? a->win_begin : a->first_ts, a->markers_used ? a->win_end : a->last_ts,
		!a->markers_used ? "events" : a->steps.source == AN_STEPS_DETECTED ? "detected_steps" : "markers",
		a->iterations, a->markers_used && a->warmup_seen ? "true" : "false");
	if (a->steps.source) {
		fprintf(f, ",\n\"steps\":{\"count\":%" PRIu64 ",\"source\":\"%s\",\"warmup\":%" PRIu64
			   ",\"median_ns\":%" PRIu64 ",\"loop\":",
			a->steps.count, an_steps_source_name(a->steps.source), a->steps.warmup, a->steps.median_ns);
		if (a->steps.loop)
			json_where(a, f, a->steps.loop, 0);
		else
			fputs("null", f);
		fprintf(f, ",\"unit_kind\":\"%s\",\"unit\":", an_step_unit_name(a->steps.unit_kind));
		if (a->steps.unit)
			json_where(a, f, a->steps.unit, 0);
		else
			fputs("null", f);
		fputc('}', f);
	} else {
		fprintf(f, ",\n\"steps\":null");
	}
	if (a->steps.none) {
		fputs(",\n\"steps_none\":", f);
		json_str(f, a->steps.none, strlen(a->steps.none));
	}
	if (gpu || !(a->n_launch + a->n_memcpy + a->n_memset)) {
		uint64_t idle = gpu ? a->total.idle_ns : a->total.window_ns;
		fprintf(f, ",\n\"breakdown\":{\"window_ns\":%" PRIu64 ",\"devices\":%u,\"gpu_busy_ns\":%" PRIu64
			   ",\"gpu_active_ns\":%" PRIu64 ",\"data_movement_ns\":%" PRIu64 ",\"gpu_idle_ns\":%" PRIu64
			   ",\"gpu_active_pct\":%.3f,\"data_movement_pct\":%.3f,\"gpu_idle_pct\":%.3f"
			   ",\"h2d_ns\":%" PRIu64 ",\"d2h_ns\":%" PRIu64 ",\"d2d_ns\":%" PRIu64 ",\"peer_ns\":%" PRIu64
			   ",\"kernel_ns\":%" PRIu64 ",\"memset_ns\":%" PRIu64 "}",
			a->total.window_ns, ndev, a->total.busy_ns, a->total.active_ns, a->total.dm_ns, idle,
			pct(a->total.active_ns, cap), pct(a->total.dm_ns, cap), gpu ? pct(idle, cap) : 100.0 * !!cap,
			a->total.ck_ns[TBP_COPY_H2D], a->total.ck_ns[TBP_COPY_D2H], a->total.ck_ns[TBP_COPY_D2D],
			a->total.ck_ns[TBP_COPY_PEER], a->total.kernel_ns, a->total.memset_ns);
	} else {
		fprintf(f, ",\n\"breakdown\":{\"window_ns\":%" PRIu64 ",\"devices\":0,\"gpu_busy_ns\":null,"
			   "\"gpu_active_ns\":null,\"data_movement_ns\":null,\"gpu_idle_ns\":null,\"gpu_active_pct\":null,"
			   "\"data_movement_pct\":null,\"gpu_idle_pct\":null}",
			a->total.window_ns);
	}
	if (gpu)
		json_idle_breakdown(a, f);
	fprintf(f, ",\n\"devices\":[");
	int first = 1;
	struct stream_ref *refs = streams_by_device(a);
	for (size_t i = 0; i < a->devices.n; i++) {
		const struct an_device *d = VEC_AT(&a->devices, struct an_device, i);
		struct an_breakdown b;
		an_device_breakdown(a, d, &b);
		fprintf(f, "%s\n {\"device\":%" PRIu64 ",\"name\":", first ? "" : ",", d->id);
		first = 0;
		size_t nl = 0;
		const char *name = an_string(a, d->name, &nl);
		json_str(f, name, nl);
		fprintf(f, ",\"window_ns\":%" PRIu64 ",\"gpu_busy_ns\":%" PRIu64 ",\"gpu_active_ns\":%" PRIu64
			   ",\"data_movement_ns\":%" PRIu64 ",\"gpu_idle_ns\":%" PRIu64 ",\"gpu_active_pct\":%.3f"
			   ",\"data_movement_pct\":%.3f,\"gpu_idle_pct\":%.3f,\"h2d_ns\":%" PRIu64 ",\"d2h_ns\":%" PRIu64
			   ",\"d2d_ns\":%" PRIu64 ",\"peer_ns\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"memcpy\":%" PRIu64
			   ",\"memset\":%" PRIu64 ",\"idle_gaps\":%" PRIu64 ",\"idle_gap_ns\":%" PRIu64,
			b.window_ns, b.busy_ns, b.active_ns, b.dm_ns, b.idle_ns, pct(b.active_ns, b.window_ns),
			pct(b.dm_ns, b.window_ns), pct(b.idle_ns, b.window_ns), b.ck_ns[TBP_COPY_H2D],
			b.ck_ns[TBP_COPY_D2H], b.ck_ns[TBP_COPY_D2D], b.ck_ns[TBP_COPY_PEER], d->kernels, d->copies,
			d->sets, d->gaps, d->gap_ns);
		fprintf(f, ",\"memory\":{\"peak_bytes\":%" PRIu64 ",\"allocations\":%" PRIu64 ",\"frees\":%" PRIu64
			   ",\"allocated_bytes\":%" PRIu64 "},\"streams\":[",
			d->mem_peak, d->allocs, d->frees, d->alloc_bytes);
		int sf = 1;
		size_t lo, hi;
		device_streams(a, refs, d->id, &lo, &hi);
		for (size_t j = lo; j < hi; j++) {
			const struct an_stream *s = stream_at(a, refs, j);
			if (s->device != d->id)
				continue;
			uint64_t busy, dm;
			an_stream_breakdown(a, s, &busy, &dm);
			fprintf(f, "%s{\"stream\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"active_ns\":%" PRIu64
				   ",\"data_movement_ns\":%" PRIu64 ",\"idle_ns\":%" PRIu64 ",\"kernels\":%" PRIu64
				   ",\"memcpy\":%" PRIu64 ",\"memset\":%" PRIu64 ",\"hta\":{\"host_wait_ns\":%" PRIu64
				   ",\"queued_ns\":%" PRIu64 "}}",
				sf ? "" : ",", s->stream, busy, busy > dm ? busy - dm : 0, dm, b.window_ns > busy ? b.window_ns - busy : 0,
				s->kernels, s->copies, s->sets, s->hta_gap[1], s->hta_gap[0]);
			sf = 0;
		}
		fprintf(f, "]}");
	}
	free(refs);
	fprintf(f, "],\n\"counts\":{\"kernels\":%" PRIu64 ",\"memcpy\":%" PRIu64 ",\"memset\":%" PRIu64
		   ",\"malloc\":%" PRIu64 ",\"free\":%" PRIu64 ",\"sync\":%" PRIu64 ",\"api_calls\":%" PRIu64
		   ",\"gpu_kernels\":%" PRIu64 ",\"gpu_memcpy\":%" PRIu64 ",\"gpu_memset\":%" PRIu64
		   ",\"python_spans\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"graph_launches\":%" PRIu64
		   ",\"graph_launch_steps\":%" PRIu64 "}",
		a->n_launch - a->n_graph_launch, a->n_memcpy, a->n_memset, a->n_malloc, a->n_free, a->n_sync, a->n_api, a->n_gpu_kernel,
		a->n_gpu_memcpy, a->n_gpu_memset, a->n_spans, a->n_errors, a->n_graph_launch, a->graph_launch_iters);
	fprintf(f, ",\n\"findings\":[");
	for (size_t i = 0; i < a->findings.n; i++)
		json_finding(a, f, VEC_AT(&a->findings, struct an_finding, i), i == 0);
	fprintf(f, "],\n\"harness\":[");
	for (size_t i = 0; i < a->harness.n; i++)
		json_finding(a, f, VEC_AT(&a->harness, struct an_finding, i), i == 0);
	fprintf(f, "],\n\"model_step\":[");
	for (size_t i = 0; i < a->model_step.n; i++)
		json_finding(a, f, VEC_AT(&a->model_step, struct an_finding, i), i == 0);
	fprintf(f, "],\n\"kernels\":[");
	for (size_t i = 0; i < a->kernels.n && i < 100; i++) {
		const struct an_kernel_stat *k = VEC_AT(&a->kernels, struct an_kernel_stat, i);
		size_t nl = 0;
		const char *name = an_string(a, k->name, &nl);
		fprintf(f, "%s\n {\"name\":", i ? "," : "");
		json_str(f, name, nl);
		fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 "}", k->count, k->total_ns,
			k->max_ns);
	}
	struct host_outside out;
	fprintf(f, "],\n\"host_time_window\":");
	if (host_outside(a, &out))
		fprintf(f, "{\"scope\":\"window\",\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"window_ns\":%" PRIu64
			   ",\"before_ns\":%" PRIu64 ",\"after_ns\":%" PRIu64 ",\"imports_outside_ns\":%" PRIu64 "}",
			a->host_win.begin, a->host_win.end, a->host_win.end - a->host_win.begin, out.before_ns, out.after_ns,
			out.imports_ns);
	else
		fprintf(f, "{\"scope\":\"trace\"}");
	fprintf(f, ",\n\"host_time_by_python_path\":[");
	int win = a->host_win.on;
	for (size_t i = 0, shown = 0; i < a->spans.n && shown < 50; i++) {
		const struct an_span_stat *s = VEC_AT(&a->spans, struct an_span_stat, i);
		if (win && !s->win_count)
			continue;
		fprintf(f, "%s\n {\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64
			   ",\"trace_count\":%" PRIu64 ",\"trace_total_ns\":%" PRIu64 ",\"trace_self_ns\":%" PRIu64 ",\"where\":",
			shown++ ? "," : "", win ? s->win_count : s->count, win ? s->win_total_ns : s->total_ns,
			win ? s->win_self_ns : s->self_ns, s->count, s->total_ns, s->self_ns);
		json_where(a, f, s->callpath, 0);
		fputc('}', f);
	}
	fprintf(f, "],\n\"host_time_by_function\":[");
	struct host_row *rows;
	size_t nrows = host_rows(a, 0, &rows);
	for (size_t i = 0; i < nrows && i < 50; i++) {
		const struct host_row *r = &rows[i];
		fprintf(f, "%s\n {\"function\":", i ? "," : "");
		json_str(f, r->fr.function, r->fr.function_len);
		fprintf(f, ",\"file\":");
		json_str(f, r->fr.file, r->fr.file_len);
		fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64 ",\"paths\":%zu"
			   ",\"trace_count\":%" PRIu64 ",\"trace_total_ns\":%" PRIu64 ",\"trace_self_ns\":%" PRIu64
			   ",\"user\":%s}",
			r->count, r->total_ns, r->self_ns, r->paths, r->trace_count, r->trace_total_ns, r->trace_self_ns,
			an_frame_is_library(a, &r->fr) ? "false" : "true");
	}
	free(rows);
	fprintf(f, "],\n\"memory\":{\"not_freed_blocks\":%" PRIu64 ",\"not_freed_bytes\":%" PRIu64 "}}\n",
		a->mem_leak_count, a->mem_leak_bytes);
	return ferror(f) ? -1 : 0;
}
