/* mp_sysvsem: System V semaphore sets come back with their ids, keys,
 * modes and values, and every process's SEM_UNDO adjustments with them:
 * a child's exit after a restore undoes exactly what it should.
 *
 * State exercised: a private set of three (values 5, 0, 100 set with
 * SETALL before any child exists) and a keyed set of one (mode 0640,
 * value 7). Child A takes 2 from S[0] and gives 3 to S[2] with SEM_UNDO,
 * then at each step takes and gives back 1 of S[2] with SEM_UNDO (its
 * adjustment changes and returns), and at the end blocks in a semop on
 * S[1] without SEM_UNDO. Child C takes 1 of the keyed set with SEM_UNDO,
 * runs itself again (exec: the kernel keeps the adjustment, and the
 * program must not find a variable of ckrun's in its environment), then
 * blocks in a semop on S[1] with SEM_UNDO. The parent takes 1 of the
 * keyed set with SEM_UNDO and gives it back at the end. Each step the
 * parent checks every value, the keyed set's mode and that its key names
 * the same id. At the end it gives S[1] 2 (each child takes one; a
 * child's semop interrupted by a round would fail with EINTR) and checks
 * the values after both children's exits: S[0] 5 and S[2] 100 (A's
 * adjustments undone), S[1] 1 (C's undone), the keyed set 7.
 * Usage: mp_sysvsem [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int fail(const char *what, long step)
{
	printf("FAIL %s at step %ld (%s)\n", what, step, strerror(errno));
	fflush(stdout);
	return 1;
}

static int op(int id, unsigned short num, short delta, short flags)
{
	struct sembuf b = {num, delta, flags};

	return semop(id, &b, 1);
}

static int val(int id, int num)
{
	return semctl(id, num, GETVAL);
}

/* A child: its steps, then the wait at the end. */
static int child_a(int s, long steps)
{
	struct timespec nap = {0, 50000000};

	if (op(s, 0, -2, SEM_UNDO) < 0 || op(s, 2, 3, SEM_UNDO) < 0)
		return fail("child A's first operations", 0);
	for (long i = 0; i < steps; i++) {
		if (op(s, 2, -1, SEM_UNDO) < 0 || op(s, 2, 1, SEM_UNDO) < 0)
			return fail("child A's step", i);
		nanosleep(&nap, NULL);
	}
	if (op(s, 1, -1, 0) < 0)
		return fail("child A's wait on S[1]", steps);
	return 0;
}

/* Child C takes 1 of the keyed set, then runs itself again (exec keeps
 * the adjustment) to wait on S[1]. */
static int child_c(int s, int k)
{
	char num[16];

	if (op(k, 0, -1, SEM_UNDO) < 0)
		return fail("child C's take of the keyed set", 0);
	snprintf(num, sizeof(num), "%d", s);
	execl("/proc/self/exe", "mp_sysvsem", "child-c", num, (char *)NULL);
	return fail("child C's exec", 0);
}

static int child_c_execd(int s)
{
	extern char **environ;

	for (char **e = environ; *e; e++)
		if (!strncmp(*e, "CKPT_SEMUNDO", 12))
			return fail("child C's environment (a variable it never set)", 0);
	if (op(s, 1, -1, SEM_UNDO) < 0)
		return fail("child C's wait on S[1] with SEM_UNDO", 0);
	return 0;
}

static int wait_ok(pid_t pid)
{
	int st;

	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc > 2 ? 1 : argc, argv)), i = 0;
	key_t key = (key_t)(0x5e3a0000 | (getpid() & 0xffff)); /* a bare run shares the host's namespace */
	int s, k, rc = 0;
	unsigned short init[3] = {5, 0, 100};
	union semun arg = {.array = init};
	struct semid_ds ds;
	pid_t a = -1, c = -1;

	if (argc > 2 && !strcmp(argv[1], "child-c"))
		return child_c_execd(atoi(argv[2]));
	s = semget(IPC_PRIVATE, 3, IPC_CREAT | 0600);
	k = semget(key, 1, IPC_CREAT | IPC_EXCL | 0600);
	if (s < 0 || k < 0)
		return fail("semget", 0);
	if (semctl(s, 0, SETALL, arg) < 0 || semctl(k, 0, SETVAL, (union semun){.val = 7}) < 0)
		rc = fail("the sets' first values", 0);
	arg.buf = &ds;
	if (!rc && (semctl(k, 0, IPC_STAT, arg) < 0 || (ds.sem_perm.mode = 0640, semctl(k, 0, IPC_SET, arg) < 0)))
		rc = fail("the keyed set's mode", 0);
	/* ckrun refuses a round where a set changed in the second an
	 * adjustment of it began (sem_ctime: a reset it cannot see otherwise) */
	if (!rc) {
		struct timespec now, nap = {0, 0};
		clock_gettime(CLOCK_REALTIME, &now);
		nap.tv_nsec = 1000000000L - now.tv_nsec + 20000000L;
		if (nap.tv_nsec >= 1000000000L) {
			nap.tv_sec = 1;
			nap.tv_nsec -= 1000000000L;
		}
		nanosleep(&nap, NULL);
	}
	fflush(stdout);
	if (!rc && (a = fork()) == 0)
		_exit(child_a(s, steps));
	if (!rc && (c = fork()) == 0)
		_exit(child_c(s, k));
	if (!rc && (a < 0 || c < 0))
		rc = fail("fork", 0);
	if (!rc && op(k, 0, -1, SEM_UNDO) < 0)
		rc = fail("the parent's take of the keyed set", 0);
	/* the children's first operations: at most 20 s on a loaded machine */
	for (int t = 0; !rc && t < 2000 && (val(s, 0) != 3 || val(s, 2) != 103 || val(k, 0) != 5); t++)
		usleep(10000);
	for (; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		int v2 = val(s, 2);

		if (val(s, 0) != 3 || val(s, 1) != 0 || (v2 != 103 && v2 != 102))
			rc = fail("the private set's values", i);
		else if (val(k, 0) != 5)
			rc = fail("the keyed set's value", i);
		else if (semget(key, 0, 0) != k)
			rc = fail("the key names the same set", i);
		else if (semctl(k, 0, IPC_STAT, arg) < 0 || (ds.sem_perm.mode & 0777) != 0640 || ds.sem_nsems != 1)
			rc = fail("the keyed set's mode or size", i);
		nanosleep(&nap, NULL);
	}
	if (!rc && op(k, 0, 1, SEM_UNDO) < 0)
		rc = fail("the parent's give back", i);
	if (a > 0 && c > 0 && op(s, 1, 2, 0) < 0) /* a failed run's children too */
		rc = rc ? rc : fail("giving S[1] 2", i);
	if (a > 0 && !wait_ok(a))
		rc = rc ? rc : fail("child A's end", i);
	if (c > 0 && !wait_ok(c))
		rc = rc ? rc : fail("child C's end", i);
	if (!rc && (val(s, 0) != 5 || val(s, 2) != 100))
		rc = fail("child A's adjustments undone at its exit", i);
	if (!rc && val(s, 1) != 1)
		rc = fail("child C's adjustment of S[1] undone at its exit", i);
	if (!rc && val(k, 0) != 7)
		rc = fail("the keyed set's value after every give back", i);
	semctl(s, 0, IPC_RMID);
	semctl(k, 0, IPC_RMID);
	if (!rc)
		printf("mp_sysvsem: %ld steps, values and every adjustment back\n", i);
	return rc;
}
