/*
 * libtbprof core, the one writer thread: drains every ring in time order into the trace
 * writer, flushes on request, and the final drain at exit.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

/* ------------------------------------------------------------ writer thread */

struct tbp_writer *writer;
pthread_t writer_thread;
atomic_int writer_stop;        /* 1: final drain and exit */
atomic_int writer_exited;      /* futex word: 1 when finished */
atomic_int signal_pending;     /* signal number whose handler waits */
atomic_int drain_seq;          /* futex word: bumped after each drain */
uint64_t records_written;
/* Did any thread record an event (anything but its THREAD announcement)?
 * A trace without one holds only the header and the process's
 * definitions: nothing to analyze, so the file is removed at the end
 * (a launcher script's helper, a Python process that did nothing). */
bool events_written;
bool process_written;
static int write_error_warned;

struct snap {
	struct tbp_tbuf *b;
	uint64_t head;
	int retired;
};
static struct snap *snaps;
static size_t snaps_cap;

static void writer_fail(int rc)
{
	tbp_warn_once(&write_error_warned, "writing %s failed (%s); tracing stops", tbp_output_path(),
		tbp_error_name(rc));
	TBP_SET_ACTIVE(0);
}

static int write_defs(void)
{
	int rc = TBP_OK;
	if (tbp_cfg.flight_ns)
		return rc;   /* the flight recorder writes them into each dump */
	pthread_mutex_lock(&def_lock);
	size_t upto = def_count;
	pthread_mutex_unlock(&def_lock);
	/* def_hist entries below def_count are immutable; the array may be
	 * reallocated, so index it under the lock each time. */
	if (upto > def_written || !process_written) {
		rc = tbp_writer_begin_chunk(writer, TBP_STREAM_DEFS, 0);
		for (size_t i = def_written; rc == TBP_OK && i < upto; i++) {
			pthread_mutex_lock(&def_lock);
			struct tbp_def *d = def_hist[i];
			pthread_mutex_unlock(&def_lock);
			struct tbp_record def;
			def_record(d, &def);
			rc = tbp_writer_add(writer, &def);
			records_written++;
		}
		if (rc == TBP_OK && !process_written) {
			rc = tbp_writer_add(writer, &process_rec);
			records_written++;
			process_written = true;
		}
		if (rc == TBP_OK)
			rc = tbp_writer_end_chunk(writer);
		def_written = upto;
	}
	return rc;
}

/* Records the writer decodes from a ring before it hands them over: a
 * run of one stream's records (LOST and THREAD go alone). */
#define WRITE_BATCH 64
static struct tbp_record batch[WRITE_BATCH];

struct ring_out {
	bool open_chunk;
	uint8_t cur_kind;
	uint32_t cur_tid;
};

static int write_batch(struct tbp_tbuf *b, struct ring_out *o, const struct tbp_record *r, size_t n)
{
	int rc = TBP_OK;
	if (tbp_cfg.flight_ns) {
		if (r->kind == TBP_K_LOST && r->u.lost.source == TBP_LOST_BUFFER_FULL)
			b->lost_reported += r->u.lost.count;
		tbp_flight_append(r, n);
		return TBP_OK;
	}
	if (!o->open_chunk || r->stream_kind != o->cur_kind || r->tid != o->cur_tid) {
		if (o->open_chunk)
			rc = tbp_writer_end_chunk(writer);
		o->open_chunk = false;
		if (rc != TBP_OK)
			return rc;
		o->cur_kind = r->stream_kind;
		o->cur_tid = r->tid;
		rc = tbp_writer_begin_chunk(writer, o->cur_kind, o->cur_tid);
		if (rc != TBP_OK)
			return rc;
		o->open_chunk = true;
	}
	if (r->kind == TBP_K_LOST && r->u.lost.source == TBP_LOST_BUFFER_FULL)
		b->lost_reported += r->u.lost.count;
	rc = n == 1 ? tbp_writer_add(writer, r) : tbp_writer_add_batch(writer, r, n);
	records_written += n;
	if (r->kind != TBP_K_THREAD)
		events_written = true;
	return rc;
}

/* May r go to the trace writer in one batch with `first`?  One stream's
 * records; LOST (its count is taken from each) and THREAD go alone. */
static bool joins(const struct tbp_record *first, const struct tbp_record *r)
{
	return r->stream_kind == first->stream_kind && r->tid == first->tid && r->kind != TBP_K_LOST &&
	       r->kind != TBP_K_THREAD && first->kind != TBP_K_LOST && first->kind != TBP_K_THREAD;
}

/* Records in b's ring between two positions. */
static uint64_t ring_records(const struct tbp_tbuf *b, uint64_t tail, uint64_t head)
{
	uint64_t mask = atomic_load_explicit(&b->mask, memory_order_relaxed), n = 0;
	while (tail < head) {
		uint64_t len = tbp_ring_units_at(&b->units[tail & mask]);
		if (!tbp_ring_is_pad(&b->units[tail & mask]))
			n++;
		tail += len ? len : head - tail;
	}
	return n;
}

/* The THREAD record of b's thread (its name as the kernel has it now). */
static int thread_record(struct tbp_tbuf *b, struct ring_out *o)
{
	char path[64], name[32] = "";
	snprintf(path, sizeof path, "/proc/self/task/%u/comm", (unsigned)b->tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, name, sizeof name - 1);
		close(fd);
		name[n > 0 ? n : 0] = 0;
		name[strcspn(name, "\n")] = 0;
	}
	struct tbp_record rec = { .kind = TBP_K_THREAD, .stream_kind = TBP_STREAM_THREAD };
	rec.tid = b->tid;
	rec.ts = tbp_now();
	rec.u.thread.tid = b->tid;
	rec.u.thread.name = tbp_intern_string(name, strlen(name));
	/* the name's definition goes out before the record */
	int rc = write_defs();
	return rc == TBP_OK ? write_batch(b, o, &rec, 1) : rc;
}

/* Writes a ring's records from tail to head.  `last`: the thread will not
 * record again (it exited, or this is the final drain), so drops it never
 * got to report in a LOST record of its own are reported here. */
static int write_ring(struct tbp_tbuf *b, uint64_t head, bool last)
{
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_relaxed);
	/* After the head (acquired by the caller): right for every record up to it. */
	uint64_t mask = atomic_load_explicit(&b->mask, memory_order_relaxed);
	int rc = TBP_OK;
	struct ring_out o = { 0 };
	size_t n = 0;
	bool first_packed = false;   /* batch[0] came packed: packed records always join */
	if (b->file_gen != capture_gen) {
		/* A capture's file: the thread announced itself in an earlier one. */
		b->file_gen = capture_gen;
		rc = thread_record(b, &o);
	}
	while (tail < head && rc == TBP_OK) {
		const struct tbp_unit *u = &b->units[tail & mask];
		uint64_t len = tbp_ring_units_at(u);
		tail += len;
		if (tbp_ring_is_pad(u))
			continue;
		bool packed = len < TBP_RING_FULL_UNITS;
		struct tbp_record *r = &batch[n];
		tbp_ring_decode(u, (unsigned)len, b->tid, r);
		if (n && !(packed && first_packed) && !joins(&batch[0], r)) {
			rc = write_batch(b, &o, batch, n);
			batch[0] = *r;
			n = 0;
		}
		if (n == 0)
			first_packed = packed;
		if (++n == WRITE_BATCH && rc == TBP_OK) {
			rc = write_batch(b, &o, batch, n);
			n = 0;
		}
	}
	if (n && rc == TBP_OK)
		rc = write_batch(b, &o, batch, n);
	uint64_t unreported = atomic_load_explicit(&b->lost_total, memory_order_acquire) - b->lost_reported;
	if (last && unreported && rc == TBP_OK) {
		struct tbp_record l = { .kind = TBP_K_LOST, .stream_kind = TBP_STREAM_THREAD };
		l.tid = b->tid;
		l.ts = tbp_now();
		l.u.lost.count = unreported;
		l.u.lost.source = TBP_LOST_BUFFER_FULL;
		l.u.lost.since_ts = 0;   /* first drop time is the producer's */
		rc = write_batch(b, &o, &l, 1);
	}
	if (o.open_chunk && rc == TBP_OK)
		rc = tbp_writer_end_chunk(writer);
	/* Even on error the slots are released: the producer must never block. */
	atomic_store_explicit(&b->tail, head, memory_order_release);
	return rc;
}

void drain_once(bool final)
{
	/* 1. Snapshot every ring's committed position (after taking the flight recorder's request: what
	 * the asker recorded before asking is then inside the snapshot). */
	if (tbp_cfg.flight_ns)
		tbp_flight_claim();
	size_t n = 0;
	pthread_mutex_lock(&registry_lock);
	for (struct tbp_tbuf *b = registry; b; b = b->next) {
		if (n == snaps_cap) {
			size_t ncap = snaps_cap ? snaps_cap * 2 : 64;
			struct snap *s = realloc(snaps, ncap * sizeof *s);
			if (!s)
				break;
			snaps = s;
			snaps_cap = ncap;
		}
		snaps[n].b = b;
		snaps[n].retired = atomic_load_explicit(&b->retired, memory_order_acquire);
		snaps[n].head = atomic_load_explicit(&b->head, memory_order_acquire);
		n++;
	}
	pthread_mutex_unlock(&registry_lock);
	if (!writer && !tbp_cfg.flight_ns)
		return;
	if (!tbp_cfg.flight_ns && !out_still_ours()) {
		/* The program closed our descriptor (its number may now be one of
		 * its files): drop what is pending, never write there again. */
		uint64_t dropped = 0;
		for (size_t i = 0; i < n; i++) {
			struct tbp_tbuf *b = snaps[i].b;
			dropped += ring_records(b, atomic_load_explicit(&b->tail, memory_order_relaxed), snaps[i].head);
			atomic_store_explicit(&b->tail, snaps[i].head, memory_order_release);
		}
		atomic_fetch_add(&lost_total_all, dropped);
		TBP_SET_ACTIVE(0);
		tbp_output_warn_gone(dropped);
		/* The writer's buffers are abandoned: closing or flushing it would
		 * touch a descriptor that is no longer ours. */
		writer = NULL;
		return;
	}
	/* 2. Definitions queued before those commits. */
	int rc = write_defs();
	/* 3. Each thread's records. */
	for (size_t i = 0; i < n && rc == TBP_OK; i++)
		rc = write_ring(snaps[i].b, snaps[i].head, final || snaps[i].retired);
	if (tbp_cfg.flight_ns) {
		tbp_flight_service(final);
	} else if (rc == TBP_OK && final) {
		if (tbp_writer_begin_chunk(writer, TBP_STREAM_DEFS, 0) == TBP_OK) {
			struct tbp_record end = { .kind = TBP_K_END, .stream_kind = TBP_STREAM_DEFS };
			end.ts = tbp_now();
			end.u.end.records = records_written;
			end.u.end.lost = atomic_load(&lost_total_all);
			tbp_writer_add(writer, &end);
			tbp_writer_end_chunk(writer);
		}
	}
	if (rc == TBP_OK && !tbp_cfg.flight_ns)
		rc = out_still_ours() ? tbp_writer_flush(writer) : TBP_ERR_IO;
	if (rc != TBP_OK)
		writer_fail(rc);
	/* 4. Free the rings of exited threads once fully written. */
	for (size_t i = 0; i < n; i++) {
		struct tbp_tbuf *b = snaps[i].b;
		if (!snaps[i].retired || atomic_load_explicit(&b->head, memory_order_acquire) != snaps[i].head)
			continue;
		pthread_mutex_lock(&registry_lock);
		for (struct tbp_tbuf **pp = &registry; *pp; pp = &(*pp)->next)
			if (*pp == b) {
				*pp = b->next;
				break;
			}
		pthread_mutex_unlock(&registry_lock);
		munmap(b, b->map_bytes);
	}
}

/* Wait budget left to this thread, reset once its ring has room again. */
static __thread uint64_t patient_budget_ns = TBP_PATIENT_WAIT_MS * 1000000ull;

void tbp_emit_patient(const struct tbp_record *src)
{
	struct tbp_tbuf *b = tbp_tls_buf;
	if (b && (TBP_ACTIVE() || atomic_load(&capture_closing)) && tbp_ring_would_drop(b)) {
		while (patient_budget_ns && tbp_ring_would_drop(b) && !atomic_load(&writer_exited) &&
		       !atomic_load(&signal_pending)) {
			tbp_ring_pressure(b);
			struct timespec nap = { 0, 50000 };
			uint64_t t0 = tbp_now();
			nanosleep(&nap, NULL);
			uint64_t spent = tbp_now() - t0;
			patient_budget_ns = spent < patient_budget_ns ? patient_budget_ns - spent : 0;
		}
	} else {
		patient_budget_ns = TBP_PATIENT_WAIT_MS * 1000000ull;
	}
	tbp_emit(src);
}

pthread_mutex_t writer_busy_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_int writer_running;

void *tbp_writer_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "tbprof-writer");
	tbp_tls_guard = 1;   /* nothing this thread does is traced */
	atomic_store(&writer_running, 1);
	futex_wake_all(&writer_running);
	for (;;) {
		if (!atomic_load(&writer_stop) && !atomic_load(&signal_pending))
			futex_wait(&writer_wake, 0, 100);
		atomic_store(&writer_wake, 0);
		bool stop = atomic_load(&writer_stop) || atomic_load(&signal_pending);
		/* Held while the writer works (it allocates: zstd, buffers), so a fork
		 * waits for the drain to end rather than copy a lock inside malloc
		 * that this thread holds (ASan's allocator has no fork handler: the
		 * child's first malloc hung; host_fork failed 3 in 32 runs). */
		pthread_mutex_lock(&writer_busy_lock);
		tsc_recalibrate();
		drain_once(stop);
		pthread_mutex_unlock(&writer_busy_lock);
		atomic_fetch_add(&drain_seq, 1);
		futex_wake_all(&drain_seq);
		if (stop)
			break;
	}
	if (writer && out_still_ours()) {
		tbp_writer_close(writer);
		tbp_output_remove_if_empty(events_written);
	}
	writer = NULL;
	tbp_output_forget();
	atomic_store(&writer_exited, 1);
	futex_wake_all(&writer_exited);
	return NULL;
}

void tbp_drain_now(unsigned timeout_ms)
{
	if (atomic_load(&tbp_start_state) != 2 || atomic_load(&writer_exited))
		return;
	int seq = atomic_load(&drain_seq);
	/* One drain may already be under way with an older snapshot: wait for
	 * two completions so the one that follows our request is included. */
	uint64_t deadline = tbp_now() + (uint64_t)timeout_ms * 1000000ull;
	atomic_store(&writer_wake, 1);
	futex_wake_all(&writer_wake);
	for (;;) {
		int cur = atomic_load(&drain_seq);
		if (cur - seq >= 2 || atomic_load(&writer_exited))
			return;
		uint64_t now = tbp_now();
		if (now >= deadline)
			return;
		if (cur - seq == 1) {
			atomic_store(&writer_wake, 1);
			futex_wake_all(&writer_wake);
		}
		futex_wait(&drain_seq, cur, (unsigned)((deadline - now) / 1000000ull) + 1);
	}
}
