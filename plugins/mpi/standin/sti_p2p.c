/* Point-to-point through the agent (blocking calls). A message goes through
 * the arena whole: one larger than the arena fails in one line rather than
 * being cut (segments of concurrent senders could interleave at a receiver
 * that takes MPI_ANY_SOURCE). */
#include <string.h>

#include "plugins/mpi/standin/sti.h"

static size_t fits(const char *fn, int count, size_t size)
{
	size_t len = (size_t)(count < 0 ? 0 : count) * size;

	if (len > ck__sti.scratch)
		ck__sti_die(fn, "a message of %zu bytes exceeds the blocking half of the agent's arena (%zu bytes; CKPT_MPI_ARENA)", len,
			    ck__sti.scratch);
	return len;
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
	const char *fn = "MPI_Send";
	struct ck__tinfo ti;
	struct ck_mpi_req *r;
	size_t len;
	int rc;

	ck__sti_need_init(fn);
	ck__sti_tinfo(fn, dt, &ti);
	len = fits(fn, count, ti.size);
	r = ck__sti_begin(fn, CK_W_SEND);
	r->comm = ck__sti_comm(fn, comm);
	r->dtype = ti.wire;
	r->count = (uint64_t)count * (uint64_t)ti.nbase;
	r->peer = dest;
	r->tag = tag;
	r->len = len;
	ck__sti_pack(ck__sti.ch.arena, buf, (size_t)count, &ti);
	rc = ck__sti_call(fn, r);
	ck__sti_end(r);
	return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	const char *fn = "MPI_Recv";
	struct ck__tinfo ti;
	struct ck_mpi_req *r;
	size_t len;
	int rc;

	ck__sti_need_init(fn);
	ck__sti_tinfo(fn, dt, &ti);
	len = fits(fn, count, ti.size);
	r = ck__sti_begin(fn, CK_W_RECV);
	r->comm = ck__sti_comm(fn, comm);
	r->dtype = ti.wire;
	r->count = (uint64_t)count * (uint64_t)ti.nbase;
	r->peer = source;
	r->tag = tag;
	r->len = len;
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS)
		ck__sti_unpack(buf, ck__sti.ch.arena, r->rlen < len ? r->rlen : len, &ti);
	if (status != MPI_STATUS_IGNORE) {
		status->MPI_SOURCE = r->src;
		status->MPI_TAG = r->rtag;
		status->MPI_ERROR = rc;
		status->_cancelled = 0;
		status->_ucount = r->rlen;
	}
	ck__sti_end(r);
	return rc;
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype dt, int *count)
{
	struct ck__tinfo ti;
	size_t size;

	ck__sti_tinfo("MPI_Get_count", dt, &ti);
	size = ti.size;
	if (!size) {
		*count = 0;
		return MPI_SUCCESS;
	}
	*count = status->_ucount % size ? MPI_UNDEFINED : (int)(status->_ucount / size);
	return MPI_SUCCESS;
}
