/* mp_exec: processes that exec, by fork, vfork and posix_spawn.
 *
 * State exercised: exec in child processes. Two forked children each run a
 * chain of three execs of this same binary (stage 1 -> 2 -> 3; the second
 * chain by execveat) in the same process, passing an accumulator through argv and keeping their pid; an
 * O_CLOEXEC descriptor must be gone after the first exec while the result
 * pipe (no O_CLOEXEC) stays. A third child is started with vfork() + execve
 * with its own environment, a fourth with posix_spawn (a dup2 file action and
 * an environment). Each child does paced work, so a checkpoint lands in any
 * stage of any of them (a process whose executable, memory and arguments
 * were replaced since the job started), then reports through its own pipe
 * and exits with a known status. The parent checks everything against its
 * own arithmetic and prints the results in a fixed order.
 *
 * Modes (argv[1]): none or a number: the main mode (scale);
 * "stage K CHAIN STEPS ACC FD PID CLOFD" and "leaf ID STEPS FD TAG": children.
 * Usage: mp_exec [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCH 4
#define SPAWN_FD 9

/* Result flags. */
#define F_SAMEPID 1
#define F_CLOEXEC 2
#define F_ENV 4
#define F_ARGV0 8

struct result {
	uint32_t id, stages;
	uint64_t acc;
	int64_t pid;
	uint32_t flags, pad;
};

extern char **environ;

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

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

/* The paced work of one stage (or one leaf, stage 0). */
static uint64_t stage_work(uint64_t acc, int stage, int id, long steps, int pace)
{
	for (long s = 0; s < steps; s++) {
		for (int i = 0; i < 2000; i++)
			acc = mix(acc + (uint64_t)s * 1000 + (uint64_t)stage * 77 + ((uint64_t)id << 20) + (uint64_t)i);
		if (pace)
			sleep_ms(10);
	}
	return acc;
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

static int self_path(char *buf, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/* stage K CHAIN STEPS ACC FD PID CLOFD FLAGS STAGESMASK */
static int do_stage(int argc, char **argv)
{
	char self[PATH_MAX], a[9][32];
	int stage, chain, fd, clofd;
	long steps;
	uint64_t acc;
	long long pid;
	uint32_t mask, flags;

	if (argc != 11)
		return 2;
	stage = atoi(argv[2]);
	chain = atoi(argv[3]);
	steps = atol(argv[4]);
	acc = strtoull(argv[5], NULL, 16);
	fd = atoi(argv[6]);
	pid = atoll(argv[7]);
	clofd = atoi(argv[8]);
	flags = (uint32_t)strtoul(argv[9], NULL, 10);
	mask = (uint32_t)strtoul(argv[10], NULL, 10);

	/* Checks after this exec. */
	if (getpid() != (pid_t)pid)
		flags &= ~(uint32_t)F_SAMEPID;
	if (fcntl(clofd, F_GETFD) != -1 || errno != EBADF)
		flags &= ~(uint32_t)F_CLOEXEC;
	if (fcntl(fd, F_GETFD) != 0) /* open, without FD_CLOEXEC */
		_exit(3);
	mask |= 1u << stage;

	acc = stage_work(acc, stage, chain, steps, 1);
	if (stage < 3) {
		if (self_path(self, sizeof(self)) != 0)
			_exit(4);
		snprintf(a[0], sizeof(a[0]), "%d", stage + 1);
		snprintf(a[1], sizeof(a[1]), "%d", chain);
		snprintf(a[2], sizeof(a[2]), "%ld", steps);
		snprintf(a[3], sizeof(a[3]), "%016llx", (unsigned long long)acc);
		snprintf(a[4], sizeof(a[4]), "%d", fd);
		snprintf(a[5], sizeof(a[5]), "%lld", pid);
		snprintf(a[6], sizeof(a[6]), "%d", clofd);
		snprintf(a[7], sizeof(a[7]), "%u", flags);
		snprintf(a[8], sizeof(a[8]), "%u", mask);
		char *nargv[] = { self, "stage", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], NULL };
		/* chain 1 through execveat, which the C library does not route
		 * through execve */
		if (chain == 1)
			execveat(AT_FDCWD, self, nargv, environ, 0);
		else
			execv(self, nargv);
		_exit(5);
	}
	struct result r = { (uint32_t)chain, mask, acc, (int64_t)getpid(), flags, 0 };
	if (write_all(fd, &r, sizeof(r)))
		_exit(6);
	_exit(30 + chain);
}

/* leaf ID STEPS FD TAG */
static int do_leaf(int argc, char **argv)
{
	const char *tag, *env;
	int id, fd;
	long steps;
	uint32_t flags = F_SAMEPID | F_CLOEXEC;

	if (argc < 6)
		return 2;
	id = atoi(argv[2]);
	steps = atol(argv[3]);
	fd = atoi(argv[4]);
	tag = argv[5];
	env = getenv("MP_EXEC_TAG");
	if (env && strcmp(env, tag) == 0)
		flags |= F_ENV;
	if (strcmp(argv[0], tag) == 0)
		flags |= F_ARGV0;
	struct result r = { (uint32_t)id, 1, stage_work(7, 0, id, steps, 1), (int64_t)getpid(), flags, 0 };
	if (write_all(fd, &r, sizeof(r)))
		_exit(6);
	_exit(40 + id);
}

/* Kept apart so that nothing in main can be clobbered by vfork. */
static pid_t start_vfork(const char *path, char *const argv[], char *const envp[])
{
	pid_t p = vfork();
	if (p == 0) {
		execve(path, argv, envp);
		_exit(127);
	}
	return p;
}

static uint64_t expect_acc(int id, long steps)
{
	if (id >= 2)
		return stage_work(7, 0, id, steps, 0);
	uint64_t acc = 1000 + (uint64_t)id;
	for (int stage = 1; stage <= 3; stage++)
		acc = stage_work(acc, stage, id, steps, 0);
	return acc;
}

int main(int argc, char **argv)
{
	char self[PATH_MAX], sid[16], ssteps[32], sfd[16], sacc[32], spid[32], sclo[16], sflags[16];
	long steps, leaf_steps;
	int rfd[NCH], rc = 0, clofd;
	pid_t pid[NCH];

	if (argc > 1 && strcmp(argv[1], "stage") == 0)
		return do_stage(argc, argv);
	if (argc > 1 && strcmp(argv[1], "leaf") == 0)
		return do_leaf(argc, argv);

	steps = (long)(110 * app_scale(argc, argv));
	if (steps < 3)
		steps = 3;
	leaf_steps = 3 * steps;
	if (self_path(self, sizeof(self)) != 0) {
		printf("FAIL readlink /proc/self/exe\n");
		return 1;
	}
	clofd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (clofd < 0)
		return 1;
	printf("mp_exec: 2 chains of 3 execs (%ld steps each), a vfork child, a posix_spawn child\n", steps);
	fflush(stdout);

	for (int k = 0; k < NCH; k++) {
		int p[2], wfd;
		if (pipe2(p, O_CLOEXEC) != 0) {
			printf("FAIL pipe\n");
			return 1;
		}
		rfd[k] = p[0];
		snprintf(sid, sizeof(sid), "%d", k);
		snprintf(ssteps, sizeof(ssteps), "%ld", k < 2 ? steps : leaf_steps);
		if (k < 2) {
			pid[k] = fork();
			if (pid[k] == 0) {
				wfd = dup(p[1]); /* without O_CLOEXEC */
				snprintf(sfd, sizeof(sfd), "%d", wfd);
				snprintf(sacc, sizeof(sacc), "%016llx", 1000ULL + (unsigned long long)k);
				snprintf(spid, sizeof(spid), "%lld", (long long)getpid());
				snprintf(sclo, sizeof(sclo), "%d", clofd);
				snprintf(sflags, sizeof(sflags), "%d", F_SAMEPID | F_CLOEXEC);
				char *nargv[] = { self, "stage", "1", sid, ssteps, sacc, sfd, spid, sclo, sflags, "0", NULL };
				execv(self, nargv);
				_exit(126);
			}
		} else if (k == 2) {
			wfd = dup(p[1]);
			snprintf(sfd, sizeof(sfd), "%d", wfd);
			char *nargv[] = { "vfork", "leaf", sid, ssteps, sfd, "vfork", NULL };
			char *nenv[] = { "MP_EXEC_TAG=vfork", "LC_ALL=C", NULL };
			pid[k] = start_vfork(self, nargv, nenv);
			close(wfd);
		} else {
			posix_spawn_file_actions_t fa;
			snprintf(sfd, sizeof(sfd), "%d", SPAWN_FD);
			char *nargv[] = { "spawn", "leaf", sid, ssteps, sfd, "spawn", NULL };
			char *nenv[] = { "MP_EXEC_TAG=spawn", NULL };
			posix_spawn_file_actions_init(&fa);
			posix_spawn_file_actions_adddup2(&fa, p[1], SPAWN_FD);
			int e = posix_spawn(&pid[k], self, &fa, NULL, nargv, nenv);
			posix_spawn_file_actions_destroy(&fa);
			if (e != 0) {
				printf("FAIL posix_spawn: %s\n", strerror(e));
				return 1;
			}
		}
		if (pid[k] < 0) {
			printf("FAIL starting child %d\n", k);
			return 1;
		}
		close(p[1]);
	}

	static const char *const what[NCH] = { "chain 0", "chain 1", "vfork child", "spawn child" };
	for (int k = 0; k < NCH; k++) {
		struct result r, extra;
		int st, want_st = k < 2 ? 30 + k : 40 + k;
		uint32_t want_flags = k < 2 ? F_SAMEPID | F_CLOEXEC : F_SAMEPID | F_CLOEXEC | F_ENV | F_ARGV0;
		uint32_t want_stages = k < 2 ? 0xe : 1;

		if (read_all(rfd[k], &r, sizeof(r)) != 1) {
			printf("FAIL %s: no result\n", what[k]);
			rc = 1;
			memset(&r, 0, sizeof(r));
		} else if (read_all(rfd[k], &extra, sizeof(extra)) != 0) {
			printf("FAIL %s: extra data\n", what[k]);
			rc = 1;
		}
		close(rfd[k]);
		while (waitpid(pid[k], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		uint64_t want = expect_acc(k, k < 2 ? steps : leaf_steps);
		if (k < 2)
			printf("%s: stages %s, acc %016llx, same pid %s, O_CLOEXEC fd closed %s", what[k],
			       r.stages == 0xe ? "1 2 3" : "INCOMPLETE", (unsigned long long)r.acc,
			       r.flags & F_SAMEPID ? "yes" : "no", r.flags & F_CLOEXEC ? "yes" : "no");
		else
			printf("%s: acc %016llx, environment %s, argv[0] %s", what[k], (unsigned long long)r.acc,
			       r.flags & F_ENV ? "ok" : "WRONG", r.flags & F_ARGV0 ? "ok" : "WRONG");
		if (WIFEXITED(st))
			printf(", exited %d\n", WEXITSTATUS(st));
		else
			printf(", status %#x\n", st);
		if (r.id != (uint32_t)k || r.stages != want_stages || r.acc != want || r.flags != want_flags ||
		    r.pid != (int64_t)pid[k] || !WIFEXITED(st) || WEXITSTATUS(st) != want_st) {
			printf("FAIL %s: wrong result (acc %016llx expected)\n", what[k], (unsigned long long)want);
			rc = 1;
		}
	}
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	close(clofd);
	printf("mp_exec: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
