/* mp_daemon: a double-forked daemon that reports to its launcher through a FIFO.
 *
 * State exercised: the classic daemon start (fork; setsid in the child; fork
 * again; the intermediate child exits at once and is reaped by the launcher),
 * which leaves a grandchild in its own session and process group, whose
 * leader is dead, reparented away from the launcher (to init or a subreaper),
 * with its working directory at / and its standard descriptors on /dev/null.
 * The daemon opens a named FIFO (in a temporary directory) by path and writes
 * paced records into it; the launcher reads them and finishes when the FIFO
 * reaches EOF. The launcher never waits for the daemon (it is not its child).
 * A checkpoint sees two processes related only by the FIFO and a lifeline
 * pipe, in different sessions. If the launcher disappears (killed), the
 * daemon notices within one step (EOF on the lifeline, or EPIPE on the FIFO)
 * and exits without a trace, so it never outlives its job for long.
 * Only the launcher prints.
 * Usage: mp_daemon [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEP_MS 25

enum { HELLO = 1, DATA = 2, END = 3 };

struct rec {
	uint32_t type, seq;
	uint64_t val;
	int64_t sid, pgid;
	uint32_t flags, pad;
};

/* Flags of the HELLO record. */
#define F_SESSION_LEADER 1
#define F_GROUP_LEADER 2
#define F_REPARENTED 4
#define F_CWD_ROOT 8
#define F_STDIO_NULL 16

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static uint64_t step_value(uint64_t prev, long s)
{
	for (int i = 0; i < 20000; i++)
		prev = mix(prev + (uint64_t)s + (uint64_t)i);
	return prev;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = read(fd, (char *)p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return done == 0 ? 0 : -1;
		done += (size_t)r;
	}
	return 1;
}

static int is_devnull(int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat("/dev/null", &b) == 0 && a.st_rdev == b.st_rdev && S_ISCHR(a.st_mode);
}

/* The lifeline: readable (EOF) once the launcher is gone. Sleeps ms. */
static void pace_or_die(int life, int ms)
{
	struct pollfd p = { life, POLLIN, 0 };
	int r;

	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	if (r != 0)
		_exit(0);
}

static void daemon_main(const char *fifo, int life, pid_t launcher, pid_t first, long steps)
{
	struct rec r = { 0 };
	char cwd[64];
	int fd, nul;

	/* Wait until the first child is gone and we are reparented. */
	for (int i = 0; i < 5000 && getppid() == first; i++)
		pace_or_die(life, 1);
	if (chdir("/") != 0)
		_exit(40);
	umask(022);
	nul = open("/dev/null", O_RDWR);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0)
		_exit(41);
	if (nul > 2)
		close(nul);
	/* Succeeds only while the launcher holds the read end. */
	fd = open(fifo, O_WRONLY | O_NONBLOCK);
	if (fd < 0)
		_exit(42);
	fcntl(fd, F_SETFL, 0);

	r.type = HELLO;
	r.sid = getsid(0);
	r.pgid = getpgid(0);
	if (r.sid == getpid())
		r.flags |= F_SESSION_LEADER;
	if (r.pgid == getpid())
		r.flags |= F_GROUP_LEADER;
	if (getppid() != launcher && getppid() != first)
		r.flags |= F_REPARENTED;
	if (getcwd(cwd, sizeof(cwd)) && strcmp(cwd, "/") == 0)
		r.flags |= F_CWD_ROOT;
	if (is_devnull(0) && is_devnull(1) && is_devnull(2))
		r.flags |= F_STDIO_NULL;
	if (write_all(fd, &r, sizeof(r)))
		_exit(43);

	uint64_t v = 42, sum = 0;
	for (long s = 0; s < steps; s++) {
		pace_or_die(life, STEP_MS);
		v = step_value(v, s);
		sum = mix(sum ^ v);
		r = (struct rec){ DATA, (uint32_t)s, v, 0, 0, 0, 0 };
		if (write_all(fd, &r, sizeof(r)))
			_exit(44);
	}
	r = (struct rec){ END, (uint32_t)steps, sum, 0, 0, 0, 0 };
	if (write_all(fd, &r, sizeof(r)))
		_exit(45);
	close(fd);
	_exit(0);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long steps = (long)(130 * app_scale(argc, argv));
	char dir[4096], fifo[4200];
	int life[2], rd, hold, st, rc = 0;
	pid_t launcher = getpid(), first;
	struct rec r;

	if (steps < 10)
		steps = 10;
	snprintf(dir, sizeof(dir), "%s/mp_daemon.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp\n");
		return 1;
	}
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (mkfifo(fifo, 0600) != 0 || pipe(life) != 0) {
		printf("FAIL mkfifo/pipe\n");
		return 1;
	}
	/* A reader first (so that the writers' opens do not block), then our
	 * own writer, which keeps EOF away until the daemon has opened. */
	rd = open(fifo, O_RDONLY | O_NONBLOCK);
	hold = open(fifo, O_WRONLY);
	if (rd < 0 || hold < 0 || fcntl(rd, F_SETFL, 0) != 0) {
		printf("FAIL open fifo\n");
		return 1;
	}
	printf("mp_daemon: a daemon sends %ld records through a FIFO\n", steps);
	fflush(stdout);
	first = fork();
	if (first < 0) {
		printf("FAIL fork\n");
		return 1;
	}
	if (first == 0) {
		pid_t d, me = getpid();
		close(life[1]);
		close(rd);
		close(hold);
		if (setsid() < 0)
			_exit(1);
		d = fork();
		if (d < 0)
			_exit(2);
		if (d == 0)
			daemon_main(fifo, life[0], launcher, me, steps);
		_exit(7);
	}
	close(life[0]);
	while (waitpid(first, &st, 0) < 0)
		if (errno != EINTR) {
			printf("FAIL waitpid\n");
			return 1;
		}
	if (WIFEXITED(st))
		printf("first child: exited %d\n", WEXITSTATUS(st));
	else
		printf("first child: status %#x\n", st);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 7)
		rc = 1;

	if (read_all(rd, &r, sizeof(r)) != 1 || r.type != HELLO) {
		printf("FAIL no hello from the daemon\n");
		return 1;
	}
	close(hold); /* from now on, EOF when the daemon closes its end */
	printf("daemon: session %s, group %s, session leader %s, group leader %s\n",
	       r.sid == first ? "of the first child" : "OTHER", r.pgid == first ? "of the first child" : "OTHER",
	       r.flags & F_SESSION_LEADER ? "yes" : "no", r.flags & F_GROUP_LEADER ? "yes" : "no");
	printf("daemon: reparented %s, cwd / %s, stdio on /dev/null %s\n", r.flags & F_REPARENTED ? "yes" : "no",
	       r.flags & F_CWD_ROOT ? "yes" : "no", r.flags & F_STDIO_NULL ? "yes" : "no");
	if (r.sid != first || r.pgid != first || r.sid == getsid(0) ||
	    (r.flags & (F_SESSION_LEADER | F_GROUP_LEADER)) || (~r.flags & (F_REPARENTED | F_CWD_ROOT | F_STDIO_NULL))) {
		printf("FAIL daemon state\n");
		rc = 1;
	}

	uint64_t v = 42, sum = 0;
	long got = 0;
	int ended = 0, res;
	while ((res = read_all(rd, &r, sizeof(r))) == 1) {
		if (ended) {
			printf("FAIL record after the end\n");
			rc = 1;
			break;
		}
		if (r.type == END) {
			ended = 1;
			printf("end: %u records, checksum %016llx\n", r.seq, (unsigned long long)r.val);
			if (r.seq != (uint32_t)got || r.val != sum || got != steps) {
				printf("FAIL end record: daemon says %u/%016llx, launcher saw %ld/%016llx\n", r.seq,
				       (unsigned long long)r.val, got, (unsigned long long)sum);
				rc = 1;
			}
			continue;
		}
		v = step_value(v, got);
		if (r.type != DATA || r.seq != (uint32_t)got || r.val != v) {
			printf("FAIL record %ld: bad\n", got);
			rc = 1;
			break;
		}
		sum = mix(sum ^ v);
		got++;
		if (got % 10 == 0)
			printf("record %ld: %016llx\n", got, (unsigned long long)r.val);
	}
	if (res < 0) {
		printf("FAIL read fifo\n");
		rc = 1;
	}
	if (!ended) {
		printf("FAIL EOF without an end record after %ld records\n", got);
		rc = 1;
	}
	printf("fifo: EOF\n");
	close(rd);
	unlink(fifo);
	rmdir(dir);
	printf("mp_daemon: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
