/* chatter: a job that writes steadily to both stdout and stderr, for the
 * stdio checks across many resumes (tests/suite/24-stdio.sh, case chain).
 *
 *   chatter STEPS
 *
 * Step i writes "out i ..." (72 bytes) to stdout and "err i" to stderr,
 * unbuffered, then sleeps 2 ms; the last lines are "out end" and "err
 * end". 1000 steps write 72 kB to stdout: more than a pipe holds, so a job
 * whose stdout became a pipe nobody reads would block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void put(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			exit(3);
		s += w;
		n -= (size_t)w;
	}
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 1000;
	struct timespec ms = {0, 2000000};
	char line[128];

	for (long i = 0; i < steps; i++) {
		snprintf(line, sizeof(line), "out %06ld %060ld\n", i, i * 7919 % 1000003);
		put(1, line);
		snprintf(line, sizeof(line), "err %06ld\n", i);
		put(2, line);
		nanosleep(&ms, NULL);
	}
	put(1, "out end\n");
	put(2, "err end\n");
	return 0;
}
