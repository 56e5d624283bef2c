/* UNIX connections made again by the restored processes themselves,
 * before they get their descriptors: SO_PEERCRED reads the pid of the
 * process that connected, listened or made the pair (the kernel notes it
 * then and nothing sets it later), so a pair ckrun made would name no
 * process of the job (pid 0 there). The process the saved end named
 * listens, the one its peer named connects, ckrun accepts; or one process
 * makes a socketpair where both ends named it. */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"
#include "ckrun/proto.h"

/* The restorer's answer: its descriptor in *fd (name: a listener's). */
static int ck__answer(struct ck_jproc *jp, int *fd, struct sockaddr_un *name, socklen_t *nlen)
{
	struct ck_msg m;
	int r = ck_chan_recv_fd(jp->fd, &m, NULL, 10000, fd);

	if (r == 0 && m.type != CK_MSG_RST_SOCK_FD)
		r = m.type == CK_MSG_RST_ERROR ? -EIO : -EPROTO;
	else if (r == 0 && (int64_t)m.arg[0] < 0)
		r = (int)(int64_t)m.arg[0];
	else if (r == 0 && *fd < 0)
		r = -EPROTO;
	else if (r == 0 && name && (m.len <= sizeof(sa_family_t) || m.len > sizeof(*name)))
		r = -EPROTO;
	else if (r == 0 && name) {
		memcpy(name, m.text, m.len);
		*nlen = m.len;
	}
	if (r < 0 && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return r;
}

/* One request to a restorer, the first answer's descriptor in *fd (name:
 * a listener's, when not NULL). */
static int ck__ask(struct ck_jproc *jp, uint64_t op, int type, const void *addr, uint32_t alen, int *fd,
		   struct sockaddr_un *name, socklen_t *nlen)
{
	struct ck_msg m;
	int r;

	memset(&m, 0, offsetof(struct ck_msg, text));
	m.type = CK_MSG_RST_SOCK;
	m.arg[0] = op;
	m.arg[1] = (uint64_t)type;
	m.len = alen;
	if (alen)
		memcpy(m.text, addr, alen);
	if ((r = ck_chan_send(jp->fd, &m, NULL, 0)) < 0)
		return r;
	return ck__answer(jp, fd, name, nlen);
}

/* The connection on the listener from the process `from` (a stray client
 * of the kernel's name in the job's network namespace is dropped). */
static int ck__accept_from(int lfd, pid_t from)
{
	for (int tries = 0; tries < 8; tries++) {
		struct pollfd pf = {lfd, POLLIN, 0};
		struct ucred uc;
		socklen_t l = sizeof(uc);
		int fd;
		if (poll(&pf, 1, 2000) <= 0)
			return -ETIMEDOUT;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) == 0 && uc.pid == from)
			return fd;
		close(fd);
	}
	return -EPROTO;
}

int ck_rst_unix_pair(void *arg, int32_t listener, int32_t connector, int type, int sv[2])
{
	struct ckrun *c = arg;
	struct ck_jproc *lp = ck_tree_jproc(c, listener), *cp = ck_tree_jproc(c, connector);
	struct sockaddr_un name;
	socklen_t nlen = 0;
	int lfd = -1, r;

	sv[0] = sv[1] = -1;
	if (!lp || !cp)
		return -ESRCH;
	if (lp == cp) {
		if ((r = ck__ask(lp, CK_RST_SOCK_PAIR, type, NULL, 0, &sv[0], NULL, NULL)) < 0)
			return r;
		if ((r = ck__answer(lp, &sv[1], NULL, NULL)) < 0)
			goto out;
		return 0;
	}
	if ((r = ck__ask(lp, CK_RST_SOCK_LISTEN, type, NULL, 0, &lfd, &name, &nlen)) < 0 ||
	    (r = ck__ask(cp, CK_RST_SOCK_CONNECT, type, &name, (uint32_t)nlen, &sv[0], NULL, NULL)) < 0)
		goto out;
	if ((sv[1] = ck__accept_from(lfd, cp->pid)) < 0)
		r = sv[1];
out:
	if (lfd >= 0)
		close(lfd);
	if (r < 0) {
		if (sv[0] >= 0)
			close(sv[0]);
		if (sv[1] >= 0)
			close(sv[1]);
		sv[0] = sv[1] = -1;
	}
	return r < 0 ? r : 0;
}
