/* membench: the benchmark job. Holds SIZE MiB, half random and half
 * compressible, and does a fixed amount of CPU work in passes (arithmetic
 * over a cache-sized window, like a compute-bound training step); each pass
 * also rewrites 1% of the memory (a contiguous stretch, moving from pass to
 * pass), as a training step rewrites its parameters.
 *
 *   membench SIZE_MIB PASSES [SPIN]
 *
 * SPIN more threads do the same arithmetic over a window of their own, all
 * the time, touching no other memory: with as many threads as cores, the
 * job keeps every core busy, as a training job does (their work is not
 * counted; the passes are). Prints "ready" once the memory is filled, "pass N" after each pass and a
 * checksum at the end, so a driver can time phases from outside. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static volatile int done;

static void *spin(void *arg)
{
	uint64_t win[4096], sum = (uint64_t)(uintptr_t)arg;

	for (size_t i = 0; i < 4096; i++)
		win[i] = i * 0x9e3779b97f4a7c15ull;
	while (!done)
		for (long k = 0; k < 1000 * 1000; k++)
			sum = (sum ^ win[k & 4095]) * 0x100000001b3ull + (uint64_t)k;
	return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
	long passes = argc > 2 ? strtol(argv[2], NULL, 10) : 20;
	long nspin = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
	size_t n = mib << 20, half = n / 2, words = n / 8, hot = n / 100 / 8;
	pthread_t th[64];
	uint64_t *m = malloc(n), sum = 0;

	if (!m)
		return 1;
	for (size_t i = 0; i < half / 8; i++)
		m[i] = next();
	for (size_t i = half / 8; i < words; i++) /* compressible: text-like, repeats */
		m[i] = 0x2064657461657065ull ^ ((i / 512) % 17);
	for (long i = 0; i < nspin && i < 64; i++)
		if (pthread_create(&th[i], NULL, spin, (void *)(uintptr_t)i) != 0)
			return 1;
	printf("ready\n");
	fflush(stdout);
	for (long p = 0; p < passes; p++) {
		size_t from = ((size_t)p * hot * 7) % (words - hot);
		const uint64_t *win = m + (from % (words - 32768));
		for (long k = 0; k < 60 * 1000 * 1000; k++)
			sum = (sum ^ win[k & 32767]) * 0x100000001b3ull + (uint64_t)k;
		for (size_t i = from; i < from + hot; i++)
			m[i] = next();
		printf("pass %ld\n", p);
		fflush(stdout);
	}
	done = 1;
	for (long i = 0; i < nspin && i < 64; i++)
		pthread_join(th[i], NULL);
	printf("checksum %016llx\n", (unsigned long long)sum);
	return 0;
}
