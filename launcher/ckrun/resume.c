/* Which checkpoint a resume restores: the newest, unless a file its
 * processes had open for writing is gone from a directory that is still
 * here (mappath.c says -ESTALE). That is the job's own doing after the cut:
 * a killed run that went on to rename its temporary over the result, as
 * an atomic save does. Files are not rolled back, so that checkpoint can
 * never come back; an older one taken before the file was opened can, and
 * the job loses the steps between the two instead of all of them. Each
 * step back is said in one line; a few at most, and only for that cause:
 * a file that moved with its directory needs --map-path, not an older
 * checkpoint. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/image/manifest.h"

#define CK_RESUME_BACK_MAX 3

int ck_resume_newest(struct ckrun *c, struct ck_manifest *m, struct ck_manifest **used)
{
	char why[1024];
	uint64_t *seqs = NULL;
	size_t n = 0;
	int r, back = 0;

	*used = m;
	r = ck_restore(c, m);
	/* MPI ranks restore through their agents, which took m already */
	if (r != -ESTALE || c->mpi_np)
		return r;
	snprintf(why, sizeof(why), "%s", ck_err_msg());
	if (ck_manifest_list(c->store, c->job, &seqs, &n) < 0)
		goto out;
	for (size_t i = n; i-- > 0 && back < CK_RESUME_BACK_MAX;) {
		struct ck_manifest *old = NULL;
		int r2;

		if (seqs[i] >= m->seq)
			continue;
		back++;
		fprintf(stderr, "ckrun: warning: checkpoint %" PRIu64 " of job %s cannot be restored: %s; going back to "
				"checkpoint %" PRIu64 "\n",
			back == 1 ? m->seq : seqs[i + 1], c->job, back == 1 ? why : ck_err_msg(), seqs[i]);
		if ((r2 = ck_manifest_load(c->store, c->job, seqs[i], &old)) < 0)
			continue;
		r2 = ck_restore(c, old);
		if (r2 == 0) {
			c->last_seq = m->seq; /* new ones follow the newest */
			*used = old;
			r = 0;
			goto out;
		}
		ck_manifest_free(old);
		if (r2 != -ESTALE)
			break;
	}
out:
	free(seqs);
	if (r < 0)
		ck_err_set("%s", why);
	return r;
}
