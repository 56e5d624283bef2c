/* removed_dir: a working directory, and a directory held open, removed
 * while the process is in them or holds them.
 *
 * State exercised: the process's working directory made, entered and
 * removed (/proc/self/cwd reads "PATH (deleted)", getcwd fails with ENOENT,
 * nothing can be made in it, its mode is 0750), and a second directory
 * opened, then removed (its descriptor's link reads "PATH (deleted)",
 * fstat gives no links and its mode 0710, its offset is kept). Each step checks all of it.
 * Before this test a restore put the process in the directory ckrun ran
 * in, and a commit with such a descriptor could not be restored. Prints
 * only deterministic lines; exits 1 after a FAIL line.
 * Usage: removed_dir [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static const char *check(const char *base, int held)
{
	static char why[160];
	char link[PATH_MAX], want[PATH_MAX + 32], w[PATH_MAX], fdl[64];
	struct stat st;
	ssize_t n;

	n = readlink("/proc/self/cwd", link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	snprintf(want, sizeof(want), "%s/cwd (deleted)", base);
	if (strcmp(link, want))
		return "the working directory is another one";
	errno = 0;
	if (getcwd(w, sizeof(w)) || errno != ENOENT)
		return "getcwd does not fail with ENOENT";
	if (stat(".", &st) < 0 || st.st_nlink != 0 || (st.st_mode & 07777) != 0750)
		return "the working directory's links or mode";
	errno = 0;
	if (open("new", O_CREAT | O_RDWR, 0600) >= 0 || errno != ENOENT)
		return "a file could be made in the removed directory";
	snprintf(fdl, sizeof(fdl), "/proc/self/fd/%d", held);
	n = readlink(fdl, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	snprintf(want, sizeof(want), "%s/held (deleted)", base);
	if (strcmp(link, want))
		return "the held directory's descriptor names another";
	if (fstat(held, &st) < 0 || st.st_nlink != 0 || (st.st_mode & 07777) != 0710 || !S_ISDIR(st.st_mode))
		return "the held directory's links or mode";
	snprintf(why, sizeof(why), "ok");
	return why;
}

int main(int argc, char **argv)
{
	int steps = (int)(6 * app_scale(argc, argv) + 0.5), held, bad = 0;
	struct timespec t = {0, 400 * 1000000L};
	char base[PATH_MAX];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	snprintf(base, sizeof(base), "%s/removed_dir.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	umask(022);
	if (!mkdtemp(base) || chdir(base) < 0 || mkdir("cwd", 0750) < 0 || mkdir("held", 0710) < 0 ||
	    (held = open("held", O_RDONLY | O_DIRECTORY)) < 0 || chdir("cwd") < 0 || rmdir("../cwd") < 0 ||
	    rmdir("../held") < 0)
		return 1;
	for (int step = 0; step < steps; step++) {
		const char *r;

		nanosleep(&t, NULL);
		r = check(base, held);
		if (strcmp(r, "ok")) {
			printf("FAIL step %d: %s\n", step, r);
			bad = 1;
		} else {
			printf("step %d: in a removed directory, holding another\n", step);
		}
	}
	if (chdir(base) == 0 && chdir("/") == 0)
		rmdir(base);
	printf("%s\n", bad ? "FAIL removed directories" : "removed directories as bare");
	return bad;
}
