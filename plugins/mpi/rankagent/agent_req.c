/* The program's nonblocking requests (ISEND, IRECV, IALLREDUCE) by the
 * number the stand-in picked, and how a cut carries them across a
 * checkpoint. A send completes during the cut (the receivers drain what is
 * in flight), and so does a nonblocking collective (the first phase brought
 * every member into it). A receive is cancelled in MPI and posted again
 * when the agent serves again: this agent after the round, or a new agent
 * after a restart, from the table the cut left in the channel (struct
 * ck_mpi_preq). A message that would have matched it meanwhile was drained
 * and is found first. A blocking WAIT or WAITANY is interrupted by the cut
 * like a blocking receive, and served again after it. */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

_Static_assert(CK_MAX_REQUESTS <= CK_MPI_PREQ_MAX, "the channel's table holds every request");

/* The real request until it completes, then its status until WAIT hands
 * it over. */
static struct {
	int used, done;
	int again; /* a receive the cut cancelled in MPI: to be posted again */
	unsigned op;
	int64_t drained_len; /* >= 0: done without MPI; st holds source, tag, error */
	MPI_Request req;
	MPI_Status st;
	struct ck_mpi_preq p; /* a receive's parameters, to post it again */
} reqs[CK_MAX_REQUESTS];
static uint64_t norder;
/* Set by a cut that cancelled receives, until they are posted again: the
 * control thread then owns reqs[] (the serving thread is held). */
static int cancelled;

static int req_ok(int id)
{
	return id >= 0 && id < CK_MAX_REQUESTS && reqs[id].used;
}

static void done_without_mpi(int id, int src, int tag, int err, uint64_t bytes)
{
	reqs[id].done = 1;
	reqs[id].req = MPI_REQUEST_NULL;
	memset(&reqs[id].st, 0, sizeof(reqs[id].st));
	reqs[id].st.MPI_SOURCE = src;
	reqs[id].st.MPI_TAG = tag;
	reqs[id].st.MPI_ERROR = err;
	reqs[id].drained_len = (int64_t)bytes;
}

/* COUNT elements of wire type DTYPE fit in LEN bytes of the arena at OFF
 * (the values come from the job's memory: the ring, or a restored table). */
static int fits(struct ck_mpi_chan *ch, int dtype, uint64_t count, uint64_t off, uint64_t len)
{
	int size = 0;

	if (MPI_Type_size(ck__agent_type(dtype), &size) != MPI_SUCCESS || size <= 0 || count > INT32_MAX)
		return 0;
	return count * (uint64_t)size <= len && ck__agent_in_arena(ch, off, len);
}

/* Receive ID into the arena: from the drain area first (a message a cut
 * took out of MPI is older than anything not yet received, and is done at
 * once, as a message already arrived would be), else from MPI. */
static int post_recv(struct ck_mpi_chan *ch, int id)
{
	const struct ck_mpi_preq *p = &reqs[id].p;
	int d = ck__drain_find(ch, p->comm, p->peer, p->tag), rc;
	MPI_Comm comm = ck__agent_comm(p->comm);

	reqs[id].again = 0;
	if (d >= 0) {
		struct ck_mpi_req a;

		memset(&a, 0, sizeof(a));
		rc = ck__drain_take(ch, d, p->off, p->len, &a);
		done_without_mpi(id, a.src, a.rtag, rc, a.rlen);
		return MPI_SUCCESS;
	}
	if (comm == MPI_COMM_NULL)
		return MPI_ERR_COMM;
	if (!fits(ch, p->dtype, p->count, p->off, p->len))
		return MPI_ERR_ARG;
	reqs[id].done = 0;
	reqs[id].drained_len = -1;
	return MPI_Irecv(ch->arena + p->off, (int)p->count, ck__agent_type(p->dtype), p->peer, p->tag, comm,
			 &reqs[id].req);
}

int ck__agent_req_start(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Comm comm, MPI_Datatype dt)
{
	int id = r->root, rc, inplace = r->peer & CK_W_INPLACE;

	if (id < 0 || id >= CK_MAX_REQUESTS || reqs[id].used)
		return MPI_ERR_REQUEST;
	if (!ck__agent_in_arena(ch, r->off, r->len) ||
	    (r->op != CK_W_IALLREDUCE && !fits(ch, r->dtype, r->count, r->off, r->len)))
		return MPI_ERR_ARG;
	reqs[id].op = r->op;
	reqs[id].done = reqs[id].again = 0;
	reqs[id].drained_len = -1;
	if (r->op == CK_W_IRECV) {
		reqs[id].p = (struct ck_mpi_preq){.op = r->op, .comm = r->comm, .dtype = r->dtype, .peer = r->peer,
						  .tag = r->tag, .count = r->count, .off = r->off, .len = r->len,
						  .order = ++norder, .key = ck__agent_key(r->comm)};
		rc = post_recv(ch, id);
	} else if (r->op == CK_W_IALLREDUCE) {
		rc = ck__agent_in_arena(ch, r->off, inplace ? r->len : 2 * r->len)
			     ? MPI_Iallreduce(inplace ? MPI_IN_PLACE : ch->arena + r->off,
					      ch->arena + r->off + (inplace ? 0 : r->len), (int)r->count, dt,
					      ck__agent_op(r->rop), comm, &reqs[id].req)
			     : MPI_ERR_ARG;
	} else {
		rc = MPI_Isend(ch->arena + r->off, (int)r->count, dt, r->peer, r->tag, comm, &reqs[id].req);
		if (rc == MPI_SUCCESS)
			ck__agent_count_send(r->peer);
	}
	if (rc == MPI_SUCCESS)
		reqs[id].used = 1;
	return rc;
}

static void completed(int id, const MPI_Status *st)
{
	reqs[id].done = 1;
	reqs[id].st = *st;
	if (reqs[id].op == CK_W_IRECV)
		ck__agent_count_recv(st->MPI_SOURCE);
}

/* MPI_Waitany that a cut interrupts (HELD: nothing completed). */
static int waitany_interruptibly(int n, MPI_Request *rq, int *idx, MPI_Status *st, int *held)
{
	int flag = 0, rc;

	for (int spin = 0;; spin++) {
		rc = MPI_Testany(n, rq, idx, &flag, st);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		if (ck__agent_holding()) {
			*held = 1;
			return MPI_SUCCESS;
		}
		if (spin > 1000)
			sched_yield();
	}
}

int ck__agent_req_complete(struct ck_mpi_req *r, int *held)
{
	MPI_Request rq[CK_W_MAX_IDS];
	MPI_Status st[CK_W_MAX_IDS];
	int32_t ids[CK_W_MAX_IDS];
	int n = r->op == CK_W_TEST ? 1 : (int)r->count, i, rc, idx = MPI_UNDEFINED, flag = 0;

	if (n < 0 || n > CK_W_MAX_IDS)
		return MPI_ERR_COUNT;
	if (r->op == CK_W_TEST)
		ids[0] = r->root;
	else
		memcpy(ids, r->inl, (size_t)n * sizeof(ids[0]));
	for (i = 0; i < n; i++) {
		if (!req_ok(ids[i]))
			return MPI_ERR_REQUEST;
		rq[i] = reqs[ids[i]].done ? MPI_REQUEST_NULL : reqs[ids[i]].req;
	}
	/* One done already (and not handed over): the answer, without the
	 * real call (Waitany over the others could block). */
	for (i = 0; r->op != CK_W_TESTALL && i < n; i++)
		if (reqs[ids[i]].done) {
			r->flag = r->op == CK_W_TEST ? 1 : i;
			return MPI_SUCCESS;
		}
	switch (r->op) {
	case CK_W_TEST: rc = MPI_Test(&rq[0], &flag, &st[0]); idx = flag ? 0 : MPI_UNDEFINED; break;
	case CK_W_TESTALL: rc = MPI_Testall(n, rq, &flag, st); break;
	case CK_W_WAITANY:
		rc = waitany_interruptibly(n, rq, &idx, st, held);
		if (*held)
			return MPI_SUCCESS;
		break;
	default: rc = MPI_Testany(n, rq, &idx, &flag, st); break;
	}
	if (rc != MPI_SUCCESS)
		return rc;
	for (i = 0; i < n; i++) {
		int now = r->op == CK_W_TESTALL ? flag : i == idx;

		if (now && !reqs[ids[i]].done)
			completed(ids[i], r->op == CK_W_TESTALL ? &st[i] : &st[0]);
	}
	r->flag = r->op == CK_W_TEST || r->op == CK_W_TESTALL ? flag : idx;
	return MPI_SUCCESS;
}

int ck__agent_req_wait(struct ck_mpi_req *r, int *held)
{
	int id = r->root, rc = MPI_SUCCESS, flag = 0;
	MPI_Status st;

	if (!req_ok(id))
		return MPI_ERR_REQUEST;
	for (int spin = 0; !reqs[id].done; spin++) {
		rc = MPI_Test(&reqs[id].req, &flag, &st);
		if (rc != MPI_SUCCESS)
			break;
		if (flag) {
			completed(id, &st);
			break;
		}
		if (ck__agent_holding()) {
			*held = 1;
			return MPI_SUCCESS;
		}
		if (spin > 1000)
			sched_yield();
	}
	if (rc == MPI_SUCCESS)
		ck__agent_answer_status(r, &reqs[id].st);
	if (reqs[id].drained_len >= 0) {
		r->rlen = (uint64_t)reqs[id].drained_len;
		rc = reqs[id].st.MPI_ERROR;
	}
	reqs[id].used = 0;
	return rc;
}

int ck__agent_req_carry(struct ck_mpi_chan *ch)
{
	int waiting = 0;

	for (int id = 0; id < CK_MAX_REQUESTS; id++) {
		MPI_Status st;
		int flag = 0;

		if (!reqs[id].used || reqs[id].done || reqs[id].again)
			continue;
		if (reqs[id].op == CK_W_IRECV) {
			/* Its communicator freed (legal while a receive waits):
			 * its number may be another's by the time it would be
			 * posted again; left in MPI, the cut fails. */
			if (ck__agent_key(reqs[id].p.comm) != reqs[id].p.key)
				return -1;
			/* cancelled, or it had matched a message: then done */
			MPI_Cancel(&reqs[id].req);
			MPI_Wait(&reqs[id].req, &st);
			MPI_Test_cancelled(&st, &flag);
			if (flag) {
				reqs[id].again = 1;
				__atomic_store_n(&cancelled, 1, __ATOMIC_SEQ_CST);
			} else
				completed(id, &st);
		} else if (MPI_Test(&reqs[id].req, &flag, &st) == MPI_SUCCESS && flag) {
			completed(id, &st);
		} else {
			waiting = 1;
		}
	}
	if (waiting)
		return 1;
	for (int id = 0; id < CK_MAX_REQUESTS; id++) {
		struct ck_mpi_preq *e = &ch->h->preq[id];
		int bytes = 0;

		memset(e, 0, sizeof(*e));
		if (!reqs[id].used)
			continue;
		e->op = reqs[id].op;
		if (reqs[id].again) {
			*e = reqs[id].p;
			e->state = CK_PREQ_POST_AGAIN;
			continue;
		}
		e->state = CK_PREQ_DONE;
		e->src = reqs[id].st.MPI_SOURCE;
		e->rtag = reqs[id].st.MPI_TAG;
		/* MPI leaves MPI_ERROR unset on a success */
		e->err = reqs[id].drained_len >= 0 ? reqs[id].st.MPI_ERROR : MPI_SUCCESS;
		if (reqs[id].drained_len >= 0)
			e->rlen = (uint64_t)reqs[id].drained_len;
		else if (reqs[id].op == CK_W_IRECV && MPI_Get_count(&reqs[id].st, MPI_BYTE, &bytes) == MPI_SUCCESS)
			e->rlen = (uint64_t)bytes;
	}
	return 0;
}

int ck__agent_req_carried(int *again)
{
	int n = 0;

	*again = 0;
	for (int id = 0; id < CK_MAX_REQUESTS; id++) {
		n += reqs[id].used;
		*again += reqs[id].used && reqs[id].again;
	}
	return n;
}

/* In the order the program posted them: MPI matches receives of one
 * sender and tag in that order. One that cannot be posted again is done
 * with the error, which its wait reports (never an empty success). */
static int post_again_all(struct ck_mpi_chan *ch)
{
	int rc = MPI_SUCCESS, r;

	for (;;) {
		int first = -1;

		for (int id = 0; id < CK_MAX_REQUESTS; id++)
			if (reqs[id].used && reqs[id].again && (first < 0 || reqs[id].p.order < reqs[first].p.order))
				first = id;
		if (first < 0)
			return rc;
		if ((r = post_recv(ch, first)) != MPI_SUCCESS) {
			reqs[first].again = 0;
			done_without_mpi(first, MPI_ANY_SOURCE, MPI_ANY_TAG, r, 0);
			rc = r;
		}
	}
}

int ck__agent_req_again(struct ck_mpi_chan *ch)
{
	if (!__atomic_exchange_n(&cancelled, 0, __ATOMIC_SEQ_CST))
		return MPI_SUCCESS; /* nothing cancelled: reqs[] may be the serving thread's */
	return post_again_all(ch);
}

int ck__agent_req_restore(struct ck_mpi_chan *ch)
{
	for (int id = 0; id < CK_MAX_REQUESTS; id++) {
		const struct ck_mpi_preq *e = &ch->h->preq[id];

		memset(&reqs[id], 0, sizeof(reqs[id]));
		reqs[id].req = MPI_REQUEST_NULL;
		if ((e->state != CK_PREQ_DONE && e->state != CK_PREQ_POST_AGAIN) ||
		    (e->op != CK_W_ISEND && e->op != CK_W_IRECV && e->op != CK_W_IALLREDUCE) ||
		    (e->state == CK_PREQ_POST_AGAIN && e->op != CK_W_IRECV))
			continue;
		reqs[id].used = 1;
		reqs[id].op = e->op;
		if (e->state == CK_PREQ_DONE) {
			done_without_mpi(id, e->src, e->rtag, e->err, e->rlen);
			continue;
		}
		reqs[id].again = 1;
		reqs[id].drained_len = -1;
		reqs[id].p = *e;
		if (e->order > norder)
			norder = e->order;
	}
	return post_again_all(ch);
}
