/* fd_paths: descriptors that name things rather than hold data.
 *
 * State exercised: /proc/self/status and /proc/self/stat kept open (they
 * must name this process after a restore, read again from offset 0),
 * /proc/CHILD/status of a child process of the job, and a symlink opened
 * with O_PATH|O_NOFOLLOW (the link itself: fstat says S_IFLNK, readlinkat
 * on the descriptor gives its target). Each step checks all of them.
 * Usage: fd_paths [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* The "Pid:" of a status file read again from its start, -1 if none. */
static long status_pid(int fd)
{
	char buf[4096], *p;
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) != 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "\nPid:");
	return p ? strtol(p + 5, NULL, 10) : -1;
}

static long stat_pid(int fd)
{
	char buf[512];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	char dir[256], link[300], p[64], target[64];
	int self, sstat, other, lnk, rc = 0, st;
	pid_t child;

	snprintf(dir, sizeof(dir), "%s/fd_paths.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(link, sizeof(link), "%s/link", dir);
	if (symlink("no/such/target", link) < 0)
		return 1;
	lnk = open(link, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	self = open("/proc/self/status", O_RDONLY);
	sstat = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	child = fork();
	if (child == 0) {
		for (;;)
			pause();
	}
	snprintf(p, sizeof(p), "/proc/%d/status", (int)child);
	other = open(p, O_RDONLY);
	if (lnk < 0 || self < 0 || sstat < 0 || other < 0 || child < 0)
		return 1;
	for (i = 0; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		struct stat sb;
		ssize_t n;

		if (status_pid(self) != getpid() || stat_pid(sstat) != getpid()) {
			printf("FAIL /proc/self files name another process at step %ld\n", i);
			rc = 1;
		} else if (status_pid(other) != child) {
			printf("FAIL /proc/CHILD/status names another process at step %ld\n", i);
			rc = 1;
		} else if (fstat(lnk, &sb) < 0 || !S_ISLNK(sb.st_mode) ||
			   (n = readlinkat(lnk, "", target, sizeof(target) - 1)) != 14 || memcmp(target, "no/such/target", 14) ||
			   !(fcntl(lnk, F_GETFL) & O_PATH) || !(fcntl(lnk, F_GETFD) & FD_CLOEXEC)) {
			printf("FAIL O_PATH symlink at step %ld (errno %d)\n", i, errno);
			rc = 1;
		}
		nanosleep(&nap, NULL);
	}
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	unlink(link);
	rmdir(dir);
	if (!rc)
		printf("fd_paths: %ld steps, /proc files and an O_PATH symlink as opened\n", i);
	return rc;
}
