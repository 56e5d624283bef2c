/* The id maps of the job's user namespace (ns.c makes one when ckrun is
 * not root; NOTES.md, Processes).
 *
 * The job must see the ids a bare run sees. Its own uid and gid map to
 * themselves: the one mapping an unprivileged process may write. Its
 * supplementary groups would read as 65534 (the overflow gid) unless they
 * are mapped too, which only the setuid newgidmap (Debian's uidmap) may do,
 * for groups /etc/subgid lists for the user: those the administrator
 * delegated are mapped to themselves. setgroups stays denied in the
 * namespace either way (nothing in it may drop a group that denies it
 * access). Other users' files read as owned by 65534. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"

extern char **environ;

#define CK__MAX_GROUPS 64

static int ck__write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		r = -errno;
	close(fd);
	return r;
}

/* Whether /etc/subgid gives the user (by name or uid) gid g. */
static int ck__subgid_has(const char *name, uid_t uid, gid_t g)
{
	char line[512], num[16];
	FILE *f = fopen("/etc/subgid", "re");
	int yes = 0;

	if (!f)
		return 0;
	snprintf(num, sizeof(num), "%u", (unsigned)uid);
	while (!yes && fgets(line, sizeof(line), f)) {
		char *who = strtok(line, ":\n"), *start = strtok(NULL, ":\n"), *count = strtok(NULL, ":\n");
		unsigned long s, n;
		if (!who || !start || !count || (strcmp(who, name) && strcmp(who, num)))
			continue;
		s = strtoul(start, NULL, 10);
		n = strtoul(count, NULL, 10);
		yes = g >= s && g - s < n;
	}
	fclose(f);
	return yes;
}

/* newgidmap PID G G 1 [g g 1 ...]: 0 when it mapped them. */
static int ck__newgidmap(pid_t pid, const gid_t *g, int n)
{
	char *argv[3 + 3 * CK__MAX_GROUPS + 1], num[3 * CK__MAX_GROUPS + 1][16];
	posix_spawn_file_actions_t fa;
	int st, k = 0, r;
	pid_t kid;

	argv[k++] = "newgidmap";
	snprintf(num[0], sizeof(num[0]), "%d", pid);
	argv[k++] = num[0];
	for (int i = 0; i < n; i++) {
		snprintf(num[1 + 3 * i], sizeof(num[0]), "%u", (unsigned)g[i]);
		snprintf(num[2 + 3 * i], sizeof(num[0]), "%u", (unsigned)g[i]);
		snprintf(num[3 + 3 * i], sizeof(num[0]), "1");
		argv[k++] = num[1 + 3 * i];
		argv[k++] = num[2 + 3 * i];
		argv[k++] = num[3 + 3 * i];
	}
	argv[k] = NULL;
	/* its complaints are ours to summarize in one line */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	r = posix_spawnp(&kid, "newgidmap", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -r;
	while (waitpid(kid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

int ck_idmap_write(pid_t pid, int verbose)
{
	char path[64], map[64], lost[256] = "";
	uid_t uid = geteuid();
	gid_t gid = getegid(), *groups = NULL, keep[CK__MAX_GROUPS];
	int ng = getgroups(0, NULL), nk = 0, r;
	struct passwd *pw;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	snprintf(map, sizeof(map), uid == 0 ? "0 0 4294967295" : "%u %u 1", (unsigned)uid, (unsigned)uid);
	if ((r = ck__write_file(path, map)) < 0)
		return r;
	if (uid == 0) { /* root keeps every id (a root without CAP_SYS_ADMIN: ns.c) */
		snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
		return ck__write_file(path, "0 0 4294967295");
	}
	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	if ((r = ck__write_file(path, "deny")) < 0)
		return r;
	keep[nk++] = gid;
	pw = getpwuid(uid);
	if (ng > 0 && (!(groups = calloc((size_t)ng, sizeof(*groups))) || (ng = getgroups(ng, groups)) < 0))
		ng = 0;
	for (int i = 0; i < ng; i++) {
		size_t at = strlen(lost);
		if (groups[i] == gid)
			continue;
		if (nk < CK__MAX_GROUPS && pw && ck__subgid_has(pw->pw_name, uid, groups[i]))
			keep[nk++] = groups[i];
		else
			snprintf(lost + at, sizeof(lost) - at, "%s%u", at ? "," : "", (unsigned)groups[i]);
	}
	free(groups);
	if (nk > 1 && (r = ck__newgidmap(pid, keep, nk)) < 0) {
		if (verbose)
			fprintf(stderr,
				"ckrun: newgidmap could not map the job's groups (%s): its supplementary groups read as "
				"65534 in the job\n",
				r == -ENOENT ? "not installed (Debian: uidmap)" : "refused");
		nk = 1;
		lost[0] = 0; /* all of them, then */
	}
	if (nk == 1) {
		snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid, (unsigned)gid);
		if ((r = ck__write_file(path, map)) < 0)
			return r;
	}
	if (verbose && lost[0])
		fprintf(stderr,
			"ckrun: the job's supplementary groups %s read as 65534 in its user namespace (access checks "
			"still use them); /etc/subgid lines for %s with newgidmap keep them\n",
			lost, pw ? pw->pw_name : "the user");
	return 0;
}
