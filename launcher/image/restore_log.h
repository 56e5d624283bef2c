/* The job's restores, recorded in its store for `ckpt report`.
 *
 * A manifest says when a checkpoint was taken, nothing says when one was
 * restored; ckrun --resume adds a small text object per restore under
 * JOB/restores/ (include/ckrun/FORMAT.md), through the store interface, so
 * that the file store and S3 hold the same history. Manifests do not
 * change. */
#ifndef CK_RESTORE_LOG_H
#define CK_RESTORE_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/store/store.h"

struct ck_restore_rec {
	uint64_t seq;         /* the checkpoint restored */
	uint64_t time_ns;     /* CLOCK_REALTIME when the job ran again */
	uint64_t duration_ns; /* the restore, from the manifest's load to the job running */
};

/* Writes one record (JOB/restores/TIME-SEQ, no replace). */
int ck_restore_log_put(struct ck_store *s, const char *job, const struct ck_restore_rec *r);
/* Every record of job, oldest first (malloc'd; none: *n 0). A record
 * that does not parse is left out and counted in *nbad. */
int ck_restore_log_list(struct ck_store *s, const char *job, struct ck_restore_rec **v, size_t *n,
			size_t *nbad);
/* Deletes every record of job (ckpt rm of the whole job). */
int ck_restore_log_drop(struct ck_store *s, const char *job);

/* The record's text and its parser (for the unit test). */
int ck_restore_rec_format(const struct ck_restore_rec *r, char *buf, size_t len);
int ck_restore_rec_parse(const char *buf, size_t len, struct ck_restore_rec *r);

#endif
