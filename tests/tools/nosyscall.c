/* nosyscall NR PROG [ARG...]: runs PROG with system call NR failing ENOSYS
 * (a seccomp filter, inherited by everything PROG starts), as on a kernel
 * that predates it. Tests use it to take a fallback path: ckrun's init
 * closing descriptors without close_range (Linux 5.9). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char *end;
	long nr = argc > 2 ? strtol(argv[1], &end, 10) : -1;

	if (nr < 0 || *end) {
		fprintf(stderr, "usage: nosyscall NR PROG [ARG...]\n");
		return 64;
	}
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		fprintf(stderr, "nosyscall: cannot install the filter: %s\n", strerror(errno));
		return 70;
	}
	execvp(argv[2], argv + 2);
	fprintf(stderr, "nosyscall: cannot run %s: %s\n", argv[2], strerror(errno));
	return 127;
}
