/* libckpt's end of its control channel to ckrun (ckrun/proto.h):
 * messages out with our credentials, messages in with at most one
 * descriptor. System calls only: the snapshot child and the restart path
 * use them. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

/* sendmsg with our credentials attached, so ckrun learns our pid as its
 * namespace numbers it. System calls only: runs in the snapshot child. */
int ck__send(struct ck_msg *m)
{
	return (int)ck__send_fd(m, __builtin_offsetof(struct ck_msg, text) + m->len, -1);
}

/* The channel's number is read inside the ctl_send mark: a move of the
 * channel (fdhide.c) waits until no send holds the old number. */
long ck__send_fd(const void *m, size_t len, int passfd)
{
	long r;

	__atomic_add_fetch(&ck__core.ctl_send, 1, __ATOMIC_SEQ_CST);
	r = ck_send_with_creds_fd(__atomic_load_n(&ck__core.ctl_fd, __ATOMIC_SEQ_CST), m, len, passfd);
	__atomic_sub_fetch(&ck__core.ctl_send, 1, __ATOMIC_SEQ_CST);
	return r;
}

/* One message. A descriptor that came with it is returned in *fd (the
 * caller's to close); without fd none is installed (the kernel drops it),
 * so no number of the job's table is taken. MSG_PEEK leaves the message,
 * and its descriptor, in the channel. */
static int ck__recv_flags(struct ck_msg *m, int *fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {m, sizeof(*m)};
	struct msghdr mh;
	struct cmsghdr *c;
	int got = -1;
	long r;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd) {
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
	}
	/* ctl_recv marks the number read: a move of the channel waits until
	 * this receive has it in the kernel (fdhide.c) */
	__atomic_store_n(&ck__core.ctl_recv, 1, __ATOMIC_SEQ_CST);
	do
		r = ck_sys3(SYS_recvmsg, __atomic_load_n(&ck__core.ctl_fd, __ATOMIC_SEQ_CST), (long)&mh,
			    MSG_CMSG_CLOEXEC | flags);
	while (r == -EINTR);
	__atomic_store_n(&ck__core.ctl_recv, 0, __ATOMIC_SEQ_CST);
	for (c = r > 0 && fd ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			ck_memcpy(&got, CMSG_DATA(c), sizeof(int));
	if (fd)
		*fd = got;
	if (r == 0)
		return -EPIPE;
	if (r < (long)__builtin_offsetof(struct ck_msg, text))
		return r < 0 ? (int)r : -EBADMSG;
	return 0;
}

int ck__recv_fd(struct ck_msg *m, int *fd)
{
	return ck__recv_flags(m, fd, 0);
}

int ck__peek(struct ck_msg *m)
{
	return ck__recv_flags(m, NULL, MSG_PEEK);
}

int ck__recv(struct ck_msg *m)
{
	return ck__recv_flags(m, NULL, 0);
}
