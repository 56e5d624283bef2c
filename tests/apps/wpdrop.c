/* wpdrop: large regions dropped soon after being checked, never written
 * again before they go: madvise(MADV_DONTNEED), munmap or mremap through
 * libc, in turn.
 *
 * State exercised: eight regions of 4 MiB at addresses never used twice
 * (MAP_FIXED_NOREPLACE, each one further up), filled with words that are a
 * function of (tag, index). Every step checks one region whole, then drops
 * it (one of three ways) and maps a fresh one with a new tag. A region a
 * checkpoint's cut held is often dropped before a write-protect snapshot
 * has read it: ckrun must still save what the cut held (or repeat the
 * round with a fork), and a restore must find every region whole.
 *
 * Output: one line per phase and a digest, independent of timing.
 * Usage: wpdrop [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define NREG 8
#define REG_BYTES (4ul << 20)
#define BASE 0x5a0000000000ull

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

static uint64_t *reg[NREG];
static uint64_t tag[NREG];

static void fill(int k, uint64_t t)
{
	void *want = (void *)(uintptr_t)(BASE + t * 2 * REG_BYTES);
	uint64_t *p = mmap(want, REG_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			   -1, 0);

	if (p == MAP_FAILED || p != want) {
		printf("wpdrop: mmap at %p failed\n", want);
		exit(1);
	}
	for (size_t i = 0; i < REG_BYTES / 8; i++)
		p[i] = mix(t * 1000003u + i);
	reg[k] = p;
	tag[k] = t;
}

static uint64_t check(int k)
{
	uint64_t d = 0;

	for (size_t i = 0; i < REG_BYTES / 8; i++) {
		uint64_t want = mix(tag[k] * 1000003u + i);
		if (reg[k][i] != want) {
			printf("wpdrop: region %d (tag %llu) word %zu is %016llx, not %016llx\n", k,
			       (unsigned long long)tag[k], i, (unsigned long long)reg[k][i], (unsigned long long)want);
			exit(2);
		}
		d = mix(d ^ want);
	}
	return d;
}

static void drop(int k, uint64_t t)
{
	void *p = reg[k];

	switch (t % 3) {
	case 0:
		munmap(p, REG_BYTES);
		break;
	case 1: /* discarded, then unmapped much later by the kernel at exit: keep it mapped */
		madvise(p, REG_BYTES, MADV_DONTNEED);
		break;
	default: { /* moved away, then unmapped */
		void *to = (void *)(uintptr_t)(BASE - (t + 1) * 2 * REG_BYTES);
		void *q = mremap(p, REG_BYTES, REG_BYTES, MREMAP_MAYMOVE | MREMAP_FIXED, to);
		if (q == MAP_FAILED) {
			printf("wpdrop: mremap failed\n");
			exit(1);
		}
		munmap(q, REG_BYTES);
	}
	}
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	long steps = (long)(800 * scale), phases = 8;
	uint64_t digest = 0, t = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int k = 0; k < NREG; k++)
		fill(k, t++);
	for (long ph = 0; ph < phases; ph++) {
		for (long s = 0; s < steps / phases; s++) {
			int k = (int)(t % NREG);
			digest = mix(digest ^ check(k));
			drop(k, t);
			fill(k, t++);
			sleep_us(2000);
		}
		printf("phase %ld: %llu regions dropped\n", ph, (unsigned long long)(t - 1 - NREG));
	}
	for (int k = 0; k < NREG; k++)
		digest = mix(digest ^ check(k));
	printf("wpdrop: digest %016llx\n", (unsigned long long)digest);
	return 0;
}
