#include "launcher/store/s3/s3_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ck_buf_free(struct ck_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void ck_buf_reset(struct ck_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = 0;
}

int ck_buf_reserve(struct ck_buf *b, size_t extra)
{
	size_t want, ncap;
	char *np;

	if (b->oom)
		return -1;
	want = b->len + extra + 1;
	if (want <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 64;
	while (ncap < want)
		ncap *= 2;
	np = realloc(b->p, ncap);
	if (!np) {
		b->oom = 1;
		return -1;
	}
	b->p = np;
	b->cap = ncap;
	return 0;
}

void ck_buf_add(struct ck_buf *b, const void *p, size_t n)
{
	if (ck_buf_reserve(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
}

void ck_buf_adds(struct ck_buf *b, const char *s)
{
	ck_buf_add(b, s, strlen(s));
}

void ck_buf_addc(struct ck_buf *b, char c)
{
	ck_buf_add(b, &c, 1);
}

void ck_buf_addf(struct ck_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || ck_buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

char *ck_buf_steal(struct ck_buf *b)
{
	char *p;

	if (b->oom) {
		ck_buf_free(b);
		return NULL;
	}
	if (ck_buf_reserve(b, 0))
		return NULL;
	p = b->p;
	memset(b, 0, sizeof(*b));
	return p;
}

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '.' || c == '_' || c == '~';
}

void ck_buf_add_uri_encoded(struct ck_buf *b, const char *s, size_t n, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	if (ck_buf_reserve(b, n * 3))
		return;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			b->p[b->len++] = (char)c;
		} else {
			b->p[b->len++] = '%';
			b->p[b->len++] = hex[c >> 4];
			b->p[b->len++] = hex[c & 15];
		}
	}
	b->p[b->len] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *ck_uri_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1);
	size_t i, o = 0;

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = 0;
	return out;
}
