/* The stand-in libmpi.so.40: internal interface between its files. The
 * program's MPI calls arrive here; each becomes a request on the channel to
 * the rank's agent, which makes the real call. Handles are the addresses of
 * this library's own ompi_mpi_* objects (or the program's copies of them,
 * which the dynamic linker makes this library use too). */
#ifndef CK_STI_H
#define CK_STI_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>

#include "plugins/mpi/channel/mpi_chan.h"
#include "plugins/mpi/channel/mpi_wire.h"

#pragma GCC visibility push(hidden)

/* A communicator the program made: its handle is this object's address. */
struct ck__comm {
	int id, rank, size;
};

struct ck__sti {
	struct ck_mpi_chan ch;
	int inited, finalized;
	int rank, size;
	/* The arena's first half serves blocking calls (each uses it from
	 * offset 0, one at a time); the second half holds the buffers of
	 * nonblocking calls in flight (sti_req.c allocates them). */
	size_t scratch;
	/* CKPT_MPI_SEGMENT: reductions longer than this go in segments of it,
	 * two in flight (0: one segment per blocking half, one at a time). */
	size_t segment;
	char host[MPI_MAX_PROCESSOR_NAME];
	int errh[CK_MAX_COMMS]; /* each communicator's error handler (CK_EH_*) */
	struct ck__comm *comms[CK_MAX_COMMS]; /* made by the program (numbers >= CK_NCOMMS) */
	int tag_ub, universe, appnum, lastcode; /* predefined attributes' values */
};
extern struct ck__sti ck__sti;

/* Prints "ckrun-mpi: FN: WHY" and ends the program with
 * CK_MPI_EXIT_UNSUPPORTED (the agent then aborts the job with it). */
__attribute__((noreturn, format(printf, 2, 3))) void ck__sti_die(const char *fn, const char *fmt, ...);
/* The same from a va_list; FLUSH 0 leaves the program's stdio unflushed
 * (a restored rank: what it buffered before the checkpoint is not its to
 * print twice). */
__attribute__((noreturn)) void ck__sti_vdie(const char *fn, int flush, const char *fmt, va_list ap);
/* The entry point of every MPI function the stand-in lacks. */
__attribute__((noreturn)) void ck__sti_unsupported(const char *fn);

/* Channel: a slot to fill (dies if the agent is gone), then the call. */
struct ck_mpi_req *ck__sti_begin(const char *fn, unsigned op);
/* Posts R, waits for the answer; returns the agent's MPI return code. The
 * slot stays the caller's until ck__sti_end. */
int ck__sti_call(const char *fn, struct ck_mpi_req *r);
void ck__sti_end(struct ck_mpi_req *r);
/* The same in pieces, for a caller with several requests in flight: the
 * lock held over all of them, a slot, then ck_mpi_chan_post and a wait. */
void ck__sti_lock(void);
void ck__sti_unlock(void);
/* Between the checkpoint plugin's use of the channel and MPI_Finalize. */
void ck__sti_cut_lock(void);
void ck__sti_cut_unlock(void);
struct ck_mpi_req *ck__sti_slot(const char *fn, unsigned op);
int ck__sti_wait(const char *fn, struct ck_mpi_req *r);
/* Dies naming FN unless MPI_Init ran (and Finalize did not). */
void ck__sti_need_init(const char *fn);

/* Runs the delete callbacks of COMM's attributes (MPI_Finalize: COMM_SELF). */
void ck__sti_attr_delete_all(int comm);
/* Copies the attributes of OLD to NEW with their copy callbacks (dup). */
int ck__sti_attr_copy(int old, int new_);
/* The handle of wire communicator ID. */
MPI_Comm ck__sti_comm_handle(int id);

/* A reduction with a user-defined op (in the job): 1 and *RC set if OP is
 * one, 0 if it is not (ROOT < 0: Allreduce). */
int ck__sti_user_reduce(const char *fn, const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
			int root, MPI_Comm comm, int *rc);

/* A datatype as the channel carries it: elements of the predefined type
 * WIRE, NBASE of them per element of the program's type; SIZE packed bytes
 * per element, EXTENT in the program's buffer; the vector's shape if it is
 * a derived type (sti_dtype.c). */
struct ck__tinfo {
	int wire, nbase, derived;
	size_t size, extent, bsize;
	int count, blocklen, stride;
};
/* Dies naming FN on a type that is neither predefined nor committed. */
void ck__sti_tinfo(const char *fn, MPI_Datatype t, struct ck__tinfo *ti);
void ck__sti_pack(void *dst, const void *src, size_t count, const struct ck__tinfo *ti);
/* Unpacks BYTES packed bytes (a receive may bring less than asked). */
void ck__sti_unpack(void *dst, const void *src, size_t bytes, const struct ck__tinfo *ti);
int ck__sti_is_derived(MPI_Datatype t);
/* 1 and the geometry for a derived type, 0 for a predefined one. */
int ck__sti_type_geometry(MPI_Datatype t, size_t *size, size_t *extent);

/* Handles to wire numbers; each dies naming FN on a handle it lacks. */
int ck__sti_comm(const char *fn, MPI_Comm c);
int ck__sti_type(const char *fn, MPI_Datatype t, size_t *size);
int ck__sti_op(const char *fn, MPI_Op op);
int ck__sti_errh(const char *fn, MPI_Errhandler eh);
MPI_Errhandler ck__sti_errh_handle(int i);
/* Rank and size of this process in a wire communicator. */
int ck__sti_comm_rank(int comm);
int ck__sti_comm_size(int comm);

#pragma GCC visibility pop

#endif
