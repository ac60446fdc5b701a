/*
 * fork without exec in a HIP program (simhip: the child's "device" is its
 * copy of the parent's memory): parent and child each make N memsets and
 * synchronize.  With TBPROF_HIP_EVENTS=1 each process's trace must hold
 * its own memsets with their GPU records (the child restarts tbprof's
 * timing thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hip/hip_runtime_api.h>

static int memsets(void *dev, int value, int n)
{
	int failed = 0;
	for (int i = 0; i < n; i++)
		failed += hipMemsetAsync(dev, value, 64, NULL) != hipSuccess;
	failed += hipDeviceSynchronize() != hipSuccess;
	return failed;
}

int main(void)
{
	void *dev = NULL;
	if (hipMalloc(&dev, 64) != hipSuccess) {
		printf("no device\n");
		return 1;
	}
	int failed = memsets(dev, 0, 5);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int child_failed = memsets(dev, 1, 7);
		printf("child: %d failed\n", child_failed);
		exit(child_failed ? 1 : 0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	failed += memsets(dev, 2, 5);
	printf("parent: %d failed, child exit %d\n", failed, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	hipFree(dev);
	return failed ? 1 : 0;
}
