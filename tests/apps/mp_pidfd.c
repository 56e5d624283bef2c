/* mp_pidfd: pidfds of the job's own processes.
 *
 * State exercised: the parent holds a pidfd of each of three children: A
 * has exited with 42 and is a zombie (not reaped until the end), B runs
 * until told (SIGUSR1 through its pidfd, then exits with 7), C has exited
 * and been reaped (its pidfd names no process: Pid -1, signals fail with
 * ESRCH), and duplicated (dup: the copy names no process either). B's
 * pidfd is non-blocking. At every step the parent checks each
 * pidfd's readiness (poll: readable once the process ended), the pid its
 * fdinfo names, B's flags and a null signal through each. At the end it
 * signals B through its pidfd and collects A's and B's statuses through
 * theirs (waitid P_PIDFD). A restore that opened them on other processes,
 * or on none, prints what differs.
 * Usage: mp_pidfd [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef PIDFD_NONBLOCK
#define PIDFD_NONBLOCK O_NONBLOCK
#endif

static int pidfd_of(pid_t pid, unsigned flags)
{
	return (int)syscall(SYS_pidfd_open, pid, flags);
}

static int signal_via(int pfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0);
}

static long fdinfo_pid(int fd)
{
	char path[64], text[512], *p;
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if ((f = open(path, O_RDONLY)) < 0)
		return -100;
	n = read(f, text, sizeof(text) - 1);
	close(f);
	text[n > 0 ? n : 0] = 0;
	return (p = strstr(text, "Pid:")) ? strtol(p + 4, NULL, 10) : -100;
}

static int readable(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void on_usr1(int s)
{
	(void)s;
	_exit(7);
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	int steps = (int)(100 * scale) > 4 ? (int)(100 * scale) : 4, go[2], pa, pb, pc, pc2, bad = 0;
	pid_t a, b, c;
	siginfo_t si;

	if (pipe(go) < 0)
		return 1;
	signal(SIGUSR1, on_usr1); /* inherited by B */
	if ((a = fork()) == 0)
		_exit(42);
	if ((b = fork()) == 0) {
		for (;;)
			pause();
	}
	if ((c = fork()) == 0) {
		char x;
		_exit(read(go[0], &x, 1) == 1 ? 5 : 6);
	}
	signal(SIGUSR1, SIG_DFL);
	pa = pidfd_of(a, 0);
	pb = pidfd_of(b, PIDFD_NONBLOCK);
	pc = pidfd_of(c, 0);
	pc2 = dup(pc);
	if (a < 0 || b < 0 || c < 0 || pa < 0 || pb < 0 || pc < 0 || pc2 < 0 || write(go[1], "x", 1) != 1 ||
	    waitpid(c, NULL, 0) != c) {
		printf("mp_pidfd: setup failed: %s\n", strerror(errno));
		return 1;
	}
	/* A's exit: its pidfd becomes readable */
	while (!readable(pa))
		usleep(1000);
	printf("mp_pidfd: three pidfds (a zombie, a live process, a reaped one), %d steps\n", steps);
	fflush(stdout);
	for (int i = 0; i < steps && bad < 3; i++) {
		long ia = fdinfo_pid(pa), ib = fdinfo_pid(pb), ic = fdinfo_pid(pc);
		int ra = readable(pa), rb = readable(pb), rc = readable(pc), nb = (fcntl(pb, F_GETFL) & O_NONBLOCK) != 0;
		int sa = signal_via(pa, 0), sb = signal_via(pb, 0), sc = signal_via(pc, 0), ec = errno;

		if (ia != a || ib != b || ic != -1 || fdinfo_pid(pc2) != -1 || !ra || rb || !rc || !nb || sa != 0 ||
		    sb != 0 || sc != -1 || ec != ESRCH) {
			printf("step %d: pids %ld %ld %ld %ld (want %d %d -1 -1), readable %d %d %d (want 1 0 1), "
			       "B nonblocking %d, null signals %d %d %d (errno %d)\n",
			       i, ia, ib, ic, fdinfo_pid(pc2), a, b, ra, rb, rc, nb, sa, sb, sc, ec);
			bad++;
		}
		usleep(30000);
	}
	if (signal_via(pb, SIGUSR1) != 0)
		bad++;
	/* B's pidfd is non-blocking: waitid says EAGAIN until B has ended */
	struct pollfd p = {pb, POLLIN, 0};
	if (poll(&p, 1, 10000) != 1)
		bad++;
	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)pb, &si, WEXITED) != 0 || si.si_pid != b || si.si_status != 7) {
		printf("B through its pidfd: pid %d status %d (want %d, 7)\n", si.si_pid, si.si_status, b);
		bad++;
	}
	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)pa, &si, WEXITED) != 0 || si.si_pid != a || si.si_status != 42) {
		printf("A through its pidfd: pid %d status %d (want %d, 42)\n", si.si_pid, si.si_status, a);
		bad++;
	}
	printf("mp_pidfd: %s\n", bad ? "pidfds LOST" : "every pidfd named its process");
	return bad ? 1 : 0;
}
