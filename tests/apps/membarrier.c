/* membarrier: the process's membarrier(2) registrations.
 *
 * State exercised: the program registers for private expedited barriers
 * (plain and RSEQ where the kernel has them) and global expedited ones,
 * then issues each kind at every step: a process that lost a registration
 * gets EPERM (a restore that did not register again prints LOST).
 * Usage: membarrier [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long mb(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	int steps = (int)(100 * scale) > 4 ? (int)(100 * scale) : 4, bad = 0;
	long q = mb(MEMBARRIER_CMD_QUERY);
	int use[3] = {MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_GLOBAL_EXPEDITED,
		      MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ};
	int reg[3] = {MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
		      MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ};
	int n = 0;

	if (q < 0) {
		printf("membarrier: not available (%s)\n", strerror(errno));
		return 0;
	}
	for (int k = 0; k < 3; k++) {
		if (!(q & reg[k]))
			continue;
		if (mb(reg[k]) != 0) {
			printf("membarrier: cannot register %d: %s\n", reg[k], strerror(errno));
			return 1;
		}
		use[n++] = use[k];
	}
	printf("membarrier: %s registrations held, %d steps\n", n >= 2 ? "two or more" : "fewer than two", steps);
	fflush(stdout);
	for (int i = 0; i < steps && bad < 3; i++) {
		for (int k = 0; k < n; k++)
			if (mb(use[k]) != 0) {
				printf("step %d: membarrier %d: %s: registration LOST\n", i, use[k], strerror(errno));
				bad++;
			}
		usleep(30000);
	}
	printf("membarrier: %s\n", bad ? "registrations LOST" : "every barrier went through");
	return bad ? 1 : 0;
}
