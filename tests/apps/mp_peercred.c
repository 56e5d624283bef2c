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
 * At every step each process checks the pid, uid and gid every one of its
 * ends names, and P pings A and B through their connections. A restore
 * that made the connections itself names no process (pid 0) and fails.
 * Usage: mp_peercred [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 0 if fd's peer is `want` with our own uid and gid; else says what. */
static int check(const char *who, const char *what, int fd, pid_t want)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0) {
		printf("%s: %s: SO_PEERCRED: %s\n", who, what, strerror(errno));
		return 1;
	}
	if (uc.pid != want || uc.uid != getuid() || uc.gid != getgid()) {
		printf("%s: %s names pid %d uid %u gid %u (want pid %d uid %u gid %u)\n", who, what, (int)uc.pid,
		       (unsigned)uc.uid, (unsigned)uc.gid, (int)want, (unsigned)getuid(), (unsigned)getgid());
		return 1;
	}
	return 0;
}

/* A child: answers each ping after checking its ends; 'q' ends it. */
static int serve(const char *who, int fd, int d0, int d1)
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
		if (write(fd, bad ? "x" : "k", 1) != 1)
			break;
	}
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
	int pa[2], own[2], lfd, pb = -1;
	struct sockaddr_un addr;
	socklen_t alen;
	pid_t self = getpid(), a, b;
	struct timespec t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_REALTIME, &t);
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "mp_peercred.%d.%ld", (int)self,
					    (long)t.tv_nsec));
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, pa) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, own) < 0 ||
	    (lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0)) < 0 || bind(lfd, (struct sockaddr *)&addr, alen) < 0 ||
	    listen(lfd, 1) < 0) {
		printf("mp_peercred: setup failed: %s\n", strerror(errno));
		return 1;
	}
	if ((a = fork()) == 0) {
		int d[2];
		close(pa[0]);
		close(lfd);
		if (socketpair(AF_UNIX, SOCK_DGRAM, 0, d) < 0)
			_exit(2);
		_exit(serve("A", pa[1], d[0], d[1]));
	}
	close(pa[1]);
	if ((b = fork()) == 0) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		close(lfd);
		close(pa[0]);
		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, alen) < 0)
			_exit(2);
		_exit(serve("B", fd, -1, -1));
	}
	if (a < 0 || b < 0 || (pb = accept(lfd, NULL, NULL)) < 0) {
		printf("mp_peercred: setup failed: %s\n", strerror(errno));
		return 1;
	}
	close(lfd);
	printf("mp_peercred: a socketpair shared with a child, an accepted connection, a pair of its own; %d steps\n",
	       steps);
	for (int i = 0; i < steps && bad < 3; i++) {
		int was = bad;
		bad += check("P", "its end of the pair shared with A", pa[0], self);
		bad += check("P", "the connection B made", pb, b);
		bad += check("P", "its own pair (first end)", own[0], self);
		bad += check("P", "its own pair (second end)", own[1], self);
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
	printf("mp_peercred: %s\n", bad ? "SO_PEERCRED WRONG" : "every end named the process that made its connection");
	return bad ? 1 : 0;
}
