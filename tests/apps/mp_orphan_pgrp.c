/* mp_orphan_pgrp: a process group whose leader has exited.
 *
 * State exercised: P forks A; A makes a group of its own (setpgid), forks
 * B (in A's group) and exits; P reaps A, so the group's leader is gone
 * and B's parent is init. P then forks C, which joins the group. The
 * group lives on with B and C, as after a shell's pipeline whose first
 * command ended. A restore cannot make the group with setpgid(0, 0) in a
 * member (its number is the leader's): a process with that number must
 * lead it while the members join. Every step B and C check their group,
 * session and parent and that no child of theirs has ended and no SIGCHLD
 * came (a restore's helper made and reaped by one of them would show
 * there); P checks both members' group and that the group exists (kill
 * with signal 0). At the end P counts the group's processes in /proc (a
 * helper left behind would be one more), releases B and C (EOF on a pipe)
 * and reaps C (B is init's).
 * Only P prints, and only relative facts (no pids). B and C exit at once
 * when the release pipe ends early (the job was killed).
 * Usage: mp_orphan_pgrp [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_MS 25

enum { ID_B, ID_C, NID };
enum { READY = 1, DONE = 2 };

struct rec {
	int32_t id, type;
	int32_t checks, failures; /* READY: the sender's pid in checks */
};

static int rep_w = -1, rel_r = -1;
static long steps;
static volatile sig_atomic_t sigchld;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_rec(int fd, struct rec *r)
{
	size_t done = 0;

	while (done < sizeof(*r)) {
		ssize_t n = read(fd, (char *)r + done, sizeof(*r) - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static void send_rec(int id, int type, int a, int b)
{
	struct rec r = { id, type, a, b };
	if (write_all(rep_w, &r, sizeof(r)))
		_exit(98);
}

static void on_chld(int sig)
{
	(void)sig;
	sigchld++;
}

/* B or C: checks every step, then waits for the release. */
static void member(int id, pid_t group, pid_t ppid_gone)
{
	struct sigaction sa;
	int checks = 0, fail = 0;
	pid_t sid = getsid(0), ppid;
	uint64_t x = (uint64_t)id;
	char c;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	for (int i = 0; ppid_gone && getppid() == ppid_gone; i++) {
		if (i > 2000)
			_exit(97);
		sleep_ms(1);
	}
	ppid = getppid();
	send_rec(id, READY, (int)getpid(), 0);
	for (long s = 0; s < steps; s++) {
		struct pollfd p = { rel_r, POLLIN, 0 };
		if (poll(&p, 1, 0) > 0)
			_exit(99); /* released early: the job was killed */
		fail += getpgid(0) != group;
		fail += getsid(0) != sid;
		fail += getppid() != ppid;
		fail += sigchld != 0;
		fail += waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD;
		checks += 5;
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		sleep_ms(STEP_MS);
	}
	fail += x == 0;
	send_rec(id, DONE, checks, fail);
	while (read(rel_r, &c, 1) < 0 && errno == EINTR)
		;
	_exit(10 + id);
}

static int count_group(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], buf[1024], *p;
		int grp;
		FILE *f;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f);
		fclose(f);
		if (!p || !(p = strrchr(buf, ')')))
			continue;
		if (sscanf(p + 1, " %*c %*d %d", &grp) == 1 && grp == pgid)
			n++;
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	int rep[2], rel[2], rc = 0, st, checks[NID] = { 0 }, fails[NID] = { 0 }, pchecks = 0, pfails = 0;
	pid_t a, c, pids[NID] = { 0 };
	struct rec r;

	steps = (long)(130 * app_scale(argc, argv));
	if (steps < 5)
		steps = 5;
	if (pipe(rep) != 0 || pipe(rel) != 0)
		return 1;
	printf("mp_orphan_pgrp: a process group whose leader has exited, with an orphaned member and a member "
	       "that joined it; %ld checked steps\n",
	       steps);
	fflush(stdout);
	rep_w = rep[1];
	rel_r = rel[0];
	a = fork();
	if (a == 0) {
		pid_t self = getpid(), b;
		close(rep[0]);
		close(rel[1]);
		if (setpgid(0, 0) != 0)
			_exit(2);
		b = fork();
		if (b == 0)
			member(ID_B, self, self);
		_exit(b < 0 ? 3 : 0);
	}
	if (a < 0 || waitpid(a, &st, 0) != a || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL A\n");
		return 1;
	}
	if (read_rec(rep[0], &r) || r.type != READY || r.id != ID_B) {
		printf("FAIL no ready record from B\n");
		return 1;
	}
	pids[ID_B] = r.checks;
	c = fork();
	if (c == 0) {
		close(rep[0]);
		close(rel[1]);
		if (setpgid(0, a) != 0)
			_exit(4);
		member(ID_C, a, 0);
	}
	if (c < 0 || read_rec(rep[0], &r) || r.type != READY || r.id != ID_C) {
		printf("FAIL no ready record from C\n");
		return 1;
	}
	pids[ID_C] = r.checks;
	close(rep[1]);
	close(rel[0]);
	for (long s = 0; s < steps; s++) {
		pfails += getpgid(pids[ID_B]) != a;
		pfails += getpgid(pids[ID_C]) != a;
		pfails += kill(-a, 0) != 0;
		pfails += getpgid(0) == a;
		pchecks += 4;
		sleep_ms(STEP_MS);
	}
	for (int n = 0; n < NID; n++) {
		if (read_rec(rep[0], &r) || r.type != DONE || r.id < 0 || r.id >= NID || checks[r.id]) {
			printf("FAIL bad or missing result record\n");
			return 1;
		}
		checks[r.id] = r.checks;
		fails[r.id] = r.failures;
	}
	int ng = count_group(a);
	printf("the group: %d processes\n", ng);
	if (ng != 2) {
		printf("FAIL group membership\n");
		rc = 1;
	}
	printf("P: %d checks, %d failures\n", pchecks, pfails);
	rc |= pfails || pchecks != 4 * steps;
	for (int i = 0; i < NID; i++) {
		printf("%s: %d checks, %d failures\n", i == ID_B ? "B" : "C", checks[i], fails[i]);
		if (fails[i] || checks[i] != 5 * steps)
			rc = 1;
	}
	close(rel[1]); /* the release */
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR) {
			printf("FAIL waitpid\n");
			return 1;
		}
	printf("C: %s %d (reaped by P)\n", WIFEXITED(st) ? "exited" : "status", WIFEXITED(st) ? WEXITSTATUS(st) : st);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 10 + ID_C)
		rc = 1;
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	close(rep[0]);
	printf("mp_orphan_pgrp: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
