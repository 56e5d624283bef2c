/* Large buffers of a round (the write-protect snapshot's pool, the
 * writer's packs), kept from one round to the next. */
#ifndef CK_COMMON_BIGBUF_H
#define CK_COMMON_BIGBUF_H

#include <stddef.h>

/* len bytes (a multiple of 2 MiB), 2 MiB aligned, advised for huge pages;
 * contents undefined. NULL with errno on failure. */
void *ck_bigbuf_get(size_t len);
/* Gives back a buffer of ck_bigbuf_get(len) (NULL is fine). */
void ck_bigbuf_put(void *p, size_t len);

#endif
