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
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/socket/agent/sock.h"

int ck_sock_unix_diag(uint64_t ino, uint64_t *peer_ino, char *name, size_t namelen, size_t *name_got, int *shut)
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
	q.req.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME;
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
int ck_sock_udp_shut(int family, uint64_t ino, int *shut)
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

	*shut = -1;
	if (fd < 0)
		return -errno;
	memset(&q, 0, sizeof(q));
	q.nlh.nlmsg_len = sizeof(q);
	q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	q.req.sdiag_family = (uint8_t)family;
	q.req.sdiag_protocol = IPPROTO_UDP;
	q.req.idiag_states = ~0u;
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
			len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
			for (a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len))
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
