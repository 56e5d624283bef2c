/* Collectives through the agent. The data goes through the arena; a buffer
 * larger than the arena is cut into segments of a fixed number of elements,
 * the same on every rank (all ranks pass the same count), so each segment
 * is one real collective with the same arguments everywhere. */
#include <string.h>

#include "plugins/mpi/standin/sti.h"

/* Elements per segment for elements of SIZE bytes when NBUF buffers share
 * the arena. */
static size_t seg_elems(const char *fn, size_t size, int nbuf)
{
	size_t n = size ? ck__sti.scratch / (size_t)nbuf / size : 0;

	if (!n)
		ck__sti_die(fn, "an element of %zu bytes does not fit the channel's arena", size);
	return n;
}

int MPI_Barrier(MPI_Comm comm)
{
	struct ck_mpi_req *r;
	int rc;

	ck__sti_need_init("MPI_Barrier");
	r = ck__sti_begin("MPI_Barrier", CK_W_BARRIER);
	r->comm = ck__sti_comm("MPI_Barrier", comm);
	rc = ck__sti_call("MPI_Barrier", r);
	ck__sti_end(r);
	return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
	const char *fn = "MPI_Bcast";
	int c, me, rc = MPI_SUCCESS;
	size_t seg, done = 0, n;
	struct ck__tinfo ti;
	struct ck_mpi_req *r;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	ck__sti_tinfo(fn, dt, &ti);
	seg = ti.size ? seg_elems(fn, ti.size, 1) : 1;
	me = ck__sti_comm_rank(c);
	do {
		n = (size_t)count - done < seg ? (size_t)count - done : seg;
		r = ck__sti_begin(fn, CK_W_BCAST);
		r->comm = c;
		r->dtype = ti.wire;
		r->root = root;
		r->count = n * (size_t)ti.nbase;
		r->len = n * ti.size;
		if (me == root)
			ck__sti_pack(ck__sti.ch.arena, (char *)buf + done * ti.extent, n, &ti);
		rc = ck__sti_call(fn, r);
		if (me != root && rc == MPI_SUCCESS)
			ck__sti_unpack((char *)buf + done * ti.extent, ck__sti.ch.arena, n * ti.size, &ti);
		ck__sti_end(r);
		done += n;
	} while (rc == MPI_SUCCESS && done < (size_t)count);
	return rc;
}

/* Allreduce and Reduce (ROOT < 0: all). */
static int reduce(const char *fn, unsigned op, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		  MPI_Op mop, int root, MPI_Comm comm)
{
	int c, t, o, inplace = sbuf == MPI_IN_PLACE, rc = MPI_SUCCESS, gets;
	size_t size, seg, done = 0, n;
	struct ck_mpi_req *r;

	if (ck__sti_user_reduce(fn, sbuf, rbuf, count, dt, mop, root, comm, &rc))
		return rc;
	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	t = ck__sti_type(fn, dt, &size);
	o = ck__sti_op(fn, mop);
	seg = seg_elems(fn, size, inplace ? 1 : 2);
	gets = root < 0 || ck__sti_comm_rank(c) == root;
	do {
		n = (size_t)count - done < seg ? (size_t)count - done : seg;
		r = ck__sti_begin(fn, op);
		r->comm = c;
		r->dtype = t;
		r->rop = o;
		r->root = root;
		r->count = n;
		r->off = 0;
		r->len = n * size;
		r->peer = inplace ? CK_W_INPLACE : 0;
		memcpy(ck__sti.ch.arena, (const char *)(inplace ? rbuf : sbuf) + done * size, n * size);
		rc = ck__sti_call(fn, r);
		if (gets && rc == MPI_SUCCESS)
			memcpy((char *)rbuf + done * size, ck__sti.ch.arena + (inplace ? 0 : n * size), n * size);
		ck__sti_end(r);
		done += n;
	} while (rc == MPI_SUCCESS && done < (size_t)count);
	return rc;
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	return reduce("MPI_Allreduce", CK_W_ALLREDUCE, sbuf, rbuf, count, dt, op, -1, comm);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm)
{
	if (root < 0)
		ck__sti_die("MPI_Reduce", "root %d is not a rank", root);
	return reduce("MPI_Reduce", CK_W_REDUCE, sbuf, rbuf, count, dt, op, root, comm);
}
