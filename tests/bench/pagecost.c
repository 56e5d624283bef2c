/* pagecost: what memory costs on this machine, per 4 KiB page, for the
 * ways a checkpoint can keep a consistent image while the job runs, and for
 * a restore that fills fresh memory. Each figure is the wall time of
 * writing one byte into every page of a SIZE MiB buffer, divided by the
 * number of pages:
 *
 *   first touch     fresh anonymous memory, small pages (a restore's fill)
 *   first touch THP the same through transparent huge pages
 *   after fork      the buffer shared copy-on-write with a live child (what
 *                   the job pays while a forked snapshot lives)
 *   after fork+exit the child gone, the PTEs still read-only (what the job
 *                   pays after the snapshot, on its first write to a page)
 *   uffd-wp 2 MiB   write-protected with userfaultfd; a handler thread
 *                   lifts the protection 2 MiB at a time on each fault
 *   uffd-wp lifted  protection lifted (2 MiB at a time) before the writes:
 *                   the cost of lifting it, per page
 *
 *   pagecost [SIZE_MIB]   (default 256)
 *   pagecost SIZE_MIB thp first touch through huge pages only (what a
 *                         restore's SIZE_MIB of fresh memory costs now)
 *
 * Prints "NAME us_per_page" lines; "- reason" when a way is unavailable. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HUGE (2ul << 20)

static size_t len, pages;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void touch(volatile char *m)
{
	for (size_t i = 0; i < len; i += 4096)
		m[i]++;
}

static void report(const char *name, double secs)
{
	printf("%s %.2f\n", name, secs * 1e6 / (double)pages);
}

/* A 2 MiB-aligned anonymous buffer, optionally huge-page backed. */
static char *buffer(int huge)
{
	char *m = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	m = (char *)(((unsigned long)m + HUGE - 1) & ~(HUGE - 1));
	if (huge && madvise(m, len, MADV_HUGEPAGE))
		return NULL;
	return m;
}

static void first_touch(int huge)
{
	char *m = buffer(huge);
	double t;

	if (!m) {
		printf("%s - %s\n", huge ? "first_touch_thp" : "first_touch", strerror(errno));
		return;
	}
	t = now();
	touch(m);
	report(huge ? "first_touch_thp" : "first_touch", now() - t);
	munmap(m, len);
}

static void after_fork(void)
{
	char *m = buffer(0);
	int p[2];
	pid_t c;
	double t;
	char b;

	if (!m || pipe(p))
		return;
	memset(m, 1, len);
	c = fork();
	if (c == 0) {
		(void)!read(p[0], &b, 1);
		_exit(0);
	}
	t = now();
	touch(m);
	report("after_fork", now() - t);
	(void)!write(p[1], "x", 1);
	waitpid(c, NULL, 0);
	c = fork();
	if (c == 0)
		_exit(0);
	waitpid(c, NULL, 0);
	t = now();
	touch(m);
	report("after_fork_exit", now() - t);
	close(p[0]);
	close(p[1]);
	munmap(m, len);
}

static int uffd = -1;
static char *wp_buf;

static int protect(char *at, size_t n, int on)
{
	struct uffdio_writeprotect w = {.range = {(unsigned long)at, n}, .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0};

	return ioctl(uffd, UFFDIO_WRITEPROTECT, &w);
}

static void *handler(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pf = {uffd, POLLIN, 0};
		struct uffd_msg msg;

		if (poll(&pf, 1, -1) < 0 || (pf.revents & (POLLERR | POLLHUP)))
			break;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		protect((char *)(msg.arg.pagefault.address & ~(HUGE - 1)), HUGE, 0);
	}
	return NULL;
}

static void uffd_wp(void)
{
	struct uffdio_api api = {.api = UFFD_API, .features = 0};
	struct uffdio_register reg;
	pthread_t th;
	double t;

	wp_buf = buffer(0);
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (!wp_buf || uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) {
		printf("uffd_wp_2m - userfaultfd: %s\n", strerror(errno));
		return;
	}
	memset(wp_buf, 1, len);
	reg.range.start = (unsigned long)wp_buf;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) || protect(wp_buf, len, 1)) {
		printf("uffd_wp_2m - write-protect: %s\n", strerror(errno));
		return;
	}
	if (pthread_create(&th, NULL, handler, NULL))
		return;
	t = now();
	touch(wp_buf);
	report("uffd_wp_2m", now() - t);
	protect(wp_buf, len, 1);
	t = now();
	for (size_t o = 0; o < len; o += HUGE)
		protect(wp_buf + o, HUGE, 0);
	touch(wp_buf);
	report("uffd_wp_lifted", now() - t);
}

int main(int argc, char **argv)
{
	len = (argc > 1 ? strtoul(argv[1], NULL, 10) : 256) << 20;
	if (len < HUGE)
		len = HUGE;
	pages = len / 4096;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 && !strcmp(argv[2], "thp")) {
		first_touch(1);
		return 0;
	}
	first_touch(0);
	first_touch(1);
	after_fork();
	uffd_wp();
	return 0;
}
