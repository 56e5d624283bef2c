/* Bytes of a parked process copied aside, written after the release
 * (stash.c). */
#ifndef CK_CKRUN_STASH_H
#define CK_CKRUN_STASH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher/image/chunkio.h"
#include "launcher/image/manifest.h"

struct ck_stash;

/* Copies region `region` of p (process pid, parked) aside: 1, or 0 when it
 * must be read the usual way (no room, no file, a read that failed). */
int ck_stash_take(struct ck_stash **sp, pid_t pid, struct ck_proc *p, size_t region);
/* After the release: every region copied aside into the writer. */
int ck_stash_write(struct ck_stash *s, struct ck_writer *w, struct ck_manifest *m);
uint64_t ck_stash_bytes(const struct ck_stash *s);
void ck_stash_free(struct ck_stash *s);

#endif
