/* Where saved bytes come from and where restored ones go.
 *
 * Sources (round): a process's memory, through its pagemap where only the
 * pages present matter (private anonymous memory: a page absent from a
 * forked snapshot's page table was never touched), through the
 * write-protect reader (wpread.c) for a write-protect snapshot, or a
 * descriptor's contents. Sinks (restore): a restored process's memory,
 * leaving pages that held nothing untouched in fresh anonymous memory, or
 * a file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ckrun/pagemap_scan.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/chunk.h"
#include "launcher/image/chunkio.h"

static int ck__read_mem(struct ck_src *s, uint64_t off, void *buf, size_t len);

int ck_src_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct ck_src *s = arg;
	int r = ck__read_mem(s, off, buf, len);

	if (r == CK_READ_ZEROS || !buf)
		return r;
	if (r == 0 && s->count)
		__atomic_fetch_add(&s->data_pages, ck_data_pages(buf, len), __ATOMIC_RELAXED);
	return r;
}

int ck_pagemap_any(int fd, uint64_t start, uint64_t end)
{
	static __thread uint64_t pm[4096];
	struct page_region one;
	struct pm_scan_arg q = {
		.size = sizeof(q),
		.start = start,
		.end = end,
		.vec = (uint64_t)(uintptr_t)&one,
		.vec_len = 1,
		.max_pages = 1,
		.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
	};
	long got = getenv("CKPT_TEST_NO_PAGEMAP_SCAN") ? -1 : ioctl(fd, PAGEMAP_SCAN, &q);

	if (got >= 0)
		return got > 0;
	for (uint64_t a = start; a < end;) {
		size_t pages = (end - a) / 4096 < 4096 ? (size_t)((end - a) / 4096) : 4096;
		if (pread(fd, pm, pages * 8, (off_t)(a / 4096 * 8)) != (ssize_t)(pages * 8))
			return -1;
		for (size_t i = 0; i < pages; i++)
			if (pm[i] & (3ull << 62))
				return 1;
		a += pages * 4096;
	}
	return 0;
}

static int ck__read_mem(struct ck_src *s, uint64_t off, void *buf, size_t len)
{

	if (s->stop & CK_ROUND_STOP) {
		int r = ck_grace_check();
		if (r < 0)
			return r;
		/* With a grace, only its end cuts the round short (a
		 * scheduler may repeat SIGTERM within it). */
		if (ck_sig_term >= 2 && !ck_grace_ms()) {
			ck_err_set("a second SIGTERM or SIGINT came while it was written: stopped without it");
			return -ECANCELED;
		}
	}
	if (s->wp)
		return ck_wp_read(s->wp, s->base + off, buf, len);
	if (!buf) /* a probe (CK_WADD_PROBE) */
		return s->pagemap_fd >= 0 && ck_pagemap_any(s->pagemap_fd, s->base + off, s->base + off + len) == 0
			       ? CK_READ_ZEROS
			       : 0;
	if (s->file_fd >= 0) {
		size_t done = 0;
		while (done < len) {
			ssize_t n = pread(s->file_fd, (char *)buf + done, len - done, (off_t)(off + done));
			if (n < 0) {
				ck_err_set("cannot read a descriptor's contents: %s", strerror(errno));
				return -errno;
			}
			if (n == 0) { /* shrank meanwhile */
				memset((char *)buf + done, 0, len - done);
				break;
			}
			done += (size_t)n;
		}
		return 0;
	}
	if (s->pagemap_fd >= 0) {
		/* Only the pages present (or swapped): reading an absent page
		 * would fault it in, at a cost per page, to read zeros. */
		uint64_t addr = s->base + off, ent[64];
		size_t pages = (len + 4095) / 4096;
		if (pages <= 64 && pread(s->pagemap_fd, ent, pages * 8, (off_t)(addr / 4096 * 8)) == (ssize_t)(pages * 8)) {
			size_t any = 0;
			for (size_t i = 0; i < pages && !any; i++)
				any = (ent[i] & (3ull << 62)) != 0;
			if (!any)
				return CK_READ_ZEROS;
			for (size_t i = 0; i < pages;) {
				size_t j = i, a = i * 4096, b;
				int present = (ent[i] & (3ull << 62)) != 0; /* present or swapped */
				while (j < pages && ((ent[j] & (3ull << 62)) != 0) == present)
					j++;
				b = j * 4096 < len ? j * 4096 : len;
				if (!present) {
					memset((char *)buf + a, 0, b - a);
				} else {
					int r = ck_mem_read(s->pid, addr + a, (char *)buf + a, b - a);
					if (r < 0)
						return s->live ? -ESTALE : r;
				}
				i = j;
			}
			return 0;
		}
	}
	{
		int r = ck_mem_read(s->pid, s->base + off, buf, len);
		/* the process ended or exec'd after RELEASE: a fork repeats the round */
		return r < 0 && s->live ? -ESTALE : r;
	}
}

static int ck__sink_put(const struct ck_sink *s, uint64_t off, const char *buf, size_t len)
{
	size_t done = 0;

	if (s->fd < 0)
		return ck_mem_write(s->pid, s->base + off, buf, len);
	while (done < len) {
		ssize_t n = pwrite(s->fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			ck_err_set("cannot write restored file contents: %s", strerror(errno));
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

int ck_sink_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct ck_sink *s = arg;
	size_t start = 0; /* of the current run of data pages */

	if (!buf)
		return 0; /* a zero chunk of fresh anonymous memory or a new file (sparse read) */
	if (!s->sparse)
		return ck__sink_put(s, off, buf, len);
	/* Only the runs of pages holding data: a page never written stays
	 * absent, as it was in the job (a sparse heap stays small, a file's
	 * hole stays a hole), and costs no fault. */
	for (size_t at = 0; at < len + CK_PAGE_SIZE; at += CK_PAGE_SIZE) { /* one step past the end: the last run */
		size_t pg = at < len && len - at < CK_PAGE_SIZE ? len - at : CK_PAGE_SIZE;
		if (at < len && !ck_chunk_is_zero((const char *)buf + at, pg))
			continue; /* the run goes on */
		if (at > start) {
			size_t end = at < len ? at : len;
			int r = ck__sink_put(s, off + start, (const char *)buf + start, end - start);
			if (r < 0)
				return r;
		}
		start = at + pg;
	}
	return 0;
}
