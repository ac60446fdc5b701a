/*
 * libtbprof core, the flight recorder (TBPROF_FLIGHT=SECONDS, `tbprof record --flight SECONDS`): the
 * process is traced as in a whole run, but the writer thread keeps what it drains in one ring of
 * records in memory, TBPROF_FLIGHT_MEM bytes at most (mapped once, its pages touched as it fills), and
 * writes nothing by itself.  A dump is the last SECONDS of records up to now, written as a complete
 * trace (every definition, the process, each live thread, a NOTICE saying why, a LOST record for what
 * the ring could not hold of that window, END):
 *   - `tbprof capture PID` (capture.c's control thread);
 *   - a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT...): the handler (lifecycle.c) asks the
 *     writer for its final drain and waits for it, bounded; the dump is written by the writer, not in
 *     the handler; then the signal proceeds;
 *   - TBPROF_FLIGHT_SLOW=F: a step (ITER_BEGIN..ITER_END marks) longer than F x the median of the
 *     last 64, once 8 have ended; at most one such dump a minute;
 *   - TBPROF_FLIGHT_STALL=S: no step ended for S seconds after one had (once per stall).
 * Only the writer thread touches the ring.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"

/* ------------------------------------------------------------ the ring (writer thread) */

static struct tbp_record *ring;
static size_t ring_cap, ring_next, ring_count;
static uint64_t dropped_in_window;   /* records overwritten while still inside the window */
static bool ring_failed;

static bool ring_ready(void)
{
	if (ring || ring_failed)
		return ring != NULL;
	ring_cap = tbp_cfg.flight_mem / sizeof *ring;
	void *m = mmap(NULL, ring_cap * sizeof *ring, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		-1, 0);
	if (m == MAP_FAILED) {
		tbp_log("flight recorder: cannot map %zu bytes: %s; nothing is kept", ring_cap * sizeof *ring,
			strerror(errno));
		ring_failed = true;
		return false;
	}
	ring = m;
	if (tbp_cfg.verbose)
		tbp_log("flight recorder: the last %.3g s, at most %zu records in %zu MiB", tbp_cfg.flight_ns / 1e9,
			ring_cap, tbp_cfg.flight_mem >> 20);
	return true;
}

void tbp_flight_append(const struct tbp_record *r, size_t n)
{
	if (!ring_ready())
		return;
	uint64_t window_start = tbp_now() - tbp_cfg.flight_ns;
	for (size_t i = 0; i < n; i++) {
		struct tbp_record *slot = &ring[ring_next];
		if (ring_count == ring_cap && slot->ts >= window_start)
			dropped_in_window++;
		*slot = r[i];
		slot->blob = NULL;   /* ring records carry none */
		slot->blob_len = 0;
		ring_next = ring_next + 1 == ring_cap ? 0 : ring_next + 1;
		if (ring_count < ring_cap)
			ring_count++;
	}
}

/* ------------------------------------------------------------ requests */

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	bool pending;
	char path[PATH_MAX];
	unsigned long long id;
	char why[160];
} req;
static unsigned dump_count;
static bool forked_child;   /* names its dumps with its pid: the plain names are its parent's */

void tbp_flight_request(const char *path, unsigned long long id, const char *why)
{
	pthread_mutex_lock(&req_lock);
	if (req.pending && req.id) {
		/* one at a time: the earlier requester gets its answer */
		pthread_mutex_unlock(&req_lock);
		tbp_capture_answer(id, "error a dump is already being written\n");
		return;
	}
	req.pending = true;
	snprintf(req.path, sizeof req.path, "%s", path ? path : "");
	req.id = id;
	snprintf(req.why, sizeof req.why, "%s", why);
	pthread_mutex_unlock(&req_lock);
	tbp_wake_writer();
}

/* ------------------------------------------------------------ the dump (writer thread) */

static int add_in_chunk(struct tbp_writer *w, const struct tbp_record *r, bool *open, uint8_t *kind, uint32_t *tid)
{
	int rc = TBP_OK;
	if (!*open || r->stream_kind != *kind || r->tid != *tid) {
		if (*open)
			rc = tbp_writer_end_chunk(w);
		*open = false;
		if (rc == TBP_OK)
			rc = tbp_writer_begin_chunk(w, r->stream_kind, r->tid);
		if (rc != TBP_OK)
			return rc;
		*open = true;
		*kind = r->stream_kind;
		*tid = r->tid;
	}
	return tbp_writer_add(w, r);
}

/* Writes the last window into `path`; 1 written, -1 failed (errno).  `last_of_each`: with each
 * stream's last record from before the window too (a stall). */
static int dump(const char *path, const char *why, bool last_of_each)
{
	/* Strings first: they are definitions, written before the records that use them. */
	uint64_t why_id = tbp_intern_string(why, strlen(why));
	struct thr {
		uint32_t tid;
		uint64_t name;
	} threads[256];
	size_t nthreads = 0;
	pthread_mutex_lock(&registry_lock);
	for (struct tbp_tbuf *b = registry; b && nthreads < 256; b = b->next)
		threads[nthreads++].tid = b->tid;
	pthread_mutex_unlock(&registry_lock);
	for (size_t i = 0; i < nthreads; i++) {
		char p[64], name[32] = "";
		snprintf(p, sizeof p, "/proc/self/task/%u/comm", (unsigned)threads[i].tid);
		FILE *f = fopen(p, "re");
		if (f) {
			if (!fgets(name, sizeof name, f))
				name[0] = 0;
			fclose(f);
		}
		name[strcspn(name, "\n")] = 0;
		threads[i].name = tbp_intern_string(name, strlen(name));
	}

	snprintf(capture_out, sizeof capture_out, "%s", path);
	int fd = tbp_open_output();
	capture_out[0] = 0;
	if (fd < 0)
		return -1;
	struct tbp_writer *w = NULL;
	struct tbp_writer_opts opts = { .compression_level = 0, .features = trace_features };
	if (tbp_writer_open_fd(&w, fd, &opts) != TBP_OK)
		return -1;
	uint64_t records = 0;
	int rc = tbp_writer_begin_chunk(w, TBP_STREAM_DEFS, 0);
	pthread_mutex_lock(&def_lock);
	size_t ndefs = def_count;
	pthread_mutex_unlock(&def_lock);
	for (size_t i = 0; rc == TBP_OK && i < ndefs; i++) {
		pthread_mutex_lock(&def_lock);
		struct tbp_def *d = def_hist[i];
		pthread_mutex_unlock(&def_lock);
		struct tbp_record def;
		def_record(d, &def);
		rc = tbp_writer_add(w, &def);
		records++;
	}
	if (rc == TBP_OK) {
		rc = tbp_writer_add(w, &process_rec);
		records++;
	}
	if (rc == TBP_OK)
		rc = tbp_writer_end_chunk(w);

	uint64_t now = tbp_now(), window_start = now - tbp_cfg.flight_ns;
	bool open = false;
	uint8_t kind = 0;
	uint32_t tid = 0;
	for (size_t i = 0; rc == TBP_OK && i < nthreads; i++) {
		struct tbp_record t = { .kind = TBP_K_THREAD, .stream_kind = TBP_STREAM_THREAD };
		t.tid = threads[i].tid;
		t.ts = window_start;
		t.u.thread.tid = threads[i].tid;
		t.u.thread.name = threads[i].name;
		rc = add_in_chunk(w, &t, &open, &kind, &tid);
		records++;
	}
	/* Before the window: each stream's last record (a thread's last call and its Python stack, a GPU
	 * stream's last work), so a hang longer than the window still shows where each one stopped. */
	size_t first = ring_count < ring_cap ? 0 : ring_next;
	static size_t last_before[512];
	size_t nlast = 0;
	for (size_t k = ring_count; last_of_each && k-- > 0 && nlast < 512;) {
		size_t at = (first + k) % ring_cap;
		const struct tbp_record *r = &ring[at];
		if (r->ts >= window_start || r->kind == TBP_K_THREAD || r->kind == TBP_K_LOST)
			continue;
		bool seen = false;
		for (size_t j = 0; j < nlast && !seen; j++)
			seen = ring[last_before[j]].stream_kind == r->stream_kind && ring[last_before[j]].tid == r->tid;
		if (!seen)
			last_before[nlast++] = at;
	}
	for (size_t j = nlast; rc == TBP_OK && j-- > 0;) {
		rc = add_in_chunk(w, &ring[last_before[j]], &open, &kind, &tid);
		records++;
	}
	for (size_t k = 0; rc == TBP_OK && k < ring_count; k++) {
		const struct tbp_record *r = &ring[(first + k) % ring_cap];
		if (r->ts < window_start || r->kind == TBP_K_THREAD)
			continue;
		rc = add_in_chunk(w, r, &open, &kind, &tid);
		records++;
	}
	struct tbp_record note = { .kind = TBP_K_NOTICE, .stream_kind = TBP_STREAM_THREAD };
	note.tid = (uint32_t)getpid();
	note.ts = now;
	note.u.notice.level = TBP_NOTE_INFO;
	note.u.notice.code = TBP_NOTICE_TEXT;
	note.u.notice.message = why_id;
	if (rc == TBP_OK) {
		rc = add_in_chunk(w, &note, &open, &kind, &tid);
		records++;
	}
	if (rc == TBP_OK && dropped_in_window) {
		struct tbp_record lost = { .kind = TBP_K_LOST, .stream_kind = TBP_STREAM_THREAD };
		lost.tid = (uint32_t)getpid();
		lost.ts = now;
		lost.u.lost.count = dropped_in_window;
		lost.u.lost.source = TBP_LOST_BUFFER_FULL;
		rc = add_in_chunk(w, &lost, &open, &kind, &tid);
		records++;
	}
	if (open && rc == TBP_OK)
		rc = tbp_writer_end_chunk(w);
	if (rc == TBP_OK && tbp_writer_begin_chunk(w, TBP_STREAM_DEFS, 0) == TBP_OK) {
		struct tbp_record end = { .kind = TBP_K_END, .stream_kind = TBP_STREAM_DEFS };
		end.ts = tbp_now();
		end.u.end.records = records;
		end.u.end.lost = dropped_in_window;
		rc = tbp_writer_add(w, &end);
		if (rc == TBP_OK)
			rc = tbp_writer_end_chunk(w);
	}
	int crc = tbp_writer_close(w);
	if (rc == TBP_OK)
		rc = crc;
	if (dropped_in_window)
		tbp_log("flight recorder: %llu records of the last %.3g s did not fit in %zu MiB (TBPROF_FLIGHT_MEM)",
			(unsigned long long)dropped_in_window, tbp_cfg.flight_ns / 1e9, tbp_cfg.flight_mem >> 20);
	if (rc != TBP_OK) {
		errno = EIO;
		return -1;
	}
	return 1;
}

static void dump_as_asked(const char *path_asked, unsigned long long id, const char *why)
{
	char path[PATH_MAX];
	if (path_asked && path_asked[0])
		snprintf(path, sizeof path, "%s", path_asked);
	else {
		char tag[24];
		snprintf(tag, sizeof tag, "%d", (int)getpid());
		tbp_capture_default_path(path, sizeof path, "flight", ++dump_count, forked_child ? tag : NULL);
	}
	int r = dump(path, why, strstr(why, "a stall") != NULL);
	char msg[PATH_MAX + 80];
	if (r > 0)
		snprintf(msg, sizeof msg, "ok %s\n", path);
	else
		snprintf(msg, sizeof msg, "error cannot write %s: %s\n", path, strerror(errno));
	tbp_capture_answer(id, msg);
	if (!id || tbp_cfg.verbose || r < 0)
		tbp_log("flight recorder: %s %s (%s)", r > 0 ? "wrote" : "could not write", path, why);
}

/* The request the current drain answers, taken before it snapshots the threads' rings (writer thread
 * only).  A request made after that snapshot waits for the next drain (its wake makes that one come at
 * once): what its thread recorded before asking (a slow step's end mark, which is what made the step
 * slow) may have missed this drain's snapshot, and a dump cut now would lack it. */
static struct {
	bool pending;
	char path[PATH_MAX];
	unsigned long long id;
	char why[160];
} claimed;

void tbp_flight_claim(void)
{
	if (claimed.pending)
		return;
	pthread_mutex_lock(&req_lock);
	if (req.pending) {
		claimed.pending = true;
		snprintf(claimed.path, sizeof claimed.path, "%s", req.path);
		claimed.id = req.id;
		snprintf(claimed.why, sizeof claimed.why, "%s", req.why);
		req.pending = false;
		req.id = 0;
	}
	pthread_mutex_unlock(&req_lock);
}

void tbp_flight_service(bool final)
{
	if (claimed.pending) {
		claimed.pending = false;
		dump_as_asked(claimed.path, claimed.id, claimed.why);
		claimed.id = 0;
	}
	if (final) {
		/* No drain follows: one asked for during this one is answered now, not left waiting. */
		tbp_flight_claim();
		if (claimed.pending) {
			claimed.pending = false;
			dump_as_asked(claimed.path, claimed.id, claimed.why);
			claimed.id = 0;
		}
	}
	int sig = atomic_load(&signal_pending);
	if (final && sig) {
		/* Dying of a signal: whatever it is, the minutes before it are what the recorder is for. */
		char text[96];
		snprintf(text, sizeof text, "flight recorder: the process died of signal %d (%s)", sig, strsignal(sig));
		dump_as_asked(NULL, 0, text);
	}
}

/* ------------------------------------------------------------ slow steps, stalls */

#define STEP_HISTORY 64
static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t step_begin_ns, last_step_end_ns, last_slow_dump_ns;
static uint64_t step_len[STEP_HISTORY];
static unsigned step_n;
static bool stall_dumped;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void tbp_flight_step_mark(int kind)
{
	if (kind != TBP_MARK_ITER_BEGIN && kind != TBP_MARK_ITER_END)
		return;
	uint64_t now = tbp_now();
	char why[160] = "";
	pthread_mutex_lock(&step_lock);
	if (kind == TBP_MARK_ITER_BEGIN) {
		step_begin_ns = now;
	} else if (step_begin_ns) {
		uint64_t len = now - step_begin_ns;
		step_begin_ns = 0;
		last_step_end_ns = now;
		stall_dumped = false;
		if (tbp_cfg.flight_slow > 0 && step_n >= 8) {
			uint64_t sorted[STEP_HISTORY];
			unsigned n = step_n < STEP_HISTORY ? step_n : STEP_HISTORY;
			memcpy(sorted, step_len, n * sizeof *sorted);
			qsort(sorted, n, sizeof *sorted, cmp_u64);
			uint64_t median = sorted[n / 2];
			if (median && (double)len > tbp_cfg.flight_slow * (double)median &&
			    (!last_slow_dump_ns || now - last_slow_dump_ns >= 60000000000ull)) {
				last_slow_dump_ns = now;
				snprintf(why, sizeof why, "flight recorder: a slow step: %.3f ms, %.1fx the median %.3f ms "
					"of the last %u", len / 1e6, (double)len / (double)median, median / 1e6, n);
			}
		}
		step_len[step_n % STEP_HISTORY] = len;
		step_n++;
	}
	pthread_mutex_unlock(&step_lock);
	if (why[0])
		tbp_flight_request(NULL, 0, why);
}

void tbp_flight_watch(void)
{
	if (!tbp_cfg.flight_stall_ns)
		return;
	uint64_t now = tbp_now();
	char why[160] = "";
	pthread_mutex_lock(&step_lock);
	if (last_step_end_ns && !stall_dumped && now - last_step_end_ns >= tbp_cfg.flight_stall_ns) {
		stall_dumped = true;
		snprintf(why, sizeof why, "flight recorder: a stall: no step ended for %.1f s (after step %u)",
			(now - last_step_end_ns) / 1e9, step_n);
	}
	pthread_mutex_unlock(&step_lock);
	if (why[0]) {
		/* Where the threads are blocked now: recorded before the request, so the dump's drain
		 * takes them (the last records from before the window only say where they last called). */
		tbp_py_stall_stacks();
		tbp_flight_request(NULL, 0, why);
	}
}

void tbp_flight_fork_child(void)
{
	ring_next = ring_count = 0;
	dropped_in_window = 0;
	forked_child = true;
	dump_count = 0;
	pthread_mutex_init(&req_lock, NULL);
	pthread_mutex_init(&step_lock, NULL);
	req.pending = false;
	req.id = 0;
	claimed.pending = false;
	claimed.id = 0;
	step_begin_ns = last_step_end_ns = last_slow_dump_ns = 0;
	step_n = 0;
	stall_dumped = false;
}
