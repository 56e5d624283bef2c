/* fd_many: thousands of open descriptors in one process.
 *
 * State exercised: a program that raises its soft RLIMIT_NOFILE and holds
 * about 2900 descriptors: 2400 opens of 8 temporary files (each its own
 * description, at its own offset), 150 pipes holding 1 to 3 unread bytes
 * each, and 100 dup()s of a log file's descriptor (sharing its offset). Every
 * step it checks every descriptor's offset (or for a pipe the bytes waiting,
 * FIONREAD), moves every tenth file description on by one byte, and writes
 * a record through one of the dups (a log file's). At the end it reads
 * every pipe's bytes back. A checkpoint held at most 1024 descriptors per
 * process before: every round of this program was refused.
 * Usage: fd_many [SCALE [OPENS]]   (or CKPT_APP_SCALE; 1.0 = about 3 s;
 *        OPENS: the 2400 opens, fewer under a low limit) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NPATHS 8
#define NOPENS 2400
#define NPIPES 150
#define NDUPS 100
#define STEP_MS 20

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static int opens[NOPENS], pipes[NPIPES][2], dups[NDUPS], logfd = -1;
static off_t want[NOPENS];

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[4096], path[NPATHS][4200], logpath[4200];
	struct rlimit rl;
	long steps = (long)(150 * app_scale(argc, argv)), fails = 0, checks = 0;
	int rc = 0, nopens = argc > 2 ? atoi(argv[2]) : NOPENS;

	if (steps < 5)
		steps = 5;
	if (nopens < NPATHS || nopens > NOPENS)
		return 2;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1;
	if (rl.rlim_cur < 4096) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < (rlim_t)nopens + 2 * NPIPES + NDUPS + 16) {
		printf("fd_many: FAIL: the hard RLIMIT_NOFILE (%llu) is too low\n", (unsigned long long)rl.rlim_max);
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/fd_many.XXXXXX", tmp);
	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < NPATHS; i++) {
		int fd;
		snprintf(path[i], sizeof(path[i]), "%s/f%d", dir, i);
		fd = open(path[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
		/* 4 KiB of the file's number, so that every offset reads back */
		for (int k = 0; fd >= 0 && k < 4096; k++)
			if (write(fd, (char[]){ (char)('a' + i) }, 1) != 1)
				return 1;
		if (fd < 0 || close(fd) != 0)
			return 1;
	}
	for (int i = 0; i < nopens; i++) {
		opens[i] = open(path[i % NPATHS], (i & 1) ? O_RDWR : O_RDONLY | O_CLOEXEC);
		want[i] = i % 997;
		if (opens[i] < 0 || lseek(opens[i], want[i], SEEK_SET) != want[i]) {
			printf("fd_many: FAIL open %d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	for (int i = 0; i < NPIPES; i++) {
		if (pipe(pipes[i]) != 0 || write(pipes[i][1], "xyz", 1 + i % 3) != 1 + i % 3) {
			printf("fd_many: FAIL pipe %d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	if ((logfd = open(logpath, O_CREAT | O_WRONLY | O_TRUNC, 0600)) < 0)
		return 1;
	for (int i = 0; i < NDUPS; i++)
		if ((dups[i] = dup(logfd)) < 0)
			return 1;
	printf("fd_many: %d opens of %d files, %d pipes, %d dups; %ld steps\n", nopens, NPATHS, NPIPES, NDUPS, steps);
	fflush(stdout);

	for (long s = 0; s < steps; s++) {
		for (int i = 0; i < nopens; i++) {
			off_t o = lseek(opens[i], 0, SEEK_CUR);
			fails += o != want[i];
			checks++;
			if (i % 10 == s % 10) {
				char c;
				fails += pread(opens[i], &c, 1, o) != 1 || c != 'a' + i % NPATHS;
				want[i] = lseek(opens[i], 1, SEEK_CUR);
			}
		}
		for (int i = 0; i < NPIPES; i++) {
			int n = -1;
			fails += ioctl(pipes[i][0], FIONREAD, &n) != 0 || n != 1 + i % 3;
			checks++;
		}
		for (int i = 0; i < NDUPS; i++) {
			fails += lseek(dups[i], 0, SEEK_CUR) != 3 * s;
			checks++;
		}
		/* a record through a dup: every dup and the log's own move */
		fails += write(dups[s % NDUPS], "rec", 3) != 3;
		fails += lseek(logfd, 0, SEEK_CUR) != 3 * (s + 1);
		sleep_ms(STEP_MS);
	}
	for (int i = 0; i < NPIPES; i++) {
		char b[4];
		close(pipes[i][1]);
		fails += read(pipes[i][0], b, sizeof(b)) != 1 + i % 3 || memcmp(b, "xyz", (size_t)(1 + i % 3));
		fails += read(pipes[i][0], b, sizeof(b)) != 0;
		close(pipes[i][0]);
	}
	for (int i = 0; i < nopens; i++)
		close(opens[i]);
	for (int i = 0; i < NDUPS; i++)
		close(dups[i]);
	close(logfd);
	for (int i = 0; i < NPATHS; i++)
		unlink(path[i]);
	unlink(logpath);
	rmdir(dir);
	printf("fd_many: %ld checks, %ld failures\n", checks, fails);
	if (fails)
		rc = 1;
	printf("fd_many: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
