/* ckpt rm JOB[@SEQ] and ckpt gc [--keep N] JOB: safe deletion.
 *
 * Manifests go first, oldest first, then the packs no remaining manifest
 * references; packs of a sequence newer than every manifest seen belong to
 * a round in flight and are left alone. An interrupted rm or gc leaves only
 * garbage that the next gc removes, never a checkpoint with missing data. */
#include "launcher/ckpt/ckpt.h"

#include <errno.h>
#include <stdlib.h>

#include "launcher/ck_err.h"

static int delete_manifest(struct ck_store *s, const char *job, uint64_t seq)
{
	char key[300];

	ck_manifest_key(job, seq, key, sizeof(key));
	return ck_store_del(s, key);
}

static void report(const char *job, size_t nman, unsigned npacks, uint64_t bytes)
{
	char b[32];

	ckpt_fmt_bytes(bytes, b, sizeof(b));
	printf("%s: removed %zu checkpoint%s and %u pack%s (%s)\n", job, nman, nman == 1 ? "" : "s", npacks,
	       npacks == 1 ? "" : "s", b);
}

int ckpt_cmd_rm(int argc, char **argv)
{
	struct ck_store *s = NULL;
	struct ckpt_opts o;
	uint64_t seq, *seqs = NULL, upto, bytes = 0;
	size_t n = 0, i, removed = 0;
	unsigned npacks = 0;
	char job[256];
	int a, rc, found = 0;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_FORCE, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("rm: expected one JOB[@SEQ]");
	if (ckpt_parse_ref(argv[a], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("rm: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		goto out;
	for (i = 0; i < n; i++)
		found |= seqs[i] == seq;
	if (n == 0 || (seq && !found)) {
		ck_err_set("no checkpoint %s%s%.0llu in store %s", job, seq ? "@" : "", (unsigned long long)seq,
			   s->uri);
		rc = -ENOENT;
		goto out;
	}
	/* A running job's next round dedups against its newest checkpoint. */
	if ((!seq || seq == seqs[n - 1]) && !o.force && ckpt_job_running(job)) {
		ck_err_set("job %s is running here and its next checkpoint builds on %s@%llu; use --force to "
			   "remove it anyway",
			   job, job, (unsigned long long)seqs[n - 1]);
		rc = -EBUSY;
		goto out;
	}
	upto = seqs[n - 1];
	for (i = 0; i < n; i++) {
		if (seq && seqs[i] != seq)
			continue;
		rc = delete_manifest(s, job, seqs[i]);
		if (rc < 0)
			goto out;
		removed++;
	}
	rc = ck_store_gc_packs(s, job, upto, &npacks, &bytes);
out:
	if (removed || rc == 0)
		report(job, removed, npacks, bytes);
	free(seqs);
	ck_store_close(s);
	return rc < 0 ? ckpt_fail(rc) : 0;
}

int ckpt_cmd_gc(int argc, char **argv)
{
	struct ck_store *s = NULL;
	struct ckpt_opts o;
	uint64_t *seqs = NULL, bytes = 0;
	size_t n = 0, i, removed = 0;
	unsigned npacks = 0;
	int a, rc;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_KEEP, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("gc: expected one JOB");
	if (!ck_job_name_valid(argv[a]))
		return ckpt_usage_error("gc: invalid job name \"%s\"", argv[a]);
	rc = ckpt_open_store(o.store, &o.sopts, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ck_manifest_list(s, argv[a], &seqs, &n);
	if (rc < 0 || n == 0)
		goto out;
	for (i = 0; o.keep > 0 && i + (size_t)o.keep < n; i++) {
		rc = delete_manifest(s, argv[a], seqs[i]);
		if (rc < 0)
			goto out;
		removed++;
	}
	rc = ck_store_gc_packs(s, argv[a], seqs[n - 1], &npacks, &bytes);
out:
	if (rc == 0 || removed)
		report(argv[a], removed, npacks, bytes);
	free(seqs);
	ck_store_close(s);
	return rc < 0 ? ckpt_fail(rc) : 0;
}
