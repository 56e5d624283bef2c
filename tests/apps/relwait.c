/* relwait: relative waits (nanosleep and clock_nanosleep without a
 * remaining-time pointer, usleep, poll and epoll_wait with a timeout) must
 * end when they would bare, whatever rounds land meanwhile.
 *
 * State exercised: a thread blocked in a relative wait when it is parked
 * (the kernel returns EINTR, libckpt issues the call again) or restored.
 * Issued again with the full timeout, a wait interrupted more often than
 * its length never ends: a run with checkpoints every 300 ms would not
 * finish. Each wait must return what it returns bare (0: timed out).
 * Exits 1 (after a FAIL line) when one returns anything else.
 * Usage: relwait [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 350

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int bad;

static void expect(const char *what, int got, int step)
{
	if (got == 0)
		return;
	printf("FAIL step %d: %s returned %d (%s), a bare run gets 0\n", step, what, got, strerror(errno));
	bad = 1;
}

int main(int argc, char **argv)
{
	struct timespec t = {0, WAIT_MS * 1000000L};
	struct epoll_event ev;
	int steps = (int)(2 * app_scale(argc, argv) + 0.5), ep = epoll_create1(EPOLL_CLOEXEC);

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (ep < 0) {
		printf("FAIL setup\n");
		return 1;
	}
	for (int step = 0; step < steps; step++) {
		expect("nanosleep", nanosleep(&t, NULL), step);
		expect("usleep", usleep(WAIT_MS * 1000), step);
		expect("poll", poll(NULL, 0, WAIT_MS), step);
		expect("epoll_wait", epoll_wait(ep, &ev, 1, WAIT_MS), step);
		errno = 0;
		expect("clock_nanosleep", clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL), step);
		printf("step %d: five waits of %d ms ended, each timed out\n", step, WAIT_MS);
	}
	printf("%s\n", bad ? "FAIL waits" : "waits as bare");
	return bad;
}
