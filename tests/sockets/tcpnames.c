/* TCP connections between two processes of the job keep their addresses
 * and ports across a restore (tests/suite/37-sockets.sh, tcp-names).
 *
 * The parent listens on 127.0.0.1 (keeping that listener open, SO_REUSEADDR
 * set), on 127.0.0.1 again (closed after its accept, no SO_REUSEADDR) and
 * on ::1; a child connects to each. Each side notes getsockname and
 * getpeername of its three connections at the start, in its own memory,
 * and at every step checks them again while a counter goes back and forth
 * on each connection. Steps print "step N: names kept"; a change prints
 * what changed. Ports are the kernel's choice: a resume that makes the
 * connections on new ports (or a fresh start) cannot print the same.
 * Usage: tcpnames [STEPS] (default 40, 100 ms apart). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCONN 3

struct names {
	struct sockaddr_storage self, peer;
};

static int listener(int family, int reuse)
{
	struct sockaddr_storage a;
	socklen_t l;
	int fd = socket(family, SOCK_STREAM, 0), one = 1;

	memset(&a, 0, sizeof(a));
	a.ss_family = (sa_family_t)family;
	if (family == AF_INET) {
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		l = sizeof(struct sockaddr_in);
	} else {
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
		l = sizeof(struct sockaddr_in6);
	}
	if (fd < 0 || (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&a, l) < 0 || listen(fd, 4) < 0) {
		perror("tcpnames: listener");
		exit(2);
	}
	return fd;
}

static void note(int fd, struct names *n)
{
	socklen_t l1 = sizeof(n->self), l2 = sizeof(n->peer);

	memset(n, 0, sizeof(*n));
	if (getsockname(fd, (struct sockaddr *)&n->self, &l1) < 0 ||
	    getpeername(fd, (struct sockaddr *)&n->peer, &l2) < 0) {
		perror("tcpnames: names");
		exit(2);
	}
}

static const char *show(const struct sockaddr_storage *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (a->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, ip, sizeof(ip));
		port = ntohs(((const struct sockaddr_in *)a)->sin_port);
	} else if (a->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, ip, sizeof(ip));
		port = ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	}
	snprintf(buf, len, "%s:%d", ip, port);
	return buf;
}

/* 0 when every connection still has the names noted at the start. */
static int check(const char *who, const int *fd, const struct names *was)
{
	int bad = 0;

	for (int i = 0; i < NCONN; i++) {
		struct names now;
		char x[80], y[80], z[80], w[80];
		note(fd[i], &now);
		if (memcmp(&now, &was[i], sizeof(now))) {
			printf("%s connection %d: was %s -> %s, now %s -> %s\n", who, i, show(&was[i].self, x, sizeof(x)),
			       show(&was[i].peer, y, sizeof(y)), show(&now.self, z, sizeof(z)), show(&now.peer, w, sizeof(w)));
			bad = 1;
		}
	}
	return bad;
}

static void full(int fd, void *buf, size_t len, int in)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = in ? read(fd, (char *)buf + done, len - done) : write(fd, (char *)buf + done, len - done);
		if (n <= 0) {
			perror("tcpnames: transfer");
			exit(3);
		}
		done += (size_t)n;
	}
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 40, ls[NCONN], mine[NCONN], theirs[NCONN], st;
	struct names was[NCONN];
	pid_t kid;

	ls[0] = listener(AF_INET, 1);
	ls[1] = listener(AF_INET, 0);
	ls[2] = listener(AF_INET6, 1);
	for (int i = 0; i < NCONN; i++) {
		struct sockaddr_storage a;
		socklen_t l = sizeof(a);
		if (getsockname(ls[i], (struct sockaddr *)&a, &l) < 0 ||
		    (theirs[i] = socket(a.ss_family, SOCK_STREAM, 0)) < 0 ||
		    connect(theirs[i], (struct sockaddr *)&a, l) < 0 || (mine[i] = accept(ls[i], NULL, NULL)) < 0) {
			perror("tcpnames: connect");
			return 2;
		}
	}
	close(ls[1]);
	kid = fork();
	if (kid < 0)
		return 2;
	if (kid == 0) {
		for (int i = 0; i < NCONN; i++)
			note(theirs[i], &was[i]), close(mine[i]);
		for (;;) {
			int v;
			full(theirs[0], &v, sizeof(v), 1);
			if (v < 0)
				_exit(0);
			if (check("child", theirs, was))
				_exit(1);
			for (int i = 0; i < NCONN; i++) {
				int w = v + i;
				if (i)
					full(theirs[i], &w, sizeof(w), 1);
				w++;
				full(theirs[i], &w, sizeof(w), 0);
			}
		}
	}
	for (int i = 0; i < NCONN; i++)
		note(mine[i], &was[i]), close(theirs[i]);
	printf("tcpnames: %d connections, %d steps\n", NCONN, steps);
	fflush(stdout);
	for (int s = 0; s < steps; s++) {
		struct timespec t = {0, 100 * 1000 * 1000};
		int ok = !check("parent", mine, was);
		for (int i = 0; i < NCONN; i++) {
			int v = s + i;
			full(mine[i], &v, sizeof(v), 0);
		}
		for (int i = 0; i < NCONN; i++) {
			int back;
			full(mine[i], &back, sizeof(back), 1);
			if (back != s + i + 1) {
				printf("connection %d: sent %d, got back %d\n", i, s + i, back);
				ok = 0;
			}
		}
		printf("step %d: %s\n", s, ok ? "names kept" : "names changed");
		fflush(stdout);
		nanosleep(&t, NULL);
	}
	{
		int end = -1;
		full(mine[0], &end, sizeof(end), 0);
	}
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("the child found its names changed\n");
		return 1;
	}
	printf("done\n");
	return 0;
}
