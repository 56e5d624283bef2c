/* thread_list: a program that lists its own threads must see as many as
 * it would without ckrun (libckpt's manager thread, and the reader thread
 * a round may start, are no business of the job's).
 *
 * State exercised: three worker threads that live through the run, a
 * fourth started and joined half-way; at every step the program lists
 * /proc/self/task, /proc/PID/task and /proc/TID/task of a worker
 * (opendir/readdir) and checks each list against the set of tids it knows
 * (main's and its workers', which gettid gives each), first before any
 * worker exists (libckpt's manager has only just started), then once more
 * after joining them all (main alone). Checkpoints land between the steps, so
 * listings after a round (which may start a reader thread) and after a
 * restore (which makes the manager again) are both checked.
 * Exits 1 (after printing FAIL lines) when a listing holds a thread it did
 * not make or misses one of its own.
 * Usage: thread_list [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NW 4

static volatile int tids[NW + 1], stop[NW];
static int bad;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void *worker(void *arg)
{
	int k = (int)(long)arg;

	tids[k + 1] = (int)syscall(SYS_gettid);
	while (!stop[k])
		usleep(2000);
	return NULL;
}

/* Lists path and checks it holds exactly the tids of live[] (n of them). */
static void check(const char *label, const char *path, const int *live, int n)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int seen = 0;

	if (!d) {
		printf("FAIL %s: cannot list it\n", label);
		bad = 1;
		return;
	}
	while ((e = readdir(d))) {
		int tid = atoi(e->d_name), known = 0;

		if (e->d_name[0] == '.')
			continue;
		for (int i = 0; i < n; i++)
			known |= live[i] == tid;
		if (!known) {
			printf("FAIL %s: lists thread %d, which the program did not make\n", label, tid);
			bad = 1;
		}
		seen++;
	}
	closedir(d);
	if (seen != n) {
		printf("FAIL %s: %d threads listed, the program has %d\n", label, seen, n);
		bad = 1;
	}
}

static void check_all(int step, int nworkers)
{
	char path[64], label[64];
	int live[NW + 1], n = 0;

	live[n++] = tids[0];
	for (int k = 0; k < nworkers; k++)
		live[n++] = tids[k + 1];
	snprintf(label, sizeof(label), "step %d /proc/self/task", step);
	check(label, "/proc/self/task", live, n);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)getpid());
	snprintf(label, sizeof(label), "step %d /proc/PID/task", step);
	check(label, path, live, n);
	if (nworkers) {
		snprintf(path, sizeof(path), "/proc/%d/task", tids[1]);
		snprintf(label, sizeof(label), "step %d /proc/TID/task", step);
		check(label, path, live, n);
	}
}

int main(int argc, char **argv)
{
	int steps = (int)(30 * app_scale(argc, argv)), nworkers = 0;
	pthread_t th[NW];

	if (steps < 4)
		steps = 4;
	tids[0] = (int)syscall(SYS_gettid);
	printf("thread_list: %d steps, 3 workers throughout and one for the second half\n", steps);
	check_all(-1, 0); /* first thing: libckpt's manager has just started */
	for (int k = 0; k < NW - 1; k++) {
		if (pthread_create(&th[k], NULL, worker, (void *)(long)k))
			return 1;
		nworkers++;
	}
	for (int step = 0; step < steps; step++) {
		if (step == steps / 2) {
			if (pthread_create(&th[NW - 1], NULL, worker, (void *)(long)(NW - 1)))
				return 1;
			nworkers++;
		}
		for (int k = 0; k < nworkers; k++)
			while (!tids[k + 1])
				usleep(1000);
		check_all(step, nworkers);
		if (step % 10 == 0)
			printf("step %d: %d threads listed\n", step, nworkers + 1);
		fflush(stdout);
		usleep(100000);
	}
	for (int k = 0; k < nworkers; k++) {
		char path[64];

		stop[k] = 1;
		pthread_join(th[k], NULL);
		/* joined once it has cleared its tid; listed until the kernel
		 * has released it, a moment later */
		snprintf(path, sizeof(path), "/proc/self/task/%d", tids[k + 1]);
		for (int i = 0; i < 1000 && access(path, F_OK) == 0; i++)
			usleep(1000);
	}
	check_all(steps, 0);
	printf("after joining: the main thread alone\n");
	printf("thread_list: %s\n", bad ? "FAIL" : "ok");
	return bad;
}
