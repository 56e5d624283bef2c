/* ckrun's --map-path and --env rules (launcher/ckrun/pathmap.c): what
 * the command line accepts, and which rule maps which path (the longest
 * OLD, whole components only). */
#include <errno.h>

#include "launcher/ckrun/pathmap.h"
#include "launcher/common/ck_err.h"
#include "tests/unit/unit.h"

static void ck__map_is(const struct ck_pathmap *pm, const char *in, int want, const char *out)
{
	char buf[64];
	int r = ck_pathmap_apply(pm, in, buf, sizeof(buf));

	CHECK_EQ_INT(r, want);
	if (r >= 0)
		CHECK_EQ_STR(buf, out);
}

void ck_unit_run(void)
{
	struct ck_pathmap pm = {0};
	struct ck_jobenv je = {0};

	CHECK_EQ_INT(ck_pathmap_add(&pm, "/data/run"), -EINVAL);
	CHECK(strstr(ck_err_msg(), "not OLD=NEW"));
	CHECK_EQ_INT(ck_pathmap_add(&pm, "data=/x"), -EINVAL);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/data=x"), -EINVAL);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/data=/x/../y"), -EINVAL);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/a//b=/x"), -EINVAL);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/a/./b=/x"), -EINVAL);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/=/x"), -EINVAL);
	CHECK_EQ_INT(pm.n, 0);

	CHECK_EQ_INT(ck_pathmap_add(&pm, "/data/=/mnt/site2/data"), 0); /* trailing '/' dropped */
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/data/run/ckpt=/scratch/ck"), 0);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/home/u=/"), 0);
	CHECK_EQ_INT(ck_pathmap_add(&pm, "/data=/elsewhere"), -EINVAL); /* twice */
	CHECK(strstr(ck_err_msg(), "mapped twice"));
	CHECK_EQ_INT(pm.n, 3);

	ck__map_is(&pm, "/data", 1, "/mnt/site2/data");
	ck__map_is(&pm, "/data/x.bin", 1, "/mnt/site2/data/x.bin");
	ck__map_is(&pm, "/data/run/ckpt/f", 1, "/scratch/ck/f"); /* the longest OLD */
	ck__map_is(&pm, "/data/run/ckptx", 1, "/mnt/site2/data/run/ckptx");
	ck__map_is(&pm, "/datax/y", 0, "/datax/y"); /* whole components only */
	ck__map_is(&pm, "/home/u/a", 1, "/a");
	ck__map_is(&pm, "/home/u", 1, "/");
	ck__map_is(&pm, "/home/user", 0, "/home/user");
	ck__map_is(&pm, "/data/0123456789012345678901234567890123456789012345678901", -ENAMETOOLONG, "");
	ck_pathmap_free(&pm);

	CHECK_EQ_INT(ck_jobenv_add(&je, "LR"), -EINVAL);
	CHECK_EQ_INT(ck_jobenv_add(&je, "=1"), -EINVAL);
	CHECK_EQ_INT(ck_jobenv_add(&je, "1LR=1"), -EINVAL);
	CHECK_EQ_INT(ck_jobenv_add(&je, "L-R=1"), -EINVAL);
	CHECK_EQ_INT(ck_jobenv_add(&je, "LD_PRELOAD=/x.so"), -EINVAL);
	CHECK_EQ_INT(ck_jobenv_add(&je, "AWS_SECRET_ACCESS_KEY=k"), -EINVAL);
	CHECK_EQ_INT(ck_jobenv_add(&je, "LR=0.1"), 0);
	CHECK_EQ_INT(ck_jobenv_add(&je, "_X2=a=b"), 0);
	CHECK_EQ_INT(ck_jobenv_add(&je, "LR=0.5"), 0); /* the later one stands */
	CHECK_EQ_INT(ck_jobenv_add(&je, "GONE="), 0);
	CHECK_EQ_INT(je.n, 3);
	CHECK_EQ_STR(je.v[0], "LR=0.5");
	CHECK_EQ_STR(je.v[1], "_X2=a=b");
	CHECK_EQ_STR(je.v[2], "GONE=");
	ck_jobenv_free(&je);
}
