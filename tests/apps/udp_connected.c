/* udp_connected: a UDP socket connected to an address no socket of the
 * job connects back from comes back connected to that same address, with
 * its own address and the datagrams queued toward it.
 *
 * State exercised (loopback, IPv4): u1 bound and connected to u2's
 * address; u2 sends it "q1" and "q2", then is closed (its port is no
 * one's: as a server outside the job would be to a restore). v1 (IPv6)
 * connected to v2, which is not connected back and stays open; v2 sends
 * v1 "r1". Each step checks u1's and v1's own and peer addresses against
 * those at the start. At the end u1 reads "q1", "q2", v1 reads "r1", and
 * v2 sends v1 "r2", which v1 reads (v1 still takes v2's datagrams). A
 * restore that treated a connected UDP socket as a lost connection made
 * it anew on loopback, connected to a port of its own (its peer address
 * and its own changed; v2's datagrams no longer reached v1). Prints only
 * deterministic lines; exits 1 after a FAIL line.
 * Usage: udp_connected [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

struct names {
	struct sockaddr_storage own, peer;
	socklen_t ol, pl;
};

static int names_of(int fd, struct names *n)
{
	memset(n, 0, sizeof(*n));
	n->ol = n->pl = sizeof(n->own);
	return getsockname(fd, (struct sockaddr *)&n->own, &n->ol) < 0 ||
	       getpeername(fd, (struct sockaddr *)&n->peer, &n->pl) < 0 ? -1 : 0;
}

static int same(const struct names *a, const struct names *b)
{
	return a->ol == b->ol && a->pl == b->pl && !memcmp(&a->own, &b->own, a->ol) && !memcmp(&a->peer, &b->peer, a->pl);
}

static int take(int fd, const char *want)
{
	char b[16];
	ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);

	if (n != (ssize_t)strlen(want) || memcmp(b, want, (size_t)n)) {
		printf("FAIL the datagram \"%s\" (got %zd bytes)\n", want, n);
		return 1;
	}
	return 0;
}

static int bound(int family)
{
	struct sockaddr_storage a;
	int fd = socket(family, SOCK_DGRAM, 0);

	memset(&a, 0, sizeof(a));
	a.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, family == AF_INET ? sizeof(struct sockaddr_in)
								    : sizeof(struct sockaddr_in6)) < 0)
		return -1;
	return fd;
}

/* a connected to b's address; b sends it what, one datagram each */
static int connect_to(int a, int b, const char *const *what, int n)
{
	struct sockaddr_storage ba, aa;
	socklen_t bl = sizeof(ba), al = sizeof(aa);

	if (getsockname(b, (struct sockaddr *)&ba, &bl) < 0 || connect(a, (struct sockaddr *)&ba, bl) < 0 ||
	    getsockname(a, (struct sockaddr *)&aa, &al) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (sendto(b, what[i], strlen(what[i]), 0, (struct sockaddr *)&aa, al) != (ssize_t)strlen(what[i]))
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const q[] = {"q1", "q2"}, *const r1[] = {"r1"}, *const r2[] = {"r2"};
	int steps = (int)(8 * app_scale(argc, argv) + 0.5), bad = 0;
	int u1 = bound(AF_INET), u2 = bound(AF_INET), v1 = bound(AF_INET6), v2 = bound(AF_INET6);
	struct timespec t = {0, 350 * 1000000L};
	struct names nu, nv, now;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (u1 < 0 || u2 < 0 || v1 < 0 || v2 < 0 || connect_to(u1, u2, q, 2) < 0 || connect_to(v1, v2, r1, 1) < 0 ||
	    names_of(u1, &nu) < 0 || names_of(v1, &nv) < 0)
		return 1;
	close(u2);
	for (int step = 0; step < steps && !bad; step++) {
		nanosleep(&t, NULL);
		if (names_of(u1, &now) < 0 || !same(&now, &nu)) {
			printf("FAIL step %d: u1's own or peer address changed\n", step);
			bad = 1;
		} else if (names_of(v1, &now) < 0 || !same(&now, &nv)) {
			printf("FAIL step %d: v1's own or peer address changed\n", step);
			bad = 1;
		} else
			printf("step %d: both connected as they were\n", step);
	}
	if (!bad)
		bad = take(u1, "q1") || take(u1, "q2") || take(v1, "r1");
	if (!bad && (connect_to(v1, v2, r2, 1) < 0 || (usleep(20000), take(v1, "r2")))) {
		printf("FAIL v2's datagram after the steps\n");
		bad = 1;
	}
	printf("%s\n", bad ? "FAIL udp_connected" : "udp_connected: addresses and datagrams as bare");
	return bad;
}
