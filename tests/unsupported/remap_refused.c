/* remap_refused: a process that maps a page anew in the middle of its own
 * large mapping all along (each MAP_FIXED makes a mapping of its own
 * there), while its child, named "refuser", holds a Linux AIO context
 * made by a bare system call (io_setup). Prints a checksum of its work and the child's exit status;
 * a bare run and any run that ends print the same. Usage:
 * remap_refused [STEPS] */
#define _GNU_SOURCE
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define REGION (64ul << 20)
#define MIDDLE (REGION / 2)

static uint8_t *region;
static volatile int done;

static void *churn(void *arg)
{
	(void)arg;
	while (!done) {
		uint8_t *p = mmap(region + MIDDLE, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				  -1, 0);
		if (p == MAP_FAILED) {
			perror("remap_refused: mmap");
			exit(1);
		}
		p[0] = 1;
		usleep(200);
	}
	return NULL;
}

/* io_setup as a bare system call: a context libckpt does not see made
 * refuses every round */
static long raw_io_setup(long nr, aio_context_t *ctx)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_io_setup), "D"(nr), "S"(ctx) : "rcx", "r11", "memory");
	return r;
}

static int refuser(int rd)
{
	aio_context_t ctx = 0;
	char c;

	prctl(PR_SET_NAME, "refuser");
	if (raw_io_setup(8, &ctx) != 0)
		return 2;
	while (read(rd, &c, 1) > 0)
		;
	return syscall(SYS_io_destroy, ctx) == 0 ? 0 : 3;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 40, pfd[2], st = 0;
	uint64_t sum = 1469598103934665603ull;
	pthread_t th;
	pid_t child;

	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED || pipe(pfd) < 0)
		return 1;
	memset(region, 1, REGION); /* all present: protected by a snapshot */
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(pfd[1]);
		_exit(refuser(pfd[0]));
	}
	close(pfd[0]);
	if (pthread_create(&th, NULL, churn, NULL))
		return 1;
	/* Only the first quarter is written: the blocks around the middle
	 * stay as the snapshot left them. */
	for (int s = 0; s < steps; s++) {
		for (size_t o = 0; o < REGION / 4; o += 4096) {
			region[o] = (uint8_t)(region[o] + s);
			sum = (sum ^ region[o]) * 1099511628211ull;
		}
		usleep(50000);
	}
	done = 1;
	pthread_join(th, NULL);
	close(pfd[1]);
	waitpid(child, &st, 0);
	printf("steps %d checksum %016llx child %d\n", steps, (unsigned long long)sum,
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
