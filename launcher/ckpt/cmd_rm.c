/* ckpt rm JOB[@SEQ], ckpt gc [--keep N] JOB, ckpt unlock [--force] JOB:
 * safe deletion.
 *
 * rm and gc take the job's lock (joblock.h) for their work, so no ckrun
 * writes the job meanwhile; a job whose lock a live writer holds is
 * refused, naming it, unless --force. Manifests go first, oldest first,
 * then the packs no remaining manifest references. Holding the lock, a
 * pack of a sequence no manifest reached (a killed writer's) and the
 * store's temporaries go too; with --force past a live writer, packs of a
 * sequence newer than every manifest seen belong to its round in flight
 * and are left alone, and that writer checks before its next commit that
 * what it references is still there. An interrupted rm or gc leaves only
 * garbage that the next gc removes, never a checkpoint with missing data. */
#include "launcher/ckpt/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/image/chunkio.h"
#include "launcher/image/restore_log.h"
#include "launcher/common/ck_err.h"
#include "launcher/store/joblock.h"

static int delete_manifest(struct ck_store *s, const char *job, uint64_t seq)
{
	char key[300];

	ck_manifest_key(job, seq, key, sizeof(key));
	return ck_store_del(s, key);
}

/* "1, 2, 5" (at most a few, then "..."). */
static void fmt_seqs(const uint64_t *v, size_t n, char *buf, size_t len)
{
	size_t i, o = 0;

	buf[0] = 0;
	for (i = 0; i < n && o + 32 < len; i++) {
		if (i == 8) {
			snprintf(buf + o, len - o, ", ...");
			return;
		}
		o += (size_t)snprintf(buf + o, len - o, "%s%" PRIu64, i ? ", " : "", v[i]);
	}
}

static void report(const char *job, const uint64_t *removed, size_t nman, unsigned npacks, uint64_t bytes,
		   unsigned ntemp)
{
	char b[32], seqs[256];

	ck_fmt_bytes(bytes, b, sizeof(b));
	fmt_seqs(removed, nman, seqs, sizeof(seqs));
	printf("%s: removed %zu checkpoint%s%s%s%s and %u pack%s (%s)", job, nman, nman == 1 ? "" : "s",
	       nman ? " (" : "", seqs, nman ? ")" : "", npacks, npacks == 1 ? "" : "s", b);
	if (ntemp)
		printf(", %u temporar%s of a killed writer", ntemp, ntemp == 1 ? "y" : "ies");
	printf("\n");
}

static int count_cb(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	++*(size_t *)arg;
	return 1; /* one is enough */
}

static const char *prefix_of(const char *job, char *buf, size_t len)
{
	snprintf(buf, len, "%s/", job);
	return buf;
}

/* Takes the job's lock for a deletion: 1 held, 0 going on without it
 * (--force past a live writer, said on stderr), <0 refused. */
static int take_lock(struct ck_store *s, const char *job, const char *tool, int force, struct ck_joblock **l)
{
	int rc = ck_joblock_acquire(s, job, tool, 0, l);

	if (rc == 0)
		return 1;
	if (rc != -EBUSY)
		return rc;
	if (!force) {
		ck_err_set("%s refused: %s; --force goes on anyway (that writer then re-writes what its next checkpoint "
			   "needs)",
			   tool + 5 /* after "ckpt " */, ck_err_msg());
		return rc;
	}
	fprintf(stderr, "ckpt: warning: %s; going on (--force)\n", ck_err_msg());
	return 0;
}

int ckpt_cmd_rm(int argc, char **argv)
{
	struct ck_joblock *lock = NULL;
	struct ck_store *s = NULL;
	struct ckpt_opts o;
	uint64_t seq, *seqs = NULL, *removed = NULL, bytes = 0;
	size_t n = 0, i, nremoved = 0;
	unsigned npacks = 0;
	char job[256];
	int a, rc, found = 0, done = 0, owner;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_FORCE, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("rm: expected one JOB[@SEQ]");
	if (ckpt_parse_ref(argv[a], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("rm: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
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
	rc = owner = take_lock(s, job, "ckpt rm", o.force, &lock);
	if (rc < 0)
		goto out;
	/* Listed again under the lock: a writer may have committed since. */
	free(seqs);
	seqs = NULL;
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		goto out;
	removed = calloc(n ? n : 1, sizeof(*removed));
	if (!removed) {
		rc = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (seq && seqs[i] != seq)
			continue;
		rc = delete_manifest(s, job, seqs[i]);
		if (rc < 0)
			goto out;
		removed[nremoved++] = seqs[i];
	}
	{
		/* Packs up to the newest sequence listed may go: a round in
		 * flight (past a live writer, --force) writes a later one. */
		struct ck_retain_opts ro = {.flags = owner ? CK_RETAIN_OWNER | CK_RETAIN_SWEEP : 0,
					    .upto = n ? seqs[n - 1] : 0};
		struct ck_retain_report rep;

		rc = ck_store_retain_ex(s, job, 0, &ro, &rep);
		npacks = rep.npacks;
		bytes = rep.pack_bytes;
		if (rc == 0) {
			report(job, removed, nremoved, npacks, bytes, rep.ntemp);
			if (rep.packs_held)
				fprintf(stderr, "ckpt: packs not collected while a checkpoint does not load: %s\n",
					ck_err_msg());
			done = 1;
		}
		ck_retain_report_free(&rep);
	}
	/* The whole job gone: its history of restores (ckpt report) too. */
	if (done && !seq && (rc = ck_restore_log_drop(s, job)) < 0)
		done = 0;
out:
	if (rc < 0 && nremoved)
		report(job, removed, nremoved, npacks, bytes, 0);
	/* The whole job gone: its lock object goes with it. */
	if (lock && done && !seq)
		ck_joblock_drop(lock);
	else
		ck_joblock_release(lock);
	free(removed);
	free(seqs);
	ck_store_close(s);
	return rc < 0 ? ckpt_fail(rc) : 0;
}

/* Reads and checks every chunk of a checkpoint that gc would keep in
 * place of older ones (ckpt verify's work, for each of them). */
struct gc_verify {
	int chunks; /* verified so far, for the report */
};

static int discard(void *arg, uint64_t off, const void *buf, size_t len)
{
	(void)arg;
	(void)off;
	(void)buf;
	(void)len;
	return 0;
}

static int gc_verify(void *arg, struct ck_store *s, const struct ck_manifest *m)
{
	struct gc_verify *v = arg;
	struct ck_reader *r = NULL;
	uint64_t i;
	int rc = ck_reader_open(s, m->job, m, &r);

	for (i = 0; rc == 0 && i < m->nchunks; i += 64) {
		uint32_t k = m->nchunks - i < 64 ? (uint32_t)(m->nchunks - i) : 64;

		rc = ck_reader_read(r, i, k, discard, NULL);
	}
	ck_reader_close(r);
	if (rc == 0)
		v->chunks += (int)m->nchunks;
	return rc;
}

int ckpt_cmd_gc(int argc, char **argv)
{
	struct ck_joblock *lock = NULL;
	struct ck_store *s = NULL;
	struct ck_retain_report rep;
	struct gc_verify gv = {0};
	struct ck_retain_opts ro = {.verify = gc_verify, .arg = &gv};
	struct ckpt_opts o;
	char seqs[256], job[CK_JOB_NAME_MAX + 1];
	int a, rc, owner;
	size_t nobj = 0;

	memset(&rep, 0, sizeof(rep));
	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_KEEP | CKPT_O_FORCE, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("gc: expected one JOB");
	if (ck_job_name_encode(argv[a], job, sizeof(job)) < 0)
		return ckpt_usage_error("gc: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	/* A job the store does not hold: nothing to do, and no lock to make. */
	rc = ck_store_list(s, prefix_of(job, seqs, sizeof(seqs)), count_cb, &nobj);
	if (rc < 0 || nobj == 0)
		goto out;
	rc = owner = take_lock(s, job, "ckpt gc", o.force, &lock);
	if (rc < 0)
		goto out;
	ro.flags = owner ? CK_RETAIN_OWNER | CK_RETAIN_SWEEP : 0;
	rc = ck_store_retain_ex(s, job, o.keep > 0 ? (unsigned)o.keep : 0, &ro, &rep);
	if (rc < 0)
		goto out;
	report(argv[a], rep.removed, rep.nremoved, rep.npacks, rep.pack_bytes, rep.ntemp);
	if (o.keep > 0 && rep.nkept < (size_t)o.keep && rep.ndamaged == 0 && rep.nkept) {
		fmt_seqs(rep.kept, rep.nkept, seqs, sizeof(seqs));
		printf("%s: %zu good checkpoint%s (%s), fewer than --keep %ld: none removed\n", argv[a], rep.nkept,
		       rep.nkept == 1 ? "" : "s", seqs, o.keep);
	}
	if (rep.ndamaged) {
		fmt_seqs(rep.damaged, rep.ndamaged, seqs, sizeof(seqs));
		if (rep.ndamaged == 1)
			fprintf(stderr,
				"ckpt: %s: damaged checkpoint %s kept and not counted (ckpt rm %s@%s removes it): %s\n",
				argv[a], seqs, argv[a], seqs, rep.damaged_why);
		else
			fprintf(stderr,
				"ckpt: %s: damaged checkpoints %s kept and not counted (ckpt rm %s@SEQ removes one); the "
				"newest: %s\n",
				argv[a], seqs, argv[a], rep.damaged_why);
		if (o.keep > 0 && rep.nkept < (size_t)o.keep) {
			fmt_seqs(rep.kept, rep.nkept, seqs, sizeof(seqs));
			fprintf(stderr, "ckpt: %s: %zu good checkpoint%s%s%s%s, fewer than --keep %ld: none removed\n",
				argv[a], rep.nkept, rep.nkept == 1 ? "" : "s", rep.nkept ? " (" : "", seqs,
				rep.nkept ? ")" : "", o.keep);
		}
	}
	if (rep.packs_held)
		fprintf(stderr, "ckpt: %s: packs not collected while a checkpoint does not load: %s\n", argv[a],
			ck_err_msg());
out:
	if (rc == 0 && nobj == 0)
		report(argv[a], NULL, 0, 0, 0, 0);
	if (rc == 0 && (rep.ndamaged || rep.packs_held))
		rc = 1; /* done, and damage found: status 2 */
	ck_joblock_release(lock);
	ck_retain_report_free(&rep);
	ck_store_close(s);
	if (rc < 0)
		return ckpt_fail(rc);
	return rc ? CK_EXIT_CORRUPT : 0;
}

int ckpt_cmd_unlock(int argc, char **argv)
{
	struct ck_lock_owner was;
	struct ck_store *s = NULL;
	struct ckpt_opts o;
	char who[512], job[CK_JOB_NAME_MAX + 1];
	int a, rc;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_FORCE, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("unlock: expected one JOB");
	if (ck_job_name_encode(argv[a], job, sizeof(job)) < 0)
		return ckpt_usage_error("unlock: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ck_joblock_break(s, job, o.force, 0, &was);
	if (rc == 0) {
		ck_lock_owner_describe(&was, who, sizeof(who));
		if (was.pid && !was.released)
			printf("%s: lock of %s removed\n", argv[a], who);
		else
			printf("%s: not locked\n", argv[a]);
	}
	ck_store_close(s);
	return rc < 0 ? ckpt_fail(rc) : 0;
}
