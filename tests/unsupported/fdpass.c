/* fdpass: a descriptor in flight over a UNIX socket (SCM_RIGHTS) while a
 * checkpoint is asked for: the round must be refused naming it, and the
 * job must go on and print what a bare run prints. The parent sends the
 * read end of a pipe at once; the child takes it only after 2.5 s. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int sv[2], p[2], st;
	char buf[16];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(p) < 0)
		return 1;
	fflush(stdout);
	pid_t kid = fork();
	if (kid == 0) {
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr a;
		} u;
		struct iovec iov = {buf, 1};
		struct msghdr mh = {0};
		int fd = -1;
		close(sv[0]);
		usleep(2500000);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		if (recvmsg(sv[1], &mh, 0) != 1 || !CMSG_FIRSTHDR(&mh))
			_exit(2);
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
		if (read(fd, buf, 5) != 5)
			_exit(3);
		_exit(memcmp(buf, "hello", 5) ? 4 : 0);
	}
	{
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr a;
		} u;
		struct iovec iov = {"x", 1};
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
		memcpy(CMSG_DATA(c), &p[0], sizeof(int));
		if (write(p[1], "hello", 5) != 5 || sendmsg(sv[0], &mh, 0) != 1)
			return 1;
	}
	close(p[0]);
	waitpid(kid, &st, 0);
	printf("fdpass: child %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "read the passed pipe" : "FAILED");
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
