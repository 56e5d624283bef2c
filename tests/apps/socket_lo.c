/* socket_lo: sockets between two processes of the job, on loopback only.
 *
 * State exercised: a TCP connection over 127.0.0.1 (listening socket with an
 * ephemeral port, accepted connection with TCP_NODELAY), a UNIX stream
 * socketpair and a UNIX seqpacket socketpair (message boundaries), all
 * between a parent and its child. Requests are pipelined, so bytes are in
 * flight in both directions at most moments; after a restore the
 * connections must be there and no byte lost, duplicated or reordered.
 * Usage: socket_lo [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 4
#define MAXLEN 8192

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

static int io_all(int fd, void *p, size_t n, int wr)
{
	while (n) {
		ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

static uint64_t fnv(const unsigned char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static size_t req_len(long i)
{
	return 1 + (size_t)((i * 2654435761UL) % MAXLEN);
}

static void fill(unsigned char *b, long i, size_t n)
{
	for (size_t k = 0; k < n; k++)
		b[k] = (unsigned char)(i * 7 + (long)k * 3);
}

/* Child: answers each framed request on a stream with the FNV of its body. */
static int serve_stream(int fd)
{
	static unsigned char buf[MAXLEN];
	uint32_t len;

	while (io_all(fd, &len, 4, 0) == 0) {
		uint64_t h;
		if (len > MAXLEN || io_all(fd, buf, len, 0))
			return -1;
		h = fnv(buf, len, 0xcbf29ce484222325ULL);
		if (io_all(fd, &h, 8, 1))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long n = (long)(600 * app_scale(argc, argv));
	int lsn, tcp, us[2], sp[2], rc = 0, one = 1;
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(addr);
	static unsigned char buf[MAXLEN];
	uint64_t dig_tcp = 0, dig_unix = 0, dig_seq = 0;
	pid_t child;

	if (n < DEPTH)
		n = DEPTH;
	lsn = socket(AF_INET, SOCK_STREAM, 0);
	if (lsn < 0 || bind(lsn, (void *)&addr, sizeof(addr)) || listen(lsn, 1) ||
	    getsockname(lsn, (void *)&addr, &alen))
		return 1;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, us) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp))
		return 1;
	printf("socket_lo: %ld requests on tcp, unix stream and unix seqpacket\n", n);
	fflush(stdout);
	child = fork();
	if (child == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		close(lsn);
		close(us[0]);
		close(sp[0]);
		if (c < 0 || connect(c, (void *)&addr, sizeof(addr)))
			_exit(2);
		/* seqpacket: echo each message reversed, in a second process
		 * so all three servers run at once. */
		if (fork() == 0) {
			ssize_t m;
			close(c);
			close(us[1]);
			while ((m = recv(sp[1], buf, sizeof(buf), 0)) > 0) {
				for (ssize_t k = 0; k < m / 2; k++) {
					unsigned char t = buf[k];
					buf[k] = buf[m - 1 - k];
					buf[m - 1 - k] = t;
				}
				if (send(sp[1], buf, (size_t)m, 0) != m)
					_exit(3);
			}
			_exit(m == 0 ? 0 : 4);
		}
		close(sp[1]);
		if (fork() == 0) {
			close(c);
			_exit(serve_stream(us[1]) ? 5 : 0);
		}
		close(us[1]);
		int ok = serve_stream(c) == 0;
		int st1, st2;
		wait(&st1);
		wait(&st2);
		_exit(ok && WIFEXITED(st1) && !WEXITSTATUS(st1) && WIFEXITED(st2) && !WEXITSTATUS(st2) ? 0 : 6);
	}
	close(us[1]);
	close(sp[1]);
	tcp = accept(lsn, NULL, NULL);
	if (tcp < 0)
		return 1;
	close(lsn);
	setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	/* Keep DEPTH requests outstanding on each connection. */
	for (long i = 0; i < n + DEPTH; i++) {
		if (i < n) {
			uint32_t len = (uint32_t)req_len(i);
			fill(buf, i, len);
			if (io_all(tcp, &len, 4, 1) || io_all(tcp, buf, len, 1) || io_all(us[0], &len, 4, 1) ||
			    io_all(us[0], buf, len, 1) || send(sp[0], buf, len, 0) != (ssize_t)len) {
				printf("FAIL send %ld\n", i);
				rc = 1;
				break;
			}
		}
		if (i >= DEPTH) {
			long j = i - DEPTH;
			size_t len = req_len(j);
			uint64_t h1, h2, want;
			ssize_t m;
			fill(buf, j, len);
			want = fnv(buf, len, 0xcbf29ce484222325ULL);
			if (io_all(tcp, &h1, 8, 0) || io_all(us[0], &h2, 8, 0) || h1 != want || h2 != want) {
				printf("FAIL reply %ld on a stream\n", j);
				rc = 1;
				break;
			}
			m = recv(sp[0], buf, sizeof(buf), 0);
			if (m != (ssize_t)len || buf[0] != (unsigned char)(j * 7 + (long)(len - 1) * 3)) {
				printf("FAIL seqpacket reply %ld: %zd bytes\n", j, m);
				rc = 1;
				break;
			}
			dig_tcp = fnv((void *)&h1, 8, dig_tcp);
			dig_unix = fnv((void *)&h2, 8, dig_unix);
			dig_seq = fnv(buf, len, dig_seq);
			if ((j + 1) % 100 == 0)
				printf("%ld replies, digests %016llx %016llx %016llx\n", j + 1,
				       (unsigned long long)dig_tcp, (unsigned long long)dig_unix,
				       (unsigned long long)dig_seq);
		}
		sleep_ms(4);
	}
	close(tcp);
	close(us[0]);
	close(sp[0]);
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL child status %#x\n", st);
		rc = 1;
	}
	printf("socket_lo: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
