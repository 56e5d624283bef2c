/* mp_pidorder: the numbers new processes get.
 *
 * State exercised: the pid namespace's last pid (ns_last_pid). The kernel
 * gives each new process the lowest free number above the last one it
 * gave, so a job's children get ever higher numbers until they wrap at
 * pid_max: a number comes back only long after its process has gone. Here
 * the main process forks a short-lived child every step and checks that
 * its number is above the previous child's, and that no process has the
 * number of any child that has ended (kill with signal 0). A restore that
 * left its namespace's cursor at the start gave the next child a number
 * below (one of the ended children's).
 * Only the main process prints, and only counts.
 * Usage: mp_pidorder [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_MS 25
#define KEEP 64 /* ended children checked every step */

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

int main(int argc, char **argv)
{
	long steps = (long)(120 * app_scale(argc, argv));
	pid_t last = 0, ended[KEEP] = { 0 };
	int lower = 0, reused = 0, bad = 0, n = 0;

	if (steps < 5)
		steps = 5;
	printf("mp_pidorder: a child per step for %ld steps, each numbered above the last\n", steps);
	fflush(stdout);
	for (long s = 0; s < steps; s++) {
		pid_t k = fork();
		int st;
		if (k == 0)
			_exit(3);
		if (k < 0 || waitpid(k, &st, 0) != k || !WIFEXITED(st) || WEXITSTATUS(st) != 3) {
			bad++;
			continue;
		}
		if (k <= last && !lower++)
			printf("a child was numbered below the one before it\n");
		last = k;
		ended[n++ % KEEP] = k;
		for (int i = 0; i < KEEP && i < n; i++)
			if ((kill(ended[i], 0) == 0 || errno != ESRCH) && !reused++)
				printf("a process has the number of a child that ended\n");
		sleep_ms(STEP_MS);
	}
	printf("mp_pidorder: %d children, %d numbered lower, %d numbers taken again, %d failed\n", n, lower,
	       reused, bad);
	return lower || reused || bad ? 1 : 0;
}
