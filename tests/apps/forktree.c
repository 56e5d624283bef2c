/* forktree: a small tree of processes talking over pipes.
 *
 * State exercised: several processes (parent, three children, one
 * grandchild), the parent/child links and exit statuses that waitpid
 * returns, pipes shared between processes (each child streams results to the
 * parent; the grandchild writes through its parent's inherited pipe), and a
 * zombie: the first child exits early and is reaped only at the end, so
 * every checkpoint sees it as a zombie. Only the parent prints.
 * Usage: forktree [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCHILD 3

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

static uint64_t work(uint64_t x, long n)
{
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

struct rec {
	int32_t who, seq;
	uint64_t val;
};

/* Child k (and the grandchild, who = 10 + k) stream `count` records. */
static void producer(int fd, int who, long count, long per)
{
	uint64_t x = (uint64_t)who;

	for (long s = 0; s < count; s++) {
		struct rec r = { who, (int32_t)s, 0 };
		x = work(x, per);
		r.val = x;
		if (write_all(fd, &r, sizeof(r)))
			_exit(100);
		sleep_ms(5);
	}
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	long count = (long)(300 * scale), per = 2000000;
	pid_t kids[NCHILD];
	int pfd[NCHILD][2], rc = 0;
	uint64_t sums[NCHILD + 10 + NCHILD] = { 0 };
	long got[NCHILD + 10 + NCHILD] = { 0 };

	if (count < 1)
		count = 1;
	printf("forktree: %d children, a grandchild and a zombie, %ld records each\n", NCHILD, count);
	fflush(stdout); /* children must not inherit unwritten output */
	for (int k = 0; k < NCHILD; k++) {
		if (pipe(pfd[k]) != 0)
			return 1;
		kids[k] = fork();
		if (kids[k] < 0)
			return 1;
		if (kids[k] == 0) {
			close(pfd[k][0]);
			if (k == 0) /* the future zombie: one record, then exit */
				producer(pfd[k][1], 0, 1, per), _exit(7);
			if (k == 2) {
				pid_t g = fork();
				if (g == 0) {
					producer(pfd[k][1], 12, count, per);
					_exit(9);
				}
				producer(pfd[k][1], k, count, per);
				int st;
				if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 9)
					_exit(101);
				_exit(20 + k);
			}
			producer(pfd[k][1], k, count, per);
			_exit(20 + k);
		}
		close(pfd[k][1]);
	}
	/* Read everything from every pipe until its writers are gone. */
	for (int k = 0; k < NCHILD; k++) {
		struct rec r;
		ssize_t n;
		while ((n = read(pfd[k][0], &r, sizeof(r))) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n != sizeof(r) || r.who < 0 || r.who >= NCHILD + 10 + NCHILD || r.seq != got[r.who]) {
				printf("FAIL bad record on pipe %d\n", k);
				rc = 1;
				break;
			}
			got[r.who]++;
			sums[r.who] ^= r.val;
		}
		close(pfd[k][0]);
		if (k == 1)
			printf("child 1 finished its stream\n");
	}
	for (int k = NCHILD - 1; k >= 0; k--) { /* the zombie is reaped last */
		int st, want = k == 0 ? 7 : 20 + k;
		if (waitpid(kids[k], &st, 0) != kids[k] || !WIFEXITED(st) || WEXITSTATUS(st) != want) {
			printf("FAIL child %d: status %#x\n", k, st);
			rc = 1;
		} else {
			printf("child %d exited with %d\n", k, want);
		}
	}
	for (int w = 0; w < NCHILD + 10 + NCHILD; w++)
		if (got[w])
			printf("producer %d: %ld records, xor %016llx\n", w, got[w], (unsigned long long)sums[w]);
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	printf("forktree: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
