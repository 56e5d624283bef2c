/* listen_backlog: a UNIX listener's backlog.
 *
 * State exercised: what listen() was given. A UNIX stream listener of
 * backlog 2 (abstract name, unique per run, never printed) takes at most
 * three connections waiting to be accepted: the next non-blocking
 * connect says EAGAIN. At every step the program connects until EAGAIN
 * (at most 64), counts, then accepts and closes them all; the count must
 * be the first step's at every step. A restore that listened with another
 * backlog (ckrun's former constant 511) lets 64 in.
 * Usage: listen_backlog [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	int steps = (int)(100 * scale) > 4 ? (int)(100 * scale) : 4, first = -1, bad = 0, lfd;
	struct sockaddr_un addr;
	socklen_t alen;
	struct timespec t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_REALTIME, &t);
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "listen_backlog.%d.%ld",
					    (int)getpid(), (long)t.tv_nsec));
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, alen) < 0 || listen(lfd, 2) < 0) {
		printf("listen_backlog: setup failed: %s\n", strerror(errno));
		return 1;
	}
	printf("listen_backlog: a UNIX listener of backlog 2, %d steps\n", steps);
	for (int i = 0; i < steps && bad < 3; i++) {
		int c[MAXC], n = 0, e = 0;
		while (n < MAXC) {
			int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
			if (fd < 0 || connect(fd, (struct sockaddr *)&addr, alen) < 0) {
				e = errno;
				if (fd >= 0)
					close(fd);
				break;
			}
			c[n++] = fd;
		}
		for (int k = 0; k < n; k++) {
			int a = accept(lfd, NULL, NULL);
			if (a >= 0)
				close(a);
			close(c[k]);
		}
		if (first < 0)
			first = n;
		if (n != first || (n < MAXC && e != EAGAIN)) {
			printf("step %d: %d connections waited (the first step: %d), then %s\n", i, n, first,
			       n < MAXC ? strerror(e) : "no refusal");
			bad++;
		}
		usleep(30000);
	}
	printf("listen_backlog: %d connections waited at every step\n", first);
	return bad ? 1 : 0;
}
