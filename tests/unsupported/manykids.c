/* manykids: a process with more children than a restore makes for one
 * process. The bound is 32768 (CK_RST_MAX_CHILDREN); the suite lowers it
 * with CKPT_TEST_MAX_CHILDREN to meet it with 520. The round must be
 * refused naming the process, and the job must go on untouched. (A build
 * that learnt of a limit only at the restore committed checkpoints it
 * could not restore.)
 * "manykids helper": the 520 children's parent Q is in a process group
 * whose leader has exited, so a restore has Q make a helper for the group
 * too; the refusal counts it apart. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 520

static int kids(void)
{
	int p[2], n = 0;
	char c;

	if (pipe(p) < 0)
		return 1;
	for (int i = 0; i < N; i++) {
		pid_t k = fork();
		if (k == 0) {
			close(p[1]);
			_exit(read(p[0], &c, 1) == 0 ? 0 : 1); /* until the parent closes the pipe */
		}
		if (k < 0)
			return 1;
	}
	close(p[0]);
	for (int i = 0; i < 60; i++) /* (a round over 521 processes takes seconds to park them) */
		usleep(100000);
	close(p[1]);
	for (int i = 0; i < N; i++) {
		int st;
		n += wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	printf("manykids: %d of %d children ended well\n", n, N);
	fflush(stdout); /* (Q ends with _exit) */
	return n == N ? 0 : 1;
}

/* Q joins the group of a child A that then exits; Q's children are born
 * in that group. */
static int kids_in_orphaned_group(void)
{
	int go[2], st = 0;
	pid_t q, a;
	char c;

	fflush(stdout);
	q = fork();
	if (q < 0)
		return 1;
	if (q > 0)
		return waitpid(q, &st, 0) == q && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	if (pipe(go) < 0)
		_exit(1);
	a = fork();
	if (a == 0) {
		close(go[1]);
		_exit(setpgid(0, 0) == 0 && read(go[0], &c, 1) == 0 ? 0 : 1);
	}
	close(go[0]);
	setpgid(a, a); /* (whichever of the two comes first) */
	if (a < 0 || setpgid(0, a) != 0)
		_exit(2);
	close(go[1]);
	if (waitpid(a, &st, 0) != a || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		_exit(3);
	_exit(kids());
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "helper"))
		return kids_in_orphaned_group();
	return kids();
}
