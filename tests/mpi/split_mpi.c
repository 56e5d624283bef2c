/* Communicators and the gather family, unmodified MPI. MPI_Comm_split by
 * parity with an allreduce in each half, its group translated to world
 * ranks and a subgroup (Group_incl/rank/translate_ranks/free);
 * MPI_Comm_split_type (shared memory); MPI_Comm_dup with an attribute copied
 * by MPI_COMM_DUP_FN, Comm_compare, Comm_set/get_name; Allgatherv (rank i
 * gives i+1 values), Allgather, MPI_Probe then MPI_Recv of a message whose
 * size the receiver learns; Gatherv and Scatterv with gaps, Alltoall, Gather
 * in place, Reduce_scatter, Alltoallv with gaps; user-defined ops, one that
 * commutes in Allreduce and one that does not (matrix products) in Reduce,
 * checked; MPI_Iprobe. Rank 0 prints everything; exact integers. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096 /* enough for any -np the suite uses */

/* A user op, associative and not commutative: 2x2 matrix products modulo
 * a prime, inout = in x inout, element by element of arrays of matrices. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	long long *x = in, *y = inout, r[4];

	(void)dt;
	for (int k = 0; k < *len / 4; k++, x += 4, y += 4) {
		r[0] = (x[0] * y[0] + x[1] * y[2]) % 1000003;
		r[1] = (x[0] * y[1] + x[1] * y[3]) % 1000003;
		r[2] = (x[2] * y[0] + x[3] * y[2]) % 1000003;
		r[3] = (x[2] * y[1] + x[3] * y[3]) % 1000003;
		for (int i = 0; i < 4; i++)
			y[i] = r[i];
	}
}

/* A commuting user op: element-wise products modulo a prime. */
static void modmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	long long *x = in, *y = inout;

	(void)dt;
	for (int k = 0; k < *len; k++)
		y[k] = x[k] * y[k] % 1000003;
}

static void print_ints(const char *what, const int *v, int n)
{
	printf("%s", what);
	for (int i = 0; i < n; i++)
		printf(" %d", v[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	int rank, size, i, n, flag, key, *attr, srank, ssize, ssum, cnt[64], dsp[64];
	static int a[N], b[N], c[N];
	MPI_Comm half, dup;
	MPI_Status st;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size > 64)
		MPI_Abort(MPI_COMM_WORLD, 2);

	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
	MPI_Comm_rank(half, &srank);
	MPI_Comm_size(half, &ssize);
	MPI_Allreduce(&rank, &ssum, 1, MPI_INT, MPI_SUM, half);
	a[0] = rank, a[1] = srank, a[2] = ssize, a[3] = ssum;
	MPI_Gather(a, 4, MPI_INT, b, 4, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0)
		print_ints("split (rank, rank in half, half size, half sum):", b, 4 * size);
	{ /* Groups: the half's members in world ranks; a two-member subgroup. */
		MPI_Group hg, wg, sg;
		int in[64], out[64], two[2] = { size - 1, 0 }, gs, gr;

		MPI_Comm_group(half, &hg);
		MPI_Comm_group(MPI_COMM_WORLD, &wg);
		MPI_Group_size(hg, &gs);
		for (i = 0; i < gs; i++)
			in[i] = i;
		MPI_Group_translate_ranks(hg, gs, in, wg, out);
		MPI_Group_incl(wg, 2, two, &sg);
		MPI_Group_rank(sg, &gr);
		MPI_Group_translate_ranks(sg, 2, in, hg, out + gs);
		a[0] = gs, a[1] = gr;
		for (i = 0; i < gs + 2; i++)
			a[2 + i] = out[i];
		MPI_Gather(a, 8, MPI_INT, b, 8, MPI_INT, 0, MPI_COMM_WORLD);
		if (rank == 0)
			print_ints("groups (size, rank in {last,0}, world ranks of the half, {last,0} in the half):", b,
				   8 * size);
		MPI_Group_free(&sg);
		MPI_Group_free(&wg);
		MPI_Group_free(&hg);
	}
	MPI_Comm_free(&half);
	/* One host here: the shared-memory split holds every rank. */
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, &half);
	MPI_Comm_rank(half, &srank);
	MPI_Comm_size(half, &ssize);
	MPI_Allreduce(&srank, &ssum, 1, MPI_INT, MPI_MAX, half);
	if (rank == 0)
		printf("split_type shared: size %d, rank 0 is %d of them, top %d\n", ssize, srank, ssum);
	MPI_Comm_free(&half);

	MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
	MPI_Comm_set_attr(MPI_COMM_WORLD, key, &cnt[0]);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_get_attr(dup, key, &attr, &flag);
	if (!flag || attr != &cnt[0])
		MPI_Abort(MPI_COMM_WORLD, 3);
	{ /* Comparisons and names. */
		int same, cong, vlen;
		char name[MPI_MAX_OBJECT_NAME], ver[MPI_MAX_LIBRARY_VERSION_STRING];

		MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &same);
		MPI_Comm_compare(MPI_COMM_WORLD, dup, &cong);
		MPI_Comm_set_name(dup, "dup-of-world");
		MPI_Comm_get_name(dup, name, &vlen);
		MPI_Get_library_version(ver, &vlen); /* differs from the real one: not printed */
		if (rank == 0)
			printf("compare: world/world %s, world/dup %s, dup named %s\n", same == MPI_IDENT ? "ident" : "?",
			       cong == MPI_CONGRUENT ? "congruent" : "?", name);
	}
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag);
	if (!flag || *attr < 32767)
		MPI_Abort(MPI_COMM_WORLD, 4);

	/* Allgatherv: rank i contributes i+1 values i*100+k, packed. */
	for (i = 0, n = 0; i < size; i++) {
		cnt[i] = i + 1;
		dsp[i] = n;
		n += i + 1;
	}
	for (i = 0; i <= rank; i++)
		a[i] = rank * 100 + i;
	MPI_Allgatherv(a, rank + 1, MPI_INT, b, cnt, dsp, MPI_INT, dup);
	MPI_Allgather(&rank, 1, MPI_INT, c, 1, MPI_INT, dup);
	if (rank == size - 1) /* the last rank sends its view to 0 */
		MPI_Send(b, n, MPI_INT, 0, 1, MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Probe(MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_INT, &i);
		MPI_Recv(b, i, MPI_INT, st.MPI_SOURCE, 1, MPI_COMM_WORLD, &st);
		printf("probed %d ints from %d\n", i, st.MPI_SOURCE);
		print_ints("allgatherv:", b, n);
		print_ints("allgather:", c, size);
	}

	/* Gatherv into a buffer with gaps (each block 2 apart), the gaps kept. */
	for (i = 0; i < size; i++) {
		cnt[i] = 1 + i % 3;
		dsp[i] = i * 4;
	}
	for (i = 0; i < N; i++)
		b[i] = -1;
	for (i = 0; i < cnt[rank]; i++)
		a[i] = rank * 10 + i;
	MPI_Gatherv(a, cnt[rank], MPI_INT, b, cnt, dsp, MPI_INT, 0, dup);
	if (rank == 0)
		print_ints("gatherv with gaps:", b, 4 * size);
	/* Scatterv back, shifted by one rank. */
	for (i = 0; i < 4 * size; i++)
		a[i] = i * 7;
	MPI_Scatterv(a, cnt, dsp, MPI_INT, c, cnt[rank], MPI_INT, size - 1, dup);
	MPI_Gather(c, 1, MPI_INT, b, 1, MPI_INT, 0, dup);
	if (rank == 0)
		print_ints("scatterv first values:", b, size);

	/* Alltoall: block j of rank i is i*1000+j. */
	for (i = 0; i < size; i++)
		a[i] = rank * 1000 + i;
	MPI_Alltoall(a, 1, MPI_INT, c, 1, MPI_INT, dup);
	/* In place: the root's own block is already in the receive buffer. */
	if (rank == 0)
		MPI_Gather(MPI_IN_PLACE, size, MPI_INT, b, size, MPI_INT, 0, dup);
	else
		MPI_Gather(c, size, MPI_INT, NULL, 0, MPI_INT, 0, dup);
	if (rank == 0) {
		for (i = 0; i < size; i++)
			b[i] = c[i];
		print_ints("alltoall:", b, size * size);
	}
	/* Reduce_scatter: block i (i+1 values) summed over the ranks to rank i. */
	for (i = 0, n = 0; i < size; i++) {
		cnt[i] = i + 1;
		n += i + 1;
	}
	for (i = 0; i < n; i++)
		a[i] = rank * 100 + i;
	MPI_Reduce_scatter(a, c, cnt, MPI_INT, MPI_SUM, dup);
	MPI_Gather(c, 1, MPI_INT, b, 1, MPI_INT, 0, dup);
	if (rank == 0)
		print_ints("reduce_scatter first values:", b, size);
	/* Alltoallv: rank i sends j+1 values (i*100+j) to rank j, received 2 apart. */
	{
		int sc[64], sd[64], rcn[64], rd[64], off = 0;

		for (i = 0; i < size; i++) {
			sc[i] = i + 1;
			sd[i] = off;
			off += i + 1;
			rcn[i] = rank + 1;
			rd[i] = i * (rank + 3);
		}
		for (i = 0; i < off; i++)
			a[i] = rank * 100 + i;
		for (i = 0; i < N; i++)
			c[i] = -1;
		MPI_Alltoallv(a, sc, sd, MPI_INT, c, rcn, rd, MPI_INT, dup);
		if (rank == size - 1)
			MPI_Send(c, size * (rank + 3), MPI_INT, 0, 3, dup);
		if (rank == 0) {
			MPI_Recv(b, N, MPI_INT, size - 1, 3, dup, &st);
			MPI_Get_count(&st, MPI_INT, &n);
			print_ints("alltoallv at the last rank:", b, n);
		}
	}
	{ /* User ops: a commuting one in Allreduce; the ordered product of
	   * every rank's matrices in Reduce, checked against the product made
	   * here (Allreduce is not given the non-commuting op: Open MPI's ring
	   * algorithm, pinned for determinism, assumes ops commute). */
		long long m[8], p[8], want[8], x[8];
		MPI_Op op, cop;
		int commute, ccommute, r, len8 = 8;

		for (i = 0; i < 8; i++)
			m[i] = (rank + 2) * (i + 1) + (i % 3);
		MPI_Op_create(modmul, 1, &cop);
		MPI_Op_commutative(cop, &ccommute);
		MPI_Allreduce(m, p, 8, MPI_LONG_LONG, cop, dup);
		if (rank == 0)
			printf("user op (commute %d) allreduce: %lld %lld %lld %lld %lld %lld %lld %lld\n", ccommute,
			       p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
		MPI_Op_create(matmul, 0, &op);
		MPI_Op_commutative(op, &commute);
		MPI_Reduce(m, p, 8, MPI_LONG_LONG, op, size - 1, dup);
		for (r = size - 1; r >= 0; r--) { /* want = m(0) x m(1) x ... */
			for (i = 0; i < 8; i++)
				x[i] = (r + 2) * (i + 1) + (i % 3);
			if (r == size - 1)
				for (i = 0; i < 8; i++)
					want[i] = x[i];
			else
				matmul(x, want, &len8, NULL);
		}
		if (rank == size - 1) {
			for (i = 0; i < 8; i++)
				if (p[i] != want[i])
					MPI_Abort(MPI_COMM_WORLD, 7);
			MPI_Send(p, 8, MPI_LONG_LONG, 0, 4, dup);
		}
		if (rank == 0) {
			MPI_Recv(p, 8, MPI_LONG_LONG, size - 1, 4, dup, MPI_STATUS_IGNORE);
			printf("user op (commute %d) reduce, in rank order: %lld %lld %lld %lld\n", commute, p[0], p[1],
			       p[2], p[3]);
		}
		MPI_Op_free(&op);
		MPI_Op_free(&cop);
	}
	MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &flag, &st);
	MPI_Barrier(dup);
	MPI_Comm_free(&dup);
	MPI_Comm_free_keyval(&key);
	if (rank == 0)
		printf("iprobe found %d\n", flag);
	MPI_Finalize();
	return 0;
}
