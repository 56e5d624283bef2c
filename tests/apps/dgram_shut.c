/* dgram_shut: UNIX datagram sockets shut down on one side, one of them with
 * datagrams still queued toward it from the side that shut.
 *
 * State exercised: two UNIX SOCK_DGRAM pairs.
 * - Pair 1: a1 sends "one", "three", "five" to b1, then b1 shuts itself
 *   for writing (shutdown(SHUT_WR)); b1 reads them only at the end.
 * - Pair 2: a2 shuts itself for reading (shutdown(SHUT_RD)).
 * Every step checks that b1's send fails with EPIPE, that a send toward
 * a2 fails with EPIPE and that a2 polls POLLRDHUP. A datagram socket's
 * shutdown reaches neither its peer nor any option: it was not restored,
 * so sends worked again after a restore. At the end b1 reads its three
 * datagrams in order, then one more a1 sends it, then nothing. (Datagrams
 * queued from the side that shut itself for writing refuse the round:
 * 35-unsupported dgram-peer-shut.) Prints only deterministic lines; exits
 * 1 after a FAIL line.
 * Usage: dgram_shut [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
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

/* One step's checks; 0 when all hold. */
static int check(int step, int b1, int a2, int b2)
{
	struct pollfd pf = {a2, POLLRDHUP, 0};
	ssize_t w, e;
	int ew, ee;

	w = send(b1, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	ew = errno;
	if (w != -1 || ew != EPIPE) {
		printf("FAIL step %d: a send from the end shut for writing gave %zd (errno %d), want EPIPE\n", step, w,
		       w < 0 ? ew : 0);
		return 1;
	}
	e = send(b2, "y", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	ee = errno;
	if (e != -1 || ee != EPIPE) {
		printf("FAIL step %d: a send toward the end shut for reading gave %zd (errno %d), want EPIPE\n", step,
		       e, e < 0 ? ee : 0);
		return 1;
	}
	if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLRDHUP)) {
		printf("FAIL step %d: the end shut for reading does not poll POLLRDHUP (revents 0x%x)\n", step,
		       pf.revents);
		return 1;
	}
	printf("step %d: both ends shut as they were\n", step);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const want[] = {"one", "three", "five"};
	int steps = (int)(8 * app_scale(argc, argv) + 0.5), p1[2], p2[2], bad = 0;
	struct timespec t = {0, 350 * 1000000L};
	char b[16];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, p1) < 0 || socketpair(AF_UNIX, SOCK_DGRAM, 0, p2) < 0)
		return 1;
	for (int i = 0; i < 3; i++)
		if (send(p1[0], want[i], strlen(want[i]), 0) != (ssize_t)strlen(want[i]))
			return 1;
	if (shutdown(p1[1], SHUT_WR) < 0 || shutdown(p2[0], SHUT_RD) < 0)
		return 1;
	for (int step = 0; step < steps && !bad; step++) {
		nanosleep(&t, NULL);
		bad = check(step, p1[1], p2[0], p2[1]);
	}
	for (int i = 0; i < 3 && !bad; i++) {
		ssize_t n = recv(p1[1], b, sizeof(b) - 1, MSG_DONTWAIT);
		if (n < 0 || (size_t)n != strlen(want[i]) || memcmp(b, want[i], (size_t)n)) {
			printf("FAIL datagram %d: got %zd bytes, want \"%s\"\n", i, n, want[i]);
			bad = 1;
		}
	}
	/* the end shut for writing still receives */
	if (!bad && (send(p1[0], "echo", 4, MSG_DONTWAIT) != 4 || recv(p1[1], b, sizeof(b), MSG_DONTWAIT) != 4 ||
		     memcmp(b, "echo", 4))) {
		printf("FAIL the end shut for writing no longer receives\n");
		bad = 1;
	}
	if (!bad && recv(p1[1], b, sizeof(b), MSG_DONTWAIT) != -1) {
		printf("FAIL a datagram more than those sent\n");
		bad = 1;
	}
	printf("%s\n", bad ? "FAIL dgram_shut" : "datagrams as bare: one three five");
	return bad;
}
