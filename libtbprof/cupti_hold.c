/*
 * GPU records written in start-time order, whatever order CUPTI hands them over in.
 *
 * CUPTI keeps device records in per-stream buffers and hands a buffer over when it is full or
 * flushed: under load the records of one stream arrive after later records of another (up to
 * 10 695 out of order on an H100, issue #19).  Each GPU record waits in a min-heap by start time
 * (then arrival) for HOLD_NS after it arrived, or until a forced flush has delivered everything,
 * or until the heap is full; it is joined when it arrives and again when it is written.
 * Only touched under the consumer's processing lock.
 *
 * Written in order means one ring at a time: records leave the heap on whichever thread runs
 * the release (CUPTI's delivery thread, our flusher, a forced flush), each into its own ring,
 * and the writer drains ring after ring, so a later thread's records could reach the file
 * before an earlier thread's were drained.  On a loaded machine the writer falls behind and
 * that happened 63 k times in 450 k kernels (out of order by up to 260 ms, enough to put a
 * long idle gap inside a kernel burst).  So a thread that takes over waits until what the
 * previous one wrote is drained.
 */
#include "tbp_config.h"

#if TBP_HAVE_CUPTI
#include <stdlib.h>
#include <string.h>

#include "core_priv.h"
#include "cupti_internal.h"

#define HOLD_NS 1000000000ull
#define HOLD_MAX (1u << 16)         /* records held at most (176 bytes each: 11 MiB) */
#define GPU_ONLY_RING_BYTES (1u << 20)   /* the ring of a thread that carries only GPU records */
/* How long a thread taking over the writing waits for the previous one's records to be
 * drained (a writer round; far longer only when the writer is stuck, then order is lost). */
#define HANDOVER_WAIT_MS 2000

/* A GPU record as it waits: struct tbp_record without the blob (GPU records have none), with
 * cupti_corr in the header's padding: 176 bytes, not the 192 of a whole record and these. */
struct held {
	uint8_t kind, stream_kind;
	uint16_t nfields;
	uint32_t tid;
	uint32_t cupti_corr;
	uint64_t ts;
	uint64_t v[TBP_MAX_FIELDS];
	uint64_t arrived, seq;
	uint64_t joined;         /* its join when it arrived (the map slot may be reused by the time it goes out) */
};
static struct held *hold;
static size_t n_hold, cap_hold;
static uint64_t hold_seq;
static uint64_t forced_out;      /* written before HOLD_NS because the heap was full */
static __thread char writing_thread_mark;   /* its address tells the threads apart */
static const char *last_writer;  /* the thread that wrote the last GPU record */

uint64_t tbp_cupti_hold_forced_out(void)
{
	return forced_out;
}

/* A thread with no ring yet has recorded nothing of the program's: CUPTI's delivery thread or our
 * flusher, which carry the consumer's records alone -- GPU records, patiently (tbp_emit_patient waits
 * for the writer rather than drop them) after they waited here already, and CUPTI's LOST notes.  Each
 * got a whole TBPROF_BUFFER_SIZE ring, filled under load: 2 x 8 MiB of the CUPTI-on launch loop's
 * +76 MiB.  Called where such a thread starts our work (buffer_completed, flusher_main), not only
 * before a held record: on a fast host the flusher's first record was CUPTI's LOST note
 * (check_dropped), which gave it 8 MiB again (+69.5 MiB over 2 M launches); here too, for a forced
 * flush on a thread that has recorded nothing yet. */
void tbp_cupti_consumer_ring(void)
{
	if (!tbp_tls_buf)
		tbp_tls_ring_limit = GPU_ONLY_RING_BYTES;
}

static inline int held_before(const struct held *a, const struct held *b)
{
	return a->ts != b->ts ? a->ts < b->ts : a->seq < b->seq;
}

static void hold_write_first(void)
{
	struct held top = hold[0];
	/* pop: the last element sifts down from the root */
	struct held last = hold[--n_hold];
	size_t at = 0;
	for (;;) {
		size_t l = 2 * at + 1, r = l + 1, min = at;
		const struct held *mv = &last;
		if (l < n_hold && held_before(&hold[l], mv))
			min = l, mv = &hold[l];
		if (r < n_hold && held_before(&hold[r], mv))
			min = r;
		if (min == at)
			break;
		hold[at] = hold[min];
		at = min;
	}
	if (n_hold)
		hold[at] = last;

	tbp_cupti_consumer_ring();
	if (last_writer != &writing_thread_mark) {
		if (last_writer)
			tbp_drain_now(HANDOVER_WAIT_MS);
		last_writer = &writing_thread_mark;
	}
	struct tbp_record rec = { .kind = top.kind, .stream_kind = top.stream_kind, .nfields = top.nfields,
		.tid = top.tid, .ts = top.ts };
	memcpy(rec.u.v, top.v, sizeof rec.u.v);
	/* corr is at the same place in every GPU kind */
	rec.u.gpu_kernel.corr = tbp_cupti_join_final(top.cupti_corr, top.joined);
	tbp_emit_patient(&rec);
}

void tbp_cupti_hold_add(const struct tbp_record *rec, uint32_t cupti_corr, uint64_t now)
{
	if (n_hold == cap_hold) {
		size_t cap = cap_hold ? cap_hold * 2 : 1024;
		struct held *h = cap <= HOLD_MAX ? realloc(hold, cap * sizeof *h) : NULL;
		if (h) {
			hold = h;
			cap_hold = cap;
		} else {
			/* Full (or no memory): the earliest goes out now. */
			forced_out++;
			hold_write_first();
		}
	}
	size_t at = n_hold++;
	_Static_assert(sizeof(struct held) == 176, "a held record's size is the memory bound's (doc/launcher.md)");
	struct held e = { .kind = rec->kind, .stream_kind = rec->stream_kind, .nfields = rec->nfields,
		.tid = rec->tid, .cupti_corr = cupti_corr, .ts = rec->ts, .arrived = now, .seq = hold_seq++,
		.joined = tbp_cupti_join(cupti_corr) };
	memcpy(e.v, rec->u.v, sizeof e.v);
	while (at) {
		size_t up = (at - 1) / 2;
		if (!held_before(&e, &hold[up]))
			break;
		hold[at] = hold[up];
		at = up;
	}
	hold[at] = e;
}

void tbp_cupti_hold_release(int all)
{
	uint64_t now = tbp_now();
	while (n_hold && (all || hold[0].arrived + HOLD_NS <= now))
		hold_write_first();
}

#endif /* TBP_HAVE_CUPTI */
