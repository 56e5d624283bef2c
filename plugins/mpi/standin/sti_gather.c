/* Gathers and scatters through the agent, whole (no segments: a transfer
 * that does not fit the arena fails in one line). The arena holds the send
 * block, the count and displacement vectors of a -v call, and the receive
 * block laid out as in the program's buffer; only the blocks MPI writes are
 * copied back (the gaps of a -v receive buffer stay the program's). */
#include <string.h>

#include "plugins/mpi/standin/sti.h"

#define ALIGN(x) (((x) + 63) & ~(uint64_t)63)

struct side {
	const void *sbuf;
	void *rbuf;
	int scount, rcount;
	MPI_Datatype stype, rtype;
	const int *counts, *displs; /* the -v side's vectors, or NULL */
	int vec_on_recv;            /* vectors describe the receive buffer */
};

static void need(const char *fn, uint64_t end)
{
	if (end > ck__sti.scratch)
		ck__sti_die(fn, "%llu bytes exceed the blocking half of the agent's arena (%zu bytes; CKPT_MPI_ARENA)",
			    (unsigned long long)end, ck__sti.scratch);
}

/* Extent in elements of a -v buffer: the end of its furthest block. */
static uint64_t vec_extent(const int *counts, const int *displs, int n)
{
	uint64_t e = 0;

	for (int i = 0; i < n; i++)
		if (counts[i] > 0 && (uint64_t)(displs[i] + counts[i]) > e)
			e = (uint64_t)(displs[i] + counts[i]);
	return e;
}

/* ROOT < 0: every rank receives (all-variants). SEND_ALL/RECV_ALL: how many
 * blocks the send and receive buffers hold at the ranks that use them. */
static int vcall(const char *fn, unsigned op, struct side *s, int root, MPI_Comm comm, int send_all,
		 int recv_all)
{
	int c, n, me, rc, inplace = s->sbuf == MPI_IN_PLACE || s->rbuf == MPI_IN_PLACE;
	int is_root, sends, recvs;
	size_t ssize = 0, rsize = 0;
	uint64_t sbytes, rbytes, off = 64; /* 0 means "no vectors" */
	struct ck_w_vec v;
	struct ck_mpi_req *r;
	uint8_t *a = ck__sti.ch.arena;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	n = ck__sti_comm_size(c);
	me = ck__sti_comm_rank(c);
	is_root = root < 0 || me == root;
	memset(&v, 0, sizeof(v));
	/* Which buffers this rank uses: gathers send everywhere and receive at
	 * the root, scatters the other way round. */
	sends = send_all ? is_root : 1;
	recvs = recv_all ? is_root : 1;
	if (root < 0)
		sends = recvs = 1;
	if (sends && s->sbuf != MPI_IN_PLACE)
		v.stype = ck__sti_type(fn, s->stype, &ssize);
	if (recvs && s->rbuf != MPI_IN_PLACE)
		v.rtype = ck__sti_type(fn, s->rtype, &rsize);
	v.scount = s->scount;
	v.rcount = s->rcount;
	v.inplace = inplace;
	if (!sends || s->sbuf == MPI_IN_PLACE)
		sbytes = 0;
	else if (s->counts && !s->vec_on_recv)
		sbytes = vec_extent(s->counts, s->displs, n) * ssize;
	else
		sbytes = (uint64_t)s->scount * ssize * (uint64_t)(send_all ? n : 1);
	if (!recvs || s->rbuf == MPI_IN_PLACE)
		rbytes = 0;
	else if (s->counts && s->vec_on_recv)
		rbytes = vec_extent(s->counts, s->displs, n) * rsize;
	else
		rbytes = (uint64_t)s->rcount * rsize * (uint64_t)(recv_all ? n : 1);
	/* In place: the data lives in the buffer that is not MPI_IN_PLACE. */
	if (s->sbuf == MPI_IN_PLACE)
		rbytes = s->counts ? vec_extent(s->counts, s->displs, n) * rsize : (uint64_t)s->rcount * rsize * (uint64_t)n;
	v.soff = off;
	off = ALIGN(off + sbytes);
	if (s->counts && ((s->vec_on_recv && recvs) || (!s->vec_on_recv && sends))) {
		v.cnt = off;
		v.dsp = ALIGN(off + (uint64_t)n * sizeof(int));
		off = ALIGN(v.dsp + (uint64_t)n * sizeof(int));
	}
	v.roff = off;
	need(fn, off + rbytes);
	if (sbytes)
		memcpy(a + v.soff, s->sbuf, sbytes);
	if (v.cnt) {
		memcpy(a + v.cnt, s->counts, (size_t)n * sizeof(int));
		memcpy(a + v.dsp, s->displs, (size_t)n * sizeof(int));
	}
	if (inplace && s->rbuf != MPI_IN_PLACE && rbytes)
		memcpy(a + v.roff, s->rbuf, rbytes);
	r = ck__sti_begin(fn, op);
	r->comm = c;
	r->root = root;
	memcpy(r->inl, &v, sizeof(v));
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS && rbytes && s->rbuf != MPI_IN_PLACE) {
		if (s->counts && s->vec_on_recv)
			for (int i = 0; i < n; i++)
				memcpy((char *)s->rbuf + (size_t)s->displs[i] * rsize,
				       a + v.roff + (size_t)s->displs[i] * rsize, (size_t)s->counts[i] * rsize);
		else
			memcpy(s->rbuf, a + v.roff, rbytes);
	}
	ck__sti_end(r);
	return rc;
}

int MPI_Gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{
	struct side s = { sb, rb, sc, rc, st, rt, NULL, NULL, 1 };

	return vcall("MPI_Gather", CK_W_GATHER, &s, root, comm, 0, 1);
}

int MPI_Gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int dsp[], MPI_Datatype rt,
		int root, MPI_Comm comm)
{
	struct side s = { sb, rb, sc, 0, st, rt, rcs, dsp, 1 };

	return vcall("MPI_Gatherv", CK_W_GATHERV, &s, root, comm, 0, 1);
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
	struct side s = { sb, rb, sc, rc, st, rt, NULL, NULL, 1 };

	return vcall("MPI_Allgather", CK_W_ALLGATHER, &s, -1, comm, 0, 1);
}

int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int dsp[],
		   MPI_Datatype rt, MPI_Comm comm)
{
	struct side s = { sb, rb, sc, 0, st, rt, rcs, dsp, 1 };

	return vcall("MPI_Allgatherv", CK_W_ALLGATHERV, &s, -1, comm, 0, 1);
}

int MPI_Scatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{
	struct side s = { sb, rb, sc, rc, st, rt, NULL, NULL, 0 };

	return vcall("MPI_Scatter", CK_W_SCATTER, &s, root, comm, 1, 0);
}

int MPI_Scatterv(const void *sb, const int scs[], const int dsp[], MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
		 int root, MPI_Comm comm)
{
	struct side s = { sb, rb, 0, rc, st, rt, scs, dsp, 0 };

	return vcall("MPI_Scatterv", CK_W_SCATTERV, &s, root, comm, 1, 0);
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
	struct side s = { sb, rb, sc, rc, st, rt, NULL, NULL, 1 };
	int c = ck__sti_comm("MPI_Alltoall", comm);

	if (sb == MPI_IN_PLACE)
		ck__sti_die("MPI_Alltoall", "MPI_IN_PLACE is not supported");
	/* Every rank sends N blocks and receives N: a gather everywhere. */
	(void)c;
	return vcall("MPI_Alltoall", CK_W_ALLTOALL, &s, -1, comm, 1, 1);
}

/* Places N ints at *OFF in the arena; returns where. */
static uint64_t put_ints(uint64_t *off, const int *v, int n)
{
	uint64_t at = *off;

	memcpy(ck__sti.ch.arena + at, v, (size_t)n * sizeof(int));
	*off = ALIGN(at + (uint64_t)n * sizeof(int));
	return at;
}

int MPI_Reduce_scatter(const void *sb, void *rb, const int rcounts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	const char *fn = "MPI_Reduce_scatter";
	int c, n, me, rc, inplace = sb == MPI_IN_PLACE;
	uint64_t total = 0, off = 64;
	struct ck_w_vec2 v;
	struct ck_mpi_req *r;
	size_t size;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	n = ck__sti_comm_size(c);
	me = ck__sti_comm_rank(c);
	memset(&v, 0, sizeof(v));
	r = ck__sti_begin(fn, CK_W_REDUCE_SCATTER);
	r->dtype = ck__sti_type(fn, dt, &size);
	r->rop = ck__sti_op(fn, op);
	for (int i = 0; i < n; i++)
		total += (uint64_t)rcounts[i];
	need(fn, off + 2 * total * size + (uint64_t)n * sizeof(int) + 256);
	v.scnt = put_ints(&off, rcounts, n);
	v.soff = off;
	memcpy(ck__sti.ch.arena + v.soff, inplace ? rb : sb, total * size);
	/* In place: the result is the first block of the input buffer. */
	v.roff = inplace ? v.soff : ALIGN(v.soff + total * size);
	r->comm = c;
	r->peer = inplace ? CK_W_INPLACE : 0;
	memcpy(r->inl, &v, sizeof(v));
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS)
		memcpy(rb, ck__sti.ch.arena + v.roff, (size_t)rcounts[me] * size);
	ck__sti_end(r);
	return rc;
}

int MPI_Alltoallv(const void *sb, const int scounts[], const int sdispls[], MPI_Datatype st, void *rb,
		  const int rcounts[], const int rdispls[], MPI_Datatype rt, MPI_Comm comm)
{
	const char *fn = "MPI_Alltoallv";
	uint64_t sext, rext, off = 64;
	struct ck_w_vec2 v;
	struct ck_mpi_req *r;
	size_t ss, rs;
	int c, n, rc;

	ck__sti_need_init(fn);
	if (sb == MPI_IN_PLACE)
		ck__sti_die(fn, "MPI_IN_PLACE is not supported");
	c = ck__sti_comm(fn, comm);
	n = ck__sti_comm_size(c);
	memset(&v, 0, sizeof(v));
	v.stype = ck__sti_type(fn, st, &ss);
	v.rtype = ck__sti_type(fn, rt, &rs);
	sext = vec_extent(scounts, sdispls, n) * ss;
	rext = vec_extent(rcounts, rdispls, n) * rs;
	need(fn, off + sext + rext + 4 * ((uint64_t)n * sizeof(int) + 64) + 128);
	v.scnt = put_ints(&off, scounts, n);
	v.sdsp = put_ints(&off, sdispls, n);
	v.rcnt = put_ints(&off, rcounts, n);
	v.rdsp = put_ints(&off, rdispls, n);
	v.soff = off;
	memcpy(ck__sti.ch.arena + v.soff, sb, sext);
	v.roff = ALIGN(v.soff + sext);
	r = ck__sti_begin(fn, CK_W_ALLTOALLV);
	r->comm = c;
	memcpy(r->inl, &v, sizeof(v));
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS)
		for (int i = 0; i < n; i++) /* the blocks only: gaps stay the program's */
			memcpy((char *)rb + (size_t)rdispls[i] * rs, ck__sti.ch.arena + v.roff + (size_t)rdispls[i] * rs,
			       (size_t)rcounts[i] * rs);
	ck__sti_end(r);
	return rc;
}
