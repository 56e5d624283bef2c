/* dirfd_rename: descriptors of files and directories stay on the job's own
 * mounts after a restore.
 *
 * State exercised: a directory descriptor held across steps, through which
 * each step writes a temporary file and renames it over a path given from
 * the root (the atomic-replace pattern of storage libraries:
 * openat+renameat), and a file descriptor held open that each step links
 * under a new name through /proc/self/fd (linkat). Both need the held
 * descriptor and the path to be on the same mount: a restore that opened
 * them again on its own mounts made both fail with EXDEV. Files are not
 * rolled back by a restore: a restored step finds what a later, killed run
 * left. Its temporary may be gone (renamed by that run: the step writes it
 * again), the final file may hold a later step's line (a checkpoint cut
 * between the rename and the read back), the link may exist. Only EXDEV,
 * a final file older than the step, or another failure fails.
 * Usage: dirfd_rename [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *what, long step)
{
	printf("FAIL %s at step %ld (%s)\n", what, step, strerror(errno));
	fflush(stdout);
	return 1;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	char dir[256], final[300], path[300], self[64], link[320], buf[32];
	int dfd, keep, rc = 0;

	snprintf(dir, sizeof(dir), "%s/dirfd_rename.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return fail("mkdtemp", 0);
	snprintf(final, sizeof(final), "%s/final", dir);
	snprintf(path, sizeof(path), "%s/kept", dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	keep = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (dfd < 0 || keep < 0)
		return fail("open", 0);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", keep);
	for (i = 0; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		int t, tries, n = snprintf(buf, sizeof(buf), "step %ld\n", i);
		ssize_t got = 0;
		long seen;

		/* write a temporary through the directory, rename it over final
		 * (tmp gone: a later, killed run renamed it after a restored
		 * cut; write it again, once) */
		for (tries = 0; tries < 2 && !rc; tries++) {
			t = openat(dfd, "tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			if (t < 0 || write(t, buf, (size_t)n) != n || close(t) < 0)
				rc = fail("openat through the held directory", i);
			else if (renameat(dfd, "tmp", AT_FDCWD, final) == 0)
				break;
			else if (errno != ENOENT || tries)
				rc = fail("renameat from the held directory to a path", i);
		}
		/* this step's line, or a later step's (not rolled back) */
		if (!rc && ((t = open(final, O_RDONLY | O_CLOEXEC)) < 0 || (got = read(t, link, sizeof(link) - 1)) <= 0 ||
			    close(t) < 0))
			rc = fail("reading the renamed file", i);
		if (!rc) {
			link[got] = 0;
			if (sscanf(link, "step %ld", &seen) != 1 || seen < i) {
				printf("FAIL the renamed file holds \"%.*s\" at step %ld\n", (int)strcspn(link, "\n"), link, i);
				rc = 1;
			}
		}
		if (rc)
			break;
		/* a new name for the held file (left by a step killed after its
		 * link: EEXIST; its unlink done: nothing to remove) */
		snprintf(link, sizeof(link), "%s/link", dir);
		if (linkat(AT_FDCWD, self, AT_FDCWD, link, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
			rc = fail("linkat of the held file", i);
		else if (unlink(link) < 0 && errno != ENOENT)
			rc = fail("unlink", i);
		while (nanosleep(&nap, &nap) < 0 && errno == EINTR)
			;
	}
	unlink(final);
	unlink(path);
	rmdir(dir);
	if (!rc)
		printf("dirfd_rename: %ld steps, renamed through the directory and linked the file\n", i);
	return rc;
}
