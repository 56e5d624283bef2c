/* subreaper_cycle: a child subreaper that adopted a process from a session
 * its own child leads. X forks P and exits (P's parent is init); P starts a
 * session, becomes a child subreaper (PR_SET_CHILD_SUBREAPER) and forks L;
 * L starts a session and forks B, B forks K and exits: K is P's now, in
 * L's session. A restore would have P made in K's session, by a helper L
 * makes, while L is P's own child: no order makes them. The round must be
 * refused naming it, and the job must go on untouched. (A build that
 * planned it so committed a checkpoint whose restore waited for ever.) */
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int go_r = -1, go_w = -1; /* released when the main process closes go_w */

static void wait_release(void)
{
	char c;

	while (read(go_r, &c, 1) > 0)
		;
}

static int reap(pid_t k)
{
	int st = -1;

	return waitpid(k, &st, 0) == k && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
	int go[2];
	pid_t x;

	if (pipe(go) < 0)
		return 1;
	go_r = go[0];
	go_w = go[1];
	x = fork();
	if (x == 0) {
		pid_t p;
		close(go_w); /* the main process's alone: its close releases them all */
		p = fork();
		if (p == 0) {
			pid_t l;
			if (setsid() < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
				_exit(2);
			l = fork();
			if (l == 0) {
				pid_t b;
				if (setsid() < 0)
					_exit(2);
				b = fork();
				if (b == 0) {
					if (fork() == 0) { /* K */
						wait_release();
						_exit(7);
					}
					_exit(0);
				}
				if (reap(b) != 0)
					_exit(3);
				wait_release();
				_exit(8);
			}
			usleep(300000); /* K is P's once B has gone */
			if (reap(l) != 8 || wait(NULL) < 0) /* L, then K */
				_exit(4);
			_exit(0);
		}
		_exit(p < 0 ? 1 : 0);
	}
	if (x < 0 || reap(x) != 0)
		return 1;
	close(go_r);
	for (int i = 0; i < 40; i++)
		usleep(100000);
	close(go_w);
	usleep(300000);
	printf("subreaper_cycle: done\n");
	return 0;
}
