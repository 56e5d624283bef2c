/* recmutex: mutexes held across long sections, with owners recorded.
 *
 * State exercised: a recursive mutex locked five levels deep and held while
 * the owner computes for a long time, an error-checking mutex, and a
 * priority-inheritance mutex, all of which record the owner's kernel TID in
 * the lock word (the PI one is resolved by the kernel itself). Another thread
 * meanwhile finds them busy (trylock = EBUSY), blocks in lock, and must get
 * them once they are released. After a restore the owner must still be able
 * to unlock (unlock by the wrong owner fails with EPERM), and relocking an
 * error-checking mutex must still report EDEADLK.
 * Usage: recmutex [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t rec, chk, pi;
static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t state_cv = PTHREAD_COND_INITIALIZER;
/* Handshake, one generation per round: held = owner holds every lock,
 * tried = contender saw them busy, ack = contender took and dropped them. */
static long held, tried, ack;
static long rounds, spin;
static int errors;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void publish(long *var, long v)
{
	pthread_mutex_lock(&state_mu);
	*var = v;
	pthread_cond_broadcast(&state_cv);
	pthread_mutex_unlock(&state_mu);
}

static void await(long *var, long v)
{
	pthread_mutex_lock(&state_mu);
	while (*var < v)
		pthread_cond_wait(&state_cv, &state_mu);
	pthread_mutex_unlock(&state_mu);
}

static void expect(int got, int want, const char *what)
{
	if (got != want) {
		__atomic_add_fetch(&errors, 1, __ATOMIC_SEQ_CST);
		printf("FAIL %s: %d, expected %d\n", what, got, want);
	}
}

static uint64_t long_section(uint64_t x)
{
	for (long i = 0; i < spin; i++)
		x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ULL + (uint64_t)i;
	return x;
}

static void *contender(void *arg)
{
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		await(&held, r + 1);
		expect(pthread_mutex_trylock(&rec), EBUSY, "trylock recursive");
		expect(pthread_mutex_trylock(&chk), EBUSY, "trylock errorcheck");
		expect(pthread_mutex_trylock(&pi), EBUSY, "trylock pi");
		expect(pthread_mutex_unlock(&chk), EPERM, "unlock errorcheck by non-owner");
		publish(&tried, r + 1);
		/* Block until the owner is done with them. */
		pthread_mutex_lock(&pi);
		pthread_mutex_lock(&rec);
		pthread_mutex_lock(&chk);
		pthread_mutex_unlock(&chk);
		pthread_mutex_unlock(&rec);
		pthread_mutex_unlock(&pi);
		publish(&ack, r + 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_mutexattr_t a;
	pthread_t t;
	uint64_t x = 7;

	rounds = (long)(6 * app_scale(argc, argv));
	if (rounds < 1)
		rounds = 1;
	spin = 120000000;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&rec, &a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&chk, &a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
	if (pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT) != 0)
		printf("note: no priority inheritance\n");
	pthread_mutex_init(&pi, &a);
	printf("recmutex: %ld rounds, each holding the locks over a long section\n", rounds);
	pthread_create(&t, NULL, contender, NULL);

	for (long r = 0; r < rounds; r++) {
		for (int i = 0; i < 5; i++)
			expect(pthread_mutex_lock(&rec), 0, "lock recursive");
		expect(pthread_mutex_lock(&chk), 0, "lock errorcheck");
		expect(pthread_mutex_lock(&pi), 0, "lock pi");
		publish(&held, r + 1);
		x = long_section(x); /* holding all three */
		expect(pthread_mutex_lock(&chk), EDEADLK, "relock errorcheck");
		expect(pthread_mutex_trylock(&rec), 0, "trylock recursive by owner");
		expect(pthread_mutex_unlock(&rec), 0, "unlock recursive level 6");
		x = long_section(x);
		await(&tried, r + 1);
		expect(pthread_mutex_unlock(&pi), 0, "unlock pi");
		expect(pthread_mutex_unlock(&chk), 0, "unlock errorcheck");
		for (int i = 0; i < 5; i++)
			expect(pthread_mutex_unlock(&rec), 0, "unlock recursive");
		expect(pthread_mutex_unlock(&rec), EPERM, "unlock recursive once too often");
		await(&ack, r + 1); /* the contender took and dropped them */
		printf("round %ld: section result %016llx\n", r + 1, (unsigned long long)x);
	}
	pthread_join(t, NULL);
	printf("recmutex: %s\n", errors ? "FAIL" : "ok");
	return errors ? 1 : 0;
}
