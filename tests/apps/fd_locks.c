/* fd_locks: record locks and flock locks held across a checkpoint.
 *
 * State exercised: a POSIX write lock (F_SETLK) on bytes 0-9, an OFD read
 * lock (F_OFD_SETLK) on bytes 100-199 and a shared flock(2) lock, each
 * through its own open of one file. Each step a child (another process,
 * its own opens) checks that every lock is there and holds off what it
 * should (F_GETLK, F_OFD_GETLK, flock with LOCK_NB) and that nothing else
 * is locked; the parent checks its own /proc/self/fdinfo lock lines.
 * Usage: fd_locks [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char path[300];

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* 0 when the locks are what the parent (pid) set, else the check's number */
static int check_from_outside(pid_t pid)
{
	struct flock l;
	int fd = open(path, O_RDWR);

	if (fd < 0)
		return 1;
	memset(&l, 0, sizeof(l));
	l.l_type = F_WRLCK, l.l_whence = SEEK_SET, l.l_start = 0, l.l_len = 10;
	if (fcntl(fd, F_GETLK, &l) < 0 || l.l_type != F_WRLCK || l.l_pid != pid || l.l_start != 0 || l.l_len != 10)
		return 2;
	memset(&l, 0, sizeof(l));
	l.l_type = F_WRLCK, l.l_whence = SEEK_SET, l.l_start = 100, l.l_len = 100;
	if (fcntl(fd, F_OFD_GETLK, &l) < 0 || l.l_type != F_RDLCK || l.l_start != 100 || l.l_len != 100)
		return 3;
	memset(&l, 0, sizeof(l));
	l.l_type = F_WRLCK, l.l_whence = SEEK_SET, l.l_start = 20, l.l_len = 60;
	if (fcntl(fd, F_GETLK, &l) < 0 || l.l_type != F_UNLCK)
		return 4;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
		return 5;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0)
		return 6;
	close(fd);
	return 0;
}

static int has_lock(int fd, const char *kind, const char *type)
{
	char p[64], buf[4096], *l;
	int f, n;

	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
	if ((f = open(p, O_RDONLY)) < 0)
		return 0;
	n = (int)read(f, buf, sizeof(buf) - 1);
	close(f);
	buf[n > 0 ? n : 0] = 0;
	for (l = strstr(buf, "lock:"); l; l = strstr(l + 1, "lock:")) {
		char *e = strchr(l, '\n');
		if (e)
			*e = 0;
		if (strstr(l, kind) && strstr(l, type))
			return 1;
		if (e)
			*e = '\n';
	}
	return 0;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	char dir[256];
	struct flock l;
	int a, b, c, rc = 0;

	snprintf(dir, sizeof(dir), "%s/fd_locks.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/locked", dir);
	a = open(path, O_RDWR | O_CREAT, 0600);
	b = open(path, O_RDWR);
	c = open(path, O_RDONLY);
	if (a < 0 || b < 0 || c < 0 || ftruncate(a, 4096) < 0)
		return 1;
	memset(&l, 0, sizeof(l));
	l.l_type = F_WRLCK, l.l_whence = SEEK_SET, l.l_start = 0, l.l_len = 10;
	if (fcntl(a, F_SETLK, &l) < 0)
		return 1;
	memset(&l, 0, sizeof(l));
	l.l_type = F_RDLCK, l.l_whence = SEEK_SET, l.l_start = 100, l.l_len = 100;
	if (fcntl(b, F_OFD_SETLK, &l) < 0)
		return 1;
	if (flock(c, LOCK_SH) < 0)
		return 1;
	for (i = 0; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		pid_t pid = getpid(), ch = fork();
		int st;

		if (ch == 0)
			_exit(check_from_outside(pid));
		if (ch < 0 || waitpid(ch, &st, 0) != ch || !WIFEXITED(st)) {
			printf("FAIL checker at step %ld\n", i);
			rc = 1;
		} else if (WEXITSTATUS(st)) {
			printf("FAIL lock check %d at step %ld\n", WEXITSTATUS(st), i);
			rc = 1;
		} else if (!has_lock(a, "POSIX", "WRITE") || !has_lock(b, "OFDLCK", "READ") ||
			   !has_lock(c, "FLOCK", "READ")) {
			printf("FAIL fdinfo lock lines at step %ld\n", i);
			rc = 1;
		}
		nanosleep(&nap, NULL);
	}
	unlink(path);
	rmdir(dir);
	if (!rc)
		printf("fd_locks: %ld steps, POSIX, OFD and flock locks held\n", i);
	return rc;
}
