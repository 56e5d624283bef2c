/* pidfd_thread: a pidfd of one of the process's own threads
 * (PIDFD_THREAD, Linux 6.9) while a checkpoint is asked for: its thread is
 * made again only after the descriptors, so it cannot be opened again as
 * it was; the round must be refused before the cut naming it, and the job
 * must go on untouched. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

static int pfd = -1;

static void *worker(void *arg)
{
	(void)arg;
	pfd = (int)syscall(SYS_pidfd_open, (pid_t)syscall(SYS_gettid), PIDFD_THREAD);
	for (int i = 0; i < 25; i++)
		usleep(100000);
	return NULL;
}

int main(void)
{
	pthread_t th;

	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	pthread_join(th, NULL);
	printf("pidfd_thread: %s\n", pfd >= 0 ? "a thread's pidfd held 25 rounds" : "no thread pidfd here");
	return 0;
}
