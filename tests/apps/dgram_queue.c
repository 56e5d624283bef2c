/* dgram_queue: datagrams queued, unread, on unconnected sockets.
 *
 * State exercised: a UNIX datagram socket bound to a path in TMPDIR
 * receives, in this order, "a1" from a socket of the job bound to another
 * path, "u1" from an unbound socket, an empty datagram and "a2" from the
 * bound one; a UDP socket bound to 127.0.0.1 receives "p1" and "p2" from a
 * UDP socket of the job bound to another port, and "q1" from an unbound
 * one. Nothing is read for a while; then each datagram is read with
 * recvfrom and checked: bytes, length (the empty one stays empty), order,
 * and the sender's address where the sender is the job's (a reply sent to
 * it arrives). A third UNIX socket, bound to a path and connected to the
 * receiver, sends "c1" after them, and the receiver's reply waits unread
 * in its queue; after the checks an unbound socket still reaches the
 * receiver's path.
 * Usage: dgram_queue [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static void nap(int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
}

static int fails;

static void expect(int fd, const char *want, size_t wlen, const struct sockaddr *from, socklen_t flen, const char *what)
{
	char b[64];
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);
	ssize_t n = recvfrom(fd, b, sizeof(b), MSG_DONTWAIT, (struct sockaddr *)&a, &al);

	if (n != (ssize_t)wlen || memcmp(b, want, wlen)) {
		printf("%s: got %zd bytes, wanted %zu (%.*s)\n", what, n, wlen, (int)wlen, want);
		fails++;
		return;
	}
	if (from && (al != flen || memcmp(&a, from, flen))) {
		printf("%s: from another sender\n", what);
		fails++;
		return;
	}
	printf("%s: %zu bytes as sent\n", what, wlen);
}

int main(int argc, char **argv)
{
	int ms = (int)(3000 * app_scale(argc, argv)), srv, a, u, us, up, uu, c, late;
	const char *tmp = getenv("TMPDIR");
	struct sockaddr_un sa = {AF_UNIX, ""}, aa = {AF_UNIX, ""}, ca = {AF_UNIX, ""};
	struct sockaddr_in s4 = {0}, p4 = {0};
	socklen_t l4 = sizeof(s4);
	char b[8];

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/dgq-srv.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
	snprintf(aa.sun_path, sizeof(aa.sun_path), "%s/dgq-a.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
	snprintf(ca.sun_path, sizeof(ca.sun_path), "%s/dgq-c.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
	srv = socket(AF_UNIX, SOCK_DGRAM, 0);
	a = socket(AF_UNIX, SOCK_DGRAM, 0);
	u = socket(AF_UNIX, SOCK_DGRAM, 0);
	us = socket(AF_INET, SOCK_DGRAM, 0);
	up = socket(AF_INET, SOCK_DGRAM, 0);
	uu = socket(AF_INET, SOCK_DGRAM, 0);
	c = socket(AF_UNIX, SOCK_DGRAM, 0);
	s4.sin_family = p4.sin_family = AF_INET;
	s4.sin_addr.s_addr = p4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (srv < 0 || a < 0 || u < 0 || us < 0 || up < 0 || uu < 0 || c < 0 || bind(srv, (void *)&sa, sizeof(sa)) < 0 ||
	    bind(c, (void *)&ca, sizeof(ca)) < 0 || connect(c, (void *)&sa, sizeof(sa)) < 0 ||
	    bind(a, (void *)&aa, sizeof(aa)) < 0 || bind(us, (void *)&s4, sizeof(s4)) < 0 ||
	    getsockname(us, (void *)&s4, &l4) < 0 || bind(up, (void *)&p4, sizeof(p4)) < 0 ||
	    getsockname(up, (void *)&p4, &l4) < 0)
		return 1;
	if (sendto(a, "a1", 2, 0, (void *)&sa, sizeof(sa)) != 2 || sendto(u, "u1", 2, 0, (void *)&sa, sizeof(sa)) != 2 ||
	    sendto(a, "", 0, 0, (void *)&sa, sizeof(sa)) != 0 || sendto(a, "a2", 2, 0, (void *)&sa, sizeof(sa)) != 2 ||
	    sendto(up, "p1", 2, 0, (void *)&s4, sizeof(s4)) != 2 || sendto(uu, "q1", 2, 0, (void *)&s4, sizeof(s4)) != 2 ||
	    sendto(up, "p2", 2, 0, (void *)&s4, sizeof(s4)) != 2 || send(c, "c1", 2, 0) != 2 ||
	    sendto(srv, "reply0", 6, 0, (void *)&ca, sizeof(ca)) != 6)
		return 1;
	printf("dgram_queue: 5 UNIX and 3 UDP datagrams queued for %d ms, and a reply\n", ms);
	fflush(stdout);
	nap(ms);
	expect(srv, "a1", 2, (void *)&aa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(aa.sun_path) + 1),
	       "unix 1");
	expect(srv, "u1", 2, NULL, 0, "unix 2");
	expect(srv, "", 0, NULL, 0, "unix 3 (empty)");
	expect(srv, "a2", 2, NULL, 0, "unix 4");
	expect(srv, "c1", 2, (void *)&ca, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(ca.sun_path) + 1),
	       "unix 5 (connected sender)");
	expect(c, "reply0", 6, (void *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(sa.sun_path) + 1),
	       "reply to the connected sender");
	expect(us, "p1", 2, (void *)&p4, sizeof(p4), "udp 1");
	expect(us, "q1", 2, NULL, 0, "udp 2");
	expect(us, "p2", 2, (void *)&p4, sizeof(p4), "udp 3");
	if (recv(srv, b, sizeof(b), MSG_DONTWAIT) >= 0 || recv(us, b, sizeof(b), MSG_DONTWAIT) >= 0) {
		printf("more datagrams than were sent\n");
		fails++;
	}
	/* the senders' addresses still reach them */
	if (sendto(srv, "r", 1, 0, (void *)&aa, sizeof(aa)) != 1 || sendto(us, "r", 1, 0, (void *)&p4, sizeof(p4)) != 1)
		fails++;
	late = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (sendto(late, "late", 4, 0, (void *)&sa, sizeof(sa)) != 4 || send(c, "c2", 2, 0) != 2)
		fails++;
	nap(50);
	if (recv(a, b, sizeof(b), MSG_DONTWAIT) != 1 || recv(up, b, sizeof(b), MSG_DONTWAIT) != 1) {
		printf("a reply did not arrive\n");
		fails++;
	}
	expect(srv, "late", 4, NULL, 0, "a new sender to the receiver's path");
	expect(srv, "c2", 2, NULL, 0, "the connected sender again");
	unlink(sa.sun_path);
	unlink(aa.sun_path);
	unlink(ca.sun_path);
	printf("%s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
