/* ptyctty nofd|notty: a controlling terminal a restore could not make
 * again as it was: the session's leader took a pseudo-terminal of its own
 * as its terminal and closed every descriptor of it (nofd), or a member of
 * the session gave the terminal up (TIOCNOTTY) while the leader kept it
 * (notty). The round must be refused naming it, and the job must go on:
 * after the wait the terminal is still the leader's (and still not the
 * member's). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int notty = argc > 1 && !strcmp(argv[1], "notty"), m, s, st;
	pid_t l;

	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return 1;
	l = fork();
	if (l == 0) {
		pid_t g = 0;
		int d, ok;

		if (setsid() < 0 || (s = open(ptsname(m), O_RDWR | O_NOCTTY)) < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
			_exit(2);
		if (notty) {
			g = fork();
			if (g == 0) {
				int t = open("/dev/tty", O_RDWR);
				if (t < 0 || ioctl(t, TIOCNOTTY) < 0)
					_exit(3);
				close(t);
				for (int i = 0; i < 25; i++)
					usleep(100000);
				_exit(open("/dev/tty", O_RDWR) < 0 ? 0 : 4); /* still none */
			}
		} else {
			close(s);
		}
		for (int i = 0; i < 25; i++)
			usleep(100000);
		d = open("/dev/tty", O_RDWR);
		ok = d >= 0 && tcgetsid(d) == getpid();
		if (g > 0 && (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st)))
			ok = 0;
		_exit(ok ? 0 : 5);
	}
	if (l < 0 || waitpid(l, &st, 0) != l)
		return 1;
	printf("ptyctty %s: %s\n", notty ? "notty" : "nofd",
	       WIFEXITED(st) && !WEXITSTATUS(st) ? "the terminal as it was" : "FAIL");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
