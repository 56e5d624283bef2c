/* mp_forkpool: a parent and a pool of four forked workers talking over pipes.
 *
 * State exercised: five processes, two pipes per worker (one to it, one back)
 * with work items and replies in flight in both directions at most moments
 * (the parent keeps several items outstanding per worker), workers blocked in
 * read() on their request pipe or in nanosleep, and the exit statuses that
 * waitpid returns at the end (each worker exits with 10 + its index once its
 * request pipe reaches EOF). The parent checks every reply against its own
 * computation and each worker's final summary against what it received.
 * Only the parent prints.
 * Usage: mp_forkpool [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NW 4
#define OUTSTANDING 3
#define HASH_ROUNDS 4000

struct req {
	uint32_t seq;
	uint32_t pad;
	uint64_t val;
};

struct rep {
	uint32_t seq;
	uint32_t worker;
	uint64_t val;
};

struct summary {
	uint32_t magic;
	uint32_t count;
	uint64_t sum;
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

/* The work: an iterated hash, salted with the worker's index. */
static uint64_t compute(uint64_t v, int worker)
{
	for (int i = 0; i < HASH_ROUNDS; i++)
		v = mix(v + (uint64_t)i * 0x9e3779b97f4a7c15ULL + (uint64_t)worker);
	return v;
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

/* 1 when n bytes were read, 0 at EOF before any byte, -1 otherwise. */
static int read_all(int fd, void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = read(fd, (char *)p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return done == 0 ? 0 : -1;
		done += (size_t)r;
	}
	return 1;
}

static uint64_t roll(uint64_t h, uint64_t v)
{
	return mix(h * 31 + v);
}

/* A worker: reply to each request until EOF, then send a summary. */
static void worker(int idx, int in, int out)
{
	struct summary s = { 0x5eed, 0, 0 };
	struct req q;
	int r;

	while ((r = read_all(in, &q, sizeof(q))) == 1) {
		struct rep a = { q.seq, (uint32_t)idx, compute(q.val, idx) };
		sleep_ms(8 + idx); /* pacing: a worker is slow */
		if (write_all(out, &a, sizeof(a)))
			_exit(2);
		s.count++;
		s.sum = roll(s.sum, a.val);
	}
	if (r < 0)
		_exit(3);
	if (write_all(out, &s, sizeof(s)))
		_exit(4);
	_exit(10 + idx);
}

static uint64_t item_value(long seq)
{
	return mix((uint64_t)seq * 2654435761ULL + 12345);
}

int main(int argc, char **argv)
{
	long per_worker = (long)(300 * app_scale(argc, argv));
	int to[NW][2], from[NW][2], rc = 0;
	pid_t pid[NW];
	uint64_t sum[NW] = { 0 };
	long sent[NW] = { 0 }, got[NW] = { 0 }, total = 0;

	if (per_worker < OUTSTANDING)
		per_worker = OUTSTANDING;
	printf("mp_forkpool: %d workers, %ld items each\n", NW, per_worker);
	for (int i = 0; i < NW; i++)
		if (pipe(to[i]) != 0 || pipe(from[i]) != 0)
			return 1;
	fflush(stdout);
	for (int i = 0; i < NW; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[i] == 0) {
			/* Keep only this worker's two ends. */
			for (int j = 0; j < NW; j++) {
				close(to[j][1]);
				close(from[j][0]);
				if (j != i) {
					close(to[j][0]);
					close(from[j][1]);
				}
			}
			worker(i, to[i][0], from[i][1]);
		}
	}
	for (int i = 0; i < NW; i++) {
		close(to[i][0]);
		close(from[i][1]);
	}

	/* Prime each worker with OUTSTANDING items, then one new item per reply. */
	for (int i = 0; i < NW; i++)
		for (int k = 0; k < OUTSTANDING; k++, sent[i]++) {
			struct req q = { (uint32_t)sent[i], 0, item_value(sent[i] * NW + i) };
			if (write_all(to[i][1], &q, sizeof(q)))
				return printf("FAIL write to worker %d\n", i), 1;
		}
	for (long step = 0; step < per_worker; step++) {
		for (int i = 0; i < NW; i++) {
			struct rep a;
			if (read_all(from[i][0], &a, sizeof(a)) != 1) {
				printf("FAIL reply from worker %d\n", i);
				return 1;
			}
			uint64_t want = compute(item_value(got[i] * NW + i), i);
			if (a.seq != (uint32_t)got[i] || a.worker != (uint32_t)i || a.val != want) {
				printf("FAIL worker %d item %ld: bad reply\n", i, got[i]);
				return 1;
			}
			got[i]++;
			sum[i] = roll(sum[i], a.val);
			total++;
			if (sent[i] < per_worker) {
				struct req q = { (uint32_t)sent[i], 0, item_value(sent[i] * NW + i) };
				if (write_all(to[i][1], &q, sizeof(q)))
					return printf("FAIL write to worker %d\n", i), 1;
				sent[i]++;
			}
		}
		if ((step + 1) % (per_worker / 5 > 0 ? per_worker / 5 : 1) == 0 && step + 1 < per_worker)
			printf("progress: %ld replies\n", total);
	}

	/* EOF on every request pipe: each worker sends its summary and exits. */
	for (int i = 0; i < NW; i++)
		close(to[i][1]);
	for (int i = 0; i < NW; i++) {
		struct summary s;
		struct rep extra;
		int st;

		if (read_all(from[i][0], &s, sizeof(s)) != 1 || s.magic != 0x5eed) {
			printf("FAIL worker %d: no summary\n", i);
			rc = 1;
		} else if (s.count != (uint32_t)got[i] || s.sum != sum[i]) {
			printf("FAIL worker %d: summary %u/%016llx, parent saw %ld/%016llx\n", i, s.count,
			       (unsigned long long)s.sum, got[i], (unsigned long long)sum[i]);
			rc = 1;
		}
		if (read_all(from[i][0], &extra, sizeof(extra)) != 0) {
			printf("FAIL worker %d: data after the summary\n", i);
			rc = 1;
		}
		close(from[i][0]);
		while (waitpid(pid[i], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid worker %d\n", i);
				return 1;
			}
		if (WIFEXITED(st))
			printf("worker %d: exited %d, %ld items, checksum %016llx\n", i, WEXITSTATUS(st), got[i],
			       (unsigned long long)sum[i]);
		else
			printf("worker %d: status %#x\n", i, st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 10 + i) {
			printf("FAIL worker %d: expected exit status %d\n", i, 10 + i);
			rc = 1;
		}
	}
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	printf("mp_forkpool: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
