/* udp_peers: UDP sockets connected to addresses no socket of the job
 * connects back from come back as they were, in the cases a restore must
 * make them in a particular order: their receive buffer before their
 * queued datagrams, SO_REUSEPORT before their bind, SO_BROADCAST before
 * their connect, and the job's own socket as the sender of what was
 * queued when that socket is bound to the wildcard address.
 *
 * State exercised (loopback, IPv4):
 * - w, bound to 0.0.0.0 (any port), unconnected; c, bound to 127.0.0.1,
 *   SO_RCVBUF 1 MiB, connected to 127.0.0.1 at w's port; w sends c 300
 *   datagrams of 1000 bytes (more than a default buffer holds). At the
 *   end c reads all 300, in order, each from 127.0.0.1 at w's port; w's
 *   SO_SNDBUF is checked at every step (a restore sends them through w).
 * - s, bound to 0.0.0.0 (any port) with SO_REUSEPORT; k, with
 *   SO_REUSEPORT, bound to 127.0.0.1 at s's port and connected to a port
 *   no one holds (the QUIC per-client socket pattern): its own and peer
 *   addresses checked at every step.
 * - b, with SO_BROADCAST, connected to 127.255.255.255: its addresses
 *   checked at every step.
 * - IPv6, dual-stack: e6 bound to :: (any port), unconnected; d6 bound to
 *   ::, connected to e6's port at ::ffff:127.0.0.1 (an IPv4 peer); e6
 *   sends d6 two datagrams, read at the end from ::ffff:127.0.0.1 at e6's
 *   port (a restore that sent them to ::1 named that instead).
 * A restore that set the buffer after the datagrams lost most of them,
 * one that resent them from a socket of its own named another sender,
 * one that bound k without SO_REUSEPORT moved it to another port, and
 * one that connected b before SO_BROADCAST made it a lost connection.
 * Prints only deterministic lines; exits 1 after a FAIL line.
 * Usage: udp_peers [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
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

#define NDGRAM 300
#define DGRAM 1000

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

struct names {
	struct sockaddr_in own, peer;
};

static int names_of(int fd, struct names *n)
{
	socklen_t ol = sizeof(n->own), pl = sizeof(n->peer);

	memset(n, 0, sizeof(*n));
	return getsockname(fd, (struct sockaddr *)&n->own, &ol) < 0 ||
	       getpeername(fd, (struct sockaddr *)&n->peer, &pl) < 0 ? -1 : 0;
}

static int same(const struct names *a, const struct names *b)
{
	return a->own.sin_port == b->own.sin_port && a->own.sin_addr.s_addr == b->own.sin_addr.s_addr &&
	       a->peer.sin_port == b->peer.sin_port && a->peer.sin_addr.s_addr == b->peer.sin_addr.s_addr;
}

/* a UDP socket, options set, bound to addr:port */
static int udp(uint32_t addr, in_port_t port, int reuseport)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(addr)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	if (fd < 0 || (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	return fd;
}

static in_port_t port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	return getsockname(fd, (struct sockaddr *)&a, &l) < 0 ? 0 : a.sin_port;
}

static int connect_in(int fd, uint32_t addr, in_port_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(addr)};

	return connect(fd, (struct sockaddr *)&a, sizeof(a));
}

/* a dual-stack UDP socket bound to :: at port (0: any) */
static int udp6(in_port_t port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = port, .sin6_addr = IN6ADDR_ANY_INIT};
	int fd = socket(AF_INET6, SOCK_DGRAM, 0), zero = 0;

	if (fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	return fd;
}

static in_port_t port6_of(int fd)
{
	struct sockaddr_in6 a;
	socklen_t l = sizeof(a);

	return getsockname(fd, (struct sockaddr *)&a, &l) < 0 ? 0 : a.sin6_port;
}

/* ::ffff:127.0.0.1 at port */
static struct sockaddr_in6 mapped_lo(in_port_t port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = port};

	a.sin6_addr.s6_addr[10] = a.sin6_addr.s6_addr[11] = 0xff;
	a.sin6_addr.s6_addr[12] = 127;
	a.sin6_addr.s6_addr[15] = 1;
	return a;
}

int main(int argc, char **argv)
{
	int steps = (int)(8 * app_scale(argc, argv) + 0.5), bad = 0, one = 1, rcv = 1 << 20, x;
	int w = udp(INADDR_ANY, 0, 0), c = udp(INADDR_LOOPBACK, 0, 0), s = udp(INADDR_ANY, 0, 1), k, b;
	struct timespec t = {0, 350 * 1000000L};
	struct names nc, nk, nb, now;
	struct sockaddr_in ca;
	struct sockaddr_in6 e6a, d6a;
	in_port_t gone;
	int e6 = udp6(0), d6 = udp6(0), wsnd = -1, now_snd;
	socklen_t sl = sizeof(wsnd);
	static char d[DGRAM];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	/* a port no one holds: one given and closed */
	if ((x = udp(INADDR_LOOPBACK, 0, 0)) < 0 || !(gone = port_of(x)) || close(x) < 0)
		return 1;
	if (w < 0 || c < 0 || s < 0 || setsockopt(c, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)) < 0 ||
	    connect_in(c, INADDR_LOOPBACK, port_of(w)) < 0 || names_of(c, &nc) < 0)
		return 1;
	ca = nc.own;
	for (int i = 0; i < NDGRAM; i++) {
		memset(d, 'a' + i % 26, sizeof(d));
		memcpy(d, &i, sizeof(i));
		if (sendto(w, d, sizeof(d), 0, (struct sockaddr *)&ca, sizeof(ca)) != DGRAM)
			return 1;
	}
	if ((k = udp(INADDR_LOOPBACK, port_of(s), 1)) < 0 || connect_in(k, INADDR_LOOPBACK, gone) < 0 ||
	    names_of(k, &nk) < 0)
		return 1;
	if ((b = socket(AF_INET, SOCK_DGRAM, 0)) < 0 || setsockopt(b, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) < 0 ||
	    connect_in(b, 0x7fffffff /* 127.255.255.255 */, gone) < 0 || names_of(b, &nb) < 0)
		return 1;
	if (getsockopt(w, SOL_SOCKET, SO_SNDBUF, &wsnd, &sl) < 0)
		return 1;
	e6a = mapped_lo(port6_of(e6));
	d6a = mapped_lo(port6_of(d6));
	if (e6 < 0 || d6 < 0 || connect(d6, (struct sockaddr *)&e6a, sizeof(e6a)) < 0 ||
	    sendto(e6, "v6a", 3, 0, (struct sockaddr *)&d6a, sizeof(d6a)) != 3 ||
	    sendto(e6, "v6b", 3, 0, (struct sockaddr *)&d6a, sizeof(d6a)) != 3)
		return 1;
	for (int step = 0; step < steps && !bad; step++) {
		nanosleep(&t, NULL);
		if (names_of(c, &now) < 0 || !same(&now, &nc))
			printf("FAIL step %d: c's own or peer address changed\n", step), bad = 1;
		else if (names_of(k, &now) < 0 || !same(&now, &nk))
			printf("FAIL step %d: k's own or peer address changed (SO_REUSEPORT)\n", step), bad = 1;
		else if ((sl = sizeof(now_snd)), getsockopt(w, SOL_SOCKET, SO_SNDBUF, &now_snd, &sl) < 0 || now_snd != wsnd)
			printf("FAIL step %d: w's SO_SNDBUF changed\n", step), bad = 1;
		else if (names_of(b, &now) < 0 || !same(&now, &nb))
			printf("FAIL step %d: b's own or peer address changed (SO_BROADCAST)\n", step), bad = 1;
		else
			printf("step %d: c, k and b connected as they were\n", step);
	}
	for (int i = 0; i < NDGRAM && !bad; i++) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(c, d, sizeof(d), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		int seq = -1;
		if (n == DGRAM)
			memcpy(&seq, d, sizeof(seq));
		if (n != DGRAM || seq != i || d[DGRAM - 1] != 'a' + i % 26)
			printf("FAIL datagram %d of %d toward c (%zd bytes, number %d)\n", i, NDGRAM, n, seq), bad = 1;
		else if (from.sin_port != port_of(w) || from.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			printf("FAIL datagram %d toward c: not from w's port on 127.0.0.1\n", i), bad = 1;
	}
	for (int i = 0; i < 2 && !bad; i++) {
		struct sockaddr_in6 from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(d6, d, sizeof(d), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n != 3 || memcmp(d, i ? "v6b" : "v6a", 3))
			printf("FAIL datagram %d toward d6 (%zd bytes)\n", i, n), bad = 1;
		else if (from.sin6_port != e6a.sin6_port || memcmp(&from.sin6_addr, &e6a.sin6_addr, 16))
			printf("FAIL datagram %d toward d6: not from e6's port on ::ffff:127.0.0.1\n", i), bad = 1;
	}
	printf("%s\n", bad ? "FAIL udp_peers" : "udp_peers: addresses and datagrams as bare");
	return bad;
}
