/* The pre-armed cut of a write-protect snapshot, job side.
 *
 * Write-protecting gigabytes of 4 KiB pages takes 80-150 ms on a VM; done
 * while the threads are parked, all of it is frozen time. So ckrun asks
 * first (PREARM) and the manager protects while the job runs: it hands
 * its userfaultfd to ckrun before the first page is protected, and ckrun
 * lifts the 2 MiB block of any write meanwhile. At the cut, parked, the
 * manager registers what was mapped since, asks ckrun to stop lifting
 * (WP_FREEZE), and protects again only the pages present and not
 * protected (PAGEMAP_SCAN): written, or populated, since. Then every page
 * present at the cut is protected, as if it had all been done then.
 *
 * From WP_FREEZE on nothing but this stack is written (a fault would wait
 * for a handler that no longer answers this process), as in ck__wp_arm. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"
#include "ckrun/pagemap_scan.h"

/* Parking for the pre-arm's own descriptors: a thread slower than this
 * parks at the cut, unprotected (ckrun's wait for the pre-arm is longer). */
#define CK__PREARM_PARK_MS 500

static long ck__pagemap_open(void)
{
	return ck_sys4(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC, 0);
}

/* Whether this kernel has PAGEMAP_SCAN (Linux 6.7): without it the cut
 * could not find what was written since, and the round arms at the cut. */
static int ck__scan_available(uint64_t addr)
{
	static int known; /* 1 + ck__core.restart_count: asked once per kernel */
	struct page_region v;
	struct pm_scan_arg a = {.size = sizeof(a), .start = addr, .end = addr + 4096, .vec = (uint64_t)(uintptr_t)&v,
				.vec_len = 1, .category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN};
	long fd, r;

	if (known == 1 + ck__core.restart_count)
		return 0;
	if ((fd = ck__pagemap_open()) < 0)
		return (int)fd;
	r = ck_sys3(SYS_ioctl, fd, PAGEMAP_SCAN, &a);
	ck_close((int)fd);
	known = r >= 0 ? 1 + ck__core.restart_count : 0;
	return r < 0 ? (r == -ENOTTY || r == -EINVAL ? -ENOTSUP : (int)r) : 0;
}

/* How long the pre-arm held the job's threads parked (µs): ckrun's -v. */
static uint64_t ck__prearm_park_us;

static int ck__prearm_send(uint32_t type, uint64_t seq, int64_t status, int fd)
{
	struct ck_msg m;

	ck_memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = type;
	m.arg[0] = seq;
	m.arg[1] = (uint64_t)status;
	m.arg[2] = ck__prearm_park_us;
	if (type == CK_MSG_PREARM_FD) {
		struct ck_wp_info wi = {(uint64_t)(uintptr_t)ck__wp_ranges, ck__wp_nranges, 0};
		ck_memcpy(m.text, &wi, sizeof(wi));
		m.len = sizeof(wi);
	}
	return (int)ck__send_fd(&m, __builtin_offsetof(struct ck_msg, text) + m.len, fd);
}

/* A pre-armed round's userfaultfd, moved above the channel's number
 * while parked: the job's next open must get the number a bare run gets. */
static long ck__fd_aside(long fd)
{
	long hi = ck_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, __atomic_load_n(&ck__core.ctl_fd, __ATOMIC_SEQ_CST) + 1);
	struct rlimit rl;

	/* a RLIMIT_NOFILE below the channel's number: near the top of it */
	if (hi < 0 && ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, &rl) == 0 && rl.rlim_cur > 67)
		hi = ck_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, (long)(rl.rlim_cur - 64));
	if (hi < 0)
		return fd; /* where it is */
	ck_close((int)fd);
	return hi;
}

/* Everything that gives us a descriptor (the request's, the new
 * userfaultfd, /proc files read) is done while the job's threads are
 * parked, briefly: a job thread's open meanwhile would get the next
 * number, not the lowest free one. Returns the userfaultfd, aside. */
static long ck__prearm_parked(uint64_t sp)
{
	struct ck_msg m;
	long uffd = -1;
	int r, devfd = -1;

	uint64_t t0 = ck__now_us();

	ck__prearm_park_us = 0;
	if ((r = ck__suspend_all(CK__PREARM_PARK_MS, CK__PREARM_PARK_MS)) < 0) {
		ck__recv(&m); /* its descriptor dropped, none taken */
		return r;
	}
	r = ck__recv_fd(&m, &devfd);
	if (r == 0 && m.type != CK_MSG_PREARM)
		r = -EPROTO;
	if (r == 0)
		r = ck__wp_refusal();
	if (r == 0)
		r = ck__wp_scan(sp);
	if (r == 0 && ck__wp_nranges)
		r = ck__scan_available(ck__wp_ranges[0].start);
	if (r == 0 && (uffd = ck__wp_new(devfd)) >= 0) {
		uffd = ck__fd_aside(uffd);
		/* no fork is under way: the fork lock is not needed (a parked
		 * thread may hold it) */
		ck__core.fork_fd[1] = (int)uffd;
	}
	if (devfd >= 0)
		ck_close(devfd);
	ck__release_all();
	ck__prearm_park_us = ck__now_us() - t0;
	return r < 0 ? r : uffd;
}

/* The job runs meanwhile: a range it unmapped or replaced since our scan
 * fails to register and is left unprotected (the cut registers what is
 * there then; ckrun lifts such a range's faults page by page). Any other
 * failure unregisters all: nothing stays protected. */
void ck__wp_prearm(uint64_t seq)
{
	long uffd = ck__prearm_parked((uint64_t)(uintptr_t)__builtin_frame_address(0));
	int r = uffd < 0 ? (int)uffd : 0;

	if (uffd < 0)
		goto out;
	/* ckrun serves the descriptor before any page is protected. */
	if ((r = ck__prearm_send(CK_MSG_PREARM_FD, seq, 0, (int)uffd)) < 0)
		goto out;
	for (uint32_t i = 0; i < ck__wp_nranges && r == 0; i++)
		if (ck__wp_register((int)uffd, ck__wp_ranges[i].start, ck__wp_ranges[i].end) == 0)
			r = ck__wp_protect((int)uffd, ck__wp_ranges[i].start, ck__wp_ranges[i].end);
	if (r < 0) {
		for (uint32_t i = 0; i < ck__wp_nranges; i++) {
			struct uffdio_range all = {ck__wp_ranges[i].start, ck__wp_ranges[i].end - ck__wp_ranges[i].start};
			ck_sys3(SYS_ioctl, uffd, UFFDIO_UNREGISTER, &all);
		}
	}
out:
	if (uffd >= 0 && ck__core.test_prearm_open_ms > 0) {
		struct timespec ts = {ck__core.test_prearm_open_ms / 1000, ck__core.test_prearm_open_ms % 1000 * 1000000L};
		ck_sys2(SYS_nanosleep, (long)&ts, 0); /* test knob: the window a fork inherits it in */
	}
	/* ckrun holds the only reference now: the round's end (or ckrun's
	 * death) lifts every protection. */
	ck__fork_lock();
	ck__core.fork_fd[1] = -1;
	if (uffd >= 0)
		ck_close((int)uffd);
	ck__fork_unlock();
	ck__prearm_send(CK_MSG_PREARMED, seq, r, -1);
}

/* Waits for ckrun's answer to WP_FREEZE. Stack only. */
static int ck__freeze(int *done)
{
	struct ck_msg m;
	int r;

	ck_memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = CK_MSG_WP_FREEZE;
	if ((r = ck__send(&m)) < 0)
		return r;
	for (;;) {
		if ((r = ck__recv(&m)) < 0)
			return r;
		if (m.type == CK_MSG_WP_FROZEN)
			return (int)(int64_t)m.arg[0];
		if (m.type == CK_MSG_DONE) {
			*done = (int)(int64_t)m.arg[0];
			return -ECANCELED;
		}
	}
}

/* A run of pages present and not protected: protected again. */
static int ck__reprotect(void *uffd, uint64_t start, uint64_t end)
{
	return ck__wp_protect(*(int *)uffd, start, end);
}

int ck__wp_rearm(int uffd, int *done)
{
	long pm = -1;
	int r, frozen = 0;

	/* Until WP_FREEZE is answered ckrun still lifts what we write. */
	if ((r = ck__wp_refusal()) < 0 || (r = ck__wp_scan((uint64_t)(uintptr_t)__builtin_frame_address(0))) < 0)
		goto out;
	/* Registering a registered range again is accepted (same descriptor). */
	for (uint32_t i = 0; r == 0 && i < ck__wp_nranges; i++)
		r = ck__wp_register(uffd, ck__wp_ranges[i].start, ck__wp_ranges[i].end);
	if (r < 0)
		goto out;
	if ((pm = ck__pagemap_open()) < 0) {
		r = (int)pm;
		goto out;
	}
	if ((r = ck__freeze(done)) < 0)
		goto out;
	frozen = 1;
	for (uint32_t i = 0; r == 0 && i < ck__wp_nranges; i++)
		r = ck_pm_scan((int)pm, ck__wp_ranges[i].start, ck__wp_ranges[i].end, 1, ck__reprotect, &uffd);
out:
	if (pm >= 0)
		ck_close((int)pm);
	if (r < 0 && frozen) {
		/* The round forks instead: ckrun lifts our writes again. */
		struct ck_msg m;
		ck_memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
		m.type = CK_MSG_WP_THAW;
		ck__send(&m);
	}
	return r < 0 ? r : uffd;
}
