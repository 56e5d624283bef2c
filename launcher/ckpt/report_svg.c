/* ckpt report: the picture as SVG text (report.h). Shapes keep the
 * layout's integer pixels; marks carry class and data-seq attributes, and
 * each checkpoint and restore a <title> with its figures (a tooltip). */
#include "launcher/ckpt/report.h"

#include <errno.h>
#include <inttypes.h>

/* Text as XML character data or attribute value: the five specials
 * escaped, anything but printable ASCII as '?'. */
static void rp_xml(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		switch (c) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fputc(c >= 0x20 && c < 0x7f ? c : '?', f);
		}
	}
}

static void rp_attrs(FILE *f, const struct rp_item *it)
{
	if (it->cls) {
		fputs(" class=\"", f);
		rp_xml(f, it->cls);
		fputc('"', f);
	}
	if (it->panel)
		fprintf(f, " data-panel=\"%s\"", it->panel);
	if (it->seq)
		fprintf(f, " data-seq=\"%" PRIu64 "\"", it->seq);
}

static void rp_item_svg(FILE *f, const struct rp_item *it)
{
	static const char *anchor[] = {"start", "middle", "end"};
	uint32_t c = rp_palette[it->color];

	switch (it->kind) {
	case RP_RECT:
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%06x\"", it->x, it->y, it->w,
			it->h, c);
		rp_attrs(f, it);
		fputs("/>\n", f);
		break;
	case RP_LINE: /* on the pixel centres, as the PNG draws it */
		fprintf(f,
			"<line x1=\"%d.5\" y1=\"%d.5\" x2=\"%d.5\" y2=\"%d.5\" stroke=\"#%06x\" stroke-width=\"1\" "
			"stroke-linecap=\"square\"/>\n",
			it->x, it->y, it->x + it->w, it->y + it->h, c);
		break;
	case RP_TRI:
		fprintf(f, "<polygon points=\"%d,%d %d,%d %d,%d\" fill=\"#%06x\"", it->x, it->y, it->x + it->w, it->y,
			it->x + it->w / 2, it->y + it->h, c);
		rp_attrs(f, it);
		fputs("/>\n", f);
		break;
	case RP_TEXT:
		fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"%s\" fill=\"#%06x\">", it->x,
			it->y + 7 * it->scale, 10 * it->scale, anchor[it->align], c);
		rp_xml(f, it->text);
		fputs("</text>\n", f);
		break;
	case RP_BEGIN:
		fputs("<g", f);
		rp_attrs(f, it);
		fputs(">", f);
		if (it->text) {
			fputs("<title>", f);
			rp_xml(f, it->text);
			fputs("</title>", f);
		}
		fputs("\n", f);
		break;
	case RP_END:
		fputs("</g>\n", f);
		break;
	}
}

int rp_write_svg(const struct rp_pic *pic, FILE *f)
{
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"DejaVu Sans Mono, monospace\">\n",
		pic->w, pic->h, pic->w, pic->h);
	for (size_t i = 0; i < pic->n; i++)
		rp_item_svg(f, &pic->v[i]);
	fputs("</svg>\n", f);
	return ferror(f) ? -EIO : 0;
}
