/* Allreduce timing: BYTES of doubles summed ITERS times (after a warm-up);
 * rank 0 prints the mean time per call in microseconds.
 * Usage: bench_mpi BYTES ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : 8;
	int iters = argc > 2 ? atoi(argv[2]) : 1000, rank, i, n = (int)(bytes / sizeof(double));
	double *a = calloc((size_t)n, sizeof(double)), *b = calloc((size_t)n, sizeof(double)), t;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (i = 0; i < n; i++)
		a[i] = rank + i;
	for (i = 0; i < iters / 10 + 1; i++)
		MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	t = MPI_Wtime();
	for (i = 0; i < iters; i++)
		MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	t = MPI_Wtime() - t;
	if (rank == 0)
		printf("allreduce %zu bytes: %.2f us\n", bytes, t / iters * 1e6);
	MPI_Finalize();
	return 0;
}
