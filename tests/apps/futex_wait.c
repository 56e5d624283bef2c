/* futex_wait: threads parked in the kernel on futexes.
 *
 * State exercised: threads blocked, at nearly every moment, in
 * pthread_cond_wait, pthread_cond_timedwait (far deadline, CLOCK_MONOTONIC
 * condition), sem_wait, pthread_barrier_wait and a raw FUTEX_WAIT system
 * call, with the main thread waking them one kind at a time every 25 ms.
 * After a restore every waiter must still be woken exactly when released and
 * never spuriously counted. Spurious wake-ups are allowed by POSIX and are
 * handled by the usual predicate loops; only round counts are printed.
 * Usage: futex_wait [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long rounds;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv, cv_timed;
static long gen_cv, gen_timed; /* round the main thread released */
static sem_t sem;
static pthread_barrier_t bar;
static atomic_int futex_word;
static long done[5];
static int timeouts;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static void *w_cond(void *arg)
{
	(void)arg;
	for (long r = 1; r <= rounds; r++) {
		pthread_mutex_lock(&mu);
		while (gen_cv < r)
			pthread_cond_wait(&cv, &mu);
		done[0]++;
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static void *w_timed(void *arg)
{
	(void)arg;
	for (long r = 1; r <= rounds; r++) {
		struct timespec dl;

		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += 3600; /* never reached */
		pthread_mutex_lock(&mu);
		while (gen_timed < r)
			if (pthread_cond_timedwait(&cv_timed, &mu, &dl) == ETIMEDOUT)
				timeouts++;
		done[1]++;
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static void *w_sem(void *arg)
{
	(void)arg;
	for (long r = 1; r <= rounds; r++) {
		while (sem_wait(&sem) != 0 && errno == EINTR)
			;
		__atomic_add_fetch(&done[2], 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void *w_barrier(void *arg)
{
	(void)arg;
	for (long r = 1; r <= rounds; r++) {
		pthread_barrier_wait(&bar);
		__atomic_add_fetch(&done[3], 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void *w_futex(void *arg)
{
	(void)arg;
	for (long r = 1; r <= rounds; r++) {
		int v;

		while ((v = atomic_load(&futex_word)) < r)
			syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
		__atomic_add_fetch(&done[4], 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static long get(long *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

int main(int argc, char **argv)
{
	static void *(*fn[5])(void *) = { w_cond, w_timed, w_sem, w_barrier, w_futex };
	static const char *names[5] = { "cond_wait", "cond_timedwait", "sem_wait", "barrier", "futex" };
	pthread_condattr_t ca;
	pthread_t t[5];
	int rc = 0;

	rounds = (long)(24 * app_scale(argc, argv));
	if (rounds < 1)
		rounds = 1;
	printf("futex_wait: 5 waiters, %ld rounds\n", rounds);
	pthread_cond_init(&cv, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cv_timed, &ca);
	sem_init(&sem, 0, 0);
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 5; i++)
		pthread_create(&t[i], NULL, fn[i], NULL);

	for (long r = 1; r <= rounds; r++) {
		sleep_ms(25);
		pthread_mutex_lock(&mu);
		gen_cv = r;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		sleep_ms(25);
		pthread_mutex_lock(&mu);
		gen_timed = r;
		pthread_cond_broadcast(&cv_timed);
		pthread_mutex_unlock(&mu);
		sleep_ms(25);
		sem_post(&sem);
		sleep_ms(25);
		pthread_barrier_wait(&bar);
		sleep_ms(25);
		atomic_store(&futex_word, (int)r);
		syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		/* Each waiter is at most one round behind the releases. */
		sleep_ms(5);
		for (int i = 0; i < 5; i++)
			if (get(&done[i]) > r) {
				printf("FAIL %s ran ahead: %ld > %ld\n", names[i], get(&done[i]), r);
				rc = 1;
			}
		if (r % 4 == 0)
			printf("round %ld released\n", r);
	}
	for (int i = 0; i < 5; i++) {
		pthread_join(t[i], NULL);
		printf("%s: woken %ld times\n", names[i], done[i]);
		if (done[i] != rounds)
			rc = 1;
	}
	if (timeouts) {
		printf("FAIL cond_timedwait timed out %d times\n", timeouts);
		rc = 1;
	}
	printf("futex_wait: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
