/* The job's own seccomp filters: recorded as it installs them, installed
 * again in a restored process.
 *
 * A filter cannot be read back without CAP_SYS_ADMIN in the initial user
 * namespace (PTRACE_SECCOMP_GET_FILTER), so libckpt keeps a copy of each
 * program the job installs through the C library: prctl(PR_SET_SECCOMP)
 * and syscall(SYS_seccomp) (libseccomp's way). The copies live in the
 * job's memory, which the checkpoint holds; a restored process finds them
 * there.
 *
 * Which thread has which filters: every job thread has them all, or the
 * round is refused. The kernel attaches a filter to the calling thread
 * (to all with SECCOMP_FILTER_FLAG_TSYNC), and threads inherit their
 * creator's. The manager thread (libckpt's) exists from the start and
 * never installs one: it has those that were there when it was created
 * (a forked child's manager: all of them) and those installed with TSYNC
 * since, a prefix of the list. A round compares each thread's count in
 * /proc (Seccomp_filters:) with what the list says, less the filters ckrun
 * itself runs under (a container's profile, inherited again at restore),
 * which ckrun sends with the request. A count that differs means a filter
 * installed some other way (a bare system call instruction, before an
 * exec, by one thread of several without TSYNC): the round is refused
 * naming the thread.
 *
 * A round runs libckpt's own system calls in the job's threads and its
 * manager. Each recorded filter is evaluated here (classic BPF) on those
 * calls, with zero arguments; one that would not let a call through
 * refuses the round naming it, so that a round never kills the job
 * (SECCOMP_RET_KILL) or fails half-way.
 *
 * At restore the manager installs its prefix with TSYNC (every thread
 * then shares it, as they did), and each job thread the rest for itself,
 * as the last thing before it runs job code again: the restore's own
 * system calls (set*id, capset) run before any filter forbids them. */
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
	ck__sf_lock = 0;       /* a forked child's copy: its holder is not here */
}

typedef int (*ck__prctl_fn)(int, ...);

/* syscall.S: an error of syscall(3) */
long ck__syscall_fail(long r)
{
	errno = (int)-r;
	return -1;
}

/* syscall.S: syscall(SYS_seccomp, op, flags, args) */
long ck__syscall_seccomp(long nr, long op, long flags, long args)
{
	long r = ck_sys3(nr, op, flags, args);

	if (r < 0 && r > -4096)
		return ck__syscall_fail(r);
	/* success is 0, or a listener's descriptor; with TSYNC a thread id
	 * says which thread could not follow, and nothing was installed */
	if (op == SECCOMP_SET_MODE_FILTER && args && ((flags & SECCOMP_FILTER_FLAG_NEW_LISTENER) ? r >= 0 : r == 0))
		ck__sf_record((const struct sock_fprog *)args, (unsigned)flags);
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
 * channel again (ckrun gone, or the job closed it), and in the job's
 * calls it interposes (fdhide.c). Each must pass every filter. (Calls
 * made only by a restore before the filters are installed are not here.)
 * tests/apps/seccomp_filters allows these and kills on any other call. */
static const struct {
	int nr;
	const char *name;
} ck__round_calls[] = {
#define C(n) {SYS_##n, #n}
	C(futex), C(tgkill), C(gettid), C(getpid), C(getppid), C(getuid), C(getgid), C(getresuid),
	C(getresgid), C(getgroups), C(capget), C(setfsuid), C(setfsgid), C(prctl), C(arch_prctl), C(get_robust_list), C(personality),
	C(rt_sigreturn), C(rt_sigprocmask), C(rt_sigaction), C(rt_sigtimedwait), C(rt_sigqueueinfo),
	C(rt_tgsigqueueinfo), C(openat), C(read), C(write), C(close), C(lseek), C(fstat), C(newfstatat),
	C(getdents64), C(readlinkat), C(getcwd), C(fcntl), C(dup3), C(ioctl), C(flock), C(kcmp), C(umask),
	C(prlimit64), C(brk), C(mmap), C(munmap), C(mprotect), C(madvise), C(mincore), C(userfaultfd),
	C(timer_gettime), C(getitimer), C(timerfd_gettime), C(clock_gettime), C(clock_nanosleep),
	C(nanosleep), C(sendmsg), C(recvmsg), C(socket), C(socketpair), C(connect), C(getsockopt), C(faccessat), C(close_range), C(clone), C(wait4),
	C(kill), C(setsid), C(pause), C(exit), C(exit_group),
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
			case BPF_LSH: A = src < 32 ? A << src : 0; break;
			case BPF_RSH: A = src < 32 ? A >> src : 0; break;
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

/* Seccomp_filters: of one of our threads, -1 if unknown. */
static long ck__filters_of(int tid)
{
	char path[64], buf[4096];
	const char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	if (ck__read_file(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "\nSeccomp_filters:")))
		return -1;
	return strtol(p + 17, NULL, 10);
}

int ck__seccomp_check(uint32_t base)
{
	struct seccomp_data d;

	if (ck__sf_lost) {
		ck__failf("a seccomp filter the job installed could not be recorded (%s): it could not be restored",
			  strerror(-ck__sf_lost));
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
			ck__failf("thread %d runs under %ld seccomp filters where %ld are known (ckrun's %u and %u the job "
				  "installed through prctl or syscall(SYS_seccomp)): one installed otherwise (a bare "
				  "system call, before an exec, by one thread of several without TSYNC) cannot be restored",
				  tid, have, want, base, t == 0 ? ck__nsf_mgr : ck__nsf);
			return -ENOTSUP;
		}
	}
	memset(&d, 0, sizeof(d));
	d.arch = AUDIT_ARCH_X86_64;
	for (uint32_t i = 0; i < ck__nsf; i++)
		for (size_t c = 0; c < sizeof(ck__round_calls) / sizeof(ck__round_calls[0]); c++) {
			uint32_t ret;
			d.nr = ck__round_calls[c].nr;
			ret = ck__bpf_run(ck__sf[i].insns, ck__sf[i].len, &d) & SECCOMP_RET_ACTION_FULL;
			if (ret != SECCOMP_RET_ALLOW && ret != SECCOMP_RET_LOG) {
				ck__failf("seccomp filter %u of the job %s on %s(), a system call a checkpoint makes: not "
					  "supported",
					  i + 1, ck__action_name(ret), ck__round_calls[c].name);
				return -ENOTSUP;
			}
		}
	return 0;
}

static long ck__sf_install(uint32_t from, uint32_t to, unsigned extra)
{
	for (uint32_t i = from; i < to; i++) {
		struct sock_fprog prog = {ck__sf[i].len, ck__sf[i].insns};
		long r = ck_sys3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, (ck__sf[i].flags & CK__SF_KEEP) | extra, &prog);
		if (r != 0)
			return r > 0 ? -EBUSY : r; /* TSYNC: a thread that could not follow */
	}
	return 0;
}

int ck__seccomp_restore_manager(void)
{
	return (int)ck__sf_install(0, ck__nsf_mgr, SECCOMP_FILTER_FLAG_TSYNC);
}

void ck__seccomp_restore_thread(void)
{
	long r = ck__sf_install(ck__nsf_mgr, ck__nsf, 0);

	if (r < 0) {
		char line[160];
		int n = snprintf(line, sizeof(line),
				 "libckpt: restart: thread %d cannot install its seccomp filters again (errno %d)\n",
				 (int)ck_gettid(), (int)-r);
		ck_write(2, line, (size_t)n);
		ck_exit_group(128 + (int)(-r & 0x3f));
	}
}
