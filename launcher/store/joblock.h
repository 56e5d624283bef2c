/* The job lock: one writer per job in a store.
 *
 * ckrun holds it for its whole run, ckpt rm/gc while they delete, ckpt cp
 * while it writes a job. Two kinds, chosen by the store (FORMAT.md, "The
 * job lock"):
 *
 * - A store on a file system (open_lock): the file JOB/lock, held with an
 *   fcntl open-file-description lock. The kernel (or the NFS server) drops
 *   it when the holder dies, so a stale lock cannot exist; the file holds a
 *   record of the holder only to name it.
 * - Any other store (S3): a lease. JOB/lease/GGGGGGGG objects, one per
 *   taking of the lock (generation G), each created only if absent
 *   (If-None-Match), holding the holder's record with a renewal time and a
 *   lease length. The newest generation is the lock. Its holder rewrites it
 *   every lease/4; a lease not renewed within its length is stale and the
 *   next writer takes the lock by creating generation G+1, which only one
 *   contender can do. A holder that finds G+1 has lost the lock and commits
 *   nothing more. On the holder's own host a dead holder (its pid gone, or
 *   a different process under it) is stale at once.
 *
 * Everything returns 0 or -errno with one line in ck_err_msg(); -EBUSY
 * when a live writer holds the lock (the line names it: tool, pid, host,
 * since when), -ENOLCK when a holder has lost its lock. */
#ifndef CK_JOBLOCK_H
#define CK_JOBLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/store/store.h"

/* A holder's record, as stored. */
struct ck_lock_owner {
	char tool[32];       /* "ckrun", "ckpt gc", ... */
	char host[256];      /* gethostname() */
	char boot[40];       /* /proc/sys/kernel/random/boot_id: the same machine since its boot */
	char pidns[40];      /* readlink /proc/self/ns/pid: pid makes sense there */
	int64_t pid;
	uint64_t start;      /* the holder's start time (/proc/PID/stat), against pid reuse */
	uint64_t since_ns;   /* CLOCK_REALTIME when it took the lock */
	uint64_t renewed_ns; /* lease: CLOCK_REALTIME of its last renewal (0: a file lock) */
	uint64_t lease_ns;   /* lease: its length (0: a file lock) */
	char token[33];      /* random: this taking of the lock */
	int released;        /* lease: given back (the next writer takes it at once) */
	uint64_t gen;        /* lease: its generation (not stored: from the key) */
};

/* Lease defaults (NOTES.md, "One writer per job"): renewed every lease/4;
 * a holder commits only while its last renewal is less than lease/2 old.
 * CKPT_TEST_LEASE_MS sets the length (tests). */
#define CK_LEASE_NS (60ull * 1000000000ull)

/* flags */
#define CK_JOBLOCK_LEASE 0x1 /* a lease even where a file lock is possible (tests) */
/* A lease whose holder has gone silent (not renewed for more than a
 * renewal period, and not known alive or dead from here: another host, or
 * a container of its own) is waited for, up to its end, rather than
 * refused at once: a job restarted after its container was killed takes
 * over when the dead holder's lease ends. A renewal seen while waiting
 * means a live holder: refused then. Said on stderr once. */
#define CK_JOBLOCK_WAIT_SILENT 0x2

struct ck_joblock;

int ck_joblock_acquire(struct ck_store *s, const char *job, const char *tool, unsigned flags,
		       struct ck_joblock **out);
/* Before a commit: 0 if the lock is still ours (a lease: renewed recently
 * enough, and no newer generation), else -ENOLCK. */
int ck_joblock_check(struct ck_joblock *l);
/* The same from what is known, without asking the store (before a round):
 * -ENOLCK once a renewal found the lock taken, or a lock file removed. */
int ck_joblock_lost(struct ck_joblock *l);
/* Holds (1) or lets go (0) the lease's renewals: around a raw clone() of
 * a program with this thread, so that the child does not inherit a lock
 * (malloc's, stdio's) the renewal thread held at that moment. NULL and
 * file locks: nothing to do. */
void ck_joblock_pause(struct ck_joblock *l, int pause);
/* Gives the lock back (NULL is fine). */
void ck_joblock_release(struct ck_joblock *l);
/* Gives it back and removes the lock's objects (ckpt rm of a whole job). */
void ck_joblock_drop(struct ck_joblock *l);
/* The lock's holder: 1 with *o when a live writer holds it, 0 when nobody
 * does (or only a stale one: *o says who, when o->pid), <0 on error. */
int ck_joblock_holder(struct ck_store *s, const char *job, unsigned flags, struct ck_lock_owner *o);
/* ckpt unlock: removes a stale lock; a live one only with force, and only
 * a lease (a file lock's holder is alive by definition). 0 and *o (the
 * holder broken or found stale; o->pid 0 if there was none), or -EBUSY. */
int ck_joblock_break(struct ck_store *s, const char *job, int force, unsigned flags, struct ck_lock_owner *o);
/* "ckrun pid 123 on host h, since 2026-12-02 07:51:03 UTC" */
void ck_lock_owner_describe(const struct ck_lock_owner *o, char *buf, size_t len);
/* Record text <-> owner (exposed for the unit tests). */
int ck_lock_owner_format(const struct ck_lock_owner *o, char *buf, size_t len);
int ck_lock_owner_parse(const char *buf, size_t len, struct ck_lock_owner *o);

#endif
