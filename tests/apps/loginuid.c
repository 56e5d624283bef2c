/* loginuid: a process whose audit login uid (/proc/self/loginuid) is part
 * of what it is: it reads it at every step and prints it with its state.
 * A restore must give it back the login uid it had at the checkpoint, not
 * the one of the shell that resumes it (tests/suite/39-loginuid.sh starts
 * and resumes it under two login uids).
 * Usage: loginuid [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long read_loginuid(void)
{
	FILE *f = fopen("/proc/self/loginuid", "r");
	long v = -1;

	if (!f)
		return -1; /* a kernel without audit */
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s ? atof(s) : 1.0;
	int steps = (int)(30 * (scale > 0 ? scale : 1.0));
	uint64_t acc = 88172645463325252ull;

	if (steps < 3)
		steps = 3;
	printf("loginuid: %d steps\n", steps);
	for (int i = 0; i < steps; i++) {
		for (int k = 0; k < 100000; k++) {
			acc ^= acc << 13;
			acc ^= acc >> 7;
			acc ^= acc << 17;
		}
		printf("step %d: loginuid %ld %016llx\n", i, read_loginuid(), (unsigned long long)acc);
		fflush(stdout);
		usleep(100000);
	}
	printf("final %016llx\n", (unsigned long long)acc);
	return 0;
}
