/* nolibckpt: a process of the job that runs without libckpt and never
 * can load it, while a checkpoint is asked for: the round must be refused
 * naming it and why, once the 3 s a short-lived helper gets to end are
 * over (the job running meanwhile), and the job must go on untouched.
 *   noenv:  the child is this program exec'd with an empty environment
 *           (no LD_PRELOAD);
 *   static: the child is the static build of this program (argv[2]),
 *           with the job's environment. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "noenv";
	int st = 0;
	pid_t kid;

	if (!strcmp(mode, "child")) {
		prctl(PR_SET_NAME, "nolibckpt-child", 0, 0, 0); /* for the test to see it run */
		for (int i = 0; i < 60; i++) /* past the 3 s a helper gets to end */
			usleep(100000);
		printf("nolibckpt: the child ran 60 rounds\n");
		return 0;
	}
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		char *child[] = {argv[0], "child", NULL}, *empty[] = {NULL};
		if (!strcmp(mode, "static") && argc > 2) {
			child[0] = argv[2];
			execv(argv[2], child);
		} else {
			syscall(SYS_execve, "/proc/self/exe", child, empty); /* libc's execve would keep libckpt */
		}
		_exit(127);
	}
	waitpid(kid, &st, 0);
	printf("nolibckpt %s: child status %d\n", mode, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
