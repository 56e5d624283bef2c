/* mp_pgrp: process groups and sessions inside one job.
 *
 * State exercised: a process tree spanning several process groups and two
 * sessions. The parent P forks A, which makes itself a process group leader
 * (setpgid(0, 0), also done by P, the classic race-free way) and forks two
 * grandchildren A1 and A2 in that group; and C, which makes a new session
 * (setsid()) and forks a grandchild C1 in it. Everybody works, paced, for the
 * whole duration and checks at every step that getpgid(0), getsid(0) and
 * getppid() still equal the pids it knows (its group leader, its session
 * leader, its parent); P also checks getpgid(A) and getsid(A). A restore must
 * recreate the groups and sessions with their leaders and members. At the end
 * P counts the members of A's group and of C's session in /proc, releases
 * everybody (EOF on a pipe), and collects the statuses: A and C reap their
 * children and report those statuses to P, P reaps A and C.
 * Only P prints, and only relative facts (no pids). A process that finds its
 * parent gone (the job was killed) exits at once, so none outlives its job.
 * Usage: mp_pgrp [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_MS 25

enum { ID_P, ID_A, ID_A1, ID_A2, ID_C, ID_C1, NID };
static const char *const names[NID] = { "P", "A", "A1", "A2", "C", "C1" };

enum { READY = 1, DONE = 2, REAPED = 3 };

struct rec {
	int32_t id, type;
	int32_t checks, failures; /* DONE; REAPED: the two raw statuses */
};

static int rep_w = -1, rel_r = -1;
static long steps;

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

static int read_all(int fd, void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = read(fd, (char *)p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return done == 0 ? 0 : -1;
		done += (size_t)r;
	}
	return 1;
}

static void send_rec(int id, int type, int a, int b)
{
	struct rec r = { id, type, a, b };
	if (write_all(rep_w, &r, sizeof(r)))
		_exit(98);
}

/* What a process expects of itself. */
struct expect {
	int id;
	pid_t pgid, sid, ppid;
};

/* Paced work with the checks; returns the number of failed checks. A process
 * whose parent is gone exits at once (its job was killed). */
static int run_steps(const struct expect *e, pid_t a_pid, pid_t p_sid, int *checks)
{
	int fail = 0;
	uint64_t x = (uint64_t)e->id;

	for (long s = 0; s < steps; s++) {
		if (e->id != ID_P && getppid() != e->ppid)
			_exit(99); /* P's own parent is not part of the app */
		fail += getpgid(0) != e->pgid;
		fail += getsid(0) != e->sid;
		(*checks) += 3;
		if (e->id == ID_P) {
			fail += getpgid(a_pid) != a_pid;
			fail += getsid(a_pid) != p_sid;
			(*checks) += 2;
		}
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		sleep_ms(STEP_MS);
	}
	if (x == 0)
		fail++;
	return fail;
}

/* A descendant: ready, steps, results, then wait for the release. */
static void member(const struct expect *e)
{
	int checks = 0, fail;
	char c;

	send_rec(e->id, READY, 0, 0);
	fail = run_steps(e, 0, 0, &checks);
	send_rec(e->id, DONE, checks, fail);
	while (read(rel_r, &c, 1) < 0 && errno == EINTR)
		;
}

static void reap_two(int id, pid_t k1, pid_t k2)
{
	int s1 = -1, s2 = -1;
	while (waitpid(k1, &s1, 0) < 0 && errno == EINTR)
		;
	while (k2 > 0 && waitpid(k2, &s2, 0) < 0 && errno == EINTR)
		;
	send_rec(id, REAPED, s1, s2);
}

static void child_A(pid_t p_pid, pid_t p_sid)
{
	pid_t me, k[2];

	if (setpgid(0, 0) != 0)
		_exit(2);
	me = getpid();
	for (int i = 0; i < 2; i++) {
		k[i] = fork();
		if (k[i] < 0)
			_exit(3);
		if (k[i] == 0) {
			struct expect e = { ID_A1 + i, me, p_sid, me };
			member(&e);
			_exit(21 + i);
		}
	}
	struct expect e = { ID_A, me, p_sid, p_pid };
	member(&e);
	reap_two(ID_A, k[0], k[1]);
	_exit(20);
}

static void child_C(pid_t p_pid)
{
	pid_t me, k;

	if (setsid() < 0)
		_exit(2);
	me = getpid();
	k = fork();
	if (k < 0)
		_exit(3);
	if (k == 0) {
		struct expect e = { ID_C1, me, me, me };
		member(&e);
		_exit(31);
	}
	struct expect e = { ID_C, me, me, p_pid };
	member(&e);
	reap_two(ID_C, k, -1);
	_exit(30);
}

/* Processes whose /proc/PID/stat shows the given group (field 5) or
 * session (field 6). */
static int count_proc(int field, pid_t want)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], buf[1024], *p;
		int pgrp, sess;
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
		if (sscanf(p + 1, " %*c %*d %d %d", &pgrp, &sess) != 2)
			continue;
		if ((field == 5 ? pgrp : sess) == want)
			n++;
	}
	closedir(d);
	return n;
}

static const char *status_str(int st, char *buf, size_t n)
{
	if (WIFEXITED(st))
		snprintf(buf, n, "exited %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, n, "status %#x", st);
	return buf;
}

int main(int argc, char **argv)
{
	int rep[2], rel[2], rc = 0, checks[NID] = { 0 }, fails[NID] = { 0 }, done[NID] = { 0 };
	int reaped[NID][2], got_reaped[NID] = { 0 };
	pid_t me = getpid(), my_pgid = getpgid(0), my_sid = getsid(0), a, c;
	struct rec r;
	char b1[64], b2[64];

	steps = (long)(130 * app_scale(argc, argv));
	if (steps < 5)
		steps = 5;
	if (pipe(rep) != 0 || pipe(rel) != 0)
		return 1;
	printf("mp_pgrp: a group of 3, a session of 2, %ld checked steps each\n", steps);
	fflush(stdout);
	rep_w = rep[1];
	rel_r = rel[0];
	a = fork();
	if (a == 0) {
		close(rep[0]);
		close(rel[1]);
		child_A(me, my_sid);
	}
	if (a > 0)
		setpgid(a, a); /* also here, so that it is true whoever runs first */
	c = fork();
	if (c == 0) {
		close(rep[0]);
		close(rel[1]);
		child_C(me);
	}
	if (a < 0 || c < 0) {
		printf("FAIL fork\n");
		return 1;
	}
	close(rep[1]);
	close(rel[0]);

	/* Everybody is set up once all five have said so. */
	for (int n = 0; n < NID - 1; n++)
		if (read_all(rep[0], &r, sizeof(r)) != 1 || r.type != READY) {
			printf("FAIL no ready record\n");
			return 1;
		}
	struct expect e = { ID_P, my_pgid, my_sid, 0 };
	fails[ID_P] = run_steps(&e, a, my_sid, &checks[ID_P]);
	done[ID_P] = 1;
	for (int n = 0; n < NID - 1; n++) {
		if (read_all(rep[0], &r, sizeof(r)) != 1 || r.type != DONE || r.id <= ID_P || r.id >= NID || done[r.id]) {
			printf("FAIL bad or missing result record\n");
			return 1;
		}
		done[r.id] = 1;
		checks[r.id] = r.checks;
		fails[r.id] = r.failures;
	}
	/* All of them are alive now, waiting for the release. */
	int ga = count_proc(5, a), sc = count_proc(6, c), gc = count_proc(5, c);
	printf("group of A: leader A, members %d\n", ga);
	printf("session of C: leader C, members %d; group of C: leader C, members %d\n", sc, gc);
	if (ga != 3 || sc != 2 || gc != 2) {
		printf("FAIL group or session membership\n");
		rc = 1;
	}
	for (int i = 0; i < NID; i++) {
		printf("%s: %d checks, %d failures\n", names[i], checks[i], fails[i]);
		if (fails[i] || checks[i] != (i == ID_P ? 5 : 3) * steps)
			rc = 1;
	}

	close(rel[1]); /* the release */
	for (int n = 0; n < 2; n++) {
		if (read_all(rep[0], &r, sizeof(r)) != 1 || r.type != REAPED || (r.id != ID_A && r.id != ID_C) ||
		    got_reaped[r.id]) {
			printf("FAIL bad or missing reaped record\n");
			return 1;
		}
		got_reaped[r.id] = 1;
		reaped[r.id][0] = r.checks;
		reaped[r.id][1] = r.failures;
	}
	printf("A1: %s, A2: %s (reaped by A)\n", status_str(reaped[ID_A][0], b1, sizeof(b1)),
	       status_str(reaped[ID_A][1], b2, sizeof(b2)));
	printf("C1: %s (reaped by C)\n", status_str(reaped[ID_C][0], b1, sizeof(b1)));
	if (!WIFEXITED(reaped[ID_A][0]) || WEXITSTATUS(reaped[ID_A][0]) != 21 || !WIFEXITED(reaped[ID_A][1]) ||
	    WEXITSTATUS(reaped[ID_A][1]) != 22 || !WIFEXITED(reaped[ID_C][0]) || WEXITSTATUS(reaped[ID_C][0]) != 31)
		rc = 1;
	for (int i = 0; i < 2; i++) {
		pid_t k = i ? c : a;
		int st, want = i ? 30 : 20;
		while (waitpid(k, &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		printf("%s: %s (reaped by P)\n", i ? "C" : "A", status_str(st, b1, sizeof(b1)));
		if (!WIFEXITED(st) || WEXITSTATUS(st) != want)
			rc = 1;
	}
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	close(rep[0]);
	printf("mp_pgrp: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
