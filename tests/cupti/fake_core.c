/*
 * Stand-in for libtbprof's core (core.h) so cupti.c can be tested alone:
 * every emitted record is kept in memory for the test to inspect.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fake_core.h"

struct tbp_config tbp_cfg = { .enabled = true, .cupti = true };
volatile int tbp_active = 1;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
struct tbp_record *fake_records;
size_t fake_nrecords;
static size_t cap;
static char *strings[4096];
static size_t nstrings;
int fake_warnings;

static void keep(const struct tbp_record *rec)
{
	pthread_mutex_lock(&lock);
	if (fake_nrecords == cap) {
		cap = cap ? cap * 2 : 1024;
		fake_records = realloc(fake_records, cap * sizeof *fake_records);
		if (!fake_records)
			abort();
	}
	fake_records[fake_nrecords++] = *rec;
	pthread_mutex_unlock(&lock);
}

void tbp_emit(const struct tbp_record *rec) { keep(rec); }
void tbp_emit_patient(const struct tbp_record *rec) { keep(rec); }
/* cupti_hold.c asks whether the releasing thread has a ring yet (the GPU-only ring limit). */
__thread struct tbp_tbuf *tbp_tls_buf;
__thread size_t tbp_tls_ring_limit;
void tbp_emit_def(const struct tbp_record *rec) { keep(rec); }
/* Records are kept in one list as they are emitted: nothing waits to be drained. */
void tbp_drain_now(unsigned timeout_ms) { (void)timeout_ms; }

uint64_t tbp_intern_string(const char *s, size_t len)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nstrings; i++)
		if (strlen(strings[i]) == len && memcmp(strings[i], s, len) == 0) {
			pthread_mutex_unlock(&lock);
			return i + 1;
		}
	uint64_t id = 0;
	if (nstrings < 4096) {
		strings[nstrings] = strndup(s, len);
		id = ++nstrings;
	}
	pthread_mutex_unlock(&lock);
	return id;
}

const char *fake_string(uint64_t id)
{
	return id && id <= nstrings ? strings[id - 1] : "";
}

void tbp_notice(unsigned level, unsigned code, const char *message)
{
	struct tbp_record rec;
	memset(&rec, 0, sizeof rec);
	rec.kind = TBP_K_NOTICE;
	rec.ts = tbp_now();
	rec.u.notice.level = level;
	rec.u.notice.code = code;
	rec.u.notice.message = tbp_intern_string(message, strlen(message));
	keep(&rec);
}

void tbp_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tbprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void tbp_warn_once(int *flag, const char *fmt, ...)
{
	if (__atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL))
		return;
	fake_warnings++;
	va_list ap;
	va_start(ap, fmt);
	fputs("tbprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* As libtbprof's core does (lifecycle.c): cupti.c lends its fork child step at load, and the
 * core's atfork child handler calls it. */
static const struct tbp_hook_ops *registered[TBP_MAX_HOOK_OPS];
static unsigned n_registered;

static void fake_core_fork_child(void)
{
	for (unsigned i = n_registered; i-- > 0;)
		if (registered[i]->fork_child)
			registered[i]->fork_child();
}

void tbp_register_hook_ops(const struct tbp_hook_ops *ops)
{
	if (n_registered < TBP_MAX_HOOK_OPS)
		registered[n_registered++] = ops;
}

__attribute__((constructor)) static void fake_core_register_atfork(void)
{
	pthread_atfork(NULL, NULL, fake_core_fork_child);
}
