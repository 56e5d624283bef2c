/* ckpt report: where each shape of the picture goes (report.h).
 *
 * Three panels share one horizontal axis, a slot per checkpoint in
 * sequence order: sizes (logical and stored bytes), dedup (the share of
 * the data not written again, labelled with logical / new), and time
 * (round duration and frozen time). Restores are vertical marks between
 * the checkpoint before them and the one after. A bar's height is
 * value * RP_PH / panel maximum, rounded, at least 1 px for a value above
 * zero: tests/suite/28-inspect.sh recomputes it from `ckpt ls --json`. */
#include "launcher/ckpt/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/common/ck_err.h"

const uint32_t rp_palette[RP_NCOLORS] = {
	[RP_WHITE] = 0xffffff,	  [RP_INK] = 0x202020,	  [RP_GRID] = 0xc0c0c0,	  [RP_PLOT] = 0xf4f4f4,
	[RP_LOGICAL] = 0x9ecae1,  [RP_STORED] = 0x2171b5, [RP_REUSED] = 0x31a354, [RP_DURATION] = 0xfdae6b,
	[RP_FROZEN] = 0xd94801,	  [RP_RESTORE] = 0xc51b8a, [RP_DAMAGED] = 0xd9d9d9,
};

#define RP_W 800
#define RP_L 90     /* left edge of the plots */
#define RP_PW 680   /* plots' width */
#define RP_TOP 96   /* top of the first plot */
#define RP_PH 130   /* plot height */
#define RP_GAP 44   /* between plots */
#define RP_SLOT_MAX 80
#define RP_SLOT_MIN 4

static int rp_add(struct rp_pic *p, const struct rp_item *it)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct rp_item *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = *it;
	return 0;
}

static int rp_rect(struct rp_pic *p, int x, int y, int w, int h, int color, const char *cls)
{
	struct rp_item it = {.kind = RP_RECT, .x = x, .y = y, .w = w, .h = h, .color = color, .cls = cls};

	return rp_add(p, &it);
}

static int rp_line(struct rp_pic *p, int x, int y, int w, int h, int color)
{
	struct rp_item it = {.kind = RP_LINE, .x = x, .y = y, .w = w, .h = h, .color = color};

	return rp_add(p, &it);
}

static int rp_text(struct rp_pic *p, int x, int y, int scale, int align, int color, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
static int rp_text(struct rp_pic *p, int x, int y, int scale, int align, int color, const char *fmt, ...)
{
	struct rp_item it = {.kind = RP_TEXT, .x = x, .y = y, .scale = scale, .align = align, .color = color};
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&it.text, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -ENOMEM;
	if ((rc = rp_add(p, &it)) < 0)
		free(it.text);
	return rc;
}

static int rp_group(struct rp_pic *p, const char *cls, uint64_t seq, const char *tip)
{
	struct rp_item it = {.kind = RP_BEGIN, .cls = cls, .seq = seq};

	if (tip && !(it.text = strdup(tip)))
		return -ENOMEM;
	if (rp_add(p, &it) < 0) {
		free(it.text);
		return -ENOMEM;
	}
	return 0;
}

static int rp_end(struct rp_pic *p)
{
	struct rp_item it = {.kind = RP_END};

	return rp_add(p, &it);
}

void rp_pic_free(struct rp_pic *pic)
{
	for (size_t i = 0; i < pic->n; i++)
		free(pic->v[i].text);
	free(pic->v);
	memset(pic, 0, sizeof(*pic));
}

static void rp_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", n);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
}

static void rp_secs(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000000000ull)
		snprintf(buf, len, "%.0f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
}

/* value * RP_PH / max, rounded; at least 1 px for a value above zero. */
static int rp_height(uint64_t v, uint64_t max)
{
	int h;

	if (!v || !max)
		return 0;
	h = (int)((double)v * RP_PH / (double)max + 0.5);
	return h < 1 ? 1 : h > RP_PH ? RP_PH : h;
}

/* The dedup label: chunk bytes / new bytes. */
static void rp_ratio(const struct rp_ckpt *c, char *buf, size_t len)
{
	if (!c->new_bytes)
		snprintf(buf, len, "all");
	else
		snprintf(buf, len, "%.1fx", (double)c->chunk_bytes / (double)c->new_bytes);
}

struct rp_geo {
	size_t first, n; /* checkpoints drawn: c[first..first+n) */
	int slot, pad, bw;
	uint64_t max_bytes, max_ns;
};

static int rp_top(int panel)
{
	return RP_TOP + panel * (RP_PH + RP_GAP);
}

/* A panel: heading, plot area (class "plot", data-panel), axis labels. */
static int rp_panel(struct rp_pic *p, int i, const char *name, const char *heading, const char *top_label,
		    const char *zero_label)
{
	struct rp_item plot = {.kind = RP_RECT, .x = RP_L, .y = rp_top(i), .w = RP_PW, .h = RP_PH,
			       .color = RP_PLOT, .cls = "plot", .panel = name};
	int y = rp_top(i), rc;

	if ((rc = rp_text(p, RP_L, y - 14, 1, 0, RP_INK, "%s", heading)) < 0 || (rc = rp_add(p, &plot)) < 0 ||
	    (rc = rp_line(p, RP_L, y, RP_PW, 0, RP_GRID)) < 0 ||
	    (rc = rp_line(p, RP_L, y + RP_PH / 2, RP_PW, 0, RP_GRID)) < 0 ||
	    (rc = rp_line(p, RP_L - 1, y, 0, RP_PH, RP_INK)) < 0 ||
	    (rc = rp_line(p, RP_L - 1, y + RP_PH, RP_PW + 1, 0, RP_INK)) < 0 ||
	    (rc = rp_text(p, RP_L - 6, y, 1, 2, RP_INK, "%s", top_label)) < 0 ||
	    (rc = rp_text(p, RP_L - 6, y + RP_PH - 7, 1, 2, RP_INK, "%s", zero_label)) < 0)
		return rc;
	return 0;
}

/* A legend entry: a square of the colour and its name. */
static int rp_legend(struct rp_pic *p, int x, int y, int color, const char *name)
{
	int rc = rp_rect(p, x, y, 7, 7, color, NULL);

	return rc < 0 ? rc : rp_text(p, x + 10, y, 1, 0, RP_INK, "%s", name);
}

static int rp_bar(struct rp_pic *p, int x, int panel, int w, int h, int color, const char *cls)
{
	return h ? rp_rect(p, x, rp_top(panel) + RP_PH - h, w, h, color, cls) : 0;
}

static int rp_checkpoint(struct rp_pic *p, const struct rp_geo *g, const struct rp_ckpt *c, size_t k)
{
	int x0 = RP_L + (int)k * g->slot, x = x0 + g->pad, rc;
	char tip[512], when[32] = "-", lb[32], sb[32], nb[32], du[32], fr[32], ra[32];

	if (!c->ok) {
		snprintf(tip, sizeof(tip), "checkpoint %" PRIu64 ": does not load (see ckpt verify)", c->seq);
		if ((rc = rp_group(p, "checkpoint damaged", c->seq, tip)) < 0)
			return rc;
		for (int i = 0; i < 3; i++)
			if ((rc = rp_rect(p, x, rp_top(i), 2 * g->bw, RP_PH, RP_DAMAGED, "damaged")) < 0)
				return rc;
		return rp_end(p);
	}
	{
		time_t t = (time_t)(c->time_ns / 1000000000ull);
		struct tm tm;

		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	}
	rp_bytes(c->logical, lb, sizeof(lb));
	rp_bytes(c->stored, sb, sizeof(sb));
	rp_bytes(c->new_bytes, nb, sizeof(nb));
	rp_secs(c->duration_ns, du, sizeof(du));
	rp_secs(c->frozen_ns, fr, sizeof(fr));
	rp_ratio(c, ra, sizeof(ra));
	snprintf(tip, sizeof(tip),
		 "checkpoint %" PRIu64 " at %s UTC: logical %s, stored %s (new chunks %s, dedup %s), round %s, "
		 "frozen %s",
		 c->seq, when, lb, sb, nb, ra, du, fr);
	if ((rc = rp_group(p, "checkpoint", c->seq, tip)) < 0 ||
	    (rc = rp_bar(p, x, 0, g->bw, rp_height(c->logical, g->max_bytes), RP_LOGICAL, "logical")) < 0 ||
	    (rc = rp_bar(p, x + g->bw, 0, g->bw, rp_height(c->stored, g->max_bytes), RP_STORED, "stored")) < 0 ||
	    (rc = rp_bar(p, x, 1, 2 * g->bw, rp_height(c->chunk_bytes - c->new_bytes, c->chunk_bytes), RP_REUSED,
			 "reused")) < 0 ||
	    (rc = rp_bar(p, x, 2, g->bw, rp_height(c->duration_ns, g->max_ns), RP_DURATION, "duration")) < 0 ||
	    (rc = rp_bar(p, x + g->bw, 2, g->bw, rp_height(c->frozen_ns, g->max_ns), RP_FROZEN, "frozen")) < 0)
		return rc;
	/* Labels where a slot has room for them. */
	if (g->slot >= 5 * RP_FONT_W + 2 &&
	    (rc = rp_text(p, x0 + g->slot / 2, rp_top(1) + RP_PH - rp_height(c->chunk_bytes - c->new_bytes,
									     c->chunk_bytes) - 10,
			  1, 1, RP_INK, "%s", ra)) < 0)
		return rc;
	return rp_end(p);
}

/* Seq labels under the last panel, as many as fit. */
static int rp_axis(struct rp_pic *p, const struct rp_data *d, const struct rp_geo *g)
{
	int y = rp_top(2) + RP_PH + 5, every = 1, rc;
	char s[24];

	snprintf(s, sizeof(s), "%" PRIu64, d->c[g->first + g->n - 1].seq);
	while (every * g->slot < (int)(strlen(s) + 1) * RP_FONT_W)
		every++;
	for (size_t k = 0; k < g->n; k++) {
		if (k % (size_t)every && k != g->n - 1)
			continue;
		if ((rc = rp_text(p, RP_L + (int)k * g->slot + g->slot / 2, y, 1, 1, RP_INK, "%" PRIu64,
				  d->c[g->first + k].seq)) < 0)
			return rc;
	}
	return rp_text(p, RP_L + RP_PW / 2, y + 14, 1, 1, RP_INK, "checkpoint (sequence number)");
}

/* Where a restore goes: after the drawn checkpoints taken before it (a
 * damaged one has no time: it counts as before). */
static size_t rp_restore_slot(const struct rp_data *d, const struct rp_geo *g, const struct ck_restore_rec *r)
{
	size_t k = 0;

	while (k < g->n && (!d->c[g->first + k].ok || d->c[g->first + k].time_ns <= r->time_ns))
		k++;
	return k;
}

static int rp_restore(struct rp_pic *p, const struct rp_geo *g, const struct ck_restore_rec *r, size_t k, int nth_here)
{
	int x, rc;
	char tip[256], du[32];

	x = RP_L + (int)k * g->slot + 3 * nth_here;
	if (x > RP_L + RP_PW)
		x = RP_L + RP_PW;
	rp_secs(r->duration_ns, du, sizeof(du));
	snprintf(tip, sizeof(tip), "restore of checkpoint %" PRIu64 " in %s", r->seq, du);
	{
		struct rp_item tri = {.kind = RP_TRI, .x = x - 5, .y = RP_TOP - 30, .w = 11, .h = 8,
				      .color = RP_RESTORE, .cls = "restore-mark"};

		if ((rc = rp_group(p, "restore", r->seq, tip)) < 0 ||
		    (rc = rp_rect(p, x - 1, RP_TOP - 22, 2, rp_top(2) + RP_PH - (RP_TOP - 22), RP_RESTORE,
				  "restore-line")) < 0 ||
		    (rc = rp_add(p, &tri)) < 0 ||
		    (rc = rp_text(p, x + 7, RP_TOP - 30, 1, 0, RP_RESTORE, "R%" PRIu64, r->seq)) < 0)
			return rc;
	}
	return rp_end(p);
}

int rp_layout(const struct rp_data *d, struct rp_pic *p)
{
	struct rp_geo g = {0};
	char top[32];
	int rc, height = rp_top(2) + RP_PH + 40;

	memset(p, 0, sizeof(*p));
	p->w = RP_W;
	p->h = height;
	if (!d->nc)
		return -EINVAL;
	/* The newest checkpoints that fit RP_SLOT_MIN pixels each. */
	g.n = d->nc < RP_PW / RP_SLOT_MIN ? d->nc : RP_PW / RP_SLOT_MIN;
	g.first = d->nc - g.n;
	g.slot = RP_PW / (int)g.n > RP_SLOT_MAX ? RP_SLOT_MAX : RP_PW / (int)g.n;
	g.pad = g.slot / 5;
	g.bw = (g.slot - 2 * g.pad) / 2;
	for (size_t k = g.first; k < d->nc; k++) {
		const struct rp_ckpt *c = &d->c[k];

		if (!c->ok)
			continue;
		g.max_bytes = c->logical > g.max_bytes ? c->logical : g.max_bytes;
		g.max_bytes = c->stored > g.max_bytes ? c->stored : g.max_bytes;
		g.max_ns = c->duration_ns > g.max_ns ? c->duration_ns : g.max_ns;
		g.max_ns = c->frozen_ns > g.max_ns ? c->frozen_ns : g.max_ns;
	}
	if ((rc = rp_rect(p, 0, 0, p->w, p->h, RP_WHITE, "background")) < 0 ||
	    (rc = rp_text(p, 12, 10, 2, 0, RP_INK, "ckpt report: %s", d->job)) < 0 ||
	    (rc = rp_text(p, 12, 32, 1, 0, RP_INK, "%zu checkpoint%s%s, %zu restore%s; store %s", d->nc,
			  d->nc == 1 ? "" : "s", g.n < d->nc ? " (the newest shown)" : "", d->nr,
			  d->nr == 1 ? "" : "s", d->store)) < 0)
		goto out;
	rp_bytes(g.max_bytes, top, sizeof(top));
	if ((rc = rp_panel(p, 0, "size", "SIZE per checkpoint", top, "0")) < 0 ||
	    (rc = rp_legend(p, RP_L + 150, rp_top(0) - 14, RP_LOGICAL, "logical (memory and data covered)")) < 0 ||
	    (rc = rp_legend(p, RP_L + 420, rp_top(0) - 14, RP_STORED, "stored (bytes written)")) < 0 ||
	    (rc = rp_panel(p, 1, "dedup", "DEDUP", "100%", "0%")) < 0 ||
	    (rc = rp_legend(p, RP_L + 50, rp_top(1) - 14, RP_REUSED,
			    "share of the data not written again (zero or stored before); label: data / new")) < 0)
		goto out;
	rp_secs(g.max_ns, top, sizeof(top));
	if ((rc = rp_panel(p, 2, "time", "TIME per round", top, "0")) < 0 ||
	    (rc = rp_legend(p, RP_L + 150, rp_top(2) - 14, RP_DURATION, "round (request to commit)")) < 0 ||
	    (rc = rp_legend(p, RP_L + 420, rp_top(2) - 14, RP_FROZEN, "frozen (the job stopped)")) < 0)
		goto out;
	for (size_t k = 0; k < g.n; k++)
		if ((rc = rp_checkpoint(p, &g, &d->c[g.first + k], k)) < 0)
			goto out;
	if ((rc = rp_axis(p, d, &g)) < 0)
		goto out;
	for (size_t i = 0, here = 0, prev = 0; i < d->nr; i++) {
		size_t k = rp_restore_slot(d, &g, &d->r[i]);

		/* Restores at the same place side by side. */
		here = i && k == prev ? here + 1 : 0;
		prev = k;
		if ((rc = rp_restore(p, &g, &d->r[i], k, (int)here)) < 0)
			goto out;
	}
out:
	if (rc < 0) {
		ck_err_set("out of memory drawing the report");
		rp_pic_free(p);
	}
	return rc;
}
