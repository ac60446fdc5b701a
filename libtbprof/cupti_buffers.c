/*
 * CUPTI activity buffers under a cap (TBPROF_CUPTI_BUFFER_SIZE, total).
 *
 * CUPTI asks for a buffer whenever it has records to write and none with
 * room, and gives buffers back only when it delivers them (its own thread,
 * every few hundred ms, or a flush).  Under load -- a launch-bound loop, a
 * slow completion callback -- it asks faster than it gives back; handing out
 * a new buffer on every request let a 2 M-launch run hold hundreds of MiB.
 * Here every buffer ever allocated counts against the cap and stays in a
 * free list when it comes back, so the memory is the cap at most, whatever
 * the run's length or rate.  At the cap a request gets no buffer: CUPTI then
 * drops records and counts them (cuptiActivityGetNumDroppedRecords), which
 * cupti.c writes as LOST records of source CUPTI; the refusals themselves
 * are counted here and said once in a NOTICE.
 *
 * Requests may come from CUPTI's thread or from an application thread inside
 * a CUDA call, so the path is a short critical section; allocation happens
 * at most cap / buffer size times per process.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cupti_support.h"

#define DEFAULT_CAP_BYTES (32u << 20)
#define MAX_BUFFER_BYTES (4u << 20)    /* CUPTI's own suggestion; fewer requests than smaller ones */
#define MIN_BUFFERS 4                  /* a small cap still gives CUPTI a few buffers to rotate */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t cap_bytes, buffer_bytes; /* 0 until the first request */
static size_t allocated_bytes;         /* every buffer allocated, in use or free */
static void *free_list;                /* a free buffer's first word links to the next */
static uint64_t refused;
static int refusal_noticed;

static void configure_locked(void)
{
	if (buffer_bytes)
		return;
	cap_bytes = tbp_cfg.cupti_buffer_bytes ? tbp_cfg.cupti_buffer_bytes : DEFAULT_CAP_BYTES;
	buffer_bytes = cap_bytes / MIN_BUFFERS < MAX_BUFFER_BYTES ? cap_bytes / MIN_BUFFERS : MAX_BUFFER_BYTES;
	buffer_bytes &= ~(size_t)7; /* CUPTI wants 8-byte aligned buffers of whole words */
}

uint8_t *tbp_cupti_buffer_get(size_t *size)
{
	void *b = NULL;
	int first_refusal = 0;
	pthread_mutex_lock(&lock);
	configure_locked();
	if (free_list) {
		b = free_list;
		free_list = *(void **)b;
	} else if (allocated_bytes + buffer_bytes <= cap_bytes) {
		b = aligned_alloc(8, buffer_bytes);
		if (b)
			allocated_bytes += buffer_bytes;
	}
	if (!b) {
		refused++;
		first_refusal = !refusal_noticed;
		refusal_noticed = 1;
	}
	size_t bytes = buffer_bytes, cap = cap_bytes;
	pthread_mutex_unlock(&lock);

	if (first_refusal) {
		char msg[256];
		snprintf(msg, sizeof msg,
			 "CUPTI activity buffers reached TBPROF_CUPTI_BUFFER_SIZE (%zu bytes) with none delivered "
			 "back: CUPTI drops records until they are (counted as lost, source cupti)",
			 cap);
		tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_TEXT, msg);
	}
	*size = b ? bytes : 0;
	return b;
}

void tbp_cupti_buffer_put(uint8_t *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&lock);
	*(void **)b = free_list;
	free_list = b;
	pthread_mutex_unlock(&lock);
}

uint64_t tbp_cupti_buffers_refused(void)
{
	pthread_mutex_lock(&lock);
	uint64_t n = refused;
	pthread_mutex_unlock(&lock);
	return n;
}

size_t tbp_cupti_buffers_allocated(void)
{
	pthread_mutex_lock(&lock);
	size_t n = allocated_bytes;
	pthread_mutex_unlock(&lock);
	return n;
}

/* A forked child: another thread may have held the lock at the fork.  The buffers the parent had out
 * stay counted (the child never gets them back: it does not use CUPTI). */
void tbp_cupti_buffers_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
