/* mp_evfdpass: eventfds in flight over a UNIX socket.
 *
 * State exercised: the parent sends the child one eventfd per step with
 * SCM_RIGHTS (count 7 * step + 1, its own copy closed at once), and at the
 * start a semaphore-mode eventfd it keeps and adds 1 to at every step. The
 * child takes them only every 10 steps, so that up to 11 descriptors wait in
 * the socket's queue at any moment, some of them held by nobody else. It
 * reads each per-step eventfd's count, and at the end drains the shared
 * one (a semaphore: 1 per read): 3 + steps reads, which holds only if the
 * copy it received and the parent's are one eventfd after a restore.
 * Usage: mp_evfdpass [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static int send_fd(int sock, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = {"e", 1};
	struct msghdr mh = {0};
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

/* One byte and the descriptor it carries (-1 for a byte without one). */
static int recv_fd(int sock, char *byte)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = {byte, 1};
	struct msghdr mh = {0};
	int fd = -1;
	ssize_t n;

	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	while ((n = recvmsg(sock, &mh, 0)) < 0 && errno == EINTR)
		;
	if (n != 1)
		return -2;
	if (CMSG_FIRSTHDR(&mh))
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
	return fd;
}

static int child(int sock, int steps)
{
	int shared = -1, next = 0, n = 0;
	uint64_t v;
	char b;

	for (int i = 0; i < steps; i++) {
		if (i % 10 != 9 && i != steps - 1) {
			usleep(30000);
			continue;
		}
		/* every descriptor sent up to step i */
		while (next <= i) {
			int fd = recv_fd(sock, &b);

			if (fd < 0)
				return 2;
			if (shared < 0) {
				shared = fd;
				continue;
			}
			if (read(fd, &v, sizeof(v)) != sizeof(v) || v != (uint64_t)next * 7 + 1)
				return 3;
			close(fd);
			next++;
		}
		usleep(30000);
	}
	/* the parent's last add is done once its "z" arrives */
	if (recv_fd(sock, &b) != -1 || b != 'z')
		return 4;
	if (fcntl(shared, F_SETFL, O_NONBLOCK) < 0)
		return 5;
	while (read(shared, &v, sizeof(v)) == sizeof(v)) {
		if (v != 1)
			return 6;
		n++;
	}
	return n == 3 + steps ? 0 : 7;
}

int main(int argc, char **argv)
{
	int steps = (int)(100 * app_scale(argc, argv)), sv[2], st, shared;
	pid_t kid;

	if (steps < 4)
		steps = 4;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	printf("mp_evfdpass: %d eventfds in flight, 10 at a time\n", steps);
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		close(sv[0]);
		_exit(child(sv[1], steps));
	}
	close(sv[1]);
	shared = eventfd(3, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (shared < 0 || send_fd(sv[0], shared)) {
		printf("FAIL setup\n");
		return 1;
	}
	for (int i = 0; i < steps; i++) {
		int e = eventfd((unsigned)i * 7 + 1, EFD_CLOEXEC);
		uint64_t one = 1;

		if (e < 0 || send_fd(sv[0], e) || write(shared, &one, sizeof(one)) != sizeof(one)) {
			printf("FAIL step %d\n", i);
			return 1;
		}
		close(e);
		if (i % 20 == 0) {
			printf("step %d sent\n", i);
			fflush(stdout);
		}
		usleep(30000);
	}
	if (write(sv[0], "z", 1) != 1)
		return 1;
	waitpid(kid, &st, 0);
	printf("child: %s (status %d)\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "FAILED",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}
