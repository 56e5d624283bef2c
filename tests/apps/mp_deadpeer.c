/* mp_deadpeer: connections whose peer has exited, with data still unread.
 *
 * State exercised: in every round a child process sends on four
 * connections and exits: a UNIX stream socketpair (bytes), a UNIX datagram
 * socketpair (datagrams of varying sizes), a UNIX seqpacket socketpair
 * (records of varying sizes) and a TCP connection over loopback (bytes).
 * The parent reaps the child, then sleeps 300 ms before it reads: for most
 * of the run its sockets hold data from a peer that no longer exists. A
 * restore must hand that data back, then the end the connection had: EOF
 * on the stream, seqpacket and TCP connections, nothing more on the
 * datagram one. Every byte, boundary and end is checked.
 * Usage: mp_deadpeer [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STREAM_BYTES 40000
#define NDGRAM 24
#define NREC 16

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = {ms / 1000, (ms % 1000) * 1000000}, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static uint8_t pat(long round, int chan, size_t i)
{
	return (uint8_t)(round * 31 + chan * 7 + i * 13 + (i >> 8));
}

static size_t dlen(int k)
{
	return 1 + (size_t)(k * 397) % 3000;
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void child(long round, int st, int dg, int sp, int tcp)
{
	static uint8_t buf[STREAM_BYTES];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pat(round, 0, i);
	if (send_all(st, buf, sizeof(buf)))
		_exit(2);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pat(round, 3, i);
	if (send_all(tcp, buf, sizeof(buf)))
		_exit(3);
	for (int k = 0; k < NDGRAM; k++) {
		for (size_t i = 0; i < dlen(k); i++)
			buf[i] = pat(round, 1, i + (size_t)k);
		while (send(dg, buf, dlen(k), 0) < 0)
			if (errno != EINTR)
				_exit(4);
	}
	for (int k = 0; k < NREC; k++) {
		for (size_t i = 0; i < dlen(k + 5); i++)
			buf[i] = pat(round, 2, i + (size_t)k);
		while (send(sp, buf, dlen(k + 5), 0) < 0)
			if (errno != EINTR)
				_exit(5);
	}
	_exit(0);
}

/* Reads a byte stream to EOF; returns its length or -1 on an error. */
static long read_to_eof(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = recv(fd, buf + got, cap - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return (long)got;
		got += (size_t)n;
		if (got == cap)
			return (long)got;
	}
}

int main(int argc, char **argv)
{
	long rounds = (long)(12 * app_scale(argc, argv)), bad = 0;
	static uint8_t buf[STREAM_BYTES + 4096];
	uint64_t sum = 0;

	if (rounds < 1)
		rounds = 1;
	printf("mp_deadpeer: %ld rounds of 4 connections left with data by an exited peer\n", rounds);
	for (long r = 0; r < rounds; r++) {
		int st[2], dg[2], sp[2], ls, tc[2], st_ok = 1, dg_ok = 1, sp_ok = 1, tcp_ok = 1;
		struct sockaddr_in a = {.sin_family = AF_INET};
		socklen_t al = sizeof(a);
		pid_t pid;
		long n;

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, st) || socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) ||
		    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) || (ls = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) ||
		    getsockname(ls, (struct sockaddr *)&a, &al) || (tc[1] = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    connect(tc[1], (struct sockaddr *)&a, sizeof(a)) || (tc[0] = accept(ls, NULL, NULL)) < 0) {
			printf("FAIL cannot make the connections: %s\n", strerror(errno));
			return 1;
		}
		close(ls);
		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid == 0) {
			close(st[0]);
			close(dg[0]);
			close(sp[0]);
			close(tc[0]);
			child(r, st[1], dg[1], sp[1], tc[1]);
		}
		close(st[1]);
		close(dg[1]);
		close(sp[1]);
		close(tc[1]);
		{
			int status;
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				printf("FAIL round %ld: the sender ended with status %#x\n", r, status);
				return 1;
			}
		}
		sleep_ms(300); /* the data waits, its sender gone */

		n = read_to_eof(st[0], buf, sizeof(buf));
		st_ok = n == STREAM_BYTES;
		for (long i = 0; st_ok && i < n; i++)
			st_ok = buf[i] == pat(r, 0, (size_t)i);
		n = read_to_eof(tc[0], buf, sizeof(buf));
		tcp_ok = n == STREAM_BYTES;
		for (long i = 0; tcp_ok && i < n; i++)
			tcp_ok = buf[i] == pat(r, 3, (size_t)i);
		for (int k = 0; k < NDGRAM && dg_ok; k++) {
			n = recv(dg[0], buf, sizeof(buf), MSG_DONTWAIT);
			dg_ok = n == (long)dlen(k);
			for (long i = 0; dg_ok && i < n; i++)
				dg_ok = buf[i] == pat(r, 1, (size_t)i + (size_t)k);
		}
		if (dg_ok && recv(dg[0], buf, sizeof(buf), MSG_DONTWAIT) >= 0)
			dg_ok = 0; /* one datagram too many */
		for (int k = 0; k < NREC && sp_ok; k++) {
			while ((n = recv(sp[0], buf, sizeof(buf), 0)) < 0 && errno == EINTR)
				;
			sp_ok = n == (long)dlen(k + 5);
			for (long i = 0; sp_ok && i < n; i++)
				sp_ok = buf[i] == pat(r, 2, (size_t)i + (size_t)k);
		}
		if (sp_ok && recv(sp[0], buf, sizeof(buf), 0) != 0)
			sp_ok = 0; /* not the end of the connection */
		if (!st_ok || !dg_ok || !sp_ok || !tcp_ok) {
			printf("FAIL round %ld: stream %s, datagrams %s, records %s, tcp %s\n", r, st_ok ? "ok" : "WRONG",
			       dg_ok ? "ok" : "WRONG", sp_ok ? "ok" : "WRONG", tcp_ok ? "ok" : "WRONG");
			bad++;
		}
		sum = sum * 31 + (uint64_t)r;
		close(st[0]);
		close(dg[0]);
		close(sp[0]);
		close(tc[0]);
	}
	printf("mp_deadpeer: %ld rounds, %ld wrong, sum %016llx\n", rounds, bad, (unsigned long long)sum);
	return bad != 0;
}
