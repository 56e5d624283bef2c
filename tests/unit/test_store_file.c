/* File store: put/get/range/stat/list/del, NOREPLACE, modes, bad keys. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "launcher/common/ck_err.h"
#include "launcher/store/store.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

struct listed {
	char keys[16][64];
	uint64_t sizes[16];
	int n;
};

static int list_cb(void *arg, const char *key, uint64_t size)
{
	struct listed *l = arg;

	if (l->n < 16) {
		snprintf(l->keys[l->n], sizeof(l->keys[0]), "%s", key);
		l->sizes[l->n] = size;
	}
	l->n++;
	return 0;
}

static int stop_cb(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	++*(int *)arg;
	return 7;
}

static int ck_store_open_lock_for_test(struct ck_store *s)
{
	int fd = s->ops->open_lock(s, "j/lock");

	if (fd >= 0)
		close(fd);
	return fd < 0 ? fd : 0;
}

static void test_basic(const char *dir)
{
	struct ck_store *s = NULL;
	char uri[512], path[600];
	struct listed l = {0};
	struct stat st;
	uint64_t size = 0;
	char buf[16];
	void *data = NULL;
	size_t len = 0;
	int stops = 0;

	snprintf(uri, sizeof(uri), "file://%s/store", dir);
	CHECK_EQ_INT(ck_store_open(uri, NULL, &s), 0);
	if (!s)
		return;
	CHECK_EQ_STR(s->ops->scheme, "file");
	/* An empty store lists nothing. */
	CHECK_EQ_INT(ck_store_list(s, "", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 0);

	CHECK_EQ_INT(ck_store_put(s, "job/manifests/00000002", "two", 3, 0), 0);
	CHECK_EQ_INT(ck_store_put(s, "job/manifests/00000001", "one!", 4, CK_PUT_NOREPLACE), 0);
	CHECK_EQ_INT(ck_store_put(s, "job/packs/00000001-0001.pack", "0123456789", 10, 0), 0);
	CHECK_EQ_INT(ck_store_put(s, "other/x", "", 0, 0), 0);

	/* NOREPLACE refuses, and leaves the old object. */
	CHECK_EQ_INT(ck_store_put(s, "job/manifests/00000001", "xxxx", 4, CK_PUT_NOREPLACE), -EEXIST);
	CHECK(strstr(ck_err_msg(), "job/manifests/00000001") != NULL);
	CHECK_EQ_INT(ck_store_get(s, "job/manifests/00000001", &data, &len), 0);
	CHECK_EQ_INT(len, 4);
	CHECK(data && !memcmp(data, "one!", 4));
	free(data);
	/* A plain put replaces. */
	CHECK_EQ_INT(ck_store_put(s, "job/manifests/00000002", "TWO2", 4, 0), 0);
	CHECK_EQ_INT(ck_store_stat(s, "job/manifests/00000002", &size), 0);
	CHECK_EQ_INT(size, 4);

	CHECK_EQ_INT(ck_store_get_range(s, "job/packs/00000001-0001.pack", 3, buf, 4), 0);
	CHECK(!memcmp(buf, "3456", 4));
	CHECK_EQ_INT(ck_store_get_range(s, "job/packs/00000001-0001.pack", 8, buf, 4), -EIO);
	CHECK(strstr(ck_err_msg(), "00000001-0001.pack") != NULL);
	CHECK_EQ_INT(ck_store_get_range(s, "job/packs/nope", 0, buf, 1), -ENOENT);
	CHECK_EQ_INT(ck_store_stat(s, "job/nope", &size), -ENOENT);
	CHECK(strstr(ck_err_msg(), uri) != NULL);
	CHECK_EQ_INT(ck_store_get(s, "job/manifests", &data, &len), -ENOENT);

	/* Modes: files 0600, directories 0700. */
	snprintf(path, sizeof(path), "%s/store/job/manifests/00000002", dir);
	CHECK_EQ_INT(stat(path, &st), 0);
	CHECK_EQ_INT(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/store/job/manifests", dir);
	CHECK_EQ_INT(stat(path, &st), 0);
	CHECK_EQ_INT(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/store", dir);
	CHECK_EQ_INT(stat(path, &st), 0);
	CHECK_EQ_INT(st.st_mode & 07777, 0700);

	/* Listing: recursive, sorted, prefix-filtered, no temporary files. */
	snprintf(path, sizeof(path), "%s/store/job/manifests/.00000003.tmp-1-1", dir);
	fclose(fopen(path, "w"));
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(ck_store_list(s, "", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 4);
	CHECK_EQ_STR(l.keys[0], "job/manifests/00000001");
	CHECK_EQ_STR(l.keys[1], "job/manifests/00000002");
	CHECK_EQ_STR(l.keys[2], "job/packs/00000001-0001.pack");
	CHECK_EQ_STR(l.keys[3], "other/x");
	CHECK_EQ_INT(l.sizes[2], 10);
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(ck_store_list(s, "job/man", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 2);
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(ck_store_list(s, "job/packs/", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 1);
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(ck_store_list(s, "jo", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 3);
	CHECK_EQ_INT(ck_store_list(s, "", stop_cb, &stops), 7);
	CHECK_EQ_INT(stops, 1);

	/* Delete; deleting a missing key is fine. */
	CHECK_EQ_INT(ck_store_del(s, "job/manifests/00000002"), 0);
	CHECK_EQ_INT(ck_store_del(s, "job/manifests/00000002"), 0);
	CHECK_EQ_INT(ck_store_stat(s, "job/manifests/00000002", &size), -ENOENT);

	/* Keys that could escape the store or clash with temporaries. */
	CHECK_EQ_INT(ck_store_put(s, "../x", "a", 1, 0), -EINVAL);
	CHECK_EQ_INT(ck_store_put(s, "/abs", "a", 1, 0), -EINVAL);
	CHECK_EQ_INT(ck_store_put(s, "a//b", "a", 1, 0), -EINVAL);
	CHECK_EQ_INT(ck_store_put(s, "a/.hidden", "a", 1, 0), -EINVAL);
	CHECK_EQ_INT(ck_store_put(s, "a/", "a", 1, 0), -EINVAL);
	ck_store_close(s);
}

static void test_open_errors(const char *dir)
{
	struct ck_store *s = NULL;
	char rel[64];

	CHECK_EQ_INT(ck_store_open("ftp://host/x", NULL, &s), -EINVAL);
	CHECK(strstr(ck_err_msg(), "ftp://host/x") != NULL);
	CHECK_EQ_INT(ck_store_open("file://relative", NULL, &s), -EINVAL);
	CHECK_EQ_INT(ck_store_open("", NULL, &s), -EINVAL);
	if (!ck_store_s3_open) {
		CHECK_EQ_INT(ck_store_open("s3://bucket/p", NULL, &s), -ENOTSUP);
		CHECK(strstr(ck_err_msg(), "s3://bucket/p") != NULL);
	}
	/* A plain path works too. */
	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (s) {
		CHECK_EQ_INT(ck_store_put(s, "k", "v", 1, 0), 0);
		ck_store_close(s);
	}
	/* A write into a directory we cannot write fails with the key named,
	 * leaving nothing behind (root ignores modes, so use a file as dir). */
	snprintf(rel, sizeof(rel), "%s", "k/sub");
	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (s) {
		CHECK(ck_store_put(s, rel, "v", 1, 0) < 0);
		CHECK(strstr(ck_err_msg(), "k/sub") != NULL);
		ck_store_close(s);
	}
}

struct racer {
	struct ck_store *s;
	int id, won, errors;
};

/* A value of the shared key, written whole by thread t in its turn i: a
 * header naming (t, i) and a length, then bytes that depend on (t, i) and
 * their place, so that a reader can tell one whole value from a mix of two
 * (a header of one write with bytes of another, or a torn length). */
static char *shared_value(int t, int i, size_t *len)
{
	size_t n = 65536 + (size_t)t * 4099 + (size_t)i * 257, h;
	char *v = malloc(n + 64);

	if (!v)
		return NULL;
	h = (size_t)snprintf(v, 64, "value %d %d %zu\n", t, i, n);
	for (size_t k = 0; k < n; k++)
		v[h + k] = (char)((t * 131 + i * 7 + (int)(k * 13)) & 0xff);
	*len = h + n;
	return v;
}

/* 0 if buf is exactly one value shared_value() makes. */
static int shared_value_check(const char *buf, size_t len)
{
	char head[64], *want;
	int t, i, ok;
	size_t n, wlen;

	snprintf(head, sizeof(head), "%.*s", (int)(len < 63 ? len : 63), buf);
	if (sscanf(head, "value %d %d %zu", &t, &i, &n) != 3 || t < 0 || t > 3 || i < 0 || i >= 40)
		return -1;
	want = shared_value(t, i, &wlen);
	ok = want && wlen == len && !memcmp(want, buf, len);
	free(want);
	return ok ? 0 : -1;
}

/* Several threads on one handle: distinct keys, replaced keys, and one
 * key that only a single NOREPLACE put may win. */
static void *race(void *arg)
{
	struct racer *r = arg;
	char key[64], val[64], *got, *shared;
	size_t len, slen;
	int i, rc;

	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "race/t%d/k%02d", r->id, i);
		snprintf(val, sizeof(val), "value %d %d", r->id, i);
		if (ck_store_put(r->s, key, val, strlen(val), 0) < 0)
			r->errors++;
		shared = shared_value(r->id, i, &slen);
		if (!shared || ck_store_put(r->s, "race/shared", shared, slen, 0) < 0)
			r->errors++;
		free(shared);
		if (ck_store_get(r->s, key, (void **)&got, &len) < 0 || len != strlen(val) || memcmp(got, val, len))
			r->errors++;
		free(got);
		/* Readers of a replaced key see one whole value, never a mix. */
		got = NULL;
		if (ck_store_get(r->s, "race/shared", (void **)&got, &len) == 0 && shared_value_check(got, len))
			r->errors++;
		free(got);
	}
	rc = ck_store_put(r->s, "race/commit", val, strlen(val), CK_PUT_NOREPLACE);
	if (rc == 0)
		r->won = 1;
	else if (rc != -EEXIST)
		r->errors++;
	return NULL;
}

static void test_threads(const char *dir)
{
	struct racer r[4];
	struct ck_store *s = NULL;
	struct listed l = {0};
	pthread_t t[4];
	int i, won = 0, errors = 0;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (!s)
		return;
	for (i = 0; i < 4; i++) {
		r[i] = (struct racer){.s = s, .id = i};
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		won += r[i].won;
		errors += r[i].errors;
	}
	CHECK_EQ_INT(won, 1);
	CHECK_EQ_INT(errors, 0);
	CHECK_EQ_INT(ck_store_list(s, "race/", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 4 * 40 + 2); /* no temporary file left visible */
	ck_store_close(s);
}

/* Bytes this process has had read from storage (-1: not counted here). */
static long long storage_reads(void)
{
	char line[256];
	long long v = -1;
	FILE *f = fopen("/proc/self/io", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %lld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* Aligned ranged reads go through O_DIRECT with a buffered tail: every
 * split of head and tail must return the same bytes, and a range past the
 * end must still fail (a short direct read is not success). `on_disk`: the
 * store is on storage, so reads past the page cache can be seen. */
static void test_direct_reads(const char *dir, int on_disk)
{
	const size_t size = (3u << 20) + 1234; /* not a multiple of a block */
	struct ck_store *s = NULL;
	uint8_t *obj = malloc(size), *buf = NULL;
	static const struct {
		uint64_t off;
		size_t len;
	} cases[] = {
		{0, 4096},        {0, 1u << 20},          {4096, (1u << 20) + 17}, {8192, 4095},
		{12288, 100000},  {(3u << 20), 1234},     {(3u << 20) - 4096, 4096 + 1234},
		{0, (3u << 20) + 1234},
	};

	if (posix_memalign((void **)&buf, 4096, size + 8192))
		buf = NULL;
	CHECK(obj && buf);
	if (!obj || !buf)
		goto out;
	for (size_t i = 0; i < size; i++)
		obj[i] = (uint8_t)(i * 131 + (i >> 12));
	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (!s)
		goto out;
	CHECK_EQ_INT((int)s->read_align, 4096);
	CHECK_EQ_INT(ck_store_put(s, "direct/packs/00000001-0001.pack", obj, size, 0), 0);
	{
		/* The direct path was taken: after the cache of the object is
		 * dropped, an aligned read leaves its head out of the cache
		 * (where this file system does O_DIRECT at all). */
		char path[4096];
		int fd, dfd;
		unsigned char vec[256];
		void *map;

		snprintf(path, sizeof(path), "%s/direct/packs/00000001-0001.pack", dir);
		fd = open(path, O_RDONLY);
		dfd = open(path, O_RDONLY | O_DIRECT);
		CHECK(fd >= 0);
		if (fd >= 0 && dfd >= 0 && on_disk) {
			long long before;

			/* all in the cache (read through it once): read from it */
			static char warm[65536];

			while (read(fd, warm, sizeof(warm)) > 0)
				;
			CHECK_EQ_INT(fdatasync(fd), 0);
			before = storage_reads();
			CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", 0, buf, 1u << 20), 0);
			CHECK(!memcmp(buf, obj, 1u << 20));
			if (before >= 0)
				CHECK(storage_reads() - before < (1 << 20));
			/* not in the cache: read past it */
			CHECK_EQ_INT(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
			before = storage_reads();
			CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", 0, buf, 1u << 20), 0);
			CHECK(!memcmp(buf, obj, 1u << 20));
			if (before >= 0)
				CHECK(storage_reads() - before >= (1 << 20));
			map = mmap(NULL, 1u << 20, PROT_READ, MAP_SHARED, fd, 0);
			CHECK(map != MAP_FAILED);
			if (map != MAP_FAILED) {
				CHECK_EQ_INT(mincore(map, 1u << 20, vec), 0);
				for (int p = 0; p < 256; p++)
					CHECK_EQ_INT(vec[p] & 1, 0);
				munmap(map, 1u << 20);
			}
		}
		if (dfd >= 0)
			close(dfd);
		if (fd >= 0)
			close(fd);
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(buf, 0xa5, cases[i].len);
		CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", cases[i].off, buf, cases[i].len), 0);
		CHECK(!memcmp(buf, obj + cases[i].off, cases[i].len));
	}
	/* past the end, with an aligned start and buffer */
	CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", (3u << 20) - 4096, buf, 8192), -EIO);
	CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", 0, buf, size + 4096), -EIO);
	/* an absurd offset (a forged or damaged manifest's) is past the end
	 * like any other, not an invalid argument */
	CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", 1ull << 63, buf, 4096), -EIO);
	CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", UINT64_MAX - 10, buf, 100), -EIO);
	CHECK(strstr(ck_err_msg(), "goes past its end") != NULL);
	/* an unaligned buffer takes the buffered path */
	CHECK_EQ_INT(ck_store_get_range(s, "direct/packs/00000001-0001.pack", 4096, buf + 1, 8192), 0);
	CHECK(!memcmp(buf + 1, obj + 4096, 8192));
	ck_store_close(s);
out:
	free(obj);
	free(buf);
}

/* A file system whose files live in memory (tmpfs, ramfs): its pages are
 * the files, so no read goes past a cache to storage. */
static int in_memory(const char *dir)
{
	struct statfs sf;

	return statfs(dir, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/* Whether the direct path was taken shows only on storage: for a scratch
 * directory in memory, the direct reads run in one under /var/tmp. */
static void direct_reads_from(const char *dir)
{
	char *disk = NULL;

	if (!in_memory(dir)) {
		test_direct_reads(dir, 1);
	} else if (asprintf(&disk, "/var/tmp/ckunit-XXXXXX") >= 0 && mkdtemp(disk) && !in_memory(disk)) {
		test_direct_reads(disk, 1);
	} else {
		fprintf(stderr, "test_direct_reads: %s and /var/tmp are in memory: the bytes are checked, "
				"not that reads went past the page cache\n", dir);
		test_direct_reads(dir, 0);
	}
	if (disk && access(disk, F_OK) == 0)
		ck_unit_rmtree(disk);
	else
		free(disk);
}

/* Directories another user could have written are refused, naming the
 * path: a symbolic link as the store, the job's directory or the manifest
 * directory, or one of them owned by someone else (root only: chown). */
static void test_refused_dirs(const char *dir)
{
	struct ck_store *s = NULL;
	char path[900], real[600], uri[900];
	void *data = NULL;
	size_t len = 0;
	uint64_t size;
	int fd;

	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(path, sizeof(path), "%s/link", dir);
	CHECK_EQ_INT(mkdir(real, 0700), 0);
	CHECK_EQ_INT(symlink(real, path), 0);
	CHECK_EQ_INT(ck_store_open(path, NULL, &s), 0);
	if (s) {
		CHECK_EQ_INT(ck_store_put(s, "j/manifests/00000001", "m", 1, CK_PUT_NOREPLACE), -EPERM);
		CHECK(strstr(ck_err_msg(), "is a symbolic link") && strstr(ck_err_msg(), path));
		CHECK_EQ_INT(ck_store_probe(s), -EPERM);
		CHECK_EQ_INT(ck_store_open_lock_for_test(s), -EPERM);
		ck_store_close(s);
	}
	/* the job's directory, then the manifest directory, as links */
	CHECK_EQ_INT(ck_store_open(real, NULL, &s), 0);
	if (!s)
		return;
	CHECK_EQ_INT(ck_store_probe(s), 0);
	CHECK_EQ_INT(ck_store_put(s, "a/manifests/00000001", "m", 1, 0), 0);
	snprintf(path, sizeof(path), "%s/b", real);
	snprintf(uri, sizeof(uri), "%s/a", real);
	CHECK_EQ_INT(symlink(uri, path), 0);
	CHECK_EQ_INT(ck_store_get(s, "b/manifests/00000001", &data, &len), -EPERM);
	CHECK(strstr(ck_err_msg(), "/real/b is a symbolic link") != NULL);
	CHECK_EQ_INT(ck_store_stat(s, "b/manifests/00000001", &size), -EPERM);
	snprintf(path, sizeof(path), "%s/c", real);
	CHECK_EQ_INT(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/c/manifests", real);
	snprintf(uri, sizeof(uri), "%s/a/manifests", real);
	CHECK_EQ_INT(symlink(uri, path), 0);
	CHECK_EQ_INT(ck_store_get(s, "c/manifests/00000001", &data, &len), -EPERM);
	CHECK(strstr(ck_err_msg(), "/real/c/manifests is a symbolic link") != NULL);
	/* a manifest that is a link */
	snprintf(path, sizeof(path), "%s/a/manifests/00000002", real);
	snprintf(uri, sizeof(uri), "%s/a/manifests/00000001", real);
	CHECK_EQ_INT(symlink(uri, path), 0);
	CHECK_EQ_INT(ck_store_get(s, "a/manifests/00000002", &data, &len), -EPERM);
	/* another user's job directory */
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/d/manifests", real);
		CHECK_EQ_INT(ck_store_put(s, "d/manifests/00000001", "m", 1, 0), 0);
		CHECK_EQ_INT(chown(path, 65534, 65534), 0);
		CHECK_EQ_INT(ck_store_get(s, "d/manifests/00000001", &data, &len), -EPERM);
		CHECK(strstr(ck_err_msg(), "/real/d/manifests is owned by uid 65534") != NULL);
		CHECK_EQ_INT(ck_store_list(s, "d/manifests/", NULL, NULL), -EPERM);
	}
	free(data);
	ck_store_close(s);
	/* a store that is not there: a reader is told so */
	snprintf(path, sizeof(path), "%s/nothing-here", dir);
	CHECK_EQ_INT(ck_store_open(path, NULL, &s), 0);
	if (s) {
		CHECK_EQ_INT(ck_store_probe(s), -ENXIO);
		CHECK(strstr(ck_err_msg(), "no such directory") != NULL);
		ck_store_close(s);
	}
	(void)fd;
}

/* A pack is never put over an existing one; temporaries have random names
 * and only sweep removes them. */
static void test_new_and_sweep(const char *dir)
{
	struct ck_store *s = NULL;
	struct listed l = {0};
	char path[600];
	unsigned n = 0;
	void *data = NULL;
	size_t len = 0;
	int fd;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (!s)
		return;
	CHECK_EQ_INT(ck_store_put(s, "sw/packs/00000001-0001-ab.pack", "first", 5, CK_PUT_NEW), 0);
	CHECK_EQ_INT(ck_store_put(s, "sw/packs/00000001-0001-ab.pack", "other", 5, CK_PUT_NEW), -EEXIST);
	CHECK_EQ_INT(ck_store_get(s, "sw/packs/00000001-0001-ab.pack", &data, &len), 0);
	CHECK(len == 5 && !memcmp(data, "first", 5));
	free(data);
	/* what a killed writer leaves: hidden temporaries */
	snprintf(path, sizeof(path), "%s/sw/packs/.00000002-0001-cd.pack.tmp-0123456789abcdef", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(ck_store_list(s, "sw/", list_cb, &l), 0);
	CHECK_EQ_INT(l.n, 1);
	CHECK_EQ_INT(ck_store_sweep(s, "sw/packs", &n), 0);
	CHECK_EQ_INT(n, 1);
	CHECK(access(path, F_OK) != 0);
	CHECK_EQ_INT(ck_store_sweep(s, "sw/manifests", &n), 0);
	CHECK_EQ_INT(n, 0);
	ck_store_close(s);
}

void ck_unit_run(void)
{
	char *dir = ck_unit_tmpdir(), *shm = strdup("/dev/shm/ckunit-XXXXXX");

	test_basic(dir);
	test_open_errors(dir);
	test_threads(dir);
	direct_reads_from(dir);
	/* And as where $TMPDIR is a tmpfs (a tmpfs /tmp: Debian 13's default). */
	if (shm && in_memory("/dev/shm") && mkdtemp(shm)) {
		direct_reads_from(shm);
		ck_unit_rmtree(shm);
	} else {
		free(shm);
	}
	test_refused_dirs(dir);
	test_new_and_sweep(dir);
	ck_unit_rmtree(dir);
}
