/* inotify_watch: inotify instances and their watches must come back with
 * the same watch numbers, masks and flags, and the kernel must go on
 * giving the numbers it would have given.
 *
 * State exercised: a non-blocking instance watching a directory (by a
 * relative path, from inside it), a file, and a symlink itself
 * (IN_DONT_FOLLOW), with a watch number left unused between them (a watch
 * removed) and one given after them and removed (the next number is 6,
 * not 4); a one-shot watch (IN_ONESHOT) not fired yet; a mask widened by
 * IN_MASK_ADD; a blocking instance shared with a forked child (one
 * description: the parent reads what either would), given a watch by the
 * parent after the fork. Each step makes events and checks which watch reports
 * them, with what mask and name. Prints only deterministic lines; exits 1
 * after a FAIL line.
 * Usage: inotify_watch [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 4 s) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static char dir[256];
static int bad, ib = -1; /* the shared instance */

static void fail(const char *what)
{
	printf("FAIL %s (%s)\n", what, strerror(errno));
	bad = 1;
}

/* The next event of fd within 2 s: wd, mask and name must be these. */
static void expect(int fd, int wd, uint32_t mask, const char *name, const char *what)
{
	static struct {
		char buf[4096] __attribute__((aligned(8)));
		size_t have, at;
	} q[2]; /* queued events read, of a and b */
	char *buf = q[fd == ib].buf;
	size_t *have = &q[fd == ib].have, *at = &q[fd == ib].at;
	struct inotify_event *e;
	struct pollfd p = {fd, POLLIN, 0};

	if (*at >= *have) {
		ssize_t n;

		*at = *have = 0;
		if (poll(&p, 1, 2000) != 1) {
			printf("FAIL %s: no event\n", what);
			bad = 1;
			return;
		}
		if ((n = read(fd, buf, sizeof(q[0].buf))) <= 0) {
			fail(what);
			return;
		}
		*have = (size_t)n;
	}
	e = (struct inotify_event *)(buf + *at);
	*at += sizeof(*e) + e->len;
	if (e->wd != wd || (e->mask & ~IN_ISDIR) != mask || strcmp(e->len ? e->name : "", name)) {
		printf("FAIL %s: event of watch %d mask %#x name '%s', expected watch %d mask %#x name '%s'\n", what,
		       e->wd, e->mask, e->len ? e->name : "", wd, mask, name);
		bad = 1;
	}
}

static void touch(const char *name)
{
	char p[300];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	close(open(p, O_RDWR | O_CREAT, 0600));
}

static void append(const char *name)
{
	char p[300];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if ((fd = open(p, O_WRONLY | O_APPEND)) < 0 || write(fd, "x", 1) != 1)
		fail("append");
	close(fd);
}

/* NAME made new in the directory, its create event taken. Files are not
 * rolled back by a restore: one from before this step's create, of a run
 * that had made the file and was then killed, finds it there; it is
 * removed first, its delete events taken. */
static void make_new(int a, int b, int wdir, int wshared, const char *name)
{
	char p[400];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	while ((fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0 && errno == EEXIST)
		if (unlink(p) == 0) {
			expect(a, wdir, IN_DELETE, name, "delete in the directory (made before a restore)");
			expect(b, wshared, IN_DELETE, name, "delete, shared instance (made before a restore)");
		}
	if (fd < 0)
		fail("create");
	close(fd);
	expect(a, wdir, IN_CREATE, name, "create in the directory");
}

/* NAME removed, its delete events taken. One from before this step's
 * removal, of a run that had removed the file and was then killed, finds
 * it gone: it is made again first, its create event taken. */
static void remove_made(int a, int b, int wdir, int wshared, const char *name)
{
	char p[400];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	while (unlink(p) < 0 && errno == ENOENT) {
		close(open(p, O_RDWR | O_CREAT | O_EXCL, 0600));
		expect(a, wdir, IN_CREATE, name, "create in the directory (removed before a restore)");
	}
	expect(a, wdir, IN_DELETE, name, "delete in the directory");
	expect(b, wshared, IN_DELETE, name, "delete, shared instance");
}

int main(int argc, char **argv)
{
	int steps = (int)(10 * app_scale(argc, argv) + 0.5), a, b, wdir, wgap, wfile, wlink, wone, wshared, wlate, w;
	struct timespec t = {0, 400 * 1000000L};
	char p[300], name[48];
	DIR *d;
	int gate[2];
	pid_t kid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (steps < 1)
		steps = 1;
	snprintf(dir, sizeof(dir), "%s/inotify_watch.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir) || chdir(dir) < 0 || pipe(gate) < 0)
		return 1;
	touch("file");
	touch("gap");
	touch("once");
	touch("target");
	if (symlink("target", "link") < 0)
		return 1;
	a = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	b = ib = inotify_init();
	if (a < 0 || b < 0)
		return 1;
	wdir = inotify_add_watch(a, ".", IN_CREATE | IN_DELETE);
	wgap = inotify_add_watch(a, "gap", IN_MODIFY);
	snprintf(p, sizeof(p), "%s/file", dir);
	wfile = inotify_add_watch(a, p, IN_MODIFY | IN_CLOSE_WRITE);
	wlink = inotify_add_watch(a, "link", IN_ATTRIB | IN_DONT_FOLLOW);
	wone = inotify_add_watch(a, "once", IN_MODIFY | IN_ONESHOT);
	if (wdir != 1 || wgap != 2 || wfile != 3 || wlink != 4 || wone != 5 || inotify_rm_watch(a, wgap) < 0)
		return 1;
	expect(a, wgap, IN_IGNORED, "", "removal");
	if ((w = inotify_add_watch(a, "target", IN_ACCESS)) != 6 || inotify_rm_watch(a, w) < 0)
		return 1;
	expect(a, 6, IN_IGNORED, "", "removal");
	wshared = inotify_add_watch(b, ".", IN_DELETE);
	printf("watches %d %d %d, one-shot %d, a number given after them and removed; shared %d\n", wdir, wfile,
	       wlink, wone, wshared);

	kid = fork();
	if (kid == 0) { /* holds the shared instance, reads nothing */
		char c;
		close(gate[1]);
		while (read(gate[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(gate[0]);
	wlate = inotify_add_watch(b, "once", IN_ATTRIB);
	if (wlate != 2 || inotify_add_watch(a, p, IN_ATTRIB | IN_MASK_ADD) != wfile)
		return 1;

	for (int step = 0; step < steps; step++) {
		struct timespec now;

		nanosleep(&t, NULL);
		/* a name of this run's own (what a killed run made or removed
		 * after the checkpoint is mended by make_new and remove_made) */
		clock_gettime(CLOCK_REALTIME, &now);
		snprintf(name, sizeof(name), "n%d-%lld%09ld", step, (long long)now.tv_sec, now.tv_nsec);
		make_new(a, b, wdir, wshared, name);
		append("file");
		expect(a, wfile, IN_MODIFY, "", "append to the file");
		expect(a, wfile, IN_CLOSE_WRITE, "", "close of the file");
		if (chmod("file", step % 2 ? 0600 : 0640) < 0)
			fail("chmod");
		expect(a, wfile, IN_ATTRIB, "", "chmod of the file (a mask widened by IN_MASK_ADD)");
		append("target"); /* the link's target: not watched, no event */
		if (lchown("link", getuid(), getgid()) < 0)
			fail("lchown");
		expect(a, wlink, IN_ATTRIB, "", "lchown of the link");
		append("gap"); /* its watch was removed: no event */
		remove_made(a, b, wdir, wshared, name);
		printf("step %d: events of watches %d, %d, %d as added\n", step, wdir, wfile, wlink);
	}
	if (chmod("once", 0640) < 0)
		fail("chmod");
	expect(b, wlate, IN_ATTRIB, "", "a watch the parent added after the fork");
	append("once");
	expect(a, wone, IN_MODIFY, "", "one-shot");
	expect(a, wone, IN_IGNORED, "", "one-shot's end");
	append("once");
	if (inotify_rm_watch(a, wgap) == 0 || errno != EINVAL)
		fail("the removed watch is back");
	w = inotify_add_watch(a, "gap", IN_MODIFY);
	if (w != 7) {
		printf("FAIL the next watch number is %d, a bare run gets 7\n", w);
		bad = 1;
	}
	if (read(a, p, sizeof(p)) >= 0 || errno != EAGAIN) {
		printf("FAIL an event nobody made is queued\n");
		bad = 1;
	}
	close(gate[1]);
	waitpid(kid, NULL, 0);
	printf("next watch number %d\n", w);
	if ((d = opendir(".")) != NULL) { /* (files of a killed run's steps too) */
		for (struct dirent *de; (de = readdir(d)) != NULL;)
			if (de->d_name[0] != '.')
				unlink(de->d_name);
		closedir(d);
	}
	if (chdir("/") == 0)
		rmdir(dir);
	printf("%s\n", bad ? "FAIL inotify" : "inotify as bare");
	return bad;
}
