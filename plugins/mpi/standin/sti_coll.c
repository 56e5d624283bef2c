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

/* Allreduce and Reduce (ROOT < 0: all). Segments go one at a time, or,
 * with CKPT_MPI_SEGMENT, two in flight in the two quarters of the arena:
 * the program copies one in and the previous one out while the agent
 * reduces the one between. Every segment is one real collective with the
 * same arguments on every rank (the segment size must be the same
 * everywhere). */
static int reduce(const char *fn, unsigned op, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		  MPI_Op mop, int root, MPI_Comm comm)
{
	int c, t, o, inplace = sbuf == MPI_IN_PLACE, rc = MPI_SUCCESS, one, gets;
	size_t size, seg, next = 0, nseg, posted = 0, waited = 0, depth = ck__sti.segment ? 2 : 1, region;
	const char *in = inplace ? rbuf : sbuf;
	struct ck_mpi_req *q[2];
	size_t qn[2], qat[2];

	if (ck__sti_user_reduce(fn, sbuf, rbuf, count, dt, mop, root, comm, &rc))
		return rc;
	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	t = ck__sti_type(fn, dt, &size);
	o = ck__sti_op(fn, mop);
	region = ck__sti.scratch / depth;
	seg = seg_elems(fn, size, (int)depth * (inplace ? 1 : 2));
	if (ck__sti.segment && ck__sti.segment / size && ck__sti.segment / size < seg)
		seg = ck__sti.segment / size;
	nseg = count > 0 ? ((size_t)count + seg - 1) / seg : 1;
	gets = root < 0 || ck__sti_comm_rank(c) == root;
	ck__sti_lock();
	while (waited < nseg) {
		while (posted < nseg && posted - waited < depth) {
			size_t i = posted % depth, n = (size_t)count - next < seg ? (size_t)count - next : seg;
			struct ck_mpi_req *r = ck__sti_slot(fn, op);

			if (count <= 0)
				n = 0;
			r->comm = c;
			r->dtype = t;
			r->rop = o;
			r->root = root;
			r->count = n;
			r->off = i * region;
			r->len = n * size;
			r->peer = inplace ? CK_W_INPLACE : 0;
			memcpy(ck__sti.ch.arena + r->off, in + next * size, n * size);
			ck_mpi_chan_post(&ck__sti.ch, r);
			q[i] = r;
			qn[i] = n;
			qat[i] = next;
			next += n;
			posted++;
		}
		{
			size_t i = waited % depth;

			one = ck__sti_wait(fn, q[i]);
			if (gets && one == MPI_SUCCESS && rc == MPI_SUCCESS)
				memcpy((char *)rbuf + qat[i] * size, ck__sti.ch.arena + q[i]->off + (inplace ? 0 : qn[i] * size),
				       qn[i] * size);
			if (rc == MPI_SUCCESS)
				rc = one;
			ck_mpi_chan_release(&ck__sti.ch, q[i]);
			waited++;
		}
	}
	ck__sti_unlock();
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
