/*
 * The CUDA 13 driver functions the libcuda.so.1 stand-in does not simulate (driver_stubs.inc): each
 * answers CUDA_ERROR_NOT_SUPPORTED through simgpu_driver_unsupported (driver.c).  No CUDA header here
 * (cuda.h renames many of these): the stubs take no parameters (arguments in registers are ignored,
 * harmless for functions returning an int-sized CUresult).
 */
int simgpu_driver_unsupported(const char *name);

#define SIMGPU_DRIVER_STUB(name) \
	__attribute__((visibility("default"))) int name(void); \
	__attribute__((visibility("default"))) int name(void) { return simgpu_driver_unsupported(#name); }

#include "driver_stubs.inc"
