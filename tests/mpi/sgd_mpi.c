/* Data-parallel SGD with MPI_Allreduce, an unmodified MPI program: each rank
 * computes the gradient of a linear model on its shard of a synthetic data
 * set, the gradients are summed with MPI_Allreduce and every rank applies
 * the same update. Fixed-point integer arithmetic (weights scaled by 2^16)
 * so that the result is exact whatever the reduction order, and can be
 * compared byte for byte with a bare mpirun. Also checks MPI_Bcast and
 * MPI_Reduce, MPI_Barrier and MPI_Get_processor_name on the way.
 * Usage: sgd_mpi [STEPS] [FEATURES] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES_PER_RANK 64

static long long lcg(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (long long)((*s >> 33) % 2001) - 1000;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 200, nf = argc > 2 ? atoi(argv[2]) : 16;
	int rank, size, len, i, j, s;
	long long *w, *grad, *sum, *x, *y, loss, tot;
	char host[MPI_MAX_PROCESSOR_NAME];
	unsigned long long seed;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	/* a line as soon as it is printed: a run's output is on disk before a
	 * stop, and a resume that started afresh would print it again */
	setvbuf(stdout, NULL, _IOLBF, 0);
	MPI_Get_processor_name(host, &len);
	if (len <= 0 || (int)strlen(host) != len)
		MPI_Abort(MPI_COMM_WORLD, 3);
	w = calloc((size_t)nf, sizeof(*w));
	grad = calloc((size_t)nf, sizeof(*grad));
	sum = calloc((size_t)nf, sizeof(*sum));
	x = calloc((size_t)nf * SAMPLES_PER_RANK, sizeof(*x));
	y = calloc(SAMPLES_PER_RANK, sizeof(*y));
	/* Rank 0 picks the true model and broadcasts it. */
	if (rank == 0) {
		seed = 42;
		for (j = 0; j < nf; j++)
			sum[j] = lcg(&seed);
	}
	MPI_Bcast(sum, nf, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	seed = 1000 + (unsigned long long)rank;
	for (i = 0; i < SAMPLES_PER_RANK; i++) {
		y[i] = 0;
		for (j = 0; j < nf; j++) {
			x[i * nf + j] = lcg(&seed) / 100; /* -10..10 */
			y[i] += x[i * nf + j] * sum[j];
		}
	}
	for (s = 0; s < steps; s++) {
		loss = 0;
		memset(grad, 0, (size_t)nf * sizeof(*grad));
		for (i = 0; i < SAMPLES_PER_RANK; i++) {
			long long pred = 0, err;

			for (j = 0; j < nf; j++)
				pred += x[i * nf + j] * w[j];
			err = pred / 65536 - y[i];
			loss += err * err;
			for (j = 0; j < nf; j++)
				grad[j] += err * x[i * nf + j];
		}
		MPI_Allreduce(grad, sum, nf, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		for (j = 0; j < nf; j++)
			w[j] -= sum[j] * 65536 / (400LL * SAMPLES_PER_RANK * size);
		MPI_Reduce(&loss, &tot, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0 && (s % 20 == 0 || s == steps - 1))
			printf("step %d loss %lld w0 %lld\n", s, tot, w[0]);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	/* Every rank must hold the same weights: compare max and min. */
	MPI_Allreduce(w, grad, nf, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
	MPI_Allreduce(w, sum, nf, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
	if (memcmp(grad, sum, (size_t)nf * sizeof(*w)))
		MPI_Abort(MPI_COMM_WORLD, 4);
	if (rank == 0) {
		printf("ranks %d final", size);
		for (j = 0; j < nf; j++)
			printf(" %lld", w[j]);
		printf("\n");
	}
	MPI_Finalize();
	return 0;
}
