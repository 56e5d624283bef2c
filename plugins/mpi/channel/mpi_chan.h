/* The shared-memory channel between a rank's program (the stand-in
 * libmpi.so.40) and its agent (which owns the real MPI): one POSIX shared
 * memory object holding a header, a ring of request slots and a data arena.
 * Doorbells are futex words in the mapping (process-shared futexes), so a
 * side that waits sleeps in the kernel after a short spin.
 *
 * The channel knows nothing about MPI and nothing about who started whom:
 * one side creates it by name, the other opens it by name. One client
 * thread posts (the stand-in serialises its callers), one server serves. */
#ifndef CK_MPI_CHAN_H
#define CK_MPI_CHAN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define CK_MPI_CHAN_MAGIC 0x636b6d70696368aull /* "ckmpich" */
#define CK_MPI_CHAN_VERSION 4
#define CK_MPI_CHAN_SLOTS 16
#define CK_MPI_CHAN_INLINE 256 /* bytes of small payload carried in a slot */

enum ck_mpi_slot_state { CK_SLOT_FREE = 0, CK_SLOT_POSTED = 1, CK_SLOT_DONE = 2 };

/* One request and, once served, its answer. The meaning of the fields is
 * the caller's (see mpi_wire.h); the channel only moves `state`. */
struct ck_mpi_req {
	uint32_t state; /* futex word: enum ck_mpi_slot_state */
	uint32_t op;
	int32_t comm, dtype, rop, peer, tag, root;
	uint64_t count;
	uint64_t off, len; /* a range of the arena */
	uint64_t seq;      /* set by the channel: the request's number */
	/* answer */
	int32_t rc, src, rtag, flag;
	uint64_t rlen;
	uint8_t inl[CK_MPI_CHAN_INLINE];
};

/* A communicator the agent made (dup, split, split_type) or freed, in the
 * order it did: a restarted agent makes them again from this log. A cut
 * that holds drops what every member agrees is gone (agent_log.c). */
#define CK_MPI_LOG_MAX 4096
#define CK_MPI_LOG_COMPACT 512 /* a cut compacts once some rank's log holds this many */
struct ck_mpi_log_ent {
	uint32_t op;            /* the wire op that made it (CK_W_COMM_*) */
	int32_t parent, a, b;   /* parent communicator, color/type, key */
	int32_t id;             /* its number */
	uint32_t cidx;          /* a creation: the parent's how-many-th (its members agree) */
	uint32_t none;          /* a creation that gave this rank MPI_COMM_NULL (split) */
	uint32_t pad;
	uint64_t pkey, key;     /* the parent's key and the new communicator's (0: none) */
};

/* A message the cut took out of MPI (in flight when the ranks stopped):
 * kept in the drain area of the channel until a receive of the program
 * matches it, before any message that came later. */
#define CK_MPI_DRAIN_MAX 256
struct ck_mpi_drained {
	int32_t comm, src, tag, taken;
	uint64_t off, len; /* in the drain area */
};

/* The program's nonblocking requests as a cut left them (by the request's
 * number): a receive the cut cancelled in MPI, to be posted again when the
 * agent serves again (the same one, or a new one after a restart), or a
 * request that completed, its answer kept for the program's wait. */
#define CK_MPI_PREQ_MAX 256
enum { CK_PREQ_NONE = 0, CK_PREQ_POST_AGAIN = 1, CK_PREQ_DONE = 2 };
struct ck_mpi_preq {
	uint32_t state, op;
	int32_t comm, dtype, peer, tag; /* a receive to post again */
	uint64_t count, off, len;
	uint64_t order;                 /* the receives' posting order */
	uint64_t key;                   /* its communicator's key (agent_cut.c) when posted */
	int32_t src, rtag, err, pad;    /* a done one's status */
	uint64_t rlen;                  /* and its bytes */
};

struct ck_mpi_chan_hdr {
	uint64_t magic;
	uint32_t version, nslots;
	uint64_t size, arena_off, arena_len;
	int32_t server_pid, client_pid;
	uint32_t req_bell; /* futex word: bumped on every post */
	uint32_t server_waiting, client_waiting;
	uint32_t closed; /* set by a side that leaves; wakes the other */
	uint64_t head;   /* next slot the client posts (client-owned) */
	uint64_t tail;   /* next slot the server serves (server-owned) */
	/* Each side's pid namespace (an inode number): a peer in another one
	 * (a program inside ckrun's job, its agent outside) cannot be looked
	 * up by pid; the server's life is then told by server_lock. */
	uint64_t server_pidns, client_pidns;
	pthread_mutex_t server_lock; /* robust, process-shared, held by the server until it dies */
	/* A checkpoint's cut: the client asks (cut_req = cut_done + 1), the
	 * server answers (cut_ok, cut_why, then cut_done = cut_req) and, when
	 * the cut holds, serves nothing until cut_release = cut_done. */
	uint32_t cut_req, cut_done, cut_ok, cut_release;
	uint32_t adopted; /* futex word: a restarted client moved its state in */
	int32_t world_rank, world_size; /* the server's, for a restarted client to check */
	char cut_why[200];
	uint32_t log_n, log_full;
	struct ck_mpi_log_ent log[CK_MPI_LOG_MAX];
	/* after the arena: the drain area (server-owned) */
	uint64_t drain_off, drain_len, drain_used;
	uint32_t ndrained;
	struct ck_mpi_drained drained[CK_MPI_DRAIN_MAX];
	struct ck_mpi_preq preq[CK_MPI_PREQ_MAX]; /* written by the server at a cut */
	struct ck_mpi_req slots[CK_MPI_CHAN_SLOTS];
};

struct ck_mpi_chan {
	struct ck_mpi_chan_hdr *h;
	uint8_t *arena, *drain;
	size_t arena_len, map_len;
	char name[64];
	uint64_t pidns; /* this side's */
	int server;     /* this process made it (and holds server_lock) */
};

/* Server side: creates (exclusively) and maps the object NAME ("/..."),
 * with a drain area of DRAIN_LEN bytes after the arena (0: none). */
int ck_mpi_chan_create(struct ck_mpi_chan *c, const char *name, size_t arena_len, size_t drain_len);
/* The same, for the agent of rank WORLD_RANK of WORLD_SIZE ranks: both are
 * in the header before a client can open it. */
int ck_mpi_chan_create_world(struct ck_mpi_chan *c, const char *name, size_t arena_len, size_t drain_len,
			     int world_rank, int world_size);
/* Client side: maps an existing channel; -EPROTO if it is not one. */
int ck_mpi_chan_open(struct ck_mpi_chan *c, const char *name);
/* Marks this side gone (wakes the other), unmaps. */
void ck_mpi_chan_close(struct ck_mpi_chan *c);
/* Unmaps without a word to the other side (a process that forked the one
 * that serves). The server's lock is released first: a robust lock left in
 * an unmapped page would break the thread's next robust lock. */
void ck_mpi_chan_forget(struct ck_mpi_chan *c);
/* 1 if NAME is a channel whose server still lives (without a word to
 * either side), 0 otherwise. */
int ck_mpi_chan_in_use(const char *name);
/* Removes the name (the mapping stays valid for who holds it). */
int ck_mpi_chan_unlink(const char *name);

/* Client, in a restored process whose mapping C still holds the old
 * channel's contents (ring, log, arena): moves them into the new channel
 * NAME made by a new server (waiting up to TIMEOUT_MS for it), maps it at
 * the same address and tells the server (adopted); the requests the cut
 * left (preq) come along. -EMSGSIZE when the new
 * channel has another size, -EXDEV when its server is of another rank or
 * world size. */
int ck_mpi_chan_adopt(struct ck_mpi_chan *c, const char *name, int timeout_ms);
/* Server: waits until a client adopted the channel (restart) or
 * TIMEOUT_MS passed (-ETIMEDOUT). */
int ck_mpi_chan_wait_adopted(struct ck_mpi_chan *c, int timeout_ms);
/* Server of an adopted channel: the request it took last and never
 * answered (the one a cut held) is served again. */
void ck_mpi_chan_rewind(struct ck_mpi_chan *c);
/* Whether the other side is still there (0: gone). */
int ck_mpi_chan_peer_alive(struct ck_mpi_chan *c, int peer_is_server);
/* Futex helpers on words of the mapping, for the cut's handshake. */
uint32_t ck_mpi_chan_ld(uint32_t *w);
void ck_mpi_chan_st_wake(uint32_t *w, uint32_t v);
/* Waits up to TIMEOUT_MS while *W == OLD (0: changed, -ETIMEDOUT). */
int ck_mpi_chan_wait_word(uint32_t *w, uint32_t old, int timeout_ms);

/* Client: the next free slot (waits while the ring is full); NULL if the
 * server left or the slot was answered and never released. */
struct ck_mpi_req *ck_mpi_chan_slot(struct ck_mpi_chan *c);
/* Client: hands a filled slot to the server. */
void ck_mpi_chan_post(struct ck_mpi_chan *c, struct ck_mpi_req *r);
/* Client: waits until the server answered R: 0, or -EPIPE if the server
 * left (or its process is gone). */
int ck_mpi_chan_wait(struct ck_mpi_chan *c, struct ck_mpi_req *r);
/* Client: gives an answered slot back. */
void ck_mpi_chan_release(struct ck_mpi_chan *c, struct ck_mpi_req *r);

/* Server: the next posted request, waiting up to TIMEOUT_MS (-1: for ever):
 * 0 and *R set, -ETIMEDOUT, or -EPIPE once the client closed. */
int ck_mpi_chan_next(struct ck_mpi_chan *c, struct ck_mpi_req **r, int timeout_ms);
/* Server: publishes the answer of R (the request after it may follow). */
void ck_mpi_chan_done(struct ck_mpi_chan *c, struct ck_mpi_req *r);

#endif
