/* pty_queued: bytes left waiting in pseudo-terminal pairs the program made.
 *
 * State exercised: pair A, canonical with the kernel's default termios
 * (ICANON, ECHO, ECHOCTL, ICRNL, OPOST|ONLCR): each step the master writes
 * two whole lines, a line ended by the EOF character, an EOF alone, a line
 * holding a newline made literal by ^V (VLNEXT) ended by EOF, and a line
 * not ended yet; the slave writes a line the master has not read.
 * Pair B, raw (cfmakeraw), with bytes of every kind waiting both ways (NUL,
 * 0xff, control characters, a CR). Then the step waits (the checkpoint's
 * window) and checks: the master reads exactly the echo of the input and
 * the slave's line (ONLCR applied once), the slave reads one line per read,
 * the EOF line without its end, a read of 0 for the EOF, nothing for the
 * line not ended until the master ends it; B's bytes come back exact; and
 * both slaves' termios are as set. A restore that loses, doubles,
 * reorders or re-processes a byte fails.
 * Usage: pty_queued [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s)
 *        pty_queued hold      one step that waits 3 s (tests/suite/33-pty.sh) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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

static int writen(int fd, const void *buf, size_t n)
{
	return write(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

/* Exactly n bytes (a tty read may return fewer). */
static int readn(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Nothing more to read on fd, after a moment for the line discipline. */
static int empty(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 20) == 0;
}

/* One read of the slave in canonical mode: one line. */
static int line_is(int fd, const char *want, size_t n)
{
	char buf[256];
	ssize_t r;

	do
		r = read(fd, buf, sizeof(buf));
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n && !memcmp(buf, want, n);
}

/* The line discipline echoes input in a work of its own, later: the
 * slave's own output waits until the echo of n bytes is at the master, so
 * the master's bytes come in one order. */
static int echo_in(int m, size_t n)
{
	for (int k = 0; k < 2000; k++) {
		int q = 0;
		struct timespec ms = {0, 1000 * 1000};

		if (ioctl(m, FIONREAD, &q) < 0)
			return -1;
		if ((size_t)q >= n)
			return 0;
		nanosleep(&ms, NULL);
	}
	errno = ETIMEDOUT;
	return -1;
}

static int same_termios(int fd, const struct termios *t)
{
	struct termios now;

	return tcgetattr(fd, &now) == 0 && now.c_iflag == t->c_iflag && now.c_oflag == t->c_oflag &&
	       now.c_cflag == t->c_cflag && now.c_lflag == t->c_lflag && !memcmp(now.c_cc, t->c_cc, sizeof(now.c_cc));
}

static int open_pair(int *m, int *s)
{
	*m = posix_openpt(O_RDWR | O_NOCTTY);
	if (*m < 0 || grantpt(*m) < 0 || unlockpt(*m) < 0)
		return -1;
	*s = open(ptsname(*m), O_RDWR | O_NOCTTY);
	return *s < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	struct timespec nap = {0, 50 * 1000 * 1000};
	int hold = argc > 1 && !strcmp(argv[1], "hold");
	struct termios ta, tb;
	int am, as, bm, bs, rc = 0;

	if (open_pair(&am, &as) < 0 || open_pair(&bm, &bs) < 0 || tcgetattr(as, &ta) < 0 || tcgetattr(bs, &tb) < 0)
		return fail("setup", -1);
	/* A keeps the kernel's defaults, checked so the expected echo holds */
	if (!(ta.c_lflag & ICANON) || !(ta.c_lflag & ECHO) || !(ta.c_oflag & ONLCR) || ta.c_cc[VEOF] != 4)
		return fail("default termios", -1);
	cfmakeraw(&tb);
	tb.c_cc[VMIN] = 1;
	tb.c_cc[VTIME] = 0;
	if (tcsetattr(bs, TCSANOW, &tb) < 0 || tcgetattr(bs, &tb) < 0)
		return fail("setup B", -1);

	if (hold) {
		steps = 1;
		nap.tv_sec = 3;
		nap.tv_nsec = 0;
	}
	for (i = 0; i < steps && !rc; i++) {
		char one[32], two[32], eofl[32], part[32], out[32], want[256], buf[256];
		unsigned char bin[16], bout[16];
		size_t n1, n2, ne, np, no, nw;

		n1 = (size_t)snprintf(one, sizeof(one), "L%03ld one\n", i % 1000);
		n2 = (size_t)snprintf(two, sizeof(two), "L%03ld two\n", i % 1000);
		ne = (size_t)snprintf(eofl, sizeof(eofl), "eof%03ld\004\004", i % 1000); /* EOF line, then EOF */
		np = (size_t)snprintf(part, sizeof(part), "part%03ld", i % 1000);
		no = (size_t)snprintf(out, sizeof(out), "out%03ld\n", i % 1000);
		for (int k = 0; k < 16; k++) {
			bin[k] = (unsigned char)((i * 31 + k * 17) & 0xff);
			bout[k] = (unsigned char)((i * 7 + k * 91) & 0xff);
		}
		bin[0] = 0;
		bin[1] = 0xff;
		bin[2] = '\r';
		bin[3] = 3; /* ^C: no signal in raw mode */
		bout[0] = 0xff;
		bout[1] = '\n';
		if (writen(am, one, n1) || writen(am, two, n2) || writen(am, eofl, ne) ||
		    writen(am, "esc\026\nx\004", 7) || writen(am, part, np) ||
		    echo_in(am, n1 + n2 + ne - 2 + 8 + np + 2) || writen(as, out, no) || writen(bm, bin, sizeof(bin)) ||
		    writen(bs, bout, sizeof(bout))) {
			rc = fail("write", i);
			break;
		}
		nanosleep(&nap, NULL); /* everything waits unread here */

		/* A's master: the echo of the input (no echo for the EOFs), then
		 * the slave's line, each newline as CR NL */
		/* ^V echoes as ^ and a backspace, the literal newline as ^J */
		nw = (size_t)snprintf(want, sizeof(want),
				      "L%03ld one\r\nL%03ld two\r\neof%03ldesc^\b^Jxpart%03ldout%03ld\r\n",
				      i % 1000, i % 1000, i % 1000, i % 1000, i % 1000);
		if (readn(am, buf, nw) || memcmp(buf, want, nw) || !empty(am)) {
			rc = fail("A master's bytes", i);
			break;
		}
		if (!line_is(as, one, n1) || !line_is(as, two, n2) || !line_is(as, eofl, ne - 2) || !line_is(as, "", 0) ||
		    !line_is(as, "esc\nx", 5)) {
			rc = fail("A slave's lines", i);
			break;
		}
		/* the line not ended: nothing to read until the master ends it */
		if (!empty(as) || writen(am, "\n", 1)) {
			rc = fail("A slave's line not ended", i);
			break;
		}
		memcpy(want, part, np);
		want[np] = '\n';
		if (!line_is(as, want, np + 1) || readn(am, buf, 2) || memcmp(buf, "\r\n", 2)) {
			rc = fail("A slave's line ended late", i);
			break;
		}
		if (!same_termios(as, &ta) || !same_termios(bs, &tb)) {
			rc = fail("termios", i);
			break;
		}
		if (readn(bs, buf, sizeof(bin)) || memcmp(buf, bin, sizeof(bin)) || !empty(bs)) {
			rc = fail("B slave's bytes", i);
			break;
		}
		if (readn(bm, buf, sizeof(bout)) || memcmp(buf, bout, sizeof(bout)) || !empty(bm)) {
			rc = fail("B master's bytes", i);
			break;
		}
	}
	if (!rc)
		printf("pty_queued: %ld steps, lines, EOFs, a line not ended and raw bytes left waiting both ways\n", i);
	return rc;
}
