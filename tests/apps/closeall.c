/* closeall: a program that closes every descriptor above stderr, as
 * daemons and careful launchers do (close_range), libckpt's own channel
 * with them, then works and keeps state. Checkpoints must still be taken:
 * libckpt attaches again through ckrun's attach socket.
 * Usage: closeall [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s ? atof(s) : 1.0;
	int steps = (int)(30 * (scale > 0 ? scale : 1.0));
	uint64_t acc = 88172645463325252ull;

	if (steps < 3)
		steps = 3;
	syscall(SYS_close_range, 3, ~0u, 0);
	printf("closeall: %d steps after closing every descriptor above 2\n", steps);
	for (int i = 0; i < steps; i++) {
		for (int k = 0; k < 200000; k++) {
			acc ^= acc << 13;
			acc ^= acc >> 7;
			acc ^= acc << 17;
		}
		if (i % 10 == 0)
			printf("step %d: %016llx\n", i, (unsigned long long)acc);
		fflush(stdout);
		usleep(100000);
	}
	printf("final %016llx\n", (unsigned long long)acc);
	return 0;
}
