/* sleeper: threads blocked in sleeping system calls.
 *
 * State exercised: threads that spend nearly all their time inside
 * nanosleep (relative: on EINTR the remaining time is slept, as robust
 * programs do), clock_nanosleep with TIMER_ABSTIME on CLOCK_MONOTONIC
 * (restartable without state), poll() with no descriptors as a timer and one
 * long single nanosleep. A checkpoint almost always interrupts a sleep; after
 * a restore the sleeps must go on and end. Printed: the number of completed
 * sleeps (fixed) and whether each thread slept at least as long as it asked
 * (always true, even across a restore, since CLOCK_MONOTONIC only advances).
 * Usage: sleeper [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long rounds;
static int eintr_bugs;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_rel(long ns)
{
	struct timespec req = { ns / 1000000000, ns % 1000000000 }, rem;

	while (nanosleep(&req, &rem) == -1) {
		if (errno != EINTR) {
			eintr_bugs++;
			return;
		}
		req = rem;
	}
}

struct result {
	long done;
	int64_t asked_ns, took_ns;
};
static struct result res[3];

static void *rel_sleeper(void *arg)
{
	struct result *r = arg;
	int64_t t0 = now_ns();

	for (long i = 0; i < rounds; i++) {
		sleep_rel(10000000);
		r->done++;
	}
	r->asked_ns = rounds * 10000000LL;
	r->took_ns = now_ns() - t0;
	return NULL;
}

static void *abs_sleeper(void *arg)
{
	struct result *r = arg;
	int64_t t0 = now_ns(), deadline = t0;

	for (long i = 0; i < rounds; i++) {
		struct timespec ts;
		int e;

		deadline += 10000000;
		ts.tv_sec = deadline / 1000000000;
		ts.tv_nsec = deadline % 1000000000;
		while ((e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
			;
		if (e)
			eintr_bugs++;
		r->done++;
	}
	r->asked_ns = deadline - t0;
	r->took_ns = now_ns() - t0;
	return NULL;
}

static void *poll_sleeper(void *arg)
{
	struct result *r = arg;
	int64_t t0 = now_ns();

	for (long i = 0; i < rounds / 2; i++) {
		/* poll() is not restarted with the remaining time: track the
		 * deadline ourselves. */
		int64_t end = now_ns() + 20000000;
		int64_t left;

		while ((left = end - now_ns()) > 0)
			poll(NULL, 0, (int)((left + 999999) / 1000000));
		r->done++;
	}
	r->asked_ns = rounds / 2 * 20000000LL;
	r->took_ns = now_ns() - t0;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	int64_t t0, took;
	int rc = 0;
	static const char *names[] = { "nanosleep", "clock_nanosleep", "poll" };

	rounds = (long)(250 * app_scale(argc, argv));
	if (rounds < 2)
		rounds = 2;
	printf("sleeper: %ld rounds of 10 ms in three threads, one long sleep in main\n", rounds);
	pthread_create(&t[0], NULL, rel_sleeper, &res[0]);
	pthread_create(&t[1], NULL, abs_sleeper, &res[1]);
	pthread_create(&t[2], NULL, poll_sleeper, &res[2]);
	t0 = now_ns();
	sleep_rel(rounds * 8000000L); /* one long sleep, 80% of the others */
	took = now_ns() - t0;
	printf("main: long sleep %s\n", took >= rounds * 8000000L ? "complete" : "TOO SHORT");
	if (took < rounds * 8000000L)
		rc = 1;
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		printf("%s: %ld sleeps, slept at least the time asked: %s\n", names[i], res[i].done,
		       res[i].took_ns >= res[i].asked_ns ? "yes" : "NO");
		if (res[i].took_ns < res[i].asked_ns)
			rc = 1;
	}
	if (eintr_bugs) {
		printf("FAIL %d sleeps failed with an error other than EINTR\n", eintr_bugs);
		rc = 1;
	}
	printf("sleeper: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
