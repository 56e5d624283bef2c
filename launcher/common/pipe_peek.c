/* Reading the bytes a job left in a pipe without taking them. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "launcher/common/pipe_peek.h"

/* The old way, where no pipe of our own can hold them (the user is over
 * pipe-user-pages-soft): read out and written back at once through a
 * second open of the same pipe (it had room for them). That raises the
 * job's O_ASYNC signal and wakes its pollers as a write would. */
static int ck__drain_back(const char *path, int rfd, char *buf, size_t avail)
{
	size_t got = 0, put = 0;
	int wfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC), r = 0;
	ssize_t n;

	if (wfd < 0)
		return -errno;
	/* rfd may be the job's own, blocking: never wait on it */
	while (got < avail) {
		struct pollfd pf = {rfd, POLLIN, 0};
		if (poll(&pf, 1, 1000) != 1 || (n = read(rfd, buf + got, avail - got)) <= 0)
			break;
		got += (size_t)n;
	}
	while (put < got && (n = write(wfd, buf + put, got - put)) > 0)
		put += (size_t)n;
	if (got != avail || put != got)
		r = -EIO;
	close(wfd);
	return r;
}

/* Copies the unread bytes of the pipe open at rfd into buf without taking
 * them: tee(2) into a pipe of our own, sized like the job's, then read
 * from ours. Reading and writing back instead raises the job's O_ASYNC
 * signals and wakes its pollers with the bytes put back: only where our
 * pipe cannot be made large enough. */
int ck_pipe_peek(const char *path, int rfd, uint32_t cap, char *buf, size_t avail)
{
	int p[2], r = 0;
	size_t got = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) /* the user over pipe-user-pages-hard, or no file left */
		return errno == ENFILE || errno == EMFILE || errno == EPERM ? ck__drain_back(path, rfd, buf, avail)
									     : -errno;
	/* as many slots as the job's pipe: tee copies whole buffers */
	if (cap && (uint32_t)fcntl(p[1], F_GETPIPE_SZ) < cap && fcntl(p[1], F_SETPIPE_SZ, cap) < 0) {
		r = errno == EPERM ? 1 : -errno;
		goto out;
	}
	n = tee(rfd, p[1], avail, SPLICE_F_NONBLOCK);
	if (n < 0 || (size_t)n != avail) {
		r = n < 0 ? -errno : 1;
		goto out;
	}
	while (got < avail && (n = read(p[0], buf + got, avail - got)) > 0)
		got += (size_t)n;
	if (got != avail)
		r = -EIO;
out:
	close(p[0]);
	close(p[1]);
	return r == 1 ? ck__drain_back(path, rfd, buf, avail) : r;
}
