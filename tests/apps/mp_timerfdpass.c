/* mp_timerfdpass: timerfds and signalfds in flight over a UNIX socket.
 *
 * State exercised: at every step the parent sends the child a timerfd and
 * a signalfd with SCM_RIGHTS and closes its own copies, so that they exist
 * only in the socket's queue. Even steps: a one-shot timer of 1 ms that has
 * fired by the time the child reads it (exactly one expiration, unread).
 * Odd steps: a timer due in 1000 s with an interval of 7 s + step ms (the
 * interval exact, the time left above 900 s). Each signalfd's mask is
 * SIGUSR1 or SIGUSR2 by step parity (checked in its fdinfo). The child
 * takes them only every 10 steps. At the start the parent also sends a
 * one-shot timerfd that fires at once and keeps it: at the end the child
 * reads its one expiration, after which the parent finds none, which holds
 * only if both copies are one timerfd after a restore. Last, the child
 * raises SIGUSR1 (blocked) and reads it through an odd step's signalfd.
 * The parent also sends itself a periodic 10 ms timerfd over a pair of its
 * own and keeps one like it that it reads each step: at the end the one in
 * flight must count as many expirations (a restore once lost those since
 * the timer's last forward). With it flies a periodic 20 us timerfd,
 * which a round often finds past an expiry whose interrupt has not run
 * (0 left, as a disarmed timer shows): it must still tick at the end.
 * Usage: mp_timerfdpass [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static int send_fds(int sock, const int *fds, int n)
{
	union {
		char b[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = {"t", 1};
	struct msghdr mh = {0};
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
	return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

/* One byte and up to two descriptors (-1 where none): how many came. */
static int recv_fds(int sock, char *byte, int *fds)
{
	union {
		char b[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = {byte, 1};
	struct msghdr mh = {0};
	struct cmsghdr *c;
	ssize_t n;

	fds[0] = fds[1] = -1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	while ((n = recvmsg(sock, &mh, 0)) < 0 && errno == EINTR)
		;
	if (n != 1)
		return -1;
	if (!(c = CMSG_FIRSTHDR(&mh)))
		return 0;
	n = (ssize_t)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
	return (int)n;
}

static uint64_t sigmask_of(int fd)
{
	char path[64], text[512], *p;
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if ((f = open(path, O_RDONLY)) < 0)
		return 0;
	n = read(f, text, sizeof(text) - 1);
	close(f);
	text[n > 0 ? n : 0] = 0;
	return (p = strstr(text, "sigmask:")) ? strtoull(p + 8, NULL, 16) : 0;
}

/* 0 if the pair sent at step `step` is as it was made. */
static int check_pair(int step, int tfd, int sfd)
{
	uint64_t ticks = 0, want = 1ull << ((step % 2 ? SIGUSR1 : SIGUSR2) - 1);
	struct itimerspec its;

	if (sigmask_of(sfd) != want)
		return 10;
	if (step % 2 == 0)
		return read(tfd, &ticks, sizeof(ticks)) == sizeof(ticks) && ticks == 1 ? 0 : 11;
	if (timerfd_gettime(tfd, &its) < 0 || its.it_interval.tv_sec != 7 ||
	    its.it_interval.tv_nsec != (long)step * 1000000 || its.it_value.tv_sec < 900 || its.it_value.tv_sec > 1000)
		return 12;
	return 0;
}

static int child(int sock, int steps)
{
	int shared = -1, next = 0, fds[2], last_odd = -1, r;
	uint64_t ticks = 0;
	sigset_t usr;
	char b;

	sigemptyset(&usr);
	sigaddset(&usr, SIGUSR1);
	sigaddset(&usr, SIGUSR2);
	sigprocmask(SIG_BLOCK, &usr, NULL);
	if (recv_fds(sock, &b, fds) != 1)
		return 2;
	shared = fds[0];
	for (int i = 0; i < steps; i++) {
		if (i % 10 != 9 && i != steps - 1) {
			usleep(30000);
			continue;
		}
		while (next <= i) { /* every pair sent up to step i */
			if (recv_fds(sock, &b, fds) != 2)
				return 3;
			if ((r = check_pair(next, fds[0], fds[1])) != 0)
				return r;
			close(fds[0]);
			if (next % 2 && last_odd < 0)
				last_odd = fds[1];
			else
				close(fds[1]);
			next++;
		}
		usleep(30000);
	}
	if (recv_fds(sock, &b, fds) != 0 || b != 'z')
		return 4;
	if (read(shared, &ticks, sizeof(ticks)) != sizeof(ticks) || ticks != 1)
		return 5;
	if (last_odd >= 0) {
		struct signalfd_siginfo si;
		raise(SIGUSR1);
		if (read(last_odd, &si, sizeof(si)) != sizeof(si) || si.ssi_signo != SIGUSR1)
			return 6;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int steps = (int)(100 * app_scale(argc, argv)), sv[2], own[2], st, shared, keep, flying, fast;
	struct itimerspec now = {{0, 0}, {0, 1000000}}, tick = {{0, 10000000}, {0, 10000000}};
	struct itimerspec quick = {{0, 20000}, {0, 20000}};
	uint64_t ticks, kept = 0;
	int got[2];
	char b;
	pid_t kid;

	if (steps < 4)
		steps = 4;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	printf("mp_timerfdpass: %d timerfd and signalfd pairs in flight, 10 at a time\n", steps);
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		close(sv[0]);
		_exit(child(sv[1], steps));
	}
	close(sv[1]);
	keep = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	flying = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	fast = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (keep < 0 || flying < 0 || fast < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, own) < 0 ||
	    timerfd_settime(keep, 0, &tick, NULL) < 0 || timerfd_settime(flying, 0, &tick, NULL) < 0 ||
	    timerfd_settime(fast, 0, &quick, NULL) < 0 || send_fds(own[0], &flying, 1) || close(flying) < 0 ||
	    send_fds(own[0], &fast, 1) || close(fast) < 0) {
		printf("FAIL periodic setup\n");
		return 1;
	}
	shared = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (shared < 0 || timerfd_settime(shared, 0, &now, NULL) < 0 || send_fds(sv[0], &shared, 1)) {
		printf("FAIL setup\n");
		return 1;
	}
	for (int i = 0; i < steps; i++) {
		struct itimerspec far = {{7, (long)i * 1000000}, {1000, 0}};
		sigset_t m;
		int p[2];

		sigemptyset(&m);
		sigaddset(&m, i % 2 ? SIGUSR1 : SIGUSR2);
		p[0] = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		p[1] = signalfd(-1, &m, SFD_CLOEXEC);
		if (p[0] < 0 || p[1] < 0 || timerfd_settime(p[0], 0, i % 2 ? &far : &now, NULL) < 0 ||
		    send_fds(sv[0], p, 2)) {
			printf("FAIL step %d (%s)\n", i, strerror(errno));
			return 1;
		}
		close(p[0]);
		close(p[1]);
		if (read(keep, &ticks, sizeof(ticks)) == sizeof(ticks))
			kept += ticks;
		if (i % 20 == 0) {
			printf("step %d sent\n", i);
			fflush(stdout);
		}
		usleep(30000);
	}
	if (write(sv[0], "z", 1) != 1)
		return 1;
	waitpid(kid, &st, 0);
	printf("child: %s (status %d)\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "FAILED",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	/* the periodic timer in flight: as many expirations as the one kept */
	if (read(keep, &ticks, sizeof(ticks)) == sizeof(ticks))
		kept += ticks;
	ticks = 0;
	if (recv_fds(own[1], &b, got) != 1 || read(got[0], &ticks, sizeof(ticks)) != sizeof(ticks) ||
	    (ticks > kept ? ticks - kept : kept - ticks) > 2)
		printf("periodic timerfd in flight: %llu expirations, %llu for the one kept: LOST\n",
		       (unsigned long long)ticks, (unsigned long long)kept);
	else
		printf("periodic timerfd in flight: as many expirations as the one kept\n");
	{
		struct pollfd pf = {-1, POLLIN, 0};
		struct itimerspec fc = {{0, 0}, {0, 0}};
		int ticking = recv_fds(own[1], &b, got) == 1;

		pf.fd = got[0];
		ticks = 0;
		ticking = ticking && timerfd_gettime(got[0], &fc) == 0 && fc.it_interval.tv_nsec == 20000 &&
			  poll(&pf, 1, 2000) == 1 && read(got[0], &ticks, sizeof(ticks)) == sizeof(ticks) && ticks;
		if (ticking)
			printf("20 us timerfd in flight: still ticking\n");
		else
			printf("20 us timerfd in flight: STOPPED (descriptor %d, %ld ns left, every %ld ns, %llu read)\n",
			       got[0], fc.it_value.tv_nsec, fc.it_interval.tv_nsec, (unsigned long long)ticks);
	}
	/* the child read the shared timer's expiration: none left here */
	errno = 0;
	printf("shared timerfd after the child read it: %s\n",
	       read(shared, &ticks, sizeof(ticks)) < 0 && errno == EAGAIN ? "empty, one timerfd" : "NOT SHARED");
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}
