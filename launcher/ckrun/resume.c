/* Which checkpoint a resume restores: the newest, unless a file its
 * processes had open for writing is gone from a directory that is still
 * here (mappath.c). That is the job's own doing after the cut: a killed
 * run that went on to rename its temporary over the result, as an atomic
 * save does. Files are not rolled back, so that checkpoint can never come
 * back; an older one taken before the file was opened can, and the job
 * loses the steps between the two instead of all of them. Each step back
 * is said in one line; a few at most, only for that cause (a file that
 * moved with its directory needs --map-path, not an older checkpoint), and
 * only within the run (lineage) of the newest: a fresh start numbers its
 * checkpoints on from an earlier run's, whose state is another job's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/image/manifest.h"

#define CK_RESUME_BACK_MAX 3

static int ck__same_run(const struct ck_manifest *a, const struct ck_manifest *b)
{
	return a->has_lineage && b->has_lineage && !memcmp(a->lineage, b->lineage, sizeof(a->lineage));
}

int ck_resume_newest(struct ckrun *c, struct ck_manifest *m, struct ck_manifest **used)
{
	char why[1024];
	uint64_t *seqs = NULL, from;
	size_t n = 0;
	int r, back = 0;

	*used = m;
	r = ck_restore(c, m);
	/* MPI ranks restore through their agents, which took m already */
	if (r != -ESTALE || !ck_mappath_written_gone() || c->mpi_np)
		return r;
	snprintf(why, sizeof(why), "%s", ck_err_msg());
	if (ck_manifest_list(c->store, c->job, &seqs, &n) < 0)
		goto out;
	from = m->seq;
	for (size_t i = n; i-- > 0 && back < CK_RESUME_BACK_MAX;) {
		struct ck_manifest *old = NULL;
		int r2;

		if (seqs[i] >= m->seq)
			continue;
		back++;
		if ((r2 = ck_manifest_load(c->store, c->job, seqs[i], &old)) < 0) {
			ck_err_wrap("%s; and checkpoint %" PRIu64 ", before it", why, seqs[i]);
			r = r2;
			goto out;
		}
		if (!ck__same_run(old, m)) {
			ck_manifest_free(old);
			break; /* an earlier run's: nothing of this run to go back to */
		}
		fprintf(stderr, "ckrun: warning: checkpoint %" PRIu64 " of job %s cannot be restored: %s; going back to "
				"checkpoint %" PRIu64 "\n",
			from, c->job, back == 1 ? why : ck_err_msg(), seqs[i]);
		r2 = ck_restore(c, old);
		if (r2 == 0) {
			c->last_seq = m->seq; /* new ones follow the newest */
			*used = old;
			r = 0;
			goto out;
		}
		ck_manifest_free(old);
		if (r2 != -ESTALE || !ck_mappath_written_gone()) {
			/* the older one fails otherwise: that is the error to see */
			ck_err_wrap("%s; and checkpoint %" PRIu64 ", before it", why, seqs[i]);
			r = r2;
			goto out;
		}
		from = seqs[i];
	}
	ck_err_set("%s", why);
out:
	free(seqs);
	return r;
}
