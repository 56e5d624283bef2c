/* ckrun contract: a process's System V semaphore adjustments (SEM_UNDO).
 *
 * The kernel keeps, per process, what its exit must add back to each
 * semaphore it changed with SEM_UNDO, and shows it nowhere. libckpt
 * (libckpt/semundo.c) keeps its own account in its memory, which the image
 * holds: every semop of the process through the C library with SEM_UNDO,
 * and every semctl that resets adjustments (SETVAL, SETALL, IPC_RMID),
 * which the kernel applies to every process's account. ckrun reads each
 * process's table at the cut (its address: HELLO's arg2, RESTARTED's
 * arg0) and refuses the round where another process's reset may have
 * cleared part of an adjustment (or the set's change time, sem_ctime, is
 * not older than the adjustment: a reset by a process gone since); a
 * restored process sets its adjustments again before any of its threads
 * runs.
 *
 * Times are CLOCK_MONOTONIC nanoseconds of the job. */
#ifndef CK_CONTRACT_SEMUNDO_H
#define CK_CONTRACT_SEMUNDO_H

#include <stdint.h>

#define CK_SEMUNDO_MAGIC 0x55444d53u /* "SMDU" */
#define CK_SEMUNDO_MAX 64	     /* semaphores with an adjustment, per process */
#define CK_SEMUNDO_CLEARS 32	     /* resets remembered, per process */
#define CK_SEMUNDO_ALL 0xffffffffu   /* a reset of every semaphore of the set */
#define CK_SEMUNDO_PENDING UINT64_MAX /* a reset whose call has not returned */

struct ck_semundo_adj {
	int32_t semid;
	uint32_t num;
	int32_t adj;	  /* what the process's exit adds to the semaphore */
	uint32_t pad;
	uint64_t t_first; /* before the call that made it non-zero */
	uint64_t t_last;  /* after the last call that changed it */
	/* A reset by a process whose account is gone by the cut shows only
	 * in the set's sem_ctime (seconds): rt_first is t_first's
	 * CLOCK_REALTIME second; ctime_ok a sem_ctime known to be no reset
	 * (the restore's own, 0: none) */
	int64_t rt_first, ctime_ok;
};

struct ck_semundo_clear {
	int32_t semid;
	uint32_t num;	/* CK_SEMUNDO_ALL: the whole set (SETALL, IPC_RMID) */
	uint64_t t_end; /* after the call returned; CK_SEMUNDO_PENDING: not yet */
};

struct ck_semundo {
	uint32_t magic;
	int32_t owner;	    /* the process the table is of (a fork's copy is not) */
	uint32_t nadj, nclear;
	uint32_t overflow;  /* adjustments of more than CK_SEMUNDO_MAX semaphores */
	uint32_t pad;
	uint64_t t_forgot;  /* resets of any semaphore no longer listed ended before this */
	struct ck_semundo_adj adj[CK_SEMUNDO_MAX];
	struct ck_semundo_clear clear[CK_SEMUNDO_CLEARS];
};

#endif
