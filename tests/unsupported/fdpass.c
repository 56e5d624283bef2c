/* fdpass: a socket in flight over a UNIX socket (SCM_RIGHTS) while a
 * checkpoint is asked for: files, pipes and memfds in flight are saved
 * (tests/apps/mp_scm_*), a socket is not (its own queue could carry
 * descriptors again): the round must be refused naming it, and the job
 * must go on and print what a bare run prints, the socket and the pipe
 * sent with it still in flight. The parent sends one end of another
 * socketpair and the read end of a pipe at once; the child takes them only
 * after 2.5 s and talks through both. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int sv[2], p[2], sk[2], st;
	char buf[16];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sk) < 0 || pipe(p) < 0)
		return 1;
	fflush(stdout);
	pid_t kid = fork();
	if (kid == 0) {
		union {
			char b[CMSG_SPACE(2 * sizeof(int))];
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
		int fd2 = -1;
		if (recvmsg(sv[1], &mh, 0) != 1 || !CMSG_FIRSTHDR(&mh) ||
		    CMSG_FIRSTHDR(&mh)->cmsg_len != CMSG_LEN(2 * sizeof(int)))
			_exit(2);
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
		memcpy(&fd2, CMSG_DATA(CMSG_FIRSTHDR(&mh)) + sizeof(int), sizeof(int));
		if (read(fd, buf, 5) != 5 || memcmp(buf, "hello", 5))
			_exit(3);
		if (read(fd2, buf, 3) != 3 || memcmp(buf, "sk!", 3))
			_exit(4);
		_exit(0);
	}
	{
		union {
			char b[CMSG_SPACE(2 * sizeof(int))];
			struct cmsghdr a;
		} u;
		struct iovec iov = {"x", 1};
		struct msghdr mh = {0};
		struct cmsghdr *c;
		int two[2] = {p[0], sk[1]};
		memset(&u, 0, sizeof(u));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(c), two, 2 * sizeof(int));
		if (write(p[1], "hello", 5) != 5 || write(sk[0], "sk!", 3) != 3 || sendmsg(sv[0], &mh, 0) != 1)
			return 1;
	}
	close(p[0]);
	close(sk[1]);
	waitpid(kid, &st, 0);
	printf("fdpass: child %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "read the passed pipe and socket" : "FAILED");
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
