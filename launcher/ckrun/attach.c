/* The job's attach socket: an abstract UNIX name derived from the user,
 * the store and the job (so a restored job's processes, whose environment
 * names it, find the new ckrun's), for processes that lost the channel
 * they inherited (a program that closed every descriptor before exec, a
 * daemon that closed them all). Only processes of the job's own pid
 * namespace are heard; a connection carries one HELLO with the process's
 * channel, as on an inherited channel. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "ckrun/proto.h"

static uint64_t ck__fnv(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull;
}

int ck_attach_open(struct ckrun *c)
{
	struct sockaddr_un sa;
	size_t n;
	int fd;

	snprintf(c->attach_name, sizeof(c->attach_name), "ckrun-attach-%u-%016" PRIx64, (unsigned)getuid(),
		 ck__fnv(c->job, ck__fnv(c->store_uri, 1469598103934665603ull)));
	n = strlen(c->attach_name);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, c->attach_name, n);
	if (bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0 ||
	    listen(fd, 64) < 0) {
		ck_err_set("cannot open the job's attach socket @%s: %s", c->attach_name, strerror(errno));
		close(fd);
		return -errno;
	}
	c->attach_fd = fd;
	return 0;
}

int ck_attach_accept(struct ckrun *c, pid_t *pid, struct ck_msg *hello)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	char path[64], ns[64] = "";
	struct ck_msg m;
	int cfd, chan = -1, one = 1, r;
	ssize_t k;

	cfd = accept4(c->attach_fd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return -errno;
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0)
		goto refuse;
	/* of the job: same pid namespace as its init's children */
	if (!c->pidns[0] && c->init_pid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/pid_for_children", c->init_pid);
		if ((k = readlink(path, c->pidns, sizeof(c->pidns) - 1)) > 0)
			c->pidns[k] = 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", cr.pid);
	if ((k = readlink(path, ns, sizeof(ns) - 1)) <= 0 || (ns[k] = 0, strcmp(ns, c->pidns)))
		goto refuse;
	setsockopt(cfd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	r = ck_chan_recv_fd(cfd, &m, pid, 2000, &chan);
	if (r < 0 || m.type != CK_MSG_HELLO || chan < 0 || *pid != cr.pid) {
		if (chan >= 0)
			close(chan);
		goto refuse;
	}
	*hello = m;
	close(cfd);
	return chan;
refuse:
	close(cfd);
	return -EPERM;
}
