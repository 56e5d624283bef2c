/* mp_orphan_session: sessions whose members' parents have exited, and a
 * child left in the session its parent left.
 *
 * State exercised: two sessions, each with a member whose parent has gone
 * (so init holds it) while its session's leader has not:
 *   - L forks K, then makes a session (setsid): K stays in P's session and
 *     group under a parent in another session. L forks A, A forks M and
 *     exits; L reaps A. M is in L's session and group, its parent init,
 *     while L lives on with K its only child;
 *   - Z makes a session and forks B, B forks N and exits; Z reaps B and then
 *     exits itself: a zombie session leader, which P does not reap until the
 *     end, with N still in its session.
 * A restore cannot make M or N as init's children in those sessions
 * directly: only a process of a session can create one. Every process
 * checks at every step its session, its group and its parent; L also checks
 * that no child of its has ended (a helper a restore left unreaped would
 * show there);
 * P checks that Z is still a zombie with its status (waitid WNOWAIT) and the
 * sessions of M and N. At the end P counts the sessions' processes in
 * /proc, releases M, N, K and L (EOF on a pipe) and reaps L (which reaps
 * K first) and Z.
 * Only P prints, and only relative facts (no pids). M, N, K and L exit at
 * once when the release pipe ends early (the job was killed).
 * Usage: mp_orphan_session [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_MS 25

enum { ID_P, ID_L, ID_M, ID_N, ID_K, NID };
static const char *const names[NID] = { "P", "L", "M", "N", "K" };

enum { READY = 1, DONE = 2 };

struct rec {
	int32_t id, type;
	int32_t checks, failures; /* READY: the sender's pid in checks */
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

/* The release pipe ended before the steps did: the job was killed. */
static void exit_if_released(void)
{
	struct pollfd p = { rel_r, POLLIN, 0 };

	if (poll(&p, 1, 0) > 0)
		_exit(99);
}

struct expect {
	int id;
	pid_t sid, pgid, ppid;
};

static int run_steps(const struct expect *e, int *checks)
{
	int fail = 0;
	uint64_t x = (uint64_t)e->id;

	for (long s = 0; s < steps; s++) {
		exit_if_released();
		fail += getsid(0) != e->sid;
		fail += getpgid(0) != e->pgid;
		fail += getppid() != e->ppid;
		*checks += 3;
		if (e->id == ID_L) {
			/* K lives and A was reaped: nothing of its has ended */
			fail += waitpid(-1, NULL, WNOHANG) != 0;
			(*checks)++;
		}
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		sleep_ms(STEP_MS);
	}
	if (x == 0)
		fail++;
	return fail;
}

/* M or N: wait until the parent that made it has gone, then work. */
static void orphan(int id, pid_t sid, pid_t gone)
{
	struct expect e = { id, sid, sid, 0 };
	int checks = 0, fail;
	char c;

	for (int i = 0; getppid() == gone; i++) {
		if (i > 2000)
			_exit(97);
		sleep_ms(1);
	}
	e.ppid = getppid();
	send_rec(id, READY, (int)getpid(), 0);
	fail = run_steps(&e, &checks);
	send_rec(id, DONE, checks, fail);
	while (read(rel_r, &c, 1) < 0 && errno == EINTR)
		;
	_exit(10 + id);
}

/* A session leader that makes a member through a child that exits at once
 * (reaped here). Returns in the leader. */
static void make_session(int member_id)
{
	pid_t me, a, st = 0;
	int s;

	if (setsid() < 0)
		_exit(2);
	me = getpid();
	a = fork();
	if (a < 0)
		_exit(3);
	if (a == 0) {
		pid_t self = getpid(), m = fork();
		if (m == 0)
			orphan(member_id, me, self);
		_exit(m < 0 ? 4 : 0);
	}
	while ((st = waitpid(a, &s, 0)) < 0 && errno == EINTR)
		;
	if (st != a || !WIFEXITED(s) || WEXITSTATUS(s) != 0)
		_exit(5);
}

/* K: made by L before L's setsid, so in P's session and group. */
static void child_K(pid_t l_pid)
{
	struct expect e = { ID_K, getsid(0), getpgid(0), l_pid };
	int checks = 0, fail;
	char c;

	send_rec(ID_K, READY, (int)getpid(), 0);
	fail = run_steps(&e, &checks);
	send_rec(ID_K, DONE, checks, fail);
	while (read(rel_r, &c, 1) < 0 && errno == EINTR)
		;
	_exit(10 + ID_K);
}

static void leader_L(pid_t p_pid)
{
	int checks = 0, fail, st = -1;
	pid_t k = fork();
	char c;

	if (k < 0)
		_exit(6);
	if (k == 0)
		child_K(getppid());
	make_session(ID_M);
	struct expect e = { ID_L, getpid(), getpid(), p_pid };
	send_rec(ID_L, READY, (int)getpid(), 0);
	fail = run_steps(&e, &checks);
	send_rec(ID_L, DONE, checks, fail);
	while (read(rel_r, &c, 1) < 0 && errno == EINTR)
		;
	while (waitpid(k, &st, 0) < 0 && errno == EINTR)
		;
	_exit(WIFEXITED(st) && WEXITSTATUS(st) == 10 + ID_K ? 50 : 51);
}

static int count_session(pid_t sid, int *zombies)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	*zombies = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], buf[1024], *p, state;
		int sess;
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
		if (sscanf(p + 1, " %c %*d %*d %d", &state, &sess) != 2 || sess != sid)
			continue;
		n++;
		*zombies += state == 'Z';
	}
	closedir(d);
	return n;
}

/* Z is a zombie that exited 40, not reaped yet. */
static int zombie_ok(pid_t z)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)z, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return 0;
	return si.si_pid == z && si.si_code == CLD_EXITED && si.si_status == 40;
}

int main(int argc, char **argv)
{
	int rep[2], rel[2], rc = 0, checks[NID] = { 0 }, fails[NID] = { 0 }, done[NID] = { 0 };
	pid_t me = getpid(), pids[NID] = { 0 }, l, z;
	struct rec r;

	steps = (long)(130 * app_scale(argc, argv));
	if (steps < 5)
		steps = 5;
	if (pipe(rep) != 0 || pipe(rel) != 0)
		return 1;
	printf("mp_orphan_session: two sessions with an orphaned member, one led by a zombie, and a child in a session its parent left; %ld checked steps\n",
	       steps);
	fflush(stdout);
	rep_w = rep[1];
	rel_r = rel[0];
	l = fork();
	if (l == 0) {
		close(rep[0]);
		close(rel[1]);
		leader_L(me);
	}
	z = fork();
	if (z == 0) {
		close(rep[0]);
		close(rel[1]);
		make_session(ID_N);
		_exit(40);
	}
	if (l < 0 || z < 0) {
		printf("FAIL fork\n");
		return 1;
	}
	close(rep[1]);
	close(rel[0]);
	for (int n = 0; n < NID - 1; n++) {
		if (read_rec(rep[0], &r) || r.type != READY || r.id <= ID_P || r.id >= NID) {
			printf("FAIL no ready record\n");
			return 1;
		}
		pids[r.id] = r.checks;
	}
	/* Z has exited once N is orphaned; wait for its zombie */
	for (int i = 0; !zombie_ok(z); i++) {
		if (i > 2000) {
			printf("FAIL Z did not become a zombie\n");
			return 1;
		}
		sleep_ms(1);
	}
	for (long s = 0; s < steps; s++) {
		fails[ID_P] += !zombie_ok(z);
		fails[ID_P] += getsid(pids[ID_M]) != l;
		fails[ID_P] += getsid(pids[ID_N]) != z;
		fails[ID_P] += getsid(z) != z;
		fails[ID_P] += getsid(pids[ID_K]) != getsid(0) || getpgid(pids[ID_K]) != getpgid(0);
		checks[ID_P] += 5;
		sleep_ms(STEP_MS);
	}
	for (int n = 0; n < NID - 1; n++) {
		if (read_rec(rep[0], &r) || r.type != DONE || r.id <= ID_P || r.id >= NID || done[r.id]) {
			printf("FAIL bad or missing result record\n");
			return 1;
		}
		done[r.id] = 1;
		checks[r.id] = r.checks;
		fails[r.id] = r.failures;
	}
	int zl, zz, sl = count_session(l, &zl), sz = count_session(z, &zz);
	printf("session of L: %d processes, %d zombies\n", sl, zl);
	printf("session of Z: %d processes, %d zombies\n", sz, zz);
	if (sl != 2 || zl != 0 || sz != 2 || zz != 1) {
		printf("FAIL session membership\n");
		rc = 1;
	}
	for (int i = 0; i < NID; i++) {
		long want = (i == ID_P ? 5 : i == ID_L ? 4 : 3) * steps;
		printf("%s: %d checks, %d failures\n", names[i], checks[i], fails[i]);
		if (fails[i] || checks[i] != want)
			rc = 1;
	}
	close(rel[1]); /* the release */
	for (int i = 0; i < 2; i++) {
		pid_t k = i ? z : l;
		int st, want = i ? 40 : 50;
		while (waitpid(k, &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		printf("%s: %s %d (reaped by P)\n", i ? "Z" : "L", WIFEXITED(st) ? "exited" : "status",
		       WIFEXITED(st) ? WEXITSTATUS(st) : st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != want)
			rc = 1;
	}
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	close(rep[0]);
	printf("mp_orphan_session: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
