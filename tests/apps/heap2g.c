/* heap2g: a 2 GiB heap, touched sparsely, with some dense regions.
 *
 * State exercised: one 2 GiB malloc'ed (mmap'ed) region of which most pages
 * are never touched (they must come back as zero without being stored), a
 * sparse grid of touched pages (one word every 64 pages) and a few dense
 * regions of random data. Rounds of random updates keep dirtying pages
 * between checkpoints; an incrementally maintained checksum is compared with
 * one recomputed from memory at every tenth round and at the end.
 * Usage: heap2g [SCALE [DENSE_MIB]]   (or CKPT_APP_SCALE, CKPT_APP_DENSE_MB;
 *        1.0 = about 3 s; DENSE_MIB defaults to 128) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define HEAP_BYTES (2048UL << 20)
#define PAGE 4096UL
#define SPARSE_STRIDE (64 * PAGE)
#define NREGIONS 4

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
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

static uint64_t *heap;
static size_t region_words;
static size_t region_start[NREGIONS]; /* word index */
static size_t nsparse;

static size_t sparse_index(size_t k)
{
	size_t page = k * (SPARSE_STRIDE / PAGE);

	return (page * PAGE + (k % 512) * 8) / 8;
}

static int in_dense(size_t w)
{
	for (int r = 0; r < NREGIONS; r++)
		if (w >= region_start[r] && w < region_start[r] + region_words)
			return 1;
	return 0;
}

/* Sum of mix(word + position) over every word the program owns. */
static uint64_t recompute(void)
{
	uint64_t sum = 0;

	for (int r = 0; r < NREGIONS; r++)
		for (size_t i = 0; i < region_words; i++)
			sum += mix(heap[region_start[r] + i] + region_start[r] + i);
	for (size_t k = 0; k < nsparse; k++) {
		size_t w = sparse_index(k);
		if (!in_dense(w)) /* counted once, as part of its region */
			sum += mix(heap[w] + w);
	}
	return sum;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	const char *d = argc > 2 ? argv[2] : getenv("CKPT_APP_DENSE_MB");
	size_t dense_mb = d ? strtoul(d, NULL, 10) : 128;
	long rounds = (long)(100 * scale), updates = 250000;
	uint64_t rng = 42, sum = 0;
	int rc = 0, zero_bad = 0;

	if (dense_mb < NREGIONS || dense_mb > 1024)
		dense_mb = 128;
	heap = malloc(HEAP_BYTES);
	if (!heap) {
		printf("FAIL heap2g: malloc of 2 GiB failed\n");
		return 1;
	}
	printf("heap2g: 2048 MiB heap, %zu MiB dense, %ld rounds\n", dense_mb, rounds);
	region_words = (dense_mb << 20) / NREGIONS / 8;
	for (int r = 0; r < NREGIONS; r++) /* regions at 256, 768, 1280, 1792 MiB */
		region_start[r] = ((256UL + 512UL * r) << 20) / 8;
	nsparse = HEAP_BYTES / SPARSE_STRIDE;

	for (size_t k = 0; k < nsparse; k++) {
		size_t w = sparse_index(k);
		if (!in_dense(w))
			heap[w] = mix(w);
	}
	for (int r = 0; r < NREGIONS; r++)
		for (size_t i = 0; i < region_words; i++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			heap[region_start[r] + i] = rng;
		}
	sum = recompute();
	printf("initial checksum %016llx\n", (unsigned long long)sum);

	for (long round = 1; round <= rounds; round++) {
		for (long u = 0; u < updates; u++) {
			size_t w;

			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			if (u % 8 == 0) {
				w = sparse_index(rng % nsparse);
			} else {
				int r = (int)(rng >> 60) % NREGIONS;
				w = region_start[r] + (rng >> 3) % region_words;
			}
			uint64_t old = heap[w], nw = mix(old ^ (uint64_t)round);
			sum += mix(nw + w) - mix(old + w);
			heap[w] = nw;
		}
		if (round % 10 == 0 || round == rounds) {
			uint64_t again = recompute();
			printf("round %ld checksum %016llx\n", round, (unsigned long long)again);
			if (again != sum) {
				printf("FAIL round %ld: memory %016llx, expected %016llx\n", round,
				       (unsigned long long)again, (unsigned long long)sum);
				rc = 1;
				break;
			}
		}
	}
	/* Pages never touched must read as zero. */
	for (size_t p = 1; p < HEAP_BYTES / PAGE; p += 4099) {
		size_t w = p * PAGE / 8 + 17;
		if ((p % (SPARSE_STRIDE / PAGE)) != 0 && !in_dense(w) && heap[w] != 0)
			zero_bad++;
	}
	if (zero_bad) {
		printf("FAIL %d untouched pages are not zero\n", zero_bad);
		rc = 1;
	}
	free(heap);
	printf("heap2g: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
