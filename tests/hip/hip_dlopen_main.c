/*
 * Loads hip_local_lib with RTLD_LOCAL (argv[1]) and runs its HIP work; the
 * program itself does not link the HIP runtime.  HIPWL_CALLS as in
 * hip_workload.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: hip_dlopen_main LIBRARY\n");
		return 3;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "hip_dlopen_main: %s\n", dlerror());
		return 2;
	}
	int (*run)(const char *) = (int (*)(const char *))dlsym(h, "run_hip_work");
	if (!run) {
		fprintf(stderr, "hip_dlopen_main: no run_hip_work\n");
		return 2;
	}
	int failed = run(getenv("HIPWL_CALLS"));
	printf("done: %d failed\n", failed);
	return failed ? 1 : 0;
}
