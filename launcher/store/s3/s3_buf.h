/* Growable byte buffer and string helpers shared by the S3 client and the
 * SigV4 signer. Allocation failures are sticky: once one append fails the
 * buffer stays failed (oom set), so callers check once at the end. */
#ifndef CK_S3_BUF_H
#define CK_S3_BUF_H

#include <stddef.h>

struct ck_buf {
	char *p;     /* always NUL-terminated when len > 0 or after any append */
	size_t len;
	size_t cap;
	int oom;
};

void ck_buf_free(struct ck_buf *b);
void ck_buf_reset(struct ck_buf *b);
int ck_buf_reserve(struct ck_buf *b, size_t extra);
void ck_buf_add(struct ck_buf *b, const void *p, size_t n);
void ck_buf_adds(struct ck_buf *b, const char *s);
void ck_buf_addc(struct ck_buf *b, char c);
void ck_buf_addf(struct ck_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the string over to the caller (NULL after an allocation failure). */
char *ck_buf_steal(struct ck_buf *b);

/* RFC 3986 percent-encoding as SigV4 wants it: every byte except A-Z a-z
 * 0-9 - . _ ~ becomes %XX (upper-case hex); '/' kept when keep_slash. */
void ck_buf_add_uri_encoded(struct ck_buf *b, const char *s, size_t n, int keep_slash);
/* Decodes %XX sequences; a '%' not followed by two hex digits stays as is.
 * Returns a malloc'd string (NULL on allocation failure). */
char *ck_uri_decode(const char *s, size_t n);

#endif
