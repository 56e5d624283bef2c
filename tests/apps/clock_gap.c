/* clock_gap: CLOCK_MONOTONIC and CLOCK_BOOTTIME go on from where they were
 * across a restore, and a periodic timerfd agrees with them.
 *
 * Each step (50 ms) reads both clocks and the expirations of a 10 ms
 * periodic CLOCK_MONOTONIC timerfd. Bare, a step is 50 ms of either clock
 * and the timerfd's count follows the clock. The test harness keeps the
 * job down for seconds between the kill and the resume (clock_gap.desc):
 * without a time namespace the clocks jumped by that time while the
 * timerfd came back with the time it had left, so it lagged the clock by
 * as much. A step of more than 2.5 s, a lag of more than 0.5 s, a clock
 * going back, or the two clocks parting by more than 2.5 s fails. A second
 * timerfd of the same period is read only at the end: its expirations
 * must equal the first's (a restore once lost those that had come since
 * the last forward of the timer: fdinfo counts one until a read). A far
 * POSIX timer and ITIMER_REAL must keep the time they have left plus the
 * time gone by on CLOCK_MONOTONIC the same, within 0.5 s, and within 30 ms
 * of what a far timerfd set with them has left (the process sets them
 * again at the end of its restore, ckrun the timerfd earlier: they once
 * came back late by the restore's time, 50 ms and more).
 * Usage: clock_gap [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_MS 10
#define GAP_MS 2500
#define LAG_MS 500

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int64_t ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	struct itimerspec its = {{0, PERIOD_MS * 1000000}, {0, PERIOD_MS * 1000000}};
	int64_t start, prev, prev_boot, apart, expired = 0;
	struct sigevent ev = {.sigev_notify = SIGEV_NONE};
	struct itimerspec far = {{0, 0}, {1000, 0}};
	struct itimerval farv = {{0, 0}, {1000, 0}};
	timer_t pt;
	int ftfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	int later = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	uint64_t n;

	if (tfd < 0 || later < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0 || timerfd_settime(later, 0, &its, NULL) < 0 ||
	    timer_create(CLOCK_MONOTONIC, &ev, &pt) < 0 || timer_settime(pt, 0, &far, NULL) < 0 || ftfd < 0 ||
	    timerfd_settime(ftfd, 0, &far, NULL) < 0 ||
	    setitimer(ITIMER_REAL, &farv, NULL) < 0) {
		printf("FAIL timerfd (errno %d)\n", errno);
		return 1;
	}
	start = prev = ms(CLOCK_MONOTONIC);
	prev_boot = ms(CLOCK_BOOTTIME);
	apart = prev_boot - prev;
	for (i = 0; i < steps; i++) {
		struct timespec nap = {0, 50000000};
		int64_t now, boot, lag;

		while (nanosleep(&nap, &nap) < 0 && errno == EINTR)
			;
		if (read(tfd, &n, sizeof(n)) == sizeof(n))
			expired += (int64_t)n;
		now = ms(CLOCK_MONOTONIC);
		boot = ms(CLOCK_BOOTTIME);
		lag = (now - start) - expired * PERIOD_MS;
		if (now < prev || boot < prev_boot) {
			printf("FAIL a clock went back at step %ld (monotonic %lld -> %lld ms)\n", i, (long long)prev,
			       (long long)now);
			return 1;
		}
		if (now - prev > GAP_MS) {
			printf("FAIL CLOCK_MONOTONIC jumped %lld ms in one 50 ms step at step %ld\n",
			       (long long)(now - prev), i);
			return 1;
		}
		if (llabs(lag) > LAG_MS) {
			printf("FAIL the periodic timerfd is %lld ms behind CLOCK_MONOTONIC at step %ld\n", (long long)lag,
			       i);
			return 1;
		}
		if (llabs((boot - now) - apart) > GAP_MS) {
			printf("FAIL CLOCK_BOOTTIME and CLOCK_MONOTONIC parted by %lld ms at step %ld\n",
			       (long long)((boot - now) - apart), i);
			return 1;
		}
		{ /* what the far timers have left, and the time gone by */
			struct itimerspec g, gf;
			struct itimerval gv;
			int64_t left, leftv, leftf;
			if (timer_gettime(pt, &g) < 0 || getitimer(ITIMER_REAL, &gv) < 0 || timerfd_gettime(ftfd, &gf) < 0) {
				printf("FAIL timer_gettime, getitimer or timerfd_gettime at step %ld\n", i);
				return 1;
			}
			left = (int64_t)g.it_value.tv_sec * 1000 + g.it_value.tv_nsec / 1000000;
			leftv = (int64_t)gv.it_value.tv_sec * 1000 + gv.it_value.tv_usec / 1000;
			leftf = (int64_t)gf.it_value.tv_sec * 1000 + gf.it_value.tv_nsec / 1000000;
			if (getenv("CLOCK_GAP_SHOW") && (llabs(left - leftf) > 2 || llabs(leftv - leftf) > 2))
				fprintf(stderr, "step %ld: POSIX %lld itimer %lld ms from the timerfd\n", i,
					(long long)(left - leftf), (long long)(leftv - leftf));
			if (llabs(left - leftf) > 30 || llabs(leftv - leftf) > 30) {
				printf("FAIL a POSIX timer or ITIMER_REAL has %lld or %lld ms more left than a timerfd set "
				       "with them at step %ld\n", (long long)(left - leftf), (long long)(leftv - leftf), i);
				return 1;
			}
			if (llabs(left + (now - start) - 1000000) > LAG_MS || llabs(leftv + (now - start) - 1000000) > LAG_MS) {
				printf("FAIL a POSIX timer or ITIMER_REAL is off the clock by %lld or %lld ms at step %ld\n",
				       (long long)(left + (now - start) - 1000000),
				       (long long)(leftv + (now - start) - 1000000), i);
				return 1;
			}
		}
		prev = now;
		prev_boot = boot;
	}
	n = 0;
	if (read(tfd, &n, sizeof(n)) == sizeof(n))
		expired += (int64_t)n;
	n = 0;
	if (read(later, &n, sizeof(n)) != sizeof(n) || llabs((int64_t)n - expired) > 2) {
		printf("FAIL the timerfd read only at the end counts %llu expirations, the one read each step %lld\n",
		       (unsigned long long)n, (long long)expired);
		return 1;
	}
	printf("clock_gap: %ld steps, the clocks went on and the timerfds kept up\n", i);
	return 0;
}
