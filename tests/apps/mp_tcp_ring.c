/* mp_tcp_ring: four processes in a TCP ring over loopback.
 *
 * State exercised: four forked nodes, each with a listening socket made by
 * the parent before forking (ports chosen by the kernel), one accepted
 * connection from the previous node and one connection to the next node.
 * One link runs over IPv6 (::1, an AF_INET6 listener with IPV6_V6ONLY) when
 * the machine has it, else over IPv4; nothing printed depends on which.
 * Every node keeps two messages (up to 8 KiB each) ahead on its outgoing
 * link: it writes message k + 2 (derived from message k it just read) before
 * reading message k + 1, so every link has bytes in flight at most moments.
 * Each message carries a token whose hop count grows by one per link, so the
 * tokens travel around the ring many times. Each node reports rolling hashes
 * of what it sent and received through a pipe; the parent replays the whole
 * ring by itself and compares. Only the parent prints.
 * MP_RING_HOST=ADDR binds the IPv4 listeners to ADDR instead of 127.0.0.1
 * (the network-namespace test of tests/suite/37-sockets.sh).
 * Usage: mp_tcp_ring [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NN 4
#define DEPTH 2
#define MAXPAY 8192
#define FNV0 0xcbf29ce484222325ULL

struct msg {
	uint32_t len, node, seq, hops;
};

struct result {
	uint32_t node, msgs, max_hops, pad;
	uint64_t sent, recv;
};

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

/* Message seq of node i, from the hash of the payload it derives from (the
 * message seq - DEPTH it received, or a seed for the first ones). */
static void make_msg(uint8_t *buf, int node, uint32_t seq, uint64_t from_hash, uint32_t hops)
{
	struct msg *m = (struct msg *)buf;
	uint64_t seed = mix(from_hash ^ ((uint64_t)node << 32) ^ seq);
	uint8_t *p = buf + sizeof(*m);

	m->len = 16 + (uint32_t)(seed % (MAXPAY - 16 + 1));
	m->node = (uint32_t)node;
	m->seq = seq;
	m->hops = hops;
	for (uint32_t k = 0; k < m->len; k++)
		p[k] = (uint8_t)((seed >> (k % 8 * 8)) + k * 13);
}

static uint64_t first_hash(int node, uint32_t seq)
{
	return mix(0x5151 + (uint64_t)node * 10 + seq);
}

static void node_main(int i, int lfd, const struct sockaddr_storage *next, socklen_t nlen, int res_fd,
		      uint32_t count)
{
	static uint8_t out_buf[sizeof(struct msg) + MAXPAY], in_buf[sizeof(struct msg) + MAXPAY];
	struct result res = { (uint32_t)i, 0, 0, 0, FNV0, FNV0 };
	struct msg *om = (struct msg *)out_buf, *im = (struct msg *)in_buf;
	int out, in;

	out = socket(next->ss_family, SOCK_STREAM, 0);
	if (out < 0 || connect(out, (const struct sockaddr *)next, nlen) != 0)
		_exit(2);
	while ((in = accept(lfd, NULL, NULL)) < 0 && errno == EINTR)
		;
	if (in < 0)
		_exit(3);
	/* DEPTH messages ahead. */
	for (uint32_t s = 0; s < DEPTH && s < count; s++) {
		make_msg(out_buf, i, s, first_hash(i, s), 0);
		res.sent = fnv(res.sent, out_buf + sizeof(*om), om->len);
		if (write_all(out, out_buf, sizeof(*om) + om->len))
			_exit(4);
	}
	for (uint32_t k = 0; k < count; k++) {
		if (read_all(in, im, sizeof(*im)) != 1 || im->len > MAXPAY || im->seq != k ||
		    im->node != (uint32_t)(i + NN - 1) % NN || read_all(in, in_buf + sizeof(*im), im->len) != 1)
			_exit(5);
		uint64_t h = fnv(FNV0, in_buf + sizeof(*im), im->len);
		res.recv = fnv(res.recv, in_buf + sizeof(*im), im->len);
		res.msgs++;
		if (im->hops > res.max_hops)
			res.max_hops = im->hops;
		if (k + DEPTH < count) {
			make_msg(out_buf, i, k + DEPTH, h, im->hops + 1);
			res.sent = fnv(res.sent, out_buf + sizeof(*om), om->len);
			if (write_all(out, out_buf, sizeof(*om) + om->len))
				_exit(6);
		}
		sleep_ms(10);
	}
	if (shutdown(out, SHUT_WR) != 0 || read_all(in, in_buf, 1) != 0)
		_exit(7);
	close(out);
	close(in);
	close(lfd);
	if (write_all(res_fd, &res, sizeof(res)))
		_exit(8);
	_exit(60 + i);
}

/* The parent's replay of the whole ring. */
static void simulate(uint32_t count, struct result *want)
{
	static uint8_t buf[sizeof(struct msg) + MAXPAY];
	uint64_t (*h)[NN] = calloc(count, sizeof(*h));
	uint32_t (*hops)[NN] = calloc(count, sizeof(*hops));
	struct msg *m = (struct msg *)buf;

	if (!h || !hops)
		exit(1);
	for (int i = 0; i < NN; i++)
		want[i] = (struct result){ (uint32_t)i, count, 0, 0, FNV0, FNV0 };
	for (uint32_t s = 0; s < count; s++)
		for (int i = 0; i < NN; i++) {
			int prev = (i + NN - 1) % NN;
			if (s < DEPTH)
				make_msg(buf, i, s, first_hash(i, s), 0);
			else
				make_msg(buf, i, s, h[s - DEPTH][prev], hops[s - DEPTH][prev] + 1);
			h[s][i] = fnv(FNV0, buf + sizeof(*m), m->len);
			hops[s][i] = m->hops;
			want[i].sent = fnv(want[i].sent, buf + sizeof(*m), m->len);
			int nx = (i + 1) % NN;
			want[nx].recv = fnv(want[nx].recv, buf + sizeof(*m), m->len);
			if (m->hops > want[nx].max_hops)
				want[nx].max_hops = m->hops;
		}
	free(h);
	free(hops);
}

static int listen_on(int v6, struct sockaddr_storage *ss, socklen_t *len)
{
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		const char *host = getenv("MP_RING_HOST"); /* the netns test binds its own address */
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (host && *host && inet_pton(AF_INET, host, &a->sin_addr) != 1)
			return -1;
		*len = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)ss, *len) != 0 || listen(fd, 4) != 0 ||
	    getsockname(fd, (struct sockaddr *)ss, len) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	uint32_t count = (uint32_t)(330 * app_scale(argc, argv));
	struct sockaddr_storage addr[NN];
	socklen_t alen[NN];
	struct result got[NN], want[NN];
	int lfd[NN], res[2], have[NN] = { 0 }, rc = 0;
	pid_t pid[NN];

	if (count < DEPTH + 2)
		count = DEPTH + 2;
	for (int i = 0; i < NN; i++) {
		lfd[i] = -1;
		if (i == 0) /* the link from node 3 to node 0: IPv6 when possible */
			lfd[i] = listen_on(1, &addr[i], &alen[i]);
		if (lfd[i] < 0)
			lfd[i] = listen_on(0, &addr[i], &alen[i]);
		if (lfd[i] < 0) {
			printf("FAIL listen on loopback: %s\n", strerror(errno));
			return 1;
		}
	}
	if (pipe(res) != 0)
		return 1;
	printf("mp_tcp_ring: %d nodes, %u messages per link, %d ahead\n", NN, count, DEPTH);
	fflush(stdout);
	for (int i = 0; i < NN; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[i] == 0) {
			close(res[0]);
			for (int j = 0; j < NN; j++)
				if (j != i)
					close(lfd[j]);
			node_main(i, lfd[i], &addr[(i + 1) % NN], alen[(i + 1) % NN], res[1], count);
		}
	}
	close(res[1]);
	for (int i = 0; i < NN; i++)
		close(lfd[i]);

	simulate(count, want);
	for (;;) {
		struct result r;
		int e = read_all(res[0], &r, sizeof(r));
		if (e == 0)
			break;
		if (e < 0 || r.node >= NN || have[r.node]) {
			printf("FAIL bad result record\n");
			rc = 1;
			break;
		}
		have[r.node] = 1;
		got[r.node] = r;
	}
	close(res[0]);
	for (int i = 0; i < NN; i++) {
		int st;
		while (waitpid(pid[i], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		if (!have[i]) {
			printf("node %d: no result, status %#x\n", i, st);
			rc = 1;
			continue;
		}
		printf("node %d: %u messages, sent %016llx, received %016llx, highest hop count %u, ", i, got[i].msgs,
		       (unsigned long long)got[i].sent, (unsigned long long)got[i].recv, got[i].max_hops);
		if (WIFEXITED(st))
			printf("exited %d\n", WEXITSTATUS(st));
		else
			printf("status %#x\n", st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 60 + i || got[i].msgs != want[i].msgs ||
		    got[i].sent != want[i].sent || got[i].recv != want[i].recv || got[i].max_hops != want[i].max_hops) {
			printf("FAIL node %d: differs from the replay\n", i);
			rc = 1;
		}
	}
	if (!rc)
		printf("tokens went around the ring %u times\n", want[0].max_hops / NN);
	printf("mp_tcp_ring: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
