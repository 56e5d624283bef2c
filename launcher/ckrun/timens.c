/* The job's clocks across a restore: CLOCK_MONOTONIC and CLOCK_BOOTTIME
 * continue from the values the job last read before the cut, as if no time
 * had passed while it was down (CRIU does the same), instead of jumping by
 * the downtime, or to another host's unrelated values after a move.
 *
 * Round: the job's clocks at the cut (ckrun's own plus the difference of
 * the job's time namespace offsets and ckrun's), kept in the manifest
 * (section CLCK). Restore: init makes a time namespace for its children,
 * with offsets that start them at the saved values, before the first
 * restorer is made. Both count from the restore's start (ck_timens_mark):
 * the job's clocks read the cut's values then, and the timerfds ckrun
 * makes have the time they had left less the time since then, whenever in
 * the restore each is made, so they agree with the clocks and with each
 * other. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher/ckrun/agent_plugin.h"
#include "launcher/ckrun/ckrun.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* The offsets of a time namespace (relative to the host's clocks): the
 * one pid's children will live in, which is its own unless it unshared
 * CLONE_NEWTIME itself (the job's processes do not; ckrun's init does,
 * and reads its children's with "self" after). A kernel without time
 * namespaces has no file: no offsets. */
static int ck__offsets(const char *pid, int64_t off[2])
{
	char path[64], line[128];
	FILE *f;
	int r = 0;

	off[0] = off[1] = 0;
	snprintf(path, sizeof(path), "/proc/%s/timens_offsets", pid);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		char name[32];
		long long s, ns;
		if (sscanf(line, "%31s %lld %lld", name, &s, &ns) != 3)
			continue;
		if (!strcmp(name, "monotonic"))
			off[0] = s * 1000000000LL + ns;
		else if (!strcmp(name, "boottime"))
			off[1] = s * 1000000000LL + ns;
	}
	if (ferror(f))
		r = -EIO;
	fclose(f);
	return r;
}

static uint64_t ck__clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ckrun's CLOCK_MONOTONIC and CLOCK_BOOTTIME when the restore began (0: no
 * restore), and the host's then (ours less our namespace's offsets) */
static uint64_t ck__ref[2];
static int64_t ck__host_ref[2];
static uint64_t ck__cut_mono; /* the job's CLOCK_MONOTONIC at the cut restored (0: unknown) */

void ck_timens_mark(uint64_t cut_mono)
{
	int64_t mine[2];

	ck__cut_mono = cut_mono;
	ck__ref[0] = ck__clock_ns(CLOCK_MONOTONIC);
	ck__ref[1] = ck__clock_ns(CLOCK_BOOTTIME);
	if (ck__offsets("self", mine) < 0)
		mine[0] = mine[1] = 0;
	ck__host_ref[0] = (int64_t)ck__ref[0] - mine[0];
	ck__host_ref[1] = (int64_t)ck__ref[1] - mine[1];
}

uint64_t ck_timens_since_mark(void)
{
	return ck__ref[0] ? ck__clock_ns(CLOCK_MONOTONIC) - ck__ref[0] : 0;
}

uint64_t ck_timens_cut_mono(void)
{
	return ck__cut_mono;
}

/* the job's CLOCK_MONOTONIC less ckrun's, as the last cut found it */
static int64_t ck__job_delta;

/* The job's clocks less ckrun's: their time namespace offsets' difference. */
static int ck__delta(pid_t job, int64_t d[2])
{
	int64_t mine[2], theirs[2];
	char pid[16];
	int r;

	snprintf(pid, sizeof(pid), "%d", (int)job);
	if ((r = ck__offsets("self", mine)) < 0 || (r = ck__offsets(pid, theirs)) < 0)
		return r;
	d[0] = theirs[0] - mine[0];
	d[1] = theirs[1] - mine[1];
	return 0;
}

int ck_timens_job_clocks(pid_t job, uint64_t *mono, uint64_t *boot)
{
	int64_t d[2];
	int r;

	if ((r = ck__delta(job, d)) < 0)
		return r;
	ck__job_delta = d[0];
	*mono = ck__clock_ns(CLOCK_MONOTONIC) + (uint64_t)d[0];
	*boot = ck__clock_ns(CLOCK_BOOTTIME) + (uint64_t)d[1];
	return 0;
}

uint64_t ck_timens_job_now(void)
{
	return ck__clock_ns(CLOCK_MONOTONIC) + (uint64_t)ck__job_delta;
}

uint64_t ck_agent_job_now(void)
{
	return ck_timens_job_now();
}

int ck_timens_job_mark(pid_t job, uint64_t *mono)
{
	int64_t d[2];
	int r;

	*mono = 0;
	if (!ck__ref[0])
		return 0;
	if ((r = ck__delta(job, d)) < 0)
		return r;
	*mono = ck__ref[0] + (uint64_t)d[0];
	return 0;
}

/* Decimal, into p (no stdio: init runs after a raw clone of the
 * multithreaded ckrun, where malloc's lock may be held). */
static char *ck__dec(char *p, long long v)
{
	char t[24];
	int n = 0;
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

	if (v < 0)
		*p++ = '-';
	do
		t[n++] = (char)('0' + u % 10);
	while ((u /= 10));
	while (n)
		*p++ = t[--n];
	return p;
}

/* In init, before its first child: a time namespace for the children in
 * whose clocks mono and boot were the time when the restore began (marked
 * by ckrun before it made init: only system calls here). */
int ck_timens_enter(uint64_t mono, uint64_t boot)
{
	char buf[128], *p = buf;
	int fd, r = 0;

	if (!ck__ref[0])
		return -EINVAL;
	if (unshare(CLONE_NEWTIME) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) { /* seconds may be negative, nanoseconds not */
		int64_t off = (int64_t)(i ? boot : mono) - ck__host_ref[i];
		long long s = off / 1000000000LL, ns = off % 1000000000LL;
		if (ns < 0) {
			s--;
			ns += 1000000000LL;
		}
		p = ck__dec(p, i ? CLOCK_BOOTTIME : CLOCK_MONOTONIC);
		*p++ = ' ';
		p = ck__dec(p, s);
		*p++ = ' ';
		p = ck__dec(p, ns);
		*p++ = '\n';
	}
	if ((fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, buf, (size_t)(p - buf)) != p - buf)
		r = -errno;
	close(fd);
	return r;
}
