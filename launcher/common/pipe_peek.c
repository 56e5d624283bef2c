/* Reading the bytes a job left in a pipe without taking them. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "launcher/common/pipe_peek.h"

/* Copies the unread bytes of the pipe open at rfd into buf without taking
 * them: tee(2) into a pipe of our own, sized like the job's, then read
 * from ours. Reading and writing back instead would have raised the job's
 * O_ASYNC signals and woken its pollers with the bytes put back. */
int ck_pipe_peek(int rfd, uint32_t cap, char *buf, size_t avail)
{
	int p[2], r = 0;
	size_t got = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	/* as many slots as the job's pipe: tee copies whole buffers */
	if (cap && (uint32_t)fcntl(p[1], F_GETPIPE_SZ) < cap && fcntl(p[1], F_SETPIPE_SZ, cap) < 0) {
		r = -errno;
		goto out;
	}
	n = tee(rfd, p[1], avail, SPLICE_F_NONBLOCK);
	if (n < 0 || (size_t)n != avail) {
		r = n < 0 ? -errno : -ENOSPC;
		goto out;
	}
	while (got < avail && (n = read(p[0], buf + got, avail - got)) > 0)
		got += (size_t)n;
	if (got != avail)
		r = -EIO;
out:
	close(p[0]);
	close(p[1]);
	return r;
}
