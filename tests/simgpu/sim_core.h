/*
 * Internals shared by the files of the libcudart.so.13 stand-in.
 */
#ifndef SIMGPU_SIM_CORE_H
#define SIMGPU_SIM_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"

#define SIM_MAX_DEVICES 8
#define SIM_MAX_KERNEL_OVERRIDES 32

/* Every knob: see README.md for the list, meanings and defaults. */
struct sim_config {
	uint64_t launch_ns;          /* host-side cost of each launch/enqueue (spun) */
	uint64_t queue_ns;           /* enqueue -> earliest device start */
	uint64_t kernel_base_ns;
	uint64_t kernel_ns_per_block;
	double h2d_gbps, d2h_gbps, d2d_gbps, h2h_gbps, pageable_gbps, p2p_gbps;
	uint64_t copy_latency_ns;
	double memset_gbps;
	uint64_t memset_base_ns;
	uint64_t malloc_ns, free_ns, sync_ns;
	int device_count;
	uint64_t mem_limit;          /* bytes that may be allocated in total */
	int n_overrides;
	struct { char pattern[128]; uint64_t ns; } overrides[SIM_MAX_KERNEL_OVERRIDES];
	char truth_path[4096];
	bool truth_unbuffered;
};

extern struct sim_config sim_cfg;

/* One global lock guards all simulated device state: simple and, for a test
 * bed, fast enough (tens of ns uncontended). */
extern pthread_mutex_t sim_lock;

uint64_t sim_now(void);
void sim_spin_until(uint64_t t);
void sim_wait_until(uint64_t t);

/* Pointer -> value map (open addressing); used for kernels, streams, events,
 * symbols.  Not thread-safe by itself: callers hold sim_lock. */
struct sim_map {
	uintptr_t *keys;
	void **vals;
	size_t cap, count;
};
void *sim_map_get(const struct sim_map *m, uintptr_t key);
void sim_map_put(struct sim_map *m, uintptr_t key, void *val);
void sim_map_del(struct sim_map *m, uintptr_t key);

/* Sets and returns cudaErrorNotSupported for an API simgpu does not simulate (stubs.c). */
cudaError_t sim_unsupported(const char *name);

/* Truth log (truth.c). */
void sim_truth_init(void);
void sim_emit(struct simgpu_op *op);  /* fills seq/pid/tid, logs, notifies observer */
bool sim_emit_wanted(void);           /* a truth log or an observer will see ops */
void sim_ext_current(struct simgpu_op *op);
void sim_truth_after_fork_child(void);

#endif
