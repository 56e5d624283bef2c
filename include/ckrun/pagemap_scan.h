/* ckrun contract with the kernel: PAGEMAP_SCAN.
 *
 * Version: the kernel's ABI of Linux 6.7 (fixed); used only where the
 * system headers lack it.
 *
 * PAGEMAP_SCAN (Linux 6.7): the ioctl on /proc/PID/pagemap that reports
 * runs of pages by category (present, written since write-protected). It
 * is newer than the headers of some systems we build on; the ABI is fixed.
 * Used by libckpt (the pre-armed cut) and ckrun (the record of the cut). */
#ifndef CK_PAGEMAP_SCAN_H
#define CK_PAGEMAP_SCAN_H

#include <errno.h>
#include <stdint.h>
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

#include "libckpt/ck_sys.h"

#define CK_PM_SCAN_VEC 256 /* runs per ioctl: 6 KiB of stack */

/* fn(arg, start, end) for every run of [start, end) of the pages present
 * or swapped out whose written bit (PAGE_IS_WRITTEN: not write-protected)
 * is `written`, in the process whose pagemap is open at fd. 0, or the
 * first -errno of the ioctl or of fn. System calls and the stack only: the
 * parked manager of libckpt calls it. */
static inline int ck_pm_scan(int fd, uint64_t start, uint64_t end, int written,
			     int (*fn)(void *arg, uint64_t start, uint64_t end), void *arg)
{
	struct page_region vec[CK_PM_SCAN_VEC];

	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a),
			.start = start,
			.end = end,
			.vec = (uint64_t)(uintptr_t)vec,
			.vec_len = CK_PM_SCAN_VEC,
			.category_inverted = written ? 0 : PAGE_IS_WRITTEN,
			.category_mask = PAGE_IS_WRITTEN,
			.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		};
		long got = ck_sys3(SYS_ioctl, fd, PAGEMAP_SCAN, &a);

		if (got < 0)
			return (int)got;
		for (long i = 0; i < got; i++) {
			int r = fn(arg, vec[i].start, vec[i].end);
			if (r < 0)
				return r;
		}
		if (a.walk_end <= start) /* no progress: do not loop for ever */
			return -EIO;
		start = a.walk_end;
	}
	return 0;
}

#endif
