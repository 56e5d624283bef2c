/* Point-to-point ring with MPI_ANY_SOURCE: a token goes round ROUNDS times,
 * each rank adds its rank and a per-round value; every rank also sends a
 * message to rank 0, which takes them with MPI_ANY_SOURCE/MPI_ANY_TAG in
 * whatever order they come and checks source, tag and count (MPI_Get_count).
 * Small random sleeps vary the arrival order. Usage: ring_mpi [ROUNDS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 50, rank, size, r, i, n, seen;
	long long token = 0, msg[3];
	MPI_Status st;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	/* a line as soon as it is printed: a run's output is on disk before a
	 * stop, and a resume that started afresh would print it again */
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand(7u + (unsigned)rank);
	for (r = 0; r < rounds; r++) {
		struct timespec ts = { 0, (rand() % 500) * 1000L };

		nanosleep(&ts, NULL);
		if (rank == 0) {
			token += r;
			MPI_Send(&token, 1, MPI_LONG_LONG, 1 % size, 10, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_LONG_LONG, size - 1, 10, MPI_COMM_WORLD, &st);
		} else {
			MPI_Recv(&token, 1, MPI_LONG_LONG, rank - 1, 10, MPI_COMM_WORLD, &st);
			token += rank * (r + 1);
			MPI_Send(&token, 1, MPI_LONG_LONG, (rank + 1) % size, 10, MPI_COMM_WORLD);
		}
		/* Fan-in: every rank but 0 reports (rank, round, rank*round), 1 to 3 numbers. */
		if (rank == 0) {
			seen = 0;
			for (i = 1; i < size; i++) {
				MPI_Recv(msg, 3, MPI_LONG_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_LONG_LONG, &n);
				if (st.MPI_TAG != 100 + r || n != 1 + st.MPI_SOURCE % 3 || msg[0] != st.MPI_SOURCE ||
				    (n > 1 && msg[1] != r) || (n > 2 && msg[2] != (long long)st.MPI_SOURCE * r)) {
					printf("bad message from %d tag %d count %d\n", st.MPI_SOURCE, st.MPI_TAG, n);
					MPI_Abort(MPI_COMM_WORLD, 5);
				}
				seen |= 1 << st.MPI_SOURCE;
			}
			if (seen != ((1 << size) - 2))
				MPI_Abort(MPI_COMM_WORLD, 6);
			if (r % 100 == 0) /* progress: a resumed run goes on from where it was */
				printf("round %d token %lld\n", r, token);
		} else {
			msg[0] = rank;
			msg[1] = r;
			msg[2] = (long long)rank * r;
			MPI_Send(msg, 1 + rank % 3, MPI_LONG_LONG, 0, 100 + r, MPI_COMM_WORLD);
		}
	}
	if (rank == 0)
		printf("ranks %d rounds %d token %lld\n", size, rounds, token);
	MPI_Finalize();
	return 0;
}
