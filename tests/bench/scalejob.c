/* scalejob: a job whose shape, not its data, is large: a sparse anonymous
 * region of SPARSE_GIB GiB with one page written every 64 MiB, THREADS
 * threads asleep, and MAPS small mappings (alternating protections, so the
 * kernel cannot merge them), each with one page written. What ckrun's own
 * memory must not grow with (issue 24: <= 256 MiB whatever the job).
 *
 *   scalejob SPARSE_GIB THREADS MAPS
 *
 * Prints "ready" once everything exists, then sleeps until killed; a
 * digest of the written pages on SIGUSR1 (a restore check). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile sig_atomic_t want_digest;

static void on_usr1(int sig)
{
	(void)sig;
	want_digest = 1;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	size_t gib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	long threads = argc > 2 ? strtol(argv[2], NULL, 10) : 1000;
	long maps = argc > 3 ? strtol(argv[3], NULL, 10) : 60000;
	size_t len = gib << 30, step = 64u << 20;
	uint8_t *sparse = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t **m = calloc((size_t)maps + 1, sizeof(*m));
	pthread_attr_t at;
	uint64_t d = 1469598103934665603ull;

	if (sparse == MAP_FAILED || !m) {
		perror("scalejob");
		return 1;
	}
	for (size_t off = 0; off < len; off += step)
		sparse[off] = (uint8_t)(off >> 26) | 1;
	for (long i = 0; i < maps; i++) {
		m[i] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m[i] == MAP_FAILED) {
			perror("scalejob: mmap");
			return 1;
		}
		m[i][0] = (uint8_t)i | 1;
		/* every other one read-only: no two neighbours merge */
		if (i % 2 && mprotect(m[i], 4096, PROT_READ) < 0) {
			perror("scalejob: mprotect");
			return 1;
		}
	}
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 << 10);
	for (long i = 0; i < threads; i++) {
		pthread_t t;

		if (pthread_create(&t, &at, sleeper, NULL)) {
			perror("scalejob: pthread_create");
			return 1;
		}
	}
	signal(SIGUSR1, on_usr1);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		pause();
		if (!want_digest)
			continue;
		want_digest = 0;
		d = 1469598103934665603ull;
		for (size_t off = 0; off < len; off += step)
			d = (d ^ sparse[off]) * 1099511628211ull;
		for (long i = 0; i < maps; i++)
			d = (d ^ m[i][0]) * 1099511628211ull;
		printf("digest %016llx\n", (unsigned long long)d);
		fflush(stdout);
	}
}
