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

#include <stddef.h>
#include <stdint.h>

#define CK_MPI_CHAN_MAGIC 0x636b6d70696368aull /* "ckmpich" */
#define CK_MPI_CHAN_VERSION 1
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
	struct ck_mpi_req slots[CK_MPI_CHAN_SLOTS];
};

struct ck_mpi_chan {
	struct ck_mpi_chan_hdr *h;
	uint8_t *arena;
	size_t arena_len, map_len;
	char name[64];
};

/* Server side: creates (exclusively) and maps the object NAME ("/..."). */
int ck_mpi_chan_create(struct ck_mpi_chan *c, const char *name, size_t arena_len);
/* Client side: maps an existing channel; -EPROTO if it is not one. */
int ck_mpi_chan_open(struct ck_mpi_chan *c, const char *name);
/* Marks this side gone (wakes the other), unmaps. */
void ck_mpi_chan_close(struct ck_mpi_chan *c);
/* Removes the name (the mapping stays valid for who holds it). */
int ck_mpi_chan_unlink(const char *name);

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
