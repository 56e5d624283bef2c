/* ckpt report's writers (launcher/ckpt/report_*.c): CRC-32 and Adler-32
 * against known values; a PNG whose chunks, CRCs, stored deflate blocks and
 * Adler-32 are checked here byte by byte, and whose decoded pixels hold
 * the bars where the layout put them; bar heights from the figures;
 * SVG text escaped. */
#include <stdlib.h>
#include <string.h>

#include "launcher/ckpt/report.h"
#include "tests/unit/unit.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void sums(void)
{
	CHECK_EQ_INT(rp_crc32(0, "123456789", 9), 0xcbf43926u);
	CHECK_EQ_INT(rp_crc32(rp_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
	CHECK_EQ_INT(rp_adler32(1, "Wikipedia", 9), 0x11e60398u);
	CHECK_EQ_INT(rp_adler32(1, "", 0), 1);
	{
		/* long input: the modulo is taken often enough */
		size_t n = 100000;
		uint8_t *b = malloc(n);
		uint32_t s1 = 1, s2 = 0;

		for (size_t i = 0; i < n; i++) {
			b[i] = 0xff;
			s1 = (s1 + 0xff) % 65521;
			s2 = (s2 + s1) % 65521;
		}
		CHECK_EQ_INT(rp_adler32(1, b, n), s2 << 16 | s1);
		free(b);
	}
}

/* Two checkpoints, one restore. */
static struct rp_ckpt cks[2] = {
	{.seq = 1, .ok = 1, .time_ns = 1000, .duration_ns = 400, .frozen_ns = 100, .logical = 1000, .stored = 600,
	 .chunk_bytes = 1000, .new_bytes = 600},
	{.seq = 2, .ok = 1, .time_ns = 3000, .duration_ns = 200, .frozen_ns = 200, .logical = 1000, .stored = 1,
	 .chunk_bytes = 1000, .new_bytes = 0},
};
static struct ck_restore_rec rst = {.seq = 1, .time_ns = 2000, .duration_ns = 50};

static const struct rp_item *find(const struct rp_pic *p, const char *cls, uint64_t seq)
{
	uint64_t in = 0;

	for (size_t i = 0; i < p->n; i++) {
		const struct rp_item *it = &p->v[i];

		if (it->kind == RP_BEGIN)
			in = it->seq;
		else if (it->kind == RP_END)
			in = 0;
		else if (it->cls && !strcmp(it->cls, cls) && in == seq)
			return it;
	}
	return NULL;
}

static void layout(struct rp_pic *p)
{
	struct rp_data d = {.job = "j<&>", .store = "/s", .c = cks, .nc = 2, .r = &rst, .nr = 1};
	const struct rp_item *a, *b, *r;

	CHECK_EQ_INT(rp_layout(&d, p), 0);
	a = find(p, "logical", 1);
	b = find(p, "stored", 2);
	r = find(p, "restore-line", 1);
	CHECK(a && b && r);
	if (!a || !b || !r)
		return;
	CHECK_EQ_INT(a->h, 130);     /* the largest */
	CHECK_EQ_INT(b->h, 1);       /* 1 of 1000 rounds to 0: drawn 1 px */
	CHECK_EQ_INT(a->y + a->h, b->y + b->h); /* one baseline */
	CHECK_EQ_INT(find(p, "stored", 1)->h, 78); /* 600 * 130 / 1000 */
	CHECK_EQ_INT(find(p, "reused", 2)->h, 130); /* nothing new */
	CHECK_EQ_INT(find(p, "reused", 1)->h, 52);
	CHECK_EQ_INT(find(p, "duration", 1)->h, 130);
	CHECK_EQ_INT(find(p, "frozen", 2)->h, 65);
	/* the restore between the two checkpoints */
	CHECK(r->x > a->x + a->w && r->x < b->x);
}

/* Decodes the PNG written for p: structure checked, pixels returned. */
static uint8_t *png_pixels(const uint8_t *f, size_t len, int *w, int *h)
{
	static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	const uint8_t *z = NULL;
	size_t zlen = 0, off = 8, o, rawlen, got = 0;
	uint8_t *raw, *px;
	int last = 0, seen_plte = 0;

	CHECK(len > 8 && !memcmp(f, sig, 8));
	while (off + 12 <= len) {
		uint32_t n = be32(f + off);
		const uint8_t *type = f + off + 4;

		if (off + 12 + n > len)
			break;
		CHECK_EQ_INT(rp_crc32(0, type, 4 + n), be32(f + off + 8 + n));
		if (!memcmp(type, "IHDR", 4)) {
			*w = (int)be32(type + 4);
			*h = (int)be32(type + 8);
			CHECK_EQ_INT(type[12], 8);
			CHECK_EQ_INT(type[13], 3);
		} else if (!memcmp(type, "PLTE", 4)) {
			CHECK_EQ_INT(n, 3 * RP_NCOLORS);
			seen_plte = 1;
		} else if (!memcmp(type, "IDAT", 4)) {
			z = type + 4;
			zlen = n;
		} else if (!memcmp(type, "IEND", 4)) {
			last = off + 12 == len;
		}
		off += 12 + n;
	}
	CHECK(last && seen_plte && z);
	if (!z || zlen < 6)
		return NULL;
	CHECK_EQ_INT(z[0], 0x78);
	CHECK_EQ_INT((z[0] << 8 | z[1]) % 31, 0);
	rawlen = (size_t)*h * ((size_t)*w + 1);
	raw = malloc(rawlen);
	for (o = 2; o + 5 <= zlen - 4;) {
		unsigned fin = z[o] & 1, blen = z[o + 1] | z[o + 2] << 8, nlen = z[o + 3] | z[o + 4] << 8;

		CHECK_EQ_INT(z[o] >> 1, 0); /* stored */
		CHECK_EQ_INT(blen ^ 0xffff, nlen);
		if (got + blen > rawlen)
			break;
		memcpy(raw + got, z + o + 5, blen);
		got += blen;
		o += 5 + blen;
		if (fin)
			break;
	}
	CHECK_EQ_INT(got, rawlen);
	CHECK_EQ_INT(rp_adler32(1, raw, rawlen), be32(z + zlen - 4));
	px = malloc((size_t)*w * (size_t)*h);
	for (int y = 0; y < *h; y++) {
		CHECK_EQ_INT(raw[(size_t)y * ((size_t)*w + 1)], 0);
		memcpy(px + (size_t)y * (size_t)*w, raw + (size_t)y * ((size_t)*w + 1) + 1, (size_t)*w);
	}
	free(raw);
	return px;
}

static void png(const struct rp_pic *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int w = 0, h = 0;
	uint8_t *px;
	const struct rp_item *a = find(p, "logical", 1), *b = find(p, "stored", 2);

	CHECK_EQ_INT(rp_write_png(p, f), 0);
	fclose(f);
	px = png_pixels((const uint8_t *)buf, len, &w, &h);
	CHECK_EQ_INT(w, p->w);
	CHECK_EQ_INT(h, p->h);
	if (px && a && b) {
		int ax = a->x + a->w / 2, bx = b->x + b->w / 2;

		CHECK_EQ_INT(px[(size_t)a->y * (size_t)w + (size_t)ax], RP_LOGICAL);
		CHECK_EQ_INT(px[(size_t)(a->y + a->h - 1) * (size_t)w + (size_t)ax], RP_LOGICAL);
		CHECK_EQ_INT(px[(size_t)(b->y + b->h - 1) * (size_t)w + (size_t)bx], RP_STORED);
		CHECK(px[(size_t)(b->y - 1) * (size_t)w + (size_t)bx] != RP_STORED);
		CHECK_EQ_INT(px[0], RP_WHITE);
	}
	free(px);
	free(buf);
}

static void svg(const struct rp_pic *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK_EQ_INT(rp_write_svg(p, f), 0);
	fclose(f);
	CHECK(strstr(buf, "ckpt report: j&lt;&amp;&gt;</text>") != NULL);
	CHECK(strstr(buf, "<g class=\"restore\" data-seq=\"1\"><title>restore of checkpoint 1") != NULL);
	CHECK(strstr(buf, "<g class=\"checkpoint\" data-seq=\"2\">") != NULL);
	CHECK(strstr(buf, "</svg>\n") != NULL);
	free(buf);
}

static void font(void)
{
	/* every printable character but the space has ink; others draw '?' */
	for (int c = 33; c < 127; c++) {
		const uint8_t *g = rp_font_glyph((unsigned char)c);
		int ink = 0;

		for (int r = 0; r < RP_FONT_ROWS; r++)
			ink |= g[r];
		CHECK(ink != 0 && !(ink & ~0x1f));
		CHECK(!g[7] == !strchr("gjpqy", c)); /* descenders: these only */
	}
	CHECK(rp_font_glyph(0x80) == rp_font_glyph('?'));
	CHECK(rp_font_glyph('\n') == rp_font_glyph('?'));
}

void ck_unit_run(void)
{
	struct rp_pic p = {0};

	sums();
	font();
	layout(&p);
	png(&p);
	svg(&p);
	rp_pic_free(&p);
}
