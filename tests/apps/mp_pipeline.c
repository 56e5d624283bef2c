/* mp_pipeline: a shell pipeline of processes made from this same binary.
 *
 * State exercised: exec of /bin/sh (the job's first process becomes a shell),
 * which forks four children and execs them: `self gen N | self filter |
 * sort -n | self sum N`, all connected by pipes. A checkpoint sees a shell
 * waiting for its pipeline, a generator pacing itself with nanosleep and
 * writing lines into a pipe, a filter blocked reading, sort(1) holding the
 * numbers read so far in its memory, and the summer blocked on its input;
 * data sits in the pipe buffers at most moments. The summer recomputes the
 * whole stream by itself and checks what it received.
 *
 * Modes (argv[1]): none or a number: the main mode (scale); "gen N": N numbers
 * on stdout, paced; "filter": stdin -> stdout, keeps and transforms some
 * numbers; "sum N": reads the sorted numbers, checks them, prints results.
 * Output: one header line (main mode) and the summer's result lines.
 * Usage: mp_pipeline [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH 10

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

static long gen_value(long k)
{
	return (long)(mix((uint64_t)k + 0xabcdef) % 10000000);
}

/* The filter keeps numbers not divisible by 7 and transforms them;
 * -1 means dropped. */
static long filter_value(long x)
{
	if (x % 7 == 0)
		return -1;
	return x * 3 + x % 11;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

static int do_gen(long n)
{
	for (long k = 0; k < n; k++) {
		printf("%ld\n", gen_value(k));
		if (k % BATCH == BATCH - 1) {
			if (fflush(stdout) != 0)
				return 1;
			sleep_ms(10);
		}
	}
	return fflush(stdout) != 0;
}

static int do_filter(void)
{
	char line[64];

	while (fgets(line, sizeof(line), stdin)) {
		char *end;
		long x = strtol(line, &end, 10), y;
		if (end == line || *end != '\n') {
			fprintf(stderr, "mp_pipeline filter: bad line\n");
			return 1;
		}
		y = filter_value(x);
		if (y >= 0)
			printf("%ld\n", y);
	}
	if (ferror(stdin))
		return 1;
	return fflush(stdout) != 0;
}

static int do_sum(long n)
{
	long *want = malloc(sizeof(long) * (size_t)(n > 0 ? n : 1));
	long m = 0, got = 0, prev = LONG_MIN, bad = 0, sorted_bad = 0;
	uint64_t hash = 0, sum = 0;
	char line[64];

	if (!want)
		return 1;
	for (long k = 0; k < n; k++) {
		long y = filter_value(gen_value(k));
		if (y >= 0)
			want[m++] = y;
	}
	qsort(want, (size_t)m, sizeof(long), cmp_long);
	while (fgets(line, sizeof(line), stdin)) {
		char *end;
		long y = strtol(line, &end, 10);
		if (end == line || *end != '\n') {
			bad++;
			continue;
		}
		if (y < prev)
			sorted_bad++;
		prev = y;
		if (got < m && want[got] != y)
			bad++;
		got++;
		sum += (uint64_t)y;
		hash = mix(hash ^ (uint64_t)y);
	}
	printf("sum: %ld numbers, total %llu, min %ld, max %ld, median %ld\n", got, (unsigned long long)sum,
	       m ? want[0] : 0, m ? want[m - 1] : 0, m ? want[m / 2] : 0);
	printf("sum: ordered hash %016llx\n", (unsigned long long)hash);
	if (got != m || bad || sorted_bad) {
		printf("FAIL got %ld numbers (want %ld), %ld wrong, %ld out of order\n", got, m, bad, sorted_bad);
		printf("mp_pipeline: FAIL\n");
		return 1;
	}
	printf("mp_pipeline: ok\n");
	return 0;
}

/* Single-quote a string for sh. */
static int shell_quote(char *out, size_t size, const char *s)
{
	size_t o = 0;

	if (o + 1 >= size)
		return -1;
	out[o++] = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			if (o + 4 >= size)
				return -1;
			memcpy(out + o, "'\\''", 4);
			o += 4;
		} else {
			if (o + 1 >= size)
				return -1;
			out[o++] = *s;
		}
	}
	if (o + 2 > size)
		return -1;
	out[o++] = '\'';
	out[o] = 0;
	return 0;
}

int main(int argc, char **argv)
{
	char self[PATH_MAX], q[3 * PATH_MAX], cmd[12 * PATH_MAX];
	ssize_t len;
	long n;

	if (argc > 1 && strcmp(argv[1], "gen") == 0)
		return argc > 2 ? do_gen(atol(argv[2])) : 1;
	if (argc > 1 && strcmp(argv[1], "filter") == 0)
		return do_filter();
	if (argc > 1 && strcmp(argv[1], "sum") == 0)
		return argc > 2 ? do_sum(atol(argv[2])) : 1;

	n = (long)(3000 * app_scale(argc, argv));
	if (n < BATCH)
		n = BATCH;
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		printf("FAIL readlink /proc/self/exe\n");
		return 1;
	}
	self[len] = 0;
	if (shell_quote(q, sizeof(q), self) != 0) {
		printf("FAIL path too long\n");
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "%s gen %ld | %s filter | LC_ALL=C sort -n | %s sum %ld", q, n, q, q, n);
	printf("mp_pipeline: gen %ld | filter | sort -n | sum\n", n);
	fflush(stdout);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	printf("FAIL exec /bin/sh: %s\n", strerror(errno));
	return 1;
}
