/* mp_unixsrv: a poll()-driven UNIX socket server with six client processes.
 *
 * State exercised: a listening UNIX stream socket bound to a path in a
 * temporary directory and another bound in the abstract namespace (a name
 * unique per run, never printed), six forked clients (five connect to the
 * path, one to the abstract name) with two requests in flight each, served
 * by one parent process multiplexing everything with poll(); plus a
 * SOCK_DGRAM socketpair (client 0 sends datagrams the server reads only
 * every 300 ms, so a queue of datagrams waits at most moments) and a
 * SOCK_SEQPACKET socketpair (client 1 sends records of varying lengths whose
 * boundaries must survive, the server acknowledges each). Clients check
 * every reply; the server checks every request, datagram and record and
 * prints totals per client. Only the parent prints.
 * Usage: mp_unixsrv [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCL 6
#define ABSTRACT_CLIENT 5
#define MAXREQ 2000
#define MAXSEQ 3000
#define DEPTH 2
#define FNV0 0xcbf29ce484222325ULL

struct req {
	uint32_t client, seq, len, pad;
};

struct dgram {
	uint32_t magic, seq, end, pad;
	uint64_t val;
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

static uint32_t req_len(int c, uint32_t seq)
{
	return 1 + (uint32_t)(mix(((uint64_t)c << 32) + seq) % MAXREQ);
}

static void req_fill(uint8_t *p, int c, uint32_t seq, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		p[k] = (uint8_t)(seq * 7 + k * 11 + (uint32_t)c * 29);
}

/* The reply: the request reversed, xored with its sequence number. */
static void reply_fill(uint8_t *out, const uint8_t *in, uint32_t seq, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		out[k] = in[n - 1 - k] ^ (uint8_t)seq;
}

static uint32_t seq_len(uint32_t k)
{
	return 1 + (uint32_t)(mix(k + 777) % MAXSEQ);
}

static int build_addr(struct sockaddr_un *a, const char *path, int abstract, socklen_t *len)
{
	size_t n = strlen(path);
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (n + 2 > sizeof(a->sun_path))
		return -1;
	memcpy(a->sun_path + (abstract ? 1 : 0), path, n);
	/* a leading NUL for an abstract name, else the trailing one */
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

static void send_req(int fd, int c, uint32_t seq, uint64_t *h)
{
	uint8_t buf[sizeof(struct req) + MAXREQ];
	struct req *q = (struct req *)buf;
	*q = (struct req){ (uint32_t)c, seq, req_len(c, seq), 0 };
	req_fill(buf + sizeof(*q), c, seq, q->len);
	*h = fnv(*h, buf + sizeof(*q), q->len);
	if (write_all(fd, buf, sizeof(*q) + q->len))
		_exit(3);
}

static void client(int c, const struct sockaddr_un *addr, socklen_t alen, int dg, int sp, uint32_t count)
{
	uint8_t buf[MAXSEQ + sizeof(struct req) + MAXREQ], want[MAXREQ + 8];
	uint64_t sent = FNV0, dsum = 0;
	uint32_t hello = (uint32_t)c, ndg = 0, nsp = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)addr, alen) != 0 || write_all(fd, &hello, sizeof(hello)))
		_exit(2);
	for (uint32_t s = 0; s < DEPTH && s < count; s++)
		send_req(fd, c, s, &sent);
	for (uint32_t s = 0; s < count; s++) {
		struct req r;
		uint32_t n = req_len(c, s);
		uint8_t in[MAXREQ];
		if (read_all(fd, &r, sizeof(r)) != 1 || r.seq != s || r.len != n || read_all(fd, buf, n) != 1)
			_exit(4);
		req_fill(in, c, s, n);
		reply_fill(want, in, s, n);
		if (memcmp(buf, want, n) != 0)
			_exit(5);
		if (s + DEPTH < count)
			send_req(fd, c, s + DEPTH, &sent);
		if (dg >= 0 && s % 10 == 0) {
			struct dgram d = { 0xd6, ndg, 0, 0, mix(ndg) };
			dsum += d.val;
			ndg++;
			while (send(dg, &d, sizeof(d), 0) < 0)
				if (errno != EINTR)
					_exit(6);
		}
		if (sp >= 0 && s % 10 == 5) {
			uint32_t m = seq_len(nsp);
			ssize_t got;
			for (uint32_t k = 0; k < m; k++)
				buf[k] = (uint8_t)(nsp + k * 3);
			while (send(sp, buf, m, 0) < 0)
				if (errno != EINTR)
					_exit(7);
			/* The acknowledgement: the length and the record's hash. */
			uint64_t ack[2];
			while ((got = recv(sp, ack, sizeof(ack), 0)) < 0 && errno == EINTR)
				;
			if (got != sizeof(ack) || ack[0] != m || ack[1] != fnv(FNV0, buf, m))
				_exit(8);
			nsp++;
		}
		sleep_ms(10);
	}
	if (dg >= 0) {
		struct dgram d = { 0xd6, ndg, 1, 0, dsum };
		while (send(dg, &d, sizeof(d), 0) < 0)
			if (errno != EINTR)
				_exit(9);
	}
	if (sp >= 0)
		close(sp);
	if (shutdown(fd, SHUT_WR) != 0 || read_all(fd, buf, 1) != 0)
		_exit(10);
	_exit(70 + c);
}

struct conn {
	int fd, client, abstract;
	uint32_t next;
	uint64_t hash, bytes;
	int eof;
};

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	uint32_t count = (uint32_t)(330 * app_scale(argc, argv));
	char dir[4096], path[4200], abs_name[128];
	struct sockaddr_un pa, aa;
	socklen_t palen, aalen;
	int lp, la, dg[2], sp[2], rc = 0, nconn = 0, dg_end = 0, sp_eof = 0;
	struct conn conns[NCL];
	struct conn *by_client[NCL] = { 0 };
	pid_t pid[NCL];
	uint32_t ndg = 0, nsp = 0;
	uint64_t dsum = 0, sphash = FNV0;
	struct timespec last_dg;

	if (count < DEPTH + 10)
		count = DEPTH + 10;
	snprintf(dir, sizeof(dir), "%s/mp_unixsrv.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/sock", dir);
	snprintf(abs_name, sizeof(abs_name), "ckapp-unixsrv-%d-%s", (int)getpid(), strrchr(dir, '.') + 1);
	if (build_addr(&pa, path, 0, &palen) || build_addr(&aa, abs_name, 1, &aalen)) {
		printf("FAIL socket path too long\n");
		rmdir(dir);
		return 1;
	}
	lp = socket(AF_UNIX, SOCK_STREAM, 0);
	la = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lp < 0 || la < 0 || bind(lp, (struct sockaddr *)&pa, palen) != 0 || listen(lp, NCL) != 0 ||
	    bind(la, (struct sockaddr *)&aa, aalen) != 0 || listen(la, NCL) != 0 ||
	    socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) != 0 || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) != 0) {
		printf("FAIL sockets: %s\n", strerror(errno));
		unlink(path);
		rmdir(dir);
		return 1;
	}
	printf("mp_unixsrv: %d clients, %u requests each, a datagram pair and a seqpacket pair\n", NCL, count);
	fflush(stdout);
	for (int c = 0; c < NCL; c++) {
		pid[c] = fork();
		if (pid[c] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[c] == 0) {
			close(lp);
			close(la);
			close(dg[0]);
			close(sp[0]);
			if (c != 0)
				close(dg[1]);
			if (c != 1)
				close(sp[1]);
			for (int k = 0; k < nconn; k++)
				close(conns[k].fd);
			if (c == ABSTRACT_CLIENT)
				client(c, &aa, aalen, -1, -1, count);
			client(c, &pa, palen, c == 0 ? dg[1] : -1, c == 1 ? sp[1] : -1, count);
		}
	}
	close(dg[1]);
	close(sp[1]);
	clock_gettime(CLOCK_MONOTONIC, &last_dg);

	int open_conns = NCL;
	while (!rc && (nconn < NCL || open_conns > 0 || !dg_end || !sp_eof)) {
		struct pollfd p[NCL + 4];
		int np = 0, r;
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		int dg_due = (now.tv_sec - last_dg.tv_sec) * 1000 + (now.tv_nsec - last_dg.tv_nsec) / 1000000 >= 300;
		if (nconn < NCL) {
			p[np++] = (struct pollfd){ lp, POLLIN, 0 };
			p[np++] = (struct pollfd){ la, POLLIN, 0 };
		}
		for (int k = 0; k < nconn; k++)
			if (!conns[k].eof)
				p[np++] = (struct pollfd){ conns[k].fd, POLLIN, 0 };
		if (!sp_eof)
			p[np++] = (struct pollfd){ sp[0], POLLIN, 0 };
		if (!dg_end && dg_due)
			p[np++] = (struct pollfd){ dg[0], POLLIN, 0 };
		r = poll(p, (nfds_t)np, 50);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			printf("FAIL poll\n");
			rc = 1;
			break;
		}
		for (int i = 0; i < np && !rc; i++) {
			int fd = p[i].fd;
			if (!p[i].revents)
				continue;
			if (fd == lp || fd == la) {
				uint32_t id;
				int cfd;
				while ((cfd = accept(fd, NULL, NULL)) < 0 && errno == EINTR)
					;
				if (cfd < 0)
					continue;
				if (read_all(cfd, &id, sizeof(id)) != 1 || id >= NCL || by_client[id]) {
					printf("FAIL bad hello\n");
					rc = 1;
					break;
				}
				conns[nconn] = (struct conn){ cfd, (int)id, fd == la, 0, FNV0, 0, 0 };
				by_client[id] = &conns[nconn++];
			} else if (fd == dg[0]) {
				struct dgram d;
				ssize_t n;
				/* All datagrams queued since last time. */
				while ((n = recv(dg[0], &d, sizeof(d), MSG_DONTWAIT)) > 0) {
					if (n != sizeof(d) || d.magic != 0xd6 || d.seq != ndg) {
						printf("FAIL bad datagram\n");
						rc = 1;
						break;
					}
					if (d.end) {
						dg_end = 1;
						if (d.val != dsum) {
							printf("FAIL datagram sum\n");
							rc = 1;
						}
						break;
					}
					if (d.val != mix(ndg)) {
						printf("FAIL datagram %u\n", ndg);
						rc = 1;
					}
					dsum += d.val;
					ndg++;
				}
				last_dg = now;
			} else if (fd == sp[0]) {
				uint8_t buf[MAXSEQ + 1];
				ssize_t n;
				while ((n = recv(sp[0], buf, sizeof(buf), 0)) < 0 && errno == EINTR)
					;
				if (n == 0) {
					sp_eof = 1;
					continue;
				}
				int bad = n < 0 || (uint32_t)n != seq_len(nsp);
				for (ssize_t k = 0; !bad && k < n; k++)
					bad = buf[k] != (uint8_t)(nsp + (uint32_t)k * 3);
				if (bad) {
					printf("FAIL seqpacket record %u\n", nsp);
					rc = 1;
					break;
				}
				uint64_t ack[2] = { (uint64_t)n, fnv(FNV0, buf, (size_t)n) };
				sphash = fnv(sphash, buf, (size_t)n);
				nsp++;
				if (send(sp[0], ack, sizeof(ack), 0) != sizeof(ack)) {
					printf("FAIL seqpacket ack\n");
					rc = 1;
				}
			} else {
				struct conn *cn = NULL;
				uint8_t in[MAXREQ], out[sizeof(struct req) + MAXREQ];
				struct req q;
				int e;
				for (int k = 0; k < nconn; k++)
					if (conns[k].fd == fd)
						cn = &conns[k];
				if (!cn)
					continue;
				e = read_all(fd, &q, sizeof(q));
				if (e == 0) {
					cn->eof = 1;
					open_conns--;
					shutdown(fd, SHUT_WR);
					continue;
				}
				if (e < 0 || q.client != (uint32_t)cn->client || q.seq != cn->next ||
				    q.len != req_len(cn->client, q.seq) || read_all(fd, in, q.len) != 1) {
					printf("FAIL client %d: bad request\n", cn->client);
					rc = 1;
					break;
				}
				uint8_t chk[MAXREQ];
				req_fill(chk, cn->client, q.seq, q.len);
				if (memcmp(chk, in, q.len) != 0) {
					printf("FAIL client %d request %u: corrupted\n", cn->client, q.seq);
					rc = 1;
					break;
				}
				cn->hash = fnv(cn->hash, in, q.len);
				cn->bytes += q.len;
				cn->next++;
				memcpy(out, &q, sizeof(q));
				reply_fill(out + sizeof(q), in, q.seq, q.len);
				if (write_all(fd, out, sizeof(q) + q.len)) {
					printf("FAIL client %d: reply\n", cn->client);
					rc = 1;
				}
			}
		}
	}

	for (int c = 0; c < NCL; c++) {
		int st;
		if (rc)
			kill(pid[c], SIGKILL);
		while (waitpid(pid[c], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		struct conn *cn = by_client[c];
		if (!cn) {
			printf("client %d: never connected\n", c);
			rc = 1;
			continue;
		}
		printf("client %d: %u requests, %llu bytes, hash %016llx, via %s, ", c, cn->next,
		       (unsigned long long)cn->bytes, (unsigned long long)cn->hash, cn->abstract ? "abstract" : "path");
		if (WIFEXITED(st))
			printf("exited %d\n", WEXITSTATUS(st));
		else
			printf("status %#x\n", st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 70 + c || cn->next != count ||
		    cn->abstract != (c == ABSTRACT_CLIENT)) {
			printf("FAIL client %d\n", c);
			rc = 1;
		}
		close(cn->fd);
	}
	printf("datagrams: %u, sum %016llx, end seen %s\n", ndg, (unsigned long long)dsum, dg_end ? "yes" : "no");
	printf("seqpacket records: %u, hash %016llx, EOF seen %s\n", nsp, (unsigned long long)sphash,
	       sp_eof ? "yes" : "no");
	if (ndg != (count + 9) / 10 || nsp != (count + 4) / 10 || !dg_end || !sp_eof)
		rc = 1;
	close(lp);
	close(la);
	close(dg[0]);
	close(sp[0]);
	unlink(path);
	rmdir(dir);
	printf("mp_unixsrv: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
