/* Data-parallel replicas: every rank holds the same MIB MiB of "weights"
 * (the same pseudo-random bytes, which do not compress) and keeps them the
 * same: each step sums one value per rank with MPI_Allreduce and applies
 * it to one word of every page in the same way. A checkpoint of N ranks
 * should store about one replica (content-addressed dedup across ranks).
 * Rank 0 prints "ready" once the weights are made, and a checksum at the
 * end. Usage: replica_mpi MIB STEPS [SLEEP_US] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64, n = mib << 17; /* 8-byte words */
	int steps = argc > 2 ? atoi(argv[2]) : 100, pause = argc > 3 ? atoi(argv[3]) : 10000, rank, s;
	uint64_t *w = malloc(n * sizeof(*w)), x = 88172645463325252ull, v, sum, h = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!w)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (size_t i = 0; i < n; i++) { /* xorshift: the same on every rank */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("ready\n");
	for (s = 0; s < steps; s++) {
		v = (uint64_t)s * 7 + 1;
		MPI_Allreduce(&v, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		for (size_t i = (size_t)s % 512; i < n; i += 512)
			w[i] += sum;
		if (pause)
			usleep((useconds_t)pause);
	}
	for (size_t i = 0; i < n; i += 4096)
		h = h * 31 + w[i];
	if (rank == 0)
		printf("steps %d checksum %llu\n", steps, (unsigned long long)h);
	MPI_Finalize();
	return 0;
}
