/* Restore records (launcher/image/restore_log.c): text round trip, strict
 * parsing, listing in time order on the file store, bad records counted,
 * drop. */
#include <errno.h>
#include <string.h>

#include "launcher/image/restore_log.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

static void text(void)
{
	struct ck_restore_rec r = {3, 1700000000123456789ull, 250000000}, q;
	char buf[256];
	int n = ck_restore_rec_format(&r, buf, sizeof(buf));

	CHECK(n > 0);
	CHECK_EQ_STR(buf, "ckpt-restore 1\nseq 3\ntime 1700000000123456789\nduration 250000000\n");
	memset(&q, 0, sizeof(q));
	CHECK_EQ_INT(ck_restore_rec_parse(buf, (size_t)n, &q), 0);
	CHECK_EQ_INT(q.seq, 3);
	CHECK_EQ_INT(q.time_ns, 1700000000123456789ll);
	CHECK_EQ_INT(q.duration_ns, 250000000);
	/* a later version's extra line is fine; damage is not */
	CHECK_EQ_INT(ck_restore_rec_parse("ckpt-restore 1\nseq 1\ntime 2\nduration 3\nhost x\n", 44, &q), 0);
	CHECK(ck_restore_rec_parse(buf, (size_t)n - 1, &q) < 0); /* last newline cut */
	CHECK(ck_restore_rec_parse("ckpt-restore 2\nseq 1\ntime 2\nduration 3\n", 39, &q) < 0);
	CHECK(ck_restore_rec_parse("ckpt-restore 1\nseq 0\ntime 2\nduration 3\n", 39, &q) < 0);
	CHECK(ck_restore_rec_parse("ckpt-restore 1\nseq x\ntime 2\nduration 3\n", 39, &q) < 0);
	CHECK(ck_restore_rec_parse("ckpt-restore 1\nseq 99999999999999999999\ntime 2\nduration 3\n", 58, &q) < 0);
	CHECK(ck_restore_rec_parse("ckpt-restore 1\ntime 2\nseq 1\nduration 3\n", 39, &q) < 0);
}

static void store(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	struct ck_restore_rec a = {2, 2000, 5}, b = {1, 1000, 7}, *v = NULL;
	size_t n = 9, bad = 9;

	CHECK_EQ_INT(ck_store_file_open(dir, &s), 0);
	if (!s)
		goto out;
	CHECK_EQ_INT(ck_restore_log_list(s, "j", &v, &n, &bad), 0);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(ck_restore_log_put(s, "j", &a), 0);
	CHECK_EQ_INT(ck_restore_log_put(s, "j", &b), 0);
	CHECK_EQ_INT(ck_restore_log_put(s, "j", &b), -EEXIST);
	CHECK_EQ_INT(ck_store_put(s, "j/restores/00000000000000003000-00000009", "junk\n", 5, 0), 0);
	CHECK_EQ_INT(ck_store_put(s, "k/restores/00000000000000000500-00000001", "x", 1, 0), 0);
	CHECK_EQ_INT(ck_restore_log_list(s, "j", &v, &n, &bad), 0);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(bad, 1);
	if (n == 2) { /* oldest first, whatever order they were written in */
		CHECK_EQ_INT(v[0].seq, 1);
		CHECK_EQ_INT(v[0].time_ns, 1000);
		CHECK_EQ_INT(v[0].duration_ns, 7);
		CHECK_EQ_INT(v[1].seq, 2);
	}
	free(v);
	v = NULL;
	CHECK_EQ_INT(ck_restore_log_drop(s, "j"), 0);
	CHECK_EQ_INT(ck_restore_log_list(s, "j", &v, &n, &bad), 0);
	CHECK_EQ_INT(n + bad, 0);
	{
		uint64_t size = 0; /* another job's records stay */
		CHECK_EQ_INT(ck_store_stat(s, "k/restores/00000000000000000500-00000001", &size), 0);
	}
	free(v);
	ck_store_close(s);
out:
	ck_unit_rmtree(dir);
}

void ck_unit_run(void)
{
	text();
	store();
}
