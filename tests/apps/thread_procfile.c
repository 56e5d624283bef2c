/* thread_procfile: a thread's own /proc files held open across a restore.
 *
 * State exercised: a worker thread opens /proc/thread-self/status (the
 * kernel names it /proc/PID/task/TID/status) and keeps it open; the main
 * thread opens the worker's /proc/self/task/TID/stat and keeps that open
 * too. At every step each reads its descriptor again from offset 0 and
 * checks that it still describes the worker: Pid: is the worker's tid,
 * and the stat line starts with it. A restore must open both again once
 * the worker exists again (before, the restore opened them before the
 * threads were made, failed with ENOENT, and the checkpoint could never
 * be restored).
 * Usage: thread_procfile [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long steps;
static volatile pid_t worker_tid;
static volatile int worker_failed, worker_done;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* fd's contents from offset 0, NUL-terminated; -1 on error */
static ssize_t read_all(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);
	if (n >= 0)
		buf[n] = 0;
	return n;
}

static void *worker(void *arg)
{
	char buf[4096], want[64];
	pid_t me = (pid_t)syscall(SYS_gettid);
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);

	(void)arg;
	snprintf(want, sizeof(want), "\nPid:\t%d\n", (int)me);
	worker_tid = me;
	for (long i = 0; i < steps && fd >= 0; i++) {
		if (read_all(fd, buf, sizeof(buf)) <= 0 || !strstr(buf, want)) {
			printf("FAIL the worker's own status at step %ld does not name it\n", i);
			worker_failed = 1;
			break;
		}
		nap_ms(20);
	}
	if (fd < 0)
		worker_failed = 1;
	worker_done = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	char path[96], buf[4096], want[32];
	pthread_t th;
	int fd, rc = 0;
	long i;

	steps = (long)(150 * app_scale(argc, argv));
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 2;
	while (!worker_tid)
		nap_ms(1);
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)worker_tid);
	snprintf(want, sizeof(want), "%d (", (int)worker_tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 2;
	for (i = 0; !worker_done && !rc; i++) {
		if (read_all(fd, buf, sizeof(buf)) <= 0 || strncmp(buf, want, strlen(want))) {
			printf("FAIL the worker's stat at step %ld does not name it\n", i);
			rc = 1;
		}
		nap_ms(20);
	}
	pthread_join(th, NULL);
	if (!rc && !worker_failed)
		printf("thread_procfile: both files named the worker at every step\n");
	return rc || worker_failed;
}
