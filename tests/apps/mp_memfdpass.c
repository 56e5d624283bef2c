/* mp_memfdpass: a memfd handed to another process over a UNIX socket.
 *
 * State exercised: the parent creates a memfd after forking, sends it to
 * the child with SCM_RIGHTS; both map it MAP_SHARED and take turns on a
 * ring of counters in it, signalling each other over the socket. After a
 * restore both must still share one object (the child's writes visible to
 * the parent), with its contents as saved.
 * Usage: mp_memfdpass [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 4096

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
	struct iovec iov = {"m", 1};
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

static int recv_fd(int sock)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	char x;
	struct iovec iov = {&x, 1};
	struct msghdr mh = {0};
	int fd = -1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	if (recvmsg(sock, &mh, 0) != 1 || !CMSG_FIRSTHDR(&mh))
		return -1;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
	return fd;
}

int main(int argc, char **argv)
{
	int steps = (int)(120 * app_scale(argc, argv)), sv[2], st;
	size_t size = SLOTS * sizeof(uint64_t);
	pid_t kid;

	if (steps < 4)
		steps = 4;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	printf("mp_memfdpass: %d turns on a memfd passed over a socket\n", steps);
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		int fd = recv_fd(sv[1]);
		uint64_t *m;
		char t;
		close(sv[0]);
		if (fd < 0 || (m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
			_exit(2);
		for (int i = 0; i < steps; i++) {
			if (read(sv[1], &t, 1) != 1)
				_exit(3);
			for (int k = 0; k < SLOTS; k++)
				m[k] = m[k] * 6364136223846793005ull + (uint64_t)(i ^ k);
			if (write(sv[1], "c", 1) != 1)
				_exit(4);
		}
		_exit(0);
	}
	{
		int fd = memfd_create("ckapp-ring", 0);
		uint64_t *m, sum = 0;
		char t;
		close(sv[1]);
		if (fd < 0 || ftruncate(fd, (off_t)size) < 0 ||
		    (m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED || send_fd(sv[0], fd))
			return 1;
		close(fd); /* the mapping and the child's copy keep it */
		for (int i = 0; i < steps; i++) {
			for (int k = 0; k < SLOTS; k++)
				m[k] += (uint64_t)k * 7 + (uint64_t)i;
			if (write(sv[0], "p", 1) != 1 || read(sv[0], &t, 1) != 1) {
				printf("FAIL turn %d\n", i);
				return 1;
			}
			usleep(20000);
			if (i % 30 == 0) {
				uint64_t h = 0;
				for (int k = 0; k < SLOTS; k++)
					h = h * 31 + m[k];
				printf("turn %d: %016llx\n", i, (unsigned long long)h);
			}
		}
		for (int k = 0; k < SLOTS; k++)
			sum = sum * 31 + m[k];
		waitpid(kid, &st, 0);
		printf("child %s, checksum %016llx\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "FAILED",
		       (unsigned long long)sum);
		return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
	}
}
