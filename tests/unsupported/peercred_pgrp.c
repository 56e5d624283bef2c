/* peercred_pgrp: a socketpair whose SO_PEERCRED names a process that has
 * exited while its number is still a process group's. G leads a group of
 * its own, makes a stream socketpair, hands both ends to the main process
 * P, forks M into its group and exits; P reaps G. The group lives on with
 * M, so the kernel keeps G's number for it, and a restore could make no
 * process under it to make the pair again: the round must be refused
 * naming the socket, and the job must go on untouched (P checks both
 * ends' SO_PEERCRED and the pair at every step). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pass_fds(int sock, int *fds, int n, int sending)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char b = 'f';
	struct iovec iov = { &b, 1 };
	struct msghdr mh = { 0 };
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sending ? CMSG_SPACE((size_t)n * sizeof(int)) : sizeof(u.buf);
	if (sending) {
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
		return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
	}
	if (recvmsg(sock, &mh, 0) != 1 || !(c = CMSG_FIRSTHDR(&mh)) || c->cmsg_len != CMSG_LEN((size_t)n * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
	return 0;
}

int main(void)
{
	int chan[2], rel[2], sv[2], st, fails = 0;
	pid_t g, m = -1;
	char c;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, chan) < 0 || pipe(rel) < 0)
		return 1;
	g = fork();
	if (g == 0) {
		int p[2];
		close(rel[1]);
		if (setpgid(0, 0) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, p) < 0 || pass_fds(chan[1], p, 2, 1) < 0)
			_exit(1);
		m = fork();
		if (m == 0) {
			close(chan[0]);
			close(chan[1]);
			close(p[0]);
			close(p[1]);
			_exit(read(rel[0], &c, 1) == 0 ? 0 : 1); /* until P closes the release pipe */
		}
		_exit(m < 0 ? 1 : 0);
	}
	close(rel[0]);
	if (g < 0 || pass_fds(chan[0], sv, 2, 0) < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return 2;
	for (int s = 0; s < 160; s++) {
		struct ucred uc[2];
		socklen_t l = sizeof(uc[0]);
		char x = (char)s, y = 0;
		fails += getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &uc[0], &l) < 0 || uc[0].pid != g;
		fails += getsockopt(sv[1], SOL_SOCKET, SO_PEERCRED, &uc[1], &l) < 0 || uc[1].pid != g;
		fails += write(sv[0], &x, 1) != 1 || read(sv[1], &y, 1) != 1 || x != y;
		fails += kill(-g, 0) != 0; /* the group lives on */
		usleep(25000);
	}
	close(rel[1]);
	printf("peercred_pgrp: %d failed checks\n", fails);
	return fails ? 1 : 0;
}
