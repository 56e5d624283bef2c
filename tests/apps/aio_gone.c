/* aio_gone: a Linux AIO context a checkpoint saved, then destroyed by a
 * bare system call (libckpt does not see it go), is not made again by a
 * restore of a later checkpoint: the memory the job put where its ring
 * was comes back as the job left it.
 *
 * State exercised: in each period of 12 steps (100 ms each), a context of
 * 32 events is made through syscall(3) and used for 4 steps (one write to
 * a memfd and its event each), then destroyed by a bare system call; the
 * job maps a page of its own at the ring's old address and writes a line
 * there, checked at each of the 8 steps left; the page is unmapped at the
 * period's end. A restore that made the context again from an earlier
 * round's note moved a ring over that page. With --interval, rounds land
 * in both halves. Prints only deterministic lines; exits 1 after a FAIL
 * line.
 * Usage: aio_gone [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.6 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PERIOD 12
#define ALIVE 4

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *what, int step, long r)
{
	printf("FAIL %s at step %d (%ld, errno %d)\n", what, step, r, errno);
	return 1;
}

static long raw_io_destroy(aio_context_t ctx)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_io_destroy), "D"(ctx) : "rcx", "r11", "memory");
	return r;
}

int main(int argc, char **argv)
{
	int periods = (int)(3 * app_scale(argc, argv) + 0.5), fd = memfd_create("aio_gone", 0), bad = 0;
	struct timespec nap = {0, 100 * 1000000L}, wait = {5, 0};
	static char line[32];

	if (fd < 0)
		return fail("memfd_create", 0, -1);
	for (int p = 0; p < periods && !bad; p++) {
		aio_context_t ctx = 0;
		char *page = NULL;
		char mine[64];
		long r;

		if ((r = syscall(SYS_io_setup, 32, &ctx)) != 0)
			bad = fail("io_setup", p * PERIOD, r);
		for (int s = 0; s < PERIOD && !bad; s++) {
			int step = p * PERIOD + s;
			if (s < ALIVE) {
				struct iocb cb, *cbs[1] = {&cb};
				struct io_event ev;
				snprintf(line, sizeof(line), "step %d", step);
				memset(&cb, 0, sizeof(cb));
				cb.aio_lio_opcode = IOCB_CMD_PWRITE;
				cb.aio_fildes = (unsigned)fd;
				cb.aio_buf = (unsigned long)line;
				cb.aio_nbytes = sizeof(line);
				if ((r = syscall(SYS_io_submit, ctx, 1, cbs)) != 1)
					bad = fail("io_submit", step, r);
				else if ((r = syscall(SYS_io_getevents, ctx, 1, 1, &ev, &wait)) != 1 ||
					 ev.res != (long)sizeof(line))
					bad = fail("the write's event", step, r);
			} else if (s == ALIVE) {
				if ((r = raw_io_destroy(ctx)) != 0)
					bad = fail("io_destroy (bare)", step, r);
				page = mmap((void *)(uintptr_t)ctx, 4096, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
				if (page == MAP_FAILED || page != (char *)(uintptr_t)ctx)
					bad = fail("a page where the ring was", step, (long)page);
				else
					snprintf(page, 4096, "the job's page of period %d", p);
			}
			if (!bad && s >= ALIVE) {
				snprintf(mine, sizeof(mine), "the job's page of period %d", p);
				if (strcmp(page, mine))
					bad = fail("the job's page where the ring was", step, 0);
			}
			nanosleep(&nap, NULL);
		}
		if (page && page != MAP_FAILED)
			munmap(page, 4096);
	}
	printf("%s\n", bad ? "FAIL aio_gone" : "aio_gone: the job's page where a destroyed context's ring was, as bare");
	return bad;
}
