/* Checkpoint side of the socket plugin: every socket of the parked job is
 * read through a duplicate taken with pidfd_getfd, paired with its peer,
 * and the bytes in flight toward it are saved. The job is left exactly as
 * it was: stream bytes are peeked; datagrams, and TCP bytes still in the
 * sender's queue, are taken and written straight back in order. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcp_info with tcpi_bytes_acked */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "plugins/socket/agent/sock.h"

struct ck__sk {
	struct ck_pd_fd *f; /* the first descriptor of this socket in the job */
	int32_t jpid;
	int fd; /* our duplicate */
	int family, type, state;
	struct sockaddr_storage local, peer;
	socklen_t llen, plen;
	uint64_t peer_ino;
	long partner;
	char *data; /* bytes (or datagrams) in flight toward this socket */
	size_t ndata;
	int peer_closed; /* EXTERNAL: the peer closed its end (POLLRDHUP) */
	int shut; /* UNIX datagram, UDP: its own shutdown() (CK_SOCK_RCV_SHUT, CK_SOCK_SEND_SHUT) */
	int from; /* UNCONNECTED: data holds datagrams with their senders */
	int creds; /* PAIRED, SO_PASSCRED: data holds the queue with its senders */
	struct ck_sock_mark *marks; /* which records carry files in flight */
	size_t nmarks;
	uint32_t *idx; /* into the round's ck_rights */
	size_t nidx;
};

/* The files in flight of this round (sock_rights.c). */
static struct ck_rights ck__R;

static uint64_t ck__ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* "TCP 127.0.0.1:4000 -> 127.0.0.1:51234", "UNIX stream @name", ... */
static void ck__addr_str(const struct sockaddr_storage *a, socklen_t len, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;
		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		snprintf(out, n, "%s:%u", host, ntohs(s->sin_port));
	} else if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)a;
		inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
		snprintf(out, n, "[%s]:%u", host, ntohs(s->sin6_port));
	} else if (a->ss_family == AF_UNIX) {
		const struct sockaddr_un *s = (const void *)a;
		size_t k = len > offsetof(struct sockaddr_un, sun_path) ? len - offsetof(struct sockaddr_un, sun_path) : 0;
		if (!k)
			snprintf(out, n, "(unnamed)");
		else if (!s->sun_path[0])
			snprintf(out, n, "@%.*s", (int)(k - 1), s->sun_path + 1);
		else
			snprintf(out, n, "%.*s", (int)strnlen(s->sun_path, k), s->sun_path);
	} else {
		snprintf(out, n, "?");
	}
}

static const char *ck__kind(int family, int type)
{
	if (family == AF_UNIX)
		return type == SOCK_STREAM ? "UNIX stream" : type == SOCK_DGRAM ? "UNIX datagram" : "UNIX seqpacket";
	return type == SOCK_STREAM ? (family == AF_INET6 ? "TCPv6" : "TCP") : (family == AF_INET6 ? "UDPv6" : "UDP");
}

static int ck__same_addr(const struct sockaddr_storage *a, socklen_t al, const struct sockaddr_storage *b,
			 socklen_t bl)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
	}
	return al == bl && !memcmp(a, b, al);
}

/* A listener bound to the wildcard address takes connections to any. */
static int ck__listener_takes(const struct ck__sk *l, const struct ck__sk *c)
{
	if (l->state != CK_SOCK_LISTENING || l->family != c->family || l->type != c->type)
		return 0;
	if (ck__same_addr(&l->local, l->llen, &c->peer, c->plen))
		return 1;
	if (l->family == AF_INET) {
		const struct sockaddr_in *x = (const void *)&l->local, *y = (const void *)&c->peer;
		return x->sin_addr.s_addr == htonl(INADDR_ANY) && x->sin_port == y->sin_port;
	}
	if (l->family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)&l->local, *y = (const void *)&c->peer;
		return !memcmp(&x->sin6_addr, &in6addr_any, 16) && x->sin6_port == y->sin6_port;
	}
	return 0;
}

static int ck__opt(int fd, int level, int name)
{
	int v = 0;
	socklen_t l = sizeof(v);
	return getsockopt(fd, level, name, &v, &l) == 0 ? v : 0;
}

static int ck__append(struct ck__sk *s, const void *p, size_t n)
{
	char *d = realloc(s->data, s->ndata + n + 1);

	if (!d)
		return -ENOMEM;
	memcpy(d + s->ndata, p, n);
	s->data = d;
	s->ndata += n;
	return 0;
}
/* Shut for reading: its own SHUT_RD, or a record peer's SHUT_WR. */
static int ck__shut_for_reading(const struct ck__sk *s)
{
	struct pollfd pf = {s->fd, POLLRDHUP, 0};

	return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP));
}


static int ck__read_one(struct ck__sk *s, int pidfd, struct ck_pd_fd *f, int32_t jpid)
{
	int v;

	memset(s, 0, sizeof(*s));
	s->f = f;
	s->jpid = jpid;
	s->partner = -1;
	s->fd = (int)syscall(SYS_pidfd_getfd, pidfd, f->fd, 0);
	if (s->fd < 0) {
		ck_err_set("process %d: cannot read socket (descriptor %d): %s", jpid, f->fd, strerror(errno));
		return -errno;
	}
	s->family = ck__opt(s->fd, SOL_SOCKET, SO_DOMAIN);
	s->type = ck__opt(s->fd, SOL_SOCKET, SO_TYPE);
	if ((s->family != AF_UNIX && s->family != AF_INET && s->family != AF_INET6) ||
	    (s->type != SOCK_STREAM && s->type != SOCK_DGRAM && s->type != SOCK_SEQPACKET) ||
	    (s->family != AF_UNIX && s->type == SOCK_SEQPACKET)) {
		ck_err_set("process %d: socket (descriptor %d, family %d, type %d) is not supported yet", jpid, f->fd,
			   s->family, s->type);
		return -ENOTSUP;
	}
	if (s->family != AF_UNIX && ck__opt(s->fd, SOL_SOCKET, SO_PROTOCOL) != (s->type == SOCK_STREAM ? IPPROTO_TCP
												      : IPPROTO_UDP)) {
		ck_err_set("process %d: socket (descriptor %d) of an unsupported protocol", jpid, f->fd);
		return -ENOTSUP;
	}
	s->llen = sizeof(s->local);
	if (getsockname(s->fd, (struct sockaddr *)&s->local, &s->llen) < 0)
		s->llen = 0;
	s->plen = sizeof(s->peer);
	if (getpeername(s->fd, (struct sockaddr *)&s->peer, &s->plen) < 0)
		s->plen = 0;
	if (s->llen > 128 || s->plen > 128) {
		ck_err_set("process %d: socket (descriptor %d): address too long", jpid, f->fd);
		return -ENOTSUP;
	}
	v = ck__opt(s->fd, SOL_SOCKET, SO_ACCEPTCONN);
	s->state = v ? CK_SOCK_LISTENING : s->plen ? CK_SOCK_EXTERNAL : CK_SOCK_UNCONNECTED;
	if (s->family == AF_UNIX && (s->state == CK_SOCK_EXTERNAL || s->type == SOCK_DGRAM)) {
		/* One question for both: the peer of one connected outside,
		 * and a datagram socket's shutdown, which is its own (nothing
		 * reaches its peer) and whose SHUT_WR shows only here. */
		uint64_t peer;
		int shut = -1;
		ck_sock_unix_diag(f->ino, &peer, NULL, 0, NULL, &shut, NULL);
		if (s->state == CK_SOCK_EXTERNAL)
			s->peer_ino = peer;
		if (s->type == SOCK_DGRAM) /* (no sock_diag for UNIX: what poll shows) */
			s->shut = shut >= 0 ? shut : ck__shut_for_reading(s) ? CK_SOCK_RCV_SHUT : 0;
	}
	if (s->family != AF_UNIX && s->type == SOCK_DGRAM) { /* UDP: the same, from inet_diag */
		static int said;
		int shut = -1, e = ck_sock_udp_shut(s->family, f->ino, &shut);
		/* (-ENOENT: an unbound socket, in no table: its SHUT_WR is not seen) */
		if (e < 0 && e != -ENOENT && !said) {
			fprintf(stderr, "ckrun: warning: cannot read UDP sockets' shutdown (inet_diag: %s): a SHUT_WR "
				"of one is not saved\n", strerror(-e));
			said = 1;
		}
		s->shut = shut >= 0 ? shut : ck__shut_for_reading(s) ? CK_SOCK_RCV_SHUT : 0;
	}
	/* before anything is taken: a refusal leaves the socket untouched */
	return ck_sockopt_save(s->fd, s->family, s->type, jpid, f);
}

/* Up to 253 files (SCM_MAX_FD) per message, and a SCM_CREDENTIALS. */
#define CK__CTL (CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(64))

/* The files that came with a message (ours now: duplicates of the job's
 * files in flight), at most 253, into fds; their count. */
static int ck__rights_of(struct msghdr *mh, int *fds)
{
	int n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k && n < 253; i++)
				memcpy(&fds[n++], CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof(int));
		}
	return n;
}

static void ck__close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* One recvmsg of fd into buf (flags: MSG_PEEK or not): its length, or -1
 * with errno. The files that came with it go to fds (*nfds; NULL: closed
 * at once); *odd is set when the message or its files were cut short. */
static ssize_t ck__recv_fds(int fd, void *buf, size_t cap, int flags, int *fds, int *nfds, int *odd)
{
	union {
		char b[CK__CTL];
		struct cmsghdr a;
	} u;
	int tmp[253], n0;
	struct iovec iov = {buf, cap};
	struct msghdr mh;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	if (nfds)
		*nfds = 0;
	n = recvmsg(fd, &mh, flags | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	n0 = ck__rights_of(&mh, fds ? fds : tmp);
	if (nfds)
		*nfds = n0;
	else
		ck__close_all(tmp, n0);
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		*odd = 1;
	return n;
}

static int ck__mark(struct ck__sk *s, uint64_t at, uint32_t len, const int *fds, int nfd)
{
	struct ck_sock_mark *m = realloc(s->marks, (s->nmarks + 1) * sizeof(*m));
	uint32_t *ix;

	if (!m)
		return -ENOMEM;
	s->marks = m;
	if (!(ix = realloc(s->idx, (s->nidx + (size_t)nfd + 1) * sizeof(*ix))))
		return -ENOMEM;
	s->idx = ix;
	m[s->nmarks] = (struct ck_sock_mark){at, len, (uint32_t)nfd, (uint32_t)s->nidx, 0};
	for (int k = 0; k < nfd; k++) {
		int r = ck_rights_add(&ck__R, fds[k], s->jpid, s->f->fd, &ix[s->nidx + (size_t)k]);
		if (r < 0)
			return r;
	}
	s->nidx += (size_t)nfd;
	s->nmarks++;
	return 0;
}

static int ck__stream_take_rights(struct ck__sk *s, struct ck__sk *peer);

/* Stream bytes queued toward s, without taking them. Files in flight
 * among them: their boundaries are only seen by taking the bytes, so the
 * queue is taken and put back through the peer (a peer of the job), or
 * the round is refused (a peer outside). */
static int ck__peek_stream_at0(struct ck__sk *s, struct ck__sk *peer);

/* A job's own peek offset (SO_PEEK_OFF) would start our peeks inside the
 * queue: off while we read, then as it was (the queue is as it was). */
static int ck__peek_stream(struct ck__sk *s, struct ck__sk *peer)
{
	int old = -1, off = -1, r;
	socklen_t ol = sizeof(old);
	int had = s->family == AF_UNIX && getsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) == 0 && old >= 0;

	if (had)
		setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	r = ck__peek_stream_at0(s, peer);
	if (had)
		setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	return r;
}

static int ck__peek_stream_at0(struct ck__sk *s, struct ck__sk *peer)
{
	int inq = 0, odd = 0, fds[253], nfd = 0;
	ssize_t n;

	if (ioctl(s->fd, SIOCINQ, &inq) < 0 || inq <= 0)
		return 0;
	free(s->data);
	s->ndata = 0;
	if (!(s->data = malloc((size_t)inq)))
		return -ENOMEM;
	n = ck__recv_fds(s->fd, s->data, (size_t)inq, MSG_PEEK, fds, &nfd, &odd);
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	ck__close_all(fds, nfd);
	if (nfd || odd || (s->family == AF_UNIX && n < inq)) {
		/* a peek stops after a message that carries files */
		struct pollfd pf = {s->fd, POLLRDHUP, 0};
		if (s->family == AF_UNIX && peer && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP))) {
			/* the peer shut its end for writing: nothing could be put back */
			ck_err_set("process %d: descriptors in flight on a UNIX stream socket (descriptor %d) whose "
				   "peer has shut down writing: not supported", s->jpid, s->f->fd);
			return -ENOTSUP;
		}
		if (s->family == AF_UNIX && peer)
			return ck__stream_take_rights(s, peer);
		ck_err_set("process %d: %s on a UNIX stream socket (descriptor %d) whose peer is outside the job: "
			   "not supported", s->jpid, nfd || odd ? "descriptors in flight" :
			   "messages of several senders (SO_PASSCRED) queued", s->f->fd);
		return -ENOTSUP;
	}
	s->ndata = (size_t)n;
	return 0;
}

/* A UNIX socket that receives its senders' credentials (SO_PASSCRED)
 * with messages queued toward it: its queue is saved with each sender
 * (sock_creds.c), where its peer is a socket of the job connected back.
 * Returns 1 when done so, 0 when nothing of this is queued, or -errno. */
static int ck__passcred_queue(struct ck__sk *s, struct ck__sk *peer, const struct ck_creds_map *map)
{
	int on = 0, q = 0;
	socklen_t l = sizeof(on);
	char c;

	if (s->family != AF_UNIX || getsockopt(s->fd, SOL_SOCKET, SO_PASSCRED, &on, &l) < 0 || !on)
		return 0;
	if (s->type == SOCK_STREAM) {
		if (ioctl(s->fd, SIOCINQ, &q) < 0 || q == 0)
			return 0;
	} else {
		/* a peek at the queue's head, the job's own peek offset off
		 * meanwhile (it would move, or skip what the job peeked) */
		int old = -1, off = -1;
		socklen_t ol = sizeof(old);
		ssize_t n;
		int had = getsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) == 0 && old >= 0;
		if (had)
			setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
		n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
		if (had)
			setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
		if (n < 0 || (n == 0 && s->type == SOCK_SEQPACKET))
			return 0; /* nothing, or a record socket's end of file */
	}
	if (s->type != SOCK_STREAM) {
		/* what is taken must go back: not through a shut side */
		if (ck__shut_for_reading(s)) {
			ck_err_set("process %d: messages are queued on a UNIX socket (descriptor %d) that receives its "
				   "senders' credentials (SO_PASSCRED) and is shut for reading: not supported",
				   s->jpid, s->f->fd);
			return -ENOTSUP;
		}
		if (peer && (peer->shut & CK_SOCK_SEND_SHUT)) {
			ck_err_set("process %d: messages are queued on a UNIX socket (descriptor %d) that receives its "
				   "senders' credentials (SO_PASSCRED) from a peer shut for writing: not supported",
				   s->jpid, s->f->fd);
			return -ENOTSUP;
		}
	}
	if (s->state != CK_SOCK_PAIRED || !peer || (s->type != SOCK_STREAM && !peer->plen)) {
		ck_err_set("process %d: messages are queued on a UNIX socket (descriptor %d) that receives its senders' "
			   "credentials (SO_PASSCRED) and is %s: not supported (try again)",
			   s->jpid, s->f->fd,
			   s->state == CK_SOCK_PAIRED ? "the peer of a datagram socket not connected back"
						  : "not connected to a socket of the job");
		return -ENOTSUP;
	}
	s->creds = 1;
	q = s->type == SOCK_STREAM ? ck_creds_peek_stream(s->fd, map, s->jpid, s->f->fd, &s->data, &s->ndata)
				   : ck_creds_take_dgrams(s->fd, peer->fd, map, s->jpid, s->f->fd, &s->data, &s->ndata);
	return q < 0 ? q : 1;
}

/* The whole queue toward s taken, every message that carries files found
 * (the first byte that comes with files starts it: read one byte at a
 * time up to there), then all of it written back through the peer, the
 * files with the bytes they came with: the job's queue as it was. */
static int ck__stream_take_rights(struct ck__sk *s, struct ck__sk *peer)
{
	struct held {
		size_t at, len;
		uint32_t first, n;
	} *hv = NULL;
	int *hfd = NULL, r = 0, io = 0, odd = 0;
	size_t nh = 0, nhfd = 0, at = 0, mi = 0;

	/* Everything is taken even when a file in flight refuses the round:
	 * what goes back through the peer lands behind what stayed. */
	s->ndata = 0;
	for (int guard = 0; guard < 1000000 && !io; guard++) {
		int inq = 0, fds[253], nfd = 0;
		ssize_t n, k;
		char one;
		if (ioctl(s->fd, SIOCINQ, &inq) < 0 || inq <= 0)
			break;
		if (inq > (64 << 20) && !s->ndata) {
			ck_err_set("process %d: descriptors in flight on a UNIX socket (descriptor %d) behind more than "
				   "64 MiB of unread bytes: not supported", s->jpid, s->f->fd);
			r = -ENOTSUP;
			break;
		}
		{
			char *d = realloc(s->data, s->ndata + (size_t)inq + 1);
			if (!d) {
				r = io = -ENOMEM;
				break;
			}
			s->data = d;
		}
		/* how far the next message with files ends (a peek stops there) */
		n = ck__recv_fds(s->fd, s->data + s->ndata, (size_t)inq, MSG_PEEK, fds, &nfd, &odd);
		if (n <= 0)
			break;
		ck__close_all(fds, nfd);
		if (!nfd) { /* plain bytes only: take them */
			k = ck__recv_fds(s->fd, s->data + s->ndata, (size_t)n, 0, NULL, NULL, &odd);
			if (k > 0)
				s->ndata += (size_t)k;
			if (k != n)
				io = -EIO;
			continue;
		}
		/* byte by byte up to the one the files come with */
		for (k = 0; k < n; k++) {
			if (ck__recv_fds(s->fd, &one, 1, 0, fds, &nfd, &odd) != 1) {
				io = -EIO;
				break;
			}
			s->data[s->ndata++] = one;
			if (nfd)
				break;
		}
		if (io || !nfd) {
			io = io ? io : -EIO;
			break;
		}
		{
			size_t start = s->ndata - 1, rest = (size_t)(n - k - 1);
			struct held *h2 = realloc(hv, (nh + 1) * sizeof(*h2));
			int *f2 = realloc(hfd, (nhfd + (size_t)nfd) * sizeof(*f2)), e;
			if (h2)
				hv = h2;
			if (f2)
				hfd = f2;
			if (!h2 || !f2) {
				ck__close_all(fds, nfd);
				io = -ENOMEM;
				break;
			}
			if (rest && ck__recv_fds(s->fd, s->data + s->ndata, rest, 0, NULL, NULL, &odd) != (ssize_t)rest)
				io = -EIO;
			else
				s->ndata += rest;
			hv[nh++] = (struct held){start, s->ndata - start, (uint32_t)nhfd, (uint32_t)nfd};
			memcpy(hfd + nhfd, fds, sizeof(int) * (size_t)nfd);
			nhfd += (size_t)nfd;
			if (r == 0 && (e = ck__mark(s, start, (uint32_t)(s->ndata - start), fds, nfd)) < 0)
				r = e;
		}
	}
	if (io && r == 0)
		r = io;
	if (odd && r == 0)
		r = -EIO;
	/* back, in order: a refused round leaves the queue as it was */
	while (at < s->ndata) {
		size_t len = mi < nh ? hv[mi].at - at : s->ndata - at;
		const int *f = NULL;
		uint32_t nf = 0;
		int e;
		if (mi < nh && hv[mi].at == at) {
			len = hv[mi].len;
			f = hfd + hv[mi].first;
			nf = hv[mi].n;
			mi++;
		}
		if ((e = ck_rights_send(peer->fd, s->data + at, len, f, nf, NULL, 0)) < 0) {
			ck_err_set("process %d: could not put %zu bytes back into its UNIX socket (descriptor %d): %s",
				   s->jpid, s->ndata - at, s->f->fd, strerror(-e));
			r = e;
			break;
		}
		at += len;
	}
	ck__close_all(hfd, (int)nhfd);
	free(hfd);
	free(hv);
	if (r < 0 && !strstr(ck_err_msg(), "process"))
		ck_err_set("process %d: cannot read the descriptors in flight on its UNIX socket (descriptor %d): %s",
			   s->jpid, s->f->fd, strerror(-r));
	return r;
}

/* Takes everything queued toward s, and (TCP) everything its peer still
 * holds to send, then writes it all back through the peer: the stream is
 * as it was, and we have a copy. */
static int ck__take_and_put_back(struct ck__sk *s, struct ck__sk *peer)
{
	uint64_t end = ck__ms() + 3000;
	char buf[65536];
	size_t put = 0;

	for (int quiet = 0; quiet < 2 && ck__ms() < end;) {
		ssize_t n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
		int outq = 0;
		if (n > 0) {
			if (ck__append(s, buf, (size_t)n) < 0)
				return -ENOMEM;
			quiet = 0;
			continue;
		}
		ioctl(peer->fd, SIOCOUTQ, &outq);
		if (outq == 0)
			quiet++;
		else
			usleep(1000);
	}
	while (put < s->ndata && ck__ms() < end + 3000) {
		ssize_t n = send(peer->fd, s->data + put, s->ndata - put, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			put += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			break;
		usleep(1000);
	}
	if (put < s->ndata) {
		ck_err_set("process %d: could not put %zu bytes back into its TCP connection (descriptor %d)", s->jpid,
			   s->ndata - put, s->f->fd);
		return -EIO;
	}
	return 0;
}

/* Datagrams (or seqpackets) queued toward s: taken, recorded as
 * u32 length + bytes, sent back through the peer in order, each with the
 * files it came with. */
/* Whether nothing is queued toward s, the job's own peek offset off for
 * the look (a peek at an offset skips an empty datagram peeked before). A
 * record socket's SIOCINQ counts every record's bytes; a datagram
 * socket's only the first's, so the peek looks. To a record socket shut
 * for reading the peek's 0 is its end of file (a queue of empty records
 * only reads as empty, and is not saved); to a datagram socket it is an
 * empty datagram. */
static int ck__queue_empty(const struct ck__sk *s)
{
	int inq = 0, old = -1, off = -1, had;
	socklen_t ol = sizeof(old);
	ssize_t n;
	char c;

	if (ioctl(s->fd, SIOCINQ, &inq) == 0 && inq > 0)
		return 0;
	had = getsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) == 0 && old >= 0;
	if (had)
		setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
	if (had)
		setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	return s->type == SOCK_DGRAM ? n < 0 : n <= 0;
}

static int ck__take_datagrams(struct ck__sk *s, struct ck__sk *peer)
{
	static char buf[(256 << 10) + 4];
	int odd = 0, r = 0, *hfd = NULL, old = -1, off = -1, shut = ck__shut_for_reading(s);
	uint32_t *hn = NULL; /* files per datagram */
	size_t at = 0, nrec = 0, nhfd = 0;
	socklen_t ol = sizeof(old);

	/* a job's own peek offset would move with what is taken: off meanwhile */
	if (getsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) == 0 && old >= 0)
		setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	/* A socket shut for reading: nothing taken could be sent back to it,
	 * and a read of a record socket's empty queue returns 0 at once
	 * instead of EAGAIN (the take loop never ended there). */
	if (shut && !ck__queue_empty(s)) {
		ck_err_set("process %d: messages are queued on a %s socket (descriptor %d) shut for reading: they "
			   "could not be put back: not supported (try again once the job has read them)",
			   s->jpid, ck__kind(s->family, s->type), s->f->fd);
		r = -ENOTSUP;
	}
	while (!shut) {
		int fds[253], nfd = 0;
		ssize_t n = ck__recv_fds(s->fd, buf + 4, sizeof(buf) - 4, 0, fds, &nfd, &odd);
		uint32_t len, *n2;
		int *f2;
		if (n < 0)
			break;
		len = (uint32_t)n;
		memcpy(buf, &len, 4);
		n2 = realloc(hn, (nrec + 1) * sizeof(*n2));
		f2 = realloc(hfd, (nhfd + (size_t)nfd + 1) * sizeof(*f2));
		if (n2)
			hn = n2;
		if (f2)
			hfd = f2;
		if (!n2 || !f2 || ck__append(s, buf, (size_t)n + 4) < 0) {
			/* keep what came: it goes back below */
			ck__close_all(fds, nfd);
			r = -ENOMEM;
			break;
		}
		memcpy(hfd + nhfd, fds, sizeof(int) * (size_t)nfd);
		nhfd += (size_t)nfd;
		hn[nrec] = (uint32_t)nfd;
		if (nfd && r == 0)
			r = ck__mark(s, nrec, len, fds, nfd);
		nrec++;
	}
	/* back, in order */
	for (size_t k = 0, fi = 0; at < s->ndata; k++) {
		uint32_t len;
		int e;
		memcpy(&len, s->data + at, 4);
		/* a peer not connected back (a datagram server s is connected
		 * to): sent to s's own address, as the peer had */
		if ((e = ck_rights_send(peer->fd, s->data + at + 4, len, hfd + fi, hn[k],
					peer->plen ? NULL : (struct sockaddr *)&s->local, s->llen)) < 0) {
			ck_err_set("process %d: could not put a datagram back (descriptor %d): %s", s->jpid, s->f->fd,
				   strerror(-e));
			r = e;
			break;
		}
		fi += hn[k];
		at += 4 + len;
	}
	if (old >= 0)
		setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	ck__close_all(hfd, (int)nhfd);
	free(hfd);
	free(hn);
	if (odd && r == 0) {
		ck_err_set("process %d: a datagram over 256 KiB, or more than 253 descriptors with one, on a UNIX "
			   "socket (descriptor %d): not supported", s->jpid, s->f->fd);
		r = -ENOTSUP;
	}
	return r;
}

/* The datagrams (or records) queued toward s, read without taking them:
 * there is no peer of the job to put them back through. SO_PEEK_OFF walks
 * the queue one datagram per peek; the socket's own setting is put back. */
static int ck__peek_datagrams(struct ck__sk *s)
{
	static char buf[(256 << 10) + 4];
	int old = -1, zero = 0, r = 0;
	socklen_t ol = sizeof(old);

	if (getsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) < 0 ||
	    setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0) {
		int q = 0;
		if (ioctl(s->fd, SIOCINQ, &q) == 0 && q == 0)
			return 0; /* nothing queued: nothing to peek */
		ck_err_set("process %d: datagrams queued on a connection to a peer outside the job (descriptor %d) "
			   "cannot be read without taking them here: not supported",
			   s->jpid, s->f->fd);
		return -ENOTSUP;
	}
	for (int k = 0; k < 1000000; k++) {
		int odd = 0, fds[253], nfd = 0;
		ssize_t n = ck__recv_fds(s->fd, buf + 4, sizeof(buf) - 4, MSG_PEEK, fds, &nfd, &odd);
		uint32_t len;

		if (n < 0)
			break;
		if (odd) {
			ck__close_all(fds, nfd);
			ck_err_set("process %d: a datagram over 256 KiB, or more than 253 descriptors with one, on a "
				   "UNIX socket (descriptor %d): not supported",
				   s->jpid, s->f->fd);
			r = -ENOTSUP;
			break;
		}
		if (n == 0 && s->type == SOCK_SEQPACKET && !nfd)
			break; /* end of file, not a record */
		len = (uint32_t)n;
		memcpy(buf, &len, 4);
		r = nfd ? ck__mark(s, (uint64_t)k, len, fds, nfd) : 0;
		ck__close_all(fds, nfd);
		if (r < 0)
			break;
		if (ck__append(s, buf, (size_t)n + 4) < 0) {
			r = -ENOMEM;
			break;
		}
	}
	setsockopt(s->fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	return r;
}

/* A TCP socket's state (TCP_ESTABLISHED...), or -1. */
static int ck__tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 ? ti.tcpi_state : -1;
}

/* It sent its FIN (shutdown(SHUT_WR)): FIN_WAIT1, FIN_WAIT2, TIME_WAIT,
 * LAST_ACK, CLOSING (the kernel's numbers, include/net/tcp_states.h;
 * linux/tcp.h, needed for tcp_info, does not name them). */
static int ck__tcp_sent_fin(int st)
{
	return st == 4 || st == 5 || st == 6 || st == 9 || st == 11;
}

static uint64_t ck__shutdown_opts(const struct ck__sk *s)
{
	struct pollfd pf = {s->fd, POLLRDHUP, 0};
	uint64_t o = 0;

	if (s->type == SOCK_DGRAM) {
		if (s->shut & CK_SOCK_RCV_SHUT)
			o |= CK_SOCKOPT_SHUT_RD;
		if (s->shut & CK_SOCK_SEND_SHUT)
			o |= CK_SOCKOPT_SHUT_WR;
		return o;
	}
	if (s->state != CK_SOCK_PAIRED)
		return 0;
	if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLRDHUP))
		o |= CK_SOCKOPT_SHUT_RD;
	if (s->family != AF_UNIX && ck__tcp_sent_fin(ck__tcp_state(s->fd)))
		o |= CK_SOCKOPT_SHUT_WR;
	return o;
}

/* A UNIX connection in the job, or a UNIX listener: the process of the
 * job SO_PEERCRED names (the kernel's pid here, translated; a listener's:
 * the one that called listen()), for the restore to have it make the
 * connection again, or listen again; or one that has exited. */
static void ck__peer_pid(struct ck__sk *s, const pid_t *pids, const int32_t *jpids, size_t n)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (s->family != AF_UNIX || (s->state != CK_SOCK_PAIRED && s->state != CK_SOCK_LISTENING) ||
	    getsockopt(s->fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0 || uc.pid <= 0)
		return;
	uint32_t ids[2] = {uc.uid, uc.gid};
	size_t i = 0;

	while (i < n && pids[i] != uc.pid)
		i++;
	/* (ckrun's number of an exited maker may have gone to another
	 * process since: libckpt's reading in the job tells them apart) */
	if (i < n && (s->f->peer <= 1 || s->f->peer == jpids[i])) {
		s->f->peer = jpids[i];
	} else if (s->f->peer > 1) {
		/* a process that has exited: its number in the job, as the
		 * holder's libckpt read it; a restore has one made under it
		 * (launcher/ckrun/proctree.c, ck_tree_makers) */
		s->f->xflags |= CK_PD_FD_PEER_GONE;
	} else {
		return;
	}
	s->f->u64[2] |= CK_SOCKOPT_PEERPID | CK_SOCKOPT_PEERIDS;
	memcpy(s->f->path + CK_SOCK_IDS_OFF, ids, sizeof(ids));
}

/* An end naming an exited maker that no process will make again (a
 * restore makes a pair with the processes only where both ends name one,
 * a datagram pair only where they name the same: sock_restore.c
 * ck__by_job): ckrun makes it as before, and the round adds no maker for
 * it (nor refuses one whose number a group holds). Clearing one end can
 * leave its partner so: again until nothing changes. */
static void ck__gone_unused(struct ck__sk *v, size_t nv)
{
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < nv; i++) {
			struct ck_pd_fd *a = v[i].f, *b = v[i].partner >= 0 ? v[v[i].partner].f : NULL;
			if (!(a->xflags & CK_PD_FD_PEER_GONE) || v[i].state != CK_SOCK_PAIRED)
				continue;
			if (b && (b->u64[2] & CK_SOCKOPT_PEERPID) && (v[i].type != SOCK_DGRAM || a->peer == b->peer))
				continue;
			a->xflags &= ~(uint32_t)CK_PD_FD_PEER_GONE;
			a->u64[2] &= ~(uint64_t)(CK_SOCKOPT_PEERPID | CK_SOCKOPT_PEERIDS);
			a->peer = -1;
			changed = 1;
		}
	}
}

/* A listener's backlog as listen() was given it (the kernel's maximum;
 * 511 where sock_diag does not say, as images before it held). */
static uint32_t ck__backlog(const struct ck__sk *s)
{
	uint32_t b = 511;
	uint64_t peer;

	if (s->state != CK_SOCK_LISTENING)
		return b;
	if (s->family == AF_UNIX)
		ck_sock_unix_diag(s->f->ino, &peer, NULL, 0, NULL, NULL, &b);
	else if (s->type == SOCK_STREAM)
		ck_sock_tcp_backlog(s->family, s->f->ino, &b);
	return b > 0xffff ? 0xffff : b;
}

static void ck__encode(struct ck__sk *s, struct ck_pd_fd *f, uint64_t partner_ino)
{
	char la[96], pa[96];
	int linger_on = 0, linger_s = 0;
	struct linger lg;
	socklen_t l = sizeof(lg);
	uint64_t opts = 0;

	if (getsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, &l) == 0 && lg.l_onoff) {
		linger_on = 1;
		linger_s = lg.l_linger;
	}
	if (s->family != AF_UNIX && s->type == SOCK_STREAM && ck__opt(s->fd, IPPROTO_TCP, TCP_NODELAY))
		opts |= CK_SOCKOPT_NODELAY;
	if (ck__opt(s->fd, SOL_SOCKET, SO_KEEPALIVE))
		opts |= CK_SOCKOPT_KEEPALIVE;
	if (ck__opt(s->fd, SOL_SOCKET, SO_REUSEADDR))
		opts |= CK_SOCKOPT_REUSEADDR;
	if (ck__opt(s->fd, SOL_SOCKET, SO_REUSEPORT))
		opts |= CK_SOCKOPT_REUSEPORT;
	if (s->family == AF_INET6 && ck__opt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY))
		opts |= CK_SOCKOPT_V6ONLY;
	if (linger_on)
		opts |= CK_SOCKOPT_LINGER;
	if (s->peer_closed)
		opts |= CK_SOCKOPT_PEER_CLOSED;
	if (s->nmarks)
		opts |= CK_SOCKOPT_RIGHTS;
	if (s->from)
		opts |= CK_SOCKOPT_FROM;
	if (s->creds)
		opts |= CK_SOCKOPT_CREDS;
	opts |= ck__shutdown_opts(s) | CK_SOCKOPT_EXT | CK_SOCKOPT_EXT2;
	f->u64[0] = (uint64_t)s->family | (uint64_t)s->type << 16 | (uint64_t)s->state << 32;
	/* (the top 16 bits: sock_opts.c's) */
	f->u64[1] = (uint64_t)s->llen | (uint64_t)s->plen << 16 | (uint64_t)ck__backlog(s) << 32 |
		    (f->u64[1] & 0xffff000000000000ull);
	f->u64[2] = opts | (uint64_t)(uint32_t)linger_s << 32;
	f->u64[3] = (uint64_t)(uint32_t)ck__opt(s->fd, SOL_SOCKET, SO_RCVBUF) |
		    (uint64_t)(uint32_t)ck__opt(s->fd, SOL_SOCKET, SO_SNDBUF) << 32;
	f->size = partner_ino;
	memset(f->path, 0, sizeof(f->path));
	ck__addr_str(&s->local, s->llen, la, sizeof(la));
	ck__addr_str(&s->peer, s->plen, pa, sizeof(pa));
	/* for people (ckpt inspect): a long pair of addresses may be cut */
	if (snprintf(f->path, CK_SOCK_ADDR_OFF, "%s %s%s%s (%s)", ck__kind(s->family, s->type), la, s->plen ? " -> " : "",
		 s->plen ? pa : "",
		 s->state == CK_SOCK_LISTENING   ? "listening"
		 : s->state == CK_SOCK_PAIRED    ? "connected in the job"
		 : s->state == CK_SOCK_PENDING   ? "waiting to be accepted"
		 : s->state == CK_SOCK_EXTERNAL && s->type == SOCK_DGRAM && s->family != AF_UNIX
			 ? "connected to an address: connected again at restart"
		 : s->state == CK_SOCK_EXTERNAL ? "peer outside the job: reset at restart"
						: "unconnected") >= CK_SOCK_ADDR_OFF)
		f->path[CK_SOCK_ADDR_OFF - 1] = 0;
	memcpy(f->path + CK_SOCK_ADDR_OFF, &s->local, s->llen);
	memcpy(f->path + CK_SOCK_PEER_OFF, &s->peer, s->plen);
}

/* Datagram sockets of the job, by their own address: a sender to put a
 * datagram back as (sock_dgq.c). */
struct ck__senders {
	struct ck__sk *v;
	size_t n;
};

static int ck__sender(void *arg, const struct sockaddr *a, socklen_t al)
{
	struct ck__senders *sd = arg;

	if (al <= sizeof(sa_family_t))
		return -1;
	/* one bound to that very address first, else one bound to every
	 * address (a shut one of those must not refuse for another's) */
	for (int any = 0; any < 2; any++)
		for (size_t i = 0; i < sd->n; i++) {
			struct ck__sk *o = &sd->v[i];
			int hit = 0;
			if (o->type != SOCK_DGRAM || o->family != a->sa_family || o->llen <= sizeof(sa_family_t))
				continue;
			if (a->sa_family == AF_INET) {
				const struct sockaddr_in *x = (const void *)&o->local, *y = (const void *)a;
				hit = x->sin_port == y->sin_port &&
				      (any ? x->sin_addr.s_addr == htonl(INADDR_ANY) : x->sin_addr.s_addr == y->sin_addr.s_addr);
			} else if (a->sa_family == AF_INET6) {
				const struct sockaddr_in6 *x = (const void *)&o->local, *y = (const void *)a;
				hit = x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, any ? &in6addr_any : &y->sin6_addr, 16);
			} else {
				hit = !any && o->llen == al && !memcmp(&o->local, a, al);
			}
			if (hit)
				return o->shut & CK_SOCK_SEND_SHUT ? -EPIPE : o->fd;
		}
	return -1;
}

/* The queue toward s with the files in flight in it (sock.h). */
static int ck__add_rights(struct ck__sk *s, struct ck_writer *w)
{
	uint32_t h[4] = {CK_SOCK_RIGHTS_MAGIC, (uint32_t)ck__R.nd, (uint32_t)s->nmarks, (uint32_t)s->nidx};
	size_t n = sizeof(h) + ck__R.nd * sizeof(*ck__R.d) + s->nmarks * sizeof(*s->marks) +
		   s->nidx * sizeof(*s->idx) + s->ndata;
	char *b = malloc(n), *p = b;
	int r;

	if (!b)
		return -ENOMEM;
	memcpy(p, h, sizeof(h));
	p += sizeof(h);
	memcpy(p, ck__R.d, ck__R.nd * sizeof(*ck__R.d));
	p += ck__R.nd * sizeof(*ck__R.d);
	memcpy(p, s->marks, s->nmarks * sizeof(*s->marks));
	p += s->nmarks * sizeof(*s->marks);
	memcpy(p, s->idx, s->nidx * sizeof(*s->idx));
	p += s->nidx * sizeof(*s->idx);
	if (s->ndata)
		memcpy(p, s->data, s->ndata);
	r = ck_writer_add(w, n, ck_mem_src, b, &s->f->data_chunk, &s->f->data_nchunks);
	free(b);
	return r;
}

/* Bytes taken and put back arrive at s again, and with O_ASYNC would raise
 * the job's signal once more: s has no owner meanwhile (no owner, no
 * signal). own->pid stays 0 where nothing was taken away; an owner that
 * has exited (a kernel before 5.16 still names it) cannot be given back,
 * and needs not: ESRCH is no failure. Taking the bytes also frees room at
 * their sender, which raises its POLL_OUT signal where the job had found
 * the peer full: that sender keeps its owner, as a signal too many is
 * better than the job's next one lost (the kernel clears the "was full"
 * mark as it signals, and nothing can set it again but the job). */
static void ck__owner_hold(const struct ck__sk *s, struct f_owner_ex *own)
{
	struct f_owner_ex none = {F_OWNER_PID, 0};
	int fl = fcntl(s->fd, F_GETFL);

	own->pid = 0;
	if (fl < 0 || !(fl & O_ASYNC) || fcntl(s->fd, F_GETOWN_EX, own) < 0 || !own->pid)
		return;
	if (fcntl(s->fd, F_SETOWN_EX, &none) < 0)
		own->pid = 0;
}

static int ck__owner_give_back(const struct ck__sk *s, const struct f_owner_ex *own)
{
	if (!own->pid || fcntl(s->fd, F_SETOWN_EX, own) == 0 || errno == ESRCH)
		return 0;
	ck_err_set("process %d: cannot give its socket (descriptor %d) its owner (F_SETOWN_EX) back: %s", s->jpid,
		   s->f->fd, strerror(errno));
	return -errno;
}

int ck_sock_checkpoint(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
		       struct ck_manifest *m)
{
	struct ck__sk *v = NULL;
	int32_t *jpids = calloc(n ? n : 1, sizeof(*jpids));
	size_t nv = 0;
	int r = jpids ? 0 : -ENOMEM;

	memset(&ck__R, 0, sizeof(ck__R));
	ck__R.pds = pds;
	ck__R.pids = pids;
	ck__R.n = n;
	ck__R.w = w;
	/* read: one entry per socket (the first descriptor of it) */
	for (size_t i = 0; i < n && r == 0; i++) {
		int pidfd = -1;
		for (uint32_t k = 0; k < pds[i]->nfds && r == 0; k++) {
			struct ck_pd_fd *f = &pds[i]->fds[k];
			int seen = 0;
			if (f->kind != CK_FD_SOCKET)
				continue;
			for (size_t j = 0; j < nv && !seen; j++)
				seen = v[j].f->ino == f->ino && v[j].f->dev == f->dev;
			if (seen)
				continue;
			if (pidfd < 0 && (pidfd = (int)syscall(SYS_pidfd_open, pids[i], 0)) < 0) {
				ck_err_set("process %d: pidfd_open: %s", pds[i]->pid, strerror(errno));
				r = -errno;
				break;
			}
			struct ck__sk *nvp = realloc(v, (nv + 1) * sizeof(*v));
			if (!nvp) {
				r = -ENOMEM;
				break;
			}
			v = nvp;
			r = ck__read_one(&v[nv], pidfd, f, pds[i]->pid);
			nv++;
		}
		if (pidfd >= 0)
			close(pidfd);
	}
	/* pair */
	for (size_t i = 0; i < nv && r == 0; i++) {
		struct ck__sk *s = &v[i];
		if (s->state != CK_SOCK_EXTERNAL)
			continue;
		for (size_t j = 0; j < nv && s->partner < 0; j++) {
			struct ck__sk *o = &v[j];
			if (j == i || o->family != s->family || o->type != s->type)
				continue;
			if (s->family == AF_UNIX ? (s->peer_ino && o->f->ino == s->peer_ino)
						 : (o->plen && ck__same_addr(&o->local, o->llen, &s->peer, s->plen) &&
						    ck__same_addr(&o->peer, o->plen, &s->local, s->llen)))
				s->partner = (long)j;
		}
		if (s->partner >= 0) {
			s->state = CK_SOCK_PAIRED;
			continue;
		}
		/* A peer that shut its sending side had been accepted (a queued
		 * connection sends nothing): the server took it and closed it,
		 * and what it sent is still to read; not one to connect again. */
		if (s->type != SOCK_DGRAM) {
			struct pollfd pf = {s->fd, POLLRDHUP, 0};
			if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP)))
				continue;
		}
		for (size_t j = 0; j < nv; j++)
			if (ck__listener_takes(&v[j], s) ||
			    (s->family == AF_UNIX && v[j].state == CK_SOCK_LISTENING &&
			     ck__same_addr(&v[j].local, v[j].llen, &s->peer, s->plen) && v[j].llen > sizeof(sa_family_t)))
				s->state = CK_SOCK_PENDING;
	}
	/* drain */
	for (size_t i = 0; i < n && r == 0; i++)
		jpids[i] = pds[i]->pid;
	for (size_t i = 0; i < nv && r == 0; i++) {
		struct ck__sk *s = &v[i], *p = s->partner >= 0 ? &v[s->partner] : NULL;
		struct ck_creds_map map = {pids, jpids, n};
		struct f_owner_ex own;
		int q = 0;
		ck__owner_hold(s, &own);
		if ((r = ck__passcred_queue(s, p, &map)) != 0) {
			if ((q = ck__owner_give_back(s, &own)) < 0 && r >= 0)
				r = q;
			r = r < 0 ? r : 0;
			continue;
		}
		switch (s->state) {
		case CK_SOCK_PAIRED:
			if (s->type == SOCK_DGRAM && (p->shut & CK_SOCK_SEND_SHUT)) {
				/* Its peer shut its own sending side, and only the peer
				 * may send to it: what is taken could not be put back
				 * (EPIPE; the job's datagrams were lost). A peek walk
				 * would miss an empty datagram peeked before. */
				if (!ck__queue_empty(s)) {
					ck_err_set("process %d: datagrams are queued on a %s socket (descriptor %d) from "
						   "its peer, which has shut itself for writing: they could not be put "
						   "back: not supported (try again once the job has read them)",
						   s->jpid, ck__kind(s->family, s->type), s->f->fd);
					r = -ENOTSUP;
				}
			} else if (s->type != SOCK_STREAM) {
				r = ck__take_datagrams(s, p);
			} else if (s->family != AF_UNIX && ck__tcp_sent_fin(ck__tcp_state(p->fd))) {
				/* Its peer shut its sending side: nothing can be put
				 * back through it. What it sent is in s's queue (its
				 * FIN after it) once acknowledged: peeked. */
				if (ioctl(p->fd, SIOCOUTQ, &q) == 0 && q > 1) {
					ck_err_set("process %d: socket (descriptor %d) has %d bytes not yet acknowledged on a "
						   "connection shut for writing: not supported (try again)",
						   p->jpid, p->f->fd, q - 1);
					r = -ENOTSUP;
				} else {
					r = ck__peek_stream(s, NULL);
				}
			} else if (s->family != AF_UNIX && ioctl(p->fd, SIOCOUTQ, &q) == 0 && q > 0) {
				r = ck__take_and_put_back(s, p);
			} else {
				r = ck__peek_stream(s, s->family == AF_UNIX ? p : NULL);
			}
			break;
		case CK_SOCK_PENDING:
			if (s->family == AF_UNIX) {
				ioctl(s->fd, SIOCOUTQ, &q);
			} else {
				struct tcp_info ti;
				socklen_t l = sizeof(ti);
				memset(&ti, 0, sizeof(ti));
				if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0)
					q = ti.tcpi_bytes_acked > 1 ? (int)(ti.tcpi_bytes_acked - 1) : 0; /* the SYN counts one */
			}
			if (q > 0) {
				ck_err_set("process %d: socket (descriptor %d) sent %d bytes on a connection the job has not "
					   "accepted yet: not supported (try again)", s->jpid, s->f->fd, q);
				r = -ENOTSUP;
			}
			break;
		case CK_SOCK_EXTERNAL: {
			/* What arrived before the cut is the job's to read, then the
			 * end the connection had: EOF where the peer had closed. */
			struct pollfd pf = {s->fd, POLLRDHUP, 0};
			if (s->type != SOCK_DGRAM && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP)))
				s->peer_closed = 1;
			r = s->type == SOCK_STREAM ? ck__peek_stream(s, NULL) : ck__peek_datagrams(s);
			break;
		}
		case CK_SOCK_UNCONNECTED:
			if (s->type == SOCK_DGRAM) {
				/* with their senders (also an empty datagram, which SIOCINQ does not show) */
				struct ck__senders sd = {v, nv};
				if ((s->shut & CK_SOCK_RCV_SHUT) && !ck__queue_empty(s)) {
					ck_err_set("process %d: datagrams are queued on a %s socket (descriptor %d) shut "
						   "for reading: they could not be put back: not supported (try again once "
						   "the job has read them)",
						   s->jpid, ck__kind(s->family, s->type), s->f->fd);
					r = -ENOTSUP;
				} else if ((r = ck_dgq_take(s->fd, s->jpid, s->f->fd, ck__sender, &sd, &s->data, &s->ndata)) == 0 &&
				    s->ndata)
					s->from = 1;
			} else if (ioctl(s->fd, SIOCINQ, &q) == 0 && q > 0) {
				ck_err_set("process %d: bytes queued on an unconnected socket (descriptor %d): not "
					   "supported", s->jpid, s->f->fd);
				r = -ENOTSUP;
			}
			break;
		default:
			break;
		}
		if ((q = ck__owner_give_back(s, &own)) < 0 && r == 0)
			r = q;
	}
	/* record */
	for (size_t i = 0; i < nv && r == 0; i++) {
		ck__encode(&v[i], v[i].f, v[i].partner >= 0 ? v[v[i].partner].f->ino : 0);
		ck__peer_pid(&v[i], pids, jpids, n);
	}
	ck__gone_unused(v, nv);
	for (size_t i = 0; i < nv && r == 0; i++) {
		struct ck__sk *s = &v[i];
		if (s->nmarks)
			r = ck__add_rights(s, w);
		else if (s->ndata)
			r = ck_writer_add(w, s->ndata, ck_mem_src, s->data, &s->f->data_chunk, &s->f->data_nchunks);
		/* (a UDP socket is connected again: nothing is lost) */
		if (r == 0 && s->state == CK_SOCK_EXTERNAL && m && !(s->type == SOCK_DGRAM && s->family != AF_UNIX)) {
			struct ck_skip *k = realloc(m->skips, (m->nskips + 1) * sizeof(*k));
			char what[320];
			if (!k) {
				r = -ENOMEM;
				break;
			}
			m->skips = k;
			snprintf(what, sizeof(what), "descriptor %d: %.250s", s->f->fd, s->f->path);
			k[m->nskips].pid = s->jpid;
			k[m->nskips].what = strdup(what);
			k[m->nskips].why = strdup("connection to a peer outside the job: reset at restart");
			m->nskips++;
		}
	}
	/* other descriptors of the same sockets carry the same record, no data */
	for (size_t i = 0; i < n && r == 0; i++)
		for (uint32_t k = 0; k < pds[i]->nfds; k++) {
			struct ck_pd_fd *f = &pds[i]->fds[k];
			if (f->kind != CK_FD_SOCKET)
				continue;
			for (size_t j = 0; j < nv; j++)
				if (v[j].f != f && v[j].f->ino == f->ino && v[j].f->dev == f->dev) {
					memcpy(f->u64, v[j].f->u64, sizeof(f->u64));
					f->size = v[j].f->size;
					f->peer = v[j].f->peer;
					f->xflags |= v[j].f->xflags & CK_PD_FD_PEER_GONE;
					/* sock_opts.c's fields */
					f->offset = v[j].f->offset;
					f->mtime_ns = v[j].f->mtime_ns;
					f->pipe_len = v[j].f->pipe_len;
					f->pipe_cap = v[j].f->pipe_cap;
					memcpy(f->path, v[j].f->path, sizeof(f->path));
				}
		}
	for (size_t i = 0; i < nv; i++) {
		if (v[i].fd >= 0)
			close(v[i].fd);
		free(v[i].data);
		free(v[i].marks);
		free(v[i].idx);
	}
	free(v);
	free(jpids);
	ck_rights_close(&ck__R);
	return r;
}
