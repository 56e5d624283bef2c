/* bigfree: large heap blocks freed and allocated again all the time, as a
 * training step frees its activations.
 *
 * State exercised: eight blocks of 1-3 MiB from malloc, which glibc maps
 * for each (mmap threshold pinned at 256 KiB: a real job's blocks above
 * 32 MiB always are), each filled with words that are a function of (tag,
 * index); one more block grows by realloc (glibc moves mapped blocks with
 * mremap). Every step checks one block whole, frees it and allocates a new
 * one with a new tag. glibc's free() unmaps a mapped block by an internal
 * call no wrapper of munmap sees: a write-protect snapshot must not lose
 * (or save zeros for) a block freed after the cut before ckrun read it.
 *
 * Output: one line per phase and a digest, independent of timing.
 * Usage: bigfree [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NBLK 8

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_us(long us)
{
	struct timespec req = { us / 1000000, (us % 1000000) * 1000 }, rem;

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

static uint64_t *blk[NBLK];
static size_t words[NBLK];
static uint64_t tag[NBLK];

static void fill(int k, uint64_t t)
{
	size_t n = ((1u << 20) + (size_t)(mix(t) % (2u << 20))) / 8;
	uint64_t *p = malloc(n * 8);

	if (!p) {
		printf("bigfree: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = mix(t * 1000003u + i);
	blk[k] = p;
	words[k] = n;
	tag[k] = t;
}

static uint64_t check_words(const uint64_t *p, size_t n, uint64_t t, const char *what)
{
	uint64_t d = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t want = mix(t * 1000003u + i);
		if (p[i] != want) {
			printf("bigfree: %s (tag %llu) word %zu is %016llx, not %016llx\n", what, (unsigned long long)t,
			       i, (unsigned long long)p[i], (unsigned long long)want);
			exit(2);
		}
		d = mix(d ^ want);
	}
	return d;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	long steps = (long)(1600 * scale), phases = 8;
	uint64_t digest = 0, t = 1, *grow;
	size_t gwords = 64 * 1024, gfilled = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	if (!(grow = malloc(gwords * 8)))
		return 1;
	for (int k = 0; k < NBLK; k++)
		fill(k, t++);
	for (long ph = 0; ph < phases; ph++) {
		for (long s = 0; s < steps / phases; s++) {
			int k = (int)(t % NBLK);
			digest = mix(digest ^ check_words(blk[k], words[k], tag[k], "block"));
			free(blk[k]);
			fill(k, t++);
			/* the growing block: filled so far, then moved bigger */
			for (; gfilled < gwords; gfilled++)
				grow[gfilled] = mix(77 * 1000003u + gfilled);
			if (s % 50 == 49 && gwords < (8u << 20) / 8) {
				uint64_t *np = realloc(grow, gwords * 2 * 8);
				if (!np)
					return 1;
				grow = np;
				gwords *= 2;
			}
			sleep_us(1000);
		}
		digest = mix(digest ^ check_words(grow, gfilled, 77, "grown block"));
		printf("phase %ld: %llu blocks replaced, grown block %zu KiB\n", ph,
		       (unsigned long long)(t - 1 - NBLK), gwords * 8 / 1024);
	}
	for (int k = 0; k < NBLK; k++)
		digest = mix(digest ^ check_words(blk[k], words[k], tag[k], "block"));
	printf("bigfree: digest %016llx\n", (unsigned long long)digest);
	return 0;
}
