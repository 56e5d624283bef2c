/* mpbench: the multi-process benchmark job. NPROC processes (the parent and
 * NPROC-1 forked children) each hold SIZE MiB, half random and half
 * compressible, and do passes of a little CPU work (arithmetic over a
 * cache-sized window), each pass also rewriting 1% of the process's memory
 * (a contiguous stretch, moving from pass to pass), like membench; unlike
 * membench, the rewrite keeps each half's kind (random words in the random
 * half, a new version of the text-like pattern in the other), so that
 * successive checkpoints see the same mix however long the job has run. Passes
 * are paced to about 100 ms each, so that many processes can share a few
 * cores, as the workers of a data loader or a parameter server do.
 *
 *   mpbench NPROC SIZE_MIB PASSES
 *
 * The parent prints "ready" once every process has filled its memory (the
 * children say so through a pipe), "pass N" after each of its own passes,
 * and at the end, once every child has exited, one checksum combining every
 * process's own (sent through the same pipe). The children print nothing.
 * The output does not depend on timing. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 100000000LL /* one pass */
#define WORK 2000000L	      /* CPU work per pass: a few ms */

enum { MSG_READY = 1, MSG_SUM = 2 };

struct msg { /* one write, well under PIPE_BUF: atomic */
	uint32_t type;
	uint32_t idx;
	uint64_t val;
};

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep what is left of this pass's 100 ms; late passes (the machine busy,
 * the job frozen for a checkpoint or restarted) start the next one at once
 * rather than catching up. */
static void pace(int64_t *deadline)
{
	int64_t left;
	struct timespec ts, rem;

	*deadline += PERIOD_NS;
	left = *deadline - now_ns();
	if (left <= 0 || left > PERIOD_NS) { /* late, or the clock moved (restart) */
		*deadline = now_ns();
		return;
	}
	ts.tv_sec = (time_t)(left / 1000000000LL);
	ts.tv_nsec = (long)(left % 1000000000LL);
	while (nanosleep(&ts, &rem) < 0 && errno == EINTR)
		ts = rem;
}

static int put(int fd, uint32_t type, uint32_t idx, uint64_t val)
{
	struct msg m = {type, idx, val};

	return write(fd, &m, sizeof(m)) == (ssize_t)sizeof(m) ? 0 : -1;
}

static int get(int fd, struct msg *m)
{
	ssize_t n;

	do
		n = read(fd, m, sizeof(*m));
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

/* A compressible word: text-like, repeating; a new version of it each pass. */
static uint64_t text(long idx, long pass, size_t i)
{
	return 0x2064657461657065ull ^ ((i / 512) % 17) ^ ((uint64_t)idx << 56) ^ ((uint64_t)pass << 40);
}

/* A process's memory: half random (its own stream), half compressible. */
static uint64_t *fill(long idx, size_t words)
{
	uint64_t *m = malloc(words * 8);

	if (!m)
		exit(1);
	rng = 0x9e3779b97f4a7c15ull * (uint64_t)(idx + 1); /* odd * nonzero: never 0 */
	for (size_t i = 0; i < words / 2; i++)
		m[i] = next();
	for (size_t i = words / 2; i < words; i++)
		m[i] = text(idx, 0, i);
	return m;
}

/* The passes over one process's memory; returns its checksum. */
static uint64_t run(uint64_t *m, long idx, size_t words, long passes, int talk)
{
	size_t hot = words / 100;
	uint64_t sum = 0;
	int64_t deadline = now_ns();

	for (long p = 0; p < passes; p++) {
		size_t from = ((size_t)p * hot * 7) % (words - hot);
		const uint64_t *win = m + (from % (words - 32768));
		for (long k = 0; k < WORK; k++)
			sum = (sum ^ win[k & 32767]) * 0x100000001b3ull + (uint64_t)k;
		for (size_t i = from; i < from + hot; i++) /* each half keeps its kind */
			m[i] = i < words / 2 ? next() : text(idx, p + 1, i);
		if (talk) {
			printf("pass %ld\n", p);
			fflush(stdout);
		}
		pace(&deadline);
	}
	return sum;
}

int main(int argc, char **argv)
{
	long nproc = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 0, words = (mib << 20) / 8;
	long passes = argc > 3 ? strtol(argv[3], NULL, 10) : -1, got = 0;
	uint64_t *m, *sums, all = 0xcbf29ce484222325ull;
	int go[2], up[2], st, bad = 0;
	pid_t *kids;
	struct msg msg;
	char c;

	if (argc != 4 || nproc < 1 || nproc > 4096 || mib < 1 || passes < 0) {
		fprintf(stderr, "usage: mpbench NPROC SIZE_MIB PASSES\n");
		return 2;
	}
	sums = calloc((size_t)nproc, sizeof(*sums));
	kids = calloc((size_t)nproc, sizeof(*kids));
	if (!sums || !kids || pipe(go) < 0 || pipe(up) < 0)
		return 1;
	for (long i = 1; i < nproc; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0) { /* a child: fill, say ready, wait for the go, work, send the checksum */
			close(go[1]);
			close(up[0]);
			m = fill(i, words);
			if (put(up[1], MSG_READY, (uint32_t)i, 0) < 0)
				_exit(1);
			while (read(go[0], &c, 1) < 0 && errno == EINTR) /* EOF: go */
				;
			_exit(put(up[1], MSG_SUM, (uint32_t)i, run(m, i, words, passes, 0)) < 0);
		}
	}
	close(go[0]);
	close(up[1]);
	m = fill(0, words);
	for (long ready = 1; ready < nproc; ready++)
		if (get(up[0], &msg) < 0 || msg.type != MSG_READY)
			return 1; /* a child died before it was ready */
	printf("ready\n");
	fflush(stdout);
	close(go[1]); /* go: every child's read ends */
	sums[0] = run(m, 0, words, passes, 1);
	while (got < nproc - 1 && get(up[0], &msg) == 0)
		if (msg.type == MSG_SUM && msg.idx > 0 && msg.idx < (uint32_t)nproc) {
			sums[msg.idx] = msg.val;
			got++;
		}
	for (long i = 1; i < nproc; i++)
	{
		pid_t w;
		while ((w = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR)
			;
		if (w < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	if (bad || got != nproc - 1)
		return 1;
	for (long i = 0; i < nproc; i++)
		all = (all ^ sums[i]) * 0x100000001b3ull;
	printf("checksum %016llx\n", (unsigned long long)all);
	return 0;
}
