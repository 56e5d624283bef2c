/* Scratch directories for unit tests: created fresh, removed at the end. */
#ifndef CK_UNIT_TMPDIR_H
#define CK_UNIT_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline int ck__unit_rm_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

/* Returns a new empty directory (malloc'd path) or exits. */
static inline char *ck_unit_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (asprintf(&path, "%s/ckunit-XXXXXX", base && *base ? base : "/tmp") < 0 || !mkdtemp(path)) {
		perror("mkdtemp");
		exit(1);
	}
	return path;
}

static inline void ck_unit_rmtree(char *path)
{
	nftw(path, ck__unit_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(path);
}

#endif
