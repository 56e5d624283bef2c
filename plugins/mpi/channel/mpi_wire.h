/* What travels over the MPI channel: request kinds and the numbering of
 * predefined communicators, datatypes and reduction ops. Both sides name a
 * predefined object by its Open MPI 4.1 symbol (ompi_mpi_NAME), so the lists
 * below are the one place that pairs a stand-in handle with the real one. */
#ifndef CK_MPI_WIRE_H
#define CK_MPI_WIRE_H

#include <stdint.h>

/* Exit status of a rank (and, through the agent's MPI_Abort, of mpirun)
 * that called something the stand-in does not support, or that was started
 * without an agent. */
#define CK_MPI_EXIT_UNSUPPORTED 70

/* A checkpoint's cut fails after this long (CKPT_MPI_CUT_MS): half of
 * ckrun's default round bound, so that the MPI reason reaches ckrun. */
#define CK_MPI_CUT_MS_DEFAULT 5000

/* The environment variable naming the channel (a POSIX shm name). */
#define CK_MPI_CHANNEL_ENV "CKPT_MPI_CHANNEL"

enum ck_mpi_wire_op {
	/* answer: rank in src, size in rtag, processor name in inl; the values of
	 * the attributes MPI_TAG_UB in rlen, MPI_UNIVERSE_SIZE in count,
	 * MPI_APPNUM in off, MPI_LASTUSEDCODE in len (-1 where unset) */
	CK_W_HELLO = 1,
	CK_W_FINALIZE,
	CK_W_ABORT, /* tag: error code */
	CK_W_BARRIER,
	CK_W_BCAST,
	CK_W_ALLREDUCE, /* flags in peer: 1 = in place (arena at off); else send at off, receive at off+len */
	CK_W_REDUCE,
	CK_W_SEND,
	CK_W_RECV, /* answer: src, rtag, rlen (bytes received into the arena at off) */
	CK_W_ERRHANDLER, /* comm, rop: one of CK_MPI_ERRHANDLERS */
	/* New communicators: the stand-in picks the number (root); answer: rank
	 * in src, size in rtag; rlen 0 when the result is MPI_COMM_NULL. */
	CK_W_COMM_DUP,   /* comm */
	CK_W_COMM_SPLIT, /* comm, color in peer, key in tag */
	CK_W_COMM_FREE,  /* comm */
	CK_W_COMM_SPLIT_TYPE, /* comm, split type in peer, key in tag */
	CK_W_ERROR_STRING, /* tag: the code; answer: its class in src, its text in inl */
	/* Gathers and scatters: comm, root, the layout in inl (struct ck_w_vec) */
	CK_W_GATHER,
	CK_W_GATHERV,
	CK_W_ALLGATHER,
	CK_W_ALLGATHERV,
	CK_W_SCATTER,
	CK_W_SCATTERV,
	CK_W_ALLTOALL,
	/* Probes: comm, peer, tag; answer: rc, src, rtag, rlen (bytes), and
	 * root = 1 if a message was found (the I- forms may find none). The
	 * matched forms keep the message in the agent under number count (the
	 * stand-in picks it); MRECV receives it (count: its number, dtype and
	 * len: the receive buffer) like RECV. */
	CK_W_PROBE,
	CK_W_IPROBE,
	CK_W_MPROBE,
	CK_W_IMPROBE,
	CK_W_MRECV,
	/* Nonblocking point-to-point: ISEND/IRECV as SEND/RECV, the request
	 * kept in the agent under number root (the stand-in picks it). TEST
	 * (root), TESTALL/WAITANY/TESTANY (count numbers, int32 in inl) complete
	 * requests in the agent, answer in flag (TEST/TESTALL: done or not; the
	 * -ANY: the index done, or MPI_UNDEFINED); WAIT (root) waits if needed
	 * and hands the status of a done request back (src, rtag, rlen), which
	 * ends it. */
	CK_W_ISEND,
	CK_W_IRECV,
	CK_W_WAIT,
	CK_W_TEST,
	CK_W_TESTALL,
	CK_W_WAITANY,
	CK_W_TESTANY,
	CK_W_SENDRECV, /* send: count/dtype/peer/tag at off; receive: ck_w_sendrecv in inl */
	CK_W_IALLREDUCE, /* as ALLREDUCE, the request kept under number root */
	CK_W_REDUCE_SCATTER, /* dtype, rop, peer: in place; ck_w_vec2 in inl (scnt: the receive counts) */
	CK_W_ALLTOALLV,      /* ck_w_vec2 in inl */
	CK_W_COMM_MEMBERS, /* comm; answer: the MPI_COMM_WORLD rank of each member, int32 at off */
};

#define CK_MAX_REQUESTS 256
#define CK_W_MAX_IDS 64 /* requests in one TESTALL/WAITANY/TESTANY */

/* Two buffers, each with its counts and displacements (int[comm size]). */
struct ck_w_vec2 {
	uint64_t soff, roff, scnt, sdsp, rcnt, rdsp;
	int32_t stype, rtype;
};

struct ck_w_sendrecv {
	uint64_t roff, rlen;
	int32_t rcount, rtype, source, rtag;
};

#define CK_MAX_MESSAGES 64

/* Where a gather's or scatter's buffers lie in the arena. The -v variants
 * have their counts and displacements (int[comm size]) in the arena too,
 * at cnt and dsp, for the side that has them (vectors on the receiving
 * side of gathers, on the sending side of scatters). */
struct ck_w_vec {
	uint64_t soff, roff, cnt, dsp;
	int32_t scount, stype, rcount, rtype;
	int32_t inplace;
};

/* Communicator numbers: the predefined ones first, then those the program
 * makes (the stand-in's table, mirrored by the agent's). */
#define CK_MAX_COMMS 64

#define CK_W_INPLACE 1

/* Predefined communicators: X(symbol suffix) */
#define CK_MPI_COMMS(X) X(comm_world) X(comm_self)

/* Predefined datatypes: X(symbol suffix, size in bytes) */
#define CK_MPI_TYPES(X)                                                                       \
	X(char, 1) X(signed_char, 1) X(unsigned_char, 1) X(byte, 1) X(packed, 1) X(short, 2)   \
	X(unsigned_short, 2) X(int, 4) X(unsigned, 4) X(long, 8) X(unsigned_long, 8)          \
	X(long_long_int, 8) X(unsigned_long_long, 8) X(float, 4) X(double, 8)                 \
	X(long_double, 16) X(wchar, 4) X(c_bool, 1) X(int8_t, 1) X(uint8_t, 1) X(int16_t, 2)  \
	X(uint16_t, 2) X(int32_t, 4) X(uint32_t, 4) X(int64_t, 8) X(uint64_t, 8) X(aint, 8)  \
	X(offset, 8) X(count, 8) X(c_float_complex, 8) X(c_double_complex, 16) X(2int, 8)     \
	X(float_int, 8) X(double_int, 16) X(long_int, 16) X(short_int, 8)

/* Predefined reduction ops: X(symbol suffix) */
#define CK_MPI_OPS(X)                                                                          \
	X(op_sum) X(op_max) X(op_min) X(op_prod) X(op_land) X(op_lor) X(op_lxor) X(op_band)     \
	X(op_bor) X(op_bxor) X(op_maxloc) X(op_minloc)

/* Predefined error handlers: X(symbol suffix) */
#define CK_MPI_ERRHANDLERS(X) X(errors_are_fatal) X(errors_return)

#define CK__ENUM_EH(n) CK_EH_##n,
#define CK__ENUM_COMM(n) CK_COMM_##n,
#define CK__ENUM_TYPE(n, s) CK_DT_##n,
#define CK__ENUM_OP(n) CK_OP_##n,
enum { CK_MPI_COMMS(CK__ENUM_COMM) CK_NCOMMS };
enum { CK_MPI_TYPES(CK__ENUM_TYPE) CK_NTYPES };
enum { CK_MPI_OPS(CK__ENUM_OP) CK_NOPS };
enum { CK_MPI_ERRHANDLERS(CK__ENUM_EH) CK_NEHS };

#endif
