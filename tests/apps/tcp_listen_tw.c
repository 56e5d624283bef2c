/* tcp_listen_tw: a TCP listener comes back on its port although the
 * killed job's own connections on that port are in TIME_WAIT, and each
 * socket keeps its own SO_REUSEADDR.
 *
 * State exercised (loopback, IPv4): a listener l without SO_REUSEADDR;
 * a client c connected to it, and the accepted end s, which sets
 * SO_REUSEADDR. First a connection accepted the same way is closed from
 * its accepted end, which stays in TIME_WAIT on l's port for the whole
 * run and after the kill.
 * Each step checks l's address and both SO_REUSEADDR values, and sends a
 * byte from c to s. At the end a new client connects to l and is
 * accepted. A restore that cleared SO_REUSEADDR on the new listener
 * before its listen() could not listen again ("Address already in
 * use"): the checkpoint committed could never be restored. Prints only
 * deterministic lines; exits 1 after a FAIL line.
 * Usage: tcp_listen_tw [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
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

static int opt(int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);

	return getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, &l) < 0 ? -1 : v;
}

int main(int argc, char **argv)
{
	int steps = (int)(8 * app_scale(argc, argv) + 0.5), bad = 0, one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}, now;
	socklen_t al = sizeof(a), nl;
	struct timespec t = {0, 350 * 1000000L};
	int l = socket(AF_INET, SOCK_STREAM, 0), c0, c, s, n, m, c2, s2;
	char b;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(l, (struct sockaddr *)&a, &al) < 0 ||
	    listen(l, 4) < 0 || (c2 = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(c2, (struct sockaddr *)&a, sizeof(a)) < 0 || (s2 = accept(l, NULL, NULL)) < 0 ||
	    setsockopt(s2, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 || close(s2) < 0 ||
	    (usleep(20000), close(c2)) < 0 || (c0 = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(c0, (struct sockaddr *)&a, sizeof(a)) < 0 || (s = accept(l, NULL, NULL)) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return 1;
	c = c0;
	for (int step = 0; step < steps && !bad; step++) {
		nanosleep(&t, NULL);
		nl = sizeof(now);
		if (getsockname(l, (struct sockaddr *)&now, &nl) < 0 || now.sin_port != a.sin_port ||
		    now.sin_addr.s_addr != a.sin_addr.s_addr)
			printf("FAIL step %d: the listener's address changed\n", step), bad = 1;
		else if (opt(l) != 0 || opt(s) != 1)
			printf("FAIL step %d: SO_REUSEADDR of the listener %d (0 set), of the accepted end %d (1 set)\n",
			       step, opt(l), opt(s)), bad = 1;
		else if (send(c, "x", 1, 0) != 1 || recv(s, &b, 1, 0) != 1 || b != 'x')
			printf("FAIL step %d: a byte from the client to the accepted end\n", step), bad = 1;
		else
			printf("step %d: listening as it was\n", step);
	}
	if (!bad && ((n = socket(AF_INET, SOCK_STREAM, 0)) < 0 || connect(n, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		     (m = accept(l, NULL, NULL)) < 0 || send(n, "y", 1, 0) != 1 || recv(m, &b, 1, 0) != 1 || b != 'y'))
		printf("FAIL a new connection to the listener (errno %d)\n", errno), bad = 1;
	printf("%s\n", bad ? "FAIL tcp_listen_tw" : "tcp_listen_tw: the listener and its options as bare");
	return bad;
}
