/* Chunk writer and reader: round trips, dedup across rounds, corruption,
 * missing and truncated packs, retention of referenced packs. */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/image/chunk.h"
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

/* A source that answers probes (CK_WADD_PROBE) and says "zeros" for an
 * empty chunk it is asked to read, as a sparse process's memory does. */
struct probed {
	struct mem m;
	unsigned probes, zero_probes, reads;
};

static int probed_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct probed *p = arg;
	int empty;

	if (off + len > p->m.len)
		return -EINVAL;
	empty = ck_chunk_is_zero(p->m.p + off, len);
	if (!buf) {
		p->probes++;
		p->zero_probes += empty;
		return empty ? CK_READ_ZEROS : 0;
	}
	p->reads++;
	if (empty)
		return CK_READ_ZEROS; /* buf left as it was */
	memcpy(buf, p->m.p + off, len);
	return 0;
}

/* Probed zero runs give the same chunk table as zeros read and scanned
 * (a partial last chunk included), without reading most of them. */
static void test_probe(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_writer_opts o = {.level = 3, .threads = 2, .pack_size = 1u << 20};
	const size_t lens[2] = {300 * CK_CHUNK_SIZE + 8192, 20 * CK_CHUNK_SIZE + 4096};
	struct ck_store *s = NULL;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	for (int t = 0; t < 2; t++) {
		struct probed pr = {.m = {.len = lens[t], .fail_at = -1}};
		struct ck_manifest *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
		struct ck_writer *w = NULL;
		struct ck_reader *r = NULL;
		uint64_t fa = 0, fb = 0;
		uint32_t na = 0, nb = 0;
		struct sink k = {.len = lens[t]};

		pr.m.p = calloc(1, lens[t]);
		k.p = malloc(lens[t]);
		memset(k.p, 0xa5, lens[t]);
		if (t == 0) { /* data in a few chunks and in the partial tail; region 1 all zeros */
			fill_random(pr.m.p + 3 * CK_CHUNK_SIZE, 100);
			fill_random(pr.m.p + 90 * CK_CHUNK_SIZE + 5000, CK_CHUNK_SIZE);
			fill_random(pr.m.p + 299 * CK_CHUNK_SIZE, CK_CHUNK_SIZE + 10);
		}
		CHECK_EQ_INT(ck_writer_open(s, "job", (uint64_t)(2 * t + 1), NULL, &o, &w), 0);
		CHECK_EQ_INT(ck_writer_add_at(w, 0, 0, lens[t], mem_read, &pr.m, &fa, &na), 0);
		CHECK_EQ_INT(ck_writer_finish(w, a), 0);
		CHECK_EQ_INT(ck_writer_open(s, "job", (uint64_t)(2 * t + 2), NULL, &o, &w), 0);
		CHECK_EQ_INT(ck_writer_add_at(w, 0, CK_WADD_PROBE, lens[t], probed_read, &pr, &fb, &nb), 0);
		CHECK_EQ_INT(ck_writer_finish(w, b), 0);
		CHECK_EQ_INT(na, nb);
		for (uint32_t i = 0; i < na && i < nb; i++) {
			const struct ck_chunk *x = &a->chunks[fa + i], *y = &b->chunks[fb + i];
			CHECK(!memcmp(x->hash, y->hash, CK_HASH_LEN));
			CHECK_EQ_INT(x->len, y->len);
			CHECK_EQ_INT(x->flags & CK_CHUNK_ZERO, y->flags & CK_CHUNK_ZERO);
		}
		CHECK(pr.zero_probes > 0);
		/* most of the 300 chunks were never read */
		CHECK(pr.reads < (t == 0 ? 60u : 1u));
		CHECK_EQ_INT(ck_reader_open(s, "job", b, &r), 0);
		CHECK_EQ_INT(ck_reader_read(r, fb, nb, sink_write, &k), 0);
		CHECK(!memcmp(k.p, pr.m.p, lens[t]));
		ck_reader_close(r);
		ck_manifest_free(a);
		ck_manifest_free(b);
		free(pr.m.p);
		free(k.p);
	}
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


/* Regions at the same address in a parent (BASE) and its forked children
 * (DELTA): a child's chunk that differs in a few pages is stored as those
 * pages; read back exactly, through a store, across a second round. */
struct dreg {
	struct mem m;
	uint64_t vaddr;
	unsigned how;
	uint64_t first;
	uint32_t n;
};

static int write_deltas(struct ck_store *s, uint64_t seq, const struct ck_manifest *prev, struct dreg *r, int nr,
			struct ck_manifest **out)
{
	struct ck_writer_opts o = {.level = 1, .threads = 2, .pack_size = 1u << 20};
	struct ck_manifest *m = calloc(1, sizeof(*m));
	struct ck_writer *w;
	int i, rc;

	m->seq = seq;
	rc = ck_writer_open(s, "job", seq, prev, &o, &w);
	for (i = 0; rc == 0 && i < nr; i++) {
		rc = ck_writer_add_at(w, r[i].vaddr, r[i].how, r[i].m.len, mem_read, &r[i].m, &r[i].first, &r[i].n);
		if (rc < 0)
			ck_writer_abort(w);
	}
	if (rc == 0)
		rc = ck_writer_finish(w, m);
	if (rc == 0)
		rc = ck_manifest_commit(s, m);
	if (rc < 0) {
		ck_manifest_free(m);
		m = NULL;
	}
	*out = m;
	return rc;
}

static unsigned count_flag(const struct ck_manifest *m, const struct dreg *r, uint32_t flag)
{
	unsigned k = 0;

	for (uint32_t i = 0; i < r->n; i++)
		k += !!(m->chunks[r->first + i].flags & flag);
	return k;
}

static void change_pages(uint8_t *p, unsigned chunk, unsigned npages)
{
	for (unsigned i = 0; i < npages; i++)
		p[(size_t)chunk * CK_CHUNK_SIZE + i * 4096 + 100] ^= 0x5a;
}

static void test_delta(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	size_t len = 8 * CK_CHUNK_SIZE - 1000, i;
	struct dreg r[5];
	struct ck_manifest *m = NULL, *m2 = NULL, *back = NULL;
	uint64_t va = 0x7f0000000000ull;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	memset(r, 0, sizeof(r));
	for (i = 0; i < 5; i++) {
		r[i].m.p = malloc(len);
		r[i].m.len = len;
		r[i].m.fail_at = -1;
		r[i].vaddr = va;
	}
	/* the parent: words (compressible, as memory is) */
	for (i = 0; i < len; i++)
		r[0].m.p[i] = (uint8_t)(xorshift() % 16);
	r[0].how = CK_WADD_BASE;
	memcpy(r[1].m.p, r[0].m.p, len);
	change_pages(r[1].m.p, 1, 1);  /* one page: a delta */
	change_pages(r[1].m.p, 2, 64); /* every page: stored whole */
	change_pages(r[1].m.p, 3, 48); /* three quarters: a delta */
	change_pages(r[1].m.p, 4, 49); /* more: stored whole */
	r[1].m.p[len - 1] ^= 1;        /* the last chunk's short page */
	r[1].how = CK_WADD_DELTA;
	memcpy(r[2].m.p, r[1].m.p, len); /* a second child, the same bytes */
	r[2].how = CK_WADD_DELTA;
	memcpy(r[3].m.p, r[1].m.p, len); /* not a child: no delta */
	r[3].m.p[0] ^= 2;
	r[3].m.p[CK_CHUNK_SIZE + 200] ^= 2;
	r[3].how = 0;
	memcpy(r[4].m.p, r[3].m.p, len); /* a child, but elsewhere */
	r[4].m.p[1] ^= 2;
	r[4].m.p[CK_CHUNK_SIZE + 201] ^= 2;
	r[4].vaddr = va + 4096 * 3;
	r[4].how = CK_WADD_DELTA;
	CHECK_EQ_INT(write_deltas(s, 1, NULL, r, 5, &m), 0);
	if (!m)
		goto out;
	CHECK_EQ_INT(count_flag(m, &r[0], CK_CHUNK_DELTA), 0);
	CHECK_EQ_INT(count_flag(m, &r[1], CK_CHUNK_DELTA), 3);
	CHECK(m->chunks[r[1].first + 1].flags & CK_CHUNK_DELTA);
	CHECK(m->chunks[r[1].first + 3].flags & CK_CHUNK_DELTA);
	CHECK(m->chunks[r[1].first + 7].flags & CK_CHUNK_DELTA);
	CHECK(m->chunks[r[1].first + 1].clen < 4096);
	CHECK_EQ_INT(count_flag(m, &r[2], CK_CHUNK_DELTA), 3); /* the first child's, again */
	CHECK_EQ_INT(m->chunks[r[2].first + 1].off, m->chunks[r[1].first + 1].off);
	/* (their chunks that equal the first child's are its deltas) */
	for (i = 3; i < 5; i++) {
		CHECK(!(m->chunks[r[i].first].flags & CK_CHUNK_DELTA));
		CHECK(!(m->chunks[r[i].first + 1].flags & CK_CHUNK_DELTA));
	}
	for (i = 0; i < 5; i++)
		CHECK_EQ_INT(read_back(s, m, r[i].first, r[i].n, &r[i].m), 0);
	/* the manifest as stored passes the decoder's checks */
	CHECK_EQ_INT(ck_manifest_load(s, "job", 1, &back), 0);
	if (back)
		CHECK_EQ_INT(read_back(s, back, r[1].first, r[1].n, &r[1].m), 0);
	ck_manifest_free(back);
	{
		/* a copy's check: the frame, without the base */
		const struct ck_chunk *c = &m->chunks[r[1].first + 1];
		char *path = pack_path(dir, m, c->pack);
		uint8_t *st = malloc(c->clen), *scratch = malloc(CK_CHUNK_SIZE);
		const char *why;
		int fd = open(path, O_RDWR);

		CHECK(fd >= 0 && pread(fd, st, c->clen, (off_t)c->off) == (ssize_t)c->clen);
		CHECK_EQ_INT(ck_chunk_verify(c, st, scratch, &why), 0);
		st[c->clen - 2] ^= 0x10;
		CHECK_EQ_INT(ck_chunk_verify(c, st, scratch, &why), -EBADMSG);
		st[c->clen - 2] ^= 0x10;
		st[CK_HASH_LEN] = 0; /* no page */
		st[CK_HASH_LEN + 1] = 0;
		CHECK_EQ_INT(ck_chunk_verify(c, st, scratch, &why), -EBADMSG);
		CHECK(why && !strcmp(why, "bad delta header"));
		close(fd);
		free(st);
		free(scratch);
		free(path);
	}
	/* a second round: the child's deltas are made again against the
	 * parent's chunks (reused from round 1) */
	change_pages(r[1].m.p, 5, 2);
	CHECK_EQ_INT(write_deltas(s, 2, m, r, 2, &m2), 0);
	if (m2) {
		CHECK_EQ_INT(count_flag(m2, &r[1], CK_CHUNK_DELTA), 4);
		CHECK(m2->stored_bytes < CK_CHUNK_SIZE);
		CHECK_EQ_INT(read_back(s, m2, r[1].first, r[1].n, &r[1].m), 0);
	}
	{
		/* the parent's chunk, the base, corrupted in its pack: the
		 * child's read names it */
		const struct ck_chunk *b = &m->chunks[r[0].first + 1];
		char *path = pack_path(dir, m, b->pack);
		int fd = open(path, O_RDWR);
		uint8_t x;

		CHECK(fd >= 0 && pread(fd, &x, 1, (off_t)b->off + b->clen / 2) == 1);
		x ^= 0xff;
		CHECK(pwrite(fd, &x, 1, (off_t)b->off + b->clen / 2) == 1);
		close(fd);
		free(path);
		CHECK(read_back(s, m, r[1].first, r[1].n, &r[1].m) == -EBADMSG);
		CHECK(strstr(ck_err_msg(), "the base of a delta") != NULL);
	}
out:
	ck_manifest_free(m);
	ck_manifest_free(m2);
	for (i = 0; i < 5; i++)
		free(r[i].m.p);
	ck_store_close(s);
	ck_unit_rmtree(dir);
}

void ck_unit_run(void)
{
	test_bounded(); /* first: it measures the peak memory */
	test_small();
	test_sparse();
	test_probe();
	test_rounds();
	test_uploads_in_flight();
	test_delta();
}
