/* manykids: a process with more children than a restore makes for one
 * process (500: they go to its restorer in one message): the round must be
 * refused naming it, and the job must go on untouched. (A build that
 * learnt of the limit only at the restore committed checkpoints it could
 * not restore.) */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 520

int main(void)
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
	return n == N ? 0 : 1;
}
