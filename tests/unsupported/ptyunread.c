/* ptyunread toslave|tomaster|noslave|pktstatus: a pseudo-terminal pair
 * holding what a checkpoint cannot take without consuming it: a line
 * written to the master that the slave has not read, bytes the slave
 * wrote that the master has not read, a master whose slave no process
 * holds, or a packet-mode status packet not read yet. The round must be
 * refused naming it, and the job must go on with everything where it was:
 * after the wait it reads exactly what was waiting. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "toslave";
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
	if (!strcmp(mode, "toslave") || !strcmp(mode, "noslave")) {
		if (write(m, "waiting\n", 8) != 8)
			return 1;
	} else if (!strcmp(mode, "tomaster")) {
		if (write(s, "waiting\n", 8) != 8)
			return 1;
	} else if (!strcmp(mode, "pktstatus")) {
		/* packet mode, then a flush of the slave's input: a status packet */
		if (ioctl(m, TIOCPKT, &one) < 0 || tcflush(s, TCIFLUSH) < 0)
			return 1;
	}
	for (int i = 0; i < 25; i++)
		usleep(100000);
	if (!strcmp(mode, "toslave")) {
		n = read(s, buf, sizeof(buf) - 1);
	} else if (!strcmp(mode, "tomaster")) {
		n = read(m, buf, sizeof(buf) - 1);
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
