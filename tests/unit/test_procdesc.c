/* Process descriptor's compact form: the golden file (its layout must not
 * move: images hold it verbatim), round trip, and refusals. */
#include <errno.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/procdesc_pack.h"
#include "tests/unit/sample_procdesc.h"
#include "tests/unit/unit.h"

static void test_golden(void)
{
	const char *top = getenv("CKPT_TOP");
	struct ck_procdesc *pd = ck_unit_sample_procdesc(), *d = NULL;
	char path[1024];
	uint8_t *gold, *buf = NULL;
	size_t glen = 0, len = 0;

	snprintf(path, sizeof(path), "%s/tests/golden/procdesc-v4.bin", top && *top ? top : ".");
	gold = ck_unit_read_file(path, &glen);
	CHECK(gold != NULL && pd != NULL);
	if (!gold || !pd)
		goto out;
	/* The sample packs to the golden bytes... */
	CHECK_EQ_INT(ck_desc_pack(pd, &buf, &len), 0);
	CHECK(buf && len == glen && !memcmp(buf, gold, glen));
	free(buf);
	buf = NULL;
	/* ...and the golden bytes unpack to the sample and pack back. */
	CHECK_EQ_INT(ck_desc_unpack(gold, glen, &d), 0);
	if (d) {
		CHECK_EQ_INT(d->nfds, 4);
		CHECK_EQ_STR(d->fds[1].path, "/home/u/run/log.txt");
		CHECK(!memcmp(d, pd, sizeof(*pd)));
		CHECK_EQ_INT(ck_desc_pack(d, &buf, &len), 0);
		CHECK(buf && len == glen && !memcmp(buf, gold, glen));
		free(buf);
	}
out:
	free(gold);
	free(pd);
	free(d);
}

static void test_refusals(void)
{
	struct ck_procdesc *pd = ck_unit_sample_procdesc(), *d = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;

	if (!pd || ck_desc_pack(pd, &buf, &len) < 0)
		goto out;
	CHECK_EQ_INT(ck_desc_unpack(buf, CK_PD_HDR_SIZE - 1, &d), -EBADMSG);
	CHECK_EQ_INT(ck_desc_unpack(buf, len - 1, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "counts") != NULL);
	((struct ck_procdesc *)buf)->version = CK_PD_VERSION + 1;
	CHECK_EQ_INT(ck_desc_unpack(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "newer") != NULL);
	((struct ck_procdesc *)buf)->version = CK_PD_VERSION;
	((struct ck_procdesc *)buf)->magic = 0;
	CHECK_EQ_INT(ck_desc_unpack(buf, len, &d), -EBADMSG);
	pd->nfds = CK_PD_MAX_FDS + 1;
	CHECK_EQ_INT(ck_desc_pack(pd, &buf, &len), -EINVAL);
out:
	free(buf);
	free(pd);
}

void ck_unit_run(void)
{
	test_golden();
	test_refusals();
}
