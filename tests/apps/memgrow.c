/* memgrow: a job whose memory grows in two phases.
 *
 * Phase 1 holds A MiB of random (incompressible) data, phase 2 adds B MiB
 * more; each phase lasts a fixed number of 10 ms sleeps and rewrites a few
 * pages between sleeps. So a checkpoint taken in phase 1 is small and one
 * taken in phase 2 is large: the fault suite uses this to fill a small store
 * on the second checkpoint and not the first, and it follows the phases in
 * the output file (flushed at each phase change). The data is checked in full
 * at the end.
 * Usage: memgrow [SCALE [A_MIB [B_MIB]]]   (or CKPT_APP_SCALE, CKPT_APP_GROW_A,
 *        CKPT_APP_GROW_B; defaults 16 and 96 MiB; 1.0 = two phases of 2 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static size_t arg_mib(int argc, char **argv, int i, const char *env, size_t def)
{
	const char *s = argc > i ? argv[i] : getenv(env);
	size_t v = s ? strtoul(s, NULL, 10) : def;
	return v >= 1 && v <= 8192 ? v : def;
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

/* Word i of block b holds mix(b, i, version of its page). */
static uint64_t value(int b, size_t i, uint32_t ver)
{
	return mix(((uint64_t)b << 56) ^ ((uint64_t)ver << 40) ^ i);
}

struct block {
	uint64_t *w;
	size_t words;
	size_t hot; /* pages rewritten: the first ones */
	uint32_t *ver; /* per 4 KiB page */
};

static int alloc_block(struct block *b, int id, size_t mib, size_t hot_mib)
{
	b->words = (mib << 20) / 8;
	b->hot = hot_mib && hot_mib < mib ? (hot_mib << 20) / 4096 : b->words / 512;
	b->w = malloc(b->words * 8);
	b->ver = calloc(b->words / 512, sizeof(uint32_t));
	if (!b->w || !b->ver)
		return -1;
	for (size_t i = 0; i < b->words; i++)
		b->w[i] = value(id, i, 0);
	return 0;
}

static void touch(struct block *b, int id, uint64_t k)
{
	size_t page = (size_t)(mix(k) % b->hot);
	uint32_t v = ++b->ver[page];

	for (size_t i = page * 512; i < page * 512 + 512; i++)
		b->w[i] = value(id, i, v);
}

static int verify(struct block *b, int id, uint64_t *digest)
{
	for (size_t i = 0; i < b->words; i++) {
		if (b->w[i] != value(id, i, b->ver[i / 512]))
			return -1;
		*digest = mix(*digest ^ b->w[i]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	size_t a_mib = arg_mib(argc, argv, 2, "CKPT_APP_GROW_A", 16);
	size_t b_mib = arg_mib(argc, argv, 3, "CKPT_APP_GROW_B", 96);
	size_t t_mib = argc > 4 ? arg_mib(argc, argv, 4, "", 0) : 0;
	long sleeps = (long)(200 * scale);
	struct block a, b;
	uint64_t digest = 0;
	int rc = 0;

	if (sleeps < 1)
		sleeps = 1;
	printf("memgrow: phase 1 holds %zu MiB, phase 2 adds %zu MiB, %ld sleeps each\n", a_mib, b_mib, sleeps);
	if (alloc_block(&a, 1, a_mib, t_mib)) {
		printf("FAIL out of memory\n");
		return 1;
	}
	for (long s = 0; s < sleeps; s++) {
		sleep_ms(10);
		touch(&a, 1, (uint64_t)s);
	}
	printf("phase 1 done\n");
	fflush(stdout); /* lets a harness see the phase change in the output file */
	if (alloc_block(&b, 2, b_mib, t_mib)) {
		printf("FAIL out of memory\n");
		return 1;
	}
	for (long s = 0; s < sleeps; s++) {
		sleep_ms(10);
		touch(&a, 1, (uint64_t)s + 1000000);
		touch(&b, 2, (uint64_t)s);
	}
	printf("phase 2 done\n");
	fflush(stdout);
	if (verify(&a, 1, &digest) || verify(&b, 2, &digest)) {
		printf("FAIL data differs from what was written\n");
		rc = 1;
	}
	printf("memgrow: digest %016llx, %s\n", (unsigned long long)digest, rc ? "FAIL" : "ok");
	return rc;
}
