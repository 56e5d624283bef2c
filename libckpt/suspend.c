/* Parking the job's threads: the manager signals every thread with the
 * suspend signal; each saves its kernel-side thread state and a resumable
 * context in its handler, then waits on a futex until released. Because the
 * thread is parked inside a signal handler, its full register state (FP,
 * AVX, signal mask, alternate stack) sits in the kernel's signal frame on
 * its own stack, which is part of the memory image: resuming the saved
 * context and returning from the handler restores all of it, in this
 * process or in a restored one. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#ifndef ARCH_GET_FS
#define ARCH_GET_FS 0x1003
#endif

/* What /proc said a thread was blocked in when it was signalled: lets the
 * handler undo an EINTR that only our signal caused. */
struct ck__sysinfo {
	long nr;
	uint64_t pc;
};
static struct ck__sysinfo ck__sys[CK_PD_MAX_THREADS];
/* The threads parked so far this round, in the order they parked: a round
 * that gives up names one that did not. */
static volatile int ck__parked_tid[CK_PD_MAX_THREADS];

static struct ck_pd_thread *ck__slot_of(int tid)
{
	for (uint32_t i = 0; i < ck__pd.nthreads; i++)
		if (ck__pd.threads[i].tid == tid)
			return &ck__pd.threads[i];
	return NULL;
}

/* Calls the kernel returns EINTR for when any handler runs, even with
 * SA_RESTART. Re-issuing them is what an uninterrupted program would see. */
static int ck__reissue_ok(long nr)
{
	switch (nr) {
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2:
	case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_futex:
	case SYS_pause: case SYS_rt_sigtimedwait: case SYS_io_getevents:
	/* System V waits: never restarted after a handler (signal(7)); a
	 * semtimedop's timeout starts again */
	case SYS_semop: case SYS_semtimedop: case SYS_msgrcv: case SYS_msgsnd:
		return 1;
	}
	return 0;
}

/* Returns the call issued again, 0 if none: as the handler returns, a
 * wait noted by the C library's entry points gets what is left of it then
 * (waits.c). */
static long ck__fix_eintr(ucontext_t *uc, const struct ck__sysinfo *si)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uint64_t rip = (uint64_t)g[REG_RIP];

	long nr;

	ck__wait_parked();
	if (g[REG_RAX] != -EINTR)
		return 0;
	if (si->nr && si->pc == rip)
		nr = ck__reissue_ok(si->nr) ? si->nr : 0;
	else
		nr = ck__wait_unseen(uc); /* it entered the call after /proc was read */
	/* the code is read only where a call was seen or noted there: any
	 * other pc may be the first byte of a mapping */
	if (!nr || ((const unsigned char *)rip)[-2] != 0x0f || ((const unsigned char *)rip)[-1] != 0x05)
		return 0; /* not right after a syscall instruction */
	/* Relative sleeps continue with the remaining time the kernel wrote. */
	if (nr == SYS_nanosleep && g[REG_RSI])
		g[REG_RDI] = g[REG_RSI];
	if (nr == SYS_clock_nanosleep && !(g[REG_RSI] & 1 /* TIMER_ABSTIME */) && g[REG_R10])
		g[REG_RDX] = g[REG_R10];
	g[REG_RAX] = nr;
	g[REG_RIP] = (greg_t)(rip - 2);
	return nr;
}

void ck__save_kernel_thread_state(struct ck_pd_thread *t)
{
	uint64_t v = 0;
	size_t len = 0;

	ck_sys2(SYS_arch_prctl, ARCH_GET_FS, &t->fs_base);
	if (ck_sys2(SYS_prctl, PR_GET_TID_ADDRESS, &v) == 0)
		t->tid_addr = v;
	v = 0;
	if (ck_sys3(SYS_get_robust_list, 0, &v, &len) == 0) {
		t->robust_head = v;
		t->robust_len = len;
	}
	ck_sys2(SYS_prctl, PR_GET_NAME, t->comm);
	if (ck_sys1(SYS_prctl, PR_GET_NO_NEW_PRIVS) > 0)
		t->flags |= CK_PDT_NNP;
	t->timerslack = (uint64_t)ck_sys1(SYS_prctl, PR_GET_TIMERSLACK);
	ck__creds_save(t);
	ck__pstate_thread_save(t);
	t->rseq_addr = 0;
	if (__rseq_size > 0) {
		t->rseq_addr = t->fs_base + (uint64_t)__rseq_offset;
		t->rseq_len = __rseq_size < 32 ? 32 : __rseq_size;
		t->rseq_sig = RSEQ_SIG;
	}
}

/* In a restored process, the kernel knows nothing of this thread's rseq
 * area or robust list: register them again before it runs job code; and
 * the thread still has the restorer's credentials (creds.c). */
void ck__thread_restored(struct ck_pd_thread *t)
{
	ck__wait_restored();
	ck__cpu_thread_restored();
	ck__creds_restore(t);
	ck__pstate_thread_restored(t); /* a change of ids clears some of its flags */
	/* a change of ids clears it; an image made before pstate.c kept the
	 * manager's value only, given to the main thread */
	if (!(ck__pd.pflags & CK_PD_P_VALID) && (t->flags & CK_PDT_MAIN) && ck__pd.pdeathsig > 0)
		ck_sys2(SYS_prctl, PR_SET_PDEATHSIG, ck__pd.pdeathsig);
	ck_sys2(SYS_prctl, PR_SET_NAME, t->comm);
	if (t->flags & CK_PDT_NNP)
		ck_sys5(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (t->timerslack)
		ck_sys2(SYS_prctl, PR_SET_TIMERSLACK, t->timerslack);
	if (t->rseq_addr) {
		/* Registration refuses an area whose critical-section pointer is
		 * stale; the thread is outside any section here. */
		struct rseq *rs = (struct rseq *)t->rseq_addr;
		rs->rseq_cs = 0;
		ck_sys4(SYS_rseq, t->rseq_addr, t->rseq_len, 0, t->rseq_sig);
	}
	if (t->robust_head)
		ck_sys2(SYS_set_robust_list, t->robust_head, t->robust_len);
	ck__creds_thread_done();
}

/* Pending-signal capture: dequeue (with siginfo), record, queue again, so
 * the live process is unchanged and a restored one gets the same queue. */
/* The value of "key" in the /proc file at path (all of it when key is
 * NULL: one line), into out (empty if none). Stack only: also called in
 * the suspend handler. */
static void ck__proc_field(const char *path, const char *key, char *out, size_t len)
{
	char buf[4096]; /* on the thread's stack: no TLS allocation in a handler */
	long n = ck__proc_read(path, buf, sizeof(buf), 0);
	const char *p;
	size_t k = 0;

	out[0] = 0;
	if (n < 0)
		return;
	if (!(p = key ? strstr(buf, key) : buf))
		return;
	for (p += key ? ck_strlen(key) : 0; *p == ' ' || *p == '\t'; p++)
		;
	while (*p && *p != '\n' && k + 1 < len)
		out[k++] = *p++;
	out[k] = 0;
}

static uint64_t ck__hex64(const char *p)
{
	uint64_t v = 0;

	for (;; p++) {
		if (*p >= '0' && *p <= '9')
			v = (v << 4) | (uint64_t)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			v = (v << 4) | (uint64_t)(*p - 'a' + 10);
		else
			break;
	}
	return v;
}

static uint64_t ck__pending_mask(const char *path, const char *key)
{
	char v[32];

	ck__proc_field(path, key, v, sizeof(v));
	return ck__hex64(v) & ~(1ull << (ck__core.sig - 1));
}

/* Takes every signal the status file at path lists under key; tid 0 means
 * process-directed. Called by the owning thread (private queue) or by the
 * manager (shared queue), signals blocked. */
void ck__capture_pending(const char *path, const char *key, int tid)
{
	struct ck_pd_siginfo tmp[32];
	uint32_t mine = 0;
	uint64_t mask;
	int guard = 0;

	while ((mask = ck__pending_mask(path, key)) != 0 && mine < 32 && guard++ < 64) {
		struct timespec zero = {0, 0};
		uint64_t set = mask;
		long s = ck_sys4(SYS_rt_sigtimedwait, &set, tmp[mine].info, &zero, 8);
		if (s <= 0)
			break;
		tmp[mine].sig = (int32_t)s;
		tmp[mine].tid = tid;
		mine++;
	}
	for (uint32_t i = 0; i < mine; i++) {
		uint32_t slot = __atomic_fetch_add(&ck__pd.nsiginfo, 1, __ATOMIC_SEQ_CST);
		if (slot < CK_PD_MAX_SIGINFO)
			ck__pd.siginfo[slot] = tmp[i];
		ck_requeue_signal(ck__core.pid, tid, tmp[i].sig, tmp[i].info);
	}
}

static void ck__on_suspend(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	int tid = (int)ck_gettid();
	struct ck_pd_thread *t;
	volatile long again; /* kept across a restore (the context resumed below) */
	int gen;

	(void)sig;
	(void)si;
	if (!ck__core.suspending || !(t = ck__slot_of(tid)))
		return; /* stray or late signal: nothing to do */
	ck__semundo_parked(ucv); /* before the thread's state is read */
	again = ck__fix_eintr(ucv, &ck__sys[t - ck__pd.threads]);
	ck__save_kernel_thread_state(t);
	ck__cpu_thread_park();
	{
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
		ck__capture_pending(path, "SigPnd:", tid);
		/* Process-directed ones too, where the kernel lets their siginfo
		 * be queued again whole: on the main thread (the manager takes
		 * what is left, collect.c). */
		if (tid == ck__core.pid) {
			ck__capture_pending("/proc/self/status", "ShdPnd:", 0);
			__atomic_store_n(&ck__core.shd_taken, 1, __ATOMIC_SEQ_CST);
		}
	}
	gen = ck__core.gen;
	if (ck_ctx_save(&t->ctx) == 0) {
		int k = __atomic_fetch_add(&ck__core.parked, 1, __ATOMIC_SEQ_CST);
		if (k >= 0 && k < CK_PD_MAX_THREADS)
			ck__parked_tid[k] = tid;
		ck_futex(&ck__core.parked, FUTEX_WAKE_PRIVATE, 1, NULL);
	} else {
		ck__thread_restored(t);
	}
	/* Release clears `suspending` before bumping `gen`: checking both
	 * closes the window where a late thread reads the new generation. */
	while (__atomic_load_n(&ck__core.gen, __ATOMIC_SEQ_CST) == gen &&
	       __atomic_load_n(&ck__core.suspending, __ATOMIC_SEQ_CST))
		ck_futex(&ck__core.gen, FUTEX_WAIT_PRIVATE, gen, NULL);
	if (again)
		ck__wait_left(ucv, again);
	errno = saved_errno;
}

int ck__install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = ck__on_suspend;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	return sigaction(ck__core.sig, &sa, NULL) ? -errno : 0;
}

static long ck__parse_long(const char **p, int base)
{
	long v = 0, neg = 0;

	while (**p == ' ')
		(*p)++;
	if (**p == '-') {
		neg = 1;
		(*p)++;
	}
	if (base == 16 && (*p)[0] == '0' && (*p)[1] == 'x')
		*p += 2;
	for (;; (*p)++) {
		int c = **p, d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else
			break;
		v = v * base + d;
	}
	return neg ? -v : v;
}

/* Reads /proc/self/task/TID/syscall: "NR a1..a6 SP PC" when blocked in a
 * system call. */
static void ck__read_syscall(int tid, struct ck__sysinfo *out)
{
	char path[64], buf[256];
	const char *p = buf;
	long n;
	int i;

	out->nr = 0;
	out->pc = 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	n = ck__proc_read(path, buf, sizeof(buf), 0);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return;
	out->nr = ck__parse_long(&p, 10);
	for (i = 0; i < 7; i++)
		ck__parse_long(&p, 16);
	out->pc = (uint64_t)ck__parse_long(&p, 16);
}

/* Lists /proc/self/task; adds threads not yet known and signals them.
 * Returns how many were newly signalled, or -errno. */
static int ck__signal_new_threads(void)
{
	static char buf[160 << 10]; /* CK_PD_MAX_THREADS entries */
	int added = 0, reader = ck__reader_tid();
	long n = ck__proc_read("/proc/self/task", buf, sizeof(buf), 1);

	if (n == -E2BIG)
		ck__failf("more than %d threads: a checkpoint holds at most %d per process", CK_PD_MAX_THREADS,
			  CK_PD_MAX_THREADS);
	if (n < 0)
		return (int)n;
	for (long off = 0; off < n;) {
		struct ck__dirent64 *d = (struct ck__dirent64 *)(buf + off);
		const char *p = d->name;
		int tid;

		off += d->reclen;
		if (d->name[0] < '0' || d->name[0] > '9')
			continue;
		tid = (int)ck__parse_long(&p, 10);
		if (tid == ck__core.manager_tid || tid == reader || ck__slot_of(tid))
			continue;
		if (ck__pd.nthreads >= CK_PD_MAX_THREADS) {
			ck__failf("more than %d threads: a checkpoint holds at most %d per process", CK_PD_MAX_THREADS,
				  CK_PD_MAX_THREADS);
			return -E2BIG;
		}
		struct ck_pd_thread *t = &ck__pd.threads[ck__pd.nthreads];
		memset(t, 0, sizeof(*t));
		t->tid = tid;
		t->flags = tid == ck__core.pid ? CK_PDT_MAIN : 0;
		ck__read_syscall(tid, &ck__sys[ck__pd.nthreads]);
		ck__pd.nthreads++;
		if (ck__core.test_signal_gap_us > 0) {
			struct timespec gap = {0, ck__core.test_signal_gap_us % 1000000 * 1000L};
			ck_sys2(SYS_nanosleep, &gap, NULL);
		}
		if (ck_tgkill(ck__core.pid, tid, ck__core.sig) < 0) {
			ck__pd.nthreads--; /* exited meanwhile */
			continue;
		}
		added++;
	}
	return added;
}

static int ck__thread_alive(int tid)
{
	return ck_tgkill(ck__core.pid, tid, 0) == 0;
}

static uint64_t ck__mono_ms(void)
{
	struct timespec ts;

	ck_sys2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The value of "key" in /proc/self/task/TID/FILE, into out (empty if none). */
static void ck__task_field(int tid, const char *file, const char *key, char *out, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", tid, file);
	ck__proc_field(path, key, out, len);
}

/* The round gives up: names the first thread that has not parked, and
 * why it cannot, as far as /proc tells. */
static void ck__fail_unparked(uint32_t bound_ms)
{
	int nparked = __atomic_load_n(&ck__core.parked, __ATOMIC_SEQ_CST);
	char comm[32], state[32], blk[32], wchan[64], why[160];
	int tid = 0;

	for (uint32_t i = 1; i < ck__pd.nthreads && !tid; i++) {
		int found = 0;
		for (int k = 0; k < nparked && k < CK_PD_MAX_THREADS && !found; k++)
			found = ck__parked_tid[k] == ck__pd.threads[i].tid;
		if (!found)
			tid = ck__pd.threads[i].tid;
	}
	ck__task_field(tid, "comm", NULL, comm, sizeof(comm));
	ck__task_field(tid, "status", "State:", state, sizeof(state));
	ck__task_field(tid, "status", "SigBlk:", blk, sizeof(blk));
	ck__task_field(tid, "wchan", NULL, wchan, sizeof(wchan));
	{
		/* SigBlk: hex, signal 1 the lowest bit */
		if ((ck__hex64(blk) >> (ck__core.sig - 1)) & 1)
			snprintf(why, sizeof(why), "it blocks signal %d, which parks threads (a raw rt_sigprocmask, or a "
				 "signal handler that blocks all)", ck__core.sig);
		else if (state[0] == 'D')
			snprintf(why, sizeof(why), "it is in an uninterruptible wait (%s)",
				 wchan[0] && wchan[0] != '0' ? wchan : "in the kernel");
		else if (state[0] == 'T' || state[0] == 't')
			snprintf(why, sizeof(why), "it is stopped");
		else
			snprintf(why, sizeof(why), "it has not handled signal %d (state %s)", ck__core.sig,
				 state[0] ? state : "unknown");
	}
	ck__failf("thread %d (%s) did not stop within the round's bound (%u.%03u s, --round-timeout): %s", tid,
		  comm[0] ? comm : "?", bound_ms / 1000, bound_ms % 1000, why);
}

/* A main thread that ended (pthread_exit) while others run is a zombie
 * until the process ends: it never parks, and a restore has no main
 * thread to give back. Refused before any thread is signalled, not at
 * the round's bound. */
static int ck__main_thread_ended(void)
{
	char state[32];

	ck__task_field(ck__core.pid, "status", "State:", state, sizeof(state));
	if (state[0] != 'Z')
		return 0;
	ck__failf("its main thread has ended (pthread_exit) while other threads run: a checkpoint of such a "
		  "process is not supported");
	return -ENOTSUP;
}

/* Parks every job thread. The manager is recorded as a thread too (its
 * context is saved by the round itself). A thread that does not park
 * within timeout_ms fails the round; the others run on, and the late one
 * ignores the signal when it comes (ck__on_suspend: not suspending). */
int ck__suspend_all(uint32_t timeout_ms, uint32_t bound_ms)
{
	struct timespec ts = {0, 20 * 1000 * 1000};
	uint64_t start = ck__mono_ms(), deadline = start + timeout_ms;
	int r, zombie_checked = 0;

	ck__reader_start(); /* /proc is read through it until all are parked */
	if ((r = ck__main_thread_ended()) < 0)
		return r; /* nobody signalled */
	ck__pd.nthreads = 0;
	ck__pd.nsiginfo = 0;
	ck__core.parked = 0;
	__atomic_store_n(&ck__core.shd_taken, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&ck__core.suspending, 1, __ATOMIC_SEQ_CST);
	/* The manager's own slot comes first. */
	memset(&ck__pd.threads[0], 0, sizeof(ck__pd.threads[0]));
	ck__pd.threads[0].tid = ck__core.manager_tid;
	ck__pd.threads[0].flags = CK_PDT_MANAGER;
	ck__sys[0].nr = 0;
	ck__pd.nthreads = 1;
	for (;;) {
		r = ck__signal_new_threads();
		if (r < 0)
			goto fail;
		for (;;) {
			int parked = __atomic_load_n(&ck__core.parked, __ATOMIC_SEQ_CST);
			uint32_t want = ck__pd.nthreads - 1;

			if ((uint32_t)parked >= want)
				break;
			/* A signalled thread that exited before handling never parks. */
			for (uint32_t i = 1; i < ck__pd.nthreads; i++) {
				if (!ck__thread_alive(ck__pd.threads[i].tid)) {
					ck__pd.threads[i] = ck__pd.threads[ck__pd.nthreads - 1];
					ck__sys[i] = ck__sys[ck__pd.nthreads - 1];
					ck__pd.nthreads--;
					i--;
				}
			}
			if ((uint32_t)__atomic_load_n(&ck__core.parked, __ATOMIC_SEQ_CST) >= ck__pd.nthreads - 1)
				break;
			ck_futex(&ck__core.parked, FUTEX_WAIT_PRIVATE, parked, &ts);
			/* it may have left since the check above */
			if (!zombie_checked && ck__mono_ms() > start + 100) {
				zombie_checked = 1;
				if ((r = ck__main_thread_ended()) < 0)
					goto fail;
			}
			if (ck__mono_ms() > deadline) {
				ck__fail_unparked(bound_ms);
				r = -ETIMEDOUT;
				goto fail;
			}
		}
		/* Parked threads cannot create new ones: one more scan settles it. */
		r = ck__signal_new_threads();
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
	}
	return 0;
fail:
	ck__release_all();
	return r;
}

void ck__release_all(void)
{
	__atomic_store_n(&ck__core.suspending, 0, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&ck__core.gen, 1, __ATOMIC_SEQ_CST);
	ck_futex(&ck__core.gen, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
}
