/* The agent's half of each request: the real MPI call on arena memory. The
 * wire numbers of mpi_wire.h map to the real predefined handles through the
 * same ompi_mpi_* names the stand-in uses. Errors are the real library's
 * (MPI_ERRORS_ARE_FATAL on the job's communicators, as in a bare run). */
#include <mpi.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

#define COMM_H(n) (MPI_Comm) & ompi_mpi_##n,
#define TYPE_H(n, s) (MPI_Datatype) & ompi_mpi_##n,
#define OP_H(n) (MPI_Op) & ompi_mpi_##n,
#define EH_H(n) (MPI_Errhandler) & ompi_mpi_##n,

/* The real communicators by wire number: the predefined ones, then those
 * the program made. */
static MPI_Comm comms[CK_MAX_COMMS] = { CK_MPI_COMMS(COMM_H) };

/* For the cut: a key per communicator its members share, the collectives
 * entered on each, the communicators made from each; messages counted. */
static uint64_t keys[CK_MAX_COMMS] = {[CK_COMM_comm_world] = 1};
static int64_t ncoll[CK_MAX_COMMS], nchild[CK_MAX_COMMS];
static uint64_t nsent, nrecvd;
static int client_state = 1;
/* The channel of this agent (for the log of communicators). */
static struct ck_mpi_chan *log_ch;
static int replaying;

uint64_t ck__agent_key(int c)
{
	return c >= 0 && c < CK_MAX_COMMS ? __atomic_load_n(&keys[c], __ATOMIC_SEQ_CST) : 0;
}

int64_t ck__agent_ncoll(int c)
{
	return __atomic_load_n(&ncoll[c], __ATOMIC_SEQ_CST);
}

void ck__agent_ncoll_add(int c)
{
	__atomic_add_fetch(&ncoll[c], 1, __ATOMIC_SEQ_CST);
}

uint64_t ck__agent_sent(void)
{
	return __atomic_load_n(&nsent, __ATOMIC_SEQ_CST);
}

uint64_t ck__agent_recvd(void)
{
	return __atomic_load_n(&nrecvd, __ATOMIC_SEQ_CST);
}

int ck__agent_client_state(void)
{
	return __atomic_load_n(&client_state, __ATOMIC_SEQ_CST);
}

void ck__agent_set_client_state(int s)
{
	__atomic_store_n(&client_state, s, __ATOMIC_SEQ_CST);
}

void ck__agent_count_send(int peer)
{
	if (peer != MPI_PROC_NULL)
		__atomic_add_fetch(&nsent, 1, __ATOMIC_SEQ_CST);
}

void ck__agent_count_recv(int src)
{
	if (src != MPI_PROC_NULL)
		__atomic_add_fetch(&nrecvd, 1, __ATOMIC_SEQ_CST);
}

static void count_recv(const MPI_Status *st)
{
	ck__agent_count_recv(st->MPI_SOURCE);
}

int ck__agent_is_coll(unsigned op)
{
	switch (op) {
	case CK_W_BARRIER: case CK_W_BCAST: case CK_W_ALLREDUCE: case CK_W_REDUCE:
	case CK_W_COMM_DUP: case CK_W_COMM_SPLIT: case CK_W_COMM_SPLIT_TYPE:
	case CK_W_GATHER: case CK_W_GATHERV: case CK_W_ALLGATHER: case CK_W_ALLGATHERV:
	case CK_W_SCATTER: case CK_W_SCATTERV: case CK_W_ALLTOALL: case CK_W_IALLREDUCE:
	case CK_W_REDUCE_SCATTER: case CK_W_ALLTOALLV:
		return 1;
	}
	return 0;
}

int ck__agent_is_p2p(unsigned op)
{
	switch (op) {
	case CK_W_SEND: case CK_W_RECV: case CK_W_SENDRECV: case CK_W_PROBE: case CK_W_MPROBE:
	case CK_W_WAIT: case CK_W_WAITANY:
		return 1;
	}
	return 0;
}

int ck__agent_p2p_state(unsigned op)
{
	return op == CK_W_SEND ? CK_AST_SEND : CK_AST_P2P;
}

/* FNV-1a over the parent's key, the parent's creation count and the world
 * rank of the new communicator's rank 0: the same for every member. */
static uint64_t child_key(int parent, MPI_Comm nc)
{
	MPI_Group g, wg;
	int zero = 0, w0 = -1;
	uint64_t v[3], h = 1469598103934665603ull;

	MPI_Comm_group(nc, &g);
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	MPI_Group_translate_ranks(g, 1, &zero, wg, &w0);
	MPI_Group_free(&g);
	MPI_Group_free(&wg);
	v[0] = keys[parent];
	v[1] = (uint64_t)nchild[parent];
	v[2] = (uint64_t)(int64_t)w0;
	for (size_t i = 0; i < sizeof(v); i++) {
		h ^= ((const uint8_t *)v)[i];
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

/* The log of communicators in the channel: a restart replays it. */
static void log_comm(const struct ck_mpi_log_ent *e)
{
	struct ck_mpi_chan_hdr *h = log_ch ? log_ch->h : NULL;

	if (!h || replaying)
		return;
	if (h->log_n >= CK_MPI_LOG_MAX) {
		h->log_full = 1;
		return;
	}
	h->log[h->log_n] = *e;
	h->log_n++;
}

static MPI_Comm comm_of(int i)
{
	return i >= 0 && i < CK_MAX_COMMS && comms[i] ? comms[i] : MPI_COMM_NULL;
}

/* DUP and SPLIT: the new communicator under number R->root. */
static int new_comm(struct ck_mpi_req *r, MPI_Comm parent)
{
	MPI_Comm nc = MPI_COMM_NULL;

	if (r->root < CK_NCOMMS || r->root >= CK_MAX_COMMS || comms[r->root]) /* NULL: free */
		return MPI_ERR_COMM;
	if (r->op == CK_W_COMM_DUP)
		r->rc = MPI_Comm_dup(parent, &nc);
	else if (r->op == CK_W_COMM_SPLIT)
		r->rc = MPI_Comm_split(parent, r->peer, r->tag, &nc);
	else
		r->rc = MPI_Comm_split_type(parent, r->peer, r->tag, MPI_INFO_NULL, &nc);
	r->rlen = nc != MPI_COMM_NULL;
	if (r->rc != MPI_SUCCESS)
		return r->rc;
	struct ck_mpi_log_ent e = {.op = r->op, .parent = r->comm, .a = r->peer, .b = r->tag, .id = r->root,
				   .cidx = (uint32_t)nchild[r->comm], .none = nc == MPI_COMM_NULL, .pkey = keys[r->comm]};
	nchild[r->comm]++;
	if (nc != MPI_COMM_NULL) {
		e.key = child_key(r->comm, nc);
		__atomic_store_n(&keys[r->root], e.key, __ATOMIC_SEQ_CST);
		__atomic_store_n(&ncoll[r->root], 0, __ATOMIC_SEQ_CST);
		nchild[r->root] = 0;
		comms[r->root] = nc;
		MPI_Comm_rank(nc, &r->src);
		MPI_Comm_size(nc, &r->rtag);
	}
	log_comm(&e);
	return r->rc;
}

MPI_Comm ck__agent_comm(int i)
{
	return comm_of(i);
}

/* The channel of the request being served (the drain area is in it). */
static struct ck_mpi_chan *cur_ch;

/* A blocking receive or probe that a cut can interrupt: polls the real
 * MPI, and when every request is to be held (the cut's second phase)
 * cancels and says HELD: the request is served again after the cut (or,
 * after a restart, by the new agent). Returns the real MPI code. */
static int wait_interruptibly(MPI_Request *rq, MPI_Status *st, int *held)
{
	int done = 0, cancelled = 0, rc;

	for (int spin = 0;; spin++) {
		rc = MPI_Test(rq, &done, st);
		if (rc != MPI_SUCCESS || done)
			return rc;
		if (ck__agent_holding()) {
			MPI_Cancel(rq);
			rc = MPI_Wait(rq, st);
			MPI_Test_cancelled(st, &cancelled);
			*held = cancelled;
			return rc;
		}
		if (spin > 1000)
			sched_yield();
	}
}

static int recv_interruptibly(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
			      MPI_Status *st, int *held)
{
	MPI_Request rq;
	int rc = MPI_Irecv(buf, count, dt, src, tag, comm, &rq);

	return rc == MPI_SUCCESS ? wait_interruptibly(&rq, st, held) : rc;
}

MPI_Datatype ck__agent_type(int i)
{
	static const MPI_Datatype tab[] = { CK_MPI_TYPES(TYPE_H) };

	return i >= 0 && i < CK_NTYPES ? tab[i] : MPI_DATATYPE_NULL;
}

MPI_Op ck__agent_op(int i)
{
	static const MPI_Op tab[] = { CK_MPI_OPS(OP_H) };

	return i >= 0 && i < CK_NOPS ? tab[i] : MPI_OP_NULL;
}

static MPI_Errhandler eh_of(int i)
{
	static const MPI_Errhandler tab[] = { CK_MPI_ERRHANDLERS(EH_H) };

	return i >= 0 && i < CK_NEHS ? tab[i] : MPI_ERRHANDLER_NULL;
}

/* An integer attribute of MPI_COMM_WORLD, -1 if unset. */
static int attr_int(int key)
{
	int *v, flag = 0;

	MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag);
	return flag ? *v : -1;
}

int ck__agent_in_arena(const struct ck_mpi_chan *ch, uint64_t off, uint64_t len)
{
	return off <= ch->arena_len && len <= ch->arena_len - off;
}

/* Collectives by coll/tuned alone, each algorithm fixed: the result then
 * depends on the ranks' order only, not on where they run (coll/sm and han
 * depend on placement, adapt on timing). */
static const char *const pins[][2] = {
	{ "OMPI_MCA_coll", "^sm,han,adapt" },
	{ "OMPI_MCA_coll_tuned_use_dynamic_rules", "1" },
	{ "OMPI_MCA_coll_tuned_allreduce_algorithm", "4" }, /* ring */
	{ "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize", "0" },
	{ "OMPI_MCA_coll_tuned_reduce_algorithm", "6" },    /* in-order binary */
	{ "OMPI_MCA_coll_tuned_bcast_algorithm", "6" },     /* binomial */
};

void ck__agent_pin_mca(void)
{
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
		setenv(pins[i][0], pins[i][1], 0);
}

int ck__agent_profile(char *out, size_t n)
{
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	size_t at;

	ck__agent_pin_mca();
	if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS)
		return -1;
	lib[strcspn(lib, ",\n")] = 0; /* "Open MPI v4.1.4" */
	at = (size_t)snprintf(out, n, "%s", lib);
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]) && at < n; i++)
		at += (size_t)snprintf(out + at, n - at, " %s=%s", pins[i][0] + 9, getenv(pins[i][0]));
	return at < n ? 0 : -1;
}

/* Messages taken by a matched probe, by number, until received. */
static MPI_Message msgs[CK_MAX_MESSAGES];

void ck__agent_answer_status(struct ck_mpi_req *r, const MPI_Status *st)
{
	int n = 0;

	r->src = st->MPI_SOURCE;
	r->rtag = st->MPI_TAG;
	MPI_Get_count(st, MPI_BYTE, &n);
	r->rlen = (uint64_t)n;
}

/* Matched probes of drained messages, by number: the message's index + 1. */
static int msg_drained[CK_MAX_MESSAGES];

static int probe(struct ck_mpi_req *r, MPI_Comm comm, int *held)
{
	MPI_Message m = MPI_MESSAGE_NULL;
	MPI_Status st;
	int found = 1, rc = MPI_ERR_ARG, matched = r->op == CK_W_MPROBE || r->op == CK_W_IMPROBE, d;
	int blocking = r->op == CK_W_PROBE || r->op == CK_W_MPROBE;

	if (matched && (r->count >= CK_MAX_MESSAGES || msgs[r->count] || msg_drained[r->count]))
		return MPI_ERR_ARG;
	if ((d = ck__drain_find(cur_ch, r->comm, r->peer, r->tag)) >= 0) {
		r->root = 1;
		ck__drain_status(cur_ch, d, r);
		if (matched) { /* its own now: no other receive may match it */
			msg_drained[r->count] = d + 1;
			ck__drain_claim(cur_ch, d);
		}
		return MPI_SUCCESS;
	}
	for (;;) {
		switch (r->op) {
		case CK_W_PROBE:
		case CK_W_IPROBE: rc = MPI_Iprobe(r->peer, r->tag, comm, &found, &st); break;
		case CK_W_MPROBE:
		case CK_W_IMPROBE: rc = MPI_Improbe(r->peer, r->tag, comm, &found, &m, &st); break;
		}
		if (rc != MPI_SUCCESS || found || !blocking)
			break;
		if (ck__agent_holding()) {
			*held = 1;
			return MPI_SUCCESS;
		}
		sched_yield();
	}
	r->root = found;
	if (rc == MPI_SUCCESS && found) {
		ck__agent_answer_status(r, &st);
		if (matched && m != MPI_MESSAGE_NO_PROC) /* the stand-in answers that one itself */
			msgs[r->count] = m;
	}
	return rc;
}

static int mrecv(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Datatype dt)
{
	MPI_Status st;
	int rc;

	if (r->count < CK_MAX_MESSAGES && msg_drained[r->count]) {
		int d = msg_drained[r->count] - 1;

		msg_drained[r->count] = 0;
		return ck__drain_take(ch, d, r->off, r->len, r);
	}
	if (r->count >= CK_MAX_MESSAGES || !msgs[r->count] || !ck__agent_in_arena(ch, r->off, r->len))
		return MPI_ERR_ARG;
	rc = MPI_Mrecv(ch->arena + r->off, (int)r->peer, dt, &msgs[r->count], &st);
	msgs[r->count] = NULL;
	if (rc == MPI_SUCCESS) {
		ck__agent_answer_status(r, &st);
		count_recv(&st);
	}
	return rc;
}

static int sendrecv(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Comm comm, MPI_Datatype dt)
{
	struct ck_w_sendrecv v;
	MPI_Status st;
	int rc;

	memcpy(&v, r->inl, sizeof(v));
	if (!ck__agent_in_arena(ch, r->off, r->len) || !ck__agent_in_arena(ch, v.roff, v.rlen))
		return MPI_ERR_ARG;
	if (v.source != MPI_PROC_NULL && ck__drain_find(ch, r->comm, v.source, v.rtag) >= 0) {
		rc = MPI_Send(ch->arena + r->off, (int)r->count, dt, r->peer, r->tag, comm);
		if (rc == MPI_SUCCESS) {
			ck__agent_count_send(r->peer);
			rc = ck__drain_take(ch, ck__drain_find(ch, r->comm, v.source, v.rtag), v.roff, v.rlen, r);
		}
		return rc;
	}
	rc = MPI_Sendrecv(ch->arena + r->off, (int)r->count, dt, r->peer, r->tag, ch->arena + v.roff, v.rcount,
			  ck__agent_type(v.rtype), v.source, v.rtag, comm, &st);
	if (rc == MPI_SUCCESS) {
		ck__agent_answer_status(r, &st);
		ck__agent_count_send(r->peer);
		count_recv(&st);
	}
	return rc;
}

static int vec2(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Comm comm)
{
	uint64_t vl;
	struct ck_w_vec2 v;
	uint8_t *a = ch->arena;
	int n = 0;

	memcpy(&v, r->inl, sizeof(v));
	if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &n) != MPI_SUCCESS)
		return MPI_ERR_COMM;
	vl = (uint64_t)n * sizeof(int);
	if (!ck__agent_in_arena(ch, v.soff, 0) || !ck__agent_in_arena(ch, v.roff, 0) || !ck__agent_in_arena(ch, v.scnt, vl))
		return MPI_ERR_ARG;
	if (r->op == CK_W_REDUCE_SCATTER)
		return MPI_Reduce_scatter(r->peer & CK_W_INPLACE ? MPI_IN_PLACE : a + v.soff, a + v.roff,
					  (int *)(a + v.scnt), ck__agent_type(r->dtype), ck__agent_op(r->rop), comm);
	if (!ck__agent_in_arena(ch, v.sdsp, vl) || !ck__agent_in_arena(ch, v.rcnt, vl) || !ck__agent_in_arena(ch, v.rdsp, vl))
		return MPI_ERR_ARG;
	return MPI_Alltoallv(a + v.soff, (int *)(a + v.scnt), (int *)(a + v.sdsp), ck__agent_type(v.stype), a + v.roff,
			     (int *)(a + v.rcnt), (int *)(a + v.rdsp), ck__agent_type(v.rtype), comm);
}

/* The world ranks of COMM's members, in COMM's rank order, into the arena. */
static int members(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Comm comm)
{
	MPI_Group g, wg;
	int n = 0, rc, *in, *out;

	if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &n) != MPI_SUCCESS)
		return MPI_ERR_COMM;
	if (!ck__agent_in_arena(ch, r->off, 2 * (uint64_t)n * sizeof(int)))
		return MPI_ERR_ARG;
	in = (int *)(ch->arena + r->off + (uint64_t)n * sizeof(int));
	out = (int *)(ch->arena + r->off);
	for (int i = 0; i < n; i++)
		in[i] = i;
	MPI_Comm_group(comm, &g);
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	rc = MPI_Group_translate_ranks(g, n, in, wg, out);
	MPI_Group_free(&g);
	MPI_Group_free(&wg);
	r->count = (uint64_t)n;
	return rc;
}

/* Gathers and scatters: buffers where the stand-in laid them out. */
static int vec(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Comm comm)
{
	struct ck_w_vec v;
	uint8_t *a = ch->arena;
	int n = 0, *cnt = NULL, *dsp = NULL, scatter = r->op == CK_W_SCATTER || r->op == CK_W_SCATTERV;
	void *sb, *rb;
	MPI_Datatype st, rt;

	memcpy(&v, r->inl, sizeof(v));
	if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &n) != MPI_SUCCESS || !ck__agent_in_arena(ch, v.soff, 0) ||
	    !ck__agent_in_arena(ch, v.roff, 0))
		return MPI_ERR_ARG;
	if (v.cnt) {
		if (!ck__agent_in_arena(ch, v.cnt, (uint64_t)n * sizeof(int)) || !ck__agent_in_arena(ch, v.dsp, (uint64_t)n * sizeof(int)))
			return MPI_ERR_ARG;
		cnt = (int *)(a + v.cnt);
		dsp = (int *)(a + v.dsp);
	}
	sb = v.inplace && !scatter ? MPI_IN_PLACE : a + v.soff;
	rb = v.inplace && scatter ? MPI_IN_PLACE : a + v.roff;
	st = ck__agent_type(v.stype);
	rt = ck__agent_type(v.rtype);
	switch (r->op) {
	case CK_W_GATHER: return MPI_Gather(sb, v.scount, st, rb, v.rcount, rt, r->root, comm);
	case CK_W_GATHERV: return MPI_Gatherv(sb, v.scount, st, rb, cnt, dsp, rt, r->root, comm);
	case CK_W_ALLGATHER: return MPI_Allgather(sb, v.scount, st, rb, v.rcount, rt, comm);
	case CK_W_ALLGATHERV: return MPI_Allgatherv(sb, v.scount, st, rb, cnt, dsp, rt, comm);
	case CK_W_SCATTER: return MPI_Scatter(sb, v.scount, st, rb, v.rcount, rt, r->root, comm);
	case CK_W_SCATTERV: return MPI_Scatterv(sb, cnt, dsp, st, rb, v.rcount, rt, r->root, comm);
	case CK_W_ALLTOALL: return MPI_Alltoall(sb, v.scount, st, rb, v.rcount, rt, comm);
	}
	return MPI_ERR_ARG;
}

int ck__agent_serve(struct ck_mpi_chan *ch, struct ck_mpi_req *r)
{
	int held = 0;

	MPI_Comm comm = comm_of(r->comm);
	MPI_Datatype dt = ck__agent_type(r->dtype);
	uint8_t *a = ch->arena + r->off;
	MPI_Status st;
	int n, fin = 0;

	r->rc = MPI_ERR_ARG;
	cur_ch = ch;
	switch (r->op) {
	case CK_W_HELLO:
		MPI_Comm_rank(MPI_COMM_WORLD, &r->src);
		MPI_Comm_size(MPI_COMM_WORLD, &r->rtag);
		memset(r->inl, 0, sizeof(r->inl));
		n = 0;
		r->rc = MPI_Get_processor_name((char *)r->inl, &n);
		r->rlen = (uint64_t)(int64_t)attr_int(MPI_TAG_UB);
		r->count = (uint64_t)(int64_t)attr_int(MPI_UNIVERSE_SIZE);
		r->off = (uint64_t)(int64_t)attr_int(MPI_APPNUM);
		r->len = (uint64_t)(int64_t)attr_int(MPI_LASTUSEDCODE);
		break;
	case CK_W_FINALIZE:
		/* Under ckrun the real one waits for every rank (agent_job.c):
		 * the others may still checkpoint, with this agent in their cut. */
		r->rc = log_ch ? MPI_SUCCESS : MPI_Finalize();
		fin = 1;
		break;
	case CK_W_ABORT:
		fflush(NULL);
		MPI_Abort(MPI_COMM_WORLD, r->tag); /* does not return */
		break;
	case CK_W_BARRIER:
		r->rc = MPI_Barrier(comm);
		break;
	case CK_W_BCAST:
		if (ck__agent_in_arena(ch, r->off, r->len))
			r->rc = MPI_Bcast(a, (int)r->count, dt, r->root, comm);
		break;
	case CK_W_ALLREDUCE:
	case CK_W_REDUCE:
		if (!ck__agent_in_arena(ch, r->off, r->peer & CK_W_INPLACE ? r->len : 2 * r->len))
			break;
		if (r->op == CK_W_ALLREDUCE)
			r->rc = MPI_Allreduce(r->peer & CK_W_INPLACE ? MPI_IN_PLACE : a,
					      r->peer & CK_W_INPLACE ? a : a + r->len, (int)r->count, dt,
					      ck__agent_op(r->rop), comm);
		else
			r->rc = MPI_Reduce(r->peer & CK_W_INPLACE ? MPI_IN_PLACE : a,
					   r->peer & CK_W_INPLACE ? a : a + r->len, (int)r->count, dt,
					   ck__agent_op(r->rop), r->root, comm);
		break;
	case CK_W_SEND:
		if (ck__agent_in_arena(ch, r->off, r->len))
			r->rc = MPI_Send(a, (int)r->count, dt, r->peer, r->tag, comm);
		if (r->rc == MPI_SUCCESS)
			ck__agent_count_send(r->peer);
		break;
	case CK_W_RECV:
		if (!ck__agent_in_arena(ch, r->off, r->len))
			break;
		if ((n = ck__drain_find(ch, r->comm, r->peer, r->tag)) >= 0) {
			r->rc = ck__drain_take(ch, n, r->off, r->len, r);
			break;
		}
		r->rc = recv_interruptibly(a, (int)r->count, dt, r->peer, r->tag, comm, &st, &held);
		if (r->rc == MPI_SUCCESS && !held) {
			count_recv(&st);
			r->src = st.MPI_SOURCE;
			r->rtag = st.MPI_TAG;
			MPI_Get_count(&st, MPI_BYTE, &n);
			r->rlen = (uint64_t)n;
		}
		break;
	case CK_W_COMM_DUP:
	case CK_W_COMM_SPLIT:
	case CK_W_COMM_SPLIT_TYPE:
		r->rc = comm == MPI_COMM_NULL ? MPI_ERR_COMM : new_comm(r, comm);
		break;
	case CK_W_COMM_FREE:
		if (r->comm >= CK_NCOMMS && comm != MPI_COMM_NULL) {
			r->rc = MPI_Comm_free(&comms[r->comm]);
			comms[r->comm] = NULL;
			__atomic_store_n(&keys[r->comm], 0, __ATOMIC_SEQ_CST);
			log_comm(&(struct ck_mpi_log_ent){.op = CK_W_COMM_FREE, .parent = r->comm, .id = r->comm});
		}
		break;
	case CK_W_GATHER:
	case CK_W_GATHERV:
	case CK_W_ALLGATHER:
	case CK_W_ALLGATHERV:
	case CK_W_SCATTER:
	case CK_W_SCATTERV:
	case CK_W_ALLTOALL:
		r->rc = vec(ch, r, comm);
		break;
	case CK_W_PROBE:
	case CK_W_IPROBE:
	case CK_W_MPROBE:
	case CK_W_IMPROBE:
		r->rc = comm == MPI_COMM_NULL ? MPI_ERR_COMM : probe(r, comm, &held);
		break;
	case CK_W_MRECV:
		r->rc = mrecv(ch, r, dt);
		break;
	case CK_W_ISEND:
	case CK_W_IRECV:
	case CK_W_IALLREDUCE:
		r->rc = comm == MPI_COMM_NULL ? MPI_ERR_COMM : ck__agent_req_start(ch, r, comm, dt);
		break;
	case CK_W_TEST:
	case CK_W_TESTALL:
	case CK_W_WAITANY:
	case CK_W_TESTANY:
		r->rc = ck__agent_req_complete(r, &held);
		break;
	case CK_W_WAIT:
		r->rc = ck__agent_req_wait(r, &held);
		break;
	case CK_W_SENDRECV:
		r->rc = comm == MPI_COMM_NULL ? MPI_ERR_COMM : sendrecv(ch, r, comm, dt);
		break;
	case CK_W_REDUCE_SCATTER:
	case CK_W_ALLTOALLV:
		r->rc = vec2(ch, r, comm);
		break;
	case CK_W_COMM_MEMBERS:
		r->rc = members(ch, r, comm);
		break;
	case CK_W_ERROR_STRING:
		memset(r->inl, 0, sizeof(r->inl));
		if (MPI_Error_class(r->tag, &r->src) == MPI_SUCCESS) {
			char s[MPI_MAX_ERROR_STRING];

			r->rc = MPI_Error_string(r->tag, s, &n);
			snprintf((char *)r->inl, sizeof(r->inl), "%s", s);
		}
		break;
	case CK_W_ERRHANDLER:
		r->rc = MPI_Comm_set_errhandler(comm, eh_of(r->rop));
		break;
	default:
		fprintf(stderr, "ckmpi-agent: unknown request %u from the program\n", r->op);
		break;
	}
	cur_ch = NULL;
	return fin | (held ? CK_SERVE_HELD : 0);
}

int ck__agent_outstanding(void)
{
	for (int i = 0; i < CK_MAX_MESSAGES; i++)
		if (msgs[i] || msg_drained[i])
			return 1;
	return 0;
}

int ck__agent_replay(struct ck_mpi_chan *ch)
{
	struct ck_mpi_chan_hdr *h = ch->h;
	uint32_t n = h->log_n < CK_MPI_LOG_MAX ? h->log_n : CK_MPI_LOG_MAX;
	int rc = MPI_SUCCESS;

	log_ch = ch;
	replaying = 1;
	for (uint32_t i = 0; i < n && rc == MPI_SUCCESS; i++) {
		struct ck_mpi_log_ent e = h->log[i];
		struct ck_mpi_req r;

		memset(&r, 0, sizeof(r));
		r.op = e.op;
		r.comm = e.parent;
		r.peer = e.a;
		r.tag = e.b;
		r.root = e.id;
		if (e.op == CK_W_COMM_FREE) {
			if (e.id >= CK_NCOMMS && e.id < CK_MAX_COMMS && comms[e.id]) {
				rc = MPI_Comm_free(&comms[e.id]);
				comms[e.id] = NULL;
				keys[e.id] = 0;
			}
		} else if (comm_of(e.parent) == MPI_COMM_NULL || e.parent < 0 || e.parent >= CK_MAX_COMMS) {
			rc = MPI_ERR_COMM;
		} else {
			/* the parent's count as it was (a compacted log lacks the
			 * creations every member freed): the same key again */
			nchild[e.parent] = e.cidx;
			rc = new_comm(&r, comm_of(e.parent));
			if (rc == MPI_SUCCESS && ((r.rlen == 0) != (e.none != 0) || (!e.none && keys[e.id] != e.key))) {
				fprintf(stderr, "ckmpi-agent: communicator %d made again differs from the one logged "
						"(%s)\n", e.id, r.rlen ? "another key" : "MPI_COMM_NULL");
				rc = MPI_ERR_INTERN;
			}
		}
	}
	replaying = 0;
	return rc;
}

void ck__agent_log_to(struct ck_mpi_chan *ch)
{
	log_ch = ch;
}
