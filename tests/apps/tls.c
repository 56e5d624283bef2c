/* tls: __thread variables, per-thread counters and thread identity.
 *
 * State exercised: the static TLS block of every thread (.tdata initialised
 * to a non-zero value and .tbss), the fs base register that points at it, the
 * TID that glibc caches in each thread descriptor, and pthread barriers that
 * the threads meet at every round. Each thread checks that its TLS addresses,
 * TID and pthread_self() did not change and that its counters hold exactly
 * what its own arithmetic predicts.
 * Usage: tls [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTHR 4

static __thread uint64_t tls_counter = 0x1234567890abcdefULL; /* .tdata */
static __thread uint64_t tls_hist[64];                         /* .tbss */
static __thread int tls_id = -1;

static pthread_barrier_t barrier;
static long rounds;
static uint64_t results[NTHR + 1];
static int errors[NTHR + 1];

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t step(uint64_t x, uint64_t k)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x + k;
}

/* Runs in every thread, main included: TLS and a plain local shadow copy
 * evolve in lock step; any difference means TLS was not restored. */
static void body(int id)
{
	uint64_t shadow = 0x1234567890abcdefULL;
	uint64_t hist[64] = { 0 };
	uint64_t *addr = &tls_counter;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	pthread_t self = pthread_self();

	if (tls_counter != shadow || tls_id != -1)
		errors[id]++;
	tls_id = id;
	for (long r = 0; r < rounds; r++) {
		for (int i = 0; i < 20000; i++) {
			tls_counter = step(tls_counter, (uint64_t)id + 1);
			shadow = step(shadow, (uint64_t)id + 1);
			tls_hist[tls_counter & 63]++;
			hist[shadow & 63]++;
		}
		pthread_barrier_wait(&barrier);
		if (tls_counter != shadow || tls_id != id || &tls_counter != addr)
			errors[id]++;
	}
	for (int i = 0; i < 64; i++)
		if (tls_hist[i] != hist[i])
			errors[id]++;
	if ((pid_t)syscall(SYS_gettid) != tid || !pthread_equal(self, pthread_self()))
		errors[id]++;
	results[id] = tls_counter;
}

static void *thread_main(void *arg)
{
	body((int)(intptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[NTHR];
	int rc = 0;

	rounds = (long)(12000 * app_scale(argc, argv));
	if (rounds < 1)
		rounds = 1;
	printf("tls: %d threads + main, %ld rounds\n", NTHR, rounds);
	pthread_barrier_init(&barrier, NULL, NTHR + 1);
	for (int i = 0; i < NTHR; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)(i + 1));
	body(0);
	for (int i = 0; i < NTHR; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i <= NTHR; i++) {
		printf("thread %d: counter %016llx %s\n", i, (unsigned long long)results[i],
		       errors[i] ? "FAIL" : "ok");
		if (errors[i])
			rc = 1;
	}
	printf("tls: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
