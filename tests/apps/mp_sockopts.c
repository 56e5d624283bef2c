/* mp_sockopts: socket options and a connection waiting to be accepted.
 *
 * State exercised: a TCP connection with TCP_NODELAY, SO_KEEPALIVE, set
 * SO_RCVBUF/SO_SNDBUF and O_NONBLOCK on one end, TCP_KEEPIDLE/KEEPINTVL/
 * KEEPCNT, IP_TOS, IP_TTL, SO_PRIORITY, SO_OOBINLINE and SO_RCVTIMEO/
 * SO_SNDTIMEO on both (the last three on the UNIX pair too, and
 * SO_PASSCRED, lost by a restore before), TCP_USER_TIMEOUT
 * and, where the process may (root), SO_MARK on both, an IPv6 datagram
 * socket bound to ::1 with IPV6_TCLASS and IPV6_UNICAST_HOPS (where the
 * machine has IPv6), a UNIX stream socketpair
 * with O_NONBLOCK, a listening socket with SO_REUSEADDR, and a second
 * connection the child makes at the start that the parent accepts only at
 * the end (it waits in the listener's queue through every checkpoint; the
 * child sends nothing on it before it is accepted). Every step both
 * processes check that their options still hold; at the end the late
 * connection carries one message each way.
 * Usage: mp_sockopts [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
	int nodelay, keepalive, rcvbuf, sndbuf, nonblock;
	int keepidle, keepintvl, keepcnt, tos, ttl, prio, oobinline;
	long rcvtimeo_ms, sndtimeo_ms;
	int user_timeout, mark, passcred;
};

static long timeout_ms(int fd, int name)
{
	struct timeval tv = {0, 0};
	socklen_t l = sizeof(tv);
	getsockopt(fd, SOL_SOCKET, name, &tv, &l);
	return tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int getopt_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	getsockopt(fd, level, name, &v, &l);
	return v;
}

static struct opts read_opts(int fd, int tcp)
{
	struct opts o;
	o.nodelay = tcp ? getopt_int(fd, IPPROTO_TCP, TCP_NODELAY) : 0;
	o.keepalive = getopt_int(fd, SOL_SOCKET, SO_KEEPALIVE);
	o.rcvbuf = getopt_int(fd, SOL_SOCKET, SO_RCVBUF);
	o.sndbuf = getopt_int(fd, SOL_SOCKET, SO_SNDBUF);
	o.nonblock = !!(fcntl(fd, F_GETFL) & O_NONBLOCK);
	o.keepidle = tcp ? getopt_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) : 0;
	o.keepintvl = tcp ? getopt_int(fd, IPPROTO_TCP, TCP_KEEPINTVL) : 0;
	o.keepcnt = tcp ? getopt_int(fd, IPPROTO_TCP, TCP_KEEPCNT) : 0;
	o.tos = tcp ? getopt_int(fd, IPPROTO_IP, IP_TOS) : 0;
	o.ttl = tcp ? getopt_int(fd, IPPROTO_IP, IP_TTL) : 0;
	o.prio = getopt_int(fd, SOL_SOCKET, SO_PRIORITY);
	o.oobinline = getopt_int(fd, SOL_SOCKET, SO_OOBINLINE);
	o.rcvtimeo_ms = timeout_ms(fd, SO_RCVTIMEO);
	o.sndtimeo_ms = timeout_ms(fd, SO_SNDTIMEO);
	o.user_timeout = tcp ? getopt_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) : 0;
	o.mark = getopt_int(fd, SOL_SOCKET, SO_MARK);
	o.passcred = tcp ? 0 : getopt_int(fd, SOL_SOCKET, SO_PASSCRED);
	return o;
}

static int same(struct opts a, struct opts b)
{
	return a.nodelay == b.nodelay && a.keepalive == b.keepalive && a.rcvbuf == b.rcvbuf && a.sndbuf == b.sndbuf &&
	       a.nonblock == b.nonblock && a.keepidle == b.keepidle && a.keepintvl == b.keepintvl &&
	       a.keepcnt == b.keepcnt && a.tos == b.tos && a.ttl == b.ttl && a.prio == b.prio &&
	       a.oobinline == b.oobinline && a.rcvtimeo_ms == b.rcvtimeo_ms && a.sndtimeo_ms == b.sndtimeo_ms &&
	       a.user_timeout == b.user_timeout && a.mark == b.mark && a.passcred == b.passcred;
}

static void configure(int fd, int tcp, int nonblock)
{
	int one = 1, buf = 96 * 1024;
	if (tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	{
		/* options a restore must set again (not the kernel's defaults) */
		int idle = 77, intvl = 13, cnt = 5, tos = 0x10, ttl = 33, prio = 3, uto = 12345, mark = 0x2a;
		struct timeval rt = {1, 500000}, wt = {2, 250000};
		if (tcp) {
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
			setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
			setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
			setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
		}
		/* (needs CAP_NET_ADMIN: read back, whatever the outcome) */
		setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark));
		setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio));
		setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
		if (!tcp)
			setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
	}
}

/* Full transfer on a possibly non-blocking descriptor. */
static int xfer(int fd, void *p, size_t n, int out)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = out ? send(fd, (char *)p + done, n - done, MSG_NOSIGNAL) : recv(fd, (char *)p + done, n - done, 0);
		if (k > 0) {
			done += (size_t)k;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd pf = {fd, (short)(out ? POLLOUT : POLLIN), 0};
			poll(&pf, 1, 1000);
			continue;
		}
		return -1;
	}
	return 0;
}

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

int main(int argc, char **argv)
{
	int steps = (int)(60 * app_scale(argc, argv)), lfd, one = 1, up[2], rc = 0, st;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	uint64_t acc = 1469598103934665603ull;
	pid_t kid;

	if (steps < 4)
		steps = 4;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 4) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, up) < 0) {
		printf("FAIL setup\n");
		return 1;
	}
	printf("mp_sockopts: %d steps\n", steps);
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0), late = socket(AF_INET, SOCK_STREAM, 0), bad = 0;
		struct opts want;
		close(up[0]);
		if (connect(c, (struct sockaddr *)&a, al) < 0)
			_exit(2);
		configure(c, 1, 1);
		configure(up[1], 0, 1);
		want = read_opts(c, 1);
		struct opts wantu = read_opts(up[1], 0);
		for (int i = 0; i < steps; i++) {
			uint64_t v;
			if (i == 1 && connect(late, (struct sockaddr *)&a, al) < 0) /* waits in the queue */
				_exit(3);
			if (xfer(c, &v, 8, 0) || xfer(c, &v, 8, 1))
				_exit(4);
			v = v * 31 + (uint64_t)i;
			if (xfer(up[1], &v, 8, 1))
				_exit(5);
			if (!same(read_opts(c, 1), want) || !same(read_opts(up[1], 0), wantu))
				bad++;
		}
		{
			char m[8] = "late-ok";
			char back[8];
			if (xfer(late, m, 8, 1) || xfer(late, back, 8, 0) || memcmp(back, "late-ak", 8))
				_exit(6);
		}
		_exit(bad ? 7 : 0);
	}
	{
		int s = accept(lfd, NULL, NULL), bad = 0, late, v6 = socket(AF_INET6, SOCK_DGRAM, 0);
		int tclass = 0x28, hops = 17;
		struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
		struct opts want, wantu;
		close(up[1]);
		if (s < 0) {
			printf("FAIL accept\n");
			return 1;
		}
		configure(s, 1, 0);
		configure(up[0], 0, 1);
		/* no IPv6 here: nothing to check */
		if (v6 >= 0 && (bind(v6, (struct sockaddr *)&a6, sizeof(a6)) < 0 ||
				setsockopt(v6, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof(tclass)) < 0 ||
				setsockopt(v6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hops, sizeof(hops)) < 0)) {
			close(v6);
			v6 = -1;
		}
		want = read_opts(s, 1);
		wantu = read_opts(up[0], 0);
		for (int i = 0; i < steps; i++) {
			uint64_t v = acc + (uint64_t)i, w;
			if (xfer(s, &v, 8, 1) || xfer(s, &w, 8, 0) || xfer(up[0], &w, 8, 0)) {
				printf("FAIL transfer at step %d\n", i);
				rc = 1;
				break;
			}
			acc = acc * 1099511628211ull ^ w;
			if (!same(read_opts(s, 1), want) || !same(read_opts(up[0], 0), wantu))
				bad++;
			if (v6 >= 0 && (getopt_int(v6, IPPROTO_IPV6, IPV6_TCLASS) != tclass ||
					getopt_int(v6, IPPROTO_IPV6, IPV6_UNICAST_HOPS) != hops))
				bad++;
			if (i % 20 == 0)
				printf("step %d: acc %016llx\n", i, (unsigned long long)acc);
			fflush(stdout);
			usleep(50000);
		}
		late = accept(lfd, NULL, NULL);
		{
			char m[8];
			if (late < 0 || xfer(late, m, 8, 0) || memcmp(m, "late-ok", 8) || xfer(late, "late-ak", 8, 1)) {
				printf("FAIL late connection\n");
				rc = 1;
			}
		}
		waitpid(kid, &st, 0);
		printf("options held: %s; child: %s; late connection: accepted after %d steps\n", bad ? "NO" : "yes",
		       WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "FAILED", steps);
		printf("acc %016llx\n", (unsigned long long)acc);
		if (bad || !WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
	}
	return rc;
}
