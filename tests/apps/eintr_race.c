/* eintr_race: short waits entered between two stretches of work, by three
 * threads at once, must return what they return bare (0: timed out).
 *
 * State exercised: a thread that was running when the round read what it
 * was blocked in (/proc/TID/syscall), and entered a wait before the
 * parking signal reached it. The kernel returns EINTR for that wait too;
 * libckpt must issue it again as for a thread seen blocked in it. Each
 * thread spins about 0.3 ms, then waits 2 ms in poll, epoll_wait,
 * nanosleep, usleep or clock_nanosleep in turn (tests/suite/23-rounds.sh
 * widens the window with CKPT_TEST_SIGNAL_GAP_US).
 * Exits 1 (after a FAIL line) when a wait returns anything else.
 * Usage: eintr_race [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 3
#define WAIT_MS 2

static int rd, ep;
static double seconds;
static int failed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int one_wait(int kind, const char **name)
{
	struct timespec t = {0, WAIT_MS * 1000000L};
	struct pollfd p = {rd, POLLIN, 0};
	struct epoll_event ev;

	switch (kind) {
	case 0:
		*name = "poll";
		return poll(&p, 1, WAIT_MS);
	case 1:
		*name = "epoll_wait";
		return epoll_wait(ep, &ev, 1, WAIT_MS);
	case 2:
		*name = "nanosleep";
		return nanosleep(&t, NULL);
	case 3:
		*name = "usleep";
		return usleep(WAIT_MS * 1000);
	default:
		*name = "clock_nanosleep";
		errno = 0;
		return clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
	}
}

static void *worker(void *arg)
{
	double end = now() + seconds;
	int kind = (int)(long)arg;

	while (now() < end) {
		const char *name;
		double spin = now() + 0.0003;
		int r;

		while (now() < spin)
			;
		r = one_wait(kind++ % 5, &name);
		if (r != 0) {
			pthread_mutex_lock(&lock);
			if (!failed++)
				printf("FAIL %s returned %d (%s), a bare run gets 0\n", name, r, strerror(errno));
			pthread_mutex_unlock(&lock);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	pthread_t th[NTHREADS];
	struct epoll_event ev = {.events = EPOLLIN};
	int p[2];

	setvbuf(stdout, NULL, _IOLBF, 0);
	seconds = 3.0 * scale;
	if (pipe(p) < 0 || (ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) < 0) {
		printf("FAIL setup: %s\n", strerror(errno));
		return 1;
	}
	rd = p[0];
	printf("eintr_race: %d threads, waits of %d ms between spins\n", NTHREADS, WAIT_MS);
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i)) {
			printf("FAIL setup: pthread_create\n");
			return 1;
		}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	printf("%s\n", failed ? "FAIL waits" : "waits as bare");
	return failed ? 1 : 0;
}
