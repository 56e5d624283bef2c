/* Restore records of a job (restore_log.h). */
#include "launcher/image/restore_log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

#define CK__RESTORE_MAGIC "ckpt-restore 1\n"
#define CK__RESTORE_MAX 4096 /* a record is a few lines: anything larger is not one */

int ck_restore_rec_format(const struct ck_restore_rec *r, char *buf, size_t len)
{
	int n = snprintf(buf, len, CK__RESTORE_MAGIC "seq %" PRIu64 "\ntime %" PRIu64 "\nduration %" PRIu64 "\n",
			 r->seq, r->time_ns, r->duration_ns);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

/* "KEY N\n" at *p; moves *p past it. */
static int ck__field(const char **p, const char *end, const char *key, uint64_t *v)
{
	size_t k = strlen(key);
	const char *q = *p;
	uint64_t x = 0;

	if ((size_t)(end - q) < k + 2 || memcmp(q, key, k) || q[k] != ' ')
		return -EBADMSG;
	q += k + 1;
	if (q == end || *q < '0' || *q > '9')
		return -EBADMSG;
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -EBADMSG;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	if (q == end || *q != '\n')
		return -EBADMSG;
	*v = x;
	*p = q + 1;
	return 0;
}

int ck_restore_rec_parse(const char *buf, size_t len, struct ck_restore_rec *r)
{
	const char *p = buf, *end = buf + len;
	size_t m = strlen(CK__RESTORE_MAGIC);

	/* Later versions may add lines after these; the first three stay. */
	if (len < m || memcmp(buf, CK__RESTORE_MAGIC, m))
		return -EBADMSG;
	p += m;
	if (ck__field(&p, end, "seq", &r->seq) < 0 || ck__field(&p, end, "time", &r->time_ns) < 0 ||
	    ck__field(&p, end, "duration", &r->duration_ns) < 0 || r->seq == 0)
		return -EBADMSG;
	return 0;
}

int ck_restore_log_put(struct ck_store *s, const char *job, const struct ck_restore_rec *r)
{
	char key[512], text[256];
	int n = ck_restore_rec_format(r, text, sizeof(text));

	if (n < 0 || snprintf(key, sizeof(key), "%s/restores/%020" PRIu64 "-%08" PRIu64, job, r->time_ns, r->seq) >=
			     (int)sizeof(key)) {
		ck_err_set("restore record of job %s: name too long", job);
		return -ENAMETOOLONG;
	}
	return ck_store_put(s, key, text, (size_t)n, CK_PUT_NOREPLACE);
}

struct ck__keys {
	char **v;
	size_t n, cap;
	size_t big; /* objects too large to be a record */
};

static int ck__key_cb(void *arg, const char *key, uint64_t size)
{
	struct ck__keys *k = arg;

	if (size > CK__RESTORE_MAX) {
		k->big++; /* not read: not a record */
		return 0;
	}
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 16;
		char **v = realloc(k->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		k->v = v;
		k->cap = cap;
	}
	if (!(k->v[k->n] = strdup(key)))
		return -ENOMEM;
	k->n++;
	return 0;
}

static void ck__keys_free(struct ck__keys *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i]);
	free(k->v);
}

static int ck__list_keys(struct ck_store *s, const char *job, struct ck__keys *k)
{
	char prefix[512];
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/restores/", job);
	rc = ck_store_list(s, prefix, ck__key_cb, k);
	if (rc == -ENOMEM)
		ck_err_set("out of memory listing the restores of job %s", job);
	return rc;
}

int ck_restore_log_list(struct ck_store *s, const char *job, struct ck_restore_rec **out, size_t *n,
			size_t *nbad)
{
	struct ck__keys k = {0};
	struct ck_restore_rec *v = NULL;
	int rc;

	*out = NULL;
	*n = *nbad = 0;
	rc = ck__list_keys(s, job, &k);
	*nbad = k.big;
	if (rc < 0 || k.n == 0)
		goto out;
	v = calloc(k.n, sizeof(*v));
	if (!v) {
		rc = -ENOMEM;
		ck_err_set("out of memory reading the restores of job %s", job);
		goto out;
	}
	for (size_t i = 0; i < k.n; i++) {
		void *buf = NULL;
		size_t len = 0;

		rc = ck_store_get(s, k.v[i], &buf, &len);
		if (rc == -ENOENT) { /* removed meanwhile (ckpt rm) */
			rc = 0;
			continue;
		}
		if (rc < 0)
			goto out;
		if (ck_restore_rec_parse(buf, len, &v[*n]) == 0)
			++*n;
		else
			++*nbad;
		free(buf);
	}
	/* Keys sort by time (zero-padded), so the records are in order. */
	*out = v;
	v = NULL;
out:
	free(v);
	ck__keys_free(&k);
	return rc;
}

int ck_restore_log_drop(struct ck_store *s, const char *job)
{
	struct ck__keys k = {0};
	int rc = ck__list_keys(s, job, &k);

	for (size_t i = 0; rc == 0 && i < k.n; i++)
		rc = ck_store_del(s, k.v[i]);
	ck__keys_free(&k);
	return rc;
}
