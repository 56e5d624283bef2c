/* The image library's chunk interface, used by ckrun and ckpt as much as
 * by the writer and reader: zero test, data pages, hashing, verification
 * of one stored chunk. (Defined in chunk_writer.c and chunk_reader.c,
 * where the writer's hot path inlines them.) */
#ifndef CK_IMAGE_CHUNK_H
#define CK_IMAGE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/image/manifest.h"

/* 1 if all len bytes are zero. */
int ck_chunk_is_zero(const void *buf, size_t len);
#define CK_PAGE_SIZE 4096u
/* How many 4 KiB pages of buf[0..len) hold a non-zero byte (the last one
 * may be short). */
uint64_t ck_data_pages(const void *buf, size_t len);
/* SHA-256 of buf; 0 or -EIO. */
int ck_sha256(const void *buf, size_t len, uint8_t out[CK_HASH_LEN]);

/* Checks the stored bytes of one chunk (clen bytes at stored; nothing for a
 * zero chunk): decompresses into scratch (CK_CHUNK_SIZE bytes) and compares
 * length and SHA-256. 0, or -EBADMSG with *why saying what is wrong. */
int ck_chunk_verify(const struct ck_chunk *c, const void *stored, void *scratch, const char **why);

#endif
