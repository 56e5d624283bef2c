/* The job's own seccomp filters: recorded as it installs them, installed
 * again in a restored process.
 *
 * A filter cannot be read back without CAP_SYS_ADMIN in the initial user
 * namespace (PTRACE_SECCOMP_GET_FILTER), so libckpt keeps a copy of each
 * program the job installs through the C library: prctl(PR_SET_SECCOMP),
 * syscall(SYS_seccomp) (libseccomp's way) and syscall(SYS_prctl). The
 * copies live in the job's memory, which the checkpoint holds; a restored
 * process finds them there.
 *
 * Which thread has which filters: every job thread has them all, or the
 * round is refused. The kernel attaches a filter to the calling thread
 * (to all with SECCOMP_FILTER_FLAG_TSYNC), and threads inherit their
 * creator's. The manager thread (libckpt's) exists from the start and
 * never installs one: it has those that were there when it was created
 * (a forked child's manager: all of them) and those installed with TSYNC
 * since, a prefix of the list. When ckrun sees a thread under more
 * filters than its own (a container's profile, inherited again at
 * restore), it asks for the count check with its own count: every
 * thread's count in /proc (Seccomp_filters:) must be what the list says.
 * A count that differs means a filter installed some other way (a bare
 * system call instruction, before an exec, by one thread of several
 * without TSYNC): the round is refused naming the thread.
 *
 * A round runs libckpt's own system calls in the job's threads and its
 * manager, and a restore installs filter k through the filters before it.
 * Each recorded filter is run here (classic BPF) on those calls with zero
 * arguments; one that would not let a call through refuses the round
 * naming it, so that a round never kills the job (SECCOMP_RET_KILL) or
 * fails half-way, and a committed checkpoint can be restored.
 *
 * At restore the manager installs the whole list with TSYNC once every
 * thread has finished its own restore (credentials first: the filters may
 * forbid set*id and capset) and before it releases them: every thread
 * runs job code again under the same, shared filters, and a later TSYNC
 * install by the job works as before. The manager then has them all,
 * which the round check above showed it can run under. */
#include <dlfcn.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__SF_MAX 64
#define CK__SF_KEEP (SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW)

struct ck__sfilter {
	struct sock_filter *insns; /* mmap'd copy, in the job's memory */
	uint16_t len;
	uint32_t flags; /* as installed */
};

static struct ck__sfilter ck__sf[CK__SF_MAX];
static uint32_t ck__nsf;      /* filters recorded, in installation order */
static uint32_t ck__nsf_mgr;  /* the manager has ck__sf[0 .. ck__nsf_mgr) */
static int ck__sf_lost;       /* a filter installed that could not be recorded (-errno) */
static volatile int ck__sf_lock;

static void ck__sf_take(void)
{
	while (__atomic_exchange_n(&ck__sf_lock, 1, __ATOMIC_ACQUIRE))
		ck_futex(&ck__sf_lock, FUTEX_WAIT_PRIVATE, 1, NULL);
}

static void ck__sf_give(void)
{
	__atomic_store_n(&ck__sf_lock, 0, __ATOMIC_RELEASE);
	ck_futex(&ck__sf_lock, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* After the kernel took prog (flags as given): keep a copy. */
static void ck__sf_record(const struct sock_fprog *prog, unsigned flags)
{
	size_t bytes = (size_t)prog->len * sizeof(struct sock_filter);
	long copy;

	ck__sf_take();
	if (ck__nsf >= CK__SF_MAX) {
		ck__sf_lost = -E2BIG;
		goto out;
	}
	copy = ck_mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy < 0 && copy > -4096) {
		ck__sf_lost = (int)copy;
		goto out;
	}
	memcpy((void *)copy, prog->filter, bytes);
	ck__sf[ck__nsf] = (struct ck__sfilter){(struct sock_filter *)copy, prog->len, flags};
	ck__nsf++;
	if (flags & SECCOMP_FILTER_FLAG_TSYNC)
		ck__nsf_mgr = ck__nsf; /* every thread, the manager too */
out:
	ck__sf_give();
}

void ck__seccomp_manager_started(void)
{
	ck__nsf_mgr = ck__nsf; /* it inherits its creator's */
}

void ck__seccomp_atfork_child(void)
{
	ck__sf_lock = 0; /* the parent's copy: its holder is not here */
}

typedef int (*ck__prctl_fn)(int, ...);

/* syscall.S: an error of syscall(3) */
long ck__syscall_fail(long r)
{
	errno = (int)-r;
	return -1;
}

/* syscall.S: syscall(SYS_seccomp, op, flags, args),
 * syscall(SYS_prctl, option, a1, a2, ...) (the arguments past these three
 * matter to no seccomp request) and syscall(SYS_membarrier, cmd, flags,
 * cpu) (membarrier.c) */
long ck__syscall_record(long nr, long a0, long a1, long a2)
{
	long r = ck_sys3(nr, a0, a1, a2);

	if (nr == SYS_membarrier)
		ck__membarrier_note(a0, r);
	if (r < 0 && r > -4096)
		return ck__syscall_fail(r);
	if (nr == SYS_prctl) {
		if (a0 == PR_SET_SECCOMP && a1 == SECCOMP_MODE_FILTER && a2 && r == 0)
			ck__sf_record((const struct sock_fprog *)a2, 0);
		return r;
	}
	/* success is 0, or a listener's descriptor; with TSYNC a thread id
	 * says which thread could not follow, and nothing was installed */
	if (a0 == SECCOMP_SET_MODE_FILTER && a2 && ((a1 & SECCOMP_FILTER_FLAG_NEW_LISTENER) ? r >= 0 : r == 0))
		ck__sf_record((const struct sock_fprog *)a2, (unsigned)a1);
	return r;
}

int prctl(int option, ...)
{
	static ck__prctl_fn real;
	unsigned long a[4];
	va_list ap;
	int r;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (!real)
		real = (ck__prctl_fn)dlsym(RTLD_NEXT, "prctl");
	r = real(option, a[0], a[1], a[2], a[3]);
	if (option == PR_SET_SECCOMP && a[0] == SECCOMP_MODE_FILTER && r == 0 && a[1])
		ck__sf_record((const struct sock_fprog *)a[1], 0);
	return r;
}

/* The system calls libckpt makes in a job thread or its manager: in a
 * round, after a restore once the filters are back, when it takes its
 * channel again (ckrun gone, or the job closed it), in a forked child
 * (its manager thread), and in the job's calls it interposes (fdhide.c).
 * Each must pass every filter. (Calls
 * made only by a restore before the filters are installed are not here.)
 * tests/apps/seccomp_filters allows these and kills on any other call. */
static const struct {
	int nr;
	const char *name;
} ck__round_calls[] = {
#define C(n) {SYS_##n, #n}
	C(futex), C(tgkill), C(gettid), C(getpid), C(getuid), C(getgid), C(getresuid),
	C(getresgid), C(getgroups), C(capget), C(setfsuid), C(setfsgid), C(prctl), C(arch_prctl), C(get_robust_list), C(personality),
	C(rt_sigreturn), C(rt_sigprocmask), C(rt_sigaction), C(rt_sigtimedwait), C(rt_sigqueueinfo),
	C(rt_tgsigqueueinfo), C(openat), C(read), C(write), C(close), C(lseek), C(fstat), C(newfstatat),
	C(getdents64), C(readlinkat), C(getcwd), C(fcntl), C(dup3), C(ioctl), C(flock), C(kcmp), C(umask),
	C(prlimit64), C(brk), C(mmap), C(munmap), C(mprotect), C(madvise), C(mincore), C(userfaultfd),
	C(timer_gettime), C(getitimer), C(timerfd_gettime), C(clock_gettime), C(clock_nanosleep), C(getrusage),
	C(nanosleep), C(sendmsg), C(recvmsg), C(socket), C(socketpair), C(connect), C(getsockopt), C(faccessat), C(close_range), C(clone), C(wait4),
	C(kill), C(setsid), C(pause), C(exit), C(exit_group),
	/* a forked child's manager thread (pthread_create) */
	C(clone3), C(rseq), C(set_robust_list), C(getrandom),
#undef C
};

/* Runs a seccomp program on data; the SECCOMP_RET_* value it returns, or
 * SECCOMP_RET_KILL_PROCESS for one that does something seccomp forbids
 * (the kernel checked it at install: this only guards the reading). */
static uint32_t ck__bpf_run(const struct sock_filter *f, uint16_t len, const struct seccomp_data *d)
{
	uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};
	const unsigned char *raw = (const unsigned char *)d;

	for (uint32_t pc = 0; pc < len; pc++) {
		const struct sock_filter *i = &f[pc];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? X : i->k;

		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t v;
			if (BPF_MODE(i->code) == BPF_ABS) {
				if (i->k > sizeof(*d) - 4 || (i->k & 3))
					return SECCOMP_RET_KILL_PROCESS;
				memcpy(&v, raw + i->k, 4);
			} else if (BPF_MODE(i->code) == BPF_IMM) {
				v = i->k;
			} else if (BPF_MODE(i->code) == BPF_MEM) {
				if (i->k >= BPF_MEMWORDS)
					return SECCOMP_RET_KILL_PROCESS;
				v = M[i->k];
			} else if (BPF_MODE(i->code) == BPF_LEN) {
				v = sizeof(*d);
			} else {
				return SECCOMP_RET_KILL_PROCESS;
			}
			if (BPF_CLASS(i->code) == BPF_LD)
				A = v;
			else
				X = v;
			break;
		}
		case BPF_ST:
		case BPF_STX:
			if (i->k >= BPF_MEMWORDS)
				return SECCOMP_RET_KILL_PROCESS;
			M[i->k] = BPF_CLASS(i->code) == BPF_ST ? A : X;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD: A += src; break;
			case BPF_SUB: A -= src; break;
			case BPF_MUL: A *= src; break;
			case BPF_DIV: if (!src) return SECCOMP_RET_KILL_PROCESS; A /= src; break;
			case BPF_MOD: if (!src) return SECCOMP_RET_KILL_PROCESS; A %= src; break;
			case BPF_AND: A &= src; break;
			case BPF_OR: A |= src; break;
			case BPF_XOR: A ^= src; break;
			case BPF_LSH: A <<= src & 31; break; /* the kernel's shift */
			case BPF_RSH: A >>= src & 31; break;
			case BPF_NEG: A = -A; break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_JMP: {
			int t;
			if (BPF_OP(i->code) == BPF_JA) {
				pc += i->k;
				continue;
			}
			switch (BPF_OP(i->code)) {
			case BPF_JEQ: t = A == src; break;
			case BPF_JGT: t = A > src; break;
			case BPF_JGE: t = A >= src; break;
			case BPF_JSET: t = (A & src) != 0; break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			pc += t ? i->jt : i->jf;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(i->code) == BPF_A ? A : i->k;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				X = A;
			else
				A = X;
			break;
		default:
			return SECCOMP_RET_KILL_PROCESS;
		}
	}
	return SECCOMP_RET_KILL_PROCESS; /* ran off the end: the kernel refuses such a program */
}

static const char *ck__action_name(uint32_t ret)
{
	switch (ret & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_KILL_PROCESS: return "kills the process";
	case SECCOMP_RET_KILL_THREAD: return "kills the thread";
	case SECCOMP_RET_TRAP: return "sends SIGSYS";
	case SECCOMP_RET_ERRNO: return "fails it";
	case SECCOMP_RET_USER_NOTIF: return "asks a listener";
	case SECCOMP_RET_TRACE: return "asks a tracer";
	}
	return "does not allow it";
}

/* Seccomp_filters: of one of our threads, -1 if unknown. (The file grows
 * with supplementary groups: 64 KiB holds 65536 of them.) */
static long ck__filters_of(int tid)
{
	static char buf[1 << 16]; /* the manager's, threads parked */
	char path[64];
	const char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	if (ck__read_file(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "\nSeccomp_filters:")))
		return -1;
	return strtol(p + 17, NULL, 10);
}

/* The first call among calls[0..n) that filter i does not let through:
 * its index, or -1. */
static int ck__sf_forbids(uint32_t i, const int *calls, size_t n, uint32_t *ret)
{
	struct seccomp_data d;

	memset(&d, 0, sizeof(d));
	d.arch = AUDIT_ARCH_X86_64;
	for (size_t c = 0; c < n; c++) {
		d.nr = calls[c];
		*ret = ck__bpf_run(ck__sf[i].insns, ck__sf[i].len, &d) & SECCOMP_RET_ACTION_FULL;
		if (*ret != SECCOMP_RET_ALLOW && *ret != SECCOMP_RET_LOG)
			return (int)c;
	}
	return -1;
}

int ck__seccomp_allows(int nr)
{
	const int one[] = {nr};
	uint32_t ret;

	for (uint32_t i = 0; i < ck__nsf; i++)
		if (ck__sf_forbids(i, one, 1, &ret) >= 0)
			return 0;
	return 1;
}

uint32_t ck__seccomp_count(void)
{
	return __atomic_load_n(&ck__nsf, __ATOMIC_SEQ_CST);
}

int ck__seccomp_check(int counted, uint32_t base)
{
	static const int install[] = {SYS_seccomp};
	int nrs[sizeof(ck__round_calls) / sizeof(ck__round_calls[0])];
	size_t n = sizeof(nrs) / sizeof(nrs[0]);
	uint32_t ret;
	int c;

	if (!counted && !ck__nsf && !ck__sf_lost)
		return 0; /* no filter of the job's, as far as anyone knows */
	if (ck__sf_lost) {
		ck__failf("a seccomp filter the job installed could not be recorded (%s): it could not be restored",
			  strerror(-ck__sf_lost));
		return -ENOTSUP;
	}
	if (!counted) {
		/* ckrun saw no thread under more filters than its own: a
		 * kernel that does not count them (before 5.9) */
		ck__failf("the job installed seccomp filters and this kernel does not count a thread's filters "
			  "(Seccomp_filters: in /proc): they cannot be checked");
		return -ENOTSUP;
	}
	for (uint32_t i = 0; i < ck__nsf; i++)
		if (ck__sf[i].flags & SECCOMP_FILTER_FLAG_NEW_LISTENER) {
			ck__failf("seccomp filter %u has a user-notification listener: not restored", i + 1);
			return -ENOTSUP;
		}
	for (uint32_t t = 0; t < ck__pd.nthreads; t++) {
		int tid = ck__pd.threads[t].tid;
		long want = (long)base + (t == 0 ? ck__nsf_mgr : ck__nsf), have = ck__filters_of(tid);
		if (have != want) {
			ck__failf("thread %d runs under %ld seccomp filter(s) where %ld are known (ckrun's %u and %u the "
				  "job installed through prctl or syscall): one installed otherwise (a bare system call, "
				  "before an exec, by one thread of several without TSYNC) cannot be restored",
				  tid, have, want, base, t == 0 ? ck__nsf_mgr : ck__nsf);
			return -ENOTSUP;
		}
	}
	for (size_t k = 0; k < n; k++)
		nrs[k] = ck__round_calls[k].nr;
	for (uint32_t i = 0; i < ck__nsf; i++) {
		if ((c = ck__sf_forbids(i, nrs, n, &ret)) >= 0) {
			ck__failf("seccomp filter %u of the job %s on %s(), a system call a checkpoint makes: not "
				  "supported",
				  i + 1, ck__action_name(ret), ck__round_calls[c].name);
			return -ENOTSUP;
		}
		/* a restore installs the filters after it through this one */
		if (i + 1 < ck__nsf && ck__sf_forbids(i, install, 1, &ret) >= 0) {
			ck__failf("seccomp filter %u of the job %s on seccomp(), which a restore needs to install "
				  "filter %u after it: not supported",
				  i + 1, ck__action_name(ret), i + 2);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* All of them, on every thread (TSYNC) from the manager. TSYNC needs
 * no_new_privs or CAP_SYS_ADMIN of the caller: a manager that had neither
 * (the job set no_new_privs on its own threads only) takes no_new_privs,
 * which the job's threads have anyway (TSYNC gives it to them, as the
 * kernel gave it at their own install). */
int ck__seccomp_restore(void)
{
	for (uint32_t i = 0; i < ck__nsf; i++) {
		struct sock_fprog prog = {ck__sf[i].len, ck__sf[i].insns};
		unsigned flags = (ck__sf[i].flags & CK__SF_KEEP) | SECCOMP_FILTER_FLAG_TSYNC;
		long r = ck_sys3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
		if (r == -EACCES && ck_sys5(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
			r = ck_sys3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
		if (r != 0)
			return r > 0 ? -EBUSY : (int)r; /* TSYNC: a thread that could not follow */
	}
	ck__nsf_mgr = ck__nsf;
	return 0;
}
