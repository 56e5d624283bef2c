/* mp_scm_dgram: descriptors in flight over UNIX datagram and seqpacket
 * sockets.
 *
 * State exercised: on a SOCK_DGRAM and a SOCK_SEQPACKET socketpair the
 * parent queues four messages each toward its child: "one" (no
 * descriptor), "two" with a memfd (the parent keeps it), "three" with a
 * pipe's read end holding unread bytes and a regular file at an offset
 * (the parent keeps the write end and the file), an empty message with
 * the memfd again, and "four". The child reads nothing for a while, then
 * reads each message and checks its bytes, its length (the boundaries
 * kept), which descriptors came with it and their state, and that they
 * are the parent's own descriptions (the parent sees the child's memfd
 * write and file offset; the child reads what the parent writes into the
 * pipe after).
 * Usage: mp_scm_dgram [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static void nap(int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
}

static int send_with(int sock, const char *p, size_t len, const int *fds, int nfd)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr a;
	} u;
	struct iovec iov = {(void *)p, len};
	struct msghdr mh = {0};
	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfd) {
		struct cmsghdr *c;
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfd);
	}
	return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

/* One message into p (64 bytes at most): its length in *len; the
 * descriptors that came with it. */
static int recv_msg(int sock, char *p, ssize_t *len, int *fds, int max)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr a;
	} u;
	struct iovec iov = {p, 64};
	struct msghdr mh = {0};
	int n = 0;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	if ((*len = recvmsg(sock, &mh, 0)) < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++)
				if (n < max)
					memcpy(&fds[n++], CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof(int));
		}
	return n;
}

#define FAIL(...) do { printf("child: %s: ", kind); printf(__VA_ARGS__); printf("\n"); fflush(stdout); _exit(1); } while (0)

/* The four messages of one socket, then the shared-description checks. */
static void check(int s, const char *kind, int ctl)
{
	char b[64], t;
	int fds[8], n;
	ssize_t len;
	off_t o;

	if ((n = recv_msg(s, b, &len, fds, 8)) != 0 || len != 3 || memcmp(b, "one", 3))
		FAIL("message 1: %d descriptors, %zd bytes", n, len);
	if ((n = recv_msg(s, b, &len, fds, 8)) != 1 || len != 3 || memcmp(b, "two", 3))
		FAIL("message 2: %d descriptors (1 expected), %zd bytes", n, len);
	if (pread(fds[0], b, 4, 100) != 4 || memcmp(b, "MEMF", 4))
		FAIL("memfd: contents");
	if ((n = recv_msg(s, b, &len, fds + 1, 7)) != 2 || len != 5 || memcmp(b, "three", 5))
		FAIL("message 3: %d descriptors (2 expected), %zd bytes", n, len);
	if (read(fds[1], b, 6) != 6 || memcmp(b, "unread", 6))
		FAIL("pipe: unread bytes lost");
	if ((o = lseek(fds[2], 0, SEEK_CUR)) != 300)
		FAIL("file: offset %lld, not 300", (long long)o);
	if ((n = recv_msg(s, b, &len, fds + 3, 5)) != 1 || len != 0)
		FAIL("message 4: %d descriptors (1 expected), %zd bytes (0 expected)", n, len);
	if ((n = recv_msg(s, b, &len, fds + 4, 4)) != 0 || len != 4 || memcmp(b, "four", 4))
		FAIL("message 5: %d descriptors, %zd bytes", n, len);
	if (pwrite(fds[3], "CHLD", 4, 200) != 4 || lseek(fds[2], 321, SEEK_SET) != 321)
		FAIL("writes");
	if (write(ctl, "r", 1) != 1 || read(ctl, &t, 1) != 1)
		FAIL("talk to the parent");
	if (read(fds[1], b, 5) != 5 || memcmp(b, "later", 5))
		FAIL("pipe: what the parent wrote after is not there");
	for (int i = 0; i < 4; i++)
		close(fds[i]);
}

int main(int argc, char **argv)
{
	int ms = (int)(3000 * app_scale(argc, argv)), sk[2][2], ctl[2], st, types[2] = {SOCK_DGRAM, SOCK_SEQPACKET};
	const char *names[2] = {"datagram", "seqpacket"};
	int mfd[2], p[2][2], file[2];
	char path[2][512], b[8], t;
	const char *tmp = getenv("TMPDIR");
	pid_t kid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, ctl) < 0)
		return 1;
	for (int i = 0; i < 2; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/mp_scm_dgram.%d.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid(), i);
		if (socketpair(AF_UNIX, types[i], 0, sk[i]) < 0 || pipe(p[i]) < 0 ||
		    (mfd[i] = memfd_create("ckapp-dgram", 0)) < 0 || ftruncate(mfd[i], 4096) < 0 ||
		    pwrite(mfd[i], "MEMF", 4, 100) != 4 || write(p[i][1], "unread", 6) != 6 ||
		    (file[i] = open(path[i], O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0 || ftruncate(file[i], 1000) < 0)
			return 1;
		lseek(file[i], 300, SEEK_SET);
	}
	printf("mp_scm_dgram: datagram and seqpacket, 5 messages each, descriptors in flight for %d ms\n", ms);
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		close(ctl[0]);
		for (int i = 0; i < 2; i++) {
			close(sk[i][0]);
			close(mfd[i]);
			close(p[i][0]);
			close(p[i][1]);
			close(file[i]);
		}
		nap(ms); /* the messages wait, unread */
		for (int i = 0; i < 2; i++)
			check(sk[i][1], names[i], ctl[1]);
		_exit(0);
	}
	close(ctl[1]);
	for (int i = 0; i < 2; i++) {
		int f3[2] = {p[i][0], file[i]};
		close(sk[i][1]);
		if (send_with(sk[i][0], "one", 3, NULL, 0) || send_with(sk[i][0], "two", 3, &mfd[i], 1) ||
		    send_with(sk[i][0], "three", 5, f3, 2) || send_with(sk[i][0], "", 0, &mfd[i], 1) ||
		    send_with(sk[i][0], "four", 4, NULL, 0))
			return 1;
		close(p[i][0]);
	}
	for (int i = 0; i < 2; i++) {
		if (read(ctl[0], &t, 1) != 1) {
			printf("parent: the child went away\n");
			break;
		}
		if (pread(mfd[i], b, 4, 200) != 4)
			b[0] = 0;
		printf("parent: %s: memfd holds the child's write: %s, file offset %lld\n", names[i],
		       memcmp(b, "CHLD", 4) ? "no" : "yes", (long long)lseek(file[i], 0, SEEK_CUR));
		if (write(p[i][1], "later", 5) != 5 || write(ctl[0], "k", 1) != 1)
			return 1;
	}
	waitpid(kid, &st, 0);
	for (int i = 0; i < 2; i++)
		unlink(path[i]);
	printf("child %s\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "FAILED");
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}
