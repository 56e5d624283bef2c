/* mmchurn: a job that changes its memory layout all the time.
 *
 * State exercised: while a checkpoint reads the job's memory, the job
 * unmaps and maps regions (munmap, mmap MAP_FIXED over old ones), gives
 * pages back (madvise MADV_DONTNEED), moves a growing region (mremap) and
 * has the kernel write into its memory (read(2) from a pipe into a large
 * buffer). A write-protect snapshot must not save memory that changed
 * after the cut: a layout change of memory not read yet has to make the
 * round start again with a fork, and a kernel write must wait, not fail.
 * Every region is checked against what was written, so a page saved from
 * after the cut shows as a wrong digest after a restore. Layout changes
 * come in bursts (one phase in three), so that some rounds meet none.
 *
 * Output: one line per phase and a digest, independent of timing.
 * Usage: mmchurn [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NSLOT 16
#define MIB (1ul << 20)

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

/* A region whose words are a function of (tag, index): checkable. */
struct slot {
	uint64_t *p;
	size_t words;
	uint64_t tag;
};

static void fill(struct slot *s)
{
	for (size_t i = 0; i < s->words; i++)
		s->p[i] = mix(s->tag * 1000003u + i);
}

static int check(const struct slot *s, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (s->p[i] != mix(s->tag * 1000003u + i))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	long steps = (long)(400 * scale);
	struct slot slot[NSLOT] = { { 0 } };
	struct slot grow = { 0 };
	size_t pipe_len = 4 * MIB, grow_pages = 64;
	uint64_t *pipebuf, digest = 0, pipe_sum = 0;
	int pfd[2], rc = 0;

	if (steps < 4)
		steps = 4;
	printf("mmchurn: %ld steps over %d slots\n", steps, NSLOT);
	fflush(stdout);
	pipebuf = mmap(NULL, pipe_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	grow.words = grow_pages * 4096 / 8;
	grow.p = mmap(NULL, grow.words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pipebuf == MAP_FAILED || grow.p == MAP_FAILED || pipe(pfd) != 0) {
		printf("FAIL setup\n");
		return 1;
	}
	grow.tag = 999;
	fill(&grow);
	memset(pipebuf, 0, pipe_len);
	for (long s = 0; s < steps; s++) {
		struct slot *sl = &slot[s % NSLOT];
		size_t mib = 1 + (size_t)(mix((uint64_t)s) % 4);

		/* Quiet phases (after the first): only writes, no layout
		 * change, to slots and the pipe buffer. */
		if (s >= NSLOT && (s / 20) % 3 != 0) {
			if (sl->p)
				for (size_t i = 0; i < sl->words; i += 509)
					sl->p[i] = mix(sl->tag * 1000003u + i);
			goto kernel_write;
		}
		/* Replace a slot: check it, unmap it, map a new one (at the
		 * same place when it fits: MAP_FIXED over the old mapping). */
		if (sl->p) {
			if (check(sl, 0, sl->words)) {
				printf("FAIL slot %ld differs\n", s % NSLOT);
				rc = 1;
			}
			digest ^= mix(sl->tag + sl->p[sl->words - 1]);
			if (s % 3 == 0 && sl->words * 8 >= mib * MIB) {
				sl->p = mmap(sl->p, mib * MIB, PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
				munmap((char *)sl->p + mib * MIB, sl->words * 8 - mib * MIB);
			} else {
				munmap(sl->p, sl->words * 8);
				sl->p = mmap(NULL, mib * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
					     -1, 0);
			}
			if (sl->p == MAP_FAILED) {
				printf("FAIL mmap\n");
				return 1;
			}
		} else {
			sl->p = mmap(NULL, mib * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (sl->p == MAP_FAILED) {
				printf("FAIL mmap\n");
				return 1;
			}
		}
		sl->words = mib * MIB / 8;
		sl->tag = (uint64_t)s;
		fill(sl);
		/* Give back the second half of another slot's pages and
		 * write them again: they read as zeros in between. */
		{
			struct slot *o = &slot[(s + 5) % NSLOT];
			if (o->p) {
				size_t half = o->words / 2;
				madvise(o->p + half, (o->words - half) * 8, MADV_DONTNEED);
				if (o->p[o->words - 1] != 0) {
					printf("FAIL discarded pages kept their contents\n");
					rc = 1;
				}
				for (size_t i = half; i < o->words; i++)
					o->p[i] = mix(o->tag * 1000003u + i);
			}
		}
		/* Grow a region by moving it (mremap may move it). */
		if (s % 25 == 24 && grow_pages < 2048) {
			size_t old = grow.words * 8;
			uint64_t *np = mremap(grow.p, old, old * 2, MREMAP_MAYMOVE);
			if (np == MAP_FAILED) {
				printf("FAIL mremap\n");
				return 1;
			}
			grow.p = np;
			grow_pages *= 2;
			for (size_t i = grow.words; i < grow.words * 2; i++)
				grow.p[i] = mix(grow.tag * 1000003u + i);
			grow.words *= 2;
			if (check(&grow, 0, grow.words)) {
				printf("FAIL moved region differs\n");
				rc = 1;
			}
		}
		/* The kernel writes into our memory: a pipe read into the
		 * buffer, at a place that changes each step. */
kernel_write:
		{
			uint64_t v[512];
			size_t at = (size_t)(mix((uint64_t)s + 77) % (pipe_len / sizeof(v))) * (sizeof(v) / 8);
			for (size_t i = 0; i < 512; i++)
				v[i] = mix((uint64_t)s * 512 + i);
			if (write(pfd[1], v, sizeof(v)) != (ssize_t)sizeof(v) ||
			    read(pfd[0], pipebuf + at, sizeof(v)) != (ssize_t)sizeof(v)) {
				printf("FAIL pipe read into memory: %s\n", strerror(errno));
				return 1;
			}
			for (size_t i = 0; i < 512; i++)
				pipe_sum ^= pipebuf[at + i] + i;
		}
		if (s % 100 == 99) {
			printf("step %ld\n", s + 1);
			fflush(stdout);
		}
		sleep_ms(10);
	}
	for (int k = 0; k < NSLOT; k++)
		if (slot[k].p && check(&slot[k], 0, slot[k].words)) {
			printf("FAIL slot %d differs at the end\n", k);
			rc = 1;
		}
	if (check(&grow, 0, grow.words)) {
		printf("FAIL moved region differs at the end\n");
		rc = 1;
	}
	printf("mmchurn: digest %016llx, pipe %016llx, %s\n", (unsigned long long)digest,
	       (unsigned long long)pipe_sum, rc ? "FAIL" : "ok");
	return rc;
}
