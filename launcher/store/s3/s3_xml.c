/* Just enough XML for S3 answers: the text of a named element, and a walk
 * over repeated elements (<Contents> of a listing). S3 answers are flat and
 * generated, so no general parser is needed. */
#include "launcher/store/s3/s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *find(const char *hay, size_t len, const char *needle)
{
	size_t n = strlen(needle);

	if (n > len)
		return NULL;
	return memmem(hay, len, needle, n);
}

int ck_xml_next(const char *xml, size_t len, size_t *pos, const char *tag, const char **in, size_t *inlen)
{
	char open[128], close[128];
	const char *a, *b, *p;
	size_t olen;

	if (*pos >= len)
		return 0;
	snprintf(open, sizeof(open), "<%s", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	olen = strlen(open);
	p = xml + *pos;
	for (;;) {
		a = find(p, len - (size_t)(p - xml), open);
		if (!a)
			return 0;
		/* "<Key" must not match "<KeyCount>" */
		if (a + olen < xml + len && (a[olen] == '>' || a[olen] == ' ' || a[olen] == '/'))
			break;
		p = a + olen;
	}
	a = memchr(a, '>', len - (size_t)(a - xml));
	if (!a)
		return 0;
	if (a[-1] == '/') { /* <Tag/> */
		*in = a + 1;
		*inlen = 0;
		*pos = (size_t)(a + 1 - xml);
		return 1;
	}
	a++;
	b = find(a, len - (size_t)(a - xml), close);
	if (!b)
		return 0;
	*in = a;
	*inlen = (size_t)(b - a);
	*pos = (size_t)(b - xml) + strlen(close);
	return 1;
}

char *ck_xml_decode(const char *s, size_t n)
{
	static const struct {
		const char *ent;
		char c;
	} ents[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };
	struct ck_buf b = { 0 };
	size_t i, k;

	ck_buf_adds(&b, "");
	for (i = 0; i < n; i++) {
		if (s[i] == '&') {
			for (k = 0; k < sizeof(ents) / sizeof(ents[0]); k++) {
				size_t el = strlen(ents[k].ent);

				if (i + el <= n && !memcmp(s + i, ents[k].ent, el)) {
					ck_buf_addc(&b, ents[k].c);
					i += el - 1;
					break;
				}
			}
			if (k < sizeof(ents) / sizeof(ents[0]))
				continue;
			if (i + 2 < n && s[i + 1] == '#') {
				/* numeric reference: written back as UTF-8 */
				const char *semi = memchr(s + i, ';', n - i);
				unsigned long cp;

				if (semi) {
					cp = s[i + 2] == 'x' ? strtoul(s + i + 3, NULL, 16) : strtoul(s + i + 2, NULL, 10);
					if (cp < 0x80) {
						ck_buf_addc(&b, (char)cp);
					} else if (cp < 0x800) {
						ck_buf_addc(&b, (char)(0xc0 | (cp >> 6)));
						ck_buf_addc(&b, (char)(0x80 | (cp & 0x3f)));
					} else if (cp < 0x10000) {
						ck_buf_addc(&b, (char)(0xe0 | (cp >> 12)));
						ck_buf_addc(&b, (char)(0x80 | ((cp >> 6) & 0x3f)));
						ck_buf_addc(&b, (char)(0x80 | (cp & 0x3f)));
					} else {
						ck_buf_addc(&b, (char)(0xf0 | (cp >> 18)));
						ck_buf_addc(&b, (char)(0x80 | ((cp >> 12) & 0x3f)));
						ck_buf_addc(&b, (char)(0x80 | ((cp >> 6) & 0x3f)));
						ck_buf_addc(&b, (char)(0x80 | (cp & 0x3f)));
					}
					i = (size_t)(semi - s);
					continue;
				}
			}
		}
		ck_buf_addc(&b, s[i]);
	}
	return ck_buf_steal(&b);
}

char *ck_xml_text(const char *xml, size_t len, const char *tag)
{
	const char *in;
	size_t inlen, pos = 0;

	if (!xml || !ck_xml_next(xml, len, &pos, tag, &in, &inlen))
		return NULL;
	return ck_xml_decode(in, inlen);
}
