/* PAGEMAP_SCAN (Linux 6.7): the ioctl on /proc/PID/pagemap that reports
 * runs of pages by category (present, written since write-protected). It
 * is newer than the headers of some systems we build on; the ABI is fixed.
 * Used by libckpt (the pre-armed cut) and ckrun (the record of the cut). */
#ifndef CK_PAGEMAP_SCAN_H
#define CK_PAGEMAP_SCAN_H

#include <linux/fs.h>
#include <linux/types.h>
#include <sys/ioctl.h>

#ifndef PAGEMAP_SCAN
struct page_region {
	__u64 start, end, categories;
};
struct pm_scan_arg {
	__u64 size, flags, start, end, walk_end, vec, vec_len, max_pages;
	__u64 category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#endif

#endif
