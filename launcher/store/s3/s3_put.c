/* Writing objects. Small ones in a single PUT; large ones by multipart
 * upload: parts of 8..128 MiB (chosen so a put needs at most ~1000 parts,
 * never more than 10000), several in flight at once, each sent with its own
 * SHA-256 so the gateway checks every byte it stores. Parts point into the
 * caller's buffer: memory stays bounded whatever the size. Any failure after
 * the upload was created aborts it, so no parts are left behind.
 *
 * CK_PUT_NOREPLACE puts always go as one PUT with If-None-Match: * (Ceph's
 * gateway ignores that header on CompleteMultipartUpload), so they are
 * limited to the 5 GiB of a single PUT. CK_PUT_NEW (a pack, whose name
 * holds its writer's random id) sends the header when the object goes as
 * one PUT anyway, and relies on the name when it goes multipart.
 *
 * Every object carries x-amz-meta-sha256 (hash of the whole content); after
 * a multipart upload the object's size and stored hash are read back and
 * compared, since the ETag of a multipart object says nothing usable. */
#include "launcher/store/s3/s3.h"
#include "launcher/common/ck_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* Hashes of the whole buffer and of each part, in one pass over memory. */
static int hash_parts(const void *buf, size_t len, size_t part, size_t nparts, char whole[CK_SHA256_HEX_LEN + 1],
		      char (*ph)[CK_SHA256_HEX_LEN + 1])
{
	EVP_MD_CTX *w = EVP_MD_CTX_new(), *p = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int mdlen;
	size_t i, off, step = 1 << 20;
	int ret = -ENOMEM;

	if (!w || !p)
		goto out;
	EVP_DigestInit_ex(w, EVP_sha256(), NULL);
	for (i = 0; i < nparts; i++) {
		size_t a = i * part, l = len - a < part ? len - a : part;

		EVP_DigestInit_ex(p, EVP_sha256(), NULL);
		for (off = 0; off < l; off += step) {
			size_t n = l - off < step ? l - off : step;

			EVP_DigestUpdate(p, (const char *)buf + a + off, n);
			EVP_DigestUpdate(w, (const char *)buf + a + off, n);
		}
		EVP_DigestFinal_ex(p, md, &mdlen);
		ck_hex(md, 32, ph[i]);
	}
	EVP_DigestFinal_ex(w, md, &mdlen);
	ck_hex(md, 32, whole);
	ret = 0;
out:
	EVP_MD_CTX_free(w);
	EVP_MD_CTX_free(p);
	return ret;
}

/* After a failed NOREPLACE put that was tried more than once: if the object
 * there is exactly ours, an earlier attempt got through and only its answer
 * was lost. */
static int ours_already(struct ck_s3 *s, const char *fk, size_t len, const char *sha)
{
	struct ck_s3_req h;
	char saved[1024];
	int same;

	snprintf(saved, sizeof(saved), "%s", ck_err_msg());
	same = !ck_s3_head(s, fk, "put", &h) && h.content_length == len && !strcmp(h.meta_sha256, sha);
	ck_s3_req_free(&h);
	ck_err_set("%s", saved);
	return same;
}

static int put_single(struct ck_s3 *s, const char *fk, const void *buf, size_t len, unsigned flags)
{
	struct ck_s3_req r;
	int ret;

	ck_s3_req_init(&r, "PUT", "put", fk);
	r.body = buf;
	r.body_len = len;
	ck_sha256_hex(buf, len, r.body_sha256);
	ck_s3_req_header(&r, "x-amz-meta-sha256", r.body_sha256);
	if (flags & (CK_PUT_NOREPLACE | CK_PUT_NEW))
		ck_s3_req_header(&r, "if-none-match", "*");
	ret = ck_s3_run1(s, &r);
	if (ret == -EEXIST) {
		if (r.tries > 1 && ours_already(s, fk, len, r.body_sha256))
			ret = 0;
		else
			ck_err_set("s3: put s3://%s/%s (PUT at %s): already exists (HTTP 412, If-None-Match)",
				   s->bucket, fk, s->endpoint_desc);
	}
	ck_s3_req_free(&r);
	return ret;
}

static size_t choose_part(size_t len)
{
	size_t part = CK_S3_PART_MIN;

	while (part < CK_S3_PART_MAX && (len + part - 1) / part > 1000)
		part *= 2;
	return part;
}

static void abort_upload(struct ck_s3 *s, const char *fk, const char *upload_id)
{
	struct ck_s3_req r;
	char saved[1024];

	/* keep the error that made us abort, not the abort's own */
	snprintf(saved, sizeof(saved), "%s", ck_err_msg());
	ck_s3_req_init(&r, "DELETE", "abort multipart upload", fk);
	ck_s3_req_query(&r, "uploadId", upload_id);
	ck_s3_run1(s, &r);
	ck_s3_req_free(&r);
	ck_err_set("%s", saved);
}

static int put_multipart(struct ck_s3 *s, const char *fk, const void *buf, size_t len)
{
	size_t part = choose_part(len), nparts = (len + part - 1) / part, i;
	char whole[CK_SHA256_HEX_LEN + 1], (*ph)[CK_SHA256_HEX_LEN + 1] = NULL, (*pn)[16] = NULL, (*op)[40] = NULL;
	struct ck_s3_req cr, done, h, *rq = NULL, **pp = NULL;
	struct ck_buf xml = { 0 };
	char *upload_id = NULL;
	int ret;

	memset(&cr, 0, sizeof(cr));
	memset(&done, 0, sizeof(done));
	memset(&h, 0, sizeof(h));
	if (nparts > CK_S3_MAX_PARTS) {
		ck_err_set("s3: put s3://%s/%s: %zu bytes need %zu parts of %zu MiB, over the limit of %d", s->bucket,
			   fk, len, nparts, part >> 20, CK_S3_MAX_PARTS);
		return -EFBIG;
	}
	ph = calloc(nparts, sizeof(*ph));
	pn = calloc(nparts, sizeof(*pn));
	rq = calloc(nparts, sizeof(*rq));
	pp = calloc(nparts, sizeof(*pp));
	op = calloc(nparts, sizeof(*op));
	if (!ph || !pn || !rq || !pp || !op || hash_parts(buf, len, part, nparts, whole, ph)) {
		ck_err_set("s3: out of memory");
		ret = -ENOMEM;
		goto out;
	}

	/* CreateMultipartUpload; the whole hash goes in as metadata now */
	ck_s3_req_init(&cr, "POST", "create multipart upload", fk);
	ck_s3_req_query(&cr, "uploads", NULL);
	ck_s3_req_header(&cr, "x-amz-meta-sha256", whole);
	ret = ck_s3_run1(s, &cr);
	if (ret)
		goto out;
	upload_id = ck_xml_text(cr.out.p, cr.out.len, "UploadId");
	if (!upload_id || !*upload_id) {
		ck_err_set("s3: put s3://%s/%s (POST ?uploads at %s): answer has no UploadId", s->bucket, fk,
			   s->endpoint_desc);
		ret = -EIO;
		goto out;
	}

	for (i = 0; i < nparts; i++) {
		size_t a = i * part;

		snprintf(pn[i], sizeof(pn[i]), "%zu", i + 1); /* 1..10000, checked above */
		snprintf(op[i], sizeof(op[i]), "put part %zu/%zu of", i + 1, nparts);
		ck_s3_req_init(&rq[i], "PUT", op[i], fk);
		ck_s3_req_query(&rq[i], "partNumber", pn[i]);
		ck_s3_req_query(&rq[i], "uploadId", upload_id);
		rq[i].body = (const char *)buf + a;
		rq[i].body_len = len - a < part ? len - a : part;
		memcpy(rq[i].body_sha256, ph[i], sizeof(ph[i]));
		pp[i] = &rq[i];
	}
	ret = ck_s3_run(s, pp, nparts, s->cfg.parallel, 1);
	if (ret)
		goto abort;

	ck_buf_adds(&xml, "<CompleteMultipartUpload>");
	for (i = 0; i < nparts; i++) {
		if (!rq[i].etag[0]) {
			ck_err_set("s3: put s3://%s/%s: part %zu answered without an ETag", s->bucket, fk, i + 1);
			ret = -EIO;
			goto abort;
		}
		ck_buf_addf(&xml, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1, rq[i].etag);
	}
	ck_buf_adds(&xml, "</CompleteMultipartUpload>");
	if (xml.oom) {
		ret = -ENOMEM;
		ck_err_set("s3: out of memory");
		goto abort;
	}
	ck_s3_req_init(&done, "POST", "complete multipart upload", fk);
	ck_s3_req_query(&done, "uploadId", upload_id);
	done.body = xml.p;
	done.body_len = xml.len;
	ret = ck_s3_run1(s, &done);
	if (ret == -ENOENT && done.tries > 1) {
		/* a retried Complete whose first try went through finds its
		 * upload gone (NoSuchUpload): the read-back below decides */
		ret = 0;
	}
	if (ret)
		goto abort;

	/* read back: size and stored hash must be ours */
	ret = ck_s3_head(s, fk, "verify put", &h);
	if (ret)
		goto out;
	if (h.content_length != len || strcmp(h.meta_sha256, whole)) {
		ck_err_set("s3: put s3://%s/%s: verification failed after multipart upload: stored %llu bytes, "
			   "sha256 %.16s..., expected %zu bytes, %.16s...",
			   s->bucket, fk, (unsigned long long)h.content_length,
			   h.meta_sha256[0] ? h.meta_sha256 : "(none)", len, whole);
		ret = -EIO;
	}
	goto out;
abort:
	abort_upload(s, fk, upload_id);
out:
	if (rq)
		for (i = 0; i < nparts; i++)
			ck_s3_req_free(&rq[i]);
	ck_s3_req_free(&cr);
	ck_s3_req_free(&done);
	ck_s3_req_free(&h);
	ck_buf_free(&xml);
	free(upload_id);
	free(ph);
	free(pn);
	free(rq);
	free(pp);
	free(op);
	return ret;
}

int ck_s3_put(struct ck_store *st, const char *key, const void *buf, size_t len, unsigned flags)
{
	struct ck_s3 *s = (struct ck_s3 *)st;
	char *fk;
	int ret;

	if (!key || !*key || strlen(key) > 900) {
		ck_err_set("s3: put in %s: invalid key \"%s\"", st->uri, key ? key : "");
		return -EINVAL;
	}
	fk = ck_s3_full_key(s, key);
	if (!fk)
		return -ENOMEM;
	if (len > CK_S3_SINGLE_MAX && !(flags & CK_PUT_NOREPLACE)) {
		ret = put_multipart(s, fk, buf, len);
	} else if (len > CK_S3_PUT_MAX) {
		ck_err_set("s3: put s3://%s/%s: %zu bytes with NOREPLACE: only a single PUT (at most 5 GiB) "
			   "creates an object atomically if absent",
			   s->bucket, fk, len);
		ret = -EFBIG;
	} else {
		/* NOREPLACE always goes as one PUT: the gateway honours
		 * If-None-Match there, but not on CompleteMultipartUpload */
		ret = put_single(s, fk, buf, len, flags);
	}
	free(fk);
	return ret;
}
