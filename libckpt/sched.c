/* Scheduling state of each thread: its CPU affinity, its policy, priority
 * and nice value (sched_getattr), and its I/O priority. Each thread saves
 * its own as it parks, into this file's memory (the image holds it), and
 * sets it again itself once restored, after its credentials; the manager
 * then reports the first that could not be set (a policy or nice value
 * the restoring user may not take, CPUs this machine lacks): the restore
 * fails naming it rather than run the job differently. System calls only. */
#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__CPU_WORDS 16 /* 1024 CPUs */

struct ck__sched_attr { /* the kernel's struct sched_attr (SCHED_ATTR_SIZE_VER1) */
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
	uint32_t util_min, util_max;
};

struct ck__sched {
	uint64_t cpus[CK__CPU_WORDS];
	uint32_t ncpu_bytes; /* 0: not saved */
	int32_t ioprio;      /* -1: not saved */
	struct ck__sched_attr attr;
	int32_t attr_saved;
	int32_t saved; /* 0 in an image made before this file */
	int32_t err;   /* restore: -errno of the first that failed */
	const char *what;
};

static struct ck__sched ck__sched[CK_PD_MAX_THREADS];

void ck__sched_thread_save(ptrdiff_t i)
{
	struct ck__sched *s;
	long n;

	if (i < 0 || i >= CK_PD_MAX_THREADS)
		return;
	s = &ck__sched[i];
	/* (not a call the job's own seccomp filters forbid: that state is
	 * then not saved, and a restore leaves it as it comes) */
	n = ck__seccomp_allows(SYS_sched_getaffinity) ? ck_sys3(SYS_sched_getaffinity, 0, sizeof(s->cpus), s->cpus) : -1;
	s->ncpu_bytes = n > 0 ? (uint32_t)n : 0;
	s->ioprio = ck__seccomp_allows(SYS_ioprio_get) ? (int32_t)ck_sys2(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0) : -1;
	ck_memset(&s->attr, 0, sizeof(s->attr));
	s->attr_saved = ck__seccomp_allows(SYS_sched_getattr) &&
			ck_sys4(SYS_sched_getattr, 0, &s->attr, sizeof(s->attr), 0) == 0;
	/* ckrun runs the parking threads at nice -10 (boost.c): the value
	 * before it is what the job had */
	if (ck__core.boost_nice > 0 && s->attr.nice == -10 &&
	    (s->attr.policy == 0 || s->attr.policy == 3 || s->attr.policy == 5)) /* OTHER, BATCH, IDLE */
		s->attr.nice = ck__core.boost_nice - 21;
	s->err = 0;
	s->saved = 1;
}

static int ck__same_attr(const struct ck__sched_attr *a, const struct ck__sched_attr *b)
{
	return a->policy == b->policy && a->nice == b->nice && a->priority == b->priority &&
	       (a->flags & ~8ull) == (b->flags & ~8ull) /* (SCHED_FLAG_KEEP_POLICY is not a state) */ &&
	       a->runtime == b->runtime && a->deadline == b->deadline && a->period == b->period;
}

static void ck__fail(struct ck__sched *s, long r, const char *what)
{
	if (r < 0 && !s->err) {
		s->err = (int32_t)r;
		s->what = what;
	}
}

void ck__sched_thread_restored(ptrdiff_t i)
{
	struct ck__sched *s;
	uint64_t now[CK__CPU_WORDS];
	struct ck__sched_attr cur;
	long n;

	if (i < 0 || i >= CK_PD_MAX_THREADS)
		return;
	s = &ck__sched[i];
	s->err = 0;
	if (!s->saved)
		return;
	if (s->ncpu_bytes) {
		ck_memset(now, 0, sizeof(now));
		n = ck_sys3(SYS_sched_getaffinity, 0, sizeof(now), now);
		for (uint32_t w = 0; n > 0 && w < s->ncpu_bytes / 8; w++)
			if (now[w] != s->cpus[w]) {
				ck__fail(s, ck_sys3(SYS_sched_setaffinity, 0, s->ncpu_bytes, s->cpus),
					 "its CPU affinity (sched_setaffinity)");
				break;
			}
	}
	if (s->attr_saved) {
		ck_memset(&cur, 0, sizeof(cur));
		if (ck_sys4(SYS_sched_getattr, 0, &cur, sizeof(cur), 0) < 0 || !ck__same_attr(&cur, &s->attr)) {
			struct ck__sched_attr a = s->attr;
			a.size = sizeof(a);
			a.flags &= ~8ull;
			ck__fail(s, ck_sys3(SYS_sched_setattr, 0, &a, 0),
				 "its scheduling policy, priority or nice value (sched_setattr)");
		}
	}
	if (s->ioprio >= 0 && ck_sys2(SYS_ioprio_get, 1, 0) != s->ioprio)
		ck__fail(s, ck_sys3(SYS_ioprio_set, 1, 0, s->ioprio), "its I/O priority (ioprio_set)");
}

/* The manager, every thread restored: 0, or the first failure. */
int ck__sched_restored(uint32_t nthreads, const char **what)
{
	for (uint32_t i = 0; i < nthreads && i < CK_PD_MAX_THREADS; i++)
		if (ck__sched[i].err) {
			*what = ck__sched[i].what;
			return ck__sched[i].err;
		}
	return 0;
}
