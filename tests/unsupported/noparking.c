/* noparking: a thread that blocks every signal, by a raw rt_sigprocmask
 * (what libckpt's sigprocmask cannot filter), for BLOCK_MS (argv[1],
 * default 6000) after it starts, while the main thread works. A round asked
 * meanwhile cannot park it: it must fail within ckrun's --round-timeout
 * naming the thread, and the job must run on untouched; the late parking
 * signal, delivered when the thread unblocks, must change nothing. Prints
 * "noparking: unblocked" on stderr when it unblocks (the test orders it
 * against ckrun's refusal line) and deterministic lines on stdout. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long block_ms = 6000;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *blocker(void *arg)
{
	uint64_t all = ~0ull, old = 0, end = now_ms() + (uint64_t)block_ms, spins = 0;

	(void)arg;
	prctl(PR_SET_NAME, "blocker");
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
	while (now_ms() < end)
		spins++; /* busy: not in a system call a signal could interrupt */
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	fprintf(stderr, "noparking: unblocked\n");
	return (void *)(uintptr_t)(spins > 0);
}

int main(int argc, char **argv)
{
	pthread_t t;
	void *ok = NULL;
	uint64_t sum = 0;

	if (argc > 1)
		block_ms = atol(argv[1]);
	if (pthread_create(&t, NULL, blocker, NULL) != 0)
		return 1;
	for (int i = 0; i < 100; i++) {
		for (int k = 0; k < 1000; k++)
			sum = sum * 6364136223846793005ull + (uint64_t)(i * 1000 + k);
		usleep((useconds_t)(block_ms * 15)); /* 1.5 x block_ms in all */
	}
	pthread_join(t, &ok);
	printf("noparking: %s, sum %016llx\n", ok ? "the blocker ran" : "the blocker did not run",
	       (unsigned long long)sum);
	return ok ? 0 : 1;
}
