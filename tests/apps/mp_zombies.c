/* mp_zombies: children that die at once and stay zombies for the whole run.
 *
 * State exercised: six zombie children with different termination statuses
 * (normal exits with 0, 7 and 200, and deaths by SIGTERM, SIGKILL and SIGUSR1
 * that each child raises against itself with the default disposition; none
 * dumps core). The parent computes, paced, for the whole duration without
 * reaping; between steps it checks with waitid(WNOWAIT) that every child is
 * still an unreaped zombie with the same status. A restore must recreate the
 * zombies with their statuses (and the pending SIGCHLD does not matter: its
 * disposition is the default). At the end the parent reaps each child with
 * waitpid(pid) in a fixed order and prints each status.
 * Usage: mp_zombies [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCH 6

/* What child k does: exit with a status, or raise a signal. */
static const struct {
	int code; /* CLD_EXITED or CLD_KILLED */
	int val;
} fate[NCH] = {
	{ CLD_EXITED, 0 },   { CLD_KILLED, SIGTERM }, { CLD_EXITED, 7 },
	{ CLD_KILLED, SIGKILL }, { CLD_EXITED, 200 }, { CLD_KILLED, SIGUSR1 },
};

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

static uint64_t work(uint64_t x, long n)
{
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL + (x >> 29);
	return x;
}

static const char *signame(int s)
{
	switch (s) {
	case SIGTERM:
		return "SIGTERM";
	case SIGKILL:
		return "SIGKILL";
	case SIGUSR1:
		return "SIGUSR1";
	default:
		return "other";
	}
}

static void child(int k)
{
	sigset_t all;

	if (fate[k].code == CLD_EXITED)
		_exit(fate[k].val);
	signal(fate[k].val, SIG_DFL);
	sigemptyset(&all);
	sigaddset(&all, fate[k].val);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	raise(fate[k].val);
	_exit(99); /* not reached */
}

/* 1 when child pid is a zombie with the expected status (not reaped). */
static int zombie_ok(pid_t pid, int k)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		if (errno != EINTR)
			return 0;
	return si.si_pid == pid && si.si_code == fate[k].code && si.si_status == fate[k].val;
}

int main(int argc, char **argv)
{
	long steps = (long)(40 * app_scale(argc, argv));
	pid_t pid[NCH];
	uint64_t x = 1;
	int rc = 0;

	if (steps < 5)
		steps = 5;
	signal(SIGCHLD, SIG_DFL); /* SIG_IGN would reap them automatically */
	printf("mp_zombies: %d children die at once, %ld steps of work\n", NCH, steps);
	fflush(stdout);
	for (int k = 0; k < NCH; k++) {
		pid[k] = fork();
		if (pid[k] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[k] == 0)
			child(k);
	}
	/* Wait (without reaping) until all of them are zombies. */
	for (int k = 0; k < NCH; k++) {
		int tries = 0;
		while (!zombie_ok(pid[k], k)) {
			if (++tries > 5000) {
				printf("FAIL child %d did not die as expected\n", k);
				return 1;
			}
			sleep_ms(1);
		}
	}
	printf("all %d children are zombies\n", NCH);

	for (long s = 0; s < steps; s++) {
		x = work(x, 2000000);
		sleep_ms(80);
		for (int k = 0; k < NCH; k++)
			if (!zombie_ok(pid[k], k)) {
				printf("FAIL step %ld: child %d is no longer the same zombie\n", s, k);
				rc = 1;
			}
		if (rc)
			break;
		if ((s + 1) % 10 == 0)
			printf("step %ld: %d zombies intact\n", s + 1, NCH);
	}
	printf("work result %016llx\n", (unsigned long long)(rc ? 0 : x));

	/* Reap in a fixed order, not the order of death. */
	static const int order[NCH] = { 3, 0, 5, 1, 4, 2 };
	for (int i = 0; i < NCH; i++) {
		int k = order[i], st;
		pid_t r;
		while ((r = waitpid(pid[k], &st, WNOHANG)) < 0 && errno == EINTR)
			;
		if (r != pid[k]) {
			printf("FAIL child %d: not reapable (%d)\n", k, (int)r);
			rc = 1;
			continue;
		}
		if (WIFEXITED(st))
			printf("child %d: exited %d\n", k, WEXITSTATUS(st));
		else if (WIFSIGNALED(st))
			printf("child %d: killed by %s%s\n", k, signame(WTERMSIG(st)), WCOREDUMP(st) ? " (core)" : "");
		else
			printf("child %d: status %#x\n", k, st);
		if (fate[k].code == CLD_EXITED ? !WIFEXITED(st) || WEXITSTATUS(st) != fate[k].val
					       : !WIFSIGNALED(st) || WTERMSIG(st) != fate[k].val || WCOREDUMP(st)) {
			printf("FAIL child %d: unexpected status\n", k);
			rc = 1;
		}
	}
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL unexpected extra child\n");
		rc = 1;
	}
	printf("mp_zombies: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
