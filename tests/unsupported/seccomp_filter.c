/* seccomp_filter: seccomp filters of the job's that a checkpoint cannot
 * restore or cannot run under, while a checkpoint is asked for: the round
 * must be refused before the cut naming the filter or the thread, and the
 * job must go on untouched.
 *   denies:    a filter that fails getdents64, a call a round makes;
 *   raw:       a filter installed by a bare system call instruction, which
 *              libckpt never saw (the count in /proc says so);
 *   onethread: a filter installed by one of two threads without TSYNC
 *              (the other runs without it: threads' filters differ);
 *   noinstall: a filter that kills on seccomp(), then a second filter: a
 *              restore could not install the second through the first. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sock_filter deny_getdents[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getdents64, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
static struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
static struct sock_filter kill_seccomp[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

static long raw_seccomp(unsigned op, unsigned flags, void *prog)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_seccomp), "D"((long)op), "S"((long)flags), "d"(prog)
			 : "rcx", "r11", "memory");
	return r;
}

static void *idle(void *arg)
{
	(void)arg;
	for (int i = 0; i < 25; i++)
		usleep(100000);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "denies";
	struct sock_fprog deny = {4, deny_getdents}, all = {1, allow}, noseccomp = {4, kill_seccomp};
	pthread_t th;
	int two = 0, r;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return 1;
	if (!strcmp(mode, "denies")) {
		r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &deny);
	} else if (!strcmp(mode, "noinstall")) {
		r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &noseccomp);
		if (r == 0)
			r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &all);
	} else if (!strcmp(mode, "raw")) {
		r = (int)raw_seccomp(SECCOMP_SET_MODE_FILTER, 0, &all);
	} else {
		if (pthread_create(&th, NULL, idle, NULL) != 0)
			return 1;
		two = 1;
		r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &all);
	}
	if (r != 0)
		return 1;
	for (int i = 0; i < 25; i++)
		usleep(100000);
	if (two)
		pthread_join(th, NULL);
	printf("seccomp_filter %s: 25 rounds, mode %d\n", mode, prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
	return 0;
}
