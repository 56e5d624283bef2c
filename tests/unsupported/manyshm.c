/* manyshm [N]: more shared memory objects mapped without a descriptor (here
 * shared anonymous mappings, each an object of its own) than a restore
 * hands one process (1024): the round must be refused naming the limit,
 * and the job must go on untouched, its mappings still shared with its
 * child. (A build that learnt of the limit only at the restore committed
 * checkpoints it could not restore, from 97 objects on.) N (1100): how
 * many; tests/suite/31-nofile.sh maps 600 under a hard RLIMIT_NOFILE of
 * 1024, which a restore's descriptors would pass. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NMAX 1100

int main(int argc, char **argv)
{
	static volatile int *m[NMAX];
	int N = argc > 1 ? atoi(argv[1]) : NMAX;
	int ok = 0, st = 0;
	pid_t kid;

	if (N < 1 || N > NMAX)
		return 2;

	for (int i = 0; i < N; i++) {
		void *a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED)
			return 1;
		m[i] = a;
	}
	kid = fork();
	if (kid == 0) {
		for (int i = 0; i < 25; i++)
			usleep(100000);
		for (int i = 0; i < N; i++)
			*m[i] = i + 1; /* the parent sees these only where still shared */
		_exit(0);
	}
	if (kid < 0 || waitpid(kid, &st, 0) != kid)
		return 1;
	for (int i = 0; i < N; i++)
		ok += *m[i] == i + 1;
	printf("manyshm: %d of %d shared mappings shared with the child\n", ok, N);
	return ok == N ? 0 : 1;
}
