/* fdhide: a program that looks at and manages its own descriptor table
 * must see exactly what it would see without ckrun (libckpt's control
 * channel, fd 1000 by default, is no business of the job's).
 *
 * State exercised: listings of /proc/self/fd, /dev/fd and /proc/PID/fd
 * (opendir/readdir), each checked against the set of descriptors the
 * program knows it holds; close_range and closefrom over ranges that cover
 * 1000; close(1000) while it is not open (EBADF); F_DUPFD with minimum
 * 1000 (must give 1000) and F_DUPFD/F_DUPFD_CLOEXEC with minimum 999; a
 * file of its own at 1000 (dup2), written and read back through 1000 at
 * every later step, its descriptor and status flags checked. Checkpoints
 * land between the steps, before and after the closes and the dup2, so a
 * restore must give the job its own 1000 back.
 * Exits 1 (after printing FAIL lines) when a listing differs from the
 * set it expects or a descriptor number is not the one a bare run gets.
 * Usage: fdhide [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXFD 1100

static char dir[256];
static unsigned char held[MAXFD]; /* what the program believes it has open */
static int bad;

__attribute__((format(printf, 1, 2))) static void mismatch(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FAIL ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	bad = 1;
}

/* Lists PATH (an fd directory of this process), prints the numbers and
 * checks them against held[] (0-2 are always expected). */
static void list(const char *label, const char *path, int check, int from)
{
	DIR *d = opendir(path);
	unsigned char seen[MAXFD] = {0};
	struct dirent *e;
	int n = 0, own;

	if (!d) {
		printf("%s: opendir %s failed (errno %d)\n", label, path, errno);
		bad = 1;
		return;
	}
	own = dirfd(d);
	printf("%s:", label);
	while ((e = readdir(d))) {
		char *end;
		long fd;
		if (e->d_name[0] == '.')
			continue;
		fd = strtol(e->d_name, &end, 10);
		if (*end || fd < 0) {
			printf(" ?%s", e->d_name);
			bad = 1;
			continue;
		}
		if (fd == own || fd < from)
			continue; /* the listing's own descriptor; those not asked for */
		printf(" %ld", fd);
		n++;
		if (fd < MAXFD)
			seen[fd] = 1;
		else if (check)
			mismatch("descriptor %ld listed (limit %d)", fd, MAXFD);
	}
	printf(" (%d)\n", n);
	closedir(d);
	if (!check)
		return;
	for (int fd = 0; fd < MAXFD; fd++) {
		int want = fd < 3 || held[fd];
		if (seen[fd] != want)
			mismatch("descriptor %d %s", fd, want ? "open but not listed" : "listed but not open");
	}
}

static void list_all(int step, int check, int from)
{
	char a[64], b[64], c[64];

	snprintf(a, sizeof(a), "step %d /proc/self/fd", step);
	snprintf(b, sizeof(b), "step %d /dev/fd", step);
	snprintf(c, sizeof(c), "/proc/%d/fd", (int)getpid());
	list(a, "/proc/self/fd", check, from);
	list(b, "/dev/fd", check, from);
	snprintf(a, sizeof(a), "step %d /proc/PID/fd", step);
	list(a, c, check, from);
}

static int open_file(const char *name, int flags)
{
	char p[320];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, flags | O_CREAT, 0600);
	if (fd < 0 || fd >= MAXFD) {
		printf("FAIL open %s (errno %d)\n", name, errno);
		exit(2);
	}
	held[fd] = 1;
	return fd;
}

static void expect_fd(const char *what, long got, long want)
{
	printf("%s: %ld\n", what, got);
	if (got != want)
		mismatch("got %ld, a bare run gets %ld", got, want);
	if (got >= 0 && got < MAXFD)
		held[got] = 1;
}

static void close_known(int lo, int hi)
{
	for (int fd = lo; fd <= hi && fd < MAXFD; fd++)
		held[fd] = 0;
}

/* Our file at 1000: flags checked, one line appended, the last line read
 * back through 1000 itself. */
static uint64_t use_1000(int step, uint64_t acc)
{
	char line[64], back[64];
	int n = snprintf(line, sizeof(line), "line %04d %016llx\n", step, (unsigned long long)acc);
	int fdflags = fcntl(1000, F_GETFD), flflags = fcntl(1000, F_GETFL);
	off_t end;

	if (fdflags != 0 || (flflags & O_ACCMODE) != O_RDWR || !(flflags & O_APPEND))
		mismatch("fd 1000 flags %d/%#x (expected 0 and O_RDWR|O_APPEND)", fdflags, flflags);
	if (write(1000, line, (size_t)n) != n)
		mismatch("write through 1000 failed (errno %d)", errno);
	end = lseek(1000, 0, SEEK_END);
	if (end < n || pread(1000, back, (size_t)n, end - n) != n || memcmp(back, line, (size_t)n))
		mismatch("read back through 1000 failed at offset %ld (errno %d)", (long)end, errno);
	for (int i = 0; i < n; i++)
		acc = acc * 1099511628211ull + (unsigned char)back[i];
	return acc;
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s ? atof(s) : 1.0;
	int steps = (int)(30 * (scale > 0 ? scale : 1.0));
	uint64_t acc = 1469598103934665603ull;
	int have1000 = 0, a;

	if (steps < 20)
		steps = 20;
	snprintf(dir, sizeof(dir), "%s/fdhide.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	printf("fdhide: %d steps\n", steps);
	for (int i = 0; i < steps; i++) {
		for (int k = 0; k < 100000; k++)
			acc ^= acc << 13, acc ^= acc >> 7, acc ^= acc << 17;
		if (i == 0) {
			list_all(i, 0, 900); /* from outside: only high numbers (a bare run has none) */
		} else if (i == 1) {
			long r = close_range(3, ~0u, 0);
			printf("close_range(3, ~0): %ld\n", r);
			close_known(3, MAXFD - 1);
			errno = 0;
			r = close(1000);
			printf("close(1000): %ld errno %s\n", r, errno == EBADF ? "EBADF" : "other");
			if (r != -1 || errno != EBADF)
				mismatch("close(1000) gave %ld errno %d (expected -1 EBADF)", r, errno);
			list_all(i, 1, 0);
		} else if (i == 3) {
			a = open_file("a", O_RDWR);
			expect_fd("fcntl(a, F_DUPFD, 1000)", fcntl(a, F_DUPFD, 1000), 1000);
			printf("F_GETFD of 1000: %d\n", fcntl(1000, F_GETFD));
			list_all(i, 1, 0);
			close(1000);
			held[1000] = 0;
			close(a);
			held[a] = 0;
			list_all(i, 1, 0);
		} else if (i == 4) {
			open_file("b", O_RDONLY);
			open_file("c", O_RDONLY);
			list_all(i, 1, 0);
			closefrom(3);
			close_known(3, MAXFD - 1);
			list_all(i, 1, 0);
		} else if (i == 6) {
			a = open_file("own1000", O_RDWR | O_APPEND);
			expect_fd("dup2(own, 1000)", dup2(a, 1000), 1000);
			close(a);
			held[a] = 0;
			have1000 = 1;
			printf("fd 1000: F_GETFD %d, access mode %s\n", fcntl(1000, F_GETFD),
			       (fcntl(1000, F_GETFL) & O_ACCMODE) == O_RDWR ? "O_RDWR" : "other");
			list_all(i, 1, 0);
		} else if (i == steps / 2) {
			expect_fd("fcntl(1000, F_DUPFD, 999)", fcntl(1000, F_DUPFD, 999), 999);
			expect_fd("fcntl(1000, F_DUPFD_CLOEXEC, 999)", fcntl(1000, F_DUPFD_CLOEXEC, 999), 1001);
			printf("F_GETFD of 999, 1001: %d %d\n", fcntl(999, F_GETFD), fcntl(1001, F_GETFD));
			list_all(i, 1, 0);
			close(999);
			held[999] = 0;
		} else if (i == steps - 4) {
			long r = close_range(900, 1100, 0);
			printf("close_range(900, 1100): %ld\n", r);
			close_known(900, 1100);
			have1000 = 0;
			list_all(i, 1, 0);
		} else if (i == steps - 3) {
			a = open_file("own1000", O_RDWR | O_APPEND);
			expect_fd("dup3(own, 1000, 0)", dup3(a, 1000, 0), 1000);
			close(a);
			held[a] = 0;
			have1000 = 1;
			list_all(i, 1, 0);
		} else if (i % 5 == 0) {
			list_all(i, 1, 0);
		}
		if (have1000)
			acc = use_1000(i, acc);
		printf("step %d: %016llx\n", i, (unsigned long long)acc);
		fflush(stdout);
		usleep(100000);
	}
	closefrom(3);
	close_known(3, MAXFD - 1);
	list_all(steps, 1, 0);
	{
		char p[320];
		snprintf(p, sizeof(p), "%s/a", dir), unlink(p);
		snprintf(p, sizeof(p), "%s/b", dir), unlink(p);
		snprintf(p, sizeof(p), "%s/c", dir), unlink(p);
		snprintf(p, sizeof(p), "%s/own1000", dir), unlink(p);
		rmdir(dir);
	}
	printf("final %016llx%s\n", (unsigned long long)acc, bad ? " (FAIL above)" : "");
	return bad;
}
