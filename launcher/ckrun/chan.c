/* The control channel: SOCK_SEQPACKET messages, with the sender's
 * credentials (SCM_CREDENTIALS) and descriptors (SCM_RIGHTS). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"
#include "ckrun/proto.h"

int ck_chan_send(int fd, struct ck_msg *m, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 250)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {m, __builtin_offsetof(struct ck_msg, text) + m->len};
	struct msghdr mh;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		struct cmsghdr *c;
		if (nfds > 250)
			return -EINVAL;
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		if (sendmsg(fd, &mh, MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

int ck_chan_recv(int fd, struct ck_msg *m, pid_t *pid, int timeout_ms)
{
	int rfd = -1, r = ck_chan_recv_fd(fd, m, pid, timeout_ms, &rfd);

	if (rfd >= 0)
		close(rfd); /* not expected here */
	return r;
}

int ck_chan_recv_fd(int fd, struct ck_msg *m, pid_t *pid, int timeout_ms, int *rfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {m, sizeof(*m)};
	struct msghdr mh;
	ssize_t n;

	if (pid)
		*pid = 0;
	*rfd = -1;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		break;
	}
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/* A peer that closed with our messages unread (a process that exec'd
	 * while a request was on its way: its new program sent its HELLO,
	 * then closed the old channel) leaves ECONNRESET, reported once and
	 * before what it sent and is still queued. */
	if (n < 0 && errno == ECONNRESET) {
		mh.msg_controllen = sizeof(u.buf);
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == EAGAIN)) { /* nothing was queued */
			n = -1;
			errno = ECONNRESET;
		}
	}
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), got[4];
			memcpy(got, CMSG_DATA(c), sizeof(int) * (size_t)(k < 4 ? k : 4));
			for (int i = 0; i < k && i < 4; i++) {
				if (*rfd < 0)
					*rfd = got[i];
				else
					close(got[i]);
			}
		}
	}
	if (n == 0)
		return -EPIPE;
	if ((size_t)n < __builtin_offsetof(struct ck_msg, text) || m->len > CK_MSG_TEXT ||
	    (size_t)n < __builtin_offsetof(struct ck_msg, text) + m->len) {
		if (*rfd >= 0)
			close(*rfd);
		*rfd = -1;
		return -EBADMSG;
	}
	m->text[m->len < CK_MSG_TEXT ? m->len : CK_MSG_TEXT - 1] = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && pid) {
			struct ucred cr;
			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			*pid = cr.pid;
		}
	}
	return 0;
}
