/*
 * Step detection: the training (or inference) loop of a trace without the
 * runner's marks, from what the steps pass kept on its first pass: the work
 * (launches, copies, memsets, each with the GPU time of its records) and the
 * Python spans, in time order.  doc/findings.md, "Steps", states the rule.
 *
 * A step is the unit that holds the whole of the work.  Every item carries
 * the line of each of the user's frames on its call path; a context is one
 * function of the user's called from one place, and in a context's items,
 * in time order, each line of a loop's body is entered once per iteration
 * of that loop.  A candidate loop is a context and the line its iterations
 * start at (its head).
 *
 * With torch, the step is recognised by the calls made once per step: the
 * optimizer's step(), else backward(), else (inference) the model's
 * forward, each from one call site of the user's.  The loop is then a
 * context on the path of those calls, its iterations grouped so that each
 * step holds exactly one such call (micro-batches of gradient accumulation
 * group; an epoch, holding several, is never a step; an inner loop, holding
 * none, never either), the outermost such context.  Without them, the
 * outermost loop whose iterations hold most of the work.  Either way the
 * steps must hold at least half of the work from the first step on (the GPU
 * time; a CPU run's time in the program's innermost spans), else there are
 * none: a sliver of the run analysed as its steady state misleads more than
 * no steps.
 */
/* (as in an_passes.c: the items field by field, not packed in vector registers through the stack; -0.9 M) */
#pragma GCC optimize("no-tree-slp-vectorize")
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_pass_steps.h"
#include "an_steps_detect.h"
#include "an_ranges.h"
#include "cmd.h"

/* A line entered twice may be code before and after another (a single
 * step's forward and its optimizer step): a loop runs at least three
 * iterations (the warm-up step and two of the steady state). */
#define LOOP_MIN 3
#define PATH_FRAMES 16   /* user frames of one call path kept, the outermost ones */
/* Inner optimizer steps per outer one taken as one step's (WGAN: 5) */
#define UNIT_INNER_MAX 8
#define HEADS_TRIED 8    /* head lines tried per context, in the order first entered */

enum { UNIT_NONE = AN_UNIT_NONE, UNIT_OPTIMIZER = AN_UNIT_OPTIMIZER, UNIT_BACKWARD = AN_UNIT_BACKWARD,
       UNIT_FORWARD = AN_UNIT_FORWARD, UNIT_GRAPH = AN_UNIT_GRAPH };

/* A context's line is entered when its previous item was at another line,
 * or when the line calls again the function it ran first since it was
 * entered: a loop of one line (`for x in loader: model(x)`, a CPU run whose
 * only span per step is the forward; `crit(model(x), y)` enters at each
 * call of model) is entered once per call.  A call is a span whose caller
 * is the context's own frame.  What the call's thread does while it runs is
 * inside it, at the calling line, whatever its path says (it always says so
 * in a real trace; a trace written by hand may not). */
struct entry_state {
	uint32_t prev_line;  /* the context's latest item's line, UINT32_MAX: none yet */
	uint64_t fn;         /* the function the line ran first since it was entered (0: its own work) */
	uint64_t fn_callee;  /* and that function named to the module (callee_of; 0: unknown) */
	int called;          /* a call of fn was seen since */
	uint32_t call_line, call_tid;
	uint64_t call_end, call_fn, call_callee; /* the latest call from the context runs until then */
};
/* Whether the item (at *line of the context, running function `below`
 * under it, callee that function named to the module, 0 when unknown,
 * line_callee the line's first callee when it calls several modules, else
 * 0; call: it is a call of that function from the context's frame) enters
 * the line anew.  A running call overrides *line. */
static inline __attribute__((always_inline)) int enters(struct entry_state *e, const struct sd_item *it,
							uint32_t *line, uint64_t below, uint64_t callee,
							uint64_t line_callee, int call)
{
	if (!call && it->tid == e->call_tid && it->ts < e->call_end) {
		*line = e->call_line;
		below = e->call_fn;
		callee = e->call_callee;
	}
	if (call) {
		e->call_line = *line;
		e->call_tid = it->tid;
		e->call_end = it->end;
		e->call_fn = below;
		e->call_callee = callee;
	}
	if (*line != e->prev_line) {
		e->prev_line = *line;
		e->fn = below;
		e->fn_callee = callee;
		e->called = call;
		return 1;
	}
	/* Another module called through the same Module.__call__ is another
	 * function, when both are known (callee_of).  A line that calls several
	 * (line_callee: the one it calls first) is entered by that one only: a
	 * call too short to hold a span inside is no module known (CPU runs),
	 * and was the loss_fn of `loss_fn(model(x), y)` as often as not. */
	if (!call || below != e->fn)
		return 0;
	if (line_callee ? callee != line_callee : callee && e->fn_callee && callee != e->fn_callee)
		return 0;
	if (!e->called) {
		e->called = 1;
		return 0;
	}
	return 1;
}

struct ctx {
	struct entry_state entry;
	uint32_t depth;      /* user frames above it */
	uint64_t w;          /* the work of its items */
	size_t first_item;   /* its first item's index */
	int seen;            /* first_item is set */
	int counted;         /* its lines' entries are counted (ctx_lines) */
	int unit_path;       /* on the call path of a unit call */
	uint64_t longest;    /* a CPU run's: the longest of its items (ctx_may_hold) */
	uint32_t first_line; /* lines of the context, in the order first entered: a list through loop_line.next */
	uint32_t last_line;
};
struct loop_line {
	uint32_t ctx;
	uint32_t next;       /* the context's next line in order of first entry, UINT32_MAX: last */
	uint64_t node;       /* a call path node at this line (the report's "loop") */
	uint32_t lineno;     /* its number in the source file */
	uint64_t entries;    /* times the line was entered anew (enters) */
	uint64_t first_callee; /* the first function it was seen calling, named to the module (callee_of) */
	uint8_t many_callees;  /* it was seen calling others too */
	uint8_t short_entry; /* entered by a span near the tracer's threshold (ctx_lines) */
	uint8_t work;        /* launches, copies, ... at this line: entered whatever its spans' lengths */
	uint32_t first_iter; /* evaluation scratch: the first iteration it was entered in */
	/* iterations() scratch, of the head tried: the iteration it was last
	 * entered in + 1 (0: none yet), its entries there (counted to 2), and the
	 * iterations it was entered in once, and more than once (head_missed) */
	uint32_t iter_seen, iter_entries, iters_once, iters_more;
	uint32_t call_stamp; /* steps_end scratch: a host call was made here before the last iteration */
};
struct path_info {
	uint32_t n;                     /* user frames kept, outermost first */
	uint32_t ctx[PATH_FRAMES], line[PATH_FRAMES];
	uint64_t below[PATH_FRAMES];    /* the function of the frame under each (0: the leaf) */
	uint64_t callee[PATH_FRAMES];   /* the function called under each, named to the module (callee_of) */
	uint32_t module_call;           /* bit k: frame k calls a module (Module.__call__'s plumbing under it) */
	uint32_t caller_ctx;            /* a span's: the context of its caller's frame, UINT32_MAX: a library's */
	int leaf_user;                  /* the leaf frame is the user's (its context is ctx[n - 1]) */
	int complete;                   /* not cut at the tracer's depth */
	int distributed;                /* inside torch.distributed (or DDP's set-up): waits on other ranks */
	uint8_t unit_kind;              /* outermost unit call on the path, UNIT_NONE: none */
	uint64_t unit_site;             /* the user's line that calls it */
};
struct unit_call {
	uint64_t ts, end;
	uint64_t site;
	uint8_t kind;
	int work;      /* it holds work (launches): seen whatever its length */
};

/* A line of the loop's context entered in an iteration (iterations(), for
 * group_by_units: which iterations run the loop's body). */
struct iter_line {
	uint32_t iter, line;
	/* the head line's: its items in the iteration under the function it
	 * was entered by, and their work; under another function (whether it
	 * ran one), and whether it ran torch's forward, backward or optimizer
	 * step (a step's work) */
	uint16_t other, unit;
	uint32_t items;
	uint64_t w;
};

struct heavy_item {
	uint64_t w;
	size_t item;
	uint64_t sum; /* the work of the items before it in scan.heavy */
};

#define PATH_CACHE 4096 /* slots of scan.path_cache */
struct path_slot {
	uint64_t cp1; /* the call path + 1 (0: empty) */
	uint32_t path;
};

/* One kind of item (span or not) of one call path, index sd_item.var: what
 * is read of its frames at each item, made once. */
struct pvar {
	uint64_t w;           /* the work of its items */
	size_t first;         /* its first item's index */
	size_t count;         /* its items */
	uint32_t nf;          /* frames_of */
	uint32_t callee_todo; /* frames (bit k) whose callee lines_count notes at the next item */
	uint8_t every;        /* every item notes callees (lines_count) */
	uint8_t unit_kind, complete; /* its path's (unit_track) */
	uint64_t unit_site;
	uint64_t longest;     /* a CPU run's: the longest of its items (lines_count) */
	uint8_t pad_[8];      /* (to 64 bytes: the walks index it by a shift, not by three instructions) */
};
/* vline[]: the item is not in the context; neither, and it is the user's
 * code outside it (ivar.outside); it is a call from the context's frame
 * (the line: ivar.line).  Else the line, the walks' common case.  None is
 * UINT32_MAX, entry_state's "no line yet". */
enum { VLINE_NONE = UINT32_MAX - 1, VLINE_OUTSIDE = UINT32_MAX - 2, VLINE_CALL = UINT32_MAX - 3 };
struct ivar {               /* its frame in the context the walk is of (ivars_for) */
	uint64_t below, callee, line_callee;
	uint32_t line;
	uint8_t in;           /* it has a frame in the context (line_in) */
	uint8_t call;         /* a call from it (call_from) */
	uint8_t outside;      /* else, the user's code outside it (a complete path of user frames) */
};

struct scan {
	struct pvar *pvars;            /* lines_count's, 2 per path: sd_item.var */
	struct ivar *ivars;            /* ivars_for()'s, the same */
	uint32_t *vline;               /* the same: its line there, or VLINE_* (ivars_for) */
	const struct analysis *a;
	struct path_slot *path_cache;  /* path_of's, PATH_CACHE slots */
	struct sd_item *items;
	size_t n;
	struct vec ctxs, lines, paths; /* struct ctx, loop_line, path_info */
	struct u64map ctx_idx, line_idx, path_idx;
	struct vec units;              /* struct unit_call of the kind and site chosen, time order */
	struct vec unit_calls;         /* struct unit_call: every unit call, time order (lines_count's walk) */
	uint64_t total;                /* the work (items_build) */
	uint64_t *after;               /* after[i]: the work of the items before i (work_from) */
	uint64_t work_sum;             /* of all items */
	int cpu;                       /* no work items: a CPU run, whose spans hold the work */
	struct sd_item *calls;         /* the host's other calls (syncs ...), time order: no work */
	size_t ncalls;
	uint32_t stamp;                /* steps_end's, for loop_line.call_stamp */
	uint64_t shortest_span;        /* of the items (items_build; UINT64_MAX: no span) */
	/* A CPU run's items that hold work, the most first, and one past them
	 * (w 0, sum: the work of all; lines_count): those a wait may have
	 * lengthened past a cap (work_capped) */
	struct heavy_item *heavy;
	size_t nheavy;
	struct vec iter_lines;         /* iterations()'s: struct iter_line, each line's first entry in each iteration */
	/* ctx_lines' walk of context log_ctx (UINT32_MAX: none), for
	 * iterations(): struct walk_event, its items that are not at the line
	 * last entered (entries, calls, the user's code outside the context) */
	struct vec log;
	uint32_t log_ctx;
};
/* An item that entered a line, called, or is the user's code outside the
 * context, and the latest end of the items after it up to the next event
 * that are at the line last entered (ctx_lines). */
struct walk_event {
	size_t item;
	uint64_t max_end;
};

/* ------------------------------------------------------------ frames */

static int function_has(const struct an_frame *f, const char *part)
{
	return memmem(f->function, f->function_len, part, strlen(part)) != NULL;
}

/* A frame's library check and its file as shown (an_frame_is_library,
 * an_display_path), made once per frame of a call path (path_make): each
 * frame is asked about several library files. */
struct frame_lib {
	const char *d;
	size_t dl;
	int lib;
};

static void frame_lib_make(const struct analysis *a, const struct an_frame *f, struct frame_lib *l)
{
	l->lib = an_frame_is_library(a, f);
	l->d = l->lib ? an_display_path(a, f->file, f->file_len, &l->dl) : NULL;
}

/* an_frame_in_library_file, from the frame's frame_lib. */
static int lib_file_is(const struct frame_lib *l, const char *rel)
{
	if (!l->lib)
		return 0;
	size_t rl = strlen(rel);
	return rel[rl - 1] == '/' ? l->dl > rl && !memcmp(l->d, rel, rl) : l->dl == rl && !memcmp(l->d, rel, rl);
}

/* What kind of once-per-step call a frame is: the optimizer's step (any
 * frame in torch.optim but zero_grad, the LR schedulers, and the optimizer's
 * making and its state_dict()/load_state_dict(), called by a checkpoint's
 * torch.save once an epoch; a GradScaler's
 * step(), called every step, stepping the optimizer or skipping it),
 * torch's backward(), a module's call (its forward), a CUDA graph's replay
 * (a step captured whole: its optimizer step and backward are in the graph). */
static int unit_frame(const struct an_frame *f, const struct frame_lib *l)
{
	if (lib_file_is(l, "torch/cuda/graphs.py") && an_frame_function_is(f, "CUDAGraph.replay"))
		return UNIT_GRAPH;
	if ((lib_file_is(l, "torch/amp/grad_scaler.py") ||
	     lib_file_is(l, "torch/cuda/amp/grad_scaler.py")) &&
	    an_frame_function_is(f, "GradScaler.step"))
		return UNIT_OPTIMIZER;
	if (lib_file_is(l, "torch/optim/"))
		return function_has(f, "zero_grad") || function_has(f, "state_dict") || function_has(f, "add_param_group") ||
				       function_has(f, "__init__") || lib_file_is(l, "torch/optim/lr_scheduler.py")
			       ? UNIT_NONE
			       : UNIT_OPTIMIZER;
	if ((lib_file_is(l, "torch/_tensor.py") && an_frame_function_is(f, "Tensor.backward")) ||
	    (lib_file_is(l, "torch/autograd/__init__.py") && an_frame_function_is(f, "backward")))
		return UNIT_BACKWARD;
	if (lib_file_is(l, "torch/nn/modules/module.py") &&
	    (an_frame_function_is(f, "Module._wrapped_call_impl") || an_frame_function_is(f, "Module._call_impl")))
		return UNIT_FORWARD;
	return UNIT_NONE;
}

/* The function a frame calls (fr[k - 1]: frames leaf first; 0 for the leaf),
 * named through Module.__call__'s plumbing (torch/nn/modules/module.py) down
 * to the module's forward: every module is called through the same
 * Module._wrapped_call_impl, and `loss_fn(model(x), y)` calls two functions,
 * not one twice (enters: the line was entered again at loss_fn, and each
 * iteration whose two calls were spans split in two, its forward a step of
 * its own: 22 steps for a loop of 20).  0: the leaf, or a path ending inside
 * the plumbing (a span of Module._call_impl: which module, unknown). */
static uint64_t callee_of(const struct an_frame *fr, const struct frame_lib *fl, size_t k)
{
	uint64_t h = 0;
	for (size_t j = k; j-- > 0;) {
		h = an_hash_combine(h, an_frame_function_hash(&fr[j]));
		if (!lib_file_is(&fl[j], "torch/nn/modules/module.py"))
			return h;
	}
	return 0; /* (a span of the plumbing itself: which module, unknown) */
}

/* The contexts and lines of call path cp's user frames, and its unit call;
 * made on first sight.  Returns its index, UINT32_MAX when out of memory. */
static uint32_t path_make(struct scan *sc, uint64_t cp);

/* path_make's answer for call path cp, through a direct-mapped cache: a
 * loop's items come from a few call paths, over and over. */
static inline uint32_t path_of(struct scan *sc, uint64_t cp)
{
	struct path_slot *slot = &sc->path_cache[cp & (PATH_CACHE - 1)];
	if (slot->cp1 == cp + 1)
		return slot->path;
	uint32_t p = path_make(sc, cp);
	if (p != UINT32_MAX)
		*slot = (struct path_slot){cp + 1, p};
	return p;
}

static uint32_t path_make(struct scan *sc, uint64_t cp)
{
	uint64_t *ix = u64map_get(&sc->path_idx, cp);
	if (ix)
		return (uint32_t)*ix;
	const struct analysis *a = sc->a;
	/* Frames leaf first, to be walked outermost first. */
	enum { MAX = 256 };
	uint64_t nodes[MAX];
	struct an_frame fr[MAX];
	struct frame_lib fl[MAX];
	size_t n = 0;
	for (uint64_t node = cp; node && n < MAX; node = an_callpath_parent(a, node)) {
		if (!an_callpath_frames(a, node, &fr[n], 1))
			break;
		frame_lib_make(a, &fr[n], &fl[n]);
		nodes[n++] = node;
	}
	struct path_info pi = {.caller_ctx = UINT32_MAX};
	/* Cut by the tracer's depth (32 frames by default) unless it reaches
	 * the module's top level. */
	pi.complete = n && n < MAX && (n < 32 || an_frame_function_is(&fr[n - 1], "<module>"));
	size_t users = 0;
	for (size_t i = 0; i < n; i++)
		users += !fl[i].lib;
	size_t skip = users > PATH_FRAMES ? users - PATH_FRAMES : 0; /* keep the outermost */
	uint32_t depth = 0;
	for (size_t k = n; k-- > 0;) {
		const struct an_frame *f = &fr[k];
		if (fl[k].lib) {
			if (lib_file_is(&fl[k], "torch/distributed/") || lib_file_is(&fl[k], "torch/nn/parallel/distributed.py"))
				pi.distributed = 1;
			int u = pi.unit_kind ? UNIT_NONE : unit_frame(f, &fl[k]);
			if (u) {
				pi.unit_kind = (uint8_t)u;
				pi.unit_site = an_user_callpath(a, nodes[k]);
			}
			continue;
		}
		if (depth++ < skip)
			continue;
		uint64_t parent = k + 1 < n ? nodes[k + 1] : 0;
		uint64_t key = an_hash_combine(an_frame_function_hash(f), parent) >> 1;
		int added;
		size_t cix = vec_keyed(&sc->ctxs, &sc->ctx_idx, key, &added);
		if (cix == SIZE_MAX)
			return UINT32_MAX;
		uint32_t ci = (uint32_t)cix;
		if (added) {
			struct ctx *x = VEC_AT(&sc->ctxs, struct ctx, ci);
			x->entry.prev_line = x->first_line = x->last_line = UINT32_MAX;
			x->depth = depth - 1;
		}
		size_t lix = vec_keyed(&sc->lines, &sc->line_idx, an_hash_combine(key, f->line) >> 1, &added);
		if (lix == SIZE_MAX)
			return UINT32_MAX;
		uint32_t li = (uint32_t)lix;
		if (added) {
			struct loop_line *y = VEC_AT(&sc->lines, struct loop_line, li);
			y->ctx = ci;
			y->node = nodes[k];
			y->lineno = f->line > UINT32_MAX ? UINT32_MAX : (uint32_t)f->line;
			y->next = UINT32_MAX;
		}
		if (k == 1)
			pi.caller_ctx = ci;
		if (k == 0)
			pi.leaf_user = 1;
		pi.below[pi.n] = k ? an_frame_function_hash(&fr[k - 1]) : 0;
		pi.callee[pi.n] = callee_of(fr, fl, k);
		if (k && lib_file_is(&fl[k - 1], "torch/nn/modules/module.py"))
			pi.module_call |= 1u << pi.n;
		pi.ctx[pi.n] = ci;
		pi.line[pi.n++] = li;
	}
	struct path_info *p = vec_push(&sc->paths);
	if (!p || u64map_put(&sc->path_idx, cp, sc->paths.n - 1))
		return UINT32_MAX;
	*p = pi;
	return (uint32_t)(sc->paths.n - 1);
}

static const struct path_info *path_at(const struct scan *sc, uint32_t i)
{
	return VEC_AT(&sc->paths, struct path_info, i);
}

/* User frames of an item's path that are lines of their context: a span's
 * leaf is the function called, not a line of its body (the call is a line
 * of its caller's). */
static uint32_t frames_of(const struct sd_item *it, const struct path_info *p)
{
	return sd_item_span(it) && p->leaf_user ? p->n - 1 : p->n;
}

/* The item's line in context ci (UINT32_MAX: not in it), and in *below
 * the function it runs under that frame. */
static uint32_t line_in(const struct sd_item *it, const struct path_info *p, uint32_t ci, uint64_t *below)
{
	for (uint32_t k = 0, n = frames_of(it, p); k < n; k++)
		if (p->ctx[k] == ci) {
			*below = p->below[k];
			return p->line[k];
		}
	return UINT32_MAX;
}

/* The function item `it` (of path p) calls under context ci's frame, named
 * to the module (callee_of); 0 when it is not in ci. */
static uint64_t callee_in(const struct sd_item *it, const struct path_info *p, uint32_t ci)
{
	for (uint32_t k = 0, n = frames_of(it, p); k < n; k++)
		if (p->ctx[k] == ci)
			return p->callee[k];
	return 0;
}

/* What item i, a span called from context ci's line whose own path ends in
 * Module.__call__'s plumbing (Module._wrapped_call_impl, for every module),
 * calls, named to the module (callee_of) as the first item starting inside
 * it names it.  0: unknown (nothing starts inside it; consecutive launches
 * of one call path are one item, which may have started in an earlier
 * call). */
static uint64_t call_callee(const struct scan *sc, size_t i, uint32_t ci)
{
	const struct sd_item *c = &sc->items[i];
	for (size_t j = i + 1, seen = 0; j < sc->n && sc->items[j].ts < c->end && seen < 64; j++) {
		const struct sd_item *it = &sc->items[j];
		if (it->tid != c->tid)
			continue;
		seen++;
		uint64_t callee = callee_in(it, path_at(sc, sd_item_path(it)), ci);
		if (callee)
			return callee;
	}
	return 0;
}

/* The module a line calls first when it calls several (enters), else 0. */
static uint64_t line_callee(const struct scan *sc, uint32_t line)
{
	const struct loop_line *l = VEC_AT(&sc->lines, struct loop_line, line);
	return l->many_callees ? l->first_callee : 0;
}

/* ------------------------------------------------------------ items */

static int item_cmp(const void *x, const void *y)
{
	const struct sd_item *a = x, *b = y;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	/* A span before the work inside it that starts at the same time. */
	return a->end > b->end ? -1 : a->end < b->end;
}

static int step_cmp(const void *x, const void *y)
{
	const struct an_step *a = x, *b = y;
	return a->begin < b->begin ? -1 : a->begin > b->begin;
}

/* In steps or spans in time order (struct an_step), the first whose end
 * (by_end) or begin is after t: a binary search. */
static size_t first_after(const struct vec *v, uint64_t t, int by_end)
{
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		const struct an_step *s = VEC_AT(v, struct an_step, m);
		if ((by_end ? s->end : s->begin) <= t)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* The time of [b, e) that no import covers (imports: merged, in order). */
static uint64_t outside_imports(const struct vec *imports, uint64_t b, uint64_t e)
{
	uint64_t t = e - b;
	for (size_t i = first_after(imports, b, 1); i < imports->n; i++) {
		const struct an_step *im = VEC_AT(imports, struct an_step, i);
		if (im->begin >= e)
			break;
		uint64_t ob = im->begin > b ? im->begin : b, oe = im->end < e ? im->end : e;
		t -= oe > ob ? oe - ob : 0;
	}
	return t;
}

static int span_tid_cmp(const void *x, const void *y)
{
	const struct sd_item *a = *(const struct sd_item *const *)x, *b = *(const struct sd_item *const *)y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return item_cmp(a, b);
}

/* A CPU run's work: the time in the innermost spans (calls no longer span
 * inside) of the program's code, less the imports inside them, and not in
 * torch.distributed, whose calls wait on the other ranks (a rendezvous can
 * take longer than a short loop).  Glue between calls under the tracer's
 * threshold is no span; an enclosing call (main) counts through the calls
 * inside it. */
static int cpu_work(struct scan *sc)
{
	struct vec *imports = &an_pass_state(sc->a, steps)->imports;
	if (imports->n > 1)
		qsort(imports->data, imports->n, sizeof(struct an_step), step_cmp);
	size_t merged = 0;
	for (size_t i = 0; i < imports->n; i++) {
		const struct an_step s = *VEC_AT(imports, struct an_step, i);
		struct an_step *last = merged ? VEC_AT(imports, struct an_step, merged - 1) : NULL;
		if (last && s.begin <= last->end) {
			if (s.end > last->end)
				last->end = s.end;
		} else {
			*VEC_AT(imports, struct an_step, merged++) = s;
		}
	}
	imports->n = merged;
	struct sd_item **by_thread = malloc((sc->n ? sc->n : 1) * sizeof *by_thread);
	if (!by_thread)
		return -1;
	for (size_t i = 0; i < sc->n; i++)
		by_thread[i] = &sc->items[i];
	qsort(by_thread, sc->n, sizeof *by_thread, span_tid_cmp);
	for (size_t i = 0; i < sc->n; i++) {
		struct sd_item *it = by_thread[i];
		const struct sd_item *next = i + 1 < sc->n ? by_thread[i + 1] : NULL;
		if (next && next->tid == it->tid && next->ts < it->end)
			continue; /* a span starts inside it */
		/* The program's calls: the interpreter's start (site) and exit
		 * (finalizers) have none of its frames; torch.distributed's
		 * (rendezvous, DDP's set-up, collectives) wait on other ranks. */
		const struct path_info *p = path_at(sc, sd_item_path(it));
		if (!p->n || p->distributed)
			continue;
		it->w = outside_imports(imports, it->ts, it->end);
		sc->total += it->w;
	}
	free(by_thread);
	return 0;
}

/* v: nw work items in start order (unless records came out of order), then
 * ns spans in end order; all into start order, as a stable sort of v would
 * put them (an_steps_detect.h). */
static int items_order(struct sd_item *v, size_t nw, size_t ns)
{
	int sorted = sd_items_unordered(v, nw) == nw;
	size_t need = ns > (sorted ? 0 : nw) ? ns : (sorted ? 0 : nw);
	if (!need)
		return 0;
	struct sd_item *tmp = malloc(need * sizeof *tmp);
	if (!tmp)
		return -1;
	if (!sorted)
		sd_items_sort(v, nw, tmp);
	if (ns) {
		sd_items_sort(v + nw, ns, tmp);
		memcpy(tmp, v + nw, ns * sizeof *tmp);
		sd_items_merge_into(v, nw, tmp, ns);
	}
	free(tmp);
	return 0;
}

/* Items from the steps pass's kept ones (v: its work or spans), `span` set
 * or not, into out; -1 when a call path cannot be made (out of memory). */
static int items_from(struct scan *sc, const struct vec *v, int span, int api_only, struct sd_item *out)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct step_item *s = VEC_AT(v, struct step_item, i);
		uint32_t p = path_of(sc, s->cp);
		if (p == UINT32_MAX)
			return -1;
		uint64_t w = span ? 0 : api_only ? (s->end > s->ts ? s->end - s->ts : 0) : s->gpu_ns;
		out[i] = (struct sd_item){.ts = s->ts, .end = s->end < s->ts ? s->ts : s->end, .w = w,
					  .var = 2 * p + (uint32_t)span, .tid = s->tid};
	}
	return 0;
}

/* The work (its items in start order, unless records came out of order)
 * and the spans (in end order) into sc->items in start order, as a stable
 * sort of the work followed by the spans would put them (an_steps_detect.h),
 * each with its share of the work: GPU time; an API-only trace's call time.
 * The spans are sorted and merged in as the work's items are made; call
 * paths are made in the order of the items kept, the work's then the
 * spans', as the contexts' order (find_loop's) depends on it.  1: the work
 * is out of order (nothing made but paths of the work's first items). */
static int items_merge(struct scan *sc, uint64_t *gpu_out, uint64_t *host_out)
{
	const struct steps_state *ss = an_pass_state(sc->a, steps);
	size_t nw = ss->work.n, ns = ss->spans.n;
	struct sd_item *sp = malloc((2 * ns + 1) * sizeof *sp);
	uint32_t *pos = malloc((ns + 1) * sizeof *pos);
	int rc = -1;
	if (!sp || !pos)
		goto out;
	uint64_t shortest = UINT64_MAX;
	for (size_t j = 0; j < ns; j++) { /* (w: its place in ss->spans, for its call path below) */
		const struct step_item *s = VEC_AT(&ss->spans, struct step_item, j);
		sp[j] = (struct sd_item){.ts = s->ts, .end = s->end < s->ts ? s->ts : s->end, .w = j, .tid = s->tid};
		if (sp[j].end - sp[j].ts < shortest)
			shortest = sp[j].end - sp[j].ts;
	}
	sd_items_sort(sp, ns, sp + ns);
	sp[ns] = (struct sd_item){.ts = UINT64_MAX, .end = 0}; /* after every item */
	struct sd_item *items = sc->items, *o = items;
	struct work_reader rd;
	work_reader_init(&rd, ss);
	uint64_t gpu = 0, host = 0, last_ts = 0, last_end = UINT64_MAX;
	const struct sd_item *spn = sp; /* the next span to merge in */
	uint64_t span_ts = spn->ts;
	for (const struct step_work *we = rd.w + nw; rd.w < we;) {
		struct step_item si, *s = &si;
		work_next(&rd, s);
		uint64_t ts = s->ts, end = s->end;
		if (ts < last_ts || (ts == last_ts && end > last_end)) {
			rc = 1;
			goto out;
		}
		last_ts = ts;
		last_end = end;
		/* (path_of's cache hit here: no test of its answer for UINT32_MAX) */
		const struct path_slot *slot = &sc->path_cache[s->cp & (PATH_CACHE - 1)];
		uint32_t p = slot->path;
		if (__builtin_expect(slot->cp1 != (uint64_t)s->cp + 1, 0) && (p = path_of(sc, s->cp)) == UINT32_MAX)
			goto out;
		uint64_t w = s->gpu_ns;
		gpu += w;
		if (__builtin_expect(span_ts <= ts, 0)) {
			for (; spn->ts < ts || (spn->ts == ts && spn->end > end); spn++) {
				pos[spn->w] = (uint32_t)(o - items);
				*o = *spn;
				o++->w = 0;
			}
			span_ts = spn->ts;
		}
		o->ts = ts; /* (field by field: the struct was built in vector registers) */
		o->end = end;
		o->w = w;
		o->var = 2 * p;
		o++->tid = s->tid;
	}
	size_t j = (size_t)(spn - sp), k = (size_t)(o - items);
	for (; j < ns; j++) {
		pos[sp[j].w] = (uint32_t)k;
		items[k] = sp[j];
		items[k++].w = 0;
	}
	if (!gpu) { /* (the calls' time is the work then) */
		work_reader_init(&rd, ss);
		for (size_t i = 0; i < nw; i++) {
			struct step_item s;
			work_next(&rd, &s);
			host += s.end > s.ts ? s.end - s.ts : 0;
		}
	}
	for (j = 0; j < ns; j++) {
		uint32_t p = path_of(sc, VEC_AT(&ss->spans, struct step_item, j)->cp);
		if (p == UINT32_MAX)
			goto out;
		items[pos[j]].var = 2 * p + 1;
	}
	if (!gpu && nw) /* API only: the calls' time is the work */
		for (size_t i = 0; i < k; i++)
			if (!sd_item_span(&items[i]))
				items[i].w = items[i].end - items[i].ts;
	sc->n = k;
	sc->shortest_span = shortest;
	*gpu_out = gpu;
	*host_out = host;
	rc = 0;
out:
	free(sp);
	free(pos);
	return rc;
}

/* The work and the spans in time order, each with its share of the work:
 * GPU time; an API-only trace's call time; a CPU run's (no work at all)
 * time in its innermost spans (cpu_work). */
static int items_build(struct scan *sc)
{
	const struct analysis *a = sc->a;
	const struct steps_state *ss = an_pass_state(a, steps);
	size_t n = ss->work.n + ss->spans.n;
	if (n >= UINT32_MAX || !(sc->items = malloc((n ? n : 1) * sizeof *sc->items)))
		return -1;
	an_mem_huge(sc->items, n * sizeof *sc->items);
	uint64_t gpu = 0, host = 0;
	sc->cpu = !ss->work.n;
	int rc = sc->cpu ? 1 : items_merge(sc, &gpu, &host);
	if (rc < 0)
		return -1;
	if (rc) { /* a CPU run (its spans' work, cpu_work), or the work out of order */
		struct vec work;
		if (steps_work_items(ss, &work))
			return -1;
		for (size_t i = 0; i < work.n; i++) {
			const struct step_item *s = VEC_AT(&work, struct step_item, i);
			gpu += s->gpu_ns;
			host += s->end > s->ts ? s->end - s->ts : 0;
		}
		int api_only = !gpu && work.n;
		rc = items_from(sc, &work, 0, api_only, sc->items);
		vec_free(&work);
		if (rc || items_from(sc, &ss->spans, 1, api_only, sc->items + ss->work.n))
			return -1;
		sc->n = n;
		if (sc->cpu && cpu_work(sc))
			return -1;
		if (items_order(sc->items, ss->work.n, sc->n - ss->work.n))
			return -1;
		sc->shortest_span = UINT64_MAX;
		for (size_t i = 0; i < sc->n; i++)
			if (sd_item_span(&sc->items[i]) && sc->items[i].end - sc->items[i].ts < sc->shortest_span)
				sc->shortest_span = sc->items[i].end - sc->items[i].ts;
	}
	int api_only = !gpu && ss->work.n;
	if (!(sc->calls = malloc((ss->calls.n ? ss->calls.n : 1) * sizeof *sc->calls)))
		return -1;
	for (size_t i = 0; i < ss->calls.n; i++) {
		const struct step_item *s = VEC_AT(&ss->calls, struct step_item, i);
		uint32_t p = path_of(sc, s->cp);
		if (p == UINT32_MAX)
			return -1;
		sc->calls[sc->ncalls++] = (struct sd_item){.ts = s->ts, .end = s->end < s->ts ? s->ts : s->end, .var = 2 * p,
							.tid = s->tid};
	}
	if (items_order(sc->calls, sc->ncalls, 0))
		return -1;
	if (!sc->cpu)
		sc->total = api_only ? host : gpu;
	return 0;
}

/* The work of items i and later. */
static inline uint64_t work_from(const struct scan *sc, size_t i)
{
	return sc->work_sum - sc->after[i];
}

/* A CPU run's work is the time in its innermost spans, and on a loaded
 * machine a call's span holds the time its thread waited: descheduled, or
 * on a lock another thread holds (IPython's history store, after a notebook
 * cell's loop of 12 steps taking 19 ms in all, waited 21 ms behind its
 * saving thread's sqlite write with two CPU hogs running, and the loop held
 * less than half of the work from its start on: no loop, or the cells for
 * steps).  Such a wait is no work, and nothing in a span tells it from
 * work; a call that is not the loop's counts at most `cap` (as long as the
 * loop's own longest call, or step): the work of items from index `first`
 * on, those `theirs` does not claim counted so.  theirs(sc, i, arg): item i
 * is the loop's. */
static uint64_t work_capped(const struct scan *sc, size_t first, uint64_t cap,
			    int (*theirs)(const struct scan *, size_t, const void *), const void *arg)
{
	uint64_t w = work_from(sc, first);
	for (size_t k = 0; k < sc->nheavy && sc->heavy[k].w > cap; k++) {
		size_t i = sc->heavy[k].item;
		if (i >= first && !theirs(sc, i, arg))
			w -= sc->heavy[k].w - cap;
	}
	return w;
}

/* The most work_capped(first, cap) can take off work_from(first): the
 * excess over cap of every item, the loop's or not. */
static uint64_t capped_at_most(const struct scan *sc, uint64_t cap)
{
	size_t lo = 0, hi = sc->nheavy;
	while (lo < hi) { /* the first item of work cap or less */
		size_t m = lo + (hi - lo) / 2;
		if (sc->heavy[m].w > cap)
			lo = m + 1;
		else
			hi = m;
	}
	return sc->heavy[lo].sum - lo * cap;
}

/* Item i is in context *arg (work_capped). */
static int in_ctx(const struct scan *sc, size_t i, const void *arg)
{
	uint64_t below;
	const struct sd_item *it = &sc->items[i];
	return line_in(it, path_at(sc, sd_item_path(it)), *(const uint32_t *)arg, &below) != UINT32_MAX;
}

/* A loop whose iterations may hold most of the work from its first step
 * on: the context's own work does, from its first item on (a CPU run's
 * calls outside it counted at most as long as its longest item: work_capped). */
static int ctx_may_hold(const struct scan *sc, uint32_t ci)
{
	const struct ctx *c = VEC_AT(&sc->ctxs, struct ctx, ci);
	if (!c->w)
		return 0;
	uint64_t from = work_from(sc, c->first_item);
	if (2 * c->w >= from || !sc->cpu)
		return 2 * c->w >= from;
	/* (most contexts, a helper's few calls, are far from it: no walk) */
	uint64_t most = capped_at_most(sc, c->longest);
	if (most < from && 2 * c->w < from - most)
		return 0;
	return 2 * c->w >= work_capped(sc, c->first_item, c->longest, in_ctx, &ci);
}

/* The item is a call from context ci's frame (enters). */
static int call_from(const struct sd_item *it, const struct path_info *p, uint32_t ci)
{
	return sd_item_span(it) && p->caller_ctx == ci;
}

/* sc->ivars for context ci: each kind of item's frame there. */
static const struct ivar *ivars_for(struct scan *sc, uint32_t ci)
{
	struct ivar *ivs = sc->ivars;
	for (size_t v = 0; v < 2 * sc->paths.n; v++) {
		const struct path_info *p = path_at(sc, (uint32_t)(v / 2));
		struct sd_item probe = {.var = (uint32_t)v};
		uint64_t below = 0;
		uint32_t line = line_in(&probe, p, ci, &below);
		ivs[v] = (struct ivar){.in = line != UINT32_MAX, .outside = p->n && p->complete};
		if (line == UINT32_MAX) {
			sc->vline[v] = ivs[v].outside ? VLINE_OUTSIDE : VLINE_NONE;
			continue;
		}
		ivs[v].line = line;
		ivs[v].below = below;
		ivs[v].callee = callee_in(&probe, p, ci);
		ivs[v].line_callee = line_callee(sc, line);
		ivs[v].call = (uint8_t)call_from(&probe, p, ci);
		sc->vline[v] = ivs[v].call ? VLINE_CALL : line;
	}
	return ivs;
}

/* Item i of context ci's, at ivar iv there: the line it enters, if any
 * (ctx_lines). */
static inline __attribute__((always_inline)) void ctx_line_item(struct scan *sc, uint32_t ci, struct ctx *c,
								struct entry_state *e, size_t i, const struct ivar *iv)
{
	struct loop_line *lines = sc->lines.data;
	const struct sd_item *it = &sc->items[i];
	uint32_t line = iv->line;
	uint64_t callee = iv->callee;
	if (!callee && iv->call)
		callee = call_callee(sc, i, ci);
	int entered = enters(e, it, &line, iv->below, callee, iv->line_callee, iv->call);
	struct loop_line *l = &lines[line];
	if (!sd_item_span(it))
		l->work = 1;
	if (!entered)
		return;
	if (sd_item_span(it) && 2 * (it->end - it->ts) < 3 * sc->shortest_span)
		l->short_entry = 1;
	if (!l->entries++) {
		if (c->last_line == UINT32_MAX)
			c->first_line = line;
		else
			lines[c->last_line].next = line;
		c->last_line = line;
	}
}

static int index_cmp(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	return a < b ? -1 : a > b;
}

/* A context whose items are all at one line (the <module> frame's call of
 * main()): once the line is entered, only a call from it can enter it again
 * (an item inside a call runs at the calling line, this one), and it holds
 * work if an item that is no span is at it.  Its entries from its first item
 * and its calls: when every kind of call has one item, those alone (events:
 * room for 1 + the kinds); else a walk that skips all but calls.  0: the
 * context has more lines than one. */
static int ctx_one_line(struct scan *sc, uint32_t ci, const struct ivar *ivs, size_t *events)
{
	uint32_t line = UINT32_MAX;
	size_t first = SIZE_MAX, ne = 0;
	int calls_single = 1, work = 0;
	for (size_t v = 0; v < 2 * sc->paths.n; v++) {
		const struct pvar *pv = &sc->pvars[v];
		if (!pv->count || !ivs[v].in)
			continue;
		if (line != UINT32_MAX && ivs[v].line != line)
			return 0;
		line = ivs[v].line;
		if (pv->first < first)
			first = pv->first;
		work |= !(v & 1);
		if (ivs[v].call) {
			if (pv->count == 1)
				events[ne++] = pv->first;
			else
				calls_single = 0;
		}
	}
	if (line == UINT32_MAX)
		return 1; /* (no items: none entered) */
	struct ctx *c = VEC_AT(&sc->ctxs, struct ctx, ci);
	struct entry_state e = c->entry;
	if (calls_single) {
		events[ne++] = first;
		qsort(events, ne, sizeof *events, index_cmp);
		for (size_t k = 0; k < ne; k++)
			if (!k || events[k] != events[k - 1])
				ctx_line_item(sc, ci, c, &e, events[k], &ivs[sc->items[events[k]].var]);
	} else {
		const uint32_t *vline = sc->vline;
		for (size_t i = first; i < sc->n; i++) {
			uint32_t fl = vline[sc->items[i].var];
			if (fl == e.prev_line || fl > VLINE_CALL)
				continue;
			ctx_line_item(sc, ci, c, &e, i, &ivs[sc->items[i].var]);
		}
	}
	if (work)
		VEC_AT(&sc->lines, struct loop_line, line)->work = 1;
	c->entry = e;
	return 1;
}

/* Context ci's lines entered, in time order (enters), counted when find_loop
 * first considers the context.  A line entered by a span under 1.5 times the
 * shortest span in the trace may have calls that were too short to be
 * recorded (the tracer keeps calls over a threshold): on a CPU run, whose
 * items are all spans, its entries are then not one per iteration -- a loop
 * headed there counted 3 steps for 7 when the forward of a small model was
 * sometimes under the threshold.  Such a line is no head when another line of
 * its context, seen each time (entered by longer spans, or launching work),
 * was entered more often (ctx_candidate). */
static int ctx_lines(struct scan *sc, uint32_t ci)
{
	VEC_AT(&sc->ctxs, struct ctx, ci)->counted = 1;
	const struct ivar *ivs = ivars_for(sc, ci);
	size_t *events = malloc((2 * sc->paths.n + 1) * sizeof *events);
	if (!events)
		return -1;
	int one = ctx_one_line(sc, ci, ivs, events);
	free(events);
	if (one)
		return 0;
	struct ctx *c = VEC_AT(&sc->ctxs, struct ctx, ci);
	struct loop_line *lines = sc->lines.data;
	const uint32_t *vline = sc->vline;
	struct entry_state e = c->entry;
	/* The walk's events logged for iterations() (walk_event), which walks
	 * the context with the same entries from the same start. */
	int log = 1;
	sc->log.n = 0;
	sc->log_ctx = UINT32_MAX;
	uint64_t max_end = 0;
	/* (e's fields the common case reads, in registers: set again after each
	 * item that may change them) */
	uint32_t prev_line = e.prev_line, call_tid = e.call_tid, call_line = e.call_line;
	uint64_t call_end = e.call_end;
	/* Work seen at prev_line since it was entered: marked on the line when
	 * another is entered (a register, not a store an item). */
	uint32_t work_at_prev = 0;
	/* prev_line when the latest call's line is it too, else UINT32_MAX (no
	 * item's: vline holds no "none yet") */
	uint32_t same_line = call_line == prev_line && prev_line < VLINE_CALL ? prev_line : UINT32_MAX;
	const struct sd_item *items = sc->items;
	for (const struct sd_item *it = items + c->first_item, *ie = items + sc->n; it < ie; it++) {
		/* (none before its first item is in the context) */
		uint32_t var = it->var, fl = vline[var];
		/* Most items: no call, at the line last entered (or inside a call
		 * running from it): nothing entered (enters).  At that line when
		 * the latest call was made from it too, running or not, the call
		 * changes nothing: one comparison, no look at the call. */
		if (fl == same_line) {
			work_at_prev |= ~var & 1;
			if (it->end > max_end)
				max_end = it->end;
			continue;
		}
		if (fl < VLINE_CALL) {
			uint32_t line = it->ts < call_end && it->tid == call_tid ? call_line : fl;
			if (line == prev_line) {
				work_at_prev |= ~var & 1;
				if (it->end > max_end)
					max_end = it->end;
				continue;
			}
		} else if (fl != VLINE_CALL && fl != VLINE_OUTSIDE) {
			continue;
		}
		if (work_at_prev) {
			lines[prev_line].work = 1;
			work_at_prev = 0;
		}
		size_t i = (size_t)(it - items);
		if (log) {
			struct walk_event *ev = vec_push(&sc->log);
			if (ev) {
				if (sc->log.n > 1)
					ev[-1].max_end = max_end;
				ev->item = i;
				max_end = 0;
			} else {
				log = 0;
			}
		}
		if (fl != VLINE_OUTSIDE) {
			ctx_line_item(sc, ci, c, &e, i, &ivs[it->var]);
			prev_line = e.prev_line;
			call_tid = e.call_tid;
			call_line = e.call_line;
			call_end = e.call_end;
			same_line = call_line == prev_line && prev_line < VLINE_CALL ? prev_line : UINT32_MAX;
		}
	}
	if (work_at_prev)
		lines[prev_line].work = 1;
	if (log && sc->log.n) {
		VEC_AT(&sc->log, struct walk_event, sc->log.n - 1)->max_end = max_end;
		sc->log_ctx = ci;
	}
	c->entry = e;
	return 0;
}

/* The calls made once per step (units_find), gathered by lines_count's walk:
 * consecutive items of one thread inside the same call (the outermost unit
 * frame on their paths, called from one site), a span of the call covering
 * what runs inside it. */
struct unit_thread {
	uint32_t tid;
	uint64_t site, end; /* end: UINT64_MAX once closed (no item ends it again: one test an item) */
	size_t call; /* its index in unit_calls */
	uint8_t kind;
	int open;
};
struct unit_threads {
	struct unit_thread th[64];
	size_t nth;
	struct unit_thread *cur; /* the thread of t_tid (its slot, not an index: no address made an item) */
	uint64_t t_tid; /* cur->tid, UINT64_MAX: none yet (one comparison an item, not two and a lookup) */
};
static inline __attribute__((always_inline)) int unit_track(struct scan *sc, struct unit_threads *ut,
							    const struct sd_item *it, const struct pvar *p)
{
	struct unit_thread *th = ut->cur;
	if (__builtin_expect(it->tid != ut->t_tid, 0)) { /* (most items: the thread of the one before) */
		size_t t = 0;
		while (t < ut->nth && ut->th[t].tid != it->tid)
			t++;
		if (t == ut->nth) {
			if (ut->nth == 64) {
				ut->t_tid = UINT64_MAX;
				return 0; /* a thread past the first 64 that made GPU calls or spans: not a loop's */
			}
			ut->th[ut->nth++] = (struct unit_thread){.tid = it->tid};
		}
		th = ut->cur = &ut->th[t];
		ut->t_tid = it->tid;
	}
	if (!p->unit_kind) { /* (inside the open call or not: it ends it only from its end on) */
		if (it->ts >= th->end) {
			th->open = 0;
			th->end = UINT64_MAX;
		}
		return 0;
	}
	/* Inside the open call, a path cut by the tracer's depth (torch.compile's first call nests
	 * deeper than 32 frames) names no user site of its own: it is that call's. */
	if (!p->complete && th->open && it->ts < th->end)
		return 0;
	/* One call: its span's path and the paths of the work inside it
	 * name it by different lines (the function's first, the line
	 * running), so by its call site. */
	if (th->open && th->site == p->unit_site && th->kind == p->unit_kind) {
		if (it->end > th->end)
			th->end = it->end;
		struct unit_call *c = VEC_AT(&sc->unit_calls, struct unit_call, th->call);
		c->end = th->end;
		c->work |= !sd_item_span(it);
		return 0;
	}
	struct unit_call *c = vec_push(&sc->unit_calls);
	if (!c)
		return -1;
	*c = (struct unit_call){.ts = it->ts, .end = it->end, .site = p->unit_site, .kind = p->unit_kind,
				.work = !sd_item_span(it)};
	*th = (struct unit_thread){.tid = it->tid, .site = p->unit_site, .kind = p->unit_kind, .end = it->end,
				   .call = sc->unit_calls.n - 1, .open = 1};
	return 0;
}

/* The callees of module calls item i's frames name (lines_count): a line
 * calling several modules enters at its first only (line_callee). */
static void callees_note(struct scan *sc, size_t i)
{
	const struct sd_item *it = &sc->items[i];
	struct pvar *pv = &sc->pvars[it->var];
	const struct path_info *p = path_at(sc, sd_item_path(it));
	for (uint32_t m = pv->callee_todo; m; m &= m - 1) {
		uint32_t k = (uint32_t)__builtin_ctz(m);
		uint64_t callee = p->callee[k];
		if (callee)
			pv->callee_todo &= ~(1u << k);
		else
			callee = call_callee(sc, i, p->ctx[k]);
		struct loop_line *l = VEC_AT(&sc->lines, struct loop_line, p->line[k]);
		if (callee && !l->first_callee)
			l->first_callee = callee;
		else if (callee && callee != l->first_callee)
			l->many_callees = 1;
	}
}

/* The most work first; equal ones in time order. */
static int heavier(const void *x, const void *y)
{
	const struct heavy_item *a = x, *b = y;
	if (a->w != b->w)
		return a->w > b->w ? -1 : 1;
	return a->item < b->item ? -1 : a->item > b->item;
}

/* What the contexts' walks read: each kind of item's frames (pvar), the
 * work after each item (after[]), each context's work and first item (which
 * contexts may hold the loop), and the module each line calls first when it
 * calls several (line_callee).  The lines' entries are counted per context
 * when find_loop considers it (ctx_lines). */
static int lines_count(struct scan *sc)
{
	size_t nv = 2 * sc->paths.n;
	if (sc->lines.n >= VLINE_CALL)
		return -1;
	struct pvar *pvs = sc->pvars = calloc(nv ? nv : 1, sizeof *pvs);
	if (!pvs || !(sc->ivars = calloc(nv ? nv : 1, sizeof *sc->ivars)) ||
	    !(sc->vline = calloc(nv ? nv : 1, sizeof *sc->vline)))
		return -1;
	for (size_t v = 0; v < nv; v++) {
		const struct path_info *p = path_at(sc, (uint32_t)(v / 2));
		uint32_t nf = (v & 1) && p->leaf_user ? p->n - 1 : p->n; /* frames_of */
		pvs[v].nf = nf;
		/* Modules only: a loop's own line calls other functions in turn
		 * (`for x in loader`: the loader's __iter__ at each epoch, its
		 * __next__ at each iteration), and its iterations enter it.  A
		 * callee the path names is noted at its first item (again, it
		 * changes nothing); one named by what runs inside the call
		 * (call_callee), at every item. */
		for (uint32_t k = 0; k < nf; k++)
			if ((p->module_call >> k & 1) && (p->callee[k] || ((v & 1) && p->caller_ctx == p->ctx[k])))
				pvs[v].callee_todo |= 1u << k;
	}
	/* after[] and each kind's work, first item and count. */
	if (!(sc->after = malloc((sc->n + 1) * sizeof *sc->after)))
		return -1;
	an_mem_huge(sc->after, (sc->n + 1) * sizeof *sc->after);
	/* The items that note callees, in time order (callees_note): each
	 * kind's first, and every item of a kind whose calls are named by what
	 * runs inside them (`every`: listed in the walk below, in time order). */
	uint8_t *every = calloc(nv ? nv : 1, 1);
	if (!every)
		return -1;
	for (size_t v = 0; v < nv; v++) {
		const struct path_info *p = path_at(sc, (uint32_t)(v / 2));
		for (uint32_t m = pvs[v].callee_todo; m; m &= m - 1)
			if (!p->callee[__builtin_ctz(m)])
				every[v] = pvs[v].every = 1;
		pvs[v].unit_kind = p->unit_kind;
		pvs[v].complete = (uint8_t)p->complete;
		pvs[v].unit_site = p->unit_site;
	}
	/* One walk, in time order: the work before each item (after[]), each
	 * kind's, its first item and count, the unit calls (units_find), and the
	 * items that note callees. */
	struct vec notes = {.item = sizeof(size_t)};
	struct unit_threads ut = {.t_tid = UINT64_MAX};
	uint64_t *after = sc->after, sum = 0;
	int rc = 0;
	const struct sd_item *items = sc->items;
	for (const struct sd_item *it = items, *ie = items + sc->n; it < ie; it++) {
		struct pvar *pv = &pvs[it->var];
		uint64_t w = it->w;
		*after++ = sum;
		sum += w;
		pv->w += w;
		if (!pv->count++)
			pv->first = (size_t)(it - items);
		if (__builtin_expect(pv->every, 0)) {
			size_t *at = vec_push(&notes);
			if (!at) {
				rc = -1;
				break;
			}
			*at = (size_t)(it - items);
		}
		if (unit_track(sc, &ut, it, pv)) {
			rc = -1;
			break;
		}
	}
	sc->after[sc->n] = sum;
	sc->work_sum = sum;
	if (rc) {
		free(every);
		vec_free(&notes);
		return -1;
	}
	size_t nwalk = notes.n; /* then the other kinds' first items */
	for (size_t v = 0; v < nv && !rc; v++) {
		if (!pvs[v].count || !pvs[v].callee_todo || every[v])
			continue;
		size_t *at = vec_push(&notes);
		if (at)
			*at = pvs[v].first;
		else
			rc = -1;
	}
	free(every);
	size_t *order = notes.data;
	if (notes.n > nwalk)
		qsort(order + nwalk, notes.n - nwalk, sizeof *order, index_cmp);
	for (size_t a = 0, b = nwalk; !rc && (a < nwalk || b < notes.n);) /* the two merged */
		callees_note(sc, b == notes.n || (a < nwalk && order[a] < order[b]) ? order[a++] : order[b++]);
	vec_free(&notes);
	if (rc)
		return -1;
	/* A CPU run's: each kind's longest item, and the items that hold work,
	 * the most first (work_capped). */
	if (sc->cpu) {
		if (!(sc->heavy = malloc((sc->n + 1) * sizeof *sc->heavy)))
			return -1;
		for (size_t i = 0; i < sc->n; i++) {
			const struct sd_item *it = &sc->items[i];
			if (it->end - it->ts > pvs[it->var].longest)
				pvs[it->var].longest = it->end - it->ts;
			if (it->w)
				sc->heavy[sc->nheavy++] = (struct heavy_item){it->w, i, 0};
		}
		qsort(sc->heavy, sc->nheavy, sizeof *sc->heavy, heavier);
		uint64_t total = 0;
		for (size_t k = 0; k < sc->nheavy; k++) {
			sc->heavy[k].sum = total;
			total += sc->heavy[k].w;
		}
		sc->heavy[sc->nheavy] = (struct heavy_item){0, sc->n, total};
	}
	/* Each context's work and first item, from its call paths'. */
	for (size_t v = 0; v < nv; v++) {
		const struct pvar *pv = &pvs[v];
		if (!pv->count)
			continue;
		const struct path_info *p = path_at(sc, (uint32_t)(v / 2));
		for (uint32_t k = 0; k < pv->nf; k++) {
			struct ctx *c = VEC_AT(&sc->ctxs, struct ctx, p->ctx[k]);
			c->w += pv->w;
			if (pv->longest > c->longest)
				c->longest = pv->longest;
			if (!c->seen || pv->first < c->first_item) {
				c->first_item = pv->first;
				c->seen = 1;
			}
		}
	}
	/* Lines are counted (ctx_lines) when find_loop considers a context: one
	 * walk of the items per context, each context's entries its own. */
	return 0;
}

/* ------------------------------------------------------------ units */

struct unit_site {
	uint64_t site, calls;
	uint64_t shortest; /* the shortest of its calls seen only as spans */
	uint8_t kind;
};

/* Whether the calls of site `slow` interleave with those of `fast` as an
 * outer step holding inner ones: fast called between every two calls of
 * slow, and not much of fast outside slow's calls (at most an iteration's
 * worth at each end: the calls before the first slow one belong to it). */
static int steps_around(const struct vec *calls, const struct unit_site *slow, const struct unit_site *fast)
{
	uint64_t per = (fast->calls + slow->calls - 1) / slow->calls, seen_slow = 0, since = 0;
	for (size_t i = 0; i < calls->n; i++) {
		const struct unit_call *c = VEC_AT(calls, struct unit_call, i);
		if (c->kind == fast->kind && c->site == fast->site) {
			since++;
		} else if (c->kind == slow->kind && c->site == slow->site) {
			if (seen_slow++ ? !since : since > per)
				return 0;
			since = 0;
		}
	}
	return seen_slow == slow->calls && since <= per; /* (since: fast's calls after slow's last) */
}

/* The calls made once per step: consecutive items of one thread inside the
 * same call (the outermost unit frame on their paths, called from one
 * site), a span of the call covering what runs inside it.  The first kind,
 * in the order optimizer, backward, forward, with a call site of at least
 * LOOP_MIN calls: its busiest site's calls into sc->units. */
static int units_find(struct scan *sc)
{
	struct vec calls = sc->unit_calls; /* (lines_count's walk: unit_track) */
	sc->unit_calls = (struct vec){.item = sizeof(struct unit_call)};
	/* Calls per (kind, site). */
	struct vec sites = {.item = sizeof(struct unit_site)};
	for (size_t i = 0; i < calls.n; i++) {
		const struct unit_call *c = VEC_AT(&calls, struct unit_call, i);
		size_t k = 0;
		while (k < sites.n && (VEC_AT(&sites, struct unit_site, k)->site != c->site ||
				       VEC_AT(&sites, struct unit_site, k)->kind != c->kind))
			k++;
		struct unit_site *us = k < sites.n ? VEC_AT(&sites, struct unit_site, k) : vec_push(&sites);
		if (!us)
			break;
		if (!us->calls)
			us->shortest = UINT64_MAX;
		us->site = c->site;
		us->kind = c->kind;
		us->calls++;
		if (!c->work && c->end - c->ts < us->shortest)
			us->shortest = c->end - c->ts;
	}
	/* The tracer records calls over a threshold as spans: a call site seen
	 * only through spans, some of them near the shortest span there is
	 * (under 1.5 times it), has calls that were too short to be seen (a CPU
	 * run's optimizer step on a small model): its calls are not all there,
	 * not one per step. */
	uint64_t threshold = sc->shortest_span;
	const struct unit_site *best = NULL;
	const struct unit_site *graph = NULL;
	for (int kind = UNIT_OPTIMIZER; kind <= UNIT_GRAPH; kind++) {
		/* The first kind found is the step's (graph replays apart, weighed below). */
		const struct unit_site **pick = kind == UNIT_GRAPH ? &graph : &best;
		if (*pick)
			continue;
		for (size_t k = 0; k < sites.n; k++) {
			const struct unit_site *us = VEC_AT(&sites, struct unit_site, k);
			if (us->kind == kind && us->calls >= LOOP_MIN &&
			    (us->shortest == UINT64_MAX || 2 * us->shortest >= 3 * threshold) &&
			    (!*pick || us->calls > (*pick)->calls))
				*pick = us;
		}
	}
	/* A step captured whole in a CUDA graph is its replay: the optimizer step() and backward() seen are
	 * the warm-up's and the capture's (set-up), fewer than the replays. */
	if (graph && (!best || graph->calls > best->calls))
		best = graph;
	/* Two optimizers stepped at different rates in one loop (a WGAN's
	 * critic, n_critic times per generator step): the step is the slower
	 * one's, whose every step holds the other's calls.  A site called up to
	 * UNIT_INNER_MAX times as often counts as inner updates; more often, the
	 * slower one is of an outer loop (an epoch's), not the step. */
	if (best && best->kind == UNIT_OPTIMIZER) {
		const struct unit_site *slow = NULL;
		for (size_t k = 0; k < sites.n; k++) {
			const struct unit_site *us = VEC_AT(&sites, struct unit_site, k);
			if (us->kind == best->kind && us->calls >= LOOP_MIN && us->calls < best->calls &&
			    UNIT_INNER_MAX * us->calls >= best->calls &&
			    (us->shortest == UINT64_MAX || 2 * us->shortest >= 3 * threshold) &&
			    (!slow || us->calls < slow->calls) && steps_around(&calls, us, best))
				slow = us;
		}
		if (slow)
			best = slow;
	}
	int rc = 0;
	if (best) {
		for (size_t i = 0; i < calls.n && !rc; i++) {
			const struct unit_call *c = VEC_AT(&calls, struct unit_call, i);
			struct unit_call *u;
			if (c->kind == best->kind && c->site == best->site) {
				if (!(u = vec_push(&sc->units)))
					rc = -1;
				else
					*u = *c;
			}
		}
		/* The contexts the loop can be: those on the units' paths (of
		 * items: the paths of host calls aside). */
		for (size_t v = 0; v < 2 * sc->paths.n; v++) {
			if (!sc->pvars[v].count)
				continue;
			const struct path_info *p = path_at(sc, (uint32_t)(v / 2));
			if (p->unit_kind == best->kind && p->unit_site == best->site)
				for (uint32_t k = 0; k < p->n; k++)
					VEC_AT(&sc->ctxs, struct ctx, p->ctx[k])->unit_path = 1;
		}
	}
	vec_free(&sites);
	vec_free(&calls);
	return rc;
}

/* ------------------------------------------------------------ candidates */

/* to = a copy of from's items (to.item as from's); -1: out of memory */
static int vec_copy(struct vec *to, const struct vec *from)
{
	if (vec_reserve(to, from->n ? from->n : 1))
		return -1;
	if (from->n)
		memcpy(to->data, from->data, from->n * from->item);
	to->n = from->n;
	return 0;
}

struct cand {
	struct vec steps;  /* struct an_step */
	uint64_t covered;  /* of the work from its first step on (from) */
	uint64_t from;
	uint32_t ctx, head;
	/* iterations' answer before grouping, kept for the steps' ends (steps_end) */
	struct vec iters;  /* struct an_step */
	struct vec ends;   /* struct an_step: {step index, stop} */
	struct vec iter_lines; /* struct iter_line: the lines entered in iters */
	uint32_t tid;
};

/* A step that ends with its own work (the loop's last, or one followed by
 * the user's code outside the loop's context): to the end of the host calls
 * its thread makes after that work at the loop's lines, before `stop` (the
 * code after it) -- an .item()'s or .tolist()'s sync at the end of the step,
 * which an earlier step holds as it runs to the next one's start.  In the
 * last iteration (last: its index; UINT32_MAX: not the last) a line no
 * earlier iteration entered or called from, or a call outside the context,
 * is the code after the loop: the calls end there. */
static uint64_t calls_end(struct scan *sc, uint32_t ci, uint32_t head, uint32_t tid, uint64_t begin, uint64_t stop,
			  uint64_t end, uint32_t last)
{
	size_t lo = 0, hi = sc->ncalls;
	while (lo < hi) { /* the first call at or after begin */
		size_t m = lo + (hi - lo) / 2;
		if (sc->calls[m].ts < begin)
			lo = m + 1;
		else
			hi = m;
	}
	for (size_t i = lo; i < sc->ncalls && sc->calls[i].ts < stop; i++) {
		const struct sd_item *c = &sc->calls[i];
		if (c->tid != tid)
			continue;
		const struct path_info *p = path_at(sc, sd_item_path(c));
		uint64_t below;
		uint32_t line = line_in(c, p, ci, &below);
		if (line == UINT32_MAX) {
			if (p->n && p->complete)
				break; /* the user's code outside the loop */
			continue;
		}
		if (last != UINT32_MAX && line != head) {
			const struct loop_line *l = VEC_AT(&sc->lines, struct loop_line, line);
			if (!(l->entries && l->first_iter < last) && l->call_stamp != sc->stamp)
				break;
		}
		if (c->end > end)
			end = c->end < stop ? c->end : stop;
	}
	return end;
}

/* The steps that end with their own work (ends: struct an_step, the step's
 * index and where the code after it starts) extended by their calls
 * (calls_end); the last one's lines are those called from before it too. */
static void steps_end(struct scan *sc, uint32_t ci, uint32_t head, uint32_t tid, struct vec *out,
		      const struct vec *ends)
{
	if (!out->n || !ends->n)
		return;
	uint32_t li = (uint32_t)(out->n - 1);
	const struct an_step *last = VEC_AT(out, struct an_step, li);
	sc->stamp++;
	for (size_t i = 0; i < sc->ncalls && sc->calls[i].ts < last->begin; i++) {
		const struct sd_item *c = &sc->calls[i];
		uint64_t below;
		uint32_t line;
		if (c->tid == tid && c->ts >= VEC_AT(out, struct an_step, 0)->begin &&
		    (line = line_in(c, path_at(sc, sd_item_path(c)), ci, &below)) != UINT32_MAX)
			VEC_AT(&sc->lines, struct loop_line, line)->call_stamp = sc->stamp;
	}
	for (size_t k = 0; k < ends->n; k++) {
		const struct an_step *e = VEC_AT(ends, struct an_step, k);
		struct an_step *s = VEC_AT(out, struct an_step, e->begin);
		s->end = calls_end(sc, ci, head, tid, s->begin, e->end, s->end, e->begin == li ? li : UINT32_MAX);
	}
}

/* The loop of context ci whose iterations start at line head: each from an
 * entry into the head line to the next, or, when the user's code works
 * outside the context before that (on the loop's thread, the code after the
 * loop's body: an evaluation pass, a checkpoint), to the end of the
 * iteration's own last item; the last one ends before a line no earlier
 * iteration entered (the code after the loop).  The steps that so end with
 * their own work into *ends ({step index, stop}), and the loop's thread into
 * *loop_tid: for the loop found, such a step runs on to the end of the host
 * calls that follow it at the loop's lines (steps_end), whatever loops were
 * tried after it (they set first_iter of their own contexts' lines only). */
static int vec_copy(struct vec *to, const struct vec *from);

/* iterations()' state along its walk. */
struct iter_walk {
	uint32_t ci, head;
	const struct ivar *ivs;
	struct vec *out, *ends;
	struct entry_state e;
	uint32_t tid;
	int open;
	uint64_t last_end;
	size_t last_begin_item, head_entry;
};

/* Item i of the walk (iterations). */
static inline __attribute__((always_inline)) int iter_item(struct scan *sc, struct iter_walk *w, size_t i)
{
	const struct sd_item *it = &sc->items[i];
	const struct ivar *ivs = w->ivs;
	uint32_t fl = sc->vline[it->var], head = w->head;
	struct entry_state *e = &w->e;
	/* Most items: no call, at the line last entered (or inside a call
	 * running from it): nothing entered, and the line's first_iter
	 * was set at the context's item before (the same line, the same
	 * step open or not). */
	if (fl < VLINE_CALL && (it->tid == e->call_tid && it->ts < e->call_end ? e->call_line : fl) == e->prev_line) {
		if (w->open && it->end > w->last_end)
			w->last_end = it->end;
		if (w->open && e->prev_line == head &&
		    (it->tid == e->call_tid && it->ts < e->call_end ? e->call_fn : ivs[it->var].below) == e->fn) {
			struct iter_line *hl = VEC_AT(&sc->iter_lines, struct iter_line, w->head_entry);
			hl->w += it->w;
			hl->items++;
			hl->unit |= path_at(sc, sd_item_path(it))->unit_kind != UNIT_NONE;
		} else if (w->open && e->prev_line == head) {
			VEC_AT(&sc->iter_lines, struct iter_line, w->head_entry)->other = 1;
		}
		return 0;
	}
	struct vec *out = w->out;
	const struct ivar *iv = &ivs[it->var];
	if (!iv->in) {
		if (w->open && it->tid == w->tid && iv->outside) {
			struct an_step *s = VEC_AT(out, struct an_step, out->n - 1);
			s->end = w->last_end > s->begin ? w->last_end : s->begin + 1;
			w->open = 0;
			struct an_step *own = vec_push(w->ends);
			if (own)
				*own = (struct an_step){out->n - 1, it->ts};
		}
		return 0;
	}
	uint32_t line = iv->line;
	uint64_t callee = iv->callee;
	if (!callee && iv->call)
		callee = call_callee(sc, i, w->ci);
	uint64_t below = !iv->call && it->tid == e->call_tid && it->ts < e->call_end ? e->call_fn : iv->below;
	int entered = enters(e, it, &line, iv->below, callee, iv->line_callee, iv->call);
	if (entered && line == head) {
		if (w->open)
			VEC_AT(out, struct an_step, out->n - 1)->end = it->ts;
		struct an_step *s = vec_push(out);
		if (!s)
			return -1;
		s->begin = it->ts;
		w->open = 1;
		w->tid = it->tid;
		w->last_end = it->end;
		w->last_begin_item = i;
	}
	if (!w->open)
		return 0;
	if (it->end > w->last_end)
		w->last_end = it->end;
	struct loop_line *l = VEC_AT(&sc->lines, struct loop_line, line);
	if (entered && l->iter_seen != out->n) {
		l->iter_seen = (uint32_t)out->n;
		l->iter_entries = 1;
		l->iters_once++;
		struct iter_line *il = vec_push(&sc->iter_lines);
		if (!il)
			return -1;
		*il = (struct iter_line){(uint32_t)(out->n - 1), line, 0, 0, 0, 0};
		if (line == head)
			w->head_entry = sc->iter_lines.n - 1;
	} else if (entered && l->iter_entries == 1) {
		l->iter_entries = 2;
		l->iters_once--;
		l->iters_more++;
	}
	if (line == head && below == e->fn) {
		struct iter_line *hl = VEC_AT(&sc->iter_lines, struct iter_line, w->head_entry);
		hl->w += it->w;
		hl->items++;
		hl->unit |= path_at(sc, sd_item_path(it))->unit_kind != UNIT_NONE;
	} else if (line == head) {
		VEC_AT(&sc->iter_lines, struct iter_line, w->head_entry)->other = 1;
	}
	if (l->first_iter == UINT32_MAX)
		l->first_iter = (uint32_t)(out->n - 1);
	return 0;
}

/* The walk of iterations() through ctx_lines' log of context ci (ctx_log):
 * only its events, and the items between two of them (all at the line last
 * entered, nothing entered) one by one only while a step is open at the
 * head line; elsewhere they only extend the open step's last end, by the
 * latest end the log kept for them. */
static int iterations_logged(struct scan *sc, struct iter_walk *w)
{
	const struct walk_event *ev = sc->log.data;
	size_t n = sc->log.n;
	for (size_t k = 0; k < n; k++) {
		size_t i = ev[k].item, next = k + 1 < n ? ev[k + 1].item : sc->n;
		if (iter_item(sc, w, i))
			return -1;
		if (!w->open || next == i + 1)
			continue;
		if (w->e.prev_line != w->head) {
			if (ev[k].max_end > w->last_end)
				w->last_end = ev[k].max_end;
			continue;
		}
		for (size_t j = i + 1; j < next; j++)
			if (sc->vline[sc->items[j].var] < VLINE_CALL && iter_item(sc, w, j)) /* (not VLINE_NONE) */
				return -1;
	}
	return 0;
}

/* The loop of context ci whose iterations start at line head: each from an
 * entry into the head line to the next, or, when the user's code works
 * outside the context before that (on the loop's thread, the code after the
 * loop's body: an evaluation pass, a checkpoint), to the end of the
 * iteration's own last item; the last one ends before a line no earlier
 * iteration entered (the code after the loop).  The steps that so end with
 * their own work into *ends ({step index, stop}), and the loop's thread into
 * *loop_tid: for the loop found, such a step runs on to the end of the host
 * calls that follow it at the loop's lines (steps_end), whatever loops were
 * tried after it (they set first_iter of their own contexts' lines only). */
static int iterations_walk(struct scan *sc, uint32_t ci, uint32_t head, struct vec *out, struct vec *ends,
			   uint32_t *loop_tid, int logged)
{
	out->n = 0;
	ends->n = 0;
	sc->iter_lines.n = 0;
	for (uint32_t l = VEC_AT(&sc->ctxs, struct ctx, ci)->first_line; l != UINT32_MAX;
	     l = VEC_AT(&sc->lines, struct loop_line, l)->next) {
		struct loop_line *ll = VEC_AT(&sc->lines, struct loop_line, l);
		ll->first_iter = UINT32_MAX;
		ll->iter_seen = ll->iter_entries = ll->iters_once = ll->iters_more = 0;
	}
	struct iter_walk w = {.ci = ci, .head = head, .ivs = ivars_for(sc, ci), .out = out, .ends = ends,
			      .e = {.prev_line = UINT32_MAX}};
	const struct ivar *ivs = w.ivs;
	/* (the items before the context's first are not in it, and no step is open) */
	if (logged) {
		if (iterations_logged(sc, &w))
			return -1;
	} else {
		for (size_t i = VEC_AT(&sc->ctxs, struct ctx, ci)->first_item; i < sc->n; i++)
			if (iter_item(sc, &w, i))
				return -1;
	}
	uint32_t tid = w.tid;
	int open = w.open;
	size_t last_begin_item = w.last_begin_item;
	*loop_tid = tid;
	if (!out->n)
		return 0;
	struct an_step *last = VEC_AT(out, struct an_step, out->n - 1);
	uint32_t li = (uint32_t)(out->n - 1);
	if (open) { /* to the end of its own work, before the code after the loop */
		uint64_t end = last->begin + 1, stop = UINT64_MAX;
		struct entry_state le = {.prev_line = UINT32_MAX};
		for (size_t i = last_begin_item; i < sc->n; i++) {
			const struct ivar *iv = &ivs[sc->items[i].var];
			if (!iv->in)
				continue;
			uint32_t line = iv->line;
			uint64_t callee = iv->callee;
			if (!callee && iv->call)
				callee = call_callee(sc, i, ci);
			enters(&le, &sc->items[i], &line, iv->below, callee, iv->line_callee, iv->call);
			if (li && line != head && VEC_AT(&sc->lines, struct loop_line, line)->first_iter == li) {
				stop = sc->items[i].ts;
				break;
			}
			if (sc->items[i].end > end)
				end = sc->items[i].end;
		}
		last->end = end;
		struct an_step *own = vec_push(ends);
		if (own)
			*own = (struct an_step){li, stop};
	}
	return 0;
}

/* The evaluation scratch iterations() leaves in context ci's lines, into v
 * (uint32_t, 5 a line). */
static int lines_scratch(const struct scan *sc, uint32_t ci, struct vec *v)
{
	v->n = 0;
	for (uint32_t l = VEC_AT(&sc->ctxs, struct ctx, ci)->first_line; l != UINT32_MAX;
	     l = VEC_AT(&sc->lines, struct loop_line, l)->next)
		for (int k = 0; k < 5; k++) {
			const struct loop_line *ll = VEC_AT(&sc->lines, struct loop_line, l);
			uint32_t *x = vec_push(v);
			if (!x)
				return -1;
			*x = k == 0 ? ll->first_iter : k == 1 ? ll->iter_seen : k == 2 ? ll->iter_entries
				: k == 3 ? ll->iters_once : ll->iters_more;
		}
	return 0;
}

static int vecs_differ(const struct vec *x, const struct vec *y)
{
	return x->n != y->n || (x->n && memcmp(x->data, y->data, x->n * x->item));
}

/* iterations_walk through ctx_lines' log of the context when it has one
 * (under TBANALYZE_CHECK, checked against the walk of every item). */
static int iterations(struct scan *sc, uint32_t ci, uint32_t head, struct vec *out, struct vec *ends,
		      uint32_t *loop_tid)
{
	int logged = sc->log_ctx == ci;
	if (!logged || !an_check_on())
		return iterations_walk(sc, ci, head, out, ends, loop_tid, logged);
	struct vec o = {.item = out->item}, en = {.item = ends->item}, il = {.item = sc->iter_lines.item},
		   sl = {.item = sizeof(uint32_t)}, sl2 = {.item = sizeof(uint32_t)};
	uint32_t t = 0;
	int rc = iterations_walk(sc, ci, head, out, ends, &t, 0);
	if (!rc)
		rc = vec_copy(&o, out) || vec_copy(&en, ends) || vec_copy(&il, &sc->iter_lines) ||
				     lines_scratch(sc, ci, &sl)
			     ? -1
			     : iterations_walk(sc, ci, head, out, ends, loop_tid, 1);
	if (!rc && !lines_scratch(sc, ci, &sl2) &&
	    (t != *loop_tid || vecs_differ(&o, out) || vecs_differ(&en, ends) || vecs_differ(&il, &sc->iter_lines) ||
	     vecs_differ(&sl, &sl2))) {
		fprintf(stderr, "tbanalyze: internal check failed: the iterations of a loop walked through the "
				"context's log differ from those of every item\n");
		abort();
	}
	vec_free(&o);
	vec_free(&en);
	vec_free(&il);
	vec_free(&sl);
	vec_free(&sl2);
	return rc;
}

/* The first item from index `from` on that starts at or after t (items in
 * start order): galloping, then a binary search. */
static size_t item_at(const struct scan *sc, size_t from, uint64_t t)
{
	size_t lo = from, hi, step = 1;
	if (lo >= sc->n || sc->items[lo].ts >= t)
		return lo;
	for (hi = lo + 1; hi < sc->n && sc->items[hi].ts < t; hi = lo + step) {
		lo = hi;
		step *= 2;
	}
	if (hi > sc->n)
		hi = sc->n;
	while (hi - lo > 1) { /* items[lo] starts before t; items[hi], if any, not */
		size_t m = lo + (hi - lo) / 2;
		if (sc->items[m].ts < t)
			lo = m;
		else
			hi = m;
	}
	return hi;
}

/* Item i starts in one of the steps *arg (in time order; work_capped). */
static int in_steps(const struct scan *sc, size_t i, const void *arg)
{
	const struct vec *steps = arg;
	uint64_t ts = sc->items[i].ts;
	size_t lo = first_after(steps, ts, 0);
	return lo && ts < VEC_AT(steps, struct an_step, lo - 1)->end;
}

/* The work inside the steps (of the items starting in one), and in *from
 * the work from the first step on: work before the loop (setting up, a
 * rendezvous, the model's weights copied to the GPU) is one-time, and no
 * loop's business; work after it (an evaluation, a checkpoint) and between
 * its steps is the steps' to hold (a CPU run's calls there counted at most
 * as long as the longest step: work_capped). */
static uint64_t covered(const struct scan *sc, const struct vec *steps, uint64_t *from)
{
	uint64_t w = 0;
	size_t i = 0;
	*from = 0;
	if (!steps->n)
		return 0;
	uint64_t begin = VEC_AT(steps, struct an_step, 0)->begin;
	size_t lo = 0, hi = sc->n;
	while (lo < hi) { /* the first item at or after the first step's begin */
		size_t m = lo + (hi - lo) / 2;
		if (sc->items[m].ts < begin)
			lo = m + 1;
		else
			hi = m;
	}
	*from = work_from(sc, lo);
	for (size_t k = 0; k < steps->n; k++) {
		const struct an_step *s = VEC_AT(steps, struct an_step, k);
		i = item_at(sc, i, s->begin);
		size_t j = item_at(sc, i, s->end);
		w += sc->after[j] - sc->after[i];
		i = j;
	}
	/* (*from is only ever weighed against twice the steps' work: capped
	 * only when that decides) */
	if (sc->cpu && 2 * w < *from) {
		uint64_t longest = 0;
		for (size_t k = 0; k < steps->n; k++) {
			const struct an_step *s = VEC_AT(steps, struct an_step, k);
			if (s->end - s->begin > longest)
				longest = s->end - s->begin;
		}
		*from = work_capped(sc, lo, longest, in_steps, steps);
	}
	return w;
}

/* Iterations per optimizer step: 1, but for gradient accumulation, whose
 * micro-batches call no unit and come in equal runs before each call.  The
 * most frequent run of iterations without a call before one that holds a
 * call (the run before the first call aside: set-up may differ), plus one.
 * An optimizer step skipped now and then -- GradScaler finding inf/NaN
 * gradients (routinely in fp16's first steps), a user's `if not
 * torch.isfinite(loss): continue` -- leaves runs of uneven lengths among
 * runs of none: one iteration per step still. */
static size_t units_period(const uint8_t *in, size_t n)
{
	uint64_t *runs = malloc((n ? n : 1) * sizeof *runs);
	if (!runs)
		return 1;
	size_t nr = 0, run = 0;
	int seen = 0;
	for (size_t k = 0; k < n; k++) {
		if (!in[k]) {
			run++;
			continue;
		}
		if (seen)
			runs[nr++] = run;
		seen = 1;
		run = 0;
	}
	qsort(runs, nr, sizeof *runs, u64_cmp);
	size_t best = 0, best_n = 0;
	for (size_t i = 0; i < nr;) { /* the most frequent, the shortest between equals */
		size_t j = i;
		while (j < nr && runs[j] == runs[i])
			j++;
		if (j - i > best_n) {
			best_n = j - i;
			best = runs[i];
		}
		i = j;
	}
	free(runs);
	return best + 1;
}

/* What the n iterations (in[k]: it holds a unit call) ran besides the
 * head's own calls (iterations()' iter_lines).  RAN_BODY: a line of the
 * loop's body, entered in more than half of those that hold a call, or
 * torch's forward (backward, optimizer step) at the head (`pred = model(x)`
 * before a `continue`; the loader's last fetch, raising StopIteration, runs
 * no module).  RAN_OTHER: a line of the loop's function outside the body's
 * lines in the source (the code after an inner loop: an epoch's end), or at
 * the head a function other than the one it was entered by where at most
 * half of those with a call do (the loader's next iterator, made at `for
 * batch in loader` for the next epoch).  NULL: no memory. */
enum { RAN_BODY = 1, RAN_OTHER = 2 };
static uint8_t *body_runs(const struct scan *sc, const struct vec *iter_lines, uint32_t head, const uint8_t *in,
			  size_t n)
{
	uint8_t *ran = calloc(n ? n : 1, 1);
	uint32_t *with = calloc(sc->lines.n ? sc->lines.n : 1, sizeof *with);
	if (!ran || !with) {
		free(ran);
		free(with);
		return NULL;
	}
	size_t calls = 0, head_other = 0;
	for (size_t k = 0; k < n; k++)
		calls += in[k] != 0;
	for (size_t i = 0; i < iter_lines->n; i++) {
		const struct iter_line *il = VEC_AT(iter_lines, struct iter_line, i);
		if (il->iter < n && in[il->iter]) {
			with[il->line]++;
			head_other += il->line == head && il->other;
		}
	}
	/* The body's extent in the source: the code after the loop lies
	 * outside it, a line of the body seen now and then (a call near the
	 * tracer's threshold) inside. */
	uint32_t first = VEC_AT(&sc->lines, struct loop_line, head)->lineno, last = first;
	for (size_t i = 0; i < iter_lines->n; i++) {
		const struct iter_line *il = VEC_AT(iter_lines, struct iter_line, i);
		uint32_t no = VEC_AT(&sc->lines, struct loop_line, il->line)->lineno;
		if (2 * (size_t)with[il->line] > calls) {
			first = no < first ? no : first;
			last = no > last ? no : last;
		}
	}
	for (size_t i = 0; i < iter_lines->n; i++) {
		const struct iter_line *il = VEC_AT(iter_lines, struct iter_line, i);
		if (il->iter >= n)
			continue;
		uint32_t no = VEC_AT(&sc->lines, struct loop_line, il->line)->lineno;
		if (il->line == head)
			ran[il->iter] |= (il->unit ? RAN_BODY : 0) | (il->other && 2 * head_other <= calls ? RAN_OTHER : 0);
		else if (2 * (size_t)with[il->line] > calls)
			ran[il->iter] |= RAN_BODY;
		else if (no < first || no > last)
			ran[il->iter] |= RAN_OTHER;
	}
	free(with);
	return ran;
}

/* A CPU run's: which of the n iterations (in[k]: it holds a unit call) did
 * little at the head: at most half of the head's median work, or of its
 * median count of spans, in those with a call, counting only what runs under
 * the function the head was entered by (an epoch's next iterator, made at the
 * loader's line, is not its fetch).  A skipped step's forward at the head is
 * as long as any and calls as much; the loader's last fetch, raising
 * StopIteration, takes a third of a fetch's time and less and calls none of
 * its loading and collating (its count holds when a pause lengthens it).
 * Not the iteration's work or length: the last fetch runs on into the code
 * after the loop, where a pause on a loaded machine is as long as a step.
 * NULL: no memory. */
static uint8_t *head_idle(const struct vec *iter_lines, uint32_t head, const uint8_t *in, size_t n)
{
	uint8_t *idle = malloc(n ? n : 1);
	uint64_t *w = calloc(2 * (n ? n : 1), sizeof *w), *with = malloc((n ? n : 1) * sizeof *with);
	if (!idle || !w || !with) {
		free(idle);
		free(w);
		free(with);
		return NULL;
	}
	uint64_t *items = w + n;
	for (size_t i = 0; i < iter_lines->n; i++) {
		const struct iter_line *il = VEC_AT(iter_lines, struct iter_line, i);
		if (il->line == head && il->iter < n) {
			w[il->iter] += il->w;
			items[il->iter] += il->items;
		}
	}
	uint64_t typical[2] = {0, 0};
	for (int m = 0; m < 2; m++) {
		const uint64_t *of = m ? items : w;
		size_t nw = 0;
		for (size_t k = 0; k < n; k++)
			if (in[k])
				with[nw++] = of[k];
		if (nw) {
			qsort(with, nw, sizeof *with, u64_cmp);
			typical[m] = with[nw / 2];
		}
	}
	for (size_t k = 0; k < n; k++)
		idle[k] = 2 * w[k] <= typical[0] || 2 * items[k] <= typical[1];
	free(w);
	free(with);
	return idle;
}

/* Which of the steps' iterations (in[k]: it holds a unit call) did next to
 * no work: under a quarter of the median work of those with a call, and
 * under a quarter of their median length (work runs of one call path are one
 * item, filed at its start: a skipped iteration's forward may be counted in
 * the one before).  NULL: no memory. */
static uint8_t *next_to_none(const struct scan *sc, const struct vec *steps, const uint8_t *in)
{
	size_t n = steps->n, i = 0, nw = 0;
	uint8_t *tiny = calloc(n ? n : 1, 1);
	uint64_t *work = calloc(n ? n : 1, sizeof *work), *with = malloc((n ? n : 1) * sizeof *with);
	if (!tiny || !work || !with) {
		free(tiny);
		free(work);
		free(with);
		return NULL;
	}
	for (size_t k = 0; k < n; k++) {
		const struct an_step *st = VEC_AT(steps, struct an_step, k);
		i = item_at(sc, i, st->begin);
		work[k] = sc->after[item_at(sc, i, st->end)] - sc->after[i];
		if (in[k])
			with[nw++] = work[k];
	}
	if (nw) {
		qsort(with, nw, sizeof *with, u64_cmp);
		uint64_t typical = with[nw / 2];
		nw = 0;
		for (size_t k = 0; k < n; k++)
			if (in[k])
				with[nw++] = VEC_AT(steps, struct an_step, k)->end - VEC_AT(steps, struct an_step, k)->begin;
		qsort(with, nw, sizeof *with, u64_cmp);
		uint64_t typical_len = with[nw / 2];
		for (size_t k = 0; k < n; k++) {
			const struct an_step *st = VEC_AT(steps, struct an_step, k);
			tiny[k] = 4 * work[k] < typical && 4 * (st->end - st->begin) < typical_len;
		}
	}
	free(work);
	free(with);
	return tiny;
}

/* The iterations grouped so that each step holds one unit call: with
 * gradient accumulation (units_period: k iterations a step) a step ends
 * with the iteration its call starts in (micro-batches before it belong to
 * it), and a run of iterations without a call that is a whole number of
 * periods longer is that many steps whose optimizer step was skipped;
 * otherwise every iteration is a step, whether the optimizer stepped in it
 * or not.  Iterations after the last call are steps only as whole periods.
 * 0 when the loop's iterations do not fit the calls (one holds two: an
 * epoch; or the calls lie outside them: an inner loop). */
static int group_by_units(const struct scan *sc, const struct vec *iter_lines, uint32_t head, struct vec *steps)
{
	size_t u = 0, out = 0, inside = 0, nu = sc->units.n;
	uint8_t *in = malloc(steps->n ? steps->n : 1);
	if (!in)
		return 0;
	for (size_t k = 0; k < steps->n; k++) {
		const struct an_step s = *VEC_AT(steps, struct an_step, k);
		while (u < nu && VEC_AT(&sc->units, struct unit_call, u)->ts < s.begin)
			u++;
		size_t c = 0;
		while (u < nu && VEC_AT(&sc->units, struct unit_call, u)->ts < s.end) {
			c++;
			u++;
		}
		if (c > 1) {
			free(in);
			return 0;
		}
		in[k] = (uint8_t)c;
		inside += c;
	}
	size_t per = units_period(in, steps->n), first = 0;
	/* A skipped step ran the loop's body up to the skip; an iteration that
	 * ran none of it (the loader's last fetch, raising StopIteration at the
	 * head before the code after the loop) is no step: it ran no line of the
	 * body but the head (body_runs), and either ran the code after the
	 * inner loop (an epoch's end) or little work: on a CPU run little at
	 * the head (head_idle), on a GPU next to no GPU work (next_to_none) --
	 * a skip right after a forward at the head, `if not
	 * torch.isfinite(loss): continue`, did its forward's.  Lines before
	 * time: on a slower or loaded machine more of a skipped step's calls
	 * cross the tracer's span threshold, and a pause makes the loader's last
	 * fetch and the epoch's end after it as long as a step. */
	uint8_t *body = NULL, *tiny = NULL;
	if (per == 1 && (!(body = body_runs(sc, iter_lines, head, in, steps->n)) ||
			 !(tiny = sc->cpu ? head_idle(iter_lines, head, in, steps->n) : next_to_none(sc, steps, in)))) {
		free(body);
		free(in);
		return 0;
	}
	for (size_t k = 0; k < steps->n; k++) {
		if (!in[k] && (per > 1 || (!(body[k] & RAN_BODY) && ((body[k] & RAN_OTHER) || tiny[k]))))
			continue;
		/* Iterations first..k: whole periods of steps, the last one
		 * ending with this call (with k - first + 1 no multiple of the
		 * period, micro-batches of uneven count: one step; with period
		 * 1, iterations of next to no work and this one: one step). */
		size_t len = k - first + 1, parts = per == 1 || len % per ? 1 : len / per;
		for (size_t p = 0; p < parts; p++) {
			size_t b = parts == 1 ? first : first + p * per, e = parts == 1 ? k : b + per - 1;
			*VEC_AT(steps, struct an_step, out++) = (struct an_step){VEC_AT(steps, struct an_step, b)->begin,
										 VEC_AT(steps, struct an_step, e)->end};
		}
		first = k + 1;
	}
	size_t tail = steps->n - first;
	free(body);
	free(tiny);
	if (per == 1)
		tail = 0; /* (what is left after the last step: iterations with next to no work) */
	for (size_t p = 0; p + per <= tail; p += per)
		*VEC_AT(steps, struct an_step, out++) = (struct an_step){VEC_AT(steps, struct an_step, first + p)->begin,
									 VEC_AT(steps, struct an_step, first + p + per - 1)->end};
	free(in);
	steps->n = out;
	/* Nearly every call inside a step (one before the loop, or after it,
	 * is the program's own business). */
	return out >= 2 && inside + 1 + nu / 8 >= nu;
}

/* Iterations of a loop are alike: most steady ones (after the first) last
 * within a factor of two of their median.  A line entered only now and then
 * (a rare interruption of a line that does everything) makes steps of wildly
 * different lengths, no loop. */
static int steps_regular(const struct vec *steps)
{
	size_t n = steps->n > 1 ? steps->n - 1 : 0;
	if (n < 2)
		return 1;
	uint64_t *len = malloc(n * sizeof *len);
	if (!len)
		return 1;
	for (size_t i = 0; i < n; i++) {
		const struct an_step *s = VEC_AT(steps, struct an_step, i + 1);
		len[i] = s->end - s->begin;
	}
	qsort(len, n, sizeof *len, u64_cmp);
	uint64_t med = len[n / 2];
	size_t alike = 0;
	for (size_t i = 0; i < n; i++)
		alike += 2 * len[i] >= med && len[i] <= 2 * med;
	free(len);
	return 2 * alike > n;
}

/* Whether the head tried (iterations(): n of them) missed some: the tracer
 * keeps calls over a threshold only, and a head entered by spans alone is
 * not seen in an iteration whose calls there were shorter (zero_grad() with
 * no gradients yet, or under the threshold now and then: corpus amp_scaler.py
 * on the CPU at TBPROF_PY_SPAN_US=50 counted 11 steps for 12 from it).  The
 * iteration before holds two of the loop's, and a line of the body entered
 * once in most iterations is entered twice there.  A line entered more than
 * once in every iteration (an inner loop's, a line calling a function twice)
 * is no sign; one entered once in some and twice in others, without a missed
 * head, is one of an inner loop of one or two rounds, rarer than the spans'
 * threshold met (and when every head is so, ctx_candidate takes one still). */
static int head_missed(const struct scan *sc, uint32_t ci, uint32_t head, size_t n)
{
	if (VEC_AT(&sc->lines, struct loop_line, head)->work)
		return 0; /* (entered at every iteration: its work is seen whatever its length) */
	for (uint32_t l = VEC_AT(&sc->ctxs, struct ctx, ci)->first_line; l != UINT32_MAX;
	     l = VEC_AT(&sc->lines, struct loop_line, l)->next) {
		const struct loop_line *ll = VEC_AT(&sc->lines, struct loop_line, l);
		if (l != head && ll->iters_more && 2 * (size_t)ll->iters_once > n)
			return 1;
	}
	return 0;
}

/* The context's loop: its heads in the order first entered (the body's first
 * line before lines of an inner loop or under a condition), the first that
 * makes valid steps (with unit calls: a step per call; without: steps that
 * hold most of the work). */
static int ctx_candidate(struct scan *sc, uint32_t ci, struct cand *best)
{
	const struct ctx *c = VEC_AT(&sc->ctxs, struct ctx, ci);
	uint64_t need = sc->units.n ? sc->units.n : LOOP_MIN;
	struct vec steps = {.item = sizeof(struct an_step)}, iters = {.item = sizeof(struct an_step)},
		   ends = {.item = sizeof(struct an_step)};
	uint32_t tid = 0;
	unsigned tried = 0;
	int rc = 0;
	/* The most entries of a line of the context that is seen each time it
	 * runs: a head entered by short spans and entered fewer times missed
	 * some of its iterations (ctx_lines). */
	uint64_t sure = 0;
	for (uint32_t l = c->first_line; l != UINT32_MAX; l = VEC_AT(&sc->lines, struct loop_line, l)->next) {
		const struct loop_line *ll = VEC_AT(&sc->lines, struct loop_line, l);
		if ((!ll->short_entry || ll->work) && ll->entries > sure)
			sure = ll->entries;
	}
	/* First the heads that missed no iteration (head_missed), then, when
	 * none makes steps, any. */
	for (int strict = 1, found = 0; strict >= 0 && !found && !rc; strict--, tried = 0)
	for (uint32_t h = c->first_line; h != UINT32_MAX && tried < HEADS_TRIED;
	     h = VEC_AT(&sc->lines, struct loop_line, h)->next) {
		const struct loop_line *hl = VEC_AT(&sc->lines, struct loop_line, h);
		/* A head entered by short spans only may miss iterations; with
		 * unit calls to hold, neither is it one when entered otherwise
		 * than a line seen each time that could hold them: its
		 * iterations that held no call were counted as steps whose
		 * optimizer step was skipped (corpus rl_reinforce.py on the CPU,
		 * an inner loop's line seen in 12 of its 256 iterations: 11
		 * steps for 8).  Entered as often, it is (`for batch in loader`:
		 * the step from its batch's fetch on). */
		if (hl->entries < need ||
		    (hl->short_entry && !hl->work &&
		     (hl->entries < sure || (sc->units.n && sure >= need && hl->entries != sure))))
			continue;
		tried++;
		if (iterations(sc, ci, h, &steps, &ends, &tid)) {
			rc = -1;
			break;
		}
		if (strict && head_missed(sc, ci, h, steps.n))
			continue;
		if (sc->units.n) { /* (grouped below, in place) */
			if (vec_copy(&iters, &steps)) {
				rc = -1;
				break;
			}
		}
		if (steps.n < LOOP_MIN || (sc->units.n && !group_by_units(sc, &sc->iter_lines, h, &steps)))
			continue;
		if (!sc->units.n && !steps_regular(&steps))
			continue;
		uint64_t from, cov = covered(sc, &steps, &from);
		if (!cov || (!sc->units.n && 2 * cov < from))
			continue;
		const struct ctx *bc = best->steps.n ? VEC_AT(&sc->ctxs, struct ctx, best->ctx) : NULL;
		/* The outermost; the fewest steps without units (an outer loop's
		 * iterations hold an inner one's); the most work. */
		int better = !bc || c->depth < bc->depth ||
			     (c->depth == bc->depth &&
			      (sc->units.n ? cov > best->covered
					   : steps.n < best->steps.n || (steps.n == best->steps.n && cov > best->covered)));
		if (better) {
			struct vec keep = best->steps;
			best->steps = steps;
			steps = keep;
			if (sc->units.n) {
				keep = best->iters;
				best->iters = iters;
				iters = keep;
			} else if (vec_copy(&best->iters, &best->steps)) {
				rc = -1;
				break;
			}
			keep = best->ends;
			best->ends = ends;
			ends = keep;
			keep = best->iter_lines; /* (sc's is the next candidate's scratch) */
			best->iter_lines = sc->iter_lines;
			sc->iter_lines = keep;
			best->tid = tid;
			best->covered = cov;
			best->from = from;
			best->ctx = ci;
			best->head = h;
		}
		found = 1;
		break;
	}
	vec_free(&steps);
	vec_free(&iters);
	vec_free(&ends);
	return rc;
}

static int find_loop(struct scan *sc, struct cand *best)
{
	for (size_t ci = 0; ci < sc->ctxs.n; ci++) {
		struct ctx *c = VEC_AT(&sc->ctxs, struct ctx, ci);
		if (sc->units.n && !c->unit_path)
			continue;
		if (!ctx_may_hold(sc, (uint32_t)ci))
			continue;
		/* A loop deeper than the one found is never better (ctx_candidate):
		 * its lines need not be counted. */
		if (best->steps.n && c->depth > VEC_AT(&sc->ctxs, struct ctx, best->ctx)->depth)
			continue;
		if (!c->counted && ctx_lines(sc, (uint32_t)ci))
			return -1;
		if (ctx_candidate(sc, (uint32_t)ci, best))
			return -1;
	}
	return 0;
}

static void scan_free(struct scan *sc)
{
	free(sc->pvars);
	free(sc->ivars);
	free(sc->vline);
	free(sc->path_cache);
	free(sc->items);
	free(sc->after);
	free(sc->calls);
	free(sc->heavy);
	vec_free(&sc->ctxs);
	vec_free(&sc->lines);
	vec_free(&sc->paths);
	vec_free(&sc->units);
	vec_free(&sc->unit_calls);
	vec_free(&sc->iter_lines);
	vec_free(&sc->log);
	u64map_free(&sc->ctx_idx);
	u64map_free(&sc->line_idx);
	u64map_free(&sc->path_idx);
}

/* --steps nvtx:NAME: the ranges named NAME are the steps, marked as detected ones are (the first
 * warm-up), each starting where its range was pushed. */
static void steps_from_nvtx(struct analysis *a)
{
	struct vec v = {0};
	a->steps.none = "fewer than two NVTX ranges of the name given to --steps";
	if (an_ranges_steps(a, a->opts.steps_nvtx, &v) || v.n < 2) {
		vec_free(&v);
		return;
	}
	a->steps.none = NULL;
	a->steps.source = AN_STEPS_DETECTED;
	a->steps.loop = an_ranges_first_callpath(a, a->opts.steps_nvtx);
	a->steps.unit = 0;
	a->steps.unit_kind = AN_UNIT_NONE;
	vec_free(&a->step_ivs);
	a->step_ivs = v;
}

void steps_detect(struct analysis *a)
{
	if (a->opts.steps_nvtx) {
		steps_from_nvtx(a);
		return;
	}
	const struct steps_state *ss = an_pass_state(a, steps);
	if (ss->collect_full) {
		a->steps.none = "more than 1 Mi runs of work or spans to look at";
		return;
	}
	struct scan sc = {.a = a, .ctxs.item = sizeof(struct ctx), .lines.item = sizeof(struct loop_line),
			  .paths.item = sizeof(struct path_info), .units.item = sizeof(struct unit_call),
			  .iter_lines.item = sizeof(struct iter_line), .unit_calls.item = sizeof(struct unit_call),
			  .log.item = sizeof(struct walk_event), .log_ctx = UINT32_MAX};
	struct cand best = {.steps.item = sizeof(struct an_step), .iters.item = sizeof(struct an_step),
			    .ends.item = sizeof(struct an_step), .iter_lines.item = sizeof(struct iter_line)};
	a->steps.none = "no loop found";
	if (!(sc.path_cache = calloc(PATH_CACHE, sizeof *sc.path_cache)) || items_build(&sc) || lines_count(&sc) ||
	    units_find(&sc) || !sc.total)
		goto out;
	if (find_loop(&sc, &best))
		goto out;
	if (!best.steps.n && sc.units.n) {
		/* The once-per-step calls fit no loop: the outermost loop then. */
		sc.units.n = 0;
		if (find_loop(&sc, &best))
			goto out;
	}
	if (!best.steps.n)
		goto out;
	if (2 * best.covered < best.from) {
		a->steps.none = sc.cpu
			? "the loop found holds less than half of the time in the program's calls from its start on"
			: "the loop found holds less than half of the GPU work from its start on";
		goto out;
	}
	/* The loop's steps measured to the end of their host calls (an .item()
	 * closing the last step is the last step's, as every earlier step's is
	 * its own): grouped again as found. */
	if (vec_copy(&best.steps, &best.iters))
		goto out;
	steps_end(&sc, best.ctx, best.head, best.tid, &best.steps, &best.ends);
	if ((sc.units.n && !group_by_units(&sc, &best.iter_lines, best.head, &best.steps)) || !best.steps.n)
		goto out;
	a->steps.none = NULL;
	a->steps.source = AN_STEPS_DETECTED;
	a->steps.loop = VEC_AT(&sc.lines, struct loop_line, best.head)->node;
	a->steps.unit = sc.units.n ? VEC_AT(&sc.units, struct unit_call, 0)->site : 0;
	a->steps.unit_kind = sc.units.n ? VEC_AT(&sc.units, struct unit_call, 0)->kind : AN_UNIT_NONE;
	vec_free(&a->step_ivs);
	a->step_ivs = best.steps;
	best.steps = (struct vec){0};
out:
	vec_free(&best.steps);
	vec_free(&best.iters);
	vec_free(&best.ends);
	vec_free(&best.iter_lines);
	scan_free(&sc);
}
