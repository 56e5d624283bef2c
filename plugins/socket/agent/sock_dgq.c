/* Datagrams queued on an unconnected socket (a UNIX datagram socket bound
 * to a name, a UDP socket): each came from some sender whose address the
 * receiver learns with recvfrom and may answer to.
 *
 * Round: the queue is taken and put back, in order, each datagram sent
 * again from its sender's address: the job's own socket bound to it (read
 * through ckrun's duplicate), an unbound socket for an unnamed sender, or
 * a socket bound to the address for the send (an abstract UNIX name, an
 * IP address and port) where the host allows it. A peek walk first
 * (SO_PEEK_OFF) checks that every sender can be sent as, before anything
 * is taken: a sender ckrun cannot be (a path-named socket outside the job,
 * a port still held outside) refuses the round with the queue untouched.
 * Why not only peek: a peek walk does not see an empty datagram that was
 * peeked before (the kernel skips an already peeked empty datagram at a
 * peek offset), so a second round would lose it.
 * Saved in the socket's data with CK_SOCKOPT_FROM: per datagram u32
 * length, u32 address length, the address, the bytes.
 * Restore: sent again the same way to the re-made socket.
 * Descriptors in flight on such a socket refuse the round. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "plugins/socket/agent/sock.h"

static int ck__put(char **d, size_t *n, const void *p, size_t k)
{
	char *x = realloc(*d, *n + k + 1);

	if (!x)
		return -ENOMEM;
	memcpy(x + *n, p, k);
	*d = x;
	*n += k;
	return 0;
}

int ck_dgq_peek(int fd, int32_t jpid, int sockfd, char **data, size_t *ndata)
{
	static char buf[(256 << 10)];
	int old = -1, zero = 0, r = 0;
	socklen_t ol = sizeof(old);

	if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0) {
		ck_err_set("process %d: datagrams queued on an unconnected socket (descriptor %d) cannot be read "
			   "without taking them here: not supported", jpid, sockfd);
		return -ENOTSUP;
	}
	for (int k = 0; k < 1000000 && r == 0; k++) {
		union {
			char b[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(64)];
			struct cmsghdr a;
		} u;
		struct sockaddr_storage from;
		struct iovec iov = {buf, sizeof(buf)};
		struct msghdr mh;
		uint32_t len, alen;
		ssize_t n;
		int rights = 0;

		memset(&mh, 0, sizeof(mh));
		memset(&from, 0, sizeof(from));
		mh.msg_name = &from;
		mh.msg_namelen = sizeof(from);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		n = recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0)
			break;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int m = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				for (int i = 0; i < m; i++) {
					int x;
					memcpy(&x, CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof(int));
					close(x);
				}
				rights = 1;
			}
		if (rights || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || mh.msg_namelen > 128) {
			ck_err_set("process %d: %s on an unconnected socket (descriptor %d): not supported", jpid,
				   rights ? "descriptors in flight" : "a datagram over 256 KiB", sockfd);
			r = -ENOTSUP;
			break;
		}
		len = (uint32_t)n;
		alen = mh.msg_namelen;
		if ((r = ck__put(data, ndata, &len, 4)) < 0 || (r = ck__put(data, ndata, &alen, 4)) < 0 ||
		    (r = ck__put(data, ndata, &from, alen)) < 0 || (r = ck__put(data, ndata, buf, len)) < 0)
			break;
	}
	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	return r;
}

/* A socket to send from with the sender's address, for the send only:
 * bound to it, or unbound for an unnamed sender; exact == 0: unbound when
 * the address cannot be had. -1 if none. */
static int ck__stand_in(int family, const struct sockaddr *a, socklen_t al, int exact)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || al <= sizeof(sa_family_t))
		return fd;
	/* A UNIX path would leave a file behind: only abstract names. */
	if (family == AF_UNIX && ((const struct sockaddr_un *)a)->sun_path[0]) {
		if (exact) {
			close(fd);
			return -1;
		}
		return fd;
	}
	if (bind(fd, a, al) < 0) {
		close(fd);
		fd = exact ? -1 : socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	}
	return fd;
}

/* The address the socket `to` receives at (bound to every address:
 * loopback). */
static int ck__dest(int to, struct sockaddr_storage *dst, socklen_t *dl)
{
	*dl = sizeof(*dst);
	if (getsockname(to, (struct sockaddr *)dst, dl) < 0)
		return -errno;
	if (dst->ss_family == AF_INET && ((struct sockaddr_in *)dst)->sin_addr.s_addr == htonl(INADDR_ANY))
		((struct sockaddr_in *)dst)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (dst->ss_family == AF_INET6 && !memcmp(&((struct sockaddr_in6 *)dst)->sin6_addr, &in6addr_any, 16))
		((struct sockaddr_in6 *)dst)->sin6_addr = in6addr_loopback;
	return 0;
}

static void ck__addr_text(const struct sockaddr_storage *a, socklen_t al, char *out, size_t n)
{
	char h[64] = "?";

	if (a->ss_family == AF_UNIX) {
		const struct sockaddr_un *u = (const void *)a;
		size_t k = al > offsetof(struct sockaddr_un, sun_path) ? al - offsetof(struct sockaddr_un, sun_path) : 0;
		snprintf(out, n, "%s%.*s", k && !u->sun_path[0] ? "@" : "", k ? (int)k - 1 : 0,
			 k && !u->sun_path[0] ? u->sun_path + 1 : u->sun_path);
	} else if (a->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, h, sizeof(h));
		snprintf(out, n, "%s:%u", h, ntohs(((const struct sockaddr_in *)a)->sin_port));
	} else {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, h, sizeof(h));
		snprintf(out, n, "[%s]:%u", h, ntohs(((const struct sockaddr_in6 *)a)->sin6_port));
	}
}

int ck_dgq_take(int fd, int32_t jpid, int sockfd, int (*sender)(void *arg, const struct sockaddr *a, socklen_t al),
		void *arg, char **data, size_t *ndata)
{
	static char buf[(256 << 10)];
	struct sockaddr_storage dst;
	socklen_t dl;
	char *peek = NULL;
	size_t npeek = 0, at = 0;
	int r, old = -1, off = -1;
	socklen_t ol = sizeof(old);

	/* every sender can be sent as, before anything is taken (an unnamed
	 * sender has an address of no length) */
	if ((r = ck__dest(fd, &dst, &dl)) < 0 || (r = ck_dgq_peek(fd, jpid, sockfd, &peek, &npeek)) < 0)
		goto out;
	while (at + 8 <= npeek && r == 0) {
		uint32_t len, alen;
		struct sockaddr_storage from;
		int via;
		memcpy(&len, peek + at, 4);
		memcpy(&alen, peek + at + 4, 4);
		memset(&from, 0, sizeof(from));
		memcpy(&from, peek + at + 8, alen);
		if ((via = sender(arg, (struct sockaddr *)&from, alen)) == -EPIPE) {
			char t[128];
			ck__addr_text(&from, alen, t, sizeof(t));
			ck_err_set("process %d: datagrams are queued on an unconnected socket (descriptor %d) from a "
				   "socket of the job shut for writing (%s): they could not be put back: not supported "
				   "(try again once the job has read them)",
				   jpid, sockfd, t);
			r = -ENOTSUP;
			break;
		}
		if (via < 0) {
			if ((via = ck__stand_in(dst.ss_family, (struct sockaddr *)&from, alen, 1)) < 0) {
				char t[128];
				ck__addr_text(&from, alen, t, sizeof(t));
				ck_err_set("process %d: datagrams queued on an unconnected socket (descriptor %d) from a "
					   "sender outside the job (%s) that a restore cannot send as: not supported",
					   jpid, sockfd, t);
				r = -ENOTSUP;
				break;
			}
			close(via);
		}
		at += 8 + alen + len;
	}
	if (r < 0 || !npeek)
		goto out;
	/* a job's own peek offset would move with what is taken: off meanwhile */
	if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) == 0 && old >= 0)
		setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	/* taken, with what a peek walk does not see */
	for (;;) {
		struct sockaddr_storage from;
		struct iovec iov = {buf, sizeof(buf)};
		struct msghdr mh;
		uint32_t len, alen;
		ssize_t n;

		memset(&mh, 0, sizeof(mh));
		mh.msg_name = &from;
		mh.msg_namelen = sizeof(from);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n < 0)
			break;
		len = (uint32_t)n;
		alen = mh.msg_namelen;
		if (ck__put(data, ndata, &len, 4) < 0 || ck__put(data, ndata, &alen, 4) < 0 ||
		    ck__put(data, ndata, &from, alen) < 0 || ck__put(data, ndata, buf, len) < 0) {
			r = -ENOMEM; /* what was taken still goes back */
			break;
		}
	}
	{
		int e = ck_dgq_deliver(*data, *ndata, fd, sender, arg);
		if (e < 0) {
			ck_err_set("process %d: could not put the datagrams back on its unconnected socket (descriptor %d): "
				   "%s", jpid, sockfd, strerror(-e));
			r = e;
		}
	}
	if (old >= 0)
		setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
out:
	free(peek);
	return r;
}

int ck_dgq_deliver(const char *buf, size_t n, int to, int (*sender)(void *arg, const struct sockaddr *a, socklen_t al),
		   void *arg)
{
	struct sockaddr_storage dst;
	socklen_t dl;
	size_t at = 0;
	int r;

	if ((r = ck__dest(to, &dst, &dl)) < 0)
		return r;
	while (at + 8 <= n) {
		uint32_t len, alen;
		struct sockaddr_storage from;
		int via, own;
		ssize_t k;

		memcpy(&len, buf + at, 4);
		memcpy(&alen, buf + at + 4, 4);
		if (alen > sizeof(from) || at + 8 + alen + len > n)
			return -EBADMSG;
		memset(&from, 0, sizeof(from));
		memcpy(&from, buf + at + 8, alen);
		via = sender(arg, (struct sockaddr *)&from, alen);
		own = via < 0;
		if (own && (via = ck__stand_in(dst.ss_family, (struct sockaddr *)&from, alen, 0)) < 0)
			return -errno;
		k = sendto(via, buf + at + 8 + alen, len, MSG_NOSIGNAL, (struct sockaddr *)&dst, dl);
		if (own)
			close(via);
		if (k != (ssize_t)len)
			return k < 0 ? -errno : -EIO;
		at += 8 + alen + len;
	}
	return 0;
}
