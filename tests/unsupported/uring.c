/* Holds an io_uring instance (raw io_uring_setup) while computing: a
 * checkpoint must be refused naming it, and the job must run on. */
#include <linux/io_uring.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
	struct io_uring_params p;
	unsigned long x = 1;

	memset(&p, 0, sizeof(p));
	if (syscall(SYS_io_uring_setup, 4, &p) < 0) {
		printf("io_uring unavailable\n");
		return 0;
	}
	for (int i = 0; i < 30; i++) {
		struct timespec ts = {0, 50 * 1000 * 1000};
		for (int k = 0; k < 200000; k++)
			x = x * 6364136223846793005ul + 1;
		nanosleep(&ts, NULL);
	}
	printf("done %lx\n", x);
	return 0;
}
