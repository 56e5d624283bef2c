/* dgram_empty: a datagram of no bytes is a datagram: a restore must queue
 * it again where it was.
 *
 * State exercised: a UNIX datagram socketpair whose both ends the process
 * holds, with datagrams of 3, 0, 2 and 0 bytes queued toward one end for
 * most of each step; the step reads them back and checks each length and
 * content, then that nothing more is queued. Before this test a restore
 * sent the bytes again but not the empty datagrams (the receiver got
 * EAGAIN where a bare run gets 0). Prints only deterministic lines; exits
 * 1 after a FAIL line.
 * Usage: dgram_empty [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
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
	static const char *const msgs[] = {"abc", "", "de", ""};
	int steps = (int)(6 * app_scale(argc, argv) + 0.5), sv[2], bad = 0;
	struct timespec t = {0, 400 * 1000000L};

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0)
		return 1;
	for (int step = 0; step < steps; step++) {
		char b[16];
		int wrong = 0;

		for (int i = 0; i < 4; i++)
			if (send(sv[0], msgs[i], strlen(msgs[i]), 0) != (ssize_t)strlen(msgs[i]))
				return 1;
		nanosleep(&t, NULL); /* queued meanwhile */
		for (int i = 0; i < 4; i++) {
			ssize_t n = recv(sv[1], b, sizeof(b), MSG_DONTWAIT);
			if (n != (ssize_t)strlen(msgs[i]) || memcmp(b, msgs[i], (size_t)n)) {
				printf("FAIL step %d: datagram %d has %zd byte(s) (errno %d), %zu expected\n", step, i, n,
				       n < 0 ? errno : 0, strlen(msgs[i]));
				wrong = 1;
				break;
			}
		}
		if (!wrong && recv(sv[1], b, sizeof(b), MSG_DONTWAIT) >= 0) {
			printf("FAIL step %d: a datagram too many\n", step);
			wrong = 1;
		}
		if (!wrong)
			printf("step %d: datagrams of 3, 0, 2 and 0 bytes, in order\n", step);
		bad |= wrong;
	}
	printf("%s\n", bad ? "FAIL datagrams" : "datagrams as bare");
	return bad;
}
