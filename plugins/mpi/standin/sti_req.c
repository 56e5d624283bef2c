/* Nonblocking point-to-point. A request in flight owns a range of the
 * arena's second half (the buffer the agent's real MPI reads or fills) and
 * a number under which the agent keeps the real request; the program's
 * MPI_Request is an object of this library. Completion in the agent (Test,
 * Testall, Waitany, Testany) only marks requests done there; MPI_Wait on a
 * request hands its status back, copies a receive out and ends it. */
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

struct ck__req {
	int id, coll; /* coll: the result is len bytes, a receive's the message's */
	void *buf;      /* where MPI_Wait copies the result, or NULL (a send) */
	uint64_t off;   /* the request's range of the arena: [off, off+span) */
	uint64_t span;
	uint64_t out, len; /* the result in the arena: [out, out+len) */
	struct ck__tinfo ti; /* how the result unpacks */
};

static struct ck__req *reqs[CK_MAX_REQUESTS];

#define ALIGN(x) (((x) + 63) & ~(uint64_t)63)

static int by_off(const void *a, const void *b)
{
	const struct ck__req *x = *(struct ck__req *const *)a, *y = *(struct ck__req *const *)b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* First fit in [scratch, arena end) among the ranges in flight. */
static int arena_alloc(uint64_t len, uint64_t *off)
{
	struct ck__req *live[CK_MAX_REQUESTS] = { NULL };
	uint64_t at = ALIGN(ck__sti.scratch);
	int n = 0;

	for (int i = 0; i < CK_MAX_REQUESTS; i++)
		if (reqs[i])
			live[n++] = reqs[i];
	qsort(live, (size_t)n, sizeof(live[0]), by_off);
	for (int i = 0; i < n; i++) {
		if (live[i]->off >= at + len)
			break;
		at = ALIGN(live[i]->off + live[i]->span);
	}
	if (at + len > ck__sti.ch.arena_len)
		return -1;
	*off = at;
	return 0;
}

/* A request of kind OP: IN (LEN bytes, or NULL) copied into the arena,
 * OUT (LEN bytes, or NULL) filled at MPI_Wait; the result lies right after
 * the input unless in place (IN == OUT). */
static int start(const char *fn, unsigned op, const void *in, void *out, int count, MPI_Datatype dt, int peer,
		 int tag, int rop, MPI_Comm comm, MPI_Request *req)
{
	struct ck__req *q;
	struct ck_mpi_req *r;
	struct ck__tinfo ti;
	int id = -1, c, rc;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	memset(&ti, 0, sizeof(ti));
	if (op == CK_W_IALLREDUCE) /* reductions: predefined types only */
		ti.wire = ck__sti_type(fn, dt, &ti.size), ti.nbase = 1, ti.derived = 0, ti.extent = ti.size;
	else
		ck__sti_tinfo(fn, dt, &ti);
	for (int i = 0; i < CK_MAX_REQUESTS && id < 0; i++)
		if (!reqs[i])
			id = i;
	if (id < 0)
		ck__sti_die(fn, "more than %d requests in flight", CK_MAX_REQUESTS);
	q = calloc(1, sizeof(*q));
	if (!q)
		ck__sti_die(fn, "out of memory");
	q->id = id;
	q->buf = out;
	q->coll = op == CK_W_IALLREDUCE;
	q->ti = ti;
	q->len = (uint64_t)(count < 0 ? 0 : count) * ti.size;
	q->span = in && out && in != out ? 2 * q->len : q->len;
	if (arena_alloc(q->span, &q->off))
		ck__sti_die(fn, "%llu bytes do not fit in the free part of the arena's nonblocking half "
				"(%zu bytes; CKPT_MPI_ARENA)", (unsigned long long)q->len,
			    ck__sti.ch.arena_len - ck__sti.scratch);
	q->out = q->off + (q->span > q->len ? q->len : 0);
	if (in)
		ck__sti_pack(ck__sti.ch.arena + q->off, in, (size_t)(count < 0 ? 0 : count), &ti);
	r = ck__sti_begin(fn, op);
	r->comm = c;
	r->dtype = ti.wire;
	r->count = (uint64_t)count * (uint64_t)ti.nbase;
	r->tag = tag;
	r->off = q->off;
	r->len = q->len;
	r->root = id;
	r->rop = rop;
	r->peer = op == CK_W_IALLREDUCE ? (in == out ? CK_W_INPLACE : 0) : peer;
	rc = ck__sti_call(fn, r);
	ck__sti_end(r);
	if (rc != MPI_SUCCESS) {
		free(q);
		return rc;
	}
	reqs[id] = q;
	*req = (MPI_Request)(void *)q;
	return MPI_SUCCESS;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
	return start("MPI_Isend", CK_W_ISEND, buf, NULL, count, dt, dest, tag, 0, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
	return start("MPI_Irecv", CK_W_IRECV, NULL, buf, count, dt, source, tag, 0, comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
		   MPI_Request *req)
{
	return start("MPI_Iallreduce", CK_W_IALLREDUCE, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, count, dt, 0, 0,
		     ck__sti_op("MPI_Iallreduce", op), comm, req);
}

/* The stand-in's request behind a handle; NULL for MPI_REQUEST_NULL. */
static struct ck__req *find(const char *fn, MPI_Request req)
{
	if (req == MPI_REQUEST_NULL)
		return NULL;
	for (int i = 0; i < CK_MAX_REQUESTS; i++)
		if (reqs[i] && (void *)reqs[i] == (void *)req)
			return reqs[i];
	ck__sti_die(fn, "request %p is not one in flight", (void *)req);
}

static void empty_status(MPI_Status *status)
{
	if (status == MPI_STATUS_IGNORE)
		return;
	memset(status, 0, sizeof(*status));
	status->MPI_SOURCE = MPI_ANY_SOURCE;
	status->MPI_TAG = MPI_ANY_TAG;
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
	const char *fn = "MPI_Wait";
	struct ck__req *q = find(fn, *req);
	struct ck_mpi_req *r;
	int rc;

	if (!q) {
		empty_status(status);
		return MPI_SUCCESS;
	}
	r = ck__sti_begin(fn, CK_W_WAIT);
	r->root = q->id;
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS && q->buf)
		ck__sti_unpack(q->buf, ck__sti.ch.arena + q->out, q->coll || r->rlen > q->len ? q->len : r->rlen,
			       &q->ti);
	if (status != MPI_STATUS_IGNORE) {
		status->MPI_SOURCE = r->src;
		status->MPI_TAG = r->rtag;
		status->MPI_ERROR = rc;
		status->_cancelled = 0;
		status->_ucount = r->rlen;
	}
	ck__sti_end(r);
	reqs[q->id] = NULL;
	free(q);
	*req = MPI_REQUEST_NULL;
	return rc;
}

/* OP over the N requests (the NULL ones left out): flag, or index into REQ. */
static int complete(const char *fn, unsigned op, int n, MPI_Request req[], int *idx)
{
	struct ck_mpi_req *r;
	int32_t ids[CK_W_MAX_IDS];
	int map[CK_W_MAX_IDS], m = 0, rc, out;
	struct ck__req *q;

	for (int i = 0; i < n; i++) {
		if (!(q = find(fn, req[i])))
			continue;
		if (m == CK_W_MAX_IDS)
			ck__sti_die(fn, "more than %d requests in one call", CK_W_MAX_IDS);
		map[m] = i;
		ids[m++] = q->id;
	}
	if (!m) { /* nothing active */
		*idx = op == CK_W_TESTALL || op == CK_W_TEST ? 1 : MPI_UNDEFINED;
		return MPI_SUCCESS;
	}
	r = ck__sti_begin(fn, op);
	r->count = (uint64_t)m;
	r->root = ids[0];
	memcpy(r->inl, ids, (size_t)m * sizeof(ids[0]));
	rc = ck__sti_call(fn, r);
	out = r->flag;
	ck__sti_end(r);
	if (op == CK_W_WAITANY || op == CK_W_TESTANY)
		out = out == MPI_UNDEFINED || out < 0 || out >= m ? MPI_UNDEFINED : map[out];
	*idx = out;
	return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
	int rc = complete("MPI_Test", CK_W_TEST, 1, req, flag);

	if (rc == MPI_SUCCESS && *flag)
		return MPI_Wait(req, status);
	return rc;
}

int MPI_Waitall(int n, MPI_Request req[], MPI_Status st[])
{
	int rc = MPI_SUCCESS;

	for (int i = 0; i < n; i++) {
		int one = MPI_Wait(&req[i], st == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &st[i]);

		if (one != MPI_SUCCESS)
			rc = MPI_ERR_IN_STATUS;
	}
	return rc;
}

int MPI_Testall(int n, MPI_Request req[], int *flag, MPI_Status st[])
{
	int rc = complete("MPI_Testall", CK_W_TESTALL, n, req, flag);

	if (rc == MPI_SUCCESS && *flag)
		return MPI_Waitall(n, req, st);
	return rc;
}

int MPI_Waitany(int n, MPI_Request req[], int *idx, MPI_Status *status)
{
	int rc = complete("MPI_Waitany", CK_W_WAITANY, n, req, idx);

	if (rc != MPI_SUCCESS)
		return rc;
	if (*idx == MPI_UNDEFINED) {
		empty_status(status);
		return MPI_SUCCESS;
	}
	return MPI_Wait(&req[*idx], status);
}

int MPI_Testany(int n, MPI_Request req[], int *idx, int *flag, MPI_Status *status)
{
	int rc = complete("MPI_Testany", CK_W_TESTANY, n, req, idx), active = 0;

	for (int i = 0; i < n; i++)
		active |= req[i] != MPI_REQUEST_NULL;
	*flag = !active || *idx != MPI_UNDEFINED;
	if (rc != MPI_SUCCESS || *idx == MPI_UNDEFINED) {
		if (*flag)
			empty_status(status);
		return rc;
	}
	return MPI_Wait(&req[*idx], status);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
		 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
	const char *fn = "MPI_Sendrecv";
	struct ck__tinfo st, rt;
	struct ck_w_sendrecv v;
	struct ck_mpi_req *r;
	int rc;

	ck__sti_need_init(fn);
	ck__sti_tinfo(fn, stype, &st);
	ck__sti_tinfo(fn, rtype, &rt);
	r = ck__sti_begin(fn, CK_W_SENDRECV);
	r->comm = ck__sti_comm(fn, comm);
	r->dtype = st.wire;
	memset(&v, 0, sizeof(v));
	v.rtype = rt.wire;
	r->count = (uint64_t)scount * (uint64_t)st.nbase;
	r->len = (uint64_t)(scount < 0 ? 0 : scount) * st.size;
	r->peer = dest;
	r->tag = stag;
	v.roff = ALIGN(r->len);
	v.rlen = (uint64_t)(rcount < 0 ? 0 : rcount) * rt.size;
	v.rcount = rcount * rt.nbase;
	v.source = source;
	v.rtag = rtag;
	if (v.roff + v.rlen > ck__sti.scratch)
		ck__sti_die(fn, "%llu bytes exceed the blocking half of the agent's arena (%zu bytes; CKPT_MPI_ARENA)",
			    (unsigned long long)(v.roff + v.rlen), ck__sti.scratch);
	ck__sti_pack(ck__sti.ch.arena, sbuf, (size_t)(scount < 0 ? 0 : scount), &st);
	memcpy(r->inl, &v, sizeof(v));
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS)
		ck__sti_unpack(rbuf, ck__sti.ch.arena + v.roff, r->rlen < v.rlen ? r->rlen : v.rlen, &rt);
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
