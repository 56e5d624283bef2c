/* The job's credentials: saved as each thread parks, given back to each
 * restored thread before any job code runs again.
 *
 * A restored process starts with the restorer's credentials: root's (every
 * capability) when ckrun is root, else the user's with the one capability
 * the restore needs (CAP_CHECKPOINT_RESTORE, launcher/ckrun/ns.c). Each
 * thread then takes back exactly what it had: user and group ids (real,
 * effective, saved, filesystem), supplementary groups, securebits, its
 * capability sets, the bounding and ambient sets. The kernel keeps
 * credentials per thread and a raw system call changes only the calling
 * thread's (glibc's set*id broadcast is not usable here), so every thread
 * does it for itself (ck__thread_restored), and the manager waits for all
 * of them before it tells ckrun the process is back (ck__creds_wait).
 *
 * A thread that cannot get its saved credentials back fails the restore:
 * it never runs with more than it had. Two things are let go: groups when
 * the restorer may not set them (EPERM: a user's restore, whose groups are
 * the user's own, those ckrun runs with), and bounding-set capabilities
 * the restorer may not drop (the same user's ckrun gave the job that set).
 * Only system calls here: a restored thread's libc state is not its own
 * yet. */
#include <errno.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__KEEP_CAPS (1u << 4) /* SECBIT_KEEP_CAPS */

static volatile int ck__creds_done;
static volatile int ck__creds_fail; /* first failing errno (negative), 0: none */
static const char *volatile ck__creds_what;
static int ck__groups_differ; /* ck__creds_prepare: the restorer's groups are not the saved ones */

static int ck__capget(uint64_t *eff, uint64_t *prm, uint64_t *inh)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	long r = ck_sys2(SYS_capget, &h, d);

	if (r < 0)
		return (int)r;
	*eff = d[0].effective | (uint64_t)d[1].effective << 32;
	*prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	*inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
	return 0;
}

void ck__creds_save(struct ck_pd_thread *t)
{
	ck_sys3(SYS_getresuid, &t->uid[0], &t->uid[1], &t->uid[2]);
	ck_sys3(SYS_getresgid, &t->gid[0], &t->gid[1], &t->gid[2]);
	/* -1 changes nothing and returns the current one */
	t->uid[3] = (uint32_t)ck_sys1(SYS_setfsuid, -1);
	t->gid[3] = (uint32_t)ck_sys1(SYS_setfsgid, -1);
	if (ck__capget(&t->cap_eff, &t->cap_prm, &t->cap_inh) < 0)
		t->cap_eff = t->cap_prm = t->cap_inh = 0;
	t->securebits = (uint32_t)ck_sys1(SYS_prctl, PR_GET_SECUREBITS);
}

static uint64_t ck__hex(const char *p)
{
	uint64_t v = 0;

	for (; *p == ' ' || *p == '\t'; p++)
		;
	for (;; p++) {
		if (*p >= '0' && *p <= '9')
			v = v << 4 | (uint64_t)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			v = v << 4 | (uint64_t)(*p - 'a' + 10);
		else
			return v;
	}
}

int ck__creds_collect(void)
{
	static char buf[16384];
	const char *p;
	long n;

	/* Bounding and ambient sets from the main thread's view, like the
	 * groups (setgroups through glibc changes every thread). */
	n = ck_sys2(SYS_getgroups, CK_PD_MAX_GROUPS, ck__pd.groups);
	if (n < 0) {
		ck__failf("the process has more than %d supplementary groups: not supported", CK_PD_MAX_GROUPS);
		return -E2BIG;
	}
	ck__pd.ngroups = (uint32_t)n;
	if (ck__read_file("/proc/self/status", buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nCapBnd:"))) {
		ck__failf("cannot read the process's capabilities (/proc/self/status)");
		return -EIO;
	}
	ck__pd.cap_bnd = ck__hex(p + 8);
	ck__pd.cap_amb = (p = strstr(buf, "\nCapAmb:")) ? ck__hex(p + 8) : 0;
	return 0;
}

void ck__creds_prepare(const struct ck_procdesc *pd)
{
	static uint32_t cur[CK_PD_MAX_GROUPS];
	long n = ck_sys2(SYS_getgroups, CK_PD_MAX_GROUPS, cur);

	ck__groups_differ = n != (long)pd->ngroups;
	for (long i = 0; !ck__groups_differ && i < n; i++)
		ck__groups_differ = cur[i] != pd->groups[i];
	ck__creds_done = 0;
	ck__creds_fail = 0;
}

static int ck__fail(const char *what, long r)
{
	int none = 0;

	if (__atomic_compare_exchange_n(&ck__creds_fail, &none, (int)(r < 0 ? r : -EPERM), 0, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST))
		ck__creds_what = what;
	return -1;
}

/* In the order that keeps the privileges each step needs until it is
 * done: groups, bounding set and securebits while the restorer's
 * capabilities are in effect, then group and user ids, then the thread's
 * own capability sets. */
static int ck__restore(const struct ck_procdesc *pd, const struct ck_pd_thread *t)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	uint32_t u[3], g[3];
	uint64_t eff, prm, inh;
	long r, sb;

	if (ck__groups_differ && (r = ck_sys2(SYS_setgroups, pd->ngroups, pd->groups)) < 0 && r != -EPERM)
		return ck__fail("supplementary groups (setgroups)", r);
	for (int cap = 0; cap < 64; cap++) {
		if (pd->cap_bnd & (1ull << cap))
			continue;
		r = ck_sys2(SYS_prctl, PR_CAPBSET_READ, cap);
		if (r < 0)
			break; /* past the last capability */
		if (r > 0)
			ck_sys2(SYS_prctl, PR_CAPBSET_DROP, cap); /* may not: see above */
	}
	sb = ck_sys1(SYS_prctl, PR_GET_SECUREBITS);
	if (sb >= 0 && ((uint32_t)sb & ~CK__KEEP_CAPS) != (t->securebits & ~CK__KEEP_CAPS) &&
	    (r = ck_sys2(SYS_prctl, PR_SET_SECUREBITS, (t->securebits & ~CK__KEEP_CAPS) | ((uint32_t)sb & CK__KEEP_CAPS))) < 0)
		return ck__fail("securebits", r);
	ck_sys3(SYS_getresgid, &g[0], &g[1], &g[2]);
	if ((g[0] != t->gid[0] || g[1] != t->gid[1] || g[2] != t->gid[2]) &&
	    (r = ck_sys3(SYS_setresgid, t->gid[0], t->gid[1], t->gid[2])) < 0)
		return ck__fail("group ids (setresgid)", r);
	ck_sys1(SYS_setfsgid, t->gid[3]);
	ck_sys3(SYS_getresuid, &u[0], &u[1], &u[2]);
	if (u[0] != t->uid[0] || u[1] != t->uid[1] || u[2] != t->uid[2]) {
		/* the permitted set is set below, not lost here */
		ck_sys2(SYS_prctl, PR_SET_KEEPCAPS, 1);
		if ((r = ck_sys3(SYS_setresuid, t->uid[0], t->uid[1], t->uid[2])) < 0)
			return ck__fail("user ids (setresuid)", r);
	}
	ck_sys1(SYS_setfsuid, t->uid[3]);
	sb = ck_sys1(SYS_prctl, PR_GET_SECUREBITS);
	if (sb >= 0 && ((uint32_t)sb & CK__KEEP_CAPS) != (t->securebits & CK__KEEP_CAPS))
		ck_sys2(SYS_prctl, PR_SET_KEEPCAPS, !!(t->securebits & CK__KEEP_CAPS));
	ck_memset(d, 0, sizeof(d));
	d[0].effective = (uint32_t)t->cap_eff;
	d[1].effective = (uint32_t)(t->cap_eff >> 32);
	d[0].permitted = (uint32_t)t->cap_prm;
	d[1].permitted = (uint32_t)(t->cap_prm >> 32);
	d[0].inheritable = (uint32_t)t->cap_inh;
	d[1].inheritable = (uint32_t)(t->cap_inh >> 32);
	if ((r = ck_sys2(SYS_capset, &h, d)) < 0)
		return ck__fail("capabilities (capset)", r);
	ck_sys5(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int cap = 0; cap < 64; cap++)
		if ((pd->cap_amb & (1ull << cap)) &&
		    (r = ck_sys5(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0)) < 0)
			return ck__fail("ambient capabilities", r);
	/* What the thread has now, checked rather than trusted. */
	ck_sys3(SYS_getresuid, &u[0], &u[1], &u[2]);
	ck_sys3(SYS_getresgid, &g[0], &g[1], &g[2]);
	if (ck__capget(&eff, &prm, &inh) < 0 || eff != t->cap_eff || prm != t->cap_prm || inh != t->cap_inh ||
	    u[0] != t->uid[0] || u[1] != t->uid[1] || u[2] != t->uid[2] || g[0] != t->gid[0] ||
	    g[1] != t->gid[1] || g[2] != t->gid[2] || (uint32_t)ck_sys1(SYS_setfsuid, -1) != t->uid[3] ||
	    (uint32_t)ck_sys1(SYS_setfsgid, -1) != t->gid[3] ||
	    (uint32_t)ck_sys1(SYS_prctl, PR_GET_SECUREBITS) != t->securebits)
		return ck__fail("credentials (not those saved)", -EPERM);
	return 0;
}

void ck__creds_restore(const struct ck_pd_thread *t)
{
	ck__restore(&ck__pd, t);
}

/* The end of a thread's own restore (ck__thread_restored): what the
 * manager waits for before it installs the job's seccomp filters on every
 * thread, which may forbid what the thread did last. */
void ck__creds_thread_done(void)
{
	__atomic_add_fetch(&ck__creds_done, 1, __ATOMIC_SEQ_CST);
	ck_futex(&ck__creds_done, FUTEX_WAKE_PRIVATE, 1, NULL); /* the manager */
}

int ck__creds_wait(const char **what)
{
	int n;

	while ((n = __atomic_load_n(&ck__creds_done, __ATOMIC_SEQ_CST)) < (int)ck__pd.nthreads)
		ck_futex(&ck__creds_done, FUTEX_WAIT_PRIVATE, n, NULL);
	*what = ck__creds_what;
	return ck__creds_fail;
}
