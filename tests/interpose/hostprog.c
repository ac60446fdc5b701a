/*
 * A host program whose behaviour must not change under the preload: it
 * makes a few CUDA runtime calls (they may fail: the real runtime has no
 * driver here) and then does one process-level thing chosen by argv[1].
 * stdout and the exit status are compared with and without libtbprof.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define THREADS 32
#define CALLS_PER_THREAD 200

static pthread_barrier_t start_line;

static struct sigaction chained_old;
static volatile sig_atomic_t chained_got;

static void chain_handler(int sig)
{
	chained_got = 1;
	if (chained_old.sa_handler != SIG_DFL && chained_old.sa_handler != SIG_IGN)
		chained_old.sa_handler(sig);
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start_line);   /* all 32 start launching at once */
	dim3 one = { 1, 1, 1 };
	for (int i = 0; i < CALLS_PER_THREAD / 2; i++) {
		void *p = NULL;
		cudaMalloc(&p, 64);
		cudaLaunchKernel((const void *)worker, one, one, NULL, 0, 0);
		if (p)
			cudaFree(p);
		else
			cudaFree(NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "plain";
	void *p = NULL;
	int err = (int)cudaMalloc(&p, 1024);
	printf("malloc %s\n", err == 0 ? "ok" : "failed");
	fflush(stdout);
	if (!strcmp(mode, "threads")) {
		pthread_t t[THREADS];
		pthread_barrier_init(&start_line, NULL, THREADS);
		for (int i = 0; i < THREADS; i++)
			pthread_create(&t[i], NULL, worker, NULL);
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		printf("threads done\n");
	} else if (!strcmp(mode, "fork")) {
		pid_t c = fork();
		if (c == 0) {
			printf("child sync %s\n", cudaDeviceSynchronize() == 0 ? "ok" : "failed");
			exit(3);
		}
		int st;
		waitpid(c, &st, 0);
		printf("child status %d\n", WEXITSTATUS(st));
	} else if (!strcmp(mode, "forkexec")) {
		pid_t c = fork();
		if (c == 0) {
			execl("/bin/echo", "echo", "from exec", (char *)NULL);
			_exit(127);
		}
		int st;
		waitpid(c, &st, 0);
		printf("child status %d\n", WEXITSTATUS(st));
	} else if (!strcmp(mode, "exec")) {
		/* exec right after the calls, well within one writer period:
		 * only a flush at exec gets them into the file. */
		for (int i = 0; i < 50; i++)
			cudaDeviceSynchronize();
		fflush(stdout);
		execl("/bin/echo", "echo", "from exec", (char *)NULL);
		printf("exec failed\n");
		return 1;
	} else if (!strcmp(mode, "exec-fail")) {
		for (int i = 0; i < 5; i++)
			cudaDeviceSynchronize();
		char *args[] = { "tbp-no-such-program", NULL };
		int rc = execvp("tbp-no-such-program", args);
		printf("execvp rc %d errno %s\n", rc, strerror(errno));
		for (int i = 0; i < 5; i++)
			cudaDeviceSynchronize();
		printf("after failed exec\n");
	} else if (!strcmp(mode, "hostregister")) {
		/* The same malloc'd buffer copied to the device while registered
		 * (pinned) and after unregistering (pageable again). */
		size_t n = 1 << 16;
		char *host = calloc(1, n);
		int r1 = (int)cudaHostRegister(host, n, cudaHostRegisterDefault);
		int c1 = (int)cudaMemcpy(p, host, 1024, cudaMemcpyHostToDevice);
		int c2 = (int)cudaMemcpy(host + 4096, p, 1024, cudaMemcpyDeviceToHost);
		int r2 = (int)cudaHostUnregister(host);
		int c3 = (int)cudaMemcpy(p, host, 1024, cudaMemcpyHostToDevice);
		printf("register %d copies %d %d unregister %d copy %d\n", r1, c1, c2, r2, c3);
		free(host);
	} else if (!strcmp(mode, "spawn")) {
		pid_t c;
		char *args[] = { "/bin/echo", "from spawn", NULL };
		fflush(stdout);
		posix_spawn(&c, "/bin/echo", NULL, NULL, args, environ);
		int st;
		waitpid(c, &st, 0);
		printf("spawn status %d\n", WEXITSTATUS(st));
	} else if (!strcmp(mode, "sigterm")) {
		raise(SIGTERM);
	} else if (!strcmp(mode, "sigint")) {
		kill(getpid(), SIGINT);
		sleep(5);
	} else if (!strcmp(mode, "abort")) {
		abort();
	} else if (!strcmp(mode, "_exit")) {
		_exit(7);
	} else if (!strcmp(mode, "sigkill")) {
		for (int i = 0; i < 1000; i++)
			cudaDeviceSynchronize();
		/* Longer than the writer's period: these must reach the file. */
		usleep(400000);
		kill(getpid(), SIGKILL);
	} else if (!strcmp(mode, "burst")) {
		/* 20000 calls that fail at once (NULL pointer): far faster than
		 * a small ring can be drained. */
		int failed = 0;
		for (int i = 0; i < 20000; i++)
			failed += cudaMemsetAsync(NULL, 0, 16, 0) != cudaSuccess;
		printf("burst failed %d\n", failed);
	} else if (!strcmp(mode, "burst-mixed")) {
		/* 20000 calls, each numbered by a field the trace keeps (a
		 * launch's shared memory, a memset's size): launches whose fields
		 * fit the ring's packed form and some that do not (a grid y or a
		 * block z past 16 bits), between memsets (whole records). */
		int failed = 0;
		for (int i = 0; i < 20000; i++) {
			if (i % 3 == 2) {
				failed += cudaMemsetAsync(NULL, 0, (size_t)i, 0) != cudaSuccess;
				continue;
			}
			dim3 g = { 1u + (unsigned)i % 7, 1u + (unsigned)i % 3, 1 };
			dim3 b = { 32u * (1u + (unsigned)i % 4), 1, 1 + (unsigned)i % 2 };
			if (i % 1000 == 1)
				g.y = 70000;
			if (i % 1000 == 4)
				b.z = 65536;
			failed += cudaLaunchKernel((const void *)worker, g, b, NULL, (size_t)i, 0) != cudaSuccess;
		}
		printf("burst-mixed done\n");
		(void)failed;   /* the calls may fail (no driver): the records are what counts */
	} else if (!strcmp(mode, "clock")) {
		/* Hook timestamps vs CLOCK_MONOTONIC read around each call, for
		 * 1.5 s (several writer recalibrations); the bracket is written
		 * to the file named by argv[2], not stdout (it differs per run). */
		FILE *f = fopen(argv[2], "w");
		struct timespec ts;
		for (int i = 0; i < 1500; i++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			unsigned long long before = ts.tv_sec * 1000000000ull + ts.tv_nsec;
			cudaMemsetAsync(NULL, 0, 16, 0);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			unsigned long long after = ts.tv_sec * 1000000000ull + ts.tv_nsec;
			fprintf(f, "%llu %llu\n", before, after);
			usleep(1000);
		}
		fclose(f);
		printf("clock done\n");
	} else if (!strcmp(mode, "chain-handler")) {
		/* A handler that chains to the previous one unless it was the
		 * default: tbprof's must not be what it finds. */
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = chain_handler;
		sigaction(SIGTERM, &sa, &chained_old);
		printf("previous SIGTERM handler is %s\n", chained_old.sa_handler == SIG_DFL ? "default" : "custom");
		void (*prev)(int) = signal(SIGINT, SIG_IGN);
		printf("previous SIGINT handler is %s\n", prev == SIG_DFL ? "default" : "custom");
		prev = signal(SIGINT, SIG_DFL);
		printf("SIGINT handler then %s\n", prev == SIG_IGN ? "ignore" : "other");
		struct sigaction q;
		sigaction(SIGHUP, NULL, &q);
		printf("SIGHUP is %s\n", q.sa_handler == SIG_DFL ? "default" : "custom");
		fflush(stdout);
		raise(SIGTERM);
		printf("got %d, clean shutdown\n", (int)chained_got);
	} else if (!strcmp(mode, "own-handler")) {
		/* The program's own SIGTERM handler must stay in charge. */
		signal(SIGTERM, SIG_IGN);
		raise(SIGTERM);
		printf("still alive\n");
	}
	printf("end\n");
	return 0;
}
