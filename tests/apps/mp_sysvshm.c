/* mp_sysvshm: a System V shared memory segment shared by four processes.
 *
 * State exercised: a segment from shmget(IPC_PRIVATE) attached by the parent
 * and inherited by three forked children; one child attaches it a second time
 * (shmat again: two addresses for the same pages in one process) and works
 * through that address, another also attaches it read-only (SHM_RDONLY) and
 * reads its own writes back through that view. The segment holds a
 * process-shared pthread mutex (a futex in System V memory, often contended:
 * it is sometimes held across a sleep), counters updated under it, and a
 * stripe of data per child spread over its pages. The parent checks an
 * invariant under the lock at random moments and, at the end, every counter
 * and stripe against its own arithmetic, the segment's size and its number
 * of attachments (IPC_STAT), then removes it (IPC_RMID).
 * Usage: mp_sysvshm [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCH 3
#define NC 64
#define SEG_SIZE (1 << 20)
#define STRIPE 8192 /* uint64 per child: 64 KiB */

struct seg {
	pthread_mutex_t m;
	uint64_t counters[NC];
	uint64_t amount_sum; /* == sum of counters, under the lock */
	uint64_t per_child[NCH];
	uint64_t steps_done[NCH];
	char pad[4096];
	uint64_t stripe[NCH][STRIPE];
};

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

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static int slot(int c, long s, int j)
{
	return (int)((uint64_t)(c * 13 + s * 5 + j * 7) % NC);
}

static uint64_t amount(int c, long s, int j)
{
	return (uint64_t)(c + 1) * 100 + (uint64_t)(s % 17) + (uint64_t)j;
}

static uint64_t stripe_val(int c, long s)
{
	return mix(((uint64_t)c << 48) + (uint64_t)s);
}

static void child(int c, struct seg *g, int shmid, long steps)
{
	const struct seg *view = NULL;

	if (c == 1) {
		/* A second attachment; work through it from now on. */
		struct seg *g2 = shmat(shmid, NULL, 0);
		if (g2 == (void *)-1 || g2 == g)
			_exit(20);
		g2->stripe[c][0] = 0xabcdef;
		if (g->stripe[c][0] != 0xabcdef)
			_exit(21);
		g2->stripe[c][0] = 0;
		g = g2;
	}
	if (c == 2) {
		view = shmat(shmid, NULL, SHM_RDONLY);
		if (view == (void *)-1)
			_exit(22);
	}
	for (long s = 0; s < steps; s++) {
		pthread_mutex_lock(&g->m);
		for (int j = 0; j < 3; j++) {
			g->counters[slot(c, s, j)] += amount(c, s, j);
			g->amount_sum += amount(c, s, j);
		}
		g->per_child[c] += 3;
		if (s % 8 == 0)
			sleep_ms(1); /* holding the lock */
		pthread_mutex_unlock(&g->m);
		long k = (s * 97) % STRIPE;
		g->stripe[c][k] ^= stripe_val(c, s);
		if (view && view->stripe[c][k] != g->stripe[c][k])
			_exit(23);
		__atomic_store_n(&g->steps_done[c], (uint64_t)s + 1, __ATOMIC_RELEASE);
		sleep_ms(10);
	}
	if (view && shmdt(view) != 0)
		_exit(24);
	_exit(80 + c);
}

int main(int argc, char **argv)
{
	long steps = (long)(310 * app_scale(argc, argv));
	pthread_mutexattr_t ma;
	struct shmid_ds ds;
	struct seg *g;
	pid_t pid[NCH];
	int shmid, rc = 0, checks = 0, bad = 0, reaped[NCH] = { 0 }, status[NCH] = { 0 };

	if (steps < 10)
		steps = 10;
	if (sizeof(struct seg) > SEG_SIZE)
		return 1;
	shmid = shmget(IPC_PRIVATE, SEG_SIZE, IPC_CREAT | 0600);
	if (shmid < 0) {
		printf("FAIL shmget: %s\n", strerror(errno));
		return 1;
	}
	g = shmat(shmid, NULL, 0);
	if (g == (void *)-1) {
		printf("FAIL shmat: %s\n", strerror(errno));
		shmctl(shmid, IPC_RMID, NULL);
		return 1;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	if (pthread_mutex_init(&g->m, &ma) != 0) {
		printf("FAIL mutex init\n");
		shmctl(shmid, IPC_RMID, NULL);
		return 1;
	}
	printf("mp_sysvshm: %d children, %ld steps each, a %d KiB segment\n", NCH, steps, SEG_SIZE / 1024);
	fflush(stdout);
	for (int c = 0; c < NCH; c++) {
		pid[c] = fork();
		if (pid[c] < 0) {
			printf("FAIL fork\n");
			shmctl(shmid, IPC_RMID, NULL);
			return 1;
		}
		if (pid[c] == 0)
			child(c, g, shmid, steps);
	}

	/* The invariant, checked under the lock while the children work. */
	for (;;) {
		int finished = 1;
		for (int c = 0; c < NCH; c++)
			if (__atomic_load_n(&g->steps_done[c], __ATOMIC_ACQUIRE) < (uint64_t)steps)
				finished = 0;
		if (finished)
			break;
		pthread_mutex_lock(&g->m);
		uint64_t sum = 0, n = 0;
		for (int k = 0; k < NC; k++)
			sum += g->counters[k];
		for (int c = 0; c < NCH; c++)
			n += g->per_child[c];
		if (sum != g->amount_sum || n % 3 != 0)
			bad++;
		pthread_mutex_unlock(&g->m);
		checks++;
		sleep_ms(37);
		/* A child that died would stop the loop forever: look. */
		for (int c = 0; c < NCH; c++)
			if (!reaped[c] && waitpid(pid[c], &status[c], WNOHANG) == pid[c]) {
				reaped[c] = 1;
				if (__atomic_load_n(&g->steps_done[c], __ATOMIC_ACQUIRE) < (uint64_t)steps) {
					printf("FAIL child %d ended early, status %#x\n", c, status[c]);
					shmctl(shmid, IPC_RMID, NULL);
					return 1;
				}
			}
	}
	if (bad) {
		printf("FAIL invariant broken %d times in %d checks\n", bad, checks);
		rc = 1;
	}
	for (int c = 0; c < NCH; c++) {
		int st = status[c];
		while (!reaped[c] && waitpid(pid[c], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				shmctl(shmid, IPC_RMID, NULL);
				return 1;
			}
		if (WIFEXITED(st))
			printf("child %d: exited %d\n", c, WEXITSTATUS(st));
		else
			printf("child %d: status %#x\n", c, st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 80 + c)
			rc = 1;
	}

	/* Everything against the parent's own arithmetic. */
	uint64_t want[NC] = { 0 }, wsum = 0, h = 0;
	for (int c = 0; c < NCH; c++)
		for (long s = 0; s < steps; s++)
			for (int j = 0; j < 3; j++) {
				want[slot(c, s, j)] += amount(c, s, j);
				wsum += amount(c, s, j);
			}
	if (memcmp(want, g->counters, sizeof(want)) != 0 || wsum != g->amount_sum) {
		printf("FAIL counters differ from the expected values\n");
		rc = 1;
	}
	for (int c = 0; c < NCH; c++) {
		static uint64_t ws[STRIPE];
		uint64_t sh = 0;
		memset(ws, 0, sizeof(ws));
		for (long s = 0; s < steps; s++)
			ws[(s * 97) % STRIPE] ^= stripe_val(c, s);
		if (memcmp(ws, g->stripe[c], sizeof(ws)) != 0 || g->per_child[c] != (uint64_t)(3 * steps)) {
			printf("FAIL child %d: stripe or count differs\n", c);
			rc = 1;
		}
		for (int k = 0; k < STRIPE; k++)
			sh = mix(sh + g->stripe[c][k]);
		printf("child %d: %llu increments, stripe %016llx\n", c, (unsigned long long)g->per_child[c],
		       (unsigned long long)sh);
	}
	for (int k = 0; k < NC; k++)
		h = h * 1000003 + g->counters[k];
	printf("counters: sum %llu, hash %016llx\n", (unsigned long long)g->amount_sum, (unsigned long long)h);
	if (shmctl(shmid, IPC_STAT, &ds) != 0) {
		printf("FAIL IPC_STAT: %s\n", strerror(errno));
		rc = 1;
	} else {
		printf("segment: %zu KiB, %lu attachment(s) left\n", (size_t)ds.shm_segsz / 1024,
		       (unsigned long)ds.shm_nattch);
		if (ds.shm_segsz != SEG_SIZE || ds.shm_nattch != 1)
			rc = 1;
	}
	if (shmdt(g) != 0 || shmctl(shmid, IPC_RMID, NULL) != 0) {
		printf("FAIL shmdt/IPC_RMID: %s\n", strerror(errno));
		rc = 1;
	}
	printf("mp_sysvshm: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
