/* Nonblocking point-to-point, unmodified MPI: a 1-D halo exchange
 * (Irecv/Isend both ways, Waitall) over STEPS steps of an integer stencil,
 * rank 0 collecting one message per rank with Waitany in arrival order,
 * MPI_Test polled until a receive completes, Testall over a send/receive
 * pair, MPI_Sendrecv shifts, two Iallreduce (one in place) in flight
 * together, and derived types (a matrix column as a vector, sent blocking
 * and not; a contiguous pair broadcast). Rank 0 prints the results; exact.
 * Usage: nonblock_mpi [STEPS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CELLS 32

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 40, rank, size, left, right, s, i, idx, flag, got[64], n;
	long long u[CELLS + 2], v[CELLS + 2], sum, all[64];
	MPI_Request rq[64];
	MPI_Status st[4];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size > 64)
		MPI_Abort(MPI_COMM_WORLD, 2);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	for (i = 1; i <= CELLS; i++)
		u[i] = (rank * CELLS + i) % 17;
	for (s = 0; s < steps; s++) {
		MPI_Irecv(&u[0], 1, MPI_LONG_LONG, left, 1, MPI_COMM_WORLD, &rq[0]);
		MPI_Irecv(&u[CELLS + 1], 1, MPI_LONG_LONG, right, 2, MPI_COMM_WORLD, &rq[1]);
		MPI_Isend(&u[CELLS], 1, MPI_LONG_LONG, right, 1, MPI_COMM_WORLD, &rq[2]);
		MPI_Isend(&u[1], 1, MPI_LONG_LONG, left, 2, MPI_COMM_WORLD, &rq[3]);
		MPI_Waitall(4, rq, st);
		if (st[0].MPI_SOURCE != left || st[1].MPI_SOURCE != right || rq[0] != MPI_REQUEST_NULL)
			MPI_Abort(MPI_COMM_WORLD, 3);
		for (i = 1; i <= CELLS; i++)
			v[i] = (u[i - 1] + 2 * u[i] + u[i + 1]) % 1000003;
		for (i = 1; i <= CELLS; i++)
			u[i] = v[i];
	}
	for (sum = 0, i = 1; i <= CELLS; i++)
		sum = sum * 31 + u[i];
	MPI_Gather(&sum, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("halo %d steps:", steps);
		for (i = 0; i < size; i++)
			printf(" %lld", all[i]);
		printf("\n");
	}

	/* Waitany: one message from every other rank, in whatever order. */
	if (rank == 0) {
		for (i = 1; i < size; i++)
			MPI_Irecv(&all[i], 1, MPI_LONG_LONG, i, 5, MPI_COMM_WORLD, &rq[i - 1]);
		for (i = 0; i < size; i++)
			got[i] = 0;
		for (n = 1; n < size; n++) {
			MPI_Waitany(size - 1, rq, &idx, &st[0]);
			if (idx == MPI_UNDEFINED || st[0].MPI_SOURCE != idx + 1 || got[idx + 1]++)
				MPI_Abort(MPI_COMM_WORLD, 4);
		}
		MPI_Waitany(size - 1, rq, &idx, &st[0]);
		if (idx != MPI_UNDEFINED)
			MPI_Abort(MPI_COMM_WORLD, 5);
		printf("waitany:");
		for (i = 1; i < size; i++)
			printf(" %lld", all[i]);
		printf("\n");
	} else {
		struct timespec ts = { 0, (long)((size - rank) * 2000000L) };

		nanosleep(&ts, NULL);
		sum = rank * 1000 + 7;
		MPI_Isend(&sum, 1, MPI_LONG_LONG, 0, 5, MPI_COMM_WORLD, &rq[0]);
		MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
	}

	/* Test polled; Testall over a pair; Sendrecv shift. */
	MPI_Irecv(&all[0], 1, MPI_LONG_LONG, left, 6, MPI_COMM_WORLD, &rq[0]);
	sum = rank * 3;
	MPI_Isend(&sum, 1, MPI_LONG_LONG, right, 6, MPI_COMM_WORLD, &rq[1]);
	do
		MPI_Test(&rq[0], &flag, &st[0]);
	while (!flag);
	MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
	MPI_Irecv(&all[1], 1, MPI_LONG_LONG, right, 7, MPI_COMM_WORLD, &rq[0]);
	MPI_Isend(&sum, 1, MPI_LONG_LONG, left, 7, MPI_COMM_WORLD, &rq[1]);
	do
		MPI_Testall(2, rq, &flag, st);
	while (!flag);
	MPI_Sendrecv(&sum, 1, MPI_LONG_LONG, right, 8, &all[2], 1, MPI_LONG_LONG, left, 8, MPI_COMM_WORLD, &st[0]);
	MPI_Get_count(&st[0], MPI_LONG_LONG, &n);
	if (n != 1 || st[0].MPI_SOURCE != left)
		MPI_Abort(MPI_COMM_WORLD, 6);
	/* Iallreduce, one in place, overlapped with a Sendrecv. */
	{
		long long in[3] = { rank, rank * rank, 1 }, out[3], inpl[2] = { rank + 1, -rank };
		MPI_Request ar[2];

		MPI_Iallreduce(in, out, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, &ar[0]);
		MPI_Iallreduce(MPI_IN_PLACE, inpl, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD, &ar[1]);
		MPI_Sendrecv(&sum, 1, MPI_LONG_LONG, left, 9, &all[4], 1, MPI_LONG_LONG, right, 9, MPI_COMM_WORLD,
			     MPI_STATUS_IGNORE);
		MPI_Waitall(2, ar, MPI_STATUSES_IGNORE);
		if (rank == 0)
			printf("iallreduce: %lld %lld %lld, in place %lld %lld\n", out[0], out[1], out[2], inpl[0], inpl[1]);
	}
	{ /* Derived types: a matrix column (vector) to the right, blocking and
	   * not; a row pair (contiguous) broadcast; counts in derived units. */
		int mat[6][5], col[6], k, cnt2;
		MPI_Datatype column, pair;
		MPI_Request tr[2];

		for (i = 0; i < 6; i++)
			for (k = 0; k < 5; k++)
				mat[i][k] = rank * 100 + i * 10 + k;
		MPI_Type_vector(6, 1, 5, MPI_INT, &column);
		MPI_Type_commit(&column);
		MPI_Type_contiguous(2, MPI_INT, &pair);
		MPI_Type_commit(&pair);
		MPI_Sendrecv(&mat[0][1], 1, column, right, 10, col, 6, MPI_INT, left, 10, MPI_COMM_WORLD, &st[0]);
		MPI_Irecv(&mat[0][4], 1, column, left, 11, MPI_COMM_WORLD, &tr[0]);
		MPI_Isend(&mat[0][2], 1, column, right, 11, MPI_COMM_WORLD, &tr[1]);
		MPI_Waitall(2, tr, st);
		MPI_Get_count(&st[0], column, &cnt2);
		MPI_Bcast(&mat[3][0], 2, pair, size - 1, MPI_COMM_WORLD);
		if (rank == 0)
			printf("types: column %d %d %d %d %d %d, count %d, last col %d %d, bcast %d %d %d %d\n", col[0],
			       col[1], col[2], col[3], col[4], col[5], cnt2, mat[0][4], mat[5][4], mat[3][0], mat[3][1],
			       mat[3][2], mat[3][3]);
		MPI_Type_free(&column);
		MPI_Type_free(&pair);
	}
	all[3] = all[0] * 1000000 + all[1] * 1000 + all[2];
	MPI_Gather(&all[3], 1, MPI_LONG_LONG, all + 8, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("test/testall/sendrecv:");
		for (i = 0; i < size; i++)
			printf(" %lld", all[8 + i]);
		printf("\n");
	}
	MPI_Finalize();
	return 0;
}
