/* sparse_rss: a job that reserves much more memory than it uses.
 *
 * A 512 MiB anonymous mapping of which one page in every 8 MiB is written
 * (64 pages), a 256 MiB grid with one page in every 128 KiB written (so
 * that every 256 KiB chunk of it holds data, yet 31 of its 32 pages are
 * untouched: a restore that writes whole chunks makes it resident), beside
 * a dense 16 MiB block. Between 10 ms sleeps it rewrites
 * a few pages of each and checks its resident size (/proc/self/statm): a
 * restore must give back the pages the job had, not fill the untouched
 * ones with zeros. Everything is checked in full at the end.
 * Usage: sparse_rss [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SPARSE_MIB 512
#define STRIDE (8u << 20)
#define DENSE_MIB 16
#define GRID_MIB 256
#define GRID_STRIDE (128u << 10)
#define GRID_PAGES (GRID_MIB * (1u << 20) / GRID_STRIDE)
#define RSS_LIMIT_MIB 96 /* dense block, grid pages, program, libraries: far below 256 */

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

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static long rss_mib(void)
{
	long size = 0, res = -1;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &res) != 2)
			res = -1;
		fclose(f);
	}
	return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

int main(int argc, char **argv)
{
	long steps = (long)(300 * app_scale(argc, argv)), worst = 0;
	size_t sparse_len = (size_t)SPARSE_MIB << 20, dense_words = ((size_t)DENSE_MIB << 20) / 8;
	uint32_t ver[SPARSE_MIB / 8] = {0}, *dver = calloc(dense_words / 512, sizeof(uint32_t));
	uint64_t *dense = malloc(dense_words * 8), digest = 0;
	uint8_t *sparse = mmap(NULL, sparse_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
	uint8_t *grid = mmap(NULL, (size_t)GRID_MIB << 20, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *gver = calloc(GRID_PAGES, 1);
	int bad = 0;

	if (steps < 1)
		steps = 1;
	if (sparse == MAP_FAILED || grid == MAP_FAILED || !dense || !dver || !gver) {
		printf("FAIL out of memory\n");
		return 1;
	}
	printf("sparse_rss: %d MiB reserved, %d pages used; %d MiB grid, %u pages used; %d MiB dense; %ld steps\n",
	       SPARSE_MIB, SPARSE_MIB / 8, GRID_MIB, GRID_PAGES, DENSE_MIB, steps);
	for (size_t i = 0; i < dense_words; i++)
		dense[i] = mix(i);
	for (size_t p = 0; p < SPARSE_MIB / 8; p++)
		sparse[p * STRIDE] = 1;
	for (size_t g = 0; g < GRID_PAGES; g++)
		grid[g * GRID_STRIDE + g % 4000] = 1;
	for (long s = 0; s < steps; s++) {
		size_t p = (size_t)(mix((uint64_t)s) % (SPARSE_MIB / 8));
		size_t d = (size_t)(mix((uint64_t)s + 7) % (dense_words / 512));
		long rss;

		sleep_ms(10);
		sparse[p * STRIDE] = (uint8_t)(++ver[p] + 1);
		size_t g = (size_t)(mix((uint64_t)s + 3) % GRID_PAGES);
		grid[g * GRID_STRIDE + g % 4000] = (uint8_t)(++gver[g] + 1);
		dver[d]++;
		for (size_t i = d * 512; i < d * 512 + 512; i++)
			dense[i] = mix(i ^ ((uint64_t)dver[d] << 40));
		rss = rss_mib();
		if (rss > worst)
			worst = rss;
	}
	/* Untouched pages read as zeros (one in every 1 MiB is read: each read
	 * of an untouched page costs a fault), touched ones as written last. */
	for (size_t off = 0; off < sparse_len; off += off % STRIDE ? (1u << 20) - 4096 : 4096) {
		uint8_t want = off % STRIDE ? 0 : (uint8_t)(ver[off / STRIDE] + 1);

		if (sparse[off] != want)
			bad++;
		digest = mix(digest ^ sparse[off]);
	}
	/* the grid: every written byte, and one untouched page per stride */
	for (size_t g = 0; g < GRID_PAGES; g++) {
		uint8_t *pg = grid + g * GRID_STRIDE;

		if (pg[g % 4000] != (uint8_t)(gver[g] + 1) || pg[GRID_STRIDE / 2] != 0)
			bad++;
		digest = mix(digest ^ pg[g % 4000]);
	}
	for (size_t i = 0; i < dense_words; i++) {
		if (dense[i] != mix(i ^ ((uint64_t)dver[i / 512] << 40)))
			bad++;
		digest = mix(digest ^ dense[i]);
	}
	if (bad)
		printf("FAIL %d wrong words or pages\n", bad);
	if (worst > RSS_LIMIT_MIB)
		printf("FAIL resident memory reached %ld MiB (limit %d MiB)\n", worst, RSS_LIMIT_MIB);
	printf("digest %016llx\n", (unsigned long long)digest);
	return bad || worst > RSS_LIMIT_MIB;
}
