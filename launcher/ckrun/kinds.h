/* ckrun's kinds of state, each in one file holding both what a round
 * records and what a restore re-makes:
 *
 *   memsrc.c    where saved bytes come from and go to: the process's
 *               memory (pagemap filtering, the write-protect reader), a
 *               descriptor's contents, a restored process or file
 *   memory.c    memory regions: maps -> regions, passes, advice, saving;
 *               at restore the restorer's layout and the fill
 *   shm.c       shared memory (MAP_SHARED anonymous, /dev/shm, deleted
 *               and memfd-backed mappings); shm_sysv.c: System V;
 *               mq_posix.c: POSIX message queues
 *   files.c     regular, device, deleted files and memfds
 *   pipes.c     pipes and FIFOs (unread bytes drained and refilled)
 *   evfds.c     eventfd, timerfd, signalfd, epoll, inotify (recorded by libckpt)
 *   stdio.c     ckrun's own stdio in the job
 *   pty.c       pseudo-terminal pairs the job made
 *   proctree.c  the process tree: sessions, groups, zombies
 *   fdkinds.c   the table of descriptor kinds and the per-process plan
 *               of descriptors at restore
 *   rstobj.c    objects a restore shares between processes
 *
 * round.c and restore.c call them in their sequence of phases. A new kind
 * of descriptor is one file and one entry in fdkinds.c's table. */
#ifndef CK_CKRUN_KINDS_H
#define CK_CKRUN_KINDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckrun/proto.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/round.h"
#include "launcher/image/chunkio.h"

/* ---- memsrc.c ---- */

/* A source of bytes for the chunk writer. */
struct ck_src {
	pid_t pid;
	uint64_t base;
	int pagemap_fd; /* >= 0: skip pages that are not present (private anonymous) */
	int file_fd;    /* >= 0: read a descriptor's contents instead of memory */
	unsigned stop;
	struct ck_wp_proc *wp; /* a write-protect snapshot's memory */
	int live;              /* the running process of a write-protect snapshot */
	int count;             /* count the pages holding data into data_pages */
	uint64_t data_pages;   /* added to by the writer's threads at once */
};
/* ck_read_fn over a struct ck_src; answers probes (CK_WADD_PROBE). */
int ck_src_read(void *arg, uint64_t off, void *buf, size_t len);
/* Whether a page of [start, end) is present or swapped out, by the page
 * map open at fd: 1, 0, or -1 when it cannot be read. PAGEMAP_SCAN stops
 * at the first; older kernels' pagemap is read 4096 entries at a time. */
int ck_pagemap_any(int fd, uint64_t start, uint64_t end);

/* A target of verified bytes from the chunk reader. */
struct ck_sink {
	pid_t pid;
	uint64_t base;
	int fd;     /* >= 0: write to a file instead */
	int sparse; /* fresh anonymous memory or a new file: zero pages are left untouched (holes) */
};
/* ck_write_fn over a struct ck_sink. */
int ck_sink_write(void *arg, uint64_t off, const void *buf, size_t len);

/* ---- restore: shared objects and the descriptor plan (rstobj.c) ---- */

/* Descriptors made in ckrun for one process, and their numbers there. */
struct ck_fdplan {
	int *fds;    /* prepared objects, in ckrun */
	int32_t *targets;
	uint32_t n;
};
void ck_fdplan_free(struct ck_fdplan *pl);

/* Objects that several processes share: one pipe per saved pipe, one file
 * per deleted file or memfd, one anchor per FIFO, one memfd per shared
 * memory object. Keyed by the saved (dev, ino). */
struct ck_obj {
	uint32_t kind;
	uint64_t dev, ino;
	int fd[2]; /* pipe: read, write; others: fd[0] */
	uint64_t size;
};
struct ck_objs {
	struct ck_obj *v;
	size_t n;
	struct ck_procdesc **pds; /* every process's descriptor, to find saved pipe bytes */
	size_t npds;
	struct ck_agent_states *plugins; /* the plugins' agent halves (sockets) */
	int pipes_settled; /* ck_pipes_drop_unheld ran: descriptors in flight are made */
	struct ckrun *c;   /* the restoring ckrun (POSIX queues open in the job's IPC namespace) */
};
#define CK_OBJ_SHM 0x100 /* shared memory without a descriptor of the job's */
#define CK_OBJ_DESC 0x101 /* an open file description several processes held: dev = its key */
struct ck_obj *ck_obj_find(struct ck_objs *o, uint32_t kind, uint64_t dev, uint64_t ino);
/* The file behind shared memory or a deleted/memfd descriptor, whichever
 * made it first: one file for every mapping and descriptor of it. */
struct ck_obj *ck_obj_file(struct ck_objs *o, uint64_t dev, uint64_t ino);
struct ck_obj *ck_obj_add(struct ck_objs *o, uint32_t kind, uint64_t dev, uint64_t ino);
void ck_objs_free(struct ck_objs *o);
/* A read-write descriptor of the same file (mappings need one). */
int ck_rdwr_again(int fd);

/* ---- fdkinds.c: the table of descriptor kinds ---- */

struct ck_fd_ops {
	const char *name;
	/* Round, every process parked: record what crosses processes (a
	 * pipe's unread bytes). jp: the process holding f. */
	int (*record)(struct ck_round *rc, struct ck_writer *w, const struct ck_jproc *jp, struct ck_pd_fd *f);
	/* Round, after the cut: the descriptor's own contents into the
	 * writer (deleted files, memfds), read through snap's /proc. */
	int (*save_data)(struct ck_writer *w, pid_t snap, struct ck_pd_fd *f, unsigned flags);
	/* Restore, once, before any process exists (NULL: nothing). */
	int (*prepare)(struct ck_reader *rd, struct ck_objs *o);
	/* Restore: a new close-on-exec descriptor for f in *fd. Returns 0
	 * (with *fd < 0 after a failed system call: errno says why) or a
	 * negative errno with the message set. NULL: made otherwise (a
	 * duplicate, a plugin's descriptor of libckpt). */
	int (*remake)(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
};
/* The operations of a kind; NULL for a kind ckrun does nothing with. */
const struct ck_fd_ops *ck_fd_ops_of(uint32_t kind);
/* Round: every kind's record, for every descriptor of every process. */
int ck_fds_record(struct ckrun *c, struct ck_round *rc, struct ck_writer *w);
/* Round: the contents of one process's descriptors. */
int ck_fds_save_data(struct ck_writer *w, pid_t snap, struct ck_procdesc *pd, unsigned flags);
/* Restore: every kind's prepare. */
int ck_fds_prepare_all(struct ck_reader *rd, struct ck_objs *o);
/* At the round: the descriptors a restore's ckrun and each restorer would
 * hold at once fit the hard RLIMIT_NOFILE (else -ENOTSUP, saying so);
 * WITH_SHM: the shared memory objects of this round's maps too (once each
 * process's are read: ck_shm_count_check) */
int ck_fds_restore_fits(const struct ckrun *c, int with_shm);
/* Restore: the descriptors of one process, made in ckrun (pl). */
/* A /proc file of a process of the job (/proc/PID/...): the restored
 * process opens it itself, where PID means what it meant. */
int ck_fd_is_proc_file(const struct ck_pd_fd *f);
int ck_fds_plan(struct ck_reader *rd, const struct ck_procdesc *pd, struct ck_fdplan *pl, struct ck_objs *objs);

/* ---- the kinds' operations (see their files) ---- */

/* stdio.c */
int ck_stdio_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
/* files.c */
int ck_files_save_data(struct ck_writer *w, pid_t snap, struct ck_pd_fd *f, unsigned flags);
int ck_file_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_dev_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_content_file_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
/* A deleted file or memfd made again with its saved contents; -errno. */
int ck_content_file_make(struct ck_reader *rd, const struct ck_pd_fd *f);
/* pipes.c */
int ck_pipe_record(struct ck_round *rc, struct ck_writer *w, const struct ck_jproc *jp, struct ck_pd_fd *f);
/* Restore: the ends of pipes no process holds, closed before any runs. */
void ck_pipes_drop_unheld(struct ck_objs *o);
int ck_pipe_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_fifo_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
/* evfds.c */
int ck_eventfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_timerfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_signalfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
/* What the restored process opens itself, inside the job's pid
 * namespace: /proc files, pidfds (libckpt/fdstate.c). */
int ck_fd_reopened_by_process(const struct ck_pd_fd *f);
int ck_epoll_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_fd_removed_dir(const struct ck_pd_fd *f); /* files.c: "PATH (deleted)", a directory */
extern pid_t ck_files_ns_pid; /* files.c: a process in the job's mount namespace (set by ns.c) */
int ck_inotify_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_inotify_check(struct ckrun *c); /* at the round: one holder of each instance made it */
int ck_epoll_check(struct ckrun *c); /* at the round: each registration has a holder that can add it */
/* pty.c: pseudo-terminal pairs of the job (round: every process parked;
 * refuses unread bytes or a master whose slave the job does not hold) */
int ck_ptys_record(struct ckrun *c, struct ck_writer *w);
int ck_pty_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_ptys_prepare(struct ck_reader *rd, struct ck_objs *o);
/* mq_posix.c: a descriptor of a POSIX message queue, opened again by name
 * inside the job's IPC namespace (the queues are made by then) */
int ck_mqueue_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
/* the queue notifications the round kept (CK_PD_FD_MQ_NOTIFY), into the
 * restored process's own descriptor, which its restart reads */
int ck_mqueue_notify_give(pid_t pid, const struct ck_proc *p, const struct ck_procdesc *pd);
/* Restore: the job process jpid led the session of a pair's slave: 1 with
 * the new slave in *fd (ckrun's, not to be closed) and the foreground
 * group in *fg (0: none), 0 if it led none, or -errno. */
int ck_pty_ctty(struct ck_objs *o, int32_t jpid, int *fd, int32_t *fg);
/* fdkinds.c: a descriptor of a kind an agent plugin owns (sockets) */
int ck_plugin_fd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd);
int ck_plugin_fds_prepare(struct ck_reader *rd, struct ck_objs *o);
/* Restore, every process made, none given its descriptors: the plugins'
 * made step (struct ck_agent_plugin). */
struct ck_agent_procs;
int ck_plugin_fds_made(struct ck_reader *rd, struct ck_objs *o, const struct ck_agent_procs *procs);

/* ---- memory.c ---- */

/* Adds a "left out" line to the manifest (ckpt inspect). */
int ck_skip_add(struct ck_manifest *m, int pid, const char *what, const char *why);
/* Memory regions of the snapshot into the writer, those of one pass (0:
 * what the snapshot does not freeze, read before RELEASE; 1: the rest). */
int ck_mem_save_regions(struct ck_round *rc, struct ck_writer *w, struct ck_jproc *jp, struct ck_manifest *m,
			unsigned flags, int pass);
/* The regions' madvise() advice; -EXDEV for wipe-on-fork memory under a fork. */
int ck_mem_advice(const struct ck_jproc *jp);
/* After a write-protect snapshot: mappings read live are unchanged, else -ESTALE. */
int ck_mem_wp_verify(const struct ck_jproc *jp);
/* Restore: the layout the restorer maps (shmfill[i] = 1: region i is
 * filled through its shared memory object). */
int ck_mem_layout(const struct ck_proc *p, const struct ck_procdesc *pd, struct ck_fdplan *pl, struct ck_objs *objs,
		  uint8_t *shmfill, void **out, size_t *len);
/* Restore: the saved vDSO's bytes and the plan for the kernel's one. */
int ck_mem_vdso(struct ck_reader *rd, const struct ck_proc *p, void *layout, uint32_t *vdso_mode);
/* Restore: the regions' saved bytes into the restored process. */
int ck_mem_fill(struct ck_reader *rd, const struct ck_jproc *jp, const struct ck_proc *p, const uint8_t *shmfill,
		uint32_t vdso_mode);

/* ---- filepages.c ---- */

/* Round, pass 0: private read-only file mappings cut into runs of the
 * file's own pages (CK_REG_FILEPAGES, not saved) and of the job's (saved);
 * the files' identities into m->files. */
int ck_fp_split(struct ck_manifest *m, const struct ck_jproc *jp);
/* After the cut: the files' content digests, taken from prev (the previous
 * manifest) for the same file, else (unless reuse_only) read until *cancel
 * is set (*read_bytes: how much). 0 or -ENOMEM. */
int ck_fp_digests(struct ck_manifest *m, const struct ck_manifest *prev, int reuse_only, const int *cancel,
		  uint64_t *read_bytes);
/* Restore, before any process is made: every file whose pages a region
 * maps is the one saved; else -ENXIO (-EBADMSG: not described) and a line. */
int ck_fp_check(const struct ck_manifest *m);

/* ---- shm.c ---- */

/* Round: a shared range saved already this round (NULL: not yet). */
struct ck_round_shared *ck_shm_saved_find(struct ck_round *rc, const struct ck_region *rg);
int ck_shm_saved_add(struct ck_round *rc, const struct ck_region *rg);
/* Restore: a region whose bytes live in a shared memory object. */
int ck_shm_region(const struct ck_region *r);
/* Round: the shared memory objects P maps and holds no descriptor of fit
 * a restorer's table (their count in *NSHM), or -ENOTSUP with a line. */
int ck_shm_count_check(const struct ck_proc *p, const struct ck_procdesc *pd, int32_t jpid, uint32_t *nshm);
/* Restore, before any process exists: the objects, and /dev/shm files. */
int ck_shm_make_objects(struct ck_reader *rd, const struct ck_manifest *m, struct ck_objs *o);
int ck_shm_prepare_files(const struct ck_manifest *m);
/* The name a /dev/shm file still has when the process's mapping names a
 * deleted one (glibc's sem_open maps a temporary file, links it under the
 * semaphore's name and removes the temporary name): "/dev/shm/NAME"
 * (malloc'd), or NULL when the inode has no name there. *cache holds the
 * directory's listing between calls (ck_shm_names_free). */
struct ck_shm_names;
char *ck_shm_live_name(struct ck_shm_names **cache, uint64_t ino);
void ck_shm_names_free(struct ck_shm_names *cache);
/* Restore: which descriptor maps region r (rg->map_fd), adding the
 * object's descriptor to the plan; 0 or -errno with the message set. */
int ck_shm_layout_map(const struct ck_proc *p, const struct ck_procdesc *pd, const struct ck_region *r,
		      struct ck_rst_layout *l, struct ck_rst_region *rg, struct ck_fdplan *pl, struct ck_objs *objs,
		      uint8_t *shmfill);
/* Restore: the plan's placeholders -> ckrun's duplicates of the objects. */
int ck_shm_layout_resolve(struct ck_rst_layout *l, struct ck_fdplan *pl, struct ck_objs *objs);

/* ---- proctree.c ---- */

/* Round: the job's tree into m (every attached process and zombie). */
int ck_tree_record(struct ckrun *c, struct ck_manifest *m, pid_t *zombies, size_t nz);
/* Restore: the tree to re-create: saved processes, zombies, and helpers
 * that stand in for session leaders that had exited. */
struct ck_tree_node {
	int32_t pid, ppid, pgid, sid;
	int creator; /* node index, -1: init */
	int helper, zombie, proc; /* proc: index in m->procs, -1 if none */
	int early; /* made before its creator's setsid (CK_RST_CHILD_EARLY) */
	int maker; /* CK_TASK_MAKER: ends only once the connections are made */
	int32_t status;
	int attached, treedone;
};
int ck_tree_plan(const struct ck_manifest *m, struct ck_tree_node **out, size_t *nout);
/* o: the restore's objects (a session leader's controlling terminal) */
int ck_tree_build(struct ckrun *c, struct ck_tree_node *v, size_t n, struct ck_objs *o);
int ck_tree_finish(struct ckrun *c, struct ck_tree_node *v, size_t n, struct ck_objs *o);
/* The round, once the plugins have read the sockets: a process of the
 * job that had exited and that SO_PEERCRED of a UNIX socket the job holds
 * names (CK_PD_FD_PEER_GONE) joins the tree as a maker (CK_TASK_MAKER),
 * or marks the zombie it is; refused in one line where its number is a
 * session's or group's the restore needs. */
int ck_tree_makers(struct ckrun *c, struct ck_manifest *m);
/* The restore, once the sockets are made: the makers end (a helper one
 * reaped by the process that made it). */
int ck_tree_end_makers(struct ckrun *c, struct ck_tree_node *v, size_t n);
struct ck_jproc *ck_tree_jproc(struct ckrun *c, int32_t jpid);

/* ---- mappath.c: a restore at another site (--map-path) ---- */

struct ck_pathmap;
/* Every path of the checkpoint under the rules (descriptors marked
 * CK_PD_FD_MAPPED), and the paths the restore needs checked: -ENXIO with
 * one line naming the first one missing (and the --map-path that would
 * find it), else 0 or -errno. */
int ck_mappath_restore(const struct ck_pathmap *pm, struct ck_manifest *m, struct ck_procdesc **pds);
/* 1 when the last ck_mappath_restore failed (-ESTALE) on a regular file
 * the job had open for writing, gone from a directory still here */
int ck_mappath_written_gone(void);
/* A filled process: its (mapped) working directory and program into
 * libckpt's descriptor in its memory, where its restart code reads them. */
int ck_mappath_write_proc(pid_t pid, const struct ck_proc *p, const struct ck_procdesc *pd);

/* restore.c: the next message from a restorer must be `type` */
int ck_rst_expect(int fd, uint32_t type, struct ck_msg *m);

/* rst_cpu.c: a restored process's RESTARTED noted; each parent told its
 * children's CPU use before any process goes on */
void ck_rst_cpu_note(struct ck_jproc *p, const struct ck_msg *m);
int ck_rst_cpu_send(struct ckrun *c, const struct ck_manifest *m);
/* rst_sock.c: struct ck_agent_procs's unix_pair, unix_listen and unix_connect (arg: the ckrun) */
struct sockaddr_un;
int ck_rst_unix_pair(void *arg, int32_t listener, uint64_t lids, int32_t connector, uint64_t cids, int type, int sv[2],
		     int *lost);
int ck_rst_unix_listen(void *arg, int32_t jpid, uint64_t ids, int fd, int backlog, int *lost);
int ck_rst_unix_connect(void *arg, int32_t jpid, uint64_t ids, int type, const struct sockaddr_un *a, uint32_t al,
			int *lost);

#endif
