/* seqpacket_shut: a record socket pair whose sending end was shut down
 * once its records were read: the reading end is at end of file for good.
 *
 * State exercised: a UNIX SOCK_SEQPACKET pair; two records sent, the
 * sender shut for writing (shutdown(SHUT_WR), which shuts the other end
 * for reading), both records read. Every step checks that a read gives
 * end of file (0) and a send from the shut end fails with EPIPE. A round
 * used to loop for ever on such a socket: a read of its empty queue
 * returns 0 at once, not EAGAIN. Prints only deterministic lines; exits
 * 1 after a FAIL line.
 * Usage: seqpacket_shut [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
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

int main(int argc, char **argv)
{
	int steps = (int)(8 * app_scale(argc, argv) + 0.5), sv[2], bad = 0;
	struct timespec t = {0, 350 * 1000000L};
	char b[16];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0 || send(sv[1], "one", 3, 0) != 3 ||
	    send(sv[1], "three", 5, 0) != 5 || shutdown(sv[1], SHUT_WR) < 0)
		return 1;
	if (recv(sv[0], b, sizeof(b), 0) != 3 || recv(sv[0], b, sizeof(b), 0) != 5)
		return 1;
	for (int step = 0; step < steps; step++) {
		ssize_t r, w;
		int e;

		nanosleep(&t, NULL);
		r = recv(sv[0], b, sizeof(b), MSG_DONTWAIT);
		e = errno;
		w = send(sv[1], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r != 0 || w != -1 || errno != EPIPE) {
			printf("FAIL step %d: read %zd (errno %d), send %zd (errno %d): want 0 and EPIPE\n", step, r,
			       r < 0 ? e : 0, w, w < 0 ? errno : 0);
			bad = 1;
		} else {
			printf("step %d: end of file, the other end shut\n", step);
		}
	}
	printf("%s\n", bad ? "FAIL seqpacket" : "seqpacket as bare");
	return bad;
}
