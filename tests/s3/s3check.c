/* Store-level checks of the S3 backend, through ck_store_s3_open only.
 *
 *   s3check URI basic                 put/get/get_range/stat/list/del, NOREPLACE, errors
 *   s3check URI many N                N keys (over several list pages), listed in order
 *   s3check URI threads T             T threads doing puts/gets/stats/dels at once
 *   s3check URI race ROUNDS           8 threads commit one key with NOREPLACE at once
 *   s3check URI big MIB               multipart put + get + ranged reads, content checked, MB/s
 *   s3check URI putgen KEY BYTES SEED put generated content
 *   s3check URI verify KEY BYTES SEED get and compare with generated content
 *   s3check URI putfile KEY FILE      put a file's bytes
 *   s3check URI getfile KEY FILE      get into a file
 *   s3check URI del KEY
 * Prints what it checks; on failure, the store's one error line, and exits 1.
 * Endpoint and credentials come from the environment, as for ckrun;
 * S3CHECK_CA names a private CA bundle (the --s3-ca option). */
#include "launcher/store/store.h"
#include "launcher/common/ck_err.h"
#include "launcher/store/s3/store_s3.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct ck_store *st;
static int failures;

#define FAIL(...)                                                  \
	do {                                                       \
		fprintf(stderr, "s3check: FAILED: " __VA_ARGS__);  \
		fprintf(stderr, "\n");                             \
		failures++;                                        \
	} while (0)

#define EXPECT_RC(call, want)                                                                      \
	do {                                                                                       \
		int _rc = (call);                                                                  \
		if (_rc != (want))                                                                 \
			FAIL("%s:%d: %s returned %d (%s), want %d; store said: %s", __FILE__, __LINE__, \
			     #call, _rc, strerror(-_rc), (want), ck_err_msg());                     \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void gen(void *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1, *p = buf;
	size_t i;

	for (i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
	for (i = len / 8 * 8; i < len; i++)
		((unsigned char *)buf)[i] = (unsigned char)(x >> (i % 8));
}

static void *gen_alloc(size_t len, uint64_t seed)
{
	void *b = malloc(len ? len : 1);

	if (!b) {
		perror("malloc");
		exit(2);
	}
	gen(b, len, seed);
	return b;
}

struct listed {
	char **keys;
	uint64_t *sizes;
	size_t n, cap;
};

static int collect(void *arg, const char *key, uint64_t size)
{
	struct listed *l = arg;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->keys = realloc(l->keys, l->cap * sizeof(*l->keys));
		l->sizes = realloc(l->sizes, l->cap * sizeof(*l->sizes));
		if (!l->keys || !l->sizes)
			exit(2);
	}
	l->keys[l->n] = strdup(key);
	l->sizes[l->n++] = size;
	return 0;
}

static void listed_free(struct listed *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->keys[i]);
	free(l->keys);
	free(l->sizes);
	memset(l, 0, sizeof(*l));
}

static int stop_after_two(void *arg, const char *key, uint64_t size)
{
	int *n = arg;

	(void)key;
	(void)size;
	return ++*n == 2 ? 42 : 0;
}

static void cmd_basic(void)
{
	const char *text = "hello, checkpoint\n";
	char rbuf[64];
	void *got = NULL;
	size_t len = 0;
	uint64_t size = 0;
	struct listed l = { 0 };
	int n = 0;

	/* clean slate for the keys used here */
	ck_store_del(st, "basic/a");
	ck_store_del(st, "basic/b b+$x");
	ck_store_del(st, "basic/m");
	ck_store_del(st, "basic/empty");

	EXPECT_RC(ck_store_put(st, "basic/a", text, strlen(text), 0), 0);
	EXPECT_RC(ck_store_get(st, "basic/a", &got, &len), 0);
	if (len != strlen(text) || memcmp(got, text, len))
		FAIL("get returned other bytes (%zu)", len);
	free(got);
	EXPECT_RC(ck_store_stat(st, "basic/a", &size), 0);
	if (size != strlen(text))
		FAIL("stat size %llu", (unsigned long long)size);
	memset(rbuf, 0, sizeof(rbuf));
	EXPECT_RC(ck_store_get_range(st, "basic/a", 7, rbuf, 10), 0);
	if (memcmp(rbuf, text + 7, 10))
		FAIL("get_range returned \"%.10s\"", rbuf);
	/* beyond the end: -EIO with a message */
	EXPECT_RC(ck_store_get_range(st, "basic/a", 10, rbuf, 20), -EIO);
	printf("  short range read -> %s\n", ck_err_msg());
	EXPECT_RC(ck_store_get_range(st, "basic/a", 100, rbuf, 4), -EIO);

	/* overwrite is allowed without NOREPLACE, atomically replaced */
	EXPECT_RC(ck_store_put(st, "basic/a", "v2", 2, 0), 0);
	EXPECT_RC(ck_store_get(st, "basic/a", &got, &len), 0);
	if (len != 2 || memcmp(got, "v2", 2))
		FAIL("overwrite not visible");
	free(got);

	/* NOREPLACE: first wins, second -EEXIST, content unchanged */
	EXPECT_RC(ck_store_put(st, "basic/m", "first", 5, CK_PUT_NOREPLACE), 0);
	EXPECT_RC(ck_store_put(st, "basic/m", "second", 6, CK_PUT_NOREPLACE), -EEXIST);
	printf("  NOREPLACE on existing key -> %s\n", ck_err_msg());
	EXPECT_RC(ck_store_get(st, "basic/m", &got, &len), 0);
	if (len != 5 || memcmp(got, "first", 5))
		FAIL("NOREPLACE replaced the object");
	free(got);

	/* keys needing encoding, empty object */
	EXPECT_RC(ck_store_put(st, "basic/b b+$x", "odd", 3, 0), 0);
	EXPECT_RC(ck_store_get(st, "basic/b b+$x", &got, &len), 0);
	if (len != 3 || memcmp(got, "odd", 3))
		FAIL("odd key content");
	free(got);
	EXPECT_RC(ck_store_put(st, "basic/empty", "", 0, 0), 0);
	EXPECT_RC(ck_store_get(st, "basic/empty", &got, &len), 0);
	if (len != 0)
		FAIL("empty object has %zu bytes", len);
	free(got);

	/* missing keys */
	EXPECT_RC(ck_store_stat(st, "basic/nope", &size), -ENOENT);
	EXPECT_RC(ck_store_get(st, "basic/nope", &got, &len), -ENOENT);
	printf("  missing key -> %s\n", ck_err_msg());
	EXPECT_RC(ck_store_get_range(st, "basic/nope", 0, rbuf, 4), -ENOENT);
	EXPECT_RC(ck_store_del(st, "basic/nope"), 0);

	/* list: relative keys, byte order, sizes; callback can stop the walk */
	EXPECT_RC(ck_store_list(st, "basic/", collect, &l), 0);
	if (l.n != 4 || strcmp(l.keys[0], "basic/a") || strcmp(l.keys[1], "basic/b b+$x") ||
	    strcmp(l.keys[2], "basic/empty") || strcmp(l.keys[3], "basic/m") || l.sizes[0] != 2 || l.sizes[3] != 5)
		FAIL("list gave %zu keys, first \"%s\"", l.n, l.n ? l.keys[0] : "");
	listed_free(&l);
	EXPECT_RC(ck_store_list(st, "basic/", stop_after_two, &n), 42);
	EXPECT_RC(ck_store_list(st, "basic/zzz", collect, &l), 0);
	if (l.n)
		FAIL("list of an empty prefix gave %zu keys", l.n);
	listed_free(&l);

	EXPECT_RC(ck_store_del(st, "basic/a"), 0);
	EXPECT_RC(ck_store_stat(st, "basic/a", &size), -ENOENT);
	ck_store_del(st, "basic/b b+$x");
	ck_store_del(st, "basic/m");
	ck_store_del(st, "basic/empty");
}

struct many_arg {
	int from, to, step, del;
};

static void *many_worker(void *p)
{
	struct many_arg *a = p;
	char key[64], val[64];
	int i, rc;

	for (i = a->from; i < a->to; i += a->step) {
		snprintf(key, sizeof(key), "many/k%05d", i);
		snprintf(val, sizeof(val), "value %d", i);
		rc = a->del ? ck_store_del(st, key) : ck_store_put(st, key, val, strlen(val), 0);
		if (rc) {
			FAIL("%s %s: %s", a->del ? "del" : "put", key, ck_err_msg());
			break;
		}
	}
	return NULL;
}

static void many_all(int n, int del)
{
	enum { T = 8 };
	pthread_t th[T];
	struct many_arg a[T];
	int t;

	for (t = 0; t < T; t++) {
		a[t] = (struct many_arg){ t, n, T, del };
		pthread_create(&th[t], NULL, many_worker, &a[t]);
	}
	for (t = 0; t < T; t++)
		pthread_join(th[t], NULL);
}

static void cmd_many(int n)
{
	struct listed l = { 0 };
	char key[64];
	double t0 = now_s();
	int i;

	many_all(n, 0);
	printf("  %d puts from 8 threads in %.1f s\n", n, now_s() - t0);
	t0 = now_s();
	EXPECT_RC(ck_store_list(st, "many/", collect, &l), 0);
	printf("  listed %zu keys in %.2f s\n", l.n, now_s() - t0);
	if (l.n != (size_t)n)
		FAIL("listed %zu keys, want %d", l.n, n);
	for (i = 0; i < (int)l.n && i < n; i++) {
		snprintf(key, sizeof(key), "many/k%05d", i);
		if (strcmp(l.keys[i], key)) {
			FAIL("key %d is %s, want %s", i, l.keys[i], key);
			break;
		}
		if (i > 0 && strcmp(l.keys[i - 1], l.keys[i]) >= 0) {
			FAIL("keys out of order at %d", i);
			break;
		}
	}
	listed_free(&l);
	many_all(n, 1);
	EXPECT_RC(ck_store_list(st, "many/", collect, &l), 0);
	if (l.n)
		FAIL("%zu keys left after delete", l.n);
	listed_free(&l);
}

static void *thread_worker(void *p)
{
	long id = (long)p;
	char key[64];
	size_t len = 100000 + (size_t)id * 7919;
	void *buf = gen_alloc(len, (uint64_t)id), *got = NULL;
	size_t glen;
	uint64_t size;
	int round;

	snprintf(key, sizeof(key), "threads/t%02ld", id);
	for (round = 0; round < 5; round++) {
		gen(buf, len, (uint64_t)(id * 100 + round));
		if (ck_store_put(st, key, buf, len, 0)) {
			FAIL("thread %ld put: %s", id, ck_err_msg());
			break;
		}
		if (ck_store_stat(st, key, &size) || size != len) {
			FAIL("thread %ld stat: %s", id, ck_err_msg());
			break;
		}
		if (ck_store_get(st, key, &got, &glen) || glen != len || memcmp(got, buf, len)) {
			FAIL("thread %ld get: %s", id, ck_err_msg());
			free(got);
			break;
		}
		free(got);
		got = NULL;
	}
	if (ck_store_del(st, key))
		FAIL("thread %ld del: %s", id, ck_err_msg());
	free(buf);
	return NULL;
}

static void cmd_threads(int n)
{
	pthread_t th[64];
	long i;
	double t0 = now_s();

	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++)
		pthread_create(&th[i], NULL, thread_worker, (void *)i);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	printf("  %d threads x 5 rounds of put/stat/get in %.1f s\n", n, now_s() - t0);
}

/* Several writers commit the same key with NOREPLACE at once: exactly one
 * may win, and the object must be the winner's. */
struct race_arg {
	int id, rc;
	pthread_barrier_t *go;
};

static void *race_worker(void *p)
{
	struct race_arg *a = p;
	char val[64];

	snprintf(val, sizeof(val), "writer %d", a->id);
	pthread_barrier_wait(a->go);
	a->rc = ck_store_put(st, "race/commit", val, strlen(val), CK_PUT_NOREPLACE);
	if (a->rc && a->rc != -EEXIST)
		FAIL("writer %d: %s", a->id, ck_err_msg());
	return NULL;
}

static void cmd_race(int rounds)
{
	enum { T = 8 };
	struct race_arg a[T];
	pthread_barrier_t go;
	pthread_t th[T];
	void *got;
	size_t len;
	int r, t, winners, winner;

	for (r = 0; r < rounds; r++) {
		ck_store_del(st, "race/commit");
		pthread_barrier_init(&go, NULL, T);
		for (t = 0; t < T; t++) {
			a[t] = (struct race_arg){ t, 0, &go };
			pthread_create(&th[t], NULL, race_worker, &a[t]);
		}
		winners = 0;
		winner = -1;
		for (t = 0; t < T; t++) {
			pthread_join(th[t], NULL);
			if (!a[t].rc) {
				winners++;
				winner = t;
			}
		}
		pthread_barrier_destroy(&go);
		if (winners != 1) {
			FAIL("round %d: %d writers won the NOREPLACE put", r, winners);
			continue;
		}
		if (ck_store_get(st, "race/commit", &got, &len)) {
			FAIL("round %d: get: %s", r, ck_err_msg());
			continue;
		}
		{
			char want[64];

			snprintf(want, sizeof(want), "writer %d", winner);
			if (len != strlen(want) || memcmp(got, want, len))
				FAIL("round %d: object is \"%.*s\", winner was %d", r, (int)len, (char *)got, winner);
		}
		free(got);
	}
	ck_store_del(st, "race/commit");
	printf("  %d rounds of %d concurrent NOREPLACE puts: one winner each\n", rounds, T);
}

static void cmd_big(size_t mib)
{
	size_t len = mib << 20, off, l;
	void *buf = gen_alloc(len, 7), *got = NULL;
	char *part;
	size_t glen = 0;
	uint64_t size = 0;
	double t0, t1;

	ck_store_del(st, "big/object");
	t0 = now_s();
	EXPECT_RC(ck_store_put(st, "big/object", buf, len, 0), 0);
	t1 = now_s();
	printf("  upload %zu MiB: %.2f s, %.0f MB/s\n", mib, t1 - t0, (double)len / 1e6 / (t1 - t0));
	EXPECT_RC(ck_store_stat(st, "big/object", &size), 0);
	if (size != len)
		FAIL("stat says %llu bytes", (unsigned long long)size);
	t0 = now_s();
	EXPECT_RC(ck_store_get(st, "big/object", &got, &glen), 0);
	t1 = now_s();
	printf("  download %zu MiB: %.2f s, %.0f MB/s\n", mib, t1 - t0, (double)len / 1e6 / (t1 - t0));
	if (glen != len || (got && memcmp(got, buf, len)))
		FAIL("big object content differs (%zu bytes read)", glen);
	free(got);
	/* ranged reads across part boundaries, and one large parallel one */
	part = malloc(len);
	for (off = 1; off < len; off += len / 7) {
		l = 3 << 20;
		if (off + l > len)
			l = len - off;
		EXPECT_RC(ck_store_get_range(st, "big/object", off, part, l), 0);
		if (memcmp(part, (char *)buf + off, l))
			FAIL("range at %zu differs", off);
	}
	t0 = now_s();
	EXPECT_RC(ck_store_get_range(st, "big/object", 12345, part, len - 12345), 0);
	t1 = now_s();
	if (memcmp(part, (char *)buf + 12345, len - 12345))
		FAIL("large range differs");
	printf("  ranged read of %zu MiB: %.2f s, %.0f MB/s\n", mib, t1 - t0, (double)(len - 12345) / 1e6 / (t1 - t0));
	/* NOREPLACE on a multipart-sized put of an existing key */
	EXPECT_RC(ck_store_put(st, "big/object", buf, 20 << 20, CK_PUT_NOREPLACE), -EEXIST);
	EXPECT_RC(ck_store_stat(st, "big/object", &size), 0);
	if (size != len)
		FAIL("NOREPLACE multipart replaced the object");
	free(part);
	free(buf);
	EXPECT_RC(ck_store_del(st, "big/object"), 0);
	printf("  retries on this store: %llu\n", (unsigned long long)ck_store_s3_retries(st));
}

static int cmd_putgen(const char *key, size_t len, uint64_t seed)
{
	void *buf = gen_alloc(len, seed);
	double t0 = now_s();
	int rc = ck_store_put(st, key, buf, len, 0);

	free(buf);
	if (rc) {
		fprintf(stderr, "s3check: error: %s\n", ck_err_msg());
		return 1;
	}
	printf("  put %s: %zu bytes in %.2f s, %llu retries\n", key, len, now_s() - t0,
	       (unsigned long long)ck_store_s3_retries(st));
	return 0;
}

static int cmd_verify(const char *key, size_t len, uint64_t seed)
{
	void *want = gen_alloc(len, seed), *got = NULL;
	size_t glen = 0;
	double t0 = now_s();
	int rc = ck_store_get(st, key, &got, &glen);

	if (rc) {
		fprintf(stderr, "s3check: error: %s\n", ck_err_msg());
	} else if (glen != len || memcmp(got, want, len)) {
		fprintf(stderr, "s3check: error: %s: content differs (%zu bytes)\n", key, glen);
		rc = 1;
	} else {
		printf("  verified %s: %zu bytes in %.2f s, %llu retries\n", key, len, now_s() - t0,
		       (unsigned long long)ck_store_s3_retries(st));
	}
	free(want);
	free(got);
	return rc ? 1 : 0;
}

static int cmd_putfile(const char *key, const char *file)
{
	struct stat sb;
	void *buf;
	int fd = open(file, O_RDONLY), rc;
	ssize_t n;

	if (fd < 0 || fstat(fd, &sb)) {
		perror(file);
		return 1;
	}
	buf = malloc((size_t)sb.st_size + 1);
	n = read(fd, buf, (size_t)sb.st_size);
	close(fd);
	if (n != sb.st_size) {
		fprintf(stderr, "%s: short read\n", file);
		free(buf);
		return 1;
	}
	rc = ck_store_put(st, key, buf, (size_t)n, 0);
	free(buf);
	if (rc)
		fprintf(stderr, "s3check: error: %s\n", ck_err_msg());
	return rc ? 1 : 0;
}

static int cmd_getfile(const char *key, const char *file)
{
	void *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc = ck_store_get(st, key, &buf, &len);

	if (rc) {
		fprintf(stderr, "s3check: error: %s\n", ck_err_msg());
		return 1;
	}
	f = fopen(file, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		perror(file);
		free(buf);
		return 1;
	}
	free(buf);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: s3check s3://BUCKET/PREFIX basic|many N|threads N|race N|big MIB|putgen KEY BYTES SEED|"
			"verify KEY BYTES SEED|putfile KEY FILE|getfile KEY FILE|del KEY\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct ck_store_opts opts = { 0 };
	const char *cmd;
	int rc;

	if (argc < 3)
		usage();
	opts.s3_virtual_host = getenv("S3CHECK_VHOST") != NULL;
	opts.s3_ca = getenv("S3CHECK_CA"); /* as --s3-ca would */
	rc = ck_store_s3_open(argv[1], &opts, &st);
	if (rc) {
		fprintf(stderr, "s3check: error: %s\n", ck_err_msg());
		return 1;
	}
	cmd = argv[2];
	if (!strcmp(cmd, "basic")) {
		cmd_basic();
	} else if (!strcmp(cmd, "many") && argc == 4) {
		cmd_many(atoi(argv[3]));
	} else if (!strcmp(cmd, "race") && argc == 4) {
		cmd_race(atoi(argv[3]));
	} else if (!strcmp(cmd, "threads") && argc == 4) {
		cmd_threads(atoi(argv[3]));
	} else if (!strcmp(cmd, "big") && argc == 4) {
		cmd_big(strtoul(argv[3], NULL, 10));
	} else if (!strcmp(cmd, "putgen") && argc == 6) {
		failures += cmd_putgen(argv[3], strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
	} else if (!strcmp(cmd, "verify") && argc == 6) {
		failures += cmd_verify(argv[3], strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
	} else if (!strcmp(cmd, "putfile") && argc == 5) {
		failures += cmd_putfile(argv[3], argv[4]);
	} else if (!strcmp(cmd, "getfile") && argc == 5) {
		failures += cmd_getfile(argv[3], argv[4]);
	} else if (!strcmp(cmd, "del") && argc == 4) {
		if ((rc = ck_store_del(st, argv[3]))) {
			fprintf(stderr, "s3check: error: %s\n", ck_err_msg());
			failures++;
		}
	} else {
		usage();
	}
	st->ops->close(st);
	return failures ? 1 : 0;
}
