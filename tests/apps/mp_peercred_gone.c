/* mp_peercred_gone: connections whose SO_PEERCRED names a process that
 * has exited.
 *
 * State exercised: the kernel notes, as a connection is made, the process
 * that made it, and keeps naming it (by its number) after it has exited.
 * P forks three short-lived makers and keeps what they made:
 *   A makes a stream socketpair and sends both ends to P (SCM_RIGHTS over
 *     a pair of P's), then exits; P reaps it. Both ends name A.
 *   B connects to P's listener (an abstract name, unique per run, never
 *     printed), sends its connected end to P and exits; P reaps it. P's
 *     accepted end names B, B's end names P.
 *   Z makes a datagram socketpair, sends both ends to P and exits; P
 *     reaps it only at the end, so it is a zombie all along. Both ends
 *     name Z.
 * At every step P checks the pid, uid and gid every end names, that A and
 * B do not exist (kill with signal 0: a restore's stand-in left behind
 * would), and sends a message through each pair both ways. At the end P
 * checks that its only child is Z (/proc's children list), and reaps Z
 * with its status. A restore that made the connections itself names pid 0
 * and fails.
 * Only P prints, and only relative facts (no pids).
 * Usage: mp_peercred_gone [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_MS 25

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

/* 0 if fd's peer is `want` with our own uid and gid; else says what. */
static int check(const char *what, int fd, pid_t want)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0) {
		printf("%s: SO_PEERCRED: %s\n", what, strerror(errno));
		return 1;
	}
	if (uc.pid != want || uc.uid != getuid() || uc.gid != getgid()) {
		printf("%s names %s pid, uid %u gid %u\n", what, uc.pid == 0 ? "no" : "another", (unsigned)uc.uid,
		       (unsigned)uc.gid);
		return 1;
	}
	return 0;
}

static int send_fds(int sock, const int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { "f", 1 };
	struct msghdr mh = { 0 };
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
	return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

static int recv_fds(int sock, int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char b;
	struct iovec iov = { &b, 1 };
	struct msghdr mh = { 0 };
	struct cmsghdr *c;

	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	if (recvmsg(sock, &mh, 0) != 1 || !(c = CMSG_FIRSTHDR(&mh)) || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN((size_t)n * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
	return 0;
}

/* One message each way between x and y. */
static int ping(const char *what, int x, int y, long s)
{
	char out[32], in[32];
	int n = snprintf(out, sizeof(out), "step %ld", s);

	for (int k = 0; k < 2; k++) {
		int from = k ? y : x, to = k ? x : y;
		if (write(from, out, (size_t)n) != n || read(to, in, sizeof(in)) != n || memcmp(in, out, (size_t)n)) {
			printf("%s: a message did not come through\n", what);
			return 1;
		}
	}
	return 0;
}

/* 0 if no process has the number of the one that exited */
static int gone(const char *who, pid_t pid)
{
	if (kill(pid, 0) == 0 || errno != ESRCH) {
		printf("a process has %s's number\n", who);
		return 1;
	}
	return 0;
}

/* A child that makes a socketpair of TYPE and hands P both ends. */
static pid_t pair_maker(int chan, int type)
{
	pid_t k = fork();

	if (k == 0) {
		int sv[2];
		_exit(socketpair(AF_UNIX, type, 0, sv) == 0 && send_fds(chan, sv, 2) == 0 ? 7 : 1);
	}
	return k;
}

int main(int argc, char **argv)
{
	long steps = (long)(120 * app_scale(argc, argv));
	int chan[2], lis, a[2], b[2], z[2], fails = 0, checks = 0, st;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	socklen_t al;
	pid_t self = getpid(), pa, pb, pz;
	char kids[256] = "", path[96], want[32];
	struct timespec t;
	FILE *f;

	if (steps < 5)
		steps = 5;
	printf("mp_peercred_gone: connections made by processes that have exited (a socketpair, an accepted "
	       "connection, a datagram pair of a zombie); %ld checked steps\n",
	       steps);
	fflush(stdout);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, chan) < 0)
		return 1;
	/* (pid and nanoseconds: runs of other variants beside this one have
	 * the same pid in their namespaces, and share the network's) */
	clock_gettime(CLOCK_REALTIME, &t);
	al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			 (size_t)snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "mp_peercred_gone.%d.%ld",
					  (int)self, (long)t.tv_nsec));
	lis = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lis < 0 || bind(lis, (struct sockaddr *)&addr, al) < 0 || listen(lis, 4) < 0)
		return 2;

	pa = pair_maker(chan[1], SOCK_STREAM);
	if (pa < 0 || recv_fds(chan[0], a, 2) < 0 || waitpid(pa, &st, 0) != pa || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 7)
		return 3;

	pb = fork();
	if (pb == 0) {
		int c = socket(AF_UNIX, SOCK_STREAM, 0);
		_exit(c >= 0 && connect(c, (struct sockaddr *)&addr, al) == 0 && send_fds(chan[1], &c, 1) == 0 ? 7 : 1);
	}
	if (pb < 0 || (b[0] = accept(lis, NULL, NULL)) < 0 || recv_fds(chan[0], &b[1], 1) < 0 ||
	    waitpid(pb, &st, 0) != pb || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
		return 4;

	pz = pair_maker(chan[1], SOCK_DGRAM);
	if (pz < 0 || recv_fds(chan[0], z, 2) < 0)
		return 5;
	while (waitid(P_PID, (id_t)pz, &(siginfo_t){ 0 }, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		; /* a zombie now */

	for (long s = 0; s < steps; s++) {
		fails += check("A's socketpair, first end", a[0], pa) + check("A's socketpair, second end", a[1], pa);
		fails += check("the end accepted from B", b[0], pb) + check("B's connected end", b[1], self);
		fails += check("Z's datagram pair, first end", z[0], pz) +
			 check("Z's datagram pair, second end", z[1], pz);
		fails += gone("A", pa) + gone("B", pb);
		fails += ping("A's socketpair", a[0], a[1], s) + ping("B's connection", b[0], b[1], s) +
			 ping("Z's datagram pair", z[0], z[1], s);
		checks += 11;
		sleep_ms(STEP_MS);
	}
	/* P's children: only Z (a stand-in a restore left behind would show) */
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)self);
	if ((f = fopen(path, "r"))) {
		if (!fgets(kids, sizeof(kids), f))
			kids[0] = 0;
		fclose(f);
	}
	snprintf(want, sizeof(want), "%d ", (int)pz);
	if (strcmp(kids, want)) {
		printf("P's children are not Z alone\n");
		fails++;
	}
	if (waitpid(pz, &st, 0) != pz || !WIFEXITED(st) || WEXITSTATUS(st) != 7) {
		printf("Z did not end as it had\n");
		fails++;
	}
	printf("mp_peercred_gone: %d checks, %d failed\n", checks, fails);
	return fails ? 1 : 0;
}
