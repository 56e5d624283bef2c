/* The S3 store: "s3://BUCKET/PREFIX" as a ck_store. Keys live under PREFIX
 * in BUCKET; listings hand them back relative to it. Reads of large objects
 * go as several ranged GETs at once; whole-object reads are checked against
 * the SHA-256 the writer stored in x-amz-meta-sha256 (the ETag of a
 * multipart object is no content hash, and Ceph even leaves it empty). */
#include "launcher/store/s3/s3.h"
#include "launcher/store/s3/store_s3.h"
#include "launcher/common/ck_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

static struct ck_s3 *S(struct ck_store *st)
{
	return (struct ck_s3 *)st;
}

uint64_t ck_store_s3_retries(struct ck_store *st)
{
	return __atomic_load_n(&S(st)->retries, __ATOMIC_RELAXED);
}

char *ck_s3_full_key(struct ck_s3 *s, const char *key)
{
	struct ck_buf b = { 0 };

	ck_buf_adds(&b, s->prefix);
	ck_buf_adds(&b, key);
	return ck_buf_steal(&b);
}

static int bad_key(struct ck_s3 *s, const char *op, const char *key)
{
	if (!key || !*key || strlen(key) > 900) {
		ck_err_set("s3: %s in s3://%s/%s: invalid key \"%s\"", op, s->bucket, s->prefix, key ? key : "");
		return -EINVAL;
	}
	return 0;
}

int ck_s3_head(struct ck_s3 *s, const char *fullkey, const char *op, struct ck_s3_req *r)
{
	ck_s3_req_init(r, "HEAD", op, fullkey);
	return ck_s3_run1(s, r);
}

static int s3_stat(struct ck_store *st, const char *key, uint64_t *size)
{
	struct ck_s3 *s = S(st);
	struct ck_s3_req r;
	char *fk;
	int ret = bad_key(s, "stat", key);

	if (ret)
		return ret;
	fk = ck_s3_full_key(s, key);
	if (!fk)
		return -ENOMEM;
	ret = ck_s3_head(s, fk, "stat", &r);
	if (!ret)
		*size = r.content_length;
	ck_s3_req_free(&r);
	free(fk);
	return ret;
}

/* Reads [off, off+len) of fullkey into buf: one ranged GET, or several in
 * parallel for large reads. */
static int read_ranges(struct ck_s3 *s, const char *fullkey, const char *op, uint64_t off, void *buf, size_t len)
{
	size_t n = (len + CK_S3_RANGE_SIZE - 1) / CK_S3_RANGE_SIZE, i;
	struct ck_s3_req *rq = calloc(n, sizeof(*rq));
	struct ck_s3_req **pp = calloc(n, sizeof(*pp));
	char (*range)[64] = calloc(n, sizeof(*range));
	int ret = -ENOMEM;

	if (!rq || !pp || !range) {
		ck_err_set("s3: out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		uint64_t a = off + (uint64_t)i * CK_S3_RANGE_SIZE;
		size_t l = len - i * CK_S3_RANGE_SIZE < CK_S3_RANGE_SIZE ? len - i * CK_S3_RANGE_SIZE : CK_S3_RANGE_SIZE;

		ck_s3_req_init(&rq[i], "GET", op, fullkey);
		snprintf(range[i], sizeof(range[i]), "bytes=%llu-%llu", (unsigned long long)a,
			 (unsigned long long)(a + l - 1));
		ck_s3_req_header(&rq[i], "range", range[i]);
		rq[i].dst = (char *)buf + i * CK_S3_RANGE_SIZE;
		rq[i].dst_len = l;
		rq[i].want_partial = 1;
		pp[i] = &rq[i];
	}
	ret = ck_s3_run(s, pp, n, s->cfg.parallel, 1);
	if (ret == -EIO && n) {
		for (i = 0; i < n; i++)
			if (rq[i].status == 416)
				break;
		if (i < n) {
			ck_err_set("s3: %s s3://%s/%s: object is shorter than %llu bytes", op, s->bucket, fullkey,
				   (unsigned long long)(off + len));
			goto out;
		}
	}
	if (ret)
		goto out;
	for (i = 0; i < n; i++) {
		if (rq[i].dst_got != rq[i].dst_len) {
			ck_err_set("s3: %s s3://%s/%s: object is shorter than %llu bytes", op, s->bucket, fullkey,
				   (unsigned long long)(off + len));
			ret = -EIO;
			goto out;
		}
	}
out:
	if (rq)
		for (i = 0; i < n; i++)
			ck_s3_req_free(&rq[i]);
	free(rq);
	free(pp);
	free(range);
	return ret;
}

static int s3_get_range(struct ck_store *st, const char *key, uint64_t off, void *buf, size_t len)
{
	struct ck_s3 *s = S(st);
	char *fk;
	int ret = bad_key(s, "get_range", key);
	uint64_t size;

	if (ret)
		return ret;
	if (!len) /* no byte to fetch; the key must still exist */
		return s3_stat(st, key, &size);
	fk = ck_s3_full_key(s, key);
	if (!fk)
		return -ENOMEM;
	ret = read_ranges(s, fk, "get_range", off, buf, len);
	free(fk);
	return ret;
}

static int s3_get(struct ck_store *st, const char *key, void **bufp, size_t *lenp)
{
	struct ck_s3 *s = S(st);
	struct ck_s3_req h;
	char *fk, hex[CK_SHA256_HEX_LEN + 1];
	unsigned char md[SHA256_DIGEST_LENGTH];
	void *buf = NULL;
	size_t len;
	int ret = bad_key(s, "get", key);

	*bufp = NULL;
	*lenp = 0;
	if (ret)
		return ret;
	fk = ck_s3_full_key(s, key);
	if (!fk)
		return -ENOMEM;
	ret = ck_s3_head(s, fk, "get", &h);
	if (ret)
		goto out;
	len = (size_t)h.content_length;
	buf = malloc(len ? len : 1);
	if (!buf) {
		ck_err_set("s3: get s3://%s/%s: cannot allocate %zu bytes", s->bucket, fk, len);
		ret = -ENOMEM;
		goto out;
	}
	if (len) {
		ret = read_ranges(s, fk, "get", 0, buf, len);
		if (ret)
			goto out;
	}
	if (h.meta_sha256[0]) {
		SHA256(buf, len, md);
		ck_hex(md, sizeof(md), hex);
		if (strcmp(hex, h.meta_sha256)) {
			ck_err_set("s3: get s3://%s/%s: content does not match its SHA-256 (stored %.16s..., read "
				   "%.16s...): object changed while read or corrupt",
				   s->bucket, fk, h.meta_sha256, hex);
			ret = -EIO;
			goto out;
		}
	}
	*bufp = buf;
	*lenp = len;
	buf = NULL;
out:
	free(buf);
	ck_s3_req_free(&h);
	free(fk);
	return ret;
}

static int s3_del(struct ck_store *st, const char *key)
{
	struct ck_s3 *s = S(st);
	struct ck_s3_req r;
	char *fk;
	int ret = bad_key(s, "del", key);

	if (ret)
		return ret;
	fk = ck_s3_full_key(s, key);
	if (!fk)
		return -ENOMEM;
	ck_s3_req_init(&r, "DELETE", "del", fk);
	ret = ck_s3_run1(s, &r);
	if (ret == -ENOENT)
		ret = 0;
	ck_s3_req_free(&r);
	free(fk);
	return ret;
}

/* ListObjectsV2, 1000 keys a page, following continuation tokens. */
static int s3_list(struct ck_store *st, const char *prefix, ck_store_list_cb cb, void *arg)
{
	struct ck_s3 *s = S(st);
	char *full = ck_s3_full_key(s, prefix ? prefix : ""), *token = NULL, *trunc = NULL;
	size_t plen = strlen(s->prefix);
	int ret = 0;

	if (!full)
		return -ENOMEM;
	for (;;) {
		struct ck_s3_req r;
		const char *in;
		size_t inlen, pos = 0;

		ck_s3_req_init(&r, "GET", "list", NULL);
		ck_s3_req_query(&r, "list-type", "2");
		ck_s3_req_query(&r, "prefix", full);
		if (token)
			ck_s3_req_query(&r, "continuation-token", token);
		ret = ck_s3_run1(s, &r);
		if (ret) {
			ck_err_wrap("listing prefix \"%s\"", full);
			ck_s3_req_free(&r);
			break;
		}
		while (!ret && ck_xml_next(r.out.p, r.out.len, &pos, "Contents", &in, &inlen)) {
			char *k = ck_xml_text(in, inlen, "Key"), *sz = ck_xml_text(in, inlen, "Size");

			if (!k || strncmp(k, s->prefix, plen)) {
				free(k);
				free(sz);
				continue;
			}
			ret = cb(arg, k + plen, sz ? strtoull(sz, NULL, 10) : 0);
			free(k);
			free(sz);
		}
		free(token);
		free(trunc);
		token = ck_xml_text(r.out.p, r.out.len, "NextContinuationToken");
		trunc = ck_xml_text(r.out.p, r.out.len, "IsTruncated");
		ck_s3_req_free(&r);
		if (ret || !trunc || strcmp(trunc, "true") || !token || !*token)
			break;
	}
	free(token);
	free(trunc);
	free(full);
	return ret;
}

/* A reader's check that the bucket is there: one listing of at most one
 * key under the prefix. */
static int s3_probe(struct ck_store *st)
{
	struct ck_s3 *s = S(st);
	struct ck_s3_req r;
	int ret;

	ck_s3_req_init(&r, "GET", "list", NULL);
	ck_s3_req_query(&r, "list-type", "2");
	ck_s3_req_query(&r, "max-keys", "1");
	ck_s3_req_query(&r, "prefix", s->prefix);
	ret = ck_s3_run1(s, &r);
	ck_s3_req_free(&r);
	if (ret == -ENOENT) {
		ck_err_set("store %s: no such bucket (%s at %s)", st->uri, s->bucket, s->endpoint_desc);
		ret = -ENXIO;
	}
	return ret;
}

/* S3's temporaries are unfinished multipart uploads (a writer killed
 * between CreateMultipartUpload and Complete or Abort): their parts cost
 * storage and no listing shows them. Aborted here, a page at a time. */
static int s3_sweep(struct ck_store *st, const char *prefix, unsigned *n)
{
	struct ck_s3 *s = S(st);
	char *dir = NULL, *full;
	int ret = 0, pages;

	*n = 0;
	if (asprintf(&dir, "%s/", prefix) < 0)
		return -ENOMEM;
	full = ck_s3_full_key(s, dir);
	free(dir);
	if (!full)
		return -ENOMEM;
	for (pages = 0; pages < 100 && !ret; pages++) {
		struct ck_s3_req r;
		const char *in;
		size_t inlen, pos = 0;
		unsigned found = 0;

		ck_s3_req_init(&r, "GET", "list multipart uploads", NULL);
		ck_s3_req_query(&r, "uploads", NULL);
		ck_s3_req_query(&r, "prefix", full);
		ret = ck_s3_run1(s, &r);
		while (!ret && ck_xml_next(r.out.p, r.out.len, &pos, "Upload", &in, &inlen)) {
			char *k = ck_xml_text(in, inlen, "Key"), *id = ck_xml_text(in, inlen, "UploadId");
			struct ck_s3_req d;

			if (k && id && *id && !strncmp(k, full, strlen(full))) {
				ck_s3_req_init(&d, "DELETE", "abort multipart upload", k);
				ck_s3_req_query(&d, "uploadId", id);
				ret = ck_s3_run1(s, &d);
				if (ret == -ENOENT) /* finished or aborted meanwhile */
					ret = 0;
				ck_s3_req_free(&d);
				found++;
			}
			free(k);
			free(id);
		}
		ck_s3_req_free(&r);
		*n += found;
		if (!found)
			break;
	}
	free(full);
	return ret;
}

static void s3_close(struct ck_store *st)
{
	struct ck_s3 *s;

	if (!st)
		return;
	s = S(st);
	ck_s3_pool_free(s);
	ck_s3_cfg_free(&s->cfg);
	pthread_mutex_destroy(&s->lock);
	free(s->bucket);
	free(s->prefix);
	free(s->endpoint_desc);
	free(s->base.uri);
	free(s);
}

static const struct ck_store_ops s3_ops = {
	.scheme = "s3",
	.put = ck_s3_put,
	.get_range = s3_get_range,
	.get = s3_get,
	.stat = s3_stat,
	.list = s3_list,
	.del = s3_del,
	.close = s3_close,
	.sweep = s3_sweep,
	.probe = s3_probe,
};

/* Bucket names as S3 allows them (also safe in a host name). */
static int valid_bucket(const char *b, size_t n)
{
	size_t i;

	if (n < 3 || n > 63)
		return 0;
	for (i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-' || b[i] == '.' ||
		      b[i] == '_' || (b[i] >= 'A' && b[i] <= 'Z')))
			return 0;
	return 1;
}

int ck_store_s3_open(const char *uri, const struct ck_store_opts *opts, struct ck_store **out)
{
	struct ck_s3 *s = NULL;
	const char *b, *slash;
	struct ck_buf pfx = { 0 }, ep = { 0 };
	size_t bl;
	int ret;

	*out = NULL;
	if (!uri || strncmp(uri, "s3://", 5)) {
		ck_err_set("s3: %s: not an s3://BUCKET/PREFIX address", uri ? uri : "(null)");
		return -EINVAL;
	}
	b = uri + 5;
	slash = strchr(b, '/');
	bl = slash ? (size_t)(slash - b) : strlen(b);
	if (!valid_bucket(b, bl)) {
		ck_err_set("s3: %s: bad bucket name \"%.*s\"", uri, (int)bl, b);
		return -EINVAL;
	}
	ret = ck_s3_global_init();
	if (ret) {
		ck_err_set("s3: cannot initialise libcurl");
		return ret;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->base.ops = &s3_ops;
	s->base.uri = strdup(uri);
	/* A gateway serves several objects at once far better than one: the
	 * chunk writer keeps 3 packs (each itself in parallel parts) in flight. */
	s->base.puts_in_flight = 3;
	s->bucket = strndup(b, bl);
	/* prefix: no leading '/', exactly one trailing '/' unless empty */
	if (slash) {
		const char *p = slash;
		size_t n;

		while (*p == '/')
			p++;
		n = strlen(p);
		while (n && p[n - 1] == '/')
			n--;
		ck_buf_add(&pfx, p, n);
		if (n)
			ck_buf_addc(&pfx, '/');
	}
	ck_buf_adds(&pfx, "");
	s->prefix = ck_buf_steal(&pfx);
	if (!s->base.uri || !s->bucket || !s->prefix) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = ck_s3_cfg_load(&s->cfg, opts, uri);
	if (ret)
		goto fail;
	ck_buf_addf(&ep, "%s://%s", s->cfg.scheme, s->cfg.hostport);
	s->endpoint_desc = ck_buf_steal(&ep);
	if (!s->endpoint_desc) {
		ret = -ENOMEM;
		goto fail;
	}
	*out = &s->base;
	return 0;
fail:
	if (ret == -ENOMEM)
		ck_err_set("s3: out of memory opening %s", uri);
	s3_close(&s->base);
	return ret;
}
