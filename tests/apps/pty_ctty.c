/* pty_ctty: a pseudo-terminal as the controlling terminal of a session
 * the program made.
 *
 * State exercised: the main process makes a pair (posix_openpt) and sets
 * its termios (canonical, ISIG with ^C, NOFLSH, no echo, ONLCR); child L
 * calls setsid() and takes the slave (TIOCSCTTY); L's child G gets a
 * process group of its own, which L makes the terminal's foreground group
 * (tcsetpgrp). Each step L checks that it leads the terminal's session
 * (tcgetsid), that the foreground group is G's (tcgetpgrp), that
 * /proc/self/stat names the slave as its terminal and that /dev/tty opens
 * it; then the main process writes ^C to the master, which only the
 * kernel's idea of the foreground group brings to G as SIGINT, and a line
 * that G reads through the terminal and answers; G checks the same of its
 * own (its terminal inherited from L). No byte stays unread between steps.
 * Usage: pty_ctty [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *what, long step)
{
	printf("FAIL %s at step %ld (errno %d)\n", what, step, errno);
	fflush(stdout);
	return 1;
}

/* Exactly n bytes, or -1 after 20 s without any (a check that failed
 * elsewhere must fail here, not hang). */
static int readn(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 20000) == 0)
			return -1;
		r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int writes(int fd, const char *s)
{
	size_t n = strlen(s);

	for (size_t done = 0; done < n;) {
		ssize_t r = write(fd, s + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* The calling process's controlling terminal is the device of s:
 * /proc/self/stat's tty_nr, and /dev/tty opens a terminal of the same
 * session and foreground group. */
static int ctty_is(int s)
{
	struct stat a;
	char buf[1024], *p;
	unsigned tty = 0;
	int f = open("/proc/self/stat", O_RDONLY), d;
	ssize_t n;

	if (f < 0)
		return 0;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	buf[n > 0 ? n : 0] = 0;
	if (!(p = strrchr(buf, ')')) || sscanf(p + 2, "%*c %*d %*d %*d %u", &tty) != 1 || fstat(s, &a) < 0)
		return 0;
	if (major(a.st_rdev) != ((tty >> 8) & 0xfff) || minor(a.st_rdev) != ((tty & 0xff) | ((tty >> 12) & 0xfff00)))
		return 0;
	/* /dev/tty's own inode is 5:0: ask the terminal behind it */
	if ((d = open("/dev/tty", O_RDWR | O_NOCTTY)) < 0)
		return 0;
	n = tcgetsid(d) == tcgetsid(s) && tcgetpgrp(d) == tcgetpgrp(s);
	close(d);
	return n;
}

/* G: the foreground group's process. */
static int run_g(int s, pid_t leader)
{
	sigset_t set;
	char buf[64], out[80];

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	/* Until L has made our group the foreground one: a read before that
	 * fails (EIO, SIGTTIN ignored), and on a loaded machine G got there
	 * first (20 s at most) */
	for (int i = 0; tcgetpgrp(s) != getpgrp(); i++) {
		struct timespec ms = {0, 1000000};

		if (i > 20000)
			return 5;
		nanosleep(&ms, NULL);
	}
	for (;;) {
		struct timespec tmo = {20, 0};
		ssize_t n = read(s, buf, sizeof(buf) - 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 1;
		buf[n] = 0;
		if (!strcmp(buf, "end\n"))
			return 0;
		/* the ^C written before the line, as a signal to our group */
		if (sigtimedwait(&set, NULL, &tmo) != SIGINT)
			return 2;
		if (tcgetpgrp(s) != getpgrp() || tcgetsid(s) != leader || getsid(0) != leader || !ctty_is(s))
			return 3;
		snprintf(out, sizeof(out), "G %s", buf);
		if (writes(s, out) < 0)
			return 4;
	}
}

/* L: the session's leader; answers 'k' per check asked on its pipe. */
static int run_l(int s, int ask, int ans)
{
	sigset_t set;
	pid_t g;
	char c;
	int st;

	if (setsid() < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
		return 10;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGTTOU, SIG_IGN);
	g = fork();
	if (g < 0)
		return 11;
	if (g == 0) {
		close(ask);
		close(ans);
		setpgid(0, 0);
		/* out of the foreground a read fails (EIO) instead of stopping us */
		signal(SIGTTIN, SIG_IGN);
		_exit(run_g(s, getppid()));
	}
	if (setpgid(g, g) < 0 && errno != EACCES)
		return 12;
	if (tcsetpgrp(s, g) < 0)
		return 13;
	if (write(ans, "r", 1) != 1)
		return 14;
	while (read(ask, &c, 1) == 1) {
		c = tcgetsid(s) == getpid() && getsid(0) == getpid() && tcgetpgrp(s) == g && ctty_is(s) ? 'k' : 'F';
		if (write(ans, &c, 1) != 1)
			return 15;
	}
	if (waitpid(g, &st, 0) != g)
		return 16;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 17;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	int m, s, ask[2], ans[2], st, rc = 0;
	struct termios t;
	char buf[80], want[80], c;
	pid_t l;

	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || (s = open(ptsname(m), O_RDWR | O_NOCTTY)) < 0)
		return fail("posix_openpt", 0);
	if (tcgetattr(s, &t) < 0)
		return fail("tcgetattr", 0);
	t.c_iflag = ICRNL;
	t.c_oflag = OPOST | ONLCR;
	t.c_lflag = ICANON | ISIG | NOFLSH | IEXTEN;
	t.c_cc[VINTR] = 0x03;
	if (tcsetattr(s, TCSANOW, &t) < 0)
		return fail("tcsetattr", 0);
	if (pipe(ask) < 0 || pipe(ans) < 0)
		return fail("pipe", 0);
	l = fork();
	if (l < 0)
		return fail("fork", 0);
	if (l == 0) {
		close(m);
		close(ask[1]);
		close(ans[0]);
		_exit(run_l(s, ask[0], ans[1]));
	}
	close(ask[0]);
	close(ans[1]);
	if (read(ans[0], &c, 1) != 1 || c != 'r')
		return fail("session set up", 0);

	for (i = 0; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		size_t n;

		if (write(ask[1], "c", 1) != 1 || read(ans[0], &c, 1) != 1 || c != 'k') {
			rc = fail("leader's terminal, session and foreground group", i);
			break;
		}
		n = (size_t)snprintf(want, sizeof(want), "line %ld\r", i);
		if (writes(m, "\003") < 0 || writes(m, want) < 0) {
			rc = fail("write to the master", i);
			break;
		}
		/* "G line N\n" through ONLCR */
		snprintf(want, sizeof(want), "G line %ld\r\n", i);
		n = strlen(want);
		if (readn(m, buf, n) < 0 || memcmp(buf, want, n)) {
			rc = fail("the foreground process's answer", i);
			break;
		}
		nanosleep(&nap, NULL);
	}
	close(ask[1]);
	if (writes(m, "end\r") < 0)
		rc = rc ? rc : fail("end", i);
	waitpid(l, &st, 0);
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		printf("FAIL session status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		rc = 1;
	}
	if (!rc)
		printf("pty_ctty: %ld steps, controlling terminal, session and foreground group as set\n", i);
	return rc;
}
