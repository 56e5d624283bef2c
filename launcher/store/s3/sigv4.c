/* AWS Signature Version 4: canonical request, string to sign, signing key
 * and Authorization header. Hashes come from OpenSSL's libcrypto. */
#include "launcher/store/s3/sigv4.h"
#include "launcher/store/s3/s3_buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

void ck_hex(const unsigned char *in, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * n] = 0;
}

void ck_sha256_hex(const void *data, size_t len, char out[CK_SHA256_HEX_LEN + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	ck_hex(md, sizeof(md), out);
}

static void hmac(const void *key, size_t keylen, const char *msg, unsigned char out[32])
{
	unsigned int outlen = 32;

	HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, strlen(msg), out, &outlen);
}

/* Generic rule: drop "." and empty segments, let ".." eat its parent, keep a
 * trailing slash. Works on the sent (encoded) path. */
static char *normalize_path(const char *path)
{
	size_t n = strlen(path), i = 0, nseg = 0;
	const char **seg = calloc(n + 1, sizeof(*seg));
	size_t *seglen = calloc(n + 1, sizeof(*seglen));
	struct ck_buf b = { 0 };
	int trailing = n > 0 && path[n - 1] == '/';

	if (!seg || !seglen)
		goto out;
	while (i < n) {
		size_t j = i;

		while (j < n && path[j] != '/')
			j++;
		if (j - i == 0 || (j - i == 1 && path[i] == '.')) {
			/* skipped */
		} else if (j - i == 2 && path[i] == '.' && path[i + 1] == '.') {
			if (nseg)
				nseg--;
		} else {
			seg[nseg] = path + i;
			seglen[nseg++] = j - i;
		}
		i = j + 1;
	}
	/* "/a/." and "/a/.." end in a directory as well */
	if (n >= 2 && path[n - 1] == '.' && (path[n - 2] == '/' || (n >= 3 && path[n - 2] == '.' && path[n - 3] == '/')))
		trailing = 1;
	for (i = 0; i < nseg; i++) {
		ck_buf_addc(&b, '/');
		ck_buf_add(&b, seg[i], seglen[i]);
	}
	if (!nseg || trailing)
		ck_buf_addc(&b, '/');
out:
	free(seg);
	free(seglen);
	if (!seg || !seglen) {
		ck_buf_free(&b);
		return NULL;
	}
	return ck_buf_steal(&b);
}

static void add_canonical_path(struct ck_buf *b, const char *path, int normalize)
{
	char *tmp;

	if (!path[0])
		path = "/";
	if (normalize) {
		/* encoding the sent form again is the generic "double encoding" */
		tmp = normalize_path(path);
		if (!tmp) {
			b->oom = 1;
			return;
		}
		ck_buf_add_uri_encoded(b, tmp, strlen(tmp), 1);
	} else {
		/* S3: the key, encoded once; decoding first makes any sent
		 * spelling (%2a, raw bytes) sign the same */
		tmp = ck_uri_decode(path, strlen(path));
		if (!tmp) {
			b->oom = 1;
			return;
		}
		ck_buf_add_uri_encoded(b, tmp, strlen(tmp), 1);
	}
	free(tmp);
}

struct enc_kv {
	char *name;
	char *value;
};

static int cmp_kv(const void *a, const void *b)
{
	const struct enc_kv *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static char *encode_str(const char *s)
{
	struct ck_buf b = { 0 };

	ck_buf_adds(&b, "");
	ck_buf_add_uri_encoded(&b, s ? s : "", s ? strlen(s) : 0, 0);
	return ck_buf_steal(&b);
}

static int add_canonical_query(struct ck_buf *b, const struct ck_sigv4_req *r)
{
	struct enc_kv *kv = calloc(r->nquery + 1, sizeof(*kv));
	size_t i;
	int ret = -ENOMEM;

	if (!kv)
		return -ENOMEM;
	for (i = 0; i < r->nquery; i++) {
		kv[i].name = encode_str(r->query[i].name);
		kv[i].value = encode_str(r->query[i].value);
		if (!kv[i].name || !kv[i].value)
			goto out;
	}
	qsort(kv, r->nquery, sizeof(*kv), cmp_kv);
	for (i = 0; i < r->nquery; i++) {
		if (i)
			ck_buf_addc(b, '&');
		ck_buf_adds(b, kv[i].name);
		ck_buf_addc(b, '=');
		ck_buf_adds(b, kv[i].value);
	}
	ret = 0;
out:
	for (i = 0; i < r->nquery; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
	return ret;
}

struct canon_hdr {
	char *name; /* lower case */
	const char *value;
	size_t order; /* position in the request: repeated headers keep it */
};

static int cmp_hdr(const void *a, const void *b)
{
	const struct canon_hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Value with leading/trailing blanks removed and inner runs of blanks
 * reduced to one space. */
static void add_trimmed(struct ck_buf *b, const char *v)
{
	int pending = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') {
			pending = 1;
			continue;
		}
		if (pending)
			ck_buf_addc(b, ' ');
		pending = 0;
		ck_buf_addc(b, *v);
	}
}

static int add_canonical_headers(struct ck_buf *b, struct ck_buf *sh, const struct ck_sigv4_req *r)
{
	struct canon_hdr *h = calloc(r->nheaders + 1, sizeof(*h));
	size_t i, j;
	int ret = -ENOMEM;

	if (!h)
		return -ENOMEM;
	for (i = 0; i < r->nheaders; i++) {
		h[i].name = strdup(r->headers[i].name);
		if (!h[i].name)
			goto out;
		for (j = 0; h[i].name[j]; j++)
			if (h[i].name[j] >= 'A' && h[i].name[j] <= 'Z')
				h[i].name[j] = (char)(h[i].name[j] - 'A' + 'a');
		h[i].value = r->headers[i].value ? r->headers[i].value : "";
		h[i].order = i;
	}
	qsort(h, r->nheaders, sizeof(*h), cmp_hdr);
	for (i = 0; i < r->nheaders; i++) {
		int first = i == 0 || strcmp(h[i].name, h[i - 1].name);
		int last = i + 1 == r->nheaders || strcmp(h[i].name, h[i + 1].name);

		if (first) {
			ck_buf_adds(b, h[i].name);
			ck_buf_addc(b, ':');
			if (sh->len)
				ck_buf_addc(sh, ';');
			ck_buf_adds(sh, h[i].name);
		} else {
			ck_buf_addc(b, ',');
		}
		add_trimmed(b, h[i].value);
		if (last)
			ck_buf_addc(b, '\n');
	}
	ret = 0;
out:
	for (i = 0; i < r->nheaders; i++)
		free(h[i].name);
	free(h);
	return ret;
}

int ck_sigv4_canonical_request(const struct ck_sigv4_req *r, char **creq, char **signed_headers)
{
	struct ck_buf b = { 0 }, sh = { 0 };
	int ret;

	*creq = *signed_headers = NULL;
	ck_buf_adds(&b, r->method);
	ck_buf_addc(&b, '\n');
	add_canonical_path(&b, r->path ? r->path : "/", r->normalize);
	ck_buf_addc(&b, '\n');
	ret = add_canonical_query(&b, r);
	if (ret)
		goto fail;
	ck_buf_addc(&b, '\n');
	ret = add_canonical_headers(&b, &sh, r);
	if (ret)
		goto fail;
	ck_buf_addc(&b, '\n');
	ck_buf_add(&b, sh.p ? sh.p : "", sh.len);
	ck_buf_addc(&b, '\n');
	ck_buf_adds(&b, r->payload_hash ? r->payload_hash : CK_SIGV4_EMPTY_SHA256);
	ck_buf_adds(&sh, "");
	*creq = ck_buf_steal(&b);
	*signed_headers = ck_buf_steal(&sh);
	if (!*creq || !*signed_headers) {
		free(*creq);
		free(*signed_headers);
		*creq = *signed_headers = NULL;
		return -ENOMEM;
	}
	return 0;
fail:
	ck_buf_free(&b);
	ck_buf_free(&sh);
	return ret;
}

void ck_sigv4_scope(char *out, size_t outlen, const char *amz_date, const char *region, const char *service)
{
	snprintf(out, outlen, "%.8s/%s/%s/aws4_request", amz_date, region, service);
}

int ck_sigv4_string_to_sign(const char *amz_date, const char *scope, const char *creq, char **sts)
{
	char h[CK_SHA256_HEX_LEN + 1];
	struct ck_buf b = { 0 };

	ck_sha256_hex(creq, strlen(creq), h);
	ck_buf_addf(&b, "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, h);
	*sts = ck_buf_steal(&b);
	return *sts ? 0 : -ENOMEM;
}

void ck_sigv4_signing_key(const char *secret, const char *amz_date, const char *region, const char *service,
			  unsigned char key[32])
{
	unsigned char k[32];
	char date8[9];
	struct ck_buf b = { 0 };

	snprintf(date8, sizeof(date8), "%.8s", amz_date);
	ck_buf_adds(&b, "AWS4");
	ck_buf_adds(&b, secret);
	hmac(b.p ? b.p : "", b.len, date8, k);
	/* the secret must not linger in freed heap memory */
	if (b.p)
		OPENSSL_cleanse(b.p, b.len);
	ck_buf_free(&b);
	hmac(k, 32, region, k);
	hmac(k, 32, service, k);
	hmac(k, 32, "aws4_request", key);
	OPENSSL_cleanse(k, sizeof(k));
}

void ck_sigv4_signature(const unsigned char key[32], const char *sts, char out[CK_SHA256_HEX_LEN + 1])
{
	unsigned char sig[32];

	hmac(key, 32, sts, sig);
	ck_hex(sig, 32, out);
}

int ck_sigv4_authorization(const struct ck_sigv4_key *k, const char *amz_date, const struct ck_sigv4_req *r,
			   char **authz)
{
	char *creq = NULL, *sh = NULL, *sts = NULL, scope[256], sig[CK_SHA256_HEX_LEN + 1];
	unsigned char key[32];
	struct ck_buf b = { 0 };
	int ret;

	*authz = NULL;
	ret = ck_sigv4_canonical_request(r, &creq, &sh);
	if (ret)
		goto out;
	ck_sigv4_scope(scope, sizeof(scope), amz_date, k->region, k->service);
	ret = ck_sigv4_string_to_sign(amz_date, scope, creq, &sts);
	if (ret)
		goto out;
	ck_sigv4_signing_key(k->secret_key, amz_date, k->region, k->service, key);
	ck_sigv4_signature(key, sts, sig);
	OPENSSL_cleanse(key, sizeof(key));
	ck_buf_addf(&b, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s", k->access_key, scope, sh,
		    sig);
	*authz = ck_buf_steal(&b);
	ret = *authz ? 0 : -ENOMEM;
out:
	free(creq);
	free(sh);
	free(sts);
	return ret;
}

void ck_sigv4_amz_date(long long unix_time, char out[17])
{
	time_t t = (time_t)unix_time;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
