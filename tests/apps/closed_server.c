/* closed_server: connections the server accepted, answered and closed,
 * whose client has not read the answer yet.
 *
 * State exercised: a UNIX stream connection and a TCP connection to
 * listeners of this process (both kept listening, at the addresses the
 * clients name as their peers). The server side accepts each, writes an
 * answer and closes its end at once; the client reads only at the end,
 * after a run of steps in which checkpoints land: it must get the answer,
 * then end-of-file. A restore that took such a client for one still
 * waiting in the listener's queue (its peer is gone and its peer address
 * is the listener's) connected it again: the answer was lost, and the
 * read found nothing.
 * Usage: closed_server [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Everything c has to read, up to end-of-file, within 5 s; -1 if none. */
static int read_all(int c, char *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		struct pollfd pf = {c, POLLIN, 0};
		ssize_t n;
		if (poll(&pf, 1, 5000) != 1)
			return -1;
		n = read(c, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
		if (got >= cap - 1)
			break;
	}
	buf[got] = 0;
	return (int)got;
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	int steps = (int)(100 * scale) > 4 ? (int)(100 * scale) : 4, bad = 0;
	struct sockaddr_un ua;
	struct sockaddr_in ta;
	socklen_t ual, tal = sizeof(ta);
	struct timespec t;
	int ul, tl, uc, tc, us, ts;
	char buf[256];

	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_REALTIME, &t);
	memset(&ua, 0, sizeof(ua));
	ua.sun_family = AF_UNIX;
	ual = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  (size_t)snprintf(ua.sun_path + 1, sizeof(ua.sun_path) - 1, "closed_server.%d.%ld", (int)getpid(),
					   (long)t.tv_nsec));
	memset(&ta, 0, sizeof(ta));
	ta.sin_family = AF_INET;
	ta.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ul = socket(AF_UNIX, SOCK_STREAM, 0);
	tl = socket(AF_INET, SOCK_STREAM, 0);
	uc = socket(AF_UNIX, SOCK_STREAM, 0);
	tc = socket(AF_INET, SOCK_STREAM, 0);
	if (ul < 0 || tl < 0 || uc < 0 || tc < 0 || bind(ul, (struct sockaddr *)&ua, ual) < 0 || listen(ul, 4) < 0 ||
	    bind(tl, (struct sockaddr *)&ta, sizeof(ta)) < 0 || listen(tl, 4) < 0 ||
	    getsockname(tl, (struct sockaddr *)&ta, &tal) < 0 || connect(uc, (struct sockaddr *)&ua, ual) < 0 ||
	    connect(tc, (struct sockaddr *)&ta, sizeof(ta)) < 0 || (us = accept(ul, NULL, NULL)) < 0 ||
	    (ts = accept(tl, NULL, NULL)) < 0 || write(us, "the unix answer", 15) != 15 ||
	    write(ts, "the tcp answer", 14) != 14) {
		printf("closed_server: setup failed: %s\n", strerror(errno));
		return 1;
	}
	close(us);
	close(ts);
	printf("closed_server: two answered connections the server closed, %d steps\n", steps);
	for (int i = 0; i < steps; i++)
		usleep(30000);
	if (read_all(uc, buf, sizeof(buf)) != 15 || strcmp(buf, "the unix answer")) {
		printf("UNIX client read '%s' (want 'the unix answer', then end-of-file)\n", buf);
		bad++;
	}
	buf[0] = 0;
	if (read_all(tc, buf, sizeof(buf)) != 14 || strcmp(buf, "the tcp answer")) {
		printf("TCP client read '%s' (want 'the tcp answer', then end-of-file)\n", buf);
		bad++;
	}
	printf("closed_server: %s\n", bad ? "an answer was LOST" : "both clients read their answer, then end-of-file");
	return bad ? 1 : 0;
}
