/* aio: a Linux AIO context (io_setup) while a checkpoint is asked for: the
 * round must be refused before the cut naming it, and the job must go on
 * untouched, its context still usable. (Restored as the plain memory of
 * its ring it was no context at all: io_getevents failed with EINVAL.) */
#include <linux/aio_abi.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
	aio_context_t ctx = 0;
	struct io_event ev;
	struct timespec zero = {0, 0};
	long r;

	if (syscall(SYS_io_setup, 8, &ctx) != 0)
		return 1;
	for (int i = 0; i < 25; i++)
		usleep(100000);
	r = syscall(SYS_io_getevents, ctx, 0, 1, &ev, &zero);
	printf("aio: io_getevents %ld, io_destroy %ld\n", r, (long)syscall(SYS_io_destroy, ctx));
	return r == 0 ? 0 : 1;
}
