/* Communicators across checkpoints, unmodified MPI: each step works on
 * MPI_COMM_WORLD, on a split by parity, on a duplicate of the world and
 * on a split_type (shared memory) communicator, and passes a token round
 * the parity group with MPI_Send/MPI_Recv (MPI_ANY_SOURCE at the receiving
 * end); every 7th step makes a duplicate of the parity group, reduces on
 * it and frees it. A restart must make every communicator again, in the
 * order the program made them. Rank 0 prints a running checksum (exact
 * integers) every 25 steps. Usage: comms_mpi [STEPS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 200, rank, size, hr, hs, nr, s;
	long long sum = 0, v, r, tok;
	MPI_Comm half, dupw, node, tmp;
	MPI_Status st;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half); /* reversed order inside */
	MPI_Comm_dup(MPI_COMM_WORLD, &dupw);
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(half, &hr);
	MPI_Comm_size(half, &hs);
	MPI_Comm_rank(node, &nr);
	for (s = 0; s < steps; s++) {
		struct timespec ts = {0, 200000L * (1 + (rank + s) % 3)};

		nanosleep(&ts, NULL);
		v = (long long)(rank + 1) * (s + 3);
		MPI_Allreduce(&v, &r, 1, MPI_LONG_LONG, MPI_SUM, half);
		sum = (sum * 31 + r) % 1000000007;
		v = rank == 0 ? sum : 0;
		MPI_Bcast(&v, 1, MPI_LONG_LONG, 0, dupw);
		if (v != (rank == 0 ? sum : v))
			MPI_Abort(MPI_COMM_WORLD, 5);
		sum = (sum + v) % 1000000007;
		MPI_Allreduce(&nr, &hr, 1, MPI_INT, MPI_MAX, node);
		MPI_Comm_rank(half, &hr);
		if (hs > 1) { /* a token round the parity group */
			if (hr == 0) {
				tok = s;
				MPI_Send(&tok, 1, MPI_LONG_LONG, 1, s, half);
				MPI_Recv(&tok, 1, MPI_LONG_LONG, MPI_ANY_SOURCE, s, half, &st);
				if (st.MPI_SOURCE != hs - 1)
					MPI_Abort(MPI_COMM_WORLD, 6);
			} else {
				MPI_Recv(&tok, 1, MPI_LONG_LONG, hr - 1, s, half, &st);
				tok = tok * 3 + hr;
				MPI_Send(&tok, 1, MPI_LONG_LONG, (hr + 1) % hs, s, half);
			}
			MPI_Bcast(&tok, 1, MPI_LONG_LONG, 0, half);
			sum = (sum + tok) % 1000000007;
		}
		if (s % 7 == 0) {
			MPI_Comm_dup(half, &tmp);
			MPI_Allreduce(&sum, &r, 1, MPI_LONG_LONG, MPI_MAX, tmp);
			MPI_Comm_free(&tmp);
			sum = (sum + r) % 1000000007;
		}
		MPI_Allreduce(&sum, &r, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (rank == 0 && (s % 25 == 0 || s == steps - 1)) {
			printf("step %d checksum %lld\n", s, r);
			fflush(stdout);
		}
	}
	MPI_Comm_free(&node);
	MPI_Comm_free(&dupw);
	MPI_Comm_free(&half);
	if (rank == 0)
		printf("ranks %d steps %d done\n", size, steps);
	MPI_Finalize();
	return 0;
}
