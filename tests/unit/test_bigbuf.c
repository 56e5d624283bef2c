/* Large buffers kept between rounds (launcher/common/bigbuf.c): aligned to
 * 2 MiB, the same buffer back for the
 * same size, at most six kept (the oldest unmapped first), bad sizes
 * refused. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "launcher/common/bigbuf.h"
#include "tests/unit/unit.h"

#define MIB ((size_t)1 << 20)

/* Whether [p, p + len) is mapped: msync fails with ENOMEM where it is not. */
static int mapped(const void *p, size_t len)
{
	return msync((void *)p, len, MS_ASYNC) == 0;
}

void ck_unit_run(void)
{
	uint8_t *a, *b, *c, *bufs[7];

	a = ck_bigbuf_get(4 * MIB);
	CHECK(a != NULL);
	if (!a)
		return;
	CHECK_EQ_INT((uintptr_t)a % (2 * MIB), 0);
	memset(a, 0x5a, 4 * MIB);
	CHECK(mapped(a, 4 * MIB));
	ck_bigbuf_put(a, 4 * MIB);
	CHECK(mapped(a, 4 * MIB)); /* kept, not unmapped */

	/* the same size: the kept one; writable as before */
	b = ck_bigbuf_get(4 * MIB);
	CHECK(b == a);
	memset(b, 0xa5, 4 * MIB);
	CHECK_EQ_INT(b[4 * MIB - 1], 0xa5);

	/* another size while it is in use: a mapping of its own */
	c = ck_bigbuf_get(6 * MIB);
	CHECK(c != NULL && c != b);
	ck_bigbuf_put(c, 6 * MIB);
	ck_bigbuf_put(b, 4 * MIB);

	/* not a whole number of 2 MiB */
	errno = 0;
	CHECK(ck_bigbuf_get(MIB) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
	CHECK(ck_bigbuf_get(0) == NULL);

	/* seven of sizes not kept yet: the list (6 MiB, 4 MiB) overflows, and
	 * the oldest go, 6 MiB, 4 MiB and then the first of the seven */
	for (int i = 0; i < 7; i++) {
		bufs[i] = ck_bigbuf_get((size_t)(10 + 2 * i) * MIB);
		CHECK(bufs[i] != NULL);
	}
	for (int i = 0; i < 7; i++)
		ck_bigbuf_put(bufs[i], (size_t)(10 + 2 * i) * MIB);
	CHECK(!mapped(b, 4 * MIB));
	CHECK(!mapped(c, 6 * MIB));
	CHECK(!mapped(bufs[0], 10 * MIB));
	for (int i = 1; i < 7; i++)
		CHECK(mapped(bufs[i], (size_t)(10 + 2 * i) * MIB));
	/* each kept one comes back for its size */
	for (int i = 1; i < 7; i++)
		CHECK(ck_bigbuf_get((size_t)(10 + 2 * i) * MIB) == bufs[i]);
}
