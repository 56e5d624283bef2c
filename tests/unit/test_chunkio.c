/* Chunk writer and reader: round trips, dedup across rounds, corruption,
 * missing and truncated packs, retention of referenced packs. */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/image/chunkio.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/manifest.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

struct mem {
	uint8_t *p;
	size_t len;
	int fail_at; /* fail reads at this chunk index, or -1 */
};

static int mem_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct mem *m = arg;

	if (m->fail_at >= 0 && off / CK_CHUNK_SIZE == (uint64_t)m->fail_at) {
		ck_err_set("source went away");
		return -EFAULT;
	}
	if (off + len > m->len)
		return -EINVAL;
	memcpy(buf, m->p + off, len);
	return 0;
}

struct sink {
	uint8_t *p;
	size_t len;
	uint64_t expect_off;
	int out_of_order;
};

static int sink_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct sink *s = arg;

	if (off != s->expect_off)
		s->out_of_order = 1;
	if (off + len > s->len)
		return -ERANGE;
	memcpy(s->p + off, buf, len);
	s->expect_off = off + len;
	return 0;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill_random(uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)xorshift();
}

/* Writes regions as one checkpoint and commits it. */
static int write_round(struct ck_store *s, uint64_t seq, const struct ck_manifest *prev, struct mem *regs,
		       int nregs, uint64_t *firsts, uint32_t *ns, struct ck_manifest **out, unsigned threads)
{
	struct ck_writer_opts o = {.level = 3, .threads = threads, .pack_size = 1u << 20};
	struct ck_manifest *m = calloc(1, sizeof(*m));
	struct ck_writer *w;
	int i, rc;

	m->seq = seq;
	rc = ck_writer_open(s, "job", seq, prev, &o, &w);
	if (rc < 0)
		goto fail;
	for (i = 0; i < nregs; i++) {
		rc = ck_writer_add(w, regs[i].len, mem_read, &regs[i], &firsts[i], &ns[i]);
		if (rc < 0) {
			ck_writer_abort(w);
			goto fail;
		}
	}
	rc = ck_writer_finish(w, m);
	if (rc < 0)
		goto fail;
	rc = ck_manifest_commit(s, m);
	if (rc < 0)
		goto fail;
	*out = m;
	return 0;
fail:
	ck_manifest_free(m);
	*out = NULL;
	return rc;
}

static unsigned read_parallel = 3;

static int stop_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	(void)buf;
	(void)len;
	return off >= *(uint64_t *)arg ? -ECANCELED : 0;
}

static int read_back(struct ck_store *s, const struct ck_manifest *m, uint64_t first, uint32_t n,
		     const struct mem *want)
{
	struct sink k = {.p = calloc(1, want->len + 1), .len = want->len};
	struct ck_reader *r;
	uint64_t stop_at = 2 * CK_CHUNK_SIZE;
	int rc;

	rc = ck_reader_open(s, "job", m, &r);
	if (rc == 0) {
		ck_reader_set_parallel(r, read_parallel);
		/* A consumer that gives up early leaves the reader usable. */
		if (n > 3) {
			rc = ck_reader_read(r, first, n, stop_write, &stop_at);
			rc = rc == -ECANCELED ? 0 : rc < 0 ? rc : -1001;
		}
		if (rc == 0)
			rc = ck_reader_read(r, first, n, sink_write, &k);
		ck_reader_close(r);
	}
	if (rc == 0 && (k.expect_off != want->len || k.out_of_order || memcmp(k.p, want->p, want->len)))
		rc = -1000;
	free(k.p);
	return rc;
}

static char *pack_path(const char *dir, const struct ck_manifest *m, uint32_t pack)
{
	char *p;

	if (asprintf(&p, "%s/job/%s", dir, m->packs[pack]) < 0)
		return NULL;
	return p;
}

static void test_rounds(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	struct mem regs[3] = {{0}};
	uint64_t firsts[3];
	uint32_t ns[3];
	struct ck_manifest *m1 = NULL, *m2 = NULL, *l = NULL;
	size_t i, zero = 0, raw = 0, comp = 0;
	int rc;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	/* Random (not compressible), zero, and compressible data; sizes not a
	 * multiple of the chunk size. */
	regs[0].len = 20 * CK_CHUNK_SIZE + 1000;
	regs[0].p = malloc(regs[0].len);
	fill_random(regs[0].p, regs[0].len);
	regs[1].len = 5 * CK_CHUNK_SIZE + 17;
	regs[1].p = calloc(1, regs[1].len);
	regs[2].len = 9 * CK_CHUNK_SIZE;
	regs[2].p = malloc(regs[2].len);
	for (i = 0; i < regs[2].len; i++)
		regs[2].p[i] = (uint8_t)("checkpoint "[i % 11] + (i / 4096) % 3);
	for (i = 0; i < 3; i++)
		regs[i].fail_at = -1;

	rc = write_round(s, 1, NULL, regs, 3, firsts, ns, &m1, 3);
	CHECK_EQ_INT(rc, 0);
	if (rc < 0) {
		fprintf(stderr, "%s\n", ck_err_msg());
		goto out;
	}
	CHECK_EQ_INT(ns[0], 21);
	CHECK_EQ_INT(ns[1], 6);
	CHECK_EQ_INT(ns[2], 9);
	CHECK_EQ_INT(firsts[1], 21);
	CHECK_EQ_INT(m1->nchunks, 36);
	CHECK_EQ_INT(m1->logical_bytes, regs[0].len + regs[1].len + regs[2].len);
	for (i = 0; i < m1->nchunks; i++) {
		uint32_t f = m1->chunks[i].flags;

		zero += !!(f & CK_CHUNK_ZERO);
		raw += !!(f & CK_CHUNK_RAW);
		comp += !f;
	}
	CHECK_EQ_INT(zero, 6);
	CHECK_EQ_INT(raw, 21);
	CHECK(comp >= 1);
	/* Repeating compressible chunks are stored once. */
	CHECK(m1->stored_bytes < regs[0].len + 3 * CK_CHUNK_SIZE);
	CHECK(m1->npacks >= 5); /* 1 MiB packs */
	for (i = 0; i < 3; i++)
		CHECK_EQ_INT(read_back(s, m1, firsts[i], ns[i], &regs[i]), 0);
	read_parallel = 1;
	CHECK_EQ_INT(read_back(s, m1, firsts[0], ns[0], &regs[0]), 0);
	read_parallel = 8;
	CHECK_EQ_INT(read_back(s, m1, firsts[0], ns[0], &regs[0]), 0);
	read_parallel = 3;

	/* Round 2: 1% of the random region changes. */
	for (i = 0; i < regs[0].len / 100; i++)
		regs[0].p[regs[0].len / 3 + i] ^= 0x5a;
	rc = write_round(s, 2, m1, regs, 3, firsts, ns, &m2, 2);
	CHECK_EQ_INT(rc, 0);
	if (rc < 0) {
		fprintf(stderr, "%s\n", ck_err_msg());
		goto out;
	}
	CHECK(m2->stored_bytes * 20 < m2->logical_bytes);
	CHECK(m2->stored_bytes <= 2 * CK_CHUNK_SIZE);
	/* Read round 2 from its committed, decoded manifest: references into
	 * round 1's packs must resolve through round 2's own pack list. */
	CHECK_EQ_INT(ck_manifest_load(s, "job", 2, &l), 0);
	if (l) {
		int old = 0;

		for (i = 0; i < l->npacks; i++)
			old += ck_pack_seq(l->packs[i]) == 1;
		CHECK(old >= 1);
		for (i = 0; i < 3; i++)
			CHECK_EQ_INT(read_back(s, l, firsts[i], ns[i], &regs[i]), 0);
	}

	/* Retention: keep 1 -> manifest 1 goes, packs round 2 uses stay. */
	CHECK_EQ_INT(ck_store_retain(s, "job", 1), 0);
	for (i = 0; l && i < 3; i++)
		CHECK_EQ_INT(read_back(s, l, firsts[i], ns[i], &regs[i]), 0);
	{
		uint64_t *seqs, size;
		size_t n, p;

		CHECK_EQ_INT(ck_manifest_list(s, "job", &seqs, &n), 0);
		CHECK_EQ_INT(n, 1);
		free(seqs);
		/* Only packs round 2 does not use may have gone. */
		for (p = 0; p < m1->npacks; p++) {
			char key[256];
			int used = 0;

			snprintf(key, sizeof(key), "job/%s", m1->packs[p]);
			for (i = 0; l && i < l->npacks; i++)
				used |= !strcmp(l->packs[i], m1->packs[p]);
			if (ck_store_stat(s, key, &size) < 0)
				CHECK(!used);
		}
	}

	/* Corruption: flip one byte of a raw chunk of round 1 still in use. */
	if (l) {
		uint64_t idx = firsts[0];
		const struct ck_chunk *c = &l->chunks[idx];
		char *path = pack_path(dir, l, c->pack), want[256];
		int fd = open(path, O_RDWR);
		uint8_t b;

		CHECK(c->flags & CK_CHUNK_RAW);
		CHECK(fd >= 0);
		pread(fd, &b, 1, (off_t)c->off + 100);
		b ^= 1;
		pwrite(fd, &b, 1, (off_t)c->off + 100);
		close(fd);
		CHECK_EQ_INT(read_back(s, l, firsts[0], ns[0], &regs[0]), -EBADMSG);
		snprintf(want, sizeof(want), "checkpoint job@2: chunk %llu (pack %s, offset %llu): hash mismatch (store %s)",
			 (unsigned long long)idx, l->packs[c->pack], (unsigned long long)c->off, dir);
		CHECK_EQ_STR(ck_err_msg(), want);
		/* Truncated pack. */
		CHECK_EQ_INT(truncate(path, (off_t)c->off + 10), 0);
		CHECK_EQ_INT(read_back(s, l, firsts[0], ns[0], &regs[0]), -EBADMSG);
		CHECK(strstr(ck_err_msg(), "pack truncated") != NULL);
		/* Missing pack. */
		unlink(path);
		CHECK_EQ_INT(read_back(s, l, firsts[0], ns[0], &regs[0]), -ENOENT);
		CHECK(strstr(ck_err_msg(), "pack missing") != NULL);
		free(path);
	}
	/* A compressed chunk with a flipped byte fails too. */
	for (i = 0; l && i < l->nchunks; i++) {
		const struct ck_chunk *c = &l->chunks[i];

		if (!c->flags) {
			char *path = pack_path(dir, l, c->pack);
			int fd = open(path, O_RDWR);
			uint8_t b;

			pread(fd, &b, 1, (off_t)(c->off + c->clen / 2));
			b ^= 0x40;
			pwrite(fd, &b, 1, (off_t)(c->off + c->clen / 2));
			close(fd);
			free(path);
			CHECK_EQ_INT(read_back(s, l, firsts[2], ns[2], &regs[2]), -EBADMSG);
			CHECK(strstr(ck_err_msg(), "checkpoint job@2: chunk ") != NULL);
			break;
		}
	}

	/* A failing source fails the round with its message. */
	{
		struct ck_manifest *m3 = NULL;

		regs[0].fail_at = 3;
		CHECK(write_round(s, 3, NULL, regs, 1, firsts, ns, &m3, 2) == -EFAULT);
		CHECK(strstr(ck_err_msg(), "source went away") != NULL);
		regs[0].fail_at = -1;
	}
out:
	ck_manifest_free(m1);
	ck_manifest_free(m2);
	ck_manifest_free(l);
	for (i = 0; i < 3; i++)
		free(regs[i].p);
	ck_store_close(s);
	ck_unit_rmtree(dir);
}

static void test_small(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	struct mem regs[2] = {{0}};
	uint64_t firsts[2];
	uint32_t ns[2];
	struct ck_manifest *m = NULL;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	/* Empty region, then a one-byte region, single-threaded. */
	regs[0].fail_at = regs[1].fail_at = -1;
	regs[1].len = 1;
	regs[1].p = malloc(1);
	regs[1].p[0] = 7;
	CHECK_EQ_INT(write_round(s, 1, NULL, regs, 2, firsts, ns, &m, 1), 0);
	if (m) {
		CHECK_EQ_INT(ns[0], 0);
		CHECK_EQ_INT(ns[1], 1);
		CHECK_EQ_INT(m->nchunks, 1);
		CHECK_EQ_INT(read_back(s, m, firsts[1], ns[1], &regs[1]), 0);
		CHECK_EQ_INT(read_back(s, m, 1, 1, &regs[1]), -EBADMSG);
	}
	ck_manifest_free(m);
	free(regs[1].p);
	ck_store_close(s);
	ck_unit_rmtree(dir);
}

struct sparse_sink {
	uint8_t *p;
	size_t len;
	unsigned nulls; /* zero chunks passed as NULL */
};

static int sparse_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct sparse_sink *s = arg;

	if (off + len > s->len)
		return -ERANGE;
	if (!buf) {
		s->nulls++;
		return 0; /* the destination already holds zeros */
	}
	memcpy(s->p + off, buf, len);
	return 0;
}

/* Sparse reads hand zero chunks on as NULL and everything else as data;
 * a zero chunk whose recorded hash is wrong still fails. */
static void test_sparse(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	struct mem reg = {.len = 10 * CK_CHUNK_SIZE + 4096, .fail_at = -1};
	struct sparse_sink k = {0};
	struct ck_manifest *m = NULL;
	struct ck_reader *r = NULL;
	uint64_t first;
	uint32_t n, zeros = 0;

	reg.p = calloc(1, reg.len);
	k.len = reg.len;
	k.p = calloc(1, reg.len);
	/* chunks 1, 4, 5 and the tail hold data; the rest are zeros */
	fill_random(reg.p + CK_CHUNK_SIZE, CK_CHUNK_SIZE);
	fill_random(reg.p + 4 * CK_CHUNK_SIZE, 2 * CK_CHUNK_SIZE);
	fill_random(reg.p + 10 * CK_CHUNK_SIZE, 100);
	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	CHECK_EQ_INT(write_round(s, 1, NULL, &reg, 1, &first, &n, &m, 2), 0);
	if (m) {
		for (uint32_t i = 0; i < n; i++)
			zeros += !!(m->chunks[first + i].flags & CK_CHUNK_ZERO);
		CHECK_EQ_INT(zeros, 7);
		CHECK_EQ_INT(ck_reader_open(s, "job", m, &r), 0);
		CHECK_EQ_INT(ck_reader_read_sparse(r, first, n, sparse_write, &k), 0);
		CHECK_EQ_INT(k.nulls, 7);
		CHECK(!memcmp(k.p, reg.p, reg.len));
		m->chunks[first].hash[0] ^= 1; /* chunk 0 is a zero chunk */
		CHECK_EQ_INT(ck_reader_read_sparse(r, first, n, sparse_write, &k), -EBADMSG);
		CHECK(strstr(ck_err_msg(), "chunk") && strstr(ck_err_msg(), "hash mismatch"));
		ck_reader_close(r);
	}
	ck_manifest_free(m);
	free(reg.p);
	free(k.p);
	ck_store_close(s);
	ck_unit_rmtree(dir);
}

/* Generated data: compressible, never repeating, never in memory whole. */
static int gen_read(void *arg, uint64_t off, void *buf, size_t len)
{
	uint64_t x = off * 0x9E3779B97F4A7C15ull + 1, *p = buf;
	size_t i;

	(void)arg;
	for (i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = i % 4 ? (x & 0xff) : x;
	}
	return 0;
}

static int count_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	(void)off;
	(void)buf;
	*(uint64_t *)arg += len;
	return 0;
}

/* Memory stays bounded by packs and batches, not by the data size. */
static void test_bounded(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_writer_opts o = {.threads = 2, .pack_size = 4u << 20};
	struct ck_manifest *m = calloc(1, sizeof(*m));
	struct ck_store *s = NULL;
	struct ck_writer *w = NULL;
	struct ck_reader *r = NULL;
	struct rusage before, after;
	uint64_t len = 96ull << 20, first, got = 0;
	uint32_t n;

	getrusage(RUSAGE_SELF, &before);
	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	CHECK_EQ_INT(ck_writer_open(s, "job", 1, NULL, &o, &w), 0);
	CHECK_EQ_INT(ck_writer_add(w, len, gen_read, NULL, &first, &n), 0);
	CHECK_EQ_INT(ck_writer_finish(w, m), 0);
	CHECK(m->npacks >= 8);
	CHECK(m->stored_bytes < len / 2);
	CHECK_EQ_INT(ck_reader_open(s, "job", m, &r), 0);
	CHECK_EQ_INT(ck_reader_read(r, first, n, count_write, &got), 0);
	CHECK_EQ_INT(got, len);
	ck_reader_close(r);
	getrusage(RUSAGE_SELF, &after);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	/* Two 4 MiB packs, 8 chunk slots, 4 read groups (4.5 MiB stored and up
	 * to 8 MiB decoded each), tables: well below
	 * the 96 MiB that went through. */
	CHECK((after.ru_maxrss - before.ru_maxrss) / 1024 < 48);
#endif
	ck_manifest_free(m);
	ck_store_close(s);
	ck_unit_rmtree(dir);
}

/* Several packs uploaded at once (as for S3): every pack lands, the
 * manifest names them all, and the data reads back in order. */
static void test_uploads_in_flight(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	struct ck_manifest *m = NULL;
	struct mem reg = {0};
	uint64_t first = 0;
	uint32_t n = 0;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	s->puts_in_flight = 3;
	reg.len = 40 * CK_CHUNK_SIZE + 123; /* random: about 10 packs of 1 MiB */
	reg.p = malloc(reg.len);
	reg.fail_at = -1;
	fill_random(reg.p, reg.len);
	CHECK_EQ_INT(write_round(s, 1, NULL, &reg, 1, &first, &n, &m, 2), 0);
	if (m) {
		CHECK(m->npacks >= 9);
		for (uint32_t i = 0; i < m->npacks; i++) {
			char *path = pack_path(dir, m, i);
			CHECK(path && access(path, R_OK) == 0);
			free(path);
		}
		CHECK_EQ_INT(read_back(s, m, first, n, &reg), 0);
	}
	ck_manifest_free(m);
	free(reg.p);
	ck_store_close(s);
	ck_unit_rmtree(dir);
}

void ck_unit_run(void)
{
	test_bounded(); /* first: it measures the peak memory */
	test_small();
	test_sparse();
	test_rounds();
	test_uploads_in_flight();
}
