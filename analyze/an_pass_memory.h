/* Pass: device memory (an_pass_memory.c): allocations, churn, memory left at
 * exit. */
#ifndef TBANALYZE_AN_PASS_MEMORY_H
#define TBANALYZE_AN_PASS_MEMORY_H

#include "an_pass.h"

/* memory: live allocations by pointer. */
struct memory_state {
	struct u64map allocs;
	struct vec alloc_pool, alloc_freelist;
};


int memory_init(struct analysis *a);
void memory_on_malloc(struct analysis *a, struct an_call_ev *e);
void memory_on_free(struct analysis *a, struct an_call_ev *e);
int memory_finish(struct analysis *a);
void memory_free_state(struct analysis *a);

static const struct an_pass_ops an_pass_memory = {
	.name = "memory",
	.state_size = sizeof(struct memory_state),
	.init = memory_init,
	.on_malloc = memory_on_malloc,
	.on_free = memory_on_free,
	.finish = memory_finish,
	.free = memory_free_state,
};

#endif
