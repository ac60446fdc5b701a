/*
 * Stubs for the part of the CUDA 13 runtime API simgpu does not simulate
 * (list in cuda_stubs.inc): each sets and returns cudaErrorNotSupported, so
 * a program that references them still loads and runs; set
 * SIMGPU_WARN_UNSUPPORTED=1 to hear about calls.  No CUDA header here: the
 * stubs take no parameters (arguments passed in registers are ignored, which
 * is harmless for functions returning an int-sized cudaError_t).
 */
typedef int sim_error_t;
sim_error_t sim_unsupported(const char *name);

#define SIMGPU_STUB(name) \
	__attribute__((visibility("default"))) sim_error_t name(void); \
	__attribute__((visibility("default"))) sim_error_t name(void) { return sim_unsupported(#name); }

#include "cuda_stubs.inc"
