/* Files a checkpoint maps pages of (the manifest's FILE table): their
 * content digest, and the check of the file found at a restore. */
#ifndef CK_IMAGE_MFILE_H
#define CK_IMAGE_MFILE_H

#include <stdint.h>

#include "launcher/image/manifest.h"

/* SHA-256 of f->path into f->digest (has_digest 1) when the file there is
 * still the recorded one before and after it is read, and not larger than
 * 4 GiB; else has_digest 0 (also once *cancel, if given, is set). 0, or
 * -ENOMEM. */
int ck_mfile_digest(struct ck_mfile *f, const int *cancel);

/* Takes the digest of the same file (path and identity) from prev, the
 * previous checkpoint's manifest. 1 when found. */
int ck_mfile_reuse(struct ck_mfile *f, const struct ck_manifest *prev);

/* The file at path (f's, or where --map-path put it) against f: 0, or
 * -ENXIO with one line naming the process, the file and what differs. */
int ck_mfile_check(int32_t pid, const struct ck_mfile *f, const char *path);

#endif
