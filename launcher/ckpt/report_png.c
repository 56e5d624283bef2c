/* ckpt report: the picture in pixels, written as PNG (report.h).
 *
 * The shapes are axis-aligned rectangles, lines, small triangles and
 * bitmap text, so the rasterizer is a few loops over a canvas of palette
 * indices. The PNG is an indexed image (colour type 3, 8 bits) whose zlib
 * stream uses stored deflate blocks: no compression, hence no zlib. The
 * picture is a few hundred KiB at most, and this keeps the writer a page
 * of code whose every byte the unit test checks. */
#include "launcher/ckpt/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

struct rp_canvas {
	int w, h;
	uint8_t *px; /* w * h palette indices */
};

static void rp_fill(struct rp_canvas *c, int x, int y, int w, int h, int color)
{
	int x1 = x + w, y1 = y + h;

	x = x < 0 ? 0 : x;
	y = y < 0 ? 0 : y;
	x1 = x1 > c->w ? c->w : x1;
	y1 = y1 > c->h ? c->h : y1;
	for (int j = y; j < y1; j++)
		if (x < x1)
			memset(c->px + (size_t)j * (size_t)c->w + (size_t)x, color, (size_t)(x1 - x));
}

static void rp_draw_text(struct rp_canvas *c, const struct rp_item *it)
{
	int s = it->scale, n = (int)strlen(it->text), width = n * RP_FONT_W * s - s, x = it->x;

	if (it->align == 1)
		x -= width / 2;
	else if (it->align == 2)
		x -= width;
	for (int k = 0; k < n; k++) {
		const uint8_t *g = rp_font_glyph((unsigned char)it->text[k]);

		for (int row = 0; row < RP_FONT_ROWS; row++)
			for (int col = 0; col < 5; col++)
				if (g[row] & (0x10 >> col))
					rp_fill(c, x + (k * RP_FONT_W + col) * s, it->y + row * s, s, s, it->color);
	}
}

static void rp_draw(struct rp_canvas *c, const struct rp_item *it)
{
	switch (it->kind) {
	case RP_RECT:
		rp_fill(c, it->x, it->y, it->w, it->h, it->color);
		break;
	case RP_LINE: /* horizontal or vertical, end points included */
		rp_fill(c, it->x, it->y, it->w + 1, it->h + 1, it->color);
		break;
	case RP_TRI:
		for (int i = 0; i < it->h; i++) {
			int half = it->w / 2 * (it->h - i) / it->h;

			rp_fill(c, it->x + it->w / 2 - half, it->y + i, 2 * half + 1, 1, it->color);
		}
		break;
	case RP_TEXT:
		rp_draw_text(c, it);
		break;
	case RP_BEGIN:
	case RP_END:
		break;
	}
}

uint32_t rp_crc32(uint32_t crc, const void *buf, size_t len)
{
	static uint32_t table[256];
	const uint8_t *p = buf;

	if (!table[1]) /* reflected polynomial 0xedb88320; table[1] is never 0 once made */
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t v = i;

			for (int k = 0; k < 8; k++)
				v = v & 1 ? 0xedb88320u ^ (v >> 1) : v >> 1;
			table[i] = v;
		}
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint32_t rp_adler32(uint32_t a, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t s1 = a & 0xffff, s2 = a >> 16;

	while (len) {
		/* 5552 bytes keep s2 below 2^32 before the modulo (zlib's bound) */
		size_t n = len < 5552 ? len : 5552;

		len -= n;
		while (n--) {
			s1 += *p++;
			s2 += s1;
		}
		s1 %= 65521;
		s2 %= 65521;
	}
	return s2 << 16 | s1;
}

static void rp_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void rp_chunk(FILE *f, const char *type, const uint8_t *data, size_t len)
{
	uint8_t b[4];
	uint32_t crc = rp_crc32(0, type, 4);

	crc = rp_crc32(crc, data, len);
	rp_be32(b, (uint32_t)len);
	fwrite(b, 1, 4, f);
	fwrite(type, 1, 4, f);
	if (len)
		fwrite(data, 1, len, f);
	rp_be32(b, crc);
	fwrite(b, 1, 4, f);
}

/* The rows (each a filter byte 0 and the indices) as a zlib stream of
 * stored blocks. */
static uint8_t *rp_zlib_stored(const uint8_t *raw, size_t len, size_t *out_len)
{
	size_t nblocks = len / 65535 + 1, n = 2 + nblocks * 5 + len + 4, o = 0;
	uint8_t *z = malloc(n);

	if (!z)
		return NULL;
	z[o++] = 0x78; /* deflate, 32 KiB window */
	z[o++] = 0x01; /* no dictionary, fastest; (0x78 << 8 | 0x01) % 31 == 0 */
	for (size_t i = 0; i < nblocks; i++) {
		size_t b = len - i * 65535 < 65535 ? len - i * 65535 : 65535;

		z[o++] = i == nblocks - 1; /* BFINAL, BTYPE 00: stored */
		z[o++] = (uint8_t)b;
		z[o++] = (uint8_t)(b >> 8);
		z[o++] = (uint8_t)~b;
		z[o++] = (uint8_t)(~b >> 8);
		memcpy(z + o, raw + i * 65535, b);
		o += b;
	}
	rp_be32(z + o, rp_adler32(1, raw, len));
	*out_len = o + 4;
	return z;
}

int rp_write_png(const struct rp_pic *pic, FILE *f)
{
	static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	struct rp_canvas c = {pic->w, pic->h, NULL};
	size_t stride = (size_t)pic->w + 1, zlen = 0;
	uint8_t ihdr[13], plte[3 * RP_NCOLORS], *raw = NULL, *z = NULL;
	int rc = -ENOMEM;

	c.px = calloc((size_t)c.w * (size_t)c.h, 1);
	raw = malloc(stride * (size_t)c.h);
	if (!c.px || !raw)
		goto out;
	for (size_t i = 0; i < pic->n; i++)
		rp_draw(&c, &pic->v[i]);
	for (int y = 0; y < c.h; y++) {
		raw[(size_t)y * stride] = 0; /* filter: none */
		memcpy(raw + (size_t)y * stride + 1, c.px + (size_t)y * (size_t)c.w, (size_t)c.w);
	}
	if (!(z = rp_zlib_stored(raw, stride * (size_t)c.h, &zlen)))
		goto out;
	rp_be32(ihdr, (uint32_t)c.w);
	rp_be32(ihdr + 4, (uint32_t)c.h);
	ihdr[8] = 8;  /* bits per index */
	ihdr[9] = 3;  /* indexed colour */
	ihdr[10] = 0; /* deflate */
	ihdr[11] = 0; /* adaptive filtering, each row says its filter */
	ihdr[12] = 0; /* not interlaced */
	for (int i = 0; i < RP_NCOLORS; i++) {
		plte[3 * i] = (uint8_t)(rp_palette[i] >> 16);
		plte[3 * i + 1] = (uint8_t)(rp_palette[i] >> 8);
		plte[3 * i + 2] = (uint8_t)rp_palette[i];
	}
	fwrite(sig, 1, sizeof(sig), f);
	rp_chunk(f, "IHDR", ihdr, sizeof(ihdr));
	rp_chunk(f, "PLTE", plte, sizeof(plte));
	rp_chunk(f, "IDAT", z, zlen);
	rp_chunk(f, "IEND", NULL, 0);
	rc = ferror(f) ? -EIO : 0;
out:
	if (rc == -ENOMEM)
		ck_err_set("out of memory drawing the report");
	free(c.px);
	free(raw);
	free(z);
	return rc;
}
