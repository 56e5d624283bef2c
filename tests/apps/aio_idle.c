/* aio_idle: a Linux AIO context (io_setup) with no I/O in flight at the
 * checkpoint comes back usable, at the same address (its id).
 *
 * State exercised: a context of 32 events made through syscall(3); each
 * step submits one write of its line to a memfd (IOCB_CMD_PWRITE at the
 * step's offset), reads its event (the iocb's data, the byte count), reads
 * the line back with pread, and checks that no event is left. The context
 * id is the one io_setup gave. At the end every line is read back and the
 * context destroyed. A restore that did not make the context again left
 * its ring as plain memory: io_submit failed with EINVAL. Prints only
 * deterministic lines; exits 1 after a FAIL line.
 * Usage: aio_idle [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LINE 32

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

int main(int argc, char **argv)
{
	int steps = (int)(30 * app_scale(argc, argv) + 0.5), fd = memfd_create("aio_idle", 0), bad = 0, step;
	aio_context_t ctx = 0, first;
	struct timespec nap = {0, 100 * 1000000L}, wait = {5, 0}, zero = {0, 0};
	char line[LINE], back[LINE];

	if (fd < 0 || syscall(SYS_io_setup, 32, &ctx) != 0)
		return fail("io_setup", 0, -1);
	first = ctx;
	for (step = 0; step < steps && !bad; step++) {
		struct iocb cb, *cbs[1] = {&cb};
		struct io_event ev;
		long r;

		memset(line, 0, sizeof(line));
		snprintf(line, sizeof(line), "step %d", step);
		memset(&cb, 0, sizeof(cb));
		cb.aio_data = 1000u + (unsigned)step;
		cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		cb.aio_fildes = (unsigned)fd;
		cb.aio_buf = (unsigned long)line;
		cb.aio_nbytes = LINE;
		cb.aio_offset = (long long)step * LINE;
		if (ctx != first)
			bad = fail("the context's id", step, (long)ctx);
		else if ((r = syscall(SYS_io_submit, ctx, 1, cbs)) != 1)
			bad = fail("io_submit", step, r);
		else if ((r = syscall(SYS_io_getevents, ctx, 1, 1, &ev, &wait)) != 1 || ev.data != cb.aio_data ||
			 ev.res != LINE)
			bad = fail("the write's event", step, r);
		else if ((r = syscall(SYS_io_getevents, ctx, 0, 1, &ev, &zero)) != 0)
			bad = fail("no event left", step, r);
		else if (pread(fd, back, LINE, (off_t)step * LINE) != LINE || memcmp(back, line, LINE))
			bad = fail("the line written", step, 0);
		nanosleep(&nap, NULL);
	}
	for (int i = 0; i < step && !bad; i++) {
		snprintf(line, sizeof(line), "step %d", i);
		if (pread(fd, back, LINE, (off_t)i * LINE) != LINE || strcmp(back, line))
			bad = fail("a line at the end", i, 0);
	}
	if (!bad && syscall(SYS_io_destroy, ctx) != 0)
		bad = fail("io_destroy", step, -1);
	printf("%s\n", bad ? "FAIL aio_idle" : "aio_idle: every write through the context, as bare");
	return bad;
}
