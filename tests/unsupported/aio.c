/* aio: Linux AIO contexts (io_setup) libckpt cannot save while a
 * checkpoint is asked for: the round must be refused before the cut naming
 * the context, and the job must go on untouched, its context still usable.
 * Usage: aio raw      a context made by a bare system call (libckpt does
 *                     not see it made)
 *        aio unread   a write submitted through syscall(3) and its event
 *                     not read until the end (a request that may be in
 *                     flight) */
#define _GNU_SOURCE
#include <linux/aio_abi.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long raw_io_setup(long nr, aio_context_t *ctx)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_io_setup), "D"(nr), "S"(ctx) : "rcx", "r11", "memory");
	return r;
}

int main(int argc, char **argv)
{
	int unread = argc > 1 && !strcmp(argv[1], "unread");
	aio_context_t ctx = 0;
	struct io_event ev;
	struct timespec zero = {0, 0}, wait = {5, 0};
	struct iocb cb, *cbs[1] = {&cb};
	static char buf[8] = "abcdefg";
	long r, got = 0;
	int fd = memfd_create("aio", 0);

	if (fd < 0 || (unread ? syscall(SYS_io_setup, 8, &ctx) : raw_io_setup(8, &ctx)) != 0)
		return 1;
	if (unread) {
		memset(&cb, 0, sizeof(cb));
		cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		cb.aio_fildes = (unsigned)fd;
		cb.aio_buf = (unsigned long)buf;
		cb.aio_nbytes = sizeof(buf);
		if (syscall(SYS_io_submit, ctx, 1, cbs) != 1)
			return 1;
	}
	for (int i = 0; i < 25; i++)
		usleep(100000);
	if (unread) {
		got = syscall(SYS_io_getevents, ctx, 1, 1, &ev, &wait);
		if (got != 1 || ev.res != (long)sizeof(buf))
			return 1;
	}
	r = syscall(SYS_io_getevents, ctx, 0, 1, &ev, &zero);
	printf("aio: %ld event(s) read at the end, then io_getevents %ld, io_destroy %ld\n", got, r,
	       (long)syscall(SYS_io_destroy, ctx));
	return r == 0 ? 0 : 1;
}
