/* ckrun contract: the message protocol.
 *
 * Version: CK_PROTO_VERSION below. Nothing negotiates it on the wire: an
 * image carries its own libckpt, which speaks the protocol of the ckrun
 * that wrote it (the process descriptor's version guards a restore by
 * another ckrun). Bump it with any change of a message or of the restorer
 * layout, together with CK_PD_VERSION.
 *
 * Messages on the control channel between ckrun (the agent) and libckpt in
 * the job, and between ckrun and the restorer. The channel is an AF_UNIX
 * SOCK_SEQPACKET socketpair created by ckrun; the job's end sits at
 * CK_CTL_FD (hidden from the job's descriptor capture). Every message starts
 * with struct ck_msg; senders attach SCM_CREDENTIALS so ckrun learns the
 * sender's pid in its own pid namespace.
 *
 * Every process of the job has a channel of its own. A process inherits its
 * parent's (fork, exec): libckpt (and the restorer) then makes a new
 * socketpair and sends one end with CK_MSG_HELLO (CK_MSG_RST_HELLO) over the
 * inherited channel, and puts the other at CK_CTL_FD. ckrun thus learns of
 * every new process, by the channel of the process it came from. */
#ifndef CK_CONTRACT_PROTO_H
#define CK_CONTRACT_PROTO_H

#include <stdint.h>

#define CK_PROTO_VERSION 2 /* 2: CK_MSG_ENV */

#define CK_CTL_FD 1000
/* The restorer jumps into the restored libckpt with its channel's number
 * in rcx, this in the high 32 bits: CK_CTL_FD unless a descriptor of the
 * job's own has that number (the job dup2'd onto it). */
#define CK_RST_CTL_MAGIC 0xc7c7u
#define CK_CTL_ENV "CKPT_CTL_FD"

enum ck_msg_type {
	/* ckrun -> job */
	CK_MSG_CHECKPOINT = 1, /* arg0: flags (CK_CKPT_*) arg1: seq arg2: ms to park arg3: the bound
				* arg4: seccomp base arg5: the nice value + 21 every thread had
				* before ckrun's boost (0: not boosted) */
	CK_MSG_DONE,           /* arg0: 0 saved, else -errno: round over, resume */
	/* job -> ckrun */
	CK_MSG_HELLO,     /* libckpt initialised; arg0: pid in job ns; arg1: start of its stack (/proc/self/stat
			   * field 28; 0: unknown); arg2: its semaphore adjustments' account
			   * (ckrun/semundo.h; 0: none); SCM_RIGHTS: the process's own channel */
	CK_MSG_SNAPSHOT,  /* sent by the process to read; arg0: desc addr, arg1: desc size, arg2: held,
			   * arg3: round, arg4: µs to park (low 32 bits) and to record (high),
			   * arg5: µs to fork the snapshot (or to write-protect);
			   * SCM_RIGHTS: a write-protect snapshot's userfaultfd, then
			   * text: struct ck_wp_info (a pre-armed one: the info
			   * without a descriptor, ckrun has it already) */
	CK_MSG_FAILED,    /* text: why the round cannot be done */
	CK_MSG_RESTARTED, /* restored process runs again; arg0: as HELLO's arg2 */
	CK_MSG_REQUEST,   /* ckpt_request() from the job */
	/* ckrun <-> restorer */
	CK_MSG_RST_HELLO,   /* restorer -> ckrun: ready for the layout */
	CK_MSG_RST_LAYOUT,  /* ckrun -> restorer: arg0: bytes of layout that follow in text[]/next messages */
	CK_MSG_RST_FDS,     /* ckrun -> restorer: SCM_RIGHTS fds, targets in text[] as int32 */
	CK_MSG_RST_MAPPED,  /* restorer -> ckrun: regions mapped, fill them */
	CK_MSG_RST_FILLED,  /* ckrun -> restorer: contents written, go */
	CK_MSG_RST_ERROR,   /* restorer -> ckrun: text says what failed */
	/* ckrun -> job, fork mode: what a copy-on-write child cannot hold
	 * (shared mappings, deleted files, memfds) is read: threads may go on. */
	CK_MSG_RELEASE,
	/* ckrun -> restorer: create these children (text: struct ck_rst_child[arg0],
	 * after those of the CK_MSG_RST_KIDS before it; arg2: how many in all);
	 * arg1: CK_RST_SETSID to call setsid() first (after the children
	 * marked CK_RST_CHILD_EARLY); CK_RST_CTTY (with SETSID, SCM_RIGHTS:
	 * a pseudo-terminal slave): then make it the session's controlling
	 * terminal (TIOCSCTTY), before any other child */
	CK_MSG_RST_TREE,
	CK_MSG_RST_TREE_DONE, /* restorer -> ckrun */
	/* ckrun -> restorer: setpgid(0, arg0) (arg0 0: lead a new group) */
	CK_MSG_RST_PGID,
	CK_MSG_RST_PGID_DONE,
	/* ckrun -> restorer: end as the saved zombie did (arg0: wait status) */
	CK_MSG_RST_EXIT,
	/* The pre-armed cut of a write-protect snapshot (libckpt/wpprearm.c):
	 * ckrun -> job: protect your memory now, while you run; arg0: seq;
	 * SCM_RIGHTS: ckrun's /dev/userfaultfd, if it has one. */
	CK_MSG_PREARM,
	/* job -> ckrun, before any page is protected: arg0: seq; SCM_RIGHTS:
	 * the userfaultfd, whose write faults ckrun answers from now on by
	 * lifting the faulting 2 MiB block; text: struct ck_wp_info of the
	 * ranges it is about to protect. */
	CK_MSG_PREARM_FD,
	/* job -> ckrun: arg0: seq, arg1: 0 armed, else -errno (nothing left
	 * registered). */
	CK_MSG_PREARMED,
	/* job -> ckrun, parked, at the cut: stop lifting my blocks (nothing but
	 * the manager's stack is written from here until SNAPSHOT) */
	CK_MSG_WP_FREEZE,
	/* ckrun -> job: arg0: 0 frozen, else -errno (not pre-armed) */
	CK_MSG_WP_FROZEN,
	/* job -> ckrun: the cut failed after WP_FREEZE (the round forks
	 * instead): lift my writes again */
	CK_MSG_WP_THAW,
	/* ckrun -> restored job, after RESTARTED and before DONE (ckrun
	 * --resume --env): text holds len bytes of "NAME=VALUE\0" entries,
	 * each replacing NAME in the process's environment (an empty VALUE
	 * removes it). Never in an image: it comes with each restore. */
	CK_MSG_ENV,
	/* ckrun -> restorer, after the process groups: a session leader's
	 * terminal (SCM_RIGHTS: its slave) gets foreground group arg0
	 * (TIOCSPGRP); answered with FGPGRP_DONE. */
	CK_MSG_RST_FGPGRP,
	CK_MSG_RST_FGPGRP_DONE,
	/* ckrun -> job, idle manager: answer PONG. A process the job had
	 * stopped is held by ckrun through a round (launcher/ckrun/stopped.c):
	 * PONG after DONE says its manager has ended the round, so it can be
	 * let back into its stop. */
	CK_MSG_PING,
	CK_MSG_PONG,
	/* ckrun -> restored process, after RESTARTED and before DONE: text
	 * holds len / sizeof(struct ck_kid_cpu) of its children's CPU use
	 * before the restore (what each child's RESTARTED said), for its
	 * waits to add as it reaps them (libckpt/cputime.c). */
	CK_MSG_KIDS_CPU,
	/* ckrun -> restorer, between the tree and the layout: make a UNIX
	 * socket of type arg1 in this process, so that a peer's SO_PEERCRED
	 * names it as it did (the kernel takes the pid of whoever connects,
	 * listens or makes the pair). arg0: CK_RST_SOCK_PAIR (socketpair:
	 * two answers), CK_RST_SOCK_LISTEN (bound to a name of the kernel's
	 * choosing, listening: one answer, its name in text), or
	 * CK_RST_SOCK_CONNECT (to the struct sockaddr_un of len bytes in
	 * text, without waiting: one answer), or CK_RST_SOCK_RELISTEN
	 * (SCM_RIGHTS: a listener ckrun made; listen() on it again with
	 * backlog arg2, so that connections to it name this process: one
	 * answer, without a descriptor). */
	CK_MSG_RST_SOCK,
	/* restorer -> ckrun: arg0: 0, SCM_RIGHTS one descriptor (none for
	 * RELISTEN); or -errno */
	CK_MSG_RST_SOCK_FD,
	/* ckrun -> restorer, after the tree: reap child arg0, a helper that
	 * made members of this process's session and has ended (the job must
	 * not find it among its children); answered with REAP_DONE, arg0: 0
	 * or -errno. */
	CK_MSG_RST_REAP,
	CK_MSG_RST_REAP_DONE,
	/* ckrun -> restorer, before CK_MSG_RST_TREE: more of its children
	 * (text: struct ck_rst_child[arg0]) than one message holds; no answer */
	CK_MSG_RST_KIDS,
};
enum { CK_RST_SOCK_PAIR = 1, CK_RST_SOCK_LISTEN, CK_RST_SOCK_CONNECT, CK_RST_SOCK_RELISTEN };

/* CPU time and the other counters of struct rusage a restore sets back to
 * near 0 (the kernel counts them for the new process): what a process had
 * used before the restore, itself and its reaped children together (what
 * its parent's wait adds). RESTARTED's text from a libckpt that knows it
 * (len 0 from an older one). MAXRSS is a maximum, not a count. */
enum {
	CK_CPU_UTIME_US,
	CK_CPU_STIME_US,
	CK_CPU_MINFLT,
	CK_CPU_MAJFLT,
	CK_CPU_INBLOCK,
	CK_CPU_OUBLOCK,
	CK_CPU_NVCSW,
	CK_CPU_NIVCSW,
	CK_CPU_MAXRSS,
	CK_CPU_N
};
struct ck_cpu_use {
	int64_t v[CK_CPU_N];
};
struct ck_kid_cpu {
	int32_t pid; /* in the job's pid namespace */
	uint32_t pad;
	struct ck_cpu_use use;
};

struct ck_rst_child {
	int32_t pid;
	uint32_t flags; /* CK_RST_CHILD_* */
};
#define CK_RST_CHILD_QUIET 0x1 /* exit signal 0: invisible to the parent's wait() */
/* made before the creator's setsid: it stays in the session its creator
 * was made in (the creator started a session of its own after forking it) */
#define CK_RST_CHILD_EARLY 0x2
#define CK_RST_SETSID 0x1
#define CK_RST_CTTY 0x2
/* the children one tree message carries, and all those one process makes
 * (a static array of the restorer's) */
#define CK_RST_KIDS_PER_MSG (CK_MSG_TEXT / 8)
#define CK_RST_MAX_CHILDREN 32768

/* Shared-memory objects (MAP_SHARED anonymous memory, deleted shm files)
 * reach the restorer as descriptors at shared_fd + k (CK_RST_SHARED_FD or
 * above, past the job's own descriptors there); it maps them and closes
 * them before the job runs. */
#define CK_RST_SHARED_FD 1001
#define CK_RST_MAX_SHARED 1024
/* descriptors a restorer places, the process's own and its shared-memory
 * objects together */
#define CK_RST_MAX_FDS 4096


#define CK_CKPT_NOFORK 0x1
#define CK_CKPT_STOP 0x2
/* A write-protect snapshot may be taken instead of a fork; the message
 * may carry ckrun's /dev/userfaultfd (SCM_RIGHTS). */
#define CK_CKPT_WP 0x4
/* The process was pre-armed: the message carries its userfaultfd (a copy
 * of ckrun's) instead of /dev/userfaultfd. */
#define CK_CKPT_PREARMED 0x8
/* Threads of the job run under more seccomp filters than ckrun: the
 * process checks its own record of them (libckpt/seccomp.c); arg[4] is
 * ckrun's own count. */
#define CK_CKPT_SECCOMP 0x10
/* A process of the job is stopped (SIGSTOP) and held by ckrun for this
 * round: each process records which of its children are stopped and
 * whether it has waited for their stop (libckpt/stopkids.c). */
#define CK_CKPT_STOPKIDS 0x20
/* The names (PR_SET_NAME) of libckpt's own threads in every process. */
#define CK_MANAGER_COMM "ckpt-manager"
#define CK_READER_COMM "ckpt-reader"
/* CHECKPOINT's arg[2]: how long the process may take to park its threads
 * (ms; ckrun's --round-timeout); 0 means this default. */
#define CK_PARK_TIMEOUT_MS 10000

/* Write-protect snapshot: the ranges the process registered (private
 * anonymous memory, adjacent mappings merged), in its own memory. */
#define CK_WP_MAX_RANGES 65536
struct ck_wp_range {
	uint64_t start, end;
};
struct ck_wp_info {
	uint64_t ranges; /* address of struct ck_wp_range[nranges] */
	uint32_t nranges;
	uint32_t pad;
};

#define CK_MSG_TEXT 4000

struct ck_msg {
	uint32_t type;
	uint32_t len; /* bytes used in text */
	uint64_t arg[6];
	char text[CK_MSG_TEXT];
};

#define CK_RST_MAX_TRAMP 48

/* Layout handed to the restorer: a header, then regions, then the strings. */
struct ck_rst_region {
	uint64_t start, end;
	uint32_t prot;
	uint32_t flags;  /* CK_REG_* (ckrun/regions.h) */
	uint64_t file_off;
	uint32_t path_off; /* into the string area, 0 = none */
	uint32_t fill;     /* 1: ckrun writes saved contents into it */
	int32_t map_fd;    /* >= 0: map this (restored) descriptor, shared */
	uint32_t thp;      /* 1: huge pages while it is filled (MADV_HUGEPAGE, then MADV_NOHUGEPAGE unless CK_REG_ADV_HUGE) */
};

struct ck_rst_layout {
	uint32_t magic; /* CK_RST_MAGIC */
	uint32_t nregions;
	uint32_t strings_len;
	int32_t exe_fd; /* descriptor number of the executable for PR_SET_MM_MAP, or -1 */
	uint64_t restart_entry, restart_arg, restart_stack;
	uint64_t start_code, end_code, start_data, end_data, start_brk, brk, start_stack;
	uint64_t arg_start, arg_end, env_start, env_end;
	uint64_t auxv[64];
	uint32_t auxv_size;
	uint32_t nfds; /* descriptors ckrun sends with CK_MSG_RST_FDS */
	uint64_t vdso_start, vdso_end, vvar_start, vvar_end, vclock_start, vclock_end; /* saved layout; 0 if none */
	/* vdso_mode 0: move the kernel's specials to the saved addresses.
	 * 1: another vDSO: place the kernel's specials at new_special_base
	 * (keeping their relative layout), restore the old vDSO's bytes as a
	 * region and write a jump at each tramp[].old_addr to new_addr. */
	uint32_t vdso_mode, ntramp;
	uint64_t new_special_base;
	uint32_t nshared; /* descriptors at shared_fd.. to close after mapping */
	int32_t shared_fd; /* where they are: a range no descriptor of the job's holds (0: CK_RST_SHARED_FD) */
	struct {
		uint64_t old_addr, new_addr;
	} tramp[CK_RST_MAX_TRAMP];
	/* then: struct ck_rst_region[nregions], then strings */
};
#define CK_RST_MAGIC 0x54535243u /* "CRST" */

/* Where the static restorer is linked: far from where the kernel places
 * programs, heaps, mmaps and stacks. */
#define CK_RST_BASE 0x200000000000ull
#define CK_RST_SCRATCH 0x200040000000ull /* its working buffer */

#endif
