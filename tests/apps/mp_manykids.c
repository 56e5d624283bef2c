/* mp_manykids: one process with 600 children.
 *
 * State exercised: a parent whose children are more than one message of
 * the restore's tree holds (500 each): a restore must make them all, each
 * under its saved pid and as this process's child. Each child waits on a
 * release pipe; at every step the parent checks that each of its children
 * still exists (kill with signal 0) and that none has ended (waitpid
 * WNOHANG). At the end the parent releases them (EOF on the pipe); each
 * child then checks that its parent is still the same process and sends
 * its index on a report pipe, and exits with a status made from its
 * index. The parent reaps each by its pid and checks that pid's index and
 * status, and that the reports name every child once.
 * Only the parent prints. A child exits at once when the release pipe ends
 * early (the job was killed).
 * Usage: mp_manykids [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
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

#define NKIDS 600
#define STEP_MS 25

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

static void kid(int i, int rel_r, int rep_w, pid_t parent)
{
	int32_t rec[2] = { i, 0 };
	char c;
	ssize_t n;

	while ((n = read(rel_r, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 0)
		_exit(99);
	rec[1] = getppid() == parent;
	if (write(rep_w, rec, sizeof(rec)) != (ssize_t)sizeof(rec)) /* (atomic: under PIPE_BUF) */
		_exit(98);
	_exit(1 + i % 200);
}

int main(int argc, char **argv)
{
	static pid_t pids[NKIDS];
	static uint8_t seen[NKIDS];
	int rel[2], rep[2], missing = 0, ended = 0, badst = 0, badpar = 0, reports = 0, dup = 0;
	long steps = (long)(120 * app_scale(argc, argv));
	uint64_t x = 1;
	int32_t rec[2];

	if (steps < 5)
		steps = 5;
	if (pipe(rel) != 0 || pipe(rep) != 0)
		return 1;
	printf("mp_manykids: one process with %d children, checked for %ld steps\n", NKIDS, steps);
	fflush(stdout);
	for (int i = 0; i < NKIDS; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			return 2;
		if (pids[i] == 0) {
			close(rel[1]);
			close(rep[0]);
			kid(i, rel[0], rep[1], getppid());
		}
	}
	close(rel[0]);
	close(rep[1]);
	for (long s = 0; s < steps; s++) {
		for (int i = 0; i < NKIDS; i++)
			missing += kill(pids[i], 0) != 0;
		ended += waitpid(-1, NULL, WNOHANG) != 0;
		for (int i = 0; i < 200000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		if (s % 40 == 39) {
			printf("step %ld: %d children missing, %d ended\n", s + 1, missing, ended);
			fflush(stdout);
		}
		sleep_ms(STEP_MS);
	}
	close(rel[1]);
	for (int i = 0; i < NKIDS; i++) {
		int st = 0;
		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 1 + i % 200)
			badst++;
	}
	while (read(rep[0], rec, sizeof(rec)) == (ssize_t)sizeof(rec)) {
		if (rec[0] < 0 || rec[0] >= NKIDS || seen[rec[0]]) {
			dup++;
			continue;
		}
		seen[rec[0]] = 1;
		reports++;
		badpar += rec[1] != 1;
	}
	printf("mp_manykids: %d of %d children reported, %d with another parent, %d with a wrong status, "
	       "%d reports doubled, work %s\n",
	       reports, NKIDS, badpar, badst, dup, x ? "done" : "lost");
	return reports == NKIDS && !badpar && !badst && !dup && !missing && !ended ? 0 : 1;
}
