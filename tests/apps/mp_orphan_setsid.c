/* mp_orphan_setsid: a child left in a session whose leader has exited by a
 * parent that made a session of its own and whose own parent has exited.
 *
 * State exercised, twice:
 *   - P forks Q; Q makes a session (setsid) and forks R; R forks K and
 *     then makes a session of its own; Q exits and P reaps it. So R leads
 *     its own session, its parent init; K is in Q's session (whose leader
 *     is gone) and group, its parent R, which is in another session;
 *   - the same with the session's leader L alive: L's child A makes R2
 *     (which makes K2 and its own session) and exits; L reaps A.
 * A restore must make R in Q's session (only a process of a session can
 * create one), let R make K there, and only then let R start its own. At
 * every step K, R, K2, R2 and L check their session, group and parent,
 * that no SIGCHLD came, K, K2 and L that they have no child, R and R2
 * that their child lives (a restore's helper left unreaped would show);
 * P checks the sessions. At the end P counts the sessions' processes in
 * /proc (a helper left behind would be one more) and releases them all
 * (EOF on a pipe); R and R2 reap K and K2, P reaps L.
 * Only P prints, and only relative facts (no pids). The others exit at once
 * when the release pipe ends early (the job was killed).
 * Usage: mp_orphan_setsid [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
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

/* shape 1 (its session's leader Q gone): R, K; shape 2 (leader L stays): R2, K2 */
enum { ID_R, ID_K, ID_R2, ID_K2, ID_L, NID };
static const char *const names[NID] = { "R", "K", "R2", "K2", "L" };
enum { READY = 1, DONE = 2 };

struct rec {
	int32_t id, type;
	int32_t checks, failures; /* READY: the sender's pid in checks */
};

static int rep_w = -1, rel_r = -1, rep_r = -1, rel_w = -1; /* the last two P's only */
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

/* R or K: checks every step, then waits for the release. */
static void run(int id, pid_t sid, pid_t pgid, pid_t ppid_gone, pid_t kid, pid_t kid_sid)
{
	struct sigaction sa;
	int checks = 0, fail = 0;
	pid_t ppid;
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
		fail += getsid(0) != sid;
		fail += getpgid(0) != pgid;
		fail += getppid() != ppid;
		fail += sigchld != 0;
		if (kid) /* K lives: nothing of R's has ended */
			fail += waitpid(-1, NULL, WNOHANG) != 0 || getsid(kid) != kid_sid;
		else
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
	if (kid) {
		int st = 0;
		while (waitpid(kid, &st, 0) < 0 && errno == EINTR)
			;
		_exit(WIFEXITED(st) && WEXITSTATUS(st) == 10 + id + 1 ? 10 + id : 3);
	}
	_exit(10 + id);
}

static int count_session(pid_t sid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], buf[1024], *p;
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
		if (sscanf(p + 1, " %*c %*d %*d %d", &sess) == 1 && sess == sid)
			n++;
	}
	closedir(d);
	return n;
}

/* R: forks K (left in this session), makes a session of its own, lets its
 * parent go (GO), then works. */
static void shape_R(int id, pid_t sq, pid_t parent, int go)
{
	pid_t k, self = getpid();
	char c = 0;

	k = fork();
	if (k == 0) {
		close(go);
		run(id + 1, sq, sq, 0, 0, 0);
	}
	if (k < 0 || setsid() != self)
		_exit(4);
	if (write(go, &c, 1) != 1)
		_exit(5);
	close(go);
	run(id, self, self, parent, k, sq);
}

/* Q or L: a session; R made by Q itself (Q then exits), or by a child A of
 * L's that exits (L stays, reaps A and works). Returns the leader's pid in
 * the caller. */
static pid_t shape(int keep_leader)
{
	pid_t q = fork();

	if (q != 0)
		return q;
	close(rep_r);
	close(rel_w);
	int go[2], st = 0;
	pid_t sq = setsid(), a;
	char c;

	if (sq < 0 || pipe(go) != 0)
		_exit(2);
	a = fork();
	if (a == 0) {
		if (keep_leader) { /* A: makes R and goes */
			pid_t self = getpid(), r = fork();
			if (r == 0) {
				close(go[0]);
				shape_R(ID_R2, sq, self, go[1]);
			}
			close(go[1]);
			_exit(r < 0 || read(go[0], &c, 1) != 1 ? 3 : 0);
		}
		close(go[0]);
		shape_R(ID_R, sq, sq, go[1]);
	}
	close(go[1]);
	if (a < 0)
		_exit(3);
	if (!keep_leader)
		_exit(read(go[0], &c, 1) != 1 ? 3 : 0);
	while (waitpid(a, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		_exit(6);
	close(go[0]);
	run(ID_L, sq, sq, 0, 0, 0);
	return 0;
}

int main(int argc, char **argv)
{
	int rep[2], rel[2], rc = 0, st, checks[NID] = { 0 }, fails[NID] = { 0 }, pchecks = 0, pfails = 0;
	pid_t q, l, pids[NID] = { 0 };
	struct rec r;

	steps = (long)(130 * app_scale(argc, argv));
	if (steps < 5)
		steps = 5;
	if (pipe(rep) != 0 || pipe(rel) != 0)
		return 1;
	printf("mp_orphan_setsid: children left in a session by parents that made their own and whose parents "
	       "exited, the session's leader gone or alive; %ld checked steps\n",
	       steps);
	fflush(stdout);
	rep_w = rep[1];
	rel_r = rel[0];
	rep_r = rep[0];
	rel_w = rel[1];
	q = shape(0);
	l = shape(1);
	if (q < 0 || l < 0 || waitpid(q, &st, 0) != q || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL Q\n");
		return 1;
	}
	close(rep[1]);
	close(rel[0]);
	for (int n = 0; n < NID; n++) {
		if (read_rec(rep[0], &r) || r.type != READY || r.id < 0 || r.id >= NID || pids[r.id]) {
			printf("FAIL no ready record\n");
			return 1;
		}
		pids[r.id] = r.checks;
	}
	for (long s = 0; s < steps; s++) {
		pfails += getsid(pids[ID_K]) != q || getpgid(pids[ID_K]) != q;
		pfails += getsid(pids[ID_R]) != pids[ID_R];
		pfails += getsid(pids[ID_K2]) != l || getpgid(pids[ID_K2]) != l;
		pfails += getsid(pids[ID_R2]) != pids[ID_R2];
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
	int nq = count_session(q), nr = count_session(pids[ID_R]), nl = count_session(l), nr2 = count_session(pids[ID_R2]);
	printf("session of Q: %d processes; of R: %d; of L: %d; of R2: %d\n", nq, nr, nl, nr2);
	if (nq != 1 || nr != 1 || nl != 2 || nr2 != 1) {
		printf("FAIL session membership\n");
		rc = 1;
	}
	printf("P: %d checks, %d failures\n", pchecks, pfails);
	rc |= pfails || pchecks != 4 * steps;
	for (int i = 0; i < NID; i++) {
		printf("%s: %d checks, %d failures\n", names[i], checks[i], fails[i]);
		if (fails[i] || checks[i] != 5 * steps)
			rc = 1;
	}
	close(rel[1]); /* the release: R and R2 reap K and K2 and end (init reaps them) */
	while (waitpid(l, &st, 0) < 0)
		if (errno != EINTR) {
			printf("FAIL waitpid\n");
			return 1;
		}
	printf("L: %s %d (reaped by P)\n", WIFEXITED(st) ? "exited" : "status", WIFEXITED(st) ? WEXITSTATUS(st) : st);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 10 + ID_L)
		rc = 1;
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	close(rep[0]);
	printf("mp_orphan_setsid: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
