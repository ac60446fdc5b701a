/* Pass: host time by Python function, from the spans (an_pass_spans.c). */
#ifndef TBANALYZE_AN_PASS_SPANS_H
#define TBANALYZE_AN_PASS_SPANS_H

#include "an_pass.h"

/* spans: statistics by call path; by thread (st->threads' index), the
 * spans that ended on it and whose parent has not ended yet.  Spans reach
 * the file as they end, so when one arrives, the finished spans that began
 * after it are its direct children.  Bounded: past the cap the oldest are
 * forgotten (their parent's self time then counts them). */
#define SPAN_STACK 4096
struct done_span {
	uint64_t ts, end;
	size_t stat; /* index in a->spans */
};
struct spans_thread {
	/* done[done_base, ndone) (2 * SPAN_STACK slots: a full stack forgets its
	 * oldest by moving its base, and is moved down only when the slots run
	 * out, not at every span) */
	struct done_span *done;
	size_t ndone, done_base;
};
#define SPAN_IX_CACHE 256 /* slots of spans_state.ix_cache */
struct spans_state {
	struct u64map span_idx;
	/* span_idx's answers by call path, direct-mapped (a loop's spans come
	 * from a few call paths): {call path + 1 (0: empty), index} */
	struct { uint64_t cp1, ix; } ix_cache[SPAN_IX_CACHE];
	struct vec threads; /* struct spans_thread */
};

int spans_init(struct analysis *a);
void spans_on_span(struct analysis *a, struct an_span_ev *ev);
uint64_t spans_reread_begin(struct analysis *a);
void spans_reread_record(struct analysis *a, const struct tbp_record *r);
int spans_finish(struct analysis *a);
void spans_free(struct analysis *a);

static const struct an_pass_ops an_pass_spans = {
	.name = "spans",
	.state_size = sizeof(struct spans_state),
	.detect = 1,
	.init = spans_init,
	.on_span = spans_on_span,
	.reread_begin = spans_reread_begin,
	.reread_record = spans_reread_record,
	.finish = spans_finish,
	.free = spans_free,
};

#endif
