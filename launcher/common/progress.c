/* The progress line of long transfers (progress.h). */
#include "launcher/common/progress.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static uint64_t ck__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ck_fmt_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
}

static void ck__eta(uint64_t s, char *buf, size_t len)
{
	if (s < 60)
		snprintf(buf, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s / 60 % 60));
}

void ck_progress_start(struct ck_progress *p, const char *what, uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	snprintf(p->what, sizeof(p->what), "%s", what);
	p->total = total;
	p->t0_ns = ck__mono_ns();
}

void ck_progress_format(const struct ck_progress *p, uint64_t now_ns, char *buf, unsigned len)
{
	char d[32], t[32], r[32], e[32] = "";
	double secs = now_ns > p->t0_ns ? (double)(now_ns - p->t0_ns) / 1e9 : 0;
	int done = p->total && p->done >= p->total;
	/* The first bytes come before any steady rate: a rate and ETA from
	 * them would be noise ("ETA 1m53s" for a 2 s restore). */
	double rate = secs >= CK_PROGRESS_SETTLE_S || (done && secs > 0.000001) ? (double)p->done / secs : 0;

	ck_fmt_bytes(p->done, d, sizeof(d));
	if (rate > 0) {
		ck_fmt_bytes((uint64_t)rate, r, sizeof(r));
		strcat(r, "/s");
	} else {
		snprintf(r, sizeof(r), "- B/s");
	}
	if (!p->total) {
		snprintf(buf, len, "%s: %s, %s", p->what, d, r);
		return;
	}
	ck_fmt_bytes(p->total, t, sizeof(t));
	if (done)
		snprintf(e, sizeof(e), "done");
	else if (rate > 0) {
		memcpy(e, "ETA ", 4);
		ck__eta((uint64_t)((double)(p->total - p->done) / rate + 0.5), e + 4, sizeof(e) - 4);
	} else {
		snprintf(e, sizeof(e), "ETA -");
	}
	snprintf(buf, len, "%s: %s of %s (%u%%), %s, %s", p->what, d, t,
		 (unsigned)(p->done >= p->total ? 100 : p->done * 100 / p->total), r, e);
}

static void ck__draw(struct ck_progress *p, uint64_t now)
{
	char line[256];
	struct winsize ws;
	size_t n;

	ck_progress_format(p, now, line + 1, sizeof(line) - 8);
	line[0] = '\r';
	n = strlen(line);
	/* A line longer than the terminal would wrap, and "\r" would then
	 * rewrite only its last row. */
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && n > ws.ws_col)
		n = ws.ws_col;
	memcpy(line + n, "\033[K", 3); /* erases what a longer line left */
	if (write(STDERR_FILENO, line, n + 3) > 0)
		p->shown = 1;
	p->last_ns = now;
	p->drawn = p->done;
}

void ck_progress_set(struct ck_progress *p, uint64_t done)
{
	uint64_t now;

	if (!p || !p->on)
		return;
	p->done = done;
	if (p->shown && done == p->drawn)
		return; /* nothing new to say */
	now = ck__mono_ns();
	if (p->shown && now - p->last_ns < CK_PROGRESS_PERIOD_NS && !(p->total && done >= p->total))
		return;
	ck__draw(p, now);
}

void ck_progress_add(struct ck_progress *p, uint64_t n)
{
	if (p && p->on)
		ck_progress_set(p, p->done + n);
}

void ck_progress_end(struct ck_progress *p)
{
	if (p && p->on && p->shown && write(STDERR_FILENO, "\r\033[K", 4) < 0)
		return; /* nothing to do about a terminal gone */
	if (p)
		p->shown = 0;
}
