/* UNIX connections made again by the restored processes themselves,
 * before they get their descriptors: SO_PEERCRED reads the pid of the
 * process that connected, listened or made the pair (the kernel notes it
 * then and nothing sets it later), so a pair ckrun made would name no
 * process of the job (pid 0 there). The process the saved end named
 * listens, the one its peer named connects, ckrun accepts; or one process
 * makes a socketpair where both ends named it. A listener ckrun made is
 * listened on again by the process that had listened.
 *
 * A restorer answers each request once (a socketpair twice); an answer
 * that does not come, or comes malformed, leaves the channel out of step,
 * so it ends the restore (*lost) instead of a fallback. */
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

/* The restorer's answer: its descriptor in *fd (fd NULL: none expected;
 * name: a listener's). An error the restorer gives is returned as it is;
 * anything else wrong sets *lost. */
static int ck__answer(struct ck_jproc *jp, int *fd, struct sockaddr_un *name, socklen_t *nlen, int *lost)
{
	struct ck_msg m = {.type = 0};
	int got = -1, r = ck_chan_recv_fd(jp->fd, &m, NULL, 10000, &got);

	if (r == 0 && m.type != CK_MSG_RST_SOCK_FD)
		r = -EPROTO;
	if (r < 0) {
		*lost = 1;
		ck_err_set("process %d did not answer the making of its UNIX connections: %s", jp->jpid,
			   m.type == CK_MSG_RST_ERROR && r == -EPROTO ? m.text : strerror(-r));
	} else if ((int64_t)m.arg[0] < 0) {
		r = (int)(int64_t)m.arg[0];
	} else if ((fd && got < 0) || (name && (m.len <= sizeof(sa_family_t) || m.len > sizeof(*name)))) {
		*lost = 1;
		r = -EPROTO;
		ck_err_set("process %d answered the making of its UNIX connections without what was asked", jp->jpid);
	} else if (name) {
		memcpy(name, m.text, m.len);
		*nlen = m.len;
	}
	if (fd && r == 0)
		*fd = got;
	else if (got >= 0)
		close(got);
	return r;
}

/* One request to a restorer (give: a descriptor sent with it, or -1;
 * ids: what it makes its part as, CK_AGENT_IDS_NONE: itself), then its
 * first answer. */
static int ck__ask(struct ck_jproc *jp, uint64_t ids, uint64_t op, int type, uint64_t a2, const void *addr,
		   uint32_t alen, int give, int *fd, struct sockaddr_un *name, socklen_t *nlen, int *lost)
{
	struct ck_msg m;
	int r;

	memset(&m, 0, offsetof(struct ck_msg, text));
	m.type = CK_MSG_RST_SOCK;
	m.arg[0] = op;
	m.arg[1] = (uint64_t)type;
	m.arg[2] = a2;
	m.arg[3] = ids;
	m.len = alen;
	if (alen)
		memcpy(m.text, addr, alen);
	if ((r = ck_chan_send(jp->fd, &m, give >= 0 ? &give : NULL, give >= 0 ? 1 : 0)) < 0) {
		*lost = 1;
		ck_err_set("cannot ask process %d to make its UNIX connections: %s", jp->jpid, strerror(-r));
		return r;
	}
	return ck__answer(jp, fd, name, nlen, lost);
}

/* The connection on the listener from the process `from` (a stray client
 * of the kernel's name is dropped). */
static int ck__accept_from(int lfd, pid_t from)
{
	for (int tries = 0; tries < 8;) {
		struct pollfd pf = {lfd, POLLIN, 0};
		struct ucred uc;
		socklen_t l = sizeof(uc);
		int fd, n = poll(&pf, 1, 2000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ETIMEDOUT;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0 && errno == EINTR)
			continue;
		if (fd < 0)
			return -errno;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) == 0 && uc.pid == from)
			return fd;
		close(fd);
		tries++;
	}
	return -EPROTO;
}

int ck_rst_unix_pair(void *arg, int32_t listener, uint64_t lids, int32_t connector, uint64_t cids, int type, int sv[2],
		     int *lost)
{
	struct ckrun *c = arg;
	struct ck_jproc *lp = ck_tree_jproc(c, listener), *cp = ck_tree_jproc(c, connector);
	struct sockaddr_un name;
	socklen_t nlen = 0;
	int lfd = -1, r;

	*lost = 0;
	sv[0] = sv[1] = -1;
	if (!lp || !cp)
		return -ESRCH;
	if (lp == cp) {
		if ((r = ck__ask(lp, lids, CK_RST_SOCK_PAIR, type, 0, NULL, 0, -1, &sv[0], NULL, NULL, lost)) < 0)
			return r;
		if ((r = ck__answer(lp, &sv[1], NULL, NULL, lost)) < 0) {
			*lost = 1; /* the first came: the second must */
			goto out;
		}
		return 0;
	}
	if ((r = ck__ask(lp, lids, CK_RST_SOCK_LISTEN, type, 0, NULL, 0, -1, &lfd, &name, &nlen, lost)) < 0 ||
	    (r = ck__ask(cp, cids, CK_RST_SOCK_CONNECT, type, 0, &name, (uint32_t)nlen, -1, &sv[0], NULL, NULL, lost)) < 0)
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

int ck_rst_unix_listen(void *arg, int32_t jpid, uint64_t ids, int fd, int backlog, int *lost)
{
	struct ck_jproc *jp = ck_tree_jproc(arg, jpid);

	*lost = 0;
	if (!jp)
		return -ESRCH;
	return ck__ask(jp, ids, CK_RST_SOCK_RELISTEN, 0, (uint64_t)backlog, NULL, 0, fd, NULL, NULL, NULL, lost);
}

int ck_rst_unix_connect(void *arg, int32_t jpid, uint64_t ids, int type, const struct sockaddr_un *a, uint32_t al,
			int *lost)
{
	struct ck_jproc *jp = ck_tree_jproc(arg, jpid);
	int fd = -1, r;

	*lost = 0;
	if (!jp)
		return -ESRCH;
	r = ck__ask(jp, ids, CK_RST_SOCK_CONNECT, type, 0, a, al, -1, &fd, NULL, NULL, lost);
	return r < 0 ? r : fd;
}
