/* A UNIX socket's peer, as sock_diag reports it: the kernel knows which
 * socket a connected UNIX socket talks to only by inode. Also its
 * shutdown() state, which no socket option or poll bit shows whole (a
 * datagram socket's own SHUT_WR shows nowhere else), and a UDP socket's. */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/socket/agent/sock.h"

int ck_sock_unix_diag(uint64_t ino, uint64_t *peer_ino, char *name, size_t namelen, size_t *name_got, int *shut,
		      uint32_t *backlog)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req req;
	} q;
	union {
		char buf[8192];
		struct nlmsghdr align;
	} u;
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG), r = -ENOENT;
	ssize_t n;

	*peer_ino = 0;
	if (shut)
		*shut = -1;
	if (name_got)
		*name_got = 0;
	if (fd < 0)
		return -errno;
	memset(&q, 0, sizeof(q));
	q.nlh.nlmsg_len = sizeof(q);
	q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.nlh.nlmsg_flags = NLM_F_REQUEST;
	q.req.sdiag_family = AF_UNIX;
	q.req.udiag_states = ~0u;
	q.req.udiag_ino = (uint32_t)ino;
	q.req.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME | (backlog ? UDIAG_SHOW_RQLEN : 0);
	q.req.udiag_cookie[0] = q.req.udiag_cookie[1] = ~0u; /* no cookie */
	if (send(fd, &q, sizeof(q), 0) != (ssize_t)sizeof(q)) {
		r = -errno;
		goto out;
	}
	n = recv(fd, u.buf, sizeof(u.buf), 0);
	if (n < 0) {
		r = -errno;
		goto out;
	}
	for (struct nlmsghdr *h = &u.align; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		struct unix_diag_msg *m;
		struct rtattr *a;
		int len;
		if (h->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(h);
			r = e->error ? e->error : -ENOENT;
			goto out;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
			continue;
		m = NLMSG_DATA(h);
		len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
		for (a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
			if (a->rta_type == UNIX_DIAG_PEER)
				*peer_ino = *(uint32_t *)RTA_DATA(a);
			else if (a->rta_type == UNIX_DIAG_SHUTDOWN && shut && RTA_PAYLOAD(a) >= 1)
				*shut = *(uint8_t *)RTA_DATA(a);
			else if (a->rta_type == UNIX_DIAG_RQLEN && backlog && m->udiag_state == TCP_LISTEN &&
				 RTA_PAYLOAD(a) >= sizeof(struct unix_diag_rqlen))
				*backlog = ((struct unix_diag_rqlen *)RTA_DATA(a))->udiag_wqueue; /* a listener's maximum */
			else if (a->rta_type == UNIX_DIAG_NAME && name) {
				size_t k = RTA_PAYLOAD(a) < namelen ? RTA_PAYLOAD(a) : namelen;
				memcpy(name, RTA_DATA(a), k);
				if (name_got)
					*name_got = k;
			}
		}
		r = 0;
		break;
	}
out:
	close(fd);
	return r;
}

/* A UDP socket's shutdown bits: the kernel looks one up exactly only by
 * its addresses and ports, so every UDP socket of the family is listed
 * and the one with this inode taken. */
/* The inet socket of this protocol with this inode, among those in
 * `states` (the kernel looks one up exactly only by its addresses and
 * ports, so all are listed): its message, and its shutdown bits if shut. */
static int ck__inet_find(int family, int proto, uint32_t states, uint64_t ino, struct inet_diag_msg *out, int *shut)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} q;
	union {
		char buf[32768];
		struct nlmsghdr align;
	} u;
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG), r = -ENOENT, done = 0;

	if (shut)
		*shut = -1;
	if (fd < 0)
		return -errno;
	memset(&q, 0, sizeof(q));
	q.nlh.nlmsg_len = sizeof(q);
	q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	q.req.sdiag_family = (uint8_t)family;
	q.req.sdiag_protocol = (uint8_t)proto;
	q.req.idiag_states = states;
	if (send(fd, &q, sizeof(q), 0) != (ssize_t)sizeof(q)) {
		r = -errno;
		goto out;
	}
	while (!done) {
		ssize_t n = recv(fd, u.buf, sizeof(u.buf), 0);
		if (n < 0) {
			r = -errno;
			goto out;
		}
		for (struct nlmsghdr *h = &u.align; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct inet_diag_msg *m;
			struct rtattr *a;
			int len;
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				r = e->error ? e->error : -ENOENT;
				goto out;
			}
			m = NLMSG_DATA(h);
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || m->idiag_inode != (uint32_t)ino)
				continue;
			*out = *m;
			r = shut ? r : 0;
			len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
			for (a = (struct rtattr *)(m + 1); shut && RTA_OK(a, len); a = RTA_NEXT(a, len))
				if (a->rta_type == INET_DIAG_SHUTDOWN && RTA_PAYLOAD(a) >= 1) {
					*shut = *(uint8_t *)RTA_DATA(a);
					r = 0;
				}
		}
	}
out:
	close(fd);
	return r;
}

int ck_sock_udp_shut(int family, uint64_t ino, int *shut)
{
	struct inet_diag_msg m;

	return ck__inet_find(family, IPPROTO_UDP, ~0u, ino, &m, shut);
}

int ck_sock_tcp_backlog(int family, uint64_t ino, uint32_t *backlog)
{
	struct inet_diag_msg m;
	int r = ck__inet_find(family, IPPROTO_TCP, 1u << TCP_LISTEN, ino, &m, NULL);

	if (r == 0)
		*backlog = m.idiag_wqueue; /* a listener's maximum */
	return r;
}

/* One request to sock_diag and its one answer: the message of type
 * `want` into *msg (its first msglen bytes), or the kernel's error. */
static int ck__diag_ask(int fd, const void *q, size_t qlen, int want, void *msg, size_t msglen)
{
	union {
		char buf[4096];
		struct nlmsghdr align;
	} u;
	ssize_t n;

	if (send(fd, q, qlen, 0) != (ssize_t)qlen || (n = recv(fd, u.buf, sizeof(u.buf), 0)) < 0)
		return -errno;
	for (struct nlmsghdr *h = &u.align; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR)
			return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
		if (h->nlmsg_type == want && h->nlmsg_len >= NLMSG_LENGTH(msglen)) {
			memcpy(msg, NLMSG_DATA(h), msglen);
			return 0;
		}
	}
	return -ENOENT;
}

int ck_sock_tcp_end_orphan(const struct sockaddr *src, const struct sockaddr *dst)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} q;
	struct inet_diag_msg m;
	int fd, r;

	if (src->sa_family != dst->sa_family || (src->sa_family != AF_INET && src->sa_family != AF_INET6))
		return -EINVAL;
	memset(&q, 0, sizeof(q));
	q.nlh.nlmsg_len = sizeof(q);
	q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.nlh.nlmsg_flags = NLM_F_REQUEST;
	q.req.sdiag_family = (uint8_t)src->sa_family;
	q.req.sdiag_protocol = IPPROTO_TCP;
	q.req.idiag_states = ~0u;
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
		q.req.id.idiag_sport = s->sin_port;
		q.req.id.idiag_dport = d->sin_port;
		memcpy(q.req.id.idiag_src, &s->sin_addr, 4);
		memcpy(q.req.id.idiag_dst, &d->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
		q.req.id.idiag_sport = s->sin6_port;
		q.req.id.idiag_dport = d->sin6_port;
		memcpy(q.req.id.idiag_src, &s->sin6_addr, 16);
		memcpy(q.req.id.idiag_dst, &d->sin6_addr, 16);
	}
	q.req.id.idiag_cookie[0] = q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if ((fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) < 0)
		return -errno;
	r = ck__diag_ask(fd, &q, sizeof(q), SOCK_DIAG_BY_FAMILY, &m, sizeof(m));
	if (r == -ENOENT) {
		r = 0; /* nothing holds these ports */
		goto out;
	}
	/* Only a socket no process holds (inode 0) that is closing: TIME_WAIT,
	 * or an orphan on its way there. One established or half-open in a
	 * live listener's queue has inode 0 too, and is left alone, as is
	 * any socket a process holds; the cookie makes sure the socket ended
	 * is the one just seen. */
	if (r < 0 || m.idiag_inode != 0 ||
	    (m.idiag_state != TCP_TIME_WAIT && m.idiag_state != TCP_FIN_WAIT1 && m.idiag_state != TCP_FIN_WAIT2 &&
	     m.idiag_state != TCP_CLOSING && m.idiag_state != TCP_LAST_ACK))
		goto out;
	q.nlh.nlmsg_type = SOCK_DESTROY;
	q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	q.req.id = m.id;
	r = ck__diag_ask(fd, &q, sizeof(q), NLMSG_ERROR, &m, 0);
out:
	close(fd);
	return r;
}
