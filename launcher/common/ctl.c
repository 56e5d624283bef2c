/* Control socket client and socket directory checks. */
#include "launcher/common/ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/chunk.h"
#include "launcher/image/manifest.h"

int ck_ctl_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/ckrun", xdg);
	else
		n = snprintf(buf, len, "/tmp/ckrun-%u", (unsigned)getuid());
	if (n < 0 || (size_t)n >= len) {
		ck_err_set("control socket directory: path too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

int ck_ctl_path(const char *job, char *buf, size_t len)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)];
	int n, rc;

	if (!ck_job_name_valid(job)) {
		ck_err_set("invalid job name \"%s\"", job ? job : "");
		return -EINVAL;
	}
	rc = ck_ctl_dir(dir, sizeof(dir));
	if (rc < 0)
		return rc;
	n = snprintf(buf, len, "%s/%s.sock", dir, job);
	if (n >= 0 && (size_t)n < len && (size_t)n < sizeof(sa.sun_path))
		return 0;
	/* A long name does not fit a socket's path (108 bytes): a short name
	 * made from the job's, the same in ckrun and ckpt. */
	{
		uint8_t h[CK_HASH_LEN];
		ck_sha256(job, strlen(job), h);
		n = snprintf(buf, len, "%s/h-%02x%02x%02x%02x%02x%02x%02x%02x.sock", dir, h[0], h[1], h[2], h[3], h[4],
			     h[5], h[6], h[7]);
	}
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(sa.sun_path)) {
		ck_err_set("control socket of job %s: directory %s is too long for a socket's path", job, dir);
		return -ENAMETOOLONG;
	}
	return 0;
}

int ck_ctl_dir_check(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st) < 0) {
		int rc = -errno;

		ck_err_set("control socket directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	/* Anyone who could write here could plant a socket that impersonates
	 * a job, so accept only our own private directory. */
	if (!S_ISDIR(st.st_mode)) {
		ck_err_set("control socket directory %s: not a directory; refusing to use it", dir);
		return -EPERM;
	}
	if (st.st_uid != getuid()) {
		ck_err_set("control socket directory %s: owned by uid %u, not %u; refusing to use it", dir,
			   (unsigned)st.st_uid, (unsigned)getuid());
		return -EPERM;
	}
	if ((st.st_mode & 07777) != 0700) {
		ck_err_set("control socket directory %s: mode %04o, expected 0700; refusing to use it", dir,
			   (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

int ck_ctl_dir_prepare(char *dir, size_t len)
{
	int rc = ck_ctl_dir(dir, len);

	if (rc < 0)
		return rc;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		ck_err_set("control socket directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	return ck_ctl_dir_check(dir);
}

int ck_ctl_request(const char *job, const char *cmd, char *reply, size_t len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[sizeof(sa.sun_path)], line[1024], *nl;
	size_t got = 0;
	int fd = -1, rc;

	if (len)
		reply[0] = 0;
	if (!cmd || !*cmd || strchr(cmd, '\n') || strlen(cmd) > 256) {
		ck_err_set("control request: invalid command");
		return -EINVAL;
	}
	rc = ck_ctl_path(job, sa.sun_path, sizeof(sa.sun_path));
	if (rc < 0)
		return rc;
	rc = ck_ctl_dir(dir, sizeof(dir));
	if (rc == 0)
		rc = ck_ctl_dir_check(dir);
	if (rc == -ENOENT) {
		ck_err_set("job %s is not running here (no control socket %s)", job, sa.sun_path);
		return rc;
	}
	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		ck_err_set("control socket of job %s: %s", job, strerror(-rc));
		return rc;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		if (rc == -ENOENT || rc == -ECONNREFUSED)
			ck_err_set("job %s is not running here (no one listens on %s)", job, sa.sun_path);
		else
			ck_err_set("control socket %s: connect: %s", sa.sun_path, strerror(-rc));
		goto out;
	}
	snprintf(line, sizeof(line), "%s\n", cmd);
	if (send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line)) {
		rc = -errno;
		ck_err_set("control socket %s: send: %s", sa.sun_path, strerror(-rc));
		goto out;
	}
	/* A checkpoint may take minutes: wait for the line however long. */
	for (;;) {
		ssize_t n = recv(fd, line + got, sizeof(line) - 1 - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			ck_err_set("control socket %s: receive: %s", sa.sun_path, strerror(-rc));
			goto out;
		}
		got += (size_t)n;
		line[got] = 0;
		nl = strchr(line, '\n');
		if (nl || n == 0 || got == sizeof(line) - 1)
			break;
	}
	if (!nl) {
		rc = -EPROTO;
		ck_err_set("job %s: %s", job, got ? "control reply without end of line" : "ckrun closed the connection without a reply");
		goto out;
	}
	*nl = 0;
	if (!strncmp(line, "ok", 2) && (line[2] == 0 || line[2] == ' ')) {
		snprintf(reply, len, "%s", line[2] ? line + 3 : "");
		rc = 0;
	} else if (!strncmp(line, "error", 5) && (line[5] == 0 || line[5] == ' ')) {
		snprintf(reply, len, "%s", line[5] ? line + 6 : "");
		ck_err_set("job %s: %s failed: %s", job, cmd, line[5] ? line + 6 : "no reason given");
		rc = -EREMOTEIO;
	} else {
		ck_err_set("job %s: unexpected control reply \"%.100s\"", job, line);
		rc = -EPROTO;
	}
out:
	close(fd);
	return rc;
}
