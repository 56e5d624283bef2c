/* Job names as users give them, and as the store holds them.
 *
 * A user's job name may hold any byte a file name can (a program named
 * "a+b", a name with spaces or UTF-8). The store, the control socket and S3
 * keys see an encoded form: letters, digits, '_', '-' and '.' (not
 * leading) stand for themselves, every other byte is "%XX". Names that were
 * valid before the encoding existed encode to themselves, so older stores
 * keep their keys. */
#include "launcher/image/manifest.h"

#include <errno.h>
#include <string.h>

#include "launcher/common/ck_err.h"

static int plain(unsigned char c, size_t at)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || (c == '.' && at > 0);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The store form, canonical: "%XX" (upper-case hex) only for a byte that
 * would not stand for itself, so that one user's name has one store name. */
int ck_job_name_valid(const char *name)
{
	size_t i;

	if (!name || !name[0] || strlen(name) > CK_JOB_NAME_MAX)
		return 0;
	for (i = 0; name[i]; i++) {
		int hi, lo;

		if (plain((unsigned char)name[i], i))
			continue;
		if (name[i] != '%' || (hi = hexval(name[i + 1])) < 0 || (lo = hexval(name[i + 2])) < 0)
			return 0;
		if (plain((unsigned char)(hi << 4 | lo), i) || (hi << 4 | lo) == '/' || (hi | lo) == 0)
			return 0;
		i += 2;
	}
	return 1;
}

int ck_job_name_encode(const char *name, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;

	if (!name || !name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
		ck_err_set("invalid job name \"%s\" (empty, \".\", \"..\" or holding '/')", name ? name : "");
		return -EINVAL;
	}
	for (i = 0; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];

		size_t w = plain(c, i) ? 1 : 3;

		if (o + w > CK_JOB_NAME_MAX || o + w + 1 > len)
			goto too_long;
		if (plain(c, i)) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = 0;
	return 0;
too_long:
	ck_err_set("job name \"%s\" too long (at most %d bytes, each byte other than [A-Za-z0-9._-] counting 3)",
		   name, CK_JOB_NAME_MAX);
	return -ENAMETOOLONG;
}

int ck_job_name_decode(const char *enc, char *out, size_t len)
{
	size_t o = 0;

	if (!ck_job_name_valid(enc))
		return -EINVAL;
	for (; *enc; o++) {
		if (o + 1 >= len)
			return -ENAMETOOLONG;
		if (enc[0] == '%') {
			out[o] = (char)(hexval(enc[1]) << 4 | hexval(enc[2]));
			enc += 3;
		} else {
			out[o] = *enc++;
		}
	}
	out[o] = 0;
	return 0;
}
