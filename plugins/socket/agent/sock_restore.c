/* Restore side of the socket plugin: every socket of the job is made anew
 * in ckrun before any process exists, and each process gets duplicates.
 * Listeners first (same address and port where this host allows), then
 * pairs with their bytes in flight, connections waiting in a listener's
 * queue, resets for peers outside the job, and the rest. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ckrun/plugin.h"
#include "launcher/common/ck_err.h"
#include "plugins/socket/agent/sock.h"

struct ck__obj {
	const struct ck_pd_fd *f; /* the record (the one with the data if any) */
	int fd;
	int premade; /* a TCP pair made at its own ports (ck__pair_same): filled with the others */
	int late_via; /* CK_SOCKOPT_CREDS: filled through this once processes exist */
	const struct ck_pd_fd *late_peer;
	struct ck__obj *by_job; /* CK_SOCKOPT_PEERPID: made with this peer by the job's processes (ck_sock_made) */
	int32_t holder;		/* the first process of the job that holds it */
	struct ck__obj *pend_l; /* UNIX, waiting in this listener's queue: connected by its holder (ck_sock_made) */
	int relisten_failed;	/* UNIX listener: its process could not listen on it again: ckrun does */
};

struct ck_sock_set {
	struct ck__obj *v;
	size_t n;
};

#define FAMILY(f) ((int)((f)->u64[0] & 0xffff))
#define TYPE(f) ((int)(((f)->u64[0] >> 16) & 0xffff))
#define STATE(f) ((int)(((f)->u64[0] >> 32) & 0xff))
#define LLEN(f) ((socklen_t)((f)->u64[1] & 0xffff))
#define PLEN(f) ((socklen_t)(((f)->u64[1] >> 16) & 0xffff))
#define BACKLOG(f) ((int)(((f)->u64[1] >> 32) & 0xffff))
/* A listener's while the restore puts back the connections waiting in
 * its queue: the saved backlog leaves no room for a stray client (or a
 * host whose somaxconn is lower), and a connect to a full UNIX listener
 * waits for good. Its own backlog is set once they are in. */
#define CK__RESTORE_BACKLOG 65535
#define LOCAL(f) ((const struct sockaddr *)((f)->path + CK_SOCK_ADDR_OFF))
#define PEER(f) ((const struct sockaddr *)((f)->path + CK_SOCK_PEER_OFF))

static struct ck__obj *ck__find(struct ck_sock_set *s, uint64_t ino)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].f->ino == ino)
			return &s->v[i];
	return NULL;
}

static int ck__options(int fd, const struct ck_pd_fd *f)
{
	uint64_t o = f->u64[2];
	int one = 1, zero = 0;
	struct linger lg = {1, (int)(o >> 32)};

	if ((o & CK_SOCKOPT_NODELAY) && FAMILY(f) != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, (o & CK_SOCKOPT_KEEPALIVE) ? &one : &zero, sizeof(int));
	/* the job's own, now that a listener listens: ck__bind binds with it
	 * set, and listen() checks the port again with what is set then (the
	 * dead job's connections in TIME_WAIT on it refused a listener whose
	 * job had not set it) */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (o & CK_SOCKOPT_REUSEADDR) ? &one : &zero, sizeof(int));
	if (o & CK_SOCKOPT_REUSEPORT)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (o & CK_SOCKOPT_LINGER)
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (f->flags & O_NONBLOCK)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return ck_sockopt_restore(fd, FAMILY(f), TYPE(f), f);
}

/* The kernel reports twice what was set: halve it back. */
static void ck__buffers(int fd, const struct ck_pd_fd *f)
{
	int rcv = (int)(uint32_t)f->u64[3] / 2, snd = (int)(uint32_t)(f->u64[3] >> 32) / 2;

	if (rcv > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (snd > 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
}

static int ck__new(const struct ck_pd_fd *f)
{
	int fd = socket(FAMILY(f), TYPE(f) | SOCK_CLOEXEC, 0), one = 1;

	if (fd >= 0 && FAMILY(f) == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, (f->u64[2] & CK_SOCKOPT_V6ONLY) ? &one : &(int){0},
			   sizeof(int));
	return fd;
}

/* The directories above a UNIX socket's path, made again where they are
 * gone (a job's temporary directory removed after the checkpoint, another
 * host: Python multiprocessing's /tmp/pymp-XXXX). Mode 0700, as mkdtemp
 * makes them: only the job's user reaches the socket, which is what such
 * directories are for. An existing component is left as it is. */
static int ck__make_parents(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	size_t n = strnlen(path, sizeof(dir) - 1); /* sun_path need not end in a NUL */

	if (path[0] != '/')
		return -EINVAL;
	memcpy(dir, path, n);
	dir[n] = 0;
	for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

/* Bind to the saved address; else (another host) the same port on any
 * address, else any port. A stale UNIX socket file of the dead job goes. */
static int ck__bind(int fd, const struct ck_pd_fd *f)
{
	struct sockaddr_storage a;
	socklen_t l = LLEN(f);
	int one = 1;

	memcpy(&a, LOCAL(f), l);
	if (FAMILY(f) == AF_UNIX) {
		struct sockaddr_un *u = (struct sockaddr_un *)&a;
		struct stat st;
		if (l <= offsetof(struct sockaddr_un, sun_path))
			return 0; /* unnamed */
		for (int tries = 0; tries < 40 && !u->sun_path[0]; tries++) { /* abstract: wait for the old one */
			if (bind(fd, (struct sockaddr *)&a, l) == 0)
				return 0;
			if (errno != EADDRINUSE)
				break;
			usleep(50000);
		}
		if (bind(fd, (struct sockaddr *)&a, l) == 0)
			return 0;
		if (errno == EADDRINUSE && u->sun_path[0] && lstat(u->sun_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
		    unlink(u->sun_path) == 0 && bind(fd, (struct sockaddr *)&a, l) == 0)
			return 0;
		if (errno == ENOENT && u->sun_path[0] == '/' && ck__make_parents(u->sun_path) == 0 &&
		    bind(fd, (struct sockaddr *)&a, l) == 0)
			return 0;
		ck_err_set("cannot bind UNIX socket %s again: %s", f->path, strerror(errno));
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* a member of a SO_REUSEPORT group joins it only if set before bind */
	if (f->u64[2] & CK_SOCKOPT_REUSEPORT)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* The killed job's own listener may take a moment to go. */
	for (int tries = 0; tries < 40; tries++) {
		if (bind(fd, (struct sockaddr *)&a, l) == 0)
			goto ok;
		if (errno != EADDRINUSE)
			break;
		usleep(50000);
	}
	if (FAMILY(f) == AF_INET)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_ANY);
	else
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_any;
	if (bind(fd, (struct sockaddr *)&a, l) == 0)
		goto moved;
	if (FAMILY(f) == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&a)->sin6_port = 0;
	if (bind(fd, (struct sockaddr *)&a, l) < 0) {
		ck_err_set("cannot bind socket %s again: %s", f->path, strerror(errno));
		return -errno;
	}
moved:
	fprintf(stderr, "ckrun: warning: socket %s: its address is not free on this host; bound elsewhere\n",
		f->path);
ok:
	return 0; /* (SO_REUSEADDR stays set until ck__options) */
}

/* A connected pair of this family and type: UNIX by socketpair, TCP
 * through a listener on loopback, UDP by connecting two bound sockets. */
/* A pair's shutdown() state, once its bytes in flight are back in: a
 * FIN where this end had sent one; else a receiving side shut (for UNIX
 * sockets that also shuts the peer's sending side, as it was). */
static void ck__shutdown_again(int fd, const struct ck_pd_fd *f, const struct ck_pd_fd *peer)
{
	if (TYPE(f) == SOCK_DGRAM)
		return; /* ck__dgram_shutdown_again, once all is sent */
	if (f->u64[2] & CK_SOCKOPT_SHUT_WR)
		shutdown(fd, SHUT_WR);
	if ((f->u64[2] & CK_SOCKOPT_SHUT_RD) && !(peer->u64[2] & CK_SOCKOPT_SHUT_WR))
		shutdown(fd, SHUT_RD);
}

/* The end of making a pair: a failed one's ends closed (sv -1), the
 * listener that made it closed either way; returns r. */
static int ck__pair_done(int r, int sv[2], int lfd)
{
	if (r < 0) {
		if (sv[0] >= 0)
			close(sv[0]);
		if (sv[1] >= 0)
			close(sv[1]);
		sv[0] = sv[1] = -1;
	}
	if (lfd >= 0)
		close(lfd);
	return r;
}

static int ck__pair(int family, int type, int sv[2])
{
	struct sockaddr_storage a;
	socklen_t l = sizeof(a);
	int lfd = -1, r = -1;

	sv[0] = sv[1] = -1;
	if (family == AF_UNIX)
		return socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) < 0 ? -errno : 0;
	memset(&a, 0, sizeof(a));
	a.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
	l = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (type == SOCK_DGRAM) {
		struct sockaddr_storage b0, b1;
		socklen_t l0 = sizeof(b0), l1 = sizeof(b1);
		sv[0] = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		sv[1] = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (sv[0] < 0 || sv[1] < 0 || bind(sv[0], (struct sockaddr *)&a, l) < 0 ||
		    bind(sv[1], (struct sockaddr *)&a, l) < 0 || getsockname(sv[0], (struct sockaddr *)&b0, &l0) < 0 ||
		    getsockname(sv[1], (struct sockaddr *)&b1, &l1) < 0 || connect(sv[0], (struct sockaddr *)&b1, l1) < 0 ||
		    connect(sv[1], (struct sockaddr *)&b0, l0) < 0)
			goto out;
		return 0;
	}
	lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, l) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &l) < 0)
		goto out;
	sv[0] = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv[0] < 0 || connect(sv[0], (struct sockaddr *)&a, l) < 0)
		goto out;
	sv[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (sv[1] < 0)
		goto out;
	r = 0;
out:
	if (r < 0) {
		r = -errno;
		ck_err_set("cannot make a %s connection on loopback: %s", family == AF_INET6 ? "TCPv6/UDPv6" : "TCP/UDP",
			   strerror(errno));
	}
	return ck__pair_done(r, sv, lfd);
}

static uint64_t ck__ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Same family, port and address (what getsockname and getpeername show). */
static int ck__same_addr(const struct sockaddr *x, const struct sockaddr *y)
{
	if (x->sa_family != y->sa_family)
		return 0;
	if (x->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)x, *b = (const void *)y;
		return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	if (x->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)x, *b = (const void *)y;
		return a->sin6_port == b->sin6_port && !memcmp(&a->sin6_addr, &b->sin6_addr, 16);
	}
	return 0;
}

/* A TCP connection between the job's sockets a and b made again at their
 * own addresses and ports, so that getsockname and getpeername read as
 * before: a bound to its address and connected to b's, where a listener
 * of ours takes it. The killed job's own connection of those ports, in
 * TIME_WAIT, is ended first (it holds the ports for a minute; root only,
 * CAP_NET_ADMIN). -1 where that cannot be had (another host without the
 * addresses, a port taken, the job's old listener still there, an
 * ordinary user after a kill on this host): the caller makes the pair on
 * new loopback ports, as before. */
static int ck__pair_same(const struct ck_pd_fd *fa, const struct ck_pd_fd *fb, int sv[2])
{
	socklen_t need = FAMILY(fa) == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	int lfd = -1, one = 1, r = -1, err = 0;
	socklen_t el = sizeof(err);
	uint64_t end;

	sv[0] = sv[1] = -1;
	if ((FAMILY(fa) != AF_INET && FAMILY(fa) != AF_INET6) || TYPE(fa) != SOCK_STREAM || FAMILY(fb) != FAMILY(fa) ||
	    LLEN(fa) < need || LLEN(fb) < need || PLEN(fa) < need || PLEN(fb) < need ||
	    !ck__same_addr(PEER(fa), LOCAL(fb)) || !ck__same_addr(PEER(fb), LOCAL(fa)))
		return -1;
	ck_sock_tcp_end_orphan(LOCAL(fa), LOCAL(fb));
	ck_sock_tcp_end_orphan(LOCAL(fb), LOCAL(fa));
	lfd = ck__new(fb);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, LOCAL(fb), LLEN(fb)) < 0 || listen(lfd, 16) < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0)
		goto out;
	/* Not blocking, and for a second at most: a stray client of that
	 * address may come first (skipped), a SYN may be dropped. */
	sv[0] = ck__new(fa);
	if (sv[0] < 0 || setsockopt(sv[0], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(sv[0], LOCAL(fa), LLEN(fa)) < 0 || fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0 ||
	    (connect(sv[0], LOCAL(fb), LLEN(fb)) < 0 && errno != EINPROGRESS))
		goto out;
	end = ck__ms_now() + 1000;
	while (sv[1] < 0) {
		struct sockaddr_storage got;
		socklen_t gl = sizeof(got);
		struct pollfd pf = {lfd, POLLIN, 0};
		int fd = accept4(lfd, (struct sockaddr *)&got, &gl, SOCK_CLOEXEC);
		if (fd >= 0 && ck__same_addr((struct sockaddr *)&got, LOCAL(fa))) {
			sv[1] = fd;
			break;
		}
		if (fd >= 0) { /* not ours */
			close(fd);
			continue;
		}
		if ((errno != EAGAIN && errno != EINTR) || ck__ms_now() >= end)
			goto out;
		poll(&pf, 1, (int)(end - ck__ms_now()));
	}
	{ /* the connecting end is through too (accepted: the handshake is done) */
		struct pollfd pf = {sv[0], POLLOUT, 0};
		if (poll(&pf, 1, 1000) != 1 || getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err ||
		    fcntl(sv[0], F_SETFL, 0) < 0)
			goto out;
	}
	r = 0;
out:
	return ck__pair_done(r, sv, lfd);
}

struct ck__wsink {
	int fd, dgram;
	char *pend; /* datagram reassembly */
	size_t npend;
	const struct sockaddr *to; /* fd is not connected: sent there */
	socklen_t tl;
};

/* Writes the saved bytes toward a socket through its new peer. */
static int ck__sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct ck__wsink *w = arg;
	char *p;

	(void)off;
	if (!(p = realloc(w->pend, w->npend + len)))
		return -ENOMEM;
	w->pend = p;
	memcpy(w->pend + w->npend, buf, len);
	w->npend += len;
	return 0;
}

static int ck__deliver(struct ck__wsink *w)
{
	size_t at = 0;

	while (at < w->npend) {
		size_t len = w->npend - at;
		const char *p = w->pend + at;
		if (w->dgram) {
			uint32_t l32;
			memcpy(&l32, p, 4);
			p += 4;
			len = l32;
			at += 4;
		}
		/* a datagram goes whole, one of no bytes too (it is one) */
		for (size_t put = 0; put < len || (w->dgram && !put && !len);) {
			ssize_t n = sendto(w->fd, p + put, len - put, MSG_NOSIGNAL | MSG_DONTWAIT, w->to, w->to ? w->tl : 0);
			if (n < 0 && errno == EAGAIN) {
				struct pollfd pf = {w->fd, POLLOUT, 0};
				if (poll(&pf, 1, 5000) <= 0)
					return -ETIMEDOUT;
				continue;
			}
			if (n < 0)
				return -errno;
			if (w->dgram)
				break;
			put += (size_t)n;
		}
		at += len;
	}
	return 0;
}

static int ck__fill_to(struct ck_reader *rd, const struct ck_pd_fd *toward, int via, size_t *bytes,
		       const struct sockaddr *to, socklen_t tl);

static int ck__fill(struct ck_reader *rd, const struct ck_pd_fd *toward, int via)
{
	size_t bytes;

	return ck__fill_to(rd, toward, via, &bytes, NULL, 0);
}

static int ck__fill_n(struct ck_reader *rd, const struct ck_pd_fd *toward, int via, size_t *bytes)
{
	return ck__fill_to(rd, toward, via, bytes, NULL, 0);
}

/* Sends the saved bytes toward `toward` through `via` (not connected: to
 * address `to`); *bytes: how many (without the datagrams' length words). */
static int ck__fill_to(struct ck_reader *rd, const struct ck_pd_fd *toward, int via, size_t *bytes,
		       const struct sockaddr *to, socklen_t tl)
{
	struct ck__wsink w = {via, TYPE(toward) != SOCK_STREAM, NULL, 0, to, tl};
	int r = 0, big, old = 0;
	socklen_t ol = sizeof(old);

	*bytes = 0;

	if (!toward->data_nchunks)
		return 0;
	r = ck_reader_read(rd, toward->data_chunk, toward->data_nchunks, ck__sink, &w);
	/* room for all of it at once; then the sender's own again (it may be
	 * a socket of the job: its SO_SNDBUF is the job's to read) */
	if (getsockopt(via, SOL_SOCKET, SO_SNDBUF, &old, &ol) < 0)
		old = 0;
	big = (int)(w.npend * 2 + 65536);
	setsockopt(via, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (r == 0 && (toward->u64[2] & CK_SOCKOPT_RIGHTS))
		r = ck_rights_deliver(w.pend, w.npend, w.dgram, via, to, tl); /* with the files in flight */
	else if (r == 0)
		r = ck__deliver(&w);
	if (old > 0) {
		old /= 2; /* (the kernel reports twice what was set) */
		setsockopt(via, SOL_SOCKET, SO_SNDBUF, &old, sizeof(old));
	}
	if (r == 0 && !w.dgram)
		*bytes = w.npend;
	if (r < 0 && !strstr(ck_err_msg(), "socket"))
		ck_err_set("cannot put the saved bytes back into %s: %s", toward->path, strerror(-r));
	free(w.pend);
	return r;
}

/* The bytes toward o through its peer's new socket, or (with senders'
 * credentials) later: a pid named must be a live process (sock_creds.c). */
static int ck__fill_or_defer(struct ck_reader *rd, struct ck__obj *o, const struct ck__obj *peer)
{
	if (!(o->f->u64[2] & CK_SOCKOPT_CREDS))
		return ck__fill(rd, o->f, peer->fd);
	o->late_via = peer->fd;
	o->late_peer = peer->f;
	return 0;
}

/* A new pair's contents and state: the bytes in flight each way (or
 * later, with their senders), options, buffers, shutdown. */
static int ck__pair_fill(struct ck_reader *rd, struct ck__obj *a, struct ck__obj *b)
{
	int r;

	if ((r = ck__fill_or_defer(rd, a, b)) < 0 || (r = ck__fill_or_defer(rd, b, a)) < 0)
		return r;
	if ((r = ck__options(a->fd, a->f)) < 0 || (r = ck__options(b->fd, b->f)) < 0)
		return r;
	ck__buffers(a->fd, a->f);
	ck__buffers(b->fd, b->f);
	if (a->late_via < 0)
		ck__shutdown_again(a->fd, a->f, b->f);
	if (b->late_via < 0)
		ck__shutdown_again(b->fd, b->f, a->f);
	return 0;
}

/* A UNIX pair whose ends each named a process of the job (SO_PEERCRED):
 * made by those processes. A stream or record pair by a listener and a
 * connection, whatever they named; datagram ends only by a socketpair of
 * the one process both named (a datagram connect() notes no peer). */
static int ck__by_job(const struct ck__obj *a, const struct ck__obj *b)
{
	return FAMILY(a->f) == AF_UNIX && STATE(b->f) == CK_SOCK_PAIRED && b->f->size == a->f->ino && !a->premade &&
	       a->fd < 0 && b->fd < 0 &&
	       (a->f->u64[2] & CK_SOCKOPT_PEERPID) && (b->f->u64[2] & CK_SOCKOPT_PEERPID) && a->f->peer > 0 &&
	       b->f->peer > 0 && (TYPE(a->f) != SOCK_DGRAM || a->f->peer == b->f->peer);
}

/* The ids the process that made this end's connection had (what its
 * SO_PEERCRED names with the pid), for its restorer to take while it
 * makes it again. */
static uint64_t ck__ids(const struct ck_pd_fd *f)
{
	uint32_t ids[2];

	if (!(f->u64[2] & CK_SOCKOPT_PEERIDS))
		return CK_AGENT_IDS_NONE;
	memcpy(ids, f->path + CK_SOCK_IDS_OFF, sizeof(ids));
	return CK_AGENT_IDS(ids[0], ids[1]);
}

/* A connection waiting in listener l's queue, made here. */
static int ck__pending_by_ckrun(struct ck__obj *o, const struct ck__obj *l)
{
	struct timeval tmo = {5, 0};
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);

	o->fd = ck__new(o->f);
	if (o->fd < 0 || getsockname(l->fd, (struct sockaddr *)&a, &al) < 0)
		return -errno;
	if (FAMILY(o->f) == AF_INET && ((struct sockaddr_in *)&a)->sin_addr.s_addr == htonl(INADDR_ANY))
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (FAMILY(o->f) == AF_INET6 && !memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr, &in6addr_any, 16))
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
	/* a full listener's queue: an error within 5 s, not a wait for good
	 * (then none, and the job's own with its options) */
	setsockopt(o->fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	if (connect(o->fd, (struct sockaddr *)&a, al) < 0) {
		int e = errno;
		ck_err_set("cannot connect %s to its listener again: %s", o->f->path, strerror(e));
		return -e;
	}
	tmo.tv_sec = 0;
	setsockopt(o->fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	ck__buffers(o->fd, o->f);
	return ck__options(o->fd, o->f);
}

/* A UNIX connection waiting in a listener's queue, connected by the
 * process that holds it: the connection then names that process, and
 * its end the process that listened (relistened first). */
static int ck__pending_by_job(struct ck__obj *o, const struct ck_agent_procs *procs)
{
	struct sockaddr_un a;
	socklen_t al = sizeof(a);
	int lost = 0, fd;

	if (getsockname(o->pend_l->fd, (struct sockaddr *)&a, &al) < 0)
		return -errno;
	/* (its connector's ids are not seen: only the listener's, on its end) */
	fd = procs->unix_connect(procs->arg, o->holder, CK_AGENT_IDS_NONE, TYPE(o->f), &a, (uint32_t)al, &lost);
	if (fd < 0 && lost)
		return fd;
	if (fd < 0) {
		fprintf(stderr,
			"ckrun: warning: socket %s: process %d could not connect it to its listener again (%s); its "
			"SO_PEERCRED names no process\n",
			o->f->path, o->holder, strerror(-fd));
		return ck__pending_by_ckrun(o, o->pend_l);
	}
	o->fd = fd;
	ck__buffers(o->fd, o->f);
	return ck__options(o->fd, o->f);
}

/* A UNIX listener made here: listened on again (with this backlog) by
 * the process that had listened, so that connections to it name that
 * process; by ckrun where none is known, or the process could not. */
static int ck__relisten(struct ck__obj *o, const struct ck_agent_procs *procs, int backlog)
{
	int lost = 0, r = -ESRCH;

	if (FAMILY(o->f) != AF_UNIX || STATE(o->f) != CK_SOCK_LISTENING || o->fd < 0)
		return 0;
	if ((o->f->u64[2] & CK_SOCKOPT_PEERPID) && o->f->peer > 0 && !o->relisten_failed)
		r = procs->unix_listen(procs->arg, o->f->peer, ck__ids(o->f), o->fd, backlog, &lost);
	if (r < 0 && lost)
		return r;
	if (r < 0 && r != -ESRCH && !o->relisten_failed)
		fprintf(stderr,
			"ckrun: warning: socket %s: process %d could not listen on it again (%s); a connection to it "
			"names no process (SO_PEERCRED)\n",
			o->f->path, o->f->peer, strerror(-r));
	if (r < 0) {
		o->relisten_failed = 1;
		if (listen(o->fd, backlog) < 0) {
			ck_err_set("cannot listen on %s again: %s", o->f->path, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

int ck_sock_made(struct ck_sock_set *s, struct ck_reader *rd, const struct ck_agent_procs *procs)
{
	int r = 0;

	/* listeners first: a connection made to one copies what it names;
	 * then their own backlogs, once their queues are back */
	for (size_t i = 0; s && i < s->n && r == 0; i++)
		r = ck__relisten(&s->v[i], procs, CK__RESTORE_BACKLOG);
	for (size_t i = 0; s && i < s->n && r == 0; i++)
		if (s->v[i].pend_l)
			r = ck__pending_by_job(&s->v[i], procs);
	for (size_t i = 0; s && i < s->n && r == 0; i++)
		r = ck__relisten(&s->v[i], procs, BACKLOG(s->v[i].f));
	if (r < 0)
		goto fail;
	for (size_t i = 0; s && i < s->n; i++) {
		struct ck__obj *a = &s->v[i], *b = a->by_job;
		int sv[2], lost = 0;
		if (!b)
			continue;
		/* a names the listener (its connection copied the listener's
		 * credentials), b the process that connected */
		r = procs->unix_pair(procs->arg, a->f->peer, ck__ids(a->f), b->f->peer, ck__ids(b->f), TYPE(a->f), sv,
				     &lost);
		if (r < 0 && lost)
			goto fail;
		if (r < 0) {
			fprintf(stderr,
				"ckrun: warning: socket %s: processes %d and %d could not connect it again (%s); "
				"its SO_PEERCRED names no process\n",
				a->f->path, a->f->peer, b->f->peer, strerror(-r));
			if ((r = ck__pair(AF_UNIX, TYPE(a->f), sv)) < 0)
				goto fail;
		}
		a->fd = sv[0];
		b->fd = sv[1];
		a->by_job = NULL;
		if ((r = ck__pair_fill(rd, a, b)) < 0)
			goto fail;
	}
	return 0;
fail:
	if (!strstr(ck_err_msg(), "socket"))
		ck_err_wrap("sockets");
	return r;
}

/* A datagram socket's own shutdown() (UNIX, UDP), once every datagram
 * saved is queued again: a socket shut for writing may be the one they are
 * sent through (its peer's queue, or a server's it was connected to). An
 * unconnected UDP socket's shutdown sets its bits and says ENOTCONN. */
static int ck__dgram_shutdown_again(struct ck_sock_set *s)
{
	for (size_t i = 0; s && i < s->n; i++) {
		const struct ck__obj *o = &s->v[i];
		int udp;
		if (TYPE(o->f) != SOCK_DGRAM || o->fd < 0)
			continue;
		udp = FAMILY(o->f) != AF_UNIX;
		if (((o->f->u64[2] & CK_SOCKOPT_SHUT_RD) && shutdown(o->fd, SHUT_RD) < 0 && !(udp && errno == ENOTCONN)) ||
		    ((o->f->u64[2] & CK_SOCKOPT_SHUT_WR) && shutdown(o->fd, SHUT_WR) < 0 && !(udp && errno == ENOTCONN))) {
			int e = errno;
			ck_err_set("cannot shut socket %s down again: %s", o->f->path, strerror(e));
			return -e;
		}
	}
	return 0;
}

int ck_sock_late(struct ck_sock_set *s, struct ck_reader *rd, pid_t (*host_pid)(void *arg, int32_t jpid), void *arg)
{
	for (size_t i = 0; s && i < s->n; i++) {
		struct ck__obj *o = &s->v[i];
		struct ck__wsink w = {o->late_via, TYPE(o->f) != SOCK_STREAM, NULL, 0, NULL, 0};
		int r, big;

		if (o->late_via < 0)
			continue;
		r = ck_reader_read(rd, o->f->data_chunk, o->f->data_nchunks, ck__sink, &w);
		big = (int)(w.npend * 2 + 65536);
		setsockopt(o->late_via, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		if (r == 0)
			r = ck_creds_deliver(w.pend, w.npend, w.dgram, o->late_via, host_pid, arg);
		free(w.pend);
		if (r < 0) {
			ck_err_wrap("socket %s", o->f->path);
			return r;
		}
		ck__buffers(o->late_via, o->late_peer); /* its own again */
		ck__shutdown_again(o->fd, o->f, o->late_peer);
		o->late_via = -1;
	}
	return ck__dgram_shutdown_again(s);
}

/* A connection to a peer outside the job: a new pair whose far end
 * delivers the bytes or datagrams saved toward it, then goes: EOF where
 * the peer had closed (stream), else a reset (ECONNRESET on next use). */
static int ck__external_socket(struct ck_reader *rd, const struct ck_pd_fd *f)
{
	int sv[2], r = ck__pair(FAMILY(f), TYPE(f), sv);
	struct linger lg = {1, 0};
	int eof = (f->u64[2] & CK_SOCKOPT_PEER_CLOSED) && TYPE(f) != SOCK_DGRAM;
	size_t bytes = 0;

	if (r < 0)
		return r;
	r = ck__fill_n(rd, f, sv[1], &bytes);
	if (r < 0) {
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	if (FAMILY(f) != AF_UNIX && bytes) {
		/* loopback TCP: the bytes are in before the reset or FIN */
		int inq = 0;
		for (int i = 0; i < 1000 && ioctl(sv[0], SIOCINQ, &inq) == 0 && (size_t)inq < bytes; i++)
			usleep(1000);
	}
	if (eof) {
		/* nothing more */
	} else if (FAMILY(f) == AF_UNIX && TYPE(f) != SOCK_DGRAM) {
		/* closing with unread data makes the peer see ECONNRESET */
		(void)!write(sv[0], "x", 1);
	} else {
		setsockopt(sv[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(sv[1]);
	if (FAMILY(f) != AF_UNIX) {
		struct pollfd pf = {sv[0], POLLRDHUP, 0};
		poll(&pf, 1, 200); /* the RST or FIN arrives */
	}
	return sv[0];
}

/* a connected to b, which is made, named and not connected: the
 * datagrams toward a are sent by b to a's name. */
static int ck__connect_to(struct ck_reader *rd, struct ck__obj *a, struct ck__obj *b)
{
	struct sockaddr_storage ba, aa;
	socklen_t bl = sizeof(ba), al = sizeof(aa);
	size_t bytes;
	int r;

	if ((a->fd = ck__new(a->f)) < 0)
		return -errno;
	if (LLEN(a->f) > sizeof(sa_family_t) && (r = ck__bind(a->fd, a->f)) < 0)
		return r;
	if (getsockname(b->fd, (struct sockaddr *)&ba, &bl) < 0 || connect(a->fd, (struct sockaddr *)&ba, bl) < 0 ||
	    getsockname(a->fd, (struct sockaddr *)&aa, &al) < 0) {
		r = -errno;
		ck_err_set("cannot connect %s to its peer again: %s", a->f->path, strerror(errno));
		return r;
	}
	if ((r = ck__options(a->fd, a->f)) < 0)
		return r;
	ck__buffers(a->fd, a->f);
	return ck__fill_to(rd, a->f, b->fd, &bytes, (struct sockaddr *)&aa, al);
}

/* The job's own socket bound to address a (made already), or -1: one
 * bound to that very address first, else one bound to every address
 * (the kernel sends from such a socket with the address it routes by). */
static int ck__sender(void *arg, const struct sockaddr *a, socklen_t al)
{
	struct ck_sock_set *s = arg;

	for (int any = 0; any < 2; any++)
		for (size_t i = 0; i < s->n; i++) {
			const struct ck_pd_fd *f = s->v[i].f;
			struct sockaddr_storage l;
			if (s->v[i].fd < 0 || TYPE(f) != SOCK_DGRAM || FAMILY(f) != a->sa_family ||
			    al <= sizeof(sa_family_t))
				continue;
			memset(&l, 0, sizeof(l));
			memcpy(&l, LOCAL(f), LLEN(f) < sizeof(l) ? LLEN(f) : sizeof(l));
			if (a->sa_family == AF_INET) {
				const struct sockaddr_in *x = (const void *)&l, *y = (const void *)a;
				if (x->sin_port == y->sin_port &&
				    (any ? x->sin_addr.s_addr == htonl(INADDR_ANY) : x->sin_addr.s_addr == y->sin_addr.s_addr))
					return s->v[i].fd;
			} else if (a->sa_family == AF_INET6) {
				const struct sockaddr_in6 *x = (const void *)&l, *y = (const void *)a;
				if (x->sin6_port == y->sin6_port &&
				    !memcmp(&x->sin6_addr, any ? &in6addr_any : &y->sin6_addr, 16))
					return s->v[i].fd;
			} else if (!any && LLEN(f) == al && !memcmp(&l, a, al)) {
				return s->v[i].fd;
			}
		}
	return -1;
}

/* The address a v4-mapped IPv6 address names, as AF_INET (else a copy). */
static socklen_t ck__unmapped(const struct sockaddr *a, socklen_t al, struct sockaddr_storage *out)
{
	const struct sockaddr_in6 *x = (const void *)a;

	memset(out, 0, sizeof(*out));
	if (a->sa_family == AF_INET6 && al >= sizeof(*x) && IN6_IS_ADDR_V4MAPPED(&x->sin6_addr)) {
		struct sockaddr_in *y = (struct sockaddr_in *)out;
		y->sin_family = AF_INET;
		y->sin_port = x->sin6_port;
		memcpy(&y->sin_addr, &x->sin6_addr.s6_addr[12], 4);
		return sizeof(*y);
	}
	memcpy(out, a, al < sizeof(*out) ? al : sizeof(*out));
	return al;
}

/* Where a socket of family fam reaches the socket bound to a (of o's
 * family; its wildcard address: loopback, IPv4's where its peer is a
 * v4-mapped one), into *to; 0 if it cannot. */
static socklen_t ck__reach(int fam, const struct sockaddr_storage *a, int mapped, struct sockaddr_storage *to)
{
	socklen_t l = ck__unmapped((const struct sockaddr *)a, sizeof(*a), to);

	if (mapped && to->ss_family == AF_INET6 && !memcmp(&((struct sockaddr_in6 *)to)->sin6_addr, &in6addr_any, 16)) {
		/* a dual-stack socket whose peer speaks IPv4: its IPv4 side */
		struct sockaddr_in v = {.sin_family = AF_INET, .sin_port = ((struct sockaddr_in6 *)to)->sin6_port};
		v.sin_addr.s_addr = htonl(INADDR_ANY);
		memset(to, 0, sizeof(*to));
		memcpy(to, &v, sizeof(v));
	}

	if (to->ss_family == AF_INET) {
		struct sockaddr_in *y = (struct sockaddr_in *)to;
		if (y->sin_addr.s_addr == htonl(INADDR_ANY))
			y->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fam == AF_INET)
			return sizeof(*y);
		/* an IPv6 sender: as v4-mapped */
		struct sockaddr_in6 m = {.sin6_family = AF_INET6, .sin6_port = y->sin_port};
		m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&m.sin6_addr.s6_addr[12], &y->sin_addr, 4);
		memcpy(to, &m, sizeof(m));
		return sizeof(m);
	}
	if (to->ss_family == AF_INET6) {
		struct sockaddr_in6 *y = (struct sockaddr_in6 *)to;
		if (!memcmp(&y->sin6_addr, &in6addr_any, 16)) {
			if (fam == AF_INET) { /* a dual-stack socket: its IPv4 side */
				struct sockaddr_in v = {.sin_family = AF_INET, .sin_port = y->sin6_port};
				v.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
				memset(to, 0, sizeof(*to));
				memcpy(to, &v, sizeof(v));
				return sizeof(v);
			}
			y->sin6_addr = in6addr_loopback;
		}
		return fam == AF_INET6 ? sizeof(*y) : 0;
	}
	return fam == to->ss_family ? l : 0;
}

/* A UDP socket connected to an address no socket of the job connects
 * back from (a server outside the job, or a job socket not connected to
 * it): UDP has no connection to lose, so it is made with its own name and
 * connected to that address again. What was queued toward it is sent to
 * it first, while it still takes any sender's: by the job's socket of
 * that address (a wildcard or v4-mapped one too) where there is one,
 * else by one of ours. Its buffers and options come before the datagrams
 * and the connect (a receive buffer too small drops datagrams; a
 * broadcast address needs SO_BROADCAST first). */
static int ck__udp_connected(struct ck_sock_set *s, struct ck_reader *rd, struct ck__obj *o)
{
	struct sockaddr_storage aa, to, peer;
	socklen_t al = sizeof(aa), pl, tl;
	size_t bytes = 0;
	int tmp = -1, via, mapped = 0, r;

	for (size_t j = 0; j < s->n; j++) {
		struct ck__obj *b = &s->v[j];
		if (b != o && b->fd >= 0 && FAMILY(b->f) == FAMILY(o->f) && TYPE(b->f) == SOCK_DGRAM &&
		    STATE(b->f) == CK_SOCK_UNCONNECTED && LLEN(b->f) == PLEN(o->f) &&
		    !memcmp(LOCAL(b->f), PEER(o->f), PLEN(o->f)))
			return ck__connect_to(rd, o, b);
	}
	if ((o->fd = ck__new(o->f)) < 0)
		return -errno;
	if (LLEN(o->f) > sizeof(sa_family_t) && (r = ck__bind(o->fd, o->f)) < 0)
		return r;
	if ((r = ck__options(o->fd, o->f)) < 0)
		return r;
	ck__buffers(o->fd, o->f);
	if (o->f->data_nchunks) {
		if (getsockname(o->fd, (struct sockaddr *)&aa, &al) < 0)
			return -errno;
		/* the sender: the job's socket of the peer's address */
		pl = ck__unmapped((const struct sockaddr *)PEER(o->f), PLEN(o->f), &peer);
		mapped = peer.ss_family == AF_INET && FAMILY(o->f) == AF_INET6;
		via = ck__sender(s, (const struct sockaddr *)&peer, pl);
		if (via < 0 && mapped)
			via = ck__sender(s, (const struct sockaddr *)PEER(o->f), PLEN(o->f));
		if (via >= 0) {
			struct sockaddr_storage vs;
			socklen_t vl = sizeof(vs), v6l = sizeof(int);
			int v6only = 0;
			/* (an IPv6-only sender cannot reach an IPv4 side) */
			if (getsockname(via, (struct sockaddr *)&vs, &vl) < 0 ||
			    (mapped && vs.ss_family == AF_INET6 &&
			     (getsockopt(via, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &v6l) < 0 || v6only)) ||
			    !(tl = ck__reach(vs.ss_family, &aa, mapped, &to)))
				via = -1;
		}
		if (via < 0) {
			if ((tmp = socket(FAMILY(o->f), SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
				return -errno;
			via = tmp;
			tl = ck__reach(FAMILY(o->f), &aa, mapped, &to);
		}
		if ((r = ck__fill_to(rd, o->f, via, &bytes, (struct sockaddr *)&to, tl)) < 0)
			goto out;
	}
	if (connect(o->fd, (const struct sockaddr *)PEER(o->f), PLEN(o->f)) < 0) {
		/* that address is not reachable from this host (a job moved):
		 * as a lost connection, its datagrams from a closed port */
		fprintf(stderr, "ckrun: warning: socket %s: cannot connect to its peer's address again here (%s); "
			"connected to a closed port on loopback instead\n", o->f->path, strerror(errno));
		close(o->fd);
		if ((o->fd = ck__external_socket(rd, o->f)) < 0) {
			r = o->fd;
			goto out;
		}
		if ((r = ck__options(o->fd, o->f)) < 0)
			goto out;
		ck__buffers(o->fd, o->f);
	}
	r = 0;
out:
	if (tmp >= 0)
		close(tmp);
	return r;
}

int ck_sock_prepare(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n, struct ck_sock_set **out)
{
	struct ck_sock_set *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < pds[i]->nfds; k++) {
			const struct ck_pd_fd *f = &pds[i]->fds[k];
			struct ck__obj *o;
			if (f->kind != CK_FD_SOCKET)
				continue;
			if ((o = ck__find(s, f->ino))) {
				if (f->data_nchunks)
					o->f = f;
				continue;
			}
			o = realloc(s->v, (s->n + 1) * sizeof(*o));
			if (!o) {
				r = -ENOMEM;
				goto fail;
			}
			s->v = o;
			s->v[s->n++] = (struct ck__obj){f, -1, 0, -1, NULL, NULL, pds[i]->pid, NULL, 0};
		}
	/* TCP connections in the job, at their own ports: before the
	 * listeners, as one of them may share its port */
	for (size_t i = 0; i < s->n; i++) {
		struct ck__obj *a = &s->v[i], *b;
		int sv[2];
		if (STATE(a->f) != CK_SOCK_PAIRED || TYPE(a->f) != SOCK_STREAM || a->fd >= 0 ||
		    !(b = ck__find(s, a->f->size)) || b == a || STATE(b->f) != CK_SOCK_PAIRED || b->fd >= 0)
			continue;
		if (ck__pair_same(a->f, b->f, sv) == 0) {
			a->fd = sv[0];
			b->fd = sv[1];
			a->premade = 1;
		}
	}
	/* listeners and unconnected sockets */
	for (size_t i = 0; i < s->n && r == 0; i++) {
		struct ck__obj *o = &s->v[i];
		int st = STATE(o->f);
		if (st != CK_SOCK_LISTENING && st != CK_SOCK_UNCONNECTED)
			continue;
		o->fd = ck__new(o->f);
		if (o->fd < 0) {
			r = -errno;
			break;
		}
		if (LLEN(o->f) > sizeof(sa_family_t) && (r = ck__bind(o->fd, o->f)) < 0)
			break;
		if (st == CK_SOCK_LISTENING && listen(o->fd, CK__RESTORE_BACKLOG) < 0) {
			r = -errno;
			ck_err_set("cannot listen on %s again: %s", o->f->path, strerror(errno));
			break;
		}
		if ((r = ck__options(o->fd, o->f)) < 0)
			break;
		ck__buffers(o->fd, o->f);
	}
	/* pairs, with their bytes in flight */
	for (size_t i = 0; i < s->n && r == 0; i++) {
		struct ck__obj *a = &s->v[i], *b;
		int sv[2];
		if (STATE(a->f) != CK_SOCK_PAIRED || (a->fd >= 0 && !a->premade))
			continue;
		b = ck__find(s, a->f->size);
		if (!b || b == a) {
			ck_err_set("socket %s: its peer is missing from the checkpoint", a->f->path);
			r = -EBADMSG;
			break;
		}
		if (b->fd >= 0 && STATE(b->f) != CK_SOCK_PAIRED) {
			/* connected to a socket that is not connected back (a
			 * datagram server, made above with its name): a socket of
			 * its own, with its own name, connected to the server's */
			if ((r = ck__connect_to(rd, a, b)) < 0)
				break;
			continue;
		}
		if (a->by_job || b->by_job)
			continue;
		if (ck__by_job(a, b)) {
			/* once the processes exist; the end that had a name of
			 * its own (a path listener's) was the accepted one: it
			 * is again */
			if (LLEN(a->f) > sizeof(sa_family_t) && LLEN(b->f) <= sizeof(sa_family_t))
				b->by_job = a;
			else
				a->by_job = b;
			continue;
		}
		if (!a->premade) {
			if ((r = ck__pair(FAMILY(a->f), TYPE(a->f), sv)) < 0)
				break;
			a->fd = sv[0];
			b->fd = sv[1];
		}
		if ((r = ck__pair_fill(rd, a, b)) < 0)
			break;
	}
	/* connections waiting in a listener's queue, and resets */
	for (size_t i = 0; i < s->n && r == 0; i++) {
		struct ck__obj *o = &s->v[i], *l = NULL;
		if (STATE(o->f) == CK_SOCK_EXTERNAL && TYPE(o->f) == SOCK_DGRAM && FAMILY(o->f) != AF_UNIX) {
			r = ck__udp_connected(s, rd, o);
			continue;
		}
		if (STATE(o->f) == CK_SOCK_EXTERNAL) {
			if ((o->fd = ck__external_socket(rd, o->f)) < 0)
				r = o->fd;
			else
				r = ck__options(o->fd, o->f);
			continue;
		}
		if (STATE(o->f) != CK_SOCK_PENDING)
			continue;
		for (size_t j = 0; j < s->n && !l; j++) {
			const struct ck_pd_fd *x = s->v[j].f;
			if (STATE(x) != CK_SOCK_LISTENING || FAMILY(x) != FAMILY(o->f) || TYPE(x) != TYPE(o->f))
				continue;
			if (FAMILY(x) == AF_UNIX ? (LLEN(x) == PLEN(o->f) && !memcmp(LOCAL(x), PEER(o->f), LLEN(x)))
						  : (((const struct sockaddr_in *)LOCAL(x))->sin_port ==
						     ((const struct sockaddr_in *)PEER(o->f))->sin_port))
				l = &s->v[j];
		}
		if (!l) {
			ck_err_set("socket %s: its listener is missing from the checkpoint", o->f->path);
			r = -EBADMSG;
			break;
		}
		if (FAMILY(o->f) == AF_UNIX)
			o->pend_l = l; /* connected by its process, once the listener listens as its own */
		else
			r = ck__pending_by_ckrun(o, l);
	}
	/* TCP listeners' own backlogs, their queues back (UNIX ones: ck_sock_made) */
	for (size_t i = 0; i < s->n && r == 0; i++) {
		struct ck__obj *o = &s->v[i];
		if (STATE(o->f) == CK_SOCK_LISTENING && FAMILY(o->f) != AF_UNIX && o->fd >= 0 &&
		    listen(o->fd, BACKLOG(o->f)) < 0) {
			r = -errno;
			ck_err_set("cannot listen on %s again: %s", o->f->path, strerror(errno));
		}
	}
	/* datagrams queued on unconnected sockets, once every sender is made */
	for (size_t i = 0; i < s->n && r == 0; i++) {
		struct ck__obj *o = &s->v[i];
		struct ck__wsink w = {o->fd, 1, NULL, 0, NULL, 0};
		if (STATE(o->f) != CK_SOCK_UNCONNECTED || !(o->f->u64[2] & CK_SOCKOPT_FROM) || !o->f->data_nchunks)
			continue;
		r = ck_reader_read(rd, o->f->data_chunk, o->f->data_nchunks, ck__sink, &w);
		if (r == 0 && (r = ck_dgq_deliver(w.pend, w.npend, o->fd, ck__sender, s)) < 0)
			ck_err_set("cannot queue the saved datagrams on %s again: %s", o->f->path, strerror(-r));
		free(w.pend);
	}
	if (r < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	if (!strstr(ck_err_msg(), "socket"))
		ck_err_wrap("sockets");
	ck_sock_free(s);
	return r;
}

/* One UNIX address (at off in f->path, length in the 16 bits of u64[1]
 * at shift) under --map-path; abstract and unnamed ones have no path. */
static int ck__map_unix(struct ck_pd_fd *f, size_t off, unsigned shift,
			int (*map)(void *arg, const char *in, char *out, size_t cap), void *arg)
{
	struct sockaddr_un *u = (struct sockaddr_un *)(f->path + off);
	socklen_t l = (socklen_t)((f->u64[1] >> shift) & 0xffff);
	char in[sizeof(u->sun_path) + 1], out[sizeof(u->sun_path)];
	size_t n;
	int r;

	if (l <= offsetof(struct sockaddr_un, sun_path) || u->sun_path[0] != '/')
		return 0;
	n = l - offsetof(struct sockaddr_un, sun_path);
	memcpy(in, u->sun_path, n);
	in[n] = 0; /* sun_path need not end in a NUL */
	r = map(arg, in, out, sizeof(out));
	if (r <= 0) {
		if (r == -ENAMETOOLONG)
			ck_err_wrap("UNIX socket %s (a socket's path holds at most %zu bytes)", in, sizeof(out) - 1);
		return r;
	}
	n = strlen(out);
	memset(u->sun_path, 0, sizeof(u->sun_path));
	memcpy(u->sun_path, out, n);
	l = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	f->u64[1] = (f->u64[1] & ~(0xffffull << shift)) | (uint64_t)l << shift;
	return 1;
}

int ck_sock_map_paths(struct ck_pd_fd *f, int (*map)(void *arg, const char *in, char *out, size_t cap), void *arg)
{
	int a, b;

	if (FAMILY(f) != AF_UNIX)
		return 0;
	/* the local address, and the peer's (a pending connection finds its
	 * listener by it): both or neither */
	if ((a = ck__map_unix(f, CK_SOCK_ADDR_OFF, 0, map, arg)) < 0 ||
	    (b = ck__map_unix(f, CK_SOCK_PEER_OFF, 16, map, arg)) < 0)
		return a < 0 ? a : b;
	return a || b;
}

int ck_sock_fd(struct ck_sock_set *s, const struct ck_pd_fd *f)
{
	struct ck__obj *o = s ? ck__find(s, f->ino) : NULL;
	int fd;

	if (!o || o->fd < 0) {
		ck_err_set("descriptor %d: socket %s was not re-created", f->fd, f->path);
		return -ENOENT;
	}
	fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? -errno : fd;
}

void ck_sock_free(struct ck_sock_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].fd >= 0)
			close(s->v[i].fd);
	free(s->v);
	free(s);
}
