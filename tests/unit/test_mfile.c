/* Files a checkpoint maps pages of (launcher/image/mfile.c): the digest is
 * read once and only from the recorded file; a restore's check takes the
 * file itself without reading it, a copy by its digest, and refuses other
 * bytes even with the recorded size and mtime. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/mfile.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

static char *dir;

static void write_file(const char *path, char fill, size_t n)
{
	char *b = malloc(n);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	memset(b, fill, n);
	CHECK(fd >= 0 && write(fd, b, n) == (ssize_t)n);
	close(fd);
	free(b);
}

static void record(struct ck_mfile *f, const char *path)
{
	struct stat st;

	CHECK_EQ_INT(stat(path, &st), 0);
	memset(f, 0, sizeof(*f));
	f->path = (char *)path;
	f->dev = (uint64_t)st.st_dev;
	f->ino = (uint64_t)st.st_ino;
	f->size = (uint64_t)st.st_size;
	f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	f->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
}

static void set_mtime(const char *path, int64_t ns)
{
	struct timespec t[2] = {{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
	CHECK_EQ_INT(utimensat(AT_FDCWD, path, t, 0), 0);
}

static void test_digest_and_check(void)
{
	char a[4096], b[4096];
	struct ck_mfile f, g;
	struct ck_manifest prev = {0};

	snprintf(a, sizeof(a), "%s/lib.so", dir);
	snprintf(b, sizeof(b), "%s/copy.so", dir);
	write_file(a, 'x', 3 << 20);
	record(&f, a);
	CHECK_EQ_INT(ck_mfile_digest(&f, NULL), 0);
	CHECK(f.has_digest);

	/* the file itself, a copy with another inode and mtime: taken */
	CHECK_EQ_INT(ck_mfile_check(7, &f, a), 0);
	write_file(b, 'x', 3 << 20);
	set_mtime(b, 1000000000000000000LL);
	CHECK_EQ_INT(ck_mfile_check(7, &f, b), 0);

	/* other bytes, the recorded size and mtime: refused by the digest */
	write_file(b, 'y', 3 << 20);
	set_mtime(b, f.mtime_ns);
	CHECK_EQ_INT(ck_mfile_check(7, &f, b), -ENXIO);
	CHECK(strstr(ck_err_msg(), "process 7: ") && strstr(ck_err_msg(), "contents differ"));

	/* without a digest the identity rules: that copy would pass, another
	 * mtime not */
	g = f;
	g.has_digest = 0;
	CHECK_EQ_INT(ck_mfile_check(7, &g, b), 0);
	set_mtime(b, 1000000000000000000LL);
	CHECK_EQ_INT(ck_mfile_check(7, &g, b), -ENXIO);
	CHECK(strstr(ck_err_msg(), "modified at") != NULL);

	/* size, absence */
	write_file(b, 'x', (3 << 20) + 1);
	CHECK_EQ_INT(ck_mfile_check(7, &f, b), -ENXIO);
	CHECK(strstr(ck_err_msg(), "bytes") != NULL);
	unlink(b);
	CHECK_EQ_INT(ck_mfile_check(7, &f, b), -ENXIO);
	CHECK(strstr(ck_err_msg(), "is not here") != NULL);

	/* reuse: the same file by path and identity only */
	prev.files = &f;
	prev.nfiles = 1;
	record(&g, a);
	CHECK_EQ_INT(ck_mfile_reuse(&g, &prev), 1);
	CHECK(g.has_digest && !memcmp(g.digest, f.digest, CK_HASH_LEN));
	record(&g, a);
	g.mtime_ns++;
	CHECK_EQ_INT(ck_mfile_reuse(&g, &prev), 0);
	CHECK(!g.has_digest);

	/* a file no longer the recorded one when it is read: no digest */
	record(&g, a);
	write_file(a, 'z', 3 << 20);
	CHECK_EQ_INT(ck_mfile_digest(&g, NULL), 0);
	CHECK(!g.has_digest);

	/* a round that failed meanwhile: the reading stops, no digest */
	{
		int cancel = 1;
		record(&g, a);
		CHECK_EQ_INT(ck_mfile_digest(&g, &cancel), 0);
		CHECK(!g.has_digest);
		cancel = 0;
		CHECK_EQ_INT(ck_mfile_digest(&g, &cancel), 0);
		CHECK(g.has_digest);
	}

	/* a FIFO at the path: refused at once, not waited on */
	unlink(b);
	CHECK_EQ_INT(mkfifo(b, 0600), 0);
	CHECK_EQ_INT(ck_mfile_check(7, &f, b), -ENXIO);
	CHECK(strstr(ck_err_msg(), "no longer a regular file") != NULL);
	g = f;
	g.path = b;
	CHECK_EQ_INT(ck_mfile_digest(&g, NULL), 0);
	CHECK(!g.has_digest);
}

void ck_unit_run(void)
{
	dir = ck_unit_tmpdir();
	test_digest_and_check();
	ck_unit_rmtree(dir);
}
