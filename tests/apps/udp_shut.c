/* udp_shut: UDP sockets shut down on one side come back shut as they were.
 *
 * State exercised (loopback): u1, IPv4, bound and connected to u2's
 * address, shut for writing (a send fails with EPIPE); u2, IPv4, bound and
 * unconnected, shut for reading (shutdown says ENOTCONN but the kernel
 * keeps the bit: it polls POLLRDHUP); u3, IPv6, bound to ::1 and not
 * connected, shut both ways (POLLHUP, and a send fails with EPIPE). At the
 * end u2, which may still send, sends u1, which may still receive, a
 * datagram. A UDP socket's shutdown shows in no option and reaches no
 * peer: a restore that dropped it let sends work again. Prints only
 * deterministic lines; exits 1 after a FAIL line.
 * Usage: udp_shut [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(int step, const char *what, long got, int err)
{
	printf("FAIL step %d: %s (got %ld, errno %d)\n", step, what, got, err);
	return 1;
}

static int check(int step, int u1, int u2, int u3)
{
	struct pollfd p2 = {u2, POLLRDHUP, 0}, p3 = {u3, POLLIN, 0};
	struct sockaddr_in6 lo6;
	ssize_t n;

	n = send(u1, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n != -1 || errno != EPIPE)
		return fail(step, "a send from the socket shut for writing, want EPIPE", (long)n, n < 0 ? errno : 0);
	if (poll(&p2, 1, 0) != 1 || !(p2.revents & POLLRDHUP))
		return fail(step, "the socket shut for reading polls POLLRDHUP", p2.revents, 0);
	if (poll(&p3, 1, 0) != 1 || !(p3.revents & POLLHUP))
		return fail(step, "the socket shut both ways polls POLLHUP", p3.revents, 0);
	memset(&lo6, 0, sizeof(lo6));
	lo6.sin6_family = AF_INET6;
	lo6.sin6_addr = in6addr_loopback;
	lo6.sin6_port = htons(9); /* discard: nothing is sent */
	n = sendto(u3, "y", 1, MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)&lo6, sizeof(lo6));
	if (n != -1 || errno != EPIPE)
		return fail(step, "a send from the socket shut both ways, want EPIPE", (long)n, n < 0 ? errno : 0);
	printf("step %d: the three sockets shut as they were\n", step);
	return 0;
}

int main(int argc, char **argv)
{
	int steps = (int)(8 * app_scale(argc, argv) + 0.5), bad = 0;
	int u1 = socket(AF_INET, SOCK_DGRAM, 0), u2 = socket(AF_INET, SOCK_DGRAM, 0);
	int u3 = socket(AF_INET6, SOCK_DGRAM, 0);
	struct sockaddr_in a1, a2;
	struct sockaddr_in6 a3;
	socklen_t l = sizeof(a2);
	struct timespec t = {0, 350 * 1000000L};
	char b[8];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (u1 < 0 || u2 < 0 || u3 < 0)
		return 1;
	memset(&a1, 0, sizeof(a1));
	a1.sin_family = AF_INET;
	a1.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a2 = a1;
	if (bind(u2, (struct sockaddr *)&a2, sizeof(a2)) < 0 || getsockname(u2, (struct sockaddr *)&a2, &l) < 0 ||
	    bind(u1, (struct sockaddr *)&a1, sizeof(a1)) < 0 || connect(u1, (struct sockaddr *)&a2, sizeof(a2)) < 0 ||
	    (l = sizeof(a1), getsockname(u1, (struct sockaddr *)&a1, &l)) < 0)
		return 1;
	memset(&a3, 0, sizeof(a3));
	a3.sin6_family = AF_INET6;
	a3.sin6_addr = in6addr_loopback;
	if (bind(u3, (struct sockaddr *)&a3, sizeof(a3)) < 0)
		return 1;
	if (shutdown(u1, SHUT_WR) < 0 || (shutdown(u2, SHUT_RD) < 0 && errno != ENOTCONN) ||
	    (shutdown(u3, SHUT_RDWR) < 0 && errno != ENOTCONN))
		return 1;
	for (int step = 0; step < steps && !bad; step++) {
		nanosleep(&t, NULL);
		bad = check(step, u1, u2, u3);
	}
	/* u2 still sends, u1 still receives (connected to u2: only u2's) */
	if (!bad && (sendto(u2, "ok", 2, 0, (struct sockaddr *)&a1, sizeof(a1)) != 2 ||
		     recv(u1, b, sizeof(b), 0) != 2 || memcmp(b, "ok", 2))) {
		printf("FAIL a datagram from the socket shut for reading to the one shut for writing\n");
		bad = 1;
	}
	printf("%s\n", bad ? "FAIL udp_shut" : "udp_shut: every socket shut as bare");
	return bad;
}
