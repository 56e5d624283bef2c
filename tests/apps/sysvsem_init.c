/* sysvsem_init: the usual way a System V semaphore set is used with
 * SEM_UNDO (the values set, then taken at once, in the same second)
 * checkpoints and comes back, the adjustments with it.
 *
 * State exercised: a private set of 3 set to {5, 10, 0} (SETALL); at once
 * the process takes 2 from semaphore 1 with SEM_UNDO, and a child adds 3
 * to semaphore 0 with SEM_UNDO, then waits on a pipe. Each step checks
 * both values (8, 8). At the end the child is let go: its exit takes its
 * 3 back (5), which a restore that lost its adjustment would not; then a
 * second child, forked after, takes 1 from semaphore 1 with SEM_UNDO and
 * exits (8, its own undone). A round refused for the set's change time in
 * the second the adjustments began (the previous rule) never committed.
 * Prints only deterministic lines; exits 1 after a FAIL line.
 * Usage: sysvsem_init [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int values(int id, int a, int b)
{
	return semctl(id, 0, GETVAL) == a && semctl(id, 1, GETVAL) == b;
}

int main(int argc, char **argv)
{
	int steps = (int)(30 * app_scale(argc, argv) + 0.5), bad = 0, p[2], st;
	unsigned short init[3] = {5, 10, 0};
	struct sembuf mine = {1, -2, SEM_UNDO}, kids = {0, 3, SEM_UNDO}, one = {1, -1, SEM_UNDO};
	struct timespec nap = {0, 100 * 1000000L};
	int id = semget(IPC_PRIVATE, 3, IPC_CREAT | 0600);
	pid_t kid;
	char b;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (id < 0 || semctl(id, 0, SETALL, (union semun){.array = init}) < 0 || semop(id, &mine, 1) < 0 || pipe(p) < 0)
		return 1;
	if ((kid = fork()) == 0)
		_exit(semop(id, &kids, 1) < 0 || read(p[0], &b, 1) != 1);
	for (int i = 0; i < 200 && !values(id, 8, 8); i++)
		nanosleep(&nap, NULL);
	for (int step = 0; step < steps && !bad; step++) {
		if (!values(id, 8, 8))
			printf("FAIL step %d: values %d %d, not 8 8\n", step, semctl(id, 0, GETVAL), semctl(id, 1, GETVAL)), bad = 1;
		nanosleep(&nap, NULL);
	}
	if (!bad && (write(p[1], "g", 1) != 1 || waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st)))
		printf("FAIL the child's end\n"), bad = 1;
	if (!bad && !values(id, 5, 8))
		printf("FAIL the child's exit undid %d, not 3\n", 8 - semctl(id, 0, GETVAL)), bad = 1;
	if (!bad && ((kid = fork()) == 0))
		_exit(semop(id, &one, 1) < 0);
	if (!bad && (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st) || !values(id, 5, 8)))
		printf("FAIL a second child's adjustment, undone at its exit\n"), bad = 1;
	semctl(id, 0, IPC_RMID);
	printf("%s\n", bad ? "FAIL sysvsem_init" : "sysvsem_init: values and adjustments as bare");
	return bad;
}
