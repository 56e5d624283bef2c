/* sessionsplit: a process in a session that neither its parent nor the
 * session its parent was made in is: P forks Q, Q forks C, then Q starts a
 * session of its own (setsid), and so does P. C stays in the job's first
 * session under Q; a restore makes C in Q's session or in the one Q is made
 * in (P's), and neither is C's. The round must be refused naming C, and
 * the job must go on untouched. (A build that learnt of it only at the
 * restore committed checkpoints it could not restore.) */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static int release = -1; /* the main process's end of the pipe */

/* fork: the child runs fn and exits with its value */
static pid_t spawn(int (*fn)(int), int arg)
{
	pid_t k = fork();

	if (k == 0) {
		close(release);
		_exit(fn(arg));
	}
	return k;
}

static int reap(pid_t k, int want)
{
	int st = -1;

	if (waitpid(k, &st, 0) != k)
		return 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == want;
}

static int child_c(int go)
{
	char c;

	return read(go, &c, 1) == 0 ? 7 : 1; /* until the main process closes the pipe */
}

static int child_q(int go)
{
	pid_t c = spawn(child_c, go);

	if (c < 0 || setsid() < 0)
		return 2;
	return reap(c, 7) ? 8 : 3;
}

static int child_p(int go)
{
	pid_t q = spawn(child_q, go);

	if (q < 0)
		return 2;
	usleep(100000); /* Q has made C */
	if (setsid() < 0)
		return 2;
	return reap(q, 8) ? 9 : 3;
}

int main(void)
{
	int go[2], ok;
	pid_t p;

	if (pipe(go) < 0)
		return 1;
	release = go[1];
	p = spawn(child_p, go[0]);
	if (p < 0)
		return 1;
	close(go[0]);
	for (int i = 0; i < 40; i++)
		usleep(100000);
	close(go[1]);
	ok = reap(p, 9);
	printf("sessionsplit: the three processes in three sessions ended %s\n", ok ? "well" : "badly");
	return ok ? 0 : 1;
}
