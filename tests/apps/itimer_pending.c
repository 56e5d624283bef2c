/* itimer_pending: a fast periodic ITIMER_REAL across checkpoints.
 *
 * A 100 us interval timer: a round parks the threads for longer than that,
 * and between the round taking its pending SIGALRM (queued again for the
 * job) and reading the timer, it fires again: the kernel re-arms such a
 * timer only when that signal is taken (until then getitimer reads 0).
 * After a restore the timer must still run. The program counts ticks
 * while sleeping 10 ms at a time; 200 sleeps in a row without a tick
 * (time the process does not run is not counted) mean it stopped.
 * Usage: itimer_pending [SCALE]   (1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t ticks;

static void on_alrm(int sig)
{
	(void)sig;
	ticks++;
}

static void sleep_ms(long ms)
{
	struct timespec req = {ms / 1000, (ms % 1000) * 1000000}, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && strtod(s, NULL) > 0 ? strtod(s, NULL) : 1.0;
	long want = (long)(30000 * scale), idle = 0, seen = 0;
	struct itimerval itv = {{0, 100}, {0, 100}};
	struct sigaction sa = {0};

	if (want < 1000)
		want = 1000;
	sa.sa_handler = on_alrm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &itv, NULL);
	printf("itimer_pending: 100 us interval timer, %ld ticks\n", want);
	fflush(stdout);
	while (ticks < want && idle < 200) {
		sleep_ms(10);
		idle = ticks == seen ? idle + 1 : 0;
		seen = ticks;
	}
	if (ticks < want)
		printf("FAIL the interval timer stopped after %d ticks\n", (int)ticks);
	else
		printf("interval timer: %ld ticks\n", want);
	return ticks < want;
}
