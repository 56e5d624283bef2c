/* mp_peercred: what SO_PEERCRED names on the job's UNIX connections.
 *
 * State exercised: the kernel notes, as a connection is made, the process
 * that made it: both ends of a socketpair name its maker, a connecting end
 * names the process that listened, an accepted end the process that
 * connected. Here the parent P makes a stream socketpair and forks A with
 * one end (both ends name P), listens on an abstract name (unique per run,
 * never printed) for a record (SOCK_SEQPACKET) connection from B, accepts
 * it (B's end names P, P's end names B), and keeps a stream socketpair of
 * its own; A makes a datagram socketpair of its own (both ends name A).
 * Files ride on two connections from the start to the end: both ends of a
 * pipe (with bytes in it; P holds neither) on a second pair shared with A,
 * a pipe's read end on a second connection from B; B's third connection
 * waits in the listener's queue until the end (its end names P; once P
 * accepts it, P's names B). At every step each
 * process checks the pid, uid and gid every one of its ends names, and P
 * pings A and B through their connections. At the end the children take
 * their files and check them, and a new child C connects to P's listener,
 * kept open all along: C's end names P, P's accepted end names C (a
 * listener a restore made names whoever called listen() on it). D, run
 * as root, makes a socketpair with effective uid and gid 65534, then takes
 * its own back: its ends name D with 65534 (as an ordinary user it keeps
 * its own ids throughout). A restore
 * that made the connections itself names no process (pid 0) and fails.
 * Usage: mp_peercred [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 0 if fd's peer is `want` with our own uid and gid; else says what. */
static int check_ids(const char *who, const char *what, int fd, pid_t want, uid_t wu, gid_t wg)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0) {
		printf("%s: %s: SO_PEERCRED: %s\n", who, what, strerror(errno));
		return 1;
	}
	if (uc.pid != want || uc.uid != wu || uc.gid != wg) {
		printf("%s: %s names pid %d uid %u gid %u (want pid %d uid %u gid %u)\n", who, what, (int)uc.pid,
		       (unsigned)uc.uid, (unsigned)uc.gid, (int)want, (unsigned)wu, (unsigned)wg);
		return 1;
	}
	return 0;
}

/* 0 if fd's peer is `want` with our own uid and gid; else says what. */
static int check(const char *who, const char *what, int fd, pid_t want)
{
	return check_ids(who, what, fd, want, getuid(), getgid());
}

/* A pipe with `text` in it sent on sock: its read end, and its write end
 * too with `both`; none of them kept. */
static int send_pipe(int sock, const char *text, int both)
{
	int p[2], r;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {"f", 1};
	struct msghdr mh = {0};
	struct cmsghdr *c;

	if (pipe(p) < 0 || write(p[1], text, strlen(text)) != (ssize_t)strlen(text))
		return -1;
	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = CMSG_SPACE((both ? 2 : 1) * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((both ? 2 : 1) * sizeof(int));
	memcpy(CMSG_DATA(c), p, (both ? 2 : 1) * sizeof(int));
	r = sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
	close(p[0]);
	close(p[1]);
	return r;
}

/* The pipe of send_pipe taken from sock: 0 if it holds `text` (and its
 * write end, if sent, writes into it). */
static int take_pipe(const char *who, int sock, const char *text, int both)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char b[64] = {0}, x = 0;
	struct iovec iov = {&x, 1};
	struct msghdr mh = {0};
	struct cmsghdr *c;
	int fds[2] = {-1, -1}, n = 0, bad = 0;
	size_t len = strlen(text);

	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	if (recvmsg(sock, &mh, 0) != 1 || !(c = CMSG_FIRSTHDR(&mh)) || c->cmsg_type != SCM_RIGHTS) {
		printf("%s: no files came on its second connection\n", who);
		return 1;
	}
	n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	memcpy(fds, CMSG_DATA(c), (size_t)(n > 2 ? 2 : n) * sizeof(int));
	if (n != (both ? 2 : 1) || read(fds[0], b, len) != (ssize_t)len || memcmp(b, text, len))
		bad = 1;
	if (!bad && both && (write(fds[1], "z", 1) != 1 || read(fds[0], b, 1) != 1 || b[0] != 'z'))
		bad = 1;
	if (bad)
		printf("%s: the pipe that came in flight holds '%.*s' with %d descriptor(s) (want '%s', %d)\n", who,
		       (int)len, b, n, text, both ? 2 : 1);
	return bad;
}

/* A child: answers each ping after checking its ends; 'q' ends it, after
 * the files on its second connection m (the pipe holding text) are taken. */
static int serve(const char *who, int fd, int d0, int d1, int m, const char *text, int both, int pend)
{
	pid_t parent = getppid(), self = getpid();
	int bad = 0;
	char c;

	for (;;) {
		ssize_t n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1 || c == 'q')
			break;
		bad += check(who, "its connection to P", fd, parent);
		if (d0 >= 0) {
			bad += check(who, "its own datagram pair (first end)", d0, self);
			bad += check(who, "its own datagram pair (second end)", d1, self);
			if (send(d0, "d", 1, 0) != 1 || recv(d1, &c, 1, 0) != 1 || c != 'd')
				bad++;
		}
		bad += check(who, "its second connection", m, parent);
		if (pend >= 0)
			bad += check(who, "its connection not accepted yet", pend, parent);
		if (write(fd, bad ? "x" : "k", 1) != 1)
			break;
	}
	bad += take_pipe(who, m, text, both);
	fflush(stdout);
	return bad ? 1 : 0;
}

static int ping(int fd)
{
	char c = 0;

	if (write(fd, "p", 1) != 1)
		return 1;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	return c != 'k';
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	int steps = (int)(100 * scale) > 4 ? (int)(100 * scale) : 4, bad = 0, st;
	int pa[2], own[2], fl[2], lfd, pb = -1, pb2 = -1, pc;
	struct sockaddr_un addr;
	socklen_t alen;
	pid_t self = getpid(), a, b, c, d;
	struct timespec t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_REALTIME, &t);
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "mp_peercred.%d.%ld", (int)self,
					    (long)t.tv_nsec));
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, pa) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, own) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, fl) < 0 || (lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0)) < 0 ||
	    bind(lfd, (struct sockaddr *)&addr, alen) < 0 || listen(lfd, 4) < 0) {
		printf("mp_peercred: setup failed: %s\n", strerror(errno));
		return 1;
	}
	if ((a = fork()) == 0) {
		int dg[2];
		close(pa[0]);
		close(fl[0]);
		close(lfd);
		if (socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) < 0)
			_exit(2);
		_exit(serve("A", pa[1], dg[0], dg[1], fl[1], "hello", 1, -1));
	}
	close(pa[1]);
	close(fl[1]);
	if ((b = fork()) == 0) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0), fd2 = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		int fd3 = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		close(lfd);
		close(pa[0]);
		close(fl[0]);
		if (fd < 0 || fd2 < 0 || fd3 < 0 || connect(fd, (struct sockaddr *)&addr, alen) < 0 ||
		    connect(fd2, (struct sockaddr *)&addr, alen) < 0 || connect(fd3, (struct sockaddr *)&addr, alen) < 0)
			_exit(2);
		_exit(serve("B", fd, -1, -1, fd2, "world", 0, fd3));
	}
	/* D, as root, makes a pair with effective ids 65534, then takes its
	 * own back (and stays dumpable: a ckrun without CAP_SYS_PTRACE can
	 * read it): the ends name 65534 */
	if ((d = fork()) == 0) {
		int sp[2], dbad = 0, as = 0;
		uid_t wu = getuid();
		gid_t wg = getgid();
		close(lfd);
		close(pa[0]);
		close(fl[0]);
		if (geteuid() == 0) {
			if (setresgid(-1, 65534, -1) < 0 || setresuid(-1, 65534, -1) < 0)
				_exit(2);
			as = 1;
		}
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
			_exit(2);
		if (as) {
			if (setresuid(-1, 0, -1) < 0 || setresgid(-1, 0, -1) < 0)
				_exit(2);
			prctl(PR_SET_DUMPABLE, 1);
			wu = 65534;
			wg = 65534;
		}
		for (int i = 0; i < steps && dbad < 3; i++) {
			dbad += check_ids("D", "its pair made as other ids (first end)", sp[0], getpid(), wu, wg);
			dbad += check_ids("D", "its pair made as other ids (second end)", sp[1], getpid(), wu, wg);
			usleep(30000);
		}
		_exit(dbad ? 1 : 0);
	}
	if (a < 0 || b < 0 || d < 0 || (pb = accept(lfd, NULL, NULL)) < 0 || (pb2 = accept(lfd, NULL, NULL)) < 0 ||
	    send_pipe(fl[0], "hello", 1) < 0 || send_pipe(pb2, "world", 0) < 0) {
		printf("mp_peercred: setup failed: %s\n", strerror(errno));
		return 1;
	}
	printf("mp_peercred: a socketpair shared with a child, accepted connections, a pair of its own, pipes in "
	       "flight, a listener; %d steps\n",
	       steps);
	for (int i = 0; i < steps && bad < 3; i++) {
		int was = bad;
		bad += check("P", "its end of the pair shared with A", pa[0], self);
		bad += check("P", "the connection B made", pb, b);
		bad += check("P", "its own pair (first end)", own[0], self);
		bad += check("P", "its own pair (second end)", own[1], self);
		bad += check("P", "its end of the second pair shared with A", fl[0], self);
		bad += check("P", "the second connection B made", pb2, b);
		if (ping(pa[0]))
			printf("P: A found its ends wrong\n"), bad++;
		if (ping(pb))
			printf("P: B found its ends wrong\n"), bad++;
		if (bad != was)
			printf("P: at step %d\n", i);
		usleep(30000);
	}
	if (write(pa[0], "q", 1) != 1 || write(pb, "q", 1) != 1)
		bad++;
	if (waitpid(a, &st, 0) != a || !WIFEXITED(st) || WEXITSTATUS(st))
		bad++;
	if (waitpid(b, &st, 0) != b || !WIFEXITED(st) || WEXITSTATUS(st))
		bad++;
	if (waitpid(d, &st, 0) != d || !WIFEXITED(st) || WEXITSTATUS(st))
		bad++;
	/* B's third connection, in the listener's queue all along: it names B */
	if ((pc = accept(lfd, NULL, NULL)) < 0) {
		printf("P: B's connection not accepted yet: %s\n", strerror(errno));
		bad++;
	} else {
		bad += check("P", "B's connection accepted at the end", pc, b);
		close(pc);
	}
	/* the listener, kept: a new connection names the process that listens */
	if ((c = fork()) == 0) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, alen) < 0)
			_exit(2);
		_exit(check("C", "its connection to P's listener", fd, getppid()));
	}
	if (c < 0 || (pc = accept(lfd, NULL, NULL)) < 0) {
		printf("P: the connection C made: %s\n", strerror(errno));
		bad++;
	} else {
		bad += check("P", "the connection C made", pc, c);
		close(pc);
	}
	if (c > 0 && (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)))
		bad++;
	printf("mp_peercred: %s\n", bad ? "SO_PEERCRED WRONG" : "every end named the process that made its connection");
	return bad ? 1 : 0;
}
