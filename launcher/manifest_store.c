/* Manifests in a store: listing, loading, committing, retention. */
#include "launcher/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ck_err.h"

int ck_job_name_valid(const char *name)
{
	size_t i;

	if (!name || !name[0] || name[0] == '.')
		return 0;
	for (i = 0; name[i]; i++) {
		char c = name[i];

		if (i >= 128)
			return 0;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int check_job(const char *job)
{
	if (!ck_job_name_valid(job)) {
		ck_err_set("invalid job name \"%s\" (letters, digits, '.', '_', '-'; at most 128; no leading '.')",
			   job ? job : "");
		return -EINVAL;
	}
	return 0;
}

int ck_manifest_key(const char *job, uint64_t seq, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/manifests/%08llu", job, (unsigned long long)seq);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Parses a run of 1..20 digits ending at a terminator; 0 on failure. */
static uint64_t parse_seq(const char *p, char term)
{
	uint64_t v = 0;
	int n = 0;

	for (; *p >= '0' && *p <= '9'; p++, n++) {
		if (n >= 20 || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	return n && *p == term ? v : 0;
}

uint64_t ck_pack_seq(const char *key)
{
	const char *p = strstr(key, "packs/");
	size_t n;

	if (!p || (p != key && p[-1] != '/'))
		return 0;
	p += 6;
	n = strlen(p);
	if (n < 6 || strcmp(p + n - 5, ".pack"))
		return 0;
	return parse_seq(p, '-');
}

struct ck__seqvec {
	uint64_t *v;
	size_t n, cap;
	size_t prefix_len;
};

static int seq_cb(void *arg, const char *key, uint64_t size)
{
	struct ck__seqvec *sv = arg;
	uint64_t seq = parse_seq(key + sv->prefix_len, 0);

	(void)size;
	if (!seq)
		return 0; /* not a manifest name: ignore */
	if (sv->n == sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 32;
		uint64_t *v = realloc(sv->v, cap * sizeof(*v));

		if (!v) {
			ck_err_set("out of memory listing manifests");
			return -ENOMEM;
		}
		sv->v = v;
		sv->cap = cap;
	}
	sv->v[sv->n++] = seq;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int ck_manifest_list(struct ck_store *s, const char *job, uint64_t **seqs, size_t *n)
{
	struct ck__seqvec sv = {0};
	char prefix[256];
	int rc;

	*seqs = NULL;
	*n = 0;
	if ((rc = check_job(job)) < 0)
		return rc;
	snprintf(prefix, sizeof(prefix), "%s/manifests/", job);
	sv.prefix_len = strlen(prefix);
	rc = ck_store_list(s, prefix, seq_cb, &sv);
	if (rc < 0) {
		free(sv.v);
		return rc;
	}
	/* Keys sort as bytes; sequences wider than 8 digits need numeric order. */
	if (sv.n)
		qsort(sv.v, sv.n, sizeof(*sv.v), u64_cmp);
	*seqs = sv.v;
	*n = sv.n;
	return 0;
}

int ck_manifest_load(struct ck_store *s, const char *job, uint64_t seq, struct ck_manifest **out)
{
	struct ck_manifest *m = NULL;
	char key[256];
	void *buf = NULL;
	size_t len;
	int rc;

	*out = NULL;
	if ((rc = check_job(job)) < 0)
		return rc;
	ck_manifest_key(job, seq, key, sizeof(key));
	rc = ck_store_get(s, key, &buf, &len);
	if (rc < 0) {
		ck_err_wrap("checkpoint %s@%llu", job, (unsigned long long)seq);
		return rc;
	}
	rc = ck_manifest_decode(buf, len, &m);
	free(buf);
	if (rc == 0 && (m->seq != seq || strcmp(m->job, job))) {
		ck_err_set("manifest: it describes %s@%llu", m->job, (unsigned long long)m->seq);
		ck_manifest_free(m);
		m = NULL;
		rc = -EBADMSG;
	}
	if (rc < 0) {
		ck_err_wrap("checkpoint %s@%llu (store %s, %s)", job, (unsigned long long)seq, s->uri, key);
		return rc;
	}
	*out = m;
	return 0;
}

int ck_manifest_load_latest(struct ck_store *s, const char *job, struct ck_manifest **out)
{
	uint64_t *seqs;
	size_t n;
	int rc;

	*out = NULL;
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		return rc;
	if (n == 0) {
		free(seqs);
		ck_err_set("job %s has no checkpoint in store %s", job, s->uri);
		return -ENOENT;
	}
	rc = ck_manifest_load(s, job, seqs[n - 1], out);
	free(seqs);
	return rc;
}

int ck_manifest_commit(struct ck_store *s, const struct ck_manifest *m)
{
	char key[256];
	void *buf;
	size_t len;
	int rc;

	if ((rc = check_job(m->job)) < 0)
		return rc;
	if (m->seq == 0) {
		ck_err_set("checkpoint %s: sequence 0 is not valid", m->job);
		return -EINVAL;
	}
	rc = ck_manifest_encode(m, &buf, &len);
	if (rc < 0)
		return rc;
	ck_manifest_key(m->job, m->seq, key, sizeof(key));
	rc = ck_store_put(s, key, buf, len, CK_PUT_NOREPLACE);
	free(buf);
	if (rc < 0)
		ck_err_wrap("commit checkpoint %s@%llu", m->job, (unsigned long long)m->seq);
	return rc;
}

/* ---- garbage collection ---- */

struct ck__strset {
	char **v;
	size_t n, cap;
};

static int strset_add(struct ck__strset *ss, const char *str)
{
	if (ss->n == ss->cap) {
		size_t cap = ss->cap ? ss->cap * 2 : 64;
		char **v = realloc(ss->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ss->v = v;
		ss->cap = cap;
	}
	ss->v[ss->n] = strdup(str);
	if (!ss->v[ss->n])
		return -ENOMEM;
	ss->n++;
	return 0;
}

static void strset_free(struct ck__strset *ss)
{
	size_t i;

	for (i = 0; i < ss->n; i++)
		free(ss->v[i]);
	free(ss->v);
	memset(ss, 0, sizeof(*ss));
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects "SIZE KEY" strings: the size travels with its key. */
static int key_cb(void *arg, const char *key, uint64_t size)
{
	struct ck__strset *ss = arg;
	char *both;
	int rc;

	if (asprintf(&both, "%llu %s", (unsigned long long)size, key) < 0) {
		ck_err_set("out of memory listing packs");
		return -ENOMEM;
	}
	rc = strset_add(ss, both);
	free(both);
	if (rc < 0)
		ck_err_set("out of memory listing packs");
	return rc;
}

int ck_store_gc_packs(struct ck_store *s, const char *job, uint64_t upto_seq, unsigned *ndeleted, uint64_t *bytes)
{
	struct ck__strset used = {0}, packs = {0};
	uint64_t *seqs = NULL;
	char prefix[256];
	size_t n = 0, i, j;
	unsigned ndel = 0;
	uint64_t nbytes = 0;
	int rc;

	if (ndeleted)
		*ndeleted = 0;
	if (bytes)
		*bytes = 0;
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		goto out;
	/* Every pack any remaining manifest names, as a sorted set. */
	for (i = 0; i < n; i++) {
		struct ck_manifest *m;

		rc = ck_manifest_load(s, job, seqs[i], &m);
		if (rc < 0) {
			ck_err_wrap("gc %s: not deleting anything", job);
			goto out;
		}
		for (j = 0; j < m->npacks && rc == 0; j++)
			rc = strset_add(&used, m->packs[j]);
		ck_manifest_free(m);
		if (rc < 0) {
			ck_err_set("gc %s: out of memory", job);
			goto out;
		}
	}
	if (used.n)
		qsort(used.v, used.n, sizeof(char *), str_cmp);

	snprintf(prefix, sizeof(prefix), "%s/packs/", job);
	rc = ck_store_list(s, prefix, key_cb, &packs);
	if (rc < 0)
		goto out;
	for (i = 0; i < packs.n; i++) {
		char *key = strchr(packs.v[i], ' ') + 1;
		const char *rel = key + strlen(job) + 1;
		uint64_t seq = ck_pack_seq(rel);

		/* Packs of later sequences belong to a round still being
		 * written: its manifest does not exist yet. */
		if (!seq || seq > upto_seq)
			continue;
		if (used.n && bsearch(&rel, used.v, used.n, sizeof(char *), str_cmp))
			continue;
		rc = ck_store_del(s, key);
		if (rc < 0)
			goto out;
		ndel++;
		nbytes += strtoull(packs.v[i], NULL, 10);
	}
out:
	if (ndeleted)
		*ndeleted = ndel;
	if (bytes)
		*bytes = nbytes;
	strset_free(&used);
	strset_free(&packs);
	free(seqs);
	return rc;
}

int ck_store_retain(struct ck_store *s, const char *job, unsigned keep)
{
	uint64_t *seqs = NULL, newest;
	char key[256];
	size_t n, i;
	int rc;

	if (keep == 0) {
		ck_err_set("retain %s: must keep at least one checkpoint", job);
		return -EINVAL;
	}
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0 || n == 0)
		goto out;
	newest = seqs[n - 1];
	/* Oldest first: a crash half-way leaves a shorter, still valid chain. */
	for (i = 0; i + keep < n; i++) {
		ck_manifest_key(job, seqs[i], key, sizeof(key));
		rc = ck_store_del(s, key);
		if (rc < 0)
			goto out;
	}
	rc = ck_store_gc_packs(s, job, newest, NULL, NULL);
out:
	free(seqs);
	return rc;
}

static int job_cb(void *arg, const char *key, uint64_t size)
{
	struct ck__strset *ss = arg;
	const char *slash = strchr(key, '/');
	char job[256];

	(void)size;
	if (!slash || strncmp(slash, "/manifests/", 11) || (size_t)(slash - key) >= sizeof(job))
		return 0;
	memcpy(job, key, (size_t)(slash - key));
	job[slash - key] = 0;
	if (!ck_job_name_valid(job) || !parse_seq(slash + 11, 0))
		return 0;
	/* Keys arrive sorted, so one job's manifests are adjacent. */
	if (ss->n && !strcmp(ss->v[ss->n - 1], job))
		return 0;
	if (strset_add(ss, job) < 0) {
		ck_err_set("out of memory listing jobs");
		return -ENOMEM;
	}
	return 0;
}

int ck_store_list_jobs(struct ck_store *s, char ***jobs, size_t *n)
{
	struct ck__strset ss = {0};
	int rc;

	*jobs = NULL;
	*n = 0;
	rc = ck_store_list(s, "", job_cb, &ss);
	if (rc < 0) {
		strset_free(&ss);
		return rc;
	}
	if (ss.n)
		qsort(ss.v, ss.n, sizeof(char *), str_cmp);
	*jobs = ss.v;
	*n = ss.n;
	return 0;
}
