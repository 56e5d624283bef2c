/* limits: per-process attributes set once and relied upon later.
 *
 * State exercised: resource limits (RLIMIT_NOFILE, RLIMIT_CORE,
 * RLIMIT_FSIZE, RLIMIT_STACK, RLIMIT_MEMLOCK lowered from their defaults),
 * the umask, the current working directory (a temporary directory the program
 * creates, used through relative paths), the thread name (PR_SET_NAME) and the
 * "no new privileges" bit. They are set at the start and checked at every
 * round of a computation, and used: files are created with relative names
 * and their modes must follow the umask; opening past RLIMIT_NOFILE fails.
 * Usage: limits [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

struct lim {
	int res;
	const char *name;
	rlim_t soft;
};

static const struct lim lims[] = {
	{ RLIMIT_NOFILE, "RLIMIT_NOFILE", 200 },
	{ RLIMIT_CORE, "RLIMIT_CORE", 0 },
	{ RLIMIT_FSIZE, "RLIMIT_FSIZE", 64UL << 20 },
	{ RLIMIT_STACK, "RLIMIT_STACK", 6UL << 20 },
	{ RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", 32768 },
};
#define NLIM ((int)(sizeof(lims) / sizeof(lims[0])))

static char cwd_want[4096];

/* Returns the number of attributes that differ from what was set. */
static int check(long round)
{
	char buf[4096], name[17] = "";
	int bad = 0, fd;
	struct stat st;
	mode_t old;

	for (int i = 0; i < NLIM; i++) {
		struct rlimit rl;
		getrlimit(lims[i].res, &rl);
		if (rl.rlim_cur != lims[i].soft) {
			printf("FAIL %s is %llu, set %llu\n", lims[i].name, (unsigned long long)rl.rlim_cur,
			       (unsigned long long)lims[i].soft);
			bad++;
		}
	}
	old = umask(0);
	umask(old);
	if (old != 027) {
		printf("FAIL umask is %03o\n", (unsigned)old);
		bad++;
	}
	if (!getcwd(buf, sizeof(buf)))
		snprintf(buf, sizeof(buf), "(getcwd: %s)", strerror(errno));
	if (strcmp(buf, cwd_want) != 0) {
		printf("FAIL cwd changed: now %s, set %s\n", buf, cwd_want);
		bad++;
	}
	snprintf(buf, sizeof(buf), "file-%ld", round); /* relative to cwd */
	fd = open(buf, O_CREAT | O_WRONLY | O_TRUNC, 0666);
	if (fd < 0 || fstat(fd, &st) != 0 || (st.st_mode & 0777) != 0640) {
		printf("FAIL new file mode %03o\n", fd < 0 ? 0 : (unsigned)(st.st_mode & 0777));
		bad++;
	}
	if (fd >= 0)
		close(fd);
	unlink(buf);
	prctl(PR_GET_NAME, name);
	if (strcmp(name, "ck-limits") != 0) {
		printf("FAIL thread name is '%s'\n", name);
		bad++;
	}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		printf("FAIL no_new_privs lost\n");
		bad++;
	}
	return bad;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long rounds = (long)(10 * app_scale(argc, argv));
	char dir[4096];
	uint64_t x = 5;
	int rc = 0, fds[256], nfd = 0;

	if (rounds < 1)
		rounds = 1;
	for (int i = 0; i < NLIM; i++) {
		struct rlimit rl;
		getrlimit(lims[i].res, &rl);
		rl.rlim_cur = lims[i].soft;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur; /* root only; otherwise setrlimit says no */
		if (setrlimit(lims[i].res, &rl) != 0) {
			printf("FAIL cannot set %s\n", lims[i].name);
			return 1;
		}
	}
	umask(027);
	snprintf(dir, sizeof(dir), "%s/limits.XXXXXX", tmp);
	if (!mkdtemp(dir) || chdir(dir) != 0 || !getcwd(cwd_want, sizeof(cwd_want)))
		return 1;
	prctl(PR_SET_NAME, "ck-limits");
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	printf("limits: %d rlimits, umask 027, cwd, name, no_new_privs; %ld rounds\n", NLIM, rounds);

	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < 250000000; i++)
			x = x * 2862933555777941757ULL + 3037000493ULL;
		int bad = check(r);
		printf("round %ld: %s\n", r + 1, bad ? "CHANGED" : "all as set");
		if (bad)
			rc = 1;
	}
	/* RLIMIT_NOFILE is enforced: opening stops before 200 descriptors. */
	errno = 0;
	while (nfd < 256 && (fds[nfd] = open("/dev/null", O_RDONLY)) >= 0)
		nfd++;
	printf("open stopped by EMFILE below 200: %s\n", errno == EMFILE && nfd < 200 ? "yes" : "NO");
	if (errno != EMFILE || nfd >= 200)
		rc = 1;
	while (nfd > 0)
		close(fds[--nfd]);
	if (chdir("/") == 0)
		rmdir(dir);
	printf("compute %016llx\n", (unsigned long long)x);
	printf("limits: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
