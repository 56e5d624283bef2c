/* A checkpoint round's own state: what lives only from the request to the
 * commit (or the failure), as one value that round.c hands to its phases
 * and the kinds' files (kinds.h); struct ckrun points at it while the round
 * is in flight (procs.c asks newcomers with it). What a round holds of
 * each process (its snapshot, its write-protect reader, its manifest
 * record) is the value struct ck_jproc_round (ckrun.h), kept in the
 * process's record because processes come and go during a round. */
#ifndef CK_CKRUN_ROUND_H
#define CK_CKRUN_ROUND_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/image/chunkio.h"

/* Phases after every process parked, timed for -v -v. */
struct ck_phases {
	uint64_t last;
	size_t n;
	struct {
		const char *name;
		uint64_t ns;
	} v[12];
};

/* A shared memory range saved this round (shm.c): later mappings of it
 * reuse its chunks. */
struct ck_round_shared {
	uint64_t dev, ino, off, len, first_chunk;
	uint32_t nchunks;
};

struct ck_round {
	unsigned flags;   /* CK_ROUND_* */
	unsigned ckflags; /* CK_CKPT_* sent with the request */
	uint32_t seccomp_base; /* with CK_CKPT_SECCOMP: ckrun's own seccomp filters (the request's arg[4]) */
	uint64_t seq;     /* the sequence the round would commit */
	int asking;       /* asking processes to suspend: procs.c asks newcomers too */
	int prearming;    /* PREARM sent: procs.c takes a PREARM_FD of seq (wp_fd) */
	int devfd;        /* /dev/userfaultfd, sent with the requests (-1: none) */
	int try_wp;       /* a write-protect snapshot may be tried */
	int wp_none;      /* no userfaultfd for the job at all (errno of /dev/userfaultfd) */
	struct ck_wp *wp; /* the write-protect snapshots */
	struct ck_wp_counts wpn; /* their counts, for -v */
	struct ck_writer *w;
	struct ck_manifest *m; /* being built */
	/* ckrun's clock: start, request, all parked, release; pre-arming's
	 * duration; S3 requests before the round */
	uint64_t t0, t_ask, t_parked, t_rel, t_pre, req0;
	uint64_t cpu0; /* ckrun's CPU time at t0 */
	int has_clocks; /* clk_*: the job's CLOCK_MONOTONIC and CLOCK_BOOTTIME at the cut */
	uint64_t clk_mono, clk_boot;
	int has_last_pid; /* last_pid: the job's pid namespace's, at the cut (lastpid.c) */
	int32_t last_pid;
	uint64_t pre_park_us; /* the longest a process's threads were parked for its pre-arm */
	pid_t *live, *zomb; /* the namespace's processes and zombies at the cut */
	size_t nlive, nz;
	int held;   /* a process holds memory a fork does not freeze */
	int any_wp; /* a process took a write-protect snapshot */
	struct ck_phases ph;
	struct ck_round_shared *shared; /* shared memory saved once */
	size_t nshared;
	uint64_t (*pipes)[2]; /* (dev, ino) of pipes already drained */
	size_t npipes;
	/* every process of the job, for a pipe's read end held anywhere */
	const struct ck_jproc *jprocs;
	size_t njprocs;
	struct ck_stash *stash; /* parked bytes copied aside (stash.c) */
	/* mapped files' content digests, taken by a thread of their own while
	 * the memory is written (filepages.c) */
	pthread_t fp_th;
	const struct ck_manifest *fp_prev;
	int fp_started, fp_rc, fp_cancel;
	uint64_t fp_bytes, fp_ns;
};

/* cut.c: the consistent cut. ck_cut_ask: every process parks, records its
 * state and takes its snapshot; ck_cut_descriptors: every process's
 * descriptor, from its snapshot. */
int ck_job_traced(pid_t pid, pid_t *tracer);
int ck_cut_ask(struct ckrun *c, struct ck_round *rd);
int ck_cut_descriptors(struct ckrun *c);

/* round_log.c: -v and -v -v lines */
void ck_round_phase(struct ck_phases *ph, const char *name);
void ck_round_print_commit(const struct ckrun *c, const struct ck_round *rd, size_t npre);

#endif
