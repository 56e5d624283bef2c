/* The socket plugin's agent half, inside ckrun. libckpt only labels a
 * descriptor CK_FD_SOCKET; everything else happens here, from outside the
 * job, because a connection between two of the job's processes has to be
 * seen from both ends at once:
 *
 *   checkpoint (every process parked): each socket is read through a
 *     duplicate (pidfd_getfd): family, type, state, addresses, options;
 *     connections are paired (TCP by address pair, UNIX by peer inode);
 *     the bytes in flight toward each end are saved (peeked, or for
 *     datagrams and for TCP data still in the sender's queue, taken and
 *     written straight back), in the fd's data chunks;
 *   restore: listeners are bound again (same address and port where
 *     possible), pairs are made anew (TCP over loopback, UNIX with
 *     socketpair) and the saved bytes are written into them, connections
 *     that were waiting in a listener's queue are made again, connections
 *     to peers outside the job come back with the bytes or datagrams
 *     they had received and not yet read, then EOF (the peer had closed)
 *     or a reset (ECONNRESET on next use).
 *
 * Layout in struct ck_pd_fd (kind CK_FD_SOCKET): see CK_SOCK_* below. */
#ifndef CK_SOCK_AGENT_H
#define CK_SOCK_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "launcher/image/chunkio.h"
#include "launcher/image/manifest.h"
#include "ckrun/procdesc.h"

/* u64[0]: family | type << 16 | state << 32 */
enum ck_sock_state {
	CK_SOCK_UNCONNECTED = 0, /* maybe bound */
	CK_SOCK_LISTENING = 1,
	CK_SOCK_PAIRED = 2,   /* connected to another socket of the job */
	CK_SOCK_PENDING = 3,  /* connected to a listener of the job, not yet accepted */
	CK_SOCK_EXTERNAL = 4, /* connected to a peer outside the job: its queue, then EOF or reset */
};
/* u64[1]: local address length | peer length << 16 | backlog << 32
 * u64[2]: CK_SOCKOPT_* | linger seconds << 32
 * u64[3]: SO_RCVBUF | SO_SNDBUF << 32 (as the kernel reports them)
 * size:   the paired socket's inode
 * path:   [0, 256) a readable description, [256, 384) local sockaddr,
 *         [384, 512) peer sockaddr
 * data:   bytes in flight toward this socket (stream), or its queued
 *         datagrams as u32 length + bytes; with CK_SOCKOPT_RIGHTS
 *         preceded by the files in flight (sock_rights.c):
 *           u32 magic, ndesc, nmark, nidx;
 *           struct ck_pd_fd desc[ndesc];   (the files, as descriptors)
 *           struct ck_sock_mark mark[nmark];
 *           u32 idx[nidx];                 (into desc, mark[].first on)
 *         then the bytes or datagrams as above. */
#define CK_SOCKOPT_NODELAY 0x1
#define CK_SOCKOPT_KEEPALIVE 0x2
#define CK_SOCKOPT_REUSEADDR 0x4
#define CK_SOCKOPT_REUSEPORT 0x8
#define CK_SOCKOPT_V6ONLY 0x10
#define CK_SOCKOPT_LINGER 0x20
/* EXTERNAL: the peer had closed its end (a stream reads EOF after its
 * data, not a reset); without it (earlier images too) a reset follows */
#define CK_SOCKOPT_PEER_CLOSED 0x40
/* data starts with a CK_SOCK_RIGHTS_MAGIC block: descriptors in flight */
#define CK_SOCKOPT_RIGHTS 0x80
/* UNCONNECTED: data holds queued datagrams with their senders' addresses
 * (sock_dgq.c): u32 length, u32 address length, address, bytes */
#define CK_SOCKOPT_FROM 0x100
/* PAIRED streams: shutdown() state. SHUT_RD: nothing more can be read
 * after the queue (the peer shut its sending side, or this end its
 * receiving one: the same state for UNIX sockets); SHUT_WR (TCP): this end
 * sent its FIN. Applied again once the bytes in flight are back. */
#define CK_SOCKOPT_SHUT_RD 0x200
#define CK_SOCKOPT_SHUT_WR 0x400
/* offset and mtime_ns hold more options (sock_opts.c) */
#define CK_SOCKOPT_EXT 0x800
/* the options of sock_opts.c's second set are there (pipe_len, pipe_cap,
 * u64[1]'s top 16 bits; older images: nothing) */
#define CK_SOCKOPT_EXT2 0x1000
/* PAIRED UNIX sockets with SO_PASSCRED: data holds the queue with each
 * run's or datagram's sender (sock_creds.c): u32 length, i32 pid in the
 * job, u32 uid, u32 gid, bytes; filled once every process exists */
#define CK_SOCKOPT_CREDS 0x2000
/* PAIRED and LISTENING UNIX sockets: `peer` holds the process of the job
 * whose pid SO_PEERCRED read (the one that connected, listened or made
 * the pair); without it (none in the job, older images) ckrun makes the
 * pair, and its listen() is the last */
#define CK_SOCKOPT_PEERPID 0x4000
/* with PEERPID: the effective uid and gid SO_PEERCRED read (as ckrun sees
 * them: the job's own where it has a user namespace, ns.c maps its ids
 * to themselves), two u32 at CK_SOCK_IDS_OFF (after a UNIX address's
 * room) */
#define CK_SOCKOPT_PEERIDS 0x8000
#define CK_SOCK_IDS_OFF 372
#define CK_SOCK_ADDR_OFF 256
#define CK_SOCK_PEER_OFF 384

struct ckrun;
struct ck_reader;

/* Which record of the queue carries files: a datagram or record (at: its
 * number), or a stream segment (at: its first byte, len bytes: the
 * message the files were sent with; they arrive with the first read that
 * takes a byte of it). */
struct ck_sock_mark {
	uint64_t at;
	uint32_t len, nfd, first, pad;
};
#define CK_SOCK_RIGHTS_MAGIC 0x31544752u /* "RGT1" */
#define CK_SOCK_RIGHTS_MAX 4096

/* sock_rights.c: the files in flight of one round (ckrun's duplicates). */
struct ck_rights {
	struct ck_procdesc **pds;
	const pid_t *pids;
	size_t n;
	struct ck_writer *w;
	struct ck_pd_fd *d;
	int *fd;
	size_t nd;
};
/* fd: ckrun's duplicate of a file in flight toward jpid's socket sockfd
 * (the caller keeps it, to put the message back): its index in R, or
 * -errno (the round refused, one line). */
int ck_rights_add(struct ck_rights *R, int fd, int32_t jpid, int sockfd, uint32_t *idx);
void ck_rights_close(struct ck_rights *R);
/* Sends len bytes, all of them, nfd (<= 253) files with the first part;
 * to: the address for a socket that is not connected (else NULL). */
int ck_rights_send(int via, const char *p, size_t len, const int *fds, uint32_t nfd, const struct sockaddr *to,
		   socklen_t tl);
/* Restore: sends a saved CK_SOCKOPT_RIGHTS queue through via, the files
 * made again with the messages they rode on. */
int ck_rights_deliver(const char *buf, size_t n, int dgram, int via, const struct sockaddr *to, socklen_t tl);

/* Every process parked: read and drain every socket of the job. Fails the
 * round (one line naming the socket) for what cannot be restored. */
int ck_sock_checkpoint(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
		       struct ck_manifest *m);

/* Restore: make every socket of the job (all processes' descriptors). */
struct ck_sock_set;
int ck_sock_prepare(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n, struct ck_sock_set **out);
/* A new descriptor (close-on-exec) for this socket of the job, or -errno. */
int ck_sock_fd(struct ck_sock_set *s, const struct ck_pd_fd *f);
void ck_sock_free(struct ck_sock_set *s);
/* --map-path: a UNIX socket's addresses (its own and its peer's) */
int ck_sock_map_paths(struct ck_pd_fd *f, int (*map)(void *arg, const char *in, char *out, size_t cap), void *arg);

/* sock_dgq.c: datagrams queued on an unconnected socket, peeked with
 * their senders (appended to *data), and sent again to the socket `to`
 * from sender()'s socket for an address (a job socket bound to it; -1:
 * none; -EPIPE: a job socket shut for writing, which refuses the round). */
int ck_dgq_peek(int fd, int32_t jpid, int sockfd, char **data, size_t *ndata);
/* The round's way: taken and put back (sock_dgq.c says why), the senders
 * checked first. */
int ck_dgq_take(int fd, int32_t jpid, int sockfd, int (*sender)(void *arg, const struct sockaddr *a, socklen_t al),
		void *arg, char **data, size_t *ndata);
int ck_dgq_deliver(const char *buf, size_t n, int to, int (*sender)(void *arg, const struct sockaddr *a, socklen_t al),
		   void *arg);

/* sock_creds.c: queues toward a socket with SO_PASSCRED. The job's
 * processes: pids here and in the job. */
struct ck_creds_map {
	const pid_t *pids;
	const int32_t *jpids;
	size_t n;
};
/* A stream's queue, peeked run by run with each sender (appended to
 * *data). -ENOTSUP (one line) where a restore could not give it back. */
int ck_creds_peek_stream(int fd, const struct ck_creds_map *m, int32_t jpid, int sockfd, char **data,
			 size_t *ndata);
/* Datagrams or records: checked, taken, and sent back through via, each
 * as its sender. */
int ck_creds_take_dgrams(int fd, int via, const struct ck_creds_map *m, int32_t jpid, int sockfd, char **data,
			 size_t *ndata);
/* Restore: a saved CK_SOCKOPT_CREDS queue sent through via, each part as
 * its sender (host_pid: the restored process's pid here, 0 if none). */
int ck_creds_deliver(const char *buf, size_t n, int dgram, int via, pid_t (*host_pid)(void *arg, int32_t jpid),
		     void *arg);
/* Restore, every process made, none given its descriptors: the pairs of
 * CK_SOCKOPT_PEERPID, made by the processes they named. */
struct ck_agent_procs;
int ck_sock_made(struct ck_sock_set *s, struct ck_reader *rd, const struct ck_agent_procs *procs);
/* Restore, once every process exists: the queues of CK_SOCKOPT_CREDS. */
int ck_sock_late(struct ck_sock_set *s, struct ck_reader *rd, pid_t (*host_pid)(void *arg, int32_t jpid), void *arg);

/* sock_opts.c: the options beyond u64[2]'s, into f (offset, mtime_ns);
 * -ENOTSUP (one line) for what is refused. _restore: set them again on fd
 * (nothing unless f has CK_SOCKOPT_EXT). */
int ck_sockopt_save(int fd, int family, int type, int32_t jpid, struct ck_pd_fd *f);
/* 0, or -errno with one line where an option that must hold could not be
 * set (SO_MARK without CAP_NET_ADMIN). */
int ck_sockopt_restore(int fd, int family, int type, const struct ck_pd_fd *f);

/* sock_diag.c: a UNIX socket's peer inode and name (NETLINK_SOCK_DIAG),
 * its shutdown bits (*shut: CK_SOCK_RCV_SHUT | CK_SOCK_SEND_SHUT, -1
 * where not reported; shut may be NULL), and a listener's backlog
 * (*backlog left alone otherwise; may be NULL). */
#define CK_SOCK_RCV_SHUT 1  /* the kernel's RCV_SHUTDOWN */
#define CK_SOCK_SEND_SHUT 2 /* SEND_SHUTDOWN */
int ck_sock_unix_diag(uint64_t ino, uint64_t *peer_ino, char *name, size_t namelen, size_t *name_got, int *shut,
		      uint32_t *backlog);
/* A TCP listener's backlog (what listen() was given, as the kernel
 * holds it). */
int ck_sock_tcp_backlog(int family, uint64_t ino, uint32_t *backlog);
/* A UDP socket's shutdown bits, by inode (*shut -1: not found); 0 or -errno. */
int ck_sock_udp_shut(int family, uint64_t ino, int *shut);
/* Ends the TCP socket of addresses src -> dst that no process holds (a
 * killed job's connection in TIME_WAIT or closing): it keeps the job's
 * restored connection from taking its ports again. A socket a process
 * holds is left alone. 0 (also when there is none) or -errno (-EPERM
 * without CAP_NET_ADMIN over the network namespace). */
struct sockaddr;
int ck_sock_tcp_end_orphan(const struct sockaddr *src, const struct sockaddr *dst);

#endif
