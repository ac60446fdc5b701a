/* Control interface of tests/cupti/fake_cupti.c, a scriptable libcupti.so.13
 * for unit tests of libtbprof/cupti.c (simgpu's stand-in covers the
 * end-to-end path; this one makes the corner cases happen on demand). */
#ifndef TBP_FAKE_CUPTI_H
#define TBP_FAKE_CUPTI_H
#include <stddef.h>
#include <stdint.h>

struct fakecupti_config {
	int busy_subscribe;      /* cuptiSubscribe -> MULTIPLE_SUBSCRIBERS */
	int busy_enable;         /* cuptiActivityEnable -> MULTIPLE_SUBSCRIBERS */
	int refuse_ts_callback;  /* cuptiActivityRegisterTimestampCallback fails */
	int64_t gpu_offset_ns;   /* GPU clock = CLOCK_MONOTONIC + this (no callback) */
	size_t dropped;          /* cuptiActivityGetNumDroppedRecords reports this once */
	int ext_after;           /* EXTERNAL_CORRELATION written after its activity */
	size_t records_per_buffer; /* 0: one buffer for everything */
	unsigned start_delay_ms;   /* cuptiActivityRegisterCallbacks takes this long */
	int no_driver;             /* cudaDriverGetVersion (also exported here) says 0 */
	uint64_t shuffle_seed;     /* nonzero: each flush hands the records over in a random order
				    * (xorshift from this seed), records_per_buffer (default 3) a buffer */
};

enum fakecupti_op_kind { FAKE_KERNEL, FAKE_MEMCPY, FAKE_MEMSET, FAKE_SYNC, FAKE_PEER };
struct fakecupti_op {
	enum fakecupti_op_kind kind;
	const char *name;       /* kernel: mangled name */
	uint32_t device, context, stream;
	uint64_t start, end;    /* CLOCK_MONOTONIC ns */
	uint64_t bytes;
	uint8_t copy_kind, src_kind, dst_kind; /* CUPTI enums */
	uint32_t sync_type;
	int grid[3], block[3];
};

void fakecupti_configure(const struct fakecupti_config *c);
/* One GPU operation caused by the API call in progress on this thread:
 * returns the CUPTI correlation id given to it. */
uint32_t fakecupti_op(const struct fakecupti_op *op);
/* One API call with no GPU work (still gets a correlation id). */
uint32_t fakecupti_api_call(void);
long fakecupti_push_balance(void);   /* pushes minus pops */
long fakecupti_pushes(void);
int fakecupti_callbacks_registered(void);
int fakecupti_ts_callback_registered(void);
int fakecupti_registering(void);     /* inside a slow cuptiActivityRegisterCallbacks */
/* Calls the consumer's buffer-request callback (and never gives that buffer back by itself) /
 * completes a buffer with no records. */
uint8_t *fakecupti_request_buffer(size_t *size);
void fakecupti_complete_buffer(uint8_t *buf, size_t size);
#endif
