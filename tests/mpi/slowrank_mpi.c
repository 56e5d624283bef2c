/* One rank far behind the others: rank 1 (or SLOW_RANK) computes (sleeps)
 * SLOW_MS before each of its allreduces while the others wait in theirs.
 * A cut asked meanwhile cannot hold within a shorter limit
 * (CKPT_MPI_CUT_MS): the checkpoint is refused, naming rank 1, and the job
 * goes on unchanged. With SLOW_RANK 0 the slow rank is the one that
 * prints: a cut asked while it sleeps holds once it has caught up, and it
 * prints a line meanwhile.
 * Usage: slowrank_mpi [STEPS] [SLOW_MS] [SLOW_RANK] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 6, ms = argc > 2 ? atoi(argv[2]) : 1500, rank, s;
	int slow = argc > 3 ? atoi(argv[3]) : 1;
	long long v, sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (s = 0; s < steps; s++) {
		if (rank == slow) {
			struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		v = (long long)(rank + 1) * (s + 1);
		MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (rank == 0) {
			printf("step %d sum %lld\n", s, sum);
			fflush(stdout);
		}
	}
	MPI_Finalize();
	return 0;
}
