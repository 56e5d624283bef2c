/* The control socket operators use (`ckpt checkpoint [--stop] JOB`):
 * a UNIX socket in a 0700 directory of the user's, and every peer checked
 * by its credentials. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ctlsrv.h"
#include "launcher/common/ctl.h"

int ck_ctlsrv_open(const char *job, char *path, size_t len)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)];
	struct stat st;
	char *slash;
	int fd;

	if (ck_ctl_path(job, path, len) < 0 || strlen(path) >= sizeof(sa.sun_path)) {
		ck_err_set("control socket path for job %s is too long", job);
		return -ENAMETOOLONG;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		ck_err_set("cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		ck_err_set("%s must be a directory of uid %u with mode 0700", dir, (unsigned)getuid());
		return -EPERM;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* A socket left by a killed ckrun of the same job is stale: a live one
	 * would answer. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int probe;
		if (errno != EADDRINUSE)
			goto fail;
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			ck_err_set("job %s is already running under another ckrun (%s)", job, path);
			return -EBUSY;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			goto fail;
	}
	chmod(path, 0600);
	if (listen(fd, 8) < 0)
		goto fail;
	return fd;
fail:
	ck_err_set("cannot listen on %s: %s", path, strerror(errno));
	close(fd);
	return -errno;
}

int ck_ctlsrv_accept(int lfd, char *cmd, size_t len)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	size_t got = 0;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != getuid()) {
		close(fd);
		return -EPERM;
	}
	{
		struct timeval tv = {5, 0};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	while (got + 1 < len) {
		ssize_t n = read(fd, cmd + got, 1);
		if (n <= 0 || cmd[got] == '\n')
			break;
		got++;
	}
	cmd[got] = 0;
	return fd;
}

void ck_ctlsrv_reply(int fd, const char *line)
{
	/* A client that went away gets nothing; the round happened anyway. */
	if (write(fd, line, strlen(line)) >= 0)
		(void)!write(fd, "\n", 1);
	close(fd);
}
