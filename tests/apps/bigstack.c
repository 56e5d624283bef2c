/* bigstack: deep stacks and large arrays on them.
 *
 * State exercised: a thread created with a 64 MiB stack that holds a 24 MiB
 * local array and then recurses about 100,000 frames deep, each frame with
 * its own data that is checked on the way back up; and the main thread
 * recursing deep into its ordinary grow-down stack (the [stack] mapping grows
 * past its initial size, so its extent, not just its contents, must come
 * back). Work is done at the deepest point, where a checkpoint is most likely.
 * Usage: bigstack [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREAD_STACK (64UL << 20)
#define BIG_ARRAY (24UL << 20)

static long spin_at_bottom;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

/* Each frame holds 48 words derived from its depth and checks them after
 * the deeper calls return. noinline + the use of the result after the call
 * keep the compiler from flattening the recursion. */
static __attribute__((noinline)) uint64_t descend(long depth, long max, uint64_t seed, int *bad)
{
	volatile uint64_t frame[48];
	uint64_t r;

	for (int i = 0; i < 48; i++)
		frame[i] = mix(seed + (uint64_t)depth * 48 + (uint64_t)i);
	if (depth == max) {
		r = seed;
		for (long i = 0; i < spin_at_bottom; i++)
			r = mix(r + (uint64_t)i);
	} else {
		r = descend(depth + 1, max, seed, bad);
	}
	for (int i = 0; i < 48; i++)
		if (frame[i] != mix(seed + (uint64_t)depth * 48 + (uint64_t)i))
			(*bad)++;
	return mix(r ^ frame[depth % 48]);
}

struct job {
	long depth, reps;
	uint64_t result, array_sum;
	int bad;
};

static __attribute__((noinline)) uint64_t use_array(long reps)
{
	volatile unsigned char big[BIG_ARRAY];
	uint64_t sum = 0;

	for (size_t i = 0; i < BIG_ARRAY; i += 64)
		big[i] = (unsigned char)mix(i);
	for (long r = 0; r < reps; r++)
		for (size_t i = 0; i < BIG_ARRAY; i += 4096)
			sum = mix(sum + big[(i + (size_t)r * 64) % BIG_ARRAY]);
	return sum;
}

static void *thread_main(void *arg)
{
	struct job *j = arg;

	j->array_sum = use_array(j->reps);
	for (long r = 0; r < j->reps; r++)
		j->result ^= descend(0, j->depth, (uint64_t)r, &j->bad);
	return NULL;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	struct job t = { .depth = 100000, .reps = (long)(8 * scale) };
	struct job m = { .depth = 10000, .reps = (long)(8 * scale) };
	pthread_attr_t attr;
	pthread_t th;
	int rc = 0;

	if (t.reps < 1)
		t.reps = m.reps = 1;
	spin_at_bottom = 60000000;
	printf("bigstack: thread with a 64 MiB stack, depth %ld; main depth %ld; %ld repetitions\n", t.depth,
	       m.depth, t.reps);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	if (pthread_create(&th, &attr, thread_main, &t) != 0) {
		printf("FAIL pthread_create with a 64 MiB stack\n");
		return 1;
	}
	for (long r = 0; r < m.reps; r++)
		m.result ^= descend(0, m.depth, 1000 + (uint64_t)r, &m.bad);
	pthread_join(th, NULL);
	printf("thread: recursion %016llx, array %016llx, bad frames %d\n", (unsigned long long)t.result,
	       (unsigned long long)t.array_sum, t.bad);
	printf("main: recursion %016llx, bad frames %d\n", (unsigned long long)m.result, m.bad);
	if (t.bad || m.bad)
		rc = 1;
	printf("bigstack: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
