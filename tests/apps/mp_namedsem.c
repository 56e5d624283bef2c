/* mp_namedsem: POSIX named semaphores kept by name for the whole run, as
 * Python's multiprocessing (and so torch.distributed's helpers) can.
 *
 * State exercised: two named semaphores (sem_open: files sem.NAME in
 * /dev/shm, mapped shared by each process that opens them) used for a
 * ping-pong between a parent and a child it forks, and a third one that
 * counts the exchanges (its value is read with sem_getvalue and checked
 * against the count each side keeps in its own memory). At the end the
 * parent unlinks all three: an unlink that finds a name gone is a failure
 * (the "sem_unlink" traceback a resumed DDP job printed). Names derive from
 * $TMPDIR (one per test directory), never printed.
 * Usage: mp_namedsem [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_us(long us)
{
	struct timespec req = { us / 1000000, (us % 1000000) * 1000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static int wait_sem(sem_t *s)
{
	while (sem_wait(s) != 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	long rounds = (long)(600 * app_scale(argc, argv));
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char names[3][96];
	uint64_t h = 1469598103934665603ull;
	sem_t *ping, *pong, *count;
	pid_t child;
	int st, v = -1, bad = 0;

	for (const char *p = tmp; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	for (int i = 0; i < 3; i++)
		snprintf(names[i], sizeof(names[i]), "/ckt-namedsem-%016llx-%d", (unsigned long long)h, i);
	for (int i = 0; i < 3; i++)
		sem_unlink(names[i]); /* a previous run's, killed */
	ping = sem_open(names[0], O_CREAT | O_EXCL, 0600, 0);
	pong = sem_open(names[1], O_CREAT | O_EXCL, 0600, 0);
	count = sem_open(names[2], O_CREAT | O_EXCL, 0600, 0);
	if (ping == SEM_FAILED || pong == SEM_FAILED || count == SEM_FAILED) {
		printf("FAIL sem_open: %s\n", strerror(errno));
		return 1;
	}
	child = fork();
	if (child == 0) {
		/* the child opens them again by name: its own mappings */
		sem_t *cping = sem_open(names[0], 0), *cpong = sem_open(names[1], 0);
		if (cping == SEM_FAILED || cpong == SEM_FAILED)
			_exit(3);
		for (long r = 0; r < rounds; r++) {
			if (wait_sem(cping) != 0)
				_exit(4);
			sleep_us(2000);
			if (sem_post(cpong) != 0)
				_exit(5);
		}
		_exit(0);
	}
	for (long r = 0; r < rounds; r++) {
		if (sem_post(count) != 0 || sem_post(ping) != 0 || wait_sem(pong) != 0) {
			printf("FAIL round %ld: %s\n", r, strerror(errno));
			return 1;
		}
		if (sem_getvalue(count, &v) != 0 || v != (int)(r + 1))
			bad++;
		sleep_us(2000);
	}
	waitpid(child, &st, 0);
	printf("mp_namedsem: %ld rounds, %d wrong counts, child status %d\n", rounds, bad,
	       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	for (int i = 0; i < 3; i++)
		if (sem_unlink(names[i]) != 0) {
			printf("FAIL sem_unlink of semaphore %d: %s\n", i, strerror(errno));
			bad++;
		}
	if (bad || !WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("mp_namedsem: FAIL\n");
		return 1;
	}
	printf("mp_namedsem: ok\n");
	return 0;
}
