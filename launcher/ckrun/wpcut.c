/* The write-protect snapshot's record of the cut: see wpcut.h. */
#include "launcher/ckrun/wpcut.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "ckrun/pagemap_scan.h"

#define CK__PM_PRESENT_OR_SWAP (3ull << 62)
#define CK__VEC 512

static int ck__cut_add(void *arg, uint64_t s, uint64_t e)
{
	struct ck_wp_cut *cut = arg;

	if (cut->n && cut->run[cut->n - 1].end == s) {
		cut->run[cut->n - 1].end = e;
		return 0;
	}
	if (cut->n == cut->cap) {
		size_t nc = cut->cap ? cut->cap * 2 : 64;
		struct ck_wp_range *r = realloc(cut->run, nc * sizeof(*r));
		if (!r)
			return -ENOMEM;
		cut->run = r;
		cut->cap = nc;
	}
	cut->run[cut->n].start = s;
	cut->run[cut->n++].end = e;
	return 0;
}

static int ck__cut_pread(int fd, uint64_t start, uint64_t end, struct ck_wp_cut *cut)
{
	uint64_t pm[CK__VEC];

	for (uint64_t a = start; a < end;) {
		size_t pages = (size_t)((end - a) / 4096 < CK__VEC ? (end - a) / 4096 : CK__VEC);

		if (pread(fd, pm, pages * 8, (off_t)(a / 4096 * 8)) != (ssize_t)(pages * 8))
			return errno ? -errno : -EIO;
		for (size_t i = 0; i < pages; i++)
			if ((pm[i] & CK__PM_PRESENT_OR_SWAP) && (pm[i] & CK_PM_UFFD_WP)) {
				int r = ck__cut_add(cut, a + i * 4096, a + (i + 1) * 4096);
				if (r < 0)
					return r;
			}
		a += pages * 4096;
	}
	return 0;
}

int ck_wp_cut_scan(int pagemap_fd, const struct ck_wp_range *rg, size_t n, struct ck_wp_cut *cut)
{
	/* test knob: the older kernels' way */
	int scan = !getenv("CKPT_TEST_NO_PAGEMAP_SCAN");

	cut->n = 0;
	for (size_t i = 0; i < n; i++) {
		int r = -ENOTTY;
		size_t mark = cut->n;
		if (scan) {
			/* present or swapped, and not written since protected */
			r = ck_pm_scan(pagemap_fd, rg[i].start, rg[i].end, 0, ck__cut_add, cut);
			if (r == -ENOTTY || r == -EINVAL) { /* not this kernel's: stop asking */
				scan = 0;
				cut->n = mark;
			}
		}
		if (!scan)
			r = ck__cut_pread(pagemap_fd, rg[i].start, rg[i].end, cut);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Index of the first run ending after addr (cut->n if none). */
static size_t ck__cut_find(const struct ck_wp_cut *cut, uint64_t addr)
{
	size_t lo = 0, hi = cut->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cut->run[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t ck_wp_cut_mismatch(const struct ck_wp_cut *cut, uint64_t addr, const uint64_t *pm, size_t pages)
{
	size_t ci = ck__cut_find(cut, addr);

	for (size_t i = 0; i < pages; i++) {
		uint64_t a = addr + i * 4096;
		int was;
		while (ci < cut->n && cut->run[ci].end <= a)
			ci++;
		was = ci < cut->n && cut->run[ci].start <= a;
		if (was != ((pm[i] & CK_PM_UFFD_WP) != 0))
			return a;
	}
	return 0;
}

int ck_wp_cut_any(const struct ck_wp_cut *cut, uint64_t s, uint64_t e)
{
	size_t ci = ck__cut_find(cut, s);

	return ci < cut->n && cut->run[ci].start < e;
}

void ck_wp_cut_free(struct ck_wp_cut *cut)
{
	free(cut->run);
	cut->run = NULL;
	cut->n = cut->cap = 0;
}
