/* The last pid the job's pid namespace gave (its ns_last_pid): the kernel
 * gives the next process the lowest free number above it. A restore makes
 * every process under its saved number, which leaves that cursor at the
 * namespace's start: the restored job's next children took the numbers
 * of its processes that had exited (a supervisor asking whether its
 * exited child is still there with kill(pid, 0) found another process),
 * where bare they come only once the numbers wrap.
 *
 * Only a process of the namespace reads and writes its cursor: the job's
 * init serves both over a socket pair of its own (ck_lastpid_serve). The
 * round reads it with every process parked; the restore sets it back once
 * every process and thread exists again. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"

#define CK__LASTPID_PATH "/proc/sys/kernel/ns_last_pid"

enum { CK__LASTPID_READ = 1, CK__LASTPID_WRITE = 2 };

struct ck__lastpid_msg {
	uint32_t op;
	int32_t value; /* an answer: -errno, or the pid */
};

/* Init's side (a raw clone of ckrun: no stdio, no malloc). */
static int32_t ck__lastpid_get(void)
{
	char buf[24];
	int fd = open(CK__LASTPID_PATH, O_RDONLY | O_CLOEXEC), v = 0;
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (n < 0) {
		v = -errno;
		if (fd >= 0)
			close(fd);
		return v;
	}
	close(fd);
	for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (buf[i] - '0');
	return v > 0 ? v : -EINVAL;
}

static int32_t ck__lastpid_set(int32_t v)
{
	char buf[16], *p = buf + sizeof(buf);
	int fd = open(CK__LASTPID_PATH, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	if (write(fd, p, (size_t)(buf + sizeof(buf) - p)) < 0)
		r = -errno;
	close(fd);
	return r;
}

void ck_lastpid_serve(int fd)
{
	struct ck__lastpid_msg m;

	if (recv(fd, &m, sizeof(m), MSG_DONTWAIT) != (ssize_t)sizeof(m))
		return;
	if (m.op == CK__LASTPID_READ)
		m.value = ck__lastpid_get();
	else if (m.op == CK__LASTPID_WRITE && m.value > 0)
		m.value = ck__lastpid_set(m.value);
	else
		m.value = -EINVAL;
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) < 0)
		return; /* (ckrun has gone: init dies with it) */
}

/* ckrun's side: one request, its answer within 5 s. */
static int ck__lastpid_ask(struct ckrun *c, uint32_t op, int32_t value, int32_t *answer)
{
	struct ck__lastpid_msg m = {op, value};
	struct pollfd p = {c->lastpid_fd, POLLIN, 0};
	int r;

	if (c->lastpid_fd < 0)
		return -ENOTCONN;
	if (send(c->lastpid_fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -errno;
	while ((r = poll(&p, 1, 5000)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0 || recv(c->lastpid_fd, &m, sizeof(m), 0) != (ssize_t)sizeof(m))
		return r < 0 ? -errno : -EPROTO;
	if (m.op != op)
		return -EPROTO;
	*answer = m.value;
	return m.value < 0 ? m.value : 0;
}

int ck_lastpid_read(struct ckrun *c, int32_t *pid)
{
	int r = ck__lastpid_ask(c, CK__LASTPID_READ, 0, pid);

	if (r < 0)
		ck_err_set("cannot read the job's last pid (%s): %s", CK__LASTPID_PATH, strerror(-r));
	return r;
}

int ck_lastpid_write(struct ckrun *c, int32_t pid)
{
	int32_t answer = 0;
	int r = ck__lastpid_ask(c, CK__LASTPID_WRITE, pid, &answer);

	if (r < 0)
		ck_err_set("cannot set the restored job's last pid to %d (%s): %s", pid, CK__LASTPID_PATH,
			   strerror(-r));
	return r;
}
