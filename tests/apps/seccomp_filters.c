/* seccomp_filters: the job's own seccomp filters, per thread.
 *
 * State exercised: three filters installed by the main thread while it is
 * the program's only thread:
 *   A, with prctl(PR_SET_SECCOMP): sysinfo() fails with errno 77;
 *   B, with syscall(SYS_seccomp, ..., SECCOMP_FILTER_FLAG_TSYNC): an allow
 *      list, every other system call kills the process (so a checkpoint or
 *      a restore that makes a call the list lacks ends the job, visibly);
 *   C, with syscall(SYS_prctl, PR_SET_SECCOMP): times fails with errno 78.
 * Then a second thread, which inherits all three, and a child process
 * (fork), which inherits them too. Each thread checks, at
 * every step, that both calls still fail with their own errno, that it is
 * in filter mode with no_new_privs, and that it runs under exactly three
 * filters more than the program started with (Seccomp_filters: in /proc).
 * A restore that forgot a filter, or installed one twice, prints LOST.
 *
 * The allow list holds what this program and the C library call, and the
 * system calls the checkpoint library documents for its rounds.
 * Usage: seccomp_filters [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int allowed[] = {
	/* this program and the C library */
	SYS_read, SYS_write, SYS_openat, SYS_close, SYS_fstat, SYS_newfstatat, SYS_lseek, SYS_brk, SYS_mmap,
	SYS_munmap, SYS_mprotect, SYS_madvise, SYS_clone, SYS_clone3, SYS_set_robust_list, SYS_rseq,
	SYS_rt_sigprocmask, SYS_rt_sigaction, SYS_rt_sigreturn, SYS_futex, SYS_clock_nanosleep, SYS_nanosleep,
	SYS_clock_gettime, SYS_getrandom, SYS_exit, SYS_exit_group, SYS_sysinfo, SYS_times, SYS_prctl,
	SYS_seccomp, SYS_getpid, SYS_gettid, SYS_sched_yield, SYS_wait4,
	/* a checkpoint's, libckpt's own when it takes its channel again, and a
	 * forked child's manager thread's (libckpt/seccomp.c: ck__round_calls) */
	SYS_tgkill, SYS_getuid, SYS_getgid, SYS_getresuid, SYS_getresgid, SYS_getgroups,
	SYS_capget, SYS_setfsuid, SYS_setfsgid, SYS_arch_prctl, SYS_get_robust_list, SYS_personality, SYS_rt_sigtimedwait,
	SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo, SYS_getdents64, SYS_readlinkat, SYS_getcwd, SYS_fcntl,
	SYS_dup3, SYS_ioctl, SYS_flock, SYS_kcmp, SYS_umask, SYS_prlimit64, SYS_mincore, SYS_userfaultfd,
	SYS_timer_gettime, SYS_getitimer, SYS_timerfd_gettime, SYS_getrusage, SYS_sendmsg, SYS_recvmsg, SYS_socket,
	SYS_socketpair, SYS_connect, SYS_getsockopt, SYS_faccessat, SYS_close_range, SYS_wait4, SYS_kill, SYS_setsid, SYS_pause,
};

#define NALLOW (sizeof(allowed) / sizeof(allowed[0]))

static int install_errno(int nr, int err, int via_syscall)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog p = {sizeof(f) / sizeof(f[0]), f};

	if (via_syscall)
		return (int)syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p, 0, 0);
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p, 0, 0);
}

static int install_allow_list(void)
{
	struct sock_filter f[4 + NALLOW + 2];
	struct sock_fprog p;
	unsigned n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (unsigned i = 0; i < NALLOW; i++) /* match: jump to the ALLOW at the end */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)allowed[i],
						      (unsigned char)(NALLOW - i), 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	p = (struct sock_fprog){(unsigned short)n, f};
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &p);
}

static long my_filters(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/thread-self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Seccomp_filters:", 16))
			v = atol(line + 16);
	fclose(f);
	return v;
}

static long base;
static int steps;

/* 0 when this thread's filters are all there, else prints what is not. */
static int check(const char *who, int step)
{
	struct sysinfo si;
	struct tms t;
	int e1, e2;
	long n;

	errno = 0;
	e1 = sysinfo(&si) == -1 ? errno : 0;
	errno = 0;
	e2 = syscall(SYS_times, &t) == -1 ? errno : 0; /* glibc's times() leaves errno alone */
	n = my_filters();
	if (e1 == 77 && e2 == 78 && prctl(PR_GET_SECCOMP) == 2 && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 && n == base + 3)
		return 0;
	printf("%s step %d: LOST: sysinfo errno %d (77), times errno %d (78), mode %d, nnp %d, filters %+ld (+3)\n",
	       who, step, e1, e2, prctl(PR_GET_SECCOMP), prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), n - base);
	return 1;
}

static void *worker(void *arg)
{
	int bad = 0;

	(void)arg;
	for (int i = 0; i < steps && bad < 3; i++) {
		bad += check("thread", i);
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	return (void *)(long)bad;
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && strtod(s, NULL) > 0 ? strtod(s, NULL) : 1.0;
	pthread_t th;
	void *tbad;
	int bad = 0, st = 0;
	pid_t kid;

	steps = (int)(300 * scale) > 1 ? (int)(300 * scale) : 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	base = my_filters();
	if (base < 0) {
		printf("seccomp_filters: this kernel does not count filters\n");
		return 1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || install_errno(SYS_sysinfo, 77, 0) != 0 ||
	    install_allow_list() != 0 || install_errno(SYS_times, 78, 1) != 0) {
		printf("seccomp_filters: cannot install the filters: %s\n", strerror(errno));
		return 1;
	}
	printf("seccomp_filters: 3 filters, %d steps in 2 threads and a child\n", steps);
	kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0) {
		for (int i = 0; i < steps && bad < 3; i++) {
			bad += check("child", i);
			nanosleep(&(struct timespec){0, 10000000}, NULL);
		}
		_exit(bad ? 1 : 0);
	}
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	for (int i = 0; i < steps && bad < 3; i++) {
		bad += check("main", i);
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	pthread_join(th, &tbad);
	bad += (int)(long)tbad;
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("seccomp_filters: the child ended with status 0x%x\n", st);
		bad++;
	}
	printf("seccomp_filters: %s\n", bad ? "filters LOST" : "every filter held in both threads and the child");
	return bad ? 1 : 0;
}
