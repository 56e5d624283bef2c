/* Communicators. The predefined ones answer questions here; new ones
 * (MPI_Comm_dup, MPI_Comm_split) are made in the agent's real MPI under a
 * number this library picks, and their handles are objects of this library
 * (so that a later restart can make them again in new agents). */
#include <stdlib.h>

#include "plugins/mpi/standin/sti.h"

int MPI_Comm_test_inter(MPI_Comm comm, int *flag)
{
	(void)ck__sti_comm("MPI_Comm_test_inter", comm);
	*flag = 0;
	return MPI_SUCCESS;
}

static int free_id(const char *fn)
{
	for (int i = CK_NCOMMS; i < CK_MAX_COMMS; i++)
		if (!ck__sti.comms[i])
			return i;
	ck__sti_die(fn, "more than %d communicators", CK_MAX_COMMS - CK_NCOMMS);
}

static int make(const char *fn, unsigned op, MPI_Comm comm, int color, int key, MPI_Comm *out)
{
	struct ck_mpi_req *r;
	struct ck__comm *nc;
	int c, id, rc;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	id = free_id(fn);
	nc = calloc(1, sizeof(*nc));
	if (!nc)
		ck__sti_die(fn, "out of memory");
	r = ck__sti_begin(fn, op);
	r->comm = c;
	r->root = id;
	r->peer = color;
	r->tag = key;
	rc = ck__sti_call(fn, r);
	nc->id = id;
	nc->rank = r->src;
	nc->size = r->rtag;
	if (rc != MPI_SUCCESS || !r->rlen) {
		free(nc);
		*out = MPI_COMM_NULL;
	} else {
		ck__sti.comms[id] = nc;
		ck__sti.errh[id] = ck__sti.errh[c]; /* the new communicator inherits it */
		*out = (MPI_Comm)(void *)nc;
	}
	ck__sti_end(r);
	if (rc == MPI_SUCCESS && op == CK_W_COMM_DUP && *out != MPI_COMM_NULL)
		rc = ck__sti_attr_copy(c, id);
	return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	return make("MPI_Comm_dup", CK_W_COMM_DUP, comm, 0, 0, newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	return make("MPI_Comm_split", CK_W_COMM_SPLIT, comm, color, key, newcomm);
}

/* Info keys are not passed on (none changes the result of a split). */
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
	if (info != MPI_INFO_NULL)
		ck__sti_die("MPI_Comm_split_type", "an info object is not supported (MPI_INFO_NULL only)");
	return make("MPI_Comm_split_type", CK_W_COMM_SPLIT_TYPE, comm, type, key, newcomm);
}

int MPI_Comm_free(MPI_Comm *comm)
{
	const char *fn = "MPI_Comm_free";
	struct ck_mpi_req *r;
	int c, rc;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, *comm);
	if (c < CK_NCOMMS)
		ck__sti_die(fn, "a predefined communicator cannot be freed");
	ck__sti_attr_delete_all(c);
	r = ck__sti_begin(fn, CK_W_COMM_FREE);
	r->comm = c;
	rc = ck__sti_call(fn, r);
	ck__sti_end(r);
	free(ck__sti.comms[c]);
	ck__sti.comms[c] = NULL;
	*comm = MPI_COMM_NULL;
	return rc;
}
