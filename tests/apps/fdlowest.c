/* fdlowest: a program that relies on POSIX's rule that open, pipe, socket
 * and dup return the lowest free descriptor number, all the time, while
 * it writes its memory.
 *
 * State exercised: the descriptor table as numbered between the job's own
 * calls. The program opens and closes in a tight loop and checks every
 * number it gets against the lowest one it knows to be free; meanwhile it
 * dirties a 64 MiB heap, so that a write-protect snapshot (pre-armed while
 * the job runs) has work to do. Anything that takes a number in the job's
 * table while the job runs (a descriptor received, a userfaultfd made, a
 * /proc file opened) shows as a number one too high, and a restore that
 * numbers the table otherwise shows at the first open after it.
 * Exits 1 (after printing FAIL lines) at a number a bare run does not get.
 * Usage: fdlowest [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAP (64UL << 20)
#define STEPS 12

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The lowest number not open, found without taking one. */
static int lowest_free(void)
{
	for (int fd = 0;; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			return fd;
}

static int bad;

static void expect(const char *what, int got, int want, int step)
{
	if (got == want || bad > 5)
		return;
	printf("FAIL step %d: %s gave descriptor %d, a bare run gets %d\n", step, what, got, want);
	bad++;
}

int main(int argc, char **argv)
{
	double per_step = 3.0 * app_scale(argc, argv) / STEPS;
	unsigned char *heap = malloc(HEAP);
	uint64_t x = 88172645463325252ull;
	int low;

	if (!heap) {
		printf("FAIL cannot allocate the heap\n");
		return 1;
	}
	memset(heap, 1, HEAP);
	setvbuf(stdout, NULL, _IOLBF, 0);
	low = lowest_free();
	printf("lowest free descriptor at start: %d\n", low);
	for (int step = 0; step < STEPS; step++) {
		double end = now() + per_step;
		unsigned long sum = 0;

		while (now() < end) {
			int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), p[2] = {-1, -1}, sv[2] = {-1, -1};

			expect("open", fd, low, step);
			if (fd >= 0)
				close(fd);
			if (pipe2(p, O_CLOEXEC) == 0) {
				expect("pipe (read end)", p[0], low, step);
				expect("pipe (write end)", p[1], p[0] + 1, step);
				fd = dup(p[1]);
				expect("dup", fd, p[1] + 1, step);
				close(fd);
				close(p[1]);
				close(p[0]);
			}
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
				expect("socketpair", sv[0], low, step);
				close(sv[0]);
				close(sv[1]);
			}
			fd = eventfd(0, EFD_CLOEXEC);
			expect("eventfd", fd, low, step);
			if (fd >= 0)
				close(fd);
			/* a page here and there written: a pre-armed snapshot lifts them */
			for (int i = 0; i < 4; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				heap[x % HEAP]++;
			}
			sum++;
		}
		(void)sum;
		expect("the table after the step (lowest free)", lowest_free(), low, step);
		printf("step %d: every number the lowest free one (%d)\n", step, low);
	}
	for (size_t i = 0; i < HEAP; i += 4096)
		x += heap[i];
	printf("heap checksum %s\n", x ? "taken" : "zero");
	printf("%s\n", bad ? "FAIL numbers" : "numbers as bare");
	return bad ? 1 : 0;
}
