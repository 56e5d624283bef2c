/* mainexit: the main thread leaves with pthread_exit while a worker runs
 * on; the process ends when the worker returns, with status 0 (glibc ends
 * it once the last thread it made is gone). Prints the worker's steps, ten
 * a second for MS milliseconds after the main thread left. For
 * tests/suite/30-faults.sh, part lifecycle. With "fork" a forked child
 * does it, and the parent prints how the child ended.
 * Usage: mainexit MS [fork] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long steps;

static void *worker(void *arg)
{
	struct timespec tenth = {0, 100 * 1000 * 1000};

	(void)arg;
	nanosleep(&tenth, NULL); /* the main thread has left by now */
	for (long i = 0; i < steps; i++) {
		printf("worker step %ld\n", i);
		fflush(stdout);
		nanosleep(&tenth, NULL);
	}
	printf("worker done: the process ends with it\n");
	fflush(stdout);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;

	steps = argc > 1 ? atol(argv[1]) / 100 : 20;
	if (argc > 2 && !strcmp(argv[2], "fork")) {
		int st = 0;
		pid_t child = fork();
		if (child < 0)
			return 2;
		if (child > 0) {
			if (waitpid(child, &st, 0) != child)
				return 2;
			printf("the child ended with status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
			return 0;
		}
	}
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 2;
	printf("main thread leaves\n");
	fflush(stdout);
	pthread_exit(NULL);
}
