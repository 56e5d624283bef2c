/* pty_pair: pseudo-terminal pairs the program made itself.
 *
 * State exercised: pair A from posix_openpt/grantpt/unlockpt, its slave
 * opened by the name ptsname() gives, raw-ish termios (VMIN 3, VTIME 7,
 * odd flags, 9600 in, 19200 out) and a window size; pair B with its slave
 * opened through TIOCGPTPEER, then locked again (TIOCSPTLCK), in packet
 * mode (TIOCPKT), canonical with ONLCR, 115200 both ways, another window
 * size and its own c_cc; a child holding B's slave (the slave in another
 * process than its master). Each step checks every one of them with
 * tcgetattr, TIOCGWINSZ, TIOCGPTLCK, TIOCGPKT, that ptsname() names a
 * slave of the same pair (its number may change at a restore), and that
 * bytes written to either side arrive at the other, processed as the
 * termios say. No byte stays unread between steps.
 * Usage: pty_pair [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

/* n bytes of data from a master in packet mode: each read is one packet,
 * a status byte (TIOCPKT_DATA) and what had arrived by then, so a reply
 * the line discipline hands over in two parts comes in two packets (a
 * bare run sees that too, on a loaded machine). buf[0] gets the status of
 * the first packet, the data follows; a packet of another status fails. */
static int readpkt(int fd, char *buf, size_t n)
{
	char pkt[64];
	size_t got = 0;

	buf[0] = TIOCPKT_DATA;
	while (got < n) {
		ssize_t r = read(fd, pkt, sizeof(pkt) < n - got + 1 ? sizeof(pkt) : n - got + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (pkt[0] != TIOCPKT_DATA) {
			buf[0] = pkt[0];
			return 0;
		}
		memcpy(buf + 1 + got, pkt + 1, (size_t)r - 1);
		got += (size_t)r - 1;
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

static int same_termios(const struct termios *a, const struct termios *b)
{
	return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag && a->c_cflag == b->c_cflag &&
	       a->c_lflag == b->c_lflag && !memcmp(a->c_cc, b->c_cc, sizeof(a->c_cc)) &&
	       cfgetispeed(a) == cfgetispeed(b) && cfgetospeed(a) == cfgetospeed(b);
}

/* ptsname(m) is a slave of m's pair: the same device as slave s. */
static int names_pair(int m, int s)
{
	struct stat a, b;
	char *n = ptsname(m);

	return n && stat(n, &a) == 0 && fstat(s, &b) == 0 && a.st_rdev == b.st_rdev;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	struct termios ta, tb, t;
	struct winsize wa = {37, 101, 640, 480}, wb = {13, 7, 0, 0}, w;
	int ma, sa, mb, sb, one = 1, go[2], back[2], v, st, rc = 0;
	char buf[64], want[64];
	pid_t child;

	ma = posix_openpt(O_RDWR | O_NOCTTY);
	if (ma < 0 || grantpt(ma) < 0 || unlockpt(ma) < 0 || !ptsname(ma))
		return fail("posix_openpt A", 0);
	sa = open(ptsname(ma), O_RDWR | O_NOCTTY);
	mb = open("/dev/ptmx", O_RDWR | O_NOCTTY);
	if (sa < 0 || mb < 0 || unlockpt(mb) < 0)
		return fail("open", 0);
	sb = ioctl(mb, TIOCGPTPEER, O_RDWR | O_NOCTTY);
	if (sb < 0 || ioctl(mb, TIOCSPTLCK, &one) < 0)
		return fail("pair B", 0);

	if (tcgetattr(sa, &ta) < 0 || tcgetattr(sb, &tb) < 0)
		return fail("tcgetattr", 0);
	ta.c_iflag = IGNBRK | IXANY;
	ta.c_oflag = 0;
	ta.c_lflag = ISIG | IEXTEN | NOFLSH;
	ta.c_cflag = (ta.c_cflag & ~(CSIZE | PARENB)) | CS8 | CREAD | CLOCAL;
	ta.c_cc[VMIN] = 3;
	ta.c_cc[VTIME] = 7;
	ta.c_cc[VINTR] = 0x10;
	cfsetispeed(&ta, B9600);
	cfsetospeed(&ta, B19200);
	tb.c_iflag = ICRNL | IUTF8;
	tb.c_oflag = OPOST | ONLCR;
	tb.c_lflag = ICANON | ISIG | IEXTEN | ECHOK;
	tb.c_cc[VEOF] = 0x05;
	tb.c_cc[VKILL] = 0x0b;
	tb.c_cc[VERASE] = 0x7f;
	cfsetspeed(&tb, B115200);
	if (tcsetattr(sa, TCSANOW, &ta) < 0 || tcsetattr(sb, TCSANOW, &tb) < 0 || ioctl(ma, TIOCSWINSZ, &wa) < 0 ||
	    ioctl(sb, TIOCSWINSZ, &wb) < 0)
		return fail("tcsetattr", 0);
	/* packet mode after the termios: no flow-control packet waits */
	if (ioctl(mb, TIOCPKT, &one) < 0)
		return fail("TIOCPKT", 0);
	/* what tcgetattr says after the set is what must come back */
	if (tcgetattr(sa, &ta) < 0 || tcgetattr(sb, &tb) < 0)
		return fail("tcgetattr again", 0);

	if (pipe(go) < 0 || pipe(back) < 0)
		return fail("pipe", 0);
	child = fork();
	if (child < 0)
		return fail("fork", 0);
	if (child == 0) { /* B's slave in another process: one line in, one out */
		close(go[1]);
		close(mb);
		close(ma);
		close(sa);
		while (read(go[0], buf, 1) == 1) {
			ssize_t n = read(sb, buf, sizeof(buf) - 1);
			if (n <= 0)
				_exit(1);
			buf[n] = 0;
			if (tcgetattr(sb, &t) < 0 || !same_termios(&t, &tb))
				_exit(2);
			if (buf[0] == 'b')
				buf[0] = 'B';
			if (writes(sb, buf) < 0) /* "B..\n" -> "B..\r\n" on the master */
				_exit(3);
			if (write(back[1], "k", 1) != 1)
				_exit(4);
		}
		_exit(0);
	}
	close(sb);
	close(go[0]);
	close(back[1]);

	for (i = 0; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		size_t n;

		if (tcgetattr(sa, &t) < 0 || !same_termios(&t, &ta) || tcgetattr(ma, &t) < 0 || !same_termios(&t, &ta))
			rc = fail("termios of A", i);
		else if (ioctl(sa, TIOCGWINSZ, &w) < 0 || memcmp(&w, &wa, sizeof(w)))
			rc = fail("window size of A", i);
		else if (ioctl(mb, TIOCGWINSZ, &w) < 0 || memcmp(&w, &wb, sizeof(w)))
			rc = fail("window size of B", i);
		else if (ioctl(ma, TIOCGPTLCK, &v) < 0 || v != 0)
			rc = fail("A unlocked", i);
		else if (ioctl(mb, TIOCGPTLCK, &v) < 0 || v != 1)
			rc = fail("B locked", i);
		else if (ioctl(ma, TIOCGPKT, &v) < 0 || v != 0 || ioctl(mb, TIOCGPKT, &v) < 0 || v != 1)
			rc = fail("packet mode", i);
		else if (!names_pair(ma, sa))
			rc = fail("ptsname of A", i);
		if (rc)
			break;
		/* A: raw both ways, VMIN 3 */
		n = (size_t)snprintf(want, sizeof(want), "a%03ld", i % 1000);
		if (writes(ma, want) < 0 || readn(sa, buf, n) < 0 || memcmp(buf, want, n)) {
			rc = fail("A master to slave", i);
			break;
		}
		want[0] = 'z';
		if (writes(sa, want) < 0 || readn(ma, buf, n) < 0 || memcmp(buf, want, n)) {
			rc = fail("A slave to master", i);
			break;
		}
		/* B: a line through ICRNL to the child, back through ONLCR, in packets */
		n = (size_t)snprintf(want, sizeof(want), "b%03ld\r", i % 1000);
		if (writes(mb, want) < 0 || write(go[1], "g", 1) != 1 || read(back[0], buf, 1) != 1) {
			rc = fail("B child", i);
			break;
		}
		if (readpkt(mb, buf, n + 1) < 0 || buf[0] != TIOCPKT_DATA || buf[1] != 'B' ||
		    memcmp(buf + 2, want + 1, n - 2) || memcmp(buf + n, "\r\n", 2)) {
			rc = fail("B slave to master in packet mode", i);
			break;
		}
		nanosleep(&nap, NULL);
	}
	close(go[1]);
	waitpid(child, &st, 0);
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = fail("child status", i);
	if (!rc)
		printf("pty_pair: %ld steps, two pairs with their termios, window sizes, lock and packet mode\n", i);
	return rc;
}
