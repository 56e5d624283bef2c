/* sock_shutdown: connections one side has shut down, between two
 * processes of the job.
 *
 * State exercised: four connected pairs, each end in its own process (the
 * parent holds the "a" ends, a child the "b" ends): a UNIX stream pair
 * whose a end did shutdown(SHUT_WR) after sending bytes b has not read; a
 * UNIX stream pair whose a end did shutdown(SHUT_RD); the same two over
 * TCP on loopback. Both processes then wait (a checkpoint, a kill, a
 * restore) and check what the kernel says of each direction: the bytes,
 * then end of file (not a wait) where the writer shut down; EPIPE for a
 * write the other way round where the kernel gives it; the open direction
 * still carries a byte. Deterministic lines only.
 * Usage: sock_shutdown [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static void tcp_pair(int sv[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0 || (sv[0] = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(sv[0], (struct sockaddr *)&a, al) < 0 || (sv[1] = accept(l, NULL, NULL)) < 0) {
		perror("sock_shutdown: tcp pair");
		exit(1);
	}
	close(l);
}

/* What reading fd shows within 1 s: the bytes, then "EOF" or "open". */
static void reads(const char *name, int fd)
{
	char buf[64], out[128] = "";
	size_t o = 0;
	struct pollfd pf = {fd, POLLIN, 0};

	for (;;) {
		ssize_t n;
		if (poll(&pf, 1, 1000) != 1) {
			printf("%s: read '%s' then nothing: open\n", name, out);
			return;
		}
		n = read(fd, buf, sizeof(buf));
		if (n <= 0) {
			printf("%s: read '%s' then %s\n", name, out, n == 0 ? "EOF" : strerror(errno));
			return;
		}
		if (o + (size_t)n < sizeof(out) - 1) {
			memcpy(out + o, buf, (size_t)n);
			o += (size_t)n;
			out[o] = 0;
		}
	}
}

static void writes(const char *name, int fd, const char *msg)
{
	ssize_t n = send(fd, msg, strlen(msg), MSG_NOSIGNAL);

	printf("%s: write %s\n", name, n == (ssize_t)strlen(msg) ? "ok" : strerror(errno));
}

int main(int argc, char **argv)
{
	long wait_ms = (long)(2500 * app_scale(argc, argv));
	int u1[2], u2[2], t1[2], t2[2], st;
	pid_t child;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, u1) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, u2) < 0)
		return 1;
	tcp_pair(t1);
	tcp_pair(t2);
	/* a ends: [0], b ends: [1] */
	if (send(u1[0], "unix-data", 9, 0) != 9 || send(t1[0], "tcp-data", 8, 0) != 8)
		return 1;
	if (shutdown(u1[0], SHUT_WR) < 0 || shutdown(u2[0], SHUT_RD) < 0 || shutdown(t1[0], SHUT_WR) < 0 ||
	    shutdown(t2[0], SHUT_RD) < 0)
		return 1;
	child = fork();
	if (child == 0) {
		close(u1[0]);
		close(u2[0]);
		close(t1[0]);
		close(t2[0]);
		sleep_ms(wait_ms);
		reads("b unix, a shut WR", u1[1]);
		writes("b unix, a shut WR: back", u1[1], "u");
		reads("b tcp, a shut WR", t1[1]);
		writes("b tcp, a shut WR: back", t1[1], "t");
		writes("b unix, a shut RD", u2[1], "x");
		writes("b tcp, a shut RD", t2[1], "y");
		_exit(0);
	}
	close(u1[1]);
	close(u2[1]);
	close(t1[1]);
	close(t2[1]);
	sleep_ms(wait_ms);
	waitpid(child, &st, 0); /* its lines first */
	writes("a unix, shut WR", u1[0], "z");
	reads("a unix, shut WR: back", u1[0]);
	writes("a tcp, shut WR", t1[0], "z");
	reads("a tcp, shut WR: back", t1[0]);
	reads("a unix, shut RD", u2[0]);
	/* a TCP end shut for reading still reads what came (Linux): one byte */
	reads("a tcp, shut RD", t2[0]);
	printf("sock_shutdown: child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
