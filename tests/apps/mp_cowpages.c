/* mp_cowpages: forked workers that write a few bytes of pages they share
 * copy-on-write with their parent.
 *
 * State exercised: 16 MiB of private anonymous memory filled by the parent
 * with bytes that do not compress, then inherited by two forked workers.
 * At each step every process flips bytes in a handful of pages, spread over
 * the whole buffer (as reference counts of a forked Python are), so each
 * holds pages of its own among pages still equal to the others'. Every
 * process takes a digest of its whole buffer at every step, the workers
 * send theirs through a pipe each and the parent prints them in order
 * (the output does not depend on scheduling): a restore that
 * mixes up whose page is whose, or puts back a stale one, changes the
 * output. (ckrun stores a worker's chunks as the pages that differ from its
 * parent's at the same address.)
 * Usage: mp_cowpages [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF_BYTES (16u << 20)
#define PAGE 4096u
#define NPAGES (BUF_BYTES / PAGE)
#define NW 2

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = {ms / 1000, (ms % 1000) * 1000000}, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static uint64_t digest(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	const uint64_t *w = (const uint64_t *)p;

	for (size_t i = 0; i < n / 8; i++)
		h = (h ^ w[i]) * 1099511628211ull;
	return h;
}

static int pipes[NW][2];

/* One process's steps: who is 0 for the parent, 1.. for the workers. */
static int run(uint8_t *buf, int who, int steps)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(who + 1), d;

	for (int s = 0; s < steps; s++) {
		/* a few pages each step; a worker's first step touches many */
		int touch = s == 0 && who ? NPAGES / 16 : 8;

		for (int k = 0; k < touch; k++) {
			uint64_t r = next(&x);
			size_t page = (size_t)(r % NPAGES), off = (size_t)((r >> 32) % (PAGE / 8)) * 8;

			buf[page * PAGE + off] ^= (uint8_t)(who * 16 + s + 1);
		}
		d = digest(buf, BUF_BYTES);
		if (who) {
			if (write(pipes[who - 1][1], &d, sizeof(d)) != (ssize_t)sizeof(d))
				return 1;
			sleep_ms(40);
			continue;
		}
		printf("process 0 step %d digest %016llx\n", s, (unsigned long long)d);
		for (int w = 0; w < NW; w++) {
			size_t got = 0;

			while (got < sizeof(d)) {
				ssize_t n = read(pipes[w][0], (char *)&d + got, sizeof(d) - got);

				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					return 1;
				got += (size_t)n;
			}
			printf("process %d step %d digest %016llx\n", w + 1, s, (unsigned long long)d);
		}
		fflush(stdout);
		sleep_ms(40);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int steps = (int)(100 * app_scale(argc, argv)), status, bad = 0;
	pid_t pids[NW];
	uint64_t x = 88172645463325252ull;
	uint8_t *buf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (buf == MAP_FAILED) {
		perror("mp_cowpages: mmap");
		return 1;
	}
	if (steps < 2)
		steps = 2;
	for (size_t i = 0; i < BUF_BYTES / 8; i++)
		((uint64_t *)buf)[i] = next(&x);
	for (int w = 0; w < NW; w++) {
		if (pipe(pipes[w]) < 0) {
			perror("mp_cowpages: pipe");
			return 1;
		}
		pids[w] = fork();
		if (pids[w] < 0) {
			perror("mp_cowpages: fork");
			return 1;
		}
		if (pids[w] == 0)
			_exit(run(buf, w + 1, steps));
	}
	if (run(buf, 0, steps))
		bad = 1;
	for (int w = 0; w < NW; w++)
		if (waitpid(pids[w], &status, 0) != pids[w] || !WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
	printf("mp_cowpages: %s\n", bad ? "a worker failed" : "ok");
	return bad;
}
