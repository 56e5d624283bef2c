/* System V semaphore adjustments (SEM_UNDO) of this process.
 *
 * The kernel keeps, per process, what its exit adds back to each semaphore
 * it changed with SEM_UNDO, and shows it nowhere; a restored process is a
 * new one, whose exit would add nothing. So libckpt keeps its own account
 * (include/ckrun/semundo.h) from the C library's entry points: semop and
 * semtimedop with SEM_UNDO change it; semctl's SETVAL, SETALL and
 * IPC_RMID, which the kernel applies to every process's adjustments, are
 * remembered with their times, for ckrun to see at the cut where a reset
 * by another process may have cleared part of what this one holds.
 *
 * A semop that succeeds in the kernel and is parked before it is counted
 * would be lost from the image. The call is made by a stub of ours that
 * stores its result right after the syscall instruction, and the park
 * handler counts it itself when it finds the call done and not yet
 * counted (ck__semundo_parked); counting runs with signals blocked.
 *
 * At a restart the manager sets the adjustments again (a pair of
 * operations on each semaphore, net zero, in one atomic semop) before any
 * thread of the job runs. Across exec the kernel keeps them: the account
 * goes to the new program in CKPT_SEMUNDO (exec.c), removed from its
 * environment at start. Not seen: raw system calls (syscall(2)), and a
 * vfork child's semop (it would count in its parent's memory). */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include "ckrun/semundo.h"
#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

struct ck_semundo ck__semundo CK_HIDDEN = {.magic = CK_SEMUNDO_MAGIC};
static volatile int ck__su_lock;

/* A thread's semop with SEM_UNDO under way. */
enum { CK__SC_IDLE, CK__SC_ISSUING, CK__SC_COUNTED };
struct ck__semcall {
	volatile int state;
	int id;
	const struct sembuf *sops;
	size_t n;
	uint64_t t0;
	int64_t rt0;
	long res; /* 1 until the system call returns: then its result */
};
static __thread struct ck__semcall ck__sc __attribute__((tls_model("initial-exec")));

/* long ck__semop_stub(id, sops, n, timeout, long *res): semtimedop, its
 * result stored at once; the park handler reads %rax at ck__semop_ret. */
long ck__semop_stub(long id, const void *sops, long n, const void *timeout, long *res) CK_HIDDEN;
extern const char ck__semop_ret[] CK_HIDDEN;
__asm__(".text\n"
	".globl ck__semop_stub\n.hidden ck__semop_stub\n.type ck__semop_stub, @function\n"
	"ck__semop_stub:\n"
	"\tendbr64\n"
	"\tmovq %rcx, %r10\n"
	"\tmovl $220, %eax\n" /* SYS_semtimedop */
	"\tsyscall\n"
	".globl ck__semop_ret\n.hidden ck__semop_ret\n"
	"ck__semop_ret:\n"
	"\tmovq %rax, (%r8)\n"
	"\tret\n"
	".size ck__semop_stub, .-ck__semop_stub\n");

static uint64_t ck__mono(void)
{
	struct timespec ts;

	ck_sys2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t ck__real_sec(void)
{
	struct timespec ts;

	/* the coarse clock: the kernel stamps sem_ctime from it, and the
	 * precise one may be in the next second already */
	ck_sys2(SYS_clock_gettime, CLOCK_REALTIME_COARSE, &ts);
	return (int64_t)ts.tv_sec;
}

static void ck__block_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &all, old, 8);
}

static void ck__unblock(const sigset_t *old)
{
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, 8);
}

/* Taken with signals blocked only: a holder is never parked. */
static void ck__lock(void)
{
	while (__atomic_exchange_n(&ck__su_lock, 1, __ATOMIC_ACQUIRE))
		ck_sys0(SYS_sched_yield);
}

static void ck__unlock(void)
{
	__atomic_store_n(&ck__su_lock, 0, __ATOMIC_RELEASE);
}

/* A fork's child holds its parent's account in its memory, and no
 * adjustment in the kernel: it starts its own. A vfork child (or a raw
 * clone's), whose pid libckpt's fork handler did not note, shares its
 * parent's memory: it counts nothing (-1). Locked. */
static int ck__own(void)
{
	int pid = (int)ck_sys0(SYS_getpid);
	struct ck_semundo *t = &ck__semundo;

	if (pid != ck__core.pid)
		return -1;
	if (t->owner == pid)
		return 0;
	memset(t, 0, sizeof(*t));
	t->magic = CK_SEMUNDO_MAGIC;
	t->owner = pid;
	return 0;
}

/* init.c's fork handler: a thread of the parent may have held the lock. */
void ck__semundo_atfork_child(void)
{
	ck__su_lock = 0;
}

static struct ck_semundo_adj *ck__find(int id, unsigned num)
{
	for (uint32_t i = 0; i < ck__semundo.nadj; i++)
		if (ck__semundo.adj[i].semid == id && ck__semundo.adj[i].num == num)
			return &ck__semundo.adj[i];
	return NULL;
}

static void ck__drop(struct ck_semundo_adj *a)
{
	*a = ck__semundo.adj[--ck__semundo.nadj];
}

/* Locked, signals blocked. */
static void ck__count(int id, const struct sembuf *sops, size_t n, uint64_t t0, int64_t rt0)
{
	uint64_t now = ck__mono();

	if (ck__own() < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct ck_semundo_adj *a;
		if (!(sops[i].sem_flg & SEM_UNDO) || !sops[i].sem_op)
			continue;
		if (!(a = ck__find(id, sops[i].sem_num))) {
			if (ck__semundo.nadj >= CK_SEMUNDO_MAX) {
				ck__semundo.overflow++;
				continue;
			}
			a = &ck__semundo.adj[ck__semundo.nadj++];
			memset(a, 0, sizeof(*a));
			a->semid = id;
			a->num = sops[i].sem_num;
			a->t_first = t0;
			a->rt_first = rt0;
			/* the set's change time as this adjustment begins: a reset
			 * made before it in the same second (the usual SETVAL or
			 * SETALL, then the first semop) is no reset of it */
			{
				struct semid_ds ds;
				/* (not where the job's seccomp filter forbids it) */
				if (ck__seccomp_allows(SYS_semctl) && ck_sys4(SYS_semctl, id, 0, IPC_STAT, &ds) == 0 &&
				    (int64_t)ds.sem_ctime <= rt0)
					a->ctime_ok = (int64_t)ds.sem_ctime;
			}
		}
		a->adj -= sops[i].sem_op;
		a->t_last = now;
		if (!a->adj)
			ck__drop(a);
	}
}

static int ck__any_undo(const struct sembuf *sops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((sops[i].sem_flg & SEM_UNDO) && sops[i].sem_op)
			return 1;
	return 0;
}

/* From the park handler, before the thread saves anything: a semop with
 * SEM_UNDO done in the kernel and not counted yet is counted now. */
void ck__semundo_parked(void *ucv)
{
	ucontext_t *uc = ucv;
	long res;

	if (__atomic_load_n(&ck__sc.state, __ATOMIC_SEQ_CST) != CK__SC_ISSUING)
		return;
	res = (uint64_t)uc->uc_mcontext.gregs[REG_RIP] == (uint64_t)(uintptr_t)ck__semop_ret
		      ? (long)uc->uc_mcontext.gregs[REG_RAX]
		      : ck__sc.res;
	if (res != 0)
		return; /* not made yet, failed, or interrupted (issued again) */
	ck__lock();
	ck__count(ck__sc.id, ck__sc.sops, ck__sc.n, ck__sc.t0, ck__sc.rt0);
	ck__unlock();
	__atomic_store_n(&ck__sc.state, CK__SC_COUNTED, __ATOMIC_SEQ_CST);
}

int semtimedop(int id, struct sembuf *sops, size_t n, const struct timespec *timeout)
{
	static int (*real)(int, struct sembuf *, size_t, const struct timespec *);
	sigset_t old;
	long r;

	if (!sops || !ck__any_undo(sops, n)) {
		if (!real)
			real = (int (*)(int, struct sembuf *, size_t, const struct timespec *))dlsym(RTLD_NEXT,
												   "semtimedop");
		return real(id, sops, n, timeout);
	}
	ck__sc.id = id;
	ck__sc.sops = sops;
	ck__sc.n = n;
	ck__sc.t0 = ck__mono();
	ck__sc.rt0 = ck__real_sec();
	ck__sc.res = 1;
	__atomic_store_n(&ck__sc.state, CK__SC_ISSUING, __ATOMIC_SEQ_CST);
	r = ck__semop_stub(id, sops, (long)n, timeout, &ck__sc.res);
	ck__block_all(&old);
	if (r == 0 && __atomic_load_n(&ck__sc.state, __ATOMIC_SEQ_CST) == CK__SC_ISSUING) {
		ck__lock();
		ck__count(id, sops, n, ck__sc.t0, ck__sc.rt0);
		ck__unlock();
	}
	__atomic_store_n(&ck__sc.state, CK__SC_IDLE, __ATOMIC_SEQ_CST);
	ck__unblock(&old);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

int semop(int id, struct sembuf *sops, size_t n)
{
	return semtimedop(id, sops, n, NULL);
}

/* A reset (SETVAL: one semaphore; SETALL, IPC_RMID: the set) is noted as
 * under way before the call, so that a round parking the caller in it
 * sees it. Returns the slot; locked by the caller, signals blocked. */
static int ck__clear_begin(int id, unsigned num)
{
	struct ck_semundo *t = &ck__semundo;
	int slot = -1;
	uint64_t oldest = CK_SEMUNDO_PENDING;

	if (ck__own() < 0)
		return -1;
	for (uint32_t i = 0; i < t->nclear && slot < 0; i++)
		if (t->clear[i].semid == -1 ||
		    (t->clear[i].semid == id && t->clear[i].num == num && t->clear[i].t_end != CK_SEMUNDO_PENDING))
			slot = (int)i;
	if (slot < 0 && t->nclear < CK_SEMUNDO_CLEARS)
		slot = (int)t->nclear++;
	if (slot < 0) { /* full: the oldest is forgotten, as a reset of everything then */
		for (uint32_t i = 0; i < t->nclear; i++)
			if (t->clear[i].t_end < oldest) {
				oldest = t->clear[i].t_end;
				slot = (int)i;
			}
		if (slot < 0)
			return -1; /* every one under way: cannot happen with fewer threads */
		if (oldest > t->t_forgot)
			t->t_forgot = oldest;
	}
	t->clear[slot].semid = id;
	t->clear[slot].num = num;
	t->clear[slot].t_end = CK_SEMUNDO_PENDING;
	return slot;
}

static void ck__clear_end(int slot, int id, unsigned num, int done, uint64_t t_start)
{
	struct ck_semundo *t = &ck__semundo;

	if (slot < 0 || t->owner != (int)ck_sys0(SYS_getpid))
		return;
	if (!done) {
		t->clear[slot].semid = -1;
		return;
	}
	/* the kernel cleared ours too; one another thread changed during
	 * the call is in doubt: it stays, as begun then, which the cut refuses */
	for (uint32_t i = 0; i < t->nadj;) {
		struct ck_semundo_adj *a = &t->adj[i];
		if (a->semid == id && (num == CK_SEMUNDO_ALL || a->num == num) && a->t_last < t_start) {
			ck__drop(a);
			continue;
		}
		if (a->semid == id && (num == CK_SEMUNDO_ALL || a->num == num)) {
			a->t_first = t_start;
			a->ctime_ok = 0;
		}
		i++;
	}
	t->clear[slot].t_end = ck__mono();
}

int semctl(int id, int num, int cmd, ...)
{
	static int (*real)(int, int, int, ...);
	union {
		int val;
		void *ptr;
	} arg = {0};
	unsigned what = cmd == SETVAL ? (unsigned)num : CK_SEMUNDO_ALL;
	int resets = cmd == SETVAL || cmd == SETALL || cmd == IPC_RMID, slot = -1, r, e;
	uint64_t t_start = 0;
	sigset_t old;
	va_list ap;

	switch (cmd) {
	case IPC_STAT: case IPC_SET: case IPC_INFO: case SEM_INFO: case SEM_STAT: case SEM_STAT_ANY:
	case GETALL: case SETALL: case SETVAL:
		va_start(ap, cmd);
		arg = va_arg(ap, __typeof__(arg));
		va_end(ap);
		break;
	}
	if (!real)
		real = (int (*)(int, int, int, ...))dlsym(RTLD_NEXT, "semctl");
	if (resets) {
		ck__block_all(&old);
		ck__lock();
		slot = ck__clear_begin(id, what);
		ck__unlock();
		t_start = ck__mono();
		ck__unblock(&old);
	}
	r = real(id, num, cmd, arg);
	e = errno;
	if (resets) {
		ck__block_all(&old);
		ck__lock();
		ck__clear_end(slot, id, what, r >= 0, t_start);
		ck__unlock();
		ck__unblock(&old);
	}
	errno = e;
	return r;
}

/* Restart, on the manager, every other thread parked: the adjustments set
 * again in this new process; those of a set that is gone are dropped. The
 * times start again: the committed round found no reset after any. */
int ck__semundo_restore(int32_t *failed)
{
	struct ck_semundo *t = &ck__semundo;
	uint64_t now = ck__mono();
	int64_t rt = ck__real_sec();

	if (t->magic != CK_SEMUNDO_MAGIC || t->owner != ck__core.pid)
		return 0;
	for (uint32_t i = 0; i < t->nadj;) {
		struct ck_semundo_adj *a = &t->adj[i];
		/* adj: the exit adds it; an operation of -adj with SEM_UNDO
		 * leaves exactly that, one of +adj without it puts the value
		 * back: in whichever order keeps the value in range */
		struct sembuf two[2] = {
			{(unsigned short)a->num, (short)a->adj, IPC_NOWAIT},
			{(unsigned short)a->num, (short)-a->adj, IPC_NOWAIT | SEM_UNDO},
		};
		long r = ck_sys4(SYS_semtimedop, a->semid, two, 2, NULL);
		if (r == -EAGAIN || r == -ERANGE) {
			struct sembuf swap[2] = {two[1], two[0]};
			r = ck_sys4(SYS_semtimedop, a->semid, swap, 2, NULL);
		}
		if (r == -EINVAL || r == -EIDRM) {
			ck__drop(a);
			continue;
		}
		if (r < 0) {
			*failed = a->semid;
			return (int)r;
		}
		a->t_first = a->t_last = now;
		a->rt_first = rt;
		{ /* the restore's SETALL and IPC_SET changed it: no reset */
			struct semid_ds ds;
			a->ctime_ok = ck_sys4(SYS_semctl, a->semid, 0, IPC_STAT, &ds) == 0 ? (int64_t)ds.sem_ctime : 0;
		}
		i++;
	}
	t->nclear = 0;
	t->t_forgot = 0;
	return 0;
}

/* exec.c: "CKPT_SEMUNDO=..." for the next program, NULL when there is
 * nothing to hand on. Static buffer: exec runs in one thread's view (a
 * vfork child, or the process about to be replaced). */
const char *ck__semundo_env(void)
{
	static char buf[64 + CK_SEMUNDO_MAX * 128 + CK_SEMUNDO_CLEARS * 48];
	struct ck_semundo *t = &ck__semundo;
	uint64_t now = ck__mono();
	const char *r = NULL;
	sigset_t old;
	size_t at;

	ck__block_all(&old);
	ck__lock();
	if (t->owner != (int)ck_sys0(SYS_getpid) || t->owner != ck__core.pid ||
	    (!t->nadj && !t->nclear && !t->overflow && !t->t_forgot))
		goto out;
	/* the pid: only this process's next program takes it */
	at = (size_t)snprintf(buf, sizeof(buf), "CKPT_SEMUNDO=p%d o%u f%llu", t->owner, t->overflow,
			      (unsigned long long)t->t_forgot);
	for (uint32_t i = 0; i < t->nadj && at < sizeof(buf); i++) {
		const struct ck_semundo_adj *a = &t->adj[i];
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, " a%d,%u,%d,%llu,%llu,%lld,%lld", a->semid, a->num,
				       a->adj, (unsigned long long)a->t_first, (unsigned long long)a->t_last,
				       (long long)a->rt_first, (long long)a->ctime_ok);
	}
	/* a reset under way in another thread ends by the time exec has
	 * ended every other thread: "now" is no earlier than its end */
	for (uint32_t i = 0; i < t->nclear && at < sizeof(buf); i++)
		if (t->clear[i].semid != -1)
			at += (size_t)snprintf(buf + at, sizeof(buf) - at, " c%d,%u,%llu", t->clear[i].semid,
					       t->clear[i].num,
					       (unsigned long long)(t->clear[i].t_end == CK_SEMUNDO_PENDING
									    ? now
									    : t->clear[i].t_end));
	r = at < sizeof(buf) ? buf : NULL;
out:
	ck__unlock();
	ck__unblock(&old);
	return r;
}

/* The account an exec of this process handed on (its pid in it: a
 * program that kept the variable and started another must not give it
 * away); the variable leaves the environment. Before ck__init attaches:
 * no round may find it half read. */
__attribute__((constructor(101))) static void ck__semundo_init(void)
{
	const char *s = getenv("CKPT_SEMUNDO");
	struct ck_semundo *t = &ck__semundo;
	char *end;

	if (!s)
		return;
	if (s[0] != 'p' || strtol(s + 1, &end, 10) != (long)ck_sys0(SYS_getpid)) {
		unsetenv("CKPT_SEMUNDO");
		return;
	}
	t->owner = (int)ck_sys0(SYS_getpid);
	s = end;
	while (*s == ' ')
		s++;
	while (*s) {
		char k = *s++;
		if (k == 'o')
			t->overflow = (uint32_t)strtoul(s, &end, 10);
		else if (k == 'f')
			t->t_forgot = strtoull(s, &end, 10);
		else if (k == 'a' && t->nadj < CK_SEMUNDO_MAX) {
			struct ck_semundo_adj *a = &t->adj[t->nadj++];
			a->semid = (int32_t)strtol(s, &end, 10);
			a->num = (uint32_t)strtoul(end + (*end == ','), &end, 10);
			a->adj = (int32_t)strtol(end + (*end == ','), &end, 10);
			a->t_first = strtoull(end + (*end == ','), &end, 10);
			a->t_last = strtoull(end + (*end == ','), &end, 10);
			a->rt_first = strtoll(end + (*end == ','), &end, 10);
			a->ctime_ok = strtoll(end + (*end == ','), &end, 10);
		} else if (k == 'c' && t->nclear < CK_SEMUNDO_CLEARS) {
			struct ck_semundo_clear *c = &t->clear[t->nclear++];
			c->semid = (int32_t)strtol(s, &end, 10);
			c->num = (uint32_t)strtoul(end + (*end == ','), &end, 10);
			c->t_end = strtoull(end + (*end == ','), &end, 10);
		} else
			break;
		s = end;
		while (*s == ' ')
			s++;
	}
	unsetenv("CKPT_SEMUNDO");
}
