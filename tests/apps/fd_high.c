/* fd_high: descriptors at high numbers, far above the usual ones.
 *
 * State exercised: a program that raises its RLIMIT_NOFILE and keeps files
 * and a pipe's ends at numbers 1001, 1002, 1099, 1100, 1101, 2047/2048
 * (the pipe), 4095 and its soft limit less one (up to 20000), with
 * O_CLOEXEC on some, /proc/self/status at 1000 (libckpt's channel's own
 * number, which a restore opens again in the process itself), and two
 * shared anonymous mappings; a forked child
 * inherits them and adds its own at 3000. Each step both write a record
 * through each file and check, for every number, that it is the same file
 * (inode), at the offset its writes put it, with its close-on-exec flag;
 * the parent writes the step into both mappings and passes a byte through
 * the pipe, and the child checks the mappings when it reads the byte.
 * A restore that placed its descriptors through a fixed parking area above
 * 1100 failed on every checkpoint of this program ("a saved descriptor
 * number collides with the restorer's"); one that handed the restorer the
 * shared mappings' objects at 1001 and up closed the program's own 1001
 * and 1002 (EBADF after the restore); one whose process opened the /proc
 * file again onto its channel's number lost the channel (the restore
 * failed: "a restored process exited").
 * Usage: fd_high [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NFILES 7

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *who, const char *what, int fd, long step)
{
	printf("FAIL %s: %s (descriptor %d) at step %ld (errno %d)\n", who, what, fd, step, errno);
	fflush(stdout);
	return 1;
}

struct hf {
	int fd, cloexec;
	ino_t ino;
	off_t off;
};

static int place(struct hf *h, const char *path, int fd, int cloexec)
{
	int t = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	struct stat st;

	if (t < 0 || dup3(t, fd, cloexec ? O_CLOEXEC : 0) != fd || close(t) < 0 || fstat(fd, &st) < 0)
		return -1;
	h->fd = fd;
	h->cloexec = cloexec;
	h->ino = st.st_ino;
	h->off = 0;
	return 0;
}

/* Every file the same as it was, then one record more through each. */
static int step(const char *who, struct hf *h, int n, long i)
{
	char rec[32];
	int len = snprintf(rec, sizeof(rec), "%s %06ld\n", who, i);

	for (int k = 0; k < n; k++) {
		struct stat st;
		int fl = fcntl(h[k].fd, F_GETFD);

		if (fstat(h[k].fd, &st) < 0 || st.st_ino != h[k].ino)
			return fail(who, "not the same file", h[k].fd, i);
		if (fl < 0 || !!(fl & FD_CLOEXEC) != h[k].cloexec)
			return fail(who, "close-on-exec flag", h[k].fd, i);
		if (lseek(h[k].fd, 0, SEEK_CUR) != h[k].off)
			return fail(who, "offset", h[k].fd, i);
		if (write(h[k].fd, rec, (size_t)len) != len)
			return fail(who, "write", h[k].fd, i);
		h[k].off += len;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	struct timespec nap = {0, 50 * 1000 * 1000};
	struct rlimit rl;
	struct hf h[NFILES + 1];
	char dir[] = "/tmp/fd_high.XXXXXX", path[64];
	int nums[NFILES] = {1001, 1002, 1099, 1100, 1101, 4095, 0}, p[2], st = 0, rc = 0;
	pid_t kid;
	volatile long *sh[2];

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return fail("main", "getrlimit", -1, -1);
	rl.rlim_cur = rl.rlim_max < 20000 ? rl.rlim_max : 20000;
	if (rl.rlim_cur < 8192 || setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		printf("fd_high: RLIMIT_NOFILE's hard limit is under 8192: nothing tested\n");
		return 0;
	}
	nums[NFILES - 1] = (int)rl.rlim_cur - 1;
	if (!mkdtemp(dir))
		return fail("main", "mkdtemp", -1, -1);
	for (int k = 0; k < NFILES; k++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, k);
		if (place(&h[k], path, nums[k], k & 1) < 0)
			return fail("main", "place", nums[k], -1);
	}
	{
		int pf = open("/proc/self/status", O_RDONLY);
		if (pf < 0 || dup2(pf, 1000) != 1000 || close(pf) < 0)
			return fail("main", "/proc/self/status", 1000, -1);
	}
	if (pipe(p) < 0 || dup2(p[0], 2047) != 2047 || dup2(p[1], 2048) != 2048 || close(p[0]) || close(p[1]))
		return fail("main", "pipe", 2047, -1);
	for (int k = 0; k < 2; k++) {
		void *a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED)
			return fail("main", "mmap", -1, -1);
		sh[k] = a;
		*sh[k] = -1;
	}
	kid = fork();
	if (kid < 0)
		return fail("main", "fork", -1, -1);
	if (kid == 0) {
		/* the child: the inherited files, its own at 3000; it reads
		 * the parent's byte from the pipe each step */
		snprintf(path, sizeof(path), "%s/child", dir);
		if (place(&h[NFILES], path, 3000, 0) < 0)
			_exit(fail("child", "place", 3000, -1));
		for (int k = 0; k < NFILES; k++)
			h[k].off = 0; /* shared descriptions: the parent's writes move them too */
		for (i = 0; i < steps; i++) {
			char c;
			if (read(2047, &c, 1) != 1 || c != (char)('a' + i % 26))
				_exit(fail("child", "the pipe's byte", 2047, i));
			if (*sh[0] < i || *sh[1] < i + 1000) /* the parent may be a step on */
				_exit(fail("child", "the shared mappings", -1, i));
			if (step("child", &h[NFILES], 1, i))
				_exit(1);
		}
		_exit(0);
	}
	close(2047);
	for (i = 0; i < steps && !rc; i++) {
		char c = (char)('a' + i % 26);
		rc = step("parent", h, NFILES, i);
		if (!rc && (pread(1000, path, 5, 0) != 5 || memcmp(path, "Name:", 5)))
			rc = fail("parent", "/proc/self/status", 1000, i);
		*sh[0] = i;
		*sh[1] = i + 1000;
		if (!rc && write(2048, &c, 1) != 1)
			rc = fail("parent", "the pipe", 2048, i);
		nanosleep(&nap, NULL);
	}
	close(2048);
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st))
		rc = rc ? rc : fail("parent", "the child failed", -1, i);
	for (int k = 0; k < NFILES; k++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, k);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/child", dir);
	unlink(path);
	rmdir(dir);
	if (!rc)
		printf("fd_high: %ld steps, /proc/self/status at 1000, files at 1001, 1002, 1099, 1100, 1101, 4095 and the limit less one, a pipe at 2047/2048, a child's at 3000, shared mappings\n",
		       i);
	return rc;
}
