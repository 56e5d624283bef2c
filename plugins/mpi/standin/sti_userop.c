/* User-defined reduction ops run in the job, in canonical rank order: every
 * contribution is gathered (to every rank for Allreduce, to the root for
 * Reduce) and folded here as x0 op (x1 op (... op x(n-1))), whatever the
 * placement of the ranks, so the result is the same on any world. Costs an
 * allgather of the whole buffer: meant for small reductions. */
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

#define MAX_USER_OPS 64

struct ck__uop {
	MPI_User_function *fn;
	int commute;
};

static struct ck__uop *uops[MAX_USER_OPS];

int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op)
{
	for (int i = 0; i < MAX_USER_OPS; i++)
		if (!uops[i]) {
			uops[i] = malloc(sizeof(*uops[i]));
			if (!uops[i])
				ck__sti_die("MPI_Op_create", "out of memory");
			uops[i]->fn = fn;
			uops[i]->commute = commute;
			*op = (MPI_Op)(void *)uops[i];
			return MPI_SUCCESS;
		}
	ck__sti_die("MPI_Op_create", "more than %d user-defined ops", MAX_USER_OPS);
}

static int find(MPI_Op op)
{
	for (int i = 0; i < MAX_USER_OPS; i++)
		if (uops[i] && (void *)uops[i] == (void *)op)
			return i;
	return -1;
}

int MPI_Op_free(MPI_Op *op)
{
	int i = find(*op);

	if (i < 0)
		ck__sti_die("MPI_Op_free", "op %p is not a user-defined one", (void *)*op);
	free(uops[i]);
	uops[i] = NULL;
	*op = MPI_OP_NULL;
	return MPI_SUCCESS;
}

int MPI_Op_commutative(MPI_Op op, int *commute)
{
	int i = find(op);

	if (i < 0) {
		(void)ck__sti_op("MPI_Op_commutative", op); /* predefined ones all commute */
		*commute = 1;
		return MPI_SUCCESS;
	}
	*commute = uops[i]->commute;
	return MPI_SUCCESS;
}

int ck__sti_user_reduce(const char *fn, const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
			int root, MPI_Comm comm, int *rc)
{
	int i = find(op), c, n, me, len = count;
	size_t size, bytes;
	char *all;

	if (i < 0)
		return 0;
	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	(void)ck__sti_type(fn, dt, &size);
	n = ck__sti_comm_size(c);
	me = ck__sti_comm_rank(c);
	bytes = (size_t)(count < 0 ? 0 : count) * size;
	all = malloc(bytes * (size_t)n + 1);
	if (!all)
		ck__sti_die(fn, "out of memory");
	if (sbuf == MPI_IN_PLACE)
		sbuf = rbuf;
	*rc = root < 0 ? MPI_Allgather(sbuf, count, dt, all, count, dt, comm)
		       : MPI_Gather(sbuf, count, dt, all, count, dt, root, comm);
	if (*rc == MPI_SUCCESS && (root < 0 || me == root)) {
		for (int k = n - 2; k >= 0; k--) /* acc = x_k op acc */
			uops[i]->fn(all + (size_t)k * bytes, all + (size_t)(n - 1) * bytes, &len, &dt);
		memcpy(rbuf, all + (size_t)(n - 1) * bytes, bytes);
	}
	free(all);
	return 1;
}
