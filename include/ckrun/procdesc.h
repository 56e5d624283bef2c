/* ckrun contract: the process descriptor.
 *
 * Version: CK_PD_VERSION below (2: credentials; 3: 4096 threads; 4: 4096 descriptors). Images store it verbatim,
 * so any change of layout bumps the version; tests/golden/procdesc-v4.bin
 * holds version 4's bytes. Used by libckpt (fills it), ckrun (reads it,
 * re-creates descriptors from it, packs it into the manifest:
 * launcher/image/procdesc_pack.h), ckpt (prints it) and the plugins.
 *
 * The process descriptor: what libckpt records about a process at a
 * checkpoint, besides its memory. libckpt fills it (while the job's threads
 * are parked) in its own static memory; ckrun reads it from the snapshot,
 * uses it to re-create descriptors at restore and stores it in the manifest
 * (struct ck_proc.desc) as: header, then nthreads threads, then nfds fds.
 * Fixed-size, versioned; a layout change bumps CK_PD_VERSION. */
#ifndef CK_CONTRACT_PROCDESC_H
#define CK_CONTRACT_PROCDESC_H

#include <assert.h>
#include <stdint.h>

#include "ckrun/ctx_layout.h"

#define CK_PD_MAGIC 0x44504b43u /* "CKPD" */
#define CK_PD_VERSION 4 /* 2: credentials; 3: 4096 threads; 4: 4096 descriptors */
#define CK_PD_MAX_THREADS 4096 /* (the records are read as far as nthreads: only virtual size) */
#define CK_PD_MAX_FDS 4096 /* (as threads: read as far as nfds) */
#define CK_PD_PATH 512
#define CK_PD_NSIG 65 /* 1..64 */
#define CK_PD_NRLIMIT 16
#define CK_PD_MAX_GROUPS 1024

struct ck_pd_thread {
	int32_t tid;
	uint32_t flags; /* CK_PDT_* */
	uint64_t fs_base;
	uint64_t tid_addr;    /* PR_GET_TID_ADDRESS: glibc's pd->tid */
	uint64_t robust_head; /* get_robust_list */
	uint64_t robust_len;
	uint64_t rseq_addr; /* 0 if not registered */
	uint32_t rseq_len;
	uint32_t rseq_sig;
	char comm[16];       /* PR_GET_NAME */
	uint64_t timerslack; /* PR_GET_TIMERSLACK */
	/* credentials (per thread in the kernel): real, effective, saved,
	 * filesystem ids as the job's user namespace numbers them */
	uint32_t uid[4], gid[4];
	uint64_t cap_eff, cap_prm, cap_inh;
	uint32_t securebits; /* PR_GET_SECUREBITS */
	uint32_t personality; /* personality(0xffffffff); valid with CK_PD_P_VALID */
	struct ck_ctx ctx;   /* where the thread resumes (parked point) */
};
#define CK_PDT_MAIN 0x1    /* thread-group leader */
#define CK_PDT_MANAGER 0x2 /* libckpt's own manager thread */
#define CK_PDT_NNP 0x4     /* no_new_privs set on this thread */

/* descriptor kinds */
enum ck_pd_fd_kind {
	CK_FD_NONE = 0,
	CK_FD_STDIO,    /* ckrun's stdio (tty/pipe/socket; marked by ckrun): take the new ckrun's
			 * descriptor u64[0] - 1 (0: the same number) */
	CK_FD_FILE,     /* regular file or directory, reopened by path at offset */
	CK_FD_DELETED,  /* regular file deleted while open: contents saved */
	CK_FD_MEMFD,    /* memfd: contents and seals saved */
	CK_FD_DEV,      /* character device by path (/dev/null, zero, urandom, ...) */
	CK_FD_PIPE,     /* pipe end; the other end anywhere in the job, or gone */
	CK_FD_FIFO,     /* named pipe, reopened by path */
	CK_FD_EVENTFD,
	CK_FD_TIMERFD,
	CK_FD_SIGNALFD,
	CK_FD_EPOLL,
	CK_FD_PLUGIN,   /* owned by a plugin */
	CK_FD_DUP,      /* same open file description as descriptor `peer` */
	CK_FD_SOCKET,   /* a socket: ckrun's socket plugin (plugins/socket/agent) reads,
			 * drains and re-creates it; u64[] and path[] are the plugin's */
	CK_FD_PTMX,     /* pseudo-terminal master (/dev/ptmx): u64[0] its pts number; ckrun
			 * saves the pair's state as data chunks (launcher/ckrun/pty.c) */
	CK_FD_PTS,      /* pseudo-terminal slave (/dev/pts/N): u64[0] N; a pair with the
			 * job's master of the same N, else a device reopened by path */
	CK_FD_PIDFD,    /* pidfd: u64[0] its process's pid in the job's namespace (0: the
			 * process is gone); opened again by the restored process itself
			 * (libckpt/fdstate.c), inside that namespace */
	CK_FD_INOTIFY,  /* inotify instance: u64[0] its watches, u64[1] the last watch number
			 * given; made empty by ckrun, its watches added again by the
			 * restored process from libckpt's memory (libckpt/inotify.c) */
	CK_FD_MQUEUE,   /* POSIX message queue: path its name ("/q"); the queue is saved and
			 * made again with the job's IPC namespace (launcher/ckrun/mq_posix.c),
			 * the descriptor opened again by name */
};

struct ck_pd_fd {
	int32_t fd;
	uint32_t kind;
	int32_t flags;   /* F_GETFL */
	int32_t fdflags; /* F_GETFD (FD_CLOEXEC) */
	uint64_t offset;
	uint64_t dev, ino, size; /* timerfd: size holds its unread expirations */
	int64_t mtime_ns;
	uint32_t mode;
	int32_t peer;     /* DUP: the descriptor duplicated; PIPE/FIFO: an earlier end of the same pipe */
	uint64_t pipe_off; /* CK_PD_FD_SHARED: the description's key (else 0) */
	uint32_t pipe_len; /* pipes: unused (0, unread bytes are data chunks); sockets: TCP_USER_TIMEOUT (sock_opts.c) */
	uint32_t pipe_cap; /* pipes: F_GETPIPE_SZ; sockets: SO_MARK (sock_opts.c) */
	uint64_t u64[4];   /* eventfd: count,semaphore; timerfd: clock,flags,value_ns,interval_ns;
			    * signalfd: mask; memfd: seals; pidfd: pid; inotify: watches, last wd */
	uint64_t data_chunk; /* filled by ckrun: saved contents (deleted/memfd/shm file; a pipe's unread bytes) */
	uint32_t data_nchunks;
	uint32_t xflags; /* CK_PD_FD_* (0 in images before it was added) */
	char path[CK_PD_PATH];
};

/* A regular file that was ckrun's own stdio at the cut (`ckrun > log`): at
 * restart it is the new ckrun's descriptor, unless that is the same file
 * still holding the saved offset, where the job goes on writing. */
#define CK_PD_FD_STDIO_FILE 0x1
/* One open file description held by more than one process (opened before
 * a fork): pipe_off is its key, the same in every holder (ckrun sets it at
 * the round with kcmp); a restore makes it once and hands it to each. */
#define CK_PD_FD_SHARED 0x2
/* A POSIX message queue's descriptor through which the process registered
 * for its notification (libckpt/mqnotify.c): u64[0] the signal's value,
 * u64[1] sigev_notify | sigev_signo << 32, u64[2] the note's order.
 * MQ_NOTIFY (set by ckrun at the round on the note that matches the
 * kernel's registration): the restored process registers again. */
#define CK_PD_FD_MQ_NOTE 0x4
#define CK_PD_FD_MQ_NOTIFY 0x8
/* A UNIX socket (with CK_SOCKOPT_PEERPID, plugins/socket) whose
 * SO_PEERCRED names a process of the job that had exited at the round:
 * peer is its pid in the job, as the holder's libckpt read it. A restore
 * makes a process under that number to make the connection again, then
 * ends it (launcher/ckrun/proctree.c, ck_tree_makers). */
#define CK_PD_FD_PEER_GONE 0x10
/* Never in an image: ckrun marks, at a restore, a descriptor whose path
 * --map-path rewrote (its inode and mtime are another site's). */
#define CK_PD_FD_MAPPED 0x80000000u

/* One registration of an epoll instance, re-added at restart. */
struct ck_pd_epitem {
	int32_t epfd, tfd;
	uint32_t events;
	uint32_t flags; /* CK_PD_EPI_* (0 in images made before) */
	uint64_t data;
};
/* This process's descriptor tfd is not the registered file (it was closed
 * or replaced after the registration; in an instance shared by fork,
 * another holder may hold it): not re-added here. ckrun refuses the round
 * unless some holder of the instance holds it. */
#define CK_PD_EPI_ELSEWHERE 0x1
/* Edge-triggered, its file ready at the cut and the instance's ready list
 * empty: the job had taken its edge (libckpt/epoll.c). Added first at a
 * restore, its edge taken again, before the other registrations. */
#define CK_PD_EPI_TAKEN 0x2
#define CK_PD_MAX_EPITEMS 4096

/* A pending signal with its siginfo, re-queued at restart in this order.
 * tid 0: process-directed. */
struct ck_pd_siginfo {
	int32_t tid;
	int32_t sig;
	uint8_t info[128];
};
#define CK_PD_MAX_SIGINFO 256

/* A POSIX timer (timer_create), re-created with the same id. */
struct ck_pd_timer {
	int32_t id, clock;
	int32_t notify; /* SIGEV_* as the kernel holds it (SIGEV_THREAD_ID bit included) */
	int32_t signo;
	uint64_t value;   /* sigev_value */
	int32_t tid;      /* SIGEV_THREAD_ID target */
	uint32_t pad;
	uint64_t value_ns, interval_ns; /* remaining time, period */
};
#define CK_PD_MAX_TIMERS 64

/* A mapping a plugin leaves out of the image (device memory it rebuilds). */
struct ck_pd_skip {
	uint64_t start, end;
	char why[64];
};
#define CK_PD_MAX_SKIPS 64

struct ck_pd_sigaction { /* the kernel's struct sigaction layout */
	uint64_t handler;
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

struct ck_procdesc {
	uint32_t magic, version;
	uint32_t size; /* sizeof(struct ck_procdesc) */
	int32_t pid, ppid;
	uint32_t nthreads, nfds, nepitems;
	uint32_t umask;
	uint32_t nsiginfo, ntimers;
	uint32_t nskips;
	uint32_t nsysv; /* System V attachments the snapshot lacks: ckrun reads them from the process */
	struct ck_pd_skip skips[CK_PD_MAX_SKIPS];
	int32_t dumpable;      /* PR_GET_DUMPABLE */
	int32_t oom_score_adj; /* /proc/self/oom_score_adj; valid with CK_PD_P_VALID */
	int32_t child_subreaper, pdeathsig;
	struct ck_pd_timer timers[CK_PD_MAX_TIMERS];
	struct ck_pd_siginfo siginfo[CK_PD_MAX_SIGINFO];
	/* mm fields for PR_SET_MM_MAP */
	uint64_t start_code, end_code, start_data, end_data, start_brk, brk, start_stack;
	uint64_t arg_start, arg_end, env_start, env_end;
	uint64_t auxv[64];
	uint32_t auxv_size; /* bytes */
	uint32_t pflags;    /* CK_PD_P_*: 0 in images made before they were saved */
	/* rst_mono: where the timers the process sets again at a restore count
	 * from, on its clock then: its CLOCK_MONOTONIC when the restore began,
	 * less the time from rec_mono to the cut; set by ckrun at a restore (0
	 * in images: it was the unused pipebuf). rec_mono: the process's
	 * CLOCK_MONOTONIC when it read its POSIX timers and itimers at the
	 * round (0 in images before it: it was the unused pipebuf_size). */
	uint64_t rst_mono, rec_mono;
	struct ck_pd_sigaction sigact[CK_PD_NSIG];
	uint64_t itimer[3][4]; /* ITIMER_REAL/VIRTUAL/PROF: interval s,us, value s,us */
	uint64_t rlimit[CK_PD_NRLIMIT][2];
	uint64_t restart_entry, restart_arg, restart_stack;
	char exe[CK_PD_PATH];
	char cwd[CK_PD_PATH];
	/* credentials of the whole process (the main thread's): capability
	 * bounding and ambient sets, supplementary groups */
	uint64_t cap_bnd, cap_amb;
	uint32_t ngroups;
	uint32_t cwd_mode; /* CK_PD_CWD_REMOVED | mode: the working directory was removed (cwd ends in
			    * " (deleted)"); else 0 */
	uint32_t groups[CK_PD_MAX_GROUPS];
	struct ck_pd_thread threads[CK_PD_MAX_THREADS];
	struct ck_pd_fd fds[CK_PD_MAX_FDS];
	struct ck_pd_epitem epitems[CK_PD_MAX_EPITEMS];
};

/* pflags: process state kept in what were padding fields (same layout,
 * same version: an older image reads 0, "not saved", and is restored as
 * before). Memory locks of single mappings are kept by libckpt itself
 * (libckpt/pstate.c), in its own memory, which the image holds. */
#define CK_PD_P_VALID 0x1       /* oom_score_adj, personality and the bits below were saved */
#define CK_PD_P_THP_DISABLE 0x2 /* PR_GET_THP_DISABLE */
#define CK_PD_P_MCL_FUTURE 0x4  /* mlockall(MCL_FUTURE) */
#define CK_PD_P_MCL_ONFAULT 0x8 /* ... | MCL_ONFAULT */
/* set by ckrun: the job had stopped the process (SIGSTOP); a restore
 * stops it again before it runs (launcher/ckrun/stopped.c) */
#define CK_PD_P_STOPPED 0x10
/* ... and the signal that had stopped it where it was not SIGSTOP
 * (SIGTSTP, SIGTTIN, SIGTTOU): the restore stops it with the same one, so
 * that a stop its parent has still to take is reported as it was; 0:
 * SIGSTOP (and in images made before it was saved) */
#define CK_PD_P_STOPSIG_SHIFT 8
#define CK_PD_P_STOPSIG_MASK 0xff00u
/* set by libckpt: it counts the children ckrun names held in the round's
 * request as stopped (an image of an older one cannot record a stopped
 * child of a parent held too: ckrun refuses that round) */
#define CK_PD_P_HELDKIDS 0x20
#define CK_PD_CWD_REMOVED 0x80000000u /* in cwd_mode */

static_assert(sizeof(struct ck_pd_thread) == 144 + sizeof(struct ck_ctx), "ck_pd_thread layout");
static_assert(sizeof(struct ck_pd_sigaction) == 32, "ck_pd_sigaction layout");

/* Size of the compact form stored in manifests: header up to threads[], then
 * the used threads and fds. */
#define CK_PD_HDR_SIZE ((uint32_t)__builtin_offsetof(struct ck_procdesc, threads))

#endif
