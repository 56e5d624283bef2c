/* Process state besides the credentials that a restored process would
 * otherwise take from the restorer: each thread's personality, the
 * process's oom_score_adj, PR_SET_THP_DISABLE, and its memory locks
 * (mlock/mlock2 of single mappings, with MLOCK_ONFAULT, and mlockall's
 * MCL_FUTURE and MCL_ONFAULT).
 *
 * Saved while the job's threads are parked; given back at the end of a
 * restart, after the credentials (personality flags in PER_CLEAR_ON_SETID
 * are cleared by a change of ids), and after every mapping exists and holds
 * its data (a lock populates, and MCL_FUTURE would lock the restorer's own
 * memory). Which ranges are locked is kept here, in libckpt's memory, which
 * the image holds: it needs no room in the process descriptor. A lock that
 * cannot be taken back fails the restore: a job never runs with pages it
 * locked swappable, nor without the limits it set on itself.
 *
 * The audit login uid (/proc/self/loginuid) is the process's too: kept
 * here as well, and given back first thing in the restart, while the
 * process still has the restorer's credentials (a change needs
 * CAP_AUDIT_CONTROL); one that cannot be given back fails the restore. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 0x01
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

#define CK__MAX_LOCKS 256

struct ck__lock {
	uint64_t start, end;
	uint32_t onfault;
};

static struct ck__lock ck__locks[CK__MAX_LOCKS];
static uint32_t ck__nlocks;
/* The parent-death signal is the thread's (PR_SET_PDEATHSIG: "the thread
 * that created this process"), not the process's: by ck__pd.threads[]. */
static int32_t ck__pdeath[CK_PD_MAX_THREADS];
/* The audit login uid at the cut; ck__loginuid_saved 0: no audit in the
 * kernel (no /proc/self/loginuid), nothing to give back. */
static uint32_t ck__loginuid;
static int ck__loginuid_saved;

/* /proc/self/loginuid: 0 with *v, or -errno. */
static int ck__read_loginuid(uint32_t *v)
{
	char b[16];
	long n = ck__read_file("/proc/self/loginuid", b, sizeof(b));
	uint64_t x = 0;

	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	for (const char *p = b; *p >= '0' && *p <= '9'; p++)
		x = x * 10 + (uint64_t)(*p - '0');
	*v = (uint32_t)x;
	return 0;
}

int ck__pstate_loginuid_restore(uint32_t *saved, uint32_t *now)
{
	char b[12];
	int k = 0, n = 0;
	uint32_t u;
	char d[12];
	long fd, r;

	if (!ck__loginuid_saved)
		return 0;
	*saved = ck__loginuid;
	if (ck__read_loginuid(now) < 0)
		return -ENOENT; /* saved where the kernel had audit, restored where it has none */
	if (*now == ck__loginuid)
		return 0;
	u = ck__loginuid;
	do
		d[k++] = (char)('0' + u % 10);
	while ((u /= 10) && k < 11);
	while (k)
		b[n++] = d[--k];
	fd = ck_openat(AT_FDCWD, "/proc/self/loginuid", O_WRONLY | O_CLOEXEC, 0);
	r = fd < 0 ? fd : ck_write((int)fd, b, (size_t)n);
	if (fd >= 0)
		ck_close((int)fd);
	if (r >= 0 && ck__read_loginuid(now) == 0 && *now == ck__loginuid)
		return 0;
	return r < 0 ? (int)r : -EPERM;
}

void ck__pstate_thread_save(struct ck_pd_thread *t)
{
	ptrdiff_t i = t - ck__pd.threads;

	t->personality = (uint32_t)ck_sys1(SYS_personality, 0xffffffffL);
	ck__sched_thread_save(i);
	if (i >= 0 && i < CK_PD_MAX_THREADS) {
		ck__pdeath[i] = 0;
		ck_sys2(SYS_prctl, PR_GET_PDEATHSIG, &ck__pdeath[i]);
	}
}

/* The locked memory the kernel counts (VmLck, kB), -1 when unreadable. */
static long ck__vmlck(void)
{
	static char buf[16384];
	const char *p;
	long v = 0;

	if (ck__read_file("/proc/self/status", buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nVmLck:")))
		return -1;
	for (p += 7; *p == ' ' || *p == '\t'; p++)
		;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	return v;
}

/* mlockall(MCL_FUTURE) has no getter: a fresh page mapped now is counted
 * as locked if it is set, and is resident at once unless MCL_ONFAULT. */
static int ck__probe_mcl(void)
{
	long before = ck__vmlck(), after, p;
	unsigned char vec = 0;

	if (before < 0) {
		ck__failf("cannot read the process's locked memory (/proc/self/status)");
		return -EIO;
	}
	p = ck_mmap(0, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == -EAGAIN) {
		ck__failf("mlockall(MCL_FUTURE) with RLIMIT_MEMLOCK reached: no page left to tell its mode; not supported");
		return -ENOTSUP;
	}
	if (p < 0 && p > -4096)
		return (int)p;
	after = ck__vmlck();
	ck_sys3(SYS_mincore, p, 4096, &vec);
	ck_munmap((uint64_t)p, 4096);
	if (after > before)
		ck__pd.pflags |= CK_PD_P_MCL_FUTURE | ((vec & 1) ? 0 : CK_PD_P_MCL_ONFAULT);
	return 0;
}

static int ck__word(const char *p, const char *end, char a, char b)
{
	for (; p + 1 < end; p++)
		if (p[0] == a && p[1] == b && p[-1] == ' ' && (p + 2 == end || p[2] == ' ' || p[2] == '\n'))
			return 1;
	return 0;
}

static uint64_t ck__hexnum(const char **pp)
{
	const char *p = *pp;
	uint64_t v = 0;

	for (;; p++) {
		if (*p >= '0' && *p <= '9')
			v = v << 4 | (uint64_t)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			v = v << 4 | (uint64_t)(*p - 'a' + 10);
		else
			break;
	}
	*pp = p;
	return v;
}

/* One line of /proc/self/smaps: a mapping's range, or its VmFlags. */
static int ck__smaps_line(const char *l, const char *end, uint64_t *start, uint64_t *stop)
{
	if ((*l >= '0' && *l <= '9') || (*l >= 'a' && *l <= 'f')) {
		const char *p = l;
		*start = ck__hexnum(&p);
		if (*p++ != '-')
			return 0;
		*stop = ck__hexnum(&p);
		return 0;
	}
	if (end - l < 8 || memcmp(l, "VmFlags:", 8) || !ck__word(l + 8, end, 'l', 'o'))
		return 0;
	{
		uint32_t onf = (uint32_t)ck__word(l + 8, end, 'l', 'f');
		struct ck__lock *last = ck__nlocks ? &ck__locks[ck__nlocks - 1] : NULL;
		if (last && last->end == *start && last->onfault == onf) {
			last->end = *stop;
			return 0;
		}
		if (ck__nlocks == CK__MAX_LOCKS) {
			ck__failf("more than %d separately locked memory ranges (mlock): a checkpoint holds at most %d",
				  CK__MAX_LOCKS, CK__MAX_LOCKS);
			return -E2BIG;
		}
		ck__locks[ck__nlocks++] = (struct ck__lock){*start, *stop, onf};
	}
	return 0;
}

/* The locked ranges, from VmFlags "lo" (locked) and "lf" (on fault). */
static int ck__collect_locks(void)
{
	static char buf[65536];
	uint64_t start = 0, stop = 0;
	size_t have = 0;
	long fd = ck_openat(AT_FDCWD, "/proc/self/smaps", O_RDONLY | O_CLOEXEC, 0), n;
	int r = 0;

	if (fd < 0) {
		ck__failf("cannot read the process's memory locks (/proc/self/smaps)");
		return -EIO;
	}
	while (r == 0 && (n = ck_read((int)fd, buf + have, sizeof(buf) - have)) > 0) {
		size_t len = have + (size_t)n, at = 0;
		for (size_t i = 0; i < len && r == 0; i++)
			if (buf[i] == '\n') {
				r = ck__smaps_line(buf + at, buf + i, &start, &stop);
				at = i + 1;
			}
		have = len - at;
		if (have == sizeof(buf)) /* a line longer than the buffer: a path; none of ours */
			have = 0;
		memmove(buf, buf + at, have);
	}
	ck_close((int)fd);
	return r;
}

/* The process's oom_score_adj, from /proc (readable whatever its ids). */
static int ck__read_oom(int32_t *out)
{
	char b[32];
	long n = ck__read_file("/proc/self/oom_score_adj", b, sizeof(b)), v = 0, neg = 0;

	if (n <= 0)
		return -EIO;
	for (const char *p = b; *p; p++)
		if (*p == '-')
			neg = 1;
		else if (*p >= '0' && *p <= '9')
			v = v * 10 + (*p - '0');
	*out = (int32_t)(neg ? -v : v);
	return 0;
}

int ck__pstate_collect(void)
{
	int r;

	ck__pd.pflags = CK_PD_P_VALID;
	ck__nlocks = 0;
	ck__loginuid_saved = ck__read_loginuid(&ck__loginuid) == 0;
	if (ck__read_oom(&ck__pd.oom_score_adj) < 0) {
		ck__failf("cannot read the process's oom_score_adj (/proc/self/oom_score_adj)");
		return -EIO;
	}
	if (ck_sys5(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0)
		ck__pd.pflags |= CK_PD_P_THP_DISABLE;
	if ((r = ck__probe_mcl()) < 0)
		return r;
	if (ck__vmlck() > 0)
		return ck__collect_locks();
	return 0;
}

void ck__pstate_thread_restored(const struct ck_pd_thread *t)
{
	ptrdiff_t i = t - ck__pd.threads;

	if (!(ck__pd.pflags & CK_PD_P_VALID))
		return;
	if ((uint32_t)ck_sys1(SYS_personality, 0xffffffffL) != t->personality)
		ck_sys1(SYS_personality, t->personality);
	if (i >= 0 && i < CK_PD_MAX_THREADS && ck__pdeath[i] > 0)
		ck_sys2(SYS_prctl, PR_SET_PDEATHSIG, ck__pdeath[i]);
	ck__sched_thread_restored(i);
}

/* Written only where it differs from the value the process has, and
 * early in a restart (restart.c), with the restorer's credentials: a
 * process whose ids changed since it set its value is not dumpable, and
 * its /proc files are root's to open for writing then. */
int ck__pstate_oom_restore(void)
{
	char b[16], d[12];
	int v = ck__pd.oom_score_adj, k = 0, n = 0;
	unsigned u = (unsigned)(v < 0 ? -v : v);
	int32_t now;
	long fd, r;

	if (!(ck__pd.pflags & CK_PD_P_VALID) || (ck__read_oom(&now) == 0 && now == v))
		return 0;
	do
		d[k++] = (char)('0' + u % 10);
	while ((u /= 10) && k < 11);
	if (v < 0)
		b[n++] = '-';
	while (k)
		b[n++] = d[--k];
	b[n++] = '\n';
	fd = ck_openat(AT_FDCWD, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC, 0);
	r = fd < 0 ? fd : ck_write((int)fd, b, (size_t)n);
	if (fd >= 0)
		ck_close((int)fd);
	return r < 0 ? (int)r : 0;
}

int ck__pstate_restore(const char **what)
{
	long r;

	if (!(ck__pd.pflags & CK_PD_P_VALID))
		return 0;
	if ((r = ck__sched_restored(ck__pd.nthreads, what)) < 0)
		return (int)r;
	if ((r = ck__pstate_oom_restore()) < 0) {
		*what = "oom_score_adj";
		return (int)r;
	}
	r = ck_sys5(SYS_prctl, PR_SET_THP_DISABLE, !!(ck__pd.pflags & CK_PD_P_THP_DISABLE), 0, 0, 0);
	if (r < 0) {
		*what = "PR_SET_THP_DISABLE";
		return (int)r;
	}
	for (uint32_t i = 0; i < ck__nlocks; i++) {
		const struct ck__lock *l = &ck__locks[i];
		r = ck_sys3(SYS_mlock2, l->start, l->end - l->start, l->onfault ? MLOCK_ONFAULT : 0);
		if (r < 0) {
			*what = "memory locks (mlock2)";
			return (int)r;
		}
	}
	if (ck__pd.pflags & CK_PD_P_MCL_FUTURE) {
		r = ck_sys1(SYS_mlockall, MCL_FUTURE | ((ck__pd.pflags & CK_PD_P_MCL_ONFAULT) ? MCL_ONFAULT : 0));
		if (r < 0) {
			*what = "mlockall(MCL_FUTURE)";
			return (int)r;
		}
	}
	return 0;
}
