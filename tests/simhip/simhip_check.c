/*
 * simhip self-check: the ground truth written while hip_workload ran is
 * consistent with what the program saw and with HIP's stream semantics.
 *
 *   simhip_check TRUTH CALLS
 *
 * 1. Every successful call in CALLS (the program's own log) of an API that
 *    simhip logs has exactly one truth line, per API (graph launches count
 *    once; their kernels are graph_kernel lines).
 * 2. Per stream, device operations are in issue order and never overlap.
 * 3. The null stream is blocking: its work starts after earlier work on
 *    every blocking stream ended, and work on a blocking stream starts after
 *    earlier null-stream work ended.  Non-blocking streams are independent.
 * 4. A synchronize call returns no earlier than the work it waited for.
 * Exit 0 when all hold; 1 with one line per violation otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "truth.h"

static int failures;

#define FAIL(...)                                                                             \
	do {                                                                                  \
		fprintf(stderr, "simhip_check: " __VA_ARGS__);                                \
		fputc('\n', stderr);                                                          \
		failures++;                                                                   \
	} while (0)

/* APIs whose successful calls simhip writes one truth line for. */
static const char *const logged_apis[] = {
	"hipLaunchKernel", "hipModuleLaunchKernel", "hipExtLaunchKernel",
	"hipLaunchCooperativeKernel", "hipGraphLaunch", "hipMemcpy", "hipMemcpyAsync",
	"hipMemcpyHtoD", "hipMemcpyDtoH", "hipMemcpyDtoD", "hipMemcpyHtoDAsync",
	"hipMemcpyDtoHAsync", "hipMemcpyDtoDAsync", "hipMemset", "hipMemsetAsync", "hipMemsetD32",
	"hipMemsetD8Async", "hipMalloc", "hipMallocManaged", "hipHostMalloc", "hipFree",
	"hipHostFree", "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize",
	"hipStreamCreate", "hipStreamCreateWithFlags", "hipStreamDestroy", "hipLaunchKernel_spt",
	"hipMemcpy_spt", "hipMemcpyAsync_spt", "hipMemset_spt", "hipStreamSynchronize_spt",
};

static int is_blocking(const struct truth *t, uint64_t stream)
{
	if (!stream)
		return 1;
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->ops[i].op, "stream_create") && t->ops[i].stream == stream)
			return !(t->ops[i].flags & 1);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: simhip_check TRUTH CALLS\n");
		return 3;
	}
	struct truth t;
	if (truth_load(&t, argv[1]))
		return 2;
	FILE *calls = fopen(argv[2], "r");
	if (!calls) {
		fprintf(stderr, "%s: cannot open\n", argv[2]);
		return 2;
	}

	/* 1. counts per API */
	size_t napis = sizeof logged_apis / sizeof *logged_apis;
	long want[64] = { 0 }, got[64] = { 0 };
	char api[64];
	int result;
	long ncalls = 0;
	while (fscanf(calls, "%63s %d", api, &result) == 2) {
		ncalls++;
		for (size_t i = 0; i < napis; i++)
			if (!strcmp(api, logged_apis[i]) && result == 0)
				want[i]++;
	}
	fclose(calls);
	if (!ncalls)
		FAIL("%s: no calls logged", argv[2]);
	for (size_t k = 0; k < t.n; k++) {
		const struct truth_op *o = &t.ops[k];
		if (o->result || !strcmp(o->op, "graph_kernel") || !strcmp(o->op, "register"))
			continue;
		for (size_t i = 0; i < napis; i++)
			if (!strcmp(o->api, logged_apis[i]))
				got[i]++;
	}
	for (size_t i = 0; i < napis; i++)
		if (want[i] != got[i])
			FAIL("%s: program made %ld successful calls, truth has %ld", logged_apis[i],
			     want[i], got[i]);

	/* 2 and 3: timeline */
	long device_ops = 0;
	for (size_t k = 0; k < t.n; k++) {
		const struct truth_op *o = &t.ops[k];
		if (!truth_is_device_op(o))
			continue;
		device_ops++;
		if (o->end < o->start)
			FAIL("line %d: ends before it starts", o->line);
		int blocking = is_blocking(&t, o->stream);
		for (size_t j = 0; j < k; j++) {
			const struct truth_op *p = &t.ops[j];
			if (!truth_is_device_op(p))
				continue;
			int ordered = p->stream == o->stream ||
				      (blocking && is_blocking(&t, p->stream) &&
				       (o->stream == 0 || p->stream == 0));
			if (ordered && o->start < p->end)
				FAIL("line %d (stream %#llx) starts %llu ns before line %d (stream %#llx) ends",
				     o->line, (unsigned long long)o->stream,
				     (unsigned long long)(p->end - o->start), p->line,
				     (unsigned long long)p->stream);
		}
	}
	if (!device_ops)
		FAIL("no device operations in the truth");

	/* 4: synchronization waited long enough */
	long syncs = 0;
	for (size_t k = 0; k < t.n; k++) {
		const struct truth_op *o = &t.ops[k];
		if (strcmp(o->op, "sync"))
			continue;
		syncs++;
		if (o->end < o->until)
			FAIL("line %d: %s returned %llu ns before the work it waits for ended", o->line,
			     o->api, (unsigned long long)(o->until - o->end));
		/* Everything the synchronized scope held before the call is done by `until`. */
		for (size_t j = 0; j < k; j++) {
			const struct truth_op *p = &t.ops[j];
			if (!truth_is_device_op(p))
				continue;
			int covered = !strcmp(o->kind, "device") ||
				      (!strcmp(o->kind, "stream") && p->stream == o->handle);
			if (covered && p->end > o->until && p->issued < o->start)
				FAIL("line %d: %s waited until %llu but line %d ends at %llu", o->line,
				     o->api, (unsigned long long)o->until, p->line,
				     (unsigned long long)p->end);
		}
	}
	if (!syncs)
		FAIL("no synchronization in the truth");

	free(t.ops);
	if (failures)
		return 1;
	printf("simhip_check: %ld calls, %zu truth lines, %ld device operations, %ld syncs: consistent\n",
	       ncalls, t.n, device_ops, syncs);
	return 0;
}
