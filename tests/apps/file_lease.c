/* file_lease: leases (F_SETLEASE) held through a run.
 *
 * State exercised: a read lease on a file opened read-only, with F_SETSIG
 * SIGRTMIN+1 (its break arrives as that signal, si_fd naming the
 * descriptor), and a write lease on a file only this process has open,
 * breaking with the default SIGIO. At every step both leases must be held
 * (F_GETLEASE), the read lease's signal still SIGRTMIN+1 and the files'
 * owner this process. At the end a child opens each file without waiting
 * (O_NONBLOCK: EWOULDBLOCK while the lease is being broken), the holder
 * must get the break's signal, gives the lease up, and the child's open
 * then succeeds: a restore that lost a lease lets the child's first open
 * through and no signal comes.
 * Usage: file_lease [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t rt_hits, rt_fd = -1, io_hits;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	rt_hits++;
	rt_fd = si->si_fd;
}

static void on_io(int sig)
{
	(void)sig;
	io_hits++;
}

/* A child opens path with flags: 0 when its first try is refused with
 * EWOULDBLOCK (a lease being broken) and a later one, after the holder
 * gave the lease up, succeeds. */
static pid_t opener(const char *path, int flags)
{
	pid_t kid = fork();

	if (kid == 0) {
		int fd = open(path, flags | O_NONBLOCK), tries = 0;

		if (fd >= 0 || errno != EWOULDBLOCK)
			_exit(2); /* no lease */
		while ((fd = open(path, flags | O_NONBLOCK)) < 0 && errno == EWOULDBLOCK && tries++ < 500)
			usleep(10000);
		_exit(fd >= 0 ? 0 : 3);
	}
	return kid;
}

/* Waits up to 5 s for *hits to become non-zero. */
static int wait_for(volatile sig_atomic_t *hits)
{
	for (int i = 0; i < 500 && !*hits; i++)
		usleep(10000);
	return *hits != 0;
}

static const char *child_said(pid_t kid)
{
	int st;

	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st))
		return "child lost";
	switch (WEXITSTATUS(st)) {
	case 0: return "the child's open waited for it";
	case 2: return "NO LEASE: the child's open went through at once";
	default: return "the child's open never went through";
	}
}

int main(int argc, char **argv)
{
	int steps = (int)(30 * app_scale(argc, argv)), rd, wr, bad = 0;
	char dir[256], pr[300], pw[300];
	struct sigaction sa;
	pid_t kid;

	if (steps < 4)
		steps = 4;
	snprintf(dir, sizeof(dir), "%s/file_lease.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(pr, sizeof(pr), "%s/read", dir);
	snprintf(pw, sizeof(pw), "%s/write", dir);
	close(open(pr, O_WRONLY | O_CREAT, 0600));
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_rt;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGRTMIN + 1, &sa, NULL);
	signal(SIGIO, on_io);
	rd = open(pr, O_RDONLY);
	wr = open(pw, O_RDWR | O_CREAT, 0600);
	if (rd < 0 || wr < 0 || fcntl(rd, F_SETSIG, SIGRTMIN + 1) < 0 || fcntl(rd, F_SETLEASE, F_RDLCK) < 0 ||
	    fcntl(wr, F_SETLEASE, F_WRLCK) < 0) {
		printf("file_lease: cannot take the leases (%s)\n", strerror(errno));
		return 1;
	}
	printf("file_lease: a read lease and a write lease, %d steps\n", steps);
	for (int step = 0; step < steps; step++) {
		int lr = fcntl(rd, F_GETLEASE), lw = fcntl(wr, F_GETLEASE);

		if (lr != F_RDLCK || lw != F_WRLCK || fcntl(rd, F_GETSIG) != SIGRTMIN + 1 ||
		    fcntl(rd, F_GETOWN) != getpid() || fcntl(wr, F_GETOWN) != getpid()) {
			printf("FAIL step %d: read lease %d, write lease %d, signal %d, owners %d %d\n", step, lr, lw,
			       fcntl(rd, F_GETSIG), fcntl(rd, F_GETOWN), fcntl(wr, F_GETOWN));
			bad = 1;
		}
		if (step % 10 == 0)
			printf("step %d: both leases held\n", step);
		fflush(stdout);
		usleep(100000);
	}
	kid = opener(pr, O_WRONLY);
	if (!wait_for(&rt_hits) || rt_fd != rd)
		bad = 1;
	printf("read lease broken by a writer: %s\n",
	       !rt_hits ? "NO SIGNAL" : rt_fd == rd ? "SIGRTMIN+1 for its descriptor" : "SIGRTMIN+1 for ANOTHER descriptor");
	fcntl(rd, F_SETLEASE, F_UNLCK);
	printf("  %s\n", child_said(kid));
	fflush(stdout);
	kid = opener(pw, O_RDONLY);
	if (!wait_for(&io_hits))
		bad = 1;
	printf("write lease broken by a reader: %s\n", io_hits ? "SIGIO" : "NO SIGNAL");
	fcntl(wr, F_SETLEASE, F_UNLCK);
	printf("  %s\n", child_said(kid));
	unlink(pr);
	unlink(pw);
	rmdir(dir);
	printf("file_lease: %s\n", bad ? "FAIL" : "ok");
	return bad;
}
