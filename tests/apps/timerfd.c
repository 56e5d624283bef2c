/* timerfd: timer file descriptors.
 *
 * State exercised: a periodic CLOCK_MONOTONIC timerfd read in a blocking
 * loop, a periodic timerfd watched through epoll, an absolute one-shot
 * CLOCK_REALTIME timerfd armed far in the future with
 * TFD_TIMER_CANCEL_ON_SET (must stay armed, never fire, and keep both
 * flags, as its fdinfo says), and a disarmed one (must stay disarmed). Expiration counts depend
 * on timing, so only "reached the target" is printed. A one-shot timerfd
 * that expires at the start and is read only at the end, by a forked child
 * that shares it: its one unread expiration must still be there after a
 * restore, once (the parent's read after the child's finds none). A 20 us
 * periodic timerfd left running, never read until the end: a round often
 * finds it past an expiry whose interrupt has not run yet, which
 * timerfd_gettime shows as 0 left, like a disarmed timer; it must still
 * tick at the end.
 * Usage: timerfd [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* "settime flags:" of a timerfd's fdinfo (octal) */
static long settime_flags(int fd)
{
	char path[64], text[512], *p;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(path, "r")))
		return -1;
	n = (ssize_t)fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n > 0 ? n : 0] = 0;
	return (p = strstr(text, "settime flags:")) ? strtol(p + 14, NULL, 8) : -1;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	uint64_t target = (uint64_t)(150 * scale), got_a = 0, got_b = 0;
	struct itimerspec per = { { 0, 10000000 }, { 0, 10000000 } }, far, cur;
	struct timespec now;
	struct itimerspec fast = { { 0, 20000 }, { 0, 20000 } };
	int ta, tb, tfar, toff, tdone, tfast, ep, rc = 0, fired_far = 0, go[2], back[2], st;
	pid_t kid;

	if (target < 1)
		target = 1;
	printf("timerfd: two 10 ms timers, target %llu expirations each\n", (unsigned long long)target);
	ta = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	tb = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	tfar = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
	toff = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	tdone = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	tfast = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ta < 0 || tb < 0 || tfar < 0 || toff < 0 || tdone < 0 || tfast < 0 || pipe(go) < 0 || pipe(back) < 0)
		return 1;
	timerfd_settime(tdone, 0, &(struct itimerspec){ { 0, 0 }, { 0, 1000000 } }, NULL);
	kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0) {
		uint64_t n = 0;
		char c;

		if (read(go[0], &c, 1) != 1)
			_exit(2);
		c = read(tdone, &n, 8) == 8 && n == 1 ? 'y' : 'n';
		_exit(write(back[1], &c, 1) == 1 ? 0 : 3);
	}
	clock_gettime(CLOCK_REALTIME, &now);
	far = (struct itimerspec){ { 0, 0 }, { now.tv_sec + 86400, 0 } };
	timerfd_settime(tfar, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &far, NULL);
	timerfd_settime(ta, 0, &per, NULL);
	timerfd_settime(tfast, 0, &fast, NULL);

	/* Phase 1: blocking reads. */
	while (got_a < target) {
		uint64_t n;
		ssize_t r = read(ta, &n, 8);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != 8) {
			printf("FAIL read timerfd\n");
			return 1;
		}
		got_a += n;
	}
	printf("blocking timerfd: reached %llu expirations\n", (unsigned long long)target);
	timerfd_settime(ta, 0, &(struct itimerspec){ { 0, 0 }, { 0, 0 } }, NULL);

	/* Phase 2: through epoll, with the far timer in the set too. */
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, tb, &(struct epoll_event){ .events = EPOLLIN, .data.fd = tb });
	epoll_ctl(ep, EPOLL_CTL_ADD, tfar, &(struct epoll_event){ .events = EPOLLIN, .data.fd = tfar });
	timerfd_settime(tb, 0, &per, NULL);
	while (got_b < target) {
		struct epoll_event ev[2];
		int k = epoll_wait(ep, ev, 2, 1000);
		for (int i = 0; i < k; i++) {
			uint64_t n;
			if (read(ev[i].data.fd, &n, 8) != 8)
				continue;
			if (ev[i].data.fd == tb)
				got_b += n;
			else
				fired_far++;
		}
	}
	printf("epoll timerfd: reached %llu expirations\n", (unsigned long long)target);

	timerfd_gettime(tfar, &cur);
	printf("far timer: %s\n", !fired_far && cur.it_value.tv_sec > 3600 ? "still armed" : "WRONG");
	/* set with TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET: still so
	 * (a timer set again relative would follow no change of the clock) */
	printf("far timer's settime flags: %s\n", settime_flags(tfar) == 3 ? "absolute, cancelled on a clock set" : "WRONG");
	timerfd_gettime(toff, &cur);
	printf("disarmed timer: %s\n", cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0 ? "still disarmed" : "WRONG");
	timerfd_gettime(tb, &cur);
	printf("periodic timer interval: %ld ns\n", cur.it_interval.tv_nsec);
	{
		uint64_t n = 0;
		char c = 0;
		int again;

		if (write(go[1], "g", 1) != 1 || read(back[0], &c, 1) != 1)
			c = 0;
		again = read(tdone, &n, 8) < 0 && errno == EAGAIN;
		waitpid(kid, &st, 0);
		printf("expired one-shot timer: %s\n", c == 'y' && again ? "read once, by the child that shares it"
				: c == 'y' ? "read twice (not shared)" : "LOST");
		if (c != 'y' || !again)
			rc = 1;
	}
	{
		struct pollfd pf = { tfast, POLLIN, 0 };
		uint64_t n = 0;
		struct itimerspec fc;

		int ticking;

		timerfd_gettime(tfast, &fc);
		ticking = poll(&pf, 1, 2000) == 1 && read(tfast, &n, 8) == 8 && n && fc.it_interval.tv_nsec == 20000;
		printf("20 us timer: %s\n", ticking ? "still ticking" : "STOPPED");
		if (!ticking)
			rc = 1;
	}
	if (fired_far || cur.it_interval.tv_nsec != 10000000 || settime_flags(tfar) != 3)
		rc = 1;
	printf("timerfd: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
