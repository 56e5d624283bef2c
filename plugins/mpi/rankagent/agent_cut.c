/* The agents' half of a checkpoint's cut (ckrun --np): every rank's MPI
 * state brought to one consistent point, with the programs still running.
 *
 * Each agent has a control thread on a private duplicate of
 * MPI_COMM_WORLD (the agent runs MPI_THREAD_MULTIPLE, so it can talk while
 * the serving thread sits in the program's collective). A program's
 * stand-in asks for a cut in the channel's header; its agent tells every
 * other agent (a message on the control communicator) and all of them run
 * the same rounds, each decided only by values reduced over all of them,
 * so that they call the same collectives:
 *
 *  1. Run on: each agent publishes how many collectives its program
 *     entered on each communicator (a key the members share); the target
 *     of a communicator is the most any member entered. A program is held
 *     before a collective that would pass its target and runs freely
 *     otherwise, so the ranks behind catch up (as MANA does). Done when no
 *     rank is behind, none is inside a collective or a blocking
 *     point-to-point call, and every stand-in asked.
 *  2. Hold: every request is held, a blocking receive or probe in the
 *     real MPI is cancelled and held (served again later), and each agent
 *     drains the messages sent to its rank into the channel's drain area
 *     (agent_drain.c), until none is in flight (sent = received, summed
 *     over all ranks). Nonblocking sends and collectives complete meanwhile,
 *     nonblocking receives are cancelled in MPI, to be posted again
 *     (agent_req.c). The cut holds then, unless a matched probe's message
 *     is outstanding; each agent serves nothing until its stand-in
 *     releases it (the round's end), or a new agent takes the channel over
 *     after a restart.
 *
 * Anything else (a rank that does not catch up or stays in a blocking send
 * or send-receive past the limit, a nonblocking send that does not
 * complete, a matched probe's message, a drain area too small) fails the cut in one line naming the rank, the same on every
 * rank; the programs go on as if nothing happened. */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

#define TAG_CUT 1
#define NOTASKED_MS 3000 /* a stand-in that has not asked by then will not */
#define BACKOFF_US 2000  /* between rounds of the control threads that changed nothing */
#define PAIRS CK_MAX_COMMS

static struct {
	struct ck_mpi_chan *ch;
	MPI_Comm ctl;
	int rank, size, multiple, limit_ms, log;
	pthread_t thr;
	int started, stop, finishing;
	MPI_Comm fin;
	/* shared with the serving thread */
	int state;
	uint32_t gate_gen; /* futex word: bumped whenever the gate changes */
	int gate_on, hold_all;
	int held_comm; /* the communicator whose gate holds the serving thread, or -1 */
	int64_t target[CK_MAX_COMMS];
} cut;

static int ld(int *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void st(int *p, int v)
{
	__atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

static void gate_changed(void)
{
	__atomic_add_fetch(&cut.gate_gen, 1, __ATOMIC_SEQ_CST);
	ck_mpi_chan_st_wake(&cut.gate_gen, cut.gate_gen);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int ck__agent_holding(void)
{
	return ld(&cut.gate_on) && ld(&cut.hold_all);
}

void ck__agent_set_state(int s)
{
	st(&cut.state, s);
}

void ck__agent_gate(struct ck_mpi_req *r)
{
	int coll = ck__agent_is_coll(r->op), c = r->comm;
	int busy = coll ? CK_AST_COLL : ck__agent_is_p2p(r->op) ? ck__agent_p2p_state(r->op) : CK_AST_OTHER;

	for (;;) {
		uint32_t g = __atomic_load_n(&cut.gate_gen, __ATOMIC_SEQ_CST);
		int hold = 0;

		/* Busy first, then the look at the gate; the control thread
		 * sets the gate, then looks at the state: one of the two sees
		 * the other (both sequentially consistent), so no request
		 * passes a gate the cut already counts as closed. */
		ck__agent_set_state(busy);
		if (ld(&cut.gate_on))
			hold = ld(&cut.hold_all) ||
			       (coll && c >= 0 && c < CK_MAX_COMMS && c != CK_COMM_comm_self &&
				ck__agent_ncoll(c) >= __atomic_load_n(&cut.target[c], __ATOMIC_SEQ_CST));
		if (!hold)
			break;
		st(&cut.held_comm, ld(&cut.hold_all) ? -1 : c);
		ck__agent_set_state(CK_AST_HELD);
		ck_mpi_chan_wait_word(&cut.gate_gen, g, 50);
	}
	st(&cut.held_comm, -1);
	if (coll && c >= 0 && c < CK_MAX_COMMS)
		ck__agent_ncoll_add(c);
}

/* Until the serving thread is idle or held, at most MS. */
static void settle(int ms)
{
	for (int i = 0; i < ms * 5; i++) {
		int s = ld(&cut.state);
		if (s == CK_AST_IDLE || s == CK_AST_HELD)
			return;
		usleep(200);
	}
}

static int asked(void)
{
	struct ck_mpi_chan_hdr *h = cut.ch->h;

	return ck_mpi_chan_ld(&h->cut_req) == ck_mpi_chan_ld(&h->cut_done) + 1;
}

/* Flags reduced with MAXLOC: the value, and the lowest rank that has it. */
enum { F_NOTCONN, F_LOGFULL, F_NOTASKED, F_BEHIND, F_COLL, F_P2P, F_BUSY, F_PENDING, F_NBWAIT, F_NOSPACE, F_ELAPSED,
       NFLAGS };

static void reduce(int v[NFLAGS], int out[NFLAGS][2])
{
	int in[NFLAGS][2];

	for (int i = 0; i < NFLAGS; i++) {
		in[i][0] = v[i];
		in[i][1] = cut.rank;
	}
	MPI_Allreduce(in, out, NFLAGS, MPI_2INT, MPI_MAXLOC, cut.ctl);
}

static void local_flags(int v[NFLAGS], uint64_t t0)
{
	int s = ld(&cut.state);

	memset(v, 0, sizeof(int) * NFLAGS);
	v[F_NOTCONN] = ck__agent_client_state(); /* 0 connected, 1 not yet, 2 finalized or gone */
	v[F_LOGFULL] = (int)ck_mpi_chan_ld(&cut.ch->h->log_full);
	v[F_NOTASKED] = !asked();
	v[F_COLL] = s == CK_AST_COLL;
	v[F_P2P] = s == CK_AST_P2P;
	v[F_BUSY] = s != CK_AST_IDLE && s != CK_AST_HELD;
	v[F_PENDING] = ck__agent_outstanding();
	v[F_ELAPSED] = (int)(now_ms() - t0);
}

/* Phase 1's exchange: for each communicator, the most collectives any
 * member entered, and whether a member is held at its gate; 1 if this rank
 * is behind on one. */
static int64_t most[CK_MAX_COMMS];
static int held_at[CK_MAX_COMMS];

static int exchange_counts(void)
{
	struct {
		uint64_t key;
		int64_t n;
		int64_t held;
	} mine[PAIRS], *all;
	int behind = 0, hc = ld(&cut.held_comm);

	memset(mine, 0, sizeof(mine));
	for (int c = 0; c < CK_MAX_COMMS; c++)
		if (c != CK_COMM_comm_self && ck__agent_key(c)) {
			mine[c].key = ck__agent_key(c);
			mine[c].n = ck__agent_ncoll(c);
			mine[c].held = c == hc;
		}
	all = calloc((size_t)cut.size, sizeof(mine));
	if (!all) {
		fprintf(stderr, "ckmpi-agent: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 71);
	}
	MPI_Allgather(mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE, cut.ctl);
	for (int c = 0; c < CK_MAX_COMMS; c++) {
		most[c] = 0;
		held_at[c] = 0;
		if (!mine[c].key)
			continue;
		for (int r = 0; r < cut.size; r++)
			for (int k = 0; k < PAIRS; k++) {
				const __typeof__(mine[0]) *e = &all[(size_t)r * PAIRS + (size_t)k];
				if (e->key != mine[c].key)
					continue;
				if (e->n > most[c])
					most[c] = e->n;
				held_at[c] |= (int)e->held;
			}
		behind |= ck__agent_ncoll(c) < most[c];
	}
	free(all);
	return behind;
}

/* The gate's targets: the most any member entered. STUCK (nothing moved
 * since the last look while someone waits): a member held at a
 * communicator's gate may be the one another waits for, after its next
 * collective there (a rank of two communicators enters them in its own
 * order): every member of such a communicator goes one further. */
static void set_targets(int stuck)
{
	for (int c = 0; c < CK_MAX_COMMS; c++)
		__atomic_store_n(&cut.target[c], most[c] + (stuck && held_at[c]), __ATOMIC_SEQ_CST);
	gate_changed();
}

static void fail(char *why, size_t n, const char *fmt, int rank)
{
	snprintf(why, n, fmt, rank);
}

/* One cut; 1 when it holds, 0 with WHY set when it does not. */
static int run_cut(char *why, size_t whylen)
{
	int v[NFLAGS], g[NFLAGS][2], iter;
	uint64_t t0 = now_ms();
	long long total, last_total = -1;

	/* The previous cut held and its release has not been seen here yet
	 * (another agent's round came first): its receives go back before the
	 * serving thread runs again. */
	ck__agent_req_again(cut.ch);
	for (int c = 0; c < CK_MAX_COMMS; c++)
		__atomic_store_n(&cut.target[c], INT64_MAX, __ATOMIC_SEQ_CST);
	st(&cut.hold_all, 0);
	st(&cut.gate_on, 1);
	gate_changed();
	for (iter = 0;; iter++) {
		settle(20);
		local_flags(v, t0);
		v[F_BEHIND] = exchange_counts();
		total = 0;
		for (int c = 0; c < CK_MAX_COMMS; c++)
			total += ck__agent_key(c) ? ck__agent_ncoll(c) : 0;
		reduce(v, g);
		MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, cut.ctl);
		set_targets(iter > 0 && total == last_total && (g[F_BEHIND][0] || g[F_COLL][0]));
		if (total == last_total)
			usleep(BACKOFF_US); /* leave the cores to the ranks that must catch up */
		last_total = total;
		if (g[F_NOTCONN][0] == 1)
			return fail(why, whylen, "MPI: rank %d has not called MPI_Init yet", g[F_NOTCONN][1]), 0;
		if (g[F_NOTCONN][0] == 2)
			return fail(why, whylen, "MPI: rank %d has finalized MPI or ended", g[F_NOTCONN][1]), 0;
		if (g[F_LOGFULL][0])
			return fail(why, whylen, "MPI: rank %d made more communicators than a restart can replay", g[F_LOGFULL][1]), 0;
		/* the first targets were set after this look: decide from the second on */
		/* ranks in a point-to-point call are let be: the second phase
		 * interrupts receives and drains what is in flight */
		if (iter > 0 && !g[F_BEHIND][0] && !g[F_COLL][0] && !g[F_NOTASKED][0])
			break;
		/* ckrun asks every process at once: a stand-in that has not
		 * asked by now is not going to (its round ended, or it never
		 * got one); holding the others longer would only stall them */
		if (g[F_NOTASKED][0] && g[F_ELAPSED][0] > (cut.limit_ms < NOTASKED_MS ? cut.limit_ms : NOTASKED_MS))
			return fail(why, whylen, "MPI: rank %d did not take part in the cut", g[F_NOTASKED][1]), 0;
		if (g[F_ELAPSED][0] > cut.limit_ms) {
			return fail(why, whylen, "MPI: rank %d did not reach the collective the others are in "
				    "within the cut's limit", g[F_BEHIND][0] ? g[F_BEHIND][1] : g[F_COLL][1]), 0;
		}
	}
	st(&cut.hold_all, 1);
	gate_changed();
	for (;;) {
		long long inflight, sum = 0;

		int s;

		settle(50);
		s = ld(&cut.state);
		local_flags(v, t0);
		/* Only while the serving thread touches no drained message: a
		 * receive still on its way to the gate would find the area
		 * changing under it (or miss an older message just drained) */
		if (s == CK_AST_IDLE || s == CK_AST_HELD || s == CK_AST_SEND) {
			/* receives out of MPI first: what would have matched
			 * one is drained then, and found first when it is
			 * posted again */
			int c = ck__agent_req_carry(cut.ch);

			v[F_NBWAIT] = c == 1;
			v[F_PENDING] |= c < 0;
			v[F_NOSPACE] = ck__agent_drain(cut.ch) == -ENOSPC;
		} else {
			v[F_BUSY] = 1;
		}
		inflight = (long long)ck__agent_sent() - (long long)ck__agent_recvd();
		reduce(v, g);
		MPI_Allreduce(&inflight, &sum, 1, MPI_LONG_LONG, MPI_SUM, cut.ctl);
		if (g[F_NOSPACE][0])
			return fail(why, whylen, "MPI: the messages in flight to rank %d at the cut do not fit its "
				    "drain area (CKPT_MPI_DRAIN)", g[F_NOSPACE][1]), 0;
		if (g[F_PENDING][0])
			return fail(why, whylen, "MPI: rank %d has a message found by a matched probe and not received, "
				    "or a receive pending on a freed communicator (not carried across a checkpoint)",
				    g[F_PENDING][1]), 0;
		if (!g[F_BUSY][0] && !g[F_NBWAIT][0] && sum == 0) {
			uint32_t dropped = 0;

			/* every agent is here at once (decided by reduced values) */
			if (ck__agent_log_compact(cut.ch, cut.ctl, cut.size, &dropped) != MPI_SUCCESS)
				return fail(why, whylen, "MPI: rank %d could not compact its log of communicators",
					    cut.rank), 0;
			if (cut.log) {
				int again, n = ck__agent_req_carried(&again);

				fprintf(stderr, "ckmpi-agent: rank %d: cut held after %d ms, %u message(s) in its drain area, "
					"%d nonblocking request(s) carried (%d receive(s) to post again), %u of the log of "
					"communicators dropped, %u kept\n",
					cut.rank, (int)(now_ms() - t0), cut.ch->h->ndrained, n, again, dropped,
					cut.ch->h->log_n);
			}
			return 1;
		}
		if (g[F_ELAPSED][0] <= cut.limit_ms) {
			usleep(BACKOFF_US);
			continue;
		}
		{
			snprintf(why, whylen, "MPI: %lld message(s) still in flight between ranks at the cut's limit",
				 sum);
			if (g[F_NBWAIT][0])
				fail(why, whylen, "MPI: rank %d has a nonblocking send or collective that did not "
				     "complete within the cut's limit", g[F_NBWAIT][1]);
			if (g[F_BUSY][0])
				fail(why, whylen, "MPI: rank %d stayed in a blocking call (send or send-receive) "
				     "past the cut's limit", g[F_BUSY][1]);
			return 0;
		}
	}
}

static void answer(int ok, const char *why)
{
	struct ck_mpi_chan_hdr *h = cut.ch->h;

	if (!ok) {
		ck__agent_req_again(cut.ch); /* only after a carry: the serving thread is held or idle */
		st(&cut.hold_all, 0);
		st(&cut.gate_on, 0);
		gate_changed();
	}
	if (!asked())
		return;
	snprintf(h->cut_why, sizeof(h->cut_why), "%s", ok ? "" : why);
	ck_mpi_chan_st_wake(&h->cut_ok, (uint32_t)ok);
	ck_mpi_chan_st_wake(&h->cut_done, ck_mpi_chan_ld(&h->cut_req));
}

/* Without MPI_THREAD_MULTIPLE this thread makes no MPI call: each ask is
 * answered here with the reason, and the job runs on. */
static void *ctl_single(void *arg)
{
	(void)arg;
	while (!ld(&cut.stop)) {
		if (asked())
			answer(0, "MPI: the agents' Open MPI lacks MPI_THREAD_MULTIPLE; no checkpoint of MPI state");
		ck_mpi_chan_wait_word(&cut.ch->h->cut_req, ck_mpi_chan_ld(&cut.ch->h->cut_req), 50);
	}
	return NULL;
}

static void *ctl_main(void *arg)
{
	uint64_t in = 0, gen = 0;
	MPI_Request rq, fin_rq = MPI_REQUEST_NULL;
	char why[sizeof(cut.ch->h->cut_why)];
	int fin_posted = 0;

	(void)arg;
	MPI_Irecv(&in, 1, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_CUT, cut.ctl, &rq);
	for (;;) {
		struct ck_mpi_chan_hdr *h = cut.ch->h;
		int flag = 0, join = 0, ok;

		MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
		if (flag) {
			join = in == gen + 1; /* older ones: a cut already run */
			MPI_Irecv(&in, 1, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_CUT, cut.ctl, &rq);
		}
		if (!join && asked()) {
			uint64_t next = gen + 1;
			join = 1;
			for (int r = 0; r < cut.size; r++)
				if (r != cut.rank)
					MPI_Send(&next, 1, MPI_UINT64_T, r, TAG_CUT, cut.ctl);
		}
		if (join) {
			gen++;
			ok = run_cut(why, sizeof(why));
			answer(ok, why);
			continue;
		}
		/* a cut that held: released at the round's end */
		if (ld(&cut.gate_on) && ck_mpi_chan_ld(&h->cut_release) == ck_mpi_chan_ld(&h->cut_done)) {
			ck__agent_req_again(cut.ch);
			st(&cut.hold_all, 0);
			st(&cut.gate_on, 0);
			gate_changed();
		}
		/* The program is done: once every agent's is (the barrier),
		 * no cut can come any more. Until then the others' cuts are
		 * joined (and fail: this rank finalized). */
		if (ld(&cut.finishing) && !fin_posted) {
			MPI_Ibarrier(cut.fin, &fin_rq);
			fin_posted = 1;
		}
		if (fin_posted) {
			MPI_Test(&fin_rq, &flag, MPI_STATUS_IGNORE);
			if (flag)
				break;
		}
		ck_mpi_chan_wait_word(ld(&cut.gate_on) ? &h->cut_release : &h->cut_req,
				      ck_mpi_chan_ld(ld(&cut.gate_on) ? &h->cut_release : &h->cut_req), 5);
	}
	MPI_Cancel(&rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	return NULL;
}

int ck__agent_cut_start(struct ck_mpi_chan *ch, int multiple)
{
	const char *lim = getenv("CKPT_MPI_CUT_MS");

	cut.ch = ch;
	cut.held_comm = -1;
	cut.multiple = multiple;
	cut.limit_ms = lim && atoi(lim) > 0 ? atoi(lim) : CK_MPI_CUT_MS_DEFAULT;
	cut.log = getenv("CKPT_MPI_CUT_LOG") && !strcmp(getenv("CKPT_MPI_CUT_LOG"), "1");
	MPI_Comm_rank(MPI_COMM_WORLD, &cut.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &cut.size);
	if (multiple)
		MPI_Comm_dup(MPI_COMM_WORLD, &cut.ctl);
	if (pthread_create(&cut.thr, NULL, multiple ? ctl_main : ctl_single, NULL))
		return -errno;
	cut.started = 1;
	return 0;
}

void ck__agent_cut_finish(MPI_Comm fin)
{
	if (!cut.started)
		return;
	if (!cut.multiple) {
		st(&cut.stop, 1);
		pthread_join(cut.thr, NULL);
		MPI_Barrier(fin);
		return;
	}
	cut.fin = fin;
	st(&cut.finishing, 1);
	pthread_join(cut.thr, NULL);
	cut.started = 0;
}
