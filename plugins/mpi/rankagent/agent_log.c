/* Compaction of the log of communicators (the channel's header): a program
 * that dups and frees communicators in a loop would fill it, and a restart
 * could not replay it any more.
 *
 * A creation can leave the log only with its free, and only where every
 * member of its parent drops it: a restarted agent replays the creations
 * that remain, and each is a collective over the parent, so all members
 * must replay the same ones. A member's creation is identified by the
 * parent's key and the parent's creation count at that point (the same on
 * every member: MPI orders creations on a communicator). Locally, one can
 * go when the communicator was freed and every creation under it can go
 * too (a child may outlive its parent, whose creation it needs). The cut,
 * once it holds (the serving thread idle or held: the log does not change),
 * runs this on every agent at the same point: the members' views are
 * gathered, and a creation goes where no member wants it kept. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

struct ck__logview {
	uint64_t pkey;
	uint32_t cidx, drop;
};

/* Local view: drop[i] for each creation i of the log (1: freed here, and
 * so is everything made from it), freed[i] the index of its free. One
 * pass forward finds each creation's free and the creation its parent
 * came from (a number is reused only once freed); one backward, where a
 * kept creation keeps its parent's. */
static void local_view(const struct ck_mpi_log_ent *log, uint32_t n, uint8_t *drop, int32_t *freed)
{
	static int32_t alive[CK_MAX_COMMS], from[CK_MPI_LOG_MAX];
	static uint8_t kept_child[CK_MPI_LOG_MAX];

	for (int c = 0; c < CK_MAX_COMMS; c++)
		alive[c] = -1;
	for (uint32_t k = 0; k < n; k++) {
		const struct ck_mpi_log_ent *e = &log[k];
		int ok = e->id >= 0 && e->id < CK_MAX_COMMS;

		freed[k] = -1;
		from[k] = -1;
		kept_child[k] = 0;
		if (e->op == CK_W_COMM_FREE) {
			if (ok && alive[e->id] >= 0)
				freed[alive[e->id]] = (int32_t)k;
			if (ok)
				alive[e->id] = -1;
			continue;
		}
		if (e->parent >= 0 && e->parent < CK_MAX_COMMS)
			from[k] = alive[e->parent]; /* -1: a predefined one */
		if (!e->none && ok)
			alive[e->id] = (int32_t)k;
	}
	for (uint32_t k = n; k-- > 0;) {
		const struct ck_mpi_log_ent *e = &log[k];

		drop[k] = 0;
		if (e->op == CK_W_COMM_FREE)
			continue;
		/* nothing was made here (what the others say decides), or
		 * freed with everything made from it */
		drop[k] = e->none || (freed[k] >= 0 && !kept_child[k]);
		if (!drop[k] && from[k] >= 0)
			kept_child[from[k]] = 1;
	}
}

static int view_cmp(const void *a, const void *b)
{
	const struct ck__logview *x = a, *y = b;

	if (x->pkey != y->pkey)
		return x->pkey < y->pkey ? -1 : 1;
	return x->cidx < y->cidx ? -1 : x->cidx > y->cidx;
}

static void no_memory(void)
{
	fprintf(stderr, "ckmpi-agent: out of memory compacting the log of communicators\n");
	MPI_Abort(MPI_COMM_WORLD, 71);
}

int ck__agent_log_compact(struct ck_mpi_chan *ch, MPI_Comm ctl, int size, uint32_t *dropped)
{
	struct ck_mpi_chan_hdr *h = ch->h;
	uint32_t n = h->log_n < CK_MPI_LOG_MAX ? h->log_n : CK_MPI_LOG_MAX, m = 0, nmine = 0;
	int most = (int)n, rc = MPI_SUCCESS, *counts = NULL, *displs = NULL, total = 0, me = 0;
	static uint8_t drop[CK_MPI_LOG_MAX], gone[CK_MPI_LOG_MAX];
	static int32_t freed[CK_MPI_LOG_MAX];
	static struct ck__logview mine[CK_MPI_LOG_MAX];
	struct ck__logview *all = NULL;

	*dropped = 0;
	/* every agent takes the same branches: decided by reduced values */
	MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT, MPI_MAX, ctl);
	if (most < CK_MPI_LOG_COMPACT)
		return MPI_SUCCESS;
	local_view(h->log, n, drop, freed);
	for (uint32_t k = 0; k < n; k++)
		if (h->log[k].op != CK_W_COMM_FREE)
			mine[nmine++] = (struct ck__logview){.pkey = h->log[k].pkey, .cidx = h->log[k].cidx, .drop = drop[k]};
	counts = calloc((size_t)size, sizeof(int));
	displs = calloc((size_t)size, sizeof(int));
	if (!counts || !displs)
		no_memory(); /* (the others are in the collectives below) */
	MPI_Comm_rank(ctl, &me);
	counts[me] = (int)(nmine * sizeof(mine[0]));
	MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, counts, 1, MPI_INT, ctl);
	for (int r = 0; r < size; r++) {
		displs[r] = total;
		total += counts[r];
	}
	all = malloc((size_t)total + 1);
	if (!all)
		no_memory();
	rc = MPI_Allgatherv(mine, (int)(nmine * sizeof(mine[0])), MPI_BYTE, all, counts, displs, MPI_BYTE, ctl);
	if (rc != MPI_SUCCESS)
		goto out;
	{
		/* the calls some member keeps, sorted: each candidate looked up */
		size_t nall = (size_t)total / sizeof(all[0]), nkeep = 0;
		for (size_t j = 0; j < nall; j++)
			if (!all[j].drop)
				all[nkeep++] = all[j];
		qsort(all, nkeep, sizeof(all[0]), view_cmp);
		memset(gone, 0, n);
		for (uint32_t k = 0; k < n; k++) {
			const struct ck_mpi_log_ent *e = &h->log[k];
			struct ck__logview q = {.pkey = e->pkey, .cidx = e->cidx};
			if (e->op == CK_W_COMM_FREE || !drop[k] || bsearch(&q, all, nkeep, sizeof(all[0]), view_cmp))
				continue;
			gone[k] = 1;
			if (freed[k] >= 0)
				gone[freed[k]] = 1;
		}
	}
	for (uint32_t k = 0; k < n; k++)
		if (!gone[k])
			h->log[m++] = h->log[k];
	*dropped = n - m;
	__atomic_store_n(&h->log_n, m, __ATOMIC_SEQ_CST);
out:
	free(all);
	free(counts);
	free(displs);
	return rc;
}
