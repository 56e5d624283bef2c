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
	uint32_t op, seq; /* seq: the answer's is its request's */
	int32_t value;    /* an answer: -errno, or the pid */
	uint32_t pad;
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

int ck_lastpid_serve(int fd)
{
	struct ck__lastpid_msg m;
	ssize_t n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -1; /* ckrun's end is closed */
	if (n != (ssize_t)sizeof(m))
		return 0;
	if (m.op == CK__LASTPID_READ)
		m.value = ck__lastpid_get();
	else if (m.op == CK__LASTPID_WRITE && m.value > 0)
		m.value = ck__lastpid_set(m.value);
	else
		m.value = -EINVAL;
	return send(fd, &m, sizeof(m), MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* ckrun's side: one request, its answer within 5 s (an answer to an
 * earlier request that timed out is passed over). */
static int ck__lastpid_ask(struct ckrun *c, uint32_t op, int32_t value, int32_t *answer)
{
	static uint32_t seq;
	struct ck__lastpid_msg m = {op, ++seq, value, 0};
	uint64_t until = ck_now_ns() + 5000000000ull;

	if (c->lastpid_fd < 0)
		return -ENOTCONN;
	if (send(c->lastpid_fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -errno;
	for (;;) {
		struct pollfd p = {c->lastpid_fd, POLLIN, 0};
		uint64_t now = ck_now_ns();
		int r = now < until ? poll(&p, 1, (int)((until - now) / 1000000) + 1) : 0;
		struct ck__lastpid_msg a;
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0)
			return -errno;
		if (recv(c->lastpid_fd, &a, sizeof(a), 0) != (ssize_t)sizeof(a))
			return -EPROTO; /* (init has ended, or is not init) */
		if (a.seq != m.seq || a.op != op)
			continue;
		*answer = a.value;
		return a.value < 0 ? a.value : 0;
	}
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
