/* The write-protect snapshot, job side: instead of forking, the parked
 * process write-protects its private anonymous memory with a userfaultfd
 * and hands the descriptor to ckrun. ckrun then reads the live process
 * while it runs: a write to a page it has not read yet stops the writing
 * thread until ckrun has copied that page's 2 MiB block aside and lifted
 * the protection. One fault per block written, instead of a copy-on-write
 * fault per page for as long as a forked snapshot lives.
 *
 * Anything this file cannot arm (no userfaultfd, a device mapping, pinned
 * pages, too many ranges) returns an error and the round forks as before.
 * Only system calls and fixed buffers: the threads are parked. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

struct ck_wp_range ck__wp_ranges[CK_WP_MAX_RANGES];
uint32_t ck__wp_nranges;

static uint64_t ck__hex(const char **p, const char *end)
{
	uint64_t v = 0;

	for (; *p < end; (*p)++) {
		char c = **p;
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			break;
	}
	return v;
}

/* Private anonymous memory the job can write, or could after mprotect:
 * no path, or the kernel's names for anonymous memory. Guard pages and
 * reservations (---p) are left out: the image holds no data for them, so
 * ckrun would never read their blocks. */
static int ck__wp_eligible(const char *perms, const char *path, const char *eol)
{
	size_t n = (size_t)(eol - path);

	if (perms[3] != 'p' || (perms[0] == '-' && perms[1] == '-' && perms[2] == '-'))
		return 0;
	if (n == 0)
		return 1;
	if (n == 6 && !ck_strncmp(path, "[heap]", 6))
		return 1;
	if (n == 7 && !ck_strncmp(path, "[stack]", 7))
		return 1;
	return n > 6 && !ck_strncmp(path, "[anon:", 6);
}

/* A mapping a write-protect snapshot would not see change: device memory
 * (a GPU, an RDMA NIC) is written by DMA, not through page tables. Shared
 * memory is no device: files of /dev/shm, /dev/zero mapped, and shared
 * anonymous memory, which the kernel names "/dev/zero (deleted)" (it is
 * read while the threads are parked, as every unprotected mapping is). */
static int ck__wp_refused(const char *path, const char *eol)
{
	size_t n = (size_t)(eol - path);

	if (n > 5 && !ck_strncmp(path, "/dev/", 5))
		return ck_strncmp(path, "/dev/shm/", 9) && !(n == 9 && !ck_strncmp(path, "/dev/zero", 9)) &&
		       !(n == 19 && !ck_strncmp(path, "/dev/zero (deleted)", 19));
	return 0;
}

/* Pages pinned for DMA (io_uring buffers, RDMA, GPU host memory) change
 * without a write fault: such a process forks its snapshot. */
static int ck__wp_pinned(void)
{
	static char buf[8192];
	const char *p;

	if (ck__read_file("/proc/self/status", buf, sizeof(buf)) < 0)
		return 1;
	for (p = buf; *p; p++) {
		if (!ck_strncmp(p, "VmPin:", 6)) {
			for (p += 6; *p == ' ' || *p == '\t'; p++)
				;
			return *p != '0';
		}
	}
	return 0;
}

/* The mapping holding our own stack stays out: this thread writes it
 * before ckrun serves the descriptor (ckrun reads it while we are parked;
 * the manager's stack is small). */
int ck__wp_scan(uint64_t sp)
{
	/* (60000 mappings list in about 4.5 MiB; untouched beyond what is read) */
	static char maps[8 << 20];
	long got = ck__read_file("/proc/self/maps", maps, sizeof(maps));
	const char *p = maps;

	if (got < 0)
		return (int)got;
	if ((size_t)got >= sizeof(maps) - 1)
		return -E2BIG;
	ck__wp_nranges = 0;
	while (*p) {
		const char *eol = p, *perms, *path;
		uint64_t start, end;

		while (*eol && *eol != '\n')
			eol++;
		start = ck__hex(&p, eol);
		p++;
		end = ck__hex(&p, eol);
		perms = p + 1;
		if (perms + 4 > eol)
			return -EBADMSG;
		path = perms;
		for (int f = 0; f < 4 && path < eol; f++) { /* perms offset dev inode, then the path */
			while (path < eol && *path != ' ')
				path++;
			while (path < eol && *path == ' ')
				path++;
		}
		if (ck__wp_refused(path, eol))
			return -ENOTSUP;
		if (ck__wp_eligible(perms, path, eol) && !(start <= sp && sp < end)) {
			struct ck_wp_range *last = ck__wp_nranges ? &ck__wp_ranges[ck__wp_nranges - 1] : 0;
			if (last && last->end == start) {
				last->end = end;
			} else {
				if (ck__wp_nranges == CK_WP_MAX_RANGES)
					return -E2BIG;
				ck__wp_ranges[ck__wp_nranges].start = start;
				ck__wp_ranges[ck__wp_nranges++].end = end;
			}
		}
		p = *eol ? eol + 1 : eol;
	}
	return 0;
}

int ck__wp_refusal(void)
{
	/* Plugins that leave mappings out (device memory) and pinned pages:
	 * DMA writes are invisible to write protection. (An AIO ring is left
	 * out too, but only the kernel writes it, and it is not saved; what
	 * AIO reads into the job's memory takes its pages by write faults.) */
	return ck__pd.nskips > ck__aio_rings || ck__wp_pinned() ? -ENOTSUP : 0;
}

long ck__wp_new(int devfd)
{
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_EVENT_REMAP |
					     UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP};
	long uffd, r;

	/* ckrun's /dev/userfaultfd needs no privilege of ours (the job runs
	 * in a user namespace, where userfaultfd(2) wants CAP_SYS_PTRACE of
	 * the first one, or vm.unprivileged_userfaultfd). Not
	 * UFFD_USER_MODE_ONLY: with it, the kernel's own writes to protected
	 * pages (read(2) into a buffer) would fail with EFAULT, not wait. */
	if (devfd >= 0)
		uffd = ck_sys3(SYS_ioctl, devfd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	else
		uffd = ck_sys1(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		return uffd;
	if ((r = ck_sys3(SYS_ioctl, uffd, UFFDIO_API, &api)) < 0) {
		ck_close((int)uffd);
		return r;
	}
	return uffd;
}

int ck__wp_register(int uffd, uint64_t start, uint64_t end)
{
	struct uffdio_register reg = {.range = {start, end - start}, .mode = UFFDIO_REGISTER_MODE_WP};

	return (int)ck_sys3(SYS_ioctl, uffd, UFFDIO_REGISTER, &reg);
}

int ck__wp_protect(int uffd, uint64_t start, uint64_t end)
{
	struct uffdio_writeprotect wp = {.range = {start, end - start}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};

	return (int)ck_sys3(SYS_ioctl, uffd, UFFDIO_WRITEPROTECT, &wp);
}

int ck__wp_arm(int devfd)
{
	long uffd;
	int r;

	if ((r = ck__wp_refusal()) < 0)
		return r;
	if ((r = ck__wp_scan((uint64_t)(uintptr_t)__builtin_frame_address(0))) < 0)
		return r;
	if ((uffd = ck__wp_new(devfd)) < 0)
		return (int)uffd;
	r = 0;
	for (uint32_t i = 0; r == 0 && i < ck__wp_nranges; i++) {
		r = ck__wp_register((int)uffd, ck__wp_ranges[i].start, ck__wp_ranges[i].end);
		if (r == 0)
			r = ck__wp_protect((int)uffd, ck__wp_ranges[i].start, ck__wp_ranges[i].end);
	}
	if (r < 0) {
		ck_close((int)uffd); /* the last reference: every range unregistered */
		return r;
	}
	return (int)uffd;
}

/* A process that ended while ckrun reads it live would leave the round
 * without its memory (a fork's snapshot outlives its parent): exit() and
 * _exit() wait for the round's verdict. Only while a round reads this
 * process; a kill or a direct exit_group still fails the round, and the
 * previous checkpoint stays the newest. */
static void ck__wp_wait_idle(void)
{
	int busy, me = (int)ck_getpid();

	/* Pids, not flags: a child forked meanwhile has a copy of both, and
	 * vfork children share them; neither waits nor marks us. With the
	 * manager's order (busy, then exiting; ours is the reverse, each
	 * behind a full fence) one of us sees the other: either this exit
	 * waits, or the round forks a snapshot that outlives us. */
	ck__core.exiting = me;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	while ((busy = ck__core.wp_busy) != 0 && busy == me)
		ck_futex(&ck__core.wp_busy, FUTEX_WAIT, busy, NULL);
}

int ck__wp_begin(void)
{
	int me = (int)ck_getpid();

	ck__core.wp_busy = me;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (ck__core.exiting == me) { /* ending: a fork's snapshot outlives it */
		ck__wp_idle();
		return -ESRCH;
	}
	return 0;
}

void ck__wp_idle(void)
{
	ck__core.wp_busy = 0;
	ck_futex(&ck__core.wp_busy, FUTEX_WAKE, INT_MAX, NULL);
}

__attribute__((destructor)) static void ck__wp_fini(void)
{
	ck__wp_wait_idle();
}

void _exit(int status)
{
	ck__wp_wait_idle();
	ck_exit_group(status);
}

void _Exit(int status)
{
	ck__wp_wait_idle();
	ck_exit_group(status);
}
