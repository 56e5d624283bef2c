/* The write-protect snapshot, ckrun side (libckpt/wpsnap.c arms it).
 *
 * A process that armed one runs on after RELEASE while its memory is read
 * live, 2 MiB block by block. Each block is taken once, by whoever needs
 * it first: the writer, or the handler thread serving a write fault of the
 * job. Taking a block reads it (pages not protected at the cut were absent
 * then and read as zeros), keeps the copy aside until the writer has
 * consumed it, and lifts the block's protection, which wakes the job's
 * threads waiting on it. Unmapping, discarding or moving memory not taken
 * yet breaks the snapshot: the round fails with -ESTALE and is repeated
 * with a fork. */
#ifndef CK_CKRUN_WPREAD_H
#define CK_CKRUN_WPREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckrun/proto.h"

struct ck_wp;      /* one per round: the handler thread and what it serves */
struct ck_wp_proc; /* one process's protected ranges and blocks */

/* Starts serving the process's userfaultfd `uffd` (taken over: closed by
 * ck_wp_stop, or here on failure). The ranges are read from the process,
 * which is parked. *wp is created on first use, with room for aside_max
 * bytes of blocks the job writes before the writer has read them (more go
 * to an unlinked file in $TMPDIR, else /var/tmp, while it can be had). */
int ck_wp_add(struct ck_wp **wp, uint64_t aside_max, pid_t pid, int32_t jpid, int uffd,
	      const struct ck_wp_info *info, struct ck_wp_proc **out);
/* The pre-armed cut (libckpt/wpprearm.c). PREARM_FD: starts serving the
 * running process's userfaultfd (taken over) before it protects anything;
 * each write fault lifts its 2 MiB block of the ranges in info (read from
 * the process; a page elsewhere). WP_FREEZE: ck_wp_freeze(p, 1), and
 * its faults wait; SNAPSHOT: ck_wp_activate reads the cut's ranges and
 * the process is served as one ck_wp_add took. A round that forks
 * instead thaws it (ck_wp_freeze(p, 0)); ck_wp_stop lifts all either way. */
int ck_wp_prearm(struct ck_wp **wp, uint64_t aside_max, pid_t pid, int32_t jpid, int uffd,
		 const struct ck_wp_info *info, struct ck_wp_proc **out);
void ck_wp_freeze(struct ck_wp_proc *p, int on);
int ck_wp_activate(struct ck_wp_proc *p, const struct ck_wp_info *info);
int ck_wp_fd(const struct ck_wp_proc *p); /* ckrun's userfaultfd of it (a copy goes with CHECKPOINT) */
/* 1 when [start, end) lies within one protected range. */
int ck_wp_covers(const struct ck_wp_proc *p, uint64_t start, uint64_t end);
/* The snapshot's bytes at addr: what the process held at the cut. 0, or
 * CK_READ_ZEROS (all zeros, buf untouched), or -errno. With buf NULL, a
 * probe: CK_READ_ZEROS and the span consumed when no page of it was
 * present at the cut, else 0 and nothing consumed. */
int ck_wp_read(struct ck_wp_proc *p, uint64_t addr, void *buf, size_t len);
/* 0, or -ESTALE with ck_err set when the snapshot broke. */
int ck_wp_check(struct ck_wp *wp);
/* Lifts what is still protected, stops the handler, closes every
 * userfaultfd and frees it all; NULL is fine. Counters for -v. */
struct ck_wp_counts {
	uint64_t faults, blocks_aside, blocks_spilled;
	uint64_t pre_faults; /* faults answered before the cut (pre-armed) */
	uint64_t split_lifts; /* runs lifted in parts at the end: mappings made inside them since */
};
void ck_wp_stop(struct ck_wp *wp, struct ck_wp_counts *n);

#endif
