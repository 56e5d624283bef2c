/* mp_shmcount: counters in anonymous shared memory, shared by forked workers.
 *
 * State exercised: a MAP_SHARED|MAP_ANONYMOUS mapping inherited by four forked
 * workers (the same physical pages in five processes, which a restore must
 * share again rather than copy), holding a process-shared pthread mutex, a
 * process-shared condition variable and a process-shared barrier (futexes on
 * shared memory: a checkpoint finds processes blocked on them, and the mutex
 * is sometimes held across a sleep so it is often contended). The work is in
 * steps: the parent releases a step through the condition variable, each
 * worker does its fixed number of increments, everybody meets at the barrier
 * and the parent checks every counter against its own arithmetic.
 * Usage: mp_shmcount [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NW 4
#define NC 16

struct shared {
	pthread_mutex_t m;
	pthread_cond_t cv;
	pthread_barrier_t bar;
	long go; /* steps released by the parent */
	uint64_t counters[NC];
	uint64_t per_worker[NW];
	uint64_t total;
	uint64_t contended; /* how often a lock was found taken (not printed) */
};

static struct shared *sh;

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

static int incs(int w)
{
	return 20 + 5 * w;
}

static int slot(int w, int j, long s)
{
	return (int)((w * 7 + j * 3 + s) % NC);
}

static uint64_t amount(int w, int j)
{
	return (uint64_t)(w + 1) * (uint64_t)(j % 5 + 1);
}

static void worker(int w, long steps)
{
	for (long s = 0; s < steps; s++) {
		pthread_mutex_lock(&sh->m);
		while (sh->go <= s)
			pthread_cond_wait(&sh->cv, &sh->m);
		pthread_mutex_unlock(&sh->m);
		for (int j = 0; j < incs(w); j++) {
			if (pthread_mutex_trylock(&sh->m) != 0) {
				pthread_mutex_lock(&sh->m);
				sh->contended++;
			}
			sh->counters[slot(w, j, s)] += amount(w, j);
			sh->per_worker[w]++;
			sh->total++;
			if (j % 5 == 0)
				sleep_ms(1); /* holding the lock */
			pthread_mutex_unlock(&sh->m);
			sleep_ms(4);
		}
		int r = pthread_barrier_wait(&sh->bar);
		if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD)
			_exit(2);
		pthread_mutex_lock(&sh->m);
		uint64_t mine = sh->per_worker[w];
		pthread_mutex_unlock(&sh->m);
		if (mine != (uint64_t)((s + 1) * incs(w)))
			_exit(3);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	long steps = (long)(20 * app_scale(argc, argv));
	uint64_t want[NC] = { 0 }, want_total = 0;
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	pthread_barrierattr_t ba;
	pid_t pid[NW];
	int rc = 0;

	if (steps < 2)
		steps = 2;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		printf("FAIL mmap\n");
		return 1;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	if (pthread_mutex_init(&sh->m, &ma) || pthread_cond_init(&sh->cv, &ca) ||
	    pthread_barrier_init(&sh->bar, &ba, NW + 1)) {
		printf("FAIL init of the shared mutex, condition or barrier\n");
		return 1;
	}
	printf("mp_shmcount: %d workers, %ld steps, %d counters\n", NW, steps, NC);
	fflush(stdout);
	for (int w = 0; w < NW; w++) {
		pid[w] = fork();
		if (pid[w] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[w] == 0)
			worker(w, steps);
	}

	for (long s = 0; s < steps; s++) {
		pthread_mutex_lock(&sh->m);
		sh->go = s + 1;
		pthread_cond_broadcast(&sh->cv);
		pthread_mutex_unlock(&sh->m);
		for (int w = 0; w < NW; w++)
			for (int j = 0; j < incs(w); j++) {
				want[slot(w, j, s)] += amount(w, j);
				want_total++;
			}
		int r = pthread_barrier_wait(&sh->bar);
		if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD) {
			printf("FAIL barrier: %s\n", strerror(r));
			rc = 1;
			break;
		}
		/* Workers now wait for the next step: the counters are still. */
		pthread_mutex_lock(&sh->m);
		if (sh->total != want_total || memcmp(sh->counters, want, sizeof(want)) != 0) {
			printf("FAIL step %ld: total %llu, expected %llu\n", s + 1, (unsigned long long)sh->total,
			       (unsigned long long)want_total);
			rc = 1;
		}
		pthread_mutex_unlock(&sh->m);
		if (rc)
			break;
		if ((s + 1) % 5 == 0)
			printf("step %ld: total %llu\n", s + 1, (unsigned long long)want_total);
	}
	if (rc) {
		/* Let the workers go: they notice nothing and exit after their steps
		 * or block; kill them so the parent can reap. */
		for (int w = 0; w < NW; w++)
			kill(pid[w], SIGKILL);
	}
	for (int w = 0; w < NW; w++) {
		int st;
		while (waitpid(pid[w], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
			printf("FAIL worker %d: status %#x\n", w, st);
			rc = 1;
		}
	}
	uint64_t h = 0;
	for (int c = 0; c < NC; c++)
		h = h * 1000003 + sh->counters[c];
	for (int w = 0; w < NW; w++)
		printf("worker %d: %llu increments\n", w, (unsigned long long)sh->per_worker[w]);
	printf("counters: total %llu, hash %016llx\n", (unsigned long long)sh->total, (unsigned long long)h);
	printf("mp_shmcount: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
