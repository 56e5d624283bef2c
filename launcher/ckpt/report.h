/* ckpt report: a picture of a job's checkpoint history.
 *
 * cmd_report.c gathers the figures (manifests, restore records),
 * report_layout.c turns them into a list of shapes with their places and
 * colours, and that one list is written out as SVG text (report_svg.c) or
 * drawn into pixels and written as PNG (report_png.c, report_font.c): both
 * pictures hold the same shapes at the same places. */
#ifndef CKPT_REPORT_H
#define CKPT_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "launcher/image/restore_log.h"

/* One checkpoint's figures. */
struct rp_ckpt {
	uint64_t seq;
	int ok; /* its manifest loads; else only seq is known */
	uint64_t time_ns, duration_ns, frozen_ns;
	uint64_t logical, stored; /* the manifest's logical and stored bytes */
	uint64_t chunk_bytes;     /* bytes of every chunk (memory, file and pipe data) */
	uint64_t new_bytes;       /* of those, bytes of chunks this round wrote anew */
};

struct rp_data {
	const char *job;   /* as shown (printable ASCII) */
	const char *store; /* the store's URI */
	struct rp_ckpt *c; /* in sequence order */
	size_t nc;
	struct ck_restore_rec *r; /* in time order */
	size_t nr;
};

/* The palette: both writers use these colours, the PNG as its PLTE. */
enum {
	RP_WHITE, RP_INK, RP_GRID, RP_PLOT, RP_LOGICAL, RP_STORED, RP_REUSED, RP_DURATION, RP_FROZEN,
	RP_RESTORE, RP_DAMAGED, RP_NCOLORS
};
extern const uint32_t rp_palette[RP_NCOLORS]; /* 0xRRGGBB */

enum rp_kind {
	RP_RECT,  /* x, y, w, h filled */
	RP_LINE,  /* from (x, y) to (x + w, y + h), horizontal or vertical, 1 px (w or h 0) */
	RP_TRI,   /* a triangle pointing down in the box x, y, w, h */
	RP_TEXT,  /* text at x (align), top y, 7*scale pixels high above the baseline */
	RP_BEGIN, /* a group: cls, seq, text = tooltip (SVG only) */
	RP_END,
};

struct rp_item {
	enum rp_kind kind;
	int x, y, w, h;
	int color;
	int scale; /* RP_TEXT: 1 or 2 */
	int align; /* RP_TEXT: 0 left, 1 centre, 2 right */
	const char *cls;  /* SVG class (static string) or NULL */
	uint64_t seq;     /* SVG data-seq (0: none) */
	const char *panel; /* SVG data-panel (static string) or NULL */
	char *text;
};

struct rp_pic {
	int w, h;
	struct rp_item *v;
	size_t n, cap;
};

/* Glyph of a printable ASCII character (other bytes: '?'): RP_FONT_ROWS
 * rows of 5 bits, the leftmost column in bit 4; rows 0-6 stand on the
 * baseline, 7-8 are descenders. Cells are RP_FONT_W wide. */
#define RP_FONT_W 6
#define RP_FONT_ROWS 9
const uint8_t *rp_font_glyph(unsigned char c);

int rp_layout(const struct rp_data *d, struct rp_pic *pic);
void rp_pic_free(struct rp_pic *pic);
/* 0 or -errno (the stream's error). */
int rp_write_svg(const struct rp_pic *pic, FILE *f);
int rp_write_png(const struct rp_pic *pic, FILE *f);
/* CRC-32 (ISO-HDLC, PNG's) and Adler-32 (zlib's), exposed for the unit test. */
uint32_t rp_crc32(uint32_t crc, const void *buf, size_t len);
uint32_t rp_adler32(uint32_t a, const void *buf, size_t len);

#endif
