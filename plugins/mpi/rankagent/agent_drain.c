/* Messages in flight at a cut: the agents take them out of MPI (every
 * request of every rank held, so the cut can hold with nothing in
 * flight) and keep them in the channel's drain area, which travels in the
 * checkpoint with the program. A receive, probe or matched probe of the
 * program looks there first: a drained message from a sender is older than
 * any that sender sends later (MPI's order per sender and communicator). */
#include <errno.h>
#include <mpi.h>
#include <string.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

static int matches(const struct ck_mpi_drained *d, int comm, int src, int tag)
{
	return !d->taken && d->comm == comm && (src == MPI_ANY_SOURCE || src == d->src) &&
	       (tag == MPI_ANY_TAG || tag == d->tag);
}

int ck__drain_find(struct ck_mpi_chan *ch, int comm, int src, int tag)
{
	struct ck_mpi_chan_hdr *h = ch->h;
	uint32_t n = __atomic_load_n(&h->ndrained, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < n && i < CK_MPI_DRAIN_MAX; i++)
		if (matches(&h->drained[i], comm, src, tag))
			return (int)i;
	return -1;
}

void ck__drain_status(struct ck_mpi_chan *ch, int i, struct ck_mpi_req *r)
{
	const struct ck_mpi_drained *d = &ch->h->drained[i];

	r->src = d->src;
	r->rtag = d->tag;
	r->rlen = d->len;
}

void ck__drain_claim(struct ck_mpi_chan *ch, int i)
{
	__atomic_store_n(&ch->h->drained[i].taken, 2, __ATOMIC_RELEASE);
}

/* Taken messages leave the area, the others keep their order (offsets
 * ascend with the index). Not while a matched probe holds one: its number
 * is an index (and the cut fails then anyway). */
static void compact(struct ck_mpi_chan *ch)
{
	struct ck_mpi_chan_hdr *h = ch->h;
	uint32_t n = 0;
	uint64_t used = 0;

	for (uint32_t i = 0; i < h->ndrained; i++)
		if (h->drained[i].taken == 2)
			return;
	for (uint32_t i = 0; i < h->ndrained; i++) {
		struct ck_mpi_drained e = h->drained[i];

		if (e.taken)
			continue;
		memmove(ch->drain + used, ch->drain + e.off, e.len);
		e.off = used;
		used += (e.len + 63) & ~63ull;
		h->drained[n++] = e;
	}
	h->drain_used = used < h->drain_len ? used : h->drain_len;
	__atomic_store_n(&h->ndrained, n, __ATOMIC_RELEASE);
}

int ck__drain_take(struct ck_mpi_chan *ch, int i, uint64_t off, uint64_t cap, struct ck_mpi_req *r)
{
	struct ck_mpi_drained *d = &ch->h->drained[i];
	uint64_t n = d->len < cap ? d->len : cap;

	if (off > ch->arena_len || n > ch->arena_len - off || d->off > ch->h->drain_len ||
	    n > ch->h->drain_len - d->off) /* the index is in the job's memory */
		return MPI_ERR_ARG;
	memcpy(ch->arena + off, ch->drain + d->off, n);
	ck__drain_status(ch, i, r);
	r->rlen = n;
	__atomic_store_n(&d->taken, 1, __ATOMIC_RELEASE);
	return d->len > cap ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
}

int ck__agent_drain(struct ck_mpi_chan *ch)
{
	struct ck_mpi_chan_hdr *h = ch->h;

	compact(ch);
	for (int c = 0; c < CK_MAX_COMMS; c++) {
		MPI_Comm comm = ck__agent_comm(c);
		MPI_Message m;
		MPI_Status st;
		int found = 1, bytes = 0;

		if (comm == MPI_COMM_NULL)
			continue;
		while (found) {
			struct ck_mpi_drained *d;

			/* its size first: one that does not fit stays in MPI */
			if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &found, &st) != MPI_SUCCESS)
				return -EIO;
			if (!found)
				break;
			MPI_Get_count(&st, MPI_BYTE, &bytes);
			if (h->ndrained >= CK_MPI_DRAIN_MAX || (uint64_t)bytes > h->drain_len - h->drain_used)
				return -ENOSPC;
			/* the same message: the first from that sender with that tag */
			if (MPI_Improbe(st.MPI_SOURCE, st.MPI_TAG, comm, &found, &m, &st) != MPI_SUCCESS || !found)
				return -EIO;
			MPI_Get_count(&st, MPI_BYTE, &bytes);
			d = &h->drained[h->ndrained];
			d->comm = c;
			d->src = st.MPI_SOURCE;
			d->tag = st.MPI_TAG;
			d->off = h->drain_used;
			d->len = (uint64_t)bytes;
			d->taken = 0; /* seen by receives once ndrained counts it */
			if (MPI_Mrecv(ch->drain + d->off, bytes, MPI_BYTE, &m, &st) != MPI_SUCCESS)
				return -EIO;
			h->drain_used += ((uint64_t)bytes + 63) & ~63ull;
			if (h->drain_used > h->drain_len)
				h->drain_used = h->drain_len;
			__atomic_store_n(&h->ndrained, h->ndrained + 1, __ATOMIC_RELEASE);
			ck__agent_count_recv(st.MPI_SOURCE);
		}
	}
	return 0;
}
