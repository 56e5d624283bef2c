/* Probes. A matched probe's message stays in the agent under a number this
 * library picks; the program's MPI_Message handle is an object here that
 * holds it (MPI_Mrecv gives it back). */
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

struct ck__msg {
	int id;
};

static struct ck__msg *msgs[CK_MAX_MESSAGES];

static void fill(MPI_Status *status, const struct ck_mpi_req *r, int rc)
{
	if (status == MPI_STATUS_IGNORE)
		return;
	status->MPI_SOURCE = r->src;
	status->MPI_TAG = r->rtag;
	status->MPI_ERROR = rc;
	status->_cancelled = 0;
	status->_ucount = r->rlen;
}

/* OP with FLAG (NULL: blocking) and MSG (NULL: not matched). */
static int probe(const char *fn, unsigned op, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg,
		 MPI_Status *status)
{
	struct ck_mpi_req *r;
	int rc, id = -1;

	ck__sti_need_init(fn);
	if (msg) {
		for (int i = 0; i < CK_MAX_MESSAGES && id < 0; i++)
			if (!msgs[i])
				id = i;
		if (id < 0)
			ck__sti_die(fn, "more than %d probed messages not received", CK_MAX_MESSAGES);
	}
	r = ck__sti_begin(fn, op);
	r->comm = ck__sti_comm(fn, comm);
	r->peer = source;
	r->tag = tag;
	r->count = (uint64_t)(id < 0 ? 0 : id);
	rc = ck__sti_call(fn, r);
	if (flag)
		*flag = rc == MPI_SUCCESS && r->root;
	if (rc == MPI_SUCCESS && r->root) {
		fill(status, r, rc);
		if (msg && source == MPI_PROC_NULL) {
			*msg = MPI_MESSAGE_NO_PROC;
		} else if (msg) {
			msgs[id] = malloc(sizeof(*msgs[id]));
			if (!msgs[id])
				ck__sti_die(fn, "out of memory");
			msgs[id]->id = id;
			*msg = (MPI_Message)(void *)msgs[id];
		}
	} else if (msg) {
		*msg = MPI_MESSAGE_NULL;
	}
	ck__sti_end(r);
	return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	return probe("MPI_Probe", CK_W_PROBE, source, tag, comm, NULL, NULL, status);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
	return probe("MPI_Iprobe", CK_W_IPROBE, source, tag, comm, flag, NULL, status);
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *status)
{
	return probe("MPI_Mprobe", CK_W_MPROBE, source, tag, comm, NULL, msg, status);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg, MPI_Status *status)
{
	return probe("MPI_Improbe", CK_W_IMPROBE, source, tag, comm, flag, msg, status);
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Status *status)
{
	const char *fn = "MPI_Mrecv";
	struct ck_mpi_req *r;
	size_t size, len;
	int id = -1, rc;

	ck__sti_need_init(fn);
	if (*msg == MPI_MESSAGE_NO_PROC) { /* from MPI_PROC_NULL: empty, at once */
		if (status != MPI_STATUS_IGNORE) {
			memset(status, 0, sizeof(*status));
			status->MPI_SOURCE = MPI_PROC_NULL;
			status->MPI_TAG = MPI_ANY_TAG;
		}
		*msg = MPI_MESSAGE_NULL;
		return MPI_SUCCESS;
	}
	for (int i = 0; i < CK_MAX_MESSAGES && id < 0; i++)
		if (msgs[i] && (void *)msgs[i] == (void *)*msg)
			id = i;
	if (id < 0)
		ck__sti_die(fn, "message %p is not one a matched probe returned", (void *)*msg);
	r = ck__sti_begin(fn, CK_W_MRECV);
	r->dtype = ck__sti_type(fn, dt, &size);
	len = (size_t)(count < 0 ? 0 : count) * size;
	if (len > ck__sti.scratch)
		ck__sti_die(fn, "a message of %zu bytes exceeds the blocking half of the agent's arena (%zu bytes; CKPT_MPI_ARENA)", len,
			    ck__sti.scratch);
	r->count = (uint64_t)id;
	r->peer = count;
	r->len = len;
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS)
		memcpy(buf, ck__sti.ch.arena, r->rlen < len ? r->rlen : len);
	fill(status, r, rc);
	ck__sti_end(r);
	free(msgs[id]);
	msgs[id] = NULL;
	*msg = MPI_MESSAGE_NULL;
	return rc;
}
