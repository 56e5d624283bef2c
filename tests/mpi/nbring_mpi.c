/* Nonblocking point-to-point, as training loops overlap communication with
 * work: every rank keeps a receive from its left neighbour posted at all
 * times (posted again as soon as one completes), sends to its right with
 * Isend, works a random while, then completes with MPI_Wait, MPI_Waitall,
 * a loop of MPI_Test or MPI_Waitany in turn; every 5 steps it sums a value
 * with MPI_Iallreduce and works while that runs. A cut finds receives
 * posted, sends and collectives in progress, and ranks blocked in waits:
 * all are carried across the checkpoint. Rank 0 prints each sum, line by
 * line, and the final sum of everything received (exact integers: the
 * output of a bare run).
 * Usage: nbring_mpi [STEPS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void work(unsigned *seed, int max_us)
{
	struct timespec ts = {0, (long)(rand_r(seed) % max_us) * 1000L};

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 300, rank, size, left, right, s, idx;
	long long v, in = 0, out, acc = 0, tot;
	unsigned seed;
	MPI_Request rr, sr, two[2], ar;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	setvbuf(stdout, NULL, _IOLBF, 0);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	seed = 1234u + (unsigned)rank * 77u;
	v = rank + 1;
	MPI_Irecv(&in, 1, MPI_LONG_LONG, left, 7, MPI_COMM_WORLD, &rr);
	for (s = 0; s < steps; s++) {
		out = v * 31 + s;
		MPI_Isend(&out, 1, MPI_LONG_LONG, right, 7, MPI_COMM_WORLD, &sr);
		work(&seed, 3000);
		switch (s % 4) {
		case 0:
			MPI_Wait(&rr, MPI_STATUS_IGNORE);
			MPI_Wait(&sr, MPI_STATUS_IGNORE);
			break;
		case 1:
			two[0] = rr;
			two[1] = sr;
			MPI_Waitall(2, two, MPI_STATUSES_IGNORE);
			break;
		case 2: {
			int done = 0;

			while (!done)
				MPI_Test(&rr, &done, MPI_STATUS_IGNORE);
			MPI_Wait(&sr, MPI_STATUS_IGNORE);
			break;
		}
		default:
			two[0] = rr;
			two[1] = sr;
			MPI_Waitany(2, two, &idx, MPI_STATUS_IGNORE);
			MPI_Wait(&two[1 - idx], MPI_STATUS_IGNORE);
			break;
		}
		v = (v * 1103515245 + in) % 1000000007;
		acc += in;
		if (s + 1 < steps)
			MPI_Irecv(&in, 1, MPI_LONG_LONG, left, 7, MPI_COMM_WORLD, &rr);
		if (s % 5 == 4) {
			MPI_Iallreduce(&v, &tot, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, &ar);
			work(&seed, 2000);
			MPI_Wait(&ar, MPI_STATUS_IGNORE);
			if (rank == 0)
				printf("step %d sum %lld\n", s, tot);
		}
	}
	MPI_Reduce(&acc, &tot, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("ranks %d received %lld\n", size, tot);
	MPI_Finalize();
	return 0;
}
