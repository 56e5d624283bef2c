/* seccomp_filter: a thread under a seccomp filter (one that allows every
 * system call, so nothing but the mode itself is in the way) while a
 * checkpoint is asked for: the round must be refused before the cut naming
 * the process and the mode, and the job must go on untouched. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(void)
{
	struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
	struct sock_fprog prog = {1, allow};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return 1;
	for (int i = 0; i < 25; i++)
		usleep(100000);
	printf("seccomp_filter: 25 rounds, mode %d\n", prctl(PR_GET_SECCOMP));
	return 0;
}
