/* protnone_data: memory made PROT_NONE after it was written keeps its
 * bytes, and a restore gives them back.
 *
 * State exercised: pages of a private anonymous region written, then made
 * PROT_NONE (a region of their own, and the middle of a read-write one),
 * next to a PROT_NONE reservation of 1 GiB that never held anything (it
 * must stay empty: its pages are not counted, a restore does not fill
 * them). Each step makes one page readable, checks its bytes and the
 * resident size of the reservation, and makes it PROT_NONE again. Before
 * this test a restore gave zeros for every PROT_NONE page. Prints only
 * deterministic lines; exits 1 after a FAIL line.
 * Usage: protnone_data [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define NPG 16

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static unsigned char pattern(int page, size_t at)
{
	return (unsigned char)(page * 37 + at * 11 + 1);
}

/* pages of the reservation resident (mincore) */
static size_t resident(unsigned char *r, size_t len)
{
	static unsigned char vec[(1UL << 30) / PAGE];
	size_t n = 0;

	if (mincore(r, len, vec) < 0)
		return (size_t)-1;
	for (size_t i = 0; i < len / PAGE; i++)
		n += vec[i] & 1;
	return n;
}

int main(int argc, char **argv)
{
	int steps = (int)(6 * app_scale(argc, argv) + 0.5), bad = 0;
	struct timespec t = {0, 400 * 1000000L};
	unsigned char *none, *mixed, *resv;

	setvbuf(stdout, NULL, _IOLBF, 0);
	none = mmap(NULL, NPG * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mixed = mmap(NULL, NPG * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	resv = mmap(NULL, 1UL << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (none == MAP_FAILED || mixed == MAP_FAILED || resv == MAP_FAILED)
		return 1;
	for (int p = 0; p < NPG; p++)
		for (size_t i = 0; i < PAGE; i++) {
			none[p * PAGE + i] = pattern(p, i);
			mixed[p * PAGE + i] = pattern(p + NPG, i);
		}
	/* the whole of one, the middle half of the other */
	if (mprotect(none, NPG * PAGE, PROT_NONE) < 0 || mprotect(mixed + NPG / 4 * PAGE, NPG / 2 * PAGE, PROT_NONE) < 0)
		return 1;
	for (int step = 0; step < steps; step++) {
		int p = step % NPG, q = NPG / 4 + step % (NPG / 2), wrong = 0;
		size_t res;

		nanosleep(&t, NULL);
		if (mprotect(none + p * PAGE, PAGE, PROT_READ) < 0 || mprotect(mixed + q * PAGE, PAGE, PROT_READ) < 0)
			return 1;
		for (size_t i = 0; i < PAGE; i++)
			wrong += (none[p * PAGE + i] != pattern(p, i)) + (mixed[q * PAGE + i] != pattern(q + NPG, i));
		if (mprotect(none + p * PAGE, PAGE, PROT_NONE) < 0 || mprotect(mixed + q * PAGE, PAGE, PROT_NONE) < 0)
			return 1;
		res = resident(resv, 1UL << 30);
		if (wrong || res) {
			printf("FAIL step %d: %d byte(s) of PROT_NONE pages %d and %d changed; reservation resident: %zu page(s)\n",
			       step, wrong, p, q, res);
			bad = 1;
		} else {
			printf("step %d: PROT_NONE pages %d and %d hold their bytes; the reservation is empty\n", step, p, q);
		}
	}
	printf("%s\n", bad ? "FAIL protnone" : "protnone as bare");
	return bad;
}
