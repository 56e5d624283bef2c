/* sysvsem: a child holds a SEM_UNDO adjustment of a System V semaphore,
 * and the parent then sets the semaphore's value (SETVAL), which the kernel
 * makes clear every process's adjustment of it. libckpt's account cannot
 * tell what is left of the child's: every round must be refused naming
 * it, and the job must go on (the value stays the parent's after the
 * child's exit: nothing left to undo). With "gone", a second child sets
 * the value, in the second after the first child's adjustment began, and
 * exits: its account is gone by the cut, and only the set's change time
 * tells (to the second: one in the same second is not seen). */
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int setval(int id, int v, int by_child)
{
	pid_t k;
	int st;

	if (!by_child)
		return semctl(id, 0, SETVAL, v);
	if ((k = fork()) == 0)
		_exit(semctl(id, 0, SETVAL, v) < 0);
	return k > 0 && waitpid(k, &st, 0) == k && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

int main(int argc, char **argv)
{
	int gone = argc > 1 && !strcmp(argv[1], "gone");
	int id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600), ready[2], go[2], st;
	struct sembuf take = {0, -1, SEM_UNDO};
	char b = 0;
	pid_t kid;

	if (id < 0 || semctl(id, 0, SETVAL, 1) < 0 || pipe(ready) < 0 || pipe(go) < 0)
		return 1;
	if ((kid = fork()) == 0) {
		if (semop(id, &take, 1) < 0 || write(ready[1], "r", 1) != 1)
			_exit(1);
		_exit(read(go[0], &b, 1) == 1 ? 0 : 1);
	}
	if (kid < 0 || read(ready[0], &b, 1) != 1)
		return 1;
	for (time_t t0 = time(NULL); gone && time(NULL) <= t0;)
		usleep(10000);
	if (setval(id, 5, gone) < 0)
		return 1;
	for (int i = 0; i < 25; i++) {
		struct sembuf up = {0, 1, 0}, down = {0, -1, 0};
		if (semop(id, &up, 1) < 0 || semop(id, &down, 1) < 0)
			return 1;
		usleep(100000);
	}
	if (write(go[1], "g", 1) != 1 || waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	printf("sysvsem: 25 rounds, value %d after the child's exit\n", semctl(id, 0, GETVAL));
	semctl(id, 0, IPC_RMID);
	return 0;
}
