/* manyshm: more shared memory objects mapped without a descriptor (here
 * shared anonymous mappings, each an object of its own) than a restore
 * hands one process (1024): the round must be refused naming the limit,
 * and the job must go on untouched, its mappings still shared with its
 * child. (A build that learnt of the limit only at the restore committed
 * checkpoints it could not restore, from 97 objects on.) */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 1100

int main(void)
{
	static volatile int *m[N];
	int ok = 0, st = 0;
	pid_t kid;

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
