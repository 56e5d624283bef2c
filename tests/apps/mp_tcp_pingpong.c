/* mp_tcp_pingpong: TCP ping-pong over loopback between a parent and a child.
 *
 * State exercised: a listening TCP socket on 127.0.0.1 with a port the
 * kernel chose (kept open for the whole run), and two established
 * connections between the parent and a forked child, TCP_NODELAY on every
 * end. On the main connection the parent sends messages of varying sizes
 * (1 byte to 64 KiB) and the child answers each with a reply derived from
 * what it received, so a checkpoint may land mid-message with bytes in
 * flight. On the extra connection both sides write a chunk every round but
 * read only every few dozen rounds, so tens of kilobytes sit unread in the
 * socket buffers (send and receive queues) for long stretches. Both ends
 * keep rolling hashes of everything sent and received; the child sends its
 * hashes at the end and the parent compares. Only the parent prints.
 * Usage: mp_tcp_pingpong [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXMSG 65536
#define XMAX 1000       /* extra-connection chunk, bytes */
#define P_DRAIN 40      /* the parent reads the extra connection every P_DRAIN rounds */
#define C_DRAIN 25      /* the child, every C_DRAIN rounds */
#define FNV0 0xcbf29ce484222325ULL

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

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t k = 0; k < n; k++)
		h = (h ^ p[k]) * 0x100000001b3ULL;
	return h;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = read(fd, (char *)p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return done == 0 ? 0 : -1;
		done += (size_t)r;
	}
	return 1;
}

/* The parent's message of round r. */
static uint32_t ping_len(long r)
{
	uint64_t m = mix((uint64_t)r + 99);
	return 1 + (uint32_t)(m % (r % 10 == 0 ? MAXMSG : 2048));
}

static void ping_fill(uint8_t *p, long r, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		p[k] = (uint8_t)(r * 131 + k * 7 + (k >> 9));
}

/* The child's reply depends on its hash of everything received so far. */
static uint32_t pong_len(uint64_t h)
{
	return 1 + (uint32_t)(mix(h) % 4096);
}

static void pong_fill(uint8_t *p, uint64_t h, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		p[k] = (uint8_t)((h >> (k % 8 * 8)) + k);
}

/* Extra-connection chunks: who (0 parent, 1 child), round r. */
static uint32_t xlen(int who, long r)
{
	return 1 + (uint32_t)(mix((uint64_t)r * 4 + (uint64_t)who) % XMAX);
}

static void xfill(uint8_t *p, int who, long r, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		p[k] = (uint8_t)(r * 17 + k * 3 + (uint32_t)who * 85);
}

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int has_nodelay(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);
	return getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0 && v;
}

struct hashes {
	uint64_t m_recv, m_sent, x_recv, x_sent;
};

/* Read and hash exactly n bytes from fd. */
static int drain(int fd, size_t n, uint64_t *h)
{
	uint8_t buf[8192];
	while (n) {
		size_t m = n < sizeof(buf) ? n : sizeof(buf);
		if (read_all(fd, buf, m) != 1)
			return -1;
		*h = fnv(*h, buf, m);
		n -= m;
	}
	return 0;
}

static void child(const struct sockaddr_in *addr, long rounds)
{
	static uint8_t buf[MAXMSG];
	struct hashes h = { FNV0, FNV0, FNV0, FNV0 };
	size_t xpending = 0;
	int m = socket(AF_INET, SOCK_STREAM, 0), x = socket(AF_INET, SOCK_STREAM, 0);

	if (m < 0 || x < 0 || connect(m, (const struct sockaddr *)addr, sizeof(*addr)) != 0 ||
	    write_all(m, "M", 1) || connect(x, (const struct sockaddr *)addr, sizeof(*addr)) != 0 ||
	    write_all(x, "X", 1))
		_exit(2);
	nodelay(m);
	nodelay(x);
	for (long r = 0; r < rounds; r++) {
		uint32_t n;
		if (read_all(m, &n, sizeof(n)) != 1 || n == 0 || n > MAXMSG || read_all(m, buf, n) != 1)
			_exit(3);
		h.m_recv = fnv(h.m_recv, buf, n);
		xpending += xlen(0, r);
		if (r % C_DRAIN == C_DRAIN - 1) {
			if (drain(x, xpending, &h.x_recv))
				_exit(4);
			xpending = 0;
		}
		/* A chunk on the extra connection, then the reply. */
		n = xlen(1, r);
		xfill(buf, 1, r, n);
		h.x_sent = fnv(h.x_sent, buf, n);
		if (write_all(x, buf, n))
			_exit(5);
		n = pong_len(h.m_recv);
		pong_fill(buf, h.m_recv, n);
		h.m_sent = fnv(h.m_sent, buf, n);
		if (write_all(m, &n, sizeof(n)) || write_all(m, buf, n))
			_exit(6);
	}
	if (drain(x, xpending, &h.x_recv) || write_all(m, &h, sizeof(h)))
		_exit(7);
	if (shutdown(m, SHUT_WR) || shutdown(x, SHUT_WR))
		_exit(8);
	if (read_all(m, buf, 1) != 0 || read_all(x, buf, 1) != 0)
		_exit(9);
	_exit(0);
}

int main(int argc, char **argv)
{
	static uint8_t buf[MAXMSG], want[MAXMSG];
	long rounds = (long)(400 * app_scale(argc, argv));
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	struct hashes h = { FNV0, FNV0, FNV0, FNV0 }, ch;
	int l, m = -1, x = -1, rc = 0, st;
	size_t xpending = 0;
	pid_t pid;

	if (rounds < 10)
		rounds = 10;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(l, 4) != 0 ||
	    getsockname(l, (struct sockaddr *)&addr, &alen) != 0) {
		printf("FAIL listen on 127.0.0.1: %s\n", strerror(errno));
		return 1;
	}
	printf("mp_tcp_pingpong: %ld rounds over 127.0.0.1\n", rounds);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		printf("FAIL fork\n");
		return 1;
	}
	if (pid == 0) {
		close(l);
		child(&addr, rounds);
	}
	for (int i = 0; i < 2; i++) {
		int fd;
		char id;
		while ((fd = accept(l, NULL, NULL)) < 0 && errno == EINTR)
			;
		if (fd < 0 || read_all(fd, &id, 1) != 1 || (id != 'M' && id != 'X')) {
			printf("FAIL accept\n");
			return 1;
		}
		nodelay(fd);
		*(id == 'M' ? &m : &x) = fd;
	}
	if (m < 0 || x < 0) {
		printf("FAIL connections\n");
		return 1;
	}

	for (long r = 0; r < rounds && !rc; r++) {
		uint32_t n = xlen(0, r);
		xfill(buf, 0, r, n);
		h.x_sent = fnv(h.x_sent, buf, n);
		if (write_all(x, buf, n))
			return printf("FAIL write\n"), 1;
		n = ping_len(r);
		ping_fill(buf, r, n);
		h.m_sent = fnv(h.m_sent, buf, n);
		if (write_all(m, &n, sizeof(n)) || write_all(m, buf, n))
			return printf("FAIL write\n"), 1;
		/* The reply the child must send: it depends on its receive hash. */
		uint32_t wn = pong_len(h.m_sent);
		pong_fill(want, h.m_sent, wn);
		if (read_all(m, &n, sizeof(n)) != 1 || n != wn || read_all(m, buf, n) != 1 || memcmp(buf, want, n)) {
			printf("FAIL round %ld: wrong reply\n", r);
			rc = 1;
			break;
		}
		h.m_recv = fnv(h.m_recv, buf, n);
		xpending += xlen(1, r);
		if (r % P_DRAIN == P_DRAIN - 1) {
			if (drain(x, xpending, &h.x_recv))
				return printf("FAIL read extra connection\n"), 1;
			xpending = 0;
		}
		if ((r + 1) % (rounds / 5) == 0)
			printf("round %ld: sent %016llx, received %016llx\n", r + 1, (unsigned long long)h.m_sent,
			       (unsigned long long)h.m_recv);
		sleep_ms(8);
	}
	if (!rc) {
		if (drain(x, xpending, &h.x_recv) || read_all(m, &ch, sizeof(ch)) != 1) {
			printf("FAIL final exchange\n");
			rc = 1;
		} else if (ch.m_recv != h.m_sent || ch.m_sent != h.m_recv || ch.x_recv != h.x_sent ||
			   ch.x_sent != h.x_recv) {
			printf("FAIL the two ends disagree about what went through\n");
			rc = 1;
		}
		printf("main connection: parent sent %016llx, received %016llx\n", (unsigned long long)h.m_sent,
		       (unsigned long long)h.m_recv);
		printf("extra connection: parent sent %016llx, received %016llx\n", (unsigned long long)h.x_sent,
		       (unsigned long long)h.x_recv);
		printf("TCP_NODELAY: %s\n", has_nodelay(m) && has_nodelay(x) ? "set" : "LOST");
		if (!has_nodelay(m) || !has_nodelay(x))
			rc = 1;
		if (shutdown(m, SHUT_WR) || shutdown(x, SHUT_WR) || read_all(m, buf, 1) != 0 ||
		    read_all(x, buf, 1) != 0) {
			printf("FAIL shutdown\n");
			rc = 1;
		}
	} else {
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			printf("FAIL waitpid\n");
			return 1;
		}
	if (WIFEXITED(st))
		printf("child: exited %d\n", WEXITSTATUS(st));
	else
		printf("child: status %#x\n", st);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = 1;
	close(m);
	close(x);
	close(l);
	printf("mp_tcp_pingpong: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
