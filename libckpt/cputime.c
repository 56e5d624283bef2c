/* CPU time across a restore.
 *
 * The kernel counts a restored process's CPU time, and the other counters
 * of struct rusage, from its new threads: CLOCK_PROCESS_CPUTIME_ID,
 * CLOCK_THREAD_CPUTIME_ID, clock(), getrusage, times() and a parent's
 * wait4 of a restored child went back by what was used before the cut
 * (a time.process_time() delta across a restore was negative).
 *
 * Each thread notes what it has used as it parks, the manager what the
 * process and its reaped children have used at the cut (with what earlier
 * restores added). A restored thread and process keep the difference
 * between that and what the new ones have used so far, and the C
 * library's entry points below add it. A parent learns from ckrun what
 * each of its restored children had used (the child's RESTARTED, passed
 * on as CK_MSG_KIDS_CPU) and adds it as a wait reaps that child: to what
 * the wait returns and to the parent's own count of its children. The
 * figures belong to the process and thread that noted them: a fork's
 * child (or vfork's, which shares this memory) starts from 0 as bare; an
 * exec hands the process's on to the next program (CKPT_CPU, exec.c),
 * its children's list excepted.
 *
 * Not seen: raw system calls, /proc/PID/stat and status, timers on CPU
 * clocks (they count the new process's time), another thread's or
 * process's clock (pthread_getcpuclockid of another thread,
 * clock_getcpuclockid of another process), what a restored child reaps
 * after the restore (its parent adds what the child had used at the
 * restore), children that were zombies at the cut (their parent sees the
 * re-made zombie's), children reaped where the wrappers do not see it
 * (the C library's own waits in system() and pclose, SIGCHLD ignored),
 * restored children of a program that exec'd since the restore, and the
 * RUSAGE counters other than the clocks under a job's seccomp filter that
 * forbids getrusage. */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__MAX_KIDS 1024

struct ck__thr_cpu {
	int64_t ns_cut, ns_off;	    /* the CPU clock's reading at the cut, and what a restore adds */
	struct ck_cpu_use cut, off; /* rusage's */
	int32_t tid;		    /* whose: a fork's child has a copy */
};

static struct {
	int64_t ns_cut, ns_off;
	struct ck_cpu_use cut, off;
	struct ck_cpu_use kids_cut, kids_off; /* RUSAGE_CHILDREN's */
	int32_t pid;			      /* whose: a fork's or vfork's child sees them too */
} ck__proc;
static __thread struct ck__thr_cpu ck__thr __attribute__((tls_model("initial-exec")));
/* set in a restored process: until then every call is the C library's */
static volatile int ck__cpu_active;
/* a restored process's children, from ckrun; taken by the wait that
 * reaps each (kids_lock: two threads may wait) */
static struct ck_kid_cpu ck__kids[CK__MAX_KIDS];
static uint32_t ck__nkids;
static int ck__kids_lock;

/* the C library's, looked up at load (init.c): a handler may call them */
static int (*ck__real_clock_gettime)(clockid_t, struct timespec *);
static clock_t (*ck__real_clock)(void);
static int (*ck__real_getrusage)(int, struct rusage *);
static clock_t (*ck__real_times)(struct tms *);
static pid_t (*ck__real_wait4)(pid_t, int *, int, struct rusage *);
static pid_t (*ck__real_waitpid)(pid_t, int *, int);
static int (*ck__real_waitid)(idtype_t, id_t, siginfo_t *, int);
static long ck__hz = 100;

void ck__cputime_init(void)
{
	ck__real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
	ck__real_clock = dlsym(RTLD_NEXT, "clock");
	ck__real_getrusage = dlsym(RTLD_NEXT, "getrusage");
	ck__real_times = dlsym(RTLD_NEXT, "times");
	ck__real_wait4 = dlsym(RTLD_NEXT, "wait4");
	ck__real_waitpid = dlsym(RTLD_NEXT, "waitpid");
	ck__real_waitid = dlsym(RTLD_NEXT, "waitid");
	if (sysconf(_SC_CLK_TCK) > 0)
		ck__hz = sysconf(_SC_CLK_TCK);
}

/* before our constructor ran (another library's) */
#define CK__REAL(name)                                                                                        \
	do {                                                                                                   \
		if (!ck__real_##name)                                                                          \
			ck__cputime_init();                                                                    \
	} while (0)

static int64_t ck__ns_of(clockid_t clk)
{
	struct timespec ts = {0, 0};

	ck_sys2(SYS_clock_gettime, clk, (long)&ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ck__us(const struct timeval *tv)
{
	return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
}

/* getrusage, where the job's seccomp filters let us (else zeros: the
 * counters stay the new process's) */
static void ck__use_of(int who, struct ck_cpu_use *u)
{
	struct rusage ru;

	ck_memset(&ru, 0, sizeof(ru));
	if (ck__seccomp_allows(SYS_getrusage))
		ck_sys2(SYS_getrusage, who, (long)&ru);
	u->v[CK_CPU_UTIME_US] = ck__us(&ru.ru_utime);
	u->v[CK_CPU_STIME_US] = ck__us(&ru.ru_stime);
	u->v[CK_CPU_MINFLT] = ru.ru_minflt;
	u->v[CK_CPU_MAJFLT] = ru.ru_majflt;
	u->v[CK_CPU_INBLOCK] = ru.ru_inblock;
	u->v[CK_CPU_OUBLOCK] = ru.ru_oublock;
	u->v[CK_CPU_NVCSW] = ru.ru_nvcsw;
	u->v[CK_CPU_NIVCSW] = ru.ru_nivcsw;
	u->v[CK_CPU_MAXRSS] = ru.ru_maxrss;
}

/* out = a + b; MAXRSS: the larger */
static void ck__use_add(struct ck_cpu_use *out, const struct ck_cpu_use *a, const struct ck_cpu_use *b)
{
	for (int i = 0; i < CK_CPU_N; i++)
		out->v[i] = i == CK_CPU_MAXRSS ? (a->v[i] > b->v[i] ? a->v[i] : b->v[i]) : a->v[i] + b->v[i];
}

/* off = cut - now; MAXRSS: the cut's (a floor, not a count) */
static void ck__use_off(struct ck_cpu_use *off, const struct ck_cpu_use *cut, const struct ck_cpu_use *now)
{
	for (int i = 0; i < CK_CPU_N; i++)
		off->v[i] = i == CK_CPU_MAXRSS ? cut->v[i] : cut->v[i] - now->v[i];
}

static void ck__tv_add(struct timeval *tv, int64_t us)
{
	int64_t t = ck__us(tv) + us;

	if (t < 0)
		t = 0;
	tv->tv_sec = (time_t)(t / 1000000);
	tv->tv_usec = (suseconds_t)(t % 1000000);
}

static void ck__ru_add(struct rusage *ru, const struct ck_cpu_use *off)
{
	ck__tv_add(&ru->ru_utime, off->v[CK_CPU_UTIME_US]);
	ck__tv_add(&ru->ru_stime, off->v[CK_CPU_STIME_US]);
	ru->ru_minflt += off->v[CK_CPU_MINFLT];
	ru->ru_majflt += off->v[CK_CPU_MAJFLT];
	ru->ru_inblock += off->v[CK_CPU_INBLOCK];
	ru->ru_oublock += off->v[CK_CPU_OUBLOCK];
	ru->ru_nvcsw += off->v[CK_CPU_NVCSW];
	ru->ru_nivcsw += off->v[CK_CPU_NIVCSW];
	if (ru->ru_maxrss < off->v[CK_CPU_MAXRSS])
		ru->ru_maxrss = off->v[CK_CPU_MAXRSS];
}

/* ---- the round and the restore ---------------------------------------- */

/* A thread, in the parking handler. */
void ck__cpu_thread_park(void)
{
	struct ck_cpu_use now;

	if (ck__thr.tid != (int32_t)ck_gettid()) /* a fork's copy, or none yet */
		ck_memset(&ck__thr, 0, sizeof(ck__thr));
	ck__thr.tid = (int32_t)ck_gettid();
	ck__thr.ns_cut = ck__ns_of(CLOCK_THREAD_CPUTIME_ID) + ck__thr.ns_off;
	ck__use_of(RUSAGE_THREAD, &now);
	ck__use_add(&ck__thr.cut, &now, &ck__thr.off);
}

/* A restored thread, before it runs job code. */
void ck__cpu_thread_restored(void)
{
	struct ck_cpu_use now;

	ck__thr.ns_off = ck__thr.ns_cut - ck__ns_of(CLOCK_THREAD_CPUTIME_ID);
	ck__use_of(RUSAGE_THREAD, &now);
	ck__use_off(&ck__thr.off, &ck__thr.cut, &now);
}

/* The manager, every thread parked. */
void ck__cpu_cut(void)
{
	struct ck_cpu_use now;

	if (ck__proc.pid != (int32_t)ck_getpid()) { /* a fork's copy */
		ck_memset(&ck__proc, 0, sizeof(ck__proc));
		ck__proc.pid = (int32_t)ck_getpid();
	}
	ck__proc.ns_cut = ck__ns_of(CLOCK_PROCESS_CPUTIME_ID) + ck__proc.ns_off;
	ck__use_of(RUSAGE_SELF, &now);
	ck__use_add(&ck__proc.cut, &now, &ck__proc.off);
	ck__use_of(RUSAGE_CHILDREN, &now);
	ck__use_add(&ck__proc.kids_cut, &now, &ck__proc.kids_off);
}

/* The manager of a restored process, before RESTARTED: what its parent
 * adds when it reaps this process, into *as_child. */
void ck__cpu_restored(struct ck_cpu_use *as_child)
{
	struct ck_cpu_use now;

	ck__proc.ns_off = ck__proc.ns_cut - ck__ns_of(CLOCK_PROCESS_CPUTIME_ID);
	ck__use_of(RUSAGE_SELF, &now);
	ck__use_off(&ck__proc.off, &ck__proc.cut, &now);
	ck__use_of(RUSAGE_CHILDREN, &now);
	ck__use_off(&ck__proc.kids_off, &ck__proc.kids_cut, &now);
	ck__use_add(as_child, &ck__proc.off, &ck__proc.kids_off);
	ck__proc.pid = (int32_t)ck_getpid();
	ck__nkids = 0; /* an earlier restore's children are this one's too: ckrun says again */
	__atomic_store_n(&ck__cpu_active, 1, __ATOMIC_SEQ_CST);
}

/* CK_MSG_KIDS_CPU: entries to note (more than the table holds: left out) */
void ck__cpu_kids(const void *text, uint32_t len)
{
	const struct ck_kid_cpu *k = text;

	for (uint32_t i = 0; i < len / sizeof(*k) && ck__nkids < CK__MAX_KIDS; i++)
		ck__kids[ck__nkids++] = k[i];
}

/* A wait reaped pid: what that child had used before the restore, added
 * to what the wait returns (ru, or the ticks of waitid's siginfo) and to
 * this process's count of its children. */
static void ck__reaped(pid_t pid, struct rusage *ru)
{
	uint64_t all = ~0ull, old;

	/* every signal blocked over the table (a handler's wait, or a park
	 * and a restore that refills it, must not meet it half changed); a
	 * second thread's wait takes the lock */
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, sizeof(all));
	while (__atomic_exchange_n(&ck__kids_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	for (uint32_t i = 0; i < ck__nkids; i++) {
		if (ck__kids[i].pid != pid)
			continue;
		struct ck_cpu_use u = ck__kids[i].use;
		ck__kids[i] = ck__kids[--ck__nkids];
		if (ru)
			ck__ru_add(ru, &u);
		ck__use_add(&ck__proc.kids_off, &ck__proc.kids_off, &u);
		break;
	}
	__atomic_store_n(&ck__kids_lock, 0, __ATOMIC_RELEASE);
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, sizeof(old));
}

/* ---- the C library's entry points ---------------------------------------- */

/* a restored process's figures, in that process (not a fork's child) */
static int ck__active(void)
{
	return __atomic_load_n(&ck__cpu_active, __ATOMIC_RELAXED) && ck__proc.pid == (int32_t)ck_getpid();
}

/* The kernel's encoding of a CPU clock of a process or thread id (0:
 * the caller's): ~id << 3, 2 for the scheduler's clock, 4 for a thread. */
static clockid_t ck__cpuclock(unsigned id, int thread)
{
	return (clockid_t)((~id << 3) | 2 | (thread ? 4 : 0));
}

/* The process's or this thread's CPU clock: the constants, and the ids
 * clock_getcpuclockid (this process, or 0) and pthread_getcpuclockid
 * (this thread) make. */
static const int64_t *ck__clock_off(clockid_t clk)
{
	if (clk == CLOCK_PROCESS_CPUTIME_ID)
		return &ck__proc.ns_off;
	if (clk == CLOCK_THREAD_CPUTIME_ID)
		return ck__thr.tid == (int32_t)ck_gettid() ? &ck__thr.ns_off : NULL;
	if (clk >= 0 || (clk & 3) != 2)
		return NULL;
	if (clk == ck__cpuclock(0, 0) || clk == ck__cpuclock((unsigned)ck_getpid(), 0))
		return &ck__proc.ns_off;
	if ((clk == ck__cpuclock(0, 1) || clk == ck__cpuclock((unsigned)ck_gettid(), 1)) &&
	    ck__thr.tid == (int32_t)ck_gettid())
		return &ck__thr.ns_off;
	return NULL;
}

/* A reading the kernel gave before a restore (the thread parked between
 * it and the adding) is the old process's: read again. */
static int ck__restores(void)
{
	return __atomic_load_n(&ck__core.restart_count, __ATOMIC_SEQ_CST);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	const int64_t *off;
	int r, gen;

	CK__REAL(clock_gettime);
	/* the wall clocks (the hot path): the C library's, nothing more */
	if (clk >= 0 && clk != CLOCK_PROCESS_CPUTIME_ID && clk != CLOCK_THREAD_CPUTIME_ID)
		return ck__real_clock_gettime(clk, ts);
	do {
		gen = ck__restores();
		r = ck__real_clock_gettime(clk, ts);
	} while (gen != ck__restores());
	if (r == 0 && __atomic_load_n(&ck__cpu_active, __ATOMIC_RELAXED) && (off = ck__clock_off(clk)) && *off &&
	    ck__active()) {
		int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + *off;
		if (t < 0)
			t = 0;
		ts->tv_sec = (time_t)(t / 1000000000);
		ts->tv_nsec = (long)(t % 1000000000);
	}
	return r;
}

/* glibc's: the process's CPU clock in microseconds, taken from the
 * adjusted clock (rounding the two parts apart could go back) */
clock_t clock(void)
{
	struct timespec ts;

	CK__REAL(clock);
	if (!ck__active() || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return ck__real_clock();
	return (clock_t)ts.tv_sec * CLOCKS_PER_SEC + (clock_t)(ts.tv_nsec / (1000000000 / CLOCKS_PER_SEC));
}

int getrusage(int who, struct rusage *ru)
{
	int r, gen;

	CK__REAL(getrusage);
	do {
		gen = ck__restores();
		r = ck__real_getrusage(who, ru);
	} while (gen != ck__restores());

	if (r == 0 && ck__active()) {
		if (who == RUSAGE_SELF)
			ck__ru_add(ru, &ck__proc.off);
		else if (who == RUSAGE_THREAD && ck__thr.tid == (int32_t)ck_gettid())
			ck__ru_add(ru, &ck__thr.off);
		else if (who == RUSAGE_CHILDREN)
			ck__ru_add(ru, &ck__proc.kids_off);
	}
	return r;
}

/* Ticks from the microseconds getrusage counts, as the kernel's times()
 * rounds them (down): rounding what was there and what is added apart
 * could go back a tick. */
static clock_t ck__ticks(const struct timeval *tv, int64_t off_us)
{
	int64_t us = ck__us(tv) + off_us;

	return (clock_t)((us > 0 ? us : 0) * ck__hz / 1000000);
}

clock_t times(struct tms *buf)
{
	struct rusage self, kids;
	clock_t r;
	int gen, ok;

	CK__REAL(times);
	do {
		gen = ck__restores();
		r = ck__real_times(buf);
		ok = r != (clock_t)-1 && buf && ck__active() && ck__real_getrusage(RUSAGE_SELF, &self) == 0 &&
		     ck__real_getrusage(RUSAGE_CHILDREN, &kids) == 0;
	} while (gen != ck__restores());
	if (ok) {
		buf->tms_utime = ck__ticks(&self.ru_utime, ck__proc.off.v[CK_CPU_UTIME_US]);
		buf->tms_stime = ck__ticks(&self.ru_stime, ck__proc.off.v[CK_CPU_STIME_US]);
		buf->tms_cutime = ck__ticks(&kids.ru_utime, ck__proc.kids_off.v[CK_CPU_UTIME_US]);
		buf->tms_cstime = ck__ticks(&kids.ru_stime, ck__proc.kids_off.v[CK_CPU_STIME_US]);
	}
	return r;
}

static void ck__after_wait(pid_t r, const int *st, struct rusage *ru)
{
	if (r > 0 && st && ck__nkids && ck__active() && (WIFEXITED(*st) || WIFSIGNALED(*st)))
		ck__reaped(r, ru);
}

/* The status is read where the caller asked for it (a bad pointer fails
 * as bare); without one, through a word of ours. */
pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	int st = 0, *sp = status ? status : &st;
	pid_t r;

	CK__REAL(wait4);
	r = ck__real_wait4(pid, sp, options, ru);
	ck__after_wait(r, sp, ru);
	return r;
}

pid_t wait3(int *status, int options, struct rusage *ru)
{
	return wait4(-1, status, options, ru);
}

pid_t waitpid(pid_t pid, int *status, int options)
{
	int st = 0, *sp = status ? status : &st;
	pid_t r;

	CK__REAL(waitpid);
	r = ck__real_waitpid(pid, sp, options);
	ck__after_wait(r, sp, NULL);
	return r;
}

pid_t wait(int *status)
{
	return waitpid(-1, status, 0);
}

/* The kernel's waitid gives no CPU times (si_utime, si_stime stay as
 * they were): only this process's count of its children takes them. */
int waitid(idtype_t type, id_t id, siginfo_t *si, int options)
{
	int r;

	CK__REAL(waitid);
	r = ck__real_waitid(type, id, si, options);
	if (r == 0 && ck__nkids && si && si->si_pid > 0 && !(options & WNOWAIT) && ck__active() &&
	    (si->si_code == CLD_EXITED || si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED))
		ck__reaped(si->si_pid, NULL);
	return r;
}

/* ---- across an exec ----------------------------------------------------- */

/* exec.c: "CKPT_CPU=..." for the next program (the kernel keeps the
 * process's CPU time and rusage across an exec), NULL when there is
 * nothing to hand on. Static buffer, as ck__semundo_env's. */
const char *ck__cputime_env(void)
{
	static char buf[64 + 3 * CK_CPU_N * 24];
	size_t at;

	if (!ck__active())
		return NULL;
	at = (size_t)snprintf(buf, sizeof(buf), "CKPT_CPU=p%d n%lld", ck__proc.pid, (long long)ck__proc.ns_off);
	for (int i = 0; i < CK_CPU_N; i++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, " %lld", (long long)ck__proc.off.v[i]);
	for (int i = 0; i < CK_CPU_N; i++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, " %lld", (long long)ck__proc.kids_off.v[i]);
	return at < sizeof(buf) ? buf : NULL;
}

/* What an exec of this process handed on (its pid in it, as CKPT_SEMUNDO);
 * the variable leaves the environment. The C library's functions are
 * looked up here too, before any other constructor of ours and before
 * the job's code can call them in a signal handler. */
__attribute__((constructor(101))) static void ck__cputime_ctor(void)
{
	const char *s = getenv("CKPT_CPU");
	char *end;

	ck__cputime_init();
	if (!s)
		return;
	if (s[0] == 'p' && strtol(s + 1, &end, 10) == (long)ck_getpid() && end[0] == ' ' && end[1] == 'n') {
		int64_t v[1 + 2 * CK_CPU_N];
		int n = 0;
		for (s = end + 2; n < 1 + 2 * CK_CPU_N; n++) {
			v[n] = strtoll(s, &end, 10);
			if (end == s)
				break;
			s = end;
		}
		if (n == 1 + 2 * CK_CPU_N) {
			ck__proc.ns_off = v[0];
			for (int i = 0; i < CK_CPU_N; i++) {
				ck__proc.off.v[i] = v[1 + i];
				ck__proc.kids_off.v[i] = v[1 + CK_CPU_N + i];
			}
			ck__proc.pid = (int32_t)ck_getpid();
			__atomic_store_n(&ck__cpu_active, 1, __ATOMIC_SEQ_CST);
		}
	}
	unsetenv("CKPT_CPU");
}
