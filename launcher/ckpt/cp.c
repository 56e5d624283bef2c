/* ckpt cp SRC_STORE DST_STORE JOB[@SEQ]: copies committed checkpoints.
 *
 * For each checkpoint, oldest first: every pack it references is fetched
 * (from the destination when an object of the same size is already there,
 * else from the source), every chunk in it is checked against the
 * manifest, and only then is the pack written; the manifest goes last, with
 * its original bytes, so the destination never shows a checkpoint whose data
 * is not all there. */
#include "launcher/ckpt/ckpt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/chunkio_int.h"
#include "launcher/ck_err.h"

struct cp_ctx {
	struct ck_store *src, *dst;
	const char *job;
	struct ck_manifest *m;
	uint8_t *scratch;
	struct ckpt_progress prog;
	uint64_t done;
	unsigned copied, skipped;
	uint64_t copied_bytes;
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

/* Checks chunks idx[0..n) (all in one pack) against the pack's bytes. */
static int check_pack(struct cp_ctx *c, struct ck_store *from, const char *pack, const uint8_t *buf, size_t len,
		      const size_t *idx, size_t n)
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
		rc = ck_chunk_verify(k, buf + k->off, c->scratch, &why);
		if (rc < 0) {
			ck_err_set("checkpoint %s@%llu: chunk %zu (pack %s, offset %llu): %s (store %s)", c->job,
				   (unsigned long long)c->m->seq, idx[i], pack, (unsigned long long)k->off, why,
				   from->uri);
			return rc;
		}
	}
	return 0;
}

static int copy_pack(struct cp_ctx *c, uint32_t p, const size_t *idx, size_t n)
{
	const char *pack = c->m->packs[p];
	struct ck_store *from = c->src;
	uint64_t ssize = 0, dsize = 0;
	char key[512];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/%s", c->job, pack);
	rc = ck_store_stat(c->src, key, &ssize);
	if (rc == -ENOENT) {
		ck_err_set("checkpoint %s@%llu: chunk %zu (pack %s, offset %llu): pack missing (store %s)", c->job,
			   (unsigned long long)c->m->seq, idx[0], pack, (unsigned long long)c->m->chunks[idx[0]].off,
			   c->src->uri);
		return -ENOENT;
	}
	if (rc < 0)
		return rc;
	if (ck_store_stat(c->dst, key, &dsize) == 0 && dsize == ssize)
		from = c->dst; /* already there: check it in place */
	rc = ck_store_get(from, key, &buf, &len);
	if (rc == 0)
		rc = check_pack(c, from, pack, buf, len, idx, n);
	if (rc < 0 && from == c->dst) {
		/* A damaged copy at the destination is replaced, not trusted. */
		free(buf);
		buf = NULL;
		from = c->src;
		rc = ck_store_get(from, key, &buf, &len);
		if (rc == 0)
			rc = check_pack(c, from, pack, buf, len, idx, n);
	}
	if (rc == 0 && from == c->src) {
		rc = ck_store_put(c->dst, key, buf, len, 0);
		c->copied++;
		c->copied_bytes += len;
	} else if (rc == 0) {
		c->skipped++;
	}
	free(buf);
	c->done += ssize;
	ckpt_progress(&c->prog, c->done);
	return rc;
}

static int copy_one(struct cp_ctx *c, uint64_t seq)
{
	void *mbuf = NULL, *old = NULL;
	size_t mlen = 0, oldlen = 0, i, j, *idx = NULL, nz = 0;
	uint64_t total = 0, sz;
	char key[300], what[300];
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
	if (!idx) {
		rc = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	for (i = 0; i < c->m->nchunks; i++) {
		if (c->m->chunks[i].flags & CK_CHUNK_ZERO) {
			const char *why;

			if (ck_chunk_verify(&c->m->chunks[i], NULL, c->scratch, &why) < 0) {
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
	for (i = 0; i < c->m->npacks; i++) {
		snprintf(what, sizeof(what), "%s/%s", c->job, c->m->packs[i]);
		if (ck_store_stat(c->src, what, &sz) == 0)
			total += sz;
	}
	snprintf(what, sizeof(what), "copy %s@%llu", c->job, (unsigned long long)seq);
	ckpt_progress_start(&c->prog, what, total);
	c->done = 0;
	for (i = 0; i < nz; i = j) {
		uint32_t p = c->m->chunks[idx[i]].pack;

		for (j = i; j < nz && c->m->chunks[idx[j]].pack == p; j++)
			;
		rc = copy_pack(c, p, idx + i, j - i);
		if (rc < 0) {
			ckpt_progress_end(&c->prog);
			goto out;
		}
	}
	ckpt_progress_end(&c->prog);
	rc = ck_store_put(c->dst, key, mbuf, mlen, CK_PUT_NOREPLACE);
	if (rc == 0)
		printf("%s@%llu: copied to %s\n", c->job, (unsigned long long)seq, c->dst->uri);
out:
	free(idx);
	free(old);
	free(mbuf);
	ck_manifest_free(c->m);
	c->m = NULL;
	return rc;
}

int ckpt_cmd_cp(int argc, char **argv)
{
	struct cp_ctx c = {0};
	struct ckpt_opts o;
	uint64_t seq, *seqs = NULL;
	size_t n = 0, i;
	char job[256], b[32];
	int a, rc;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 3)
		return ckpt_usage_error("cp: expected SRC_STORE DST_STORE JOB[@SEQ]");
	if (ckpt_parse_ref(argv[a + 2], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("cp: %s", ck_err_msg());
	c.job = job;
	c.scratch = malloc(CK_CHUNK_SIZE);
	if (!c.scratch)
		return CK_EXIT_INTERNAL;
	rc = ckpt_open_store(argv[a], &o.sopts, &c.src);
	if (rc == 0)
		rc = ckpt_open_store(argv[a + 1], &o.sopts, &c.dst);
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
	if (rc == 0) {
		ckpt_fmt_bytes(c.copied_bytes, b, sizeof(b));
		printf("%s: %u pack%s copied (%s), %u already present\n", job, c.copied, c.copied == 1 ? "" : "s", b,
		       c.skipped);
	}
	free(seqs);
	free(c.scratch);
	ck_store_close(c.src);
	ck_store_close(c.dst);
	return rc < 0 ? ckpt_fail(rc) : 0;
}
