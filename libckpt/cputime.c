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
 * the wait returns and to the parent's own count of its children.
 *
 * Not seen: raw system calls, /proc/PID/stat and status, timers on CPU
 * clocks (they count the new process's time), another thread's or
 * process's clock (pthread_getcpuclockid of another thread,
 * clock_getcpuclockid of another process), what a restored child reaps
 * after the restore (its parent adds what the child had used at the
 * restore), and children that were zombies at the cut (their parent sees
 * the re-made zombie's). */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
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
};

static struct {
	int64_t ns_cut, ns_off;
	struct ck_cpu_use cut, off;
	struct ck_cpu_use kids_cut, kids_off; /* RUSAGE_CHILDREN's */
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

static void ck__use_of(int who, struct ck_cpu_use *u)
{
	struct rusage ru;

	ck_memset(&ru, 0, sizeof(ru));
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
static void ck__reaped(pid_t pid, struct rusage *ru, siginfo_t *si)
{
	while (__atomic_exchange_n(&ck__kids_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	for (uint32_t i = 0; i < ck__nkids; i++) {
		if (ck__kids[i].pid != pid)
			continue;
		struct ck_cpu_use u = ck__kids[i].use;
		ck__kids[i] = ck__kids[--ck__nkids];
		if (ru)
			ck__ru_add(ru, &u);
		if (si) {
			si->si_utime += (clock_t)(u.v[CK_CPU_UTIME_US] * ck__hz / 1000000);
			si->si_stime += (clock_t)(u.v[CK_CPU_STIME_US] * ck__hz / 1000000);
		}
		ck__use_add(&ck__proc.kids_off, &ck__proc.kids_off, &u);
		break;
	}
	__atomic_store_n(&ck__kids_lock, 0, __ATOMIC_RELEASE);
}

/* ---- the C library's entry points ---------------------------------------- */

static int ck__active(void)
{
	return __atomic_load_n(&ck__cpu_active, __ATOMIC_RELAXED);
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
		return &ck__thr.ns_off;
	if (clk >= 0 || (clk & 3) != 2)
		return NULL;
	if (clk == ck__cpuclock(0, 0) || clk == ck__cpuclock((unsigned)ck_getpid(), 0))
		return &ck__proc.ns_off;
	if (clk == ck__cpuclock(0, 1) || clk == ck__cpuclock((unsigned)ck_gettid(), 1))
		return &ck__thr.ns_off;
	return NULL;
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	CK__REAL(clock_gettime);
	int r = ck__real_clock_gettime(clk, ts);
	const int64_t *off;

	if (r == 0 && ck__active() && (off = ck__clock_off(clk)) && *off) {
		int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + *off;
		if (t < 0)
			t = 0;
		ts->tv_sec = (time_t)(t / 1000000000);
		ts->tv_nsec = (long)(t % 1000000000);
	}
	return r;
}

clock_t clock(void)
{
	CK__REAL(clock);
	clock_t c = ck__real_clock();

	if (c != (clock_t)-1 && ck__active())
		c += (clock_t)(ck__proc.ns_off / (1000000000 / CLOCKS_PER_SEC));
	return c;
}

int getrusage(int who, struct rusage *ru)
{
	CK__REAL(getrusage);
	int r = ck__real_getrusage(who, ru);

	if (r == 0 && ck__active()) {
		if (who == RUSAGE_SELF)
			ck__ru_add(ru, &ck__proc.off);
		else if (who == RUSAGE_THREAD)
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
	CK__REAL(times);
	clock_t r = ck__real_times(buf);
	struct rusage self, kids;

	if (r != (clock_t)-1 && buf && ck__active() && ck__real_getrusage(RUSAGE_SELF, &self) == 0 &&
	    ck__real_getrusage(RUSAGE_CHILDREN, &kids) == 0) {
		buf->tms_utime = ck__ticks(&self.ru_utime, ck__proc.off.v[CK_CPU_UTIME_US]);
		buf->tms_stime = ck__ticks(&self.ru_stime, ck__proc.off.v[CK_CPU_STIME_US]);
		buf->tms_cutime = ck__ticks(&kids.ru_utime, ck__proc.kids_off.v[CK_CPU_UTIME_US]);
		buf->tms_cstime = ck__ticks(&kids.ru_stime, ck__proc.kids_off.v[CK_CPU_STIME_US]);
	}
	return r;
}

static void ck__after_wait(pid_t r, int st, struct rusage *ru)
{
	if (r > 0 && ck__nkids && (WIFEXITED(st) || WIFSIGNALED(st)))
		ck__reaped(r, ru, NULL);
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	CK__REAL(wait4);
	int st = 0;
	pid_t r = ck__real_wait4(pid, &st, options, ru);

	ck__after_wait(r, st, ru);
	if (r > 0 && status)
		*status = st;
	return r;
}

pid_t wait3(int *status, int options, struct rusage *ru)
{
	return wait4(-1, status, options, ru);
}

pid_t waitpid(pid_t pid, int *status, int options)
{
	CK__REAL(waitpid);
	int st = 0;
	pid_t r = ck__real_waitpid(pid, &st, options);

	ck__after_wait(r, st, NULL);
	if (r > 0 && status)
		*status = st;
	return r;
}

pid_t wait(int *status)
{
	return waitpid(-1, status, 0);
}

int waitid(idtype_t type, id_t id, siginfo_t *si, int options)
{
	CK__REAL(waitid);
	int r = ck__real_waitid(type, id, si, options);

	if (r == 0 && ck__nkids && si && si->si_pid > 0 && !(options & WNOWAIT) &&
	    (si->si_code == CLD_EXITED || si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED))
		ck__reaped(si->si_pid, NULL, si);
	return r;
}
