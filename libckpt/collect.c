/* Process-wide state recorded at a checkpoint while the job's threads are
 * parked: mm fields, auxv, signal dispositions, interval timers, rlimits,
 * umask, cwd and executable. Only system calls and fixed buffers here:
 * a parked thread may hold any libc lock. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

long ck__read_file(const char *path, char *buf, size_t len)
{
	long fd = ck__open_priv(path, O_RDONLY), n, got = 0;

	if (fd < 0)
		return fd;
	while ((size_t)got < len - 1 && (n = ck_read((int)fd, buf + got, len - 1 - got)) > 0)
		got += n;
	ck__close_priv((int)fd);
	buf[got] = 0;
	return got;
}

static uint64_t ck__next_u64(const char **p)
{
	uint64_t v = 0;

	while (**p == ' ')
		(*p)++;
	if (**p == '-') /* tty/tpgid fields can be -1; their values are not used */
		(*p)++;
	while (**p >= '0' && **p <= '9')
		v = v * 10 + (uint64_t)(*(*p)++ - '0');
	return v;
}

/* Fields 4 to upto (< 64) of /proc/self/stat into f[], read into buf. */
static int ck__self_stat(char *buf, size_t len, uint64_t *f, int upto)
{
	const char *p;

	if (ck__read_file("/proc/self/stat", buf, len) <= 0 || !(p = strrchr(buf, ')')))
		return -EIO;
	p += 2; /* field 3 (state) */
	p++;    /* skip state letter */
	for (int i = 4; i <= upto && *p; i++)
		f[i] = ck__next_u64(&p);
	return 0;
}

/* The kernel's start of this process's stack (field 28 of /proc/self/stat),
 * 0 if unknown: with its HELLO, ckrun tells by it whether the process has
 * exec'd since it attached (a HELLO read late, after an exec into a
 * program without libckpt, would otherwise vouch for that program). */
uint64_t ck__stack_start(void)
{
	char stat[1536];
	uint64_t f[29] = {0};

	return ck__self_stat(stat, sizeof(stat), f, 28) < 0 ? 0 : f[28];
}

static int ck__collect_mm(void)
{
	static char stat[4096];
	uint64_t f[64];

	if (ck__self_stat(stat, sizeof(stat), f, 63) < 0)
		return -EIO;
	/* not getppid(): a job's seccomp filter may forbid it. /proc is the
	 * job's pid namespace's, where both agree; a process in a pid
	 * namespace of its own (the /proc of another) asks the kernel */
	ck__pd.ppid = (int32_t)f[4];
	if (strtol(stat, NULL, 10) != ck__core.pid)
		ck__pd.ppid = (int32_t)ck_sys0(SYS_getppid);
	ck__pd.start_code = f[26];
	ck__pd.end_code = f[27];
	ck__pd.start_stack = f[28];
	ck__pd.start_data = f[45];
	ck__pd.end_data = f[46];
	ck__pd.start_brk = f[47];
	ck__pd.arg_start = f[48];
	ck__pd.arg_end = f[49];
	ck__pd.env_start = f[50];
	ck__pd.env_end = f[51];
	ck__pd.brk = (uint64_t)ck_sys1(SYS_brk, 0);
	{
		long fd = ck_openat(AT_FDCWD, "/proc/self/auxv", O_RDONLY | O_CLOEXEC, 0), n;
		if (fd >= 0) {
			n = ck_read((int)fd, ck__pd.auxv, sizeof(ck__pd.auxv));
			ck__pd.auxv_size = n > 0 ? (uint32_t)n : 0;
			ck_close((int)fd);
		}
	}
	return 0;
}

/* State this version cannot restore makes the round fail with one line
 * naming it; the job is not touched. */
static int ck__check_unsupported(void)
{
	static char buf[8192];
	const char *p;

	if (ck__read_file("/proc/self/status", buf, sizeof(buf)) > 0 && (p = strstr(buf, "TracerPid:"))) {
		p += 10;
		uint64_t tracer = ck__next_u64(&p);
		if (tracer) {
			ck__failf("the job is traced (ptrace) by process %llu: not supported", (unsigned long long)tracer);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* /proc/self/timers: "ID: n", "signal: signo/value", "notify: kind/pid.N"
 * or "kind/tid.N", "ClockID: c"; the remaining time from timer_gettime. */
static int ck__collect_timers(void)
{
	static char buf[16384];
	const char *p = buf;

	ck__pd.ntimers = 0;
	if (ck__read_file("/proc/self/timers", buf, sizeof(buf)) < 0)
		return 0;
	/* A timer's block starts with a line "ID: n" (not "ClockID:"). */
	while (p && *p) {
		struct ck_pd_timer *t;
		const char *q;
		struct itimerspec its;

		if (ck_strncmp(p, "ID:", 3)) {
			p = strchr(p, '\n');
			p = p ? p + 1 : NULL;
			continue;
		}
		if (ck__pd.ntimers >= CK_PD_MAX_TIMERS) {
			ck__failf("more than %d POSIX timers", CK_PD_MAX_TIMERS);
			return -E2BIG;
		}
		t = &ck__pd.timers[ck__pd.ntimers++];
		memset(t, 0, sizeof(*t));
		p += 3;
		t->id = (int32_t)ck__next_u64(&p);
		if ((q = strstr(p, "signal:"))) {
			q += 7;
			t->signo = (int32_t)ck__next_u64(&q);
			if (*q == '/')
				q++;
			for (; (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f'); q++)
				t->value = (t->value << 4) | (uint64_t)(*q <= '9' ? *q - '0' : *q - 'a' + 10);
		}
		if ((q = strstr(p, "notify:"))) {
			q += 7;
			while (*q == ' ')
				q++;
			t->notify = !ck_strncmp(q, "none", 4) ? SIGEV_NONE : !ck_strncmp(q, "thread", 6) ? SIGEV_THREAD
												    : SIGEV_SIGNAL;
			q = strchr(q, '/');
			if (q && !ck_strncmp(q, "/tid.", 5)) {
				q += 5;
				t->notify |= SIGEV_THREAD_ID;
				t->tid = (int32_t)ck__next_u64(&q);
			}
		}
		if ((q = strstr(p, "ClockID:"))) {
			/* CPU-time clocks are negative (they encode a pid) */
			for (q += 8; *q == ' '; q++)
				;
			t->clock = *q == '-' ? -(int32_t)(q++, ck__next_u64(&q)) : (int32_t)ck__next_u64(&q);
		}
		memset(&its, 0, sizeof(its));
		if (ck_sys2(SYS_timer_gettime, t->id, &its) == 0) {
			t->value_ns = (uint64_t)its.it_value.tv_sec * 1000000000ull + (uint64_t)its.it_value.tv_nsec;
			t->interval_ns =
				(uint64_t)its.it_interval.tv_sec * 1000000000ull + (uint64_t)its.it_interval.tv_nsec;
		}
	}
	return 0;
}

struct ck_sysv_map ck__sysv_maps[CK_MAX_SYSV_MAPS];

/* This round's /proc/self/maps (60000 mappings list in about 4.5 MiB;
 * untouched beyond what is read); its length, -1 where it could not be
 * read. */
static char ck__maps[8 << 20];
static long ck__maps_len = -1;

/* Whether this round's /proc/self/maps shows a mapping of file dev:ino. */
int ck__maps_has_file(uint64_t dev, uint64_t ino)
{
	char want[64];

	if (ck__maps_len <= 0)
		return 0;
	snprintf(want, sizeof(want), " %02x:%02x %llu ", major(dev), minor(dev), (unsigned long long)ino);
	return strstr(ck__maps, want) != NULL;
}

/* Mappings plugins rebuild themselves (device memory) stay out; System V
 * attachments are noted for the snapshot. */
static int ck__collect_plugin_skips(void)
{
	char *maps = ck__maps;
	const char *p = maps;
	long n = ck__maps_len = ck__read_file("/proc/self/maps", maps, sizeof(ck__maps));

	ck__pd.nskips = 0;
	ck__aio_rings = 0;
	ck__aio_round_begin();
	ck__pd.nsysv = 0;
	if (n < 0) {
		ck__core.hold = 1;
		return 0;
	}
	/* a listing cut short could hide a shared or device mapping */
	if ((size_t)n >= sizeof(ck__maps) - 1) {
		ck__failf("more mappings than %zu bytes of /proc/self/maps: not supported", sizeof(ck__maps) - 1);
		return -E2BIG;
	}
	while (*p) {
		const char *eol = strchr(p, '\n'), *path;
		uint64_t start = 0, end = 0;
		const char *why = NULL;
		char name[256];
		size_t len;

		if (!eol)
			eol = p + ck_strlen(p);
		for (; *p != '-' && p < eol; p++)
			start = (start << 4) | (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
		for (p++; *p != ' ' && p < eol; p++)
			end = (end << 4) | (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
		/* A shared writable mapping is not frozen by the snapshot's
		 * copy-on-write: the round must hold the threads until it is read. */
		if (p + 4 < eol && p[2] == 'w' && p[4] == 's')
			ck__core.hold = 1;
		/* the path is the sixth field */
		path = p;
		for (int f = 0; f < 4 && path < eol; f++) {
			while (path < eol && *path == ' ')
				path++;
			while (path < eol && *path != ' ')
				path++;
		}
		while (path < eol && *path == ' ')
			path++;
		len = (size_t)(eol - path) < sizeof(name) - 1 ? (size_t)(eol - path) : sizeof(name) - 1;
		memcpy(name, path, len);
		name[len] = 0;
		/* A Linux AIO context's ring (io_setup): made by the kernel;
		 * restored as plain memory it would be no context at all
		 * (io_getevents: EINVAL). Left out, made again (aio.c). */
		if (!strcmp(name, "/[aio] (deleted)")) {
			struct ck_pd_skip *k;
			int r = ck__aio_ring_check(start, end);
			if (r < 0)
				return r;
			if (ck__pd.nskips >= CK_PD_MAX_SKIPS) {
				ck__failf("more than %d mappings left out (AIO rings and plugins')", CK_PD_MAX_SKIPS);
				return -E2BIG;
			}
			k = &ck__pd.skips[ck__pd.nskips++];
			k->start = start;
			k->end = end;
			snprintf(k->why, sizeof(k->why), "a Linux AIO context's ring: made again at restart");
			ck__aio_rings++;
			p = *eol ? eol + 1 : eol;
			continue;
		}
		if (!strncmp(name, "/SYSV", 5) && ck__pd.nsysv < CK_MAX_SYSV_MAPS) {
			ck__sysv_maps[ck__pd.nsysv].start = start;
			ck__sysv_maps[ck__pd.nsysv++].end = end;
		}
		if (ck__plugins_skip(start, end, name, &why)) {
			struct ck_pd_skip *k;
			if (ck__pd.nskips >= CK_PD_MAX_SKIPS) {
				ck__failf("plugins leave out more than %d mappings", CK_PD_MAX_SKIPS);
				return -E2BIG;
			}
			k = &ck__pd.skips[ck__pd.nskips++];
			k->start = start;
			k->end = end;
			snprintf(k->why, sizeof(k->why), "%s", why ? why : "left out by a plugin");
		}
		p = *eol ? eol + 1 : eol;
	}
	return 0;
}

int ck__collect_process(void)
{
	long n;
	int r;

	r = ck__check_unsupported();
	if (r < 0)
		return r;
	ck__membarrier_collect();
	/* Process-directed pending signals (the threads took their own), unless
	 * the main thread took them as it parked (their siginfo whole). */
	if (!__atomic_load_n(&ck__core.shd_taken, __ATOMIC_SEQ_CST))
		ck__capture_pending("/proc/self/status", "ShdPnd:", 0);
	if (ck__pd.nsiginfo > CK_PD_MAX_SIGINFO) {
		ck__failf("more than %d pending signals", CK_PD_MAX_SIGINFO);
		return -E2BIG;
	}

	ck__pd.magic = CK_PD_MAGIC;
	ck__pd.version = CK_PD_VERSION;
	ck__pd.size = sizeof(ck__pd);
	ck__pd.pid = ck__core.pid;
	r = ck__collect_mm();
	if (r < 0) {
		ck__failf("cannot read /proc/self/stat");
		return r;
	}
	for (int s = 1; s < CK_PD_NSIG; s++) {
		memset(&ck__pd.sigact[s], 0, sizeof(ck__pd.sigact[s]));
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		ck_sys4(SYS_rt_sigaction, s, NULL, &ck__pd.sigact[s], 8);
	}
	/* when its timers were read: the cut comes a little later */
	ck__pd.rec_mono = ck__now_us() * 1000u;
	for (int w = 0; w < 3; w++) {
		struct itimerval it;
		memset(&it, 0, sizeof(it));
		ck_sys2(SYS_getitimer, w, &it);
		ck__pd.itimer[w][0] = (uint64_t)it.it_interval.tv_sec;
		ck__pd.itimer[w][1] = (uint64_t)it.it_interval.tv_usec;
		ck__pd.itimer[w][2] = (uint64_t)it.it_value.tv_sec;
		ck__pd.itimer[w][3] = (uint64_t)it.it_value.tv_usec;
	}
	for (int l = 0; l < CK_PD_NRLIMIT; l++) {
		struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
		ck_sys4(SYS_prlimit64, 0, l, NULL, &rl);
		ck__pd.rlimit[l][0] = rl.rlim_cur;
		ck__pd.rlimit[l][1] = rl.rlim_max;
	}
	r = ck__collect_timers();
	if (r == 0)
		r = ck__collect_plugin_skips();
	if (r == 0)
		r = ck__creds_collect();
	if (r == 0)
		r = ck__pstate_collect();
	if (r < 0)
		return r;
	ck__pd.dumpable = (int32_t)ck_sys1(SYS_prctl, PR_GET_DUMPABLE);
	ck__pd.pdeathsig = 0;
	ck_sys2(SYS_prctl, PR_GET_PDEATHSIG, &ck__pd.pdeathsig);
	ck__pd.child_subreaper = 0;
	ck_sys2(SYS_prctl, PR_GET_CHILD_SUBREAPER, &ck__pd.child_subreaper);
	ck__pd.umask = (uint32_t)ck_sys1(SYS_umask, 022);
	ck_sys1(SYS_umask, ck__pd.umask);
	n = ck_sys2(SYS_getcwd, ck__pd.cwd, sizeof(ck__pd.cwd));
	ck__pd.cwd_mode = 0;
	if (n == -ENOENT) {
		/* removed while the process is in it: "PATH (deleted)", made
		 * again (empty, as it had to be) and removed at a restore */
		struct stat st;
		n = ck_sys4(SYS_readlinkat, AT_FDCWD, "/proc/self/cwd", ck__pd.cwd, sizeof(ck__pd.cwd) - 1);
		ck__pd.cwd[n > 0 ? n : 0] = 0;
		if (n <= 10 || ck_strncmp(ck__pd.cwd + n - 10, " (deleted)", 10) ||
		    ck_sys4(SYS_newfstatat, AT_FDCWD, ".", &st, 0) < 0) {
			ck__failf("the working directory was removed and cannot be named (%s): not restored",
				  ck__pd.cwd);
			return -ENOENT;
		}
		ck__pd.cwd_mode = CK_PD_CWD_REMOVED | (st.st_mode & 07777);
	} else if (n < 0) {
		ck__failf("the working directory cannot be named (errno %ld): not restored", -n);
		return (int)n;
	}
	n = ck_sys4(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", ck__pd.exe, sizeof(ck__pd.exe) - 1);
	ck__pd.exe[n > 0 ? n : 0] = 0;
	return 0;
}
