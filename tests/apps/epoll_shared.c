/* epoll_shared: an epoll instance a parent and its forked child share must
 * stay one instance: an edge-triggered event one of them takes is not
 * seen again by the other.
 *
 * State exercised: an epoll instance shared by fork, one registration
 * (EPOLLIN | EPOLLET, a pipe's read end the child closed after the fork:
 * only the parent holds the registered file), a second instance only the
 * parent holds, and a third with an edge-triggered eventfd that stays
 * readable after the job took its edge (a restore that added it again
 * reported that edge again). Each step the parent writes a byte; one side takes the
 * event, then the other must time out; the sides alternate. Two instances
 * (a restore that made the shared one twice) give the second side the
 * event again. Prints only deterministic lines; exits 1 after a FAIL line.
 * Usage: epoll_shared [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* events within ms on ep, each with data 7 */
static int wait_events(int ep, int ms)
{
	struct epoll_event ev[4];
	int n;

	while ((n = epoll_wait(ep, ev, 4, ms)) < 0 && errno == EINTR)
		;
	for (int i = 0; i < n; i++)
		if (ev[i].data.u64 != 7)
			return -2;
	return n;
}

static void put(int fd, char c)
{
	while (write(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static char get(int fd)
{
	char c = 0;

	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	return c;
}

int main(int argc, char **argv)
{
	int steps = (int)(6 * app_scale(argc, argv) + 0.5), data[2], p2c[2], c2p[2], ep, own, et, efd, bad = 0;
	struct epoll_event ev = {EPOLLIN | EPOLLET, {.u64 = 7}};
	struct timespec t = {0, 400 * 1000000L};
	pid_t kid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 2)
		steps = 2;
	if (pipe(data) < 0 || pipe(p2c) < 0 || pipe(c2p) < 0 || (ep = epoll_create1(0)) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, data[0], &ev) < 0)
		return 1;
	kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0) { /* waits on the shared instance when told; never holds the pipe */
		close(data[0]);
		close(data[1]);
		for (char c; (c = get(p2c[0])) != 'q';)
			put(c2p[1], (char)('0' + wait_events(ep, c == 'f' ? 2000 : 150)));
		_exit(0);
	}
	if ((own = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(own, EPOLL_CTL_ADD, data[0], &ev) < 0)
		return 1;
	/* readable for good; its one edge taken now */
	if ((et = epoll_create1(EPOLL_CLOEXEC)) < 0 || (efd = eventfd(1, EFD_CLOEXEC)) < 0 ||
	    epoll_ctl(et, EPOLL_CTL_ADD, efd, &ev) < 0 || wait_events(et, 0) != 1)
		return 1;
	for (int step = 0; step < steps; step++) {
		int first, second, mine;
		char c;

		nanosleep(&t, NULL);
		put(data[1], 'x');
		mine = wait_events(own, 2000); /* the parent's own instance sees every write */
		if (step % 2 == 0) {
			first = wait_events(ep, 2000);
			get(data[0]);
			put(p2c[1], 's');
			second = get(c2p[0]) - '0';
		} else {
			put(p2c[1], 'f');
			first = get(c2p[0]) - '0';
			get(data[0]);
			second = wait_events(ep, 150);
		}
		c = step % 2 ? 'c' : 'p';
		if (wait_events(et, 0) != 0) {
			printf("FAIL step %d: the eventfd's edge, taken before, was reported again\n", step);
			bad = 1;
		}
		if (first != 1 || second != 0 || mine != 1) {
			printf("FAIL step %d: the %s took %d event(s), then the %s %d; its own instance %d (expected 1, 0, 1)\n",
			       step, c == 'p' ? "parent" : "child", first, c == 'p' ? "child" : "parent", second, mine);
			bad = 1;
		} else {
			printf("step %d: the %s took the event, the %s saw none\n", step, c == 'p' ? "parent" : "child",
			       c == 'p' ? "child" : "parent");
		}
	}
	put(p2c[1], 'q');
	waitpid(kid, NULL, 0);
	printf("%s\n", bad ? "FAIL epoll" : "one shared instance");
	return bad;
}
