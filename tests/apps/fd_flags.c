/* fd_flags: status flags of open file descriptions and descriptor flags.
 *
 * State exercised: a file opened O_APPEND|O_NOATIME, one O_DIRECT, a pipe
 * whose read end is O_NONBLOCK|O_ASYNC with an owner (F_SETOWN_EX) and a
 * signal (F_SETSIG), the same on a socketpair end through F_SETOWN (its
 * plugin re-makes the socket: the owner and signal were lost before), a
 * duplicate without FD_CLOEXEC of a descriptor that
 * has it, and a file description shared with a child by fork (one offset:
 * the child's writes move the parent's offset). Each step the parent checks
 * every flag with fcntl, the child writes one byte through the shared
 * description and the parent checks the offset moved; the child writes to
 * the async pipe and socket and the parent takes the queued signals with
 * sigtimedwait. A third async pipe holds one byte nobody reads, a fourth
 * one byte and no writer any more (its write end closed), and an async
 * datagram socket one datagram: a round must neither take them nor raise
 * their signal (it once read the pipe's bytes out and wrote them back,
 * which raised it, and a second open of the writerless pipe, closed,
 * raised it too; datagrams are still taken and sent again).
 * Usage: fd_flags [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[256];

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

static int rd1(int fd)
{
	char c;
	ssize_t n;

	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? c : -1;
}

static int wr1(int fd, char c)
{
	ssize_t n;

	do
		n = write(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	int app, dio, shared, dupfd, ap[2], sp[2], hp[2], hd[2], ep[2], go[2], back[2], sig = SIGRTMIN + 2, ssig = SIGRTMIN + 3,
	    hsig = SIGRTMIN + 4, st, rc = 0;
	char path[300];
	struct f_owner_ex own = {F_OWNER_PID, 0};
	sigset_t set, hset;
	pid_t child;

	snprintf(dir, sizeof(dir), "%s/fd_flags.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return fail("mkdtemp", 0);
	snprintf(path, sizeof(path), "%s/append", dir);
	app = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOATIME | O_CLOEXEC, 0600);
	snprintf(path, sizeof(path), "%s/direct", dir);
	dio = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	snprintf(path, sizeof(path), "%s/shared", dir);
	shared = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (app < 0 || dio < 0 || shared < 0)
		return fail("open", 0);
	dupfd = dup(app); /* no FD_CLOEXEC, its original has it */
	if (pipe(ap) < 0 || pipe(go) < 0 || pipe(back) < 0 || pipe(hp) < 0 || pipe(ep) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0 || socketpair(AF_UNIX, SOCK_DGRAM, 0, hd) < 0)
		return fail("pipe", 0);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigaddset(&set, ssig);
	sigemptyset(&hset);
	sigaddset(&hset, hsig);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigprocmask(SIG_BLOCK, &hset, NULL);
	own.pid = getpid();
	if (fcntl(ap[0], F_SETFL, O_NONBLOCK | O_ASYNC) < 0 || fcntl(ap[0], F_SETOWN_EX, &own) < 0 ||
	    fcntl(ap[0], F_SETSIG, sig) < 0)
		return fail("async setup", 0);
	if (fcntl(sp[0], F_SETOWN, getpid()) < 0 || fcntl(sp[0], F_SETSIG, ssig) < 0 ||
	    fcntl(sp[0], F_SETFL, O_ASYNC | O_NONBLOCK) < 0)
		return fail("async socket setup", 0);
	for (int k = 0; k < 2; k++) { /* the held byte and datagram: their signals taken now, none may follow */
		struct timespec tmo = {10, 0};
		int h = k ? hd[0] : hp[0];
		if (fcntl(h, F_SETOWN, getpid()) < 0 || fcntl(h, F_SETSIG, hsig) < 0 ||
		    fcntl(h, F_SETFL, O_ASYNC | O_NONBLOCK) < 0 || wr1(k ? hd[1] : hp[1], 'h') < 0 ||
		    sigtimedwait(&hset, NULL, &tmo) != hsig)
			return fail("held pipe and datagram setup", 0);
	}
	/* the writerless pipe: its byte in, its writer gone, then async */
	if (wr1(ep[1], 'e') < 0 || close(ep[1]) < 0 || fcntl(ep[0], F_SETOWN, getpid()) < 0 ||
	    fcntl(ep[0], F_SETSIG, hsig) < 0 || fcntl(ep[0], F_SETFL, O_ASYNC | O_NONBLOCK) < 0)
		return fail("writerless pipe setup", 0);
	child = fork();
	if (child < 0)
		return fail("fork", 0);
	if (child == 0) { /* writes one byte per token through the shared description */
		close(go[1]);
		while (rd1(go[0]) == 'g') {
			if (wr1(shared, 'x') < 0 || wr1(ap[1], 'a') < 0 || wr1(sp[1], 's') < 0)
				_exit(1);
			wr1(back[1], 'b');
		}
		_exit(0);
	}
	for (i = 0; i < steps && !rc; i++) {
		struct f_owner_ex o;
		struct timespec tmo = {10, 0}, nap = {0, 50000000};
		siginfo_t si;
		off_t at;

		if ((fcntl(app, F_GETFL) & (O_APPEND | O_NOATIME | O_ACCMODE)) != (O_APPEND | O_NOATIME | O_RDWR))
			rc = fail("O_APPEND|O_NOATIME", i);
		else if (!(fcntl(dio, F_GETFL) & O_DIRECT))
			rc = fail("O_DIRECT", i);
		else if (!(fcntl(app, F_GETFD) & FD_CLOEXEC) || (fcntl(dupfd, F_GETFD) & FD_CLOEXEC))
			rc = fail("FD_CLOEXEC per descriptor", i);
		else if ((fcntl(ap[0], F_GETFL) & (O_NONBLOCK | O_ASYNC)) != (O_NONBLOCK | O_ASYNC))
			rc = fail("O_NONBLOCK|O_ASYNC", i);
		else if (fcntl(ap[0], F_GETOWN_EX, &o) < 0 || o.type != F_OWNER_PID || o.pid != getpid())
			rc = fail("F_GETOWN_EX", i);
		else if (fcntl(ap[0], F_GETSIG) != sig)
			rc = fail("F_GETSIG", i);
		else if (fcntl(sp[0], F_GETOWN) != getpid() || fcntl(sp[0], F_GETSIG) != ssig ||
			 (fcntl(sp[0], F_GETFL) & (O_NONBLOCK | O_ASYNC)) != (O_NONBLOCK | O_ASYNC))
			rc = fail("the socket's F_GETOWN, F_GETSIG or O_ASYNC", i);
		else {
			struct timespec now = {0, 0};
			int avail = 0;
			char c;
			if (sigtimedwait(&hset, NULL, &now) >= 0)
				rc = fail("a signal of the held pipe or socket, with nothing new in them", i);
			else if (ioctl(hp[0], FIONREAD, &avail) < 0 || avail != 1)
				rc = fail("the held pipe's one byte", i);
			else if (ioctl(ep[0], FIONREAD, &avail) < 0 || avail != 1)
				rc = fail("the writerless pipe's one byte", i);
			else if (recv(hd[0], &c, 1, MSG_PEEK | MSG_DONTWAIT) != 1 || c != 'h')
				rc = fail("the held socket's one datagram", i);
		}
		if (rc)
			break;
		at = lseek(shared, 0, SEEK_CUR);
		if (wr1(go[1], 'g') < 0 || rd1(back[0]) != 'b') {
			rc = fail("child", i);
			break;
		}
		if (lseek(shared, 0, SEEK_CUR) != at + 1) {
			rc = fail("shared offset", i);
			break;
		}
		/* the child's bytes raised our signals, with each descriptor */
		for (int k = 0, got = 0; k < 2; k++) {
			int n = sigtimedwait(&set, &si, &tmo);
			if ((n != sig && n != ssig) || si.si_fd != (n == sig ? ap[0] : sp[0]) || (got & (1 << (n == sig)))) {
				rc = fail("async signal", i);
				break;
			}
			got |= 1 << (n == sig);
		}
		if (rc)
			break;
		if (rd1(sp[0]) != 's') {
			rc = fail("async socket contents", i);
			break;
		}
		if (rd1(ap[0]) != 'a' || read(ap[0], path, 1) != -1 || errno != EAGAIN) {
			rc = fail("async pipe contents", i);
			break;
		}
		nanosleep(&nap, NULL);
	}
	close(go[1]);
	waitpid(child, &st, 0);
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = fail("child status", i);
	snprintf(path, sizeof(path), "%s/append", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/direct", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/shared", dir);
	unlink(path);
	rmdir(dir);
	if (!rc)
		printf("fd_flags: %ld steps, flags, owner, signal and shared offset as set\n", i);
	return rc;
}
