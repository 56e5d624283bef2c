/* One process's memory as a checkpoint holds it, read by address: for the
 * unwinder's accessors and the core file. Private mappings come from the
 * image's chunks (verified, a few cached); shared mappings of files that
 * still exist come from the file, as the checkpoint itself relies on. */
#ifndef CKPT_IMGMEM_H
#define CKPT_IMGMEM_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/image/chunkio.h"
#include "launcher/image/manifest.h"

struct ckpt_img;

int ckpt_img_open(struct ck_reader *rd, const struct ck_manifest *m, const struct ck_proc *p, struct ckpt_img **out);
void ckpt_img_close(struct ckpt_img *im);
/* The region holding addr, or NULL. */
const struct ck_region *ckpt_img_region(const struct ckpt_img *im, uint64_t addr);
/* Reads len bytes at addr: 0, -EFAULT where some byte is in no mapping or
 * its contents are not in the image (a device's, vvar), or the reader's
 * error (-EBADMSG: a corrupt chunk, with the message set). */
int ckpt_img_read(struct ckpt_img *im, uint64_t addr, void *buf, size_t len);
/* Whether the region's bytes can be read (saved, or a file that holds them). */
int ckpt_img_readable(const struct ck_region *g);

#endif
