/* ckmpi-agent --serve KEY [--restore]: the agent of one rank of a job that
 * ckrun runs (ckrun --np). ckrun starts the agents with mpirun outside its
 * job's namespaces and the programs inside them (ckmpi-ranks); a program
 * finds its agent's channel by name, /ckmpi-KEY-RANK. Unlike the plain
 * mode the agent neither starts nor waits for the program: ckrun owns both
 * and ends the agents when the job ends or stops.
 *
 * --restore: the programs come back from a checkpoint; each adopts its
 * agent's channel (moves its ring, log and arena in), the agent makes the
 * program's communicators again from the log, with every other agent,
 * takes the nonblocking requests the cut left (posting its receives again)
 * and serves the request the cut held. */
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

/* CKPT_MPI_DRAIN: room for the messages in flight at a cut (16 MiB). */
static size_t drain_size(void)
{
	const char *v = getenv("CKPT_MPI_DRAIN");
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return 16ul << 20;
	n = strtoull(v, &end, 0);
	if (*end || n > (1ull << 36)) {
		fprintf(stderr, "ckmpi-agent: CKPT_MPI_DRAIN=%s: not a size up to 64 GiB\n", v);
		exit(64);
	}
	return (size_t)n;
}

/* The name is ours (it holds our uid's key): one left by an agent killed
 * before its program connected goes; one whose agent lives is another
 * job's of the same name and user (-EADDRINUSE). */
static int create(struct ck_mpi_chan *ch, const char *name, size_t arena, size_t drain, int rank, int size)
{
	int rc = ck_mpi_chan_create_world(ch, name, arena, drain, rank, size);

	if (rc == -EEXIST && ck_mpi_chan_in_use(name))
		return -EADDRINUSE;
	if (rc == -EEXIST) {
		ck_mpi_chan_unlink(name);
		rc = ck_mpi_chan_create_world(ch, name, arena, drain, rank, size);
	}
	return rc;
}

/* A restart: 1 once the program adopted the channel; 0 when it connects
 * afresh instead (it had not called MPI_Init at the checkpoint: no cut was
 * needed, and it says HELLO like a new program). ckrun ends us if neither
 * comes. */
static int adopted_or_fresh(struct ck_mpi_chan *ch)
{
	for (;;) {
		struct ck_mpi_req *r = &ch->h->slots[ch->h->tail % CK_MPI_CHAN_SLOTS];

		if (ck_mpi_chan_ld(&ch->h->adopted))
			return 1;
		if (ck_mpi_chan_ld(&r->state) == CK_SLOT_POSTED && r->op == CK_W_HELLO)
			return 0;
		ck_mpi_chan_wait_word(&ch->h->req_bell, ck_mpi_chan_ld(&ch->h->req_bell), 20);
	}
}

/* Every rank's program done: the real MPI_Finalize, after the control
 * thread served the cuts the others may still ask for until then. */
static void finish(MPI_Comm fin)
{
	ck__agent_cut_finish(fin);
	MPI_Comm_free(&fin);
	MPI_Finalize();
}

int ck__agent_job(const char *key, int restore, size_t arena, int *argc, char ***argv)
{
	char chan[64];
	int rank = -1, size = 0, provided = 0, rc, finalized = 0, f;
	size_t drain = drain_size();
	unsigned long served = 0;
	struct ck_mpi_chan ch;
	struct ck_mpi_req *r;
	MPI_Comm fin;

	ck__agent_pin_mca();
	MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_dup(MPI_COMM_WORLD, &fin);
	snprintf(chan, sizeof(chan), "/ckmpi-%s-%d", key, rank);
	rc = create(&ch, chan, arena, drain, rank, size);
	if (rc == -EADDRINUSE) {
		fprintf(stderr, "ckmpi-agent: rank %d: the channel %s belongs to a running job (a job of the same name "
				"by the same user on this host: give one of them another --job)\n", rank, chan);
		MPI_Abort(MPI_COMM_WORLD, 69);
	}
	if (rc) {
		fprintf(stderr, "ckmpi-agent: rank %d: cannot create the channel %s: %s\n", rank, chan, strerror(-rc));
		MPI_Abort(MPI_COMM_WORLD, 69);
	}
	ck__agent_name_guard(chan);
	ck__agent_log_to(&ch);
	if (ck__agent_cut_start(&ch, provided == MPI_THREAD_MULTIPLE)) {
		fprintf(stderr, "ckmpi-agent: rank %d: cannot start the control thread\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 71);
	}
	if (restore && adopted_or_fresh(&ch)) {
		/* a cut asked meanwhile waits for the replay (busy, not absent) */
		ck__agent_set_state(CK_AST_OTHER);
		ck__agent_set_client_state(0);
		ck__agent_name_drop(chan);
		rc = ck__agent_replay(&ch);
		if (rc != MPI_SUCCESS) {
			fprintf(stderr, "ckmpi-agent: rank %d: cannot make the program's communicators again (error %d)\n",
				rank, rc);
			MPI_Abort(MPI_COMM_WORLD, 71);
		}
		rc = ck__agent_req_restore(&ch);
		if (rc != MPI_SUCCESS) {
			fprintf(stderr, "ckmpi-agent: rank %d: cannot post the program's receives again (error %d)\n",
				rank, rc);
			MPI_Abort(MPI_COMM_WORLD, 71);
		}
		ck_mpi_chan_rewind(&ch);
	}
	for (;;) {
		ck__agent_set_state(CK_AST_IDLE);
		rc = ck_mpi_chan_next(&ch, &r, 100);
		if (rc == -ETIMEDOUT)
			continue;
		if (rc)
			break; /* the program closed the channel: it finalized */
		do
			ck__agent_gate(r);
		while ((f = ck__agent_serve(&ch, r)) & CK_SERVE_HELD);
		finalized |= f & 1;
		ck__agent_set_state(CK_AST_OTHER);
		served++;
		if (r->op == CK_W_HELLO && ck__agent_name_held()) { /* mapped by the program: the name can go */
			ck__agent_name_drop(chan);
			ck__agent_set_client_state(0);
		}
		ck_mpi_chan_done(&ch, r);
		if (finalized)
			ck__agent_set_client_state(2);
	}
	ck__agent_set_client_state(2);
	ck__agent_set_state(CK_AST_IDLE);
	if (getenv("CKPT_MPI_STATS") && !strcmp(getenv("CKPT_MPI_STATS"), "1"))
		fprintf(stderr, "ckmpi-agent: rank %d: %lu requests served\n", rank, served);
	if (!finalized) {
		fprintf(stderr, "ckmpi-agent: rank %d: the program left without MPI_Finalize\n", rank);
		fflush(NULL);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	finish(fin);
	return 0;
}
