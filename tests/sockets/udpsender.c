/* A datagram queued at the cut comes back from the socket that sent it,
 * not from another one of the same port (tests/suite/37-sockets.sh,
 * udp-sender; run in a network namespace that has 10.88.0.1).
 *
 * Sockets B (10.88.0.1:P) and A (0.0.0.0:P, SO_REUSEADDR on both) share a
 * port; B sends a datagram to R (127.0.0.1) and R leaves it unread for a
 * few seconds. A restore that sends it again through A (the wildcard)
 * would have it come from 127.0.0.1:P, the address the kernel picks for
 * loopback; through B it comes from 10.88.0.1:P, as it did.
 * Usage: udpsender [STEPS] (default 30, 100 ms apart; read at step 2/3). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int udp(const char *ip, int port, int reuse)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	inet_pton(AF_INET, ip, &a.sin_addr);
	if (fd < 0 || (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "udpsender: bind %s:%d: %m\n", ip, port);
		exit(2);
	}
	return fd;
}

static int port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	return getsockname(fd, (struct sockaddr *)&a, &l) < 0 ? -1 : ntohs(a.sin_port);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 30, r, b, w, p;
	struct sockaddr_in to;
	socklen_t tl = sizeof(to);

	r = udp("127.0.0.1", 0, 0);
	b = udp("10.88.0.1", 0, 1);
	p = port_of(b);
	w = udp("0.0.0.0", p, 1);
	if (getsockname(r, (struct sockaddr *)&to, &tl) < 0 ||
	    sendto(b, "hello", 5, 0, (struct sockaddr *)&to, tl) != 5) {
		perror("udpsender: send");
		return 2;
	}
	printf("udpsender: sent from 10.88.0.1, %d steps\n", steps);
	fflush(stdout);
	for (int s = 0; s < steps; s++) {
		struct timespec t = {0, 100 * 1000 * 1000};
		if (s == steps * 2 / 3) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			char buf[16], ip[INET_ADDRSTRLEN] = "?";
			ssize_t n = recvfrom(r, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
			if (n < 0) {
				printf("step %d: nothing queued\n", s);
			} else {
				inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
				printf("step %d: %.*s from %s, %s port\n", s, (int)n, buf, ip,
				       ntohs(from.sin_port) == p ? "the sender's" : "another");
			}
			fflush(stdout);
		}
		nanosleep(&t, NULL);
	}
	close(w);
	printf("done\n");
	return 0;
}
