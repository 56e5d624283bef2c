/* ckpt cp SRC_STORE DST_STORE JOB[@SEQ]: copies committed checkpoints.
 *
 * Only what the destination lacks crosses: a checkpoint refers to the
 * packs of earlier ones for the chunks that did not change, so once one
 * checkpoint is at the destination, the next sends its new packs alone.
 * Each store may have its own credentials and endpoint (--from-profile,
 * --to-profile): moving a job between sites.
 *
 * For each checkpoint, oldest first: a pack that a checkpoint committed at
 * the destination already names (same size) is left as it is; every other
 * pack it references is fetched (from the destination when an object of
 * the same size is already there, else from the source), every chunk in it
 * is checked against the manifest, and only then is the pack written; the manifest goes last, with
 * its original bytes, so the destination never shows a checkpoint whose data
 * is not all there. A few packs are copied at once (CP_PARALLEL threads,
 * each fetching, checking and writing its own pack), so that checking one
 * overlaps the transfers of others: bounded memory, a pack per thread. */
#include "launcher/ckpt/cli.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "launcher/image/chunk.h"
#include "launcher/image/restore_log.h"
#include "launcher/common/ck_err.h"
#include "launcher/common/progress.h"
#include "launcher/store/joblock.h"

#define CP_PARALLEL 4 /* packs copied at once */

/* The packs of one checkpoint, and the threads copying them. */
struct cp_ctx {
	struct ck_store *src, *dst;
	const char *job;
	struct ck_manifest *m;
	struct ck_progress prog;
	pthread_mutex_t lock;
	/* under lock: */
	uint64_t done;
	unsigned copied, skipped;
	uint64_t copied_bytes;  /* sent to the destination: packs */
	uint64_t checked_bytes; /* read back at the destination to check them */
	uint64_t sent_bytes;    /* packs and manifests */
	size_t next; /* the next run of runs[] to take */
	int rc;      /* the first failure; the others stop taking packs */
	char err[1024];
	/* the chunks of idx[] sorted by pack; run k: idx[runs[k]..runs[k+1]) */
	size_t *idx, *runs, nruns;
	uint64_t *psize; /* size of each pack in the source (UINT64_MAX: missing) */
	uint64_t *dsize; /* and in the destination */
	/* 1: a checkpoint committed at the destination names the pack, so it
	 * was checked on its way there: not read back */
	unsigned char *named;
};

static const struct ck_manifest *ck__sort_m;

static int by_pack(const void *a, const void *b)
{
	const struct ck_chunk *x = &ck__sort_m->chunks[*(const size_t *)a];
	const struct ck_chunk *y = &ck__sort_m->chunks[*(const size_t *)b];

	if (x->pack != y->pack)
		return x->pack < y->pack ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Sizes of the objects under a prefix, from one listing: a HEAD per pack
 * (two per pack with the destination) cost more than the copy of a small
 * pack. */
struct cp_sizes {
	struct cp_size {
		char *key;
		uint64_t size;
	} *v;
	size_t n, cap;
};

static int cp_sizes_add(void *arg, const char *key, uint64_t size)
{
	struct cp_sizes *z = arg;

	if (z->n == z->cap) {
		size_t cap = z->cap ? 2 * z->cap : 256;
		struct cp_size *v = realloc(z->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		z->v = v;
		z->cap = cap;
	}
	z->v[z->n].key = strdup(key);
	if (!z->v[z->n].key)
		return -ENOMEM;
	z->v[z->n++].size = size;
	return 0;
}

static int cp_size_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cp_size *)a)->key, ((const struct cp_size *)b)->key);
}

static void cp_sizes_free(struct cp_sizes *z)
{
	for (size_t i = 0; i < z->n; i++)
		free(z->v[i].key);
	free(z->v);
	memset(z, 0, sizeof(*z));
}

static int cp_sizes_list(struct ck_store *s, const char *job, struct cp_sizes *z)
{
	char prefix[300];
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/packs/", job);
	rc = ck_store_list(s, prefix, cp_sizes_add, z);
	if (rc == -ENOENT)
		rc = 0; /* nothing there yet */
	if (rc == 0 && z->n)
		qsort(z->v, z->n, sizeof(*z->v), cp_size_cmp);
	if (rc == -ENOMEM)
		ck_err_set("out of memory");
	return rc;
}

/* The size of key in z, or UINT64_MAX when it is not there. */
static uint64_t cp_size_of(const struct cp_sizes *z, const char *key)
{
	struct cp_size k = {(char *)key, 0}, *f;

	f = z->n ? bsearch(&k, z->v, z->n, sizeof(*z->v), cp_size_cmp) : NULL;
	return f ? f->size : UINT64_MAX;
}

/* The packs that the checkpoints committed at the destination name (those
 * that load: with --sign-key, those signed with it). Each came there
 * through a copy that checked every chunk before its put, or from a writer
 * that committed it; a restore checks every chunk again, and ckpt verify
 * reads them all. */
static int cp_named_list(struct ck_store *dst, const char *job, struct cp_sizes *z)
{
	uint64_t *seqs = NULL;
	size_t n = 0, i, j;
	char key[600];
	int rc;

	rc = ck_manifest_list(dst, job, &seqs, &n);
	if (rc == -ENOENT)
		rc = 0;
	for (i = 0; rc == 0 && i < n; i++) {
		struct ck_manifest *m = NULL;

		if (ck_manifest_load(dst, job, seqs[i], &m) < 0)
			continue; /* not trusted: its packs are read back */
		for (j = 0; rc == 0 && j < m->npacks; j++) {
			snprintf(key, sizeof(key), "%s/%s", job, m->packs[j]);
			rc = cp_sizes_add(z, key, 0);
		}
		ck_manifest_free(m);
	}
	free(seqs);
	if (rc == 0 && z->n)
		qsort(z->v, z->n, sizeof(*z->v), cp_size_cmp);
	if (rc == -ENOMEM)
		ck_err_set("out of memory");
	return rc;
}

/* Checks chunks idx[0..n) (all in one pack) against the pack's bytes. */
static int check_pack(struct cp_ctx *c, uint8_t *scratch, struct ck_store *from, const char *pack, const uint8_t *buf,
		      size_t len, const size_t *idx, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct ck_chunk *k = &c->m->chunks[idx[i]];
		const char *why;
		int rc;

		if (k->off > len || k->clen > len - k->off) {
			ck_err_set("checkpoint %s@%llu: chunk %zu (pack %s, offset %llu): pack truncated (%zu bytes) "
				   "(store %s)",
				   c->job, (unsigned long long)c->m->seq, idx[i], pack, (unsigned long long)k->off, len,
				   from->uri);
			return -EBADMSG;
		}
		rc = ck_chunk_verify(k, buf + k->off, scratch, &why);
		if (rc < 0) {
			ck_err_set("checkpoint %s@%llu: chunk %zu (pack %s, offset %llu): %s (store %s)", c->job,
				   (unsigned long long)c->m->seq, idx[i], pack, (unsigned long long)k->off, why,
				   from->uri);
			return rc;
		}
	}
	return 0;
}

/* A copying thread's buffers: one pack, and one decoded chunk. The pack
 * buffer is kept from pack to pack and backed by huge pages where the
 * kernel has them: fresh memory for every pack cost a page fault per 4 KiB
 * (on a VM a trip to the hypervisor each), which was most of the copy's
 * system time. */
struct cp_buf {
	uint8_t *p;
	size_t cap;
	uint8_t *scratch;
};

static int cp_buf_reserve(struct cp_buf *b, size_t len)
{
	size_t cap = (len + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	void *p;

	if (len <= b->cap)
		return 0;
	if (b->p)
		munmap(b->p, b->cap);
	b->p = NULL;
	b->cap = 0;
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		ck_err_set("cannot allocate %zu bytes for a pack: %s", cap, strerror(errno));
		return -ENOMEM;
	}
	(void)madvise(p, cap, MADV_HUGEPAGE);
	b->p = p;
	b->cap = cap;
	return 0;
}

/* The whole pack key (size known) into the thread's buffer. */
static int cp_fetch(struct ck_store *from, const char *key, uint64_t size, struct cp_buf *b)
{
	int rc = cp_buf_reserve(b, (size_t)size);

	return rc < 0 ? rc : ck_store_get_range(from, key, 0, b->p, (size_t)size);
}

static int copy_pack(struct cp_ctx *c, struct cp_buf *b, uint32_t p, const size_t *idx, size_t n)
{
	const char *pack = c->m->packs[p];
	struct ck_store *from = c->src;
	uint64_t ssize = c->psize[p], dsize = 0;
	char key[512];
	size_t len = 0;
	int rc, copied = 0;

	snprintf(key, sizeof(key), "%s/%s", c->job, pack);
	if (ssize == UINT64_MAX) {
		ck_err_set("checkpoint %s@%llu: chunk %zu (pack %s, offset %llu): pack missing (store %s)", c->job,
			   (unsigned long long)c->m->seq, idx[0], pack, (unsigned long long)c->m->chunks[idx[0]].off,
			   c->src->uri);
		return -ENOENT;
	}
	if (c->dsize[p] == ssize && c->named[p]) {
		pthread_mutex_lock(&c->lock);
		c->skipped++;
		c->done += ssize;
		ck_progress_set(&c->prog, c->done);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (c->dsize[p] == ssize)
		from = c->dst; /* there, but no checkpoint there names it: check it in place */
	len = (size_t)ssize;
	rc = cp_fetch(from, key, ssize, b);
	if (rc == 0)
		rc = check_pack(c, b->scratch, from, pack, b->p, len, idx, n);
	if (rc < 0 && from == c->dst) {
		/* A damaged copy at the destination is replaced, not trusted. */
		from = c->src;
		rc = cp_fetch(from, key, ssize, b);
		if (rc == 0)
			rc = check_pack(c, b->scratch, from, pack, b->p, len, idx, n);
	}
	if (rc == -EIO && ck_store_stat(from, key, &dsize) == 0 && dsize != ssize) {
		ck_err_set("checkpoint %s@%llu: pack %s changed size while copied (%llu bytes, then %llu) (store %s)",
			   c->job, (unsigned long long)c->m->seq, pack, (unsigned long long)ssize,
			   (unsigned long long)dsize, from->uri);
		rc = -EBADMSG;
	}
	if (rc == 0 && from == c->src) {
		rc = ck_store_put(c->dst, key, b->p, len, 0);
		copied = 1;
	}
	pthread_mutex_lock(&c->lock);
	if (rc == 0 && copied) {
		c->copied++;
		c->copied_bytes += len;
	} else if (rc == 0) {
		c->skipped++;
		c->checked_bytes += len;
	}
	c->done += ssize;
	ck_progress_set(&c->prog, c->done);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* One copying thread: takes the next pack until none is left or one
 * failed. */
static void *copier(void *arg)
{
	struct cp_ctx *c = arg;
	struct cp_buf b = {NULL, 0, malloc(CK_CHUNK_SIZE)};

	for (;;) {
		size_t k;
		int rc;

		pthread_mutex_lock(&c->lock);
		if (!b.scratch && !c->rc) {
			c->rc = -ENOMEM;
			snprintf(c->err, sizeof(c->err), "out of memory");
		}
		if (c->rc || c->next == c->nruns) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		k = c->next++;
		pthread_mutex_unlock(&c->lock);
		rc = copy_pack(c, &b, c->m->chunks[c->idx[c->runs[k]]].pack, c->idx + c->runs[k],
			       c->runs[k + 1] - c->runs[k]);
		if (rc < 0) {
			pthread_mutex_lock(&c->lock);
			if (!c->rc) {
				c->rc = rc;
				snprintf(c->err, sizeof(c->err), "%s", ck_err_msg());
			}
			pthread_mutex_unlock(&c->lock);
			break;
		}
	}
	free(b.scratch);
	if (b.p)
		munmap(b.p, b.cap);
	return NULL;
}

/* Copies every run of packs with up to CP_PARALLEL threads. */
static int copy_packs(struct cp_ctx *c)
{
	pthread_t th[CP_PARALLEL];
	unsigned n = 0, i;

	c->next = 0;
	c->rc = 0;
	c->err[0] = 0;
	for (i = 0; i < CP_PARALLEL && i < c->nruns; i++) {
		if (pthread_create(&th[n], NULL, copier, c) != 0)
			break;
		n++;
	}
	if (!n && c->nruns)
		copier(c); /* no thread to be had: this one does it all */
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (c->rc < 0)
		ck_err_set("%s", c->err);
	return c->rc;
}

static int copy_one(struct cp_ctx *c, uint64_t seq)
{
	void *mbuf = NULL, *old = NULL;
	size_t mlen = 0, oldlen = 0, i, j, *idx = NULL, nz = 0, *runs = NULL, nruns = 0;
	uint64_t *psize = NULL, *dsize = NULL;
	uint8_t *zscratch = NULL;
	struct cp_sizes ssz = {0}, dsz = {0}, named = {0};
	unsigned char *isnamed = NULL;
	uint64_t total = 0, sent0 = c->copied_bytes, checked0 = c->checked_bytes;
	unsigned copied0 = c->copied, skipped0 = c->skipped;
	char key[300], what[300], b1[32], b2[32], b3[32];
	int rc;

	ck_manifest_key(c->job, seq, key, sizeof(key));
	rc = ck_store_get(c->src, key, &mbuf, &mlen);
	if (rc < 0)
		goto out;
	rc = ck_manifest_decode(mbuf, mlen, &c->m);
	if (rc == 0 && (c->m->seq != seq || strcmp(c->m->job, c->job))) {
		ck_err_set("manifest describes %s@%llu", c->m->job, (unsigned long long)c->m->seq);
		rc = -EBADMSG;
	}
	if (rc < 0) {
		ck_err_wrap("checkpoint %s@%llu (store %s)", c->job, (unsigned long long)seq, c->src->uri);
		goto out;
	}
	/* Already copied? Identical bytes are fine, anything else is not. */
	if (ck_store_get(c->dst, key, &old, &oldlen) == 0) {
		if (oldlen == mlen && !memcmp(old, mbuf, mlen)) {
			printf("%s@%llu: already in %s\n", c->job, (unsigned long long)seq, c->dst->uri);
			goto out;
		}
		ck_err_set("checkpoint %s@%llu: store %s already holds a different checkpoint of that number",
			   c->job, (unsigned long long)seq, c->dst->uri);
		rc = -EEXIST;
		goto out;
	}
	idx = malloc((c->m->nchunks + 1) * sizeof(*idx));
	zscratch = malloc(CK_CHUNK_SIZE);
	if (!idx || !zscratch) {
		rc = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	for (i = 0; i < c->m->nchunks; i++) {
		if (c->m->chunks[i].flags & CK_CHUNK_ZERO) {
			const char *why;

			if (ck_chunk_verify(&c->m->chunks[i], NULL, zscratch, &why) < 0) {
				ck_err_set("checkpoint %s@%llu: chunk %zu (zero chunk): %s (store %s)", c->job,
					   (unsigned long long)seq, i, why, c->src->uri);
				rc = -EBADMSG;
				goto out;
			}
			continue;
		}
		idx[nz++] = i;
	}
	ck__sort_m = c->m;
	if (nz)
		qsort(idx, nz, sizeof(*idx), by_pack);
	runs = malloc((nz + 1) * sizeof(*runs));
	psize = malloc((c->m->npacks + 1) * sizeof(*psize));
	dsize = malloc((c->m->npacks + 1) * sizeof(*dsize));
	isnamed = calloc(c->m->npacks + 1, 1);
	if (!runs || !psize || !dsize || !isnamed) {
		rc = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	if ((rc = cp_sizes_list(c->src, c->job, &ssz)) < 0 || (rc = cp_sizes_list(c->dst, c->job, &dsz)) < 0 ||
	    (rc = cp_named_list(c->dst, c->job, &named)) < 0)
		goto out;
	for (i = 0; i < c->m->npacks; i++) {
		snprintf(what, sizeof(what), "%s/%s", c->job, c->m->packs[i]);
		psize[i] = cp_size_of(&ssz, what); /* missing: named by the copy */
		dsize[i] = cp_size_of(&dsz, what);
		isnamed[i] = cp_size_of(&named, what) != UINT64_MAX;
		total += psize[i] != UINT64_MAX ? psize[i] : 0;
	}
	for (i = 0; i < nz; i = j) {
		uint32_t p = c->m->chunks[idx[i]].pack;

		for (j = i; j < nz && c->m->chunks[idx[j]].pack == p; j++)
			;
		runs[nruns++] = i;
	}
	runs[nruns] = nz;
	c->idx = idx;
	c->runs = runs;
	c->nruns = nruns;
	c->psize = psize;
	c->dsize = dsize;
	c->named = isnamed;
	snprintf(what, sizeof(what), "copy %s@%llu", c->job, (unsigned long long)seq);
	ck_progress_start(&c->prog, what, total);
	c->done = 0;
	rc = copy_packs(c);
	ck_progress_end(&c->prog);
	if (rc < 0)
		goto out;
	rc = ck_store_put(c->dst, key, mbuf, mlen, CK_PUT_NOREPLACE);
	if (rc == 0) {
		/* what crossed against what the checkpoint stores: the delta */
		uint64_t sent = c->copied_bytes - sent0 + mlen;

		c->sent_bytes += sent;
		ck_fmt_bytes(sent, b1, sizeof(b1));
		ck_fmt_bytes(total + mlen, b2, sizeof(b2));
		ck_fmt_bytes(c->checked_bytes - checked0, b3, sizeof(b3));
		printf("%s@%llu: copied to %s: %llu of its %llu bytes sent (%s of %s; %u pack%s, %u already there, "
		       "%s read back to check them)\n",
		       c->job, (unsigned long long)seq, c->dst->uri, (unsigned long long)sent,
		       (unsigned long long)(total + mlen), b1, b2, c->copied - copied0,
		       c->copied - copied0 == 1 ? "" : "s", c->skipped - skipped0, b3);
	}
out:
	free(idx);
	free(runs);
	free(psize);
	free(dsize);
	free(isnamed);
	free(zscratch);
	cp_sizes_free(&ssz);
	cp_sizes_free(&dsz);
	cp_sizes_free(&named);
	c->idx = c->runs = NULL;
	c->psize = c->dsize = NULL;
	c->named = NULL;
	free(old);
	free(mbuf);
	ck_manifest_free(c->m);
	c->m = NULL;
	return rc;
}

/* The job's restore records go along (ckpt report at the destination
 * shows its history); one already there is the same record. */
static int copy_restores(struct cp_ctx *c)
{
	struct ck_restore_rec *v = NULL;
	size_t n = 0, bad = 0;
	int rc = ck_restore_log_list(c->src, c->job, &v, &n, &bad);

	for (size_t i = 0; rc == 0 && i < n; i++)
		if ((rc = ck_restore_log_put(c->dst, c->job, &v[i])) == -EEXIST)
			rc = 0;
	free(v);
	return rc;
}

int ckpt_cmd_cp(int argc, char **argv)
{
	struct ck_joblock *lock = NULL;
	struct cp_ctx c = {0};
	struct ckpt_opts o;
	struct ck_store_opts so, dso;
	uint64_t seq, *seqs = NULL;
	size_t n = 0, i;
	char job[256], b[32];
	int a, rc;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_SITES, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 3)
		return ckpt_usage_error("cp: expected SRC_STORE DST_STORE JOB[@SEQ]");
	if (ckpt_parse_ref(argv[a + 2], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("cp: %s", ck_err_msg());
	if (o.from_profile && strncmp(argv[a], "s3://", 5))
		return ckpt_usage_error("cp: --from-profile names an S3 site, and %s is not s3://", argv[a]);
	if (o.to_profile && strncmp(argv[a + 1], "s3://", 5))
		return ckpt_usage_error("cp: --to-profile names an S3 site, and %s is not s3://", argv[a + 1]);
	c.job = job;
	pthread_mutex_init(&c.lock, NULL);
	/* each side its own site: --from-profile/--to-profile, else --s3-profile */
	so = dso = o.sopts;
	if (o.from_profile)
		so.s3_profile = o.from_profile;
	if (o.to_profile)
		dso.s3_profile = o.to_profile;
	rc = ckpt_open_store(argv[a], &so, 1, &c.src);
	if (rc == 0)
		rc = ckpt_open_store(argv[a + 1], &dso, 0, &c.dst);
	/* The copy writes the job at the destination: one writer at a time. */
	if (rc == 0)
		rc = ck_joblock_acquire(c.dst, job, "ckpt cp", 0, &lock);
	if (rc < 0)
		goto out;
	if (seq) {
		rc = copy_one(&c, seq);
		goto out;
	}
	rc = ck_manifest_list(c.src, job, &seqs, &n);
	if (rc == 0 && n == 0) {
		ck_err_set("job %s has no checkpoint in store %s", job, c.src->uri);
		rc = -ENOENT;
	}
	for (i = 0; rc == 0 && i < n; i++)
		rc = copy_one(&c, seqs[i]);
out:
	if (rc == 0)
		rc = copy_restores(&c);
	if (rc == 0) {
		ck_fmt_bytes(c.copied_bytes, b, sizeof(b));
		/* exact bytes for scripts: what a move between sites cost */
		printf("%s: %u pack%s copied (%s), %u already present; %llu bytes sent\n", job, c.copied,
		       c.copied == 1 ? "" : "s", b, c.skipped, (unsigned long long)c.sent_bytes);
	}
	free(seqs);
	pthread_mutex_destroy(&c.lock);
	ck_joblock_release(lock);
	ck_store_close(c.src);
	ck_store_close(c.dst);
	return rc < 0 ? ckpt_fail(rc) : 0;
}
