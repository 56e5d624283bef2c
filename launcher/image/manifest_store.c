/* Manifests in a store: listing, loading, committing, retention. */
#include "launcher/image/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

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

/* ---- sets of strings ---- */

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

/* ---- packs present ---- */

struct ck__packent {
	char *rel; /* "packs/..." */
	uint64_t size;
};

struct ck__packidx {
	struct ck__packent *v;
	size_t n, cap, plen;
};

static int packidx_cb(void *arg, const char *key, uint64_t size)
{
	struct ck__packidx *pi = arg;

	if (pi->n == pi->cap) {
		size_t cap = pi->cap ? pi->cap * 2 : 64;
		struct ck__packent *v = realloc(pi->v, cap * sizeof(*v));

		if (!v)
			goto nomem;
		pi->v = v;
		pi->cap = cap;
	}
	pi->v[pi->n].rel = strdup(key + pi->plen);
	if (!pi->v[pi->n].rel)
		goto nomem;
	pi->v[pi->n++].size = size;
	return 0;
nomem:
	ck_err_set("out of memory listing packs");
	return -ENOMEM;
}

static void packidx_free(struct ck__packidx *pi)
{
	for (size_t i = 0; i < pi->n; i++)
		free(pi->v[i].rel);
	free(pi->v);
	memset(pi, 0, sizeof(*pi));
}

/* Every object under JOB/packs/ with its size, keys relative to JOB/, in
 * byte order (as listings come). */
static int packidx_load(struct ck_store *s, const char *job, struct ck__packidx *pi)
{
	char prefix[256];
	int rc;

	memset(pi, 0, sizeof(*pi));
	snprintf(prefix, sizeof(prefix), "%s/packs/", job);
	pi->plen = strlen(job) + 1;
	rc = ck_store_list(s, prefix, packidx_cb, pi);
	if (rc < 0)
		packidx_free(pi);
	return rc;
}

static const struct ck__packent *packidx_find(const struct ck__packidx *pi, const char *rel)
{
	size_t lo = 0, hi = pi->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(pi->v[mid].rel, rel);

		if (!c)
			return &pi->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Every pack m references is there, with at least the bytes its chunks
 * need: -ENOENT or -EBADMSG with a line naming the pack, else 0. */
static int packs_present(const struct ck__packidx *pi, const char *job, const struct ck_manifest *m)
{
	uint64_t *need = calloc(m->npacks ? m->npacks : 1, sizeof(*need));
	size_t i;
	int rc = 0;

	if (!need) {
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < m->nchunks; i++) {
		const struct ck_chunk *c = &m->chunks[i];

		if (!(c->flags & CK_CHUNK_ZERO) && c->pack < m->npacks && c->off + c->clen > need[c->pack])
			need[c->pack] = c->off + c->clen;
	}
	for (i = 0; i < m->npacks && rc == 0; i++) {
		const struct ck__packent *e = packidx_find(pi, m->packs[i]);

		if (!e) {
			ck_err_set("checkpoint %s@%llu: pack %s is missing", job, (unsigned long long)m->seq, m->packs[i]);
			rc = -ENOENT;
		} else if (e->size < need[i]) {
			ck_err_set("checkpoint %s@%llu: pack %s is %llu bytes, its chunks need %llu", job,
				   (unsigned long long)m->seq, m->packs[i], (unsigned long long)e->size,
				   (unsigned long long)need[i]);
			rc = -EBADMSG;
		}
	}
	free(need);
	return rc;
}

int ck_manifest_check_packs(struct ck_store *s, const struct ck_manifest *m)
{
	struct ck__packidx pi;
	int rc;

	if ((rc = check_job(m->job)) < 0)
		return rc;
	rc = packidx_load(s, m->job, &pi);
	if (rc < 0)
		return rc;
	rc = packs_present(&pi, m->job, m);
	packidx_free(&pi);
	return rc;
}

/* ---- garbage collection ---- */

/* Deletes packs of job that no remaining manifest references: those of a
 * sequence <= upto. With owner (the caller holds the job's lock: no round
 * is in flight) also those of a sequence above newest, the newest committed
 * one: a round that never committed (a manifest references only packs of
 * its own or earlier sequences), whether or not every manifest loads. A
 * manifest that does not load holds back the rest: *held = 1. */
/* A checkpoint retention loaded: the packs it names, so that gc need not
 * load it again. */
struct ck__seen {
	uint64_t seq;
	char **packs;
	size_t npacks;
};

struct ck__seenset {
	struct ck__seen *v;
	size_t n;
	struct ck__packidx *pi; /* the packs as retention listed them (NULL: list) */
};

static void seenset_free(struct ck__seenset *ss)
{
	for (size_t i = 0; i < ss->n; i++) {
		for (size_t j = 0; j < ss->v[i].npacks; j++)
			free(ss->v[i].packs[j]);
		free(ss->v[i].packs);
	}
	free(ss->v);
	memset(ss, 0, sizeof(*ss));
}

static const struct ck__seen *seen_find(const struct ck__seenset *ss, uint64_t seq)
{
	for (size_t i = 0; ss && i < ss->n; i++)
		if (ss->v[i].seq == seq)
			return &ss->v[i];
	return NULL;
}

static int gc_packs(struct ck_store *s, const char *job, uint64_t upto, uint64_t newest, int owner, unsigned *ndel,
		    uint64_t *bytes, int *held, const struct ck__seenset *seen)
{
	struct ck__strset used = {0};
	struct ck__packidx own = {0}, *pi = &own;
	uint64_t *seqs = NULL;
	size_t n = 0, i, j;
	char why[1024] = "";
	int rc;

	*ndel = 0;
	*bytes = 0;
	*held = 0;
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		goto out;
	for (i = 0; i < n; i++) {
		struct ck_manifest *m;

		const struct ck__seen *e = seen_find(seen, seqs[i]);

		if (seqs[i] > newest)
			newest = seqs[i]; /* committed meanwhile (no lock): not a leftover */
		for (j = 0; e && j < e->npacks && rc == 0; j++)
			rc = strset_add(&used, e->packs[j]);
		if (e && rc == 0)
			continue;
		if (rc < 0) {
			ck_err_set("gc %s: out of memory", job);
			goto out;
		}
		rc = ck_manifest_load(s, job, seqs[i], &m);
		if (rc < 0) {
			if (!*held)
				snprintf(why, sizeof(why), "%s", ck_err_msg());
			*held = 1;
			rc = 0;
			continue;
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
	/* Packs listed by retention before it deleted manifests are still
	 * the packs: deleting manifests adds none, and a pack added since
	 * belongs to a round in flight (or, under the lock, none exists). */
	if (seen && seen->pi)
		pi = seen->pi;
	else if ((rc = packidx_load(s, job, &own)) < 0)
		goto out;
	for (i = 0; i < pi->n; i++) {
		const char *rel = pi->v[i].rel;
		uint64_t seq = ck_pack_seq(rel);
		char key[512];

		if (!seq)
			continue;
		if (!(owner && seq > newest)) {
			/* Packs of later sequences belong to a round still being
			 * written: its manifest does not exist yet. */
			if (*held || seq > upto)
				continue;
			if (used.n && bsearch(&rel, used.v, used.n, sizeof(char *), str_cmp))
				continue;
		}
		snprintf(key, sizeof(key), "%s/%s", job, rel);
		rc = ck_store_del(s, key);
		if (rc < 0)
			goto out;
		++*ndel;
		*bytes += pi->v[i].size;
	}
	if (*held)
		ck_err_set("%s", why);
out:
	packidx_free(&own);
	strset_free(&used);
	free(seqs);
	return rc;
}

int ck_store_gc_packs(struct ck_store *s, const char *job, uint64_t upto_seq, unsigned *ndeleted, uint64_t *bytes)
{
	unsigned nd = 0;
	uint64_t nb = 0;
	int held = 0, rc;

	rc = gc_packs(s, job, upto_seq, UINT64_MAX, 0, &nd, &nb, &held, NULL);
	if (rc == 0 && held) {
		ck_err_wrap("gc %s: not deleting anything", job);
		rc = -EBADMSG;
	}
	if (ndeleted)
		*ndeleted = nd;
	if (bytes)
		*bytes = nb;
	return rc;
}

static int u64_push(uint64_t **v, size_t *n, uint64_t x)
{
	uint64_t *nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	nv[(*n)++] = x;
	*v = nv;
	return 0;
}

void ck_retain_report_free(struct ck_retain_report *r)
{
	free(r->removed);
	free(r->kept);
	free(r->damaged);
	memset(r, 0, sizeof(*r));
}

/* Loads checkpoint seq and checks that its packs are all there: 1 good,
 * 0 damaged (why in ck_err_msg()), <0 when the store cannot tell (then
 * nothing may be deleted). */
static int judge(struct ck_store *s, const char *job, uint64_t seq, const struct ck__packidx *pi,
		 const struct ck_retain_opts *o, struct ck__seenset *seen)
{
	struct ck_manifest *m = NULL;
	struct ck__seen *e;
	int rc = ck_manifest_load(s, job, seq, &m);

	if (rc == -EBADMSG)
		return 0;
	if (rc == -ENOENT) {
		ck_err_set("checkpoint %s@%llu: removed meanwhile", job, (unsigned long long)seq);
		return 0;
	}
	if (rc < 0)
		return rc;
	/* its packs, for gc (it loaded: whatever else is wrong with it) */
	e = realloc(seen->v, (seen->n + 1) * sizeof(*e));
	if (!e) {
		ck_manifest_free(m);
		return -ENOMEM;
	}
	seen->v = e;
	e = &seen->v[seen->n++];
	e->seq = seq;
	e->npacks = 0;
	e->packs = calloc(m->npacks ? m->npacks : 1, sizeof(char *));
	for (size_t i = 0; e->packs && i < m->npacks; i++, e->npacks++)
		if (!(e->packs[i] = strdup(m->packs[i])))
			break;
	if (!e->packs || e->npacks < m->npacks) {
		ck_manifest_free(m);
		return -ENOMEM;
	}
	rc = packs_present(pi, job, m);
	if (rc == -ENOENT || rc == -EBADMSG)
		rc = 0;
	else if (rc == 0 && o && o->verify) {
		rc = o->verify(o->arg, s, m);
		rc = rc == 0 ? 1 : rc == -ENOENT || rc == -EBADMSG ? 0 : rc;
	} else if (rc == 0) {
		rc = 1;
	}
	ck_manifest_free(m);
	return rc;
}

int ck_store_retain_ex(struct ck_store *s, const char *job, unsigned keep, const struct ck_retain_opts *o,
		       struct ck_retain_report *rep)
{
	struct ck__packidx pi = {0};
	struct ck__seenset seen = {0};
	uint64_t *seqs = NULL, newest;
	signed char *good = NULL;
	size_t n = 0, i, cut = 0, ngood = 0;
	unsigned flags = o ? o->flags : 0;
	char key[256];
	int rc;

	memset(rep, 0, sizeof(*rep));
	if ((rc = check_job(job)) < 0)
		return rc;
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		goto out;
	newest = n ? seqs[n - 1] : 0;
	if (keep && n) {
		/* Newest first: the first `keep` good ones are kept; everything
		 * older than the last of them goes, good or damaged; damaged ones
		 * newer than it stay and are not counted. A damaged checkpoint
		 * is never the reason a good one goes. */
		good = calloc(n, 1);
		rc = good ? packidx_load(s, job, &pi) : -ENOMEM;
		for (i = n; rc >= 0 && i-- > 0 && ngood < keep;) {
			/* Data is read (o->verify) only where it decides something:
			 * when there is anything older to delete. */
			struct ck_retain_opts structural = {0};

			rc = judge(s, job, seqs[i], &pi, i > 0 ? o : &structural, &seen);
			if (rc < 0)
				break;
			good[i] = (signed char)rc;
			if (rc) {
				ngood++;
				cut = i;
				rc = u64_push(&rep->kept, &rep->nkept, seqs[i]);
			} else {
				if (!rep->ndamaged)
					snprintf(rep->damaged_why, sizeof(rep->damaged_why), "%s", ck_err_msg());
				rc = u64_push(&rep->damaged, &rep->ndamaged, seqs[i]);
			}
		}
		if (rc == -ENOMEM)
			ck_err_set("retain %s: out of memory", job);
		if (rc < 0) {
			ck_err_wrap("retain %s: not deleting anything", job);
			goto out;
		}
		/* Oldest first: a crash half-way leaves a shorter, still valid
		 * chain. Fewer good ones than keep: nothing goes. */
		for (i = 0; ngood == keep && i < cut; i++) {
			ck_manifest_key(job, seqs[i], key, sizeof(key));
			rc = ck_store_del(s, key);
			if (rc < 0)
				goto out;
			if ((rc = u64_push(&rep->removed, &rep->nremoved, seqs[i])) < 0) {
				ck_err_set("retain %s: out of memory", job);
				goto out;
			}
		}
	}
	if (o && o->upto > newest)
		newest = o->upto;
	if (keep && n)
		seen.pi = &pi;
	rc = gc_packs(s, job, newest, newest, !!(flags & CK_RETAIN_OWNER), &rep->npacks, &rep->pack_bytes,
		      &rep->packs_held, &seen);
	if (rc == 0 && (flags & CK_RETAIN_SWEEP)) {
		unsigned t = 0;

		snprintf(key, sizeof(key), "%s/packs", job);
		rc = ck_store_sweep(s, key, &t);
		rep->ntemp += t;
		snprintf(key, sizeof(key), "%s/manifests", job);
		if (rc == 0)
			rc = ck_store_sweep(s, key, &t);
		rep->ntemp += t;
	}
out:
	seenset_free(&seen);
	packidx_free(&pi);
	free(good);
	free(seqs);
	return rc;
}

int ck_store_retain(struct ck_store *s, const char *job, unsigned keep)
{
	struct ck_retain_report rep;
	int rc;

	if (keep == 0) {
		ck_err_set("retain %s: must keep at least one checkpoint", job);
		return -EINVAL;
	}
	rc = ck_store_retain_ex(s, job, keep, NULL, &rep);
	if (rc == 0 && rep.packs_held) {
		ck_err_wrap("retain %s: packs not collected", job);
		rc = -EBADMSG;
	}
	ck_retain_report_free(&rep);
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
