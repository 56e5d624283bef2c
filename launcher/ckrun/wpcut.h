/* What a write-protect snapshot's memory held at the cut: the pages that
 * were present (or swapped out) and write-protected then, as sorted runs.
 *
 * Taking a block later cannot tell by itself a page absent at the cut
 * (zeros, rightly) from one the job unmapped, discarded or moved away
 * after the cut but before its layout event was read: the kernel removes
 * the pages first and queues the event after. This record tells them
 * apart: a page present at the cut that has lost its protection before
 * ckrun read it is a change the snapshot did not see. */
#ifndef CK_CKRUN_WPCUT_H
#define CK_CKRUN_WPCUT_H

#include <stddef.h>
#include <stdint.h>

#include "ckrun/proto.h"

/* pagemap entry: the page is write-protected (userfaultfd) */
#define CK_PM_UFFD_WP (1ull << 57)

struct ck_wp_cut {
	struct ck_wp_range *run; /* [start, end), ascending, disjoint */
	size_t n, cap;
};

/* Fills *cut for the ranges rg[0..n) of the process whose pagemap is open
 * at pagemap_fd (parked: nothing changes meanwhile). PAGEMAP_SCAN where
 * the kernel has it (Linux 6.7), else the pagemap entries. 0 or -errno. */
int ck_wp_cut_scan(int pagemap_fd, const struct ck_wp_range *rg, size_t n, struct ck_wp_cut *cut);
/* The pagemap entries pm[0..pages) of the pages from addr on, read now,
 * against the record: the first page protected at the cut that is not
 * now, or protected now but not then (the job changed its layout there),
 * or 0 when they agree. */
uint64_t ck_wp_cut_mismatch(const struct ck_wp_cut *cut, uint64_t addr, const uint64_t *pm, size_t pages);
/* Whether a page of [s, e) was present and protected at the cut. */
int ck_wp_cut_any(const struct ck_wp_cut *cut, uint64_t s, uint64_t e);
void ck_wp_cut_free(struct ck_wp_cut *cut);

#endif
