/* The writer's priority over a round.
 *
 * A round's hashing and compressing start below the job (nice 10), so
 * that they take the CPU the job leaves idle. On a machine the job keeps
 * busy that CPU does not exist, and a writer that stays low falls behind:
 * the round lasts, and every write of the job to memory not read yet
 * waits for it (a write-protect fault). So the priority rises while the
 * round lasts: by 5 every step, up to ckrun's own. A short round never
 * leaves nice 10. An ordinary user may not lower a nice value
 * (RLIMIT_NICE): the writer then stays where it started. */
#include "launcher/ckrun/pace.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"

int ck_pace_may_nice(int to)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	struct rlimit rl;

	if (syscall(SYS_capget, &h, d) == 0 && (d[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32))))
		return 1;
	return getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || (long)rl.rlim_cur >= 20 - to);
}

void ck_pace_start(struct ck_pace *p, int from, unsigned step_ms)
{
	int own;

	errno = 0;
	own = getpriority(PRIO_PROCESS, (id_t)gettid());
	p->start_ns = ck_now_ns();
	p->from = from;
	p->to = errno || own > from ? from : own;
	/* not past what a thread may reach: it would only try in vain */
	while (p->to < from && !ck_pace_may_nice(p->to))
		p->to++;
	p->step_ms = step_ms;
	p->gen++;
}

int ck_pace_want(const struct ck_pace *p)
{
	uint64_t steps;
	int want;

	if (!p->step_ms)
		return p->from;
	steps = (ck_now_ns() - p->start_ns) / ((uint64_t)p->step_ms * 1000000u);
	want = steps >= 40 ? p->to : p->from - 5 * (int)steps;
	return want < p->to ? p->to : want;
}

void ck_pace_thread(void *arg, int first)
{
	static __thread const struct ck_pace *seen;
	static __thread unsigned seen_gen;
	static __thread int cur, stuck;
	const struct ck_pace *p = arg;
	int want;

	if (!p)
		return;
	if (first) { /* lowering one's own priority is always allowed */
		want = ck_pace_want(p);
		stuck = setpriority(PRIO_PROCESS, (id_t)gettid(), want) != 0;
		cur = want;
		seen = p;
		seen_gen = p->gen;
		return;
	}
	if (!p->step_ms)
		return;
	if (seen != p || seen_gen != p->gen) { /* a new thread, or a new round */
		errno = 0;
		cur = getpriority(PRIO_PROCESS, (id_t)gettid());
		stuck = errno != 0;
		seen = p;
		seen_gen = p->gen;
	}
	want = ck_pace_want(p);
	if (stuck || want >= cur)
		return;
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), want) == 0)
		cur = want;
	else
		stuck = 1; /* not allowed: stays */
}
