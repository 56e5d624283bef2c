/* A job whose threads sit in known call chains, for `ckpt inspect
 * --backtrace` and `ckpt export-core` (tests/suite/28-inspect.sh):
 *   main -> outer_x -> outer_y -> outer_z, blocked in poll()
 *   "deepthr": deep_a -> deep_b -> deep_c, blocked in read() of a pipe
 *   "spinthr": spin_outer -> spin_inner, computing (no system call),
 *              0x5eedfeedc0ffee77 in the low half of xmm7
 * Built with -O1 -fomit-frame-pointer: no frame-pointer chain, so only
 * .eh_frame tells an unwinder where each caller is. The chains' functions
 * are exported (-rdynamic): they are in .dynsym too, which the image holds
 * when the program's file is replaced after the checkpoint. Each function does
 * work after its call, so none is a tail call. Prints "ready" once every
 * thread is in place, then waits (at most 120 s) to be checkpointed and
 * killed; exits 0. */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

long deep_a(int depth);
long deep_b(int depth);
long deep_c(int depth);
unsigned long spin_inner(unsigned long x);
unsigned long spin_outer(unsigned long x);
int outer_x(int k);
int outer_y(int k);
int outer_z(int k);

static int pipefd[2];
static volatile int deep_in, spin_in;
static volatile unsigned long spin_sink;

NOINLINE long deep_c(int depth)
{
	char c;
	long n;

	deep_in = 1;
	n = read(pipefd[0], &c, 1); /* nothing comes until the end */
	return n + depth;
}

NOINLINE long deep_b(int depth)
{
	long r = deep_c(depth + 1);
	return r * 3 + depth;
}

NOINLINE long deep_a(int depth)
{
	long r = deep_b(depth + 1);
	return r * 5 + depth;
}

static void *deep_main(void *arg)
{
	(void)arg;
	return (void *)deep_a(0);
}

NOINLINE unsigned long spin_inner(unsigned long x)
{
	/* a value the core's FP registers must show (the loop is integer
	 * only: nothing else touches xmm7) */
	__asm__ volatile("movq %0, %%xmm7" : : "r"(0x5eedfeedc0ffee77ul) : "xmm7");
	spin_in = 1;
	for (;;) { /* a loop the compiler cannot drop: its result is stored */
		x = x * 6364136223846793005ul + 1442695040888963407ul;
		spin_sink = x;
		if (x == 42)
			break;
	}
	return x ^ 7;
}

NOINLINE unsigned long spin_outer(unsigned long x)
{
	unsigned long r = spin_inner(x + 1);
	return r + x;
}

static void *spin_main(void *arg)
{
	(void)arg;
	return (void *)spin_outer(3);
}

NOINLINE int outer_z(int k)
{
	int r = poll(NULL, 0, 120000);
	return r + k;
}

NOINLINE int outer_y(int k)
{
	int r = outer_z(k + 1);
	return r * 7 + k;
}

NOINLINE int outer_x(int k)
{
	int r = outer_y(k + 1);
	return r * 11 + k;
}

int main(void)
{
	pthread_t a, b;

	if (pipe(pipefd) || pthread_create(&a, NULL, deep_main, NULL) || pthread_create(&b, NULL, spin_main, NULL))
		return 1;
	pthread_setname_np(a, "deepthr");
	pthread_setname_np(b, "spinthr");
	while (!deep_in || !spin_in)
		usleep(1000);
	usleep(50000); /* deep_c is in read() by now */
	printf("ready\n");
	fflush(stdout);
	return outer_x(0) < -1000000; /* 0 */
}
