/* Large buffers kept between rounds.
 *
 * A fresh anonymous mapping costs the kernel a zeroed page at each first
 * touch (2 MiB at a time with huge pages): mapping the write-protect pool
 * and the pack buffers anew every round spent 15% of a round's CPU on a
 * 1 GiB job zeroing memory that was then overwritten. A buffer given back
 * is marked MADV_FREE and kept: the kernel takes its pages only under
 * memory pressure, and the next round of the same size writes over them
 * as they are, without a fault. At most CK__KEEP are kept (a round gives
 * back the pool and one more pack buffer than it uploads at once: 5 for
 * S3); past that the oldest is unmapped. */
#include "launcher/common/bigbuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define CK__ALIGN ((size_t)2 << 20)
#define CK__KEEP 6

struct ck__kept {
	void *p;
	size_t len;
};

static struct ck__kept ck__kept[CK__KEEP];
static size_t ck__nkept;
static pthread_mutex_t ck__lock = PTHREAD_MUTEX_INITIALIZER;

/* A mapping of exactly [p, p + len), p aligned: the slack of a larger
 * mapping is unmapped on both sides, so that giving it back needs only
 * (p, len). */
static void *ck__map_aligned(size_t len)
{
	size_t maplen = len + CK__ALIGN;
	uint8_t *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *p;

	if (m == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)m + CK__ALIGN - 1) & ~(uintptr_t)(CK__ALIGN - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	if (m + maplen > p + len)
		munmap(p + len, (size_t)(m + maplen - (p + len)));
	(void)madvise(p, len, MADV_HUGEPAGE);
	return p;
}

void *ck_bigbuf_get(size_t len)
{
	void *p = NULL;

	if (!len || len % CK__ALIGN) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&ck__lock);
	for (size_t i = 0; i < ck__nkept; i++) {
		if (ck__kept[i].len != len)
			continue;
		p = ck__kept[i].p;
		memmove(&ck__kept[i], &ck__kept[i + 1], (ck__nkept - i - 1) * sizeof(ck__kept[0]));
		ck__nkept--;
		break;
	}
	pthread_mutex_unlock(&ck__lock);
	return p ? p : ck__map_aligned(len);
}

void ck_bigbuf_put(void *p, size_t len)
{
	struct ck__kept drop = {NULL, 0};

	if (!p)
		return;
	/* Not kept where MADV_FREE is missing: the pages would stay in use. */
	if (madvise(p, len, MADV_FREE) != 0) {
		munmap(p, len);
		return;
	}
	pthread_mutex_lock(&ck__lock);
	if (ck__nkept == CK__KEEP) {
		drop = ck__kept[0];
		memmove(&ck__kept[0], &ck__kept[1], (CK__KEEP - 1) * sizeof(ck__kept[0]));
		ck__nkept--;
	}
	ck__kept[ck__nkept++] = (struct ck__kept){p, len};
	pthread_mutex_unlock(&ck__lock);
	if (drop.p)
		munmap(drop.p, drop.len);
}
