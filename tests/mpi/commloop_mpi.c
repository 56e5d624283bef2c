/* Communicators made and freed in a loop, unmodified MPI: every step dups
 * MPI_COMM_WORLD, splits the duplicate by parity, frees the duplicate (the
 * split outlives its parent) and reduces on the split; one split in five
 * is kept for five steps and used then, before it is freed; ranks 2 and up
 * get MPI_COMM_NULL from a split of the world every third step (color
 * MPI_UNDEFINED) that ranks 0 and 1 use and free. About 4.7 creations and
 * frees a step: a restart replays the log of communicators, which a checkpoint
 * of a run of 1000 steps would pass (4096 entries) unless cuts compact it.
 * Rank 0 prints a running checksum (exact integers) every 25 steps.
 * Usage: commloop_mpi [STEPS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define KEEP 5

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 300, rank, size, s;
	long long sum = 0, v, r;
	MPI_Comm kept[KEEP], dup, half, pair;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int k = 0; k < KEEP; k++)
		kept[k] = MPI_COMM_NULL;
	for (s = 0; s < steps; s++) {
		struct timespec ts = {0, 300000L * (1 + (rank + s) % 3)};

		nanosleep(&ts, NULL);
		MPI_Comm_dup(MPI_COMM_WORLD, &dup);
		MPI_Comm_split(dup, rank % 2, rank, &half);
		MPI_Comm_free(&dup);
		v = (long long)(rank + 1) * (s + 7);
		MPI_Allreduce(&v, &r, 1, MPI_LONG_LONG, MPI_SUM, half);
		sum = (sum * 31 + r) % 1000000007;
		if (kept[s % KEEP] != MPI_COMM_NULL) { /* kept five steps ago */
			MPI_Allreduce(&sum, &r, 1, MPI_LONG_LONG, MPI_MAX, kept[s % KEEP]);
			sum = (sum + r) % 1000000007;
			MPI_Comm_free(&kept[s % KEEP]);
		}
		if (s % 5 == 0)
			kept[s % KEEP] = half;
		else
			MPI_Comm_free(&half);
		if (s % 3 == 0) {
			MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
			if (pair != MPI_COMM_NULL) {
				v = sum;
				MPI_Allreduce(&v, &r, 1, MPI_LONG_LONG, MPI_SUM, pair);
				sum = (sum + r) % 1000000007;
				MPI_Comm_free(&pair);
			}
		}
		MPI_Allreduce(&sum, &r, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		sum = r % 1000000007;
		if (rank == 0 && (s % 25 == 0 || s == steps - 1)) {
			printf("step %d checksum %lld\n", s, sum);
			fflush(stdout);
		}
	}
	for (int k = 0; k < KEEP; k++)
		if (kept[k] != MPI_COMM_NULL)
			MPI_Comm_free(&kept[k]);
	if (rank == 0)
		printf("ranks %d steps %d done\n", size, steps);
	MPI_Finalize();
	return 0;
}
