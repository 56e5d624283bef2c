/* Messages queued toward a UNIX socket that receives its senders'
 * credentials (SO_PASSCRED): each carries the sending process's pid, uid
 * and gid, which the job reads with SCM_CREDENTIALS.
 *
 * Round: a stream is peeked run by run (SO_PEEK_OFF; a peek stops where
 * the sender changes, as the job's reads do), datagrams and records are
 * taken and sent back at once through the peer, each with its sender's
 * credentials given explicitly (SCM_CREDENTIALS), so the queue is what it
 * was. Saved with CK_SOCKOPT_CREDS: per run or datagram u32 length, i32
 * the sender's pid in the job, u32 uid, u32 gid, the bytes.
 * Restore: once every process exists (a pid given in SCM_CREDENTIALS
 * must be a live process), each is sent again the same way, with the
 * sender's new pid here.
 * Giving another process's pid needs CAP_SYS_ADMIN over ckrun's pid
 * namespace (and CAP_SETUID/SETGID for another uid/gid): ckrun as root.
 * Refused, the queue untouched: without that privilege (tried on a pair of
 * ckrun's own first), a sender that is not a process of the job (outside
 * it, or exited), files in flight on the same socket. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "plugins/socket/agent/sock.h"

struct ck__run {
	uint32_t len;
	int32_t jpid;
	uint32_t uid, gid;
};

static int ck__put(char **d, size_t *n, const void *p, size_t k)
{
	char *x = realloc(*d, *n + k + 1);

	if (!x)
		return -ENOMEM;
	if (k)
		memcpy(x + *n, p, k);
	*d = x;
	*n += k;
	return 0;
}

/* One recvmsg with the sender's credentials: its length or -1 (errno);
 * *files: files came with it (closed here), *cut: the message was longer. */
static ssize_t ck__recv_cred(int fd, void *buf, size_t cap, int flags, struct ucred *uc, int *files, int *cut)
{
	union {
		char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr a;
	} u;
	struct iovec iov = {buf, cap};
	struct msghdr mh;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	uc->pid = 0;
	uc->uid = uc->gid = (uint32_t)-1;
	n = recvmsg(fd, &mh, flags | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(*uc)))
			memcpy(uc, CMSG_DATA(c), sizeof(*uc));
		if (c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			*files = 1;
			for (int i = 0; i < k; i++) {
				int x;
				memcpy(&x, CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof(int));
				close(x);
			}
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		*cut = 1;
	return n;
}

/* Sends len bytes (one datagram, or the whole run of a stream) through
 * via with the given credentials. */
static int ck__send_cred(int via, const char *p, size_t len, const struct ucred *uc, int dgram)
{
	union {
		char b[CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr a;
	} u;
	size_t put = 0;

	do {
		struct iovec iov = {(void *)(p + put), len - put};
		struct msghdr mh;
		struct cmsghdr *c;
		ssize_t n;

		memset(&mh, 0, sizeof(mh));
		memset(&u, 0, sizeof(u));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_CREDENTIALS;
		c->cmsg_len = CMSG_LEN(sizeof(*uc));
		memcpy(CMSG_DATA(c), uc, sizeof(*uc));
		n = sendmsg(via, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pf = {via, POLLOUT, 0};
			if (poll(&pf, 1, 5000) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return -errno;
		put += (size_t)n;
	} while (!dgram && put < len);
	return 0;
}

/* The job's pid of host pid h, or 0: not a process of the job. */
static int32_t ck__jpid_of(const struct ck_creds_map *m, pid_t h)
{
	for (size_t i = 0; h > 0 && i < m->n; i++)
		if (m->pids[i] == h)
			return m->jpids[i];
	return 0;
}

/* Whether ckrun may give h's pid and these ids to a message: tried on a
 * pair of its own, so that nothing of the job is taken before a put-back
 * that would fail. */
static int ck__may_send_as(const struct ucred *uc)
{
	int sv[2], r;
	char c = 0;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	r = ck__send_cred(sv[0], &c, 1, uc, 1);
	close(sv[0]);
	close(sv[1]);
	return r;
}

static int ck__sender_ok(const struct ck_creds_map *m, const struct ucred *uc, int32_t jpid, int sockfd,
			 struct ck__run *run)
{
	int r;

	run->jpid = ck__jpid_of(m, uc->pid);
	run->uid = uc->uid;
	run->gid = uc->gid;
	if (!run->jpid) {
		ck_err_set("process %d: a message queued on a UNIX socket (descriptor %d) that receives its senders' "
			   "credentials (SO_PASSCRED) came from a process that is not one of the job's (it has exited, or "
			   "is outside the job; pid %d to ckrun): not supported",
			   jpid, sockfd, uc->pid);
		return -ENOTSUP;
	}
	if ((r = ck__may_send_as(uc)) < 0) {
		ck_err_set("process %d: messages are queued on a UNIX socket (descriptor %d) that receives its "
			   "senders' credentials (SO_PASSCRED): ckrun cannot give them back (%s; it needs to run as "
			   "root): not supported",
			   jpid, sockfd, strerror(-r));
		return -ENOTSUP;
	}
	return 0;
}

int ck_creds_peek_stream(int fd, const struct ck_creds_map *m, int32_t jpid, int sockfd, char **data,
			 size_t *ndata)
{
	static char buf[256 << 10];
	int old = -1, off = 0, r = 0;
	socklen_t ol = sizeof(old);

	if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off)) < 0)
		return -errno;
	for (;;) {
		struct ucred uc;
		struct ck__run run;
		int files = 0, cut = 0;
		ssize_t n = ck__recv_cred(fd, buf, sizeof(buf), MSG_PEEK, &uc, &files, &cut);

		if (n < 0 && errno != EAGAIN) {
			r = -errno;
			ck_err_set("process %d: cannot read the queue of its UNIX socket (descriptor %d): %s", jpid, sockfd,
				   strerror(errno));
			break;
		}
		if (n <= 0)
			break; /* the end of the queue */
		if (files) {
			ck_err_set("process %d: descriptors in flight on a UNIX socket (descriptor %d) that receives "
				   "its senders' credentials (SO_PASSCRED): not supported",
				   jpid, sockfd);
			r = -ENOTSUP;
			break;
		}
		if ((r = ck__sender_ok(m, &uc, jpid, sockfd, &run)) < 0)
			break;
		run.len = (uint32_t)n;
		if ((r = ck__put(data, ndata, &run, sizeof(run))) < 0 || (r = ck__put(data, ndata, buf, (size_t)n)) < 0)
			break;
	}
	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	return r;
}

int ck_creds_take_dgrams(int fd, int via, const struct ck_creds_map *m, int32_t jpid, int sockfd, char **data,
			 size_t *ndata)
{
	static char buf[256 << 10];
	int old = -1, zero = 0, none = -1, r = 0;
	socklen_t ol = sizeof(old);
	struct ucred *ucs = NULL; /* each taken one's, as the kernel gave it */
	size_t nuc = 0, at = 0;

	/* Every sender checked before anything is taken: a peek walk. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, &ol) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0)
		return -errno;
	for (int k = 0; k < 1000000 && r == 0; k++) {
		struct ucred uc;
		struct ck__run run;
		int files = 0, cut = 0;
		ssize_t n = ck__recv_cred(fd, buf, sizeof(buf), MSG_PEEK, &uc, &files, &cut);

		if (n < 0)
			break;
		if (files || cut) {
			ck_err_set("process %d: %s on a UNIX socket (descriptor %d) that receives its senders' "
				   "credentials (SO_PASSCRED): not supported",
				   jpid, files ? "descriptors in flight" : "a datagram over 256 KiB", sockfd);
			r = -ENOTSUP;
		} else if (n == 0 && uc.pid == 0) {
			break; /* a record socket's end of file */
		} else {
			r = ck__sender_ok(m, &uc, jpid, sockfd, &run);
		}
	}
	/* no offset while taking: the job's own would move with what is taken */
	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &none, sizeof(none));
	if (r < 0)
		goto out;
	for (;;) {
		struct ucred uc, *u2;
		struct ck__run run;
		int files = 0, cut = 0;
		ssize_t n = ck__recv_cred(fd, buf, sizeof(buf), 0, &uc, &files, &cut);

		if (n < 0 || (n == 0 && uc.pid == 0))
			break; /* the end of the queue, or of a record socket's data */
		run.len = (uint32_t)n;
		run.jpid = ck__jpid_of(m, uc.pid);
		run.uid = uc.uid;
		run.gid = uc.gid;
		u2 = realloc(ucs, (nuc + 1) * sizeof(*ucs));
		if (u2)
			ucs = u2;
		if (!u2 || ck__put(data, ndata, &run, sizeof(run)) < 0 || ck__put(data, ndata, buf, (size_t)n) < 0) {
			/* this one still goes back: not lost */
			if (ck__send_cred(via, buf, (size_t)n, &uc, 1) < 0)
				(void)!send(via, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
			r = -ENOMEM;
			break;
		}
		ucs[nuc++] = uc;
	}
	/* back, in order, each with its sender's credentials; one whose sender
	 * the walk did not see (an empty datagram peeked before) and cannot be
	 * sent as goes back with ckrun's, and the round fails */
	for (size_t k = 0; at < *ndata && k < nuc; k++) {
		struct ck__run run;
		int e;

		memcpy(&run, *data + at, sizeof(run));
		if ((e = ck__send_cred(via, *data + at + sizeof(run), run.len, &ucs[k], 1)) < 0) {
			(void)!send(via, *data + at + sizeof(run), run.len, MSG_NOSIGNAL | MSG_DONTWAIT); /* not lost */
			if (r == 0) {
				ck_err_set("process %d: could not put a message back on its UNIX socket (descriptor %d) "
					   "as process %d: %s",
					   jpid, sockfd, ucs[k].pid, strerror(-e));
				r = e;
			}
		} else if (!run.jpid && r == 0) {
			ck__sender_ok(m, &ucs[k], jpid, sockfd, &run); /* says why */
			r = -ENOTSUP;
		}
		at += sizeof(run) + run.len;
	}
out:
	free(ucs);
	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old));
	return r;
}

int ck_creds_deliver(const char *buf, size_t n, int dgram, int via, pid_t (*host_pid)(void *arg, int32_t jpid),
		     void *arg)
{
	for (size_t at = 0; at < n;) {
		struct ck__run run;
		struct ucred uc;
		int r;

		if (n - at < sizeof(run))
			return -EBADMSG;
		memcpy(&run, buf + at, sizeof(run));
		if (n - at - sizeof(run) < run.len)
			return -EBADMSG;
		uc.pid = host_pid(arg, run.jpid);
		uc.uid = run.uid;
		uc.gid = run.gid;
		if (uc.pid <= 0) {
			ck_err_set("a message's sender, process %d, is not in the restored job", run.jpid);
			return -ESRCH;
		}
		if ((r = ck__send_cred(via, buf + at + sizeof(run), run.len, &uc, dgram)) < 0) {
			ck_err_set("cannot send a message again as process %d (uid %u, gid %u, SCM_CREDENTIALS): %s",
				   run.jpid, run.uid, run.gid, strerror(-r));
			return r;
		}
		at += sizeof(run) + run.len;
	}
	return 0;
}
