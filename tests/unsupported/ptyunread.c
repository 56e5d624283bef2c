/* ptyunread noslave|pktdata|stopped|async|pktstatus: a pseudo-terminal pair
 * holding what a checkpoint cannot take and put back exactly: a line
 * written to the master of a slave no process holds, bytes the slave wrote
 * that a master in packet mode has not read, a line the slave has not read
 * while its output is stopped (tcflow TCOOFF: the line's echo could not be
 * seen), bytes the slave wrote that a master with O_ASYNC has not read
 * (putting them back would raise its SIGIO), or a packet-mode status
 * packet not read yet. The round must be
 * refused naming it, and the job must go on with everything where it was:
 * after the wait it reads exactly what was waiting. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "noslave";
	int m = posix_openpt(O_RDWR | O_NOCTTY), s = -1, one = 1;
	struct termios t;
	char buf[64];
	ssize_t n = -1;

	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return 1;
	if (strcmp(mode, "noslave")) {
		s = open(ptsname(m), O_RDWR | O_NOCTTY);
		if (s < 0 || tcgetattr(s, &t) < 0)
			return 1;
		cfmakeraw(&t);
		if (tcsetattr(s, TCSANOW, &t) < 0)
			return 1;
	}
	if (!strcmp(mode, "noslave")) {
		if (write(m, "waiting\n", 8) != 8)
			return 1;
	} else if (!strcmp(mode, "stopped")) {
		if (write(m, "waiting\n", 8) != 8 || tcflow(s, TCOOFF) < 0)
			return 1;
	} else if (!strcmp(mode, "pktdata")) {
		if (ioctl(m, TIOCPKT, &one) < 0 || write(s, "waiting\n", 8) != 8)
			return 1;
	} else if (!strcmp(mode, "async")) {
		signal(SIGIO, SIG_IGN);
		if (fcntl(m, F_SETOWN, getpid()) < 0 || fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_ASYNC) < 0 ||
		    write(s, "waiting\n", 8) != 8)
			return 1;
	} else if (!strcmp(mode, "pktstatus")) {
		/* packet mode, then a flush of the slave's input: a status packet */
		if (ioctl(m, TIOCPKT, &one) < 0 || tcflush(s, TCIFLUSH) < 0)
			return 1;
	}
	for (int i = 0; i < 25; i++)
		usleep(100000);
	if (!strcmp(mode, "stopped")) {
		n = tcflow(s, TCOON) < 0 ? -1 : read(s, buf, sizeof(buf) - 1);
	} else if (!strcmp(mode, "async")) {
		n = read(m, buf, sizeof(buf) - 1);
	} else if (!strcmp(mode, "pktdata")) {
		n = read(m, buf, sizeof(buf) - 1);
		if (n > 1 && buf[0] == TIOCPKT_DATA)
			memmove(buf, buf + 1, (size_t)n--);
		else
			n = -1;
	} else if (!strcmp(mode, "noslave")) {
		s = open(ptsname(m), O_RDWR | O_NOCTTY);
		n = s < 0 ? -1 : read(s, buf, sizeof(buf) - 1);
	} else {
		n = read(m, buf, sizeof(buf) - 1);
		if (n == 1) /* the status byte itself: TIOCPKT_FLUSHREAD */
			n = snprintf(buf, sizeof(buf), "status %#x\n", (unsigned char)buf[0]);
	}
	buf[n > 0 ? n : 0] = 0;
	printf("ptyunread %s: %s", mode, n > 0 ? buf : "nothing\n");
	return n > 0 ? 0 : 1;
}
