/*
 * The functions of a CUDA library the stand-in does not simulate (the .inc named by SIMGPU_STUBS_INC):
 * each answers through SIMGPU_STUBS_ANSWER (the library's NOT_SUPPORTED status).  No library header
 * here: the stubs take no parameters (arguments in registers are ignored, harmless for functions
 * returning an int-sized status).  A few cuBLAS functions return a value other than a status (version
 * numbers, names); programs do not call them on a path the stand-ins leave unsimulated.
 */
int SIMGPU_STUBS_ANSWER(const char *name);

#define SIMGPU_LIB_STUB(name) \
	__attribute__((visibility("default"))) int name(void); \
	__attribute__((visibility("default"))) int name(void) { return SIMGPU_STUBS_ANSWER(#name); }

#include SIMGPU_STUBS_INC
