/* ckrun internals: the coordinator/agent of a single-host job. */
#ifndef CKRUN_H
#define CKRUN_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher/store/joblock.h"
#include "launcher/image/manifest.h"
#include "launcher/image/procdesc_pack.h"
#include "launcher/store/store.h"
#include "launcher/ckrun/pace.h"
#include "launcher/ckrun/wpread.h"
#include "ckrun/procdesc.h"
#include "launcher/ckrun/telemetry.h"
#include "launcher/ckrun/pathmap.h"

/* One process of the job, as ckrun knows it: attached by its channel. */
/* What a round holds of one process: a value that lives from the round's
 * request to its end (ck_jproc_round_clear at the start of the next; -v
 * prints timings from it after the end). It sits in the
 * process's record rather than in struct ck_round because processes attach
 * and leave during a round (procs.c), and the record is what moves. */
struct ck_jproc_round {
	int state;    /* CK_JP_* */
	pid_t snap;   /* its snapshot child (fork mode) */
	int held;     /* it has memory a fork does not freeze */
	int wp_fd;    /* its write-protect snapshot's userfaultfd, until ck_cut_ask takes it (-1: none) */
	struct ck_wp_proc *wp;     /* its write-protect snapshot (NULL: forked) */
	int wp_errno;              /* why it could not arm one (0: not asked, or armed) */
	struct ck_wp_proc *wp_pre; /* pre-armed (PREARM_FD came; NULL: not) */
	int prearm;                /* PREARM: 0 not asked, 1 asked, 2 armed, -errno failed */
	struct ck_proc *mp;        /* its record in the manifest being built */
	unsigned wadd;             /* CK_WADD_*: a parent of the job's processes (its chunks are
				    * bases), a child (stored as deltas of its parent's) */
	uint64_t *kids;            /* a parent's: its delta children's private mappings, merged,
				    * [start, end) pairs ascending (its bases are kept only there) */
	size_t nkids;
	/* for -v -v: when its snapshot was announced (ckrun's clock), and its
	 * own µs to park, record and fork */
	uint64_t t_snap;
	uint32_t us_park, us_record, us_fork;
	struct ck_hold *hold; /* the job had stopped it: ckrun holds it (stopped.c) */
	int later;            /* stopped: asked once the others have parked */
	uint32_t nshm;        /* shared memory objects it maps and holds no descriptor of (shm.c),
			       * handed to its restorer as descriptors too */
};

/* One attached process of the job, for its whole life. */
struct ck_jproc {
	pid_t pid;    /* in ckrun's pid namespace */
	int32_t jpid; /* in the job's */
	int fd;       /* its control channel */
	uint64_t stack0; /* its stack start when it attached: another means it exec'd since */
	uint64_t pd_addr;
	uint64_t semundo_addr; /* its semaphore adjustments' account (include/ckrun/semundo.h); 0: none */
	/* its descriptor: a buffer kept (and pre-touched) across rounds, filled
	 * by each round's cut */
	struct ck_procdesc *pd;
	struct ck_jproc_round round; /* the round in flight */
	/* a restore's: what it had used before (its RESTARTED; rst_cpu.c) */
	struct ck_cpu_use cpu;
	int has_cpu;
};
enum { CK_JP_IDLE, CK_JP_ASKED, CK_JP_SNAPSHOT };

/* Pseudo message type from ck_procs_wait: a process's channel closed
 * (arg0: its pid in ckrun's namespace). */
#define CK_MSG_GONE 1000

struct ckrun {
	/* ckrun's RLIMIT_NOFILE soft limit as it came (nofile_raised: ckrun
	 * raised it to the hard limit for itself; the job gets this back) */
	unsigned long long nofile_cur;
	int nofile_raised;
	/* options */
	const char *store_uri;
	char *job;
	uint64_t interval_ms;
	uint64_t round_timeout_ms; /* --round-timeout: every process parks within it */
	int resume;
	unsigned keep;
	int nofork;
	int snapshot_fork; /* --snapshot fork: never a write-protect snapshot */
	int huge_pages;    /* --huge-pages: the job's malloc asks for transparent huge pages */
	uint64_t wp_aside_max; /* --snapshot-memory: bytes of blocks held aside */
	int verbose;
	int writer_nice; /* nice value of the writer threads as a round starts (default 10) */
	unsigned writer_pace_ms; /* ... rising by 5 every so often (0: fixed) */
	struct ck_pace pace;     /* the round's (pace.c) */
	struct ck_store_opts sopts;
	struct ck_tel_opts tel_opts; /* --metrics, --metrics-file, --events */
	struct ck_pathmap pathmap;   /* --map-path: the restore's paths at this site */
	struct ck_jobenv jobenv;     /* --env: the job's environment, restored or fresh */
	char **argv;
	/* paths of our helpers */
	char libckpt[4096];
	char restorer[4096];
	/* runtime */
	struct ck_store *store;
	int agent_fd;   /* the first channel, handed to init: new processes announce on it */
	int attach_fd;  /* listening: processes that lost their inherited channel attach here */
	char attach_name[80]; /* its abstract name (CKPT_ATTACH) */
	char pidns[64];       /* the job's pid namespace (readlink of /proc/INIT/ns/pid) */
	pid_t init_pid; /* the job namespace's init, in our pid namespace */
	int userns;     /* the job has a user namespace of its own (ckrun is not root) */
	pid_t job_pid;  /* the job's main process, in our pid namespace */
	struct ck_jproc *procs; /* attached processes of the job */
	size_t nprocs, procs_cap;
	int32_t root_jpid; /* the job's main process, in the job's namespace */
	struct ck_round *round; /* the round in flight (round.h), NULL between rounds */
	int status_fd;  /* init reports the job's wait status here */
	int lastpid_fd; /* init reads and sets the namespace's last pid through it (lastpid.c) */
	/* ckrun's own descriptors 0-2 (what its job inherits, or gets at a
	 * restart): a descriptor of the job on the same file is ckrun's stdio */
	uint64_t stdio_dev[3], stdio_ino[3];
	int stdio_ok[3];
	int job_ready;  /* libckpt said hello (or restarted) */
	int job_started; /* it was ready once: no process left means it is ending */
	uint64_t last_seq;
	/* this run's lineage (manifest LINE): drawn at a fresh start, the
	 * restored checkpoint's at a resume; a resume goes back only within it */
	uint8_t lineage[16];
	struct ck_manifest *prev; /* newest committed, for dedup */
	/* a restore's job clocks at the cut (timens.c), for init */
	int tns_want;
	uint64_t tns_mono, tns_boot;
	struct ck_joblock *lock;  /* the job's lock in the store, held for the whole run */
	struct ck_telemetry *tel; /* metrics and events (NULL: none asked for) */
	const char *round_snapshot; /* the committed round's snapshot: "write-protect", "fork", "none" */
	/* --np (mpijob.c) */
	int mpi_np;
	pid_t mpi_pid; /* mpirun of the agents */
	char mpi_key[48];
	char mpi_profile[1024]; /* ckmpi-agent --profile: Open MPI's version, the pinned settings */
	char mpi_agent[4096];
};

/* idmap.c: the id maps of the job's user namespace (init's pid) */
int ck_idmap_write(pid_t pid, int verbose);

/* timens.c: the job's CLOCK_MONOTONIC and CLOCK_BOOTTIME now (job: a
 * process of it, in ckrun's pid namespace); in init before its first child,
 * a time namespace for the children in which they read mono and boot. */
int ck_timens_job_clocks(pid_t job, uint64_t *mono, uint64_t *boot);
/* The job's CLOCK_MONOTONIC now, from what the last cut found. */
uint64_t ck_timens_job_now(void);
int ck_timens_enter(uint64_t mono, uint64_t boot);
/* When the restore began: the job's clocks go on from the cut there, and
 * the timers ckrun makes count from there (ns since, 0 without a mark). */
void ck_timens_mark(uint64_t cut_mono);
uint64_t ck_timens_since_mark(void);
uint64_t ck_timens_cut_mono(void); /* the job's CLOCK_MONOTONIC at the cut (0: unknown) */
/* The job's CLOCK_MONOTONIC at the mark (job: a restored process). */
int ck_timens_job_mark(pid_t job, uint64_t *mono);

/* ns.c: the job's pid+mount+IPC (and, unless root, user) namespaces and their init */
enum ck_spawn_mode { CK_SPAWN_LAUNCH, CK_SPAWN_RESTORE };
/* RESTORE: init creates the restorers of pids[0..n) (pids[0] is the job's
 * main process, whose end is the job's end). */
int ck_spawn(struct ckrun *c, enum ck_spawn_mode mode, const pid_t *pids, size_t n);
/* lastpid.c: the job's pid namespace's last pid (ns_last_pid). serve:
 * init's answer to one request on its end of lastpid_fd (-1: ckrun's end
 * is closed). read, write: ckrun's requests; -errno with one line
 * (ck_err) when they fail. */
int ck_lastpid_serve(int fd);
int ck_lastpid_read(struct ckrun *c, int32_t *pid);
int ck_lastpid_write(struct ckrun *c, int32_t pid);
void ck_kill_job(struct ckrun *c);
/* Waits for the job's end; returns ckrun's exit status for it. */
int ck_job_exit_status(int wstatus);

/* memio.c: the job's memory, seen from ckrun */
int ck_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int ck_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
struct ck_map {
	uint64_t start, end, off, dev, ino;
	uint32_t prot;
	int shared;
	char *path;
};
int ck_maps_read(pid_t pid, struct ck_map **out, size_t *n);
void ck_maps_free(struct ck_map *m, size_t n);

/* advice.c: adds CK_REG_ADV_* to the regions (ascending, from the same
 * process's maps) from /proc/PID/smaps; mappings changed since are skipped. */
struct ck_region;
int ck_maps_advice(pid_t pid, struct ck_region *rg, size_t n);
int ck_maps_first_advised(pid_t pid, uint32_t flag, uint64_t *s, uint64_t *e);

/* chan.c: messages on the control channel */
struct ck_msg;
int ck_chan_send(int fd, struct ck_msg *m, const int *fds, int nfds);
/* Receives one message; *pid = sender's pid in our namespace (0 if none).
 * timeout_ms < 0 waits for ever. -ETIMEDOUT, -EPIPE (peer gone). */
int ck_chan_recv(int fd, struct ck_msg *m, pid_t *pid, int timeout_ms);
/* Same, also taking one descriptor passed with it (*rfd, -1 if none). */
int ck_chan_recv_fd(int fd, struct ck_msg *m, pid_t *pid, int timeout_ms, int *rfd);

/* procs.c: the job's processes and their channels */
struct ck_jproc *ck_procs_find(struct ckrun *c, pid_t pid);
/* Waits up to timeout_ms (-1: for ever) for a message from any process
 * (new processes are attached on the way; a closed channel comes back as
 * CK_MSG_GONE) or for one of extra[] to be ready. Returns 1 with a message
 * (*from: the process whose channel carried it, NULL for GONE; *sender: the
 * sending pid), 0 (with *from NULL) when extra[] is ready or time is up, or
 * -errno. */
struct pollfd;
int ck_procs_wait(struct ckrun *c, struct pollfd *extra, int nextra, int timeout_ms, struct ck_msg *m,
		  struct ck_jproc **from, pid_t *sender);
int ck_procs_send(struct ck_jproc *p, uint32_t type, uint64_t arg0);
void ck_procs_drop(struct ckrun *c, struct ck_jproc *p);
/* A round starts for one process: its round state from the last one, back
 * to none. */
void ck_jproc_round_clear(struct ck_jproc *p);
/* stopped.c: processes the job stopped, held by ckrun through a round.
 * all_T: whether every thread of pid is stopped (state T). hold: seizes p
 * if so (once every other process has parked); 1 if held, 0 if not
 * stopped, or -errno (one line; nothing held). pump: serves their
 * threads while the round asks; how many have not parked yet. end: p's
 * round is over (done: DONE with result is sent, and its manager's end
 * awaited): back into its stop. let_go_all: end without DONE for all. */
int ck_stopped_hold(struct ck_jproc *p);
int ck_stopped_all_T(pid_t pid);
int ck_stopped_pump(struct ckrun *c);
void ck_stopped_end(struct ckrun *c, struct ck_jproc *p, int done, int64_t result);
void ck_stopped_let_go_all(struct ckrun *c);
/* The signal that stopped held process p (SIGSTOP where not known). */
int ck_stopped_sig(const struct ck_jproc *p);
/* Restore: p, saved stopped, gets DONE and is stopped again (by the
 * signal that had stopped it) with its threads back where the job's stop
 * had found them. */
int ck_stopped_restore(struct ck_jproc *p, const struct ck_procdesc *pd);
/* Whether ckrun holds a process the job stopped in this round. */
int ck_stopped_any(const struct ckrun *c);
/* Whether the job sent a held process SIGCONT during the round. */
int ck_stopped_continued(const struct ck_jproc *p);
/* boost.c: during a round every task of the job, and ckrun's coordinating
 * thread above them, run before other work (root; else nothing). */
void ck_procs_boost(struct ckrun *c, int on);
int ck_procs_boost_orig(pid_t pid); /* the request's arg[5] (proto.h) */
void ck_procs_clear(struct ckrun *c);
/* Live processes of the job namespace (init's descendants, zombies apart),
 * in ckrun's pid namespace. */
int ck_procs_scan(struct ckrun *c, pid_t **pids, size_t *n, pid_t **zombies, size_t *nz);
/* Calls fn(pid, tid, arg) for each thread of pid until fn returns non-zero;
 * returns that. */
int ck_proc_each_tid(pid_t pid, int (*fn)(pid_t pid, pid_t tid, void *arg), void *arg);
/* Calls fn(tid, text after key) for each thread of pid whose status has a
 * line starting with key, until fn returns non-zero; returns that. */
int ck_proc_each_task(pid_t pid, const char *key, int (*fn)(pid_t tid, const char *val, void *arg), void *arg);
/* Its command name (/proc/PID/comm) into buf, empty if gone; buf. */
const char *ck_proc_comm(pid_t pid, char *buf, size_t len);
/* State letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), 0 if gone. */
int ck_proc_state(pid_t pid);
/* noattach.c: why a process of the job that has not attached never will
 * (a static program, an environment without libckpt), or NULL. */
const char *ck_proc_never_attaches(pid_t pid);
/* How long a process of the job that has not attached may stay so (born
 * just now, attaching, or a helper about to end): 3 s, or the round's
 * bound if shorter, at least 1 s. */
uint64_t ck_stray_grace_ns(const struct ckrun *c);
/* The round's refusal naming such a process and why (tail: appended to
 * the line); -ENOTSUP. */
int ck_proc_refuse_unattached(pid_t pid, const char *why, const char *tail);
/* Whether a process has exited (or is a zombie). */
int ck_proc_gone(pid_t pid);
/* From /proc/PID/status: the innermost NSpid/NSpgid/NSsid, and PPid. */
int ck_proc_ids(pid_t pid, int32_t *jpid, int32_t *pgid, int32_t *sid, pid_t *ppid);
/* Where its main stack starts (/proc/PID/stat); 0 if unknown. A fork keeps
 * its parent's, an exec draws a new one. */
uint64_t ck_proc_stack_start(pid_t pid);
/* Field FIELD (1-based, 3 or more) of /proc/PID/stat, read into buf; NULL
 * if there is none. */
const char *ck_proc_stat_field(pid_t pid, int field, char *buf, size_t len);

/* memory.c: whether [start, end) meets a mapping of jp's delta children. */
int ck_mem_kids_overlap(const struct ck_jproc *jp, uint64_t start, uint64_t end);

/* shm_sysv.c: System V shared memory of the job's IPC namespace */
struct ck_writer;
struct ck_reader;
int ck_sysv_save(struct ckrun *c, struct ck_writer *w, struct ck_manifest *m);
int ck_sysv_make(struct ckrun *c, struct ck_reader *rd, struct ck_manifest *m);
int ck_sysv_remove_marked(struct ckrun *c, struct ck_manifest *m);

/* attach.c: the job's attach socket */
int ck_attach_open(struct ckrun *c);
/* A connection on the attach socket: its HELLO, if it comes from a process
 * of the job. Returns the new channel (and *pid, *jpid) or -errno. */
int ck_attach_accept(struct ckrun *c, pid_t *pid, struct ck_msg *hello);
/* prearm.c: PREARM to every process while the job runs, and their
 * answers (p->prearm, p->wp_pre); 0, or -errno when ckrun cannot wait. */
struct ck_round;
int ck_prearm_all(struct ckrun *c, struct ck_round *rd);

/* stdio.c: which of the job's descriptors are ckrun's stdio */
void ck_stdio_record(struct ckrun *c);
void ck_stdio_mark(const struct ckrun *c, struct ck_procdesc *pd);

/* round.c */
#define CK_ROUND_STOP 0x1
int ck_round(struct ckrun *c, unsigned flags, uint64_t *seq);

/* restore.c */
int ck_restore(struct ckrun *c, struct ck_manifest *m);
/* resume.c: restores m, or an older checkpoint when m needs a file the
 * job wrote that is gone since; *used: the one restored (m, or one to free) */
int ck_resume_newest(struct ckrun *c, struct ck_manifest *m, struct ck_manifest **used);
/* jobenv.c: --env into a restored process (its channel), or into the
 * environment a fresh job is exec'd with */
int ck_jobenv_send(const struct ck_jobenv *je, int fd);
int ck_jobenv_exec_env(const struct ck_jobenv *je);


/* grace.c: --grace; the stop's round gives up once it is spent */
extern volatile uint64_t ck_sig_term_ns; /* the first SIGTERM/SIGINT (CLOCK_MONOTONIC; 0: none) */
void ck_grace_set(uint64_t ms);
uint64_t ck_grace_ms(void);      /* 0: no grace */
uint64_t ck_grace_used_ms(void); /* since the first SIGTERM/SIGINT */
/* -ETIME (and the error) once the round's part of the grace is spent. */
int ck_grace_check(void);

/* signals shared with the main loop */
extern volatile sig_atomic_t ck_sig_term, ck_sig_usr2, ck_sig_chld;
extern int ck_wake_fd[2];

/* clock.c: CLOCK_MONOTONIC and CLOCK_REALTIME in nanoseconds */
uint64_t ck_now_ns(void);
uint64_t ck_cpu_ns(void);
uint64_t ck_wall_ns(void);
#endif
