/* stoptstp: a child stopped by SIGTSTP whose stop its parent has not
 * waited for while a checkpoint is asked for. A restore stops a process
 * with SIGSTOP, so the parent's wait would then report SIGSTOP: the round
 * must be refused naming the child and the signal, and the job go on
 * untouched: the stop still reported once, with SIGTSTP. (The child leads
 * a process group of its own: a job-control stop of an orphaned group is
 * discarded by the kernel.) */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char state_of(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

int main(void)
{
	pid_t kid = fork();
	int st = 0, ok;

	if (kid < 0)
		return 1;
	if (kid == 0) {
		setpgid(0, 0);
		for (;;)
			pause();
	}
	setpgid(kid, kid);
	usleep(50000);
	kill(kid, SIGTSTP);
	for (int i = 0; i < 2000 && state_of(kid) != 'T'; i++)
		usleep(1000);
	for (int i = 0; i < 25; i++)
		usleep(100000);
	ok = state_of(kid) == 'T' && waitpid(kid, &st, WUNTRACED | WNOHANG) == kid && WIFSTOPPED(st) &&
	     WSTOPSIG(st) == SIGTSTP && waitpid(kid, &st, WUNTRACED | WNOHANG) == 0;
	kill(kid, SIGKILL);
	waitpid(kid, &st, 0);
	printf("stoptstp: %s\n", ok ? "stopped by SIGTSTP, reported once" : "FAIL");
	return !ok;
}
