/* wpunmap: a job that frees and maps small regions all the time.
 *
 * State exercised: eight regions of 2 MiB and a page, each filled with
 * words that are a function of (tag, index). Every step checks one of
 * them whole, unmaps it and maps a fresh one in its place with a new tag.
 * So a region that exists at a checkpoint's cut is often gone a moment
 * after the job runs again: a write-protect snapshot that reads such a
 * region after the unmap (and before the kernel's event about it is read)
 * must not save zeros for it. A restore from such an image would find a
 * region of zeros and say so.
 *
 * Output: one line per phase and a digest, independent of timing.
 * Usage: wpunmap [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NREG 8
#define REG_BYTES ((2ul << 20) + 4096)

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
	uint64_t *p = mmap(NULL, REG_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("wpunmap: mmap");
		exit(1);
	}
	for (size_t i = 0; i < REG_BYTES / 8; i++)
		p[i] = mix(t * 1000003u + i);
	reg[k] = p;
	tag[k] = t;
}

/* Checks region k whole; returns a digest of it. */
static uint64_t check(int k)
{
	uint64_t d = 0;

	for (size_t i = 0; i < REG_BYTES / 8; i++) {
		uint64_t want = mix(tag[k] * 1000003u + i);
		if (reg[k][i] != want) {
			printf("wpunmap: region %d (tag %llu) word %zu is %016llx, not %016llx\n", k,
			       (unsigned long long)tag[k], i, (unsigned long long)reg[k][i], (unsigned long long)want);
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
	uint64_t digest = 0, t = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int k = 0; k < NREG; k++)
		fill(k, t++);
	for (long ph = 0; ph < phases; ph++) {
		for (long s = 0; s < steps / phases; s++) {
			int k = (int)(t % NREG);
			digest = mix(digest ^ check(k));
			munmap(reg[k], REG_BYTES);
			fill(k, t++);
			sleep_us(1000);
		}
		printf("phase %ld: %llu regions replaced\n", ph, (unsigned long long)(t - 1 - NREG));
	}
	for (int k = 0; k < NREG; k++)
		digest = mix(digest ^ check(k));
	printf("wpunmap: digest %016llx\n", (unsigned long long)digest);
	return 0;
}
