/* ckmpi-agent: one per MPI rank, started by mpirun. It owns the real Open
 * MPI, creates the rank's channel, starts the rank's program with the
 * stand-in libmpi.so.40 first on its library path, and makes the program's
 * MPI calls on its behalf. */
#ifndef CK_MPI_AGENT_H
#define CK_MPI_AGENT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/mpi/channel/mpi_chan.h"

/* Makes the real call for request R (data in the channel's arena) and
 * fills R's answer. Returns 1 once the program finalised, 0 otherwise, or
 * with CK_SERVE_HELD: a cut interrupted the call (a blocking receive,
 * probe, wait or waitany); R is not answered and is served again once the
 * gate lets it. */
#define CK_SERVE_HELD 2
int ck__agent_serve(struct ck_mpi_chan *ch, struct ck_mpi_req *r);
/* The MCA settings the agent pins before MPI_Init (deterministic
 * collectives), unless the environment sets them already. */
void ck__agent_pin_mca(void);
/* What decides the collectives' results: Open MPI's version and the pinned
 * settings as the agents will have them ("Open MPI v4.1.4 coll=^sm,..."),
 * which the checkpoint records; callable before MPI_Init. */
int ck__agent_profile(char *out, size_t n);

/* agent_name.c: the channel's name is removed by a signal that ends the
 * agent before the program opened it, and by _drop once it has. */
void ck__agent_name_guard(const char *chan);
int ck__agent_name_held(void);
void ck__agent_name_drop(const char *chan);

/* ckmpi-agent --serve KEY [--restore] (agent_job.c): returns the exit status. */
int ck__agent_job(const char *key, int restore, size_t arena, int *argc, char ***argv);

/* ---- ckrun --np: serving a program inside ckrun's job (agent_cut.c) ---- */

/* What the serving thread is doing, for the cut. */
enum { CK_AST_IDLE, CK_AST_HELD, CK_AST_COLL, CK_AST_P2P, CK_AST_SEND, CK_AST_OTHER };
/* CK_AST_SEND for a blocking send (it touches no drained message: the
 * drain may run meanwhile, and is what lets it end), CK_AST_P2P otherwise. */
int ck__agent_p2p_state(unsigned op);
void ck__agent_set_state(int s);
/* Before serving R: waits while a cut holds it, counts a collective. */
void ck__agent_gate(struct ck_mpi_req *r);
/* The control thread (on a duplicate of MPI_COMM_WORLD): cuts asked for by
 * the program's stand-in or by another agent. */
int ck__agent_cut_start(struct ck_mpi_chan *ch, int multiple);
/* The program is done: the control thread serves the others' cuts until
 * every agent's program is (a barrier on FIN), then ends; returns then. */
void ck__agent_cut_finish(MPI_Comm fin);

/* Kept by agent_serve.c for the cut: */
int ck__agent_is_coll(unsigned op);
int ck__agent_is_p2p(unsigned op);
/* A key of communicator C that all its members share (0: none). */
uint64_t ck__agent_key(int c);
/* Collectives the program entered on C. */
int64_t ck__agent_ncoll(int c);
void ck__agent_ncoll_add(int c);
/* Messages sent and received by the program (MPI_PROC_NULL aside). */
uint64_t ck__agent_sent(void);
uint64_t ck__agent_recvd(void);
/* Matched-probe messages not received yet (a cut does not carry them). */
int ck__agent_outstanding(void);
/* 0: the program is connected; 1: not yet; 2: finalized or gone. */
int ck__agent_client_state(void);
void ck__agent_set_client_state(int s);
/* Whether the cut holds every request now (its second phase). */
int ck__agent_holding(void);
/* The real communicator of wire number I (MPI_COMM_NULL: none). */
MPI_Comm ck__agent_comm(int i);
void ck__agent_count_recv(int src);
void ck__agent_count_send(int peer);
/* Wire numbers to the real handles (MPI_DATATYPE_NULL, MPI_OP_NULL: none). */
MPI_Datatype ck__agent_type(int i);
MPI_Op ck__agent_op(int i);
/* Whether [off, off+len) lies in the arena. */
int ck__agent_in_arena(const struct ck_mpi_chan *ch, uint64_t off, uint64_t len);
/* R's answer from a status: source, tag, bytes. */
void ck__agent_answer_status(struct ck_mpi_req *r, const MPI_Status *st);

/* agent_req.c: the program's nonblocking requests. START: ISEND, IRECV,
 * IALLREDUCE under number R->root; COMPLETE: TEST, TESTALL, WAITANY,
 * TESTANY; WAIT hands a done request's status over. WAIT and WAITANY set
 * *HELD, R unanswered, when a cut interrupts them. */
int ck__agent_req_start(struct ck_mpi_chan *ch, struct ck_mpi_req *r, MPI_Comm comm, MPI_Datatype dt);
int ck__agent_req_complete(struct ck_mpi_req *r, int *held);
int ck__agent_req_wait(struct ck_mpi_req *r, int *held);
/* The cut's second phase, the serving thread held (or in a blocking send):
 * receives cancelled in MPI (to be posted again) or found done, sends and
 * nonblocking collectives tested. 1 while one has still to complete; 0
 * once all are carried, their table written in the channel. */
int ck__agent_req_carry(struct ck_mpi_chan *ch);
/* Requests the program holds (for the cut's log), and how many of them
 * are receives to post again. */
int ck__agent_req_carried(int *again);
/* The receives the cut cancelled, posted again in the program's order (a
 * cut that failed, or the round's end), before the serving thread runs. */
int ck__agent_req_again(struct ck_mpi_chan *ch);
/* A restarted agent: the requests from the channel's table, the receives
 * posted again. */
int ck__agent_req_restore(struct ck_mpi_chan *ch);
/* agent_drain.c: messages the cut took out of MPI. */
int ck__drain_find(struct ck_mpi_chan *ch, int comm, int src, int tag);
void ck__drain_status(struct ck_mpi_chan *ch, int i, struct ck_mpi_req *r);
int ck__drain_take(struct ck_mpi_chan *ch, int i, uint64_t off, uint64_t cap, struct ck_mpi_req *r);
/* A matched probe took message I: no other receive matches it. */
void ck__drain_claim(struct ck_mpi_chan *ch, int i);
/* The control thread, with the serving thread idle, held or in a blocking
 * send (none of which touches the drain area): the messages handed over
 * leave the area, and every message that arrived for this rank goes in;
 * -ENOSPC when one does not fit. */
int ck__agent_drain(struct ck_mpi_chan *ch);
/* A restarted agent: makes the communicators of the channel's log again. */
int ck__agent_replay(struct ck_mpi_chan *ch);
/* The channel whose header keeps the log of communicators. */
void ck__agent_log_to(struct ck_mpi_chan *ch);
/* At a cut that holds, on every agent at once (CTL: the agents' own
 * communicator of SIZE): drops from the log the communicators every member
 * freed, once some agent's log holds CK_MPI_LOG_COMPACT (agent_log.c);
 * *DROPPED: how many entries went. An MPI error code. */
int ck__agent_log_compact(struct ck_mpi_chan *ch, MPI_Comm ctl, int size, uint32_t *dropped);

#endif
