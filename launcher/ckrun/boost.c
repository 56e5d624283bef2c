/* Scheduling priority during a round (as root; otherwise nothing changes).
 *
 * While the job is being frozen, every one of its threads matters: a
 * manager must run to park its process, and a job thread must run to take
 * its parking signal. On a machine with fewer cores than processes, a
 * runnable thread at the job's priority waits behind the others' forks.
 * So every task of the job runs at CK_BOOST_NICE until RELEASE, and ckrun's
 * own coordinating thread just above, so that it is not delayed by the
 * processes it wakes. Each task gets its own nice value back. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"

#define CK_BOOST_NICE (-10)
#define CK_BOOST_SELF (-11)

struct ck_boost {
	pid_t pid, tid;
	int nice;
};

static struct ck_boost *ck__boosted;
static size_t ck__nboosted, ck__boost_cap;
/* processes with a task already at the boost's value or above: not told */
static pid_t ck__unsure[64];
static size_t ck__nunsure;
static int ck__self_nice, ck__self_boosted;

static int ck__tid_of(pid_t pid, pid_t tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) == 0;
}

static int ck__boost_task(pid_t pid, pid_t tid, void *arg)
{
	int old;

	(void)arg;
	errno = 0;
	old = getpriority(PRIO_PROCESS, (id_t)tid);
	if (errno || old <= CK_BOOST_NICE) {
		if (!errno && ck__nunsure < sizeof(ck__unsure) / sizeof(ck__unsure[0]))
			ck__unsure[ck__nunsure++] = pid;
		return 0;
	}
	if (ck__nboosted == ck__boost_cap) {
		size_t cap = ck__boost_cap ? ck__boost_cap * 2 : 64;
		struct ck_boost *v = realloc(ck__boosted, cap * sizeof(*v));
		if (!v)
			return 0; /* it just runs at its own priority */
		ck__boosted = v;
		ck__boost_cap = cap;
	}
	if (setpriority(PRIO_PROCESS, (id_t)tid, CK_BOOST_NICE) == 0)
		ck__boosted[ck__nboosted++] = (struct ck_boost){pid, tid, old};
	return 0;
}

/* Its own value back, unless the job set another since the boost (a
 * thread setting its nice value as the round began): that one stays. */
static void ck__unboost(const struct ck_boost *b)
{
	errno = 0;
	if (getpriority(PRIO_PROCESS, (id_t)b->tid) == CK_BOOST_NICE && !errno)
		setpriority(PRIO_PROCESS, (id_t)b->tid, b->nice);
}

static const struct ck_boost *ck__boost_find(pid_t tid)
{
	for (size_t i = 0; i < ck__nboosted; i++)
		if (ck__boosted[i].tid == tid)
			return &ck__boosted[i];
	return NULL;
}

/* A thread a boosted thread created before it parked inherited the boost:
 * it gets its creator process's own value. */
static int ck__unboost_new(pid_t pid, pid_t tid, void *arg)
{
	int nice = 0;

	(void)arg;
	if (ck__boost_find(tid))
		return 0;
	errno = 0;
	if (getpriority(PRIO_PROCESS, (id_t)tid) != CK_BOOST_NICE || errno)
		return 0;
	for (size_t i = 0; i < ck__nboosted; i++)
		if (ck__boosted[i].pid == pid && ck__boosted[i].tid == pid)
			nice = ck__boosted[i].nice;
	setpriority(PRIO_PROCESS, (id_t)tid, nice);
	return 0;
}

/* For the request to process pid: its tasks' nice value + 21 before the
 * boost, where all had the same (libckpt saves that one, not -10); else
 * its tasks get theirs back now and it is not boosted (0). */
int ck_procs_boost_orig(pid_t pid)
{
	int orig = 0, mixed = 0;

	for (size_t i = 0; i < ck__nunsure; i++)
		mixed |= ck__unsure[i] == pid;
	for (size_t i = 0; i < ck__nboosted; i++)
		if (ck__boosted[i].pid == pid) {
			mixed |= orig && orig != ck__boosted[i].nice + 21;
			orig = ck__boosted[i].nice + 21;
		}
	if (!mixed)
		return orig;
	for (size_t i = 0; i < ck__nboosted; i++)
		if (ck__boosted[i].pid == pid)
			ck__unboost(&ck__boosted[i]);
	return 0;
}

void ck_procs_boost(struct ckrun *c, int on)
{
	if (geteuid() != 0)
		return;
	if (on && (ck__nboosted || ck__self_boosted))
		ck_procs_boost(c, 0); /* a round begun again: its values first, or -10 became "theirs" */
	if (on) {
		ck__nboosted = 0;
		ck__nunsure = 0;
		errno = 0;
		ck__self_nice = getpriority(PRIO_PROCESS, (id_t)gettid());
		ck__self_boosted = !errno && setpriority(PRIO_PROCESS, (id_t)gettid(), CK_BOOST_SELF) == 0;
		for (size_t i = 0; i < c->nprocs; i++)
			ck_proc_each_tid(c->procs[i].pid, ck__boost_task, NULL);
		return;
	}
	if (!ck__nboosted && !ck__self_boosted)
		return;
	for (size_t i = 0; i < ck__nboosted; i++)
		if (ck__tid_of(ck__boosted[i].pid, ck__boosted[i].tid))
			ck__unboost(&ck__boosted[i]);
	/* Only processes with more threads than were boosted need a look. */
	for (size_t i = 0; i < c->nprocs; i++) {
		uint32_t had = 0;
		for (size_t k = 0; k < ck__nboosted; k++)
			had += ck__boosted[k].pid == c->procs[i].pid;
		if (!c->procs[i].pd || c->procs[i].pd->nthreads != had)
			ck_proc_each_tid(c->procs[i].pid, ck__unboost_new, NULL);
	}
	ck__nboosted = 0;
	if (ck__self_boosted)
		setpriority(PRIO_PROCESS, (id_t)gettid(), ck__self_nice);
	ck__self_boosted = 0;
}
